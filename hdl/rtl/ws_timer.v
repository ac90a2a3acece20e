`default_nettype none

// ws_timer: the machine timer in register slot 1 (hdl/regmap/timer.toml).
//
// mtime is a 64-bit counter that advances every clk cycle, so it runs at CLK_HZ (sysinfo
// CLK_HZ tells firmware the rate). The 32-bit bus cannot read it atomically, so reading
// MTIME_LO also latches the high word into MTIME_HI; reading LO then HI gives a consistent
// 64-bit value with no retry loop. `irq` is the level-sensitive machine timer interrupt,
// pending while mtime >= mtimecmp (RISC-V privileged spec §3.2.1), wired to CV32E40P irq_i[7].
// mtimecmp resets to all ones, so the interrupt stays quiet until firmware programs it.
module ws_timer (
    input  wire        clk,
    input  wire        rst,

    input  wire        reg_req,
    input  wire        reg_we,
    input  wire [11:0] reg_addr,
    input  wire [31:0] reg_wdata,
    input  wire [3:0]  reg_be,
    output wire [31:0] reg_rdata,

    output wire        irq
);

    wire        mtime_lo_re;
    wire [31:0] mtimecmp_lo_value;
    wire        mtimecmp_lo_we;
    wire [31:0] mtimecmp_hi_value;
    wire        mtimecmp_hi_we;

    reg [63:0] mtime_reg, mtime_next;
    reg [31:0] mtime_hi_latch_reg, mtime_hi_latch_next;

    ws_timer_csr ws_timer_csr_inst (
        .clk(clk),
        .rst(rst),
        .reg_req(reg_req),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata),
        .mtime_lo_value_i(mtime_reg[31:0]),
        .mtime_lo_re(mtime_lo_re),
        .mtime_hi_value_i(mtime_hi_latch_reg),
        .mtimecmp_lo_value(mtimecmp_lo_value),
        .mtimecmp_lo_we(mtimecmp_lo_we),
        .mtimecmp_hi_value(mtimecmp_hi_value),
        .mtimecmp_hi_we(mtimecmp_hi_we)
    );

    always @* begin
        mtime_next = mtime_reg + 64'd1;

        // The CSR block returns mtime_reg[31:0] of this same cycle for the LO read, so latching
        // mtime_reg[63:32] now pairs the two halves of one counter value.
        mtime_hi_latch_next = mtime_hi_latch_reg;
        if (mtime_lo_re) begin
            mtime_hi_latch_next = mtime_reg[63:32];
        end
    end

    always @(posedge clk) begin
        mtime_reg <= mtime_next;
        mtime_hi_latch_reg <= mtime_hi_latch_next;

        if (rst) begin
            mtime_reg <= 64'd0;
            mtime_hi_latch_reg <= 32'd0;
        end
    end

    // Compared straight from the two registers, with no extra stage, so a handler that moves
    // mtimecmp forward sees the interrupt drop the cycle after its store lands and does not
    // re-enter on a stale level. CV32E40P registers irq_i internally.
    assign irq = (mtime_reg >= {mtimecmp_hi_value, mtimecmp_lo_value});

    wire _unused_ok = &{1'b0, mtimecmp_lo_we, mtimecmp_hi_we};

endmodule

`default_nettype wire
