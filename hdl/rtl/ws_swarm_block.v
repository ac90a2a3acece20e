`default_nettype none

// ws_swarm_block: one SwarmX switch node (ws_swarm_node, docs/swarmx.md) behind its register
// block (hdl/regmap/swarm.toml, generated ws_swarm_csr; docs/registers.md "swarm"), so
// firmware configures it and reads its health through the house register port (docs/soc.md
// "Bus"). Configuration registers feed the node's cfg_* inputs, which the node takes at chunk
// boundaries. The first abort since the last clear is latched into ERR* (later ones are
// counted in CNT_ERRORS), and `irq` is raised while ERR.pending and CTRL.irq_err are set, so a
// driver can mask the blamed port and continue with the others (docs/swarmx.md "Faults").
// Per-port counters are 16-entry register arrays; entries at or past N_PORTS read 0.
module ws_swarm_block #(
    parameter N_PORTS = 4,
    parameter SKID_DEPTH = 16,
    parameter ADD_REGS = 3,
    parameter MUL_REGS = 3,
    parameter BF16_EN = 1,
    parameter SCALE_EN = 1
) (
    input  wire                     clk,
    input  wire                     rst,

    input  wire                     reg_req,
    input  wire                     reg_we,
    input  wire [11:0]              reg_addr,
    input  wire [31:0]              reg_wdata,
    input  wire [3:0]               reg_be,
    output wire [31:0]              reg_rdata,

    input  wire                     s_up_valid,
    output wire                     s_up_ready,
    input  wire [31:0]              s_up_data,
    input  wire                     s_up_last,
    input  wire [63:0]              s_up_user,
    output wire                     m_up_valid,
    input  wire                     m_up_ready,
    output wire [31:0]              m_up_data,
    output wire                     m_up_last,
    output wire [63:0]              m_up_user,
    output wire [N_PORTS-1:0]       m_dn_valid,
    input  wire [N_PORTS-1:0]       m_dn_ready,
    output wire [N_PORTS*32-1:0]    m_dn_data,
    output wire [N_PORTS-1:0]       m_dn_last,
    output wire [N_PORTS*64-1:0]    m_dn_user,
    input  wire [N_PORTS-1:0]       s_dn_valid,
    output wire [N_PORTS-1:0]       s_dn_ready,
    input  wire [N_PORTS*32-1:0]    s_dn_data,
    input  wire [N_PORTS-1:0]       s_dn_last,
    input  wire [N_PORTS*64-1:0]    s_dn_user,

    output wire                     irq
);

    initial begin
        if (N_PORTS < 2 || N_PORTS > 16) $error("ws_swarm_block: N_PORTS must be 2..16 (the register arrays hold 16)");
    end

    localparam LEVELS = $clog2(N_PORTS);

    wire [1:0]  cfg_dtype;
    wire        cfg_scale_en;
    wire        cfg_irq_err;
    wire [15:0] cfg_mask;
    wire [31:0] cfg_scale;
    wire [31:0] cfg_timeout;
    wire        cnt_clear_go, cnt_clear_we;
    wire        err_pending;

    wire [N_PORTS-1:0]    stat_up_mask, stat_dn_mask, stat_dropping;
    wire [N_PORTS*32-1:0] n_up_flits, n_dn_flits, n_up_wait, n_dn_stall;
    wire [31:0]           cnt_bcast, cnt_reduced, cnt_dropped, cnt_errors, lat_last, lat_max;
    wire                  err_pulse;
    wire [3:0]            err_code, err_port;
    wire [N_PORTS-1:0]    err_timeout_ports, err_mismatch_ports, err_forward_ports;
    wire [31:0]           err_last_payload;
    wire [63:0]           err_last_user;

    // Per-port counters padded to the 16 entries of the register arrays.
    wire [16*32-1:0] cnt_up = {{(16 - N_PORTS) * 32{1'b0}}, n_up_flits};
    wire [16*32-1:0] cnt_dn = {{(16 - N_PORTS) * 32{1'b0}}, n_dn_flits};
    wire [16*32-1:0] cnt_wait = {{(16 - N_PORTS) * 32{1'b0}}, n_up_wait};
    wire [16*32-1:0] cnt_stall = {{(16 - N_PORTS) * 32{1'b0}}, n_dn_stall};

    // The first abort since the clear, held for the driver.
    reg  [3:0]  l_code, l_port;
    reg  [15:0] l_timeout, l_mismatch, l_forward;
    reg  [31:0] l_payload;
    reg  [63:0] l_user;
    wire        latch = err_pulse && !err_pending;

    always @(posedge clk) begin
        if (rst) begin
            l_code <= 4'd0;
            l_port <= 4'd0;
            l_timeout <= 16'd0;
            l_mismatch <= 16'd0;
            l_forward <= 16'd0;
            l_payload <= 32'd0;
            l_user <= 64'd0;
        end else if (latch) begin
            l_code <= err_code;
            l_port <= err_port;
            l_timeout <= 16'(err_timeout_ports);
            l_mismatch <= 16'(err_mismatch_ports);
            l_forward <= 16'(err_forward_ports);
            l_payload <= err_last_payload;
            l_user <= err_last_user;
        end
    end

    /* verilator lint_off UNUSEDSIGNAL */
    wire [4:0] unused_we;       // write strobes of registers the node reads as levels
    /* verilator lint_on UNUSEDSIGNAL */

    ws_swarm_csr csr_inst (
        .clk(clk),
        .rst(rst),
        .reg_req(reg_req),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata),
        .ctrl_dtype(cfg_dtype),
        .ctrl_scale_en(cfg_scale_en),
        .ctrl_irq_err(cfg_irq_err),
        .ctrl_we(unused_we[0]),
        .port_mask_mask(cfg_mask),
        .port_mask_we(unused_we[1]),
        .scale_value(cfg_scale),
        .scale_we(unused_we[2]),
        .timeout_cycles(cfg_timeout),
        .timeout_we(unused_we[3]),
        .cnt_clear_go(cnt_clear_go),
        .cnt_clear_we(cnt_clear_we),
        .params_ports_i(8'(N_PORTS)),
        .params_levels_i(8'(LEVELS)),
        .params_bf16_i(BF16_EN != 0),
        .params_scale_i(SCALE_EN != 0),
        .masks_up_i(16'(stat_up_mask)),
        .masks_dn_i(16'(stat_dn_mask)),
        .dropping_ports_i(16'(stat_dropping)),
        .cnt_bcast_count_i(cnt_bcast),
        .cnt_reduced_count_i(cnt_reduced),
        .cnt_dropped_count_i(cnt_dropped),
        .cnt_errors_count_i(cnt_errors),
        .lat_last_cycles_i(lat_last),
        .lat_max_cycles_i(lat_max),
        .err_pending_set(err_pulse),
        .err_pending(err_pending),
        .err_we(unused_we[4]),
        .err_code_i(l_code),
        .err_port_i(l_port),
        .err_ports_timeout_i(l_timeout),
        .err_ports_mismatch_i(l_mismatch),
        .err_forward_ports_i(l_forward),
        .err_payload_value_i(l_payload),
        .err_user_lo_value_i(l_user[31:0]),
        .err_user_hi_value_i(l_user[63:32]),
        .up_flits0_count_i(cnt_up[0*32 +: 32]),
        .up_flits1_count_i(cnt_up[1*32 +: 32]),
        .up_flits2_count_i(cnt_up[2*32 +: 32]),
        .up_flits3_count_i(cnt_up[3*32 +: 32]),
        .up_flits4_count_i(cnt_up[4*32 +: 32]),
        .up_flits5_count_i(cnt_up[5*32 +: 32]),
        .up_flits6_count_i(cnt_up[6*32 +: 32]),
        .up_flits7_count_i(cnt_up[7*32 +: 32]),
        .up_flits8_count_i(cnt_up[8*32 +: 32]),
        .up_flits9_count_i(cnt_up[9*32 +: 32]),
        .up_flits10_count_i(cnt_up[10*32 +: 32]),
        .up_flits11_count_i(cnt_up[11*32 +: 32]),
        .up_flits12_count_i(cnt_up[12*32 +: 32]),
        .up_flits13_count_i(cnt_up[13*32 +: 32]),
        .up_flits14_count_i(cnt_up[14*32 +: 32]),
        .up_flits15_count_i(cnt_up[15*32 +: 32]),
        .dn_flits0_count_i(cnt_dn[0*32 +: 32]),
        .dn_flits1_count_i(cnt_dn[1*32 +: 32]),
        .dn_flits2_count_i(cnt_dn[2*32 +: 32]),
        .dn_flits3_count_i(cnt_dn[3*32 +: 32]),
        .dn_flits4_count_i(cnt_dn[4*32 +: 32]),
        .dn_flits5_count_i(cnt_dn[5*32 +: 32]),
        .dn_flits6_count_i(cnt_dn[6*32 +: 32]),
        .dn_flits7_count_i(cnt_dn[7*32 +: 32]),
        .dn_flits8_count_i(cnt_dn[8*32 +: 32]),
        .dn_flits9_count_i(cnt_dn[9*32 +: 32]),
        .dn_flits10_count_i(cnt_dn[10*32 +: 32]),
        .dn_flits11_count_i(cnt_dn[11*32 +: 32]),
        .dn_flits12_count_i(cnt_dn[12*32 +: 32]),
        .dn_flits13_count_i(cnt_dn[13*32 +: 32]),
        .dn_flits14_count_i(cnt_dn[14*32 +: 32]),
        .dn_flits15_count_i(cnt_dn[15*32 +: 32]),
        .up_wait0_cycles_i(cnt_wait[0*32 +: 32]),
        .up_wait1_cycles_i(cnt_wait[1*32 +: 32]),
        .up_wait2_cycles_i(cnt_wait[2*32 +: 32]),
        .up_wait3_cycles_i(cnt_wait[3*32 +: 32]),
        .up_wait4_cycles_i(cnt_wait[4*32 +: 32]),
        .up_wait5_cycles_i(cnt_wait[5*32 +: 32]),
        .up_wait6_cycles_i(cnt_wait[6*32 +: 32]),
        .up_wait7_cycles_i(cnt_wait[7*32 +: 32]),
        .up_wait8_cycles_i(cnt_wait[8*32 +: 32]),
        .up_wait9_cycles_i(cnt_wait[9*32 +: 32]),
        .up_wait10_cycles_i(cnt_wait[10*32 +: 32]),
        .up_wait11_cycles_i(cnt_wait[11*32 +: 32]),
        .up_wait12_cycles_i(cnt_wait[12*32 +: 32]),
        .up_wait13_cycles_i(cnt_wait[13*32 +: 32]),
        .up_wait14_cycles_i(cnt_wait[14*32 +: 32]),
        .up_wait15_cycles_i(cnt_wait[15*32 +: 32]),
        .dn_stall0_cycles_i(cnt_stall[0*32 +: 32]),
        .dn_stall1_cycles_i(cnt_stall[1*32 +: 32]),
        .dn_stall2_cycles_i(cnt_stall[2*32 +: 32]),
        .dn_stall3_cycles_i(cnt_stall[3*32 +: 32]),
        .dn_stall4_cycles_i(cnt_stall[4*32 +: 32]),
        .dn_stall5_cycles_i(cnt_stall[5*32 +: 32]),
        .dn_stall6_cycles_i(cnt_stall[6*32 +: 32]),
        .dn_stall7_cycles_i(cnt_stall[7*32 +: 32]),
        .dn_stall8_cycles_i(cnt_stall[8*32 +: 32]),
        .dn_stall9_cycles_i(cnt_stall[9*32 +: 32]),
        .dn_stall10_cycles_i(cnt_stall[10*32 +: 32]),
        .dn_stall11_cycles_i(cnt_stall[11*32 +: 32]),
        .dn_stall12_cycles_i(cnt_stall[12*32 +: 32]),
        .dn_stall13_cycles_i(cnt_stall[13*32 +: 32]),
        .dn_stall14_cycles_i(cnt_stall[14*32 +: 32]),
        .dn_stall15_cycles_i(cnt_stall[15*32 +: 32])
    );

    ws_swarm_node #(
        .N_PORTS(N_PORTS),
        .SKID_DEPTH(SKID_DEPTH),
        .ADD_REGS(ADD_REGS),
        .MUL_REGS(MUL_REGS),
        .BF16_EN(BF16_EN),
        .SCALE_EN(SCALE_EN)
    ) node_inst (
        .clk(clk),
        .rst(rst),
        .s_up_valid(s_up_valid),
        .s_up_ready(s_up_ready),
        .s_up_data(s_up_data),
        .s_up_last(s_up_last),
        .s_up_user(s_up_user),
        .m_up_valid(m_up_valid),
        .m_up_ready(m_up_ready),
        .m_up_data(m_up_data),
        .m_up_last(m_up_last),
        .m_up_user(m_up_user),
        .m_dn_valid(m_dn_valid),
        .m_dn_ready(m_dn_ready),
        .m_dn_data(m_dn_data),
        .m_dn_last(m_dn_last),
        .m_dn_user(m_dn_user),
        .s_dn_valid(s_dn_valid),
        .s_dn_ready(s_dn_ready),
        .s_dn_data(s_dn_data),
        .s_dn_last(s_dn_last),
        .s_dn_user(s_dn_user),
        .cfg_port_mask(cfg_mask[N_PORTS-1:0]),
        .cfg_dtype(cfg_dtype),
        .cfg_scale_en(cfg_scale_en),
        .cfg_scale(cfg_scale),
        .cfg_timeout(cfg_timeout),
        .cnt_clear(cnt_clear_we && cnt_clear_go),
        .stat_up_mask(stat_up_mask),
        .stat_dn_mask(stat_dn_mask),
        .stat_dropping(stat_dropping),
        .cnt_up_flits(n_up_flits),
        .cnt_dn_flits(n_dn_flits),
        .cnt_up_wait(n_up_wait),
        .cnt_dn_stall(n_dn_stall),
        .cnt_bcast(cnt_bcast),
        .cnt_reduced(cnt_reduced),
        .cnt_dropped(cnt_dropped),
        .cnt_errors(cnt_errors),
        .stat_lat_last(lat_last),
        .stat_lat_max(lat_max),
        .err_pulse(err_pulse),
        .err_code(err_code),
        .err_port(err_port),
        .err_timeout_ports(err_timeout_ports),
        .err_mismatch_ports(err_mismatch_ports),
        .err_forward_ports(err_forward_ports),
        .err_last_payload(err_last_payload),
        .err_last_user(err_last_user)
    );

    assign irq = cfg_irq_err && err_pending;

    wire _unused_ok = &{1'b0, cfg_mask};

endmodule

`default_nettype wire
