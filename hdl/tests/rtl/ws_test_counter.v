`default_nettype none

// ws_test_counter: a tiny module that proves the block harness (hdl/tests/harness.rs) on every
// port storage class Verilator uses: 1-bit, 8/16/32/64-bit and a 96-bit wide port.
module ws_test_counter #(
    parameter WIDTH = 8,  // counter width, 1..64
    parameter STEP = 1    // increment per enabled cycle
) (
    input  wire             clk,
    input  wire             rst,
    input  wire             en,
    output wire [WIDTH-1:0] count,
    input  wire [95:0]      wide_in,
    output wire [95:0]      wide_out,
    input  wire [63:0]      q_in,
    output wire [63:0]      q_out
);

    initial begin
        if (WIDTH < 1 || WIDTH > 64) $error("ws_test_counter: WIDTH must be 1..64");
    end

    reg [WIDTH-1:0] count_reg;

    assign count = count_reg;
    // Combinational, so tests see eval() without a clock edge.
    assign wide_out = ~wide_in;
    assign q_out = q_in + 64'd1;

    always @(posedge clk) begin
        if (en) begin
            count_reg <= count_reg + STEP[WIDTH-1:0];
        end
        if (rst) begin
            count_reg <= {WIDTH{1'b0}};
        end
    end

endmodule

`default_nettype wire
