`default_nettype none

// ws_optim_lane: one MemoryX optimizer lane. It takes one parameter per cycle (the weight w,
// its optimizer state m, v, vmax and its reduced gradient g) and returns the updated w, m, v,
// vmax, for SGD (momentum, dampening, Nesterov), Adam (L2 weight decay, amsgrad) and AdamW,
// bit for bit as ws_common::golden::optim::update computes them (docs/memoryx.md
// "Operation sequences" is the schedule below).
//
// Where it sits: the MemoryX streamer feeds s_* with w, m, v, vmax read from the weight
// store and the gradient from SwarmX, writes m_* back to the store and forwards m_w into the
// outgoing weight stream; ws_optim_lanes puts LANES of these side by side.
//
// Configuration: cfg_* are the per-step constants ws_common::golden::optim::step_consts
// computes (firmware writes them). They are read at several depths of the pipeline, so they
// must not change while `busy` is high (a parameter is in flight); the streamer changes them
// between layers or steps, after busy falls.
//
// Flow control: the datapath runs free with a fixed latency (every FPnew unit, the divider
// and the square root advance every cycle), and its results go into an output FIFO of
// FIFO_DEPTH words. A credit counter counts the parameters accepted and not yet taken from
// m_*; s_ready is high while it is below FIFO_DEPTH, so the FIFO can never overflow however
// long m_ready stays low, and no parameter is ever dropped. With FIFO_DEPTH > LATENCY + 2 the
// lane sustains one parameter per cycle while m_ready is high. s_ready is a register output:
// no combinational path runs from m_ready to s_ready.
module ws_optim_lane #(
    parameter FMA_REGS = 2,       // pipeline registers in each FPnew FMA, >= 1
    parameter DIVSQRT_STEPS = 2,  // digit-recurrence steps per stage of the divider and root
    parameter FIFO_DEPTH = 64,    // output FIFO (the credit limit); power of two > LATENCY + 2
    parameter USER_WIDTH = 1,     // sideband carried from s_user to m_user unchanged
    parameter CLOCK_GATE = 1      // stop the datapath's clock while it is empty (simulation)
) (
    input  wire                  clk,
    input  wire                  rst,

    // Per-step constants (ws_common::golden::optim::Consts), stable while busy.
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
    input  wire [31:0]           s_w,
    input  wire [31:0]           s_m,
    input  wire [31:0]           s_v,
    input  wire [31:0]           s_vmax,
    input  wire [31:0]           s_g,
    input  wire [USER_WIDTH-1:0] s_user,

    output wire                  m_valid,
    input  wire                  m_ready,
    output wire [31:0]           m_w,
    output wire [31:0]           m_m,
    output wire [31:0]           m_v,
    output wire [31:0]           m_vmax,
    output wire [USER_WIDTH-1:0] m_user,

    output wire                  busy
);

    localparam F = FMA_REGS;
    localparam D = 2 + (25 + DIVSQRT_STEPS - 1) / DIVSQRT_STEPS;  // ws_optim_div/_sqrt latency
    // Operand times, in cycles after the input register (see docs/memoryx.md).
    localparam T1 = F;                  // g1, w1, k1*m, beta2*v
    localparam T2 = 2 * F;              // g2
    localparam T3 = 3 * F;              // m', c2*g2
    localparam T4 = 4 * F;              // v', Nesterov u
    localparam T5 = 4 * F + 1;          // max(vmax, v')
    localparam T6 = T5 + D;             // sqrt
    localparam T7 = T6 + F;             // denominator
    localparam T8 = T7 + D;             // quotient
    localparam T9 = T8 + F;             // w'
    // Input register to FIFO input.
    localparam LATENCY = 1 + T9;
    localparam CNT_W = $clog2(FIFO_DEPTH + 1);
    localparam OUT_W = 4 * 32 + USER_WIDTH;

    localparam FLAG_ADAM = 0;
    localparam FLAG_L2 = 1;
    localparam FLAG_MOMENTUM = 2;
    localparam FLAG_INIT = 3;
    localparam FLAG_NESTEROV = 4;
    localparam FLAG_AMSGRAD = 5;

    initial begin
        if (FMA_REGS < 1) $error("ws_optim_lane: FMA_REGS must be >= 1");
        if (DIVSQRT_STEPS < 1 || DIVSQRT_STEPS > 25) $error("ws_optim_lane: DIVSQRT_STEPS must be in 1..25");
        if (FIFO_DEPTH < 2 || (FIFO_DEPTH & (FIFO_DEPTH - 1)) != 0) begin
            $error("ws_optim_lane: FIFO_DEPTH must be a power of two");
        end
        if (FIFO_DEPTH <= LATENCY + 2) $error("ws_optim_lane: FIFO_DEPTH must exceed LATENCY + 2 for 1 parameter/cycle");
        if (USER_WIDTH < 1) $error("ws_optim_lane: USER_WIDTH must be at least 1");
    end

    // ---- credits and the input register ----
    reg [CNT_W-1:0]   credit_reg, credit_next;
    reg               ready_reg, ready_next;
    reg [LATENCY-1:0] valid_reg;
    reg [31:0]        w_reg, m_reg, v_reg, vmax_reg, g_reg;
    reg [USER_WIDTH-1:0] user_reg;

    wire s_fire = s_valid && ready_reg;
    wire fifo_s_ready;
    wire fifo_m_valid;
    wire m_fire = fifo_m_valid && m_ready;

    assign s_ready = ready_reg;
    assign busy = |valid_reg;

    always @* begin
        credit_next = credit_reg + {{(CNT_W-1){1'b0}}, s_fire} - {{(CNT_W-1){1'b0}}, m_fire};
        ready_next = credit_next < FIFO_DEPTH[CNT_W-1:0];
    end

    always @(posedge clk) begin
        if (rst) begin
            credit_reg <= {CNT_W{1'b0}};
            ready_reg <= 1'b0;
            valid_reg <= {LATENCY{1'b0}};
        end else begin
            credit_reg <= credit_next;
            ready_reg <= ready_next;
            valid_reg <= {valid_reg[LATENCY-2:0], s_fire};
        end
    end

    // ---- the datapath's clock ----
    // Everything from the input register to the FIFO's input advances in lockstep and only
    // carries meaning where valid_reg has a 1. It needs its clock when a parameter enters
    // (s_fire), while one is in flight (busy) and in reset; in any other cycle its registers
    // would only take values nobody reads, so the clock can stop (ws_clock_gate; CLOCK_GATE
    // = 0 keeps it free-running, and synthesis does not gate). The control above stays on clk.
    wire dclk;
    generate
        if (CLOCK_GATE != 0) begin : gate
            ws_clock_gate gate_inst (.clk(clk), .en(s_fire || busy || rst), .gclk(dclk));
        end else begin : no_gate
            assign dclk = clk;
        end
    endgenerate

    always @(posedge dclk) begin
        w_reg <= s_w;
        m_reg <= s_m;
        v_reg <= s_v;
        vmax_reg <= s_vmax;
        g_reg <= s_g;
        user_reg <= s_user;
    end

    wire adam = cfg_flags[FLAG_ADAM];

    // ---- T0 -> T1: g1 = g*gscale, w1 = w*decay, pm = k1*m, pv = beta2*v ----
    wire [31:0] g1, w1, pm, pv;
    ws_optim_fma #(.LATENCY(F)) g1_inst (.clk(dclk), .rst(rst), .in_a(g_reg), .in_b(cfg_gscale), .in_c(32'h8000_0000), .out_data(g1));
    ws_optim_fma #(.LATENCY(F)) w1_inst (.clk(dclk), .rst(rst), .in_a(w_reg), .in_b(cfg_decay), .in_c(32'h8000_0000), .out_data(w1));
    ws_optim_fma #(.LATENCY(F)) pm_inst (.clk(dclk), .rst(rst), .in_a(cfg_k1), .in_b(m_reg), .in_c(32'h8000_0000), .out_data(pm));
    ws_optim_fma #(.LATENCY(F)) pv_inst (.clk(dclk), .rst(rst), .in_a(cfg_beta2), .in_b(v_reg), .in_c(32'h8000_0000), .out_data(pv));

    wire [31:0] w_t1;
    ws_optim_delay #(.WIDTH(32), .DEPTH(T1)) w_t1_inst (.clk(dclk), .in_data(w_reg), .out_data(w_t1));

    // ---- T1 -> T2: g2 = L2 ? wd*w + g1 : g1 ----
    wire [31:0] g2_l2, g1_t2, pm_t2;
    ws_optim_fma #(.LATENCY(F)) g2_inst (.clk(dclk), .rst(rst), .in_a(cfg_wd), .in_b(w_t1), .in_c(g1), .out_data(g2_l2));
    ws_optim_delay #(.WIDTH(32), .DEPTH(T2 - T1)) g1_t2_inst (.clk(dclk), .in_data(g1), .out_data(g1_t2));
    ws_optim_delay #(.WIDTH(32), .DEPTH(T2 - T1)) pm_t2_inst (.clk(dclk), .in_data(pm), .out_data(pm_t2));
    wire [31:0] g2 = cfg_flags[FLAG_L2] ? g2_l2 : g1_t2;

    // ---- T2 -> T3: m' = k2*g2 + pm (SGD: g2 on the first step, m without momentum); qv = c2*g2 ----
    wire [31:0] m_fma, qv, g2_t3, m_t3, pv_t3;
    ws_optim_fma #(.LATENCY(F)) m_inst (.clk(dclk), .rst(rst), .in_a(cfg_k2), .in_b(g2), .in_c(pm_t2), .out_data(m_fma));
    ws_optim_fma #(.LATENCY(F)) qv_inst (.clk(dclk), .rst(rst), .in_a(cfg_c2), .in_b(g2), .in_c(32'h8000_0000), .out_data(qv));
    ws_optim_delay #(.WIDTH(32), .DEPTH(F)) g2_t3_inst (.clk(dclk), .in_data(g2), .out_data(g2_t3));
    ws_optim_delay #(.WIDTH(32), .DEPTH(T3)) m_t3_inst (.clk(dclk), .in_data(m_reg), .out_data(m_t3));
    ws_optim_delay #(.WIDTH(32), .DEPTH(T3 - T1)) pv_t3_inst (.clk(dclk), .in_data(pv), .out_data(pv_t3));
    reg [31:0] m_new;
    always @* begin
        if (adam) m_new = m_fma;
        else if (!cfg_flags[FLAG_MOMENTUM]) m_new = m_t3;
        else if (cfg_flags[FLAG_INIT]) m_new = g2_t3;
        else m_new = m_fma;
    end

    // ---- T3 -> T4: v' = qv*g2 + pv; Nesterov u = k1*m' + g2 ----
    wire [31:0] v_fma, u_nest, g2_t4, m_new_t4, v_t4, vmax_t4;
    ws_optim_fma #(.LATENCY(F)) v_inst (.clk(dclk), .rst(rst), .in_a(qv), .in_b(g2_t3), .in_c(pv_t3), .out_data(v_fma));
    ws_optim_fma #(.LATENCY(F)) nest_inst (.clk(dclk), .rst(rst), .in_a(cfg_k1), .in_b(m_new), .in_c(g2_t3), .out_data(u_nest));
    ws_optim_delay #(.WIDTH(32), .DEPTH(F)) g2_t4_inst (.clk(dclk), .in_data(g2_t3), .out_data(g2_t4));
    ws_optim_delay #(.WIDTH(32), .DEPTH(F)) m_new_t4_inst (.clk(dclk), .in_data(m_new), .out_data(m_new_t4));
    ws_optim_delay #(.WIDTH(32), .DEPTH(T4)) v_t4_inst (.clk(dclk), .in_data(v_reg), .out_data(v_t4));
    ws_optim_delay #(.WIDTH(32), .DEPTH(T4)) vmax_t4_inst (.clk(dclk), .in_data(vmax_reg), .out_data(vmax_t4));
    wire [31:0] v_new = adam ? v_fma : v_t4;
    // SGD's update direction is known here; Adam's is the quotient at T8.
    reg [31:0] u_sgd;
    always @* begin
        if (!cfg_flags[FLAG_MOMENTUM]) u_sgd = g2_t4;
        else if (cfg_flags[FLAG_NESTEROV]) u_sgd = u_nest;
        else u_sgd = m_new_t4;
    end

    // ---- T4 -> T5: vmax' = max(vmax, v') ----
    wire [31:0] vmax_max, v_fma_t5, vmax_t5;
    ws_optim_max max_inst (.clk(dclk), .in_a(vmax_t4), .in_b(v_fma), .out_data(vmax_max));
    ws_optim_delay #(.WIDTH(32), .DEPTH(1)) v_fma_t5_inst (.clk(dclk), .in_data(v_fma), .out_data(v_fma_t5));
    ws_optim_delay #(.WIDTH(32), .DEPTH(1)) vmax_t5_inst (.clk(dclk), .in_data(vmax_t4), .out_data(vmax_t5));
    wire        ams = adam && cfg_flags[FLAG_AMSGRAD];
    wire [31:0] vv = ams ? vmax_max : v_fma_t5;
    wire [31:0] vmax_new = ams ? vmax_max : vmax_t5;

    // ---- T5 -> T6 -> T7: den = sqrt(vv)*ibc2s + eps ----
    wire [31:0] root, den;
    wire        unused_sqrt_valid;
    ws_optim_sqrt #(.STEPS_PER_STAGE(DIVSQRT_STEPS)) sqrt_inst (
        .clk(dclk), .rst(rst), .in_valid(1'b1), .in_a(vv), .out_valid(unused_sqrt_valid), .out_data(root)
    );
    ws_optim_fma #(.LATENCY(F)) den_inst (.clk(dclk), .rst(rst), .in_a(root), .in_b(cfg_ibc2s), .in_c(cfg_eps), .out_data(den));

    // ---- T7 -> T8: q = m' / den ----
    wire [31:0] m_new_t7, quo;
    wire        unused_div_valid;
    ws_optim_delay #(.WIDTH(32), .DEPTH(T7 - T3)) m_new_t7_inst (.clk(dclk), .in_data(m_new), .out_data(m_new_t7));
    ws_optim_div #(.STEPS_PER_STAGE(DIVSQRT_STEPS)) div_inst (
        .clk(dclk), .rst(rst), .in_valid(1'b1), .in_a(m_new_t7), .in_b(den), .out_valid(unused_div_valid), .out_data(quo)
    );

    // ---- T8 -> T9: w' = neg_rate*u + w1 ----
    wire [31:0] w1_t8, u_sgd_t8, w_new;
    ws_optim_delay #(.WIDTH(32), .DEPTH(T8 - T1)) w1_t8_inst (.clk(dclk), .in_data(w1), .out_data(w1_t8));
    ws_optim_delay #(.WIDTH(32), .DEPTH(T8 - T4)) u_sgd_t8_inst (.clk(dclk), .in_data(u_sgd), .out_data(u_sgd_t8));
    wire [31:0] u = adam ? quo : u_sgd_t8;
    ws_optim_fma #(.LATENCY(F)) w_inst (.clk(dclk), .rst(rst), .in_a(cfg_neg_rate), .in_b(u), .in_c(w1_t8), .out_data(w_new));

    // ---- T9: everything else waits for w' ----
    wire [31:0] m_out, v_out, vmax_out;
    wire [USER_WIDTH-1:0] user_out;
    ws_optim_delay #(.WIDTH(32), .DEPTH(T9 - T7)) m_out_inst (.clk(dclk), .in_data(m_new_t7), .out_data(m_out));
    ws_optim_delay #(.WIDTH(32), .DEPTH(T9 - T4)) v_out_inst (.clk(dclk), .in_data(v_new), .out_data(v_out));
    ws_optim_delay #(.WIDTH(32), .DEPTH(T9 - T5)) vmax_out_inst (.clk(dclk), .in_data(vmax_new), .out_data(vmax_out));
    ws_optim_delay #(.WIDTH(USER_WIDTH), .DEPTH(T9)) user_out_inst (.clk(dclk), .in_data(user_reg), .out_data(user_out));

    // ---- the output FIFO the credits protect ----
    wire [OUT_W-1:0]         fifo_out;
    wire [CNT_W-1:0]         unused_level;
    ws_fifo #(.DEPTH(FIFO_DEPTH), .WIDTH(OUT_W)) out_fifo_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(valid_reg[LATENCY-1]),
        .s_ready(fifo_s_ready),
        .s_data({user_out, vmax_out, v_out, m_out, w_new}),
        .m_valid(fifo_m_valid),
        .m_ready(m_ready),
        .m_data(fifo_out),
        .level(unused_level)
    );
    // The credits guarantee room: fifo_s_ready is high whenever a result arrives.
    wire unused_fifo_s_ready = fifo_s_ready;

    assign m_valid = fifo_m_valid;
    assign {m_user, m_vmax, m_v, m_m, m_w} = fifo_out;

endmodule

`default_nettype wire
