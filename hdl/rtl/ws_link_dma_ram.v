`default_nettype none

// ws_link_dma_ram: the link engine's DMA RAM (docs/link-engine.md), a simple dual-port
// synchronous RAM of DMA_BYTES: one write port (the RX half's DMA writes, or the external
// port when RX is idle) and one read port (the TX half's DMA reads, or the external port when
// TX is idle), read data one cycle after `re`. One write-only plus one read-only port is the
// shape FPGA block RAM (ECP5 DP16KD in pseudo-dual-port mode, Xilinx simple dual port) maps
// without glue; ws_link.v arbitrates the third user onto the two ports.
//
// A read and a write of the same address in one cycle return the old word: the engine never
// does that (RX writes only the uncommitted tail, TX reads only committed, unacknowledged
// bytes), so the RAM need not define it otherwise.
module ws_link_dma_ram #(
    parameter DMA_BYTES = 65536     // size in bytes; a power of two 256 .. 2^30
) (
    input  wire                         clk,

    input  wire                         we,
    input  wire [$clog2(DMA_BYTES)-3:0] waddr,  // word address
    input  wire [31:0]                  wdata,

    input  wire                         re,
    input  wire [$clog2(DMA_BYTES)-3:0] raddr,  // word address
    output wire [31:0]                  rdata   // the word at raddr, one cycle after re
);

    localparam WORDS = DMA_BYTES / 4;

    initial begin
        if (DMA_BYTES < 256 || DMA_BYTES > (1 << 30) || (DMA_BYTES & (DMA_BYTES - 1)) != 0)
            $error("ws_link_dma_ram: DMA_BYTES must be a power of two in 256 .. 2^30");
    end

    reg [31:0] mem [0:WORDS-1];
    reg [31:0] rdata_reg;

    always @(posedge clk) begin
        if (we) mem[waddr] <= wdata;
        if (re) rdata_reg <= mem[raddr];
    end

    assign rdata = rdata_reg;

endmodule

`default_nettype wire
