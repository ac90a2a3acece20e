`default_nettype none

// ws_mesh_div: a small iterative binary32 divider for the PE's loss stage (docs/mesh-pe.md
// "The loss stage"). One quotient bit per cycle: `done` comes 28 cycles after `start` (one
// cycle for NaN, inf and zero operands), against ws_optim_div's one result per cycle at ~25 times the area,
// which the loss stage (two divisions per sample) does not need.
//
// Correctly rounded on every input, bit for bit ws_common::golden::optim::div (IEEE-754-2019
// §5.4.1 division, roundTiesToEven, subnormals kept, the canonical NaN 0x7fc0_0000 as FPnew):
//   - NaN in, 0/0 and inf/inf (§7.2 invalid) -> canonical NaN;
//   - inf/x -> inf, x/0 -> inf (§7.3), x/inf -> 0, 0/x -> 0, sign = sign(a) xor sign(b);
//   - otherwise the operands are normalised (a subnormal's leading zeros counted into its
//     exponent), the 24-bit mantissas divided by restoring division to 26 quotient bits
//     (1.xxx, 23 fraction bits, guard, round) plus a sticky bit from the remainder; a result
//     below the normal range is shifted right into a subnormal with every shifted-out bit
//     kept sticky (§7.5: rounded after denormalisation), and one RNE increment on the pack_bits
//     {exponent, fraction} carries into the exponent (into inf on overflow, §7.4).
//
// Interface: `start` with `a` (dividend) and `b` (divisor) while !busy; `done` is high for
// one cycle with `q`, which holds until the next start.
module ws_mesh_div (
    input  wire        clk,
    input  wire        rst,
    input  wire        start,
    input  wire [31:0] a,
    input  wire [31:0] b,
    output wire        busy,
    output reg         done,
    output reg  [31:0] q
);

    localparam [31:0] CANONICAL_NAN = 32'h7fc0_0000;

    // ---------------------------------------------------------------- unpack (combinational)
    wire        sa = a[31], sb = b[31];
    wire [7:0]  ea = a[30:23], eb = b[30:23];
    wire [22:0] fa = a[22:0], fb = b[22:0];
    wire a_nan = ea == 8'hff && fa != 23'd0;
    wire b_nan = eb == 8'hff && fb != 23'd0;
    wire a_inf = ea == 8'hff && fa == 23'd0;
    wire b_inf = eb == 8'hff && fb == 23'd0;
    wire a_zero = ea == 8'd0 && fa == 23'd0;
    wire b_zero = eb == 8'd0 && fb == 23'd0;

    // Leading zeros of a subnormal's 24-bit significand (1..23 for a nonzero subnormal).
    function automatic [4:0] lz24(input [23:0] m);
        integer i;
        reg found;
        begin
            lz24 = 5'd0;
            found = 1'b0;
            for (i = 23; i >= 0; i = i - 1) begin
                if (!found && m[i]) begin
                    lz24 = 5'd23 - i[4:0];
                    found = 1'b1;
                end
            end
        end
    endfunction

    wire [23:0] ma_raw = {ea != 8'd0, fa};
    wire [23:0] mb_raw = {eb != 8'd0, fb};
    wire [4:0]  lza = lz24(ma_raw);
    wire [4:0]  lzb = lz24(mb_raw);
    wire [23:0] ma_n = ma_raw << lza;
    wire [23:0] mb_n = mb_raw << lzb;
    // Unbiased-plus-127 exponents of the normalised operands: e = max(field, 1) - lz.
    wire signed [10:0] xa = (ea == 8'd0) ? 11'sd1 - $signed({6'd0, lza}) : $signed({3'd0, ea});
    wire signed [10:0] xb = (eb == 8'd0) ? 11'sd1 - $signed({6'd0, lzb}) : $signed({3'd0, eb});
    // The quotient's biased exponent before the mantissa ratio is brought into [1, 2).
    wire a_below = ma_n < mb_n;
    wire signed [10:0] eq0 = xa - xb + 11'sd127 - (a_below ? 11'sd1 : 11'sd0);

    wire special = a_nan || b_nan || a_inf || b_inf || a_zero || b_zero;
    wire sq = sa ^ sb;
    wire [31:0] special_q = (a_nan || b_nan || (a_inf && b_inf) || (a_zero && b_zero)) ? CANONICAL_NAN
                          : (a_inf || b_zero) ? {sq, 8'hff, 23'd0}
                          : {sq, 31'd0};

    // ---------------------------------------------------------------- iteration
    reg [4:0]  it_reg;          // quotient bits still to form
    reg        run_reg;
    reg        round_reg;       // the last cycle: round and pack
    reg [25:0] rem_reg;         // partial remainder, < 2 * divisor
    reg [23:0] div_reg;
    reg [25:0] quo_reg;
    reg signed [10:0] exp_reg;
    reg        sign_reg;

    assign busy = run_reg || round_reg;

    wire [25:0] rem_sub = rem_reg - {2'd0, div_reg};
    wire        rem_ge = rem_reg >= {2'd0, div_reg};

    // Round and pack: a result below the normal range is shifted right by 1 - exp first.
    wire        sub = exp_reg < 11'sd1;
    wire signed [10:0] shift_s = 11'sd1 - exp_reg;
    wire [4:0]  shift = sub ? ((shift_s > 11'sd26) ? 5'd26 : shift_s[4:0]) : 5'd0;
    // qs[25] (the leading 1 of a normal quotient) is implied by the exponent, never packed.
    /* verilator lint_off UNUSEDSIGNAL */
    wire [25:0] qs = quo_reg >> shift;
    /* verilator lint_on UNUSEDSIGNAL */
    wire [25:0] lost_mask = ~(26'h3ff_ffff << shift);
    wire        sticky = (quo_reg & lost_mask) != 26'd0 || rem_reg != 26'd0 || qs[0];
    wire        guard = qs[1];
    wire [30:0] pack_bits = sub ? {8'd0, qs[24:2]} : {exp_reg[7:0], qs[24:2]};
    wire        ru = guard && (sticky || qs[2]);
    wire        ovf = !sub && exp_reg > 11'sd254;
    wire [31:0] rounded = ovf ? {sign_reg, 8'hff, 23'd0} : {sign_reg, pack_bits + {30'd0, ru}};

    always @(posedge clk) begin
        if (rst) begin
            run_reg <= 1'b0;
            round_reg <= 1'b0;
            done <= 1'b0;
            q <= 32'd0;
        end else begin
            done <= 1'b0;
            if (start && !busy) begin
                if (special) begin
                    q <= special_q;
                    done <= 1'b1;
                end else begin
                    run_reg <= 1'b1;
                    it_reg <= 5'd25;
                    rem_reg <= a_below ? {1'b0, ma_n, 1'b0} : {2'd0, ma_n};
                    div_reg <= mb_n;
                    quo_reg <= 26'd0;
                    exp_reg <= eq0;
                    sign_reg <= sq;
                end
            end
            if (run_reg) begin
                // Restoring step: bit it of the quotient, remainder doubled for the next.
                quo_reg <= {quo_reg[24:0], rem_ge};
                if (it_reg == 5'd0) begin
                    rem_reg <= rem_ge ? rem_sub : rem_reg;
                    run_reg <= 1'b0;
                    round_reg <= 1'b1;
                end else begin
                    rem_reg <= {rem_ge ? rem_sub[24:0] : rem_reg[24:0], 1'b0};
                    it_reg <= it_reg - 5'd1;
                end
            end
            if (round_reg) begin
                round_reg <= 1'b0;
                q <= rounded;
                done <= 1'b1;
            end
        end
    end

endmodule

`default_nettype wire
