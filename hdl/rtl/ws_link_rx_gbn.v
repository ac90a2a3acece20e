`default_nettype none

// ws_link_rx_gbn: the go-back-N receiver and DMA window of one bulk RX channel (2, 3 or 4).
//
// The hardware form of ws_common::link::gbn::Receiver (docs/link.md "The go-back-N state
// machines"), with the tick as the clock cycle. The parser in ws_link_rx judges each frame
// against `expected`, `committed` and `credit` and reports its verdict as a one-cycle pulse:
// `acc` (in order, both CRCs good, within the credit: commit `acc_len` bytes), `dup` (seq
// behind: re-ACK) or `gap` (seq ahead, past the credit, or a bad pcrc: NAK once per gap).
//
// Window (docs/link.md "Engine internals": power-of-two rings of 64 B .. 2^30 B): base and len
// are sampled on the rising edge of win_en. A length that is not a power of two in that range,
// a base not aligned to it, or a ring that leaves the DMA RAM (DMA_BYTES) is refused: the
// window stays off and `refused` pulses for the window-violation counter. win_en low turns it
// off. credit = released + len while on, released while off.
//
// ACK policy (docs/link.md "Bulk channels"; the RX -> TX contract of "Engine internals"):
// `ack_req` is a level, raised by a NAK owed, a duplicate, WINDOW/2 accepted frames, the
// first unacknowledged frame being ACK_DELAY cycles old, credit growth by a frame
// (max_payload) or any growth while the sender, as far as it has heard, has less than a frame
// left, and the credit refresh. The TX half pulses `ack_sent` when it has sent `expected` and
// `credit` (in an ACK-only frame or piggybacked); that clears the request and restarts the
// timers. An `ack_sent` and a verdict in the same cycle act in that order, as the golden
// model's caller does.
//
// Credit refresh: an ACK that raised the credit of a sender with less than a frame left arms
// a timer of REFRESH cycles; when it runs out an ACK is due again, and each repeat doubles
// the interval up to 64 x REFRESH, until an accepted frame ends past the credit the sender had
// before the grant, which proves the grant arrived.
//
// Deviation from the golden model, deliberate: an accepted frame withdraws a NAK not yet sent
// (the gap it reported has been filled, so the sender need not go back); the request stays up
// as an ACK if anything else asks for one.
module ws_link_rx_gbn #(
    parameter DMA_BYTES = 65536,        // bytes of the DMA RAM; a power of two 256 .. 2^30
    parameter WINDOW = 16,              // go-back-N window in frames, >= 1
    parameter ACK_DELAY = 256,          // cycles from the first unacknowledged frame to its ACK, >= 1
    parameter REFRESH = 1024,           // first credit-refresh interval in cycles, >= 1
    parameter [31:0] INIT_SEQ = 32'd0,  // expected after reset and ch_reset
    parameter [31:0] INIT_POS = 32'd0   // committed after reset and ch_reset, a multiple of 4
) (
    input  wire         clk,
    input  wire         rst,

    input  wire         ch_reset,       // pulse: expected, committed and the ACK state to INIT_*
    input  wire         win_en,
    input  wire [31:0]  win_base,
    input  wire [31:0]  win_len,
    input  wire [31:0]  released,       // consumer's released pointer (wrapping byte count)
    input  wire [16:0]  max_payload,    // negotiated max_payload (0 acts as 1)
    input  wire         ack_sent,

    input  wire         acc,
    input  wire [16:0]  acc_len,
    input  wire         dup,
    input  wire         gap,

    output wire [31:0]  expected,
    output wire [31:0]  committed,
    output wire [31:0]  credit,
    output wire         active,
    output wire [31:0]  base,
    output wire [31:0]  mask,
    output wire         nak_avail,      // a gap now would request a NAK (none yet for this expected)
    output wire         ack_req,
    output wire         ack_req_nak,
    output wire         refused
);

    localparam ACK_EVERY = (WINDOW / 2 > 1) ? WINDOW / 2 : 1;
    localparam UN_W = $clog2(ACK_EVERY + 1);
    localparam AGE_W = $clog2(ACK_DELAY + 1);
    localparam REF_MAX = 64 * REFRESH;
    localparam REF_W = $clog2(REF_MAX + 1);
    localparam [UN_W-1:0] ACK_EVERY_W = ACK_EVERY[UN_W-1:0];
    localparam [AGE_W-1:0] ACK_DELAY_W = ACK_DELAY[AGE_W-1:0];
    localparam [REF_W-1:0] REFRESH_W = REFRESH[REF_W-1:0];
    localparam [REF_W-1:0] REF_MAX_W = REF_MAX[REF_W-1:0];
    localparam [31:0] DMA_BYTES_32 = DMA_BYTES;
    localparam [32:0] DMA_BYTES_W = {1'b0, DMA_BYTES_32};

    initial begin
        if (DMA_BYTES < 256 || DMA_BYTES > (1 << 30) || (DMA_BYTES & (DMA_BYTES - 1)) != 0) begin
            $error("ws_link_rx_gbn: DMA_BYTES must be a power of two in 256 .. 2^30");
        end
        if (WINDOW < 1) $error("ws_link_rx_gbn: WINDOW must be >= 1");
        if (ACK_DELAY < 1) $error("ws_link_rx_gbn: ACK_DELAY must be >= 1");
        if (REFRESH < 1 || REFRESH > (1 << 24)) $error("ws_link_rx_gbn: REFRESH must be 1 .. 2^24");
        if (INIT_POS[1:0] != 2'b00) $error("ws_link_rx_gbn: INIT_POS must be a multiple of 4");
    end

    reg [31:0]      expected_reg, expected_next;
    reg [31:0]      committed_reg, committed_next;
    reg [31:0]      advertised_reg, advertised_next;
    reg [31:0]      released_reg;
    reg             active_reg, active_next;
    reg             en_prev_reg;
    reg [31:0]      base_reg, base_next;
    reg [31:0]      len_reg, len_next;
    reg             refused_reg, refused_next;
    reg             nak_done_reg, nak_done_next;
    reg             nak_req_reg, nak_req_next;
    reg             reack_reg, reack_next;
    reg [UN_W-1:0]  unacked_reg, unacked_next;
    reg [AGE_W-1:0] age_reg, age_next;
    reg             armed_reg, armed_next;
    reg [REF_W-1:0] ref_cnt_reg, ref_cnt_next;
    reg [REF_W-1:0] ref_gap_reg, ref_gap_next;
    reg [31:0]      proof_reg, proof_next;

    // Window checks on the values offered at the enable edge.
    wire [31:0] len_m1 = win_len - 32'd1;
    wire [32:0] win_end = {1'b0, win_base} + {1'b0, win_len};
    wire        win_ok = (win_len & len_m1) == 32'd0 && win_len >= 32'd64 && win_len <= 32'h4000_0000
                         && (win_base & len_m1) == 32'd0 && win_end <= DMA_BYTES_W;

    wire [31:0] credit_now = released_reg + (active_reg ? len_reg : 32'd0);
    wire [31:0] max_frame = (max_payload == 17'd0) ? 32'd1 : {15'd0, max_payload};
    wire [31:0] grown = credit_now - advertised_reg;
    wire [31:0] short_d = advertised_reg - committed_reg;
    // seq_diff(advertised, committed) < max_frame, signed (max_frame is below 2^17).
    wire        peer_short = short_d[31] || short_d < max_frame;
    wire        due_grow = active_reg && grown != 32'd0 && (grown >= max_frame || peer_short);
    wire        due_ref = armed_reg && ref_cnt_reg == {REF_W{1'b0}};

    assign expected = expected_reg;
    assign committed = committed_reg;
    assign credit = credit_now;
    assign active = active_reg;
    assign base = base_reg;
    assign mask = len_reg - 32'd1;
    assign nak_avail = !nak_done_reg;
    assign ack_req = nak_req_reg || reack_reg || unacked_reg >= ACK_EVERY_W
                     || (unacked_reg != {UN_W{1'b0}} && age_reg >= ACK_DELAY_W) || due_grow || due_ref;
    assign ack_req_nak = nak_req_reg;
    assign refused = refused_reg;

    reg [31:0]      end_pos;
    reg [31:0]      proof_d;
    reg [REF_W:0]   gap2;

    always @* begin
        expected_next = expected_reg;
        committed_next = committed_reg;
        advertised_next = advertised_reg;
        nak_done_next = nak_done_reg;
        nak_req_next = nak_req_reg;
        reack_next = reack_reg;
        unacked_next = unacked_reg;
        age_next = (age_reg < ACK_DELAY_W) ? age_reg + {{(AGE_W - 1){1'b0}}, 1'b1} : age_reg;
        armed_next = armed_reg;
        ref_gap_next = ref_gap_reg;
        ref_cnt_next = (armed_reg && ref_cnt_reg != {REF_W{1'b0}}) ?
                       ref_cnt_reg - {{(REF_W - 1){1'b0}}, 1'b1} : ref_cnt_reg;
        proof_next = proof_reg;
        gap2 = {ref_gap_reg, 1'b0};

        // The ACK first (gbn::Receiver::ack).
        if (ack_sent) begin
            if (credit_now != advertised_reg && peer_short) begin
                armed_next = 1'b1;
                proof_next = advertised_reg;
                ref_gap_next = REFRESH_W;
                ref_cnt_next = REFRESH_W - {{(REF_W - 1){1'b0}}, 1'b1};
            end else if (armed_reg) begin
                ref_gap_next = (gap2 > {1'b0, REF_MAX_W}) ? REF_MAX_W : gap2[REF_W-1:0];
                ref_cnt_next = ref_gap_next - {{(REF_W - 1){1'b0}}, 1'b1};
            end
            advertised_next = credit_now;
            unacked_next = {UN_W{1'b0}};
            reack_next = 1'b0;
            nak_req_next = 1'b0;
        end

        // Then the verdict on a frame (gbn::Receiver::on_data / on_bad_frame).
        end_pos = committed_reg + {15'd0, acc_len};
        proof_d = end_pos - proof_next;
        if (acc) begin
            committed_next = end_pos;
            expected_next = expected_reg + 32'd1;
            nak_done_next = 1'b0;
            nak_req_next = 1'b0;
            // seq_lt(proof, end): the sender used credit it had only from the grant.
            if (armed_next && !proof_d[31] && proof_d != 32'd0) begin
                armed_next = 1'b0;
            end
            if (unacked_next == {UN_W{1'b0}}) begin
                age_next = {{(AGE_W - 1){1'b0}}, 1'b1};
            end
            if (unacked_next < ACK_EVERY_W) begin
                unacked_next = unacked_next + {{(UN_W - 1){1'b0}}, 1'b1};
            end
        end
        if (dup) begin
            reack_next = 1'b1;
        end
        if (gap && !nak_done_reg) begin
            nak_done_next = 1'b1;
            nak_req_next = 1'b1;
        end

        // Window enable.
        active_next = active_reg;
        base_next = base_reg;
        len_next = len_reg;
        refused_next = 1'b0;
        if (!win_en) begin
            active_next = 1'b0;
        end else if (!en_prev_reg) begin
            if (win_ok) begin
                active_next = 1'b1;
                base_next = win_base;
                len_next = win_len;
            end else begin
                refused_next = 1'b1;
            end
        end

        // HELLO without RESUME: seq 0 (INIT_SEQ) and zero bytes; the credit of an open window
        // counts as advertised, as the HELLO reply carries it.
        if (ch_reset) begin
            expected_next = INIT_SEQ;
            committed_next = INIT_POS;
            advertised_next = INIT_POS + (active_reg ? len_reg : 32'd0);
            nak_done_next = 1'b0;
            nak_req_next = 1'b0;
            reack_next = 1'b0;
            unacked_next = {UN_W{1'b0}};
            age_next = {AGE_W{1'b0}};
            armed_next = 1'b0;
            ref_cnt_next = {REF_W{1'b0}};
            ref_gap_next = {REF_W{1'b0}};
        end
    end

    always @(posedge clk) begin
        expected_reg <= expected_next;
        committed_reg <= committed_next;
        advertised_reg <= advertised_next;
        released_reg <= released;
        active_reg <= active_next;
        en_prev_reg <= win_en;
        base_reg <= base_next;
        len_reg <= len_next;
        refused_reg <= refused_next;
        nak_done_reg <= nak_done_next;
        nak_req_reg <= nak_req_next;
        reack_reg <= reack_next;
        unacked_reg <= unacked_next;
        age_reg <= age_next;
        armed_reg <= armed_next;
        ref_cnt_reg <= ref_cnt_next;
        ref_gap_reg <= ref_gap_next;
        proof_reg <= proof_next;

        if (rst) begin
            expected_reg <= INIT_SEQ;
            committed_reg <= INIT_POS;
            advertised_reg <= INIT_POS;
            released_reg <= INIT_POS;
            active_reg <= 1'b0;
            en_prev_reg <= 1'b0;
            base_reg <= 32'd0;
            len_reg <= 32'd64;
            refused_reg <= 1'b0;
            nak_done_reg <= 1'b0;
            nak_req_reg <= 1'b0;
            reack_reg <= 1'b0;
            unacked_reg <= {UN_W{1'b0}};
            age_reg <= {AGE_W{1'b0}};
            armed_reg <= 1'b0;
            ref_cnt_reg <= {REF_W{1'b0}};
            ref_gap_reg <= {REF_W{1'b0}};
            proof_reg <= 32'd0;
        end
    end

endmodule

`default_nettype wire
