`default_nettype none

// ws_async_fifo: dual-clock first-word-fall-through FIFO, valid/ready on both sides.
//
// The board PHY adapters use it to cross from a physical interface's own clock into the
// system clock (boards/ecp5-ft2232h/rtl/ws_phy_ft245.v: the FT2232H's 60 MHz CLKOUT), and
// it is meant for any other crossing of a word stream between unrelated clocks.
//
// The classic gray-pointer design: each side keeps a binary pointer with one extra bit and a
// registered gray copy of it; the gray copy crosses into the other domain through a
// two-flop synchroniser, so at most one bit of a crossing pointer changes per source clock
// and a synchroniser sampling mid-change sees either the old or the new value, never a
// mixture. Both flags are pessimistic: the write side sees the read pointer late (the FIFO
// looks fuller than it is), the read side sees the write pointer late (emptier), so neither
// overflows nor underflows; the cost is two or three cycles of the destination clock of
// latency per pointer.
//
// The read side moves the head word into an output register (as ws_fifo does), so the array
// is read synchronously in m_clk and maps onto block RAM; that register holds one word more
// than DEPTH. The read pointer that crosses back counts words moved out of the array.
//
// Resets: s_rst and m_rst are synchronous to their own clocks. Both must be asserted
// together for at least three cycles of the slower clock, so that neither side comes out of
// reset holding a pointer the other has forgotten.
//
// Timing constraints (not expressible here): the gray pointers into the synchronisers need a
// max-delay of one destination period and no clock-relationship analysis
// (Vivado: set_max_delay -datapath_only; nextpnr: the two clocks are unrelated and the
// paths are short by construction).
module ws_async_fifo #(
    parameter DEPTH = 16,  // capacity of the array in words; a power of two, at least 4
    parameter WIDTH = 32   // bits per word
) (
    input  wire             s_clk,
    input  wire             s_rst,
    input  wire             s_valid,
    output wire             s_ready,
    input  wire [WIDTH-1:0] s_data,

    input  wire             m_clk,
    input  wire             m_rst,
    output wire             m_valid,
    input  wire             m_ready,
    output wire [WIDTH-1:0] m_data
);

    localparam ADDR_WIDTH = $clog2(DEPTH);
    localparam PTR_WIDTH = ADDR_WIDTH + 1;

    initial begin
        if (DEPTH < 4 || (DEPTH & (DEPTH - 1)) != 0) begin
            $error("ws_async_fifo: DEPTH must be a power of two >= 4");
        end
        if (WIDTH < 1) $error("ws_async_fifo: WIDTH must be at least 1");
    end

    function [PTR_WIDTH-1:0] bin2gray(input [PTR_WIDTH-1:0] b);
        bin2gray = b ^ (b >> 1);
    endfunction

    function [PTR_WIDTH-1:0] gray2bin(input [PTR_WIDTH-1:0] g);
        integer i;
        begin
            gray2bin[PTR_WIDTH-1] = g[PTR_WIDTH-1];
            for (i = PTR_WIDTH - 2; i >= 0; i = i - 1) begin
                gray2bin[i] = gray2bin[i+1] ^ g[i];
            end
        end
    endfunction

    reg [WIDTH-1:0] mem [0:DEPTH-1];

    // ------------------------------------------------------------------ write side (s_clk)

    reg  [PTR_WIDTH-1:0] wr_bin_reg;
    reg  [PTR_WIDTH-1:0] wr_gray_reg;
    (* async_reg = "true" *) reg [PTR_WIDTH-1:0] rd_gray_meta_reg;
    (* async_reg = "true" *) reg [PTR_WIDTH-1:0] rd_gray_sync_reg;

    wire [PTR_WIDTH-1:0] rd_bin_in_s = gray2bin(rd_gray_sync_reg);
    wire [PTR_WIDTH-1:0] wr_used = wr_bin_reg - rd_bin_in_s;
    wire                 push = s_valid && s_ready;
    wire [PTR_WIDTH-1:0] wr_bin_next = wr_bin_reg + {{ADDR_WIDTH{1'b0}}, push};

    // The top bit of (write - read) is set exactly when the array holds DEPTH words.
    assign s_ready = !wr_used[PTR_WIDTH-1];

    always @(posedge s_clk) begin
        if (push) begin
            mem[wr_bin_reg[ADDR_WIDTH-1:0]] <= s_data;
        end
        wr_bin_reg <= wr_bin_next;
        wr_gray_reg <= bin2gray(wr_bin_next);
        rd_gray_meta_reg <= rd_gray_reg;
        rd_gray_sync_reg <= rd_gray_meta_reg;
        if (s_rst) begin
            wr_bin_reg <= {PTR_WIDTH{1'b0}};
            wr_gray_reg <= {PTR_WIDTH{1'b0}};
            rd_gray_meta_reg <= {PTR_WIDTH{1'b0}};
            rd_gray_sync_reg <= {PTR_WIDTH{1'b0}};
        end
    end

    // ------------------------------------------------------------------ read side (m_clk)

    reg  [PTR_WIDTH-1:0] rd_bin_reg;
    reg  [PTR_WIDTH-1:0] rd_gray_reg;
    (* async_reg = "true" *) reg [PTR_WIDTH-1:0] wr_gray_meta_reg;
    (* async_reg = "true" *) reg [PTR_WIDTH-1:0] wr_gray_sync_reg;
    reg                  out_valid_reg;
    reg  [WIDTH-1:0]     out_data_reg;

    wire [PTR_WIDTH-1:0] wr_bin_in_m = gray2bin(wr_gray_sync_reg);
    // Refill the output register whenever it is (or is becoming) empty.
    wire                 fill = (rd_bin_reg != wr_bin_in_m) && (!out_valid_reg || m_ready);
    wire [PTR_WIDTH-1:0] rd_bin_next = rd_bin_reg + {{ADDR_WIDTH{1'b0}}, fill};

    assign m_valid = out_valid_reg;
    assign m_data = out_data_reg;

    // The array and the output data register have no reset, as block RAM has none.
    always @(posedge m_clk) begin
        if (fill) begin
            out_data_reg <= mem[rd_bin_reg[ADDR_WIDTH-1:0]];
        end
        out_valid_reg <= fill || (out_valid_reg && !m_ready);
        rd_bin_reg <= rd_bin_next;
        rd_gray_reg <= bin2gray(rd_bin_next);
        wr_gray_meta_reg <= wr_gray_reg;
        wr_gray_sync_reg <= wr_gray_meta_reg;
        if (m_rst) begin
            out_valid_reg <= 1'b0;
            rd_bin_reg <= {PTR_WIDTH{1'b0}};
            rd_gray_reg <= {PTR_WIDTH{1'b0}};
            wr_gray_meta_reg <= {PTR_WIDTH{1'b0}};
            wr_gray_sync_reg <= {PTR_WIDTH{1'b0}};
        end
    end

endmodule

`default_nettype wire
