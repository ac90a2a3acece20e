`default_nettype none

// ws_mx_layers: MemoryX's register block: the layer table, the per-step constant slots, the
// command register that enables, disables and streams layers, the validation of a layer
// before it is enabled, and the status, error and counter registers of ws_mx_streamer.
//
// Where it sits: firmware writes it through the house register port (docs/soc.md "Bus",
// one-cycle read latency) in the MemoryX slot of the peripheral bus; ws_mx_streamer reads the
// table and the slots as flat buses and reports errors, retirements and counters back.
//
// The register layout below is a local map (issue 5; the lead moves it into hdl/regmap/
// later). Offsets are bytes in the block's 4 KiB window; every register is a whole word.
//
//   0x000 ID          ro  0x4d58_0100: id 'MX', version 1.0
//   0x004 CONFIG      ro  [7:0] LANES, [15:8] BEAT_WORDS (32-bit words per store beat),
//                         [23:16] MAX_LAYERS, [31:24] NUM_SLOTS
//   0x008 STORE_BYTES ro  bytes of the weight store from address 0
//   0x00C CTRL        rw  [0] TRACE_EN: emit one trace record per retired chunk
//   0x010 STATUS      ro  [0] CMD_BUSY, [1] ACTIVE (chunks in flight), [2] STREAMING,
//                         [15:8] chunks in flight, [23:16] DESC_DEPTH
//   0x014 CMD         wo  [3:0] op: 1 ENABLE, 2 DISABLE, 3 STREAM, 4 STREAM_AFTER; [15:4] layer;
//                         [31:16] STREAM_AFTER's count: it waits (CMD_BUSY) until the layer's
//                         DONE reaches it, then STREAMs the layer with step STEP + 1 (the
//                         weights the update of STEP produced; since version 1.1)
//   0x018 ERR         ro  [7:0] code of the last error, [19:8] its layer; any write clears it
//   0x01C ERR_INFO    ro  [15:0] chunk, [31:16] step of the last gradient error
//   0x020 ERR_COUNT   ro  errors since reset
//   0x024 TS_LO       ro  cycle counter [31:0]; reading it latches [63:32] into TS_HI
//   0x028 TS_HI       ro
//   0x040 + 4i        ro  counter i (ws_mx_streamer's COUNTERS list)
//   0x100 + 0x40s     rw  constant slot s < NUM_SLOTS: +0x00 FLAGS [5:0], +0x04 GSCALE,
//                         +0x08 WD, +0x0C DECAY, +0x10 K1, +0x14 K2, +0x18 BETA2, +0x1C C2,
//                         +0x20 IBC2S, +0x24 EPS, +0x28 NEG_RATE
//                         (ws_common::golden::optim::Consts, binary32 bits)
//   0x400 + 0x40L     rw  layer L < MAX_LAYERS:
//                         +0x00 W_BASE, +0x04 M_BASE, +0x08 V_BASE, +0x0C VMAX_BASE (bytes)
//                         +0x10 LEN    parameters
//                         +0x14 CHUNK  [15:0] parameters per chunk
//                         +0x18 MODE   [3:0] OPT, [5:4] DTYPE
//                         +0x1C STEP   [15:0] step of the gradients expected, [19:16] slot
//                         +0x20 STATUS ro: [0] enabled, [1] busy (chunks in flight),
//                                      [2] a command on it is pending, [15:8] last refusal
//                         +0x24 DONE   ro: [15:0] update chunks retired since STEP was written
//
// W_BASE..MODE of an enabled layer are read-only (a write is refused with LAYER_ENABLED);
// STEP may be written at any time (that is how firmware moves a layer to the next step).
//
// OPT: 0 SGD (w), 1 SGD with momentum (w, m), 2 Adam (w, m, v), 3 AdamW (w, m, v),
// 4 Adam amsgrad, 5 AdamW amsgrad (w, m, v, vmax). DTYPE: 0 fp32, 1 bf16 weight flits.
//
// ENABLE validates the entry and refuses it, leaving the layer disabled, with the first of
// these error codes that applies (docs/memoryx-store.md "Validation"):
//   0x02 BAD_OPT, 0x03 BAD_DTYPE, 0x04 LEN_ZERO, 0x06 BAD_CHUNK (0, not a multiple of
//   BEAT_WORDS), 0x05 LEN_TOO_LARGE (an array larger than the store, or more than 2^16
//   chunks), 0x07 BAD_SLOT, 0x08 MISALIGNED (a base not on a beat), 0x09 PAST_STORE,
//   0x0A SELF_OVERLAP (two arrays of the layer overlap), 0x0B OVERLAP (an array overlaps
//   an array of an enabled layer; checked one layer per cycle).
// Other command errors: 0x01 BAD_LAYER, 0x0C LAYER_ENABLED, 0x0D NOT_ENABLED (STREAM of a
// disabled layer), 0x0E CMD_BUSY (a command while one is pending), 0x0F BAD_CMD. Codes
// 0x10 and up come from the streamer (gradient and bus errors).
//
// An array spans its layer's length rounded up to whole beats: the streamer reads (never
// writes) the padding of a layer's last beat, so the padding belongs to the layer.
module ws_mx_layers #(
    parameter MAX_LAYERS = 16,        // layer table entries, 1..16
    parameter NUM_SLOTS = 8,          // constant slots, 1..16
    parameter LANES = 1,              // (reported in CONFIG)
    parameter BEAT_WORDS = 8,         // 32-bit words per store beat, a power of two
    parameter STORE_BYTES = 1 << 20,  // bytes of the store, from address 0
    parameter DESC_DEPTH = 8,         // (reported in STATUS)
    parameter NUM_COUNTERS = 11,      // counters readable at 0x040.., at most 48
    parameter LI = 4                  // layer index bits, $clog2(MAX_LAYERS) but >= 1
) (
    input  wire                        clk,
    input  wire                        rst,

    input  wire                        reg_req,
    input  wire                        reg_we,
    input  wire [11:0]                 reg_addr,
    input  wire [31:0]                 reg_wdata,
    input  wire [3:0]                  reg_be,
    output wire [31:0]                 reg_rdata,

    // The table, layer i at [i*W +: W].
    output wire [MAX_LAYERS-1:0]       tbl_enabled,
    output wire [MAX_LAYERS*32-1:0]    tbl_w_base,
    output wire [MAX_LAYERS*32-1:0]    tbl_m_base,
    output wire [MAX_LAYERS*32-1:0]    tbl_v_base,
    output wire [MAX_LAYERS*32-1:0]    tbl_x_base,
    output wire [MAX_LAYERS*32-1:0]    tbl_len,
    output wire [MAX_LAYERS*16-1:0]    tbl_chunk,
    output wire [MAX_LAYERS*4-1:0]     tbl_opt,
    output wire [MAX_LAYERS-1:0]       tbl_bf16,
    output wire [MAX_LAYERS*16-1:0]    tbl_step,
    output wire [MAX_LAYERS*4-1:0]     tbl_slot,

    // Constant slots, slot s at [s*W +: W]; consts are the ten binary32 words from GSCALE to
    // NEG_RATE, GSCALE lowest.
    output wire [NUM_SLOTS*6-1:0]      slot_flags,
    output wire [NUM_SLOTS*320-1:0]    slot_consts,
    output wire                        slot_written,      // pulse: a slot word was written
    output wire [3:0]                  slot_written_idx,

    output wire                        trace_en,

    // STREAM command to the streamer's sequencer.
    output wire                        stream_start,      // pulse
    output wire [LI-1:0]               stream_layer,
    output wire                        stream_next,       // the stream's step is STEP + 1
    input  wire                        stream_busy,

    // From the streamer.
    input  wire [MAX_LAYERS-1:0]       layer_busy,        // chunks of layer i in flight
    input  wire                        retire_valid,      // an update chunk retired ...
    input  wire [LI-1:0]               retire_layer,      // ... of this layer
    input  wire                        err_valid,
    input  wire [7:0]                  err_code,
    input  wire [11:0]                 err_layer,
    input  wire [15:0]                 err_chunk,
    input  wire [15:0]                 err_step,
    input  wire [7:0]                  inflight,
    input  wire [63:0]                 ts,
    input  wire [NUM_COUNTERS*32-1:0]  counters
);

    localparam [31:0] ID_WORD = 32'h4d58_0101;
    localparam BEAT_BYTES = 4 * BEAT_WORDS;
    localparam [34:0] STORE_END = {3'b000, STORE_BYTES[31:0]};
    localparam [15:0] CHUNK_MASK = BEAT_WORDS[15:0] - 16'd1;
    localparam [31:0] BASE_MASK = BEAT_BYTES - 1;
    localparam SW = (NUM_SLOTS > 1) ? $clog2(NUM_SLOTS) : 1;  // slot index bits

    localparam [3:0] OP_ENABLE = 4'd1;
    localparam [3:0] OP_DISABLE = 4'd2;
    localparam [3:0] OP_STREAM = 4'd3;
    localparam [3:0] OP_STREAM_AFTER = 4'd4;

    localparam [7:0] E_BAD_LAYER = 8'h01;
    localparam [7:0] E_BAD_OPT = 8'h02;
    localparam [7:0] E_BAD_DTYPE = 8'h03;
    localparam [7:0] E_LEN_ZERO = 8'h04;
    localparam [7:0] E_LEN_TOO_LARGE = 8'h05;
    localparam [7:0] E_BAD_CHUNK = 8'h06;
    localparam [7:0] E_BAD_SLOT = 8'h07;
    localparam [7:0] E_MISALIGNED = 8'h08;
    localparam [7:0] E_PAST_STORE = 8'h09;
    localparam [7:0] E_SELF_OVERLAP = 8'h0a;
    localparam [7:0] E_OVERLAP = 8'h0b;
    localparam [7:0] E_LAYER_ENABLED = 8'h0c;
    localparam [7:0] E_NOT_ENABLED = 8'h0d;
    localparam [7:0] E_CMD_BUSY = 8'h0e;
    localparam [7:0] E_BAD_CMD = 8'h0f;

    localparam [2:0] C_IDLE = 3'd0;
    localparam [2:0] C_SELF = 3'd1;
    localparam [2:0] C_SCAN = 3'd2;
    localparam [2:0] C_DRAIN = 3'd3;
    localparam [2:0] C_STREAM = 3'd4;
    localparam [2:0] C_AFTER = 3'd5;   // STREAM_AFTER waiting for the layer's DONE

    initial begin
        if (MAX_LAYERS < 1 || MAX_LAYERS > 16) $error("ws_mx_layers: MAX_LAYERS must be in 1..16");
        if (NUM_SLOTS < 1 || NUM_SLOTS > 16) $error("ws_mx_layers: NUM_SLOTS must be in 1..16");
        if (BEAT_WORDS < 1 || (BEAT_WORDS & (BEAT_WORDS - 1)) != 0) $error("ws_mx_layers: BEAT_WORDS must be a power of two");
        if (NUM_COUNTERS < 1 || NUM_COUNTERS > 48) $error("ws_mx_layers: NUM_COUNTERS must be in 1..48");
        if ((1 << LI) < MAX_LAYERS) $error("ws_mx_layers: LI too small for MAX_LAYERS");
    end

    // ---- storage ----
    reg [31:0] base_reg [0:MAX_LAYERS-1][0:3];  // w, m, v, vmax
    reg [31:0] len_reg [0:MAX_LAYERS-1];
    reg [15:0] chunk_reg [0:MAX_LAYERS-1];
    reg [3:0]  opt_reg [0:MAX_LAYERS-1];
    reg [1:0]  dtype_reg [0:MAX_LAYERS-1];
    reg [15:0] step_reg [0:MAX_LAYERS-1];
    reg [3:0]  slot_reg [0:MAX_LAYERS-1];
    reg [7:0]  refusal_reg [0:MAX_LAYERS-1];
    reg [15:0] done_reg [0:MAX_LAYERS-1];
    reg [MAX_LAYERS-1:0] enabled_reg;
    reg [5:0]  sflags_reg [0:NUM_SLOTS-1];
    reg [31:0] sconst_reg [0:NUM_SLOTS-1][0:9];

    reg        trace_en_reg;
    reg [7:0]  err_code_reg;
    reg [11:0] err_layer_reg;
    reg [15:0] err_chunk_reg, err_step_reg;
    reg [31:0] err_count_reg;
    reg [31:0] ts_hi_reg;

    reg [2:0]    cstate_reg;
    reg [LI-1:0] cmd_layer_reg;
    reg [LI-1:0] scan_reg;
    reg          stream_start_reg;
    reg          stream_next_reg;
    reg [15:0]   after_reg;

    genvar gi, ga;
    generate
        for (gi = 0; gi < MAX_LAYERS; gi = gi + 1) begin : flat_layer
            assign tbl_w_base[32*gi +: 32] = base_reg[gi][0];
            assign tbl_m_base[32*gi +: 32] = base_reg[gi][1];
            assign tbl_v_base[32*gi +: 32] = base_reg[gi][2];
            assign tbl_x_base[32*gi +: 32] = base_reg[gi][3];
            assign tbl_len[32*gi +: 32] = len_reg[gi];
            assign tbl_chunk[16*gi +: 16] = chunk_reg[gi];
            assign tbl_opt[4*gi +: 4] = opt_reg[gi];
            assign tbl_bf16[gi] = dtype_reg[gi][0];
            assign tbl_step[16*gi +: 16] = step_reg[gi];
            assign tbl_slot[4*gi +: 4] = slot_reg[gi];
        end
        for (gi = 0; gi < NUM_SLOTS; gi = gi + 1) begin : flat_slot
            assign slot_flags[6*gi +: 6] = sflags_reg[gi];
            for (ga = 0; ga < 10; ga = ga + 1) begin : word
                assign slot_consts[320*gi + 32*ga +: 32] = sconst_reg[gi][ga];
            end
        end
    endgenerate
    assign tbl_enabled = enabled_reg;
    assign trace_en = trace_en_reg;
    assign stream_start = stream_start_reg;
    assign stream_layer = cmd_layer_reg;
    assign stream_next = stream_next_reg;

    // ---- arrays a layer's optimizer keeps: {vmax, v, m, w} ----
    function automatic [3:0] arrays_of(input [3:0] opt);
        case (opt)
            4'd0: arrays_of = 4'b0001;
            4'd1: arrays_of = 4'b0011;
            4'd2, 4'd3: arrays_of = 4'b0111;
            4'd4, 4'd5: arrays_of = 4'b1111;
            default: arrays_of = 4'b0000;
        endcase
    endfunction

    // Bytes an array of a layer of `len` parameters spans: whole beats.
    function automatic [34:0] span_bytes(input [31:0] len);
        reg [32:0] words;
        begin
            words = ({1'b0, len} + BEAT_WORDS - 1) & ~(33'd0 + BEAT_WORDS - 1);
            span_bytes = {words, 2'b00};
        end
    endfunction

    // ---- validation of the layer a command names ----
    wire [LI-1:0] cl = cmd_layer_reg;
    wire [3:0]  c_arrays = arrays_of(opt_reg[cl]);
    wire [34:0] c_span = span_bytes(len_reg[cl]);
    reg  [34:0] c_lo [0:3];
    reg  [34:0] c_hi [0:3];
    wire [LI-1:0] sl = scan_reg;
    wire [3:0]  s_arrays = arrays_of(opt_reg[sl]);
    wire [34:0] s_span = span_bytes(len_reg[sl]);
    reg  [34:0] s_lo [0:3];
    reg  [34:0] s_hi [0:3];
    integer ia, ib;
    always @* begin
        for (ia = 0; ia < 4; ia = ia + 1) begin
            c_lo[ia] = {3'b000, base_reg[cl][ia]};
            c_hi[ia] = c_lo[ia] + c_span;
            s_lo[ia] = {3'b000, base_reg[sl][ia]};
            s_hi[ia] = s_lo[ia] + s_span;
        end
    end

    reg [7:0] self_err;
    reg       misaligned, past_store, self_overlap, scan_overlap;
    always @* begin
        misaligned = 1'b0;
        past_store = 1'b0;
        self_overlap = 1'b0;
        scan_overlap = 1'b0;
        for (ia = 0; ia < 4; ia = ia + 1) begin
            if (c_arrays[ia]) begin
                if ((base_reg[cl][ia] & BASE_MASK) != 32'd0) misaligned = 1'b1;
                if (c_hi[ia] > STORE_END) past_store = 1'b1;
                for (ib = 0; ib < 4; ib = ib + 1) begin
                    if (ib > ia && c_arrays[ib] && c_lo[ia] < c_hi[ib] && c_lo[ib] < c_hi[ia]) self_overlap = 1'b1;
                    if (s_arrays[ib] && c_lo[ia] < s_hi[ib] && s_lo[ib] < c_hi[ia]) scan_overlap = 1'b1;
                end
            end
        end
        if (c_arrays == 4'b0000) self_err = E_BAD_OPT;
        else if (dtype_reg[cl] > 2'd1) self_err = E_BAD_DTYPE;
        else if (len_reg[cl] == 32'd0) self_err = E_LEN_ZERO;
        else if (chunk_reg[cl] == 16'd0 || (chunk_reg[cl] & CHUNK_MASK) != 16'd0) self_err = E_BAD_CHUNK;
        else if (len_reg[cl] > STORE_BYTES / 4 || len_reg[cl] > {chunk_reg[cl], 16'h0000}) self_err = E_LEN_TOO_LARGE;
        else if (slot_reg[cl] >= NUM_SLOTS) self_err = E_BAD_SLOT;
        else if (misaligned) self_err = E_MISALIGNED;
        else if (past_store) self_err = E_PAST_STORE;
        else if (self_overlap) self_err = E_SELF_OVERLAP;
        else self_err = 8'h00;
    end
    wire scan_hit = enabled_reg[sl] && sl != cl && scan_overlap;
    wire scan_last = {{(32-LI){1'b0}}, scan_reg} == MAX_LAYERS - 1;

    // ---- register writes ----
    wire [1:0]  unused_addr_lo = reg_addr[1:0];  // every register is a whole word
    wire        wr = reg_req && reg_we;
    wire        rd = reg_req && !reg_we;
    wire [9:0]  widx = reg_addr[11:2];
    wire [31:0] wmask = {{8{reg_be[3]}}, {8{reg_be[2]}}, {8{reg_be[1]}}, {8{reg_be[0]}}};
    wire        in_slots = widx >= 10'h040 && widx < 10'h0c0;
    wire [3:0]  w_slot4 = widx[7:4] - 4'd4;
    wire [SW-1:0] w_slot = w_slot4[SW-1:0];
    wire        slot_ok = in_slots && {28'd0, w_slot4} < NUM_SLOTS && widx[3:0] < 4'd11;
    wire        in_layers = widx[9:8] == 2'b01;
    wire [3:0]  w_layer = widx[7:4];
    wire [3:0]  w_field = widx[3:0];
    wire        layer_ok = in_layers && {28'd0, w_layer} < MAX_LAYERS;
    wire [LI-1:0] wl = w_layer[LI-1:0];
    wire        cmd_pending = cstate_reg != C_IDLE;
    wire        wl_pending = cmd_pending && cmd_layer_reg == wl;
    wire        is_cmd = wr && widx == 10'h005;
    wire [3:0]  cmd_op = reg_wdata[3:0];
    wire [11:0] cmd_lay = reg_wdata[15:4];
    wire [LI-1:0] cmd_li = cmd_lay[LI-1:0];

    // Errors of a register write (at most one per cycle) ...
    reg [7:0]  berr_code;
    reg [11:0] berr_layer;
    always @* begin
        berr_code = 8'h00;
        berr_layer = 12'h000;
        if (is_cmd) begin
            berr_layer = cmd_lay;
            if (cmd_pending) berr_code = E_CMD_BUSY;
            else if (cmd_op != OP_ENABLE && cmd_op != OP_DISABLE && cmd_op != OP_STREAM
                     && cmd_op != OP_STREAM_AFTER) berr_code = E_BAD_CMD;
            else if ({20'd0, cmd_lay} >= MAX_LAYERS) berr_code = E_BAD_LAYER;
            else if ((cmd_op == OP_STREAM || cmd_op == OP_STREAM_AFTER) && !enabled_reg[cmd_li])
                berr_code = E_NOT_ENABLED;
        end else if (wr && layer_ok && w_field <= 4'd7) begin
            berr_layer = {8'd0, w_layer};
            if (wl_pending) berr_code = E_CMD_BUSY;
            else if (w_field != 4'd7 && enabled_reg[wl]) berr_code = E_LAYER_ENABLED;
            else if (w_field == 4'd7 && reg_be[2] && {28'd0, reg_wdata[19:16]} >= NUM_SLOTS) berr_code = E_BAD_SLOT;
        end
    end
    // ... and of the validation of an ENABLE (the layer is the command's).
    wire [7:0] verr_code = (cstate_reg == C_SELF) ? self_err : (cstate_reg == C_SCAN && scan_hit) ? E_OVERLAP : 8'h00;
    wire       verr = verr_code != 8'h00;
    wire berr = berr_code != 8'h00;
    wire layer_write = wr && layer_ok && w_field <= 4'd7 && !berr;

    // Slot writes invalidate the streamer's copy of that slot.
    reg       slot_written_reg;
    reg [3:0] slot_written_idx_reg;
    assign slot_written = slot_written_reg;
    assign slot_written_idx = slot_written_idx_reg;

    integer li, si, fi;
    always @(posedge clk) begin
        slot_written_reg <= wr && slot_ok;
        slot_written_idx_reg <= w_slot4;
        stream_start_reg <= 1'b0;

        if (wr && widx == 10'h003 && reg_be[0]) trace_en_reg <= reg_wdata[0];

        if (wr && slot_ok) begin
            if (widx[3:0] == 4'd0) sflags_reg[w_slot] <= (sflags_reg[w_slot] & ~wmask[5:0]) | (reg_wdata[5:0] & wmask[5:0]);
            else sconst_reg[w_slot][widx[3:0] - 4'd1] <= (sconst_reg[w_slot][widx[3:0] - 4'd1] & ~wmask) | (reg_wdata & wmask);
        end

        if (layer_write) begin
            case (w_field)
                4'd0, 4'd1, 4'd2, 4'd3: base_reg[wl][w_field[1:0]] <= (base_reg[wl][w_field[1:0]] & ~wmask) | (reg_wdata & wmask);
                4'd4: len_reg[wl] <= (len_reg[wl] & ~wmask) | (reg_wdata & wmask);
                4'd5: chunk_reg[wl] <= (chunk_reg[wl] & ~wmask[15:0]) | (reg_wdata[15:0] & wmask[15:0]);
                4'd6: begin
                    if (reg_be[0]) begin
                        opt_reg[wl] <= reg_wdata[3:0];
                        dtype_reg[wl] <= reg_wdata[5:4];
                    end
                end
                default: begin  // STEP
                    step_reg[wl] <= (step_reg[wl] & ~wmask[15:0]) | (reg_wdata[15:0] & wmask[15:0]);
                    if (reg_be[2]) slot_reg[wl] <= reg_wdata[19:16];
                end
            endcase
        end

        // Chunks retired since the layer's STEP was last written (the write wins a tie).
        if (retire_valid) done_reg[retire_layer] <= done_reg[retire_layer] + 16'd1;
        if (layer_write && w_field == 4'd7) done_reg[wl] <= 16'd0;

        // ---- commands (a validation's refusal wins over a refused write's) ----
        if (wr && layer_ok && w_field <= 4'd7 && berr) refusal_reg[wl] <= berr_code;
        case (cstate_reg)
            C_IDLE: begin
                if (is_cmd && !berr) begin
                    cmd_layer_reg <= cmd_li;
                    if (cmd_op == OP_ENABLE) begin
                        if (!enabled_reg[cmd_li]) cstate_reg <= C_SELF;
                    end else if (cmd_op == OP_DISABLE) begin
                        enabled_reg[cmd_li] <= 1'b0;
                        cstate_reg <= C_DRAIN;
                    end else if (cmd_op == OP_STREAM_AFTER) begin
                        after_reg <= reg_wdata[31:16];
                        cstate_reg <= C_AFTER;
                    end else begin
                        stream_start_reg <= 1'b1;
                        stream_next_reg <= 1'b0;
                        cstate_reg <= C_STREAM;
                    end
                end
            end
            C_SELF: begin
                scan_reg <= {LI{1'b0}};
                if (self_err != 8'h00) begin
                    refusal_reg[cmd_layer_reg] <= self_err;
                    cstate_reg <= C_IDLE;
                end else begin
                    cstate_reg <= C_SCAN;
                end
            end
            C_SCAN: begin
                scan_reg <= scan_reg + 1'b1;
                if (scan_hit) begin
                    refusal_reg[cmd_layer_reg] <= E_OVERLAP;
                    cstate_reg <= C_IDLE;
                end else if (scan_last) begin
                    refusal_reg[cmd_layer_reg] <= 8'h00;
                    enabled_reg[cmd_layer_reg] <= 1'b1;
                    cstate_reg <= C_IDLE;
                end
            end
            C_DRAIN: begin
                if (!layer_busy[cmd_layer_reg]) cstate_reg <= C_IDLE;
            end
            C_AFTER: begin
                // The layer's update has retired as far as the count says: its weights are
                // in the store, every write acknowledged (docs/memoryx-store.md "Layer
                // commands"). The layer stays enabled: a DISABLE waits behind this command.
                if (done_reg[cmd_layer_reg] >= after_reg) begin
                    stream_start_reg <= 1'b1;
                    stream_next_reg <= 1'b1;
                    cstate_reg <= C_STREAM;
                end
            end
            default: begin  // C_STREAM: until the sequencer has taken every chunk
                if (!stream_start_reg && !stream_busy) cstate_reg <= C_IDLE;
            end
        endcase

        // ---- errors ----
        if (err_valid) begin
            err_code_reg <= err_code;
            err_layer_reg <= err_layer;
            err_chunk_reg <= err_chunk;
            err_step_reg <= err_step;
        end else if (berr) begin
            err_code_reg <= berr_code;
            err_layer_reg <= berr_layer;
        end else if (verr) begin
            err_code_reg <= verr_code;
            err_layer_reg <= {{(12-LI){1'b0}}, cmd_layer_reg};
        end else if (wr && widx == 10'h006) begin
            err_code_reg <= 8'h00;
            err_layer_reg <= 12'h000;
            err_chunk_reg <= 16'h0000;
            err_step_reg <= 16'h0000;
        end
        err_count_reg <= err_count_reg + {31'd0, err_valid} + {31'd0, berr} + {31'd0, verr};

        if (rd && widx == 10'h009) ts_hi_reg <= ts[63:32];

        if (rst) begin
            enabled_reg <= {MAX_LAYERS{1'b0}};
            trace_en_reg <= 1'b0;
            err_code_reg <= 8'h00;
            err_layer_reg <= 12'h000;
            err_chunk_reg <= 16'h0000;
            err_step_reg <= 16'h0000;
            err_count_reg <= 32'd0;
            ts_hi_reg <= 32'd0;
            cstate_reg <= C_IDLE;
            cmd_layer_reg <= {LI{1'b0}};
            scan_reg <= {LI{1'b0}};
            stream_start_reg <= 1'b0;
            stream_next_reg <= 1'b0;
            after_reg <= 16'd0;
            slot_written_reg <= 1'b0;
            for (li = 0; li < MAX_LAYERS; li = li + 1) begin
                for (fi = 0; fi < 4; fi = fi + 1) base_reg[li][fi] <= 32'd0;
                len_reg[li] <= 32'd0;
                chunk_reg[li] <= 16'd0;
                opt_reg[li] <= 4'd0;
                dtype_reg[li] <= 2'd0;
                step_reg[li] <= 16'd0;
                slot_reg[li] <= 4'd0;
                refusal_reg[li] <= 8'd0;
                done_reg[li] <= 16'd0;
            end
            for (si = 0; si < NUM_SLOTS; si = si + 1) begin
                sflags_reg[si] <= 6'd0;
                for (fi = 0; fi < 10; fi = fi + 1) sconst_reg[si][fi] <= 32'd0;
            end
        end
    end

    // ---- read data, registered: valid the cycle after the request ----
    reg [31:0] rdata_reg, rdata_next;
    always @* begin
        rdata_next = 32'h0;
        if (widx < 10'h010) begin
            case (widx[3:0])
                4'h0: rdata_next = ID_WORD;
                4'h1: rdata_next = {NUM_SLOTS[7:0], MAX_LAYERS[7:0], BEAT_WORDS[7:0], LANES[7:0]};
                4'h2: rdata_next = STORE_BYTES;
                4'h3: rdata_next = {31'd0, trace_en_reg};
                4'h4: rdata_next = {8'd0, DESC_DEPTH[7:0], inflight, 5'd0, stream_busy, inflight != 8'd0, cmd_pending};
                4'h6: rdata_next = {12'd0, err_layer_reg, err_code_reg};
                4'h7: rdata_next = {err_step_reg, err_chunk_reg};
                4'h8: rdata_next = err_count_reg;
                4'h9: rdata_next = ts[31:0];
                4'ha: rdata_next = ts_hi_reg;
                default: rdata_next = 32'h0;
            endcase
        end else if (widx >= 10'h010 && widx < 10'h040) begin
            if ({22'd0, widx - 10'h010} < NUM_COUNTERS) rdata_next = counters[32 * (widx - 10'h010) +: 32];
        end else if (slot_ok) begin
            if (widx[3:0] == 4'd0) rdata_next = {26'd0, sflags_reg[w_slot]};
            else rdata_next = sconst_reg[w_slot][widx[3:0] - 4'd1];
        end else if (layer_ok) begin
            case (w_field)
                4'd0, 4'd1, 4'd2, 4'd3: rdata_next = base_reg[wl][w_field[1:0]];
                4'd4: rdata_next = len_reg[wl];
                4'd5: rdata_next = {16'd0, chunk_reg[wl]};
                4'd6: rdata_next = {26'd0, dtype_reg[wl], opt_reg[wl]};
                4'd7: rdata_next = {12'd0, slot_reg[wl], step_reg[wl]};
                4'd8: rdata_next = {16'd0, refusal_reg[wl], 5'd0, wl_pending, layer_busy[wl], enabled_reg[wl]};
                4'd9: rdata_next = {16'd0, done_reg[wl]};
                default: rdata_next = 32'h0;
            endcase
        end
    end

    always @(posedge clk) begin
        if (rst) rdata_reg <= 32'h0;
        else if (rd) rdata_reg <= rdata_next;
    end
    assign reg_rdata = rdata_reg;

endmodule

`default_nettype wire
