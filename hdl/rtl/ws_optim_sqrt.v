`default_nettype none

// ws_optim_sqrt: IEEE-754 binary32 square root, correctly rounded (RNE, subnormal inputs
// kept), fully pipelined: one root per cycle, fixed latency LATENCY = 2 + ceil(25 / STEPS_PER_STAGE).
//
// MemoryX's Adam lanes (ws_optim_lane, docs/memoryx.md) take √v with it. The significand is
// normalised (subnormals by their leading-zero count), the exponent made even, and a fully
// unrolled restoring recurrence takes the 25-bit integer root of the 50-bit radicand m·2^25,
// one bit per step: 24 result bits and the rounding bit, with the remainder as sticky, so the
// one rounding is exact (IEEE-754 §5.4.1 squareRoot). A root is never subnormal and never
// overflows. √±0 = ±0, √+inf = +inf, √(x < 0) and √NaN give the canonical NaN 32'h7fc0_0000.
// ws_common::golden::optim::sqrt is the bit-level model. No backpressure: the caller budgets
// LATENCY cycles.
module ws_optim_sqrt #(
    parameter STEPS_PER_STAGE = 2  // root bits computed between two pipeline registers, 1..25
) (
    input  wire        clk,
    input  wire        rst,

    input  wire        in_valid,
    input  wire [31:0] in_a,

    output wire        out_valid,
    output wire [31:0] out_data
);

    localparam STEPS = 25;
    localparam STAGES = (STEPS + STEPS_PER_STAGE - 1) / STEPS_PER_STAGE;
    localparam LATENCY = STAGES + 2;
    // Sideband through the recurrence: {special, special result, biased result exponent}.
    localparam SIDE_W = 1 + 32 + 12;

    initial begin
        if (STEPS_PER_STAGE < 1 || STEPS_PER_STAGE > STEPS) begin
            $error("ws_optim_sqrt: STEPS_PER_STAGE must be in 1..25");
        end
    end

    function automatic [4:0] msb23(input [22:0] f);
        integer k;
        begin
            msb23 = 5'd0;
            for (k = 0; k < 23; k = k + 1) begin
                if (f[k]) msb23 = k[4:0];
            end
        end
    endfunction

    // ---- unpack ----
    reg [23:0]        m;
    reg signed [11:0] x;        // unbiased exponent of m / 2^23
    reg [49:0]        rad;
    reg signed [11:0] half;     // biased exponent of the root
    reg               spec;
    reg [31:0]        spec_bits;

    always @* begin
        if (in_a[30:23] == 8'd0) begin
            m = {1'b0, in_a[22:0]} << (5'd23 - msb23(in_a[22:0]));
            x = $signed({7'd0, msb23(in_a[22:0])}) - 12'sd149;
        end else begin
            m = {1'b1, in_a[22:0]};
            x = $signed({4'd0, in_a[30:23]}) - 12'sd127;
        end
        // An odd exponent moves one factor of two into the radicand.
        if (x[0]) begin
            rad = {1'b0, m, 25'd0} << 1;
            half = ((x - 12'sd1) >>> 1) + 12'sd127;
        end else begin
            rad = {1'b0, m, 25'd0};
            half = (x >>> 1) + 12'sd127;
        end
        spec = 1'b1;
        if ((in_a[30:23] == 8'hff) && (in_a[22:0] != 23'd0)) begin
            spec_bits = 32'h7fc0_0000;
        end else if (in_a[30:0] == 31'd0) begin
            spec_bits = in_a;
        end else if (in_a[31]) begin
            spec_bits = 32'h7fc0_0000;
        end else if (in_a[30:23] == 8'hff) begin
            spec_bits = 32'h7f80_0000;
        end else begin
            spec = 1'b0;
            spec_bits = 32'd0;
        end
    end

    // ---- the recurrence ----
    wire [27:0]       rem  [0:STEPS];
    wire [24:0]       root [0:STEPS];
    wire [49:0]       rads [0:STEPS];
    wire [SIDE_W-1:0] side [0:STEPS];

    reg [49:0]        rad0_reg;
    reg [SIDE_W-1:0]  side0_reg;
    reg [LATENCY-1:0] valid_reg;

    always @(posedge clk) begin
        rad0_reg <= rad;
        side0_reg <= {spec, spec_bits, half};
        valid_reg <= rst ? {LATENCY{1'b0}} : {valid_reg[LATENCY-2:0], in_valid};
    end

    assign rem[0] = 28'd0;
    assign root[0] = 25'd0;
    assign rads[0] = rad0_reg;
    assign side[0] = side0_reg;

    genvar i;
    generate
        for (i = 0; i < STEPS; i = i + 1) begin : step
            wire [27:0] rem2 = {rem[i][25:0], rads[i][49:48]};
            wire [27:0] trial = {1'b0, root[i], 2'b01};
            wire        take = (rem2 >= trial);
            wire [27:0] rem_next = take ? (rem2 - trial) : rem2;
            wire [24:0] root_next = {root[i][23:0], take};
            wire [49:0] rads_next = {rads[i][47:0], 2'b00};
            if ((i + 1) % STEPS_PER_STAGE == 0 || i == STEPS - 1) begin : stage
                reg [27:0]       rem_reg;
                reg [24:0]       root_reg;
                reg [49:0]       rads_reg;
                reg [SIDE_W-1:0] side_reg;
                always @(posedge clk) begin
                    rem_reg <= rem_next;
                    root_reg <= root_next;
                    rads_reg <= rads_next;
                    side_reg <= side[i];
                end
                assign rem[i + 1] = rem_reg;
                assign root[i + 1] = root_reg;
                assign rads[i + 1] = rads_reg;
                assign side[i + 1] = side_reg;
            end else begin : comb
                assign rem[i + 1] = rem_next;
                assign root[i + 1] = root_next;
                assign rads[i + 1] = rads_next;
                assign side[i + 1] = side[i];
            end
        end
    endgenerate

    // ---- round and pack ----
    wire [24:0]        r = root[STEPS];
    wire               f_spec = side[STEPS][SIDE_W-1];
    wire [31:0]        f_spec_bits = side[STEPS][SIDE_W-2:12];
    wire signed [11:0] f_exp = side[STEPS][11:0];
    // The radicand is fully consumed after STEPS steps; its leftovers are zeros.
    wire [49:0]        unused_rads = rads[STEPS];

    reg         up;
    reg  [31:0] result_next;
    reg  [31:0] result_reg;

    always @* begin
        up = r[0] && ((rem[STEPS] != 28'd0) || r[1]);
        result_next = f_spec ? f_spec_bits
                             : {1'b0, f_exp[7:0] - 8'd1, 23'd0} + {8'd0, r[24:1]} + {31'd0, up};
    end

    always @(posedge clk) begin
        result_reg <= result_next;
    end

    assign out_valid = valid_reg[LATENCY-1];
    assign out_data = result_reg;

endmodule

`default_nettype wire
