`default_nettype none

// ws_mx_mem_model: the SIMULATION model of MemoryX's weight store, an AXI4 slave in front of a
// plain array. It stands where a DDR/SDRAM controller (LiteDRAM, MIG) or a BRAM bridge sits
// on a board, so that the streamer (ws_mx_streamer) runs against the same AXI4 interface in
// simulation and on hardware, and so that measured figures honour a memory bandwidth.
//
// What it models (docs/memoryx-store.md "The memory model"):
// - Bandwidth: one DATA_WIDTH-bit beat per cycle in total, reads and writes sharing it, as
//   the data bus of a DRAM is shared. Bytes per cycle = DATA_WIDTH / 8.
// - Latency: the first R beat of a burst appears LATENCY cycles after its AR handshake at
//   the earliest; read bursts are served in AR order (any RID).
// - Direction switches: TURNAROUND idle bus cycles whenever the bus turns from reads to
//   writes or back; it stays in one direction for up to BATCH bursts while the other waits,
//   as a DRAM controller batches to amortise the turnaround.
// - Writes: a write burst owns the bus from its AW until WLAST; B follows B_LATENCY cycles
//   after WLAST. W beats are accepted only for the burst at the head of the AW queue.
// - Backpressure: while `stall` is high no beat moves (R is held, WREADY is low) and no
//   address is accepted. A testbench drives it at random, or with a duty cycle to cut the
//   bandwidth.
// - Errors: an address at or past MEM_BYTES answers SLVERR and writes nothing.
//   `err_protocol` is sticky high after an AXI rule this model checks is broken (WLAST not on
//   the burst's last beat, AxSIZE not the full width, AxBURST not INCR, a burst crossing a
//   4 KiB boundary).
//
// The backdoor port (bd_*) reads and writes whole beats (beat index, not byte address) for
// a testbench to load and check the store; bd_rdata is valid the cycle after bd_en. It must
// not be used while AXI traffic is in flight.
//
// It is written in synthesisable style, but it is a simulation model: a board uses its
// memory controller instead.
module ws_mx_mem_model #(
    parameter DATA_WIDTH = 256,     // bits per beat: bytes per cycle x 8; a power of two >= 32
    parameter ADDR_WIDTH = 32,      // AXI address bits
    parameter ID_WIDTH = 2,         // AXI ID bits
    parameter MEM_BYTES = 1 << 20,  // size of the array; a power of two, >= 2 beats
    parameter LATENCY = 24,         // AR handshake to first R beat, cycles, >= 1
    parameter B_LATENCY = 2,        // WLAST to B, cycles, >= 1
    parameter TURNAROUND = 2,       // idle bus cycles on a read<->write switch
    parameter BATCH = 4,            // bursts served in one direction while the other waits, >= 1
    parameter QUEUE_DEPTH = 8       // AR queue, AW queue and B queue entries; a power of two >= 2
) (
    input  wire                      clk,
    input  wire                      rst,

    // Testbench backpressure: nothing moves and no address is accepted while high.
    input  wire                      stall,

    // AXI4 slave: read address.
    input  wire [ID_WIDTH-1:0]       s_axi_arid,
    input  wire [ADDR_WIDTH-1:0]     s_axi_araddr,
    input  wire [7:0]                s_axi_arlen,
    input  wire [2:0]                s_axi_arsize,
    input  wire [1:0]                s_axi_arburst,
    input  wire                      s_axi_arvalid,
    output wire                      s_axi_arready,
    // Read data.
    output wire [ID_WIDTH-1:0]       s_axi_rid,
    output wire [DATA_WIDTH-1:0]     s_axi_rdata,
    output wire [1:0]                s_axi_rresp,
    output wire                      s_axi_rlast,
    output wire                      s_axi_rvalid,
    input  wire                      s_axi_rready,
    // Write address.
    input  wire [ID_WIDTH-1:0]       s_axi_awid,
    input  wire [ADDR_WIDTH-1:0]     s_axi_awaddr,
    input  wire [7:0]                s_axi_awlen,
    input  wire [2:0]                s_axi_awsize,
    input  wire [1:0]                s_axi_awburst,
    input  wire                      s_axi_awvalid,
    output wire                      s_axi_awready,
    // Write data.
    input  wire [DATA_WIDTH-1:0]     s_axi_wdata,
    input  wire [DATA_WIDTH/8-1:0]   s_axi_wstrb,
    input  wire                      s_axi_wlast,
    input  wire                      s_axi_wvalid,
    output wire                      s_axi_wready,
    // Write response.
    output wire [ID_WIDTH-1:0]       s_axi_bid,
    output wire [1:0]                s_axi_bresp,
    output wire                      s_axi_bvalid,
    input  wire                      s_axi_bready,

    // Backdoor (testbench only): whole beats by beat index.
    input  wire                      bd_en,
    input  wire                      bd_we,
    input  wire [$clog2(MEM_BYTES/(DATA_WIDTH/8))-1:0] bd_addr,
    input  wire [DATA_WIDTH-1:0]     bd_wdata,
    output wire [DATA_WIDTH-1:0]     bd_rdata,

    // Sticky: an AXI rule this model checks was broken.
    output wire                      err_protocol
);

    localparam BEAT_BYTES = DATA_WIDTH / 8;
    localparam OFFSET = $clog2(BEAT_BYTES);
    localparam DEPTH = MEM_BYTES / BEAT_BYTES;
    localparam IDX_W = $clog2(DEPTH);
    localparam QW = $clog2(QUEUE_DEPTH);
    localparam TW = 32;  // width of the model's cycle counter
    localparam TA_W = $clog2(TURNAROUND + 2);
    localparam BATCH_W = $clog2(BATCH + 1);
    localparam [2:0] FULL_SIZE = OFFSET[2:0];
    localparam [1:0] RESP_OKAY = 2'b00;
    localparam [1:0] RESP_SLVERR = 2'b10;

    initial begin
        if (DATA_WIDTH < 32 || (DATA_WIDTH & (DATA_WIDTH - 1)) != 0 || DATA_WIDTH > 1024) begin
            $error("ws_mx_mem_model: DATA_WIDTH must be a power of two in 32..1024");
        end
        if ((MEM_BYTES & (MEM_BYTES - 1)) != 0 || MEM_BYTES < 2 * BEAT_BYTES) begin
            $error("ws_mx_mem_model: MEM_BYTES must be a power of two of at least two beats");
        end
        if ($clog2(MEM_BYTES) >= ADDR_WIDTH) $error("ws_mx_mem_model: MEM_BYTES must fit below 2^(ADDR_WIDTH-1)");
        if (LATENCY < 1) $error("ws_mx_mem_model: LATENCY must be >= 1");
        if (B_LATENCY < 1) $error("ws_mx_mem_model: B_LATENCY must be >= 1");
        if (TURNAROUND < 0) $error("ws_mx_mem_model: TURNAROUND must be >= 0");
        if (BATCH < 1) $error("ws_mx_mem_model: BATCH must be >= 1");
        if (QUEUE_DEPTH < 2 || (QUEUE_DEPTH & (QUEUE_DEPTH - 1)) != 0) begin
            $error("ws_mx_mem_model: QUEUE_DEPTH must be a power of two >= 2");
        end
    end

    reg [DATA_WIDTH-1:0] mem [0:DEPTH-1];

    reg [TW-1:0] now_reg;

    // ---- address queues: {id, addr, len, time} ----
    reg [ID_WIDTH-1:0]   arq_id   [0:QUEUE_DEPTH-1];
    reg [ADDR_WIDTH-1:0] arq_addr [0:QUEUE_DEPTH-1];
    reg [7:0]            arq_len  [0:QUEUE_DEPTH-1];
    reg [TW-1:0]         arq_time [0:QUEUE_DEPTH-1];
    reg [QW:0]           arq_wr_reg, arq_rd_reg;
    reg [ID_WIDTH-1:0]   awq_id   [0:QUEUE_DEPTH-1];
    reg [ADDR_WIDTH-1:0] awq_addr [0:QUEUE_DEPTH-1];
    reg [7:0]            awq_len  [0:QUEUE_DEPTH-1];
    reg [QW:0]           awq_wr_reg, awq_rd_reg;
    // B queue: {id, resp, time}
    reg [ID_WIDTH-1:0]   bq_id    [0:QUEUE_DEPTH-1];
    reg [1:0]            bq_resp  [0:QUEUE_DEPTH-1];
    reg [TW-1:0]         bq_time  [0:QUEUE_DEPTH-1];
    reg [QW:0]           bq_wr_reg, bq_rd_reg;

    wire arq_full = (arq_wr_reg[QW-1:0] == arq_rd_reg[QW-1:0]) && (arq_wr_reg[QW] != arq_rd_reg[QW]);
    wire awq_full = (awq_wr_reg[QW-1:0] == awq_rd_reg[QW-1:0]) && (awq_wr_reg[QW] != awq_rd_reg[QW]);
    wire bq_full = (bq_wr_reg[QW-1:0] == bq_rd_reg[QW-1:0]) && (bq_wr_reg[QW] != bq_rd_reg[QW]);
    wire arq_empty = arq_wr_reg == arq_rd_reg;
    wire awq_empty = awq_wr_reg == awq_rd_reg;
    wire bq_empty = bq_wr_reg == bq_rd_reg;

    // A B entry is needed per write burst; the AW queue is only accepted while B has room
    // for everything queued, so the write side can never block on a full B queue.
    assign s_axi_arready = !stall && !arq_full;
    assign s_axi_awready = !stall && !awq_full;
    wire ar_fire = s_axi_arvalid && s_axi_arready;
    wire aw_fire = s_axi_awvalid && s_axi_awready;

    // ---- the bus ----
    localparam [1:0] BUS_IDLE = 2'd0;
    localparam [1:0] BUS_TURN = 2'd1;
    localparam [1:0] BUS_READ = 2'd2;
    localparam [1:0] BUS_WRITE = 2'd3;

    reg [1:0]            bus_reg;
    reg                  dir_write_reg;  // direction of the last burst served
    reg                  turn_to_write_reg;
    reg [TA_W-1:0]       turn_cnt_reg;
    reg [BATCH_W-1:0]    batch_reg;
    reg [ADDR_WIDTH-1:0] cur_addr_reg;
    reg [8:0]            cur_left_reg;
    reg [ID_WIDTH-1:0]   cur_id_reg;
    reg                  cur_bad_reg;  // a beat of this write burst was out of range

    reg                  r_valid_reg;
    reg [DATA_WIDTH-1:0] r_data_reg;
    reg [ID_WIDTH-1:0]   r_id_reg;
    reg [1:0]            r_resp_reg;
    reg                  r_last_reg;
    reg [DATA_WIDTH-1:0] bd_rdata_reg;
    reg                  err_reg;

    wire [QW-1:0] arq_head = arq_rd_reg[QW-1:0];
    wire [QW-1:0] awq_head = awq_rd_reg[QW-1:0];
    wire [QW-1:0] bq_head = bq_rd_reg[QW-1:0];
    // A read burst may start once its latency has run out (wrap-safe difference).
    wire [TW-1:0] ar_age = now_reg - arq_time[arq_head];
    wire rd_eligible = !arq_empty && !ar_age[TW-1];
    wire wr_eligible = !awq_empty;

    wire in_range = cur_addr_reg < MEM_BYTES[ADDR_WIDTH-1:0];
    wire [IDX_W-1:0] cur_idx = cur_addr_reg[OFFSET +: IDX_W];

    wire r_load = (bus_reg == BUS_READ) && !stall && (!r_valid_reg || s_axi_rready);
    assign s_axi_wready = (bus_reg == BUS_WRITE) && !stall && !bq_full;
    wire w_fire = s_axi_wvalid && s_axi_wready;
    wire b_fire = s_axi_bvalid && s_axi_bready;
    wire [TW-1:0] b_age = now_reg - bq_time[bq_head];
    assign s_axi_bvalid = !bq_empty && !b_age[TW-1];
    assign s_axi_bid = bq_id[bq_head];
    assign s_axi_bresp = bq_resp[bq_head];

    assign s_axi_rvalid = r_valid_reg;
    assign s_axi_rdata = r_data_reg;
    assign s_axi_rid = r_id_reg;
    assign s_axi_rresp = r_resp_reg;
    assign s_axi_rlast = r_last_reg;
    assign bd_rdata = bd_rdata_reg;
    assign err_protocol = err_reg;

    // Write strobes as a bit mask.
    reg [DATA_WIDTH-1:0] wmask;
    integer bi;
    always @* begin
        for (bi = 0; bi < BEAT_BYTES; bi = bi + 1) wmask[8*bi +: 8] = {8{s_axi_wstrb[bi]}};
    end

    // A burst that would cross a 4 KiB boundary breaks AXI4 (A3.4.1).
    function automatic crosses_4k(input [11:0] addr_lo, input [7:0] len);
        reg [16:0] end_byte;  // one past the burst's last byte, from the 4 KiB page start
        begin
            end_byte = {5'd0, addr_lo} + (({9'd0, len} + 17'd1) << OFFSET);
            crosses_4k = end_byte > 17'd4096;
        end
    endfunction

    // The bus is free in IDLE and in the cycle a burst moves its last beat, so bursts in one
    // direction follow each other with no idle cycle.
    wire burst_end = (bus_reg == BUS_READ && r_load && cur_left_reg == 9'd1)
        || (bus_reg == BUS_WRITE && w_fire && cur_left_reg == 9'd1);
    wire bus_free = bus_reg == BUS_IDLE || burst_end;

    // Which burst the free bus takes: keep the direction for up to BATCH bursts while the
    // other waits; a switch goes through TURNAROUND idle cycles first.
    reg pick_read, pick_write;
    always @* begin
        pick_read = 1'b0;
        pick_write = 1'b0;
        if (rd_eligible && wr_eligible) begin
            if (batch_reg < BATCH[BATCH_W-1:0]) begin
                pick_write = dir_write_reg;
                pick_read = !dir_write_reg;
            end else begin
                pick_write = !dir_write_reg;
                pick_read = dir_write_reg;
            end
        end else begin
            pick_read = rd_eligible;
            pick_write = wr_eligible;
        end
    end
    wire [BATCH_W-1:0] batch_sat = (batch_reg >= BATCH[BATCH_W-1:0]) ? batch_reg : batch_reg + 1'b1;
    wire turn_needed = (pick_read && dir_write_reg) || (pick_write && !dir_write_reg);
    wire start_read = (bus_free && pick_read && (!turn_needed || TURNAROUND == 0))
        || (bus_reg == BUS_TURN && turn_cnt_reg == 1 && !turn_to_write_reg);
    wire start_write = (bus_free && pick_write && (!turn_needed || TURNAROUND == 0))
        || (bus_reg == BUS_TURN && turn_cnt_reg == 1 && turn_to_write_reg);
    wire start_turn = bus_free && (pick_read || pick_write) && turn_needed && TURNAROUND > 0;

    always @(posedge clk) begin
        if (bd_en) begin
            if (bd_we) mem[bd_addr] <= bd_wdata;
            bd_rdata_reg <= mem[bd_addr];
        end

        if (ar_fire) begin
            arq_id[arq_wr_reg[QW-1:0]] <= s_axi_arid;
            arq_addr[arq_wr_reg[QW-1:0]] <= s_axi_araddr;
            arq_len[arq_wr_reg[QW-1:0]] <= s_axi_arlen;
            arq_time[arq_wr_reg[QW-1:0]] <= now_reg + LATENCY[TW-1:0] - 1'b1;
            if (s_axi_arsize != FULL_SIZE || s_axi_arburst != 2'b01) err_reg <= 1'b1;
            if (crosses_4k(s_axi_araddr[11:0], s_axi_arlen)) err_reg <= 1'b1;
        end
        if (aw_fire) begin
            awq_id[awq_wr_reg[QW-1:0]] <= s_axi_awid;
            awq_addr[awq_wr_reg[QW-1:0]] <= s_axi_awaddr;
            awq_len[awq_wr_reg[QW-1:0]] <= s_axi_awlen;
            if (s_axi_awsize != FULL_SIZE || s_axi_awburst != 2'b01) err_reg <= 1'b1;
            if (crosses_4k(s_axi_awaddr[11:0], s_axi_awlen)) err_reg <= 1'b1;
        end

        if (r_load) begin
            r_valid_reg <= 1'b1;
            r_data_reg <= in_range ? mem[cur_idx] : {DATA_WIDTH{1'b0}};
            r_resp_reg <= in_range ? RESP_OKAY : RESP_SLVERR;
            r_id_reg <= cur_id_reg;
            r_last_reg <= cur_left_reg == 9'd1;
        end else if (s_axi_rready) begin
            r_valid_reg <= 1'b0;
        end

        if (w_fire) begin
            if (in_range) mem[cur_idx] <= (mem[cur_idx] & ~wmask) | (s_axi_wdata & wmask);
            if (s_axi_wlast != (cur_left_reg == 9'd1)) err_reg <= 1'b1;
            if (!in_range) cur_bad_reg <= 1'b1;
            if (cur_left_reg == 9'd1) begin
                bq_id[bq_wr_reg[QW-1:0]] <= cur_id_reg;
                bq_resp[bq_wr_reg[QW-1:0]] <= (cur_bad_reg || !in_range) ? RESP_SLVERR : RESP_OKAY;
                bq_time[bq_wr_reg[QW-1:0]] <= now_reg + B_LATENCY[TW-1:0] - 1'b1;
            end
        end

        // The current burst moves one beat per cycle (r_load / w_fire) ...
        if (r_load || w_fire) begin
            cur_addr_reg <= cur_addr_reg + BEAT_BYTES[ADDR_WIDTH-1:0];
            cur_left_reg <= cur_left_reg - 1'b1;
        end
        if (burst_end) bus_reg <= BUS_IDLE;
        if (bus_reg == BUS_TURN) turn_cnt_reg <= turn_cnt_reg - 1'b1;
        // ... and the next one is taken from the head of its queue when the bus frees.
        if (start_turn) begin
            bus_reg <= BUS_TURN;
            turn_to_write_reg <= pick_write;
            turn_cnt_reg <= TURNAROUND[TA_W-1:0];
        end
        if (start_read) begin
            bus_reg <= BUS_READ;
            cur_addr_reg <= arq_addr[arq_head];
            cur_left_reg <= {1'b0, arq_len[arq_head]} + 9'd1;
            cur_id_reg <= arq_id[arq_head];
            batch_reg <= dir_write_reg ? 1 : batch_sat;
            dir_write_reg <= 1'b0;
        end
        if (start_write) begin
            bus_reg <= BUS_WRITE;
            cur_addr_reg <= awq_addr[awq_head];
            cur_left_reg <= {1'b0, awq_len[awq_head]} + 9'd1;
            cur_id_reg <= awq_id[awq_head];
            cur_bad_reg <= 1'b0;
            batch_reg <= dir_write_reg ? batch_sat : 1;
            dir_write_reg <= 1'b1;
        end

        now_reg <= now_reg + 1'b1;
        arq_wr_reg <= arq_wr_reg + {{QW{1'b0}}, ar_fire};
        awq_wr_reg <= awq_wr_reg + {{QW{1'b0}}, aw_fire};
        arq_rd_reg <= arq_rd_reg + {{QW{1'b0}}, start_read};
        awq_rd_reg <= awq_rd_reg + {{QW{1'b0}}, start_write};
        bq_wr_reg <= bq_wr_reg + {{QW{1'b0}}, w_fire && cur_left_reg == 9'd1};
        bq_rd_reg <= bq_rd_reg + {{QW{1'b0}}, b_fire};

        if (rst) begin
            now_reg <= {TW{1'b0}};
            arq_wr_reg <= {(QW + 1){1'b0}};
            arq_rd_reg <= {(QW + 1){1'b0}};
            awq_wr_reg <= {(QW + 1){1'b0}};
            awq_rd_reg <= {(QW + 1){1'b0}};
            bq_wr_reg <= {(QW + 1){1'b0}};
            bq_rd_reg <= {(QW + 1){1'b0}};
            bus_reg <= BUS_IDLE;
            dir_write_reg <= 1'b0;
            turn_to_write_reg <= 1'b0;
            turn_cnt_reg <= {TA_W{1'b0}};
            batch_reg <= {BATCH_W{1'b0}};
            cur_left_reg <= 9'd0;
            cur_bad_reg <= 1'b0;
            r_valid_reg <= 1'b0;
            err_reg <= 1'b0;
        end
    end

endmodule

`default_nettype wire
