`default_nettype none

// ws_mesh_edge_in: a valid/ready stream into one edge link of ws_mesh_fabric on one color
// (docs/mesh-router.md "Links and credits"), for the edge ports of ws_mesh (weight ingress).
// It keeps the count of free slots of the router's input buffer for COLOR (BUF_DEPTH after
// reset, one down per flit sent, one up per credit pulse) and takes a beat only with a
// credit, so the router's buffer never overflows. Every link output is a register.
module ws_mesh_edge_in #(
    parameter COLORS = 3,       // colors of the fabric, 2..16
    parameter COLOR = 0,        // the color the beats travel on
    parameter BUF_DEPTH = 4,    // the router's flits per color per input
    parameter DATA_WIDTH = 32,  // payload bits
    parameter USER_WIDTH = 1,   // header bits
    parameter CW = $clog2(COLORS),        // color bits (derived)
    parameter NW = $clog2(BUF_DEPTH) + 1  // credit counter bits (derived)
) (
    input  wire                  clk,
    input  wire                  rst,

    input  wire                  s_valid,
    output wire                  s_ready,
    input  wire [DATA_WIDTH-1:0] s_data,
    input  wire                  s_last,
    input  wire [USER_WIDTH-1:0] s_user,

    output reg                   link_valid,
    output wire [CW-1:0]         link_color,
    output reg  [DATA_WIDTH-1:0] link_data,
    output reg                   link_last,
    output reg  [USER_WIDTH-1:0] link_user,
    input  wire [COLORS-1:0]     link_credit
);

    initial begin
        if (COLOR < 0 || COLOR >= COLORS) $error("ws_mesh_edge_in: COLOR must be below COLORS");
        if (BUF_DEPTH < 2) $error("ws_mesh_edge_in: BUF_DEPTH must be >= 2");
    end

    localparam [31:0] COLOR32 = COLOR;
    localparam [31:0] DEPTH32 = BUF_DEPTH;

    reg [NW-1:0] credit_reg;

    assign s_ready = credit_reg != {NW{1'b0}};
    assign link_color = COLOR32[CW-1:0];
    wire fire = s_valid && s_ready;

    always @(posedge clk) begin
        link_data <= s_data;
        link_last <= s_last;
        link_user <= s_user;
        if (rst) begin
            link_valid <= 1'b0;
            credit_reg <= DEPTH32[NW-1:0];
        end else begin
            link_valid <= fire;
            credit_reg <= credit_reg - {{(NW-1){1'b0}}, fire} + {{(NW-1){1'b0}}, link_credit[COLOR]};
        end
    end

endmodule

`default_nettype wire
