`default_nettype none

// ws_mesh_loss: the loss stage of a PE (docs/mesh-pe.md "The loss stage", issue 7): softmax
// cross-entropy and the prediction of B samples, in place over their logits in the PE's SRAM,
// bit for bit ws_common::golden::mesh::loss::softmax_xent. It owns no arithmetic unit of its
// own besides the small divider ws_mesh_div: every ADD and MUL of the golden sequence runs on
// the PE's FPnew FMA (ADD a + b = fma(a, 1, b) and MUL a*b = fma(a, b, -0) round once, as the
// golden add and mul do, IEEE-754-2019 §5.4.1), which is idle while a LOSS instruction runs;
// comparisons, fmax, argmax and exponent-field arithmetic are logic.
//
// Layout (words): logits z[s][i] at src + s*C + i (dz is written over them), labels as
// unsigned integers at lab + s, the sample's loss at dst + 2s and its correct flag (1.0 when
// the prediction equals the label, else +0) at dst + 2s + 1, for s = 0..B-1.
//
// Per sample, in this order (the golden order of loss.rs; every FMA waits for the previous
// one: the stage is latency-bound, FMA_LAT + 2 cycles an operation, which is cheap beside
// the layers' B*K*M FMAs):
//   read the label; scan z_0..z_(C-1): m = fmax (IEEE-754-2019 §9.6 maximumNumber: NaN loses,
//   -0 < +0), pred = first index of the largest (compareQuietGreater, NaN above all, first
//   NaN wins), z_y kept;  d_y = z_y - m;
//   per class i: x = z_i - m, e_i = exp(x) (below), e_i written over z_i, S = S + e_i from -0;
//   r = 1/S (ws_mesh_div);  per class i: dz_i = fma(e_i, r, -1 if i = y else -0), written;
//   loss = ln(S) (below) - d_y;  write loss and the correct flag.
// exp (golden funcs::exp): NaN -> canonical NaN, x > 89 -> +inf, x < -105 -> +0, otherwise
//   k = fma(x, 1/ln2, 1.5*2^23), n = bits(k) - bits(1.5*2^23), nf = k - 1.5*2^23,
//   r_hi = fma(nf, -LN2_HI, x), r = fma(nf, -LN2_LO, r_hi), p = Horner of the 1/j! from j = 7,
//   then mul(mul(p, 2^floor(n/2)), 2^(n - floor(n/2))).
// ln (golden funcs::ln): NaN and negatives -> canonical NaN, +-0 -> -inf, +inf -> +inf; a
//   subnormal is multiplied by 2^23 first; e and m from the fields, m halved above the
//   binary32 below sqrt(2); f = m - 1, s = div(f, f + 2), z = s*s, q = Horner of LN_POLY in z,
//   R = q*z, t = f - R, l = fma(-s, t, f), result fma(e, LN2_HI, fma(e, LN2_LO, l)).
// A label >= C (not a class) gives loss = canonical NaN, flag +0 and dz = softmax with no
// one-hot term; the NaN then poisons the step's summed loss, which is how it is reported.
//
// Interface: `start` (one cycle, while !busy) with the instruction's fields; `done` pulses
// once at the end. The SRAM ports follow ws_mesh_pe_sram (read data one cycle after rd_en);
// fma_a/b/c go to the FMA's inputs (registered), whose result is on fma_out FMA_LAT cycles
// after they change; fma_issue pulses for each FMA (the PE's cnt_fma).
module ws_mesh_loss #(
    parameter AW = 11,       // SRAM address bits
    parameter FMA_LAT = 3    // FMA pipeline registers, as the PE's
) (
    input  wire          clk,
    input  wire          rst,

    input  wire          start,
    input  wire [7:0]    in_b,     // samples
    input  wire [15:0]   in_c,     // classes
    input  wire [AW-1:0] in_src,   // logits
    input  wire [AW-1:0] in_lab,   // labels
    input  wire [AW-1:0] in_dst,   // loss, flag
    output wire          busy,
    output reg           done,

    output wire          rd_en,
    output wire [AW-1:0] rd_addr,
    input  wire [31:0]   rd_data,
    output wire          we,
    output wire [AW-1:0] waddr,
    output wire [31:0]   wdata,

    output reg  [31:0]   fma_a,
    output reg  [31:0]   fma_b,
    output reg  [31:0]   fma_c,
    input  wire [31:0]   fma_out,
    output wire          fma_issue
);

    localparam [31:0] CANONICAL_NAN = 32'h7fc0_0000;
    localparam [31:0] NEG_ZERO = 32'h8000_0000;
    localparam [31:0] POS_ZERO = 32'h0000_0000;
    localparam [31:0] POS_INF = 32'h7f80_0000;
    localparam [31:0] NEG_INF = 32'hff80_0000;
    localparam [31:0] ONE = 32'h3f80_0000;
    localparam [31:0] NEG_ONE = 32'hbf80_0000;
    localparam [31:0] TWO = 32'h4000_0000;
    localparam [31:0] TWO_POW_23 = 32'h4b00_0000;
    localparam [31:0] SIGN = 32'h8000_0000;
    // The constants of golden funcs (the names are theirs).
    localparam [31:0] EXP_X_MAX = 32'h42b2_0000;  // 89.0
    localparam [31:0] EXP_X_MIN = 32'hc2d2_0000;  // -105.0
    localparam [31:0] INV_LN2 = 32'h3fb8_aa3b;
    localparam [31:0] SHIFTER = 32'h4b40_0000;
    localparam [31:0] LN2_HI = 32'h3f31_7218;
    localparam [31:0] LN2_LO = 32'hb102_e308;
    localparam [31:0] SQRT2_BITS = 32'h3fb5_04f3;

    // EXP_POLY[j], j = 0..7: 1/(7-j)! (Horner order).
    function automatic [31:0] exp_poly(input [2:0] j);
        case (j)
            3'd0: exp_poly = 32'h3950_0d01;
            3'd1: exp_poly = 32'h3ab6_0b61;
            3'd2: exp_poly = 32'h3c08_8889;
            3'd3: exp_poly = 32'h3d2a_aaab;
            3'd4: exp_poly = 32'h3e2a_aaab;
            3'd5: exp_poly = 32'h3f00_0000;
            default: exp_poly = ONE;   // 6, 7
        endcase
    endfunction

    // LN_POLY[j], j = 0..3: 2/9, 2/7, 2/5, 2/3.
    function automatic [31:0] ln_poly(input [1:0] j);
        case (j)
            2'd0: ln_poly = 32'h3e63_8e39;
            2'd1: ln_poly = 32'h3e92_4925;
            2'd2: ln_poly = 32'h3ecc_cccd;
            default: ln_poly = 32'h3f2a_aaab;
        endcase
    endfunction

    /* verilator lint_off UNUSEDSIGNAL */
    function automatic is_nan(input [31:0] v);  // the sign does not matter
        is_nan = v[30:23] == 8'hff && v[22:0] != 23'd0;
    endfunction
    /* verilator lint_on UNUSEDSIGNAL */

    // Sign-magnitude to an unsigned key in the same order (-0 just below +0).
    function automatic [31:0] key(input [31:0] v);
        key = v[31] ? ~v : (v | SIGN);
    endfunction

    // x < y for non-NaN operands (the thresholds of exp are never zero).
    function automatic less(input [31:0] x, input [31:0] y);
        less = key(x) < key(y);
    endfunction

    // FPnew MAX (golden loss::fmax).
    function automatic [31:0] fmax(input [31:0] a, input [31:0] b);
        if (is_nan(a) && is_nan(b)) fmax = CANONICAL_NAN;
        else if (is_nan(a)) fmax = b;
        else if (is_nan(b)) fmax = a;
        else fmax = (key(a) >= key(b)) ? a : b;
    endfunction

    // argmax's a > b (golden loss::greater): numeric, -0 = +0, NaN above every number.
    function automatic greater(input [31:0] a, input [31:0] b);
        if (is_nan(b)) greater = 1'b0;
        else if (is_nan(a)) greater = 1'b1;
        else if (a[30:0] == 31'd0 && b[30:0] == 31'd0) greater = 1'b0;
        else greater = key(a) > key(b);
    endfunction

    // 2^e for e in [-126, 127] (exponent arithmetic).
    /* verilator lint_off UNUSEDSIGNAL */
    function automatic [31:0] pow2(input signed [9:0] e);
        reg [9:0] biased;  // 1..254 for the e used
        begin
            biased = e + 10'sd127;
            pow2 = {1'b0, biased[7:0], 23'd0};
        end
    endfunction
    /* verilator lint_on UNUSEDSIGNAL */

    // An integer |e| < 256 to binary32, exactly (I2F); 0 -> +0.
    function automatic [31:0] i2f(input signed [9:0] e);
        reg [9:0] mag;
        reg [3:0] top;
        reg [22:0] frac;
        reg [7:0] biased;
        integer bi;
        begin
            mag = e[9] ? -e : e;
            top = 4'd0;
            for (bi = 0; bi < 8; bi = bi + 1) begin
                if (mag[bi]) top = bi[3:0];
            end
            frac = {mag[7:0], 15'd0} << (4'd8 - top);
            biased = 8'd127 + {4'd0, top};
            i2f = (mag == 10'd0) ? POS_ZERO : {e[9], biased, frac};
        end
    endfunction

    // ---------------------------------------------------------------- states
    localparam [5:0] L_IDLE = 6'd0, L_LAB = 6'd1, L_LABD = 6'd2, L_MAXR = 6'd3, L_MAXD = 6'd4,
                     L_DY = 6'd5, L_DY2 = 6'd6, L_XR = 6'd7, L_XD = 6'd8, L_EXP0 = 6'd9,
                     L_EXP1 = 6'd10, L_EXP2 = 6'd11, L_EXP3 = 6'd12, L_POLY = 6'd13,
                     L_SC1 = 6'd14, L_SC2 = 6'd15, L_SUM = 6'd16, L_SUM2 = 6'd17,
                     L_DIV = 6'd18, L_DZR = 6'd19, L_DZD = 6'd20, L_LN0 = 6'd21,
                     L_LN1 = 6'd22, L_LN2 = 6'd23, L_LN3 = 6'd24, L_LN4 = 6'd25,
                     L_LN5 = 6'd26, L_LNP = 6'd27, L_LN6 = 6'd28, L_LN7 = 6'd29,
                     L_LN8 = 6'd30, L_LN9 = 6'd31, L_LN10 = 6'd32, L_LOSS = 6'd33,
                     L_WR0 = 6'd34, L_WR1 = 6'd35, L_FWAIT = 6'd36, L_DWAIT = 6'd37;
    localparam [31:0] FMA_LAT32 = FMA_LAT;
    localparam [4:0] WAIT_L = FMA_LAT32[4:0];

    initial begin
        if (FMA_LAT < 0 || FMA_LAT > 31) $error("ws_mesh_loss: FMA_LAT must be 0..31");
    end

    reg [5:0]    st_reg;
    reg [5:0]    next_reg;    // where L_FWAIT / L_DWAIT go with the result in res_reg
    reg [4:0]    wait_reg;
    reg [31:0]   res_reg;     // the last operation's result

    reg [7:0]    b_reg;
    reg [15:0]   c_reg;
    reg [AW-1:0] lab_reg;
    reg [AW-1:0] dst_reg;
    reg [7:0]    s_reg;       // sample
    reg [AW-1:0] base_reg;    // src + s*C
    reg [15:0]   i_reg;       // class
    reg [31:0]   y_reg;       // label
    reg          ybad_reg;    // label >= C
    reg [31:0]   m_reg;       // max
    reg [31:0]   best_reg;    // argmax's best value so far
    reg [15:0]   pred_reg;
    reg [31:0]   zy_reg;
    reg [31:0]   dy_reg;
    reg [31:0]   x_reg;
    reg signed [9:0] n_reg;
    reg [31:0]   nf_reg;
    reg [31:0]   r_reg;
    reg [2:0]    j_reg;       // Horner step
    reg [31:0]   sum_reg;
    reg [31:0]   rcp_reg;
    reg signed [9:0] e_reg;   // ln: exponent
    reg signed [9:0] adj_reg; // ln: -23 for a subnormal S
    reg [31:0]   f_reg;
    reg [31:0]   sv_reg;      // ln: s
    reg [31:0]   z_reg;       // ln: s*s

    wire last_class = i_reg + 16'd1 == c_reg;
    wire [AW-1:0] zaddr = base_reg + i_reg[AW-1:0];
    wire is_label = !ybad_reg && {16'd0, i_reg} == y_reg;

    // ---------------------------------------------------------------- the divider
    reg          div_start;
    reg  [31:0]  div_a;
    reg  [31:0]  div_b;
    /* verilator lint_off UNUSEDSIGNAL */
    wire         div_busy;   // the FSM waits for done instead
    /* verilator lint_on UNUSEDSIGNAL */
    wire         div_done;
    wire [31:0]  div_q;

    ws_mesh_div div_inst (
        .clk(clk),
        .rst(rst),
        .start(div_start),
        .a(div_a),
        .b(div_b),
        .busy(div_busy),
        .done(div_done),
        .q(div_q)
    );

    // ---------------------------------------------------------------- SRAM
    assign rd_en = st_reg == L_LAB || st_reg == L_MAXR || st_reg == L_XR || st_reg == L_DZR;
    // The sample index widened and cut to the address width (s < B <= SRAM_WORDS).
    /* verilator lint_off UNUSEDSIGNAL */
    wire [31:0] s32 = {24'd0, s_reg};
    wire [31:0] s2_32 = {23'd0, s_reg, 1'b0};
    /* verilator lint_on UNUSEDSIGNAL */
    assign rd_addr = (st_reg == L_LAB) ? lab_reg + s32[AW-1:0] : zaddr;
    // Writes: e_i (L_SUM) and dz_i (L_DZD's result, at L_DZD + the FMA wait) over z_i; the
    // loss and the flag.
    reg          dzw_reg;     // the FMA in flight is a dz: write it when it returns
    wire         wr_e = st_reg == L_SUM;
    wire         wr_dz = st_reg == L_FWAIT && wait_reg == 5'd0 && dzw_reg;
    wire         wr_loss = st_reg == L_WR0;
    wire         wr_flag = st_reg == L_WR1;
    assign we = wr_e || wr_dz || wr_loss || wr_flag;
    wire [AW-1:0] dst2 = dst_reg + s2_32[AW-1:0];
    assign waddr = wr_loss ? dst2 : wr_flag ? dst2 + 1'b1 : zaddr;
    assign wdata = wr_e ? res_reg : wr_dz ? fma_out : wr_loss ? (ybad_reg ? CANONICAL_NAN : res_reg)
                 : (!ybad_reg && {16'd0, pred_reg} == y_reg) ? ONE : POS_ZERO;

    assign busy = st_reg != L_IDLE;

    // fma_a/b/c changed this cycle: one FMA issued.
    reg          issue_reg;
    assign fma_issue = issue_reg;

    // ln's fields of res_reg (S, or S * 2^23 for a subnormal S).
    wire signed [9:0] ln_e0 = $signed({2'b0, res_reg[30:23]}) - 10'sd127 + adj_reg;
    wire [31:0] ln_m0 = {9'h07f, res_reg[22:0]};
    wire ln_half = ln_m0 > SQRT2_BITS;
    wire [31:0] ln_m = ln_half ? ln_m0 - 32'h0080_0000 : ln_m0;
    wire signed [9:0] ln_e = ln_half ? ln_e0 + 10'sd1 : ln_e0;
    wire [31:0] ef = i2f(e_reg);
    // exp's n from k, and its two powers of two.
    /* verilator lint_off UNUSEDSIGNAL */
    wire [31:0] kn = res_reg - SHIFTER;  // n in [-151, 128]: the low 10 bits, signed
    /* verilator lint_on UNUSEDSIGNAL */
    wire signed [9:0] sc_a = n_reg >>> 1;
    wire signed [9:0] sc_b = n_reg - sc_a;

    // Issues one FMA and waits for it in L_FWAIT; `nxt` then finds the result in res_reg.
    task fma_op(input [31:0] a, input [31:0] b, input [31:0] c, input [5:0] nxt);
        begin
            fma_a <= a;
            fma_b <= b;
            fma_c <= c;
            issue_reg <= 1'b1;
            wait_reg <= WAIT_L;
            next_reg <= nxt;
            st_reg <= L_FWAIT;
        end
    endtask

    always @(posedge clk) begin
        if (rst) begin
            st_reg <= L_IDLE;
            done <= 1'b0;
            issue_reg <= 1'b0;
            div_start <= 1'b0;
            dzw_reg <= 1'b0;
        end else begin
            done <= 1'b0;
            issue_reg <= 1'b0;
            div_start <= 1'b0;
            case (st_reg)
                L_IDLE: begin
                    if (start) begin
                        b_reg <= in_b;
                        c_reg <= in_c;
                        lab_reg <= in_lab;
                        dst_reg <= in_dst;
                        base_reg <= in_src;
                        s_reg <= 8'd0;
                        st_reg <= L_LAB;
                    end
                end
                L_LAB: st_reg <= L_LABD;
                L_LABD: begin
                    y_reg <= rd_data;
                    ybad_reg <= rd_data >= {16'd0, c_reg};
                    i_reg <= 16'd0;
                    st_reg <= L_MAXR;
                end
                L_MAXR: st_reg <= L_MAXD;
                L_MAXD: begin
                    if (i_reg == 16'd0) begin
                        m_reg <= rd_data;
                        best_reg <= rd_data;
                        pred_reg <= 16'd0;
                    end else begin
                        m_reg <= fmax(m_reg, rd_data);
                        if (greater(rd_data, best_reg)) begin
                            best_reg <= rd_data;
                            pred_reg <= i_reg;
                        end
                    end
                    if (is_label) zy_reg <= rd_data;
                    if (last_class) begin
                        st_reg <= L_DY;
                    end else begin
                        i_reg <= i_reg + 16'd1;
                        st_reg <= L_MAXR;
                    end
                end
                L_DY: fma_op(zy_reg, ONE, m_reg ^ SIGN, L_DY2);
                L_DY2: begin
                    dy_reg <= res_reg;
                    sum_reg <= NEG_ZERO;
                    i_reg <= 16'd0;
                    st_reg <= L_XR;
                end
                L_XR: st_reg <= L_XD;
                L_XD: fma_op(rd_data, ONE, m_reg ^ SIGN, L_EXP0);
                L_EXP0: begin
                    x_reg <= res_reg;
                    if (is_nan(res_reg)) begin
                        res_reg <= CANONICAL_NAN;
                        st_reg <= L_SUM;
                    end else if (less(EXP_X_MAX, res_reg)) begin
                        res_reg <= POS_INF;
                        st_reg <= L_SUM;
                    end else if (less(res_reg, EXP_X_MIN)) begin
                        res_reg <= POS_ZERO;
                        st_reg <= L_SUM;
                    end else begin
                        fma_op(res_reg, INV_LN2, SHIFTER, L_EXP1);
                    end
                end
                L_EXP1: begin
                    n_reg <= kn[9:0];
                    fma_op(res_reg, ONE, SHIFTER | SIGN, L_EXP2);
                end
                L_EXP2: begin
                    nf_reg <= res_reg;
                    fma_op(res_reg, LN2_HI ^ SIGN, x_reg, L_EXP3);
                end
                L_EXP3: begin
                    j_reg <= 3'd1;
                    fma_op(nf_reg, LN2_LO ^ SIGN, res_reg, L_POLY);
                end
                L_POLY: begin
                    // j = 1: res is r; later, res is p.
                    if (j_reg == 3'd1) r_reg <= res_reg;
                    j_reg <= j_reg + 3'd1;
                    fma_op((j_reg == 3'd1) ? exp_poly(3'd0) : res_reg,
                           (j_reg == 3'd1) ? res_reg : r_reg,
                           exp_poly(j_reg), (j_reg == 3'd7) ? L_SC1 : L_POLY);
                end
                L_SC1: fma_op(res_reg, pow2(sc_a), NEG_ZERO, L_SC2);
                L_SC2: fma_op(res_reg, pow2(sc_b), NEG_ZERO, L_SUM);
                L_SUM: fma_op(sum_reg, ONE, res_reg, L_SUM2);   // and e_i written over z_i
                L_SUM2: begin
                    sum_reg <= res_reg;
                    if (last_class) begin
                        div_a <= ONE;
                        div_b <= res_reg;
                        div_start <= 1'b1;
                        next_reg <= L_DIV;
                        st_reg <= L_DWAIT;
                    end else begin
                        i_reg <= i_reg + 16'd1;
                        st_reg <= L_XR;
                    end
                end
                L_DIV: begin
                    rcp_reg <= res_reg;
                    i_reg <= 16'd0;
                    st_reg <= L_DZR;
                end
                L_DZR: st_reg <= L_DZD;
                L_DZD: begin
                    dzw_reg <= 1'b1;
                    fma_op(rd_data, rcp_reg, is_label ? NEG_ONE : NEG_ZERO, last_class ? L_LN0 : L_DZR);
                end
                L_LN0: begin
                    adj_reg <= 10'sd0;
                    if (is_nan(sum_reg) || (sum_reg[31] && sum_reg[30:0] != 31'd0)) begin
                        res_reg <= CANONICAL_NAN;
                        st_reg <= L_LOSS;
                    end else if (sum_reg[30:0] == 31'd0) begin
                        res_reg <= NEG_INF;
                        st_reg <= L_LOSS;
                    end else if (sum_reg == POS_INF) begin
                        res_reg <= POS_INF;
                        st_reg <= L_LOSS;
                    end else if (sum_reg[30:23] == 8'd0) begin
                        adj_reg <= -10'sd23;
                        fma_op(sum_reg, TWO_POW_23, NEG_ZERO, L_LN1);
                    end else begin
                        res_reg <= sum_reg;
                        st_reg <= L_LN1;
                    end
                end
                L_LN1: begin
                    e_reg <= ln_e;
                    fma_op(ln_m, ONE, NEG_ONE, L_LN2);
                end
                L_LN2: begin
                    f_reg <= res_reg;
                    fma_op(res_reg, ONE, TWO, L_LN3);
                end
                L_LN3: begin
                    div_a <= f_reg;
                    div_b <= res_reg;
                    div_start <= 1'b1;
                    next_reg <= L_LN4;
                    st_reg <= L_DWAIT;
                end
                L_LN4: begin
                    sv_reg <= res_reg;
                    fma_op(res_reg, res_reg, NEG_ZERO, L_LN5);
                end
                L_LN5: begin
                    z_reg <= res_reg;
                    j_reg <= 3'd2;
                    fma_op(ln_poly(2'd0), res_reg, ln_poly(2'd1), L_LNP);
                end
                L_LNP: begin
                    // j = 2, 3: q = fma(q, z, LN_POLY[j]).
                    j_reg <= j_reg + 3'd1;
                    fma_op(res_reg, z_reg, ln_poly(j_reg[1:0]), (j_reg == 3'd3) ? L_LN6 : L_LNP);
                end
                L_LN6: fma_op(res_reg, z_reg, NEG_ZERO, L_LN7);          // R = q*z
                L_LN7: fma_op(f_reg, ONE, res_reg ^ SIGN, L_LN8);        // t = f - R
                L_LN8: fma_op(sv_reg ^ SIGN, res_reg, f_reg, L_LN9);     // l = fma(-s, t, f)
                L_LN9: fma_op(ef, LN2_LO, res_reg, L_LN10);
                L_LN10: fma_op(ef, LN2_HI, res_reg, L_LOSS);               // ln(S)
                L_LOSS: fma_op(res_reg, ONE, dy_reg ^ SIGN, L_WR0);        // ln(S) - d_y
                L_WR0: st_reg <= L_WR1;                                    // the loss
                L_WR1: begin                                               // the flag
                    if (s_reg + 8'd1 == b_reg) begin
                        done <= 1'b1;
                        st_reg <= L_IDLE;
                    end else begin
                        s_reg <= s_reg + 8'd1;
                        base_reg <= base_reg + c_reg[AW-1:0];
                        st_reg <= L_LAB;
                    end
                end
                L_FWAIT: begin
                    if (wait_reg == 5'd0) begin
                        res_reg <= fma_out;
                        st_reg <= next_reg;
                        if (dzw_reg) begin
                            dzw_reg <= 1'b0;
                            i_reg <= i_reg + 16'd1;
                        end
                    end else begin
                        wait_reg <= wait_reg - 5'd1;
                    end
                end
                L_DWAIT: begin
                    if (div_done) begin
                        res_reg <= div_q;
                        st_reg <= next_reg;
                    end
                end
                default: st_reg <= L_IDLE;
            endcase
        end
    end

endmodule

`default_nettype wire
