`default_nettype none

// cv32e40p_clock_gate: pass-through replacement for CV32E40P's clock-gating cell, FPGA builds only.
//
// CV32E40P gates its own clock while it sleeps in WFI (CV32E40P user manual, "Sleep Unit").
// The package's simulation cell (bhv/cv32e40p_sim_clock_gate.sv) does that with a latch and an
// AND gate, which on an FPGA puts logic in the clock path. FPGA builds link this cell instead:
// the clock always runs, and the core stays correct because the sleep unit also stops issuing
// (the gate only saves power). Same module name and ports as the simulation cell.
module cv32e40p_clock_gate (
    input  wire clk_i,
    input  wire en_i,
    input  wire scan_cg_en_i,
    output wire clk_o
);

    assign clk_o = clk_i;

    wire _unused_ok = &{1'b0, en_i, scan_cg_en_i};

endmodule

`default_nettype wire
