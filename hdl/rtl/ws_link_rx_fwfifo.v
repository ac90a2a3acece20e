`default_nettype none

// ws_link_rx_fwfifo: the firmware RX FIFO, written a frame at a time with rollback.
//
// Channel 0/1/7 frames go to the firmware whole: six header words, then the padded payload,
// and only after their pcrc has passed (docs/link.md "Engine internals", "Firmware frames").
// The engine writes each word as it arrives at a tentative tail (`wr_en`); `commit` makes
// every word written so far visible to the reader, `rollback` throws the tentative ones away.
// The reader sees committed words only, so no partial frame is ever visible.
//
// `free` is the room a new frame may use, DEPTH minus the committed words still in the array;
// the engine checks a frame against it before writing and drops one that does not fit. The
// read side is ws_fifo's: a synchronous read into an output register (block RAM), a word
// committed in cycle N is offered in cycle N+2, and `level` counts committed words not yet
// popped, the one in the output register included.
module ws_link_rx_fwfifo #(
    parameter DEPTH = 512  // words; a power of two >= 16
) (
    input  wire                         clk,
    input  wire                         rst,

    input  wire                         wr_en,
    input  wire [31:0]                  wr_data,
    input  wire                         commit,     // words written up to and in this cycle become visible
    input  wire                         rollback,   // drop the tentative words (and any write this cycle)
    output wire [$clog2(DEPTH+1)-1:0]   free,

    output wire                         m_valid,
    input  wire                         m_ready,
    output wire [31:0]                  m_data,
    output wire [$clog2(DEPTH+1)-1:0]   level
);

    localparam AW = $clog2(DEPTH);

    initial begin
        if (DEPTH < 16 || (DEPTH & (DEPTH - 1)) != 0) begin
            $error("ws_link_rx_fwfifo: DEPTH must be a power of two >= 16");
        end
    end

    reg [31:0]  mem [0:DEPTH-1];
    reg [AW:0]  wr_reg, wr_next;
    reg [AW:0]  cm_reg, cm_next;
    reg [AW:0]  rd_reg;
    reg         out_valid_reg;
    reg [31:0]  out_data_reg;

    wire        push = wr_en && !rollback;
    wire        fill = (rd_reg != cm_reg) && (!out_valid_reg || m_ready);
    wire [AW:0] held = cm_reg - rd_reg;

    // DEPTH is a power of two, so it is 1 << AW in AW+1 bits.
    localparam [AW:0] DEPTH_W = {1'b1, {AW{1'b0}}};

    assign free = DEPTH_W - held;
    assign level = held + {{AW{1'b0}}, out_valid_reg};
    assign m_valid = out_valid_reg;
    assign m_data = out_data_reg;

    always @* begin
        wr_next = rollback ? cm_reg : wr_reg + {{AW{1'b0}}, push};
        cm_next = (commit && !rollback) ? wr_reg + {{AW{1'b0}}, push} : cm_reg;
    end

    // The array and the output register have no reset, as block RAM has none.
    always @(posedge clk) begin
        if (push) begin
            mem[wr_reg[AW-1:0]] <= wr_data;
        end
        if (fill) begin
            out_data_reg <= mem[rd_reg[AW-1:0]];
        end

        wr_reg <= wr_next;
        cm_reg <= cm_next;
        rd_reg <= rd_reg + {{AW{1'b0}}, fill};
        out_valid_reg <= fill || (out_valid_reg && !m_ready);

        if (rst) begin
            wr_reg <= {(AW + 1){1'b0}};
            cm_reg <= {(AW + 1){1'b0}};
            rd_reg <= {(AW + 1){1'b0}};
            out_valid_reg <= 1'b0;
        end
    end

endmodule

`default_nettype wire
