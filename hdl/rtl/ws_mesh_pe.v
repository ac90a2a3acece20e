`default_nettype none

// ws_mesh_pe: one processing element (PE) of the wafer mesh (docs/architecture.md "Wafer
// emulation", issue 7): an FPnew FP32 FMA, a local SRAM (ws_mesh_pe_sram) for activations and
// results, and a sequencer that runs a small per-layer program loaded through cfg_*. Its
// weight input s_* is the router's local output for color 0, s1_*/m1_* are the router's local
// streams of color 1 (the Snake reduction, docs/mesh.md "Accumulation orders"), and m_* is a
// results stream (docs/mesh-router.md). docs/mesh-pe.md has the instruction format, the
// schedules and the proofs; what it computes, bit for bit, is ws_common::golden::mesh::dense
// (docs/mesh.md).
//
// Program. PROG_DEPTH instructions of three 32-bit words (w0, w1, w2):
//   w0[3:0] op: 1 FWD, 2 DUMP, 3 DX, 4 MASK, 5 GRAD (anything else is refused);
//   w0[4] flag: ReLU (FWD) or head of the Snake (GRAD), must be 0 for DX and MASK;
//   w0[7:5] and w0[31:16] reserved, must be 0;  w0[15:8] B, samples;
//   w1[15:0] K (inputs) or a word count (DUMP, MASK);  w1[31:16] M (outputs, rows);
//   w2[15:0] src;  w2[31:16] dst.
// FWD  takes M rows of K+1 words from s_* (bias first, the stream order of docs/mesh.md) and
//      writes y[b][i] = relu?(b_i + sum_k w_ik x[b][k]) to dst + b*M + i, x[b][k] at
//      src + b*K + k: acc = b_i, then acc = fma(w_ik, x[b][k], acc) for k = 0..K-1.
// DX   takes the same M rows again (the bias words are taken and ignored) and writes
//      dx[b][k] = sum_i w_ik dz[b][i] to dst + b*K + k, dz[b][i] at src + b*M + i:
//      acc = -0, then acc = fma(w_ik, dz[b][i], acc) for rows i = 0..M-1 in arrival order,
//      the accumulators living in the SRAM.
// MASK the ReLU backward in place: y[a] = (y[a] > 0) ? d[a] : +0 for a < count, y at dst,
//      d at src (docs/mesh.md "Per sample": the mask reads the stored output).
// GRAD the PE's part of the Snake reduction of a layer's gradient: for every word j of row i
//      in stream order (j = 0 is db_i, j = 1+k is dW_ik), acc = the running sum arriving on
//      s1_* (-0 at the head of the snake, which takes nothing from s1_*), then
//      acc = fma(dz[b][i], xt[b][j], acc) for b = 0..B-1 (xt = 1 for j = 0, x[b][j-1] at
//      src + b*K + j-1; dz[b][i] at dst + b*M + i), sent on m1_* (m1_last at each row's end).
//      B = 0 passes the M*(K+1) words through unchanged (a PE past the end of the batch).
// DUMP sends the words src .. src+count-1 on m_* (m_last on the final one).
//
// Configuration (cfg_valid with cfg_addr/cfg_data, always accepted, write only):
//   0x0000            CTRL: bit 0 start, bit 1 clear (status and the range flag),
//                     bits [15:8] the first instruction (base), bits [31:16] program length
//                     (instructions base .. base + length - 1 run);
//   0x1000 + 4n + w   word w (0..2) of instruction n;
//   0x8000 + a        SRAM word a, only while the PE is idle.
// Samples (x_*): one SRAM word per handshake, at any time, also while a program runs: a
// one-word buffer takes it (x_ready while it is empty) and writes it into the SRAM in the
// first cycle the datapath does not write, so a program never waits for a sample. What a
// running program reads is the program's business: the firmware writes only the sample
// buffer the running step does not use (docs/mesh-pe.md "Samples while running"). An address
// past the SRAM is dropped and sets the range flag, as a cfg write there does.
// A start first checks every instruction (one per cycle) and refuses the whole program, with
// stat_err, stat_err_code and stat_err_pc, before anything runs:
//   1 a program or SRAM write since the last clear fell outside the PE's memory (or a cfg
//     write came while busy); 2 program length 0, or base + length > PROG_DEPTH; 3 unknown op or reserved bits set;
//   4 a zero B, K, M or count where one is needed; 5 B > MAX_B; 6 the source region passes
//   SRAM_WORDS; 7 the destination region passes SRAM_WORDS; 8 a region that is written
//   overlaps one that is read.
//
// Schedules. One FMA issue per cycle at most; FPnew runs free with FMA_LAT registers.
//   stage 0: issue, read the SRAM;   stage 1: FMA operands (chain register, bypass);
//   FMA_LAT cycles in FPnew;         writeback: chain register, SRAM or the m1 queue.
// FWD: a weight word is used B times, one issue per slot; the B chains interleave, so with
//   B >= FMA_LAT the FMA issues every cycle (a chain's FMA may issue once its previous result
//   returns no later than the cycle its operands are read, through a bypass).
// DX: per row, the B dz values are first read into registers (B cycles), then each weight
//   word issues B FMAs whose accumulator is read from and written back to the SRAM; an issue
//   waits only if its accumulator is still in the FMA pipeline (K*B < FMA_LAT + 1).
// GRAD: per row, the B dz values are read into registers, then the words of the row go in
//   groups of FMA_LAT chains: for b = 0..B-1, for each chain of the group, one FMA; so the
//   FMA issues every cycle whenever a group is full. Results of the last slot wait in a
//   queue of OQ_DEPTH words for m1_*; an issue of the last slot needs a reserved queue slot.
//
// Phase probe: stat_run while the program runs (not while it is checked), stat_pc the
// instruction, stat_op its opcode, stat_fma an FMA issue this cycle (ws_mesh_phases records
// the span of each instruction's FMAs for the trace).
//
// Counters (CNT_WIDTH bits, zeroed by rst): cnt_fma counts FMA issues; cnt_fwd_cycles,
// cnt_dx_cycles, cnt_grad_cycles and cnt_loss_cycles the cycles spent in FWD, DX, GRAD and
// LOSS instructions; the ratio of FMAs to cycles of a phase is its FMA utilisation.
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

    // Samples: SRAM word x_addr (bits 14:0) = x_data, accepted while running too.
    input  wire                 x_valid,
    output wire                 x_ready,
    input  wire [14:0]          x_addr,
    input  wire [31:0]          x_data,

    // Weight words (the router's local output, color 0).
    input  wire                 s_valid,
    output wire                 s_ready,
    input  wire [31:0]          s_data,

    // Running sums of the Snake reduction in (the router's local output, color 1).
    input  wire                 s1_valid,
    output wire                 s1_ready,
    input  wire [31:0]          s1_data,

    // Running sums out (the router's local input, color 1).
    output wire                 m1_valid,
    input  wire                 m1_ready,
    output wire [31:0]          m1_data,
    output wire                 m1_last,

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

    // Phase probe (ws_mesh_phases): the instruction running, its opcode, and an FMA issue.
    output wire                 stat_run,
    output wire [15:0]          stat_pc,
    output wire [3:0]           stat_op,
    output wire                 stat_fma,

    // Counters.
    output reg  [CNT_WIDTH-1:0] cnt_fma,
    output reg  [CNT_WIDTH-1:0] cnt_fwd_cycles,
    output reg  [CNT_WIDTH-1:0] cnt_dx_cycles,
    output reg  [CNT_WIDTH-1:0] cnt_grad_cycles,
    output reg  [CNT_WIDTH-1:0] cnt_loss_cycles
);

    initial begin
        if (SRAM_WORDS < 2 || SRAM_WORDS > 32768) $error("ws_mesh_pe: SRAM_WORDS must be 2..32768");
        if (FMA_LAT < 1 || FMA_LAT > 16) $error("ws_mesh_pe: FMA_LAT must be 1..16");
        if (MAX_B < 1 || MAX_B > 255) $error("ws_mesh_pe: MAX_B must be 1..255");
        if (PROG_DEPTH < 1 || PROG_DEPTH > 1024) $error("ws_mesh_pe: PROG_DEPTH must be 1..1024");
    end

    localparam L = FMA_LAT;
    // Chain registers: FWD uses one per slot, GRAD one per word of a group (FMA_LAT).
    localparam NCH = (MAX_B > L) ? MAX_B : L;
    localparam CHW = (NCH > 1) ? $clog2(NCH) : 1;
    localparam GW = (L > 1) ? $clog2(L + 1) : 1;   // holds 0..L
    // The m1 queue: FMA_LAT + 3 reserved slots cover the issue-to-queue latency at full rate.
    localparam OQ_DEPTH = 1 << $clog2(L + 3);
    localparam OQW = $clog2(OQ_DEPTH);
    localparam [OQW:0] OQ_FULL = OQ_DEPTH;

    localparam [3:0] OP_FWD = 4'd1, OP_DUMP = 4'd2, OP_DX = 4'd3, OP_MASK = 4'd4, OP_GRAD = 4'd5,
                     OP_LOSS = 4'd6;
    localparam [3:0] ERR_RANGE = 4'd1, ERR_LEN = 4'd2, ERR_OP = 4'd3, ERR_SHAPE = 4'd4,
                     ERR_BATCH = 4'd5, ERR_SRC = 4'd6, ERR_DST = 4'd7, ERR_OVERLAP = 4'd8;
    localparam [3:0] S_IDLE = 4'd0, S_CHECK = 4'd1, S_FETCH = 4'd2, S_FWD = 4'd3, S_DUMP = 4'd4,
                     S_DX = 4'd5, S_MASK = 4'd6, S_GRAD = 4'd7, S_LOSS = 4'd8;
    // Where an FMA result goes.
    localparam [1:0] D_CHAIN = 2'd0, D_SRAM = 2'd1, D_OUT = 2'd2;
    localparam [31:0] SRAM_WORDS32 = SRAM_WORDS;
    localparam [31:0] PROG_DEPTH32 = PROG_DEPTH;
    localparam [31:0] MAX_B32 = MAX_B;
    localparam [31:0] L32 = L;
    localparam [24:0] SRAM_END = SRAM_WORDS32[24:0];
    localparam [15:0] DEPTH16 = PROG_DEPTH32[15:0];
    localparam [7:0] MAX_B8 = MAX_B32[7:0];
    localparam [16:0] G17 = L32[16:0];
    localparam [31:0] CANONICAL_NAN = 32'h7fc0_0000;
    localparam [31:0] NEG_ZERO = 32'h8000_0000;
    localparam [31:0] ONE = 32'h3f80_0000;

    // ---------------------------------------------------------------- program store, config
    reg [31:0] prog_w0 [0:PROG_DEPTH-1];
    reg [31:0] prog_w1 [0:PROG_DEPTH-1];
    reg [31:0] prog_w2 [0:PROG_DEPTH-1];

    reg [3:0]  state_reg;
    reg [15:0] prog_base_reg;  // the first instruction
    reg [15:0] prog_end_reg;   // one past the last
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
    wire        i_flag = i_w0[4];
    wire [7:0]  i_b = i_w0[15:8];
    wire [15:0] i_k = i_w1[15:0];
    wire [15:0] i_m = i_w1[31:16];
    wire [15:0] i_src = i_w2[15:0];
    wire [15:0] i_dst = i_w2[31:16];
    wire [23:0] i_bk = i_b * i_k;
    wire [23:0] i_bm = i_b * i_m;
    wire [24:0] src0 = {9'd0, i_src};
    wire [24:0] dst0 = {9'd0, i_dst};
    wire [24:0] src_bk = src0 + {1'b0, i_bk};
    wire [24:0] src_bm = src0 + {1'b0, i_bm};
    wire [24:0] dst_bk = dst0 + {1'b0, i_bk};
    wire [24:0] dst_bm = dst0 + {1'b0, i_bm};
    wire [24:0] src_n = src0 + {9'd0, i_k};
    wire [24:0] dst_n = dst0 + {9'd0, i_k};
    // LOSS: logits src + B*C (C = i_k), labels at lab = i_m (B words), loss and flag at dst (2B).
    wire [24:0] lab0 = {9'd0, i_m};
    wire [24:0] lab_b = lab0 + {17'd0, i_b};
    wire [24:0] dst_2b = dst0 + {16'd0, i_b, 1'b0};

    reg [3:0] i_err;
    always @* begin
        i_err = 4'd0;
        if (i_w0[31:16] != 16'd0 || i_w0[7:5] != 3'd0) begin
            i_err = ERR_OP;  // reserved bits set
        end else if (i_op == OP_FWD) begin
            if (i_b == 8'd0 || i_k == 16'd0 || i_m == 16'd0) i_err = ERR_SHAPE;
            else if (i_b > MAX_B8) i_err = ERR_BATCH;
            else if (src_bk > SRAM_END) i_err = ERR_SRC;
            else if (dst_bm > SRAM_END) i_err = ERR_DST;
            else if (src0 < dst_bm && dst0 < src_bk) i_err = ERR_OVERLAP;
        end else if (i_op == OP_DX) begin
            if (i_flag) i_err = ERR_OP;
            else if (i_b == 8'd0 || i_k == 16'd0 || i_m == 16'd0) i_err = ERR_SHAPE;
            else if (i_b > MAX_B8) i_err = ERR_BATCH;
            else if (src_bm > SRAM_END) i_err = ERR_SRC;
            else if (dst_bk > SRAM_END) i_err = ERR_DST;
            else if (src0 < dst_bk && dst0 < src_bm) i_err = ERR_OVERLAP;
        end else if (i_op == OP_MASK) begin
            if (i_flag) i_err = ERR_OP;
            else if (i_k == 16'd0) i_err = ERR_SHAPE;
            else if (src_n > SRAM_END) i_err = ERR_SRC;
            else if (dst_n > SRAM_END) i_err = ERR_DST;
            else if (src0 < dst_n && dst0 < src_n) i_err = ERR_OVERLAP;
        end else if (i_op == OP_GRAD) begin
            // K = 0 is a row of one word (db alone: the loss reduction); B = 0 passes through.
            if (i_m == 16'd0 || (i_flag && i_b == 8'd0)) i_err = ERR_SHAPE;
            else if (i_b > MAX_B8) i_err = ERR_BATCH;
            else if (src_bk > SRAM_END) i_err = ERR_SRC;
            else if (dst_bm > SRAM_END) i_err = ERR_DST;
        end else if (i_op == OP_LOSS) begin
            if (i_flag) i_err = ERR_OP;
            else if (i_b == 8'd0 || i_k == 16'd0) i_err = ERR_SHAPE;
            else if (src_bk > SRAM_END || lab_b > SRAM_END) i_err = ERR_SRC;
            else if (dst_2b > SRAM_END) i_err = ERR_DST;
            else if ((src0 < dst_2b && dst0 < src_bk) || (lab0 < dst_2b && dst0 < lab_b)
                     || (src0 < lab_b && lab0 < src_bk)) i_err = ERR_OVERLAP;
        end else if (i_op == OP_DUMP) begin
            if (i_k == 16'd0) i_err = ERR_SHAPE;
            else if (src_n > SRAM_END) i_err = ERR_SRC;
        end else begin
            i_err = ERR_OP;
        end
    end

    // ---------------------------------------------------------------- the running instruction
    reg          relu_reg;
    reg          head_reg;
    reg [7:0]    b_reg;
    reg [SW-1:0] blast_reg;   // B - 1
    reg [15:0]   k_reg;
    reg [15:0]   m_reg;
    reg [AW-1:0] src_reg;
    reg [AW-1:0] dst_reg;

    wire fwd = state_reg == S_FWD;
    wire dx = state_reg == S_DX;
    wire grad = state_reg == S_GRAD;
    wire maskop = state_reg == S_MASK;
    wire rows_op = fwd || dx;

    // ---------------------------------------------------------------- FMA pipeline tags
    // Chain position c[0] = stage 1, c[j] = d[j-1]; the FMA result of c[0] leaves at c[L].
    reg           st1_v_reg;
    reg [1:0]     st1_dest_reg;
    reg           st1_eol_reg;
    reg [CHW-1:0] st1_ch_reg;
    reg [AW-1:0]  st1_y_reg;
    reg [31:0]    st1_a_reg;
    reg [31:0]    st1_b_reg;
    reg           st1_b_sram_reg;   // b from the SRAM read (else st1_b_reg)
    reg [31:0]    st1_c_reg;
    reg [1:0]     st1_c_sel_reg;    // 0: st1_c_reg, 1: the SRAM read, 2: the chain register

    reg [L-1:0]     d_v_reg;
    reg [2*L-1:0]   d_dest_reg;
    reg [L-1:0]     d_eol_reg;
    reg [L*CHW-1:0] d_ch_reg;
    reg [L*AW-1:0]  d_y_reg;

    wire [L:0]           c_v = {d_v_reg, st1_v_reg};
    wire [2*L+1:0]       c_dest = {d_dest_reg, st1_dest_reg};
    wire [L:0]           c_eol = {d_eol_reg, st1_eol_reg};
    wire [(L+1)*CHW-1:0] c_ch = {d_ch_reg, st1_ch_reg};
    wire [(L+1)*AW-1:0]  c_y = {d_y_reg, st1_y_reg};

    reg [31:0] acc [0:NCH-1];     // chain registers
    reg [31:0] dzr [0:MAX_B-1];   // dz of the current row, per slot (DX, GRAD)

    // ---------------------------------------------------------------- FWD / DX: stream front
    reg [15:0]   fj_reg;      // word within the row: 0 = bias, k+1 = w_ik
    reg [15:0]   frows_reg;   // rows whose words have all been taken
    reg [31:0]   bias_hold_reg;

    // The word being issued (H), B issues per word.
    reg          h_valid_reg;
    reg [31:0]   h_w_reg;
    reg [31:0]   h_bias_reg;
    reg          h_first_reg;  // FWD: k = 0 (c = bias); DX: row 0 (c = -0)
    reg          h_last_reg;   // FWD: k = K-1 (write y)
    reg [SW-1:0] slot_reg;
    reg [AW-1:0] x_cur_reg;   // SRAM read: FWD src + slot*K + k; DX dst + slot*K + k
    reg [AW-1:0] y_cur_reg;   // SRAM write: FWD dst + slot*M + i; DX as x_cur_reg
    reg [AW-1:0] ystride_reg;

    // ---------------------------------------------------------------- dz loads (DX, GRAD)
    reg [7:0]    ld_left_reg;
    reg [AW-1:0] ld_addr_reg;
    reg [SW-1:0] ld_slot_reg;
    reg          ld_v_reg;     // a load read issued last cycle
    reg [SW-1:0] ld_vslot_reg;
    wire ld_idle = ld_left_reg == 8'd0 && !ld_v_reg;
    wire ld_issue = ld_left_reg != 8'd0;

    // ---------------------------------------------------------------- GRAD sequencing
    reg [15:0]   g_row_reg;
    reg [16:0]   g_j0_reg;     // first word of the group within the row
    reg [GW-1:0] g_gsz_reg;    // words in the group
    reg [GW-1:0] g_g_reg;      // chain within the group
    reg [SW-1:0] g_s_reg;      // slot
    reg [AW-1:0] g_sbase_reg;  // src + slot*K
    reg          g_issuing_reg; // rows left to issue
    reg [16:0]   pt_left_j_reg; // pass-through: words left in the row
    reg [15:0]   pt_rows_reg;   // pass-through: rows left

    // ---------------------------------------------------------------- hazards
    // FWD, GRAD: a chain's next FMA may issue when no earlier FMA of the same chain that
    // writes the chain register sits in c[0 .. L-2]: one at c[L-1] returns next cycle, when
    // this one reads its operands at stage 1 (bypass).
    // The candidate's chain register: the slot (FWD) or the word in the group (GRAD), both
    // below NCH; widened to 32 bits and cut to CHW, whose upper bits are zero by construction.
    /* verilator lint_off UNUSEDSIGNAL */
    wire [31:0] g_g32 = {{(32 - GW){1'b0}}, g_g_reg};
    wire [31:0] slot32 = {{(32 - SW){1'b0}}, slot_reg};
    /* verilator lint_on UNUSEDSIGNAL */
    wire [CHW-1:0] cand_ch = grad ? g_g32[CHW-1:0] : slot32[CHW-1:0];
    reg chain_busy;
    integer ci;
    always @* begin
        chain_busy = 1'b0;
        for (ci = 0; ci < L - 1; ci = ci + 1) begin
            if (c_v[ci] && c_dest[2*ci +: 2] == D_CHAIN && c_ch[ci*CHW +: CHW] == cand_ch) chain_busy = 1'b1;
        end
    end
    // DX: an accumulator read at stage 0 must not have its previous update still in the
    // pipeline (c[0 .. L]: the one at c[L] writes in this cycle, after the read).
    reg sram_busy;
    integer si;
    always @* begin
        sram_busy = 1'b0;
        for (si = 0; si <= L; si = si + 1) begin
            if (c_v[si] && c_dest[2*si +: 2] == D_SRAM && c_y[si*AW +: AW] == x_cur_reg) sram_busy = 1'b1;
        end
    end

    // ---------------------------------------------------------------- FWD / DX issue
    wire rows_issue = rows_op && h_valid_reg && (fwd ? !chain_busy : (h_first_reg || !sram_busy));
    wire issue_end = rows_issue && slot_reg == blast_reg;   // the word's last use
    wire h_free = !h_valid_reg || issue_end;
    wire rows_left = frows_reg != m_reg;
    wire take_bias = fj_reg == 16'd0;
    assign s_ready = rows_op && rows_left && (fwd ? (take_bias || h_free) : (h_free && ld_idle));
    wire s_fire = s_valid && s_ready;

    // ---------------------------------------------------------------- GRAD issue and the m1 queue
    reg [31:0]  oq_data_reg [0:OQ_DEPTH-1];
    reg         oq_last_reg [0:OQ_DEPTH-1];
    reg [OQW:0] oq_count_reg;  // words in the queue
    reg [OQW:0] oq_res_reg;    // words in the queue or on their way to it
    reg [OQW-1:0] oq_rp_reg;
    reg [OQW-1:0] oq_wp_reg;
    wire oq_pop = m1_valid && m1_ready;
    wire oq_room = oq_res_reg != OQ_FULL;
    assign m1_valid = oq_count_reg != {(OQW+1){1'b0}};
    assign m1_data = oq_data_reg[oq_rp_reg];
    assign m1_last = oq_last_reg[oq_rp_reg];

    wire g_pass = b_reg == 8'd0;
    wire g_first_s = g_s_reg == {SW{1'b0}};
    wire g_last_s = g_s_reg == blast_reg;
    wire g_last_g = g_g_reg == g_gsz_reg - 1'b1;
    wire [16:0] g_j = g_j0_reg + {{(17 - GW){1'b0}}, g_g_reg};
    wire g_eol = g_j == {1'b0, k_reg};
    wire g_issue = grad && !g_pass && g_issuing_reg && ld_idle && !chain_busy
                   && (!g_first_s || head_reg || s1_valid) && (!g_last_s || oq_room);
    wire pt_move = grad && g_pass && pt_rows_reg != 16'd0 && s1_valid && oq_room;
    assign s1_ready = (g_issue && g_first_s && !head_reg) || pt_move;
    wire [AW-1:0] g_xaddr = g_sbase_reg + g_j[AW-1:0] - 1'b1;
    // Next group of the row: min(L, K + 1 - j0).
    wire [16:0] g_j0_next = g_j0_reg + {{(17 - GW){1'b0}}, g_gsz_reg};
    wire [16:0] g_rest = {1'b0, k_reg} + 17'd1 - g_j0_next;
    wire [GW-1:0] g_gsz_next = (g_rest > G17) ? L32[GW-1:0] : g_rest[GW-1:0];
    wire [16:0] g_row_words = {1'b0, k_reg} + 17'd1;
    wire [GW-1:0] g_gsz_row = (g_row_words > G17) ? L32[GW-1:0] : g_row_words[GW-1:0];
    wire g_row_end = g_issue && g_last_s && g_last_g && g_j0_next > {1'b0, k_reg};

    // ---------------------------------------------------------------- FMA operands
    wire issue = rows_issue || g_issue;

    wire          ret_v = c_v[L];
    wire [1:0]    ret_dest = c_dest[2*L +: 2];
    wire          ret_eol = c_eol[L];
    wire [CHW-1:0] ret_ch = c_ch[L*CHW +: CHW];
    wire [AW-1:0] ret_y = c_y[L*AW +: AW];
    wire [31:0]   fma_out;
    wire [31:0]   sram_rd_data;

    wire [31:0] acc_rd = (ret_v && ret_dest == D_CHAIN && ret_ch == st1_ch_reg) ? fma_out : acc[st1_ch_reg];
    wire [31:0] op_b = st1_b_sram_reg ? sram_rd_data : st1_b_reg;
    wire [31:0] op_c = (st1_c_sel_reg == 2'd1) ? sram_rd_data : (st1_c_sel_reg == 2'd2) ? acc_rd : st1_c_reg;

    // ReLU (docs/mesh.md): NaN -> canonical NaN, sign set (-0 included) -> +0.
    wire ret_nan = fma_out[30:23] == 8'hff && fma_out[22:0] != 23'd0;
    wire [31:0] ret_act = !relu_reg ? fma_out : ret_nan ? CANONICAL_NAN : fma_out[31] ? 32'd0 : fma_out;

    wire pipe_empty = c_v == {(L+1){1'b0}};
    wire fwd_drained = !rows_left && !h_valid_reg && pipe_empty;
    wire grad_drained = !g_issuing_reg && pt_rows_reg == 16'd0 && pipe_empty && oq_res_reg == {(OQW+1){1'b0}};

    // ---------------------------------------------------------------- MASK
    reg [15:0]   mk_left_reg;   // words whose reads are still to issue
    reg          mk_phase_reg;  // 0: read y, 1: read d
    reg [AW-1:0] mk_y_reg;
    reg [AW-1:0] mk_d_reg;
    reg          mk_rv_reg;     // a read issued last cycle
    reg          mk_rph_reg;    // ... and its phase
    reg [AW-1:0] mk_wa_reg;     // y address of the word whose d arrives
    reg [31:0]   mk_yval_reg;
    wire mk_issue = maskop && mk_left_reg != 16'd0;
    wire mk_we = mk_rv_reg && mk_rph_reg;
    // ReLU backward (docs/mesh.md): d where the stored output y > 0 (not +-0, not NaN), else +0.
    wire mk_pos = !mk_yval_reg[31] && mk_yval_reg != 32'd0
                  && !(mk_yval_reg[30:23] == 8'hff && mk_yval_reg[22:0] != 23'd0);
    wire [31:0] mk_val = mk_pos ? sram_rd_data : 32'd0;
    wire mask_drained = mk_left_reg == 16'd0 && !mk_rv_reg;

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

    // ---------------------------------------------------------------- the loss stage
    // LOSS (op 6) runs ws_mesh_loss on the PE's own FMA and SRAM ports; nothing else issues
    // or touches the SRAM while it runs.
    wire          lossop = state_reg == S_LOSS;
    wire          lo_start = state_reg == S_FETCH && pc_reg != prog_end_reg && i_op == OP_LOSS;
    wire          lo_done;
    wire          lo_rd_en;
    wire [AW-1:0] lo_raddr;
    wire          lo_we;
    wire [AW-1:0] lo_waddr;
    wire [31:0]   lo_wdata;
    wire [31:0]   lo_a;
    wire [31:0]   lo_b;
    wire [31:0]   lo_c;
    wire          lo_issue;
    /* verilator lint_off UNUSEDSIGNAL */
    wire          lo_busy;
    /* verilator lint_on UNUSEDSIGNAL */

    ws_mesh_loss #(
        .AW(AW),
        .FMA_LAT(L)
    ) loss_inst (
        .clk(clk),
        .rst(rst),
        .start(lo_start),
        .in_b(i_b),
        .in_c(i_k),
        .in_src(i_src[AW-1:0]),
        .in_lab(i_m[AW-1:0]),
        .in_dst(i_dst[AW-1:0]),
        .busy(lo_busy),
        .done(lo_done),
        .rd_en(lo_rd_en),
        .rd_addr(lo_raddr),
        .rd_data(sram_rd_data),
        .we(lo_we),
        .waddr(lo_waddr),
        .wdata(lo_wdata),
        .fma_a(lo_a),
        .fma_b(lo_b),
        .fma_c(lo_c),
        .fma_out(fma_out),
        .fma_issue(lo_issue)
    );

    // ---------------------------------------------------------------- SRAM
    // One read and one write port; the users of each are never active in the same cycle.
    wire          ret_we = ret_v && ret_dest == D_SRAM;
    wire          sram_we = ret_we || mk_we || cfg_sram_we;
    wire [AW-1:0] sram_waddr = ret_we ? ret_y : mk_we ? mk_wa_reg : cfg_addr[AW-1:0];
    wire [31:0]   sram_wdata = ret_we ? ret_act : mk_we ? mk_val : cfg_data;

    // The sample buffer: one word, written in a cycle the datapath leaves the port free.
    reg           xb_valid_reg;
    reg [AW-1:0]  xb_addr_reg;
    reg [31:0]    xb_data_reg;
    wire          x_in_range = {10'd0, x_addr} < SRAM_END;
    wire          x_fire = x_valid && x_ready;
    wire          xb_drain = xb_valid_reg && !sram_we && !lo_we;
    assign x_ready = !xb_valid_reg || xb_drain;
    always @(posedge clk) begin
        if (x_fire && x_in_range) begin
            xb_addr_reg <= x_addr[AW-1:0];
            xb_data_reg <= x_data;
        end
        if (rst) xb_valid_reg <= 1'b0;
        else if (x_fire) xb_valid_reg <= x_in_range;
        else if (xb_drain) xb_valid_reg <= 1'b0;
    end
    wire          g_rd = g_issue && g_j != 17'd0;
    wire          rows_rd = rows_issue && (fwd || !h_first_reg);
    wire [AW-1:0] sram_raddr = dump ? dm_addr_reg : ld_issue ? ld_addr_reg : maskop ? (mk_phase_reg ? mk_d_reg : mk_y_reg)
                             : grad ? g_xaddr : x_cur_reg;

    ws_mesh_pe_sram #(
        .WORDS(SRAM_WORDS)
    ) sram_inst (
        .clk(clk),
        .wr_en(sram_we || lo_we || xb_drain),
        .wr_addr(lo_we ? lo_waddr : sram_we ? sram_waddr : xb_addr_reg),
        .wr_data(lo_we ? lo_wdata : sram_we ? sram_wdata : xb_data_reg),
        .rd_en(rows_rd || g_rd || dm_issue || ld_issue || mk_issue || lo_rd_en),
        .rd_addr(lossop ? lo_raddr : sram_raddr),
        .rd_data(sram_rd_data)
    );

    // ---------------------------------------------------------------- FMA (FPnew)
    // Runs free like ws_optim_fma: always valid in, always ready out, so a value presented in
    // cycle t leaves in cycle t + FMA_LAT; the delay line above tracks what is real.
    ws_optim_fma #(
        .LATENCY(L)
    ) fma_inst (
        .clk(clk),
        .rst(rst),
        .in_a(lossop ? lo_a : st1_a_reg),
        .in_b(lossop ? lo_b : op_b),
        .in_c(lossop ? lo_c : op_c),
        .out_data(fma_out)
    );

    assign stat_busy = !idle;
    assign stat_run = !idle && state_reg != S_CHECK;
    assign stat_pc = pc_reg;
    assign stat_op = i_op;
    assign stat_fma = issue || lo_issue;

    // ---------------------------------------------------------------- datapath registers
    // (no reset needed: every one is qualified by a valid bit or written before use)
    always @(posedge clk) begin
        if (state_reg == S_FETCH) begin
            relu_reg <= i_op == OP_FWD && i_flag;
            head_reg <= i_op == OP_GRAD && i_flag;
            b_reg <= i_b;
            blast_reg <= i_b[SW-1:0] - 1'b1;
            k_reg <= i_k;
            m_reg <= i_m;
            src_reg <= i_src[AW-1:0];
            dst_reg <= i_dst[AW-1:0];
            ystride_reg <= (i_op == OP_DX) ? i_k[AW-1:0] : i_m[AW-1:0];
            dm_addr_reg <= i_src[AW-1:0];
            dm_left_reg <= (i_op == OP_DUMP) ? i_k : 16'd0;
            mk_y_reg <= i_dst[AW-1:0];
            mk_d_reg <= i_src[AW-1:0];
            g_j0_reg <= 17'd0;
            g_gsz_reg <= ({1'b0, i_k} + 17'd1 > G17) ? L32[GW-1:0] : i_k[GW-1:0] + 1'b1;
            g_g_reg <= {GW{1'b0}};
            g_s_reg <= {SW{1'b0}};
            g_sbase_reg <= i_src[AW-1:0];
            ld_addr_reg <= i_dst[AW-1:0];  // GRAD's row 0; DX sets it per row
            ld_slot_reg <= {SW{1'b0}};
            pt_left_j_reg <= {1'b0, i_k} + 17'd1;
        end

        // DUMP
        if (dm_issue) begin
            dm_addr_reg <= dm_addr_reg + 1'b1;
            dm_left_reg <= dm_left_reg - 1'b1;
        end
        rd_last_reg <= dm_left_reg == 16'd1;
        if (rd_v_reg) begin
            q_data_reg[q_wp_reg] <= sram_rd_data;
            q_last_reg[q_wp_reg] <= rd_last_reg;
        end

        // MASK
        if (mk_issue) begin
            if (mk_phase_reg) begin
                mk_wa_reg <= mk_y_reg;
                mk_y_reg <= mk_y_reg + 1'b1;
                mk_d_reg <= mk_d_reg + 1'b1;
            end
        end
        mk_rph_reg <= mk_phase_reg;
        if (mk_rv_reg && !mk_rph_reg) mk_yval_reg <= sram_rd_data;

        // dz loads: dz[s][i] at base + s*M + i, one per cycle, into dzr[s].
        if (ld_issue) begin
            ld_addr_reg <= ld_addr_reg + m_reg[AW-1:0];
            ld_slot_reg <= ld_slot_reg + 1'b1;
        end
        ld_vslot_reg <= ld_slot_reg;
        if (ld_v_reg) dzr[ld_vslot_reg] <= sram_rd_data;

        // FWD / DX front
        if (s_fire && take_bias) begin
            bias_hold_reg <= s_data;
            if (dx) begin
                ld_addr_reg <= src_reg + frows_reg[AW-1:0];
                ld_slot_reg <= {SW{1'b0}};
            end
        end
        if (rows_issue) begin
            x_cur_reg <= x_cur_reg + k_reg[AW-1:0];
            y_cur_reg <= y_cur_reg + ystride_reg;
            slot_reg <= issue_end ? {SW{1'b0}} : slot_reg + 1'b1;
        end
        if (s_fire && !take_bias) begin
            h_w_reg <= s_data;
            h_bias_reg <= bias_hold_reg;
            h_first_reg <= dx ? frows_reg == 16'd0 : fj_reg == 16'd1;
            h_last_reg <= fj_reg == k_reg;
            x_cur_reg <= (dx ? dst_reg : src_reg) + fj_reg[AW-1:0] - 1'b1;
            y_cur_reg <= dx ? dst_reg + fj_reg[AW-1:0] - 1'b1 : dst_reg + frows_reg[AW-1:0];
        end
        if (state_reg == S_FETCH) slot_reg <= {SW{1'b0}};

        // GRAD
        if (g_issue) begin
            if (g_last_g) begin
                g_g_reg <= {GW{1'b0}};
                if (g_last_s) begin
                    g_s_reg <= {SW{1'b0}};
                    g_sbase_reg <= src_reg;
                    if (g_j0_next > {1'b0, k_reg}) begin
                        g_j0_reg <= 17'd0;
                        g_gsz_reg <= g_gsz_row;
                        ld_addr_reg <= dst_reg + g_row_reg[AW-1:0] + 1'b1;
                        ld_slot_reg <= {SW{1'b0}};
                    end else begin
                        g_j0_reg <= g_j0_next;
                        g_gsz_reg <= g_gsz_next;
                    end
                end else begin
                    g_s_reg <= g_s_reg + 1'b1;
                    g_sbase_reg <= g_sbase_reg + k_reg[AW-1:0];
                end
            end else begin
                g_g_reg <= g_g_reg + 1'b1;
            end
        end
        if (pt_move) begin
            pt_left_j_reg <= (pt_left_j_reg == 17'd1) ? {1'b0, k_reg} + 17'd1 : pt_left_j_reg - 17'd1;
        end

        // m1 queue
        if (ret_v && ret_dest == D_OUT) begin
            oq_data_reg[oq_wp_reg] <= fma_out;
            oq_last_reg[oq_wp_reg] <= ret_eol;
        end else if (pt_move) begin
            oq_data_reg[oq_wp_reg] <= s1_data;
            oq_last_reg[oq_wp_reg] <= pt_left_j_reg == 17'd1;
        end

        // Stage 1 operands and tags.
        if (g_issue) begin
            st1_dest_reg <= g_last_s ? D_OUT : D_CHAIN;
            st1_eol_reg <= g_eol;
            st1_ch_reg <= cand_ch;
            st1_a_reg <= dzr[g_s_reg];
            st1_b_reg <= ONE;
            st1_b_sram_reg <= g_j != 17'd0;
            st1_c_reg <= head_reg ? NEG_ZERO : s1_data;
            st1_c_sel_reg <= g_first_s ? 2'd0 : 2'd2;
        end else begin
            st1_dest_reg <= (dx || h_last_reg) ? D_SRAM : D_CHAIN;
            st1_eol_reg <= 1'b0;
            st1_ch_reg <= cand_ch;
            st1_a_reg <= h_w_reg;
            st1_b_reg <= dzr[slot_reg];
            st1_b_sram_reg <= fwd;
            st1_c_reg <= fwd ? h_bias_reg : NEG_ZERO;
            st1_c_sel_reg <= fwd ? (h_first_reg ? 2'd0 : 2'd2) : (h_first_reg ? 2'd0 : 2'd1);
        end
        st1_y_reg <= dx ? x_cur_reg : y_cur_reg;
        d_dest_reg <= c_dest[2*L-1:0];
        d_eol_reg <= c_eol[L-1:0];
        d_ch_reg <= c_ch[L*CHW-1:0];
        d_y_reg <= c_y[L*AW-1:0];

        if (ret_v && ret_dest == D_CHAIN) acc[ret_ch] <= fma_out;
    end

    // ---------------------------------------------------------------- control registers
    always @(posedge clk) begin
        if (rst) begin
            state_reg <= S_IDLE;
            prog_base_reg <= 16'd0;
            prog_end_reg <= 16'd0;
            pc_reg <= 16'd0;
            range_err_reg <= 1'b0;
            stat_done <= 1'b0;
            stat_err <= 1'b0;
            stat_err_code <= 4'd0;
            stat_err_pc <= 16'd0;
            cnt_fma <= {CNT_WIDTH{1'b0}};
            cnt_fwd_cycles <= {CNT_WIDTH{1'b0}};
            cnt_dx_cycles <= {CNT_WIDTH{1'b0}};
            cnt_grad_cycles <= {CNT_WIDTH{1'b0}};
            cnt_loss_cycles <= {CNT_WIDTH{1'b0}};
            fj_reg <= 16'd0;
            frows_reg <= 16'd0;
            h_valid_reg <= 1'b0;
            st1_v_reg <= 1'b0;
            d_v_reg <= {L{1'b0}};
            rd_v_reg <= 1'b0;
            q_count_reg <= 2'd0;
            q_rp_reg <= 1'b0;
            q_wp_reg <= 1'b0;
            ld_left_reg <= 8'd0;
            ld_v_reg <= 1'b0;
            g_row_reg <= 16'd0;
            g_issuing_reg <= 1'b0;
            pt_rows_reg <= 16'd0;
            oq_count_reg <= {(OQW+1){1'b0}};
            oq_res_reg <= {(OQW+1){1'b0}};
            oq_rp_reg <= {OQW{1'b0}};
            oq_wp_reg <= {OQW{1'b0}};
            mk_left_reg <= 16'd0;
            mk_phase_reg <= 1'b0;
            mk_rv_reg <= 1'b0;
        end else begin
            if ((cfg_prog && !(prog_in_range && idle)) || (cfg_sram && !cfg_sram_we) || (x_fire && !x_in_range))
                range_err_reg <= 1'b1;

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
                        prog_base_reg <= {8'd0, cfg_data[15:8]};
                        prog_end_reg <= {8'd0, cfg_data[15:8]} + cfg_data[31:16];
                        pc_reg <= {8'd0, cfg_data[15:8]};
                        stat_done <= 1'b0;
                        stat_err <= 1'b0;
                        stat_err_code <= 4'd0;
                        stat_err_pc <= 16'd0;
                        if (range_err_reg && !cfg_data[1]) begin
                            stat_err <= 1'b1;
                            stat_err_code <= ERR_RANGE;
                        end else if (cfg_data[31:16] == 16'd0
                                     || {1'b0, cfg_data[31:16]} + {9'd0, cfg_data[15:8]} > {1'b0, DEPTH16}) begin
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
                    end else if (pc_reg + 16'd1 == prog_end_reg) begin
                        pc_reg <= prog_base_reg;
                        state_reg <= S_FETCH;
                    end else begin
                        pc_reg <= pc_reg + 16'd1;
                    end
                end
                S_FETCH: begin
                    if (pc_reg == prog_end_reg) begin
                        stat_done <= 1'b1;
                        state_reg <= S_IDLE;
                    end else begin
                        fj_reg <= 16'd0;
                        frows_reg <= 16'd0;
                        g_row_reg <= 16'd0;
                        case (i_op)
                            OP_FWD: state_reg <= S_FWD;
                            OP_DX: state_reg <= S_DX;
                            OP_MASK: begin
                                mk_left_reg <= i_k;
                                mk_phase_reg <= 1'b0;
                                state_reg <= S_MASK;
                            end
                            OP_LOSS: state_reg <= S_LOSS;
                            OP_GRAD: begin
                                g_issuing_reg <= i_b != 8'd0;
                                ld_left_reg <= i_b;
                                pt_rows_reg <= (i_b == 8'd0) ? i_m : 16'd0;
                                state_reg <= S_GRAD;
                            end
                            default: state_reg <= S_DUMP;
                        endcase
                    end
                end
                S_FWD: begin
                    cnt_fwd_cycles <= cnt_fwd_cycles + 1'b1;
                    if (fwd_drained) begin
                        pc_reg <= pc_reg + 16'd1;
                        state_reg <= S_FETCH;
                    end
                end
                S_DX: begin
                    cnt_dx_cycles <= cnt_dx_cycles + 1'b1;
                    if (fwd_drained) begin
                        pc_reg <= pc_reg + 16'd1;
                        state_reg <= S_FETCH;
                    end
                end
                S_GRAD: begin
                    cnt_grad_cycles <= cnt_grad_cycles + 1'b1;
                    if (grad_drained) begin
                        pc_reg <= pc_reg + 16'd1;
                        state_reg <= S_FETCH;
                    end
                end
                S_LOSS: begin
                    cnt_loss_cycles <= cnt_loss_cycles + 1'b1;
                    if (lo_done) begin
                        pc_reg <= pc_reg + 16'd1;
                        state_reg <= S_FETCH;
                    end
                end
                S_MASK: begin
                    if (mask_drained) begin
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

            // FWD / DX front
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

            // dz loads: DX at each row's bias word, GRAD at each row's start.
            if (s_fire && take_bias && dx) ld_left_reg <= b_reg;
            else if (g_row_end && g_row_reg + 16'd1 != m_reg) ld_left_reg <= b_reg;
            else if (ld_issue) ld_left_reg <= ld_left_reg - 8'd1;
            ld_v_reg <= ld_issue;

            // GRAD rows
            if (g_row_end) begin
                g_row_reg <= g_row_reg + 16'd1;
                if (g_row_reg + 16'd1 == m_reg) g_issuing_reg <= 1'b0;
            end
            if (pt_move && pt_left_j_reg == 17'd1) pt_rows_reg <= pt_rows_reg - 16'd1;

            // m1 queue
            if ((ret_v && ret_dest == D_OUT) || pt_move) oq_wp_reg <= oq_wp_reg + 1'b1;
            if (oq_pop) oq_rp_reg <= oq_rp_reg + 1'b1;
            oq_count_reg <= oq_count_reg + {{OQW{1'b0}}, (ret_v && ret_dest == D_OUT) || pt_move}
                            - {{OQW{1'b0}}, oq_pop};
            oq_res_reg <= oq_res_reg + {{OQW{1'b0}}, (g_issue && g_last_s) || pt_move} - {{OQW{1'b0}}, oq_pop};

            // MASK
            if (mk_issue) begin
                mk_phase_reg <= !mk_phase_reg;
                if (mk_phase_reg) mk_left_reg <= mk_left_reg - 16'd1;
            end
            mk_rv_reg <= mk_issue;

            if (issue || lo_issue) cnt_fma <= cnt_fma + 1'b1;
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
