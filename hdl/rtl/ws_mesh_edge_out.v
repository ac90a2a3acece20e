`default_nettype none

// ws_mesh_edge_out: one edge link of ws_mesh_fabric out to a valid/ready stream, for the
// edge ports of ws_mesh (gradient egress, metrics egress). The router sends only with a
// credit (docs/mesh-router.md "Links and credits"), so a BUF_DEPTH-entry FIFO always has room
// for what arrives; each beat taken from it returns one credit on COLOR, from a register. A
// flit of another color (which a checked route table never sends here) is dropped at once,
// its credit returned, and counted in cnt_drop.
module ws_mesh_edge_out #(
    parameter COLORS = 3,       // colors of the fabric, 2..16
    parameter COLOR = 1,        // the color this port carries
    parameter BUF_DEPTH = 4,    // the router's credits for this link (a power of two >= 2)
    parameter DATA_WIDTH = 32,  // payload bits
    parameter USER_WIDTH = 1,   // header bits
    parameter CNT_WIDTH = 32,   // bits of cnt_drop
    parameter CW = $clog2(COLORS),   // color bits (derived)
    parameter AW = $clog2(BUF_DEPTH) // FIFO index bits (derived)
) (
    input  wire                  clk,
    input  wire                  rst,

    input  wire                  link_valid,
    input  wire [CW-1:0]         link_color,
    input  wire [DATA_WIDTH-1:0] link_data,
    input  wire                  link_last,
    input  wire [USER_WIDTH-1:0] link_user,
    output reg  [COLORS-1:0]     link_credit,

    output wire                  m_valid,
    input  wire                  m_ready,
    output wire [DATA_WIDTH-1:0] m_data,
    output wire                  m_last,
    output wire [USER_WIDTH-1:0] m_user,

    output reg  [CNT_WIDTH-1:0]  cnt_drop
);

    initial begin
        if (COLOR < 0 || COLOR >= COLORS) $error("ws_mesh_edge_out: COLOR must be below COLORS");
        if (BUF_DEPTH < 2 || (BUF_DEPTH & (BUF_DEPTH - 1)) != 0) $error("ws_mesh_edge_out: BUF_DEPTH must be a power of two >= 2");
    end

    localparam [31:0] COLOR32 = COLOR;
    localparam FW = DATA_WIDTH + 1 + USER_WIDTH;

    reg [FW-1:0] mem [0:BUF_DEPTH-1];
    reg [AW:0]   count_reg;
    reg [AW-1:0] rp_reg;
    reg [AW-1:0] wp_reg;

    wire take = link_valid && link_color == COLOR32[CW-1:0];
    wire drop = link_valid && !take;
    wire pop = m_valid && m_ready;
    assign m_valid = count_reg != {(AW+1){1'b0}};
    assign {m_user, m_last, m_data} = mem[rp_reg];

    integer c;
    always @(posedge clk) begin
        if (take) mem[wp_reg] <= {link_user, link_last, link_data};
        if (rst) begin
            count_reg <= {(AW+1){1'b0}};
            rp_reg <= {AW{1'b0}};
            wp_reg <= {AW{1'b0}};
            link_credit <= {COLORS{1'b0}};
            cnt_drop <= {CNT_WIDTH{1'b0}};
        end else begin
            if (take) wp_reg <= wp_reg + 1'b1;
            if (pop) rp_reg <= rp_reg + 1'b1;
            count_reg <= count_reg + {{AW{1'b0}}, take} - {{AW{1'b0}}, pop};
            for (c = 0; c < COLORS; c = c + 1) begin
                link_credit[c] <= (pop && c == COLOR) || (drop && link_color == c[CW-1:0]);
            end
            if (drop) cnt_drop <= cnt_drop + 1'b1;
        end
    end

endmodule

`default_nettype wire
