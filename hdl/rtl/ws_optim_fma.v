`default_nettype none

// ws_optim_fma: one IEEE-754 binary32 fused multiply-add, out = a * b + c rounded once (RNE,
// subnormals kept, canonical NaN 32'h7fc0_0000), on FPnew's `fpnew_fma` with LATENCY pipeline
// registers. MemoryX's optimizer lanes (ws_optim_lane) build every add, multiply and FMA from
// it: a multiply is a * b + (-0), which keeps the sign of a zero product, as
// ws_common::golden::fp::mul specifies, and an FMA is ws_common::golden::optim::fma.
//
// Like ws_swarm_fp32 it runs free: the unit's input is always valid and its output always
// ready, so a value presented in cycle t appears in cycle t + LATENCY and the lane tracks
// validity itself. FPnew's registers use its active-low asynchronous reset, driven from
// `rst`; they hold data only.
module ws_optim_fma #(
    parameter LATENCY = 2  // pipeline registers inside FPnew (cycles from in to out), >= 0
) (
    input  wire        clk,
    input  wire        rst,

    input  wire [31:0] in_a,
    input  wire [31:0] in_b,
    input  wire [31:0] in_c,

    output wire [31:0] out_data
);

    initial begin
        if (LATENCY < 0) $error("ws_optim_fma: LATENCY must be >= 0");
    end

    wire [4:0] unused_status;
    wire       unused_ext;
    wire       unused_tag;
    wire       unused_mask;
    wire       unused_aux;
    wire       unused_in_ready;
    wire       unused_out_valid;
    wire       unused_busy;

    fpnew_fma #(
        .FpFormat(fpnew_pkg::FP32),
        .NumPipeRegs(LATENCY),
        .PipeConfig(fpnew_pkg::DISTRIBUTED)
    ) fma_inst (
        .clk_i(clk),
        .rst_ni(!rst),
        // FMADD: operands_i[0] * operands_i[1] + operands_i[2].
        .operands_i({in_c, in_b, in_a}),
        .is_boxed_i(3'b111),
        .rnd_mode_i(fpnew_pkg::RNE),
        .op_i(fpnew_pkg::FMADD),
        .op_mod_i(1'b0),
        .tag_i(1'b0),
        .mask_i(1'b1),
        .aux_i(1'b0),
        .in_valid_i(1'b1),
        .in_ready_o(unused_in_ready),
        .flush_i(1'b0),
        .result_o(out_data),
        .status_o(unused_status),
        .extension_bit_o(unused_ext),
        .tag_o(unused_tag),
        .mask_o(unused_mask),
        .aux_o(unused_aux),
        .out_valid_o(unused_out_valid),
        .out_ready_i(1'b1),
        .busy_o(unused_busy),
        .reg_ena_i({(LATENCY == 0 ? 1 : LATENCY){1'b0}})
    );

endmodule

`default_nettype wire
