`default_nettype none

// ws_clock_gate: a latch-based clock gate, gclk = clk while en was high at clk's last falling
// edge. The latch is transparent while clk is low, so en may change at any time in the low
// phase without glitching gclk (the standard integrated clock gate of ASIC libraries).
//
// What it is for here: simulation speed. Verilator evaluates a register, and the logic that
// only it feeds, when that register's clock has an edge; a datapath on a gated clock costs
// nothing while it is idle. MemoryX's optimizer lanes (ws_optim_lane) are most of the SoC's
// logic and idle most of the time, and gating them is what keeps the simulated board fast
// (docs/sim.md "Where the simulation time goes").
//
// In synthesis (`SYNTHESIS`, which yosys defines) the gate is a wire: an FPGA routes clocks on
// a few global networks, and the ECP5's clock-enable buffer (DCCA) would spend one per lane
// for a power saving this design does not need. The gated logic must therefore behave the
// same with and without the gate: its owner enables it in every cycle in which any of its
// registers could take a value that matters (see ws_optim_lane), and the tests run both
// ways.
module ws_clock_gate (
    input  wire clk,
    input  wire en,
    output wire gclk
);
`ifdef SYNTHESIS
    wire unused_en = en;
    assign gclk = clk;
`else
    reg en_latch;
    /* verilator lint_off LATCH */
    always @* begin
        if (!clk) en_latch = en;
    end
    /* verilator lint_on LATCH */
    assign gclk = clk & en_latch;
`endif
endmodule

`default_nettype wire
