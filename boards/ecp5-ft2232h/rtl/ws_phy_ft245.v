`default_nettype none

// ws_phy_ft245: the FPGA side of an FT232H / FT2232H (channel A) in synchronous 245 FIFO
// mode, turned into the link engine's 32-bit word streams (docs/link.md "Board side: the
// link engine": stream byte 0 is bits 7:0 of a word).
//
// Two clock domains. Everything that touches the chip runs on ft_clk, the chip's own 60 MHz
// CLKOUT; the engine side (clk, rst, m_*, s_*) runs on the system clock. Between them sit two
// ws_async_fifo instances: RX_DEPTH words from the host, TX_DEPTH words to the host.
//
// The chip's interface (DS_FT2232H and DS_FT232H §4.4 "FT245 Synchronous FIFO Interface
// Mode", the signal-timing figure and table; FTDI AN_130 §4.3 "Write Data Mode" and §4.4
// "Read Data Mode") is half duplex on one 8-bit bus, and every transfer happens on a rising
// edge of CLKOUT:
//
// - Read (host -> FPGA): RXF# low says the chip has a byte. The FPGA drives OE# low, which
//   makes the chip drive the bus, and no earlier than one clock after OE# it drives RD# low.
//   A byte moves on each edge at which RD# and RXF# are both low; RXF# rises after the edge
//   that took the last byte it had.
// - Write (FPGA -> host): TXE# low says the chip has room. The FPGA drives the bus and WR#
//   low; a byte moves on each edge at which WR# and TXE# are both low.
//
// Timing: the chip's outputs (RXF#, TXE#, data) change up to 7.15 ns after CLKOUT rises and
// it needs 8 ns of setup on its inputs (the datasheet's sync FIFO timing table), so the
// 16.67 ns period leaves no room for a path from a chip output through logic to a chip
// input. Every output here (OE#, RD#, WR#, data, data enable) is therefore a register, and
// the inputs feed only next-state logic. The consequence is a one-cycle reaction time: the
// FPGA sees RXF# or TXE# rise at an edge and can only release RD# or WR# for the edge after.
// That edge is harmless because the chip moves a byte only when its own flag is low too, so
// the bookkeeping here is exactly the chip's rule:
//
// - a byte was read at this edge  <=> RD# (our register) was low and RXF# is low now;
// - a byte was written at this edge <=> WR# (our register) was low and TXE# is low now.
//
// The byte on the bus when TXE# rises is simply presented again (same data, WR# low again)
// once TXE# falls, so it is neither lost nor duplicated; a read with RXF# high takes nothing.
// RD# is only ever driven low for an edge if RXF# was low at the edge before, and WR# only
// if TXE# was low, so neither is held low into a flag the FPGA has already seen high.
//
// Bus turnaround: the bus is never driven by both sides. OE# goes low only after a cycle in
// which the FPGA did not drive, and the FPGA drives only after a full cycle with OE# high
// (the chip's drivers need time to let go after OE# rises, and ours after data_oe falls). A
// switch from reading to writing costs one idle cycle, writing to reading two (idle, then
// OE# a clock ahead of RD#).
//
// Arbitration: a direction keeps the bus while it can move bytes and the other side has
// nothing to do; when both have work, each gets up to BURST_BYTES bytes before the other
// takes over, and from idle the direction that did not go last goes first. A direction that
// stalls (RXF# or TXE# high, or no room / no data on the FPGA side) hands over at once.
// While neither side has anything to do the bus stays in the last direction, so a short
// RXF# gap at a USB packet boundary costs no turnaround.
//
// RX words: bytes are assembled little endian and pass through a one-word holding register
// into the RX FIFO. RD# is driven low for an edge only if the byte it may bring has a place,
// so a full FIFO throttles the chip (RXF# stays low, RD# high) and nothing is dropped.
//
// Reset: the ft_clk side is reset by rst through a two-flop synchroniser, so rst must be held
// for at least three ft_clk cycles while CLKOUT runs. CLKOUT only runs once the host has
// selected synchronous FIFO mode (bit mode 0x40, AN_130 §4.1); the board top must therefore
// reset this block after the host connects (see boards/ecp5-ft2232h/README.md "RTL").
//
// SIWU# (send immediate / wake up) is held inactive; the chip's latency timer flushes short
// packets to the host.
module ws_phy_ft245 #(
    parameter RX_DEPTH = 512,    // words from the host buffered toward clk; a power of two >= 4
    parameter TX_DEPTH = 512,    // words to the host buffered toward ft_clk; a power of two >= 4
    parameter BURST_BYTES = 512  // bytes one direction moves while the other waits, >= 1
) (
    input  wire         clk,
    input  wire         rst,

    // Words from the host (toward the link engine's RX side).
    output wire         m_valid,
    input  wire         m_ready,
    output wire [31:0]  m_data,

    // Words to the host (from the link engine's TX side).
    input  wire         s_valid,
    output wire         s_ready,
    input  wire [31:0]  s_data,

    // The chip, in its 60 MHz CLKOUT domain. The top level joins ft_data_i/_o/_oe into the
    // ADBUS[7:0] tristate buffer.
    input  wire         ft_clk,     // CLKOUT
    input  wire         ft_rxf_n,   // RXF#: the chip has a byte for us
    input  wire         ft_txe_n,   // TXE#: the chip has room for a byte
    input  wire [7:0]   ft_data_i,  // ADBUS, as received
    output wire [7:0]   ft_data_o,  // ADBUS, as driven when ft_data_oe
    output wire         ft_data_oe, // 1: the FPGA drives ADBUS
    output wire         ft_rd_n,    // RD#
    output wire         ft_wr_n,    // WR#
    output wire         ft_oe_n,    // OE#: the chip drives ADBUS
    output wire         ft_siwu_n   // SIWU#, held inactive
);

    localparam BURST_W = $clog2(BURST_BYTES + 1);
    localparam BURST_LAST = BURST_BYTES - 1;

    localparam [1:0] ST_IDLE = 2'd0;   // nobody drives: the turnaround cycle
    localparam [1:0] ST_RD_OE = 2'd1;  // OE# low, RD# not yet
    localparam [1:0] ST_READ = 2'd2;   // OE# low, RD# low whenever a byte can move
    localparam [1:0] ST_WRITE = 2'd3;  // the FPGA drives, WR# low whenever a byte can move

    initial begin
        if (RX_DEPTH < 4 || (RX_DEPTH & (RX_DEPTH - 1)) != 0)
            $error("ws_phy_ft245: RX_DEPTH must be a power of two >= 4");
        if (TX_DEPTH < 4 || (TX_DEPTH & (TX_DEPTH - 1)) != 0)
            $error("ws_phy_ft245: TX_DEPTH must be a power of two >= 4");
        if (BURST_BYTES < 1) $error("ws_phy_ft245: BURST_BYTES must be >= 1");
    end

    // ------------------------------------------------------------------ ft_clk reset

    (* async_reg = "true" *) reg [1:0] ft_rst_sync_reg;
    wire ft_rst = ft_rst_sync_reg[1];

    always @(posedge ft_clk) begin
        ft_rst_sync_reg <= {ft_rst_sync_reg[0], rst};
    end

    // ------------------------------------------------------------------ clock crossings

    reg          hold_valid_reg, hold_valid_next;
    reg  [31:0]  hold_data_reg, hold_data_next;
    wire         rxq_ready;

    ws_async_fifo #(
        .DEPTH(RX_DEPTH),
        .WIDTH(32)
    ) rx_fifo_inst (
        .s_clk(ft_clk),
        .s_rst(ft_rst),
        .s_valid(hold_valid_reg),
        .s_ready(rxq_ready),
        .s_data(hold_data_reg),
        .m_clk(clk),
        .m_rst(rst),
        .m_valid(m_valid),
        .m_ready(m_ready),
        .m_data(m_data)
    );

    wire         txq_valid;
    wire [31:0]  txq_data;
    reg          txq_pop;

    ws_async_fifo #(
        .DEPTH(TX_DEPTH),
        .WIDTH(32)
    ) tx_fifo_inst (
        .s_clk(clk),
        .s_rst(rst),
        .s_valid(s_valid),
        .s_ready(s_ready),
        .s_data(s_data),
        .m_clk(ft_clk),
        .m_rst(ft_rst),
        .m_valid(txq_valid),
        .m_ready(txq_pop),
        .m_data(txq_data)
    );

    // ------------------------------------------------------------------ ft_clk state

    reg [1:0]           state_reg, state_next;
    // The strobes are held active high: every register of an ECP5 comes out of configuration
    // as 0, so RD#, WR# and OE# are inactive from then on, before CLKOUT runs and ft_rst can
    // act (the chip is still in its asynchronous mode then, where RD# and WR# are strobes).
    reg                 oe_reg, oe_next;
    reg                 rd_reg, rd_next;
    reg                 wr_reg, wr_next;
    reg                 doe_reg, doe_next;
    reg [7:0]           dout_reg, dout_next;
    reg [BURST_W-1:0]   burst_reg, burst_next;
    reg                 last_write_reg, last_write_next;

    // RX assembly: asm_cnt bytes of the next word, byte k in bits 8k+7:8k.
    reg [23:0]          asm_reg, asm_next;
    reg [1:0]           asm_cnt_reg, asm_cnt_next;

    // TX split: dout holds the byte on offer (tx_pend); txw the bytes of its word after it.
    reg                 tx_pend_reg, tx_pend_next;
    reg [23:0]          txw_reg, txw_next;
    reg [1:0]           txw_left_reg, txw_left_next;

    reg                 rxf;
    reg                 txe;
    reg                 got_byte;
    reg                 sent_byte;
    reg                 rd_ok;
    reg                 rx_want;
    reg                 tx_want;
    reg                 burst_done;

    assign ft_data_o = dout_reg;
    assign ft_data_oe = doe_reg;
    assign ft_rd_n = !rd_reg;
    assign ft_wr_n = !wr_reg;
    assign ft_oe_n = !oe_reg;
    assign ft_siwu_n = 1'b1;

    always @* begin
        rxf = !ft_rxf_n;
        txe = !ft_txe_n;
        // The chip's own rule for a transfer at this edge (see the header).
        got_byte = rd_reg && rxf;
        sent_byte = wr_reg && txe;

        // RX: assemble; a fourth byte completes a word into the holding register, which
        // drains into the FIFO whenever it has room.
        asm_next = asm_reg;
        asm_cnt_next = asm_cnt_reg;
        hold_valid_next = hold_valid_reg && !rxq_ready;
        hold_data_next = hold_data_reg;
        if (got_byte) begin
            if (asm_cnt_reg == 2'd3) begin
                hold_valid_next = 1'b1;
                hold_data_next = {ft_data_i, asm_reg};
                asm_cnt_next = 2'd0;
            end else begin
                // A case, not asm_next[asm_cnt_reg*8 +: 8]: yosys builds a 32-bit barrel
                // shifter for a computed part-select.
                case (asm_cnt_reg)
                    2'd0: asm_next[7:0] = ft_data_i;
                    2'd1: asm_next[15:8] = ft_data_i;
                    default: asm_next[23:16] = ft_data_i;
                endcase
                asm_cnt_next = asm_cnt_reg + 2'd1;
            end
        end
        // A byte at the next edge has a place: in the assembler, or it completes a word and
        // the holding register is free (rd_ok was checked at the previous edge, so the
        // holding register is never overwritten above).
        rd_ok = (asm_cnt_next != 2'd3) || !hold_valid_next;

        // TX: once the byte on offer has gone (or there is none), offer the next one.
        dout_next = dout_reg;
        tx_pend_next = tx_pend_reg;
        txw_next = txw_reg;
        txw_left_next = txw_left_reg;
        txq_pop = 1'b0;
        if (sent_byte || !tx_pend_reg) begin
            if (txw_left_reg != 2'd0) begin
                dout_next = txw_reg[7:0];
                txw_next = {8'd0, txw_reg[23:8]};
                txw_left_next = txw_left_reg - 2'd1;
                tx_pend_next = 1'b1;
            end else if (txq_valid) begin
                dout_next = txq_data[7:0];
                txw_next = txq_data[31:8];
                txw_left_next = 2'd3;
                tx_pend_next = 1'b1;
                txq_pop = 1'b1;
            end else begin
                tx_pend_next = 1'b0;
            end
        end

        // Arbitration (see the header).
        rx_want = rxf && rd_ok;
        tx_want = txe && tx_pend_next;
        // This edge's byte counts: a turn ends on its BURST_BYTES-th byte, not one after.
        burst_done = (burst_reg == BURST_BYTES[BURST_W-1:0])
            || ((got_byte || sent_byte) && burst_reg == BURST_LAST[BURST_W-1:0]);
        state_next = state_reg;
        last_write_next = last_write_reg;
        case (state_reg)
            ST_IDLE: begin
                if (rx_want && (!tx_want || last_write_reg)) begin
                    state_next = ST_RD_OE;
                    last_write_next = 1'b0;
                end else if (tx_want) begin
                    state_next = ST_WRITE;
                    last_write_next = 1'b1;
                end
            end
            // OE# has now been low for a whole cycle: RD# may follow (§4.4 read cycle).
            ST_RD_OE: state_next = ST_READ;
            ST_READ: begin
                if (tx_want && (!rx_want || burst_done)) state_next = ST_IDLE;
            end
            default: begin  // ST_WRITE
                if (rx_want && (!tx_want || burst_done)) state_next = ST_IDLE;
            end
        endcase

        burst_next = burst_reg;
        if (state_next != state_reg) begin
            burst_next = {BURST_W{1'b0}};
        end else if (burst_done) begin
            burst_next = BURST_BYTES[BURST_W-1:0];
        end else if (got_byte || sent_byte) begin
            burst_next = burst_reg + 1'b1;
        end

        // Outputs for the next cycle, all registered.
        oe_next = (state_next == ST_RD_OE || state_next == ST_READ);
        rd_next = (state_next == ST_READ && rx_want);
        doe_next = (state_next == ST_WRITE);
        wr_next = (state_next == ST_WRITE && tx_want);
    end

    always @(posedge ft_clk) begin
        state_reg <= state_next;
        oe_reg <= oe_next;
        rd_reg <= rd_next;
        wr_reg <= wr_next;
        doe_reg <= doe_next;
        dout_reg <= dout_next;
        burst_reg <= burst_next;
        last_write_reg <= last_write_next;
        asm_reg <= asm_next;
        asm_cnt_reg <= asm_cnt_next;
        hold_valid_reg <= hold_valid_next;
        hold_data_reg <= hold_data_next;
        tx_pend_reg <= tx_pend_next;
        txw_reg <= txw_next;
        txw_left_reg <= txw_left_next;
        if (ft_rst) begin
            state_reg <= ST_IDLE;
            oe_reg <= 1'b0;
            rd_reg <= 1'b0;
            wr_reg <= 1'b0;
            doe_reg <= 1'b0;
            burst_reg <= {BURST_W{1'b0}};
            last_write_reg <= 1'b0;
            asm_cnt_reg <= 2'd0;
            hold_valid_reg <= 1'b0;
            tx_pend_reg <= 1'b0;
            txw_left_reg <= 2'd0;
        end
    end

endmodule

`default_nettype wire
