`default_nettype none

// ws_swarm_fp32: one IEEE-754 binary32 add or multiply with a fixed latency, on FPnew.
//
// SwarmX's adder tree and root scale (docs/swarmx.md) are built from this cell. It wraps
// FPnew's `fpnew_fma` (pythondata-cpu-cv32e40p, never copied into the repository) configured
// for FP32, round-to-nearest-even, with LATENCY pipeline registers distributed through the
// unit. Every FPnew register stage is enabled every cycle (`reg_ena_i` all ones, output tied
// ready), so the unit is a plain pipeline: a value presented in cycle t appears on `out_data`
// in cycle t + LATENCY, and the callers carry their sideband in shift registers of the same
// length. `out_valid` is `in_valid` delayed by this cell's own reset shift register; FPnew's
// handshake outputs are not used, and `out_data` is undefined where `out_valid` is low.
//
// Results are those of IEEE-754 §5.4.1 addition / multiplication with RNE and subnormals
// kept; any NaN result is the canonical quiet NaN 32'h7fc0_0000 (FPnew drops payloads), which
// is what ws_common::golden::fp specifies. The exception flags are not used by SwarmX.
//
// FPnew's parameters and ports are typed with its package's enums, so this file refers to
// `fpnew_pkg`: it parses with plain `read_verilog -sv -defer` and elaborates with FPnew read
// by `read_slang` (or Verilator). FPnew's reset is tied inactive: its registers hold data only,
// and without a reset value its registered operation code is the constant ADD (or MUL), so
// synthesis folds ADD's "multiply by 1.0" away instead of building a 24 x 24 multiplier.
module ws_swarm_fp32 #(
    parameter OP = 0,       // 0: out = a + b; 1: out = a * b
    parameter LATENCY = 3   // pipeline registers inside FPnew (cycles from in to out), >= 0
) (
    input  wire        clk,
    input  wire        rst,

    input  wire        in_valid,
    input  wire [31:0] in_a,
    input  wire [31:0] in_b,

    output wire        out_valid,
    output wire [31:0] out_data
);

    initial begin
        if (OP != 0 && OP != 1) $error("ws_swarm_fp32: OP must be 0 (add) or 1 (multiply)");
        if (LATENCY < 0) $error("ws_swarm_fp32: LATENCY must be >= 0");
    end

    // fpnew_fma computes op[0] * op[1] + op[2]. ADD forces op[0] = +1.0 and sums op[1] and
    // op[2]; MUL forces op[2] = -0.0 (so that a zero product keeps its sign) and multiplies
    // op[0] and op[1]. Unused operand slots are driven with zero.
    wire [95:0] operands = (OP == 1) ? {32'h0000_0000, in_b, in_a} : {in_b, in_a, 32'h0000_0000};

    wire [4:0] unused_status;
    wire       unused_ext;
    wire       unused_tag;
    wire       unused_mask;
    wire       unused_aux;
    wire       unused_in_ready;
    wire       unused_busy;
    wire       unused_fpnew_valid;

    fpnew_fma #(
        .FpFormat(fpnew_pkg::FP32),
        .NumPipeRegs(LATENCY),
        .PipeConfig(fpnew_pkg::DISTRIBUTED)
    ) fma_inst (
        .clk_i(clk),
        .rst_ni(1'b1),
        .operands_i(operands),
        // FP32 in a 32-bit unit: NaN-boxing does not apply, every operand is "boxed".
        .is_boxed_i(3'b111),
        .rnd_mode_i(fpnew_pkg::RNE),
        .op_i((OP == 1) ? fpnew_pkg::MUL : fpnew_pkg::ADD),
        .op_mod_i(1'b0),
        .tag_i(1'b0),
        .mask_i(1'b1),
        .aux_i(1'b0),
        .in_valid_i(in_valid),
        .in_ready_o(unused_in_ready),
        .flush_i(1'b0),
        .result_o(out_data),
        .status_o(unused_status),
        .extension_bit_o(unused_ext),
        .tag_o(unused_tag),
        .mask_o(unused_mask),
        .aux_o(unused_aux),
        .out_valid_o(unused_fpnew_valid),
        .out_ready_i(1'b1),
        .busy_o(unused_busy),
        .reg_ena_i({(LATENCY == 0 ? 1 : LATENCY){1'b1}})
    );

    generate
        if (LATENCY == 0) begin : gen_comb
            assign out_valid = in_valid;
            wire unused_rst = rst;
        end else begin : gen_valid
            reg [LATENCY-1:0] valid_reg;
            integer k;

            always @(posedge clk) begin
                valid_reg[0] <= in_valid;
                for (k = 1; k < LATENCY; k = k + 1) begin
                    valid_reg[k] <= valid_reg[k - 1];
                end
                if (rst) valid_reg <= {LATENCY{1'b0}};
            end

            assign out_valid = valid_reg[LATENCY-1];
        end
    endgenerate

endmodule

`default_nettype wire
