`default_nettype none

// ws_ram: the SoC main RAM, one read port and one read/write port with byte enables.
//
// It sits behind ws_obi_xbar at 0x1000_0000 (docs/soc.md "Memory map"). Port A serves CV32E40P
// instruction fetch and never writes, port B serves core data and debug system-bus accesses.
// Both ports are always ready and return read data exactly one cycle after the request, which is
// the contract of every slave on the crossbar. One read-only plus one read/write port is the
// shape FPGA block RAM (ECP5 DP16KD, Xilinx RAMB36 in true-dual-port mode) maps without glue.
//
// The array must stay a plain `reg [31:0] mem [0:WORDS-1]` named `mem`: the Verilator
// simulation loads firmware into it through the `public_flat_rw` hook in hdl/lint/soc.vlt.
module ws_ram #(
    parameter RAM_BYTES = 256 * 1024  // size in bytes; a power of two, at least 8
) (
    input  wire                       clk,
    input  wire                       rst,

    // Port A: read only (instruction fetch). Word address.
    input  wire                       a_req,
    input  wire [$clog2(RAM_BYTES)-3:0] a_addr,
    output wire [31:0]                a_rdata,

    // Port B: read/write with byte enables (data and system-bus access). Word address.
    input  wire                       b_req,
    input  wire                       b_we,
    input  wire [$clog2(RAM_BYTES)-3:0] b_addr,
    input  wire [3:0]                 b_be,
    input  wire [31:0]                b_wdata,
    output wire [31:0]                b_rdata
);

    localparam WORDS = RAM_BYTES / 4;

    initial begin
        if (RAM_BYTES < 8 || (RAM_BYTES & (RAM_BYTES - 1)) != 0) begin
            $error("ws_ram: RAM_BYTES must be a power of two >= 8");
        end
    end

    reg [31:0] mem [0:WORDS-1];

    reg [31:0] a_rdata_reg;
    reg [31:0] b_rdata_reg;

    assign a_rdata = a_rdata_reg;
    assign b_rdata = b_rdata_reg;

    // No reset on purpose: block RAM output registers have none, and the contents must survive
    // a core reset (the debugger loads firmware, then resets the core into it).
    always @(posedge clk) begin
        if (a_req) begin
            a_rdata_reg <= mem[a_addr];
        end
    end

    // Read-first on port B: a write returns the old word, which the bus ignores anyway.
    always @(posedge clk) begin
        if (b_req) begin
            if (b_we) begin
                if (b_be[0]) mem[b_addr][7:0] <= b_wdata[7:0];
                if (b_be[1]) mem[b_addr][15:8] <= b_wdata[15:8];
                if (b_be[2]) mem[b_addr][23:16] <= b_wdata[23:16];
                if (b_be[3]) mem[b_addr][31:24] <= b_wdata[31:24];
            end
            b_rdata_reg <= mem[b_addr];
        end
    end

    // `rst` is part of the house port convention; memory contents are not reset.
    wire _unused_ok = &{1'b0, rst};

endmodule

`default_nettype wire
