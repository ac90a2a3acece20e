`default_nettype none

// ws_mesh_pe_sram: the local SRAM of one wafer-mesh processing element (ws_mesh_pe), WORDS
// 32-bit words with one write port and one read port, read data one cycle after the request.
// One write plus one read port is the simple-dual-port shape ECP5 DP16KD / PDPW16KD maps
// without glue: the PE's FMA reads one activation per cycle while it writes one result.
module ws_mesh_pe_sram #(
    parameter WORDS = 2048,             // size in 32-bit words, >= 2
    parameter AW = $clog2(WORDS)        // address bits (derived)
) (
    input  wire          clk,

    input  wire          wr_en,
    input  wire [AW-1:0] wr_addr,
    input  wire [31:0]   wr_data,

    input  wire          rd_en,
    input  wire [AW-1:0] rd_addr,
    output reg  [31:0]   rd_data
);

    initial begin
        if (WORDS < 2) $error("ws_mesh_pe_sram: WORDS must be >= 2");
    end

    reg [31:0] mem [0:WORDS-1];

    always @(posedge clk) begin
        if (wr_en) mem[wr_addr] <= wr_data;
        if (rd_en) rd_data <= mem[rd_addr];
    end

endmodule

`default_nettype wire
