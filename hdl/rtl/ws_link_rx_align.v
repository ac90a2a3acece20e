`default_nettype none

// ws_link_rx_align: the receive engine's byte aligner.
//
// Frames are whole words, but a lost byte shifts every later frame off the word grid, so the
// engine hunts for the magic at byte granularity (docs/link.md "Frame", "Receiving" step 1).
// This block holds up to 16 stream bytes and shows the oldest 8 (`bytes`, byte 0 in bits
// 7:0) with their `count`; each cycle the parser takes `consume` bytes (0..7, never more than
// `count`) off the front: 4 for a frame word at any byte offset, up to 7 when the hunt finds a
// magic at offset 0..3 and takes that header word too. A word comes in whenever at most 12
// bytes are held, so a parser taking 4 bytes per cycle never waits for the aligner.
//
// `flush` empties it (a rewind of the history ring) and says how many bytes of the next word
// to drop (`flush_skip`), so the byte after a refused magic becomes byte 0 again.
module ws_link_rx_align (
    input  wire         clk,
    input  wire         rst,

    // Words from the history ring.
    input  wire         s_valid,
    output wire         s_ready,
    input  wire [31:0]  s_data,

    input  wire         flush,
    input  wire [1:0]   flush_skip,
    input  wire [2:0]   consume,

    output wire [63:0]  bytes,
    output wire [4:0]   count
);

    // Bytes at and above n_reg are zero, so a new word is ORed in at its place.
    reg [127:0] buf_reg, buf_next;
    reg [4:0]   n_reg, n_next;
    reg [1:0]   skip_reg, skip_next;

    reg [127:0] rest;
    reg [4:0]   n_rest;
    reg [31:0]  ins;

    wire take = s_valid && s_ready;

    assign s_ready = (n_reg <= 5'd12) && !flush;
    assign bytes = buf_reg[63:0];
    assign count = n_reg;

    always @* begin
        rest = buf_reg >> {consume, 3'b000};
        n_rest = n_reg - {2'b00, consume};
        ins = s_data >> {skip_reg, 3'b000};

        buf_next = rest;
        n_next = n_rest;
        skip_next = skip_reg;
        if (take) begin
            buf_next = rest | ({96'd0, ins} << {n_rest, 3'b000});
            n_next = n_rest + 5'd4 - {3'b000, skip_reg};
            skip_next = 2'd0;
        end
        if (flush) begin
            buf_next = 128'd0;
            n_next = 5'd0;
            skip_next = flush_skip;
        end
    end

    always @(posedge clk) begin
        buf_reg <= buf_next;
        n_reg <= n_next;
        skip_reg <= skip_next;

        if (rst) begin
            buf_reg <= 128'd0;
            n_reg <= 5'd0;
            skip_reg <= 2'd0;
        end
    end

endmodule

`default_nettype wire
