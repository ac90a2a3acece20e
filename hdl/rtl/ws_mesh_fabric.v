`default_nettype none

// ws_mesh_fabric: a P x Q array of ws_mesh_router, the routed fabric of the wafer emulation
// (docs/architecture.md "Wafer emulation", docs/mesh-router.md "The fabric").
//
// Router (y, x) sits in row y (0 is the north edge) and column x (0 is the west edge) and has
// index r = y*Q + x. Neighbouring routers are joined by credit links in both directions:
// the E output of (y, x) drives the W input of (y, x+1), and the credits of that W input come
// back to the E output, and so on for every direction. Every router's local port is exposed
// (the PEs plug in there), and so is every link that leaves the array: these edge links are
// where weight ingress, gradient egress and the other edge ports of the mesh attach. An edge
// link that nothing drives must have its s_edge_valid and m_edge_credit tied low; its
// m_edge_* output then only ever carries what a route sends off the edge, which the route
// checker (ws_hdl::mesh) refuses for edges not declared as an egress.
//
// Edge link numbering, e in 0 .. 2*(P+Q)-1: the north side x = 0..Q-1 is e = x, the east
// side y = 0..P-1 is e = Q + y, the south side x is e = Q + P + x, the west side y is
// e = 2*Q + P + y. Flat buses slice as [e*W +: W] (credits: [e*COLORS + c]).
//
// Configuration: cfg_router selects the router a cfg_we write goes to; the other cfg_* fields
// are those of ws_mesh_router. Counters and status are the routers' own, concatenated by
// router index (router r's cnt_fwd in [r*5*COLORS*CNT_WIDTH +: 5*COLORS*CNT_WIDTH], ...).
module ws_mesh_fabric #(
    parameter P = 2,             // rows, 1..16
    parameter Q = 2,             // columns, 1..16
    parameter COLORS = 2,        // colors of every router, 2..16
    parameter BUF_DEPTH = 4,     // flits per color per router input; power of two >= 2
    parameter DATA_WIDTH = 32,   // payload bits of a flit
    parameter USER_WIDTH = 64,   // header bits of a flit
    parameter QUOTA_WIDTH = 8,   // bits of a route entry's ordered-merge quota
    parameter CNT_WIDTH = 32     // bits of every counter
) (
    input  wire                                     clk,
    input  wire                                     rst,

    // Local ports of the PEs: router r, color c at [(r*COLORS+c)*W +: W].
    input  wire [P*Q*COLORS-1:0]                    s_local_valid,
    output wire [P*Q*COLORS-1:0]                    s_local_ready,
    input  wire [P*Q*COLORS*DATA_WIDTH-1:0]         s_local_data,
    input  wire [P*Q*COLORS-1:0]                    s_local_last,
    input  wire [P*Q*COLORS*USER_WIDTH-1:0]         s_local_user,

    output wire [P*Q*COLORS-1:0]                    m_local_valid,
    input  wire [P*Q*COLORS-1:0]                    m_local_ready,
    output wire [P*Q*COLORS*DATA_WIDTH-1:0]         m_local_data,
    output wire [P*Q*COLORS-1:0]                    m_local_last,
    output wire [P*Q*COLORS*USER_WIDTH-1:0]         m_local_user,

    // Edge links into the array, e numbered as above.
    input  wire [2*(P+Q)-1:0]                       s_edge_valid,
    input  wire [2*(P+Q)*$clog2(COLORS)-1:0]        s_edge_color,
    input  wire [2*(P+Q)*DATA_WIDTH-1:0]            s_edge_data,
    input  wire [2*(P+Q)-1:0]                       s_edge_last,
    input  wire [2*(P+Q)*USER_WIDTH-1:0]            s_edge_user,
    output wire [2*(P+Q)*COLORS-1:0]                s_edge_credit,

    // Edge links out of the array.
    output wire [2*(P+Q)-1:0]                       m_edge_valid,
    output wire [2*(P+Q)*$clog2(COLORS)-1:0]        m_edge_color,
    output wire [2*(P+Q)*DATA_WIDTH-1:0]            m_edge_data,
    output wire [2*(P+Q)-1:0]                       m_edge_last,
    output wire [2*(P+Q)*USER_WIDTH-1:0]            m_edge_user,
    input  wire [2*(P+Q)*COLORS-1:0]                m_edge_credit,

    // Route table write to router cfg_router.
    input  wire                                     cfg_we,
    input  wire [7:0]                               cfg_router,
    input  wire [2:0]                               cfg_in_port,
    input  wire [$clog2(COLORS)-1:0]                cfg_color,
    input  wire [4:0]                               cfg_out_mask,
    input  wire [QUOTA_WIDTH-1:0]                   cfg_quota,
    input  wire                                     cnt_clear,

    // Every router's counters and status, by router index.
    output wire [P*Q*5*COLORS*CNT_WIDTH-1:0]        cnt_fwd,
    output wire [P*Q*5*CNT_WIDTH-1:0]               cnt_busy,
    output wire [P*Q*5*CNT_WIDTH-1:0]               cnt_stall,
    output wire [P*Q*5*CNT_WIDTH-1:0]               cnt_misroute,
    output wire [P*Q*4-1:0]                         stat_overflow,
    output wire [P*Q*4-1:0]                         stat_credit_err,
    output wire [P*Q-1:0]                           stat_busy
);

    `include "ws_mesh_flit.vh"

    localparam R = P * Q;
    localparam CW = $clog2(COLORS);

    initial begin
        if (P < 1 || P > 16) $error("ws_mesh_fabric: P must be 1..16");
        if (Q < 1 || Q > 16) $error("ws_mesh_fabric: Q must be 1..16");
    end

    // Every router's link ports, by (router, port): index r*4 + p.
    wire [R*4-1:0]              in_valid;
    wire [R*4*CW-1:0]           in_color;
    wire [R*4*DATA_WIDTH-1:0]   in_data;
    wire [R*4-1:0]              in_last;
    wire [R*4*USER_WIDTH-1:0]   in_user;
    wire [R*4*COLORS-1:0]       in_credit;      // credits the router returns on its input
    wire [R*4-1:0]              out_valid;
    wire [R*4*CW-1:0]           out_color;
    wire [R*4*DATA_WIDTH-1:0]   out_data;
    wire [R*4-1:0]              out_last;
    wire [R*4*USER_WIDTH-1:0]   out_user;
    wire [R*4*COLORS-1:0]       out_credit;     // credits the router's output receives

    genvar gy, gx, gp;
    generate
        for (gy = 0; gy < P; gy = gy + 1) begin : gen_row
            for (gx = 0; gx < Q; gx = gx + 1) begin : gen_col
                localparam RI = gy * Q + gx;
                localparam [31:0] RI32 = RI;
                localparam [7:0] RI8 = RI32[7:0];

                for (gp = 0; gp < WS_MESH_LINKS; gp = gp + 1) begin : gen_port
                    // The neighbour across port gp, or the edge link this port is.
                    localparam HAS_NB = (gp == WS_MESH_PORT_N) ? (gy > 0) :
                                        (gp == WS_MESH_PORT_E) ? (gx < Q - 1) :
                                        (gp == WS_MESH_PORT_S) ? (gy < P - 1) : (gx > 0);
                    localparam NB = (gp == WS_MESH_PORT_N) ? RI - Q :
                                    (gp == WS_MESH_PORT_E) ? RI + 1 :
                                    (gp == WS_MESH_PORT_S) ? RI + Q : RI - 1;
                    localparam EI = (gp == WS_MESH_PORT_N) ? gx :
                                    (gp == WS_MESH_PORT_E) ? Q + gy :
                                    (gp == WS_MESH_PORT_S) ? Q + P + gx : 2 * Q + P + gy;
                    // The port the link arrives on at the neighbour.
                    localparam OPP = gp ^ 2;
                    localparam A = RI * 4 + gp;
                    localparam B = NB * 4 + OPP;

                    if (HAS_NB) begin : gen_inner
                        assign in_valid[A] = out_valid[B];
                        assign in_color[A*CW +: CW] = out_color[B*CW +: CW];
                        assign in_data[A*DATA_WIDTH +: DATA_WIDTH] = out_data[B*DATA_WIDTH +: DATA_WIDTH];
                        assign in_last[A] = out_last[B];
                        assign in_user[A*USER_WIDTH +: USER_WIDTH] = out_user[B*USER_WIDTH +: USER_WIDTH];
                        assign out_credit[A*COLORS +: COLORS] = in_credit[B*COLORS +: COLORS];
                    end else begin : gen_edge
                        assign in_valid[A] = s_edge_valid[EI];
                        assign in_color[A*CW +: CW] = s_edge_color[EI*CW +: CW];
                        assign in_data[A*DATA_WIDTH +: DATA_WIDTH] = s_edge_data[EI*DATA_WIDTH +: DATA_WIDTH];
                        assign in_last[A] = s_edge_last[EI];
                        assign in_user[A*USER_WIDTH +: USER_WIDTH] = s_edge_user[EI*USER_WIDTH +: USER_WIDTH];
                        assign s_edge_credit[EI*COLORS +: COLORS] = in_credit[A*COLORS +: COLORS];
                        assign m_edge_valid[EI] = out_valid[A];
                        assign m_edge_color[EI*CW +: CW] = out_color[A*CW +: CW];
                        assign m_edge_data[EI*DATA_WIDTH +: DATA_WIDTH] = out_data[A*DATA_WIDTH +: DATA_WIDTH];
                        assign m_edge_last[EI] = out_last[A];
                        assign m_edge_user[EI*USER_WIDTH +: USER_WIDTH] = out_user[A*USER_WIDTH +: USER_WIDTH];
                        assign out_credit[A*COLORS +: COLORS] = m_edge_credit[EI*COLORS +: COLORS];
                    end
                end

                ws_mesh_router #(
                    .COLORS(COLORS),
                    .BUF_DEPTH(BUF_DEPTH),
                    .DATA_WIDTH(DATA_WIDTH),
                    .USER_WIDTH(USER_WIDTH),
                    .QUOTA_WIDTH(QUOTA_WIDTH),
                    .CNT_WIDTH(CNT_WIDTH)
                ) router_inst (
                    .clk(clk),
                    .rst(rst),
                    .s_link_valid(in_valid[RI*4 +: 4]),
                    .s_link_color(in_color[RI*4*CW +: 4*CW]),
                    .s_link_data(in_data[RI*4*DATA_WIDTH +: 4*DATA_WIDTH]),
                    .s_link_last(in_last[RI*4 +: 4]),
                    .s_link_user(in_user[RI*4*USER_WIDTH +: 4*USER_WIDTH]),
                    .s_link_credit(in_credit[RI*4*COLORS +: 4*COLORS]),
                    .m_link_valid(out_valid[RI*4 +: 4]),
                    .m_link_color(out_color[RI*4*CW +: 4*CW]),
                    .m_link_data(out_data[RI*4*DATA_WIDTH +: 4*DATA_WIDTH]),
                    .m_link_last(out_last[RI*4 +: 4]),
                    .m_link_user(out_user[RI*4*USER_WIDTH +: 4*USER_WIDTH]),
                    .m_link_credit(out_credit[RI*4*COLORS +: 4*COLORS]),
                    .s_local_valid(s_local_valid[RI*COLORS +: COLORS]),
                    .s_local_ready(s_local_ready[RI*COLORS +: COLORS]),
                    .s_local_data(s_local_data[RI*COLORS*DATA_WIDTH +: COLORS*DATA_WIDTH]),
                    .s_local_last(s_local_last[RI*COLORS +: COLORS]),
                    .s_local_user(s_local_user[RI*COLORS*USER_WIDTH +: COLORS*USER_WIDTH]),
                    .m_local_valid(m_local_valid[RI*COLORS +: COLORS]),
                    .m_local_ready(m_local_ready[RI*COLORS +: COLORS]),
                    .m_local_data(m_local_data[RI*COLORS*DATA_WIDTH +: COLORS*DATA_WIDTH]),
                    .m_local_last(m_local_last[RI*COLORS +: COLORS]),
                    .m_local_user(m_local_user[RI*COLORS*USER_WIDTH +: COLORS*USER_WIDTH]),
                    .cfg_we(cfg_we && cfg_router == RI8),
                    .cfg_in_port(cfg_in_port),
                    .cfg_color(cfg_color),
                    .cfg_out_mask(cfg_out_mask),
                    .cfg_quota(cfg_quota),
                    .cnt_clear(cnt_clear),
                    .cnt_fwd(cnt_fwd[RI*5*COLORS*CNT_WIDTH +: 5*COLORS*CNT_WIDTH]),
                    .cnt_busy(cnt_busy[RI*5*CNT_WIDTH +: 5*CNT_WIDTH]),
                    .cnt_stall(cnt_stall[RI*5*CNT_WIDTH +: 5*CNT_WIDTH]),
                    .cnt_misroute(cnt_misroute[RI*5*CNT_WIDTH +: 5*CNT_WIDTH]),
                    .stat_overflow(stat_overflow[RI*4 +: 4]),
                    .stat_credit_err(stat_credit_err[RI*4 +: 4]),
                    .stat_busy(stat_busy[RI])
                );
            end
        end
    endgenerate

endmodule

`default_nettype wire
