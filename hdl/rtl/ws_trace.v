`default_nettype none

// ws_trace: the hardware trace unit, register block `trace` in slot 18 (hdl/regmap/trace.toml,
// generated ws_trace_csr; docs/trace.md). It sits inside ws_mx_block beside the data mover:
// it watches the data plane's streams without touching them, and writes one 32-byte record
// (ws_common::trace: eight little-endian words) per chunk per hop into a ring in the link
// engine's DMA RAM, which link TX slot 2 (channel 6) drains to the host. The host rebuilds a
// timeline of every chunk's path through the mover, SwarmX and MemoryX from it.
//
// Time. One 48-bit counter counts every clock from reset (cleared by `rst` only), the same
// way as the streamer's TS counter, so a streamer's 32-bit stamp is the low half of ours.
// CYCLE_LO reads bits 31:0 and latches bits 47:32 into CYCLE_HI.
//
// Sources. Source i < N_PROBES is a stream probe: `probe_fire[i]` is a handshake on that
// stream, `probe_last[i]` and `probe_user[i]` its `last` and header. The first fire with no
// chunk open opens one (begin = this cycle, its header kept, flits = 1), later fires count
// flits (saturating at 0xffff), and the fire with `last` closes it and forms a Chunk record
// (source PROBE_IDS[i], begin, end = this cycle, flits, word 4 = the first header's bits 31:0,
// chunk = its bits 47:32, aux 0); a one-flit chunk opens and closes in one cycle. Source
// N_PROBES is the MemoryX streamer (`s_rec`, docs/memoryx-store.md "Trace records"), always
// ready so a trace never stalls MemoryX: type 1 forms an Update record (aux = t_commit, flit
// kind 1), type 2 a Read record (aux 0, flit kind 0), both with source 0x06, begin and end
// its t_in and t_done extended to 48 bits against our counter (ws_common::trace::extend),
// flits = n and the step, layer and chunk of its user word; another type is lost (below).
// Sources N_PROBES .. N_PROBES + N_PHASES - 1 are the wafers' FMA phases (ws_mesh_phases):
// `ph_valid[w]` hands over one finished instruction of wafer w, which forms a Phase record
// (kind 4, source PHASE_IDS[w]) with the wafer's own begin and end (cycles of our counter,
// which the wafer reads as `now`), flits = the PEs that issued, word 4 = {step, layer tag,
// opcode}, chunk = the instruction index and aux = the FMAs issued; its enable is PROBE_EN
// bit N_PROBES + w.
// Sources form records only while CTRL.en and STATUS.active and their PROBE_EN bit are set;
// otherwise a probe forgets its open chunk and streamer records are taken and dropped.
//
// Sequence. Every record formed takes the next sequence number, in one total order: records
// formed in the same cycle are numbered in source order (the streamer last). A record that is
// lost has taken its number too, so a gap in the host's sequence is exactly the records lost.
//
// Path and loss. Nothing here ever holds a data-plane stream back; a record that finds no room
// is lost and counted in LOST, never silently:
//   - each source has a hold of HOLD_DEPTH records; a record formed while its hold is full
//     (and not being popped this cycle) is lost;
//   - the merge pops one record per cycle from the holds, round robin, into a register, and
//     the next cycle pushes it into the FIFO (FIFO_DEPTH records); a full FIFO loses it;
//   - a streamer record of unknown type is lost.
// HIGH_WATER keeps the FIFO's largest level, which tells how close a run came to losing.
//
// Ring writer. It takes the FIFO's head record only when a whole record fits before the host's
// acknowledged position: HEAD + 32 - link_acked <= RING_LEN (32-bit wrapping), writes its
// eight words to byte addresses RING_BASE + ((HEAD + 4k) mod RING_LEN) on m_ext (valid held
// until ready, any ready pattern), and only after the eighth handshake advances HEAD by 32 and
// RECORDS by one. `link_ready` is HEAD, so the link never sends part of a record; it is the
// link slot's ready position while `link_ready_en` (CTRL.link and STATUS.active, and no
// restart pending: until it, HEAD is the old trace's end). The fit test
// uses last cycle's link_acked, which only ever moves forward, so it errs on the safe side.
// When the host stops acknowledging, the ring fills, then the FIFO and the holds, and records
// are lost and counted until it acknowledges again.
//
// Enable. A rising edge of CTRL.en restarts the unit once the writer has finished the record
// it is writing (a write in progress is never withdrawn from m_ext; STATUS.restart meanwhile):
// RING_BASE, RING_LEN and START are checked and taken (a power of two of at least 32 bytes,
// the base aligned to it, the ring inside the DMA RAM, START a multiple of 32), HEAD = START,
// the sequence number, RECORDS, LOST and HIGH_WATER are cleared, and records still held or
// queued from before are discarded. A bad ring sets STATUS.bad_ring and leaves the unit
// inactive: nothing is formed or written until en rises again with a good one. Clearing en
// stops forming records; the records already formed are still written (STATUS.busy until
// then), so a host that stops the trace receives all of it. Reset: disabled, nothing written.
module ws_trace #(
    parameter N_PROBES = 13,                    // stream probes, 1..31 (PROBE_EN bits 30:0)
    // Source id of probe i at [8i +: 8] (ws_common::trace::Source::id); the default is
    // ws_mx_block's order with four SwarmX ports: the mover's feed, SwarmX broadcast in,
    // reduced out, the streamer's gradient in and weight out, ports 0..3 out, ports 0..3 in.
    parameter [8*N_PROBES-1:0] PROBE_IDS = {8'h23, 8'h22, 8'h21, 8'h20, 8'h13, 8'h12, 8'h11,
                                            8'h10, 8'h05, 8'h04, 8'h03, 8'h02, 8'h00},
    parameter N_PHASES = 0,                     // wafer phase sources, 0..16 (N_PROBES + N_PHASES <= 31)
    parameter NPH = N_PHASES > 0 ? N_PHASES : 1, // width of the phase port vectors, >= N_PHASES
    // Source id of phase source w at [8w +: 8] (ws_common::trace::Source::Wafer: 0x30 + w).
    parameter [8*NPH-1:0] PHASE_IDS = {NPH{8'h30}},
    parameter HOLD_DEPTH = 2,                   // records each source holds while the merge is busy, 1..255
    parameter FIFO_DEPTH = 32,                  // records between merge and ring writer, a power of two, 2..32768
    parameter DMA_BYTES = 65536                 // link DMA RAM bytes, a power of two (ext address width)
) (
    input  wire                         clk,
    input  wire                         rst,

    input  wire                         reg_req,
    input  wire                         reg_we,
    input  wire [11:0]                  reg_addr,
    input  wire [31:0]                  reg_wdata,
    input  wire [3:0]                   reg_be,
    output wire [31:0]                  reg_rdata,

    // Stream probes: a handshake (valid && ready) on probe i's stream this cycle, its last
    // and header.
    input  wire [N_PROBES-1:0]          probe_fire,
    input  wire [N_PROBES-1:0]          probe_last,
    input  wire [N_PROBES*64-1:0]       probe_user,

    // Wafer phase records (ws_mesh_phases m_rec_*), always taken.
    input  wire [NPH-1:0]               ph_valid,
    input  wire [NPH*48-1:0]            ph_begin,
    input  wire [NPH*48-1:0]            ph_end,
    input  wire [NPH*32-1:0]            ph_word4,
    input  wire [NPH*16-1:0]            ph_pc,
    input  wire [NPH*16-1:0]            ph_pes,
    input  wire [NPH*32-1:0]            ph_fmas,

    // The free-running cycle counter, for sources that stamp their own records.
    output wire [47:0]                  now,

    // MemoryX streamer trace records (ws_mx_streamer m_trace_*).
    input  wire                         s_rec_valid,
    output wire                         s_rec_ready,
    input  wire [159:0]                 s_rec_data,
    input  wire [63:0]                  s_rec_user,

    // Writes into the link engine's DMA RAM (word address), write-only.
    output wire                         m_ext_valid,
    input  wire                         m_ext_ready,
    output wire [$clog2(DMA_BYTES)-3:0] m_ext_addr,
    output wire [31:0]                  m_ext_wdata,

    // Link TX slot 2 (channel 6): the host-acknowledged byte position in, the ready position
    // out.
    input  wire [31:0]                  link_acked,
    output wire [31:0]                  link_ready,
    output wire                         link_ready_en
);

    initial begin
        if (N_PROBES < 1 || N_PROBES > 31) $error("ws_trace: N_PROBES must be 1..31 (PROBE_EN bits 30:0)");
        if (N_PHASES < 0 || N_PROBES + N_PHASES > 31 || NPH < N_PHASES || NPH < 1)
            $error("ws_trace: N_PROBES + N_PHASES must be at most 31, NPH at least N_PHASES and 1");
        if (HOLD_DEPTH < 1 || HOLD_DEPTH > 255) $error("ws_trace: HOLD_DEPTH must be 1..255");
        if (FIFO_DEPTH < 2 || FIFO_DEPTH > 32768 || (FIFO_DEPTH & (FIFO_DEPTH - 1)) != 0)
            $error("ws_trace: FIFO_DEPTH must be a power of two, 2..32768");
        if (DMA_BYTES < 64 || (DMA_BYTES & (DMA_BYTES - 1)) != 0)
            $error("ws_trace: DMA_BYTES must be a power of two of at least 64");
    end

    localparam S = N_PROBES + N_PHASES + 1;     // sources: the probes, the phases, then the streamer
    localparam SIW = $clog2(S);                 // source index bits
    localparam SCW = $clog2(S + 3);             // bits of a per-cycle count of records
    localparam AW = $clog2(DMA_BYTES) - 2;      // ext word address bits
    localparam LW = $clog2(FIFO_DEPTH + 1);     // FIFO level bits
    localparam HPW = HOLD_DEPTH > 1 ? $clog2(HOLD_DEPTH) : 1; // hold pointer bits
    localparam HCW = $clog2(HOLD_DEPTH + 1);    // hold count bits

    // A record inside the unit, less its source (LSB first): begin 48, end 48, flits 16,
    // word 4 32, chunk 16, seq 32, aux 32, kind 3. A probe's hold keeps the low PROBE_W bits
    // only: its kind is Chunk and its aux 0.
    localparam REC_W = 227;
    localparam PROBE_W = 192;
    localparam Q_W = REC_W + 8;                 // a FIFO entry: the record and its source id

    localparam [2:0] KIND_CHUNK = 3'd1;         // ws_common::trace::RecordKind
    localparam [2:0] KIND_UPDATE = 3'd2;
    localparam [2:0] KIND_READ = 3'd3;
    localparam [2:0] KIND_PHASE = 3'd4;
    localparam [7:0] SRC_STREAMER = 8'h06;      // ws_common::trace::Source::MxStreamer
    localparam [3:0] REC_TYPE_UPDATE = 4'd1;    // the streamer's record types
    localparam [3:0] REC_TYPE_STREAM = 4'd2;
    localparam [3:0] FLIT_WEIGHT = 4'd0;        // ws_common::flit::Kind
    localparam [3:0] FLIT_GRADIENT = 4'd1;
    // Source ids in source order: the probes, the phases, the streamer.
    function automatic [8*S-1:0] src_ids(input integer unused);
        integer s;
        begin
            src_ids = {8*S{1'b0}};
            src_ids[8*N_PROBES-1:0] = PROBE_IDS;
            for (s = 0; s < N_PHASES; s = s + 1) src_ids[8*(N_PROBES + s) +: 8] = PHASE_IDS[8*s +: 8];
            src_ids[8*(S-1) +: 8] = SRC_STREAMER;
            if (unused != 0) src_ids = {8*S{1'b0}};
        end
    endfunction
    localparam [8*S-1:0] SRC_IDS = src_ids(0);
    localparam [32:0] DMA_END = 33'(DMA_BYTES);
    localparam integer FIFO_DEPTH_I = FIFO_DEPTH;

    // ---------------------------------------------------------------- registers

    wire        ctrl_en, ctrl_link;
    wire [30:0] probe_en_probes;
    wire        probe_en_streamer;
    wire [31:0] ring_base, ring_len, start;
    wire        cycle_lo_re;

    reg  [47:0] cycle_reg;
    reg  [15:0] cycle_hi_reg;
    reg         en_prev_reg;
    reg         restart_pend_reg;
    reg         active_reg, bad_reg;
    reg  [31:0] len_reg;
    reg  [AW-1:0] base_w_reg, mask_w_reg;   // the ring in words: a checked ring fits the RAM
    reg  [31:0] head_reg, head_next;
    reg  [31:0] records_reg, lost_reg, seq_reg;
    reg  [LW-1:0] high_water_reg;
    reg         space_reg;

    wire [S-1:0] hold_nonempty;
    wire [LW-1:0] fifo_level;
    reg          merge_valid_reg;
    reg          wr_busy_reg;
    wire         en_rise = ctrl_en && !en_prev_reg;
    wire         busy = |hold_nonempty || merge_valid_reg || fifo_level != {LW{1'b0}} || wr_busy_reg;

    /* verilator lint_off UNUSEDSIGNAL */
    wire [4:0] unused_we;       // write strobes of registers read as levels
    /* verilator lint_on UNUSEDSIGNAL */

    ws_trace_csr csr_inst (
        .clk(clk),
        .rst(rst),
        .reg_req(reg_req),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata),
        .params_probes_i(8'(N_PROBES)),
        .params_hold_depth_i(8'(HOLD_DEPTH)),
        .params_fifo_depth_i(16'(FIFO_DEPTH_I)),
        .ctrl_en(ctrl_en),
        .ctrl_link(ctrl_link),
        .ctrl_we(unused_we[0]),
        .probe_en_probes(probe_en_probes),
        .probe_en_streamer(probe_en_streamer),
        .probe_en_we(unused_we[1]),
        .ring_base_addr(ring_base),
        .ring_base_we(unused_we[2]),
        .ring_len_bytes(ring_len),
        .ring_len_we(unused_we[3]),
        .start_bytes(start),
        .start_we(unused_we[4]),
        .head_bytes_i(head_reg),
        .records_count_i(records_reg),
        .lost_count_i(lost_reg),
        .seq_count_i(seq_reg),
        .high_water_records_i(16'(high_water_reg)),
        .status_active_i(active_reg),
        .status_bad_ring_i(bad_reg),
        .status_busy_i(busy),
        .status_restart_i(restart_pend_reg || en_rise),
        .cycle_lo_cycles_i(cycle_reg[31:0]),
        .cycle_lo_re(cycle_lo_re),
        .cycle_hi_cycles_i(cycle_hi_reg)
    );

    // ---------------------------------------------------------------- enable and restart

    // The restart waits for the writer to finish its record: m_ext never sees valid withdrawn.
    wire restart = restart_pend_reg && !wr_busy_reg;
    wire [31:0] ring_len_m1 = ring_len - 32'd1;
    wire ring_ok = ring_len >= 32'd32 && (ring_len & ring_len_m1) == 32'd0
        && (ring_base & ring_len_m1) == 32'd0
        && {1'b0, ring_base} + {1'b0, ring_len} <= DMA_END
        && start[4:0] == 5'd0;
    // Sources form nothing from the cycle en rises until the restart is done, so no record of
    // the new run is formed against the old run's state.
    wire form_on = ctrl_en && en_prev_reg && active_reg && !restart_pend_reg;

    // ---------------------------------------------------------------- sources

    // The latest cycle at or before `now` whose low 32 bits are `t` (ws_common::trace::extend).
    function automatic [47:0] extend(input [47:0] now, input [31:0] t);
        extend = now - {16'd0, now[31:0] - t};
    endfunction

    reg  [N_PROBES-1:0]    open_reg, open_next;
    reg  [N_PROBES*48-1:0] pbegin_reg, pbegin_next;
    reg  [N_PROBES*16-1:0] pflits_reg, pflits_next;
    reg  [N_PROBES*48-1:0] phdr_reg, phdr_next;

    reg  [S-1:0]       form;        // a record formed this cycle
    reg  [S-1:0]       take_seq;    // a sequence number taken this cycle (form, or lost at once)
    // The records formed, sequence numbers filled in. A probe's kind and aux are constants
    // its hold does not keep (PROBE_W), so those bits of its slot are never read.
    /* verilator lint_off UNUSEDSIGNAL */
    reg  [S*REC_W-1:0] rec_form;
    /* verilator lint_on UNUSEDSIGNAL */
    reg                st_bad;      // a streamer record of unknown type

    reg  [47:0] f_begin, f_hdr;
    reg  [15:0] f_flits;
    reg  [31:0] f_seq;
    reg  [SCW-1:0] n_seq;
    integer i;

    wire [3:0]  st_type = s_rec_user[3:0];
    wire        st_upd = st_type == REC_TYPE_UPDATE;
    wire        st_on = form_on && probe_en_streamer && s_rec_valid;

    always @* begin
        open_next = open_reg;
        pbegin_next = pbegin_reg;
        pflits_next = pflits_reg;
        phdr_next = phdr_reg;
        form = {S{1'b0}};
        rec_form = {S*REC_W{1'b0}};

        for (i = 0; i < N_PROBES; i = i + 1) begin
            f_begin = open_reg[i] ? pbegin_reg[i*48 +: 48] : cycle_reg;
            f_hdr = open_reg[i] ? phdr_reg[i*48 +: 48] : probe_user[i*64 +: 48];
            if (!open_reg[i]) f_flits = 16'd1;
            else if (pflits_reg[i*16 +: 16] == 16'hffff) f_flits = 16'hffff;
            else f_flits = pflits_reg[i*16 +: 16] + 16'd1;

            if (!(form_on && probe_en_probes[i])) begin
                open_next[i] = 1'b0;
            end else if (probe_fire[i]) begin
                open_next[i] = !probe_last[i];
                pbegin_next[i*48 +: 48] = f_begin;
                phdr_next[i*48 +: 48] = f_hdr;
                pflits_next[i*16 +: 16] = f_flits;
                form[i] = probe_last[i];
            end
            // {kind, aux, seq, chunk, word 4, flits, end, begin}
            rec_form[i*REC_W +: REC_W] = {KIND_CHUNK, 32'd0, 32'd0, f_hdr[47:32], f_hdr[31:0],
                                           f_flits, cycle_reg, f_begin};
        end

        for (i = 0; i < N_PHASES; i = i + 1) begin
            form[N_PROBES + i] = form_on && probe_en_probes[N_PROBES + i] && ph_valid[i];
            rec_form[(N_PROBES + i)*REC_W +: REC_W] = {KIND_PHASE, ph_fmas[i*32 +: 32], 32'd0,
                ph_pc[i*16 +: 16], ph_word4[i*32 +: 32], ph_pes[i*16 +: 16],
                ph_end[i*48 +: 48], ph_begin[i*48 +: 48]};
        end

        form[S-1] = st_on && (st_upd || st_type == REC_TYPE_STREAM);
        st_bad = st_on && !form[S-1];
        rec_form[(S-1)*REC_W +: REC_W] = {
            st_upd ? KIND_UPDATE : KIND_READ,
            st_upd ? s_rec_data[159:128] : 32'd0,
            32'd0,
            s_rec_user[47:32],
            s_rec_user[31:4], st_upd ? FLIT_GRADIENT : FLIT_WEIGHT,
            s_rec_user[63:48],
            extend(cycle_reg, s_rec_data[63:32]),
            extend(cycle_reg, s_rec_data[31:0])};

        // Sequence numbers in source order; a lost streamer record takes one too.
        take_seq = form;
        take_seq[S-1] = st_on;
        n_seq = {SCW{1'b0}};
        for (i = 0; i < S; i = i + 1) begin
            f_seq = seq_reg + 32'(n_seq);
            rec_form[i*REC_W + 160 +: 32] = f_seq;
            n_seq = n_seq + {{(SCW-1){1'b0}}, take_seq[i]};
        end
    end

    always @(posedge clk) begin
        open_reg <= open_next;
        pbegin_reg <= pbegin_next;
        pflits_reg <= pflits_next;
        phdr_reg <= phdr_next;
        if (rst) open_reg <= {N_PROBES{1'b0}};
    end

    // ---------------------------------------------------------------- holds

    wire [S-1:0]       hold_full;
    wire [S*REC_W-1:0] hold_head;
    reg  [S-1:0]       hold_pop;    // the merge's grant
    wire [S-1:0]       hold_push = form & (~hold_full | hold_pop);
    wire [S-1:0]       hold_lost = form & hold_full & ~hold_pop;

    genvar g;
    generate
        for (g = 0; g < S; g = g + 1) begin : hold
            localparam HW = g >= N_PROBES ? REC_W : PROBE_W;

            reg [HW-1:0]  mem [0:HOLD_DEPTH-1];
            reg [HPW-1:0] wp_reg, wp_next, rp_reg, rp_next;
            reg [HCW-1:0] cnt_reg, cnt_next;

            always @* begin
                wp_next = wp_reg;
                rp_next = rp_reg;
                cnt_next = cnt_reg;
                if (hold_push[g]) wp_next = wp_reg == HPW'(HOLD_DEPTH - 1) ? {HPW{1'b0}} : wp_reg + 1'b1;
                if (hold_pop[g]) rp_next = rp_reg == HPW'(HOLD_DEPTH - 1) ? {HPW{1'b0}} : rp_reg + 1'b1;
                if (hold_push[g] && !hold_pop[g]) cnt_next = cnt_reg + 1'b1;
                else if (hold_pop[g] && !hold_push[g]) cnt_next = cnt_reg - 1'b1;
            end

            always @(posedge clk) begin
                if (hold_push[g]) mem[wp_reg] <= rec_form[g*REC_W +: HW];
                wp_reg <= wp_next;
                rp_reg <= rp_next;
                cnt_reg <= cnt_next;
                if (rst || restart) begin
                    wp_reg <= {HPW{1'b0}};
                    rp_reg <= {HPW{1'b0}};
                    cnt_reg <= {HCW{1'b0}};
                end
            end

            assign hold_nonempty[g] = cnt_reg != {HCW{1'b0}};
            assign hold_full[g] = cnt_reg == HCW'(HOLD_DEPTH);
            if (g >= N_PROBES) begin : record
                assign hold_head[g*REC_W +: REC_W] = mem[rp_reg];
            end else begin : probe
                assign hold_head[g*REC_W +: REC_W] = {KIND_CHUNK, 32'd0, mem[rp_reg]};
            end
        end
    endgenerate

    // ---------------------------------------------------------------- merge

    reg  [SIW-1:0] rr_reg, rr_next;     // the source searched first
    reg  [SIW-1:0] grant_idx;
    reg            grant_any;
    reg  [Q_W-1:0] merge_rec_reg;
    integer j, k;

    always @* begin
        grant_any = 1'b0;
        grant_idx = {SIW{1'b0}};
        for (j = 0; j < S; j = j + 1) begin
            k = {{(32-SIW){1'b0}}, rr_reg} + j;
            if (k >= S) k = k - S;
            if (!grant_any && hold_nonempty[k]) begin
                grant_any = 1'b1;
                grant_idx = SIW'(k);
            end
        end
        hold_pop = {S{1'b0}};
        hold_pop[grant_idx] = grant_any;
        rr_next = rr_reg;
        if (grant_any) rr_next = grant_idx == SIW'(S - 1) ? {SIW{1'b0}} : grant_idx + 1'b1;
    end

    always @(posedge clk) begin
        rr_reg <= rr_next;
        merge_valid_reg <= grant_any;
        merge_rec_reg <= {SRC_IDS[grant_idx*8 +: 8], hold_head[grant_idx*REC_W +: REC_W]};
        if (rst || restart) begin
            rr_reg <= {SIW{1'b0}};
            merge_valid_reg <= 1'b0;
        end
    end

    // ---------------------------------------------------------------- FIFO

    wire           fifo_s_ready;
    wire           fifo_m_valid, fifo_m_ready;
    wire [Q_W-1:0] q;
    wire           merge_lost = merge_valid_reg && !fifo_s_ready;

    ws_fifo #(
        .DEPTH(FIFO_DEPTH),
        .WIDTH(Q_W)
    ) fifo_inst (
        .clk(clk),
        .rst(rst || restart),
        .s_valid(merge_valid_reg),
        .s_ready(fifo_s_ready),
        .s_data(merge_rec_reg),
        .m_valid(fifo_m_valid),
        .m_ready(fifo_m_ready),
        .m_data(q),
        .level(fifo_level)
    );

    // ---------------------------------------------------------------- ring writer

    reg  [2:0]  wr_k_reg;           // the word of the record on m_ext
    wire        wr_start = !wr_busy_reg && active_reg && !restart_pend_reg && fifo_m_valid && space_reg;
    wire        ext_fire = m_ext_valid && m_ext_ready;
    wire        rec_done = ext_fire && wr_k_reg == 3'd7;
    // The ring is aligned to its length, so base | offset is base + offset.
    wire [AW-1:0] wr_addr = base_w_reg | ((head_reg[AW+1:2] + AW'(wr_k_reg)) & mask_w_reg);
    reg  [31:0] wr_word;

    always @* begin
        case (wr_k_reg)
            3'd0: wr_word = q[31:0];                                  // begin[31:0]
            3'd1: wr_word = {q[47:32], q[234:227], 5'd0, q[226:224]}; // begin[47:32], source, kind
            3'd2: wr_word = q[79:48];                                 // end[31:0]
            3'd3: wr_word = {q[95:80], q[111:96]};                    // end[47:32], flits
            3'd4: wr_word = q[143:112];                               // step, layer, flit kind
            3'd5: wr_word = {16'd0, q[159:144]};                      // chunk
            3'd6: wr_word = q[191:160];                               // seq
            default: wr_word = q[223:192];                            // aux
        endcase
    end

    assign m_ext_valid = wr_busy_reg || wr_start;
    assign m_ext_addr = wr_addr;
    assign m_ext_wdata = wr_word;
    assign fifo_m_ready = rec_done;
    assign link_ready = head_reg;
    // Not while a restart is pending: HEAD still holds the old trace's end until the restart
    // moves it to START, and a link window opened at START meanwhile would send the ring's
    // stale bytes up to the old HEAD as the new trace's first.
    assign link_ready_en = ctrl_link && active_reg && !en_rise && !restart_pend_reg;
    assign s_rec_ready = 1'b1;
    assign now = cycle_reg;

    // ---------------------------------------------------------------- state

    reg [SCW-1:0] n_lost;
    // Room for the next record, from last cycle's acknowledged position (it only grows).
    wire space_next = (head_next + 32'd32 - link_acked) <= len_reg;

    always @* begin
        n_lost = {{(SCW-1){1'b0}}, merge_lost} + {{(SCW-1){1'b0}}, st_bad};
        for (i = 0; i < S; i = i + 1) n_lost = n_lost + {{(SCW-1){1'b0}}, hold_lost[i]};
        head_next = restart ? start : head_reg + (rec_done ? 32'd32 : 32'd0);
    end

    always @(posedge clk) begin
        cycle_reg <= cycle_reg + 48'd1;
        if (cycle_lo_re) cycle_hi_reg <= cycle_reg[47:32];
        en_prev_reg <= ctrl_en;
        if (en_rise) restart_pend_reg <= 1'b1;
        else if (restart) restart_pend_reg <= 1'b0;

        wr_busy_reg <= m_ext_valid && !rec_done;
        if (ext_fire) wr_k_reg <= wr_k_reg + 3'd1;
        head_reg <= head_next;
        space_reg <= space_next;
        records_reg <= records_reg + {31'd0, rec_done};
        lost_reg <= lost_reg + 32'(n_lost);
        seq_reg <= seq_reg + 32'(n_seq);
        if (fifo_level > high_water_reg) high_water_reg <= fifo_level;

        if (restart) begin
            active_reg <= ring_ok;
            bad_reg <= !ring_ok;
            base_w_reg <= ring_base[AW+1:2];
            len_reg <= ring_len;
            mask_w_reg <= ring_len_m1[AW+1:2];
            space_reg <= 1'b0;
            records_reg <= 32'd0;
            lost_reg <= 32'd0;
            seq_reg <= 32'd0;
            high_water_reg <= {LW{1'b0}};
        end

        if (rst) begin
            cycle_reg <= 48'd0;
            cycle_hi_reg <= 16'd0;
            en_prev_reg <= 1'b0;
            restart_pend_reg <= 1'b0;
            active_reg <= 1'b0;
            bad_reg <= 1'b0;
            base_w_reg <= {AW{1'b0}};
            len_reg <= 32'd0;
            mask_w_reg <= {AW{1'b0}};
            head_reg <= 32'd0;
            space_reg <= 1'b0;
            records_reg <= 32'd0;
            lost_reg <= 32'd0;
            seq_reg <= 32'd0;
            high_water_reg <= {LW{1'b0}};
            wr_busy_reg <= 1'b0;
            wr_k_reg <= 3'd0;
        end
    end

    // Only the streamer's t_in, t_done and t_commit make its record (docs/trace.md).
    // Phase ports beyond N_PHASES (one tied-off slot when there are none) are not read.
    wire _unused_ok = &{1'b0, s_rec_data[127:64], probe_en_probes, probe_user, ph_valid, ph_begin,
                        ph_end, ph_word4, ph_pc, ph_pes, ph_fmas};

endmodule

`default_nettype wire
