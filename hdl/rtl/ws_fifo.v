`default_nettype none

// ws_fifo: synchronous first-word-fall-through FIFO with valid/ready on both sides.
//
// The byte queues of the UART and the host-link block are built from it, and it is meant to be
// reused wherever a stream needs buffering inside one clock domain. The storage array is read
// synchronously into an output register, so FPGA tools map deep instances onto block RAM (an
// ECP5 DP16KD holds 1024 x 18). The price is latency: a word pushed in cycle N is visible on
// m_* in cycle N+2. `level` counts every word accepted and not yet popped, including the one
// waiting in the output register, so `s_ready` is low exactly when `level == DEPTH`.
module ws_fifo #(
    parameter DEPTH = 16,  // capacity in words; a power of two, at least 2
    parameter WIDTH = 8    // bits per word
) (
    input  wire                         clk,
    input  wire                         rst,

    input  wire                         s_valid,
    output wire                         s_ready,
    input  wire [WIDTH-1:0]             s_data,

    output wire                         m_valid,
    input  wire                         m_ready,
    output wire [WIDTH-1:0]             m_data,

    output wire [$clog2(DEPTH+1)-1:0]   level
);

    // Pointers carry one extra bit so that "full" and "empty" of the array differ.
    localparam ADDR_WIDTH = $clog2(DEPTH);
    localparam LEVEL_WIDTH = $clog2(DEPTH + 1);

    initial begin
        if (DEPTH < 2 || (DEPTH & (DEPTH - 1)) != 0) begin
            $error("ws_fifo: DEPTH must be a power of two >= 2");
        end
        if (WIDTH < 1) $error("ws_fifo: WIDTH must be at least 1");
    end

    reg [WIDTH-1:0] mem [0:DEPTH-1];

    reg [ADDR_WIDTH:0]  wr_ptr_reg, wr_ptr_next;
    reg [ADDR_WIDTH:0]  rd_ptr_reg, rd_ptr_next;
    reg [LEVEL_WIDTH-1:0] level_reg, level_next;
    reg                 out_valid_reg, out_valid_next;
    reg [WIDTH-1:0]     out_data_reg;

    reg                 push;
    reg                 pop;
    reg                 fill;

    // DEPTH is a power of two and level never exceeds it, so the top bit of level is "full".
    assign s_ready = !level_reg[LEVEL_WIDTH-1];
    assign m_valid = out_valid_reg;
    assign m_data = out_data_reg;
    assign level = level_reg;

    always @* begin
        push = s_valid && s_ready;
        pop = out_valid_reg && m_ready;
        // Refill the output register from the array whenever it is (or is becoming) empty.
        fill = (rd_ptr_reg != wr_ptr_reg) && (!out_valid_reg || m_ready);

        wr_ptr_next = wr_ptr_reg + {{ADDR_WIDTH{1'b0}}, push};
        rd_ptr_next = rd_ptr_reg + {{ADDR_WIDTH{1'b0}}, fill};
        out_valid_next = fill || (out_valid_reg && !m_ready);

        level_next = level_reg;
        if (push && !pop) begin
            level_next = level_reg + 1'b1;
        end else if (pop && !push) begin
            level_next = level_reg - 1'b1;
        end
    end

    // The array and the output register have no reset, as block RAM has none.
    always @(posedge clk) begin
        if (push) begin
            mem[wr_ptr_reg[ADDR_WIDTH-1:0]] <= s_data;
        end
        if (fill) begin
            out_data_reg <= mem[rd_ptr_reg[ADDR_WIDTH-1:0]];
        end

        wr_ptr_reg <= wr_ptr_next;
        rd_ptr_reg <= rd_ptr_next;
        level_reg <= level_next;
        out_valid_reg <= out_valid_next;

        if (rst) begin
            wr_ptr_reg <= {(ADDR_WIDTH + 1){1'b0}};
            rd_ptr_reg <= {(ADDR_WIDTH + 1){1'b0}};
            level_reg <= {LEVEL_WIDTH{1'b0}};
            out_valid_reg <= 1'b0;
        end
    end

endmodule

`default_nettype wire
