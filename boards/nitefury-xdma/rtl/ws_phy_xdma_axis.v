`default_nettype none

// ws_phy_xdma_axis: the Xilinx XDMA IP's AXI4-Stream channel 0 (PG195, "AXI4-Stream H2C /
// C2H" interfaces) joined to the link engine's 32-bit word streams (docs/link.md "Board side:
// the link engine": stream byte 0 is bits 7:0 of a word; frames are whole words).
//
// One clock: clk is the IP's axi_aclk and rst its axi_aresetn inverted (and registered by
// the top). The link engine runs on the SoC clock (boards/nitefury-xdma/board.toml), so the
// board top puts a ws_async_fifo (hdl/rtl/ws_async_fifo.v) on each engine-side stream; this
// block does width conversion and packet policy only.
//
// H2C (host to card, s_axis_h2c -> m_*): each beat of DATA_WIDTH bits is DATA_WIDTH/32 word
// granules of four tkeep bits. PG195 "DMA H2C Stream": tkeep is all ones except on the last
// beat of a descriptor whose length is not a multiple of the width, and the IP does not pack
// across descriptors, so a short beat can appear at every descriptor end, not only at tlast.
// The adapter therefore looks at every beat granule by granule: a granule with all four keep
// bits is a word and goes out in order; an empty granule is skipped; a granule with one to
// three keep bits cannot be a link word (the host sends whole words), so its bytes are
// dropped and stat_h2c_bad_keep counts it. The link's receiver resynchronises on the next
// magic (docs/link.md "Receiving"), so a bad host write costs frames, not the link. tlast
// (end of one write() on the host) carries no meaning for a byte stream and is only counted.
// Full rate: a beat is taken in the cycle its last word leaves, one word per cycle.
//
// C2H (card to host, s_* -> m_axis_c2h): words are packed into beats, word k of a beat in
// bits 32k+31:32k. PG195 "DMA C2H Stream": tkeep must be all ones except on the tlast beat,
// packed to the LSB, and never all zero with tlast; so tlast rides on the beat that carries
// the last word. The adapter holds the newest beat back until it knows whether more words
// follow:
//
// - a full beat goes out without tlast as soon as the next word arrives;
// - MAX_BURST_BEATS (0 = no limit) ends a packet on its last beat regardless;
// - when s_valid has been low for IDLE_FLUSH + 1 consecutive cycles, the held beat (full or
//   short) goes out with tlast: "the engine's word stream went empty".
//
// Why tlast matters: the host (host-driver/src/transport/xdma.rs) keeps one fixed-size read
// (board.toml transfer_size, 1 MiB) posted on /dev/xdma0_c2h_0. The IP fills that read's
// descriptors in order, and closes the current descriptor early when a packet ends (PG195:
// "When a descriptor is filled completely or closed due to an end of packet"). The
// dma_ip_drivers driver completes the read at the first end of packet only when the node was
// opened with O_TRUNC (its `eop_flush` mode: an interrupt per descriptor, and the transfer
// finishes at the first descriptor whose writeback has EOP); otherwise the read completes
// only when every descriptor has closed, and a packet that ends mid-buffer leaves the rest of
// its descriptor unwritten inside the returned length. Without tlast the read would wait for
// the full megabyte. So: tlast at every pause keeps a small response from waiting behind a
// buffer that never fills, and the read must be posted in eop_flush mode (README "RTL").
//
// LAST_HOLDOFF keeps tvalid low for that many cycles after a tlast beat. In eop_flush mode the
// driver stops the engine from its interrupt handler after the EOP descriptor; a packet that
// starts before then lands in the next descriptor of the same read, after the unwritten tail
// of the EOP descriptor (the driver still counts it). A holdoff longer than the interrupt
// latency closes that window at the cost of stalling the engine after each packet; 0 turns
// it off.
module ws_phy_xdma_axis #(
    parameter DATA_WIDTH = 64,      // XDMA AXI4-Stream width: 64, 128 or 256
    parameter MAX_BURST_BEATS = 0,  // C2H: beats after which a packet ends; 0 = no limit
    parameter IDLE_FLUSH = 16,      // C2H: cycles of s_valid low, +1, that end a packet
    parameter LAST_HOLDOFF = 0      // C2H: cycles with tvalid low after each tlast beat
) (
    input  wire                     clk,
    input  wire                     rst,

    // H2C: the IP's m_axis_h2c_* channel 0.
    input  wire [DATA_WIDTH-1:0]    s_axis_h2c_tdata,
    input  wire [DATA_WIDTH/8-1:0]  s_axis_h2c_tkeep,
    input  wire                     s_axis_h2c_tlast,
    input  wire                     s_axis_h2c_tvalid,
    output wire                     s_axis_h2c_tready,

    // C2H: the IP's s_axis_c2h_* channel 0.
    output wire [DATA_WIDTH-1:0]    m_axis_c2h_tdata,
    output wire [DATA_WIDTH/8-1:0]  m_axis_c2h_tkeep,
    output wire                     m_axis_c2h_tlast,
    output wire                     m_axis_c2h_tvalid,
    input  wire                     m_axis_c2h_tready,

    // Words from the host (toward the link engine's RX side).
    output wire                     m_valid,
    input  wire                     m_ready,
    output wire [31:0]              m_data,

    // Words to the host (from the link engine's TX side).
    input  wire                     s_valid,
    output wire                     s_ready,
    input  wire [31:0]              s_data,

    // Counters, 32 bits, wrapping.
    output wire [31:0]              stat_h2c_packets,   // H2C beats with tlast taken
    output wire [31:0]              stat_h2c_bad_keep,  // H2C granules of 1..3 bytes dropped
    output wire [31:0]              stat_c2h_packets    // C2H beats with tlast sent
);

    localparam WORDS = DATA_WIDTH / 32;
    localparam CNT_W = $clog2(WORDS + 1);
    localparam IDX_W = (WORDS > 1) ? $clog2(WORDS) : 1;
    localparam IDLE_W = $clog2(IDLE_FLUSH + 2);
    localparam HOLD_W = $clog2(LAST_HOLDOFF + 2);
    localparam BURST_W = $clog2(MAX_BURST_BEATS + 2);

    initial begin
        if (DATA_WIDTH != 64 && DATA_WIDTH != 128 && DATA_WIDTH != 256)
            $error("ws_phy_xdma_axis: DATA_WIDTH must be 64, 128 or 256");
        if (MAX_BURST_BEATS < 0) $error("ws_phy_xdma_axis: MAX_BURST_BEATS must be >= 0");
        if (IDLE_FLUSH < 0) $error("ws_phy_xdma_axis: IDLE_FLUSH must be >= 0");
        if (LAST_HOLDOFF < 0) $error("ws_phy_xdma_axis: LAST_HOLDOFF must be >= 0");
    end

    // ------------------------------------------------------------------ H2C

    reg [DATA_WIDTH-1:0]    hb_data_reg, hb_data_next;
    reg [WORDS-1:0]         hb_mask_reg, hb_mask_next;   // granules still to send
    reg [31:0]              h2c_packets_reg, h2c_packets_next;
    reg [31:0]              h2c_bad_reg, h2c_bad_next;

    reg [IDX_W-1:0]         hb_idx;      // lowest granule still to send
    reg [WORDS-1:0]         hb_rest;     // the mask once that word has gone
    reg [WORDS-1:0]         in_mask;
    reg [CNT_W-1:0]         in_bad;
    reg                     h2c_take;
    integer                 i;

    reg [31:0]              hb_word;

    assign m_valid = (hb_mask_reg != {WORDS{1'b0}});
    assign m_data = hb_word;
    // Take the next beat when the held one is done or its last word leaves now.
    assign s_axis_h2c_tready = !m_valid || (m_ready && hb_rest == {WORDS{1'b0}});
    assign stat_h2c_packets = h2c_packets_reg;
    assign stat_h2c_bad_keep = h2c_bad_reg;

    always @* begin
        hb_idx = {IDX_W{1'b0}};
        for (i = WORDS - 1; i >= 0; i = i - 1) begin
            if (hb_mask_reg[i]) hb_idx = i[IDX_W-1:0];
        end
        hb_rest = hb_mask_reg;
        hb_rest[hb_idx] = 1'b0;
        // Constant part-selects in a loop, not hb_data_reg[hb_idx*32 +: 32]: synthesis then
        // builds a WORDS-way mux instead of a barrel shifter.
        hb_word = hb_data_reg[31:0];
        for (i = 1; i < WORDS; i = i + 1) begin
            if (hb_idx == i[IDX_W-1:0]) hb_word = hb_data_reg[i*32 +: 32];
        end

        in_bad = {CNT_W{1'b0}};
        for (i = 0; i < WORDS; i = i + 1) begin
            in_mask[i] = (s_axis_h2c_tkeep[i*4 +: 4] == 4'hf);
            if (s_axis_h2c_tkeep[i*4 +: 4] != 4'h0 && s_axis_h2c_tkeep[i*4 +: 4] != 4'hf) begin
                in_bad = in_bad + 1'b1;
            end
        end
    end

    always @* begin
        h2c_take = s_axis_h2c_tvalid && s_axis_h2c_tready;
        hb_data_next = hb_data_reg;
        hb_mask_next = hb_mask_reg;
        if (m_valid && m_ready) hb_mask_next = hb_rest;
        if (h2c_take) begin
            hb_data_next = s_axis_h2c_tdata;
            hb_mask_next = in_mask;
        end
        h2c_packets_next = h2c_packets_reg + {31'd0, h2c_take && s_axis_h2c_tlast};
        h2c_bad_next = h2c_bad_reg + (h2c_take ? {{(32 - CNT_W){1'b0}}, in_bad} : 32'd0);
    end

    // ------------------------------------------------------------------ C2H

    reg [DATA_WIDTH-1:0]    bld_data_reg, bld_data_next;  // the beat being built
    reg [CNT_W-1:0]         bld_cnt_reg, bld_cnt_next;    // its words
    reg                     out_valid_reg, out_valid_next;
    reg [DATA_WIDTH-1:0]    out_data_reg, out_data_next;
    reg [DATA_WIDTH/8-1:0]  out_keep_reg, out_keep_next;
    reg                     out_last_reg, out_last_next;
    reg [BURST_W-1:0]       burst_reg, burst_next;        // beats of this packet sent
    reg [IDLE_W-1:0]        idle_reg, idle_next;          // cycles s_valid low, saturating
    reg [HOLD_W-1:0]        hold_reg, hold_next;          // holdoff cycles left
    reg [31:0]              c2h_packets_reg, c2h_packets_next;

    reg                     out_free;
    reg                     holding;
    reg                     flush_idle;
    reg                     last_by_burst;
    reg                     emit;
    reg                     emit_last;
    reg                     c2h_take;
    reg                     c2h_last_done;

    assign m_axis_c2h_tvalid = out_valid_reg;
    assign m_axis_c2h_tdata = out_data_reg;
    assign m_axis_c2h_tkeep = out_keep_reg;
    assign m_axis_c2h_tlast = out_last_reg;
    // A word is taken while the beat has room, or when a full beat leaves in this cycle.
    assign s_ready = (bld_cnt_reg != WORDS[CNT_W-1:0]) || emit;
    assign stat_c2h_packets = c2h_packets_reg;

    always @* begin
        c2h_last_done = out_valid_reg && m_axis_c2h_tready && out_last_reg;
        out_free = !out_valid_reg || m_axis_c2h_tready;
        holding = (hold_reg > 1) || (LAST_HOLDOFF > 0 && c2h_last_done);
        flush_idle = (bld_cnt_reg != {CNT_W{1'b0}}) && !s_valid
            && (idle_reg >= IDLE_FLUSH[IDLE_W-1:0]);
        last_by_burst = (MAX_BURST_BEATS > 0) && (burst_reg == MAX_BURST_BEATS[BURST_W-1:0] - 1'b1);
        emit = out_free && !holding && (flush_idle
            || (bld_cnt_reg == WORDS[CNT_W-1:0] && (s_valid || last_by_burst)));
        emit_last = flush_idle || last_by_burst;
    end

    always @* begin
        c2h_take = s_valid && s_ready;

        out_valid_next = out_valid_reg && !m_axis_c2h_tready;
        out_data_next = out_data_reg;
        out_keep_next = out_keep_reg;
        out_last_next = out_last_reg;
        bld_data_next = bld_data_reg;
        bld_cnt_next = bld_cnt_reg;
        burst_next = burst_reg;
        if (emit) begin
            out_valid_next = 1'b1;
            out_data_next = bld_data_reg;
            out_last_next = emit_last;
            for (i = 0; i < WORDS; i = i + 1) begin
                out_keep_next[i*4 +: 4] = (i < bld_cnt_reg) ? 4'hf : 4'h0;
            end
            burst_next = emit_last ? {BURST_W{1'b0}} : burst_reg + 1'b1;
            bld_data_next = {DATA_WIDTH{1'b0}};
            bld_cnt_next = {CNT_W{1'b0}};
        end
        if (c2h_take) begin
            for (i = 0; i < WORDS; i = i + 1) begin
                if (bld_cnt_next == i[CNT_W-1:0]) bld_data_next[i*32 +: 32] = s_data;
            end
            bld_cnt_next = bld_cnt_next + 1'b1;
        end

        if (s_valid || bld_cnt_next == {CNT_W{1'b0}}) begin
            idle_next = {IDLE_W{1'b0}};
        end else if (idle_reg != {IDLE_W{1'b1}}) begin
            idle_next = idle_reg + 1'b1;
        end else begin
            idle_next = idle_reg;
        end

        if (LAST_HOLDOFF > 0 && c2h_last_done) begin
            hold_next = LAST_HOLDOFF[HOLD_W-1:0];
        end else if (hold_reg != {HOLD_W{1'b0}}) begin
            hold_next = hold_reg - 1'b1;
        end else begin
            hold_next = hold_reg;
        end
        c2h_packets_next = c2h_packets_reg + {31'd0, c2h_last_done};
    end

    // ------------------------------------------------------------------ registers

    always @(posedge clk) begin
        hb_data_reg <= hb_data_next;
        hb_mask_reg <= hb_mask_next;
        h2c_packets_reg <= h2c_packets_next;
        h2c_bad_reg <= h2c_bad_next;
        bld_data_reg <= bld_data_next;
        bld_cnt_reg <= bld_cnt_next;
        out_valid_reg <= out_valid_next;
        out_data_reg <= out_data_next;
        out_keep_reg <= out_keep_next;
        out_last_reg <= out_last_next;
        burst_reg <= burst_next;
        idle_reg <= idle_next;
        hold_reg <= hold_next;
        c2h_packets_reg <= c2h_packets_next;
        if (rst) begin
            hb_mask_reg <= {WORDS{1'b0}};
            h2c_packets_reg <= 32'd0;
            h2c_bad_reg <= 32'd0;
            bld_cnt_reg <= {CNT_W{1'b0}};
            out_valid_reg <= 1'b0;
            burst_reg <= {BURST_W{1'b0}};
            idle_reg <= {IDLE_W{1'b0}};
            hold_reg <= {HOLD_W{1'b0}};
            c2h_packets_reg <= 32'd0;
        end
    end

endmodule

`default_nettype wire
