`default_nettype none

// ws_link: the board's host-link engine (docs/link.md "Board side: the link engine"; the
// top's structure, loopback and the integration decisions are docs/link-engine.md).
//
// It joins the two halves that were proven alone, ws_link_rx (host -> board,
// docs/link-engine-rx.md) and ws_link_tx (board -> host, docs/link-engine-tx.md), over one
// DMA RAM (ws_link_dma_ram), with the RX -> TX contract of docs/link.md "Engine internals"
// wired straight through: ACK requests (rx_expected, rx_credit, ack_req, ack_req_nak,
// ack_sent) and the peer's acks (peer_ack_*).
//
// DMA RAM ports: RX writes never stall and TX reads never stall (neither half can wait), so
// each half owns one RAM port and the external port (firmware through the CSR block,
// MemoryX) takes a cycle in which its port is idle: a write when RX does not write, a read
// when TX does not read. Read data comes back one cycle after the handshake (ext_rvalid).
//
// Loopback (cfg_loopback bit 0 = channel 2, bit 1 = channel 3, bit 2 = channel 4 into
// channel 6, the RX and TX slots 2): the channel's TX window is its RX window. The TX half takes the RX window's enable and geometry, its producer pointer
// is the RX committed pointer (win_ready = rx_committed), and the RX consumer pointer is the
// TX acknowledged pointer (released = acked_bytes), so bytes the host sends come back from
// the same RAM without a copy. RX never writes past released + len = acked_bytes + len, which
// is exactly the TX half's "the producer may write below acked_bytes + win_len". Loopback is
// static configuration: change it only while both windows of the channel are off. Without
// loopback the TX window, its ready pointer and the RX released pointer are ports.
//
// HELLO without RESUME: ch_reset pulses both halves on every bulk channel; the TX senders
// start at seq 0 and byte 0 with the credit the host's HELLO granted (ch_init_credit), the RX
// receivers at seq 0, byte 0, the open window's credit counted as advertised (the HELLO reply
// carries it). In the ch_reset cycle the RX released pointer is forced to 0, so the RX half
// never sees the old stream's released pointer against the new stream's committed one (in
// loopback, acked_bytes falls to 0 only at the edge that ends the ch_reset cycle).
//
// Bus packing as in the halves: RX slot j = channel - 2 (0 = 2, 1 = 3, 2 = 4), TX slot k
// (0 = channel 2, 1 = 3, 2 = 6), a 32-bit value of a slot at [32s +: 32], a flag at bit s,
// a per-channel counter of channel c at [32c +: 32]. The halves' ports that share a name
// carry an rx_ / tx_ prefix here (win_*, cnt_frames, cnt_bytes, win_active).
module ws_link #(
    parameter FW_RX_DEPTH = 512,        // firmware RX FIFO words; a power of two >= 16 (262 hold a 1 KiB frame)
    parameter FW_TX_WORDS = 512,        // firmware TX FIFO words; a power of two >= 512
    parameter HIST_WORDS = 1024,        // RX history ring words; >= (largest frame + 64) / 4 for an exact rescan
    parameter DMA_BYTES = 65536,        // DMA RAM bytes; a power of two 256 .. 2^30
    parameter WINDOW = 16,              // go-back-N window in frames (TX slot table, RX ACK every WINDOW/2); a power of two 2..1024
    parameter ACK_DELAY = 256,          // RX: cycles from the first unacknowledged frame to its ACK request
    parameter REFRESH = 4 * ACK_DELAY   // RX: first credit-refresh interval in cycles
) (
    input  wire                         clk,
    input  wire                         rst,

    // PHY words; stream byte 0 is bits 7:0.
    input  wire                         s_phy_valid,    // host -> board
    output wire                         s_phy_ready,
    input  wire [31:0]                  s_phy_data,
    output wire                         m_phy_valid,    // board -> host
    input  wire                         m_phy_ready,
    output wire [31:0]                  m_phy_data,

    // Firmware RX FIFO: whole frames of channels 0, 1, 7 (six header words, padded payload).
    output wire                         fw_rx_valid,
    input  wire                         fw_rx_ready,
    output wire [31:0]                  fw_rx_data,
    output wire [$clog2(FW_RX_DEPTH+1)-1:0] fw_rx_level,

    // Firmware TX FIFO: header words 0..4, padded payload, then fw_tx_commit.
    input  wire                         fw_tx_valid,
    output wire                         fw_tx_ready,
    input  wire [31:0]                  fw_tx_data,
    input  wire                         fw_tx_commit,
    output wire [$clog2(FW_TX_WORDS+1)-1:0] fw_tx_free,

    // External DMA RAM port (word address): a write waits for a cycle without an RX DMA
    // write, a read for one without a TX DMA read; read data one cycle after the handshake.
    input  wire                         ext_valid,
    output wire                         ext_ready,
    input  wire                         ext_we,
    input  wire [$clog2(DMA_BYTES)-3:0] ext_addr,
    input  wire [31:0]                  ext_wdata,
    output wire                         ext_rvalid,
    output wire [31:0]                  ext_rdata,

    // Negotiated link parameters (HELLO) and static configuration.
    input  wire [16:0]                  cfg_max_payload,    // both halves: bulk length limit
    input  wire [15:0]                  cfg_window,         // TX: frames outstanding, clamped to 1..WINDOW
    input  wire [31:0]                  cfg_rto,            // TX: retransmission timeout in cycles, 0 = off
    input  wire [2:0]                   cfg_loopback,       // per slot: 2 -> 2, 3 -> 3, 4 -> 6

    // RX windows and consumers, per RX slot j (channels 2, 3, 4).
    input  wire [2:0]                   rx_win_en,
    input  wire [3*32-1:0]              rx_win_base,        // taken when rx_win_en rises
    input  wire [3*32-1:0]              rx_win_len,
    input  wire [3*32-1:0]              rx_released,        // consumer's released pointer (ignored in loopback)

    // TX windows and producers, per TX slot k (channels 2, 3, 6); ignored in loopback.
    input  wire [2:0]                   tx_win_en,
    input  wire [3*32-1:0]              tx_win_base,
    input  wire [3*32-1:0]              tx_win_len,
    input  wire [3*32-1:0]              tx_win_ready,       // producer: bytes before this may go

    // HELLO without RESUME: reset every bulk channel of both halves.
    input  wire                         ch_reset,
    input  wire [3*32-1:0]              ch_init_credit,     // per TX slot: the credit of the host's HELLO

    // Channel state (HELLO reply, CSR block).
    output wire [2:0]                   rx_win_active,
    output wire [3*32-1:0]              rx_expected,
    output wire [3*32-1:0]              rx_committed,
    output wire [3*32-1:0]              rx_credit,
    output wire [2:0]                   tx_win_active,
    output wire [3*32-1:0]              tx_acked_seq,
    output wire [3*32-1:0]              tx_send_seq,
    output wire [3*32-1:0]              tx_next_seq,        // HELLO tx_next
    output wire [3*32-1:0]              tx_sent_bytes,
    output wire [3*32-1:0]              tx_acked_bytes,
    output wire [3*32-1:0]              tx_credit,

    // RX frame decisions (ws_hdl::link::rx_ev), for interrupts.
    output wire                         ev_valid,
    output wire [2:0]                   ev_ch,
    output wire [3:0]                   ev_code,
    output wire                         ev_nak,

    // Counters of both halves (docs/link-engine-rx.md, docs/link-engine-tx.md "Counters").
    input  wire                         cnt_clear,
    output wire [8*32-1:0]              rx_cnt_frames,
    output wire [8*32-1:0]              rx_cnt_bytes,
    output wire [8*32-1:0]              rx_cnt_pcrc_err,
    output wire [8*32-1:0]              rx_cnt_seq_err,
    output wire [8*32-1:0]              rx_cnt_win_viol,
    output wire [8*32-1:0]              rx_cnt_dropped,
    output wire [31:0]                  rx_cnt_skipped,
    output wire [31:0]                  rx_cnt_hcrc_err,
    output wire [31:0]                  rx_cnt_bad_version,
    output wire [31:0]                  rx_cnt_bad_header,
    output wire [8*32-1:0]              tx_cnt_frames,
    output wire [8*32-1:0]              tx_cnt_bytes,
    output wire [3*32-1:0]              tx_cnt_retx,
    output wire [3*32-1:0]              tx_cnt_credit_stall,
    output wire [3*32-1:0]              tx_cnt_window_stall,
    output wire [3*32-1:0]              tx_cnt_timeouts,
    output wire [3*32-1:0]              tx_cnt_naks,
    output wire [3*32-1:0]              tx_cnt_win_refused,
    output wire [3*32-1:0]              tx_cnt_acks,
    output wire [3*32-1:0]              tx_cnt_ack_naks,
    output wire [31:0]                  tx_cnt_fw_dropped
);

    localparam DMA_AW = $clog2(DMA_BYTES) - 2;

    initial begin
        if (DMA_BYTES < 256 || DMA_BYTES > (1 << 30) || (DMA_BYTES & (DMA_BYTES - 1)) != 0)
            $error("ws_link: DMA_BYTES must be a power of two in 256 .. 2^30");
        if (WINDOW < 2 || WINDOW > 1024 || (WINDOW & (WINDOW - 1)) != 0)
            $error("ws_link: WINDOW must be a power of two, 2..1024");
    end

    // ------------------------------------------------------------------ RX -> TX contract

    wire [2:0]      ack_req;
    wire [2:0]      ack_req_nak;
    wire [2:0]      ack_sent;
    wire            peer_ack_valid;
    wire [2:0]      peer_ack_ch;
    wire [31:0]     peer_ack;
    wire [31:0]     peer_credit;
    wire            peer_nak;

    // ------------------------------------------------------------------ loopback

    wire [2:0]      loop = cfg_loopback;   // per slot: RX slot j feeds TX slot j (2 -> 2, 3 -> 3, 4 -> 6)
    wire [2:0]      tx_en_eff;
    wire [3*32-1:0] tx_base_eff;
    wire [3*32-1:0] tx_len_eff;
    wire [3*32-1:0] tx_ready_eff;
    wire [3*32-1:0] rx_released_eff;

    genvar s;
    generate
        for (s = 0; s < 3; s = s + 1) begin : g_loop
            assign tx_en_eff[s] = loop[s] ? rx_win_en[s] : tx_win_en[s];
            assign tx_base_eff[32*s +: 32] = loop[s] ? rx_win_base[32*s +: 32] : tx_win_base[32*s +: 32];
            assign tx_len_eff[32*s +: 32] = loop[s] ? rx_win_len[32*s +: 32] : tx_win_len[32*s +: 32];
            assign tx_ready_eff[32*s +: 32] = loop[s] ? rx_committed[32*s +: 32] : tx_win_ready[32*s +: 32];
            // Forced to the new stream's 0 in the ch_reset cycle (see the header).
            assign rx_released_eff[32*s +: 32] = ch_reset ? 32'd0 :
                                                 loop[s] ? tx_acked_bytes[32*s +: 32] : rx_released[32*s +: 32];
        end
    endgenerate

    // ------------------------------------------------------------------ DMA RAM

    wire                rx_dma_we;
    wire [DMA_AW-1:0]   rx_dma_waddr;
    wire [31:0]         rx_dma_wdata;
    wire                tx_dma_re;
    wire [DMA_AW-1:0]   tx_dma_raddr;
    wire [31:0]         ram_rdata;
    reg                 ext_rvalid_reg;

    wire ext_wr = ext_valid && ext_we && !rx_dma_we;
    wire ext_rd = ext_valid && !ext_we && !tx_dma_re;

    assign ext_ready = ext_we ? !rx_dma_we : !tx_dma_re;
    assign ext_rvalid = ext_rvalid_reg;
    assign ext_rdata = ram_rdata;

    always @(posedge clk) begin
        ext_rvalid_reg <= ext_rd;
        if (rst) ext_rvalid_reg <= 1'b0;
    end

    ws_link_dma_ram #(
        .DMA_BYTES(DMA_BYTES)
    ) ram_inst (
        .clk(clk),
        .we(rx_dma_we || ext_wr),
        .waddr(rx_dma_we ? rx_dma_waddr : ext_addr),
        .wdata(rx_dma_we ? rx_dma_wdata : ext_wdata),
        .re(tx_dma_re || ext_rd),
        .raddr(tx_dma_re ? tx_dma_raddr : ext_addr),
        .rdata(ram_rdata)
    );

    // ------------------------------------------------------------------ halves

    ws_link_rx #(
        .FW_DEPTH(FW_RX_DEPTH),
        .HIST_WORDS(HIST_WORDS),
        .DMA_BYTES(DMA_BYTES),
        .WINDOW(WINDOW),
        .ACK_DELAY(ACK_DELAY),
        .REFRESH(REFRESH)
    ) rx_inst (
        .clk(clk),
        .rst(rst),
        .s_phy_valid(s_phy_valid),
        .s_phy_ready(s_phy_ready),
        .s_phy_data(s_phy_data),
        .fw_rx_valid(fw_rx_valid),
        .fw_rx_ready(fw_rx_ready),
        .fw_rx_data(fw_rx_data),
        .fw_rx_level(fw_rx_level),
        .dma_we(rx_dma_we),
        .dma_waddr(rx_dma_waddr),
        .dma_wdata(rx_dma_wdata),
        .cfg_max_payload(cfg_max_payload),
        .win_en(rx_win_en),
        .win_base(rx_win_base),
        .win_len(rx_win_len),
        .released(rx_released_eff),
        .ch_reset({3{ch_reset}}),
        .win_active(rx_win_active),
        .rx_expected(rx_expected),
        .rx_credit(rx_credit),
        .rx_committed(rx_committed),
        .ack_req(ack_req),
        .ack_req_nak(ack_req_nak),
        .ack_sent(ack_sent),
        .peer_ack_valid(peer_ack_valid),
        .peer_ack_ch(peer_ack_ch),
        .peer_ack(peer_ack),
        .peer_credit(peer_credit),
        .peer_nak(peer_nak),
        .ev_valid(ev_valid),
        .ev_ch(ev_ch),
        .ev_code(ev_code),
        .ev_nak(ev_nak),
        .cnt_clear(cnt_clear),
        .cnt_frames(rx_cnt_frames),
        .cnt_bytes(rx_cnt_bytes),
        .cnt_pcrc_err(rx_cnt_pcrc_err),
        .cnt_seq_err(rx_cnt_seq_err),
        .cnt_win_viol(rx_cnt_win_viol),
        .cnt_dropped(rx_cnt_dropped),
        .cnt_skipped(rx_cnt_skipped),
        .cnt_hcrc_err(rx_cnt_hcrc_err),
        .cnt_bad_version(rx_cnt_bad_version),
        .cnt_bad_header(rx_cnt_bad_header)
    );

    ws_link_tx #(
        .WINDOW(WINDOW),
        .FW_FIFO_WORDS(FW_TX_WORDS),
        .DMA_AW(DMA_AW)
    ) tx_inst (
        .clk(clk),
        .rst(rst),
        .m_phy_valid(m_phy_valid),
        .m_phy_ready(m_phy_ready),
        .m_phy_data(m_phy_data),
        .fw_tx_valid(fw_tx_valid),
        .fw_tx_ready(fw_tx_ready),
        .fw_tx_data(fw_tx_data),
        .fw_tx_commit(fw_tx_commit),
        .fw_tx_free(fw_tx_free),
        .dma_re(tx_dma_re),
        .dma_raddr(tx_dma_raddr),
        .dma_rdata(ram_rdata),
        .win_en(tx_en_eff),
        .win_base(tx_base_eff),
        .win_len(tx_len_eff),
        .win_ready(tx_ready_eff),
        .cfg_max_payload(cfg_max_payload),
        .cfg_window(cfg_window),
        .cfg_rto(cfg_rto),
        .ch_reset({3{ch_reset}}),
        .ch_init_seq(96'd0),
        .ch_init_bytes(96'd0),
        .ch_init_credit(ch_init_credit),
        .peer_ack_valid(peer_ack_valid),
        .peer_ack_ch(peer_ack_ch),
        .peer_ack(peer_ack),
        .peer_credit(peer_credit),
        .peer_nak(peer_nak),
        .rx_expected(rx_expected),
        .rx_credit(rx_credit),
        .ack_req(ack_req),
        .ack_req_nak(ack_req_nak),
        .ack_sent(ack_sent),
        .win_active(tx_win_active),
        .tx_acked_seq(tx_acked_seq),
        .tx_send_seq(tx_send_seq),
        .tx_next_seq(tx_next_seq),
        .tx_sent_bytes(tx_sent_bytes),
        .acked_bytes(tx_acked_bytes),
        .tx_credit(tx_credit),
        .cnt_clear(cnt_clear),
        .cnt_frames(tx_cnt_frames),
        .cnt_bytes(tx_cnt_bytes),
        .cnt_retx(tx_cnt_retx),
        .cnt_credit_stall(tx_cnt_credit_stall),
        .cnt_window_stall(tx_cnt_window_stall),
        .cnt_timeouts(tx_cnt_timeouts),
        .cnt_naks(tx_cnt_naks),
        .cnt_win_refused(tx_cnt_win_refused),
        .cnt_acks(tx_cnt_acks),
        .cnt_ack_naks(tx_cnt_ack_naks),
        .cnt_fw_dropped(tx_cnt_fw_dropped)
    );

endmodule

`default_nettype wire
