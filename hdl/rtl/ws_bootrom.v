`default_nettype none

// ws_bootrom: the boot ROM at 0x0000_0000, where CV32E40P starts after reset (boot_addr).
//
// It holds the boot stub from hdl/bootrom/bootrom.hex, loaded with $readmemh at elaboration, so
// simulators and FPGA tools both bake it in. It has two read ports, one for instruction fetch and
// one for data and debug system-bus reads (so the stub can also read constants it carries), and
// both answer exactly one cycle after the request, as every slave on ws_obi_xbar does. Writes
// never reach it: ws_soc routes only reads here and answers writes as unmapped.
module ws_bootrom #(
    parameter ROM_BYTES = 8 * 1024,        // size in bytes; a power of two, at least 8
    parameter BOOTROM_INIT = "bootrom.hex" // $readmemh image, one 32-bit word per line
) (
    input  wire                         clk,
    input  wire                         rst,

    // Port A: instruction fetch. Word address.
    input  wire                         a_req,
    input  wire [$clog2(ROM_BYTES)-3:0] a_addr,
    output wire [31:0]                  a_rdata,

    // Port B: data / system-bus reads. Word address.
    input  wire                         b_req,
    input  wire [$clog2(ROM_BYTES)-3:0] b_addr,
    output wire [31:0]                  b_rdata
);

    localparam WORDS = ROM_BYTES / 4;

    initial begin
        if (ROM_BYTES < 8 || (ROM_BYTES & (ROM_BYTES - 1)) != 0) begin
            $error("ws_bootrom: ROM_BYTES must be a power of two >= 8");
        end
    end

    reg [31:0] mem [0:WORDS-1];

    // Words the image does not cover come up zero in Verilator (zero-initialised state) and in
    // FPGA block RAM. No explicit zero-fill loop: yosys gives a loop in an initial block
    // priority over $readmemh and would blank the image.
    initial begin
        $readmemh(BOOTROM_INIT, mem);
    end

    reg [31:0] a_rdata_reg;
    reg [31:0] b_rdata_reg;

    assign a_rdata = a_rdata_reg;
    assign b_rdata = b_rdata_reg;

    always @(posedge clk) begin
        if (a_req) begin
            a_rdata_reg <= mem[a_addr];
        end
        if (b_req) begin
            b_rdata_reg <= mem[b_addr];
        end
    end

    // `rst` is part of the house port convention; a ROM has nothing to reset.
    wire _unused_ok = &{1'b0, rst};

endmodule

`default_nettype wire
