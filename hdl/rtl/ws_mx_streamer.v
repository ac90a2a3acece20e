`default_nettype none

// ws_mx_streamer: MemoryX's weight streamer around the optimizer lanes (issue 5). It owns the
// weight store through an AXI4 master port and has three streams:
//
//   s_grad   reduced-gradient flits in (from SwarmX's uplink; the testbench in block tests)
//   m_wout   weight flits out (to SwarmX's downlink): updated weights, forwarded as they
//            leave the lanes, and weights streamed from the store on a STREAM command
//   m_trace  one record per retired chunk with its hardware timestamps
//
// and the house register port, served by ws_mx_layers (the layer table, constant slots,
// commands, status, errors, counters; its header is the register map).
//
// Streams are LANES flits wide: `_data` holds LANES 32-bit payloads (flit j in bits
// [32j +: 32]), `_keep[j]` marks flit j as present, `_user` is the flit header
// (ws_flit.vh) of flit 0, whose index is the beat's first flit's index; flit j's index is
// that + j. A gradient chunk of n parameters is ceil(n / LANES) beats, all full but the last.
//
// Per chunk (docs/memoryx-store.md has the schedule and a timing diagram):
//   1. The first gradient beat of a chunk is checked against the layer table (layer exists
//      and is enabled, chunk in range, step = the layer's STEP, kind, index 0, the slot's
//      flags fit the optimizer); a bad chunk is dropped to its `last`, counted, and
//      reported in ERR, and touches nothing. A good one gets a descriptor (up to DESC_DEPTH
//      chunks in flight), unless a chunk with the same (layer, chunk) is still in flight
//      (the read-after-write hazard), in which case it waits.
//   2. Per array the optimizer keeps (w; m; v; vmax), a read issuer splits the chunk into
//      INCR bursts (ws_mx_burst) and issues them as far ahead as its read FIFO has room: the
//      next chunk's reads go out while this chunk is in the lanes (prefetch).
//   3. The feeder joins gradient beats with LANES words of every array and feeds the lanes
//      one beat per cycle; it loads the lanes' constants from the chunk's slot when the slot
//      changes (after the lanes drain: the lanes need them stable while busy).
//   4. Each result beat goes, in the same handshake, to the write packers (AW/W bursts of
//      w, m, v, vmax, strobes masking the last beat) and to the weight-out framer
//      (ws_mx_wout, fp32 or bf16 on the wire), so weights leave while the chunk's update is
//      still in progress.
//   5. A chunk retires when its last weight flit has left and every write is acknowledged;
//      then its trace record goes out (when CTRL.TRACE_EN) and its descriptor is free.
//
// Nothing is dropped under backpressure on any port (a dropped chunk is a refused one), and
// no write ever leaves the chunk it was validated for: a gradient chunk whose framing is
// wrong (index, header, early or missing `last`) is counted as FRAMING; beats after an
// early `last` are fed as "kill" beats that write nothing, and beats past the chunk's end
// are dropped to the next `last`.
module ws_mx_streamer #(
    parameter LANES = 1,              // optimizer lanes (parameters per cycle), 1, 2 or 4
    parameter DATA_WIDTH = 256,       // AXI data bits; a power of two, >= 32 * LANES, <= 1024
    parameter STORE_BYTES = 1 << 20,  // bytes of the store, from AXI address 0, <= 2^30
    parameter MAX_LAYERS = 16,        // layer table entries, 1..16
    parameter NUM_SLOTS = 8,          // constant slots, 1..16
    parameter DESC_DEPTH = 8,         // chunks in flight, a power of two in 2..16
    parameter MAX_BURST = 16,         // longest AXI burst, beats, <= 256
    parameter FIRST_BURST = 2,        // longest first burst of a chunk's array, beats
    parameter RD_DEPTH = 32,          // read FIFO per array, beats; a power of two >= MAX_BURST
    parameter WR_DEPTH = 32,          // write FIFO per array, beats; a power of two >= MAX_BURST
    parameter GRAD_DEPTH = 256,       // gradient FIFO, beats; a power of two (the parser's lead on the lanes)
    parameter WOUT_DEPTH = 8,         // weight-out FIFO, beats
    parameter TRACE_DEPTH = 8,        // trace FIFO, records
    parameter FMA_REGS = 2,           // lanes: pipeline registers per FPnew FMA
    parameter DIVSQRT_STEPS = 2,      // lanes: digit-recurrence steps per stage
    parameter LANE_FIFO_DEPTH = 64    // lanes: output FIFO (credit limit)
) (
    input  wire                     clk,
    input  wire                     rst,

    // House register port (ws_mx_layers).
    input  wire                     reg_req,
    input  wire                     reg_we,
    input  wire [11:0]              reg_addr,
    input  wire [31:0]              reg_wdata,
    input  wire [3:0]               reg_be,
    output wire [31:0]              reg_rdata,

    // Gradient flits in.
    input  wire                     s_grad_valid,
    output wire                     s_grad_ready,
    input  wire [32*LANES-1:0]      s_grad_data,
    input  wire [LANES-1:0]         s_grad_keep,
    input  wire                     s_grad_last,
    input  wire [63:0]              s_grad_user,

    // Weight flits out.
    output wire                     m_wout_valid,
    input  wire                     m_wout_ready,
    output wire [32*LANES-1:0]      m_wout_data,
    output wire [LANES-1:0]         m_wout_keep,
    output wire                     m_wout_last,
    output wire [63:0]              m_wout_user,
    output wire                     m_wout_read,     // the beat is a STREAM chunk's (else an update's)

    // Trace records out (docs/memoryx-store.md "Trace records").
    output wire                     m_trace_valid,
    input  wire                     m_trace_ready,
    output wire [159:0]             m_trace_data,
    output wire [63:0]              m_trace_user,

    // AXI4 master to the weight store. IDs name the array (0 w, 1 m, 2 v, 3 vmax).
    output wire [1:0]               m_axi_arid,
    output wire [31:0]              m_axi_araddr,
    output wire [7:0]               m_axi_arlen,
    output wire [2:0]               m_axi_arsize,
    output wire [1:0]               m_axi_arburst,
    output wire                     m_axi_arvalid,
    input  wire                     m_axi_arready,
    input  wire [1:0]               m_axi_rid,
    input  wire [DATA_WIDTH-1:0]    m_axi_rdata,
    input  wire [1:0]               m_axi_rresp,
    input  wire                     m_axi_rlast,
    input  wire                     m_axi_rvalid,
    output wire                     m_axi_rready,
    output wire [1:0]               m_axi_awid,
    output wire [31:0]              m_axi_awaddr,
    output wire [7:0]               m_axi_awlen,
    output wire [2:0]               m_axi_awsize,
    output wire [1:0]               m_axi_awburst,
    output wire                     m_axi_awvalid,
    input  wire                     m_axi_awready,
    output wire [DATA_WIDTH-1:0]    m_axi_wdata,
    output wire [DATA_WIDTH/8-1:0]  m_axi_wstrb,
    output wire                     m_axi_wlast,
    output wire                     m_axi_wvalid,
    input  wire                     m_axi_wready,
    input  wire [1:0]               m_axi_bid,
    input  wire [1:0]               m_axi_bresp,
    input  wire                     m_axi_bvalid,
    output wire                     m_axi_bready
);

    `include "ws_flit.vh"

    localparam L = LANES;
    localparam LOG_L = $clog2(LANES);
    localparam K = DATA_WIDTH / 32;          // words per store beat
    localparam LOG_K = $clog2(K);
    localparam R = K / L;                    // lane beats per store beat
    localparam LOG_R = (R > 1) ? $clog2(R) : 1;
    localparam SB = DATA_WIDTH / 8;          // strobe bits per beat
    localparam DI = $clog2(DESC_DEPTH);
    localparam LI = (MAX_LAYERS > 1) ? $clog2(MAX_LAYERS) : 1;
    localparam NV_W = LOG_L + 1;
    localparam NUM_COUNTERS = 12;
    localparam WQ_DEPTH = 8;                 // bursts whose W beats are owed (AW sent)
    localparam BQ_DEPTH = 16;                // bursts whose B is owed
    localparam USER_W = DI + 2;              // lanes sideband: {kill, last, desc}
    localparam RL_W = $clog2(RD_DEPTH + 1);

    // Gradient errors (docs/memoryx-store.md "Error codes").
    localparam [7:0] E_GRAD_NO_LAYER = 8'h10;
    localparam [7:0] E_GRAD_DISABLED = 8'h11;
    localparam [7:0] E_GRAD_CHUNK = 8'h12;
    localparam [7:0] E_GRAD_STEP = 8'h13;
    localparam [7:0] E_GRAD_KIND = 8'h14;
    localparam [7:0] E_GRAD_INDEX = 8'h15;
    localparam [7:0] E_GRAD_FRAMING = 8'h16;
    localparam [7:0] E_GRAD_CONSTS = 8'h17;
    localparam [7:0] E_BUS = 8'h20;

    localparam FLAG_ADAM = 0;
    localparam FLAG_MOMENTUM = 2;
    localparam FLAG_AMSGRAD = 5;

    initial begin
        if (LANES != 1 && LANES != 2 && LANES != 4) $error("ws_mx_streamer: LANES must be 1, 2 or 4");
        if ((DATA_WIDTH & (DATA_WIDTH - 1)) != 0 || DATA_WIDTH < 32 * LANES || DATA_WIDTH > 1024) begin
            $error("ws_mx_streamer: DATA_WIDTH must be a power of two in 32*LANES..1024");
        end
        if (DESC_DEPTH < 2 || DESC_DEPTH > 16 || (DESC_DEPTH & (DESC_DEPTH - 1)) != 0) begin
            $error("ws_mx_streamer: DESC_DEPTH must be a power of two in 2..16");
        end
        if (RD_DEPTH < MAX_BURST || WR_DEPTH < MAX_BURST) $error("ws_mx_streamer: RD_DEPTH and WR_DEPTH must hold a burst");
        if (RD_DEPTH > 256 || WR_DEPTH > 256) $error("ws_mx_streamer: RD_DEPTH and WR_DEPTH must be <= 256");
        if (STORE_BYTES > (1 << 30)) $error("ws_mx_streamer: STORE_BYTES must be <= 2^30");
    end

    // ------------------------------------------------------------------------------------
    // Cycle counter (the timestamps' clock).
    reg [63:0] ts_reg;
    wire [31:0] ts = ts_reg[31:0];

    // ------------------------------------------------------------------------------------
    // The register block.
    wire [MAX_LAYERS-1:0]    tbl_enabled;
    wire [MAX_LAYERS*32-1:0] tbl_w_base, tbl_m_base, tbl_v_base, tbl_x_base, tbl_len;
    wire [MAX_LAYERS*16-1:0] tbl_chunk, tbl_step;
    wire [MAX_LAYERS*4-1:0]  tbl_opt, tbl_slot;
    wire [MAX_LAYERS-1:0]    tbl_bf16;
    wire [NUM_SLOTS*6-1:0]   slot_flags;
    wire [NUM_SLOTS*320-1:0] slot_consts;
    wire                     slot_written;
    wire [3:0]               slot_written_idx;
    wire                     trace_en;
    wire                     stream_start;
    wire                     stream_next;
    wire [LI-1:0]            stream_layer;
    reg                      st_active_reg;
    reg  [MAX_LAYERS-1:0]    layer_busy;
    wire                     retire_fire;
    reg                      err_valid;
    reg  [7:0]               err_code;
    reg  [11:0]              err_layer;
    reg  [15:0]              err_chunk, err_step;
    reg  [31:0]              cnt_reg [0:NUM_COUNTERS-1];
    wire [NUM_COUNTERS*32-1:0] counters;
    wire [DI:0]              inflight;

    genvar gc;
    generate
        for (gc = 0; gc < NUM_COUNTERS; gc = gc + 1) begin : cnt_flat
            assign counters[32*gc +: 32] = cnt_reg[gc];
        end
    endgenerate

    // Descriptor table (declared here: the register block reads the retiring layer).
    reg              d_valid [0:DESC_DEPTH-1];
    reg              d_upd [0:DESC_DEPTH-1];     // update (else stream)
    reg [11:0]       d_layer [0:DESC_DEPTH-1];
    reg [15:0]       d_chunk [0:DESC_DEPTH-1];
    reg [15:0]       d_step [0:DESC_DEPTH-1];
    reg [3:0]        d_slot [0:DESC_DEPTH-1];
    reg [15:0]       d_n [0:DESC_DEPTH-1];       // parameters in the chunk
    reg [31:0]       d_addr [0:DESC_DEPTH-1][0:3];
    reg [3:0]        d_mask [0:DESC_DEPTH-1];    // arrays read (update: and written)
    reg              d_bf16 [0:DESC_DEPTH-1];
    reg [3:0]        d_pending [0:DESC_DEPTH-1]; // arrays whose last write is not acknowledged
    reg              d_wout_done [0:DESC_DEPTH-1];
    reg [31:0]       d_t_in [0:DESC_DEPTH-1];
    reg [31:0]       d_t_done [0:DESC_DEPTH-1];
    reg [31:0]       d_t_wfirst [0:DESC_DEPTH-1];
    reg [31:0]       d_t_wlast [0:DESC_DEPTH-1];
    reg [31:0]       d_t_commit [0:DESC_DEPTH-1];

    reg  [DI:0] alloc_ptr_reg, retire_ptr_reg;
    wire [DI-1:0] alloc_idx = alloc_ptr_reg[DI-1:0];
    wire [DI-1:0] retire_idx = retire_ptr_reg[DI-1:0];
    assign inflight = alloc_ptr_reg - retire_ptr_reg;

    ws_mx_layers #(
        .MAX_LAYERS(MAX_LAYERS),
        .NUM_SLOTS(NUM_SLOTS),
        .LANES(LANES),
        .BEAT_WORDS(K),
        .STORE_BYTES(STORE_BYTES),
        .DESC_DEPTH(DESC_DEPTH),
        .NUM_COUNTERS(NUM_COUNTERS),
        .LI(LI)
    ) layers_inst (
        .clk(clk),
        .rst(rst),
        .reg_req(reg_req),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata),
        .tbl_enabled(tbl_enabled),
        .tbl_w_base(tbl_w_base),
        .tbl_m_base(tbl_m_base),
        .tbl_v_base(tbl_v_base),
        .tbl_x_base(tbl_x_base),
        .tbl_len(tbl_len),
        .tbl_chunk(tbl_chunk),
        .tbl_opt(tbl_opt),
        .tbl_bf16(tbl_bf16),
        .tbl_step(tbl_step),
        .tbl_slot(tbl_slot),
        .slot_flags(slot_flags),
        .slot_consts(slot_consts),
        .slot_written(slot_written),
        .slot_written_idx(slot_written_idx),
        .trace_en(trace_en),
        .stream_start(stream_start),
        .stream_layer(stream_layer),
        .stream_next(stream_next),
        .stream_busy(st_active_reg),
        .layer_busy(layer_busy),
        .retire_valid(retire_fire && d_upd[retire_idx]),
        .retire_layer(d_layer[retire_idx][LI-1:0]),
        .err_valid(err_valid),
        .err_code(err_code),
        .err_layer(err_layer),
        .err_chunk(err_chunk),
        .err_step(err_step),
        .inflight({{(7-DI){1'b0}}, inflight}),
        .ts(ts_reg),
        .counters(counters)
    );

    // Arrays an optimizer code keeps: {vmax, v, m, w} (ws_mx_layers' OPT list).
    function automatic [3:0] arrays_of(input [3:0] opt);
        case (opt)
            4'd0: arrays_of = 4'b0001;
            4'd1: arrays_of = 4'b0011;
            4'd2, 4'd3: arrays_of = 4'b0111;
            4'd4, 4'd5: arrays_of = 4'b1111;
            default: arrays_of = 4'b0000;
        endcase
    endfunction

    // Do a slot's lane flags describe what the layer's optimizer code keeps?
    function automatic flags_fit(input [3:0] opt, input [5:0] flags);
        begin
            if (opt >= 4'd2) flags_fit = flags[FLAG_ADAM] && (flags[FLAG_AMSGRAD] == (opt >= 4'd4));
            else flags_fit = !flags[FLAG_ADAM] && (flags[FLAG_MOMENTUM] == (opt == 4'd1));
        end
    endfunction

    function automatic [16:0] lane_beats(input [15:0] n);
        lane_beats = ({1'b0, n} + L[16:0] - 17'd1) >> LOG_L;
    endfunction

    function automatic [16:0] store_beats(input [15:0] n);
        store_beats = ({1'b0, n} + K[16:0] - 17'd1) >> LOG_K;
    endfunction

    function automatic [NV_W-1:0] popcount(input [L-1:0] k);
        integer j;
        begin
            popcount = {NV_W{1'b0}};
            for (j = 0; j < L; j = j + 1) popcount = popcount + {{(NV_W-1){1'b0}}, k[j]};
        end
    endfunction

    // ------------------------------------------------------------------------------------
    // Ingress: a skid FIFO (timestamping each beat on arrival), then the chunk parser.
    localparam IN_W = 32 + 64 + 1 + L + 32 * L;
    wire            in_valid;
    reg             in_ready;
    wire [IN_W-1:0] in_bus;
    wire [$clog2(4+1)-1:0] unused_in_level;
    ws_fifo #(.DEPTH(4), .WIDTH(IN_W)) in_fifo_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(s_grad_valid),
        .s_ready(s_grad_ready),
        .s_data({ts, s_grad_user, s_grad_last, s_grad_keep, s_grad_data}),
        .m_valid(in_valid),
        .m_ready(in_ready),
        .m_data(in_bus),
        .level(unused_in_level)
    );
    wire [31:0]    in_ts;
    wire [63:0]    in_user;
    wire           in_last;
    wire [L-1:0]   in_keep;
    wire [32*L-1:0] in_data;
    assign {in_ts, in_user, in_last, in_keep, in_data} = in_bus;
    wire [3:0]  h_kind = in_user[WS_FLIT_KIND_LSB +: WS_FLIT_KIND_WIDTH];
    wire [11:0] h_layer = in_user[WS_FLIT_LAYER_LSB +: WS_FLIT_LAYER_WIDTH];
    wire [15:0] h_step = in_user[WS_FLIT_STEP_LSB +: WS_FLIT_STEP_WIDTH];
    wire [15:0] h_chunk = in_user[WS_FLIT_CHUNK_LSB +: WS_FLIT_CHUNK_WIDTH];
    wire [15:0] h_index = in_user[WS_FLIT_INDEX_LSB +: WS_FLIT_INDEX_WIDTH];

    // The header's layer entry.
    wire [LI-1:0] hl = h_layer[LI-1:0];
    wire          h_exists = {20'd0, h_layer} < MAX_LAYERS;
    wire [31:0]   h_len = tbl_len[32*hl +: 32];
    wire [15:0]   h_clen = tbl_chunk[16*hl +: 16];
    wire [3:0]    h_opt = tbl_opt[4*hl +: 4];
    wire [3:0]    h_slot = tbl_slot[4*hl +: 4];
    wire [31:0]   h_off = {16'd0, h_chunk} * {16'd0, h_clen};     // first parameter
    wire [31:0]   h_rem = h_len - h_off;
    wire [15:0]   h_n = (h_rem < {16'd0, h_clen}) ? h_rem[15:0] : h_clen;
    wire [5:0]    h_flags = slot_flags[6*h_slot +: 6];
    reg  [7:0]    h_err;
    always @* begin
        if (h_kind != WS_KIND_GRADIENT) h_err = E_GRAD_KIND;
        else if (!h_exists) h_err = E_GRAD_NO_LAYER;
        else if (!tbl_enabled[hl]) h_err = E_GRAD_DISABLED;
        else if (h_index != 16'd0) h_err = E_GRAD_INDEX;
        else if (h_step != tbl_step[16*hl +: 16]) h_err = E_GRAD_STEP;
        else if (h_off >= h_len) h_err = E_GRAD_CHUNK;
        else if (!flags_fit(h_opt, h_flags)) h_err = E_GRAD_CONSTS;
        else h_err = 8'h00;
    end

    // Hazard: a chunk with the same (layer, chunk) still in flight.
    reg haz_in, haz_st;
    reg [11:0] st_layer12;
    reg [15:0] st_chunk_reg;
    integer hj;
    always @* begin
        haz_in = 1'b0;
        haz_st = 1'b0;
        for (hj = 0; hj < DESC_DEPTH; hj = hj + 1) begin
            if (d_valid[hj] && d_layer[hj] == h_layer && d_chunk[hj] == h_chunk) haz_in = 1'b1;
            if (d_valid[hj] && d_layer[hj] == st_layer12 && d_chunk[hj] == st_chunk_reg) haz_st = 1'b1;
        end
    end
    integer bl, bj;
    always @* begin
        for (bl = 0; bl < MAX_LAYERS; bl = bl + 1) begin
            layer_busy[bl] = 1'b0;
            for (bj = 0; bj < DESC_DEPTH; bj = bj + 1) begin
                if (d_valid[bj] && {20'd0, d_layer[bj]} == bl) layer_busy[bl] = 1'b1;
            end
        end
    end

    wire desc_free = !d_valid[alloc_idx];

    // The gradient FIFO: {kill, data}.
    localparam G_W = 1 + 32 * L;
    reg              g_push;
    reg  [G_W-1:0]   g_push_data;
    wire             g_s_ready;
    wire             g_valid;
    reg              g_pop;
    wire [G_W-1:0]   g_bus;
    wire [$clog2(GRAD_DEPTH+1)-1:0] unused_g_level;
    ws_fifo #(.DEPTH(GRAD_DEPTH), .WIDTH(G_W)) grad_fifo_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(g_push),
        .s_ready(g_s_ready),
        .s_data(g_push_data),
        .m_valid(g_valid),
        .m_ready(g_pop),
        .m_data(g_bus),
        .level(unused_g_level)
    );

    // Parser.
    localparam [1:0] P_HEAD = 2'd0;
    localparam [1:0] P_BODY = 2'd1;
    localparam [1:0] P_DROP = 2'd2;
    localparam [1:0] P_PAD = 2'd3;
    reg [1:0]  p_state_reg;
    reg [11:0] p_layer_reg;
    reg [15:0] p_chunk_reg, p_step_reg, p_index_reg;
    reg [16:0] p_left_reg;     // beats still owed to the chunk, the current one included

    // Allocation arbitration between the parser and the stream sequencer (round-robin).
    reg  prio_st_reg;
    wire req_in = in_valid && p_state_reg == P_HEAD && h_err == 8'h00 && desc_free && !haz_in && g_s_ready;
    wire req_st = st_active_reg && desc_free && !haz_st;
    wire grant_in = req_in && !(req_st && prio_st_reg);
    wire grant_st = req_st && !grant_in;

    wire [16:0] h_lbeats = lane_beats(h_n);
    reg         ing_err;       // a chunk refused, or a framing error, this cycle
    reg  [7:0]  ing_err_code;
    reg         drop_chunk;
    reg  [NV_W-1:0] drop_flits;
    reg         framing_err;
    reg  [1:0]  p_state_next;
    reg  [16:0] p_left_next;
    reg  [15:0] p_index_next;
    wire        body_match = h_kind == WS_KIND_GRADIENT && h_layer == p_layer_reg && h_chunk == p_chunk_reg
        && h_step == p_step_reg && h_index == p_index_reg;
    always @* begin
        in_ready = 1'b0;
        g_push = 1'b0;
        g_push_data = {1'b0, in_data};
        ing_err = 1'b0;
        ing_err_code = 8'h00;
        drop_chunk = 1'b0;
        drop_flits = {NV_W{1'b0}};
        framing_err = 1'b0;
        p_state_next = p_state_reg;
        p_left_next = p_left_reg;
        p_index_next = p_index_reg;
        case (p_state_reg)
            P_HEAD: begin
                if (in_valid && h_err != 8'h00) begin
                    in_ready = 1'b1;
                    ing_err = 1'b1;
                    ing_err_code = h_err;
                    drop_chunk = 1'b1;
                    drop_flits = popcount(in_keep);
                    if (!in_last) p_state_next = P_DROP;
                end else if (grant_in) begin
                    in_ready = 1'b1;
                    g_push = 1'b1;
                    p_index_next = L[15:0];
                    if (h_lbeats == 17'd1) begin
                        if (!in_last) begin
                            framing_err = 1'b1;
                            p_state_next = P_DROP;
                        end
                    end else begin
                        p_left_next = h_lbeats - 17'd1;
                        if (in_last) begin
                            framing_err = 1'b1;
                            p_state_next = P_PAD;
                        end else begin
                            p_state_next = P_BODY;
                        end
                    end
                end
            end
            P_BODY: begin
                if (in_valid && g_s_ready) begin
                    in_ready = 1'b1;
                    g_push = 1'b1;
                    if (!body_match || in_last != (p_left_reg == 17'd1)) framing_err = 1'b1;
                    p_left_next = p_left_reg - 17'd1;
                    p_index_next = p_index_reg + L[15:0];
                    if (p_left_reg == 17'd1) p_state_next = in_last ? P_HEAD : P_DROP;
                    else if (in_last) p_state_next = P_PAD;
                end
            end
            P_DROP: begin
                if (in_valid) begin
                    in_ready = 1'b1;
                    drop_flits = popcount(in_keep);
                    if (in_last) p_state_next = P_HEAD;
                end
            end
            default: begin  // P_PAD: kill beats for what an early `last` left out
                if (g_s_ready) begin
                    g_push = 1'b1;
                    g_push_data = {1'b1, {32 * L{1'b0}}};
                    p_left_next = p_left_reg - 17'd1;
                    if (p_left_reg == 17'd1) p_state_next = P_HEAD;
                end
            end
        endcase
        if (framing_err) begin
            ing_err = 1'b1;
            ing_err_code = E_GRAD_FRAMING;
        end
    end

    // ------------------------------------------------------------------------------------
    // Stream sequencer (STREAM command): one descriptor per chunk of the layer.
    reg [LI-1:0] st_layer_reg;
    reg [31:0]   st_off_reg;
    reg [15:0]   st_step_reg;
    always @* st_layer12 = {{(12-LI){1'b0}}, st_layer_reg};
    wire [31:0] st_len = tbl_len[32*st_layer_reg +: 32];
    wire [15:0] st_clen = tbl_chunk[16*st_layer_reg +: 16];
    wire [31:0] st_rem = st_len - st_off_reg;
    wire [15:0] st_n = (st_rem < {16'd0, st_clen}) ? st_rem[15:0] : st_clen;

    // ------------------------------------------------------------------------------------
    // Read issuers, one per array, and the AR channel.
    wire [3:0]  rb_busy;
    wire [31:0] rb_addr [0:3];
    wire [8:0]  rb_len [0:3];
    wire [3:0]  unused_rb_last;
    reg  [3:0]  rb_start, rb_start_q;
    reg  [3:0]  rb_take;
    reg  [DI:0] rj_ptr_reg [0:3];
    reg  [9:0]  rd_out_reg [0:3];   // beats requested, not yet arrived
    wire [RL_W-1:0] rf_level [0:3];
    wire [3:0]  rf_valid;
    wire [DATA_WIDTH-1:0] rf_data [0:3];
    reg  [3:0]  rf_pop;
    wire [3:0]  rf_s_ready;
    reg  [3:0]  rj_req;
    reg  [1:0]  ar_rr_reg;
    reg         ar_valid_reg;
    reg  [1:0]  ar_id_reg;
    reg  [31:0] ar_addr_reg;
    reg  [7:0]  ar_len_reg;
    wire        ar_free = !ar_valid_reg || m_axi_arready;

    genvar ga;
    generate
        for (ga = 0; ga < 4; ga = ga + 1) begin : rd_array
            wire [DI-1:0] p = rj_ptr_reg[ga][DI-1:0];
            ws_mx_burst #(
                .ADDR_WIDTH(32),
                .BEAT_BYTES(SB),
                .MAX_BURST(MAX_BURST),
                .FIRST_BURST(FIRST_BURST),
                .BEATS_W(17)
            ) burst_inst (
                .clk(clk),
                .rst(rst),
                .start(rb_start[ga]),
                .start_addr(d_addr[p][ga]),
                .start_beats(store_beats(d_n[p])),
                .take(rb_take[ga]),
                .busy(rb_busy[ga]),
                .addr(rb_addr[ga]),
                .len(rb_len[ga]),
                .last(unused_rb_last[ga])
            );
            always @* begin
                rb_start[ga] = !rb_busy[ga] && !rb_start_q[ga] && rj_ptr_reg[ga] != alloc_ptr_reg && d_mask[p][ga];
                rj_req[ga] = rb_busy[ga]
                    && ({{(10-RL_W){1'b0}}, rf_level[ga]} + rd_out_reg[ga] + {1'b0, rb_len[ga]}) <= RD_DEPTH[9:0];
            end
            wire rf_push = m_axi_rvalid && m_axi_rid == ga;
            ws_fifo #(.DEPTH(RD_DEPTH), .WIDTH(DATA_WIDTH)) rd_fifo_inst (
                .clk(clk),
                .rst(rst),
                .s_valid(rf_push),
                .s_ready(rf_s_ready[ga]),
                .s_data(m_axi_rdata),
                .m_valid(rf_valid[ga]),
                .m_ready(rf_pop[ga]),
                .m_data(rf_data[ga]),
                .level(rf_level[ga])
            );
            always @(posedge clk) begin
                rd_out_reg[ga] <= rd_out_reg[ga] + (rb_take[ga] ? {1'b0, rb_len[ga]} : 10'd0) - {9'd0, rf_push};
                if (rst) rd_out_reg[ga] <= 10'd0;
            end
        end
    endgenerate
    // The read FIFOs always have room: a burst is requested only if its beats fit.
    wire [3:0] unused_rf_s_ready = rf_s_ready;
    wire       unused_rlast = m_axi_rlast;
    wire [1:0] unused_resp_lo = {m_axi_rresp[0], m_axi_bresp[0]};

    // A job starts when its pointer reaches a descriptor that uses the array; rb_start_q
    // keeps a start from repeating in the cycle `busy` rises.
    always @(posedge clk) begin
        rb_start_q <= rb_start;
        if (rst) rb_start_q <= 4'd0;
    end

    // AR arbitration: round-robin from the array after the last one served.
    reg [1:0] ar_pick;
    reg       ar_any;
    integer ai;
    always @* begin
        ar_pick = ar_rr_reg;
        ar_any = 1'b0;
        rb_take = 4'd0;
        for (ai = 3; ai >= 0; ai = ai - 1) begin
            if (rj_req[(ar_rr_reg + 2'd1 + ai[1:0]) & 2'd3]) begin
                ar_pick = (ar_rr_reg + 2'd1 + ai[1:0]) & 2'd3;
                ar_any = 1'b1;
            end
        end
        if (ar_any && ar_free) rb_take[ar_pick] = 1'b1;
    end

    assign m_axi_arvalid = ar_valid_reg;
    assign m_axi_arid = ar_id_reg;
    assign m_axi_araddr = ar_addr_reg;
    assign m_axi_arlen = ar_len_reg;
    assign m_axi_arsize = LOG_K[2:0] + 3'd2;
    assign m_axi_arburst = 2'b01;
    assign m_axi_rready = 1'b1;

    // ------------------------------------------------------------------------------------
    // Feeder: descriptor f_ptr, lane beat f_lb of it, at lane-beat position f_fp of the
    // current store beat of every array (chunks start on a store beat).
    reg  [DI:0]    f_ptr_reg;
    wire [DI-1:0]  f_idx = f_ptr_reg[DI-1:0];
    reg  [16:0]    f_lb_reg;
    reg  [LOG_R-1:0] f_fp_reg;
    wire           f_has = f_ptr_reg != alloc_ptr_reg;
    wire           f_upd = d_upd[f_idx];
    wire [3:0]     f_mask = d_mask[f_idx];
    wire           f_last = f_lb_reg == lane_beats(d_n[f_idx]) - 17'd1;

    // ------------------------------------------------------------------------------------
    // Lanes and their constants.
    reg [5:0]  cfg_flags_reg;
    reg [31:0] cfg_reg [0:9];
    reg        cfg_valid_reg;
    reg [3:0]  cfg_slot_reg;
    wire       lanes_s_ready, lanes_busy;
    wire       lanes_m_valid;
    reg        lanes_m_ready;
    reg        lanes_s_valid;
    reg [32*L-1:0] lane_in [0:3];
    wire [32*L-1:0] lane_out [0:3];
    wire [USER_W-1:0] lanes_m_user;

    ws_optim_lanes #(
        .LANES(LANES),
        .FMA_REGS(FMA_REGS),
        .DIVSQRT_STEPS(DIVSQRT_STEPS),
        .FIFO_DEPTH(LANE_FIFO_DEPTH),
        .USER_WIDTH(USER_W)
    ) lanes_inst (
        .clk(clk),
        .rst(rst),
        .cfg_flags(cfg_flags_reg),
        .cfg_gscale(cfg_reg[0]),
        .cfg_wd(cfg_reg[1]),
        .cfg_decay(cfg_reg[2]),
        .cfg_k1(cfg_reg[3]),
        .cfg_k2(cfg_reg[4]),
        .cfg_beta2(cfg_reg[5]),
        .cfg_c2(cfg_reg[6]),
        .cfg_ibc2s(cfg_reg[7]),
        .cfg_eps(cfg_reg[8]),
        .cfg_neg_rate(cfg_reg[9]),
        .s_valid(lanes_s_valid),
        .s_ready(lanes_s_ready),
        .s_w(lane_in[0]),
        .s_m(lane_in[1]),
        .s_v(lane_in[2]),
        .s_vmax(lane_in[3]),
        .s_g(g_bus[32*L-1:0]),
        .s_user({g_bus[G_W-1], f_last, f_idx}),
        .m_valid(lanes_m_valid),
        .m_ready(lanes_m_ready),
        .m_w(lane_out[0]),
        .m_m(lane_out[1]),
        .m_v(lane_out[2]),
        .m_vmax(lane_out[3]),
        .m_user(lanes_m_user),
        .busy(lanes_busy)
    );

    // Feeding.
    wire           f_need_cfg = f_upd && !(cfg_valid_reg && cfg_slot_reg == d_slot[f_idx]);
    wire           f_mem_ok = (rf_valid | ~f_mask) == 4'b1111;
    wire           byp_s_ready;
    reg            byp_push;
    wire           f_fire_lane = lanes_s_valid && lanes_s_ready;
    wire           f_fire = f_fire_lane || byp_push;
    wire           f_pop_beat = (R == 1) || f_fp_reg == R[LOG_R-1:0] - 1'b1 || f_last;
    wire           cfg_load = f_has && f_need_cfg && !lanes_busy;

    integer fa;
    always @* begin
        lanes_s_valid = f_has && f_upd && !f_need_cfg && f_mem_ok && g_valid;
        byp_push = f_has && !f_upd && rf_valid[0] && byp_s_ready;
        g_pop = f_fire_lane;
        for (fa = 0; fa < 4; fa = fa + 1) begin
            lane_in[fa] = f_mask[fa] ? rf_data[fa][32*L*f_fp_reg +: 32*L] : {32 * L{1'b0}};
            rf_pop[fa] = f_fire && f_mask[fa] && f_pop_beat;
        end
    end

    // Stream chunks bypass the lanes: {last, words}.
    localparam BY_W = 1 + 32 * L;
    wire            byp_valid;
    reg             byp_pop;
    wire [BY_W-1:0] byp_bus;
    wire [$clog2(4+1)-1:0] unused_byp_level;
    ws_fifo #(.DEPTH(4), .WIDTH(BY_W)) byp_fifo_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(byp_push),
        .s_ready(byp_s_ready),
        .s_data({f_last, lane_in[0]}),
        .m_valid(byp_valid),
        .m_ready(byp_pop),
        .m_data(byp_bus),
        .level(unused_byp_level)
    );

    // ------------------------------------------------------------------------------------
    // Egress: the weight-out pointer o_ptr follows the descriptors in order; an update
    // chunk's result beats go to the write packers and the framer in one handshake, a
    // stream chunk's beats come from the bypass FIFO.
    reg  [DI:0]    o_ptr_reg;
    wire [DI-1:0]  o_idx = o_ptr_reg[DI-1:0];
    wire           o_has = o_ptr_reg != alloc_ptr_reg;
    wire           o_upd = d_upd[o_idx];
    wire [3:0]     o_mask = d_mask[o_idx];
    reg  [LOG_R-1:0] e_fp_reg;
    wire           lo_kill = lanes_m_user[USER_W-1];
    wire           lo_last = lanes_m_user[USER_W-2];
    wire [DI-1:0]  unused_lo_desc = lanes_m_user[DI-1:0];
    wire [3:0]     wf_s_ready;
    wire           wo_ready;
    reg            wo_valid;
    reg  [32*L-1:0] wo_words;
    reg            wo_last;
    wire           wf_ok = (wf_s_ready | ~o_mask) == 4'b1111;
    // Parameters in the chunk's last lane beat, 1..LANES.
    wire [NV_W-1:0] o_last_nv;
    generate
        if (L == 1) begin : nv1
            assign o_last_nv = 1'b1;
        end else begin : nvl
            assign o_last_nv = {1'b0, d_n[o_idx][LOG_L-1:0] - 1'b1} + 1'b1;
        end
    endgenerate

    always @* begin
        lanes_m_ready = 1'b0;
        byp_pop = 1'b0;
        wo_valid = 1'b0;
        wo_words = lane_out[0];
        wo_last = lo_last;
        if (o_has && o_upd) begin
            wo_valid = lanes_m_valid && wf_ok;
            lanes_m_ready = wf_ok && wo_ready;
        end else if (o_has) begin
            wo_valid = byp_valid;
            wo_words = byp_bus[32*L-1:0];
            wo_last = byp_bus[BY_W-1];
            byp_pop = wo_ready;
        end
    end
    wire wo_fire = wo_valid && wo_ready;
    wire lo_fire = lanes_m_valid && lanes_m_ready;
    wire [NV_W-1:0] wo_nv = wo_last ? o_last_nv : L[NV_W-1:0];

    wire [63:0] o_hdr;
    assign o_hdr[WS_FLIT_KIND_LSB +: WS_FLIT_KIND_WIDTH] = WS_KIND_WEIGHT;
    assign o_hdr[WS_FLIT_LAYER_LSB +: WS_FLIT_LAYER_WIDTH] = d_layer[o_idx];
    assign o_hdr[WS_FLIT_STEP_LSB +: WS_FLIT_STEP_WIDTH] = d_step[o_idx] + {15'd0, o_upd};
    assign o_hdr[WS_FLIT_CHUNK_LSB +: WS_FLIT_CHUNK_WIDTH] = d_chunk[o_idx];
    assign o_hdr[WS_FLIT_INDEX_LSB +: WS_FLIT_INDEX_WIDTH] = 16'd0;

    wire [DI-1:0] wout_desc;
    wire          wout_first;
    ws_mx_wout #(.LANES(LANES), .DI(DI), .FIFO_DEPTH(WOUT_DEPTH)) wout_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(wo_valid),
        .s_ready(wo_ready),
        .s_words(wo_words),
        .s_nv(wo_nv),
        .s_last(wo_last),
        .s_bf16(d_bf16[o_idx]),
        .s_hdr(o_hdr),
        .s_desc(o_idx),
        .m_valid(m_wout_valid),
        .m_ready(m_wout_ready),
        .m_data(m_wout_data),
        .m_keep(m_wout_keep),
        .m_last(m_wout_last),
        .m_user(m_wout_user),
        .m_first(wout_first),
        .m_desc(wout_desc)
    );
    wire wout_fire = m_wout_valid && m_wout_ready;
    // The beat's descriptor holds until its chunk retires, which is after its last beat left.
    assign m_wout_read = !d_upd[wout_desc];

    // Write packers: LANES words per result beat into store beats, with strobes.
    reg  [DATA_WIDTH-1:0] pk_data_reg [0:3];
    reg  [SB-1:0]         pk_strb_reg [0:3];
    reg  [DATA_WIDTH-1:0] pk_data_next [0:3];
    reg  [SB-1:0]         pk_strb_next [0:3];
    reg  [SB-1:0]         lo_strb;
    wire                  e_push = lo_fire && ((R == 1) || e_fp_reg == R[LOG_R-1:0] - 1'b1 || lo_last);
    reg  [3:0]            wf_push;
    integer pa, pw;
    always @* begin
        lo_strb = {SB{1'b0}};
        for (pw = 0; pw < L; pw = pw + 1) begin
            if (!lo_kill && pw < wo_nv) lo_strb[4*L*e_fp_reg + 4*pw +: 4] = 4'hf;
        end
        for (pa = 0; pa < 4; pa = pa + 1) begin
            pk_data_next[pa] = pk_data_reg[pa];
            pk_strb_next[pa] = pk_strb_reg[pa] | lo_strb;
            pk_data_next[pa][32*L*e_fp_reg +: 32*L] = lane_out[pa];
            wf_push[pa] = e_push && o_mask[pa];
        end
    end

    // W FIFOs {strb, data}, and the beats each holds that no AW has claimed yet.
    localparam WF_W = SB + DATA_WIDTH;
    wire [3:0]       wf_valid;
    reg  [3:0]       wf_pop;
    wire [WF_W-1:0]  wf_data [0:3];
    reg  [9:0]       w_unclaimed_reg [0:3];
    wire [3:0]       wb_busy;
    wire [31:0]      wb_addr [0:3];
    wire [8:0]       wb_len [0:3];
    wire [3:0]       wb_last;
    reg  [3:0]       wb_start, wb_start_q;
    reg  [3:0]       wb_take;
    reg  [DI:0]      wj_ptr_reg [0:3];
    reg  [DI-1:0]    wj_desc_reg [0:3];
    reg  [3:0]       wj_req;
    wire             wq_full, bq_full;

    generate
        for (ga = 0; ga < 4; ga = ga + 1) begin : wr_array
            wire [DI-1:0] p = wj_ptr_reg[ga][DI-1:0];
            wire [$clog2(WR_DEPTH+1)-1:0] unused_level;
            ws_fifo #(.DEPTH(WR_DEPTH), .WIDTH(WF_W)) wr_fifo_inst (
                .clk(clk),
                .rst(rst),
                .s_valid(wf_push[ga]),
                .s_ready(wf_s_ready[ga]),
                .s_data({pk_strb_next[ga], pk_data_next[ga]}),
                .m_valid(wf_valid[ga]),
                .m_ready(wf_pop[ga]),
                .m_data(wf_data[ga]),
                .level(unused_level)
            );
            ws_mx_burst #(
                .ADDR_WIDTH(32),
                .BEAT_BYTES(SB),
                .MAX_BURST(MAX_BURST),
                .FIRST_BURST(MAX_BURST),
                .BEATS_W(17)
            ) burst_inst (
                .clk(clk),
                .rst(rst),
                .start(wb_start[ga]),
                .start_addr(d_addr[p][ga]),
                .start_beats(store_beats(d_n[p])),
                .take(wb_take[ga]),
                .busy(wb_busy[ga]),
                .addr(wb_addr[ga]),
                .len(wb_len[ga]),
                .last(wb_last[ga])
            );
            always @* begin
                wb_start[ga] = !wb_busy[ga] && !wb_start_q[ga] && wj_ptr_reg[ga] != alloc_ptr_reg
                    && d_upd[p] && d_mask[p][ga];
                wj_req[ga] = wb_busy[ga] && w_unclaimed_reg[ga] >= {1'b0, wb_len[ga]} && !wq_full && !bq_full;
            end
            always @(posedge clk) begin
                w_unclaimed_reg[ga] <= w_unclaimed_reg[ga] + {9'd0, wf_push[ga]} - (wb_take[ga] ? {1'b0, wb_len[ga]} : 10'd0);
                if (wb_start[ga]) wj_desc_reg[ga] <= p;
                if (rst) w_unclaimed_reg[ga] <= 10'd0;
            end
        end
    endgenerate
    always @(posedge clk) begin
        wb_start_q <= wb_start;
        if (rst) wb_start_q <= 4'd0;
    end

    // AW arbitration (round-robin), the W order queue {array, len} and the B tag queue
    // {desc, array, last burst of the job}.
    reg  [1:0]  aw_rr_reg;
    reg         aw_valid_reg;
    reg  [31:0] aw_addr_reg;
    reg  [7:0]  aw_len_reg;
    wire        aw_free = !aw_valid_reg || m_axi_awready;
    reg  [1:0]  aw_pick;
    reg         aw_any;
    always @* begin
        aw_pick = aw_rr_reg;
        aw_any = 1'b0;
        wb_take = 4'd0;
        for (ai = 3; ai >= 0; ai = ai - 1) begin
            if (wj_req[(aw_rr_reg + 2'd1 + ai[1:0]) & 2'd3]) begin
                aw_pick = (aw_rr_reg + 2'd1 + ai[1:0]) & 2'd3;
                aw_any = 1'b1;
            end
        end
        if (aw_any && aw_free) wb_take[aw_pick] = 1'b1;
    end
    wire aw_take = |wb_take;

    localparam WQ_W = $clog2(WQ_DEPTH);
    localparam BQ_W = $clog2(BQ_DEPTH);
    reg [1:0]      wq_arr [0:WQ_DEPTH-1];
    reg [8:0]      wq_len [0:WQ_DEPTH-1];
    reg [WQ_W:0]   wq_wr_reg, wq_rd_reg;
    reg [DI-1:0]   bq_desc [0:BQ_DEPTH-1];
    reg [1:0]      bq_arr [0:BQ_DEPTH-1];
    reg            bq_last [0:BQ_DEPTH-1];
    reg [BQ_W:0]   bq_wr_reg, bq_rd_reg;
    assign wq_full = (wq_wr_reg[WQ_W-1:0] == wq_rd_reg[WQ_W-1:0]) && (wq_wr_reg[WQ_W] != wq_rd_reg[WQ_W]);
    assign bq_full = (bq_wr_reg[BQ_W-1:0] == bq_rd_reg[BQ_W-1:0]) && (bq_wr_reg[BQ_W] != bq_rd_reg[BQ_W]);
    wire           wq_has = wq_wr_reg != wq_rd_reg;
    wire [1:0]     wq_a = wq_arr[wq_rd_reg[WQ_W-1:0]];
    wire [8:0]     wq_n = wq_len[wq_rd_reg[WQ_W-1:0]];
    reg  [8:0]     w_cnt_reg;
    wire [WF_W-1:0] w_head = wf_data[wq_a];

    assign m_axi_awvalid = aw_valid_reg;
    assign m_axi_awid = 2'd0;
    assign m_axi_awaddr = aw_addr_reg;
    assign m_axi_awlen = aw_len_reg;
    assign m_axi_awsize = LOG_K[2:0] + 3'd2;
    assign m_axi_awburst = 2'b01;
    assign m_axi_wvalid = wq_has && wf_valid[wq_a];
    assign m_axi_wdata = w_head[DATA_WIDTH-1:0];
    assign m_axi_wstrb = w_head[WF_W-1:DATA_WIDTH];
    assign m_axi_wlast = w_cnt_reg == wq_n - 9'd1;
    assign m_axi_bready = 1'b1;
    wire w_fire = m_axi_wvalid && m_axi_wready;
    always @* begin
        wf_pop = 4'd0;
        wf_pop[wq_a] = w_fire;
    end
    wire       b_fire = m_axi_bvalid;
    wire [DI-1:0] b_desc = bq_desc[bq_rd_reg[BQ_W-1:0]];
    wire [1:0] b_arr = bq_arr[bq_rd_reg[BQ_W-1:0]];
    wire       b_last = bq_last[bq_rd_reg[BQ_W-1:0]];
    wire [1:0] unused_bid = m_axi_bid;

    // ------------------------------------------------------------------------------------
    // Retire, in order, once every stage is past the descriptor.
    reg  retire_stages_past;
    integer ri;
    always @* begin
        retire_stages_past = f_ptr_reg != retire_ptr_reg && o_ptr_reg != retire_ptr_reg;
        for (ri = 0; ri < 4; ri = ri + 1) begin
            if (rj_ptr_reg[ri] == retire_ptr_reg || wj_ptr_reg[ri] == retire_ptr_reg) retire_stages_past = 1'b0;
        end
    end
    wire trace_s_ready;
    wire retire_ok = retire_ptr_reg != alloc_ptr_reg && d_valid[retire_idx] && d_wout_done[retire_idx]
        && d_pending[retire_idx] == 4'd0 && retire_stages_past && (!trace_en || trace_s_ready);
    assign retire_fire = retire_ok;

    wire [63:0] tr_user;
    assign tr_user[3:0] = d_upd[retire_idx] ? 4'd1 : 4'd2;
    assign tr_user[15:4] = d_layer[retire_idx];
    assign tr_user[31:16] = d_step[retire_idx];
    assign tr_user[47:32] = d_chunk[retire_idx];
    assign tr_user[63:48] = d_n[retire_idx];
    wire [159:0] tr_data = {d_t_commit[retire_idx], d_t_wlast[retire_idx], d_t_wfirst[retire_idx],
                            d_t_done[retire_idx], d_t_in[retire_idx]};
    wire [$clog2(TRACE_DEPTH+1)-1:0] unused_tr_level;
    wire [223:0] tr_bus;
    ws_fifo #(.DEPTH(TRACE_DEPTH), .WIDTH(224)) trace_fifo_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(retire_fire && trace_en),
        .s_ready(trace_s_ready),
        .s_data({tr_user, tr_data}),
        .m_valid(m_trace_valid),
        .m_ready(m_trace_ready),
        .m_data(tr_bus),
        .level(unused_tr_level)
    );
    assign {m_trace_user, m_trace_data} = tr_bus;

    // ------------------------------------------------------------------------------------
    // Errors to the register block: the parser's first, then the bus's.
    wire rd_bus_err = m_axi_rvalid && m_axi_rresp[1];
    wire wr_bus_err = m_axi_bvalid && m_axi_bresp[1];
    always @* begin
        err_valid = ing_err || rd_bus_err || wr_bus_err;
        err_code = ing_err ? ing_err_code : E_BUS;
        err_layer = (p_state_reg == P_HEAD) ? h_layer : p_layer_reg;
        err_chunk = (p_state_reg == P_HEAD) ? h_chunk : p_chunk_reg;
        err_step = (p_state_reg == P_HEAD) ? h_step : p_step_reg;
    end

    // ------------------------------------------------------------------------------------
    // State.
    wire stall_mem = f_has && !f_need_cfg && !f_mem_ok;
    wire stall_grad = f_has && f_upd && !f_need_cfg && f_mem_ok && !g_valid;
    wire stall_out = f_has && !f_need_cfg && f_mem_ok && (f_upd ? (g_valid && !lanes_s_ready) : !byp_s_ready);

    integer ci, ti;
    always @(posedge clk) begin
        ts_reg <= ts_reg + 64'd1;

        // ---- parser ----
        p_state_reg <= p_state_next;
        p_left_reg <= p_left_next;
        p_index_reg <= p_index_next;
        if (grant_in) begin
            p_layer_reg <= h_layer;
            p_chunk_reg <= h_chunk;
            p_step_reg <= h_step;
        end

        // ---- allocation ----
        if (grant_in || grant_st) begin
            prio_st_reg <= grant_in;
            alloc_ptr_reg <= alloc_ptr_reg + 1'b1;
            d_valid[alloc_idx] <= 1'b1;
            d_upd[alloc_idx] <= grant_in;
            d_wout_done[alloc_idx] <= 1'b0;
            d_t_done[alloc_idx] <= 32'd0;
            d_t_wfirst[alloc_idx] <= 32'd0;
            d_t_wlast[alloc_idx] <= 32'd0;
            d_t_commit[alloc_idx] <= 32'd0;
        end
        if (grant_in) begin
            d_layer[alloc_idx] <= h_layer;
            d_chunk[alloc_idx] <= h_chunk;
            d_step[alloc_idx] <= h_step;
            d_slot[alloc_idx] <= h_slot;
            d_n[alloc_idx] <= h_n;
            d_addr[alloc_idx][0] <= tbl_w_base[32*hl +: 32] + {h_off[29:0], 2'b00};
            d_addr[alloc_idx][1] <= tbl_m_base[32*hl +: 32] + {h_off[29:0], 2'b00};
            d_addr[alloc_idx][2] <= tbl_v_base[32*hl +: 32] + {h_off[29:0], 2'b00};
            d_addr[alloc_idx][3] <= tbl_x_base[32*hl +: 32] + {h_off[29:0], 2'b00};
            d_mask[alloc_idx] <= arrays_of(h_opt);
            d_pending[alloc_idx] <= arrays_of(h_opt);
            d_bf16[alloc_idx] <= tbl_bf16[hl];
            d_t_in[alloc_idx] <= in_ts;
        end
        if (grant_st) begin
            d_layer[alloc_idx] <= st_layer12;
            d_chunk[alloc_idx] <= st_chunk_reg;
            d_step[alloc_idx] <= st_step_reg;
            d_slot[alloc_idx] <= 4'd0;
            d_n[alloc_idx] <= st_n;
            d_addr[alloc_idx][0] <= tbl_w_base[32*st_layer_reg +: 32] + {st_off_reg[29:0], 2'b00};
            d_addr[alloc_idx][1] <= 32'd0;
            d_addr[alloc_idx][2] <= 32'd0;
            d_addr[alloc_idx][3] <= 32'd0;
            d_mask[alloc_idx] <= 4'b0001;
            d_pending[alloc_idx] <= 4'd0;
            d_bf16[alloc_idx] <= tbl_bf16[st_layer_reg];
            d_t_in[alloc_idx] <= ts;
        end

        // ---- stream sequencer ----
        if (stream_start) begin
            st_active_reg <= 1'b1;
            st_layer_reg <= stream_layer;
            st_chunk_reg <= 16'd0;
            st_off_reg <= 32'd0;
            st_step_reg <= tbl_step[16*stream_layer +: 16] + {15'd0, stream_next};
        end else if (grant_st) begin
            st_chunk_reg <= st_chunk_reg + 16'd1;
            st_off_reg <= st_off_reg + {16'd0, st_clen};
            if (st_rem <= {16'd0, st_clen}) st_active_reg <= 1'b0;
        end

        // ---- read and write job pointers ----
        for (ci = 0; ci < 4; ci = ci + 1) begin
            if (rj_ptr_reg[ci] != alloc_ptr_reg && !rb_busy[ci] && !rb_start_q[ci]) rj_ptr_reg[ci] <= rj_ptr_reg[ci] + 1'b1;
            if (wj_ptr_reg[ci] != alloc_ptr_reg && !wb_busy[ci] && !wb_start_q[ci]) wj_ptr_reg[ci] <= wj_ptr_reg[ci] + 1'b1;
        end

        // ---- AR / AW registers ----
        if (ar_free) ar_valid_reg <= |rb_take;
        if (|rb_take) begin
            ar_rr_reg <= ar_pick;
            ar_id_reg <= ar_pick;
            ar_addr_reg <= rb_addr[ar_pick];
            ar_len_reg <= rb_len[ar_pick][7:0] - 8'd1;
        end
        if (aw_free) aw_valid_reg <= aw_take;
        if (aw_take) begin
            aw_rr_reg <= aw_pick;
            aw_addr_reg <= wb_addr[aw_pick];
            aw_len_reg <= wb_len[aw_pick][7:0] - 8'd1;
            wq_arr[wq_wr_reg[WQ_W-1:0]] <= aw_pick;
            wq_len[wq_wr_reg[WQ_W-1:0]] <= wb_len[aw_pick];
            wq_wr_reg <= wq_wr_reg + 1'b1;
            bq_desc[bq_wr_reg[BQ_W-1:0]] <= wj_desc_reg[aw_pick];
            bq_arr[bq_wr_reg[BQ_W-1:0]] <= aw_pick;
            bq_last[bq_wr_reg[BQ_W-1:0]] <= wb_last[aw_pick];
            bq_wr_reg <= bq_wr_reg + 1'b1;
        end
        if (w_fire) begin
            if (m_axi_wlast) begin
                w_cnt_reg <= 9'd0;
                wq_rd_reg <= wq_rd_reg + 1'b1;
            end else begin
                w_cnt_reg <= w_cnt_reg + 9'd1;
            end
        end
        if (b_fire) begin
            bq_rd_reg <= bq_rd_reg + 1'b1;
            if (b_last) begin
                d_pending[b_desc][b_arr] <= 1'b0;
                if (d_pending[b_desc] == (4'd1 << b_arr)) d_t_commit[b_desc] <= ts;
            end
        end

        // ---- constants ----
        if (cfg_load) begin
            cfg_valid_reg <= 1'b1;
            cfg_slot_reg <= d_slot[f_idx];
            cfg_flags_reg <= slot_flags[6*d_slot[f_idx] +: 6];
            for (ci = 0; ci < 10; ci = ci + 1) cfg_reg[ci] <= slot_consts[320*d_slot[f_idx] + 32*ci +: 32];
        end
        if (slot_written && slot_written_idx == cfg_slot_reg) cfg_valid_reg <= 1'b0;

        // ---- feeder ----
        if (f_fire) begin
            if (f_last) begin
                f_lb_reg <= 17'd0;
                f_fp_reg <= {LOG_R{1'b0}};
                f_ptr_reg <= f_ptr_reg + 1'b1;
                if (!f_upd) d_t_done[f_idx] <= ts;
            end else begin
                f_lb_reg <= f_lb_reg + 17'd1;
                f_fp_reg <= (R == 1) ? {LOG_R{1'b0}} : f_fp_reg + 1'b1;
            end
        end

        // ---- egress ----
        if (lo_fire) begin
            e_fp_reg <= (lo_last || R == 1) ? {LOG_R{1'b0}} : e_fp_reg + 1'b1;
            if (lo_last) d_t_done[o_idx] <= ts;
        end
        for (ci = 0; ci < 4; ci = ci + 1) begin
            if (lo_fire) begin
                if (e_push) begin
                    pk_data_reg[ci] <= {DATA_WIDTH{1'b0}};
                    pk_strb_reg[ci] <= {SB{1'b0}};
                end else begin
                    pk_data_reg[ci] <= pk_data_next[ci];
                    pk_strb_reg[ci] <= pk_strb_next[ci];
                end
            end
        end
        if (wo_fire && wo_last) o_ptr_reg <= o_ptr_reg + 1'b1;
        if (wout_fire) begin
            if (wout_first) d_t_wfirst[wout_desc] <= ts;
            if (m_wout_last) begin
                d_t_wlast[wout_desc] <= ts;
                d_wout_done[wout_desc] <= 1'b1;
            end
        end

        // ---- retire ----
        if (retire_fire) begin
            d_valid[retire_idx] <= 1'b0;
            retire_ptr_reg <= retire_ptr_reg + 1'b1;
            if (d_upd[retire_idx]) begin
                cnt_reg[0] <= cnt_reg[0] + 32'd1;
                cnt_reg[1] <= cnt_reg[1] + {16'd0, d_n[retire_idx]};
            end else begin
                cnt_reg[2] <= cnt_reg[2] + 32'd1;
                cnt_reg[3] <= cnt_reg[3] + {16'd0, d_n[retire_idx]};
            end
        end

        // ---- counters ----
        cnt_reg[4] <= cnt_reg[4] + {31'd0, stall_mem};
        cnt_reg[5] <= cnt_reg[5] + {31'd0, stall_grad};
        cnt_reg[6] <= cnt_reg[6] + {31'd0, stall_out};
        cnt_reg[7] <= cnt_reg[7] + {31'd0, drop_chunk};
        cnt_reg[8] <= cnt_reg[8] + {{(32-NV_W){1'b0}}, drop_flits};
        cnt_reg[9] <= cnt_reg[9] + {31'd0, framing_err};
        cnt_reg[10] <= cnt_reg[10] + {31'd0, rd_bus_err} + {31'd0, wr_bus_err};
        cnt_reg[11] <= cnt_reg[11] + {31'd0, f_fire_lane};

        if (rst) begin
            ts_reg <= 64'd0;
            p_state_reg <= P_HEAD;
            p_left_reg <= 17'd0;
            p_index_reg <= 16'd0;
            prio_st_reg <= 1'b0;
            alloc_ptr_reg <= {(DI + 1){1'b0}};
            retire_ptr_reg <= {(DI + 1){1'b0}};
            f_ptr_reg <= {(DI + 1){1'b0}};
            o_ptr_reg <= {(DI + 1){1'b0}};
            f_lb_reg <= 17'd0;
            f_fp_reg <= {LOG_R{1'b0}};
            e_fp_reg <= {LOG_R{1'b0}};
            st_active_reg <= 1'b0;
            ar_valid_reg <= 1'b0;
            aw_valid_reg <= 1'b0;
            ar_rr_reg <= 2'd0;
            aw_rr_reg <= 2'd0;
            wq_wr_reg <= {(WQ_W + 1){1'b0}};
            wq_rd_reg <= {(WQ_W + 1){1'b0}};
            bq_wr_reg <= {(BQ_W + 1){1'b0}};
            bq_rd_reg <= {(BQ_W + 1){1'b0}};
            w_cnt_reg <= 9'd0;
            cfg_valid_reg <= 1'b0;
            for (ci = 0; ci < 4; ci = ci + 1) begin
                rj_ptr_reg[ci] <= {(DI + 1){1'b0}};
                wj_ptr_reg[ci] <= {(DI + 1){1'b0}};
                pk_data_reg[ci] <= {DATA_WIDTH{1'b0}};
                pk_strb_reg[ci] <= {SB{1'b0}};
            end
            for (ti = 0; ti < DESC_DEPTH; ti = ti + 1) d_valid[ti] <= 1'b0;
            for (ti = 0; ti < NUM_COUNTERS; ti = ti + 1) cnt_reg[ti] <= 32'd0;
        end
    end

endmodule

`default_nettype wire
