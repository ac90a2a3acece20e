`default_nettype none

// ws_optim_delay: a WIDTH-bit shift register of DEPTH stages (a wire when DEPTH is 0).
//
// The optimizer lane (ws_optim_lane) runs free with fixed latencies, so every operand that
// waits for another one to be computed travels through one of these. The stages have no
// reset and no enable: they hold data only, and the lane's valid shift register says which
// of them matter.
module ws_optim_delay #(
    parameter WIDTH = 32,  // bits per word
    parameter DEPTH = 1    // cycles of delay, >= 0
) (
    input  wire             clk,
    input  wire [WIDTH-1:0] in_data,
    output wire [WIDTH-1:0] out_data
);

    initial begin
        if (WIDTH < 1) $error("ws_optim_delay: WIDTH must be at least 1");
        if (DEPTH < 0) $error("ws_optim_delay: DEPTH must be >= 0");
    end

    generate
        if (DEPTH == 0) begin : wire_through
            assign out_data = in_data;
        end else begin : shift
            reg [WIDTH-1:0] stage_reg [0:DEPTH-1];
            integer k;
            always @(posedge clk) begin
                stage_reg[0] <= in_data;
                for (k = 1; k < DEPTH; k = k + 1) begin
                    stage_reg[k] <= stage_reg[k - 1];
                end
            end
            assign out_data = stage_reg[DEPTH-1];
        end
    endgenerate

endmodule

`default_nettype wire
