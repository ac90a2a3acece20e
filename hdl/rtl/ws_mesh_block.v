`default_nettype none

// ws_mesh_block: the wafer mesh as the SoC carries it (docs/mesh-array.md "In the SoC"): a
// P x Q ws_mesh behind its register block (hdl/regmap/mesh.toml, generated ws_mesh_csr;
// docs/registers.md "mesh"), inside ws_mx_block beside the data mover that feeds it.
//
// Firmware configures and sequences through the registers; it never moves a sample or a
// weight word itself:
//   - CFG_TARGET / CFG_DATA write the PEs' configuration spaces (programs, CTRL, SRAM) and the
//     array's own registers (STEP, NSEG, the egress table), the address moving one word on
//     per CFG_DATA write (in a PE's program store, from word 2 of an instruction to word 0
//     of the next, so a program is its 3 words per instruction in a row); ROUTE writes one
//     route-table entry;
//   - samples come in on s_x_* (the data mover's op 5, words of a DMA ring): each word goes to
//     SRAM word SX_NEXT.addr of PE SX_NEXT.pe, and SX_NEXT moves one word on;
//   - weights come in on s_w_* (the data mover's op 4, flits with the house header);
//   - the gradient egress leaves on m_g_*, which the owner sends to the data mover's capture
//     sink while CTRL.grad_capture (`grad_capture`) is set; CTRL.swarm (`grad_swarm`) tells
//     ws_mx_block to put the mesh on its SwarmX port (WAFER.port) instead of the data mover,
//     and CTRL.samples (`sx_select`) to give it the data mover's sample feed;
//   - the metrics egress (the loss sum and correct count of a step) and the results egress
//     (the PEs' DUMP packets) fill two FIFOs read through METRICS* and RESULTS*, popped by CMD;
//     a full FIFO holds its egress back (nothing is dropped);
//   - every counter of the array is read through CNT_SEL / CNT_VALUE;
//   - chained steps (docs/mesh-array.md "Chained steps"): CHAIN, a top register of the array
//     written through CFG_TARGET 0xfe / CFG_DATA, starts the next step when the running one
//     ends; CHAIN_STAT, CHAIN_CYCLE, CHAIN_FMAS and CHAIN_GRAD are what the array latched for
//     the firmware, FMAS the running FMA total they are marks of;
//   - a ROUTE write to a router past the array, or a CFG_DATA write to a PE that does not
//     exist (not a router index, 0xfe or 0xff), reaches nothing in the array (ws_mesh and
//     ws_mesh_fabric decode only the indices that exist) and sets the sticky FLAGS.bad_route
//     or FLAGS.bad_target (write 1 to clear), so firmware sees a table it got wrong.
// CFG_TARGET and SX_TARGET are taken as whole words (their byte enables are not applied to
// CFG_NEXT and SX_NEXT).
//
// The array's clock stops while it is idle (CLOCK_GATE, ws_clock_gate; a wire in synthesis):
// it runs in every cycle with a register access, a word offered at an ingress or waiting at an
// egress, a PE or a router busy, and HANGOVER cycles after the last of those. Four PEs' FPnew
// FMAs evaluated on every cycle would cut the simulated board's speed by about four (docs/sim.md
// "Where the simulation time goes"). The array's cycle counter and phase timestamps count the
// cycles its clock runs: exact within a step (the PEs are busy throughout), paused between.
module ws_mesh_block #(
    parameter P = 2,                 // rows of PEs
    parameter Q = 2,                 // columns of PEs
    parameter SRAM_WORDS = 2048,     // PE SRAM words
    parameter FMA_LAT = 3,           // PE FMA pipeline registers
    parameter MAX_B = 4,             // sample slots per PE
    parameter PROG_DEPTH = 16,       // PE program store
    parameter BUF_DEPTH = 4,         // router flits per color per input
    parameter METRICS_DEPTH = 16,    // metrics FIFO words, a power of two
    parameter RESULTS_DEPTH = 64,    // results FIFO words, a power of two
    parameter CLOCK_GATE = 1,        // stop the array's clock while it is idle
    parameter HANGOVER = 64,         // cycles the clock runs on after the last activity
    parameter WAFER = 0,             // this wafer's index (WAFER.index)
    parameter WAFERS = 1,            // wafers the SoC carries (WAFER.count)
    parameter PORT = 255,            // its SwarmX downstream port (WAFER.port; 255: none)
    parameter R = P * Q              // tiles (derived)
) (
    input  wire        clk,
    input  wire        rst,

    input  wire        reg_req,
    input  wire        reg_we,
    input  wire [11:0] reg_addr,
    input  wire [31:0] reg_wdata,
    input  wire [3:0]  reg_be,
    output wire [31:0] reg_rdata,

    input  wire        s_w_valid,
    output wire        s_w_ready,
    input  wire [31:0] s_w_data,
    input  wire        s_w_last,
    input  wire [63:0] s_w_user,

    input  wire        s_x_valid,
    output wire        s_x_ready,
    input  wire [31:0] s_x_data,

    output wire        m_g_valid,
    input  wire        m_g_ready,
    output wire [31:0] m_g_data,
    output wire        m_g_last,
    output wire [63:0] m_g_user,

    // FMA phase records (ws_mesh_phases) for the trace unit, stamped from its counter.
    input  wire [47:0] ts_now,
    output wire        m_ph_valid,
    output wire [47:0] m_ph_begin,
    output wire [47:0] m_ph_end,
    output wire [31:0] m_ph_word4,
    output wire [15:0] m_ph_pc,
    output wire [15:0] m_ph_pes,
    output wire [31:0] m_ph_fmas,

    output wire        grad_capture,
    output wire        grad_swarm,
    output wire        sx_select
);

    `include "ws_flit.vh"

    initial begin
        if (R > 16) $error("ws_mesh_block: at most 16 PEs (the BUSY and DONE registers)");
        if (WAFER < 0 || WAFER >= WAFERS || WAFERS > 255 || PORT < 0 || PORT > 255)
            $error("ws_mesh_block: WAFER must be below WAFERS (at most 255), PORT within 0..255");
    end

    localparam CW = 32;   // counter bits
    localparam TSL = 8;   // layer ids with timestamps (the array's default)
    localparam MW = $clog2(METRICS_DEPTH + 1);
    localparam RW = $clog2(RESULTS_DEPTH + 1);
    localparam [31:0] P32 = P, Q32 = Q, MAX_B32 = MAX_B, FMA_LAT32 = FMA_LAT;
    localparam [31:0] SRAM32 = SRAM_WORDS, DEPTH32 = PROG_DEPTH, R32 = R;
    localparam [31:0] WAFER32 = WAFER, WAFERS32 = WAFERS, PORT32 = PORT;

    // ---------------------------------------------------------------- registers
    wire [15:0] cfg_target_addr;
    wire [7:0]  cfg_target_pe;
    wire        cfg_target_we;
    wire [31:0] cfg_data_value;
    wire        cfg_data_we;
    wire [4:0]  route_out_mask;
    wire [7:0]  route_quota;
    wire [1:0]  route_color;
    wire [2:0]  route_in_port;
    wire [7:0]  route_router;
    wire        route_we;
    wire        ctrl_we;
    wire        cmd_cnt_clear, cmd_pop_metrics, cmd_pop_results, cmd_we;
    wire [14:0] sx_target_addr;
    wire [7:0]  sx_target_pe;
    wire        sx_target_we;
    wire [15:0] cnt_sel_index;
    wire [7:0]  cnt_sel_group;
    wire        cnt_sel_we;
    wire        flags_we;
    wire        bad_route_set, bad_target_set;
    wire        flags_bad_route, flags_bad_target;

    reg  [15:0] cfg_next_addr_reg;
    reg  [7:0]  cfg_next_pe_reg;
    reg  [14:0] sx_next_addr_reg;
    reg  [7:0]  sx_next_pe_reg;
    reg  [31:0] weight_words_reg, sample_words_reg;
    // The array counts the gradient words, so GRAD_WORDS and CHAIN_GRAD are one count.
    wire [31:0] grad_words;
    wire [15:0] chain_count;
    wire        chain_armed, chain_pending;
    wire [31:0] chain_cycle, chain_fmas, chain_grad, fma_total;

    wire [R-1:0]      stat_busy, stat_done, stat_err, router_busy;
    wire [R*4-1:0]    stat_err_code, stat_overflow;
    wire              stat_grad_overrun;
    wire [31:0]       cnt_value;
    wire [MW-1:0]     metrics_level;
    wire [RW-1:0]     results_level;
    wire [31:0]       metrics_data;
    wire [63:0]       metrics_user;
    wire              metrics_last;
    wire [31:0]       results_data;
    wire              results_last;

    wire [15:0] busy16 = {{(16 - R){1'b0}}, stat_busy};
    wire [15:0] rbusy16 = {{(16 - R){1'b0}}, router_busy};
    wire [15:0] done16 = {{(16 - R){1'b0}}, stat_done};
    wire [15:0] err16 = {{(16 - R){1'b0}}, stat_err};
    wire [63:0] codes64 = {{(64 - 4 * R){1'b0}}, stat_err_code};
    wire [15:0] m_index = metrics_user[WS_FLIT_INDEX_LSB +: WS_FLIT_INDEX_WIDTH];

    ws_mesh_csr csr_inst (
        .clk(clk),
        .rst(rst),
        .reg_req(reg_req),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata),
        .params_rows_i(P32[7:0]),
        .params_cols_i(Q32[7:0]),
        .params_max_b_i(MAX_B32[7:0]),
        .params_fma_lat_i(FMA_LAT32[7:0]),
        .mems_sram_words_i(SRAM32[15:0]),
        .mems_prog_depth_i(DEPTH32[15:0]),
        .cfg_target_addr(cfg_target_addr),
        .cfg_target_pe(cfg_target_pe),
        .cfg_target_we(cfg_target_we),
        .cfg_data_value(cfg_data_value),
        .cfg_data_we(cfg_data_we),
        .cfg_next_addr_i(cfg_next_addr_reg),
        .cfg_next_pe_i(cfg_next_pe_reg),
        .route_out_mask(route_out_mask),
        .route_quota(route_quota),
        .route_color(route_color),
        .route_in_port(route_in_port),
        .route_router(route_router),
        .route_we(route_we),
        .ctrl_grad_capture(grad_capture),
        .ctrl_swarm(grad_swarm),
        .ctrl_samples(sx_select),
        .ctrl_we(ctrl_we),
        .cmd_cnt_clear(cmd_cnt_clear),
        .cmd_pop_metrics(cmd_pop_metrics),
        .cmd_pop_results(cmd_pop_results),
        .cmd_we(cmd_we),
        .sx_target_addr(sx_target_addr),
        .sx_target_pe(sx_target_pe),
        .sx_target_we(sx_target_we),
        .sx_next_addr_i(sx_next_addr_reg),
        .sx_next_pe_i(sx_next_pe_reg),
        .busy_pes_i(busy16),
        .busy_routers_i(rbusy16),
        .done_done_i(done16),
        .done_err_i(err16),
        .err_codes_codes_i(codes64[31:0]),
        .flags_grad_overrun_i(stat_grad_overrun),
        .flags_overflow_i(|stat_overflow),
        .flags_bad_route_set(bad_route_set),
        .flags_bad_route(flags_bad_route),
        .flags_bad_target_set(bad_target_set),
        .flags_bad_target(flags_bad_target),
        .flags_metrics_count_i({{(8 - MW){1'b0}}, metrics_level}),
        .flags_results_count_i({{(8 - RW){1'b0}}, results_level}),
        .flags_we(flags_we),
        .metrics_value_i(metrics_data),
        .metrics_hdr_index_i(m_index[7:0]),
        .metrics_hdr_last_i(metrics_last),
        .metrics_hdr_step_i(metrics_user[WS_FLIT_STEP_LSB +: WS_FLIT_STEP_WIDTH]),
        .results_value_i(results_data),
        .results_last_last_i(results_last),
        .cnt_sel_index(cnt_sel_index),
        .cnt_sel_group(cnt_sel_group),
        .cnt_sel_we(cnt_sel_we),
        .cnt_value_value_i(cnt_value),
        .feed_words_weights_i(weight_words_reg),
        .sample_words_count_i(sample_words_reg),
        .grad_words_count_i(grad_words),
        .wafer_index_i(WAFER32[7:0]),
        .wafer_count_i(WAFERS32[7:0]),
        .wafer_port_i(PORT32[7:0]),
        .chain_stat_chains_i(chain_count),
        .chain_stat_armed_i(chain_armed),
        .chain_stat_pending_i(chain_pending),
        .chain_cycle_cycle_i(chain_cycle),
        .chain_fmas_count_i(chain_fmas),
        .chain_grad_count_i(chain_grad),
        .fmas_count_i(fma_total)
    );

    // ---------------------------------------------------------------- configuration, samples
    // The array takes a sample word only while cfg_valid is low (ws_mesh), so a CFG_DATA
    // write in the same cycle just delays the sample by one.
    wire x_ready;
    assign s_x_ready = x_ready;
    wire x_fire = s_x_valid && x_ready;
    wire w_fire = s_w_valid && s_w_ready;

    // Writes that address nothing: the array drops them, FLAGS says so.
    assign bad_route_set = route_we && {24'd0, route_router} >= R32;
    assign bad_target_set = cfg_data_we && {24'd0, cfg_next_pe_reg} >= R32
                            && cfg_next_pe_reg != 8'hfe && cfg_next_pe_reg != 8'hff;

    wire prog_w2 = cfg_next_pe_reg != 8'hfe && cfg_next_addr_reg[15:12] == 4'h1 && cfg_next_addr_reg[1:0] == 2'd2;

    always @(posedge clk) begin
        if (cfg_target_we) begin
            cfg_next_addr_reg <= reg_wdata[15:0];
            cfg_next_pe_reg <= reg_wdata[23:16];
        end else if (cfg_data_we) begin
            // In the program store, past word 2 of an instruction to word 0 of the next.
            cfg_next_addr_reg <= cfg_next_addr_reg + ((prog_w2) ? 16'd2 : 16'd1);
        end
        if (sx_target_we) begin
            sx_next_addr_reg <= reg_wdata[14:0];
            sx_next_pe_reg <= reg_wdata[23:16];
        end else if (x_fire) begin
            sx_next_addr_reg <= sx_next_addr_reg + 15'd1;
        end
        weight_words_reg <= weight_words_reg + {31'd0, w_fire};
        sample_words_reg <= sample_words_reg + {31'd0, x_fire};
        if (rst) begin
            cfg_next_addr_reg <= 16'd0;
            cfg_next_pe_reg <= 8'd0;
            sx_next_addr_reg <= 15'd0;
            sx_next_pe_reg <= 8'd0;
            weight_words_reg <= 32'd0;
            sample_words_reg <= 32'd0;
        end
    end

    // ---------------------------------------------------------------- the array's clock
    wire         mm_valid, mr_valid;
    localparam [7:0] HANG = HANGOVER;
    reg  [7:0]   hang_reg;
    wire         ph_busy;
    wire         activity = reg_req || s_w_valid || s_x_valid || m_g_valid || mm_valid || mr_valid
                            || (|stat_busy) || (|router_busy) || ph_busy;
    always @(posedge clk) begin
        if (rst || activity) hang_reg <= HANG;
        else if (hang_reg != 8'd0) hang_reg <= hang_reg - 8'd1;
    end
    wire mclk;
    generate
        if (CLOCK_GATE != 0) begin : g_gate
            ws_clock_gate gate_inst (.clk(clk), .en(rst || activity || hang_reg != 8'd0), .gclk(mclk));
        end else begin : g_free
            assign mclk = clk;
        end
    endgenerate

    // ---------------------------------------------------------------- the array
    wire         mm_ready, mm_last;
    wire [31:0]  mm_data;
    wire [63:0]  mm_user;
    wire         mr_ready, mr_last;
    wire [31:0]  mr_data;
    wire [R*CW-1:0]     c_fma, c_fwd, c_dx, c_grad, c_loss;
    wire [R*5*CW-1:0]   c_busy, c_misroute;
    wire [R*5*3*CW-1:0] c_flits;
    wire [2*CW-1:0]     c_drop;
    wire [CW-1:0]       c_cycle;
    wire [TSL*CW-1:0]   ts_fs, ts_fe, ts_bs, ts_be, ts_gl;

    ws_mesh #(
        .P(P),
        .Q(Q),
        .SRAM_WORDS(SRAM_WORDS),
        .FMA_LAT(FMA_LAT),
        .MAX_B(MAX_B),
        .PROG_DEPTH(PROG_DEPTH),
        .BUF_DEPTH(BUF_DEPTH),
        .CNT_WIDTH(CW),
        .TS_LAYERS(TSL)
    ) mesh_inst (
        .clk(mclk),
        .rst(rst),
        .cfg_valid(cfg_data_we),
        .cfg_pe(cfg_next_pe_reg),
        .cfg_addr(cfg_next_addr_reg),
        .cfg_data(cfg_data_value),
        .rt_cfg_we(route_we),
        .rt_cfg_router(route_router),
        .rt_cfg_in_port(route_in_port),
        .rt_cfg_color(route_color),
        .rt_cfg_out_mask(route_out_mask),
        .rt_cfg_quota(route_quota),
        .cnt_clear(cmd_we && cmd_cnt_clear),
        .s_w_valid(s_w_valid),
        .s_w_ready(s_w_ready),
        .s_w_data(s_w_data),
        .s_w_last(s_w_last),
        .s_w_user(s_w_user),
        .m_g_valid(m_g_valid),
        .m_g_ready(m_g_ready),
        .m_g_data(m_g_data),
        .m_g_last(m_g_last),
        .m_g_user(m_g_user),
        .m_m_valid(mm_valid),
        .m_m_ready(mm_ready),
        .m_m_data(mm_data),
        .m_m_last(mm_last),
        .m_m_user(mm_user),
        .m_r_valid(mr_valid),
        .m_r_ready(mr_ready),
        .m_r_data(mr_data),
        .m_r_last(mr_last),
        .s_x_valid(s_x_valid),
        .s_x_ready(x_ready),
        .s_x_data(s_x_data),
        .s_x_user({sx_next_pe_reg, sx_next_addr_reg}),
        .stat_busy(stat_busy),
        .stat_done(stat_done),
        .stat_err(stat_err),
        .stat_err_code(stat_err_code),
        .cnt_fma(c_fma),
        .cnt_fwd_cycles(c_fwd),
        .cnt_dx_cycles(c_dx),
        .cnt_grad_cycles(c_grad),
        .cnt_loss_cycles(c_loss),
        .cnt_link_busy(c_busy),
        .cnt_link_flits(c_flits),
        .cnt_misroute(c_misroute),
        .router_busy(router_busy),
        .stat_overflow(stat_overflow),
        .cnt_edge_drop(c_drop),
        .stat_grad_overrun(stat_grad_overrun),
        .cnt_grad_words(grad_words),
        .cnt_fma_total(fma_total),
        .chain_count(chain_count),
        .chain_armed(chain_armed),
        .chain_pending(chain_pending),
        .chain_cycle(chain_cycle),
        .chain_fmas(chain_fmas),
        .chain_grad(chain_grad),
        .cnt_cycle(c_cycle),
        .ts_fwd_start(ts_fs),
        .ts_fwd_end(ts_fe),
        .ts_bwd_start(ts_bs),
        .ts_bwd_end(ts_be),
        .ts_grad_last(ts_gl),
        .ts_now(ts_now),
        .m_ph_valid(m_ph_valid),
        .m_ph_begin(m_ph_begin),
        .m_ph_end(m_ph_end),
        .m_ph_word4(m_ph_word4),
        .m_ph_pc(m_ph_pc),
        .m_ph_pes(m_ph_pes),
        .m_ph_fmas(m_ph_fmas),
        .ph_busy(ph_busy)
    );

    // ---------------------------------------------------------------- the two FIFOs
    wire metrics_valid, results_valid;
    /* verilator lint_off UNUSEDSIGNAL */
    wire [96:0] metrics_word;   // {last, user, data}; the user's kind, layer, chunk unread
    /* verilator lint_on UNUSEDSIGNAL */
    ws_fifo #(
        .DEPTH(METRICS_DEPTH),
        .WIDTH(97)
    ) metrics_fifo_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(mm_valid),
        .s_ready(mm_ready),
        .s_data({mm_last, mm_user, mm_data}),
        .m_valid(metrics_valid),
        .m_ready(cmd_we && cmd_pop_metrics),
        .m_data(metrics_word),
        .level(metrics_level)
    );
    assign metrics_data = metrics_valid ? metrics_word[31:0] : 32'd0;
    assign metrics_user = metrics_valid ? metrics_word[95:32] : 64'd0;
    assign metrics_last = metrics_valid && metrics_word[96];

    wire [32:0] results_word;
    ws_fifo #(
        .DEPTH(RESULTS_DEPTH),
        .WIDTH(33)
    ) results_fifo_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(mr_valid),
        .s_ready(mr_ready),
        .s_data({mr_last, mr_data}),
        .m_valid(results_valid),
        .m_ready(cmd_we && cmd_pop_results),
        .m_data(results_word),
        .level(results_level)
    );
    assign results_data = results_valid ? results_word[31:0] : 32'd0;
    assign results_last = results_valid && results_word[32];

    // ---------------------------------------------------------------- counters
    reg [31:0] cnt_mux;
    wire [31:0] ix = {16'd0, cnt_sel_index};
    always @* begin
        cnt_mux = 32'd0;
        case (cnt_sel_group)
            8'd0: if (ix < R32) cnt_mux = c_fma[ix * CW +: CW];
            8'd1: if (ix < R32) cnt_mux = c_fwd[ix * CW +: CW];
            8'd2: if (ix < R32) cnt_mux = c_dx[ix * CW +: CW];
            8'd3: if (ix < R32) cnt_mux = c_grad[ix * CW +: CW];
            8'd4: if (ix < R32) cnt_mux = c_loss[ix * CW +: CW];
            8'd5: if (ix < 5 * R32) cnt_mux = c_busy[ix * CW +: CW];
            8'd6: if (ix < 15 * R32) cnt_mux = c_flits[ix * CW +: CW];
            8'd7: if (ix < 5 * R32) cnt_mux = c_misroute[ix * CW +: CW];
            8'd8: if (ix < TSL) cnt_mux = ts_fs[ix * CW +: CW];
            8'd9: if (ix < TSL) cnt_mux = ts_fe[ix * CW +: CW];
            8'd10: if (ix < TSL) cnt_mux = ts_bs[ix * CW +: CW];
            8'd11: if (ix < TSL) cnt_mux = ts_be[ix * CW +: CW];
            8'd12: if (ix < TSL) cnt_mux = ts_gl[ix * CW +: CW];
            8'd13: cnt_mux = c_cycle;
            8'd14: if (ix < 2) cnt_mux = c_drop[ix * CW +: CW];
            default: cnt_mux = 32'd0;
        endcase
    end
    assign cnt_value = cnt_mux;

    // ERR_CODES shows PEs 0..7; the metrics header's kind, layer and chunk are not shown;
    // FLAGS' sticky bits live in the CSR and are only read back.
    wire _unused_ok = &{1'b0, cfg_target_addr, cfg_target_pe, sx_target_addr, sx_target_pe,
                        ctrl_we, cnt_sel_we, flags_we, flags_bad_route, flags_bad_target,
                        m_index[15:8], codes64[63:32],
                        metrics_user[WS_FLIT_CHUNK_LSB +: WS_FLIT_CHUNK_WIDTH],
                        metrics_user[15:0]};

endmodule

`default_nettype wire
