`default_nettype none

// ws_periph_bus: fans the crossbar's peripheral slave port out to the register blocks.
//
// The periph region (0x2000_0000, 1 MiB) is cut into 256 slots of 4 KiB; addr[19:12] picks the
// slot and addr[11:0] is the register offset inside it (docs/soc.md "Bus", hdl/regmap/soc.toml).
// Each block sees the plain register port its generated CSR block expects: a per-slot reg_req
// and a shared reg_we/reg_addr/reg_wdata/reg_be, with reg_rdata one cycle later. The bus keeps
// the crossbar's contract (always ready, rdata one cycle after the request) by remembering which
// slot it addressed and muxing that slot's rdata. Slots at or beyond NUM_SLOTS, and slot ports
// ws_soc leaves empty, read as zero and ignore writes, so software can probe for blocks.
module ws_periph_bus #(
    parameter NUM_SLOTS = 5  // slot ports 0..NUM_SLOTS-1; at most 256
) (
    input  wire                     clk,
    input  wire                     rst,

    // From ws_obi_xbar: offset inside the periph region.
    input  wire                     s_req,
    input  wire                     s_we,
    input  wire [19:0]              s_addr,
    input  wire [3:0]               s_be,
    input  wire [31:0]              s_wdata,
    output wire [31:0]              s_rdata,

    // To the register blocks.
    output wire [NUM_SLOTS-1:0]     m_reg_req,
    output wire                     m_reg_we,
    output wire [11:0]              m_reg_addr,
    output wire [31:0]              m_reg_wdata,
    output wire [3:0]               m_reg_be,
    input  wire [NUM_SLOTS*32-1:0]  m_reg_rdata
);

    initial begin
        if (NUM_SLOTS < 1 || NUM_SLOTS > 256) $error("ws_periph_bus: NUM_SLOTS must be 1..256");
    end

    wire [7:0] slot = s_addr[19:12];

    reg [NUM_SLOTS-1:0] req;
    reg                 read_hit_reg, read_hit_next;
    reg [7:0]           read_slot_reg, read_slot_next;
    reg [31:0]          rdata;

    integer i;

    always @* begin
        req = {NUM_SLOTS{1'b0}};
        for (i = 0; i < NUM_SLOTS; i = i + 1) begin
            if (s_req && slot == i[7:0]) begin
                req[i] = 1'b1;
            end
        end

        read_hit_next = s_req && !s_we && (|req);
        read_slot_next = slot;

        rdata = 32'h0;
        for (i = 0; i < NUM_SLOTS; i = i + 1) begin
            if (read_hit_reg && read_slot_reg == i[7:0]) begin
                rdata = m_reg_rdata[i*32 +: 32];
            end
        end
    end

    always @(posedge clk) begin
        read_hit_reg <= read_hit_next;
        read_slot_reg <= read_slot_next;

        if (rst) begin
            read_hit_reg <= 1'b0;
        end
    end

    assign m_reg_req = req;
    assign m_reg_we = s_we;
    assign m_reg_addr = s_addr[11:0];
    assign m_reg_wdata = s_wdata;
    assign m_reg_be = s_be;
    assign s_rdata = rdata;

endmodule

`default_nettype wire
