`default_nettype none

// ws_link_rx_hist: the receive engine's history ring, a word FIFO that can rewind.
//
// Every PHY word goes through it. The parser (ws_link_rx) reads words in order, and when a
// candidate frame is refused (bad hcrc, a bad header field, or a bad pcrc) it rewinds the
// read pointer to one byte after the candidate's magic, so a frame that starts inside the
// refused one is still found: docs/link.md "Receiving", steps 2 to 4. The words the parser
// may still rewind to are those from `keep_ptr` on; the ring never overwrites them, so
// `s_ready` falls when the unread words plus the kept ones fill it.
//
// Pointers are word indices of the stream, modulo 2^(AW+1): word i holds stream bytes
// 4i..4i+3, so the parser derives them from its byte positions (bits AW+2:2). The storage
// is read synchronously into an output register (block RAM), as in ws_fifo: a word written
// in cycle N is offered in cycle N+2, one word per cycle after that.
module ws_link_rx_hist #(
    parameter WORDS = 1024  // ring words; a power of two >= 32
) (
    input  wire                     clk,
    input  wire                     rst,

    // PHY words in.
    input  wire                     s_valid,
    output wire                     s_ready,
    input  wire [31:0]              s_data,

    // Words out, in stream order from the read pointer.
    output wire                     m_valid,
    input  wire                     m_ready,
    output wire [31:0]              m_data,

    // Rewind: the next word offered is the one at rewind_ptr (drops the output register).
    input  wire                     rewind,
    input  wire [$clog2(WORDS):0]   rewind_ptr,
    // Oldest word the parser may still rewind to; the ring keeps it and everything after.
    input  wire [$clog2(WORDS):0]   keep_ptr
);

    localparam AW = $clog2(WORDS);

    initial begin
        if (WORDS < 32 || (WORDS & (WORDS - 1)) != 0) begin
            $error("ws_link_rx_hist: WORDS must be a power of two >= 32");
        end
    end

    reg [31:0]  mem [0:WORDS-1];
    reg [AW:0]  wr_reg;
    reg [AW:0]  rd_reg, rd_next;
    reg         out_valid_reg, out_valid_next;
    reg [31:0]  out_data_reg;

    // Kept and unread words never exceed WORDS, so the top bit of the difference is "full".
    wire [AW:0] used = wr_reg - keep_ptr;
    wire        push = s_valid && s_ready;
    wire        fill = !rewind && (rd_reg != wr_reg) && (!out_valid_reg || m_ready);

    assign s_ready = !used[AW];
    assign m_valid = out_valid_reg;
    assign m_data = out_data_reg;

    always @* begin
        if (rewind) begin
            rd_next = rewind_ptr;
            out_valid_next = 1'b0;
        end else begin
            rd_next = rd_reg + {{AW{1'b0}}, fill};
            out_valid_next = fill || (out_valid_reg && !m_ready);
        end
    end

    // The array and the output register have no reset, as block RAM has none.
    always @(posedge clk) begin
        if (push) begin
            mem[wr_reg[AW-1:0]] <= s_data;
        end
        if (fill) begin
            out_data_reg <= mem[rd_reg[AW-1:0]];
        end

        wr_reg <= wr_reg + {{AW{1'b0}}, push};
        rd_reg <= rd_next;
        out_valid_reg <= out_valid_next;

        if (rst) begin
            wr_reg <= {(AW + 1){1'b0}};
            rd_reg <= {(AW + 1){1'b0}};
            out_valid_reg <= 1'b0;
        end
    end

endmodule

`default_nettype wire
