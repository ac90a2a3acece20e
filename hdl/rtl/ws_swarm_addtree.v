`default_nettype none

// ws_swarm_addtree: a pipelined binary32 adder tree in SwarmX's fixed reduction order.
//
// One lane of ws_swarm_node's uplink: it sums N_IN values, value i in in_data[i*32 +: 32],
// in the order ws_common::golden::swarm specifies (docs/swarmx.md "Fixed reduction order"):
// level by level, neighbours are added (next[i] = cur[2i] + cur[2i+1]) and, when a level has
// an odd count, its last value passes through a delay line of the adders' latency to become
// the last value of the next level. The shape depends only on N_IN, so the result does not
// depend on timing or on which inputs are zero.
//
// Every adder is a ws_swarm_fp32 (FPnew, RNE, canonical NaN) with ADD_REGS pipeline
// registers, and every level takes exactly ADD_REGS cycles: a set presented with in_valid in
// cycle t leaves on out_data with out_valid in cycle t + LEVELS * ADD_REGS. There is no
// backpressure; the caller keeps room for what is in flight.
module ws_swarm_addtree #(
    parameter N_IN = 4,       // values summed, 1..16
    parameter ADD_REGS = 3    // pipeline registers per adder (cycles per level), >= 1
) (
    input  wire                 clk,
    input  wire                 rst,

    input  wire                 in_valid,
    input  wire [N_IN*32-1:0]   in_data,

    output wire                 out_valid,
    output wire [31:0]          out_data
);

    localparam LEVELS = $clog2(N_IN);

    // Values at level l: N_IN halved l times, rounding up.
    function integer level_count(input integer n, input integer l);
        integer k;
        begin
            level_count = n;
            for (k = 0; k < l; k = k + 1) begin
                level_count = (level_count + 1) / 2;
            end
        end
    endfunction

    // First slot of level l in the flat value bus.
    function integer level_base(input integer n, input integer l);
        integer k;
        begin
            level_base = 0;
            for (k = 0; k < l; k = k + 1) begin
                level_base = level_base + level_count(n, k);
            end
        end
    endfunction

    localparam SLOTS = level_base(N_IN, LEVELS + 1);

    initial begin
        if (N_IN < 1 || N_IN > 16) $error("ws_swarm_addtree: N_IN must be 1..16");
        if (ADD_REGS < 1) $error("ws_swarm_addtree: ADD_REGS must be >= 1");
    end

    // All levels' values, level 0 (the inputs) first; each slot has exactly one driver.
    wire [SLOTS*32-1:0] value;
    wire [LEVELS:0]     level_valid;

    assign value[N_IN*32-1:0] = in_data;
    assign level_valid[0] = in_valid;

    genvar l, i;
    generate
        for (l = 0; l < LEVELS; l = l + 1) begin : gen_level
            localparam COUNT = level_count(N_IN, l);
            localparam PAIRS = COUNT / 2;
            localparam BASE = level_base(N_IN, l);
            localparam NEXT_BASE = level_base(N_IN, l + 1);

            for (i = 0; i < PAIRS; i = i + 1) begin : gen_add
                wire add_valid;

                ws_swarm_fp32 #(
                    .OP(0),
                    .LATENCY(ADD_REGS)
                ) add_inst (
                    .clk(clk),
                    .rst(rst),
                    .in_valid(level_valid[l]),
                    .in_a(value[(BASE + 2 * i) * 32 +: 32]),
                    .in_b(value[(BASE + 2 * i + 1) * 32 +: 32]),
                    .out_valid(add_valid),
                    .out_data(value[(NEXT_BASE + i) * 32 +: 32])
                );

                // All adders of a level run in lockstep; the first one's valid is the level's.
                if (i == 0) begin : gen_valid
                    assign level_valid[l + 1] = add_valid;
                end else begin : gen_unused
                    wire unused_valid = add_valid;
                end
            end

            // An odd count: the last value waits ADD_REGS cycles beside the adders.
            if (COUNT % 2 == 1) begin : gen_pass
                reg [31:0] pass_reg [0:ADD_REGS-1];
                integer k;

                always @(posedge clk) begin
                    pass_reg[0] <= value[(BASE + COUNT - 1) * 32 +: 32];
                    for (k = 1; k < ADD_REGS; k = k + 1) begin
                        pass_reg[k] <= pass_reg[k - 1];
                    end
                end

                assign value[(NEXT_BASE + PAIRS) * 32 +: 32] = pass_reg[ADD_REGS - 1];
            end
        end
    endgenerate

    assign out_valid = level_valid[LEVELS];
    assign out_data = value[(SLOTS - 1) * 32 +: 32];

    // The pass-through delay lines hold data only and need no reset; rst reaches FPnew.
    wire unused_rst = rst;

endmodule

`default_nettype wire
