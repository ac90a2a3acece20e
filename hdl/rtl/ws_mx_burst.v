`default_nettype none

// ws_mx_burst: splits one contiguous run of beats (one array of one chunk) into AXI4 INCR
// bursts, for the read and write issuers of ws_mx_streamer.
//
// A job is (start address, beats). Its bursts are at most MAX_BURST beats, never cross a
// 4 KiB boundary (AXI4 A3.4.1), and the first burst of a job is at most FIRST_BURST beats:
// a chunk's first lane beat needs the first beat of every array it reads, and the arrays'
// first bursts share one data bus, so short first bursts cut the time to the first weight
// out without shortening the bursts that follow (docs/memoryx-store.md "Bursts").
//
// `addr`/`len`/`last` describe the current burst while `busy`; `take` consumes it (the
// issuer raises it in the cycle the burst goes out). `start` loads a new job and may only
// be raised while idle.
module ws_mx_burst #(
    parameter ADDR_WIDTH = 32,  // AXI address bits
    parameter BEAT_BYTES = 32,  // bytes per beat (the AXI data width / 8), a power of two
    parameter MAX_BURST = 16,   // longest burst in beats, 1..256
    parameter FIRST_BURST = 2,  // longest first burst of a job in beats, 1..MAX_BURST
    parameter BEATS_W = 16      // width of a job's beat count, >= 14
) (
    input  wire                  clk,
    input  wire                  rst,

    input  wire                  start,
    input  wire [ADDR_WIDTH-1:0] start_addr,
    input  wire [BEATS_W-1:0]    start_beats,

    input  wire                  take,

    output wire                  busy,
    output wire [ADDR_WIDTH-1:0] addr,
    output wire [8:0]            len,   // beats of the current burst, 1..256
    output wire                  last   // the current burst is the job's last
);

    localparam OFFSET = $clog2(BEAT_BYTES);
    localparam PAGE_BEATS = 4096 / BEAT_BYTES;

    initial begin
        if ((BEAT_BYTES & (BEAT_BYTES - 1)) != 0 || BEAT_BYTES > 4096) begin
            $error("ws_mx_burst: BEAT_BYTES must be a power of two <= 4096");
        end
        if (MAX_BURST < 1 || MAX_BURST > 256) $error("ws_mx_burst: MAX_BURST must be in 1..256");
        if (FIRST_BURST < 1 || FIRST_BURST > MAX_BURST) $error("ws_mx_burst: FIRST_BURST must be in 1..MAX_BURST");
        if (BEATS_W < 14) $error("ws_mx_burst: BEATS_W must be at least 14");
    end

    reg                  busy_reg;
    reg                  first_reg;
    reg [ADDR_WIDTH-1:0] addr_reg;
    reg [BEATS_W-1:0]    left_reg;

    // Beats to the next 4 KiB boundary: 1..PAGE_BEATS.
    wire [12:0] page_off = {1'b0, addr_reg[11:0]} >> OFFSET;
    wire [12:0] to_page = PAGE_BEATS[12:0] - page_off;
    wire [BEATS_W-1:0] to_page_w = {{(BEATS_W - 13){1'b0}}, to_page};
    wire [BEATS_W-1:0] cap = first_reg ? FIRST_BURST[BEATS_W-1:0] : MAX_BURST[BEATS_W-1:0];
    reg  [BEATS_W-1:0] n;
    always @* begin
        n = left_reg;
        if (cap < n) n = cap;
        if (to_page_w < n) n = to_page_w;
    end

    assign busy = busy_reg;
    assign addr = addr_reg;
    assign len = n[8:0];
    assign last = n == left_reg;

    always @(posedge clk) begin
        if (start) begin
            busy_reg <= start_beats != {BEATS_W{1'b0}};
            first_reg <= 1'b1;
            addr_reg <= start_addr;
            left_reg <= start_beats;
        end else if (take && busy_reg) begin
            first_reg <= 1'b0;
            addr_reg <= addr_reg + ({{(ADDR_WIDTH-BEATS_W){1'b0}}, n} << OFFSET);
            left_reg <= left_reg - n;
            if (n == left_reg) busy_reg <= 1'b0;
        end
        if (rst) begin
            busy_reg <= 1'b0;
            first_reg <= 1'b0;
        end
    end

endmodule

`default_nettype wire
