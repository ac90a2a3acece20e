`default_nettype none

// ws_link_block: the link engine (ws_link, docs/link-engine.md) as the SoC's register block in
// slot 8 (hdl/regmap/link.toml, generated ws_link_csr). It holds no state of its own beyond the
// registers: every window, pointer and negotiated parameter is a CSR field, the firmware FIFOs
// are popped and pushed through FW_RXDATA / FW_TXDATA, and the counters of both halves are
// read one at a time through CNT_SEL / CNT_VAL (index map below and in docs/link-engine.md
// "Counter index").
//
// Counter index (CNT_SEL.index): per-channel counters take 8 consecutive indices (channel c
// at base + c), per-TX-slot counters 4 (slot k at base + k, k = 0, 1, 2 for channels 2, 3, 6):
//   0x00 rx frames      0x08 rx bytes        0x10 rx pcrc_err   0x18 rx seq_err
//   0x20 rx win_viol    0x28 rx dropped      0x30 rx skipped    0x31 rx hcrc_err
//   0x32 rx bad_version 0x33 rx bad_header   0x40 tx frames     0x48 tx bytes
//   0x50 tx retx        0x54 tx credit_stall 0x58 tx window_stall 0x5c tx timeouts
//   0x60 tx naks        0x64 tx win_refused  0x68 tx acks       0x6c tx ack_naks
//   0x70 tx fw_dropped
// Any other index reads 0.
//
// The external DMA port of the engine is passed through for the data-plane blocks (MemoryX);
// the firmware never moves bulk payload, so it has no path to the DMA RAM.
//
// TX slot 2 (channel 6, trace) can take its ready position from a hardware producer instead
// of TX_READY2: while `tx2_hw_en` is high the engine sends the bytes before `tx2_hw_ready`,
// the head of whole records the trace unit (ws_trace) has written into that window, and
// `tx2_acked` gives the producer the host's acknowledged position back, so the trace drains
// to the host without the firmware (docs/trace.md). TX_READY2 still reads what was written.
module ws_link_block #(
    parameter FW_RX_DEPTH = 512,
    parameter FW_TX_WORDS = 512,
    parameter HIST_WORDS = 2048,
    parameter DMA_BYTES = 65536,
    parameter WINDOW = 16,
    parameter ACK_DELAY = 256
) (
    input  wire                         clk,
    input  wire                         rst,

    input  wire                         reg_req,
    input  wire                         reg_we,
    input  wire [11:0]                  reg_addr,
    input  wire [31:0]                  reg_wdata,
    input  wire [3:0]                   reg_be,
    output wire [31:0]                  reg_rdata,

    input  wire                         s_phy_valid,
    output wire                         s_phy_ready,
    input  wire [31:0]                  s_phy_data,
    output wire                         m_phy_valid,
    input  wire                         m_phy_ready,
    output wire [31:0]                  m_phy_data,

    input  wire                         ext_valid,
    output wire                         ext_ready,
    input  wire                         ext_we,
    input  wire [$clog2(DMA_BYTES)-3:0] ext_addr,
    input  wire [31:0]                  ext_wdata,
    output wire                         ext_rvalid,
    output wire [31:0]                  ext_rdata,

    // Channel 6's hardware producer (above).
    input  wire                         tx2_hw_en,
    input  wire [31:0]                  tx2_hw_ready,
    output wire [31:0]                  tx2_acked,

    output wire                         irq
);

    // ------------------------------------------------------------------ registers

    wire [2:0]  ctrl_loopback;
    wire        ctrl_irq_rx;
    wire [16:0] max_payload;
    wire [15:0] window_frames;
    wire [31:0] rto_cycles;
    wire        ch_reset_go, ch_reset_we;
    wire        fw_rxdata_re;
    wire [31:0] fw_txdata_word;
    wire        fw_txdata_we;
    wire        fw_txcommit_go, fw_txcommit_we;
    wire        cnt_clear_go, cnt_clear_we;
    wire [7:0]  cnt_sel;
    reg  [31:0] cnt_val;
    wire        ev_bad_frame, ev_fw_overflow;

    wire [3*32-1:0] rx_win_base, rx_win_len, rx_released;
    wire [2:0]      rx_win_en;
    wire [3*32-1:0] tx_win_base, tx_win_len, tx_win_ready, ch_init_credit;
    wire [2:0]      tx_win_en;
    // The ready positions the engine uses: the CSRs', or slot 2's hardware producer's.
    wire [3*32-1:0] tx_use_ready = {tx2_hw_en ? tx2_hw_ready : tx_win_ready[2*32 +: 32],
                                    tx_win_ready[0 +: 2*32]};

    wire [2:0]      rx_win_active, tx_win_active;
    wire [3*32-1:0] rx_expected, rx_committed, rx_credit;
    wire [3*32-1:0] tx_acked_seq, tx_send_seq, tx_next_seq, tx_sent_bytes, tx_acked_bytes, tx_credit;

    wire            fw_rx_valid;
    wire [31:0]     fw_rx_data;
    wire [$clog2(FW_RX_DEPTH+1)-1:0] fw_rx_level;
    wire [$clog2(FW_TX_WORDS+1)-1:0] fw_tx_free;

    wire            ev_valid;
    wire [2:0]      ev_ch;
    wire [3:0]      ev_code;
    wire            ev_nak;

    // ws_hdl::link::rx_ev codes: a refused frame (gap, credit, window, pcrc, hcrc, version,
    // header) and a firmware frame dropped for want of FIFO space.
    wire ev_refused = ev_valid && (ev_code == 4'd4 || ev_code == 4'd5 || ev_code == 4'd6
                                   || (ev_code >= 4'd9 && ev_code <= 4'd12));
    wire ev_fifo_full = ev_valid && ev_code == 4'd1;

    /* verilator lint_off UNUSEDSIGNAL */
    wire [3:0] unused_we;       // rw registers the engine reads as levels
    wire [5:0] unused_win_we;
    wire [5:0] unused_ptr_we;
    wire [5:0] unused_base_we;
    wire [2:0] unused_credit_we;
    wire [8:0] unused_s;        // write strobes of level registers; fw_tx_ready (firmware checks tx_free)
    /* verilator lint_on UNUSEDSIGNAL */

    ws_link_csr csr_inst (
        .clk(clk),
        .rst(rst),
        .reg_req(reg_req),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata),
        .ctrl_loopback(ctrl_loopback),
        .ctrl_irq_rx(ctrl_irq_rx),
        .ctrl_we(unused_we[0]),
        .max_payload_bytes(max_payload),
        .max_payload_we(unused_we[1]),
        .window_frames(window_frames),
        .window_we(unused_we[2]),
        .rto_cycles(rto_cycles),
        .rto_we(unused_we[3]),
        .ch_reset_go(ch_reset_go),
        .ch_reset_we(ch_reset_we),
        .fw_status_rx_level_i(16'(fw_rx_level)),
        .fw_status_tx_free_i(16'(fw_tx_free)),
        .fw_rxdata_word_i(fw_rx_data),
        .fw_rxdata_re(fw_rxdata_re),
        .fw_txdata_word(fw_txdata_word),
        .fw_txdata_we(fw_txdata_we),
        .fw_txcommit_go(fw_txcommit_go),
        .fw_txcommit_we(fw_txcommit_we),
        .cnt_clear_go(cnt_clear_go),
        .cnt_clear_we(cnt_clear_we),
        .cnt_sel_index(cnt_sel),
        .cnt_sel_we(unused_s[0]),
        .cnt_val_value_i(cnt_val),
        .params_dma_log2_i(8'($clog2(DMA_BYTES))),
        .params_window_log2_i(8'($clog2(WINDOW))),
        .params_fw_rx_log2_i(8'($clog2(FW_RX_DEPTH))),
        .params_fw_tx_log2_i(8'($clog2(FW_TX_WORDS))),
        .events_bad_frame_set(ev_refused),
        .events_bad_frame(ev_bad_frame),
        .events_fw_overflow_set(ev_fifo_full),
        .events_fw_overflow(ev_fw_overflow),
        .events_we(unused_s[1]),
        .rx_base0_addr(rx_win_base[0*32 +: 32]), .rx_base0_we(unused_base_we[0]),
        .rx_base1_addr(rx_win_base[1*32 +: 32]), .rx_base1_we(unused_base_we[1]),
        .rx_base2_addr(rx_win_base[2*32 +: 32]), .rx_base2_we(unused_base_we[2]),
        .rx_len0_bytes(rx_win_len[0*32 +: 32]), .rx_len0_we(unused_win_we[0]),
        .rx_len1_bytes(rx_win_len[1*32 +: 32]), .rx_len1_we(unused_win_we[1]),
        .rx_len2_bytes(rx_win_len[2*32 +: 32]), .rx_len2_we(unused_win_we[2]),
        .rx_en0_en(rx_win_en[0]), .rx_en0_active_i(rx_win_active[0]), .rx_en0_we(unused_s[2]),
        .rx_en1_en(rx_win_en[1]), .rx_en1_active_i(rx_win_active[1]), .rx_en1_we(unused_s[3]),
        .rx_en2_en(rx_win_en[2]), .rx_en2_active_i(rx_win_active[2]), .rx_en2_we(unused_s[4]),
        .rx_released0_bytes(rx_released[0*32 +: 32]), .rx_released0_we(unused_ptr_we[0]),
        .rx_released1_bytes(rx_released[1*32 +: 32]), .rx_released1_we(unused_ptr_we[1]),
        .rx_released2_bytes(rx_released[2*32 +: 32]), .rx_released2_we(unused_ptr_we[2]),
        .rx_expected0_seq_i(rx_expected[0*32 +: 32]),
        .rx_expected1_seq_i(rx_expected[1*32 +: 32]),
        .rx_expected2_seq_i(rx_expected[2*32 +: 32]),
        .rx_committed0_bytes_i(rx_committed[0*32 +: 32]),
        .rx_committed1_bytes_i(rx_committed[1*32 +: 32]),
        .rx_committed2_bytes_i(rx_committed[2*32 +: 32]),
        .rx_credit0_bytes_i(rx_credit[0*32 +: 32]),
        .rx_credit1_bytes_i(rx_credit[1*32 +: 32]),
        .rx_credit2_bytes_i(rx_credit[2*32 +: 32]),
        .tx_base0_addr(tx_win_base[0*32 +: 32]), .tx_base0_we(unused_base_we[3]),
        .tx_base1_addr(tx_win_base[1*32 +: 32]), .tx_base1_we(unused_base_we[4]),
        .tx_base2_addr(tx_win_base[2*32 +: 32]), .tx_base2_we(unused_base_we[5]),
        .tx_len0_bytes(tx_win_len[0*32 +: 32]), .tx_len0_we(unused_win_we[3]),
        .tx_len1_bytes(tx_win_len[1*32 +: 32]), .tx_len1_we(unused_win_we[4]),
        .tx_len2_bytes(tx_win_len[2*32 +: 32]), .tx_len2_we(unused_win_we[5]),
        .tx_en0_en(tx_win_en[0]), .tx_en0_active_i(tx_win_active[0]), .tx_en0_we(unused_s[5]),
        .tx_en1_en(tx_win_en[1]), .tx_en1_active_i(tx_win_active[1]), .tx_en1_we(unused_s[6]),
        .tx_en2_en(tx_win_en[2]), .tx_en2_active_i(tx_win_active[2]), .tx_en2_we(unused_s[7]),
        .tx_ready0_bytes(tx_win_ready[0*32 +: 32]), .tx_ready0_we(unused_ptr_we[3]),
        .tx_ready1_bytes(tx_win_ready[1*32 +: 32]), .tx_ready1_we(unused_ptr_we[4]),
        .tx_ready2_bytes(tx_win_ready[2*32 +: 32]), .tx_ready2_we(unused_ptr_we[5]),
        .tx_init_credit0_bytes(ch_init_credit[0*32 +: 32]), .tx_init_credit0_we(unused_credit_we[0]),
        .tx_init_credit1_bytes(ch_init_credit[1*32 +: 32]), .tx_init_credit1_we(unused_credit_we[1]),
        .tx_init_credit2_bytes(ch_init_credit[2*32 +: 32]), .tx_init_credit2_we(unused_credit_we[2]),
        .tx_acked_seq0_seq_i(tx_acked_seq[0*32 +: 32]),
        .tx_acked_seq1_seq_i(tx_acked_seq[1*32 +: 32]),
        .tx_acked_seq2_seq_i(tx_acked_seq[2*32 +: 32]),
        .tx_next_seq0_seq_i(tx_next_seq[0*32 +: 32]),
        .tx_next_seq1_seq_i(tx_next_seq[1*32 +: 32]),
        .tx_next_seq2_seq_i(tx_next_seq[2*32 +: 32]),
        .tx_sent_bytes0_bytes_i(tx_sent_bytes[0*32 +: 32]),
        .tx_sent_bytes1_bytes_i(tx_sent_bytes[1*32 +: 32]),
        .tx_sent_bytes2_bytes_i(tx_sent_bytes[2*32 +: 32]),
        .tx_acked_bytes0_bytes_i(tx_acked_bytes[0*32 +: 32]),
        .tx_acked_bytes1_bytes_i(tx_acked_bytes[1*32 +: 32]),
        .tx_acked_bytes2_bytes_i(tx_acked_bytes[2*32 +: 32]),
        .tx_credit0_bytes_i(tx_credit[0*32 +: 32]),
        .tx_credit1_bytes_i(tx_credit[1*32 +: 32]),
        .tx_credit2_bytes_i(tx_credit[2*32 +: 32])
    );

    // ------------------------------------------------------------------ engine

    wire [8*32-1:0] rx_cnt_frames, rx_cnt_bytes, rx_cnt_pcrc_err, rx_cnt_seq_err;
    wire [8*32-1:0] rx_cnt_win_viol, rx_cnt_dropped;
    wire [31:0]     rx_cnt_skipped, rx_cnt_hcrc_err, rx_cnt_bad_version, rx_cnt_bad_header;
    wire [8*32-1:0] tx_cnt_frames, tx_cnt_bytes;
    wire [3*32-1:0] tx_cnt_retx, tx_cnt_credit_stall, tx_cnt_window_stall, tx_cnt_timeouts;
    wire [3*32-1:0] tx_cnt_naks, tx_cnt_win_refused, tx_cnt_acks, tx_cnt_ack_naks;
    wire [31:0]     tx_cnt_fw_dropped;

    ws_link #(
        .FW_RX_DEPTH(FW_RX_DEPTH),
        .FW_TX_WORDS(FW_TX_WORDS),
        .HIST_WORDS(HIST_WORDS),
        .DMA_BYTES(DMA_BYTES),
        .WINDOW(WINDOW),
        .ACK_DELAY(ACK_DELAY)
    ) link_inst (
        .clk(clk),
        .rst(rst),
        .s_phy_valid(s_phy_valid),
        .s_phy_ready(s_phy_ready),
        .s_phy_data(s_phy_data),
        .m_phy_valid(m_phy_valid),
        .m_phy_ready(m_phy_ready),
        .m_phy_data(m_phy_data),
        .fw_rx_valid(fw_rx_valid),
        .fw_rx_ready(fw_rxdata_re),
        .fw_rx_data(fw_rx_data),
        .fw_rx_level(fw_rx_level),
        .fw_tx_valid(fw_txdata_we),
        .fw_tx_ready(unused_s[8]),
        .fw_tx_data(fw_txdata_word),
        .fw_tx_commit(fw_txcommit_we && fw_txcommit_go),
        .fw_tx_free(fw_tx_free),
        .ext_valid(ext_valid),
        .ext_ready(ext_ready),
        .ext_we(ext_we),
        .ext_addr(ext_addr),
        .ext_wdata(ext_wdata),
        .ext_rvalid(ext_rvalid),
        .ext_rdata(ext_rdata),
        .cfg_max_payload(max_payload),
        .cfg_window(window_frames),
        .cfg_rto(rto_cycles),
        .cfg_loopback(ctrl_loopback),
        .rx_win_en(rx_win_en),
        .rx_win_base(rx_win_base),
        .rx_win_len(rx_win_len),
        .rx_released(rx_released),
        .tx_win_en(tx_win_en),
        .tx_win_base(tx_win_base),
        .tx_win_len(tx_win_len),
        .tx_win_ready(tx_use_ready),
        .ch_reset(ch_reset_we && ch_reset_go),
        .ch_init_credit(ch_init_credit),
        .rx_win_active(rx_win_active),
        .rx_expected(rx_expected),
        .rx_committed(rx_committed),
        .rx_credit(rx_credit),
        .tx_win_active(tx_win_active),
        .tx_acked_seq(tx_acked_seq),
        .tx_send_seq(tx_send_seq),
        .tx_next_seq(tx_next_seq),
        .tx_sent_bytes(tx_sent_bytes),
        .tx_acked_bytes(tx_acked_bytes),
        .tx_credit(tx_credit),
        .ev_valid(ev_valid),
        .ev_ch(ev_ch),
        .ev_code(ev_code),
        .ev_nak(ev_nak),
        .cnt_clear(cnt_clear_we && cnt_clear_go),
        .rx_cnt_frames(rx_cnt_frames),
        .rx_cnt_bytes(rx_cnt_bytes),
        .rx_cnt_pcrc_err(rx_cnt_pcrc_err),
        .rx_cnt_seq_err(rx_cnt_seq_err),
        .rx_cnt_win_viol(rx_cnt_win_viol),
        .rx_cnt_dropped(rx_cnt_dropped),
        .rx_cnt_skipped(rx_cnt_skipped),
        .rx_cnt_hcrc_err(rx_cnt_hcrc_err),
        .rx_cnt_bad_version(rx_cnt_bad_version),
        .rx_cnt_bad_header(rx_cnt_bad_header),
        .tx_cnt_frames(tx_cnt_frames),
        .tx_cnt_bytes(tx_cnt_bytes),
        .tx_cnt_retx(tx_cnt_retx),
        .tx_cnt_credit_stall(tx_cnt_credit_stall),
        .tx_cnt_window_stall(tx_cnt_window_stall),
        .tx_cnt_timeouts(tx_cnt_timeouts),
        .tx_cnt_naks(tx_cnt_naks),
        .tx_cnt_win_refused(tx_cnt_win_refused),
        .tx_cnt_acks(tx_cnt_acks),
        .tx_cnt_ack_naks(tx_cnt_ack_naks),
        .tx_cnt_fw_dropped(tx_cnt_fw_dropped)
    );

    // ------------------------------------------------------------------ counter select

    wire [2:0] c8 = cnt_sel[2:0];   // channel within a group of 8
    wire [1:0] k4 = cnt_sel[1:0];   // TX slot within a group of 4

    function automatic [31:0] slot3(input [3*32-1:0] v, input [1:0] k);
        slot3 = k == 2'd3 ? 32'd0 : v[k*32 +: 32];
    endfunction

    always @(*) begin
        case (cnt_sel[7:3])
            5'h00: cnt_val = rx_cnt_frames[c8*32 +: 32];
            5'h01: cnt_val = rx_cnt_bytes[c8*32 +: 32];
            5'h02: cnt_val = rx_cnt_pcrc_err[c8*32 +: 32];
            5'h03: cnt_val = rx_cnt_seq_err[c8*32 +: 32];
            5'h04: cnt_val = rx_cnt_win_viol[c8*32 +: 32];
            5'h05: cnt_val = rx_cnt_dropped[c8*32 +: 32];
            5'h06: case (c8)
                3'd0: cnt_val = rx_cnt_skipped;
                3'd1: cnt_val = rx_cnt_hcrc_err;
                3'd2: cnt_val = rx_cnt_bad_version;
                3'd3: cnt_val = rx_cnt_bad_header;
                default: cnt_val = 32'd0;
            endcase
            5'h08: cnt_val = tx_cnt_frames[c8*32 +: 32];
            5'h09: cnt_val = tx_cnt_bytes[c8*32 +: 32];
            5'h0a: cnt_val = cnt_sel[2] ? slot3(tx_cnt_credit_stall, k4) : slot3(tx_cnt_retx, k4);
            5'h0b: cnt_val = cnt_sel[2] ? slot3(tx_cnt_timeouts, k4) : slot3(tx_cnt_window_stall, k4);
            5'h0c: cnt_val = cnt_sel[2] ? slot3(tx_cnt_win_refused, k4) : slot3(tx_cnt_naks, k4);
            5'h0d: cnt_val = cnt_sel[2] ? slot3(tx_cnt_ack_naks, k4) : slot3(tx_cnt_acks, k4);
            5'h0e: cnt_val = cnt_sel[2:0] == 3'd0 ? tx_cnt_fw_dropped : 32'd0;
            default: cnt_val = 32'd0;
        endcase
    end

    assign irq = ctrl_irq_rx && fw_rx_valid;
    assign tx2_acked = tx_acked_bytes[2*32 +: 32];

    wire _unused_ok = &{1'b0, tx_send_seq, ev_ch, ev_nak, ev_bad_frame, ev_fw_overflow};

endmodule

`default_nettype wire
