`default_nettype none

// ws_mesh_pe: one processing element (PE) of the wafer mesh (ARCHITECTURE.md "Wafer
// emulation", issue 7): an FPnew FP32 FMA, a local SRAM (ws_mesh_pe_sram) for activations and
// results, and a sequencer that runs a small per-layer program loaded through cfg_*. Its
// weight input s_* is the router's local output for color 0 (docs/mesh-router.md); m_* is a
// results stream. docs/mesh-pe.md has the instruction format, the schedule and the proofs;
// what it computes, bit for bit, is ws_common::golden::mesh::dense (docs/mesh.md).
//
// Program. PROG_DEPTH instructions of three 32-bit words (w0, w1, w2):
//   w0[3:0] op: 1 = FWD, 2 = DUMP (anything else is refused); w0[4] relu (FWD);
//   w0[7:5] and w0[31:16] reserved, must be 0;
//   w0[15:8] B, samples (FWD);  w1[15:0] K inputs (FWD) or word count (DUMP);
//   w1[31:16] M outputs (FWD);  w2[15:0] source word address;  w2[31:16] destination (FWD).
// FWD takes M rows of K+1 words from s_* (bias first, the stream order of docs/mesh.md) and,
// for b = 0..B-1, writes y[b][i] = relu?(b_i + sum_k w_ik x[b][k]) to dst + b*M + i, x[b][k]
// being read at src + b*K + k. Each chain is acc = b_i, then acc = fma(w_ik, x[b][k], acc)
// for k = 0..K-1 in arrival order: the order of docs/mesh.md "Accumulation orders".
// DUMP sends the words src .. src+count-1 on m_* (m_last on the final one).
//
// Configuration (cfg_valid with cfg_addr/cfg_data, always accepted, write only):
//   0x0000            CTRL: bit 0 start, bit 1 clear (status and the range flag),
//                     bits [31:16] program length (instructions);
//   0x1000 + 4n + w   word w (0..2) of instruction n;
//   0x8000 + a        SRAM word a (loading samples), only while the PE is idle.
// A start first checks every instruction (one per cycle) and refuses the whole program, with
// stat_err, stat_err_code and stat_err_pc, before anything runs:
//   1 a program or SRAM write since the last clear fell outside the PE's memory (or came
//     while busy); 2 program length 0 or > PROG_DEPTH; 3 unknown op or reserved bits set; 4 B, K, M or count 0;
//   5 B > MAX_B; 6 the source region (B*K samples' inputs, or the dump) passes SRAM_WORDS;
//   7 the destination region (B*M outputs) passes SRAM_WORDS; 8 source and destination
//   overlap.
//
// Schedule (FWD). A weight word is used B times, once per sample slot, one FMA issue per
// cycle. B chains interleave on the FMA pipeline: consecutive FMAs of one chain are B issues
// apart, and an FMA may issue only when its chain's previous result returns no later than
// the cycle its operands are read (with a bypass from the FMA output). With B >= FMA_LAT the
// FMA issues every cycle; below that it is busy B of every FMA_LAT cycles. The bias word is
// taken while the previous row still issues, so it costs no FMA cycle. Pipeline:
//   stage 0: issue, read x from SRAM;   stage 1: FMA operands (acc or bias, bypass);
//   FMA_LAT cycles in FPnew;            writeback: acc (k < K-1) or SRAM (k = K-1, ReLU).
//
// Counters (CNT_WIDTH bits, zeroed by rst): cnt_fma counts FMA issues, cnt_fwd_cycles the
// cycles spent in FWD instructions; their ratio is the FMA utilisation.
module ws_mesh_pe #(
    parameter SRAM_WORDS = 2048,  // local SRAM size in 32-bit words, 2..32768
    parameter FMA_LAT = 3,        // pipeline registers inside FPnew's FMA, 1..16
    parameter MAX_B = 16,         // most sample slots (accumulators) per PE, 1..255
    parameter PROG_DEPTH = 16,    // instructions the program store holds, 1..1024
    parameter CNT_WIDTH = 32,     // bits of the counters
    parameter AW = $clog2(SRAM_WORDS),                    // SRAM address bits (derived)
    parameter SW = (MAX_B > 1) ? $clog2(MAX_B) : 1,       // slot index bits (derived)
    parameter PW = (PROG_DEPTH > 1) ? $clog2(PROG_DEPTH) : 1  // instruction index bits (derived)
) (
    input  wire                 clk,
    input  wire                 rst,

    // Configuration writes (always accepted).
    input  wire                 cfg_valid,
    input  wire [15:0]          cfg_addr,
    input  wire [31:0]          cfg_data,

    // Weight words (the router's local output, color 0).
    input  wire                 s_valid,
    output wire                 s_ready,
    input  wire [31:0]          s_data,

    // Results (DUMP).
    output wire                 m_valid,
    input  wire                 m_ready,
    output wire [31:0]          m_data,
    output wire                 m_last,

    // Status.
    output wire                 stat_busy,
    output reg                  stat_done,
    output reg                  stat_err,
    output reg  [3:0]           stat_err_code,
    output reg  [15:0]          stat_err_pc,

    // Counters.
    output reg  [CNT_WIDTH-1:0] cnt_fma,
    output reg  [CNT_WIDTH-1:0] cnt_fwd_cycles
);

    initial begin
        if (SRAM_WORDS < 2 || SRAM_WORDS > 32768) $error("ws_mesh_pe: SRAM_WORDS must be 2..32768");
        if (FMA_LAT < 1 || FMA_LAT > 16) $error("ws_mesh_pe: FMA_LAT must be 1..16");
        if (MAX_B < 1 || MAX_B > 255) $error("ws_mesh_pe: MAX_B must be 1..255");
        if (PROG_DEPTH < 1 || PROG_DEPTH > 1024) $error("ws_mesh_pe: PROG_DEPTH must be 1..1024");
    end

    localparam L = FMA_LAT;
    localparam [3:0] OP_FWD = 4'd1, OP_DUMP = 4'd2;
    localparam [3:0] ERR_RANGE = 4'd1, ERR_LEN = 4'd2, ERR_OP = 4'd3, ERR_SHAPE = 4'd4,
                     ERR_BATCH = 4'd5, ERR_SRC = 4'd6, ERR_DST = 4'd7, ERR_OVERLAP = 4'd8;
    localparam [2:0] S_IDLE = 3'd0, S_CHECK = 3'd1, S_FETCH = 3'd2, S_FWD = 3'd3, S_DUMP = 3'd4;
    localparam [31:0] SRAM_WORDS32 = SRAM_WORDS;
    localparam [31:0] PROG_DEPTH32 = PROG_DEPTH;
    localparam [31:0] MAX_B32 = MAX_B;
    localparam [24:0] SRAM_END = SRAM_WORDS32[24:0];
    localparam [15:0] DEPTH16 = PROG_DEPTH32[15:0];
    localparam [7:0] MAX_B8 = MAX_B32[7:0];
    localparam [31:0] CANONICAL_NAN = 32'h7fc0_0000;

    // ---------------------------------------------------------------- program store, config
    reg [31:0] prog_w0 [0:PROG_DEPTH-1];
    reg [31:0] prog_w1 [0:PROG_DEPTH-1];
    reg [31:0] prog_w2 [0:PROG_DEPTH-1];

    reg [2:0]  state_reg;
    reg [15:0] prog_len_reg;
    reg [15:0] pc_reg;
    reg        range_err_reg;  // a write fell outside the program store or the SRAM

    wire cfg_ctrl = cfg_valid && cfg_addr == 16'h0000;
    wire cfg_prog = cfg_valid && cfg_addr[15:12] == 4'h1;
    wire cfg_sram = cfg_valid && cfg_addr[15];
    wire [9:0] cfg_n = cfg_addr[11:2];
    wire prog_in_range = {6'd0, cfg_n} < DEPTH16 && cfg_addr[1:0] != 2'd3;
    wire sram_in_range = {10'd0, cfg_addr[14:0]} < SRAM_END;
    wire idle = state_reg == S_IDLE;
    wire cfg_sram_we = cfg_sram && sram_in_range && idle;

    always @(posedge clk) begin
        if (cfg_prog && prog_in_range && idle) begin
            case (cfg_addr[1:0])
                2'd0: prog_w0[cfg_n[PW-1:0]] <= cfg_data;
                2'd1: prog_w1[cfg_n[PW-1:0]] <= cfg_data;
                default: prog_w2[cfg_n[PW-1:0]] <= cfg_data;
            endcase
        end
    end

    // ---------------------------------------------------------------- decode and checks
    wire [PW-1:0] pc_idx = pc_reg[PW-1:0];
    wire [31:0] i_w0 = prog_w0[pc_idx];
    wire [31:0] i_w1 = prog_w1[pc_idx];
    wire [31:0] i_w2 = prog_w2[pc_idx];
    wire [3:0]  i_op = i_w0[3:0];
    wire [7:0]  i_b = i_w0[15:8];
    wire [15:0] i_k = i_w1[15:0];
    wire [15:0] i_m = i_w1[31:16];
    wire [15:0] i_src = i_w2[15:0];
    wire [15:0] i_dst = i_w2[31:16];
    wire [23:0] i_bk = i_b * i_k;
    wire [23:0] i_bm = i_b * i_m;
    wire [24:0] fwd_src_end = {9'd0, i_src} + {1'b0, i_bk};
    wire [24:0] fwd_dst_end = {9'd0, i_dst} + {1'b0, i_bm};
    wire [24:0] dump_end = {9'd0, i_src} + {9'd0, i_k};

    reg [3:0] i_err;
    always @* begin
        i_err = 4'd0;
        if (i_w0[31:16] != 16'd0 || i_w0[7:5] != 3'd0) begin
            i_err = ERR_OP;  // reserved bits set
        end else if (i_op == OP_FWD) begin
            if (i_b == 8'd0 || i_k == 16'd0 || i_m == 16'd0) i_err = ERR_SHAPE;
            else if (i_b > MAX_B8) i_err = ERR_BATCH;
            else if (fwd_src_end > SRAM_END) i_err = ERR_SRC;
            else if (fwd_dst_end > SRAM_END) i_err = ERR_DST;
            else if ({9'd0, i_src} < fwd_dst_end && {9'd0, i_dst} < fwd_src_end) i_err = ERR_OVERLAP;
        end else if (i_op == OP_DUMP) begin
            if (i_k == 16'd0) i_err = ERR_SHAPE;
            else if (dump_end > SRAM_END) i_err = ERR_SRC;
        end else begin
            i_err = ERR_OP;
        end
    end

    // ---------------------------------------------------------------- the running instruction
    reg          relu_reg;
    reg [SW-1:0] blast_reg;   // B - 1
    reg [15:0]   k_reg;
    reg [15:0]   m_reg;
    reg [AW-1:0] src_reg;
    reg [AW-1:0] dst_reg;

    // ---------------------------------------------------------------- FWD: stream front
    reg [15:0]   fj_reg;      // word within the row: 0 = bias, k+1 = w_ik
    reg [15:0]   frows_reg;   // rows whose words have all been taken
    reg [31:0]   bias_hold_reg;

    // The word being issued (H), B issues per word.
    reg          h_valid_reg;
    reg [31:0]   h_w_reg;
    reg [31:0]   h_bias_reg;
    reg          h_first_reg;
    reg          h_last_reg;
    reg [SW-1:0] slot_reg;
    reg [AW-1:0] x_cur_reg;   // src + slot*K + k
    reg [AW-1:0] y_cur_reg;   // dst + slot*M + i

    // Stage 1 (FMA operands) and the FMA's tag delay line. Chain position c[0] = stage 1,
    // c[j] = d[j-1]; the FMA result of c[0] leaves at c[L].
    reg          st1_v_reg;
    reg [SW-1:0] st1_slot_reg;
    reg [31:0]   st1_w_reg;
    reg [31:0]   st1_bias_reg;
    reg          st1_first_reg;
    reg          st1_last_reg;
    reg [AW-1:0] st1_y_reg;

    reg [L-1:0]    d_v_reg;
    reg [L-1:0]    d_last_reg;
    reg [L*SW-1:0] d_slot_reg;
    reg [L*AW-1:0] d_y_reg;

    wire [L:0]      c_v = {d_v_reg, st1_v_reg};
    wire [L:0]      c_last = {d_last_reg, st1_last_reg};
    wire [(L+1)*SW-1:0] c_slot = {d_slot_reg, st1_slot_reg};
    wire [(L+1)*AW-1:0] c_y = {d_y_reg, st1_y_reg};

    reg [31:0] acc [0:MAX_B-1];

    wire fwd = state_reg == S_FWD;

    // A chain's next FMA may issue when no earlier FMA of the same slot that writes the
    // accumulator sits in c[0 .. L-2]: one at c[L-1] returns next cycle, when this one reads
    // its operands at stage 1 (bypass).
    reg slot_busy;
    integer ci;
    always @* begin
        slot_busy = 1'b0;
        for (ci = 0; ci < L - 1; ci = ci + 1) begin
            if (c_v[ci] && !c_last[ci] && c_slot[ci*SW +: SW] == slot_reg) slot_busy = 1'b1;
        end
    end

    wire issue = fwd && h_valid_reg && !slot_busy;
    wire issue_end = issue && slot_reg == blast_reg;   // the word's last use
    wire h_free = !h_valid_reg || issue_end;
    wire rows_left = frows_reg != m_reg;
    wire take_bias = fj_reg == 16'd0;
    assign s_ready = fwd && rows_left && (take_bias || h_free);
    wire s_fire = s_valid && s_ready;

    // FMA result leaving at c[L].
    wire          ret_v = c_v[L];
    wire          ret_last = c_last[L];
    wire [SW-1:0] ret_slot = c_slot[L*SW +: SW];
    wire [AW-1:0] ret_y = c_y[L*AW +: AW];
    wire [31:0]   fma_out;

    wire [31:0] acc_rd = (ret_v && !ret_last && ret_slot == st1_slot_reg) ? fma_out : acc[st1_slot_reg];
    wire [31:0] op_c = st1_first_reg ? st1_bias_reg : acc_rd;
    wire [31:0] sram_rd_data;

    // ReLU (docs/mesh.md): NaN -> canonical NaN, sign set (-0 included) -> +0.
    wire ret_nan = fma_out[30:23] == 8'hff && fma_out[22:0] != 23'd0;
    wire [31:0] ret_act = !relu_reg ? fma_out : ret_nan ? CANONICAL_NAN : fma_out[31] ? 32'd0 : fma_out;

    wire fwd_drained = !rows_left && !h_valid_reg && c_v == {(L+1){1'b0}};

    // ---------------------------------------------------------------- DUMP
    reg [AW-1:0] dm_addr_reg;
    reg [15:0]   dm_left_reg;
    reg          rd_v_reg;      // a dump read issued last cycle: its word is on sram_rd_data
    reg          rd_last_reg;
    reg [31:0]   q_data_reg [0:1];
    reg          q_last_reg [0:1];
    reg [1:0]    q_count_reg;
    reg          q_rp_reg;
    reg          q_wp_reg;

    wire dump = state_reg == S_DUMP;
    wire q_pop = m_valid && m_ready;
    wire dm_issue = dump && dm_left_reg != 16'd0 && ({1'b0, q_count_reg} + {2'd0, rd_v_reg}) < (3'd2 + {2'd0, q_pop});
    assign m_valid = q_count_reg != 2'd0;
    assign m_data = q_data_reg[q_rp_reg];
    assign m_last = q_last_reg[q_rp_reg];
    wire dump_drained = dm_left_reg == 16'd0 && !rd_v_reg && q_count_reg == 2'd0;

    // ---------------------------------------------------------------- SRAM
    wire          sram_we = (ret_v && ret_last) || cfg_sram_we;
    wire [AW-1:0] sram_waddr = (ret_v && ret_last) ? ret_y : cfg_addr[AW-1:0];
    wire [31:0]   sram_wdata = (ret_v && ret_last) ? ret_act : cfg_data;

    ws_mesh_pe_sram #(
        .WORDS(SRAM_WORDS)
    ) sram_inst (
        .clk(clk),
        .wr_en(sram_we),
        .wr_addr(sram_waddr),
        .wr_data(sram_wdata),
        .rd_en(issue || dm_issue),
        .rd_addr(dump ? dm_addr_reg : x_cur_reg),
        .rd_data(sram_rd_data)
    );

    // ---------------------------------------------------------------- FMA (FPnew)
    // Runs free like ws_optim_fma: always valid in, always ready out, so a value presented in
    // cycle t leaves in cycle t + FMA_LAT; the delay line above tracks what is real.
    // FMADD: in_a * in_b + in_c = w * x + acc.
    ws_optim_fma #(
        .LATENCY(L)
    ) fma_inst (
        .clk(clk),
        .rst(rst),
        .in_a(st1_w_reg),
        .in_b(sram_rd_data),
        .in_c(op_c),
        .out_data(fma_out)
    );

    assign stat_busy = !idle;

    // ---------------------------------------------------------------- datapath registers
    // (no reset needed: every one is qualified by a valid bit or written before use)
    always @(posedge clk) begin
        if (state_reg == S_FETCH) begin
            relu_reg <= i_w0[4];
            blast_reg <= i_b[SW-1:0] - 1'b1;
            k_reg <= i_k;
            m_reg <= i_m;
            src_reg <= i_src[AW-1:0];
            dst_reg <= i_dst[AW-1:0];
            dm_addr_reg <= i_src[AW-1:0];
            dm_left_reg <= (i_op == OP_DUMP) ? i_k : 16'd0;
        end
        if (dm_issue) begin
            dm_addr_reg <= dm_addr_reg + 1'b1;
            dm_left_reg <= dm_left_reg - 1'b1;
        end
        rd_last_reg <= dm_left_reg == 16'd1;
        if (rd_v_reg) begin
            q_data_reg[q_wp_reg] <= sram_rd_data;
            q_last_reg[q_wp_reg] <= rd_last_reg;
        end

        if (s_fire && take_bias) bias_hold_reg <= s_data;
        if (issue) begin
            x_cur_reg <= x_cur_reg + k_reg[AW-1:0];
            y_cur_reg <= y_cur_reg + m_reg[AW-1:0];
            slot_reg <= issue_end ? {SW{1'b0}} : slot_reg + 1'b1;
        end
        if (s_fire && !take_bias) begin
            h_w_reg <= s_data;
            h_bias_reg <= bias_hold_reg;
            h_first_reg <= fj_reg == 16'd1;
            h_last_reg <= fj_reg == k_reg;
            x_cur_reg <= src_reg + fj_reg[AW-1:0] - 1'b1;
            y_cur_reg <= dst_reg + frows_reg[AW-1:0];
        end
        if (state_reg == S_FETCH) slot_reg <= {SW{1'b0}};

        st1_slot_reg <= slot_reg;
        st1_w_reg <= h_w_reg;
        st1_bias_reg <= h_bias_reg;
        st1_first_reg <= h_first_reg;
        st1_last_reg <= h_last_reg;
        st1_y_reg <= y_cur_reg;
        d_last_reg <= c_last[L-1:0];
        d_slot_reg <= c_slot[L*SW-1:0];
        d_y_reg <= c_y[L*AW-1:0];

        if (ret_v && !ret_last) acc[ret_slot] <= fma_out;
    end

    // ---------------------------------------------------------------- control registers
    always @(posedge clk) begin
        if (rst) begin
            state_reg <= S_IDLE;
            prog_len_reg <= 16'd0;
            pc_reg <= 16'd0;
            range_err_reg <= 1'b0;
            stat_done <= 1'b0;
            stat_err <= 1'b0;
            stat_err_code <= 4'd0;
            stat_err_pc <= 16'd0;
            cnt_fma <= {CNT_WIDTH{1'b0}};
            cnt_fwd_cycles <= {CNT_WIDTH{1'b0}};
            fj_reg <= 16'd0;
            frows_reg <= 16'd0;
            h_valid_reg <= 1'b0;
            st1_v_reg <= 1'b0;
            d_v_reg <= {L{1'b0}};
            rd_v_reg <= 1'b0;
            q_count_reg <= 2'd0;
            q_rp_reg <= 1'b0;
            q_wp_reg <= 1'b0;
        end else begin
            if ((cfg_prog && !(prog_in_range && idle)) || (cfg_sram && !cfg_sram_we)) range_err_reg <= 1'b1;

            case (state_reg)
                S_IDLE: begin
                    if (cfg_ctrl && cfg_data[1]) begin
                        range_err_reg <= 1'b0;
                        stat_done <= 1'b0;
                        stat_err <= 1'b0;
                        stat_err_code <= 4'd0;
                        stat_err_pc <= 16'd0;
                    end
                    if (cfg_ctrl && cfg_data[0]) begin
                        prog_len_reg <= cfg_data[31:16];
                        pc_reg <= 16'd0;
                        stat_done <= 1'b0;
                        stat_err <= 1'b0;
                        stat_err_code <= 4'd0;
                        stat_err_pc <= 16'd0;
                        if (range_err_reg && !cfg_data[1]) begin
                            stat_err <= 1'b1;
                            stat_err_code <= ERR_RANGE;
                        end else if (cfg_data[31:16] == 16'd0 || cfg_data[31:16] > DEPTH16) begin
                            stat_err <= 1'b1;
                            stat_err_code <= ERR_LEN;
                        end else begin
                            state_reg <= S_CHECK;
                        end
                    end
                end
                S_CHECK: begin
                    if (i_err != 4'd0) begin
                        stat_err <= 1'b1;
                        stat_err_code <= i_err;
                        stat_err_pc <= pc_reg;
                        state_reg <= S_IDLE;
                    end else if (pc_reg + 16'd1 == prog_len_reg) begin
                        pc_reg <= 16'd0;
                        state_reg <= S_FETCH;
                    end else begin
                        pc_reg <= pc_reg + 16'd1;
                    end
                end
                S_FETCH: begin
                    if (pc_reg == prog_len_reg) begin
                        stat_done <= 1'b1;
                        state_reg <= S_IDLE;
                    end else begin
                        fj_reg <= 16'd0;
                        frows_reg <= 16'd0;
                        state_reg <= (i_op == OP_FWD) ? S_FWD : S_DUMP;
                    end
                end
                S_FWD: begin
                    cnt_fwd_cycles <= cnt_fwd_cycles + 1'b1;
                    if (fwd_drained) begin
                        pc_reg <= pc_reg + 16'd1;
                        state_reg <= S_FETCH;
                    end
                end
                S_DUMP: begin
                    if (dump_drained) begin
                        pc_reg <= pc_reg + 16'd1;
                        state_reg <= S_FETCH;
                    end
                end
                default: state_reg <= S_IDLE;
            endcase

            if (s_fire) begin
                if (take_bias) begin
                    fj_reg <= 16'd1;
                end else if (fj_reg == k_reg) begin
                    fj_reg <= 16'd0;
                    frows_reg <= frows_reg + 16'd1;
                end else begin
                    fj_reg <= fj_reg + 16'd1;
                end
            end
            if (s_fire && !take_bias) h_valid_reg <= 1'b1;
            else if (issue_end) h_valid_reg <= 1'b0;
            if (issue) cnt_fma <= cnt_fma + 1'b1;
            st1_v_reg <= issue;
            d_v_reg <= c_v[L-1:0];

            rd_v_reg <= dm_issue;
            if (q_pop) q_rp_reg <= !q_rp_reg;
            if (rd_v_reg) q_wp_reg <= !q_wp_reg;
            q_count_reg <= q_count_reg + {1'b0, rd_v_reg} - {1'b0, q_pop};
        end
    end

endmodule

`default_nettype wire
