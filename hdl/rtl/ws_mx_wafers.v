`default_nettype none

// ws_mx_wafers: the SoC's wafer meshes (docs/mesh-array.md "Several wafers"), WAFERS copies
// of ws_mesh_block inside ws_mx_block, each behind its own register slot, and the switch
// between them and the paths that feed them:
//   - the data mover's op 4 weight flits (s_w_*) go to wafer 0 while no wafer is on SwarmX
//     (ws_mx_block sends them into SwarmX's broadcast otherwise);
//   - the sample feed (op 5, s_x_*) goes to the lowest wafer whose CTRL.samples is set, or to
//     wafer 0 when none is;
//   - the capture sink (m_cap_*) takes the gradient egress of the lowest wafer whose
//     CTRL.grad_capture is set;
//   - wafer w sits on SwarmX downstream port PORTS - 1 - w (wafer 0 on the last port). While
//     its CTRL.swarm is set, the port's broadcast copies (s_bc_*) are its weight ingress and its
//     gradient egress (unless captured) goes up the port (m_up_*); port_held says which ports
//     a wafer holds, and ws_mx_block connects the others as before.
// Every wafer gets the same broadcast and computes on its own samples; SwarmX's reduction
// sums their gradients in its fixed order before MemoryX's optimizer.
module ws_mx_wafers #(
    parameter WAFERS = 1,            // wafer meshes, 1..4 (register slots 25 .. 25 + WAFERS - 1)
    parameter PORTS = 4,             // SwarmX downstream ports (0: no SwarmX)
    parameter P = 2,                 // each mesh's side (P x P PEs)
    parameter SRAM_WORDS = 2048,     // each PE's SRAM words
    parameter MAX_B = 4,             // sample slots per PE
    parameter PROG_DEPTH = 16,       // each PE's program store
    parameter NP = (PORTS > 0) ? PORTS : 1  // width of the per-port vectors (derived)
) (
    input  wire                 clk,
    input  wire                 rst,

    input  wire [WAFERS-1:0]    reg_req,
    input  wire                 reg_we,
    input  wire [11:0]          reg_addr,
    input  wire [31:0]          reg_wdata,
    input  wire [3:0]           reg_be,
    output wire [WAFERS*32-1:0] reg_rdata,

    input  wire                 s_w_valid,
    output wire                 s_w_ready,
    input  wire [31:0]          s_w_data,
    input  wire                 s_w_last,
    input  wire [63:0]          s_w_user,

    input  wire                 s_x_valid,
    output wire                 s_x_ready,
    input  wire [31:0]          s_x_data,

    output wire                 m_cap_valid,
    input  wire                 m_cap_ready,
    output wire [31:0]          m_cap_data,
    output wire                 m_cap_last,
    output wire [63:0]          m_cap_user,
    output wire                 capture,

    output wire                 swarm,
    output wire [NP-1:0]        port_held,
    input  wire [NP-1:0]        s_bc_valid,
    output wire [NP-1:0]        s_bc_ready,
    input  wire [NP*32-1:0]     s_bc_data,
    input  wire [NP-1:0]        s_bc_last,
    input  wire [NP*64-1:0]     s_bc_user,
    output wire [NP-1:0]        m_up_valid,
    input  wire [NP-1:0]        m_up_ready,
    output wire [NP*32-1:0]     m_up_data,
    output wire [NP-1:0]        m_up_last,
    output wire [NP*64-1:0]     m_up_user,

    // Each wafer's FMA phase records (docs/trace.md "FMA phases"), stamped from ts_now.
    input  wire [47:0]          ts_now,
    output wire [WAFERS-1:0]    m_ph_valid,
    output wire [WAFERS*48-1:0] m_ph_begin,
    output wire [WAFERS*48-1:0] m_ph_end,
    output wire [WAFERS*32-1:0] m_ph_word4,
    output wire [WAFERS*16-1:0] m_ph_pc,
    output wire [WAFERS*16-1:0] m_ph_pes,
    output wire [WAFERS*32-1:0] m_ph_fmas
);

    initial begin
        if (WAFERS < 1 || WAFERS > 4) $error("ws_mx_wafers: WAFERS must be 1..4 (register slots 25..28)");
        if (PORTS != 0 && WAFERS > PORTS) $error("ws_mx_wafers: more wafers than SwarmX ports");
    end

    wire [WAFERS-1:0] w_ready, x_ready, g_valid, g_last, cap_bit, swarm_bit, sx_bit;
    wire [WAFERS*32-1:0] g_data;
    wire [WAFERS*64-1:0] g_user;
    wire [WAFERS-1:0] on_swarm = (PORTS > 0) ? swarm_bit : {WAFERS{1'b0}};

    // The lowest wafer with a bit set (0 when none is).
    function [1:0] lowest(input [WAFERS-1:0] bits);
        integer i;
        begin
            lowest = 2'd0;
            for (i = WAFERS - 1; i >= 0; i = i - 1)
                if (bits[i]) lowest = i[1:0];
        end
    endfunction
    wire [1:0] x_sel = lowest(sx_bit);
    wire [1:0] cap_sel = lowest(cap_bit);

    assign capture = |cap_bit;
    assign swarm = |on_swarm;
    assign s_w_ready = !on_swarm[0] && w_ready[0];
    assign s_x_ready = x_ready[x_sel];
    assign m_cap_valid = capture && g_valid[cap_sel];
    assign m_cap_data = g_data[cap_sel*32 +: 32];
    assign m_cap_last = g_last[cap_sel];
    assign m_cap_user = g_user[cap_sel*64 +: 64];

    genvar w, p;
    generate
        for (p = 0; p < NP; p = p + 1) begin : g_port
            // Port p's wafer is PORTS - 1 - p, if there is one.
            localparam integer WP = PORTS - 1 - p;
            if (PORTS > 0 && WP >= 0 && WP < WAFERS) begin : g_wafer
                assign port_held[p] = on_swarm[WP];
                assign s_bc_ready[p] = on_swarm[WP] && w_ready[WP];
                assign m_up_valid[p] = on_swarm[WP] && !cap_bit[WP] && g_valid[WP];
                assign m_up_data[p*32 +: 32] = g_data[WP*32 +: 32];
                assign m_up_last[p] = g_last[WP];
                assign m_up_user[p*64 +: 64] = g_user[WP*64 +: 64];
            end else begin : g_none
                assign port_held[p] = 1'b0;
                assign s_bc_ready[p] = 1'b0;
                assign m_up_valid[p] = 1'b0;
                assign m_up_data[p*32 +: 32] = 32'd0;
                assign m_up_last[p] = 1'b0;
                assign m_up_user[p*64 +: 64] = 64'd0;
            end
        end

        for (w = 0; w < WAFERS; w = w + 1) begin : g_wafer
            localparam integer PW = (PORTS > 0) ? PORTS - 1 - w : 0;
            localparam [1:0] W2 = w;
            wire        bc_valid = (PORTS > 0) && s_bc_valid[PW];
            wire [31:0] bc_data = s_bc_data[PW*32 +: 32];
            wire        bc_last = s_bc_last[PW];
            wire [63:0] bc_user = s_bc_user[PW*64 +: 64];
            wire        direct = (w == 0) && s_w_valid;
            wire        mine = cap_sel == W2;
            ws_mesh_block #(
                .P(P),
                .Q(P),
                .SRAM_WORDS(SRAM_WORDS),
                .MAX_B(MAX_B),
                .PROG_DEPTH(PROG_DEPTH),
                .WAFER(w),
                .WAFERS(WAFERS),
                .PORT((PORTS > 0) ? PORTS - 1 - w : 255)
            ) mesh_inst (
                .clk(clk),
                .rst(rst),
                .reg_req(reg_req[w]),
                .reg_we(reg_we),
                .reg_addr(reg_addr),
                .reg_wdata(reg_wdata),
                .reg_be(reg_be),
                .reg_rdata(reg_rdata[w*32 +: 32]),
                .s_w_valid(on_swarm[w] ? bc_valid : direct),
                .s_w_ready(w_ready[w]),
                .s_w_data(on_swarm[w] ? bc_data : s_w_data),
                .s_w_last(on_swarm[w] ? bc_last : s_w_last),
                .s_w_user(on_swarm[w] ? bc_user : s_w_user),
                .s_x_valid(s_x_valid && x_sel == W2),
                .s_x_ready(x_ready[w]),
                .s_x_data(s_x_data),
                .m_g_valid(g_valid[w]),
                .m_g_ready(cap_bit[w] ? (mine && m_cap_ready) : on_swarm[w] && m_up_ready[PW]),
                .m_g_data(g_data[w*32 +: 32]),
                .m_g_last(g_last[w]),
                .m_g_user(g_user[w*64 +: 64]),
                .ts_now(ts_now),
                .m_ph_valid(m_ph_valid[w]),
                .m_ph_begin(m_ph_begin[w*48 +: 48]),
                .m_ph_end(m_ph_end[w*48 +: 48]),
                .m_ph_word4(m_ph_word4[w*32 +: 32]),
                .m_ph_pc(m_ph_pc[w*16 +: 16]),
                .m_ph_pes(m_ph_pes[w*16 +: 16]),
                .m_ph_fmas(m_ph_fmas[w*32 +: 32]),
                .grad_capture(cap_bit[w]),
                .grad_swarm(swarm_bit[w]),
                .sx_select(sx_bit[w])
            );
        end
    endgenerate

endmodule

`default_nettype wire
