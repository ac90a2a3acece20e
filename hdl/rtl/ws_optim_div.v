`default_nettype none

// ws_optim_div: IEEE-754 binary32 division a / b, correctly rounded (RNE, subnormals kept),
// fully pipelined: one division per cycle, fixed latency LATENCY = 2 + ceil(25 / STEPS_PER_STAGE).
//
// MemoryX's optimizer lanes (ws_optim_lane, docs/memoryx.md) use it for Adam's m / denom. It
// is a fully unrolled restoring digit recurrence, one quotient bit per step: the normalised
// significands give a 25-bit quotient q in [2^24, 2^25) (24 bits and the rounding bit) and a
// remainder, which is the sticky bit, so the result is rounded once, exactly (IEEE-754
// §4.3.1). Subnormal quotients are shifted right with the dropped bits folded into sticky
// before that one rounding. NaN results are the canonical quiet NaN 32'h7fc0_0000, as FPnew's
// (ws_common::golden::optim::div is the model). Like ws_swarm_fp32 it has no backpressure of
// its own: every stage advances every cycle and the caller budgets LATENCY cycles.
module ws_optim_div #(
    parameter STEPS_PER_STAGE = 2  // quotient bits computed between two pipeline registers, 1..25
) (
    input  wire        clk,
    input  wire        rst,

    input  wire        in_valid,
    input  wire [31:0] in_a,
    input  wire [31:0] in_b,

    output wire        out_valid,
    output wire [31:0] out_data
);

    localparam STEPS = 25;
    localparam STAGES = (STEPS + STEPS_PER_STAGE - 1) / STEPS_PER_STAGE;
    localparam LATENCY = STAGES + 2;
    // Sideband through the recurrence: {special, special result, sign, biased exponent}.
    localparam SIDE_W = 1 + 32 + 1 + 12;

    initial begin
        if (STEPS_PER_STAGE < 1 || STEPS_PER_STAGE > STEPS) begin
            $error("ws_optim_div: STEPS_PER_STAGE must be in 1..25");
        end
    end

    // Position of the highest set bit of a nonzero subnormal fraction.
    function automatic [4:0] msb23(input [22:0] f);
        integer k;
        begin
            msb23 = 5'd0;
            for (k = 0; k < 23; k = k + 1) begin
                if (f[k]) msb23 = k[4:0];
            end
        end
    endfunction

    // ---- unpack: classify, normalise, align (combinational, then registered) ----
    reg        sa, sb, a_nan, b_nan, a_inf, b_inf, a_zero, b_zero;
    reg [23:0] ma, mb;
    reg signed [11:0] ea, eb, ex;
    reg [25:0] r_init;
    reg        spec;
    reg [31:0] spec_bits;

    always @* begin
        sa = in_a[31];
        sb = in_b[31];
        a_nan = (in_a[30:23] == 8'hff) && (in_a[22:0] != 23'd0);
        b_nan = (in_b[30:23] == 8'hff) && (in_b[22:0] != 23'd0);
        a_inf = (in_a[30:23] == 8'hff) && (in_a[22:0] == 23'd0);
        b_inf = (in_b[30:23] == 8'hff) && (in_b[22:0] == 23'd0);
        a_zero = (in_a[30:0] == 31'd0);
        b_zero = (in_b[30:0] == 31'd0);
        // A subnormal f·2^-149 becomes (f << s)·2^(1 - s - 150) with its top bit at 23.
        if (in_a[30:23] == 8'd0) begin
            ma = {1'b0, in_a[22:0]} << (5'd23 - msb23(in_a[22:0]));
            ea = $signed({7'd0, msb23(in_a[22:0])}) - 12'sd22;
        end else begin
            ma = {1'b1, in_a[22:0]};
            ea = $signed({4'd0, in_a[30:23]});
        end
        if (in_b[30:23] == 8'd0) begin
            mb = {1'b0, in_b[22:0]} << (5'd23 - msb23(in_b[22:0]));
            eb = $signed({7'd0, msb23(in_b[22:0])}) - 12'sd22;
        end else begin
            mb = {1'b1, in_b[22:0]};
            eb = $signed({4'd0, in_b[30:23]});
        end
        // ma / mb in [1, 2) after the alignment; ex is the quotient's biased exponent.
        if (ma < mb) begin
            r_init = {1'b0, ma, 1'b0};
            ex = ea - eb + 12'sd126;
        end else begin
            r_init = {2'b00, ma};
            ex = ea - eb + 12'sd127;
        end
        spec = 1'b1;
        if (a_nan || b_nan || (a_zero && b_zero) || (a_inf && b_inf)) begin
            spec_bits = 32'h7fc0_0000;
        end else if (a_inf || b_zero) begin
            spec_bits = {sa ^ sb, 31'h7f80_0000};
        end else if (a_zero || b_inf) begin
            spec_bits = {sa ^ sb, 31'd0};
        end else begin
            spec = 1'b0;
            spec_bits = 32'd0;
        end
    end

    // ---- the recurrence: STEPS restoring steps, a register every STEPS_PER_STAGE ----
    wire [25:0]       rem   [0:STEPS];
    wire [24:0]       quo   [0:STEPS];
    wire [23:0]       div_b [0:STEPS];
    wire [SIDE_W-1:0] side  [0:STEPS];

    reg [25:0]       rem0_reg;
    reg [23:0]       divb0_reg;
    reg [SIDE_W-1:0] side0_reg;
    reg [LATENCY-1:0] valid_reg;

    always @(posedge clk) begin
        rem0_reg <= r_init;
        divb0_reg <= mb;
        side0_reg <= {spec, spec_bits, sa ^ sb, ex};
        valid_reg <= rst ? {LATENCY{1'b0}} : {valid_reg[LATENCY-2:0], in_valid};
    end

    assign rem[0] = rem0_reg;
    assign quo[0] = 25'd0;
    assign div_b[0] = divb0_reg;
    assign side[0] = side0_reg;

    genvar i;
    generate
        for (i = 0; i < STEPS; i = i + 1) begin : step
            wire        take = (rem[i] >= {2'b00, div_b[i]});
            wire [25:0] diff = rem[i] - {2'b00, div_b[i]};
            wire [25:0] rem_next = {(take ? diff[24:0] : rem[i][24:0]), 1'b0};
            wire [24:0] quo_next = {quo[i][23:0], take};
            if ((i + 1) % STEPS_PER_STAGE == 0 || i == STEPS - 1) begin : stage
                reg [25:0]       rem_reg;
                reg [24:0]       quo_reg;
                reg [23:0]       divb_reg;
                reg [SIDE_W-1:0] side_reg;
                always @(posedge clk) begin
                    rem_reg <= rem_next;
                    quo_reg <= quo_next;
                    divb_reg <= div_b[i];
                    side_reg <= side[i];
                end
                assign rem[i + 1] = rem_reg;
                assign quo[i + 1] = quo_reg;
                assign div_b[i + 1] = divb_reg;
                assign side[i + 1] = side_reg;
            end else begin : comb
                assign rem[i + 1] = rem_next;
                assign quo[i + 1] = quo_next;
                assign div_b[i + 1] = div_b[i];
                assign side[i + 1] = side[i];
            end
        end
    endgenerate

    // ---- round (IEEE-754 §4.3.1 roundTiesToEven) and pack, registered ----
    wire [24:0]        q = quo[STEPS];
    wire               f_spec = side[STEPS][SIDE_W-1];
    wire [31:0]        f_spec_bits = side[STEPS][SIDE_W-2:13];
    wire               f_sign = side[STEPS][12];
    wire signed [11:0] f_exp = side[STEPS][11:0];

    reg  [11:0] sh;
    reg  [24:0] qs;
    reg         sticky;
    reg         up;
    reg  [30:0] mag;
    reg  [31:0] result_next;
    reg  [31:0] result_reg;

    always @* begin
        // Subnormal results: shift right by 1 - exp, the dropped bits go to sticky.
        sh = (f_exp <= 12'sd0) ? (12'd1 - f_exp) : 12'd0;
        if (sh > 12'd25) sh = 12'd25;
        qs = q >> sh[4:0];
        sticky = (rem[STEPS] != 26'd0) || ((q & ~({25{1'b1}} << sh[4:0])) != 25'd0);
        up = qs[0] && (sticky || qs[1]);
        if (f_exp >= 12'sd255) begin
            mag = 31'h7f80_0000;
        end else if (f_exp <= 12'sd0) begin
            mag = {7'd0, qs[24:1]} + {30'd0, up};
        end else begin
            // The hidden bit of qs[24:1] carries the exponent field from exp-1 to exp, and a
            // rounding carry out of the significand bumps it once more (to +inf at the top).
            mag = {f_exp[7:0] - 8'd1, 23'd0} + {7'd0, qs[24:1]} + {30'd0, up};
        end
        result_next = f_spec ? f_spec_bits : {f_sign, mag};
    end

    always @(posedge clk) begin
        result_reg <= result_next;
    end

    assign out_valid = valid_reg[LATENCY-1];
    assign out_data = result_reg;

endmodule

`default_nettype wire
