`default_nettype none

// ws_mesh_router_buf: the input buffer of one (port, color) of ws_mesh_router.
//
// A small synchronous FIFO whose head is read combinationally from the storage array, so a
// flit written on one clock edge can leave on the next (one cycle through the buffer, which
// keeps the credit round trip of a mesh link at four cycles, docs/mesh-router.md "Credits").
// The array has no reset and an asynchronous read, so it maps onto LUT RAM (ECP5 DPR16X4).
// A push while full is ignored here; the router counts it as a protocol error.
module ws_mesh_router_buf #(
    parameter DEPTH = 4,    // capacity in flits; a power of two, at least 2
    parameter WIDTH = 97    // bits per flit
) (
    input  wire                         clk,
    input  wire                         rst,

    input  wire                         s_valid,
    output wire                         s_ready,
    input  wire [WIDTH-1:0]             s_data,

    output wire                         m_valid,
    input  wire                         m_ready,
    output wire [WIDTH-1:0]             m_data
);

    localparam ADDR_WIDTH = $clog2(DEPTH);

    initial begin
        if (DEPTH < 2 || (DEPTH & (DEPTH - 1)) != 0) $error("ws_mesh_router_buf: DEPTH must be a power of two >= 2");
        if (WIDTH < 1) $error("ws_mesh_router_buf: WIDTH must be at least 1");
    end

    reg [WIDTH-1:0] mem [0:DEPTH-1];

    // One extra pointer bit tells full from empty.
    reg [ADDR_WIDTH:0] wr_ptr_reg, wr_ptr_next;
    reg [ADDR_WIDTH:0] rd_ptr_reg, rd_ptr_next;

    wire empty = wr_ptr_reg == rd_ptr_reg;
    wire full = (wr_ptr_reg[ADDR_WIDTH-1:0] == rd_ptr_reg[ADDR_WIDTH-1:0]) &&
                (wr_ptr_reg[ADDR_WIDTH] != rd_ptr_reg[ADDR_WIDTH]);
    wire push = s_valid && !full;
    wire pop = m_ready && !empty;

    assign s_ready = !full;
    assign m_valid = !empty;
    assign m_data = mem[rd_ptr_reg[ADDR_WIDTH-1:0]];

    always @* begin
        wr_ptr_next = wr_ptr_reg + {{ADDR_WIDTH{1'b0}}, push};
        rd_ptr_next = rd_ptr_reg + {{ADDR_WIDTH{1'b0}}, pop};
    end

    always @(posedge clk) begin
        if (push) begin
            mem[wr_ptr_reg[ADDR_WIDTH-1:0]] <= s_data;
        end
        wr_ptr_reg <= wr_ptr_next;
        rd_ptr_reg <= rd_ptr_next;
        if (rst) begin
            wr_ptr_reg <= {(ADDR_WIDTH + 1){1'b0}};
            rd_ptr_reg <= {(ADDR_WIDTH + 1){1'b0}};
        end
    end

endmodule

`default_nettype wire
