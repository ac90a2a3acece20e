`default_nettype none

// ws_link_tx_gbn: the go-back-N sender of one bulk TX channel of the link engine (docs/link.md
// "The go-back-N state machines", "Engine internals: the split and the contract between the
// halves"). ws_link_tx instantiates one per channel 2, 3 and 6.
//
// It is ws_common::link::gbn::Sender in hardware, with one difference of shape: the board's
// frames are cut when they are first transmitted, not queued ahead, so the Sender's `next`
// and `high` are the same register here (`high_reg`) and `queue` + `poll_transmit` happen in
// the one cycle the arbiter grants the channel (`grant`). State: `acked` <= `send` <= `high`
// seqs, the byte positions `cut` (the Sender's queued_bytes: end of the last frame cut) and
// `acked_bytes`, the peer's `credit`, the NAK already honoured, and a slot table of WINDOW
// entries (offset, length, last send time) indexed by seq mod WINDOW. A rewind resends the
// recorded cuts, never re-cut ones: the receiver may have committed the first cut.
//
// The frame offered to the arbiter (frame_*) is the retransmission at `send` when a rewind
// left one pending (RETX), else a new frame of min(max_payload, ready - cut, credit - cut)
// bytes rounded down to a multiple of 4 ("Bulk lengths are multiples of 4"), when that is at
// least 4 and fewer than `window` frames are outstanding.
//
// One cycle applies, in this order, exactly what the Sender would do for the same events:
// the grant (poll_transmit), then a peer ack (on_ack: credit taken only when it grows in
// wrapping order, an ack outside acked..=high ignored as stale, one NAK honoured per ack
// value), then - only in a cycle with neither - the retransmission timer (on_tick: the
// oldest outstanding frame last sent `rto` or more cycles ago rewinds `send` to `acked` and
// restarts its timer; rto = 0 turns the timer off). ch_reset loads the state of a fresh or
// resumed stream (Sender::resume; zeros for a HELLO without RESUME) and wins over the rest.
//
// The window's geometry is taken when win_en rises (and held while it stays up, so a base or
// length written under a running stream changes nothing, as in ws_link_rx) and checked: a
// power-of-two length of 64 B .. 1 GiB, a base aligned to it, inside the 4 << DMA_AW bytes of
// DMA RAM ("Windows are power-of-two rings"). An enabled window that fails it stays inactive
// and pulses `refused` once.
module ws_link_tx_gbn #(
    parameter WINDOW = 16,  // slot-table entries (frames outstanding at most): a power of two, 2..1024
    parameter DMA_AW = 14   // DMA RAM word-address width, for the geometry check: 4..28
) (
    input  wire                 clk,
    input  wire                 rst,

    input  wire [31:0]          now,            // free-running cycle count

    // Window and producer (docs/link.md "Board side: the link engine", DMA windows).
    input  wire                 win_en,
    input  wire [31:0]          win_base,       // byte address in the DMA RAM, taken when win_en rises
    input  wire [31:0]          win_len,        // bytes, a power of two, taken when win_en rises
    input  wire [31:0]          win_ready,      // stream position up to which bytes may be sent
    output wire [31:0]          dma_base,       // the window in use: base ...
    output wire [31:0]          dma_mask,       // ... and length - 1

    // Configuration, already clamped by ws_link_tx.
    input  wire [16:0]          max_payload,    // 4..65536, a multiple of 4
    input  wire [SLOT_W:0]      window,         // 1..WINDOW frames
    input  wire [31:0]          rto,            // cycles; 0 = no timeout

    // Load a stream state (Sender::resume): seq, byte position and the peer's credit.
    input  wire                 ch_reset,
    input  wire [31:0]          init_seq,
    input  wire [31:0]          init_bytes,
    input  wire [31:0]          init_credit,

    // A peer ack for this channel (registered by ws_link_tx).
    input  wire                 ack_valid,
    input  wire [31:0]          ack_seq,
    input  wire [31:0]          ack_credit,
    input  wire                 ack_nak,

    // The arbiter sends frame_* in this cycle.
    input  wire                 grant,

    output wire                 active,         // window enabled and accepted
    output wire                 eligible,       // a frame can be granted now
    output wire [31:0]          frame_seq,
    output wire [31:0]          frame_off,      // stream position of the first byte
    output wire [16:0]          frame_len,      // bytes, a multiple of 4, 4..65536
    output wire                 frame_retx,

    // State, for the register block (HELLO's tx_next) and the producer (acked_bytes).
    output wire [31:0]          st_acked_seq,
    output wire [31:0]          st_send_seq,
    output wire [31:0]          st_next_seq,
    output wire [31:0]          st_sent_bytes,
    output wire [31:0]          st_acked_bytes,
    output wire [31:0]          st_credit,

    // Per-cycle events for the counters.
    output wire                 stall_credit,   // data ready, credit short (< 4 bytes left)
    output wire                 stall_window,   // data ready and credit, window full
    output wire                 timeout,        // the timer rewound the channel
    output wire                 nak,            // a NAK rewound the channel
    output wire                 refused         // an enabled window failed the geometry check
);

    localparam SLOT_W = $clog2(WINDOW);
    localparam [33:0] DMA_BYTES = 34'd4 << DMA_AW;

    initial begin
        if (WINDOW < 2 || WINDOW > 1024 || (WINDOW & (WINDOW - 1)) != 0)
            $error("ws_link_tx_gbn: WINDOW must be a power of two, 2..1024");
        if (DMA_AW < 4 || DMA_AW > 28) $error("ws_link_tx_gbn: DMA_AW must be 4..28");
    end

    // Wrapping order (ws_common::link::seq_lt): b - a is positive as a signed distance.
    function automatic seq_lt(input [31:0] a, input [31:0] b);
        reg [31:0] d;
        begin
            d = b - a;
            seq_lt = !d[31] && d != 32'd0;
        end
    endfunction

    // ------------------------------------------------------------------ state

    reg [31:0]          acked_reg, acked_next;
    reg [31:0]          send_reg, send_next;
    reg [31:0]          high_reg, high_next;
    reg [31:0]          cut_reg, cut_next;
    reg [31:0]          ackb_reg, ackb_next;
    reg [31:0]          credit_reg, credit_next;
    reg [31:0]          oldest_reg, oldest_next;    // last send time of the frame at acked
    reg                 nakv_reg, nakv_next;        // a NAK was honoured for ...
    reg [31:0]          naks_reg, naks_next;        // ... this ack value
    reg                 refused_reg;

    reg [31:0]          off_mem [0:WINDOW-1];
    reg [16:0]          len_mem [0:WINDOW-1];
    reg [31:0]          at_mem [0:WINDOW-1];

    // ------------------------------------------------------------------ window geometry

    reg         en_reg;
    reg [31:0]  base_reg;
    reg [31:0]  wlen_reg;

    // In the cycle win_en rises the inputs count (and are taken); after it, the taken ones.
    wire [31:0] base_eff = en_reg ? base_reg : win_base;
    wire [31:0] wlen_eff = en_reg ? wlen_reg : win_len;
    wire [31:0] len_m1 = wlen_eff - 32'd1;
    wire        geom_ok = wlen_eff >= 32'd64 && wlen_eff <= 32'h4000_0000 &&
                          (wlen_eff & len_m1) == 32'd0 && (base_eff & len_m1) == 32'd0 &&
                          ({2'b00, base_eff} + {2'b00, wlen_eff}) <= DMA_BYTES;
    wire        refused_now = win_en && !geom_ok;

    assign dma_base = base_eff;
    assign dma_mask = len_m1;

    always @(posedge clk) begin
        en_reg <= win_en;
        if (!en_reg) begin
            base_reg <= win_base;
            wlen_reg <= win_len;
        end
        if (rst) en_reg <= 1'b0;
    end

    assign active = win_en && geom_ok;
    assign refused = refused_now && !refused_reg;

    // ------------------------------------------------------------------ the frame on offer

    wire [31:0] d_data = win_ready - cut_reg;
    wire [31:0] d_cred = credit_reg - cut_reg;
    // At least one word of data / of credit: a signed distance >= 4.
    wire        data_ok = !d_data[31] && d_data[30:2] != 29'd0;
    wire        cred_ok = !d_cred[31] && d_cred[30:2] != 29'd0;
    wire [16:0] lim_data = (d_data[31:17] != 15'd0 || d_data[16:0] > max_payload) ? max_payload : d_data[16:0];
    wire [16:0] lim_cred = (d_cred[31:17] != 15'd0 || d_cred[16:0] > lim_data) ? lim_data : d_cred[16:0];
    wire [16:0] cut_len = lim_cred & 17'h1_fffc;

    wire [31:0] in_flight = high_reg - acked_reg;
    wire        win_full = in_flight >= {{(31 - SLOT_W){1'b0}}, window};
    wire        retx_pend = send_reg != high_reg;

    wire [SLOT_W-1:0] send_slot = send_reg[SLOT_W-1:0];
    wire [SLOT_W-1:0] high_slot = high_reg[SLOT_W-1:0];
    wire [SLOT_W-1:0] ack_slot = ack_seq[SLOT_W-1:0];

    assign eligible = active && !ch_reset && (retx_pend || (data_ok && cred_ok && !win_full));
    assign frame_seq = retx_pend ? send_reg : high_reg;
    assign frame_off = retx_pend ? off_mem[send_slot] : cut_reg;
    assign frame_len = retx_pend ? len_mem[send_slot] : cut_len;
    assign frame_retx = retx_pend;

    // Stalls count only while nothing is waiting to be resent: new data blocked by credit, or
    // (with credit) by the window. The cycle of a ch_reset belongs to no stream.
    assign stall_credit = active && !ch_reset && !retx_pend && data_ok && !cred_ok;
    assign stall_window = active && !ch_reset && !retx_pend && data_ok && cred_ok && win_full;

    wire   to_fire = active && !ack_valid && !grant && acked_reg != high_reg && rto != 32'd0 &&
                     (now - oldest_reg) >= rto;
    assign timeout = to_fire && !ch_reset;

    reg    nak_fire;
    assign nak = nak_fire;

    // ------------------------------------------------------------------ next state

    always @* begin
        acked_next = acked_reg;
        send_next = send_reg;
        high_next = high_reg;
        cut_next = cut_reg;
        ackb_next = ackb_reg;
        credit_next = credit_reg;
        oldest_next = oldest_reg;
        nakv_next = nakv_reg;
        naks_next = naks_reg;
        nak_fire = 1'b0;

        // poll_transmit: the frame leaves now; the oldest frame's timer restarts if it is it.
        if (grant) begin
            if (frame_seq == acked_reg) oldest_next = now;
            send_next = send_reg + 32'd1;
            if (!retx_pend) begin
                high_next = high_reg + 32'd1;
                cut_next = cut_reg + {15'd0, cut_len};
            end
        end

        // on_ack, on the state after the grant.
        if (ack_valid) begin
            if (seq_lt(credit_next, ack_credit)) credit_next = ack_credit;
            if (!(seq_lt(ack_seq, acked_next) || seq_lt(high_next, ack_seq))) begin
                if (ack_seq != acked_next) begin
                    nakv_next = 1'b0;
                    acked_next = ack_seq;
                    // Frames are contiguous: everything before `ack` ends where frame `ack`
                    // starts, or at `cut` when nothing is left. The frame cut in this very
                    // cycle is not in the table yet.
                    if (ack_seq == high_next) ackb_next = cut_next;
                    else if (grant && !retx_pend && ack_seq == high_reg) ackb_next = cut_reg;
                    else ackb_next = off_mem[ack_slot];
                    oldest_next = (grant && ack_seq == frame_seq) ? now : at_mem[ack_slot];
                end
                if (seq_lt(send_next, acked_next)) send_next = acked_next;
                if (ack_nak && acked_next != high_next && !(nakv_next && naks_next == ack_seq)) begin
                    nakv_next = 1'b1;
                    naks_next = ack_seq;
                    send_next = acked_next;
                    nak_fire = 1'b1;
                end
            end
        end

        // on_tick, only in a cycle without grant or ack on this channel (to_fire says so).
        if (to_fire) begin
            send_next = acked_reg;
            oldest_next = now;
            nakv_next = 1'b0;
        end

        if (ch_reset) begin
            acked_next = init_seq;
            send_next = init_seq;
            high_next = init_seq;
            cut_next = init_bytes;
            ackb_next = init_bytes;
            credit_next = init_credit;
            nakv_next = 1'b0;
            nak_fire = 1'b0;
        end
    end

    // The slot table has no reset: an entry is read only for seqs in acked..high, which were
    // written when they were cut.
    always @(posedge clk) begin
        if (grant) begin
            at_mem[frame_seq[SLOT_W-1:0]] <= now;
            if (!retx_pend) begin
                off_mem[high_slot] <= cut_reg;
                len_mem[high_slot] <= cut_len;
            end
        end
    end

    always @(posedge clk) begin
        acked_reg <= acked_next;
        send_reg <= send_next;
        high_reg <= high_next;
        cut_reg <= cut_next;
        ackb_reg <= ackb_next;
        credit_reg <= credit_next;
        oldest_reg <= oldest_next;
        nakv_reg <= nakv_next;
        naks_reg <= naks_next;
        refused_reg <= refused_now;

        if (rst) begin
            acked_reg <= 32'd0;
            send_reg <= 32'd0;
            high_reg <= 32'd0;
            cut_reg <= 32'd0;
            ackb_reg <= 32'd0;
            credit_reg <= 32'd0;
            oldest_reg <= 32'd0;
            nakv_reg <= 1'b0;
            naks_reg <= 32'd0;
            refused_reg <= 1'b0;
        end
    end

    assign st_acked_seq = acked_reg;
    assign st_send_seq = send_reg;
    assign st_next_seq = high_reg;
    assign st_sent_bytes = cut_reg;
    assign st_acked_bytes = ackb_reg;
    assign st_credit = credit_reg;

endmodule

`default_nettype wire
