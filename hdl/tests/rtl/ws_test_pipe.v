`default_nettype none

// ws_test_pipe: a valid/ready pipeline register with an optional bug, to prove the stream agents
// of the block harness (hdl/tests/harness.rs) catch drops and duplicates.
module ws_test_pipe #(
    parameter WIDTH = 16,  // data width
    parameter BUG = 0      // 0: correct; 1: drops a beat when m_ready falls; 2: duplicates
) (
    input  wire             clk,
    input  wire             rst,

    input  wire             s_valid,
    output wire             s_ready,
    input  wire [WIDTH-1:0] s_data,
    input  wire             s_last,

    output wire             m_valid,
    input  wire             m_ready,
    output wire [WIDTH-1:0] m_data,
    output wire             m_last
);

    reg             valid_reg;
    reg [WIDTH-1:0] data_reg;
    reg             last_reg;
    reg [7:0]       count_reg;

    // Take a new beat when empty or when the held one leaves this cycle.
    assign s_ready = !valid_reg || m_ready;
    assign m_valid = valid_reg;
    assign m_data = data_reg;
    assign m_last = last_reg;

    always @(posedge clk) begin
        count_reg <= count_reg + 8'd1;
        if (s_valid && s_ready) begin
            valid_reg <= 1'b1;
            data_reg <= s_data;
            last_reg <= s_last;
        end else if (m_ready) begin
            valid_reg <= 1'b0;
        end
        if (BUG == 1 && valid_reg && !m_ready && count_reg == 8'd200) begin
            valid_reg <= 1'b0;
        end
        if (BUG == 2 && valid_reg && m_ready && count_reg == 8'd200) begin
            valid_reg <= 1'b1;
        end
        if (rst) begin
            valid_reg <= 1'b0;
            count_reg <= 8'd0;
        end
    end

endmodule

`default_nettype wire
