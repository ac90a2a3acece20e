`default_nettype none

// ws_mx_dma: MemoryX's data mover, the register block `mxdma` (hdl/regmap/mxdma.toml,
// generated ws_mxdma_csr). It joins the link engine's DMA RAM (its external port, one 32-bit
// word per accepted request, read data on the next cycle: docs/link-engine.md "DMA RAM") to
// MemoryX, so that no bulk word ever passes through the CPU:
//
//   op 1 RING_TO_STORE  words of a ring (a bulk channel's RX window) into the weight store,
//                       one AXI4 beat per store beat, partial last beat by WSTRB;
//   op 2 STORE_TO_RING  store beats into a ring (a bulk channel's TX window);
//   op 3 RING_TO_GRAD   words of a ring as gradient flits into the streamer, cut into
//                       chunks of GRAD_CHUNK.params flits with the (kind, layer, step,
//                       chunk, index) header of ws_common::flit; or, with GRAD_ROUTE.ports
//                       = K, K wafers' interleaved gradients fanned out over the SwarmX
//                       node's downstream ports 0..K-1 (word i to port i mod K, as flit
//                       i div K of that port's stream), which reduces them into the streamer;
//   op 4 RING_TO_MESH   (MESH only) words of a ring as weight flits into the wafer mesh's
//                       weight ingress, chunked and headed like op 3 (kind WEIGHT);
//   op 5 RING_TO_SAMPLES (MESH only) words of a ring into the mesh's sample ingress, which
//                       writes them into PE SRAMs from its SX_TARGET on (kind DATA);
//   weight-out sink     the streamer's weight flits, discarded and counted or written in
//                       order into a capture ring (WOUT_*), stalling at WOUT_LIMIT. WOUT_HEAD
//                       is a stream position that capture restarts at WOUT_START, and a
//                       word lands at ring offset WOUT_HEAD mod WOUT_LEN, so the capture
//                       ring can be a link TX ring already part way round.
//
// Checks. CMD checks the whole operation before it moves a word, and a refusal moves
// nothing (STATUS.err, REFUSED): the ring must be a power of two of at least 4 bytes,
// aligned to its length and inside the DMA RAM, the offset a word inside it, the word count
// non-zero and at most one ring's worth (so an operation never laps its own data), and a
// store range beat aligned and inside the store. Firmware derives store addresses from its
// own layer table; these checks are the hardware's second line (brief: "the device checks
// every DMA window and address").
//
// The ext port is shared by the operation and the capture sink, round robin when both ask.
// Its ready depends only on the link engine's own DMA strobes, so no path here loops.
//
// The store side uses single-beat INCR bursts (AxLEN 0). The mover is the link's pace: one
// word per cycle at best on the ext port, an eighth of a 256-bit store beat, so longer bursts
// would buy nothing; the streamer, which does need the store's bandwidth, keeps its own
// bursts (ws_mx_axi_arb shares the store between the two).
module ws_mx_dma #(
    parameter DATA_WIDTH = 256,          // store beat bits
    parameter STORE_BYTES = 1 << 20,     // store bytes, a power of two
    parameter DMA_BYTES = 65536,         // link DMA RAM bytes, a power of two
    parameter ID_WIDTH = 2,              // AXI ID bits (always 0 on the wire)
    parameter SWARM_PORTS = 0,           // SwarmX downstream ports a feed may fan out over
    parameter MESH = 0,                  // 1: the block has a wafer mesh (ops 4 and 5)
    parameter FWD_LOG2 = 0               // log2 of the owner's forward buffer words (0: none)
) (
    input  wire                         clk,
    input  wire                         rst,

    input  wire                         reg_req,
    input  wire                         reg_we,
    input  wire [11:0]                  reg_addr,
    input  wire [31:0]                  reg_wdata,
    input  wire [3:0]                   reg_be,
    output wire [31:0]                  reg_rdata,

    // Link engine DMA RAM, external port (word addresses).
    output wire                         ext_valid,
    input  wire                         ext_ready,
    output wire                         ext_we,
    output wire [$clog2(DMA_BYTES)-3:0] ext_addr,
    output wire [31:0]                  ext_wdata,
    input  wire                         ext_rvalid,
    input  wire [31:0]                  ext_rdata,

    // AXI4 master to the store (through ws_mx_axi_arb).
    output wire [ID_WIDTH-1:0]          m_axi_arid,
    output wire [31:0]                  m_axi_araddr,
    output wire [7:0]                   m_axi_arlen,
    output wire [2:0]                   m_axi_arsize,
    output wire [1:0]                   m_axi_arburst,
    output wire                         m_axi_arvalid,
    input  wire                         m_axi_arready,
    input  wire [ID_WIDTH-1:0]          m_axi_rid,
    input  wire [DATA_WIDTH-1:0]        m_axi_rdata,
    input  wire [1:0]                   m_axi_rresp,
    input  wire                         m_axi_rlast,
    input  wire                         m_axi_rvalid,
    output wire                         m_axi_rready,
    output wire [ID_WIDTH-1:0]          m_axi_awid,
    output wire [31:0]                  m_axi_awaddr,
    output wire [7:0]                   m_axi_awlen,
    output wire [2:0]                   m_axi_awsize,
    output wire [1:0]                   m_axi_awburst,
    output wire                         m_axi_awvalid,
    input  wire                         m_axi_awready,
    output wire [DATA_WIDTH-1:0]        m_axi_wdata,
    output wire [DATA_WIDTH/8-1:0]      m_axi_wstrb,
    output wire                         m_axi_wlast,
    output wire                         m_axi_wvalid,
    input  wire                         m_axi_wready,
    input  wire [ID_WIDTH-1:0]          m_axi_bid,
    input  wire [1:0]                   m_axi_bresp,
    input  wire                         m_axi_bvalid,
    output wire                         m_axi_bready,

    // Gradient flits (one lane): to the streamer when m_grad_swarm is 0, else to SwarmX
    // downstream port m_grad_port; ops 4 and 5 (m_grad_mesh 1 and 2) go to the mesh's weight
    // and sample ingress instead. All three are constant during an operation.
    output wire                         m_grad_swarm,
    output wire [1:0]                   m_grad_mesh,
    output wire [3:0]                   m_grad_port,
    output wire                         m_grad_valid,
    input  wire                         m_grad_ready,
    output wire [31:0]                  m_grad_data,
    output wire                         m_grad_keep,
    output wire                         m_grad_last,
    output wire [63:0]                  m_grad_user,

    // Weight flits from the streamer (one lane).
    input  wire                         s_wout_valid,
    output wire                         s_wout_ready,
    input  wire [31:0]                  s_wout_data,
    input  wire                         s_wout_keep,
    input  wire                         s_wout_last,
    input  wire [63:0]                  s_wout_user,
    // WOUT_CTRL.swarm: the owner routes the streamer's weight-out through SwarmX's broadcast.
    output wire                         wout_swarm,
    output wire                         wout_reads,
    // WOUT_CTRL.fwd / fwd_layer: the owner's forward buffer takes that layer's updates
    // (docs/mesh-array.md "Forwarding"); its level and the words it took, for FWD_LEVEL and
    // FWD_WORDS.
    output wire                         wout_fwd,
    output wire [11:0]                  wout_fwd_layer,
    output wire                         fwd_flush,   // a WOUT_CTRL write left `reads` off
    input  wire [31:0]                  fwd_level,
    input  wire [31:0]                  fwd_words
);

    localparam BEAT_WORDS = DATA_WIDTH / 32;
    localparam BEAT_BYTES = DATA_WIDTH / 8;
    localparam BW = $clog2(BEAT_WORDS);       // word index in a beat
    localparam AW = $clog2(DMA_BYTES) - 2;    // ext word address bits
    localparam integer AXSIZE_I = $clog2(BEAT_BYTES);
    localparam integer STORE_LOG2_I = $clog2(STORE_BYTES);
    localparam integer DMA_LOG2_I = $clog2(DMA_BYTES);
    localparam [2:0] AXSIZE = AXSIZE_I[2:0];
    localparam [7:0] STORE_LOG2 = STORE_LOG2_I[7:0];
    localparam [7:0] DMA_LOG2 = DMA_LOG2_I[7:0];
    localparam [34:0] STORE_END = {3'b000, STORE_BYTES[31:0]};
    localparam [32:0] DMA_END = {1'b0, DMA_BYTES[31:0]};
    localparam [3:0] KIND_WEIGHT = 4'd0;     // ws_common::flit::Kind::Weight
    localparam [3:0] KIND_GRADIENT = 4'd1;   // ws_common::flit::Kind::Gradient
    localparam [3:0] KIND_DATA = 4'd2;       // ws_common::flit::Kind::Data

    localparam [3:0] OP_TO_STORE = 4'd1;
    localparam [3:0] OP_TO_RING = 4'd2;
    localparam [3:0] OP_TO_GRAD = 4'd3;
    localparam [3:0] OP_TO_MESH = 4'd4;
    localparam [3:0] OP_TO_SAMPLES = 4'd5;

    localparam [7:0] E_BUSY = 8'd1;
    localparam [7:0] E_BAD_OP = 8'd2;
    localparam [7:0] E_BAD_RING = 8'd3;
    localparam [7:0] E_BAD_STORE = 8'd4;
    localparam [7:0] E_ZERO_WORDS = 8'd5;
    localparam [7:0] E_TOO_LONG = 8'd6;
    localparam [7:0] E_BAD_CHUNK = 8'd7;
    localparam [7:0] E_BUS = 8'd8;
    localparam [7:0] E_BAD_ROUTE = 8'd9;
    localparam integer SWARM_PORTS_I = SWARM_PORTS;
    localparam [7:0] SWARM_PORTS_B = SWARM_PORTS_I[7:0];
    localparam integer FWD_LOG2_I = FWD_LOG2;
    localparam [7:0] FWD_LOG2_B = FWD_LOG2_I[7:0];

    // ---------------------------------------------------------------- registers

    wire [31:0] ring_base, ring_len, ring_off, store_addr, words;
    wire [11:0] grad_layer;
    wire [15:0] grad_step, grad_params, grad_first;
    wire [3:0]  cmd_op;
    wire        cmd_we;
    wire        wout_capture, wout_ctrl_we;
    wire [4:0]  route_ports;
    wire [15:0] route_skip;
    wire [31:0] wout_base, wout_len, wout_limit;
    wire [30:0] wout_start;

    reg         busy_reg;
    reg  [3:0]  op_reg;
    reg  [7:0]  err_reg;
    reg  [31:0] done_words_reg, ops_reg, refused_reg;
    reg         cap_on_reg;
    reg  [30:0] cap_head_reg;
    reg  [31:0] wout_flits_reg, wout_dropped_reg, grad_flits_reg;

    wire [11:0] unused_we;   // strobes of registers only read at CMD or capture-on time

    ws_mxdma_csr csr_inst (
        .clk(clk),
        .rst(rst),
        .reg_req(reg_req),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata),
        .params_beat_words_i(BEAT_WORDS[7:0]),
        .params_store_log2_i(STORE_LOG2),
        .params_dma_log2_i(DMA_LOG2),
        .params_swarm_ports_i(SWARM_PORTS_B),
        .ring_base_addr(ring_base),
        .ring_base_we(unused_we[0]),
        .ring_len_bytes(ring_len),
        .ring_len_we(unused_we[1]),
        .ring_off_bytes(ring_off),
        .ring_off_we(unused_we[2]),
        .store_addr_addr(store_addr),
        .store_addr_we(unused_we[3]),
        .words_count(words),
        .words_we(unused_we[4]),
        .grad_hdr_layer(grad_layer),
        .grad_hdr_step(grad_step),
        .grad_hdr_we(unused_we[5]),
        .grad_chunk_params(grad_params),
        .grad_chunk_first(grad_first),
        .grad_chunk_we(unused_we[6]),
        .cmd_op(cmd_op),
        .cmd_we(cmd_we),
        .status_busy_i(busy_reg),
        .status_op_i(op_reg),
        .status_err_i(err_reg),
        .done_words_count_i(done_words_reg),
        .ops_count_i(ops_reg),
        .refused_count_i(refused_reg),
        .wout_ctrl_capture(wout_capture),
        .wout_ctrl_swarm(wout_swarm),
        .wout_ctrl_reads(wout_reads),
        .wout_ctrl_fwd(wout_fwd),
        .wout_ctrl_fwd_layer(wout_fwd_layer),
        .wout_ctrl_we(wout_ctrl_we),
        .wout_base_addr(wout_base),
        .wout_base_we(unused_we[7]),
        .wout_len_bytes(wout_len),
        .wout_len_we(unused_we[8]),
        .wout_limit_bytes(wout_limit),
        .wout_limit_we(unused_we[9]),
        .wout_head_bytes_i(cap_head_reg),
        .wout_head_on_i(cap_on_reg),
        .wout_flits_count_i(wout_flits_reg),
        .wout_dropped_count_i(wout_dropped_reg),
        .grad_flits_count_i(grad_flits_reg),
        .grad_route_ports(route_ports),
        .grad_route_skip(route_skip),
        .grad_route_we(unused_we[10]),
        .wout_start_bytes(wout_start),
        .wout_start_we(unused_we[11]),
        .fwd_params_depth_log2_i(FWD_LOG2_B),
        .fwd_level_words_i(fwd_level),
        .fwd_words_count_i(fwd_words)
    );

    // ---------------------------------------------------------------- checks

    // A ring: a power of two of at least 4 bytes, aligned to its length, inside the DMA RAM.
    function ring_ok(input [31:0] base, input [31:0] len);
        ring_ok = len >= 32'd4 && (len & (len - 32'd1)) == 32'd0
            && (base & (len - 32'd1)) == 32'd0
            && {1'b0, base} + {1'b0, len} <= DMA_END;
    endfunction

    wire [34:0] store_end = {3'b000, store_addr} + {1'b0, words, 2'b00};
    wire        uses_store = cmd_op == OP_TO_STORE || cmd_op == OP_TO_RING;
    wire        is_feed_mesh = cmd_op == OP_TO_MESH || cmd_op == OP_TO_SAMPLES;
    // Words an operation moves: WORDS, or WORDS flits for each of GRAD_ROUTE.ports ports.
    wire [4:0]  fan = (cmd_op == OP_TO_GRAD && route_ports != 5'd0) ? route_ports : 5'd1;
    wire [36:0] feed_words = {5'd0, words} * {32'd0, fan};
    reg  [7:0]  check_err;
    always @* begin
        check_err = 8'd0;
        if (busy_reg) check_err = E_BUSY;
        else if (cmd_op != OP_TO_STORE && cmd_op != OP_TO_RING && cmd_op != OP_TO_GRAD && !(MESH != 0 && is_feed_mesh)) check_err = E_BAD_OP;
        else if (cmd_op == OP_TO_GRAD && {27'd0, route_ports} > SWARM_PORTS_I) check_err = E_BAD_ROUTE;
        else if (words == 32'd0) check_err = E_ZERO_WORDS;
        else if (!ring_ok(ring_base, ring_len) || ring_off[1:0] != 2'b00 || ring_off >= ring_len) check_err = E_BAD_RING;
        else if (feed_words > {7'd0, ring_len[31:2]}) check_err = E_TOO_LONG;
        else if (uses_store && ((store_addr & (BEAT_BYTES - 1)) != 32'd0 || store_end > STORE_END)) check_err = E_BAD_STORE;
        else if ((cmd_op == OP_TO_GRAD || cmd_op == OP_TO_MESH) && grad_params == 16'd0) check_err = E_BAD_CHUNK;
    end
    wire start = cmd_we && check_err == 8'd0;
    wire refuse = cmd_we && check_err != 8'd0;

    // ---------------------------------------------------------------- the operation

    localparam [2:0] S_IDLE = 3'd0;
    localparam [2:0] S_FILL = 3'd1;   // op 1: ext reads into the beat buffer
    localparam [2:0] S_PUT = 3'd2;    // op 1: AW + W of the beat
    localparam [2:0] S_DRAIN = 3'd3;  // op 1: wait for the last B
    localparam [2:0] S_AR = 3'd4;     // op 2: AR of a beat
    localparam [2:0] S_R = 3'd5;      // op 2: its R
    localparam [2:0] S_SPILL = 3'd6;  // op 2: ext writes from the beat buffer
    localparam [2:0] S_GRAD = 3'd7;   // op 3: ext reads into the flit FIFO, flits out

    reg  [2:0]   state_reg;
    reg  [31:0]  mask_reg;            // ring length - 1
    reg  [31:0]  rbase_reg;
    reg  [31:0]  pos_reg;             // byte offset in the ring of the next ext access
    reg  [31:0]  left_reg;            // words not yet requested (ops 1, 3) or not yet beaten (op 2)
    reg  [31:0]  saddr_reg;
    reg  [31:0]  buf_reg [0:BEAT_WORDS-1];
    reg  [BW:0]  beat_n_reg;          // words in this beat
    reg  [BW:0]  issued_reg;          // op 1: ext reads of this beat accepted; op 2: writes done
    reg  [BW:0]  got_reg;             // op 1: ext reads of this beat returned
    reg          aw_done_reg, w_done_reg;
    reg  [7:0]   b_wait_reg;          // B responses outstanding
    reg          bus_err_reg;
    reg  [15:0]  g_chunk_reg, g_index_reg;
    reg  [31:0]  g_out_left_reg;      // flits not yet sent

    reg  [15:0]  g_params_reg, g_step_reg;
    reg  [11:0]  g_layer_reg;
    reg          g_swarm_reg;         // op 3 fans out over SwarmX
    reg  [1:0]   g_mesh_reg;          // ops 4, 5: 1 weights, 2 samples into the mesh
    reg  [3:0]   g_kind_reg;
    reg  [4:0]   g_fan_reg;           // ports of the fan-out (1 straight into the streamer)
    reg  [3:0]   g_port_reg;          // the port of the next word
    reg  [15:0]  g_skip_reg;

    wire [31:0] pos_next = (pos_reg + 32'd4) & mask_reg;
    wire [31:0] ring_byte = rbase_reg | pos_reg;
    wire [AW-1:0] ring_word = ring_byte[AW+1:2];
    wire [BW:0] beat_n_first = (left_reg > BEAT_WORDS) ? BEAT_WORDS[BW:0] : left_reg[BW:0];

    // Flit FIFO of op 3 (4 words): ext read data lands here, one cycle after the request.
    reg  [31:0] gq_reg [0:3];
    reg  [1:0]  gq_rd_reg, gq_wr_reg;
    reg  [2:0]  gq_count_reg;
    reg         gq_pending_reg;       // a read accepted last cycle, data arriving now

    // ext requests of the operation.
    wire op_rd_req = (state_reg == S_FILL && issued_reg != beat_n_reg)
        || (state_reg == S_GRAD && left_reg != 32'd0
            && ({1'b0, gq_count_reg} + {3'd0, gq_pending_reg} < 4'd4));
    wire op_wr_req = state_reg == S_SPILL && issued_reg != beat_n_reg;
    wire op_req = op_rd_req || op_wr_req;

    // Capture sink requests.
    wire cap_req = cap_on_reg && s_wout_valid && {1'b0, cap_head_reg} != wout_limit;
    reg  last_cap_reg;
    wire grant_cap = cap_req && (!op_req || !last_cap_reg);
    wire grant_op = op_req && !grant_cap;
    wire op_fire = grant_op && ext_ready;
    wire cap_fire = grant_cap && ext_ready;

    reg  [31:0] cap_mask_reg, cap_base_reg;
    reg         cap_we_d_reg;
    // Capture may turn on: its ring passes the ring check and WOUT_START is a whole word (an
    // odd start would never meet a word-aligned WOUT_LIMIT, and capture would lap the ring).
    wire        cap_ok = ring_ok(wout_base, wout_len) && wout_start[1:0] == 2'b00;
    wire [31:0] cap_byte = cap_base_reg | ({1'b0, cap_head_reg} & cap_mask_reg);
    wire [AW-1:0] cap_word = cap_byte[AW+1:2];

    assign ext_valid = grant_cap || grant_op;
    assign ext_we = grant_cap || op_wr_req;
    assign ext_addr = grant_cap ? cap_word : ring_word;
    assign ext_wdata = grant_cap ? s_wout_data : buf_reg[issued_reg[BW-1:0]];

    // Weight-out: taken when captured, or at once when capture is off.
    assign s_wout_ready = cap_on_reg ? cap_fire : 1'b1;
    wire wout_fire = s_wout_valid && s_wout_ready;

    // AXI.
    reg  [DATA_WIDTH/8-1:0] strb;
    integer si;
    always @* begin
        for (si = 0; si < BEAT_WORDS; si = si + 1) strb[4*si +: 4] = (si < beat_n_reg) ? 4'hf : 4'h0;
    end
    reg  [DATA_WIDTH-1:0] wbeat;
    integer bi;
    always @* begin
        for (bi = 0; bi < BEAT_WORDS; bi = bi + 1) wbeat[32*bi +: 32] = buf_reg[bi];
    end

    assign m_axi_awid = {ID_WIDTH{1'b0}};
    assign m_axi_awaddr = saddr_reg;
    assign m_axi_awlen = 8'd0;
    assign m_axi_awsize = AXSIZE;
    assign m_axi_awburst = 2'b01;
    assign m_axi_awvalid = state_reg == S_PUT && !aw_done_reg;
    assign m_axi_wdata = wbeat;
    assign m_axi_wstrb = strb;
    assign m_axi_wlast = 1'b1;
    assign m_axi_wvalid = state_reg == S_PUT && !w_done_reg;
    assign m_axi_bready = 1'b1;
    assign m_axi_arid = {ID_WIDTH{1'b0}};
    assign m_axi_araddr = saddr_reg;
    assign m_axi_arlen = 8'd0;
    assign m_axi_arsize = AXSIZE;
    assign m_axi_arburst = 2'b01;
    assign m_axi_arvalid = state_reg == S_AR;
    assign m_axi_rready = 1'b1;

    wire aw_fire = m_axi_awvalid && m_axi_awready;
    wire w_fire = m_axi_wvalid && m_axi_wready;
    wire b_fire = m_axi_bvalid;
    wire ar_fire = m_axi_arvalid && m_axi_arready;
    wire r_fire = m_axi_rvalid && state_reg == S_R;

    // Gradient flits. A fan-out sends one round (a flit to each port) per flit index; a
    // skipped port's word is taken from the FIFO and not sent.
    wire g_head = state_reg == S_GRAD && gq_count_reg != 3'd0;
    wire g_skip_now = g_skip_reg[g_port_reg];
    wire g_round_end = {1'b0, g_port_reg} == g_fan_reg - 5'd1;
    assign m_grad_swarm = g_swarm_reg;
    assign m_grad_mesh = g_mesh_reg;
    assign m_grad_port = g_port_reg;
    assign m_grad_valid = g_head && !g_skip_now;
    assign m_grad_data = gq_reg[gq_rd_reg];
    assign m_grad_keep = 1'b1;
    assign m_grad_last = g_index_reg == g_params_reg - 16'd1 || g_out_left_reg <= {27'd0, g_fan_reg};
    assign m_grad_user = {g_index_reg, g_chunk_reg, g_step_reg, g_layer_reg, g_kind_reg};
    // A word leaves the FIFO: sent, or dropped for a skipped port.
    wire grad_fire = g_head && (g_skip_now || m_grad_ready);
    wire grad_sent = m_grad_valid && m_grad_ready;

    wire bus_err_now = (b_fire && m_axi_bresp[1]) || (r_fire && m_axi_rresp[1]);
    // The state machine goes idle this cycle (the case below).
    wire state_reg_next_idle =
        (state_reg == S_DRAIN && (b_wait_reg == 8'd0 || (b_wait_reg == 8'd1 && b_fire)))
        || (state_reg == S_SPILL && left_reg == 32'd0 && op_fire && issued_reg + 1'b1 == beat_n_reg)
        || (state_reg == S_GRAD && grad_fire && g_out_left_reg == 32'd1);
    wire op_done = busy_reg && state_reg_next_idle;

    integer ri;
    always @(posedge clk) begin
        if (ext_rvalid && state_reg == S_FILL) begin
            buf_reg[got_reg[BW-1:0]] <= ext_rdata;
            got_reg <= got_reg + 1'b1;
        end
        if (ext_rvalid && state_reg == S_GRAD) begin
            gq_reg[gq_wr_reg] <= ext_rdata;
            gq_wr_reg <= gq_wr_reg + 2'd1;
        end
        gq_pending_reg <= op_fire && state_reg == S_GRAD;
        gq_count_reg <= gq_count_reg + {2'd0, ext_rvalid && state_reg == S_GRAD} - {2'd0, grad_fire};
        if (grad_fire) gq_rd_reg <= gq_rd_reg + 2'd1;
        if (ext_valid && ext_ready) last_cap_reg <= grant_cap;

        if (op_fire) begin
            pos_reg <= pos_next;
            if (state_reg != S_GRAD) issued_reg <= issued_reg + 1'b1;
            if (state_reg == S_GRAD) left_reg <= left_reg - 32'd1;
            if (state_reg == S_SPILL) done_words_reg <= done_words_reg + 32'd1;
        end

        if (b_fire) begin
            if (m_axi_bresp[1]) bus_err_reg <= 1'b1;
        end
        b_wait_reg <= b_wait_reg + {7'd0, w_fire} - {7'd0, b_fire};

        case (state_reg)
            S_FILL: begin
                if (got_reg == beat_n_reg && issued_reg == beat_n_reg) begin
                    state_reg <= S_PUT;
                    aw_done_reg <= 1'b0;
                    w_done_reg <= 1'b0;
                end
            end
            S_PUT: begin
                if (aw_fire) aw_done_reg <= 1'b1;
                if (w_fire) w_done_reg <= 1'b1;
                if ((aw_done_reg || aw_fire) && (w_done_reg || w_fire)) begin
                    done_words_reg <= done_words_reg + {{(31 - BW){1'b0}}, beat_n_reg};
                    saddr_reg <= saddr_reg + BEAT_BYTES;
                    if (left_reg == 32'd0) begin
                        state_reg <= S_DRAIN;
                    end else begin
                        state_reg <= S_FILL;
                        beat_n_reg <= beat_n_first;
                        left_reg <= left_reg - {{(31 - BW){1'b0}}, beat_n_first};
                        issued_reg <= {(BW + 1){1'b0}};
                        got_reg <= {(BW + 1){1'b0}};
                    end
                end
            end
            S_DRAIN: begin
                if (b_wait_reg == 8'd0 || (b_wait_reg == 8'd1 && b_fire)) begin
                    state_reg <= S_IDLE;
                end
            end
            S_AR: begin
                if (ar_fire) state_reg <= S_R;
            end
            S_R: begin
                if (r_fire) begin
                    for (ri = 0; ri < BEAT_WORDS; ri = ri + 1) buf_reg[ri] <= m_axi_rdata[32*ri +: 32];
                    if (m_axi_rresp[1]) bus_err_reg <= 1'b1;
                    state_reg <= S_SPILL;
                    beat_n_reg <= beat_n_first;
                    left_reg <= left_reg - {{(31 - BW){1'b0}}, beat_n_first};
                    issued_reg <= {(BW + 1){1'b0}};
                end
            end
            S_SPILL: begin
                if (op_fire && issued_reg + 1'b1 == beat_n_reg) begin
                    saddr_reg <= saddr_reg + BEAT_BYTES;
                    state_reg <= (left_reg == 32'd0) ? S_IDLE : S_AR;
                end
            end
            S_GRAD: begin
                if (grad_fire) begin
                    if (grad_sent) grad_flits_reg <= grad_flits_reg + 32'd1;
                    done_words_reg <= done_words_reg + 32'd1;
                    g_out_left_reg <= g_out_left_reg - 32'd1;
                    if (g_round_end) begin
                        g_port_reg <= 4'd0;
                        if (m_grad_last) begin
                            g_index_reg <= 16'd0;
                            g_chunk_reg <= g_chunk_reg + 16'd1;
                        end else begin
                            g_index_reg <= g_index_reg + 16'd1;
                        end
                    end else begin
                        g_port_reg <= g_port_reg + 4'd1;
                    end
                    if (g_out_left_reg == 32'd1) state_reg <= S_IDLE;
                end
            end
            default: ;
        endcase

        // Completion: the cycle the state machine returns to idle.
        if (op_done) busy_reg <= 1'b0;

        if (start) begin
            busy_reg <= 1'b1;
            op_reg <= cmd_op;
            err_reg <= 8'd0;
            bus_err_reg <= 1'b0;
            done_words_reg <= 32'd0;
            mask_reg <= ring_len - 32'd1;
            rbase_reg <= ring_base;
            pos_reg <= ring_off;
            saddr_reg <= store_addr;
            g_chunk_reg <= grad_first;
            g_params_reg <= grad_params;
            g_step_reg <= grad_step;
            g_layer_reg <= grad_layer;
            g_index_reg <= 16'd0;
            g_out_left_reg <= feed_words[31:0];
            g_swarm_reg <= cmd_op == OP_TO_GRAD && route_ports != 5'd0;
            g_fan_reg <= fan;
            g_port_reg <= 4'd0;
            g_skip_reg <= (cmd_op != OP_TO_GRAD || route_ports == 5'd0) ? 16'd0 : route_skip;
            g_mesh_reg <= (cmd_op == OP_TO_MESH) ? 2'd1 : (cmd_op == OP_TO_SAMPLES) ? 2'd2 : 2'd0;
            g_kind_reg <= (cmd_op == OP_TO_MESH) ? KIND_WEIGHT : (cmd_op == OP_TO_SAMPLES) ? KIND_DATA : KIND_GRADIENT;
            issued_reg <= {(BW + 1){1'b0}};
            got_reg <= {(BW + 1){1'b0}};
            case (cmd_op)
                OP_TO_STORE: begin
                    state_reg <= S_FILL;
                    beat_n_reg <= (words > BEAT_WORDS) ? BEAT_WORDS[BW:0] : words[BW:0];
                    left_reg <= words - ((words > BEAT_WORDS) ? BEAT_WORDS : words);
                end
                OP_TO_RING: begin
                    state_reg <= S_AR;
                    left_reg <= words;
                end
                default: begin
                    state_reg <= S_GRAD;
                    left_reg <= feed_words[31:0];
                end
            endcase
        end
        if (refuse) begin
            op_reg <= cmd_op;
            err_reg <= check_err;
        end

        if (op_done) begin
            if (bus_err_reg || bus_err_now) err_reg <= E_BUS;
        end

        // Capture sink.
        if (wout_fire) wout_flits_reg <= wout_flits_reg + 32'd1;
        if (wout_fire && !cap_on_reg) wout_dropped_reg <= wout_dropped_reg + 32'd1;
        if (cap_fire) cap_head_reg <= cap_head_reg + 31'd4;
        // WOUT_CTRL's fields hold the written value from the cycle after its strobe.
        cap_we_d_reg <= wout_ctrl_we;
        if (cap_we_d_reg) begin
            if (!wout_capture) begin
                cap_on_reg <= 1'b0;
            end else if (cap_ok) begin
                cap_on_reg <= 1'b1;
                cap_head_reg <= wout_start;
                cap_base_reg <= wout_base;
                cap_mask_reg <= wout_len - 32'd1;
            end
        end

        ops_reg <= ops_reg + {31'd0, op_done && !(bus_err_reg || bus_err_now)};
        refused_reg <= refused_reg + {31'd0, refuse} + {31'd0, op_done && (bus_err_reg || bus_err_now)}
            + {31'd0, cap_we_d_reg && wout_capture && !cap_ok};

        if (rst) begin
            state_reg <= S_IDLE;
            busy_reg <= 1'b0;
            op_reg <= 4'd0;
            err_reg <= 8'd0;
            done_words_reg <= 32'd0;
            ops_reg <= 32'd0;
            refused_reg <= 32'd0;
            bus_err_reg <= 1'b0;
            b_wait_reg <= 8'd0;
            gq_rd_reg <= 2'd0;
            gq_wr_reg <= 2'd0;
            gq_count_reg <= 3'd0;
            gq_pending_reg <= 1'b0;
            last_cap_reg <= 1'b0;
            cap_on_reg <= 1'b0;
            cap_we_d_reg <= 1'b0;
            cap_head_reg <= 31'd0;
            cap_base_reg <= 32'd0;
            cap_mask_reg <= 32'd0;
            wout_flits_reg <= 32'd0;
            wout_dropped_reg <= 32'd0;
            grad_flits_reg <= 32'd0;
            g_swarm_reg <= 1'b0;
            g_mesh_reg <= 2'd0;
            g_kind_reg <= KIND_GRADIENT;
            g_fan_reg <= 5'd1;
            g_port_reg <= 4'd0;
            g_skip_reg <= 16'd0;
        end
    end

    // A job that ends (WOUT_CTRL written with `reads` off) empties the owner's forward buffer,
    // so no forwarded weight outlives the job.
    assign fwd_flush = cap_we_d_reg && !wout_reads;

    wire _unused_ok = &{1'b0, m_axi_rid, m_axi_rlast, m_axi_bid, m_axi_rresp[0], m_axi_bresp[0],
                        s_wout_keep, s_wout_last, s_wout_user, unused_we, ring_byte[31:AW+2],
                        ring_byte[1:0], cap_byte[31:AW+2], cap_byte[1:0]};

endmodule

`default_nettype wire
