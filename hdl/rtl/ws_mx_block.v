`default_nettype none

// ws_mx_block: MemoryX as the SoC carries it (docs/memoryx-soc.md). The streamer
// (ws_mx_streamer, its layer-table registers in slot 16) and the data mover (ws_mx_dma,
// registers in slot 17) share the weight store through ws_mx_axi_arb. The data mover joins
// the store and the streamer's gradient and weight-out streams to the link engine's DMA RAM,
// so weights, state and gradients go between the host and the store without the CPU.
//
// The store here is ws_mx_mem_model, the simulation store (docs/memoryx-store.md "The
// simulation store"): the Verilated board's MemoryX memory. A board with DRAM replaces it with
// its memory controller on the same AXI4 port (mem_*); nothing else changes.
//
// SWARM_PORTS > 0 adds a SwarmX node (ws_swarm_block, register slot 24) between the data
// mover and the streamer (docs/memoryx-soc.md "SwarmX in the block"): a gradient feed with
// GRAD_ROUTE.ports = K goes to the node's downstream ports 0..K-1, the node's reduced
// uplink goes into the streamer, and with WOUT_CTRL.swarm the streamer's weight-out goes down
// the node's broadcast and the mover's sink takes port 0's copy. The wafers are not in the SoC:
// the other ports' broadcast outputs are always ready and count in the node's DN_FLITS.
//
// MESH_P > 0 adds MESH_W wafer meshes (ws_mx_wafers: ws_mesh_block each, register slots 25
// .. 25 + MESH_W - 1, MESH_P x MESH_P arrays; docs/mesh-array.md "In the SoC" and "Several
// wafers"): the data mover's ops 4 and 5 feed their weight and sample ingress from DMA rings,
// and with a mesh's CTRL.grad_capture its gradient egress takes the place of the streamer's
// weight-out at the mover's capture sink. With a mesh's CTRL.swarm (and SWARM_PORTS > 0) it is
// the wafer on its SwarmX port (wafer w on port SWARM_PORTS - 1 - w): op 4's weight flits go
// down the node's broadcast and reach every such wafer through its port, and their gradients
// go up the ports, through the node's reduction, into the streamer (docs/mesh-array.md "On
// SwarmX"). With WOUT_CTRL.reads the broadcast takes the streamer's STREAM chunks instead,
// straight from the store, while its updated weights go to the sink (docs/mesh-array.md
// "Weights from the store"), except those of layer WOUT_CTRL.fwd_layer with WOUT_CTRL.fwd:
// they go into the forward buffer (FWD_WORDS words) and from it down the broadcast ahead of
// any STREAM chunk, as the next step's forward weights of that layer (docs/mesh-array.md
// "Forwarding").
//
// The trace unit (ws_trace, register slot 18; docs/trace.md) watches the block's streams: the
// mover's feed, SwarmX's upstream input and output, every downstream port both ways, the
// streamer's gradient input and weight output, and takes the streamer's own per-chunk
// records. It writes one record per chunk per hop into link channel 6's window through the
// ext port (sharing it with the data mover, round robin) and drives that channel's ready
// position (link_tx_ready*), so the host receives the trace while the data plane runs.
module ws_mx_block #(
    parameter DATA_WIDTH = 256,       // store beat bits
    parameter STORE_BYTES = 1 << 20,  // weight store bytes, a power of two
    parameter DMA_BYTES = 65536,      // link DMA RAM bytes (ext port address width)
    parameter MEM_LATENCY = 24,       // simulation store: AR to first R, cycles
    parameter SWARM_PORTS = 0,        // SwarmX node's downstream ports; 0: no node
    parameter MESH_P = 0,             // wafer mesh side (MESH_P x MESH_P PEs); 0: no mesh
    parameter MESH_SRAM_WORDS = 2048, // each mesh PE's SRAM words
    parameter MESH_MAX_B = 4,         // sample slots per mesh PE
    parameter MESH_PROG_DEPTH = 16,   // each mesh PE's program store
    parameter MESH_W = 1,             // wafer meshes, 1..4 (with MESH_P > 0)
    parameter FWD_WORDS = 0,          // forward buffer words, 0 or a power of two >= 2
                                      // (SWARM_PORTS > 0 and MESH_P > 0; docs/mesh-array.md "Forwarding")
    parameter MW = (MESH_W > 0) ? MESH_W : 1  // width of the mesh register vectors (derived)
) (
    input  wire                         clk,
    input  wire                         rst,

    input  wire                         mx_reg_req,
    input  wire                         dma_reg_req,
    input  wire                         trace_reg_req,
    input  wire                         swarm_reg_req,
    input  wire [MW-1:0]                mesh_reg_req,
    input  wire                         reg_we,
    input  wire [11:0]                  reg_addr,
    input  wire [31:0]                  reg_wdata,
    input  wire [3:0]                   reg_be,
    output wire [31:0]                  mx_reg_rdata,
    output wire [31:0]                  dma_reg_rdata,
    output wire [31:0]                  trace_reg_rdata,
    output wire [31:0]                  swarm_reg_rdata,
    output wire [MW*32-1:0]             mesh_reg_rdata,
    output wire                         swarm_irq,

    output wire                         ext_valid,
    input  wire                         ext_ready,
    output wire                         ext_we,
    output wire [$clog2(DMA_BYTES)-3:0] ext_addr,
    output wire [31:0]                  ext_wdata,
    input  wire                         ext_rvalid,
    input  wire [31:0]                  ext_rdata,

    // Link TX slot 2 (channel 6): the host's acknowledged position in, the trace unit's
    // ready position out (ws_link_block tx2_*).
    input  wire [31:0]                  link_tx_acked,
    output wire [31:0]                  link_tx_ready,
    output wire                         link_tx_ready_en,

    // The simulation store's sticky AXI-protocol alarm (ws_mx_mem_model err_protocol).
    output wire                         mem_err_protocol
);

    `include "ws_flit.vh"

    initial begin
        if (FWD_WORDS != 0 && (FWD_WORDS < 2 || (FWD_WORDS & (FWD_WORDS - 1)) != 0))
            $error("ws_mx_block: FWD_WORDS must be 0 or a power of two >= 2");
    end

    // Two AXI masters packed for ws_mx_axi_arb: [0] the streamer, [1] the data mover.
    wire [2*2-1:0] x_arid;
    wire [2*32-1:0] x_araddr;
    wire [2*8-1:0] x_arlen;
    wire [2*3-1:0] x_arsize;
    wire [2*2-1:0] x_arburst;
    wire [1:0] x_arvalid;
    wire [1:0] x_arready;
    wire [1:0] x_rvalid;
    wire [1:0] x_rready;
    wire [2*2-1:0] x_awid;
    wire [2*32-1:0] x_awaddr;
    wire [2*8-1:0] x_awlen;
    wire [2*3-1:0] x_awsize;
    wire [2*2-1:0] x_awburst;
    wire [1:0] x_awvalid;
    wire [1:0] x_awready;
    wire [2*DATA_WIDTH-1:0] x_wdata;
    wire [2*DATA_WIDTH/8-1:0] x_wstrb;
    wire [1:0] x_wlast;
    wire [1:0] x_wvalid;
    wire [1:0] x_wready;
    wire [1:0] x_bvalid;
    wire [1:0] x_bready;
    // Responses, the same wires to both masters (each sees its own valid).
    wire [1:0] x_rid;
    wire [DATA_WIDTH-1:0] x_rdata;
    wire [1:0] x_rresp;
    wire x_rlast;
    wire [1:0] x_bid;
    wire [1:0] x_bresp;
    // The store's port.
    wire [2:0] mem_arid;
    wire [31:0] mem_araddr;
    wire [7:0] mem_arlen;
    wire [2:0] mem_arsize;
    wire [1:0] mem_arburst;
    wire mem_arvalid;
    wire mem_arready;
    wire [2:0] mem_rid;
    wire [DATA_WIDTH-1:0] mem_rdata;
    wire [1:0] mem_rresp;
    wire mem_rlast;
    wire mem_rvalid;
    wire mem_rready;
    wire [2:0] mem_awid;
    wire [31:0] mem_awaddr;
    wire [7:0] mem_awlen;
    wire [2:0] mem_awsize;
    wire [1:0] mem_awburst;
    wire mem_awvalid;
    wire mem_awready;
    wire [DATA_WIDTH-1:0] mem_wdata;
    wire [DATA_WIDTH/8-1:0] mem_wstrb;
    wire mem_wlast;
    wire mem_wvalid;
    wire mem_wready;
    wire [2:0] mem_bid;
    wire [1:0] mem_bresp;
    wire mem_bvalid;
    wire mem_bready;

    // The streamer's gradient input and weight output.
    wire        grad_valid, grad_ready, grad_keep, grad_last;
    wire [31:0] grad_data;
    wire [63:0] grad_user;
    wire        wout_valid, wout_ready, wout_keep, wout_last, wout_read;
    wire [31:0] wout_data;
    wire [63:0] wout_user;
    // The data mover's gradient feed and weight-out sink.
    wire        feed_valid, feed_ready, feed_keep, feed_last, feed_swarm;
    wire [3:0]  feed_port;
    wire [31:0] feed_data;
    wire [63:0] feed_user;
    wire        sink_valid, sink_ready, sink_last;
    wire [31:0] sink_data;
    wire [63:0] sink_user;
    wire        wout_swarm, wout_reads, wout_fwd, fwd_flush;
    wire [11:0] wout_fwd_layer;
    wire [31:0] fwd_level, fwd_words;
    // The data mover's feed as it leaves the mover (feed_* is its MemoryX part), and the
    // capture sink's MemoryX source (sink_* is what the mover takes).
    wire        dma_feed_valid, dma_feed_ready, dma_feed_keep, dma_feed_last, dma_feed_swarm;
    wire [1:0]  dma_feed_mesh;
    wire [3:0]  dma_feed_port;
    wire [31:0] dma_feed_data;
    wire [63:0] dma_feed_user;
    wire        mxs_valid, mxs_ready, mxs_last;
    wire [31:0] mxs_data;
    wire [63:0] mxs_user;
    // The meshes as SwarmX's wafers (a mesh's CTRL.swarm, on a block with both): the data
    // mover's op 4 flits go into the node's broadcast, a held port's copies into its wafer's
    // weight ingress, and the wafer's gradient egress up the port.
    localparam NPORT = (SWARM_PORTS > 0) ? SWARM_PORTS : 1;
    // The forward buffer sits between the streamer and the broadcast to the wafers.
    localparam FWD_ON = FWD_WORDS > 0 && SWARM_PORTS > 0 && MESH_P > 0;
    wire        mesh_swarm;
    wire [NPORT-1:0] held;            // ports a wafer holds
    wire [NPORT-1:0] bc_valid, bc_ready, bc_last, up_valid_w, up_ready_w, up_last_w;
    wire [NPORT*32-1:0] bc_data, up_data_w;
    wire [NPORT*64-1:0] bc_user, up_user_w;
    wire        op4_valid = dma_feed_valid && dma_feed_mesh == 2'd1;
    wire        op4_bcast_ready;
    wire         trace_valid, trace_ready;
    wire [159:0] trace_data;
    wire [63:0]  trace_user;
    // The trace unit's probes: 0 the mover's feed, 1 SwarmX's upstream input (broadcast in),
    // 2 its upstream output (reduced), 3 the streamer's gradient input, 4 its weight output,
    // 5 + p downstream port p out (into its wafer), 5 + NPORT + p port p in (from its wafer).
    localparam N_PROBES = 5 + 2 * NPORT;
    // Each wafer's FMA phases are a source of their own (docs/trace.md "FMA phases").
    localparam N_PHASES = MESH_P > 0 ? MESH_W : 0;
    wire [47:0]    ts_now;
    wire [MW-1:0]    ph_valid;
    wire [MW*48-1:0] ph_begin, ph_end;
    wire [MW*32-1:0] ph_word4, ph_fmas;
    wire [MW*16-1:0] ph_pc, ph_pes;
    wire [N_PROBES-1:0]    pr_fire, pr_last;
    wire [N_PROBES*64-1:0] pr_user;
    // SwarmX's probes (probes 1, 2 and 5..), from inside its generate branch.
    wire [N_PROBES-3-1:0]    sw_fire, sw_last;
    wire [(N_PROBES-3)*64-1:0] sw_user;
    // The ext port's two masters: the data mover and the trace unit (writes only).
    wire        mv_ext_valid, mv_ext_ready, mv_ext_we;
    wire [$clog2(DMA_BYTES)-3:0] mv_ext_addr, tr_ext_addr;
    wire [31:0] mv_ext_wdata, tr_ext_wdata;
    wire        tr_ext_valid, tr_ext_ready;

    ws_mx_streamer #(
        .LANES(1),
        .DATA_WIDTH(DATA_WIDTH),
        .STORE_BYTES(STORE_BYTES),
        .MAX_LAYERS(16),
        .NUM_SLOTS(8)
    ) streamer_inst (
        .clk(clk),
        .rst(rst),
        .reg_req(mx_reg_req),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(mx_reg_rdata),
        .s_grad_valid(grad_valid),
        .s_grad_ready(grad_ready),
        .s_grad_data(grad_data),
        .s_grad_keep(grad_keep),
        .s_grad_last(grad_last),
        .s_grad_user(grad_user),
        .m_wout_valid(wout_valid),
        .m_wout_ready(wout_ready),
        .m_wout_data(wout_data),
        .m_wout_keep(wout_keep),
        .m_wout_last(wout_last),
        .m_wout_user(wout_user),
        .m_wout_read(wout_read),
        .m_trace_valid(trace_valid),
        .m_trace_ready(trace_ready),
        .m_trace_data(trace_data),
        .m_trace_user(trace_user),
        .m_axi_arid(x_arid[0*2 +: 2]),
        .m_axi_araddr(x_araddr[0*32 +: 32]),
        .m_axi_arlen(x_arlen[0*8 +: 8]),
        .m_axi_arsize(x_arsize[0*3 +: 3]),
        .m_axi_arburst(x_arburst[0*2 +: 2]),
        .m_axi_arvalid(x_arvalid[0]),
        .m_axi_arready(x_arready[0]),
        .m_axi_rvalid(x_rvalid[0]),
        .m_axi_rready(x_rready[0]),
        .m_axi_awid(x_awid[0*2 +: 2]),
        .m_axi_awaddr(x_awaddr[0*32 +: 32]),
        .m_axi_awlen(x_awlen[0*8 +: 8]),
        .m_axi_awsize(x_awsize[0*3 +: 3]),
        .m_axi_awburst(x_awburst[0*2 +: 2]),
        .m_axi_awvalid(x_awvalid[0]),
        .m_axi_awready(x_awready[0]),
        .m_axi_wdata(x_wdata[0*DATA_WIDTH +: DATA_WIDTH]),
        .m_axi_wstrb(x_wstrb[0*DATA_WIDTH/8 +: DATA_WIDTH/8]),
        .m_axi_wlast(x_wlast[0]),
        .m_axi_wvalid(x_wvalid[0]),
        .m_axi_wready(x_wready[0]),
        .m_axi_bvalid(x_bvalid[0]),
        .m_axi_bready(x_bready[0]),
        .m_axi_rid(x_rid),
        .m_axi_rdata(x_rdata),
        .m_axi_rresp(x_rresp),
        .m_axi_rlast(x_rlast),
        .m_axi_bid(x_bid),
        .m_axi_bresp(x_bresp)
    );

    ws_mx_dma #(
        .DATA_WIDTH(DATA_WIDTH),
        .STORE_BYTES(STORE_BYTES),
        .DMA_BYTES(DMA_BYTES),
        .ID_WIDTH(2),
        .SWARM_PORTS(SWARM_PORTS),
        .MESH(MESH_P > 0 ? 1 : 0),
        .FWD_LOG2(FWD_ON ? $clog2(FWD_WORDS) : 0)
    ) dma_inst (
        .clk(clk),
        .rst(rst),
        .reg_req(dma_reg_req),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(dma_reg_rdata),
        .ext_valid(mv_ext_valid),
        .ext_ready(mv_ext_ready),
        .ext_we(mv_ext_we),
        .ext_addr(mv_ext_addr),
        .ext_wdata(mv_ext_wdata),
        .ext_rvalid(ext_rvalid),
        .ext_rdata(ext_rdata),
        .m_axi_arid(x_arid[1*2 +: 2]),
        .m_axi_araddr(x_araddr[1*32 +: 32]),
        .m_axi_arlen(x_arlen[1*8 +: 8]),
        .m_axi_arsize(x_arsize[1*3 +: 3]),
        .m_axi_arburst(x_arburst[1*2 +: 2]),
        .m_axi_arvalid(x_arvalid[1]),
        .m_axi_arready(x_arready[1]),
        .m_axi_rvalid(x_rvalid[1]),
        .m_axi_rready(x_rready[1]),
        .m_axi_awid(x_awid[1*2 +: 2]),
        .m_axi_awaddr(x_awaddr[1*32 +: 32]),
        .m_axi_awlen(x_awlen[1*8 +: 8]),
        .m_axi_awsize(x_awsize[1*3 +: 3]),
        .m_axi_awburst(x_awburst[1*2 +: 2]),
        .m_axi_awvalid(x_awvalid[1]),
        .m_axi_awready(x_awready[1]),
        .m_axi_wdata(x_wdata[1*DATA_WIDTH +: DATA_WIDTH]),
        .m_axi_wstrb(x_wstrb[1*DATA_WIDTH/8 +: DATA_WIDTH/8]),
        .m_axi_wlast(x_wlast[1]),
        .m_axi_wvalid(x_wvalid[1]),
        .m_axi_wready(x_wready[1]),
        .m_axi_bvalid(x_bvalid[1]),
        .m_axi_bready(x_bready[1]),
        .m_axi_rid(x_rid),
        .m_axi_rdata(x_rdata),
        .m_axi_rresp(x_rresp),
        .m_axi_rlast(x_rlast),
        .m_axi_bid(x_bid),
        .m_axi_bresp(x_bresp),
        .m_grad_swarm(dma_feed_swarm),
        .m_grad_mesh(dma_feed_mesh),
        .m_grad_port(dma_feed_port),
        .m_grad_valid(dma_feed_valid),
        .m_grad_ready(dma_feed_ready),
        .m_grad_data(dma_feed_data),
        .m_grad_keep(dma_feed_keep),
        .m_grad_last(dma_feed_last),
        .m_grad_user(dma_feed_user),
        .s_wout_valid(sink_valid),
        .s_wout_ready(sink_ready),
        .s_wout_data(sink_data),
        .s_wout_keep(1'b1),
        .s_wout_last(sink_last),
        .s_wout_user(sink_user),
        .wout_swarm(wout_swarm),
        .wout_reads(wout_reads),
        .wout_fwd(wout_fwd),
        .wout_fwd_layer(wout_fwd_layer),
        .fwd_flush(fwd_flush),
        .fwd_level(fwd_level),
        .fwd_words(fwd_words)
    );

    generate
        if (MESH_P == 0) begin : g_no_mesh
            assign feed_valid = dma_feed_valid;
            assign dma_feed_ready = feed_ready;
            assign sink_valid = mxs_valid;
            assign mxs_ready = sink_ready;
            assign sink_data = mxs_data;
            assign sink_last = mxs_last;
            assign sink_user = mxs_user;
            assign mesh_reg_rdata = {MW*32{1'b0}};
            assign mesh_swarm = 1'b0;
            assign held = {NPORT{1'b0}};
            assign bc_ready = {NPORT{1'b0}};
            assign up_valid_w = {NPORT{1'b0}};
            assign up_data_w = {NPORT*32{1'b0}};
            assign up_last_w = {NPORT{1'b0}};
            assign up_user_w = {NPORT*64{1'b0}};
            assign ph_valid = {MW{1'b0}};
            assign ph_begin = {MW*48{1'b0}};
            assign ph_end = {MW*48{1'b0}};
            assign ph_word4 = {MW*32{1'b0}};
            assign ph_fmas = {MW*32{1'b0}};
            assign ph_pc = {MW*16{1'b0}};
            assign ph_pes = {MW*16{1'b0}};
            wire _unused_mesh = &{1'b0, mesh_reg_req, dma_feed_mesh, op4_valid, op4_bcast_ready,
                                  bc_valid, bc_data, bc_last, bc_user, up_ready_w, ts_now};
        end else begin : g_mesh
            // Ops 4 and 5 go to the meshes, everything else to MemoryX / SwarmX.
            wire mesh_w_ready, mesh_x_ready, c_valid, c_last, capture;
            wire [31:0] c_data;
            wire [63:0] c_user;
            assign feed_valid = dma_feed_valid && dma_feed_mesh == 2'd0;
            assign dma_feed_ready = (dma_feed_mesh == 2'd1) ? (mesh_swarm ? op4_bcast_ready : mesh_w_ready)
                                  : (dma_feed_mesh == 2'd2) ? mesh_x_ready : feed_ready;
            // The capture sink: a mesh's gradients while its CTRL.grad_capture, else MemoryX's.
            assign sink_valid = capture ? c_valid : mxs_valid;
            assign sink_data = capture ? c_data : mxs_data;
            assign sink_last = capture ? c_last : mxs_last;
            assign sink_user = capture ? c_user : mxs_user;
            assign mxs_ready = !capture && sink_ready;

            ws_mx_wafers #(
                .WAFERS(MESH_W),
                .PORTS(SWARM_PORTS),
                .P(MESH_P),
                .SRAM_WORDS(MESH_SRAM_WORDS),
                .MAX_B(MESH_MAX_B),
                .PROG_DEPTH(MESH_PROG_DEPTH)
            ) wafers_inst (
                .clk(clk),
                .rst(rst),
                .reg_req(mesh_reg_req),
                .reg_we(reg_we),
                .reg_addr(reg_addr),
                .reg_wdata(reg_wdata),
                .reg_be(reg_be),
                .reg_rdata(mesh_reg_rdata),
                .s_w_valid(!mesh_swarm && op4_valid),
                .s_w_ready(mesh_w_ready),
                .s_w_data(dma_feed_data),
                .s_w_last(dma_feed_last),
                .s_w_user(dma_feed_user),
                .s_x_valid(dma_feed_valid && dma_feed_mesh == 2'd2),
                .s_x_ready(mesh_x_ready),
                .s_x_data(dma_feed_data),
                .m_cap_valid(c_valid),
                .m_cap_ready(sink_ready),
                .m_cap_data(c_data),
                .m_cap_last(c_last),
                .m_cap_user(c_user),
                .capture(capture),
                .swarm(mesh_swarm),
                .port_held(held),
                .s_bc_valid(bc_valid),
                .s_bc_ready(bc_ready),
                .s_bc_data(bc_data),
                .s_bc_last(bc_last),
                .s_bc_user(bc_user),
                .m_up_valid(up_valid_w),
                .m_up_ready(up_ready_w),
                .m_up_data(up_data_w),
                .m_up_last(up_last_w),
                .m_up_user(up_user_w),
                .ts_now(ts_now),
                .m_ph_valid(ph_valid),
                .m_ph_begin(ph_begin),
                .m_ph_end(ph_end),
                .m_ph_word4(ph_word4),
                .m_ph_pc(ph_pc),
                .m_ph_pes(ph_pes),
                .m_ph_fmas(ph_fmas)
            );
        end
    endgenerate
    assign feed_swarm = dma_feed_swarm;
    assign feed_port = dma_feed_port;
    assign feed_data = dma_feed_data;
    assign feed_keep = dma_feed_keep;
    assign feed_last = dma_feed_last;
    assign feed_user = dma_feed_user;

    generate
        if (SWARM_PORTS == 0) begin : g_no_swarm
            assign grad_valid = feed_valid;
            assign feed_ready = grad_ready;
            assign grad_data = feed_data;
            assign grad_keep = feed_keep;
            assign grad_last = feed_last;
            assign grad_user = feed_user;
            assign mxs_valid = wout_valid;
            assign wout_ready = mxs_ready;
            assign mxs_data = wout_data;
            assign mxs_last = wout_last;
            assign mxs_user = wout_user;
            assign swarm_reg_rdata = 32'd0;
            assign swarm_irq = 1'b0;
            assign op4_bcast_ready = 1'b0;
            assign bc_valid = {NPORT{1'b0}};
            assign bc_data = {NPORT*32{1'b0}};
            assign bc_last = {NPORT{1'b0}};
            assign bc_user = {NPORT*64{1'b0}};
            assign up_ready_w = {NPORT{1'b0}};
            assign sw_fire = {(N_PROBES-3){1'b0}};
            assign sw_last = {(N_PROBES-3){1'b0}};
            assign sw_user = {(N_PROBES-3)*64{1'b0}};
            assign fwd_level = 32'd0;
            assign fwd_words = 32'd0;
            wire _unused_swarm = &{1'b0, swarm_reg_req, feed_swarm, feed_port, wout_swarm, wout_reads,
                                   wout_fwd, wout_fwd_layer, fwd_flush,
                                   wout_read, mesh_swarm,
                                   op4_valid, held, bc_ready, up_valid_w, up_data_w, up_last_w, up_user_w};
        end else begin : g_swarm
            localparam N = SWARM_PORTS;
            wire         up_valid, up_ready, up_last;
            wire [31:0]  up_data;
            wire [63:0]  up_user;
            wire [N-1:0] dn_out_valid, dn_out_ready, dn_out_last;
            wire [N*32-1:0] dn_out_data;
            wire [N*64-1:0] dn_out_user;
            wire [N-1:0] dn_in_valid, dn_in_ready;
            wire [N*32-1:0] dn_in_data;
            wire [N-1:0] dn_in_last;
            wire [N*64-1:0] dn_in_user;
            // The streamer's weight-out goes down the broadcast (WOUT_CTRL.swarm) unless a
            // mesh is on SwarmX: then the broadcast carries the mover's op 4 flits, or with
            // WOUT_CTRL.reads the streamer's STREAM chunks (m_wout_read) while its updated
            // weights go to the sink.
            wire wout_bcast = wout_swarm && !mesh_swarm;
            wire reads = mesh_swarm && wout_reads;
            wire wout_down = reads && wout_read;     // this weight-out beat goes down

            // The forward buffer (WOUT_CTRL.fwd): an update beat of layer fwd_layer goes in, and
            // the buffer's words go down ahead of STREAM beats, which wait until it is empty.
            // The weight-out is one stream in descriptor order, so a STREAM chunk and forwarded
            // words never interleave on the broadcast: while a STREAM beat goes down the buffer
            // is empty, and nothing enters it until the STREAM chunk has left the streamer.
            wire        fwd_beat;                    // this weight-out beat is forwarded
            wire        fq_in_ready, fq_valid, fq_ready, fq_last;
            wire [31:0] fq_data;
            wire [63:0] fq_user;
            wire        fq_empty;
            if (FWD_ON) begin : g_fwd
                localparam FL = $clog2(FWD_WORDS + 1);
                wire [FL-1:0] level;
                wire [96:0]   word;
                reg  [31:0]   taken_reg;
                assign fwd_beat = reads && wout_fwd && !wout_read
                    && wout_user[WS_FLIT_LAYER_LSB +: WS_FLIT_LAYER_WIDTH] == wout_fwd_layer;
                ws_fifo #(
                    .DEPTH(FWD_WORDS),
                    .WIDTH(97)
                ) fwd_fifo (
                    .clk(clk),
                    .rst(rst || fwd_flush),
                    .s_valid(wout_valid && fwd_beat),
                    .s_ready(fq_in_ready),
                    .s_data({wout_last, wout_user, wout_data}),
                    .m_valid(fq_valid),
                    .m_ready(fq_ready),
                    .m_data(word),
                    .level(level)
                );
                assign {fq_last, fq_user, fq_data} = word;
                assign fq_empty = level == {FL{1'b0}};
                assign fwd_level = {{(32 - FL){1'b0}}, level};
                assign fwd_words = taken_reg;
                always @(posedge clk) begin
                    if (wout_valid && fwd_beat && fq_in_ready) taken_reg <= taken_reg + 32'd1;
                    if (rst) taken_reg <= 32'd0;
                end
            end else begin : g_no_fwd
                assign fwd_beat = 1'b0;
                assign fq_in_ready = 1'b0;
                assign fq_valid = 1'b0;
                assign fq_last = 1'b0;
                assign fq_data = 32'd0;
                assign fq_user = 64'd0;
                assign fq_empty = 1'b1;
                assign fwd_level = 32'd0;
                assign fwd_words = 32'd0;
                wire _unused_fwd = &{1'b0, wout_fwd, wout_fwd_layer, fwd_flush, fq_ready};
            end
            wire fq_down = reads && fq_valid;        // the broadcast takes the buffer's word

            // The broadcast's input.
            wire        bci_valid = mesh_swarm ? (reads ? fq_valid || (wout_valid && wout_read && fq_empty)
                                                        : op4_valid)
                                               : wout_bcast && wout_valid;
            wire [31:0] bci_data = (mesh_swarm && !reads) ? dma_feed_data : fq_down ? fq_data : wout_data;
            wire        bci_last = (mesh_swarm && !reads) ? dma_feed_last : fq_down ? fq_last : wout_last;
            wire [63:0] bci_user = (mesh_swarm && !reads) ? dma_feed_user : fq_down ? fq_user : wout_user;

            // The feed: straight to the streamer's arbiter, or to one downstream port; a port
            // is its wafer's while the wafer is on SwarmX.
            wire direct_valid = feed_valid && !feed_swarm;
            wire direct_ready;
            genvar p;
            for (p = 0; p < N; p = p + 1) begin : g_port
                assign dn_in_valid[p] = held[p] ? up_valid_w[p] : feed_valid && feed_swarm && feed_port == p;
                assign dn_in_data[p*32 +: 32] = held[p] ? up_data_w[p*32 +: 32] : feed_data;
                assign dn_in_last[p] = held[p] ? up_last_w[p] : feed_last;
                assign dn_in_user[p*64 +: 64] = held[p] ? up_user_w[p*64 +: 64] : feed_user;
                // Broadcast copies: a held port's to its wafer, port 0's to the sink
                // (WOUT_CTRL.swarm); the other ports have no wafer behind them and take their
                // copies at once.
                if (p == 0) begin : g_sink
                    assign dn_out_ready[p] = held[p] ? bc_ready[p] : wout_bcast ? mxs_ready : 1'b1;
                end else begin : g_other
                    assign dn_out_ready[p] = held[p] ? bc_ready[p] : 1'b1;
                end
            end
            assign bc_valid = dn_out_valid;
            assign bc_data = dn_out_data;
            assign bc_last = dn_out_last;
            assign bc_user = dn_out_user;
            assign up_ready_w = dn_in_ready;
            // A mover feed for a held port waits while its wafer holds it.
            wire [15:0] held16 = {{(16 - N){1'b0}}, held};
            wire [15:0] dn_in_ready16 = {{(16 - N){1'b0}}, dn_in_ready} & ~held16;
            assign feed_ready = feed_swarm ? dn_in_ready16[feed_port] : direct_ready;

            // The streamer's input: the direct feed or the node's reduced uplink, a whole
            // chunk (through `last`) at a time, round robin when both wait.
            reg  lock_reg, lock_src_reg, prio_reg;
            wire pick_up = lock_reg ? lock_src_reg : (up_valid && (!direct_valid || prio_reg));
            assign grad_valid = pick_up ? up_valid : direct_valid;
            assign grad_data = pick_up ? up_data : feed_data;
            assign grad_keep = 1'b1;
            assign grad_last = pick_up ? up_last : feed_last;
            assign grad_user = pick_up ? up_user : feed_user;
            assign up_ready = pick_up && grad_ready;
            assign direct_ready = !pick_up && grad_ready;
            always @(posedge clk) begin
                if (grad_valid && grad_ready) begin
                    lock_reg <= !grad_last;
                    lock_src_reg <= pick_up;
                    if (grad_last) prio_reg <= !pick_up;
                end
                if (rst) begin
                    lock_reg <= 1'b0;
                    lock_src_reg <= 1'b0;
                    prio_reg <= 1'b0;
                end
            end

            // Weight-out: to the sink, or down the broadcast with port 0 to the sink, or
            // (WOUT_CTRL.reads) a STREAM chunk's beats down (once the forward buffer is
            // empty), a forwarded update's into the forward buffer and any other update's to
            // the sink.
            assign mxs_valid = wout_bcast ? dn_out_valid[0] : wout_valid && !wout_down && !fwd_beat;
            assign mxs_data = wout_bcast ? dn_out_data[0 +: 32] : wout_data;
            assign mxs_last = wout_bcast ? dn_out_last[0] : wout_last;
            assign mxs_user = wout_bcast ? dn_out_user[0 +: 64] : wout_user;
            wire bcast_ready;
            assign wout_ready = wout_bcast ? bcast_ready
                              : wout_down ? bcast_ready && fq_empty
                              : fwd_beat ? fq_in_ready
                              : mxs_ready;
            assign fq_ready = fq_down && bcast_ready;
            assign op4_bcast_ready = mesh_swarm && !reads && bcast_ready;

            // The trace unit's view of the node: broadcast in, reduced out, then every port
            // out (down) and in (up).
            assign sw_fire = {dn_in_valid & dn_in_ready, dn_out_valid & dn_out_ready,
                              up_valid && up_ready, bci_valid && bcast_ready};
            assign sw_last = {dn_in_last, dn_out_last, up_last, bci_last};
            assign sw_user = {dn_in_user, dn_out_user, up_user, bci_user};

            ws_swarm_block #(
                .N_PORTS(N)
            ) swarm_inst (
                .clk(clk),
                .rst(rst),
                .reg_req(swarm_reg_req),
                .reg_we(reg_we),
                .reg_addr(reg_addr),
                .reg_wdata(reg_wdata),
                .reg_be(reg_be),
                .reg_rdata(swarm_reg_rdata),
                .s_up_valid(bci_valid),
                .s_up_ready(bcast_ready),
                .s_up_data(bci_data),
                .s_up_last(bci_last),
                .s_up_user(bci_user),
                .m_up_valid(up_valid),
                .m_up_ready(up_ready),
                .m_up_data(up_data),
                .m_up_last(up_last),
                .m_up_user(up_user),
                .m_dn_valid(dn_out_valid),
                .m_dn_ready(dn_out_ready),
                .m_dn_data(dn_out_data),
                .m_dn_last(dn_out_last),
                .m_dn_user(dn_out_user),
                .s_dn_valid(dn_in_valid),
                .s_dn_ready(dn_in_ready),
                .s_dn_data(dn_in_data),
                .s_dn_last(dn_in_last),
                .s_dn_user(dn_in_user),
                .irq(swarm_irq)
            );
            wire _unused_swarm = &{1'b0, feed_keep};
        end
    endgenerate

    ws_mx_axi_arb #(
        .DATA_WIDTH(DATA_WIDTH),
        .ADDR_WIDTH(32),
        .ID_WIDTH(2)
    ) arb_inst (
        .clk(clk),
        .rst(rst),
        .s_arid(x_arid),
        .s_araddr(x_araddr),
        .s_arlen(x_arlen),
        .s_arsize(x_arsize),
        .s_arburst(x_arburst),
        .s_arvalid(x_arvalid),
        .s_arready(x_arready),
        .s_rvalid(x_rvalid),
        .s_rready(x_rready),
        .s_awid(x_awid),
        .s_awaddr(x_awaddr),
        .s_awlen(x_awlen),
        .s_awsize(x_awsize),
        .s_awburst(x_awburst),
        .s_awvalid(x_awvalid),
        .s_awready(x_awready),
        .s_wdata(x_wdata),
        .s_wstrb(x_wstrb),
        .s_wlast(x_wlast),
        .s_wvalid(x_wvalid),
        .s_wready(x_wready),
        .s_bvalid(x_bvalid),
        .s_bready(x_bready),
        .s_rid(x_rid),
        .s_rdata(x_rdata),
        .s_rresp(x_rresp),
        .s_rlast(x_rlast),
        .s_bid(x_bid),
        .s_bresp(x_bresp),
        .m_arid(mem_arid),
        .m_araddr(mem_araddr),
        .m_arlen(mem_arlen),
        .m_arsize(mem_arsize),
        .m_arburst(mem_arburst),
        .m_arvalid(mem_arvalid),
        .m_arready(mem_arready),
        .m_rid(mem_rid),
        .m_rdata(mem_rdata),
        .m_rresp(mem_rresp),
        .m_rlast(mem_rlast),
        .m_rvalid(mem_rvalid),
        .m_rready(mem_rready),
        .m_awid(mem_awid),
        .m_awaddr(mem_awaddr),
        .m_awlen(mem_awlen),
        .m_awsize(mem_awsize),
        .m_awburst(mem_awburst),
        .m_awvalid(mem_awvalid),
        .m_awready(mem_awready),
        .m_wdata(mem_wdata),
        .m_wstrb(mem_wstrb),
        .m_wlast(mem_wlast),
        .m_wvalid(mem_wvalid),
        .m_wready(mem_wready),
        .m_bid(mem_bid),
        .m_bresp(mem_bresp),
        .m_bvalid(mem_bvalid),
        .m_bready(mem_bready)
    );

    wire [DATA_WIDTH-1:0] bd_rdata_unused;

    ws_mx_mem_model #(
        .DATA_WIDTH(DATA_WIDTH),
        .ADDR_WIDTH(32),
        .ID_WIDTH(3),
        .MEM_BYTES(STORE_BYTES),
        .LATENCY(MEM_LATENCY)
    ) mem_inst (
        .clk(clk),
        .rst(rst),
        .stall(1'b0),
        .s_axi_arid(mem_arid),
        .s_axi_araddr(mem_araddr),
        .s_axi_arlen(mem_arlen),
        .s_axi_arsize(mem_arsize),
        .s_axi_arburst(mem_arburst),
        .s_axi_arvalid(mem_arvalid),
        .s_axi_arready(mem_arready),
        .s_axi_rid(mem_rid),
        .s_axi_rdata(mem_rdata),
        .s_axi_rresp(mem_rresp),
        .s_axi_rlast(mem_rlast),
        .s_axi_rvalid(mem_rvalid),
        .s_axi_rready(mem_rready),
        .s_axi_awid(mem_awid),
        .s_axi_awaddr(mem_awaddr),
        .s_axi_awlen(mem_awlen),
        .s_axi_awsize(mem_awsize),
        .s_axi_awburst(mem_awburst),
        .s_axi_awvalid(mem_awvalid),
        .s_axi_awready(mem_awready),
        .s_axi_wdata(mem_wdata),
        .s_axi_wstrb(mem_wstrb),
        .s_axi_wlast(mem_wlast),
        .s_axi_wvalid(mem_wvalid),
        .s_axi_wready(mem_wready),
        .s_axi_bid(mem_bid),
        .s_axi_bresp(mem_bresp),
        .s_axi_bvalid(mem_bvalid),
        .s_axi_bready(mem_bready),
        .bd_en(1'b0),
        .bd_we(1'b0),
        .bd_addr({($clog2(STORE_BYTES / (DATA_WIDTH / 8))){1'b0}}),
        .bd_wdata({DATA_WIDTH{1'b0}}),
        .bd_rdata(bd_rdata_unused),
        .err_protocol(mem_err_protocol)
    );

    // ------------------------------------------------------------------ trace

    // Probe order (above); SwarmX's {ports in, ports out, reduced out, broadcast in} slot in
    // around the mover's feed and the streamer's two streams.
    assign pr_fire = {sw_fire[N_PROBES-3-1:2], wout_valid && wout_ready, grad_valid && grad_ready,
                      sw_fire[1:0], dma_feed_valid && dma_feed_ready && dma_feed_mesh != 2'd2};
    assign pr_last = {sw_last[N_PROBES-3-1:2], wout_last, grad_last, sw_last[1:0], dma_feed_last};
    assign pr_user = {sw_user[(N_PROBES-3)*64-1:128], wout_user, grad_user, sw_user[127:0], dma_feed_user};

    // Source ids of the probes (ws_common::trace::Source::id).
    function automatic [8*N_PROBES-1:0] probe_ids;
        input integer n;
        integer q;
        begin
            probe_ids = {8*N_PROBES{1'b0}};
            probe_ids[0 +: 8] = 8'h00;
            probe_ids[8 +: 8] = 8'h02;
            probe_ids[16 +: 8] = 8'h03;
            probe_ids[24 +: 8] = 8'h04;
            probe_ids[32 +: 8] = 8'h05;
            for (q = 0; q < n; q = q + 1) begin
                probe_ids[(5 + q) * 8 +: 8] = 8'h10 + q[7:0];
                probe_ids[(5 + n + q) * 8 +: 8] = 8'h20 + q[7:0];
            end
        end
    endfunction

    // Source ids of the wafers' phase sources: 0x30 + w.
    function automatic [8*MW-1:0] phase_ids;
        input integer first;
        integer w;
        begin
            phase_ids = {8*MW{1'b0}};
            for (w = 0; w < MW; w = w + 1) phase_ids[w * 8 +: 8] = 8'h30 + first[7:0] + w[7:0];
        end
    endfunction

    // The FIFO rides out the longest time the ring writer can wait for the DMA RAM's write
    // port, which the link's RX DMA takes first: a whole channel-4 ring of samples arriving at
    // line rate, 32 KiB in 8,192 cycles, during which the 256 records absorb one record every
    // 32 cycles (docs/trace.md "Nothing stalls, nothing is lost silently").
    ws_trace #(
        .N_PROBES(N_PROBES),
        .PROBE_IDS(probe_ids(NPORT)),
        .N_PHASES(N_PHASES),
        .NPH(MW),
        .PHASE_IDS(phase_ids(0)),
        .DMA_BYTES(DMA_BYTES),
        .FIFO_DEPTH(256)
    ) trace_inst (
        .clk(clk),
        .rst(rst),
        .reg_req(trace_reg_req),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(trace_reg_rdata),
        .probe_fire(pr_fire),
        .probe_last(pr_last),
        .probe_user(pr_user),
        .ph_valid(ph_valid),
        .ph_begin(ph_begin),
        .ph_end(ph_end),
        .ph_word4(ph_word4),
        .ph_pc(ph_pc),
        .ph_pes(ph_pes),
        .ph_fmas(ph_fmas),
        .now(ts_now),
        .s_rec_valid(trace_valid),
        .s_rec_ready(trace_ready),
        .s_rec_data(trace_data),
        .s_rec_user(trace_user),
        .m_ext_valid(tr_ext_valid),
        .m_ext_ready(tr_ext_ready),
        .m_ext_addr(tr_ext_addr),
        .m_ext_wdata(tr_ext_wdata),
        .link_acked(link_tx_acked),
        .link_ready(link_tx_ready),
        .link_ready_en(link_tx_ready_en)
    );

    // The ext port: the data mover and the trace unit, round robin when both ask. The trace
    // unit only writes, so every read answer (ext_rvalid, the next cycle) is the mover's.
    // ext_ready never depends on ext_valid (docs/link-engine.md), so the grant may.
    reg  ext_last_tr_reg;
    wire grant_tr = tr_ext_valid && (!mv_ext_valid || !ext_last_tr_reg);
    assign ext_valid = grant_tr || mv_ext_valid;
    assign ext_we = grant_tr ? 1'b1 : mv_ext_we;
    assign ext_addr = grant_tr ? tr_ext_addr : mv_ext_addr;
    assign ext_wdata = grant_tr ? tr_ext_wdata : mv_ext_wdata;
    assign tr_ext_ready = grant_tr && ext_ready;
    assign mv_ext_ready = !grant_tr && ext_ready;
    always @(posedge clk) begin
        if (ext_valid && ext_ready) ext_last_tr_reg <= grant_tr;
        if (rst) ext_last_tr_reg <= 1'b0;
    end

    wire _unused_ok = &{1'b0, bd_rdata_unused, wout_keep};

endmodule

`default_nettype wire
