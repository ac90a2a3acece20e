`default_nettype none

// ws_optim_lanes: LANES MemoryX optimizer lanes (ws_optim_lane) side by side, in lockstep:
// LANES parameters per cycle on one handshake. Lane i's fields are bits [32*i +: 32] of the
// s_*/m_* buses, so a streamer reading LANES consecutive parameters of a layer per beat puts
// parameter k of the beat in lane k. All lanes share the configuration.
//
// The lanes accept and deliver together: each gets s_valid only when all are ready, and
// m_ready only when all have a result, so they never drift apart (their credit counters stay
// equal) and the combined stream obeys valid/ready like one lane.
module ws_optim_lanes #(
    parameter LANES = 1,          // lanes, 1, 2 or 4
    parameter FMA_REGS = 2,       // pipeline registers in each FPnew FMA, >= 1
    parameter DIVSQRT_STEPS = 2,  // digit-recurrence steps per stage of the divider and root
    parameter FIFO_DEPTH = 64,    // per-lane output FIFO (credit limit), power of two
    parameter USER_WIDTH = 1,     // sideband carried from s_user to m_user (lane 0's copy)
    parameter CLOCK_GATE = 1      // stop each lane's datapath clock while it is empty (ws_clock_gate)
) (
    input  wire                  clk,
    input  wire                  rst,

    input  wire [5:0]            cfg_flags,
    input  wire [31:0]           cfg_gscale,
    input  wire [31:0]           cfg_wd,
    input  wire [31:0]           cfg_decay,
    input  wire [31:0]           cfg_k1,
    input  wire [31:0]           cfg_k2,
    input  wire [31:0]           cfg_beta2,
    input  wire [31:0]           cfg_c2,
    input  wire [31:0]           cfg_ibc2s,
    input  wire [31:0]           cfg_eps,
    input  wire [31:0]           cfg_neg_rate,

    input  wire                  s_valid,
    output wire                  s_ready,
    input  wire [32*LANES-1:0]   s_w,
    input  wire [32*LANES-1:0]   s_m,
    input  wire [32*LANES-1:0]   s_v,
    input  wire [32*LANES-1:0]   s_vmax,
    input  wire [32*LANES-1:0]   s_g,
    input  wire [USER_WIDTH-1:0] s_user,

    output wire                  m_valid,
    input  wire                  m_ready,
    output wire [32*LANES-1:0]   m_w,
    output wire [32*LANES-1:0]   m_m,
    output wire [32*LANES-1:0]   m_v,
    output wire [32*LANES-1:0]   m_vmax,
    output wire [USER_WIDTH-1:0] m_user,

    output wire                  busy
);

    initial begin
        if (LANES != 1 && LANES != 2 && LANES != 4) $error("ws_optim_lanes: LANES must be 1, 2 or 4");
    end

    wire [LANES-1:0] lane_s_ready;
    wire [LANES-1:0] lane_m_valid;
    wire [LANES-1:0] lane_busy;
    wire [USER_WIDTH*LANES-1:0] lane_user;

    wire all_ready = &lane_s_ready;
    wire all_valid = &lane_m_valid;

    assign s_ready = all_ready;
    assign m_valid = all_valid;
    assign busy = |lane_busy;
    assign m_user = lane_user[USER_WIDTH-1:0];

    genvar i;
    generate
        for (i = 0; i < LANES; i = i + 1) begin : lane
            ws_optim_lane #(
                .FMA_REGS(FMA_REGS),
                .DIVSQRT_STEPS(DIVSQRT_STEPS),
                .FIFO_DEPTH(FIFO_DEPTH),
                .USER_WIDTH(USER_WIDTH),
                .CLOCK_GATE(CLOCK_GATE)
            ) lane_inst (
                .clk(clk),
                .rst(rst),
                .cfg_flags(cfg_flags),
                .cfg_gscale(cfg_gscale),
                .cfg_wd(cfg_wd),
                .cfg_decay(cfg_decay),
                .cfg_k1(cfg_k1),
                .cfg_k2(cfg_k2),
                .cfg_beta2(cfg_beta2),
                .cfg_c2(cfg_c2),
                .cfg_ibc2s(cfg_ibc2s),
                .cfg_eps(cfg_eps),
                .cfg_neg_rate(cfg_neg_rate),
                .s_valid(s_valid && all_ready),
                .s_ready(lane_s_ready[i]),
                .s_w(s_w[32*i +: 32]),
                .s_m(s_m[32*i +: 32]),
                .s_v(s_v[32*i +: 32]),
                .s_vmax(s_vmax[32*i +: 32]),
                .s_g(s_g[32*i +: 32]),
                .s_user(s_user),
                .m_valid(lane_m_valid[i]),
                .m_ready(m_ready && all_valid),
                .m_w(m_w[32*i +: 32]),
                .m_m(m_m[32*i +: 32]),
                .m_v(m_v[32*i +: 32]),
                .m_vmax(m_vmax[32*i +: 32]),
                .m_user(lane_user[USER_WIDTH*i +: USER_WIDTH]),
                .busy(lane_busy[i])
            );
        end
    endgenerate

endmodule

`default_nettype wire
