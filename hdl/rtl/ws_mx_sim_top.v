`default_nettype none

// ws_mx_sim_top: MemoryX as the block testbench sees it: ws_mx_streamer with the simulation
// weight store ws_mx_mem_model behind its AXI4 port. The streams, the register port, the
// store's stall input and its backdoor are the top's ports; on a board the streamer's AXI
// port goes to the memory controller instead, and this top is not used.
module ws_mx_sim_top #(
    parameter LANES = 1,              // optimizer lanes, 1, 2 or 4
    parameter DATA_WIDTH = 256,       // store beat, bits (bytes per cycle x 8)
    parameter MEM_BYTES = 1 << 21,    // store size, a power of two
    parameter MEM_LATENCY = 24,       // AR to first R beat, cycles
    parameter MEM_TURNAROUND = 2,     // idle cycles on a read/write switch
    parameter MEM_BATCH = 4,          // bursts per direction before yielding
    parameter MAX_LAYERS = 16,        // layer table entries
    parameter NUM_SLOTS = 8,          // constant slots
    parameter DESC_DEPTH = 8,         // chunks in flight
    parameter MAX_BURST = 16,         // longest burst, beats
    parameter FIRST_BURST = 2,        // longest first burst of a chunk's array, beats
    parameter GRAD_DEPTH = 256        // gradient FIFO, beats
) (
    input  wire                        clk,
    input  wire                        rst,

    input  wire                        reg_req,
    input  wire                        reg_we,
    input  wire [11:0]                 reg_addr,
    input  wire [31:0]                 reg_wdata,
    input  wire [3:0]                  reg_be,
    output wire [31:0]                 reg_rdata,

    input  wire                        s_grad_valid,
    output wire                        s_grad_ready,
    input  wire [32*LANES-1:0]         s_grad_data,
    input  wire [LANES-1:0]            s_grad_keep,
    input  wire                        s_grad_last,
    input  wire [63:0]                 s_grad_user,

    output wire                        m_wout_valid,
    input  wire                        m_wout_ready,
    output wire [32*LANES-1:0]         m_wout_data,
    output wire [LANES-1:0]            m_wout_keep,
    output wire                        m_wout_last,
    output wire [63:0]                 m_wout_user,
    output wire                        m_wout_read,

    output wire                        m_trace_valid,
    input  wire                        m_trace_ready,
    output wire [159:0]                m_trace_data,
    output wire [63:0]                 m_trace_user,

    input  wire                        mem_stall,
    input  wire                        bd_en,
    input  wire                        bd_we,
    input  wire [$clog2(MEM_BYTES/(DATA_WIDTH/8))-1:0] bd_addr,
    input  wire [DATA_WIDTH-1:0]       bd_wdata,
    output wire [DATA_WIDTH-1:0]       bd_rdata,
    output wire                        mem_err_protocol
);

    wire [1:0]              arid, rid, awid, bid;
    wire [31:0]             araddr, awaddr;
    wire [7:0]              arlen, awlen;
    wire [2:0]              arsize, awsize;
    wire [1:0]              arburst, awburst, rresp, bresp;
    wire                    arvalid, arready, rlast, rvalid, rready;
    wire                    awvalid, awready, wlast, wvalid, wready, bvalid, bready;
    wire [DATA_WIDTH-1:0]   rdata, wdata;
    wire [DATA_WIDTH/8-1:0] wstrb;

    ws_mx_streamer #(
        .LANES(LANES),
        .DATA_WIDTH(DATA_WIDTH),
        .STORE_BYTES(MEM_BYTES),
        .MAX_LAYERS(MAX_LAYERS),
        .NUM_SLOTS(NUM_SLOTS),
        .DESC_DEPTH(DESC_DEPTH),
        .MAX_BURST(MAX_BURST),
        .FIRST_BURST(FIRST_BURST),
        .GRAD_DEPTH(GRAD_DEPTH)
    ) streamer_inst (
        .clk(clk),
        .rst(rst),
        .reg_req(reg_req),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata),
        .s_grad_valid(s_grad_valid),
        .s_grad_ready(s_grad_ready),
        .s_grad_data(s_grad_data),
        .s_grad_keep(s_grad_keep),
        .s_grad_last(s_grad_last),
        .s_grad_user(s_grad_user),
        .m_wout_valid(m_wout_valid),
        .m_wout_ready(m_wout_ready),
        .m_wout_data(m_wout_data),
        .m_wout_keep(m_wout_keep),
        .m_wout_last(m_wout_last),
        .m_wout_user(m_wout_user),
        .m_wout_read(m_wout_read),
        .m_trace_valid(m_trace_valid),
        .m_trace_ready(m_trace_ready),
        .m_trace_data(m_trace_data),
        .m_trace_user(m_trace_user),
        .m_axi_arid(arid),
        .m_axi_araddr(araddr),
        .m_axi_arlen(arlen),
        .m_axi_arsize(arsize),
        .m_axi_arburst(arburst),
        .m_axi_arvalid(arvalid),
        .m_axi_arready(arready),
        .m_axi_rid(rid),
        .m_axi_rdata(rdata),
        .m_axi_rresp(rresp),
        .m_axi_rlast(rlast),
        .m_axi_rvalid(rvalid),
        .m_axi_rready(rready),
        .m_axi_awid(awid),
        .m_axi_awaddr(awaddr),
        .m_axi_awlen(awlen),
        .m_axi_awsize(awsize),
        .m_axi_awburst(awburst),
        .m_axi_awvalid(awvalid),
        .m_axi_awready(awready),
        .m_axi_wdata(wdata),
        .m_axi_wstrb(wstrb),
        .m_axi_wlast(wlast),
        .m_axi_wvalid(wvalid),
        .m_axi_wready(wready),
        .m_axi_bid(bid),
        .m_axi_bresp(bresp),
        .m_axi_bvalid(bvalid),
        .m_axi_bready(bready)
    );

    ws_mx_mem_model #(
        .DATA_WIDTH(DATA_WIDTH),
        .ADDR_WIDTH(32),
        .ID_WIDTH(2),
        .MEM_BYTES(MEM_BYTES),
        .LATENCY(MEM_LATENCY),
        .TURNAROUND(MEM_TURNAROUND),
        .BATCH(MEM_BATCH)
    ) mem_inst (
        .clk(clk),
        .rst(rst),
        .stall(mem_stall),
        .s_axi_arid(arid),
        .s_axi_araddr(araddr),
        .s_axi_arlen(arlen),
        .s_axi_arsize(arsize),
        .s_axi_arburst(arburst),
        .s_axi_arvalid(arvalid),
        .s_axi_arready(arready),
        .s_axi_rid(rid),
        .s_axi_rdata(rdata),
        .s_axi_rresp(rresp),
        .s_axi_rlast(rlast),
        .s_axi_rvalid(rvalid),
        .s_axi_rready(rready),
        .s_axi_awid(awid),
        .s_axi_awaddr(awaddr),
        .s_axi_awlen(awlen),
        .s_axi_awsize(awsize),
        .s_axi_awburst(awburst),
        .s_axi_awvalid(awvalid),
        .s_axi_awready(awready),
        .s_axi_wdata(wdata),
        .s_axi_wstrb(wstrb),
        .s_axi_wlast(wlast),
        .s_axi_wvalid(wvalid),
        .s_axi_wready(wready),
        .s_axi_bid(bid),
        .s_axi_bresp(bresp),
        .s_axi_bvalid(bvalid),
        .s_axi_bready(bready),
        .bd_en(bd_en),
        .bd_we(bd_we),
        .bd_addr(bd_addr),
        .bd_wdata(bd_wdata),
        .bd_rdata(bd_rdata),
        .err_protocol(mem_err_protocol)
    );

endmodule

`default_nettype wire
