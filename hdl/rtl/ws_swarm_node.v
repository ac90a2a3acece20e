`default_nettype none

// ws_swarm_node: one SwarmX switch node, one upstream port and N_PORTS downstream ports.
//
// SwarmX sits between MemoryX and the wafers (docs/architecture.md "SwarmX", docs/swarmx.md).
// Nodes cascade: the upstream port of one plugs into a downstream port of another.
//
// Downlink (s_up -> m_dn): every flit goes to all active ports at once, through one skid
// FIFO per port (SKID_DEPTH words). s_up_ready is the AND of the active ports' FIFOs' room, so
// ports may drift up to SKID_DEPTH flits apart and one slow port throttles the stream without
// loss or deadlock.
//
// Uplink (s_dn -> m_up): each port's flits wait in their own skid FIFO. The aligner waits for
// the head flit of every active port, checks that all headers (kind, layer, step, chunk,
// index) and `last` agree and that they are gradients, and then pops them together into the
// adder tree (ws_swarm_addtree: FPnew, the fixed order of ws_common::golden::swarm). In the
// bf16 wire formats a second tree sums the odd lane. The result is optionally scaled at the
// end (one FPnew multiply; cfg_scale_en = 0 multiplies by 1.0, which changes nothing), and
// rounded to bf16 for WS_DTYPE_BF16_OUT. A credit count keeps the pipeline from ever holding
// more than the output FIFO can take, so the pipeline never stalls and never drops.
//
// Faults (never summed): a header or `last` that differs from its peers', a non-gradient
// flit, an error flit from a child node, or an active port that has no flit for cfg_timeout
// cycles while another active port has one. The node then sends one error flit up in place
// of the sum (header: kind ERROR with the aborted chunk's layer/step/chunk/index; payload:
// code, hop count and port path, see ws_flit.vh) and aborts the chunk: every active port
// discards the rest of the chunk it is in, through its next `last` (a port that had no flit
// discards the aborted chunk's flits when they come; one already at the start of a later
// chunk keeps it). Error flits from children are forwarded with this node's port id shifted
// into the path.
//
// Configuration (cfg_*) is taken at chunk boundaries only (after a `last`, an abort, or
// reset), separately for each direction, so a chunk is never split between two port masks.
// Masked downstream ports receive nothing and have their uplink flits discarded (counted).
// The CSR-facing ports are plain inputs and outputs; counters are CNT_W = 32 bits and wrap.
module ws_swarm_node #(
    parameter N_PORTS = 4,      // downstream ports, 2..16
    parameter SKID_DEPTH = 16,  // words per port FIFO, each direction; a power of two >= 2
    parameter ADD_REGS = 3,     // pipeline registers per FPnew adder (cycles per tree level), >= 1
    parameter MUL_REGS = 3,     // pipeline registers of the FPnew scale multiplier, >= 0
    parameter BF16_EN = 1,      // 1: build the odd-lane tree for the bf16 wire formats
    parameter SCALE_EN = 1      // 1: build the scale multiplier (needed at the root only)
) (
    input  wire                     clk,
    input  wire                     rst,

    // Upstream port, downlink: flits from MemoryX or the parent node.
    input  wire                     s_up_valid,
    output wire                     s_up_ready,
    input  wire [31:0]              s_up_data,
    input  wire                     s_up_last,
    input  wire [63:0]              s_up_user,

    // Upstream port, uplink: reduced flits toward MemoryX or the parent node.
    output wire                     m_up_valid,
    input  wire                     m_up_ready,
    output wire [31:0]              m_up_data,
    output wire                     m_up_last,
    output wire [63:0]              m_up_user,

    // Downstream ports, downlink (port p in bits [p*W +: W]).
    output wire [N_PORTS-1:0]       m_dn_valid,
    input  wire [N_PORTS-1:0]       m_dn_ready,
    output wire [N_PORTS*32-1:0]    m_dn_data,
    output wire [N_PORTS-1:0]       m_dn_last,
    output wire [N_PORTS*64-1:0]    m_dn_user,

    // Downstream ports, uplink.
    input  wire [N_PORTS-1:0]       s_dn_valid,
    output wire [N_PORTS-1:0]       s_dn_ready,
    input  wire [N_PORTS*32-1:0]    s_dn_data,
    input  wire [N_PORTS-1:0]       s_dn_last,
    input  wire [N_PORTS*64-1:0]    s_dn_user,

    // Configuration (CSR fields, firmware-written).
    input  wire [N_PORTS-1:0]       cfg_port_mask,  // active ports
    input  wire [1:0]               cfg_dtype,      // WS_DTYPE_*; 3 (reserved) acts as FP32
    input  wire                     cfg_scale_en,   // multiply each sum by cfg_scale
    input  wire [31:0]              cfg_scale,      // binary32, e.g. 1/(active ports)
    input  wire [31:0]              cfg_timeout,    // cycles an active port may lag; 0 = never
    input  wire                     cnt_clear,      // pulse: zero the counters and stat_lat_max

    // Status.
    output wire [N_PORTS-1:0]       stat_up_mask,   // port mask the uplink uses now
    output wire [N_PORTS-1:0]       stat_dn_mask,   // port mask the downlink uses now
    output wire [N_PORTS-1:0]       stat_dropping,  // ports discarding an aborted chunk
    output wire [N_PORTS*32-1:0]    cnt_up_flits,   // flits taken on s_dn, per port
    output wire [N_PORTS*32-1:0]    cnt_dn_flits,   // flits delivered on m_dn, per port
    output wire [N_PORTS*32-1:0]    cnt_up_wait,    // cycles the aligner waited for this port
    output wire [N_PORTS*32-1:0]    cnt_dn_stall,   // cycles m_dn valid and not ready
    output wire [31:0]              cnt_bcast,      // flits taken on s_up
    output wire [31:0]              cnt_reduced,    // flits sent on m_up (error flits included)
    output wire [31:0]              cnt_dropped,    // uplink flits discarded (masked or aborted)
    output wire [31:0]              cnt_errors,     // chunks aborted (error flits sent)
    output wire [31:0]              stat_lat_last,  // latency of the last reduced flit, cycles
    output wire [31:0]              stat_lat_max,   // largest such latency since the clear

    // Error events: a one-cycle pulse per abort, and the last error flit sent.
    output wire                     err_pulse,
    output wire [3:0]               err_code,           // WS_ERR_* of this abort
    output wire [3:0]               err_port,           // the port blamed
    output wire [N_PORTS-1:0]       err_timeout_ports,  // ports without a flit at a timeout
    output wire [N_PORTS-1:0]       err_mismatch_ports, // ports whose header differed
    output wire [N_PORTS-1:0]       err_forward_ports,  // port whose error flit was forwarded
    output wire [31:0]              err_last_payload,
    output wire [63:0]              err_last_user
);

    `include "ws_flit.vh"

    localparam LANES = (BF16_EN != 0) ? 2 : 1;
    localparam LEVELS = $clog2(N_PORTS);
    // Cycles from a fire of the aligner to the push of its result into the output FIFO.
    localparam PIPE_LATENCY = 1 + LEVELS * ADD_REGS + ((SCALE_EN != 0) ? MUL_REGS : 0);
    // Room for everything in flight plus the FIFO's own two-cycle latency: full rate.
    localparam OUT_DEPTH = 1 << $clog2(PIPE_LATENCY + 4);
    localparam SB_DEPTH = 1 << $clog2(PIPE_LATENCY + 2);
    localparam OUT_LEVEL_W = $clog2(OUT_DEPTH + 1);

    // A flit in a FIFO: {user, last, data}.
    localparam FLIT_W = 97;
    // The chunk key {chunk, step, layer} is user[47:4].
    localparam KEY_LSB = WS_FLIT_LAYER_LSB;
    localparam KEY_W = WS_FLIT_LAYER_WIDTH + WS_FLIT_STEP_WIDTH + WS_FLIT_CHUNK_WIDTH;
    // Sideband of a pipeline entry: {ts, dtype, is_err, err_payload, last, user}.
    localparam SB_W = 16 + 2 + 1 + 32 + 1 + 64;
    // An output FIFO entry: {ts, two, data1, data0, last, user}.
    localparam OUT_W = 16 + 1 + 32 + 32 + 1 + 64;

    initial begin
        if (N_PORTS < 2 || N_PORTS > 16) $error("ws_swarm_node: N_PORTS must be 2..16");
        if (SKID_DEPTH < 2 || (SKID_DEPTH & (SKID_DEPTH - 1)) != 0)
            $error("ws_swarm_node: SKID_DEPTH must be a power of two >= 2");
        if (ADD_REGS < 1) $error("ws_swarm_node: ADD_REGS must be >= 1");
        if (MUL_REGS < 0) $error("ws_swarm_node: MUL_REGS must be >= 0");
        if (BF16_EN != 0 && BF16_EN != 1) $error("ws_swarm_node: BF16_EN must be 0 or 1");
        if (SCALE_EN != 0 && SCALE_EN != 1) $error("ws_swarm_node: SCALE_EN must be 0 or 1");
    end

    function [15:0] to_bf16(input [31:0] x);
        begin
            // ws_common::golden::fp::f32_to_bf16: RNE on bit 16, any NaN -> canonical.
            if (x[30:23] == 8'hff && x[22:0] != 23'd0) begin
                to_bf16 = WS_BF16_CANONICAL_NAN;
            end else begin
                to_bf16 = x[31:16] + {15'd0, (x[15] && (x[16] || x[14:0] != 15'd0))};
            end
        end
    endfunction

    // ------------------------------------------------------------------ downlink

    reg                 dn_boundary_reg;
    reg [N_PORTS-1:0]   dn_mask_reg;
    wire [N_PORTS-1:0]  dn_mask_eff = dn_boundary_reg ? cfg_port_mask : dn_mask_reg;
    wire [N_PORTS-1:0]  dn_room;
    wire                s_up_fire = s_up_valid && s_up_ready;

    assign s_up_ready = (dn_mask_eff != {N_PORTS{1'b0}}) && ((dn_room | ~dn_mask_eff) == {N_PORTS{1'b1}});
    assign stat_dn_mask = dn_mask_reg;

    // ------------------------------------------------------------------ per-port FIFOs

    wire [N_PORTS*FLIT_W-1:0]   up_head;
    wire [N_PORTS-1:0]          up_head_valid;
    reg  [N_PORTS-1:0]          up_pop;

    genvar g;
    generate
        for (g = 0; g < N_PORTS; g = g + 1) begin : gen_port
            wire [$clog2(SKID_DEPTH+1)-1:0] unused_dn_level;
            wire [$clog2(SKID_DEPTH+1)-1:0] unused_up_level;
            wire [FLIT_W-1:0] dn_out;

            ws_fifo #(
                .DEPTH(SKID_DEPTH),
                .WIDTH(FLIT_W)
            ) dn_fifo_inst (
                .clk(clk),
                .rst(rst),
                .s_valid(s_up_fire && dn_mask_eff[g]),
                .s_ready(dn_room[g]),
                .s_data({s_up_user, s_up_last, s_up_data}),
                .m_valid(m_dn_valid[g]),
                .m_ready(m_dn_ready[g]),
                .m_data(dn_out),
                .level(unused_dn_level)
            );

            assign m_dn_data[g*32 +: 32] = dn_out[31:0];
            assign m_dn_last[g] = dn_out[32];
            assign m_dn_user[g*64 +: 64] = dn_out[96:33];

            ws_fifo #(
                .DEPTH(SKID_DEPTH),
                .WIDTH(FLIT_W)
            ) up_fifo_inst (
                .clk(clk),
                .rst(rst),
                .s_valid(s_dn_valid[g]),
                .s_ready(s_dn_ready[g]),
                .s_data({s_dn_user[g*64 +: 64], s_dn_last[g], s_dn_data[g*32 +: 32]}),
                .m_valid(up_head_valid[g]),
                .m_ready(up_pop[g]),
                .m_data(up_head[g*FLIT_W +: FLIT_W]),
                .level(unused_up_level)
            );
        end
    endgenerate

    // ------------------------------------------------------------------ aligner

    reg                 up_boundary_reg;
    reg [N_PORTS-1:0]   up_mask_reg;
    reg [1:0]           dtype_reg;
    reg                 scale_en_reg;
    reg [31:0]          scale_reg;
    reg [N_PORTS-1:0]   dropping_reg, dropping_next;
    reg [N_PORTS-1:0]   drop_all_reg, drop_all_next;
    reg [KEY_W-1:0]     drop_key_reg [0:N_PORTS-1];
    reg [KEY_W-1:0]     drop_key_next [0:N_PORTS-1];
    reg [31:0]          wait_reg, wait_next;
    reg [15:0]          now_reg;
    reg [OUT_LEVEL_W-1:0] inflight_reg, inflight_next;
    wire [OUT_LEVEL_W-1:0] out_level;

    // Aborts take three steps off the fire path (they are rare; nothing pops a present head
    // meanwhile, so the heads they look at stay put): DETECT registers which ports are present,
    // disagree or lag; DECIDE picks the port to blame and builds the error flit; EXEC waits for
    // credit, sends it and sets every port's discard state.
    localparam [1:0] AB_IDLE = 2'd0;
    localparam [1:0] AB_DECIDE = 2'd1;
    localparam [1:0] AB_EXEC = 2'd2;
    // What the abort is about.
    localparam [1:0] AB_FWD = 2'd0;     // an error flit from a child
    localparam [1:0] AB_KIND = 2'd1;    // a head that is not a gradient
    localparam [1:0] AB_MIS = 2'd2;     // headers differ
    localparam [1:0] AB_TO = 2'd3;      // a port lags past the timeout

    reg [1:0]           ab_state_reg;
    reg [1:0]           ab_type_reg;
    reg [N_PORTS-1:0]   det_present_reg;
    reg [N_PORTS-1:0]   det_err_reg;
    reg [N_PORTS-1:0]   det_kind_reg;
    reg [N_PORTS-1:0]   det_diff_reg;
    reg [N_PORTS-1:0]   det_missing_reg;
    reg [N_PORTS-1:0]   ab_err_onehot_reg;
    reg [N_PORTS-1:0]   ab_ports_reg;
    reg [3:0]           ab_code_reg;
    reg [3:0]           ab_port_reg;
    reg [31:0]          ab_payload_reg;
    reg [63:0]          ab_user_reg;

    wire                ab_idle = ab_state_reg == AB_IDLE;

    // Configuration in effect: the live inputs at a chunk boundary, the latched ones inside.
    // The mask also holds while an abort is in progress.
    wire [N_PORTS-1:0]  active = (up_boundary_reg && ab_idle) ? cfg_port_mask : up_mask_reg;
    wire [1:0]          cfg_dtype_ok = (BF16_EN == 0 || cfg_dtype == 2'd3) ? WS_DTYPE_FP32 : cfg_dtype;
    wire [1:0]          dtype_eff = up_boundary_reg ? cfg_dtype_ok : dtype_reg;
    wire                scale_en_eff = up_boundary_reg ? cfg_scale_en : scale_en_reg;
    wire [31:0]         scale_eff = up_boundary_reg ? cfg_scale : scale_reg;

    reg [N_PORTS-1:0]   key_hit;
    reg [N_PORTS-1:0]   discard;
    reg [N_PORTS-1:0]   present;
    reg [N_PORTS-1:0]   err_head;
    reg [N_PORTS-1:0]   kind_bad;
    reg [N_PORTS-1:0]   diff;
    reg [N_PORTS-1:0]   missing;
    reg [N_PORTS-1:0]   lead_onehot;
    reg [63:0]          lead_user;
    reg                 lead_last;
    reg                 all_present;
    reg                 any_present;
    reg                 any_err;
    reg                 any_kind_bad;
    reg                 mismatch;
    reg                 timeout_hit;
    reg                 credit;
    reg                 fire;
    reg                 detect;
    reg [1:0]           detect_type;
    reg                 abort;
    reg [4:0]           discard_count;
    reg [N_PORTS*32-1:0] lane0_in;
    reg [N_PORTS*32-1:0] lane1_in;

    // DECIDE.
    reg [N_PORTS-1:0]   ref_onehot;
    reg [N_PORTS-1:0]   err_onehot;
    reg [N_PORTS-1:0]   kind_onehot;
    reg [N_PORTS-1:0]   miss_onehot;
    reg [N_PORTS-1:0]   diff_onehot;
    reg [N_PORTS-1:0]   abort_src_onehot;
    reg [3:0]           ref_port;
    reg [3:0]           err_src_port;
    reg [3:0]           kind_port;
    reg [3:0]           diff_port;
    reg [3:0]           miss_port;
    reg                 blame_ref;
    reg [4:0]           active_count;
    reg [63:0]          abort_src_user;
    reg [63:0]          err_src_user;
    reg [31:0]          err_src_data;
    reg [3:0]           blame_port;
    reg [3:0]           blame_code;
    reg [31:0]          err_payload;
    reg [63:0]          err_user;
    reg [N_PORTS-1:0]   blame_ports;

    // EXEC.
    reg [KEY_W-1:0]     abort_key;
    reg [15:0]          abort_index;

    integer p;
    reg [63:0]          h_user;
    reg [31:0]          h_data;
    reg                 h_last;

    // ---- DETECT and fire: presence, header agreement, timeout.
    always @* begin
        key_hit = {N_PORTS{1'b0}};
        discard = {N_PORTS{1'b0}};
        present = {N_PORTS{1'b0}};
        err_head = {N_PORTS{1'b0}};
        kind_bad = {N_PORTS{1'b0}};
        discard_count = 5'd0;
        for (p = 0; p < N_PORTS; p = p + 1) begin
            h_user = up_head[p*FLIT_W + 33 +: 64];
            key_hit[p] = drop_all_reg[p] || h_user[KEY_LSB +: KEY_W] == drop_key_reg[p];
            discard[p] = up_head_valid[p] && (!active[p] || (dropping_reg[p] && key_hit[p]));
            present[p] = up_head_valid[p] && active[p] && !(dropping_reg[p] && key_hit[p]);
            err_head[p] = present[p] && h_user[WS_FLIT_KIND_LSB +: WS_FLIT_KIND_WIDTH] == WS_KIND_ERROR;
            kind_bad[p] = present[p] && h_user[WS_FLIT_KIND_LSB +: WS_FLIT_KIND_WIDTH] != WS_KIND_GRADIENT;
            discard_count = discard_count + {4'd0, discard[p]};
        end
        missing = active & ~present;
        all_present = active != {N_PORTS{1'b0}} && missing == {N_PORTS{1'b0}};
        any_present = present != {N_PORTS{1'b0}};
        any_err = err_head != {N_PORTS{1'b0}};
        any_kind_bad = kind_bad != {N_PORTS{1'b0}};

        // Every head is compared with the lowest active port's: a choice that depends on the
        // mask alone, not on which heads are there (when all are, it is the lowest present).
        // Lowest-set-bit one-hots (x & -x) and AND-OR muxes keep the logic shallow.
        lead_onehot = active & (~active + {{(N_PORTS-1){1'b0}}, 1'b1});
        lead_user = 64'd0;
        lead_last = 1'b0;
        for (p = 0; p < N_PORTS; p = p + 1) begin
            lead_user = lead_user | ({64{lead_onehot[p]}} & up_head[p*FLIT_W + 33 +: 64]);
            lead_last = lead_last | (lead_onehot[p] & up_head[p*FLIT_W + 32]);
        end
        for (p = 0; p < N_PORTS; p = p + 1) begin
            h_user = up_head[p*FLIT_W + 33 +: 64];
            h_last = up_head[p*FLIT_W + 32];
            diff[p] = present[p] && (h_user != lead_user || h_last != lead_last);
        end

        credit = ({1'b0, out_level} + {1'b0, inflight_reg}) < OUT_DEPTH;
        mismatch = all_present && !any_err && (any_kind_bad || diff != {N_PORTS{1'b0}});
        timeout_hit = any_present && !all_present && !any_err && cfg_timeout != 32'd0 &&
                      wait_reg >= cfg_timeout;
        fire = ab_idle && all_present && !any_err && !mismatch && credit;
        detect = ab_idle && (any_err || mismatch || timeout_hit);
        detect_type = any_err ? AB_FWD : any_kind_bad && mismatch ? AB_KIND : mismatch ? AB_MIS : AB_TO;
        abort = ab_state_reg == AB_EXEC && credit;

        wait_next = (fire || abort || !any_present) ? 32'd0 :
                    (wait_reg == 32'hffff_ffff) ? wait_reg : wait_reg + 32'd1;

        // Tree operands: masked ports are -0.0, the identity; bf16 lanes widen exactly.
        for (p = 0; p < N_PORTS; p = p + 1) begin
            h_data = up_head[p*FLIT_W +: 32];
            if (!active[p]) begin
                lane0_in[p*32 +: 32] = WS_FP32_NEG_ZERO;
                lane1_in[p*32 +: 32] = WS_FP32_NEG_ZERO;
            end else if (dtype_eff != WS_DTYPE_FP32) begin
                lane0_in[p*32 +: 32] = {h_data[15:0], 16'h0000};
                lane1_in[p*32 +: 32] = {h_data[31:16], 16'h0000};
            end else begin
                lane0_in[p*32 +: 32] = h_data;
                lane1_in[p*32 +: 32] = WS_FP32_NEG_ZERO;
            end
        end
    end

    // ---- DECIDE: the port to blame and the error flit, from the registered detection.
    always @* begin
        ref_onehot = det_present_reg & (~det_present_reg + {{(N_PORTS-1){1'b0}}, 1'b1});
        err_onehot = det_err_reg & (~det_err_reg + {{(N_PORTS-1){1'b0}}, 1'b1});
        kind_onehot = det_kind_reg & (~det_kind_reg + {{(N_PORTS-1){1'b0}}, 1'b1});
        miss_onehot = det_missing_reg & (~det_missing_reg + {{(N_PORTS-1){1'b0}}, 1'b1});
        diff_onehot = det_diff_reg & (~det_diff_reg + {{(N_PORTS-1){1'b0}}, 1'b1});
        ref_port = 4'd0;
        err_src_port = 4'd0;
        kind_port = 4'd0;
        miss_port = 4'd0;
        diff_port = 4'd0;
        active_count = 5'd0;
        err_src_user = 64'd0;
        err_src_data = 32'd0;
        for (p = 0; p < N_PORTS; p = p + 1) begin
            ref_port = ref_port | ({4{ref_onehot[p]}} & p[3:0]);
            err_src_port = err_src_port | ({4{err_onehot[p]}} & p[3:0]);
            kind_port = kind_port | ({4{kind_onehot[p]}} & p[3:0]);
            miss_port = miss_port | ({4{miss_onehot[p]}} & p[3:0]);
            diff_port = diff_port | ({4{diff_onehot[p]}} & p[3:0]);
            active_count = active_count + {4'd0, up_mask_reg[p]};
            err_src_user = err_src_user | ({64{err_onehot[p]}} & up_head[p*FLIT_W + 33 +: 64]);
            err_src_data = err_src_data | ({32{err_onehot[p]}} & up_head[p*FLIT_W +: 32]);
        end
        // When every other active port disagrees with the reference (and there are at least
        // three), the reference is the odd one out: blame it, and abort the chunk the others
        // are in (the lowest differing port's).
        blame_ref = det_diff_reg == (up_mask_reg & ~ref_onehot) && active_count >= 5'd3;
        abort_src_onehot = blame_ref ? diff_onehot : ref_onehot;
        abort_src_user = 64'd0;
        for (p = 0; p < N_PORTS; p = p + 1) begin
            abort_src_user = abort_src_user | ({64{abort_src_onehot[p]}} & up_head[p*FLIT_W + 33 +: 64]);
        end
        case (ab_type_reg)
            AB_FWD: begin
                blame_port = err_src_port;
                blame_code = err_src_data[WS_ERR_CODE_LSB +: WS_ERR_CODE_WIDTH];
                blame_ports = err_onehot;
            end
            AB_KIND: begin
                blame_port = kind_port;
                blame_code = WS_ERR_KIND;
                blame_ports = det_kind_reg;
            end
            AB_MIS: begin
                blame_port = blame_ref ? ref_port : diff_port;
                blame_code = WS_ERR_MISMATCH;
                blame_ports = det_diff_reg;
            end
            default: begin
                blame_port = miss_port;
                blame_code = WS_ERR_TIMEOUT;
                blame_ports = det_missing_reg;
            end
        endcase
        if (ab_type_reg == AB_FWD) begin
            // Forward: shift our port into the path, count the hop (saturating at 15).
            err_payload = {err_src_data[WS_ERR_PATH_LSB +: WS_ERR_PATH_WIDTH - 4], err_src_port,
                           (err_src_data[WS_ERR_HOPS_LSB +: WS_ERR_HOPS_WIDTH] == 4'hf) ? 4'hf :
                           err_src_data[WS_ERR_HOPS_LSB +: WS_ERR_HOPS_WIDTH] + 4'd1,
                           err_src_data[WS_ERR_CODE_LSB +: WS_ERR_CODE_WIDTH]};
            err_user = {err_src_user[63:WS_FLIT_KIND_WIDTH], WS_KIND_ERROR};
        end else begin
            err_payload = {20'd0, blame_port, 4'd1, blame_code};
            err_user = {abort_src_user[63:WS_FLIT_KIND_WIDTH], WS_KIND_ERROR};
        end
    end

    // ---- EXEC, and the pops and discard state of every cycle.
    always @* begin
        // Pops: discarded heads always; every active head on a fire; the error flit forwarded.
        up_pop = discard;
        if (fire) up_pop = up_pop | active;
        if (abort && ab_type_reg == AB_FWD) up_pop = up_pop | ab_err_onehot_reg;

        // Discarding on an abort. A present port discards the rest of the chunk it is in,
        // through its next `last` (drop_all), unless it already sits at index 0 of another
        // chunk while the abort happened mid-chunk: then it lost the aborted chunk's tail and
        // is left alone. A port without a flit discards the aborted chunk's flits, matched by
        // (layer, step, chunk), when they come. Error flits waiting on other ports are kept
        // (they are forwarded next). Discarding ends with a discarded `last`, with a head of
        // another chunk (matched mode), or when the port is masked.
        abort_key = ab_user_reg[KEY_LSB +: KEY_W];
        abort_index = ab_user_reg[WS_FLIT_INDEX_LSB +: WS_FLIT_INDEX_WIDTH];
        for (p = 0; p < N_PORTS; p = p + 1) begin
            h_user = up_head[p*FLIT_W + 33 +: 64];
            h_last = up_head[p*FLIT_W + 32];
            dropping_next[p] = dropping_reg[p];
            drop_all_next[p] = drop_all_reg[p];
            drop_key_next[p] = drop_key_reg[p];
            if (!active[p]) begin
                dropping_next[p] = 1'b0;
            end else if (discard[p] && h_last) begin
                dropping_next[p] = 1'b0;
            end else if (present[p]) begin
                dropping_next[p] = 1'b0;
            end
            if (abort && active[p] && !det_err_reg[p]) begin
                if (!det_present_reg[p]) begin
                    dropping_next[p] = 1'b1;
                    drop_all_next[p] = 1'b0;
                    drop_key_next[p] = abort_key;
                end else if (!(h_user[WS_FLIT_INDEX_LSB +: WS_FLIT_INDEX_WIDTH] == 16'd0 &&
                               abort_index != 16'd0 &&
                               h_user[KEY_LSB +: KEY_W] != abort_key)) begin
                    dropping_next[p] = 1'b1;
                    drop_all_next[p] = 1'b1;
                end
            end
        end
    end

    // The kind of an aborted flit's header is replaced, and a forwarded path's deepest id
    // falls off.
    wire [11:0] unused_err_src = {err_src_user[3:0], abort_src_user[3:0], err_src_data[31:28]};

    // ------------------------------------------------------------------ issue and pipeline

    reg                     issue_valid_reg;
    reg [N_PORTS*32-1:0]    issue_lane0_reg;
    reg [N_PORTS*32-1:0]    issue_lane1_reg;
    reg [31:0]              issue_scale_reg;

    wire                    push_valid;
    wire [SB_W-1:0]         sb_head;
    wire                    unused_sb_valid;
    wire                    unused_sb_ready;
    wire [$clog2(SB_DEPTH+1)-1:0] unused_sb_level;

    wire [15:0] fire_ts = now_reg - wait_reg[15:0];

    ws_fifo #(
        .DEPTH(SB_DEPTH),
        .WIDTH(SB_W)
    ) sb_fifo_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(fire || abort),
        .s_ready(unused_sb_ready),
        .s_data({fire_ts, dtype_eff, abort, ab_payload_reg, fire ? lead_last : 1'b1, fire ? lead_user : ab_user_reg}),
        .m_valid(unused_sb_valid),
        .m_ready(push_valid),
        .m_data(sb_head),
        .level(unused_sb_level)
    );

    wire [LANES-1:0]    tree_valid;
    wire [LANES*32-1:0] tree_sum;
    wire [LANES-1:0]    res_valid;
    wire [LANES*32-1:0] res;

    ws_swarm_addtree #(
        .N_IN(N_PORTS),
        .ADD_REGS(ADD_REGS)
    ) tree0_inst (
        .clk(clk),
        .rst(rst),
        .in_valid(issue_valid_reg),
        .in_data(issue_lane0_reg),
        .out_valid(tree_valid[0]),
        .out_data(tree_sum[31:0])
    );

    generate
        if (LANES == 2) begin : gen_lane1
            ws_swarm_addtree #(
                .N_IN(N_PORTS),
                .ADD_REGS(ADD_REGS)
            ) tree1_inst (
                .clk(clk),
                .rst(rst),
                .in_valid(issue_valid_reg),
                .in_data(issue_lane1_reg),
                .out_valid(tree_valid[1]),
                .out_data(tree_sum[63:32])
            );
        end else begin : gen_no_lane1
            wire [N_PORTS*32-1:0] unused_lane1 = issue_lane1_reg;
        end

        if (SCALE_EN != 0) begin : gen_scale
            // The scale travels with its entry down the tree, so a change at a chunk boundary
            // never reaches the sums of the chunk before.
            localparam TREE_LATENCY = LEVELS * ADD_REGS;
            reg [31:0] scale_pipe_reg [0:TREE_LATENCY-1];
            integer k;

            always @(posedge clk) begin
                scale_pipe_reg[0] <= issue_scale_reg;
                for (k = 1; k < TREE_LATENCY; k = k + 1) begin
                    scale_pipe_reg[k] <= scale_pipe_reg[k - 1];
                end
            end

            genvar ln;
            for (ln = 0; ln < LANES; ln = ln + 1) begin : gen_mul
                ws_swarm_fp32 #(
                    .OP(1),
                    .LATENCY(MUL_REGS)
                ) mul_inst (
                    .clk(clk),
                    .rst(rst),
                    .in_valid(tree_valid[ln]),
                    .in_a(tree_sum[ln*32 +: 32]),
                    .in_b(scale_pipe_reg[TREE_LATENCY-1]),
                    .out_valid(res_valid[ln]),
                    .out_data(res[ln*32 +: 32])
                );
            end
        end else begin : gen_no_scale
            assign res_valid = tree_valid;
            assign res = tree_sum;
            wire [31:0] unused_scale = issue_scale_reg;
        end
    endgenerate

    // Both lanes run in lockstep: lane 0's valid is the pipeline's.
    assign push_valid = res_valid[0];
    wire [LANES-1:0] unused_res_valid = res_valid;

    // ------------------------------------------------------------------ output

    wire [15:0] sb_ts = sb_head[SB_W-1 -: 16];
    wire [1:0]  sb_dtype = sb_head[SB_W-17 -: 2];
    wire        sb_err = sb_head[SB_W-19];
    wire [31:0] sb_err_payload = sb_head[SB_W-20 -: 32];
    wire        sb_last = sb_head[64];
    wire [63:0] sb_user = sb_head[63:0];

    wire [31:0] res0 = res[31:0];
    wire [31:0] res1 = (LANES == 2) ? res[LANES*32-1 -: 32] : WS_FP32_NEG_ZERO;
    wire        push_two = !sb_err && sb_dtype == WS_DTYPE_BF16;
    wire [31:0] push_data0 = sb_err ? sb_err_payload :
                             (sb_dtype == WS_DTYPE_BF16_OUT) ? {to_bf16(res1), to_bf16(res0)} : res0;

    wire                out_valid;
    wire                out_ready;
    wire [OUT_W-1:0]    out_head;
    wire                unused_out_s_ready;

    ws_fifo #(
        .DEPTH(OUT_DEPTH),
        .WIDTH(OUT_W)
    ) out_fifo_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(push_valid),
        .s_ready(unused_out_s_ready),
        .s_data({sb_ts, push_two, res1, push_data0, sb_last, sb_user}),
        .m_valid(out_valid),
        .m_ready(out_ready),
        .m_data(out_head),
        .level(out_level)
    );

    wire [15:0] out_ts = out_head[OUT_W-1 -: 16];
    wire        out_two = out_head[OUT_W-17];
    wire [31:0] out_data1 = out_head[OUT_W-18 -: 32];
    wire [31:0] out_data0 = out_head[OUT_W-50 -: 32];
    wire        out_last = out_head[64];
    wire [63:0] out_user = out_head[63:0];

    reg phase_reg;

    assign m_up_valid = out_valid;
    assign m_up_data = phase_reg ? out_data1 : out_data0;
    // Two fp32 flits per bf16 flit in: flit index i becomes 2i and 2i + 1.
    assign m_up_user = out_two ?
        {out_user[WS_FLIT_INDEX_LSB +: WS_FLIT_INDEX_WIDTH - 1], phase_reg, out_user[WS_FLIT_INDEX_LSB-1:0]} :
        out_user;
    assign m_up_last = out_last && (!out_two || phase_reg);
    assign out_ready = m_up_ready && (!out_two || phase_reg);

    wire m_up_fire = m_up_valid && m_up_ready;
    wire [15:0] lat_now = now_reg - out_ts;

    // ------------------------------------------------------------------ counters

    reg [31:0] cnt_up_flits_reg [0:N_PORTS-1];
    reg [31:0] cnt_dn_flits_reg [0:N_PORTS-1];
    reg [31:0] cnt_up_wait_reg [0:N_PORTS-1];
    reg [31:0] cnt_dn_stall_reg [0:N_PORTS-1];
    reg [31:0] cnt_bcast_reg;
    reg [31:0] cnt_reduced_reg;
    reg [31:0] cnt_dropped_reg;
    reg [31:0] cnt_errors_reg;
    reg [31:0] lat_last_reg;
    reg [31:0] lat_max_reg;

    reg                 err_pulse_reg;
    reg [3:0]           err_code_reg;
    reg [3:0]           err_port_reg;
    reg [N_PORTS-1:0]   err_timeout_ports_reg;
    reg [N_PORTS-1:0]   err_mismatch_ports_reg;
    reg [N_PORTS-1:0]   err_forward_ports_reg;
    reg [31:0]          err_last_payload_reg;
    reg [63:0]          err_last_user_reg;

    generate
        for (g = 0; g < N_PORTS; g = g + 1) begin : gen_cnt_out
            assign cnt_up_flits[g*32 +: 32] = cnt_up_flits_reg[g];
            assign cnt_dn_flits[g*32 +: 32] = cnt_dn_flits_reg[g];
            assign cnt_up_wait[g*32 +: 32] = cnt_up_wait_reg[g];
            assign cnt_dn_stall[g*32 +: 32] = cnt_dn_stall_reg[g];
        end
    endgenerate

    assign stat_up_mask = up_mask_reg;
    assign stat_dropping = dropping_reg;
    assign cnt_bcast = cnt_bcast_reg;
    assign cnt_reduced = cnt_reduced_reg;
    assign cnt_dropped = cnt_dropped_reg;
    assign cnt_errors = cnt_errors_reg;
    assign stat_lat_last = lat_last_reg;
    assign stat_lat_max = lat_max_reg;
    assign err_pulse = err_pulse_reg;
    assign err_code = err_code_reg;
    assign err_port = err_port_reg;
    assign err_timeout_ports = err_timeout_ports_reg;
    assign err_mismatch_ports = err_mismatch_ports_reg;
    assign err_forward_ports = err_forward_ports_reg;
    assign err_last_payload = err_last_payload_reg;
    assign err_last_user = err_last_user_reg;

    always @* begin
        inflight_next = inflight_reg + {{(OUT_LEVEL_W-1){1'b0}}, (fire || abort)}
                        - {{(OUT_LEVEL_W-1){1'b0}}, push_valid};
    end

    // ------------------------------------------------------------------ registers

    integer q;

    always @(posedge clk) begin
        now_reg <= now_reg + 16'd1;

        // Downlink boundary and mask.
        dn_mask_reg <= dn_mask_eff;
        if (s_up_fire) dn_boundary_reg <= s_up_last;

        // Uplink configuration, latched at chunk boundaries.
        up_mask_reg <= active;
        dtype_reg <= dtype_eff;
        scale_en_reg <= scale_en_eff;
        scale_reg <= scale_eff;
        if (fire) begin
            up_boundary_reg <= lead_last;
        end else if (abort) begin
            up_boundary_reg <= 1'b1;
        end

        // The abort sequence.
        case (ab_state_reg)
            AB_IDLE: begin
                if (detect) begin
                    ab_state_reg <= AB_DECIDE;
                    ab_type_reg <= detect_type;
                    det_present_reg <= present;
                    det_err_reg <= err_head;
                    det_kind_reg <= kind_bad;
                    det_diff_reg <= diff;
                    det_missing_reg <= missing;
                end
            end
            AB_DECIDE: begin
                ab_state_reg <= AB_EXEC;
                ab_err_onehot_reg <= err_onehot;
                ab_ports_reg <= blame_ports;
                ab_code_reg <= blame_code;
                ab_port_reg <= blame_port;
                ab_payload_reg <= err_payload;
                ab_user_reg <= err_user;
            end
            default: begin
                if (abort) ab_state_reg <= AB_IDLE;
            end
        endcase

        dropping_reg <= dropping_next;
        drop_all_reg <= drop_all_next;
        for (q = 0; q < N_PORTS; q = q + 1) begin
            drop_key_reg[q] <= drop_key_next[q];
        end
        wait_reg <= wait_next;
        inflight_reg <= inflight_next;

        issue_valid_reg <= fire || abort;
        issue_lane0_reg <= lane0_in;
        issue_lane1_reg <= lane1_in;
        issue_scale_reg <= (SCALE_EN != 0 && scale_en_eff) ? scale_eff : WS_FP32_ONE;

        if (m_up_fire) begin
            phase_reg <= out_two ? !phase_reg : 1'b0;
        end

        // Counters.
        for (q = 0; q < N_PORTS; q = q + 1) begin
            if (s_dn_valid[q] && s_dn_ready[q]) cnt_up_flits_reg[q] <= cnt_up_flits_reg[q] + 32'd1;
            if (m_dn_valid[q] && m_dn_ready[q]) cnt_dn_flits_reg[q] <= cnt_dn_flits_reg[q] + 32'd1;
            if (missing[q] && any_present && !fire && !abort) cnt_up_wait_reg[q] <= cnt_up_wait_reg[q] + 32'd1;
            if (m_dn_valid[q] && !m_dn_ready[q]) cnt_dn_stall_reg[q] <= cnt_dn_stall_reg[q] + 32'd1;
        end
        if (s_up_fire) cnt_bcast_reg <= cnt_bcast_reg + 32'd1;
        if (m_up_fire) cnt_reduced_reg <= cnt_reduced_reg + 32'd1;
        cnt_dropped_reg <= cnt_dropped_reg + {27'd0, discard_count};
        if (abort) cnt_errors_reg <= cnt_errors_reg + 32'd1;
        // Latency of a reduced flit: from the first port's flit at the head of its FIFO to the
        // handshake of the (first) flit of the result on m_up.
        if (m_up_fire && !phase_reg) begin
            lat_last_reg <= {16'd0, lat_now};
            if ({16'd0, lat_now} > lat_max_reg) lat_max_reg <= {16'd0, lat_now};
        end

        // Error events.
        err_pulse_reg <= abort;
        err_timeout_ports_reg <= (abort && ab_type_reg == AB_TO) ? ab_ports_reg : {N_PORTS{1'b0}};
        err_mismatch_ports_reg <= (abort && (ab_type_reg == AB_MIS || ab_type_reg == AB_KIND)) ?
                                  ab_ports_reg : {N_PORTS{1'b0}};
        err_forward_ports_reg <= (abort && ab_type_reg == AB_FWD) ? ab_ports_reg : {N_PORTS{1'b0}};
        if (abort) begin
            err_code_reg <= ab_code_reg;
            err_port_reg <= ab_port_reg;
            err_last_payload_reg <= ab_payload_reg;
            err_last_user_reg <= ab_user_reg;
        end

        if (cnt_clear) begin
            for (q = 0; q < N_PORTS; q = q + 1) begin
                cnt_up_flits_reg[q] <= 32'd0;
                cnt_dn_flits_reg[q] <= 32'd0;
                cnt_up_wait_reg[q] <= 32'd0;
                cnt_dn_stall_reg[q] <= 32'd0;
            end
            cnt_bcast_reg <= 32'd0;
            cnt_reduced_reg <= 32'd0;
            cnt_dropped_reg <= 32'd0;
            cnt_errors_reg <= 32'd0;
            lat_max_reg <= 32'd0;
        end

        if (rst) begin
            now_reg <= 16'd0;
            dn_boundary_reg <= 1'b1;
            dn_mask_reg <= {N_PORTS{1'b0}};
            up_boundary_reg <= 1'b1;
            up_mask_reg <= {N_PORTS{1'b0}};
            dtype_reg <= WS_DTYPE_FP32;
            scale_en_reg <= 1'b0;
            scale_reg <= WS_FP32_ONE;
            dropping_reg <= {N_PORTS{1'b0}};
            drop_all_reg <= {N_PORTS{1'b0}};
            ab_state_reg <= AB_IDLE;
            wait_reg <= 32'd0;
            inflight_reg <= {OUT_LEVEL_W{1'b0}};
            issue_valid_reg <= 1'b0;
            phase_reg <= 1'b0;
            for (q = 0; q < N_PORTS; q = q + 1) begin
                cnt_up_flits_reg[q] <= 32'd0;
                cnt_dn_flits_reg[q] <= 32'd0;
                cnt_up_wait_reg[q] <= 32'd0;
                cnt_dn_stall_reg[q] <= 32'd0;
                drop_key_reg[q] <= {KEY_W{1'b0}};
            end
            cnt_bcast_reg <= 32'd0;
            cnt_reduced_reg <= 32'd0;
            cnt_dropped_reg <= 32'd0;
            cnt_errors_reg <= 32'd0;
            lat_last_reg <= 32'd0;
            lat_max_reg <= 32'd0;
            err_pulse_reg <= 1'b0;
            err_code_reg <= 4'd0;
            err_port_reg <= 4'd0;
            err_timeout_ports_reg <= {N_PORTS{1'b0}};
            err_mismatch_ports_reg <= {N_PORTS{1'b0}};
            err_forward_ports_reg <= {N_PORTS{1'b0}};
            err_last_payload_reg <= 32'd0;
            err_last_user_reg <= 64'd0;
        end
    end

endmodule

`default_nettype wire
