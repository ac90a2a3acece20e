`default_nettype none

// ws_mx_axi_arb: a 2:1 AXI4 interconnect in front of the MemoryX weight store. Master 0 is
// the streamer, master 1 the data mover (ws_mx_dma). The slave's IDs are one bit wider: the
// top bit names the master, so R and B responses are routed by ID and need no tracking.
//
// AXI4 rules this relies on and keeps (AMBA AXI4, IHI 0022):
//   - A3.2.1: once AxVALID is high its payload holds until AxREADY. When both masters ask,
//     the address channel's choice is locked until the handshake, so a waiting master's
//     address never changes under the slave.
//   - A5.1 (write data order): W beats follow the order of the AWs the slave accepted. A
//     small FIFO records which master each accepted AW came from; the W channel is given to
//     the master at its head until that master's WLAST, so write data never interleaves.
//     A master's W beats offered before its AW wait (allowed, A3.3.1).
//   - Both masters keep RREADY and BREADY high (the streamer by design, docs/memoryx-store.md
//     "The store interface"; the data mover accepts every response at once), and the
//     routing passes the ready of the master a response belongs to.
// Address arbitration is round robin per channel: neither master can starve the other.
module ws_mx_axi_arb #(
    parameter DATA_WIDTH = 256,
    parameter ADDR_WIDTH = 32,
    parameter ID_WIDTH = 2,        // masters' ID bits; the slave's are ID_WIDTH + 1
    parameter W_FIFO_DEPTH = 4     // accepted AWs whose W data has not finished, a power of two
) (
    input  wire                      clk,
    input  wire                      rst,

    // Masters, index m at [m*W +: W].
    input  wire [2*ID_WIDTH-1:0]     s_arid,
    input  wire [2*ADDR_WIDTH-1:0]   s_araddr,
    input  wire [2*8-1:0]            s_arlen,
    input  wire [2*3-1:0]            s_arsize,
    input  wire [2*2-1:0]            s_arburst,
    input  wire [1:0]                s_arvalid,
    output wire [1:0]                s_arready,
    output wire [ID_WIDTH-1:0]       s_rid,
    output wire [DATA_WIDTH-1:0]     s_rdata,
    output wire [1:0]                s_rresp,
    output wire                      s_rlast,
    output wire [1:0]                s_rvalid,
    input  wire [1:0]                s_rready,
    input  wire [2*ID_WIDTH-1:0]     s_awid,
    input  wire [2*ADDR_WIDTH-1:0]   s_awaddr,
    input  wire [2*8-1:0]            s_awlen,
    input  wire [2*3-1:0]            s_awsize,
    input  wire [2*2-1:0]            s_awburst,
    input  wire [1:0]                s_awvalid,
    output wire [1:0]                s_awready,
    input  wire [2*DATA_WIDTH-1:0]   s_wdata,
    input  wire [2*DATA_WIDTH/8-1:0] s_wstrb,
    input  wire [1:0]                s_wlast,
    input  wire [1:0]                s_wvalid,
    output wire [1:0]                s_wready,
    output wire [ID_WIDTH-1:0]       s_bid,
    output wire [1:0]                s_bresp,
    output wire [1:0]                s_bvalid,
    input  wire [1:0]                s_bready,

    // Slave (the store).
    output wire [ID_WIDTH:0]         m_arid,
    output wire [ADDR_WIDTH-1:0]     m_araddr,
    output wire [7:0]                m_arlen,
    output wire [2:0]                m_arsize,
    output wire [1:0]                m_arburst,
    output wire                      m_arvalid,
    input  wire                      m_arready,
    input  wire [ID_WIDTH:0]         m_rid,
    input  wire [DATA_WIDTH-1:0]     m_rdata,
    input  wire [1:0]                m_rresp,
    input  wire                      m_rlast,
    input  wire                      m_rvalid,
    output wire                      m_rready,
    output wire [ID_WIDTH:0]         m_awid,
    output wire [ADDR_WIDTH-1:0]     m_awaddr,
    output wire [7:0]                m_awlen,
    output wire [2:0]                m_awsize,
    output wire [1:0]                m_awburst,
    output wire                      m_awvalid,
    input  wire                      m_awready,
    output wire [DATA_WIDTH-1:0]     m_wdata,
    output wire [DATA_WIDTH/8-1:0]   m_wstrb,
    output wire                      m_wlast,
    output wire                      m_wvalid,
    input  wire                      m_wready,
    input  wire [ID_WIDTH:0]         m_bid,
    input  wire [1:0]                m_bresp,
    input  wire                      m_bvalid,
    output wire                      m_bready
);

    localparam SW = DATA_WIDTH / 8;
    localparam FW = $clog2(W_FIFO_DEPTH);

    // ---------------------------------------------------------------- address channels

    // Round robin with a lock: `*_lock` holds the chosen master while its valid waits.
    reg  ar_last_reg, ar_lock_reg, ar_sel_reg;
    wire ar_sel = ar_lock_reg ? ar_sel_reg
                : (s_arvalid == 2'b11) ? !ar_last_reg
                : s_arvalid[1];
    wire ar_fire = m_arvalid && m_arready;

    assign m_arvalid = s_arvalid[ar_sel];
    assign m_arid = {ar_sel, s_arid[ar_sel*ID_WIDTH +: ID_WIDTH]};
    assign m_araddr = s_araddr[ar_sel*ADDR_WIDTH +: ADDR_WIDTH];
    assign m_arlen = s_arlen[ar_sel*8 +: 8];
    assign m_arsize = s_arsize[ar_sel*3 +: 3];
    assign m_arburst = s_arburst[ar_sel*2 +: 2];
    assign s_arready = {ar_sel && m_arready, !ar_sel && m_arready};

    reg  aw_last_reg, aw_lock_reg, aw_sel_reg;
    reg  [FW:0] wq_count_reg;
    wire wq_full = wq_count_reg == W_FIFO_DEPTH[FW:0];
    wire aw_sel = aw_lock_reg ? aw_sel_reg
                : (s_awvalid == 2'b11) ? !aw_last_reg
                : s_awvalid[1];
    // An AW is offered only while the W-order FIFO has room for it.
    assign m_awvalid = s_awvalid[aw_sel] && !wq_full;
    wire aw_fire = m_awvalid && m_awready;
    assign m_awid = {aw_sel, s_awid[aw_sel*ID_WIDTH +: ID_WIDTH]};
    assign m_awaddr = s_awaddr[aw_sel*ADDR_WIDTH +: ADDR_WIDTH];
    assign m_awlen = s_awlen[aw_sel*8 +: 8];
    assign m_awsize = s_awsize[aw_sel*3 +: 3];
    assign m_awburst = s_awburst[aw_sel*2 +: 2];
    assign s_awready = {aw_sel && m_awready && !wq_full, !aw_sel && m_awready && !wq_full};

    always @(posedge clk) begin
        if (ar_fire) begin
            ar_lock_reg <= 1'b0;
            ar_last_reg <= ar_sel;
        end else if (m_arvalid) begin
            ar_lock_reg <= 1'b1;
            ar_sel_reg <= ar_sel;
        end
        if (aw_fire) begin
            aw_lock_reg <= 1'b0;
            aw_last_reg <= aw_sel;
        end else if (m_awvalid) begin
            aw_lock_reg <= 1'b1;
            aw_sel_reg <= aw_sel;
        end
        if (rst) begin
            ar_lock_reg <= 1'b0;
            ar_last_reg <= 1'b1;
            ar_sel_reg <= 1'b0;
            aw_lock_reg <= 1'b0;
            aw_last_reg <= 1'b1;
            aw_sel_reg <= 1'b0;
        end
    end

    // ---------------------------------------------------------------- write data order

    reg  [W_FIFO_DEPTH-1:0] wq_reg;           // master of each accepted AW, oldest at rd
    reg  [FW-1:0]           wq_rd_reg, wq_wr_reg;
    wire                    w_owner = wq_reg[wq_rd_reg];
    wire                    w_open = wq_count_reg != {(FW + 1){1'b0}};
    wire                    w_fire = m_wvalid && m_wready;
    wire                    w_done = w_fire && m_wlast;

    assign m_wvalid = w_open && s_wvalid[w_owner];
    assign m_wdata = s_wdata[w_owner*DATA_WIDTH +: DATA_WIDTH];
    assign m_wstrb = s_wstrb[w_owner*SW +: SW];
    assign m_wlast = s_wlast[w_owner];
    assign s_wready = {w_open && w_owner && m_wready, w_open && !w_owner && m_wready};

    always @(posedge clk) begin
        if (aw_fire) begin
            wq_reg[wq_wr_reg] <= aw_sel;
            wq_wr_reg <= wq_wr_reg + 1'b1;
        end
        if (w_done) wq_rd_reg <= wq_rd_reg + 1'b1;
        wq_count_reg <= wq_count_reg + {{FW{1'b0}}, aw_fire} - {{FW{1'b0}}, w_done};
        if (rst) begin
            wq_reg <= {W_FIFO_DEPTH{1'b0}};
            wq_rd_reg <= {FW{1'b0}};
            wq_wr_reg <= {FW{1'b0}};
            wq_count_reg <= {(FW + 1){1'b0}};
        end
    end

    // ---------------------------------------------------------------- responses

    wire r_to = m_rid[ID_WIDTH];
    assign s_rid = m_rid[ID_WIDTH-1:0];
    assign s_rdata = m_rdata;
    assign s_rresp = m_rresp;
    assign s_rlast = m_rlast;
    assign s_rvalid = {m_rvalid && r_to, m_rvalid && !r_to};
    assign m_rready = s_rready[r_to];

    wire b_to = m_bid[ID_WIDTH];
    assign s_bid = m_bid[ID_WIDTH-1:0];
    assign s_bresp = m_bresp;
    assign s_bvalid = {m_bvalid && b_to, m_bvalid && !b_to};
    assign m_bready = s_bready[b_to];

    initial begin
        if (W_FIFO_DEPTH < 2 || (W_FIFO_DEPTH & (W_FIFO_DEPTH - 1)) != 0) begin
            $error("ws_mx_axi_arb: W_FIFO_DEPTH must be a power of two >= 2");
        end
    end

endmodule

`default_nettype wire
