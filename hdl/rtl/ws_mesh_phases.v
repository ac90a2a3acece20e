`default_nettype none

// ws_mesh_phases: the wafer's FMA phase probe (docs/trace.md "FMA phases"). It watches every
// PE's instruction and FMA issues and hands the trace unit one record per program
// instruction that issued FMAs: the cycle of its first FMA issue on any PE (`begin`), of its
// last (`end`), the PEs that issued one, the FMAs issued (saturating at 2^32 - 1), the
// opcode and the instruction's layer tag (TAG table, written by the firmware from
// ws_common::mesh::Program::tags), and the step the wafer was in when it began.
//
// Instruction n (< SLOTS) opens at its first FMA issue and is finished once no PE can issue
// in it again: every PE runs an instruction past n, or has finished or failed its program
// (a PE still checking its program holds it open). One finished instruction leaves per
// cycle, the lowest first, as a one-cycle pulse on m_rec_valid (the trace unit always takes
// it). Cycles come from `now`, the trace unit's free-running counter, so the records line up
// with every other hop's. Instructions at or past SLOTS are not recorded.
module ws_mesh_phases #(
    parameter R = 4,              // PEs
    parameter SLOTS = 16,         // instructions tracked, 1..256
    parameter NW = (SLOTS > 1) ? $clog2(SLOTS) : 1  // slot index bits (derived)
) (
    input  wire           clk,
    input  wire           rst,
    input  wire [47:0]    now,
    input  wire [15:0]    step,

    // TAG table writes: instruction `tag_n`'s layer tag (reset 0xfff, no layer).
    input  wire           tag_we,
    input  wire [7:0]     tag_n,
    input  wire [11:0]    tag_data,

    // Per PE (ws_mesh_pe's phase probe and status).
    input  wire [R-1:0]    pe_run,
    input  wire [R*16-1:0] pe_pc,
    input  wire [R*4-1:0]  pe_op,
    input  wire [R-1:0]    pe_fma,
    input  wire [R-1:0]    pe_busy,
    input  wire [R-1:0]    pe_done,
    input  wire [R-1:0]    pe_err,

    output reg            m_rec_valid,
    output reg  [47:0]    m_rec_begin,
    output reg  [47:0]    m_rec_end,
    output reg  [31:0]    m_rec_word4,   // {step, layer tag, opcode}
    output reg  [15:0]    m_rec_pc,
    output reg  [15:0]    m_rec_pes,
    output reg  [31:0]    m_rec_fmas,
    output wire           busy          // an instruction is open or a record is leaving
);

    initial begin
        if (SLOTS < 1 || SLOTS > 256) $error("ws_mesh_phases: SLOTS must be 1..256");
        if (R < 1 || R > 65535) $error("ws_mesh_phases: R must be 1..65535");
    end

    localparam CW = $clog2(R + 1);
    localparam [11:0] TAG_NONE = 12'hfff;

    reg [11:0]  tag_reg   [0:SLOTS-1];
    reg         open_reg  [0:SLOTS-1];
    reg [47:0]  begin_reg [0:SLOTS-1];
    reg [47:0]  end_reg   [0:SLOTS-1];
    reg [R-1:0] pes_reg   [0:SLOTS-1];
    reg [31:0]  fmas_reg  [0:SLOTS-1];
    reg [3:0]   op_reg    [0:SLOTS-1];
    reg [15:0]  step_reg  [0:SLOTS-1];

    // Per slot this cycle: the PEs issuing in it, how many, the opcode of the lowest, and
    // whether every PE is past it.
    reg [R-1:0]  hit   [0:SLOTS-1];
    reg [CW-1:0] cnt   [0:SLOTS-1];
    reg [3:0]    hop   [0:SLOTS-1];
    reg          past  [0:SLOTS-1];
    reg          found;
    reg [NW-1:0] fin;
    integer n, r;

    always @* begin
        found = 1'b0;
        fin = {NW{1'b0}};
        for (n = 0; n < SLOTS; n = n + 1) begin
            hit[n] = {R{1'b0}};
            cnt[n] = {CW{1'b0}};
            hop[n] = 4'd0;
            past[n] = 1'b1;
            for (r = R - 1; r >= 0; r = r - 1) begin
                if (pe_fma[r] && pe_run[r] && pe_pc[r*16 +: 16] == 16'(n)) begin
                    hit[n][r] = 1'b1;
                    cnt[n] = cnt[n] + 1'b1;
                    hop[n] = pe_op[r*4 +: 4];
                end
                if (!((pe_run[r] && pe_pc[r*16 +: 16] > 16'(n)) || (!pe_busy[r] && (pe_done[r] || pe_err[r]))))
                    past[n] = 1'b0;
            end
            if (!found && open_reg[n] && past[n] && hit[n] == {R{1'b0}}) begin
                found = 1'b1;
                fin = NW'(n);
            end
        end
    end

    reg any_open;
    always @* begin
        any_open = 1'b0;
        for (n = 0; n < SLOTS; n = n + 1) any_open = any_open | open_reg[n];
    end
    assign busy = any_open || m_rec_valid;

    // PEs in a mask.
    function automatic [15:0] popcount(input [R-1:0] m);
        integer b;
        popcount = 16'd0;
        for (b = 0; b < R; b = b + 1) popcount = popcount + {15'd0, m[b]};
    endfunction

    always @(posedge clk) begin
        m_rec_valid <= found;
        m_rec_begin <= begin_reg[fin];
        m_rec_end <= end_reg[fin];
        m_rec_word4 <= {step_reg[fin], tag_reg[fin], op_reg[fin]};
        m_rec_pc <= 16'(fin);
        m_rec_pes <= popcount(pes_reg[fin]);
        m_rec_fmas <= fmas_reg[fin];
        for (n = 0; n < SLOTS; n = n + 1) begin
            if (hit[n] != {R{1'b0}}) begin
                end_reg[n] <= now;
                if (!open_reg[n]) begin
                    open_reg[n] <= 1'b1;
                    begin_reg[n] <= now;
                    pes_reg[n] <= hit[n];
                    fmas_reg[n] <= 32'(cnt[n]);
                    op_reg[n] <= hop[n];
                    step_reg[n] <= step;
                end else begin
                    pes_reg[n] <= pes_reg[n] | hit[n];
                    fmas_reg[n] <= fmas_reg[n] + 32'(cnt[n]) < fmas_reg[n] ? 32'hffff_ffff
                                   : fmas_reg[n] + 32'(cnt[n]);
                end
            end
            if (tag_we && {8'd0, tag_n} == 16'(n)) tag_reg[n] <= tag_data;
        end
        if (found) open_reg[fin] <= 1'b0;
        if (rst) begin
            m_rec_valid <= 1'b0;
            for (n = 0; n < SLOTS; n = n + 1) begin
                open_reg[n] <= 1'b0;
                tag_reg[n] <= TAG_NONE;
            end
        end
    end

endmodule

`default_nettype wire
