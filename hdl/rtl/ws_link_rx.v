`default_nettype none

// ws_link_rx: the receive half of the board's host-link engine (docs/link.md "Board side: the
// link engine", "Engine internals"; docs/link-engine-rx.md describes this block).
//
// PHY words go through a history ring (ws_link_rx_hist) and a byte aligner (ws_link_rx_align)
// into one parser that takes a 32-bit frame word per cycle at any byte offset:
//
// - HUNT looks for "WS" at the four byte offsets of the next word and takes the header word
//   that starts there in the same cycle; bytes passed over count as skipped.
// - HDR takes header words 1..5, running CRC-32C (ws_link_crc32c) over them; word 5 is
//   checked against the hcrc, then version, channel, flags and length, in that order
//   (docs/link.md "Receiving" steps 2 and 3).
// - PAY takes the padded payload with the same CRC running on (pcrc covers the header:
//   docs/link.md "Frame", "Why pcrc covers the header"), PCRC checks the pcrc word.
//
// A refused candidate (bad hcrc, bad header field or bad pcrc) rewinds the ring to one byte
// after its magic and counts that byte as skipped, exactly as ws_common::link::Decoder does,
// so a frame that starts inside a truncated or false one is still found. The ring keeps the
// bytes of the frame in progress up to 4 * (HIST_WORDS - 16) bytes; past that the rescan of a
// refused frame starts that far back instead (the bytes given up count as skipped), and a
// frame beginning in the part given up is lost to go-back-N's retransmission.
//
// Routing (docs/link.md "Channels and reliability"):
// - channels 0, 1 and 7 go whole into the firmware RX FIFO (ws_link_rx_fwfifo): six header
//   words, then the padded payload, written as they arrive and committed only after pcrc;
//   anything else rolls the write pointer back. A frame that does not fit in the room left
//   (checked at header word 1) is dropped whole and counted.
// - DATA on channels 2, 3, 4 goes to its window (ws_link_rx_gbn): a frame the go-back-N
//   receiver will accept (seq = expected, within the credit) is written to DMA at the
//   uncommitted tail base + (committed & (len - 1)) as it arrives and committed when pcrc
//   passes (docs/link.md "Receiving", last paragraph). Duplicates, gaps and credit violations
//   are not written. A length that is not a multiple of 4 or a closed window is a window
//   violation, no NAK ("Engine internals").
// - channel 5 (board -> host only), DATA or payload on channel 6, and non-DATA frames with a
//   payload (ERROR) on 2, 3, 4 are dropped and counted. Frames without DATA or payload on
//   2, 3, 4, 6 (ACK-only frames) carry acks only.
// - a header that passes all header checks with ACK or NAK on channel 2, 3 or 6 pulses
//   peer_ack_valid for the TX half at once; a bad pcrc later loses the payload, not the ack.
//
// Decisions are taken per frame, one per cycle at most, and reported on ev_* (also what the
// counters count). Per-channel verdicts use the state latched while the header passed, so a
// consumer's release during a frame takes effect from the next frame; a ch_reset, or the window
// closing under a frame being written, cancels that frame (EV_DROP).
//
// Line rate: one word per cycle whenever s_phy_valid is high and no candidate is refused;
// each refusal costs the rescan of the refused bytes plus three cycles, absorbed by the ring.
//
// Counters (32 bits, wrapping, from reset): per channel c in bits [32c +: 32] of cnt_frames,
// cnt_bytes (payload bytes of delivered frames), cnt_pcrc_err, cnt_seq_err (duplicates and
// gaps), cnt_win_viol (credit violations, bad bulk lengths, closed windows, refused window
// enables), cnt_dropped (FIFO full, wrong direction, ERROR on bulk, cancelled); per engine
// cnt_skipped (bytes), cnt_hcrc_err, cnt_bad_version, cnt_bad_header (channel, flags,
// length). Bulk buses (win_*, released, rx_*, ack_*, ch_reset) carry channel 2 + i in bits
// [32i +: 32] (or bit i).
module ws_link_rx #(
    parameter FW_DEPTH = 512,           // firmware RX FIFO words; a power of two >= 16 (262 hold a 1 KiB frame)
    parameter HIST_WORDS = 1024,        // history ring words; a power of two >= 32
    parameter DMA_BYTES = 65536,        // DMA RAM bytes; a power of two 256 .. 2^30
    parameter WINDOW = 16,              // go-back-N window in frames: ACK at least every WINDOW/2
    parameter ACK_DELAY = 256,          // cycles from the first unacknowledged frame to its ACK request
    parameter REFRESH = 4 * ACK_DELAY,  // first credit-refresh interval in cycles (doubles up to 64x)
    parameter [31:0] INIT_SEQ = 32'd0,  // expected seq after reset/ch_reset: 0 (a test hook)
    parameter [31:0] INIT_POS = 32'd0   // committed bytes after reset/ch_reset: 0 (a test hook)
) (
    input  wire                             clk,
    input  wire                             rst,

    // PHY words, host -> board; stream byte 0 is bits 7:0.
    input  wire                             s_phy_valid,
    output wire                             s_phy_ready,
    input  wire [31:0]                      s_phy_data,

    // Firmware RX FIFO: whole frames of channels 0, 1, 7.
    output wire                             fw_rx_valid,
    input  wire                             fw_rx_ready,
    output wire [31:0]                      fw_rx_data,
    output wire [$clog2(FW_DEPTH+1)-1:0]    fw_rx_level,

    // DMA write port into the RX side of the DMA RAM (word address).
    output wire                             dma_we,
    output wire [$clog2(DMA_BYTES)-3:0]     dma_waddr,
    output wire [31:0]                      dma_wdata,

    // Configuration, channels 2, 3, 4 in slots 0, 1, 2.
    input  wire [16:0]                      cfg_max_payload,   // negotiated max_payload (bulk length limit)
    input  wire [2:0]                       win_en,
    input  wire [3*32-1:0]                  win_base,          // sampled on the rising edge of win_en
    input  wire [3*32-1:0]                  win_len,
    input  wire [3*32-1:0]                  released,          // consumer's released pointer
    input  wire [2:0]                       ch_reset,          // pulse: HELLO without RESUME
    output wire [2:0]                       win_active,

    // RX -> TX: ACK requests.
    output wire [3*32-1:0]                  rx_expected,
    output wire [3*32-1:0]                  rx_credit,
    output wire [3*32-1:0]                  rx_committed,
    output wire [2:0]                       ack_req,
    output wire [2:0]                       ack_req_nak,
    input  wire [2:0]                       ack_sent,

    // RX -> TX: acks from the peer's receivers (channels 2, 3, 6).
    output wire                             peer_ack_valid,
    output wire [2:0]                       peer_ack_ch,
    output wire [31:0]                      peer_ack,
    output wire [31:0]                      peer_credit,
    output wire                             peer_nak,

    // One pulse per frame decision (EV_* below).
    output wire                             ev_valid,
    output wire [2:0]                       ev_ch,
    output wire [3:0]                       ev_code,
    output wire                             ev_nak,

    // Counters.
    input  wire                             cnt_clear,         // pulse: zero every counter
    output wire [8*32-1:0]                  cnt_frames,
    output wire [8*32-1:0]                  cnt_bytes,
    output wire [8*32-1:0]                  cnt_pcrc_err,
    output wire [8*32-1:0]                  cnt_seq_err,
    output wire [8*32-1:0]                  cnt_win_viol,
    output wire [8*32-1:0]                  cnt_dropped,
    output wire [31:0]                      cnt_skipped,
    output wire [31:0]                      cnt_hcrc_err,
    output wire [31:0]                      cnt_bad_version,
    output wire [31:0]                      cnt_bad_header
);

    localparam FW_LW = $clog2(FW_DEPTH + 1);
    localparam DMA_AW = $clog2(DMA_BYTES) - 2;
    localparam HIST_AW = $clog2(HIST_WORDS);
    // Bytes of the frame in progress the ring keeps for a rescan.
    localparam [31:0] KEEP_LIMIT = 4 * (HIST_WORDS - 16);

    // Frame decisions (ev_code).
    localparam [3:0] EV_FIFO = 4'd0;        // committed to the firmware FIFO
    localparam [3:0] EV_FIFO_FULL = 4'd1;   // dropped: no room in the firmware FIFO
    localparam [3:0] EV_ACCEPT = 4'd2;      // bulk DATA accepted and committed
    localparam [3:0] EV_DUP = 4'd3;         // bulk duplicate (seq behind): re-ACK
    localparam [3:0] EV_GAP = 4'd4;         // bulk seq ahead: NAK if ev_nak
    localparam [3:0] EV_CREDIT = 4'd5;      // bulk in order past the credit: NAK if ev_nak
    localparam [3:0] EV_WINDOW = 4'd6;      // bulk DATA, closed window or length not 4k: no NAK
    localparam [3:0] EV_DROP = 4'd7;        // wrong direction, ERROR on bulk, cancelled
    localparam [3:0] EV_CTRL = 4'd8;        // no DATA, no payload on 2, 3, 4, 6 (ACK-only)
    localparam [3:0] EV_PCRC = 4'd9;        // pcrc mismatch (bulk: NAK if ev_nak)
    localparam [3:0] EV_HCRC = 4'd10;       // hcrc mismatch
    localparam [3:0] EV_VERSION = 4'd11;    // another protocol version
    localparam [3:0] EV_HEADER = 4'd12;     // bad channel, flags or length

    localparam [1:0] ST_HUNT = 2'd0;
    localparam [1:0] ST_HDR = 2'd1;
    localparam [1:0] ST_PAY = 2'd2;
    localparam [1:0] ST_PCRC = 2'd3;

    localparam [1:0] REL_IN_ORDER = 2'd0;
    localparam [1:0] REL_BEHIND = 2'd1;
    localparam [1:0] REL_AHEAD = 2'd2;

    initial begin
        if (FW_DEPTH < 16 || (FW_DEPTH & (FW_DEPTH - 1)) != 0)
            $error("ws_link_rx: FW_DEPTH must be a power of two >= 16");
        if (HIST_WORDS < 32 || (HIST_WORDS & (HIST_WORDS - 1)) != 0)
            $error("ws_link_rx: HIST_WORDS must be a power of two >= 32");
        if (DMA_BYTES < 256 || DMA_BYTES > (1 << 30) || (DMA_BYTES & (DMA_BYTES - 1)) != 0)
            $error("ws_link_rx: DMA_BYTES must be a power of two in 256 .. 2^30");
        if (WINDOW < 1) $error("ws_link_rx: WINDOW must be >= 1");
        if (ACK_DELAY < 1) $error("ws_link_rx: ACK_DELAY must be >= 1");
        if (REFRESH < 1) $error("ws_link_rx: REFRESH must be >= 1");
        if (INIT_POS[1:0] != 2'b00) $error("ws_link_rx: INIT_POS must be a multiple of 4");
    end

    function is_fifo_ch(input [7:0] c);
        is_fifo_ch = (c == 8'd0) || (c == 8'd1) || (c == 8'd7);
    endfunction

    function is_dma_ch(input [7:0] c);
        is_dma_ch = (c == 8'd2) || (c == 8'd3) || (c == 8'd4);
    endfunction

    // ------------------------------------------------------------------ front end

    wire        hist_valid;
    wire        hist_ready;
    wire [31:0] hist_data;
    reg         rewind;
    reg  [31:0] keep_pos_reg, keep_pos_next;
    reg  [2:0]  consume;
    wire [63:0] ab;
    wire [4:0]  ab_n;
    wire [31:0] frame_word;     // the frame word the parser takes this cycle

    // A rewind always goes back to the oldest kept byte, so one pointer serves both ports.
    ws_link_rx_hist #(
        .WORDS(HIST_WORDS)
    ) hist_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(s_phy_valid),
        .s_ready(s_phy_ready),
        .s_data(s_phy_data),
        .m_valid(hist_valid),
        .m_ready(hist_ready),
        .m_data(hist_data),
        .rewind(rewind),
        .rewind_ptr(keep_pos_reg[HIST_AW+2:2]),
        .keep_ptr(keep_pos_reg[HIST_AW+2:2])
    );

    ws_link_rx_align align_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(hist_valid),
        .s_ready(hist_ready),
        .s_data(hist_data),
        .flush(rewind),
        .flush_skip(keep_pos_reg[1:0]),
        .consume(consume),
        .bytes(ab),
        .count(ab_n)
    );

    // ------------------------------------------------------------------ firmware FIFO

    reg              fifo_wr;
    reg              fifo_commit;
    reg              fifo_rollback;
    wire [FW_LW-1:0] fifo_free;

    ws_link_rx_fwfifo #(
        .DEPTH(FW_DEPTH)
    ) fifo_inst (
        .clk(clk),
        .rst(rst),
        .wr_en(fifo_wr),
        .wr_data(frame_word),
        .commit(fifo_commit),
        .rollback(fifo_rollback),
        .free(fifo_free),
        .m_valid(fw_rx_valid),
        .m_ready(fw_rx_ready),
        .m_data(fw_rx_data),
        .level(fw_rx_level)
    );

    // ------------------------------------------------------------------ bulk channels

    reg  [2:0]  g_acc;
    reg  [2:0]  g_dup;
    reg  [2:0]  g_gap;
    reg  [23:0] len_reg, len_next;

    // Slot 3 of these is never selected; it keeps the index in range.
    wire [4*32-1:0] g_expected;
    wire [4*32-1:0] g_committed;
    wire [4*32-1:0] g_credit;
    wire [4*32-1:0] g_base;
    wire [4*32-1:0] g_mask;
    wire [3:0]      g_active;
    wire [3:0]      g_nak_avail;
    wire [2:0]      g_refused;

    assign g_expected[127:96] = 32'd0;
    assign g_committed[127:96] = 32'd0;
    assign g_credit[127:96] = 32'd0;
    assign g_base[127:96] = 32'd0;
    assign g_mask[127:96] = 32'd0;
    assign g_active[3] = 1'b0;
    assign g_nak_avail[3] = 1'b0;

    genvar gi;
    generate
        for (gi = 0; gi < 3; gi = gi + 1) begin : gen_bulk
            ws_link_rx_gbn #(
                .DMA_BYTES(DMA_BYTES),
                .WINDOW(WINDOW),
                .ACK_DELAY(ACK_DELAY),
                .REFRESH(REFRESH),
                .INIT_SEQ(INIT_SEQ),
                .INIT_POS(INIT_POS)
            ) gbn_inst (
                .clk(clk),
                .rst(rst),
                .ch_reset(ch_reset[gi]),
                .win_en(win_en[gi]),
                .win_base(win_base[32*gi +: 32]),
                .win_len(win_len[32*gi +: 32]),
                .released(released[32*gi +: 32]),
                .max_payload(cfg_max_payload),
                .ack_sent(ack_sent[gi]),
                .acc(g_acc[gi]),
                .acc_len(len_reg[16:0]),
                .dup(g_dup[gi]),
                .gap(g_gap[gi]),
                .expected(g_expected[32*gi +: 32]),
                .committed(g_committed[32*gi +: 32]),
                .credit(g_credit[32*gi +: 32]),
                .active(g_active[gi]),
                .base(g_base[32*gi +: 32]),
                .mask(g_mask[32*gi +: 32]),
                .nak_avail(g_nak_avail[gi]),
                .ack_req(ack_req[gi]),
                .ack_req_nak(ack_req_nak[gi]),
                .refused(g_refused[gi])
            );
        end
    endgenerate

    assign rx_expected = g_expected[95:0];
    assign rx_credit = g_credit[95:0];
    assign rx_committed = g_committed[95:0];
    assign win_active = g_active[2:0];

    // ------------------------------------------------------------------ parser

    reg [1:0]  state_reg, state_next;
    reg [2:0]  hidx_reg, hidx_next;
    reg [31:0] pos_reg, pos_next;
    reg [31:0] magic_reg, magic_next;
    reg [31:0] crc_reg, crc_next;
    reg [7:0]  ver_reg, ver_next;
    reg [7:0]  ch_reg, ch_next;
    reg [7:0]  flags_reg, flags_next;
    reg [31:0] seq_reg, seq_next;
    reg [31:0] ack_reg, ack_next;
    reg [31:0] credit_reg, credit_next;
    reg [1:0]  rel_reg, rel_next;           // seq against expected (HDR word 3)
    reg        credit_ok_reg, credit_ok_next;  // committed + length within the credit (word 4)
    reg        fifo_ok_reg, fifo_ok_next;   // the frame is being written to the firmware FIFO
    reg        cancel_reg, cancel_next;
    reg [3:0]  code_reg, code_next;         // the decision if the pcrc passes
    reg        part_reg, part_next;         // judged by go-back-N (a bad pcrc is a gap)
    reg        write_reg, write_next;       // payload goes to DMA
    reg [14:0] rem_reg, rem_next;           // payload words left
    reg [31:0] dpos_reg, dpos_next;         // stream position of the next payload word
    reg [31:0] dbase_reg, dbase_next;
    reg [31:0] dmask_reg, dmask_next;

    reg        dma_we_reg, dma_we_next;
    reg [DMA_AW-1:0] dma_waddr_reg, dma_waddr_next;
    reg [31:0] dma_wdata_reg;

    reg        ev_valid_reg, ev_valid_next;
    reg [2:0]  ev_ch_reg;
    reg [3:0]  ev_code_reg, ev_code_next;
    reg        ev_nak_reg, ev_nak_next;
    reg [23:0] ev_len_reg;

    reg        pa_valid_reg, pa_valid_next;
    reg [2:0]  pa_ch_reg;
    reg [31:0] pa_ack_reg;
    reg [31:0] pa_credit_reg;
    reg        pa_nak_reg;

    reg [31:0] skip_add;

    // The hunt: "WS" at byte offset p of the next word, the first of p = 0..3.
    reg [3:0]  cand;
    reg [1:0]  hunt_p;
    integer    k;

    always @* begin
        for (k = 0; k < 4; k = k + 1) begin
            cand[k] = (ab[8*k +: 8] == 8'h57) && (ab[8*k+8 +: 8] == 8'h53);
        end
        hunt_p = cand[0] ? 2'd0 : cand[1] ? 2'd1 : cand[2] ? 2'd2 : 2'd3;
    end

    wire        hunt_found = cand != 4'd0;
    wire [31:0] hunt_word = ab[{1'b0, hunt_p, 3'b000} +: 32];
    // The hunt needs 8 bytes (a magic at offset 3 and its whole first word); frame words 4.
    wire        hunt_go = (state_reg == ST_HUNT) && (ab_n >= 5'd8);
    wire        word_go = (state_reg != ST_HUNT) && (ab_n >= 5'd4);
    wire [31:0] w = ab[31:0];
    // At the magic's offset in the hunt, the front of the aligner otherwise.
    assign frame_word = (state_reg == ST_HUNT) ? hunt_word : w;

    wire [31:0] crc_o;
    ws_link_crc32c crc_inst (
        .crc_i((state_reg == ST_HUNT) ? 32'hFFFF_FFFF : crc_reg),
        .data_i(frame_word),
        .bytes_i(3'd4),
        .crc_o(crc_o)
    );

    // Bulk slot of the frame's channel (2, 3, 4 -> 0, 1, 2; others select 0 and are gated).
    wire [1:0]  bi = (ch_reg == 8'd3) ? 2'd1 : (ch_reg == 8'd4) ? 2'd2 : 2'd0;
    wire [31:0] b_expected = g_expected[32*bi +: 32];
    wire [31:0] b_committed = g_committed[32*bi +: 32];
    wire [31:0] b_credit = g_credit[32*bi +: 32];
    wire        b_active = g_active[bi];
    wire        b_nak_avail = g_nak_avail[bi];
    wire        frame_dma = is_dma_ch(ch_reg);

    // Header checks at word 5 (docs/link.md "Frame", field table).
    wire        crc_match = (~crc_reg) == w;
    wire        ch_ctrl = (ch_reg == 8'd0) || (ch_reg == 8'd1) || (ch_reg == 8'd5) || (ch_reg == 8'd7);
    wire [16:0] bulk_max = (cfg_max_payload > 17'd65536) ? 17'd65536 : cfg_max_payload;
    wire [23:0] max_len = ch_ctrl ? 24'd1024 : {7'd0, bulk_max};
    wire        ver_ok = ver_reg == 8'd2;
    wire        ch_ok = ch_reg < 8'd8;
    wire        flags_ok = flags_reg[7:6] == 2'b00
                           && !(flags_reg[3] && ch_reg != 8'd0)
                           && !(flags_reg[4] && !flags_reg[0])
                           && !(len_reg != 24'd0 && !(flags_reg[0] || flags_reg[3] || flags_reg[5]));
    wire        len_ok = len_reg <= max_len;
    // Padded payload words of a frame that passed the length check (at most 16 384).
    wire [14:0] pw = len_reg[16:2] + {14'd0, len_reg[1:0] != 2'b00};

    // Firmware FIFO room for the frame, checked when header word 1 brings the length.
    wire [23:0] w1_len = w[31:8];
    wire [22:0] w1_pw = w1_len[23:2] + {22'd0, w1_len[1:0] != 2'b00};
    wire        fifo_fits = {1'b0, w1_pw} + 24'd6 <= {{(24 - FW_LW){1'b0}}, fifo_free};

    // What a frame whose header passed becomes if its pcrc passes too.
    reg [3:0]   code_hdr;
    reg         part_hdr;

    always @* begin
        part_hdr = 1'b0;
        if (is_fifo_ch(ch_reg)) begin
            code_hdr = fifo_ok_reg ? EV_FIFO : EV_FIFO_FULL;
        end else if (ch_reg == 8'd5) begin
            code_hdr = EV_DROP;
        end else if (ch_reg == 8'd6 || !flags_reg[0]) begin
            code_hdr = (flags_reg[0] || len_reg != 24'd0) ? EV_DROP : EV_CTRL;
        end else if (!b_active || len_reg[1:0] != 2'b00) begin
            code_hdr = EV_WINDOW;
        end else begin
            part_hdr = 1'b1;
            if (rel_reg == REL_IN_ORDER) begin
                code_hdr = credit_ok_reg ? EV_ACCEPT : EV_CREDIT;
            end else if (rel_reg == REL_BEHIND) begin
                code_hdr = EV_DUP;
            end else begin
                code_hdr = EV_GAP;
            end
        end
    end

    reg         end_frame;      // the frame ends this cycle
    reg         end_ok;         // ... and passed (no pcrc or a matching one)
    reg [3:0]   end_code;
    reg         end_part;
    reg         cancel_now;
    reg         refuse;         // the candidate is refused: rewind
    reg [3:0]   refuse_code;
    reg [31:0]  seq_d;
    reg [31:0]  end_d;
    reg [3:0]   final_code;

    always @* begin
        state_next = state_reg;
        hidx_next = hidx_reg;
        magic_next = magic_reg;
        crc_next = crc_reg;
        ver_next = ver_reg;
        ch_next = ch_reg;
        flags_next = flags_reg;
        len_next = len_reg;
        seq_next = seq_reg;
        ack_next = ack_reg;
        credit_next = credit_reg;
        rel_next = rel_reg;
        credit_ok_next = credit_ok_reg;
        fifo_ok_next = fifo_ok_reg;
        code_next = code_reg;
        part_next = part_reg;
        write_next = write_reg;
        rem_next = rem_reg;
        dpos_next = dpos_reg;
        dbase_next = dbase_reg;
        dmask_next = dmask_reg;
        keep_pos_next = keep_pos_reg;

        consume = 3'd0;
        skip_add = 32'd0;
        fifo_wr = 1'b0;
        fifo_commit = 1'b0;
        fifo_rollback = 1'b0;
        dma_we_next = 1'b0;
        dma_waddr_next = dma_waddr_reg;
        pa_valid_next = 1'b0;
        end_frame = 1'b0;
        end_ok = 1'b1;
        end_code = code_reg;
        end_part = part_reg;
        refuse = 1'b0;
        refuse_code = EV_HCRC;
        seq_d = 32'd0;
        end_d = 32'd0;

        // A ch_reset, or the window closing under a frame being written, cancels the frame.
        cancel_now = cancel_reg
                     || (state_reg != ST_HUNT && frame_dma && ch_reset[bi])
                     || (write_reg && !b_active);
        cancel_next = cancel_now;

        case (state_reg)
            ST_HUNT: begin
                if (hunt_go) begin
                    if (hunt_found) begin
                        consume = {1'b0, hunt_p} + 3'd4;
                        skip_add = {30'd0, hunt_p};
                        magic_next = pos_reg + {30'd0, hunt_p};
                        keep_pos_next = pos_reg + {30'd0, hunt_p} + 32'd1;
                        crc_next = crc_o;
                        ver_next = hunt_word[23:16];
                        ch_next = hunt_word[31:24];
                        fifo_ok_next = is_fifo_ch(hunt_word[31:24]) && fifo_free >= 6;
                        fifo_wr = fifo_ok_next;
                        cancel_next = 1'b0;
                        write_next = 1'b0;
                        state_next = ST_HDR;
                        hidx_next = 3'd1;
                    end else begin
                        consume = 3'd4;
                        skip_add = 32'd4;
                        keep_pos_next = pos_reg + 32'd4;
                    end
                end
            end

            ST_HDR: begin
                if (word_go) begin
                    consume = 3'd4;
                    crc_next = crc_o;
                    hidx_next = hidx_reg + 3'd1;
                    fifo_wr = fifo_ok_reg;
                    case (hidx_reg)
                        3'd1: begin
                            flags_next = w[7:0];
                            len_next = w1_len;
                            if (fifo_ok_reg && !fifo_fits) begin
                                fifo_ok_next = 1'b0;
                                fifo_wr = 1'b0;
                                fifo_rollback = 1'b1;
                            end
                        end
                        3'd2: begin
                            seq_next = w;
                        end
                        3'd3: begin
                            ack_next = w;
                            // gbn: seq == expected, seq_lt(seq, expected), or ahead.
                            seq_d = b_expected - seq_reg;
                            if (seq_d == 32'd0) begin
                                rel_next = REL_IN_ORDER;
                            end else if (!seq_d[31]) begin
                                rel_next = REL_BEHIND;
                            end else begin
                                rel_next = REL_AHEAD;
                            end
                        end
                        3'd4: begin
                            credit_next = w;
                            // seq_diff(credit, committed + length) >= 0.
                            end_d = b_credit - (b_committed + {8'd0, len_reg});
                            credit_ok_next = $signed(end_d) >= 32'sd0;
                        end
                        default: begin
                            // Word 5: hcrc, then the fields in docs/link.md "Receiving" order.
                            if (!crc_match) begin
                                refuse = 1'b1;
                                refuse_code = EV_HCRC;
                            end else if (!ver_ok) begin
                                refuse = 1'b1;
                                refuse_code = EV_VERSION;
                            end else if (!(ch_ok && flags_ok && len_ok)) begin
                                refuse = 1'b1;
                                refuse_code = EV_HEADER;
                            end else begin
                                pa_valid_next = (ch_reg == 8'd2 || ch_reg == 8'd3 || ch_reg == 8'd6)
                                                && (flags_reg[1] || flags_reg[2]);
                                code_next = code_hdr;
                                part_next = part_hdr;
                                write_next = code_hdr == EV_ACCEPT && !cancel_now;
                                dpos_next = b_committed;
                                dbase_next = g_base[32*bi +: 32];
                                dmask_next = g_mask[32*bi +: 32];
                                if (len_reg == 24'd0) begin
                                    end_frame = 1'b1;
                                    end_code = code_hdr;
                                    end_part = part_hdr;
                                end else begin
                                    state_next = ST_PAY;
                                    rem_next = pw;
                                end
                            end
                        end
                    endcase
                end
            end

            ST_PAY: begin
                if (word_go) begin
                    consume = 3'd4;
                    crc_next = crc_o;
                    fifo_wr = fifo_ok_reg;
                    dma_we_next = write_reg && !cancel_now;
                    dma_waddr_next = dbase_reg[DMA_AW+1:2] | (dpos_reg[DMA_AW+1:2] & dmask_reg[DMA_AW+1:2]);
                    dpos_next = dpos_reg + 32'd4;
                    rem_next = rem_reg - 15'd1;
                    if (rem_reg == 15'd1) begin
                        state_next = ST_PCRC;
                    end
                end
            end

            default: begin
                if (word_go) begin
                    consume = 3'd4;
                    end_frame = 1'b1;
                    end_ok = crc_match;
                end
            end
        endcase

        // Close the frame: deliver, judge, or refuse it and rescan.
        g_acc = 3'd0;
        g_dup = 3'd0;
        g_gap = 3'd0;
        ev_valid_next = 1'b0;
        ev_code_next = refuse_code;
        ev_nak_next = 1'b0;
        final_code = (cancel_now && frame_dma) ? EV_DROP : end_code;
        if (end_frame && !end_ok) begin
            refuse = 1'b1;
            refuse_code = EV_PCRC;
            ev_code_next = EV_PCRC;
            if (end_part && !cancel_now) begin
                g_gap[bi] = 1'b1;
                ev_nak_next = b_nak_avail;
            end
        end else if (end_frame) begin
            ev_valid_next = 1'b1;
            ev_code_next = final_code;
            state_next = ST_HUNT;
            keep_pos_next = pos_reg + {29'd0, consume};
            if (final_code == EV_FIFO) begin
                fifo_commit = 1'b1;
            end else begin
                fifo_wr = 1'b0;
                fifo_rollback = 1'b1;
            end
            case (final_code)
                EV_ACCEPT: g_acc[bi] = 1'b1;
                EV_DUP: g_dup[bi] = 1'b1;
                EV_GAP, EV_CREDIT: begin
                    g_gap[bi] = 1'b1;
                    ev_nak_next = b_nak_avail;
                end
                default: begin
                end
            endcase
        end

        if (refuse) begin
            // Resume one byte after the magic (or the oldest byte the ring kept).
            ev_valid_next = 1'b1;
            ev_code_next = refuse_code;
            rewind = 1'b1;
            fifo_wr = 1'b0;
            fifo_commit = 1'b0;
            fifo_rollback = 1'b1;
            skip_add = keep_pos_reg - magic_reg;
            state_next = ST_HUNT;
            pos_next = keep_pos_reg;
            keep_pos_next = keep_pos_reg;
        end else begin
            rewind = 1'b0;
            pos_next = pos_reg + {29'd0, consume};
            // Inside a long frame the ring keeps only the last KEEP_LIMIT bytes.
            if (state_reg != ST_HUNT && !end_frame && pos_next - keep_pos_reg > KEEP_LIMIT) begin
                keep_pos_next = pos_next - KEEP_LIMIT;
            end
        end
    end

    assign dma_we = dma_we_reg;
    assign dma_waddr = dma_waddr_reg;
    assign dma_wdata = dma_wdata_reg;

    assign ev_valid = ev_valid_reg;
    assign ev_ch = ev_ch_reg;
    assign ev_code = ev_code_reg;
    assign ev_nak = ev_nak_reg;

    assign peer_ack_valid = pa_valid_reg;
    assign peer_ack_ch = pa_ch_reg;
    assign peer_ack = pa_ack_reg;
    assign peer_credit = pa_credit_reg;
    assign peer_nak = pa_nak_reg;

    // ------------------------------------------------------------------ counters

    reg [31:0] frames_reg [0:7];
    reg [31:0] bytes_reg [0:7];
    reg [31:0] pcrc_reg [0:7];
    reg [31:0] seq_err_reg [0:7];
    reg [31:0] win_viol_reg [0:7];
    reg [31:0] dropped_reg [0:7];
    reg [31:0] skipped_reg;
    reg [31:0] hcrc_reg;
    reg [31:0] version_reg;
    reg [31:0] header_reg;

    genvar gc;
    generate
        for (gc = 0; gc < 8; gc = gc + 1) begin : gen_cnt
            assign cnt_frames[32*gc +: 32] = frames_reg[gc];
            assign cnt_bytes[32*gc +: 32] = bytes_reg[gc];
            assign cnt_pcrc_err[32*gc +: 32] = pcrc_reg[gc];
            assign cnt_seq_err[32*gc +: 32] = seq_err_reg[gc];
            assign cnt_win_viol[32*gc +: 32] = win_viol_reg[gc];
            assign cnt_dropped[32*gc +: 32] = dropped_reg[gc];
        end
    endgenerate

    assign cnt_skipped = skipped_reg;
    assign cnt_hcrc_err = hcrc_reg;
    assign cnt_bad_version = version_reg;
    assign cnt_bad_header = header_reg;

    // Counted from the registered event, one cycle after the decision.
    wire ev_deliver = ev_code_reg == EV_FIFO || ev_code_reg == EV_ACCEPT;
    wire ev_drop = ev_code_reg == EV_FIFO_FULL || ev_code_reg == EV_DROP;
    wire ev_seq = ev_code_reg == EV_DUP || ev_code_reg == EV_GAP;
    wire ev_win = ev_code_reg == EV_CREDIT || ev_code_reg == EV_WINDOW;

    integer c;

    // ------------------------------------------------------------------ registers

    always @(posedge clk) begin
        state_reg <= state_next;
        hidx_reg <= hidx_next;
        pos_reg <= pos_next;
        magic_reg <= magic_next;
        keep_pos_reg <= keep_pos_next;
        crc_reg <= crc_next;
        ver_reg <= ver_next;
        ch_reg <= ch_next;
        flags_reg <= flags_next;
        len_reg <= len_next;
        seq_reg <= seq_next;
        ack_reg <= ack_next;
        credit_reg <= credit_next;
        rel_reg <= rel_next;
        credit_ok_reg <= credit_ok_next;
        fifo_ok_reg <= fifo_ok_next;
        cancel_reg <= cancel_next;
        code_reg <= code_next;
        part_reg <= part_next;
        write_reg <= write_next;
        rem_reg <= rem_next;
        dpos_reg <= dpos_next;
        dbase_reg <= dbase_next;
        dmask_reg <= dmask_next;

        dma_we_reg <= dma_we_next;
        dma_waddr_reg <= dma_waddr_next;
        dma_wdata_reg <= w;

        ev_valid_reg <= ev_valid_next;
        ev_ch_reg <= ch_reg[2:0];
        ev_code_reg <= ev_code_next;
        ev_nak_reg <= ev_nak_next;
        ev_len_reg <= len_reg;

        pa_valid_reg <= pa_valid_next;
        if (pa_valid_next) begin
            pa_ch_reg <= ch_reg[2:0];
            pa_ack_reg <= ack_reg;
            pa_credit_reg <= credit_reg;
            pa_nak_reg <= flags_reg[2];
        end

        skipped_reg <= skipped_reg + skip_add;
        if (ev_valid_reg) begin
            for (c = 0; c < 8; c = c + 1) begin
                if (ev_ch_reg == c[2:0]) begin
                    if (ev_deliver) begin
                        frames_reg[c] <= frames_reg[c] + 32'd1;
                        bytes_reg[c] <= bytes_reg[c] + {8'd0, ev_len_reg};
                    end
                    if (ev_drop) dropped_reg[c] <= dropped_reg[c] + 32'd1;
                    if (ev_seq) seq_err_reg[c] <= seq_err_reg[c] + 32'd1;
                    if (ev_code_reg == EV_PCRC) pcrc_reg[c] <= pcrc_reg[c] + 32'd1;
                end
            end
            if (ev_code_reg == EV_HCRC) hcrc_reg <= hcrc_reg + 32'd1;
            if (ev_code_reg == EV_VERSION) version_reg <= version_reg + 32'd1;
            if (ev_code_reg == EV_HEADER) header_reg <= header_reg + 32'd1;
        end
        // A refused window enable and a frame's violation may land in the same cycle.
        for (c = 2; c < 5; c = c + 1) begin
            win_viol_reg[c] <= win_viol_reg[c]
                               + {31'd0, ev_valid_reg && ev_win && ev_ch_reg == c[2:0]}
                               + {31'd0, g_refused[c - 2]};
        end

        if (rst || cnt_clear) begin
            skipped_reg <= 32'd0;
            hcrc_reg <= 32'd0;
            version_reg <= 32'd0;
            header_reg <= 32'd0;
            for (c = 0; c < 8; c = c + 1) begin
                frames_reg[c] <= 32'd0;
                bytes_reg[c] <= 32'd0;
                pcrc_reg[c] <= 32'd0;
                seq_err_reg[c] <= 32'd0;
                win_viol_reg[c] <= 32'd0;
                dropped_reg[c] <= 32'd0;
            end
        end

        if (rst) begin
            state_reg <= ST_HUNT;
            hidx_reg <= 3'd0;
            pos_reg <= 32'd0;
            magic_reg <= 32'd0;
            keep_pos_reg <= 32'd0;
            crc_reg <= 32'hFFFF_FFFF;
            ch_reg <= 8'd0;
            fifo_ok_reg <= 1'b0;
            cancel_reg <= 1'b0;
            write_reg <= 1'b0;
            part_reg <= 1'b0;
            code_reg <= EV_DROP;
            rem_reg <= 15'd0;
            dma_we_reg <= 1'b0;
            ev_valid_reg <= 1'b0;
            pa_valid_reg <= 1'b0;
        end
    end

endmodule

`default_nettype wire
