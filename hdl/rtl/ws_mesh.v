`default_nettype none

// ws_mesh: the wafer emulation (docs/architecture.md "Wafer emulation", issue 7), a P x Q array
// of tiles, each a ws_mesh_pe beside a ws_mesh_router of ws_mesh_fabric, with the edge
// ports of docs/mesh-array.md. Colors: 0 carries the weight rows (multicast from the weight
// ingress), 1 the Snake reduction (PE to PE along the snake, out at the gradient egress),
// 2 the PEs' results (DUMP), gathered in a fixed order to the metrics egress.
//
// Edge ports (valid/ready streams; the credit links of the fabric are bridged by
// ws_mesh_edge_in / ws_mesh_edge_out):
//   s_w_*  weight ingress, into the west link of router 0 (row 0, column 0), color 0;
//          s_w_user is the house flit header (ws_flit.vh); the mesh reads it only for the
//          phase timestamps, the PEs take the payload words in order;
//   m_g_*  gradient egress, the south link of the snake's last PE ((P-1, 0) for even P,
//          (P-1, Q-1) for odd P), color 1; m_g_user is a gradient header (kind, layer,
//          step, chunk, index) stamped here from the segment table, m_g_last closes each
//          chunk;
//   m_m_*  metrics egress: the words of a segment flagged "metrics" in the table (the per-step
//          loss sum and correct count, reduced along the snake like a gradient), with the
//          header the gradient egress would have given them;
//   m_r_*  results egress (DUMP), the east link of router (P-1, Q-1), color 2;
//   s_x_*  sample ingress: s_x_user = {pe[7:0], address[14:0]} writes one word of that PE's
//          SRAM through its sample port (ws_mesh_pe x_*), also while it runs a program; taken
//          while cfg_valid is low and the PE's sample buffer has room (a word for no PE is
//          taken and dropped).
// Which way each color goes is the route tables' business (ws_hdl::mesh_top::routes writes
// them through rt_cfg_*); this module only wires the tiles and the edges.
//
// Configuration: cfg_* writes a PE's configuration space (ws_mesh_pe: CTRL, program, SRAM);
// cfg_pe selects the PE by router index, 8'hff every PE at once, 8'hfe the top's own
// registers (docs/mesh-array.md "Top registers"):
//   0x0000 STEP     bits 15:0 the step of the gradient headers; a write also restarts the
//                   segment table at segment 0, starts a new step for the timestamps and
//                   the phase records, and cancels a pending chain advance;
//   0x0001 NSEG     segments in the table (0..GSEG);
//   0x0002 CHAIN    bit 0 arm (0 disarms), bits 15:8 base instruction, bits 31:16 program
//                   length (a PE's CTRL start encoding): the next step's start, which the
//                   top issues itself when the running step ends (below);
//   0x0100 + 4n     segment n (in egress order): +0 layer id (bits 11:0) and bit 16 "metrics"
//                   (its words leave on m_m_* instead of m_g_*), +1 words per chunk
//                   (1..65536), +2 words of the layer (>= 1);
//   0x0200 + n      TAG: the layer tag (bits 11:0) of program instruction n < PROG_DEPTH that
//                   its FMA phase records carry (ws_mesh_phases; reset 0xfff).
// A gradient word beyond the last segment leaves with kind ERROR and sets stat_grad_overrun.
// rt_cfg_* is the fabric's route-table port.
//
// Timestamps (cycles of cnt_cycle, cleared with cnt_clear): per layer id l < TS_LAYERS, the
// first and the last weight word of the layer's forward pass (its first pass of the step) and
// of its backward pass (its second) taken at the weight ingress, and the last gradient word
// of the layer handed out at the gradient egress.
//
// Chained steps (docs/mesh-array.md "Chained steps"). While CHAIN is armed, in the first cycle
// every PE has ended its program (stat_done on all, none busy, none refused), the phase probe
// has handed out the step's last record, no advance is pending and cfg_valid is low, the top
// starts every PE at CHAIN's base and length through their cfg port, exactly as a broadcast
// CTRL start would, disarms and counts a chain. The PEs' side of a new step starts there (the
// weight timestamps' passes, the step of the FMA phase records); the egress side waits for the
// step's last gradient words, which may still be in the routers: the fire leaves an advance
// pending, applied with the last word of the header table (at once when the table is already
// exhausted): STEP + 1, the table from segment 0, the overrun flag cleared. A STEP write
// cancels a pending advance. chain_cycle and chain_fmas latch cnt_cycle and cnt_fma_total at
// each fire, chain_grad the gradient words handed out (cnt_grad_words) at each advance.
module ws_mesh #(
    parameter P = 2,              // rows, 1..16
    parameter Q = 2,              // columns, 1..16
    parameter SRAM_WORDS = 2048,  // PE SRAM words
    parameter FMA_LAT = 3,        // FPnew FMA pipeline registers
    parameter MAX_B = 16,         // most samples per PE
    parameter PROG_DEPTH = 16,    // PE program store
    parameter BUF_DEPTH = 4,      // router flits per color per input
    parameter CNT_WIDTH = 32,     // counter and timestamp bits
    parameter GSEG = 8,           // segments of the gradient header table, 1..64
    parameter TS_LAYERS = 8,      // layer ids with phase timestamps, 1..64
    parameter R = P * Q,          // tiles (derived)
    parameter SW = $clog2(GSEG + 1) // segment index bits (derived)
) (
    input  wire                   clk,
    input  wire                   rst,

    input  wire                   cfg_valid,
    input  wire [7:0]             cfg_pe,
    input  wire [15:0]            cfg_addr,
    input  wire [31:0]            cfg_data,

    input  wire                   rt_cfg_we,
    input  wire [7:0]             rt_cfg_router,
    input  wire [2:0]             rt_cfg_in_port,
    input  wire [1:0]             rt_cfg_color,
    input  wire [4:0]             rt_cfg_out_mask,
    input  wire [7:0]             rt_cfg_quota,
    input  wire                   cnt_clear,

    input  wire                   s_w_valid,
    output wire                   s_w_ready,
    input  wire [31:0]            s_w_data,
    input  wire                   s_w_last,
    input  wire [63:0]            s_w_user,

    output wire                   m_g_valid,
    input  wire                   m_g_ready,
    output wire [31:0]            m_g_data,
    output wire                   m_g_last,
    output wire [63:0]            m_g_user,

    output wire                   m_m_valid,
    input  wire                   m_m_ready,
    output wire [31:0]            m_m_data,
    output wire                   m_m_last,
    output wire [63:0]            m_m_user,

    output wire                   m_r_valid,
    input  wire                   m_r_ready,
    output wire [31:0]            m_r_data,
    output wire                   m_r_last,

    input  wire                   s_x_valid,
    output wire                   s_x_ready,
    input  wire [31:0]            s_x_data,
    input  wire [22:0]            s_x_user,

    // Per PE, by router index.
    output wire [R-1:0]           stat_busy,
    output wire [R-1:0]           stat_done,
    output wire [R-1:0]           stat_err,
    output wire [R*4-1:0]         stat_err_code,
    output wire [R*CNT_WIDTH-1:0] cnt_fma,
    output wire [R*CNT_WIDTH-1:0] cnt_fwd_cycles,
    output wire [R*CNT_WIDTH-1:0] cnt_dx_cycles,
    output wire [R*CNT_WIDTH-1:0] cnt_grad_cycles,
    output wire [R*CNT_WIDTH-1:0] cnt_loss_cycles,
    // Per router: busy cycles per output port (router r port o at [(r*5+o)*CNT_WIDTH]).
    output wire [R*5*CNT_WIDTH-1:0] cnt_link_busy,
    // Per router: flits sent per output port and color (router r port o color c at
    // [((r*5+o)*3+c)*CNT_WIDTH]): the weight multicast on color 0, the dW/db reduction
    // on 1, the results on 2.
    output wire [R*5*3*CNT_WIDTH-1:0] cnt_link_flits,
    output wire [R*5*CNT_WIDTH-1:0] cnt_misroute,
    output wire [R-1:0]           router_busy,
    output wire [R*4-1:0]         stat_overflow,
    output wire [2*CNT_WIDTH-1:0] cnt_edge_drop,  // gradient, metrics egress
    output wire                   stat_grad_overrun,
    output wire [31:0]            cnt_grad_words,   // words handed out at m_g since reset
    // FMA issues of every PE together, since reset (the sum of cnt_fma).
    output wire [CNT_WIDTH-1:0]   cnt_fma_total,
    // Chained steps: chains since reset, armed, an advance pending, and the latched marks.
    output wire [15:0]            chain_count,
    output wire                   chain_armed,
    output wire                   chain_pending,
    output wire [CNT_WIDTH-1:0]   chain_cycle,      // cnt_cycle at the last fire
    output wire [CNT_WIDTH-1:0]   chain_fmas,       // cnt_fma_total at the last fire
    output wire [31:0]            chain_grad,       // cnt_grad_words at the last advance
    // Phase timestamps, layer id l at [l*CNT_WIDTH +: CNT_WIDTH], and the cycle counter.
    output wire [CNT_WIDTH-1:0]   cnt_cycle,
    output wire [TS_LAYERS*CNT_WIDTH-1:0] ts_fwd_start,
    output wire [TS_LAYERS*CNT_WIDTH-1:0] ts_fwd_end,
    output wire [TS_LAYERS*CNT_WIDTH-1:0] ts_bwd_start,
    output wire [TS_LAYERS*CNT_WIDTH-1:0] ts_bwd_end,
    output wire [TS_LAYERS*CNT_WIDTH-1:0] ts_grad_last,

    // FMA phase records for the trace unit (ws_mesh_phases), stamped from `ts_now`.
    input  wire [47:0]            ts_now,
    output wire                   m_ph_valid,
    output wire [47:0]            m_ph_begin,
    output wire [47:0]            m_ph_end,
    output wire [31:0]            m_ph_word4,
    output wire [15:0]            m_ph_pc,
    output wire [15:0]            m_ph_pes,
    output wire [31:0]            m_ph_fmas,
    output wire                   ph_busy
);

    `include "ws_flit.vh"

    initial begin
        if (P < 1 || P > 16 || Q < 1 || Q > 16) $error("ws_mesh: P and Q must be 1..16");
        // cfg_pe 8'hfe and 8'hff are the top and "every PE"; router indices stay below.
        if (P * Q > 254) $error("ws_mesh: at most 254 tiles (cfg_pe 0xfe, 0xff are reserved)");
        if (GSEG < 1 || GSEG > 64) $error("ws_mesh: GSEG must be 1..64");
        if (TS_LAYERS < 1 || TS_LAYERS > 64) $error("ws_mesh: TS_LAYERS must be 1..64");
    end

    localparam C = 3;
    localparam CW = 2;
    localparam UW = 1;
    localparam E = 2 * (P + Q);
    localparam E_W = 2 * Q + P;                       // west link of router (0, 0)
    localparam X_EXIT = (P % 2 == 0) ? 0 : Q - 1;     // the snake's last column
    localparam E_G = Q + P + X_EXIT;                  // south link of the snake's end
    localparam E_R = Q + P - 1;                       // east link of router (P-1, Q-1)

    // ---------------------------------------------------------------- fabric
    wire [R*C-1:0]     sl_valid;
    wire [R*C-1:0]     sl_ready;
    wire [R*C*32-1:0]  sl_data;
    wire [R*C-1:0]     sl_last;
    wire [R*C-1:0]     ml_valid;
    wire [R*C-1:0]     ml_ready;
    wire [R*C*32-1:0]  ml_data;
    wire [R*C-1:0]     ml_last;
    /* verilator lint_off UNUSEDSIGNAL */
    wire [R*C*UW-1:0]  ml_user;           // headers are not used inside the mesh
    wire [R*5*CNT_WIDTH-1:0]   cnt_stall_unused;
    wire [R*4-1:0]             credit_err_unused;
    wire [E*UW-1:0]            me_user;
    /* verilator lint_on UNUSEDSIGNAL */

    wire [E-1:0]       se_valid;
    wire [E*CW-1:0]    se_color;
    wire [E*32-1:0]    se_data;
    wire [E-1:0]       se_last;
    // Only the three edges of the ports are read; the others carry nothing by the routes.
    /* verilator lint_off UNUSEDSIGNAL */
    wire [E*C-1:0]     se_credit;
    wire [E-1:0]       me_valid;
    wire [E*CW-1:0]    me_color;
    wire [E*32-1:0]    me_data;
    wire [E-1:0]       me_last;
    /* verilator lint_on UNUSEDSIGNAL */
    wire [E*C-1:0]     me_credit;

    ws_mesh_fabric #(
        .P(P),
        .Q(Q),
        .COLORS(C),
        .BUF_DEPTH(BUF_DEPTH),
        .DATA_WIDTH(32),
        .USER_WIDTH(UW),
        .QUOTA_WIDTH(8),
        .CNT_WIDTH(CNT_WIDTH)
    ) fabric_inst (
        .clk(clk),
        .rst(rst),
        .s_local_valid(sl_valid),
        .s_local_ready(sl_ready),
        .s_local_data(sl_data),
        .s_local_last(sl_last),
        .s_local_user({R*C*UW{1'b0}}),
        .m_local_valid(ml_valid),
        .m_local_ready(ml_ready),
        .m_local_data(ml_data),
        .m_local_last(ml_last),
        .m_local_user(ml_user),
        .s_edge_valid(se_valid),
        .s_edge_color(se_color),
        .s_edge_data(se_data),
        .s_edge_last(se_last),
        .s_edge_user({E*UW{1'b0}}),
        .s_edge_credit(se_credit),
        .m_edge_valid(me_valid),
        .m_edge_color(me_color),
        .m_edge_data(me_data),
        .m_edge_last(me_last),
        .m_edge_user(me_user),
        .m_edge_credit(me_credit),
        .cfg_we(rt_cfg_we),
        .cfg_router(rt_cfg_router),
        .cfg_in_port(rt_cfg_in_port),
        .cfg_color(rt_cfg_color),
        .cfg_out_mask(rt_cfg_out_mask),
        .cfg_quota(rt_cfg_quota),
        .cnt_clear(cnt_clear),
        .cnt_fwd(cnt_link_flits),
        .cnt_busy(cnt_link_busy),
        .cnt_stall(cnt_stall_unused),
        .cnt_misroute(cnt_misroute),
        .stat_overflow(stat_overflow),
        .stat_credit_err(credit_err_unused),
        .stat_busy(router_busy)
    );

    // ---------------------------------------------------------------- edges
    wire            w_link_valid;
    wire [CW-1:0]   w_link_color;
    wire [31:0]     w_link_data;
    wire            w_link_last;
    /* verilator lint_off UNUSEDSIGNAL */
    wire [UW-1:0]   w_link_user;
    wire [UW-1:0]   g_user_unused;
    wire [UW-1:0]   r_user_unused;
    wire            g_row_last_unused;  // rows end inside chunks; the header unit closes chunks
    /* verilator lint_on UNUSEDSIGNAL */
    wire [C-1:0]    g_credit;
    wire            g_valid;    // the snake's end, before the gradient / metrics split
    wire            g_ready;
    wire [31:0]     g_data;
    wire [C-1:0]    r_credit;

    ws_mesh_edge_in #(
        .COLORS(C), .COLOR(0), .BUF_DEPTH(BUF_DEPTH), .DATA_WIDTH(32), .USER_WIDTH(UW)
    ) w_in_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(s_w_valid),
        .s_ready(s_w_ready),
        .s_data(s_w_data),
        .s_last(s_w_last),
        .s_user({UW{1'b0}}),
        .link_valid(w_link_valid),
        .link_color(w_link_color),
        .link_data(w_link_data),
        .link_last(w_link_last),
        .link_user(w_link_user),
        .link_credit(se_credit[E_W*C +: C])
    );

    ws_mesh_edge_out #(
        .COLORS(C), .COLOR(1), .BUF_DEPTH(BUF_DEPTH), .DATA_WIDTH(32), .USER_WIDTH(UW), .CNT_WIDTH(CNT_WIDTH)
    ) g_out_inst (
        .clk(clk),
        .rst(rst),
        .link_valid(me_valid[E_G]),
        .link_color(me_color[E_G*CW +: CW]),
        .link_data(me_data[E_G*32 +: 32]),
        .link_last(me_last[E_G]),
        .link_user(me_user[E_G*UW +: UW]),
        .link_credit(g_credit),
        .m_valid(g_valid),
        .m_ready(g_ready),
        .m_data(g_data),
        .m_last(g_row_last_unused),
        .m_user(g_user_unused),
        .cnt_drop(cnt_edge_drop[0 +: CNT_WIDTH])
    );

    ws_mesh_edge_out #(
        .COLORS(C), .COLOR(2), .BUF_DEPTH(BUF_DEPTH), .DATA_WIDTH(32), .USER_WIDTH(UW), .CNT_WIDTH(CNT_WIDTH)
    ) r_out_inst (
        .clk(clk),
        .rst(rst),
        .link_valid(me_valid[E_R]),
        .link_color(me_color[E_R*CW +: CW]),
        .link_data(me_data[E_R*32 +: 32]),
        .link_last(me_last[E_R]),
        .link_user(me_user[E_R*UW +: UW]),
        .link_credit(r_credit),
        .m_valid(m_r_valid),
        .m_ready(m_r_ready),
        .m_data(m_r_data),
        .m_last(m_r_last),
        .m_user(r_user_unused),
        .cnt_drop(cnt_edge_drop[CNT_WIDTH +: CNT_WIDTH])
    );

    genvar ge;
    generate
        for (ge = 0; ge < E; ge = ge + 1) begin : gen_edge
            if (ge == E_W) begin : gen_w
                assign se_valid[ge] = w_link_valid;
                assign se_color[ge*CW +: CW] = w_link_color;
                assign se_data[ge*32 +: 32] = w_link_data;
                assign se_last[ge] = w_link_last;
            end else begin : gen_quiet
                assign se_valid[ge] = 1'b0;
                assign se_color[ge*CW +: CW] = {CW{1'b0}};
                assign se_data[ge*32 +: 32] = 32'd0;
                assign se_last[ge] = 1'b0;
            end
            if (ge == E_G) begin : gen_g
                assign me_credit[ge*C +: C] = g_credit;
            end else if (ge == E_R) begin : gen_r
                assign me_credit[ge*C +: C] = r_credit;
            end else begin : gen_nocredit
                assign me_credit[ge*C +: C] = {C{1'b0}};
            end
        end
    endgenerate


    // ---------------------------------------------------------------- top registers
    localparam [7:0] TOP_SEL = 8'hfe;
    localparam [15:0] REG_STEP = 16'h0000, REG_NSEG = 16'h0001, REG_CHAIN = 16'h0002;
    wire top_we = cfg_valid && cfg_pe == TOP_SEL;
    wire step_we = top_we && cfg_addr == REG_STEP;

    reg [15:0]   step_reg;
    reg [SW-1:0] nseg_reg;
    reg [11:0]   seg_layer [0:GSEG-1];
    reg          seg_metrics [0:GSEG-1];
    reg [16:0]   seg_chunk_words [0:GSEG-1];
    reg [31:0]   seg_words [0:GSEG-1];

    // Gradient header sequence: the segment, chunk and index of the next egress word, and
    // the words of the segment already sent.
    reg [SW-1:0] gseg_reg;
    reg [15:0]   gchunk_reg;
    reg [16:0]   gindex_reg;
    reg [31:0]   gword_reg;
    reg          overrun_reg;

    // Chained steps: CHAIN, the advance the last fire left pending, and the marks.
    reg          chain_armed_reg;
    reg [7:0]    chain_base_reg;
    reg [15:0]   chain_len_reg;
    reg          chain_pending_reg;
    reg [15:0]   chain_count_reg;
    reg [CNT_WIDTH-1:0] chain_cycle_reg;
    reg [CNT_WIDTH-1:0] chain_fmas_reg;
    reg [31:0]   chain_grad_reg;
    reg [31:0]   grad_words_reg;
    reg [CNT_WIDTH-1:0] fma_total_reg;
    reg [15:0]   run_step_reg;   // the step of the PEs' program: STEP, or STEP + 1 from a fire

    localparam GIW = $clog2(GSEG > 1 ? GSEG : 2);
    localparam [31:0] GSEG32 = GSEG;
    wire          g_fire = g_valid && g_ready;
    wire          g_in_table = gseg_reg < nseg_reg;
    wire [GIW-1:0] g_idx = g_in_table ? gseg_reg[GIW-1:0] : {GIW{1'b0}};
    wire [11:0]   g_layer = seg_layer[g_idx];
    wire          g_metrics = g_in_table && seg_metrics[g_idx];
    wire [16:0]   g_cw = seg_chunk_words[g_idx];
    wire [31:0]   g_lw = seg_words[g_idx];
    wire [GIW-1:0] cfg_seg = cfg_addr[GIW+1:2];
    wire          cfg_seg_ok = cfg_addr[15:8] == 8'h01 && {26'd0, cfg_addr[7:2]} < GSEG32;
    wire        g_layer_end = g_in_table && gword_reg + 32'd1 >= g_lw;
    wire        g_chunk_end = g_in_table && gindex_reg + 17'd1 >= g_cw;
    wire        g_table_end = g_layer_end && gseg_reg + 1'b1 == nseg_reg;   // its last word

    // A fire needs every PE ended and none refused (a refused PE has no stat_done, the
    // explicit stat_err is for clarity), the step's last phase record out (so no record spans
    // two steps), and no advance still pending (so a fire always means STEP + 1). The cfg
    // port has no ready: the fire takes a cycle without a cfg write.
    wire chain_ready = &stat_done && !(|stat_busy) && !(|stat_err) && !ph_busy;
    wire chain_fire = chain_armed_reg && !chain_pending_reg && !cfg_valid && chain_ready;
    // The advance goes with the ended step's last word (that word keeps the old header, the
    // next one is the new step's segment 0, chunk 0, index 0), or at once when the table is
    // already exhausted. A STEP write cancels it.
    wire advance = (chain_pending_reg || chain_fire) && !step_we
                   && (!g_in_table || (g_fire && g_table_end));

    // A metrics segment's words go to m_m_*, every other word (beyond the table too) to m_g_*.
    assign m_g_valid = g_valid && !g_metrics;
    assign m_m_valid = g_valid && g_metrics;
    assign g_ready = g_metrics ? m_m_ready : m_g_ready;
    assign m_g_data = g_data;
    assign m_m_data = g_data;
    assign m_g_last = !g_in_table || g_layer_end || g_chunk_end;
    assign m_m_last = m_g_last;
    assign m_g_user = {gindex_reg[15:0], gchunk_reg, step_reg, g_layer,
                       g_in_table ? WS_KIND_GRADIENT : WS_KIND_ERROR};
    assign m_m_user = m_g_user;
    assign stat_grad_overrun = overrun_reg;
    assign cnt_grad_words = grad_words_reg;

    integer n;
    always @(posedge clk) begin
        if (top_we && cfg_seg_ok) begin
            case (cfg_addr[1:0])
                2'd0: begin
                    seg_layer[cfg_seg] <= cfg_data[11:0];
                    seg_metrics[cfg_seg] <= cfg_data[16];
                end
                2'd1: seg_chunk_words[cfg_seg] <= cfg_data[16:0];
                2'd2: seg_words[cfg_seg] <= cfg_data;
                default: ;
            endcase
        end
        if (rst) begin
            step_reg <= 16'd0;
            nseg_reg <= {SW{1'b0}};
            gseg_reg <= {SW{1'b0}};
            gchunk_reg <= 16'd0;
            gindex_reg <= 17'd0;
            gword_reg <= 32'd0;
            overrun_reg <= 1'b0;
        end else begin
            if (top_we && cfg_addr == REG_NSEG) begin
                nseg_reg <= cfg_data > GSEG32 ? GSEG32[SW-1:0] : cfg_data[SW-1:0];
            end
            if (step_we) begin
                step_reg <= cfg_data[15:0];
                gseg_reg <= {SW{1'b0}};
                gchunk_reg <= 16'd0;
                gindex_reg <= 17'd0;
                gword_reg <= 32'd0;
                overrun_reg <= 1'b0;
            end else if (advance) begin
                step_reg <= step_reg + 16'd1;
                gseg_reg <= {SW{1'b0}};
                gchunk_reg <= 16'd0;
                gindex_reg <= 17'd0;
                gword_reg <= 32'd0;
                // A word beyond the table in this cycle (only at a fire into an exhausted
                // table: the ended step's) left as an ERROR flit, and still says so.
                overrun_reg <= g_fire && !g_in_table;
            end else if (g_fire) begin
                if (!g_in_table) begin
                    overrun_reg <= 1'b1;
                end else if (g_layer_end) begin
                    gseg_reg <= gseg_reg + 1'b1;
                    gchunk_reg <= 16'd0;
                    gindex_reg <= 17'd0;
                    gword_reg <= 32'd0;
                end else if (g_chunk_end) begin
                    gchunk_reg <= gchunk_reg + 16'd1;
                    gindex_reg <= 17'd0;
                    gword_reg <= gword_reg + 32'd1;
                end else begin
                    gindex_reg <= gindex_reg + 17'd1;
                    gword_reg <= gword_reg + 32'd1;
                end
            end
        end
    end

    // ---------------------------------------------------------------- timestamps
    localparam LW = $clog2(TS_LAYERS > 1 ? TS_LAYERS : 2);
    reg [CNT_WIDTH-1:0] cycle_reg;
    reg [CNT_WIDTH-1:0] fwd_start_reg [0:TS_LAYERS-1];
    reg [CNT_WIDTH-1:0] fwd_end_reg [0:TS_LAYERS-1];
    reg [CNT_WIDTH-1:0] bwd_start_reg [0:TS_LAYERS-1];
    reg [CNT_WIDTH-1:0] bwd_end_reg [0:TS_LAYERS-1];
    reg [CNT_WIDTH-1:0] grad_last_reg [0:TS_LAYERS-1];
    reg [TS_LAYERS-1:0] seen_reg;   // the layer's forward pass has started this step
    reg [TS_LAYERS-1:0] bwd_reg;    // the layer's current pass is its backward

    wire        w_fire = s_w_valid && s_w_ready;
    // The kind and the step of a weight flit do not matter here (STEP starts a step).
    /* verilator lint_off UNUSEDSIGNAL */
    wire        unused_w_user = &{1'b0, s_w_user[WS_FLIT_STEP_LSB +: WS_FLIT_STEP_WIDTH],
                                  s_w_user[WS_FLIT_KIND_LSB +: WS_FLIT_KIND_WIDTH]};
    /* verilator lint_on UNUSEDSIGNAL */
    wire [11:0] w_layer = s_w_user[WS_FLIT_LAYER_LSB +: WS_FLIT_LAYER_WIDTH];
    wire        w_first = s_w_user[WS_FLIT_CHUNK_LSB +: WS_FLIT_CHUNK_WIDTH] == 16'd0
                          && s_w_user[WS_FLIT_INDEX_LSB +: WS_FLIT_INDEX_WIDTH] == 16'd0;
    localparam [31:0] TSL32 = TS_LAYERS;
    wire        w_ts = w_fire && {20'd0, w_layer} < TSL32;
    wire [LW-1:0] wl = w_layer[LW-1:0];
    wire        g_ts = g_fire && g_in_table && !g_metrics && {20'd0, g_layer} < TSL32;
    wire [LW-1:0] gl = g_layer[LW-1:0];
    // A STEP write or a fire starts a new step: every weight word taken from a fire on is the
    // chained step's (the ended step's PEs took all of theirs).
    wire        new_step = step_we || chain_fire;

    assign cnt_cycle = cycle_reg;

    always @(posedge clk) begin
        if (rst || cnt_clear) begin
            cycle_reg <= {CNT_WIDTH{1'b0}};
            for (n = 0; n < TS_LAYERS; n = n + 1) begin
                fwd_start_reg[n] <= {CNT_WIDTH{1'b0}};
                fwd_end_reg[n] <= {CNT_WIDTH{1'b0}};
                bwd_start_reg[n] <= {CNT_WIDTH{1'b0}};
                bwd_end_reg[n] <= {CNT_WIDTH{1'b0}};
                grad_last_reg[n] <= {CNT_WIDTH{1'b0}};
            end
        end else begin
            cycle_reg <= cycle_reg + 1'b1;
            if (w_ts) begin
                if (w_first && !seen_reg[wl]) fwd_start_reg[wl] <= cycle_reg;
                if (w_first && seen_reg[wl]) bwd_start_reg[wl] <= cycle_reg;
                if ((w_first && seen_reg[wl]) || (!w_first && bwd_reg[wl])) begin
                    bwd_end_reg[wl] <= cycle_reg;
                end else begin
                    fwd_end_reg[wl] <= cycle_reg;
                end
            end
            if (g_ts) grad_last_reg[gl] <= cycle_reg;
        end
        if (rst || new_step) begin
            seen_reg <= {TS_LAYERS{1'b0}};
            bwd_reg <= {TS_LAYERS{1'b0}};
        end else if (w_ts && w_first) begin
            seen_reg[wl] <= 1'b1;
            bwd_reg[wl] <= seen_reg[wl];
        end
    end

    genvar gt;
    generate
        for (gt = 0; gt < TS_LAYERS; gt = gt + 1) begin : gen_ts
            assign ts_fwd_start[gt*CNT_WIDTH +: CNT_WIDTH] = fwd_start_reg[gt];
            assign ts_fwd_end[gt*CNT_WIDTH +: CNT_WIDTH] = fwd_end_reg[gt];
            assign ts_bwd_start[gt*CNT_WIDTH +: CNT_WIDTH] = bwd_start_reg[gt];
            assign ts_bwd_end[gt*CNT_WIDTH +: CNT_WIDTH] = bwd_end_reg[gt];
            assign ts_grad_last[gt*CNT_WIDTH +: CNT_WIDTH] = grad_last_reg[gt];
        end
    endgenerate

    // ---------------------------------------------------------------- FMA phases
    wire [R-1:0]    pe_run, pe_fma;
    wire [R*16-1:0] pe_pc;
    wire [R*4-1:0]  pe_op;

    ws_mesh_phases #(
        .R(R),
        .SLOTS(PROG_DEPTH)
    ) phases_inst (
        .clk(clk),
        .rst(rst),
        .now(ts_now),
        .step(run_step_reg),
        .tag_we(top_we && cfg_addr[15:8] == 8'h02),
        .tag_n(cfg_addr[7:0]),
        .tag_data(cfg_data[11:0]),
        .pe_run(pe_run),
        .pe_pc(pe_pc),
        .pe_op(pe_op),
        .pe_fma(pe_fma),
        .pe_busy(stat_busy),
        .pe_done(stat_done),
        .pe_err(stat_err),
        .m_rec_valid(m_ph_valid),
        .m_rec_begin(m_ph_begin),
        .m_rec_end(m_ph_end),
        .m_rec_word4(m_ph_word4),
        .m_rec_pc(m_ph_pc),
        .m_rec_pes(m_ph_pes),
        .m_rec_fmas(m_ph_fmas),
        .busy(ph_busy)
    );

    // ---------------------------------------------------------------- chained steps
    localparam FCW = $clog2(R + 1);
    reg [FCW-1:0] fma_now;   // FMA issues this cycle over the PEs
    integer fr;
    always @* begin
        fma_now = {FCW{1'b0}};
        for (fr = 0; fr < R; fr = fr + 1) fma_now = fma_now + FCW'(pe_fma[fr]);
    end
    wire [31:0] grad_words_next = grad_words_reg + {31'd0, m_g_valid && m_g_ready};

    always @(posedge clk) begin
        if (rst) begin
            chain_armed_reg <= 1'b0;
            chain_base_reg <= 8'd0;
            chain_len_reg <= 16'd0;
            chain_pending_reg <= 1'b0;
            chain_count_reg <= 16'd0;
            chain_cycle_reg <= {CNT_WIDTH{1'b0}};
            chain_fmas_reg <= {CNT_WIDTH{1'b0}};
            chain_grad_reg <= 32'd0;
            grad_words_reg <= 32'd0;
            fma_total_reg <= {CNT_WIDTH{1'b0}};
            run_step_reg <= 16'd0;
        end else begin
            grad_words_reg <= grad_words_next;
            fma_total_reg <= fma_total_reg + CNT_WIDTH'(fma_now);
            if (top_we && cfg_addr == REG_CHAIN) begin
                chain_armed_reg <= cfg_data[0];
                chain_base_reg <= cfg_data[15:8];
                chain_len_reg <= cfg_data[31:16];
            end else if (chain_fire) begin
                // Every PE is idle: no FMA issues in this cycle.
                chain_armed_reg <= 1'b0;
                chain_count_reg <= chain_count_reg + 16'd1;
                chain_cycle_reg <= cycle_reg;
                chain_fmas_reg <= fma_total_reg;
            end
            if (step_we || advance) chain_pending_reg <= 1'b0;
            else if (chain_fire) chain_pending_reg <= 1'b1;
            // With the word handed out in the advance's cycle, which is the ended step's.
            if (advance) chain_grad_reg <= grad_words_next;
            if (step_we) run_step_reg <= cfg_data[15:0];
            else if (chain_fire) run_step_reg <= step_reg + 16'd1;
        end
    end

    assign cnt_fma_total = fma_total_reg;
    assign chain_count = chain_count_reg;
    assign chain_armed = chain_armed_reg;
    assign chain_pending = chain_pending_reg;
    assign chain_cycle = chain_cycle_reg;
    assign chain_fmas = chain_fmas_reg;
    assign chain_grad = chain_grad_reg;

    // ---------------------------------------------------------------- PEs
    // The PEs' configuration port: cfg_*, or in a fire's cycle the chained start to every PE,
    // the word a broadcast CTRL start write carries.
    wire        pe_cfg_valid = cfg_valid || chain_fire;
    wire [15:0] pe_cfg_addr = chain_fire ? 16'h0000 : cfg_addr;
    wire [31:0] pe_cfg_data = chain_fire ? {chain_len_reg, chain_base_reg, 8'h01} : cfg_data;
    wire [R-1:0] pe_x_ready;
    wire [7:0]   x_pe = s_x_user[22:15];
    reg x_target_ready;
    integer xr;
    always @* begin
        x_target_ready = 1'b1;   // no PE there: taken and dropped
        for (xr = 0; xr < R; xr = xr + 1)
            if ({24'd0, x_pe} == 32'(xr)) x_target_ready = pe_x_ready[xr];
    end
    assign s_x_ready = !pe_cfg_valid && x_target_ready;

    genvar gr;
    generate
        for (gr = 0; gr < R; gr = gr + 1) begin : gen_pe
            localparam [31:0] GR32 = gr;
            wire sel = chain_fire || (cfg_valid && (cfg_pe == GR32[7:0] || cfg_pe == 8'hff));
            // Color 0 is weights in only, color 1 both ways, color 2 results out only.
            assign sl_valid[gr*C + 0] = 1'b0;
            assign sl_data[(gr*C + 0)*32 +: 32] = 32'd0;
            assign sl_last[gr*C + 0] = 1'b0;
            // A color-2 flit reaching a PE is a misroute the checker refuses; drain it.
            assign ml_ready[gr*C + 2] = 1'b0 == 1'b0;
            /* verilator lint_off UNUSEDSIGNAL */
            wire unused_tile = &{1'b0, sl_ready[gr*C + 0], ml_valid[gr*C + 2], ml_data[(gr*C + 2)*32 +: 32],
                                 ml_last[gr*C + 0], ml_last[gr*C + 1], ml_last[gr*C + 2]};
            /* verilator lint_on UNUSEDSIGNAL */

            ws_mesh_pe #(
                .SRAM_WORDS(SRAM_WORDS),
                .FMA_LAT(FMA_LAT),
                .MAX_B(MAX_B),
                .PROG_DEPTH(PROG_DEPTH),
                .CNT_WIDTH(CNT_WIDTH)
            ) pe_inst (
                .clk(clk),
                .rst(rst),
                .cfg_valid(sel),
                .cfg_addr(pe_cfg_addr),
                .cfg_data(pe_cfg_data),
                .x_valid(s_x_valid && !pe_cfg_valid && x_pe == GR32[7:0]),
                .x_ready(pe_x_ready[gr]),
                .x_addr(s_x_user[14:0]),
                .x_data(s_x_data),
                .s_valid(ml_valid[gr*C + 0]),
                .s_ready(ml_ready[gr*C + 0]),
                .s_data(ml_data[(gr*C + 0)*32 +: 32]),
                .s1_valid(ml_valid[gr*C + 1]),
                .s1_ready(ml_ready[gr*C + 1]),
                .s1_data(ml_data[(gr*C + 1)*32 +: 32]),
                .m1_valid(sl_valid[gr*C + 1]),
                .m1_ready(sl_ready[gr*C + 1]),
                .m1_data(sl_data[(gr*C + 1)*32 +: 32]),
                .m1_last(sl_last[gr*C + 1]),
                .m_valid(sl_valid[gr*C + 2]),
                .m_ready(sl_ready[gr*C + 2]),
                .m_data(sl_data[(gr*C + 2)*32 +: 32]),
                .m_last(sl_last[gr*C + 2]),
                .stat_busy(stat_busy[gr]),
                .stat_done(stat_done[gr]),
                .stat_err(stat_err[gr]),
                .stat_err_code(stat_err_code[gr*4 +: 4]),
                .stat_err_pc(),
                .stat_run(pe_run[gr]),
                .stat_pc(pe_pc[gr*16 +: 16]),
                .stat_op(pe_op[gr*4 +: 4]),
                .stat_fma(pe_fma[gr]),
                .cnt_fma(cnt_fma[gr*CNT_WIDTH +: CNT_WIDTH]),
                .cnt_fwd_cycles(cnt_fwd_cycles[gr*CNT_WIDTH +: CNT_WIDTH]),
                .cnt_dx_cycles(cnt_dx_cycles[gr*CNT_WIDTH +: CNT_WIDTH]),
                .cnt_grad_cycles(cnt_grad_cycles[gr*CNT_WIDTH +: CNT_WIDTH]),
                .cnt_loss_cycles(cnt_loss_cycles[gr*CNT_WIDTH +: CNT_WIDTH])
            );
        end
    endgenerate

endmodule

`default_nettype wire
