`default_nettype none

// ws_optim_max: the larger of two binary32 values as torch.maximum gives it, registered (one
// cycle): a NaN in either input gives the canonical NaN 32'h7fc0_0000, and +0 > -0
// (IEEE-754-2019 §9.6 maximum). Adam's amsgrad state (ws_optim_lane) keeps max(vmax, v) with
// it; ws_common::golden::optim::max is the model.
module ws_optim_max (
    input  wire        clk,

    input  wire [31:0] in_a,
    input  wire [31:0] in_b,

    output wire [31:0] out_data
);

    // Sign-magnitude to an unsigned key in the same order: negatives inverted, positives
    // above them.
    wire [31:0] key_a = in_a[31] ? ~in_a : {1'b1, in_a[30:0]};
    wire [31:0] key_b = in_b[31] ? ~in_b : {1'b1, in_b[30:0]};
    wire        nan_a = (in_a[30:23] == 8'hff) && (in_a[22:0] != 23'd0);
    wire        nan_b = (in_b[30:23] == 8'hff) && (in_b[22:0] != 23'd0);

    reg [31:0] out_reg;
    reg [31:0] out_next;

    always @* begin
        if (nan_a || nan_b) begin
            out_next = 32'h7fc0_0000;
        end else if (key_a >= key_b) begin
            out_next = in_a;
        end else begin
            out_next = in_b;
        end
    end

    always @(posedge clk) begin
        out_reg <= out_next;
    end

    assign out_data = out_reg;

endmodule

`default_nettype wire
