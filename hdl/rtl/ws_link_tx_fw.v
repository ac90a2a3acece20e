`default_nettype none

// ws_link_tx_fw: the firmware TX FIFO of the link engine (docs/link.md "Engine internals",
// Firmware frames). ws_link_tx reads frames of channels 0, 1, 5 (and 7) out of it.
//
// The firmware pushes header words 0..4 of a frame (hcrc and pcrc are the engine's), then the
// payload zero padded to whole words, and pulses `commit`. Frames are delimited by the length
// in header word 1, parsed as the words are written: when a frame's last word is in, its
// descriptor (channel, length) joins a queue, and `commit` makes every complete frame written
// so far eligible (several frames may share one commit; a frame completed in the commit's own
// cycle is included). The arbiter therefore never starts a half-written frame, and it knows a
// frame's length without reading the FIFO.
//
// Headers are checked as they arrive, like a receiver would (docs/link.md "Frame"): magic
// "WS", version 2, a firmware channel (0, 1, 5 or the reserved 7: a bulk channel's seq space
// is the hardware's), valid flags (no bits 6-7, HELLO only on channel 0, RETX only with DATA,
// a payload only with DATA, HELLO or ERROR) and a length of at most 1024 (MAX_CTRL_PAYLOAD).
// A malformed header's frame length cannot be trusted, so everything pushed from it up to the
// next `commit` is dropped (accepted and discarded, never stored), `dropped` pulses once, and
// the words of it already stored are given back. Complete frames before it stay eligible.
//
// Storage is one simple dual-port RAM (block RAM on an FPGA) of DEPTH words, read one word
// per `rd_en` with the data in the next cycle; space is freed as words are read.
module ws_link_tx_fw #(
    parameter DEPTH = 512   // words; a power of two >= 512 (a 1024-byte frame is 261 words)
) (
    input  wire                         clk,
    input  wire                         rst,

    input  wire                         s_valid,
    output wire                         s_ready,
    input  wire [31:0]                  s_data,
    input  wire                         commit,
    output wire [FREE_W-1:0]            free,       // words that can be pushed now

    output wire                         frame_avail,    // a committed frame waits
    output wire [2:0]                   frame_ch,       // its channel
    output wire [10:0]                  frame_len,      // its payload bytes, 0..1024
    input  wire                         frame_pop,      // the arbiter took it

    input  wire                         rd_en,          // read the next stored word
    output wire [31:0]                  rd_data,        // ... here, one cycle later

    output wire                         dropped         // a malformed header was refused
);

    localparam AW = $clog2(DEPTH);
    localparam FREE_W = $clog2(DEPTH + 1);
    // A frame takes at least 5 words, so DEPTH / 4 descriptors can never all be in use.
    localparam DQ = DEPTH / 4;
    localparam DAW = $clog2(DQ);

    initial begin
        if (DEPTH < 512 || (DEPTH & (DEPTH - 1)) != 0)
            $error("ws_link_tx_fw: DEPTH must be a power of two >= 512");
    end

    reg [31:0]  mem [0:DEPTH-1];
    reg [31:0]  rd_data_reg;
    reg [13:0]  desc_mem [0:DQ-1];

    reg [AW:0]  wr_ptr_reg, wr_ptr_next;
    reg [AW:0]  start_ptr_reg, start_ptr_next;      // where the frame being written began
    reg [AW:0]  rd_ptr_reg;
    reg [2:0]   wpos_reg, wpos_next;                // header word 0..4, or 5 = payload
    reg [8:0]   wleft_reg, wleft_next;              // payload words still to come
    reg [2:0]   wch_reg, wch_next;
    reg [10:0]  wlen_reg, wlen_next;
    reg         discard_reg, discard_next;
    reg [DAW:0] dwr_ptr_reg, dwr_ptr_next;
    reg [DAW:0] dcm_ptr_reg, dcm_ptr_next;
    reg [DAW:0] drd_ptr_reg;

    reg         store;
    reg         done;
    reg         bad;

    wire [AW:0] used = wr_ptr_reg - rd_ptr_reg;
    wire        full = used[AW];
    wire        push = s_valid && s_ready;

    assign s_ready = discard_reg || !full;
    assign free = {1'b0, {AW{1'b1}}} - used + 1'b1;

    // Header checks (ws_common::link::Header::check).
    wire [7:0]  w_flags = s_data[7:0];
    wire [23:0] w_len = s_data[31:8];
    wire        bad_w0 = s_data[15:0] != 16'h5357 || s_data[23:16] != 8'd2 ||
                         !(s_data[31:24] == 8'd0 || s_data[31:24] == 8'd1 ||
                           s_data[31:24] == 8'd5 || s_data[31:24] == 8'd7);
    wire        bad_w1 = w_flags[7:6] != 2'b00 ||
                         (w_flags[3] && wch_reg != 3'd0) ||
                         (w_flags[4] && !w_flags[0]) ||
                         (w_len != 24'd0 && (w_flags & 8'h29) == 8'h00) ||
                         w_len > 24'd1024;

    always @* begin
        wr_ptr_next = wr_ptr_reg;
        start_ptr_next = start_ptr_reg;
        wpos_next = wpos_reg;
        wleft_next = wleft_reg;
        wch_next = wch_reg;
        wlen_next = wlen_reg;
        discard_next = discard_reg;
        dwr_ptr_next = dwr_ptr_reg;
        dcm_ptr_next = dcm_ptr_reg;
        store = 1'b0;
        done = 1'b0;
        bad = 1'b0;

        if (push && !discard_reg) begin
            case (wpos_reg)
                3'd0: begin
                    bad = bad_w0;
                    wch_next = s_data[26:24];
                end
                3'd1: begin
                    bad = bad_w1;
                    wlen_next = w_len[10:0];
                    wleft_next = w_len[10:2] + {8'd0, w_len[1:0] != 2'b00};
                end
                3'd4: done = wleft_reg == 9'd0;
                3'd5: done = wleft_reg == 9'd1;
                default: ;
            endcase
            if (bad) begin
                discard_next = 1'b1;
                wr_ptr_next = start_ptr_reg;
                wpos_next = 3'd0;
            end else begin
                store = 1'b1;
                wr_ptr_next = wr_ptr_reg + 1'b1;
                if (wpos_reg == 3'd5) wleft_next = wleft_reg - 9'd1;
                if (done) begin
                    wpos_next = 3'd0;
                    start_ptr_next = wr_ptr_reg + 1'b1;
                    dwr_ptr_next = dwr_ptr_reg + 1'b1;
                end else if (wpos_reg != 3'd5) begin
                    wpos_next = wpos_reg + 3'd1;
                end
            end
        end

        if (commit) begin
            dcm_ptr_next = dwr_ptr_next;
            discard_next = 1'b0;
        end
    end

    assign dropped = bad;

    always @(posedge clk) begin
        if (store) mem[wr_ptr_reg[AW-1:0]] <= s_data;
        if (rd_en) rd_data_reg <= mem[rd_ptr_reg[AW-1:0]];
        if (done) desc_mem[dwr_ptr_reg[DAW-1:0]] <= {wch_reg, wlen_reg};
    end

    wire [13:0] head = desc_mem[drd_ptr_reg[DAW-1:0]];

    assign frame_avail = drd_ptr_reg != dcm_ptr_reg;
    assign frame_ch = head[13:11];
    assign frame_len = head[10:0];
    assign rd_data = rd_data_reg;

    always @(posedge clk) begin
        wr_ptr_reg <= wr_ptr_next;
        start_ptr_reg <= start_ptr_next;
        wpos_reg <= wpos_next;
        wleft_reg <= wleft_next;
        wch_reg <= wch_next;
        wlen_reg <= wlen_next;
        discard_reg <= discard_next;
        dwr_ptr_reg <= dwr_ptr_next;
        dcm_ptr_reg <= dcm_ptr_next;
        if (rd_en) rd_ptr_reg <= rd_ptr_reg + 1'b1;
        if (frame_pop) drd_ptr_reg <= drd_ptr_reg + 1'b1;

        if (rst) begin
            wr_ptr_reg <= {(AW + 1){1'b0}};
            start_ptr_reg <= {(AW + 1){1'b0}};
            rd_ptr_reg <= {(AW + 1){1'b0}};
            wpos_reg <= 3'd0;
            wleft_reg <= 9'd0;
            wch_reg <= 3'd0;
            wlen_reg <= 11'd0;
            discard_reg <= 1'b0;
            dwr_ptr_reg <= {(DAW + 1){1'b0}};
            dcm_ptr_reg <= {(DAW + 1){1'b0}};
            drd_ptr_reg <= {(DAW + 1){1'b0}};
        end
    end

endmodule

`default_nettype wire
