`default_nettype none

// ws_link_tx: the transmit half of the board's host-link engine (docs/link.md "Board side: the
// link engine" and "Engine internals: the split and the contract between the halves").
// ws_link.v joins it with ws_link_rx.v and the register block; docs/link-engine-tx.md
// describes it and its test.
//
// Three kinds of frames leave on one 32-bit valid/ready word stream to the PHY (m_phy_*,
// stream byte 0 = bits 7:0), whole words each, hcrc and pcrc filled in here:
//
//   - firmware frames of channels 0, 1, 5 (and 7) from the firmware TX FIFO
//     (ws_link_tx_fw: header words 0..4 and padded payload, eligible after fw_tx_commit,
//     malformed headers dropped and counted);
//   - ACK-only frames (flags ACK or ACK|NAK, length 0, 24 bytes) for the bulk RX channels
//     2, 3, 4, built when the RX half raises ack_req[j], with rx_expected/rx_credit as they
//     are on the wires in the cycle the header is built; ack_sent[j] pulses in that cycle
//     (combinationally from the grant, so ack_req must not depend on ack_sent in the same
//     cycle: the RX half registers it);
//   - DATA frames of the bulk TX channels 2, 3, 6, read from their DMA windows by one
//     go-back-N sender each (ws_link_tx_gbn). DATA frames of 2 and 3 always carry the ACK
//     flag with that channel's RX ack and credit (piggyback) and pulse ack_sent[j] too.
//
// Arbiter ("Firmware frames"): at each frame boundary an ACK-only frame goes first (round
// robin over the three RX channels), then a committed firmware frame, then a bulk DATA frame
// (round robin over 2, 3, 6, frame by frame). A pending NAK request is thus always served by
// an ACK|NAK frame before that channel's next DATA frame, so piggybacked acks never carry NAK.
//
// Pipeline, one word per cycle at line rate with no gap between frames:
//   issue   the frame sequencer: the grant cycle issues header word 0, then words 1..4,
//           the hcrc slot, the payload (a DMA or FIFO read per word), the pcrc slot. It
//           issues only while the output FIFO has room for the word and the one before it,
//           so a read's data (one cycle later) always has a place and m_phy_ready never
//           reaches the RAM address path;
//   crc     the word (literal, DMA data, FIFO data, or ~crc for hcrc/pcrc) goes through
//           ws_link_crc32c into the running CRC, which starts at 0xFFFF_FFFF with each frame
//           and keeps running from the header into the payload, so pcrc covers both
//           ("Why pcrc covers the header");
//   out     a 4-word FIFO drives m_phy_*; its head holds still while not taken.
//
// Peer acks (peer_ack_*) are registered, then applied to their channel's sender in the next
// cycle, composed with a grant of the same cycle (poll_transmit, then on_ack). DMA windows are
// rings: a byte at stream position p is at win_base + (p & (win_len - 1)) ("Stream positions"),
// with base and length taken when win_en rises. A frame once granted is sent whole, whatever
// happens to its channel meanwhile (ch_reset, win_en falling).
//
// Bus packing: per bulk TX channel (TX slot k: 0 = channel 2, 1 = channel 3, 2 = channel 6)
// and per bulk RX channel (RX slot j = channel - 2: 0 = 2, 1 = 3, 2 = 4) a value sits at
// [k*32 +: 32] / [j*32 +: 32] (bit k / j for flags); per channel number c (0..7) at
// [c*32 +: 32]. Counters are 32 bits and wrap; cnt_clear zeros them all.
module ws_link_tx #(
    parameter WINDOW = 16,          // go-back-N slots per bulk TX channel: a power of two, 2..1024
    parameter FW_FIFO_WORDS = 512,  // firmware TX FIFO words: a power of two >= 512
    parameter DMA_AW = 14           // DMA RAM word-address width (2^DMA_AW words): 4..28
) (
    input  wire                     clk,
    input  wire                     rst,

    // To the PHY adapter.
    output wire                     m_phy_valid,
    input  wire                     m_phy_ready,
    output wire [31:0]              m_phy_data,

    // Firmware TX FIFO.
    input  wire                     fw_tx_valid,
    output wire                     fw_tx_ready,
    input  wire [31:0]              fw_tx_data,
    input  wire                     fw_tx_commit,   // pulse: frames written so far may go
    output wire [FREE_W-1:0]        fw_tx_free,     // words that can be pushed now

    // DMA read port of the TX side: synchronous RAM, dma_rdata one cycle after dma_re.
    output wire                     dma_re,
    output wire [DMA_AW-1:0]        dma_raddr,      // word address
    input  wire [31:0]              dma_rdata,

    // Bulk TX windows and producers, per TX slot k.
    input  wire [2:0]               win_en,
    input  wire [3*32-1:0]          win_base,       // byte address, aligned to win_len; taken when win_en rises
    input  wire [3*32-1:0]          win_len,        // bytes, a power of two 64..2^30; taken when win_en rises
    input  wire [3*32-1:0]          win_ready,      // producer: bytes before this position may go

    // Negotiated link parameters (HELLO).
    input  wire [16:0]              cfg_max_payload,    // bulk payload limit; clamped to 4..65536, rounded down to 4
    input  wire [15:0]              cfg_window,         // frames outstanding; clamped to 1..WINDOW
    input  wire [31:0]              cfg_rto,            // retransmission timeout in cycles; 0 = off

    // Per TX slot: load a stream state (zeros after a HELLO without RESUME).
    input  wire [2:0]               ch_reset,
    input  wire [3*32-1:0]          ch_init_seq,
    input  wire [3*32-1:0]          ch_init_bytes,
    input  wire [3*32-1:0]          ch_init_credit,

    // Peer acks from the RX half: a pulse per header with ACK that passed hcrc.
    input  wire                     peer_ack_valid,
    input  wire [2:0]               peer_ack_ch,
    input  wire [31:0]              peer_ack,
    input  wire [31:0]              peer_credit,
    input  wire                     peer_nak,

    // ACK requests from the RX half, per RX slot j.
    input  wire [3*32-1:0]          rx_expected,
    input  wire [3*32-1:0]          rx_credit,
    input  wire [2:0]               ack_req,
    input  wire [2:0]               ack_req_nak,
    output wire [2:0]               ack_sent,       // the values on rx_* went out in this cycle

    // Sender state, per TX slot.
    output wire [2:0]               win_active,     // enabled and geometry accepted
    output wire [3*32-1:0]          tx_acked_seq,   // oldest unacknowledged seq
    output wire [3*32-1:0]          tx_send_seq,    // next seq to put on the wire
    output wire [3*32-1:0]          tx_next_seq,    // one past the highest seq sent (HELLO tx_next)
    output wire [3*32-1:0]          tx_sent_bytes,  // stream position after the last frame cut
    output wire [3*32-1:0]          acked_bytes,    // bytes before this are acknowledged: reusable
    output wire [3*32-1:0]          tx_credit,      // the peer's credit as last heard

    // Counters.
    input  wire                     cnt_clear,
    output wire [8*32-1:0]          cnt_frames,     // per channel: frames sent (any kind)
    output wire [8*32-1:0]          cnt_bytes,      // per channel: payload bytes of those frames
    output wire [3*32-1:0]          cnt_retx,       // per TX slot: DATA frames resent (RETX)
    output wire [3*32-1:0]          cnt_credit_stall,   // per TX slot: cycles with data, no credit
    output wire [3*32-1:0]          cnt_window_stall,   // per TX slot: cycles with data and credit, window full
    output wire [3*32-1:0]          cnt_timeouts,   // per TX slot: retransmission timeouts
    output wire [3*32-1:0]          cnt_naks,       // per TX slot: NAKs honoured
    output wire [3*32-1:0]          cnt_win_refused,    // per TX slot: enabled windows refused
    output wire [3*32-1:0]          cnt_acks,       // per RX slot: ACK-only frames sent
    output wire [3*32-1:0]          cnt_ack_naks,   // per RX slot: ... of them with NAK
    output wire [31:0]              cnt_fw_dropped  // firmware frames with a malformed header
);

    localparam FREE_W = $clog2(FW_FIFO_WORDS + 1);
    localparam SLOT_W = $clog2(WINDOW);
    localparam OUT_DEPTH = 4;
    localparam [31:0] WINDOW_32 = WINDOW;

    initial begin
        if (WINDOW < 2 || WINDOW > 1024 || (WINDOW & (WINDOW - 1)) != 0)
            $error("ws_link_tx: WINDOW must be a power of two, 2..1024");
        if (FW_FIFO_WORDS < 512 || (FW_FIFO_WORDS & (FW_FIFO_WORDS - 1)) != 0)
            $error("ws_link_tx: FW_FIFO_WORDS must be a power of two >= 512");
        if (DMA_AW < 4 || DMA_AW > 28) $error("ws_link_tx: DMA_AW must be 4..28");
    end

    // Header flag bits (docs/link.md "Frame").
    localparam [7:0] F_DATA = 8'h01;
    localparam [7:0] F_ACK = 8'h02;
    localparam [7:0] F_NAK = 8'h04;
    localparam [7:0] F_RETX = 8'h10;
    // Word 0 without the channel byte: 'W', 'S', version 2.
    localparam [23:0] W0_LOW = 24'h02_5357;

    // Frame kinds and sequencer phases.
    localparam [1:0] K_ACK = 2'd0;
    localparam [1:0] K_FW = 2'd1;
    localparam [1:0] K_DATA = 2'd2;
    localparam [1:0] PH_HDR = 2'd0;
    localparam [1:0] PH_HCRC = 2'd1;
    localparam [1:0] PH_PAY = 2'd2;
    localparam [1:0] PH_PCRC = 2'd3;
    // Word sources of the crc stage.
    localparam [1:0] S_LIT = 2'd0;
    localparam [1:0] S_DMA = 2'd1;
    localparam [1:0] S_FW = 2'd2;
    localparam [1:0] S_CRC = 2'd3;

    // ------------------------------------------------------------------ configuration

    reg [31:0] now_reg;

    wire [16:0] mp_eff = (cfg_max_payload > 17'h1_0000) ? 17'h1_0000 :
                         (cfg_max_payload < 17'd4) ? 17'd4 : {cfg_max_payload[16:2], 2'b00};
    wire [SLOT_W:0] window_eff = (cfg_window == 16'd0) ? {{SLOT_W{1'b0}}, 1'b1} :
                                 ({16'd0, cfg_window} >= WINDOW_32) ? WINDOW_32[SLOT_W:0] : cfg_window[SLOT_W:0];

    // ------------------------------------------------------------------ peer acks

    reg         pa_valid_reg;
    reg [1:0]   pa_slot_reg;
    reg [31:0]  pa_ack_reg;
    reg [31:0]  pa_credit_reg;
    reg         pa_nak_reg;

    // Channels 2, 3, 6 have a TX sender; acks for any other channel are not ours.
    wire        pa_ours = peer_ack_ch == 3'd2 || peer_ack_ch == 3'd3 || peer_ack_ch == 3'd6;
    wire [1:0]  pa_slot = (peer_ack_ch == 3'd2) ? 2'd0 : (peer_ack_ch == 3'd3) ? 2'd1 : 2'd2;

    always @(posedge clk) begin
        pa_valid_reg <= peer_ack_valid && pa_ours;
        pa_slot_reg <= pa_slot;
        pa_ack_reg <= peer_ack;
        pa_credit_reg <= peer_credit;
        pa_nak_reg <= peer_nak;
        if (rst) pa_valid_reg <= 1'b0;
    end

    // ------------------------------------------------------------------ senders

    wire [3*32-1:0] g_base;
    wire [3*32-1:0] g_mask;
    wire [2:0]      g_eligible;
    wire [3*32-1:0] g_seq;
    wire [3*32-1:0] g_off;
    wire [3*17-1:0] g_len;
    wire [2:0]      g_retx;
    wire [2:0]      g_stall_credit;
    wire [2:0]      g_stall_window;
    wire [2:0]      g_timeout;
    wire [2:0]      g_nak;
    wire [2:0]      g_refused;
    reg  [2:0]      g_grant;

    genvar k;
    generate
        for (k = 0; k < 3; k = k + 1) begin : gen_tx
            localparam [1:0] SLOT = k;

            ws_link_tx_gbn #(
                .WINDOW(WINDOW),
                .DMA_AW(DMA_AW)
            ) gbn_inst (
                .clk(clk),
                .rst(rst),
                .now(now_reg),
                .win_en(win_en[k]),
                .win_base(win_base[k*32 +: 32]),
                .win_len(win_len[k*32 +: 32]),
                .win_ready(win_ready[k*32 +: 32]),
                .dma_base(g_base[k*32 +: 32]),
                .dma_mask(g_mask[k*32 +: 32]),
                .max_payload(mp_eff),
                .window(window_eff),
                .rto(cfg_rto),
                .ch_reset(ch_reset[k]),
                .init_seq(ch_init_seq[k*32 +: 32]),
                .init_bytes(ch_init_bytes[k*32 +: 32]),
                .init_credit(ch_init_credit[k*32 +: 32]),
                .ack_valid(pa_valid_reg && pa_slot_reg == SLOT),
                .ack_seq(pa_ack_reg),
                .ack_credit(pa_credit_reg),
                .ack_nak(pa_nak_reg),
                .grant(g_grant[k]),
                .active(win_active[k]),
                .eligible(g_eligible[k]),
                .frame_seq(g_seq[k*32 +: 32]),
                .frame_off(g_off[k*32 +: 32]),
                .frame_len(g_len[k*17 +: 17]),
                .frame_retx(g_retx[k]),
                .st_acked_seq(tx_acked_seq[k*32 +: 32]),
                .st_send_seq(tx_send_seq[k*32 +: 32]),
                .st_next_seq(tx_next_seq[k*32 +: 32]),
                .st_sent_bytes(tx_sent_bytes[k*32 +: 32]),
                .st_acked_bytes(acked_bytes[k*32 +: 32]),
                .st_credit(tx_credit[k*32 +: 32]),
                .stall_credit(g_stall_credit[k]),
                .stall_window(g_stall_window[k]),
                .timeout(g_timeout[k]),
                .nak(g_nak[k]),
                .refused(g_refused[k])
            );
        end
    endgenerate

    // ------------------------------------------------------------------ firmware FIFO

    wire        fw_avail;
    wire [2:0]  fw_ch;
    wire [10:0] fw_len;
    reg         fw_pop;
    reg         fw_rd;
    wire [31:0] fw_rdata;
    wire        fw_dropped;

    ws_link_tx_fw #(
        .DEPTH(FW_FIFO_WORDS)
    ) fw_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(fw_tx_valid),
        .s_ready(fw_tx_ready),
        .s_data(fw_tx_data),
        .commit(fw_tx_commit),
        .free(fw_tx_free),
        .frame_avail(fw_avail),
        .frame_ch(fw_ch),
        .frame_len(fw_len),
        .frame_pop(fw_pop),
        .rd_en(fw_rd),
        .rd_data(fw_rdata),
        .dropped(fw_dropped)
    );

    // ------------------------------------------------------------------ arbiter and sequencer

    reg         act_reg, act_next;
    reg [1:0]   kind_reg, kind_next;
    reg [1:0]   ph_reg, ph_next;
    reg [2:0]   hidx_reg, hidx_next;
    reg [14:0]  left_reg, left_next;        // payload words still to issue
    reg         pay_reg, pay_next;          // the frame has a payload
    reg [31:0]  hdr_reg [1:4];
    reg [31:0]  hdr_next [1:4];
    reg [DMA_AW-1:0] pos_reg, pos_next;     // word offset in the window of the next DMA read
    reg [DMA_AW-1:0] base_reg, base_next;   // window base and length - 1, in words
    reg [DMA_AW-1:0] mask_reg, mask_next;
    reg [1:0]   ack_rr_reg, ack_rr_next;    // RX slot served last
    reg [1:0]   tx_rr_reg, tx_rr_next;      // TX slot served last

    // crc stage inputs
    reg         b_valid_reg;
    reg [1:0]   b_src_reg;
    reg [31:0]  b_lit_reg;
    reg         b_sof_reg;
    reg         iss;
    reg [1:0]   iss_src;
    reg [31:0]  iss_lit;
    reg         iss_sof;

    // grant bookkeeping for the counters
    reg         grant;
    reg [2:0]   grant_ch;
    reg [16:0]  grant_len;
    reg [2:0]   ack_sent_r;
    reg         ack_grant;
    reg         ack_grant_nak;
    reg [1:0]   ack_j;
    reg         data_grant_retx;
    reg [1:0]   tx_k;
    reg         found;

    reg [2:0]   out_count_reg;
    wire        room = ({1'b0, out_count_reg} + {3'd0, b_valid_reg}) < OUT_DEPTH;

    // Channel of TX slot k.
    function automatic [2:0] tx_ch(input [1:0] s);
        begin
            tx_ch = (s == 2'd0) ? 3'd2 : (s == 2'd1) ? 3'd3 : 3'd6;
        end
    endfunction

    // The next slot after `last` (mod 3) that requests, searching in round-robin order.
    function automatic [2:0] rr_pick(input [2:0] req, input [1:0] last);
        reg [1:0] a;
        reg [1:0] b;
        reg [1:0] c;
        begin
            a = (last == 2'd2) ? 2'd0 : last + 2'd1;
            b = (a == 2'd2) ? 2'd0 : a + 2'd1;
            c = (b == 2'd2) ? 2'd0 : b + 2'd1;
            // {found, slot}
            rr_pick = req[a] ? {1'b1, a} : req[b] ? {1'b1, b} : req[c] ? {1'b1, c} : 3'b000;
        end
    endfunction

    reg [2:0] pick;
    reg [16:0] sel_len;
    reg [31:0] sel_off;
    reg [31:0] sel_base;
    reg [31:0] sel_mask;

    integer h;

    always @* begin
        act_next = act_reg;
        kind_next = kind_reg;
        ph_next = ph_reg;
        hidx_next = hidx_reg;
        left_next = left_reg;
        pay_next = pay_reg;
        for (h = 1; h <= 4; h = h + 1) hdr_next[h] = hdr_reg[h];
        pos_next = pos_reg;
        base_next = base_reg;
        mask_next = mask_reg;
        ack_rr_next = ack_rr_reg;
        tx_rr_next = tx_rr_reg;

        iss = 1'b0;
        iss_src = S_LIT;
        iss_lit = 32'd0;
        iss_sof = 1'b0;
        fw_pop = 1'b0;
        fw_rd = 1'b0;
        g_grant = 3'b000;
        grant = 1'b0;
        grant_ch = 3'd0;
        grant_len = 17'd0;
        ack_sent_r = 3'b000;
        ack_grant = 1'b0;
        ack_grant_nak = 1'b0;
        ack_j = 2'd0;
        data_grant_retx = 1'b0;
        tx_k = 2'd0;
        found = 1'b0;
        pick = 3'b000;
        sel_len = 17'd0;
        sel_off = 32'd0;
        sel_base = 32'd0;
        sel_mask = 32'd0;

        if (room && !act_reg) begin
            // A frame boundary: arbitrate.
            pick = rr_pick(ack_req, ack_rr_reg);
            if (pick[2]) begin
                ack_j = pick[1:0];
                found = 1'b1;
                ack_grant = 1'b1;
                ack_grant_nak = ack_req_nak[ack_j];
                ack_rr_next = ack_j;
                ack_sent_r[ack_j] = 1'b1;
                kind_next = K_ACK;
                grant_ch = {1'b0, ack_j} + 3'd2;
                iss_lit = {5'd0, grant_ch, W0_LOW};
                hdr_next[1] = {24'd0, F_ACK | (ack_grant_nak ? F_NAK : 8'h00)};
                hdr_next[2] = 32'd0;
                hdr_next[3] = rx_expected[ack_j*32 +: 32];
                hdr_next[4] = rx_credit[ack_j*32 +: 32];
                pay_next = 1'b0;
            end else if (fw_avail) begin
                found = 1'b1;
                fw_pop = 1'b1;
                fw_rd = 1'b1;
                kind_next = K_FW;
                iss_src = S_FW;
                grant_ch = fw_ch;
                grant_len = {6'd0, fw_len};
                left_next = {6'd0, fw_len[10:2]} + {14'd0, fw_len[1:0] != 2'b00};
                pay_next = fw_len != 11'd0;
            end else begin
                pick = rr_pick(g_eligible, tx_rr_reg);
                if (pick[2]) begin
                    tx_k = pick[1:0];
                    found = 1'b1;
                    g_grant[tx_k] = 1'b1;
                    tx_rr_next = tx_k;
                    kind_next = K_DATA;
                    grant_ch = tx_ch(tx_k);
                    sel_len = g_len[tx_k*17 +: 17];
                    sel_off = g_off[tx_k*32 +: 32];
                    grant_len = sel_len;
                    data_grant_retx = g_retx[tx_k];
                    iss_lit = {5'd0, grant_ch, W0_LOW};
                    // Channels 2 and 3 piggyback their RX direction's ack and credit.
                    hdr_next[1] = {7'd0, sel_len, F_DATA | (data_grant_retx ? F_RETX : 8'h00) |
                                                  ((tx_k != 2'd2) ? F_ACK : 8'h00)};
                    hdr_next[2] = g_seq[tx_k*32 +: 32];
                    if (tx_k != 2'd2) begin
                        ack_sent_r[tx_k] = 1'b1;
                        hdr_next[3] = rx_expected[tx_k*32 +: 32];
                        hdr_next[4] = rx_credit[tx_k*32 +: 32];
                    end else begin
                        hdr_next[3] = 32'd0;
                        hdr_next[4] = 32'd0;
                    end
                    // The window lies inside the DMA RAM (ws_link_tx_gbn checks it), so the
                    // word-address bits are all of it; the stream position is word aligned.
                    sel_base = g_base[tx_k*32 +: 32];
                    sel_mask = g_mask[tx_k*32 +: 32];
                    pos_next = sel_off[DMA_AW+1:2];
                    base_next = sel_base[DMA_AW+1:2];
                    mask_next = sel_mask[DMA_AW+1:2];
                    left_next = sel_len[16:2];
                    pay_next = 1'b1;
                end
            end
            if (found) begin
                grant = 1'b1;
                iss = 1'b1;
                iss_sof = 1'b1;
                act_next = 1'b1;
                ph_next = PH_HDR;
                hidx_next = 3'd1;
            end
        end else if (room && act_reg) begin
            iss = 1'b1;
            case (ph_reg)
                PH_HDR: begin
                    if (kind_reg == K_FW) begin
                        iss_src = S_FW;
                        fw_rd = 1'b1;
                    end else begin
                        iss_lit = hdr_reg[hidx_reg];
                    end
                    hidx_next = hidx_reg + 3'd1;
                    if (hidx_reg == 3'd4) ph_next = PH_HCRC;
                end
                PH_HCRC: begin
                    iss_src = S_CRC;
                    if (pay_reg) ph_next = PH_PAY;
                    else act_next = 1'b0;
                end
                PH_PAY: begin
                    if (kind_reg == K_FW) begin
                        iss_src = S_FW;
                        fw_rd = 1'b1;
                    end else begin
                        iss_src = S_DMA;
                        pos_next = pos_reg + {{(DMA_AW-1){1'b0}}, 1'b1};
                    end
                    left_next = left_reg - 15'd1;
                    if (left_reg == 15'd1) ph_next = PH_PCRC;
                end
                default: begin
                    iss_src = S_CRC;
                    act_next = 1'b0;
                end
            endcase
        end
    end

    assign ack_sent = ack_sent_r;

    // The word address of the DMA read issued now: the base is aligned to the length.
    assign dma_re = iss && iss_src == S_DMA;
    assign dma_raddr = base_reg | (pos_reg & mask_reg);

    always @(posedge clk) begin
        act_reg <= act_next;
        kind_reg <= kind_next;
        ph_reg <= ph_next;
        hidx_reg <= hidx_next;
        left_reg <= left_next;
        pay_reg <= pay_next;
        for (h = 1; h <= 4; h = h + 1) hdr_reg[h] <= hdr_next[h];
        pos_reg <= pos_next;
        base_reg <= base_next;
        mask_reg <= mask_next;
        ack_rr_reg <= ack_rr_next;
        tx_rr_reg <= tx_rr_next;
        b_valid_reg <= iss;
        b_src_reg <= iss_src;
        b_lit_reg <= iss_lit;
        b_sof_reg <= iss_sof;
        now_reg <= now_reg + 32'd1;

        if (rst) begin
            act_reg <= 1'b0;
            ack_rr_reg <= 2'd2;
            tx_rr_reg <= 2'd2;
            b_valid_reg <= 1'b0;
            now_reg <= 32'd0;
        end
    end

    // ------------------------------------------------------------------ crc stage

    reg  [31:0] crc_reg;
    wire [31:0] crc_in = b_sof_reg ? 32'hffff_ffff : crc_reg;
    wire [31:0] crc_out;
    reg  [31:0] b_word;

    always @* begin
        case (b_src_reg)
            S_LIT: b_word = b_lit_reg;
            S_DMA: b_word = dma_rdata;
            S_FW: b_word = fw_rdata;
            default: b_word = ~crc_in;
        endcase
    end

    // hcrc and pcrc go through the CRC too: after hcrc the register holds the CRC-32C
    // residue, and the payload continues from there, as the receiver's check does.
    ws_link_crc32c crc_inst (
        .crc_i(crc_in),
        .data_i(b_word),
        .bytes_i(3'd4),
        .crc_o(crc_out)
    );

    always @(posedge clk) begin
        if (b_valid_reg) crc_reg <= crc_out;
    end

    // ------------------------------------------------------------------ output FIFO

    reg [31:0]  out_mem [0:OUT_DEPTH-1];
    reg [1:0]   out_wr_reg;
    reg [1:0]   out_rd_reg;

    wire        out_pop = m_phy_valid && m_phy_ready;

    assign m_phy_valid = out_count_reg != 3'd0;
    assign m_phy_data = out_mem[out_rd_reg];

    always @(posedge clk) begin
        if (b_valid_reg) begin
            out_mem[out_wr_reg] <= b_word;
            out_wr_reg <= out_wr_reg + 2'd1;
        end
        if (out_pop) out_rd_reg <= out_rd_reg + 2'd1;
        out_count_reg <= out_count_reg + {2'd0, b_valid_reg} - {2'd0, out_pop};
        if (rst) begin
            out_wr_reg <= 2'd0;
            out_rd_reg <= 2'd0;
            out_count_reg <= 3'd0;
        end
    end

    // ------------------------------------------------------------------ counters

    reg [31:0]  c_frames_reg [0:7];
    reg [31:0]  c_bytes_reg [0:7];
    reg [31:0]  c_drop_reg;

    integer i;

    always @(posedge clk) begin
        if (grant) begin
            c_frames_reg[grant_ch] <= c_frames_reg[grant_ch] + 32'd1;
            c_bytes_reg[grant_ch] <= c_bytes_reg[grant_ch] + {15'd0, grant_len};
        end
        if (fw_dropped) c_drop_reg <= c_drop_reg + 32'd1;
        if (rst || cnt_clear) begin
            for (i = 0; i < 8; i = i + 1) begin
                c_frames_reg[i] <= 32'd0;
                c_bytes_reg[i] <= 32'd0;
            end
            c_drop_reg <= 32'd0;
        end
    end

    assign cnt_fw_dropped = c_drop_reg;

    genvar c;
    generate
        for (c = 0; c < 8; c = c + 1) begin : gen_cnt_ch
            assign cnt_frames[c*32 +: 32] = c_frames_reg[c];
            assign cnt_bytes[c*32 +: 32] = c_bytes_reg[c];
        end

        for (c = 0; c < 3; c = c + 1) begin : gen_cnt_slot
            localparam [1:0] SLOT = c;

            reg [31:0] retx_reg;
            reg [31:0] cstall_reg;
            reg [31:0] wstall_reg;
            reg [31:0] to_reg;
            reg [31:0] nak_reg;
            reg [31:0] ref_reg;
            reg [31:0] acks_reg;
            reg [31:0] acknak_reg;

            wire ack_here = ack_grant && ack_j == SLOT;

            always @(posedge clk) begin
                if (g_grant[c] && data_grant_retx) retx_reg <= retx_reg + 32'd1;
                if (g_stall_credit[c]) cstall_reg <= cstall_reg + 32'd1;
                if (g_stall_window[c]) wstall_reg <= wstall_reg + 32'd1;
                if (g_timeout[c]) to_reg <= to_reg + 32'd1;
                if (g_nak[c]) nak_reg <= nak_reg + 32'd1;
                if (g_refused[c]) ref_reg <= ref_reg + 32'd1;
                if (ack_here) acks_reg <= acks_reg + 32'd1;
                if (ack_here && ack_grant_nak) acknak_reg <= acknak_reg + 32'd1;
                if (rst || cnt_clear) begin
                    retx_reg <= 32'd0;
                    cstall_reg <= 32'd0;
                    wstall_reg <= 32'd0;
                    to_reg <= 32'd0;
                    nak_reg <= 32'd0;
                    ref_reg <= 32'd0;
                    acks_reg <= 32'd0;
                    acknak_reg <= 32'd0;
                end
            end

            assign cnt_retx[c*32 +: 32] = retx_reg;
            assign cnt_credit_stall[c*32 +: 32] = cstall_reg;
            assign cnt_window_stall[c*32 +: 32] = wstall_reg;
            assign cnt_timeouts[c*32 +: 32] = to_reg;
            assign cnt_naks[c*32 +: 32] = nak_reg;
            assign cnt_win_refused[c*32 +: 32] = ref_reg;
            assign cnt_acks[c*32 +: 32] = acks_reg;
            assign cnt_ack_naks[c*32 +: 32] = acknak_reg;
        end
    endgenerate

endmodule

`default_nettype wire
