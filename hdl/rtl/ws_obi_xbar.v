`default_nettype none

// ws_obi_xbar: OBI crossbar joining bus masters to memory-mapped slaves.
//
// ws_soc uses two instances (docs/soc.md "Bus"): one carries CV32E40P instruction fetch alone,
// the other carries core data and the riscv-dbg system-bus master. Masters speak OBI 1.x as
// CV32E40P does: req/addr/we/be/wdata held until gnt, then rvalid/rdata (OBI 1.x
// specification; CV32E40P user manual "Instruction Fetch" and "Load-Store Unit"). Slaves
// speak a reduced form: the crossbar raises m_obi_req, the slave accepts it in that cycle if
// m_obi_gnt is high (slaves that are always ready tie it high), and the slave presents rdata
// exactly one cycle after the accepted request. Because every slave has the same fixed
// latency, responses return in request order with no reorder buffer, even for a master with
// two requests in flight as CV32E40P has; the crossbar remembers, per master, which slave it
// granted in the previous cycle and steers that slave's rdata back with rvalid.
//
// Decode: a request goes to the lowest-numbered slave s with
//   (addr & S_MASK[s]) == S_BASE[s] and not (we && S_READ_ONLY[s]).
// A request that decodes nowhere is granted at once and answered with rdata 0 one cycle later,
// so a stray access never hangs the core; `err_unmapped` pulses with that response.
//
// Arbitration is round-robin per slave: the master after the one granted last wins, so no
// master can starve another. A master's gnt depends combinationally on the other masters' req
// and addr; ws_soc therefore never puts the instruction and data ports of the core on one
// instance, because CV32E40P has combinational paths from data_gnt to instr_req.
module ws_obi_xbar #(
    parameter NUM_M = 3,                        // number of bus masters
    parameter NUM_S = 4,                        // number of slave ports
    parameter [NUM_S*32-1:0] S_BASE = {NUM_S{32'h0}},  // slave s base address at [s*32 +: 32]
    parameter [NUM_S*32-1:0] S_MASK = {NUM_S{32'h0}},  // slave s address mask at [s*32 +: 32]
    parameter [NUM_S-1:0] S_READ_ONLY = {NUM_S{1'b0}}  // bit s: writes to slave s are unmapped
) (
    input  wire                     clk,
    input  wire                     rst,

    // Master side (the crossbar is the sink of these requests).
    input  wire [NUM_M-1:0]         s_obi_req,
    output wire [NUM_M-1:0]         s_obi_gnt,
    input  wire [NUM_M*32-1:0]      s_obi_addr,
    input  wire [NUM_M-1:0]         s_obi_we,
    input  wire [NUM_M*4-1:0]       s_obi_be,
    input  wire [NUM_M*32-1:0]      s_obi_wdata,
    output wire [NUM_M-1:0]         s_obi_rvalid,
    output wire [NUM_M*32-1:0]      s_obi_rdata,

    // Slave side (the crossbar is the source). rdata one cycle after a req with gnt high.
    output wire [NUM_S-1:0]         m_obi_req,
    input  wire [NUM_S-1:0]         m_obi_gnt,
    output wire [NUM_S*32-1:0]      m_obi_addr,
    output wire [NUM_S-1:0]         m_obi_we,
    output wire [NUM_S*4-1:0]       m_obi_be,
    output wire [NUM_S*32-1:0]      m_obi_wdata,
    input  wire [NUM_S*32-1:0]      m_obi_rdata,

    // Pulses with the response of a request that decoded to no slave.
    output wire [NUM_M-1:0]         err_unmapped
);

    localparam M_IDX_WIDTH = (NUM_M > 1) ? $clog2(NUM_M) : 1;
    localparam S_IDX_WIDTH = (NUM_S > 1) ? $clog2(NUM_S) : 1;
    localparam [31:0] LAST_M = NUM_M - 1;

    initial begin
        if (NUM_M < 1) $error("ws_obi_xbar: NUM_M must be at least 1");
        if (NUM_S < 1) $error("ws_obi_xbar: NUM_S must be at least 1");
    end

    // Decode results, per master.
    reg [NUM_M-1:0]             mapped;
    reg [NUM_M*S_IDX_WIDTH-1:0] dest;

    // Arbitration results.
    reg [NUM_M-1:0]             gnt;
    reg [NUM_S-1:0]             slave_req;
    reg [NUM_S*M_IDX_WIDTH-1:0] slave_owner;

    // Round-robin state: the master each slave granted last.
    reg [NUM_S*M_IDX_WIDTH-1:0] rr_last_reg, rr_last_next;

    // Response tracking, per master: a grant in the previous cycle, and to which slave.
    reg [NUM_M-1:0]             resp_valid_reg, resp_valid_next;
    reg [NUM_M-1:0]             resp_unmapped_reg, resp_unmapped_next;
    reg [NUM_M*S_IDX_WIDTH-1:0] resp_slave_reg, resp_slave_next;

    reg [NUM_S*32-1:0]          m_obi_addr_int;
    reg [NUM_S-1:0]             m_obi_we_int;
    reg [NUM_S*4-1:0]           m_obi_be_int;
    reg [NUM_S*32-1:0]          m_obi_wdata_int;
    reg [NUM_M*32-1:0]          s_obi_rdata_int;

    // Each combinational block declares its own loop variables: sharing module-level integers
    // between always @* blocks makes them wake each other in event-driven simulators.

    // Address decode.
    always @* begin : decode
        integer m;
        integer s;

        mapped = {NUM_M{1'b0}};
        dest = {NUM_M*S_IDX_WIDTH{1'b0}};
        for (m = 0; m < NUM_M; m = m + 1) begin
            for (s = NUM_S - 1; s >= 0; s = s - 1) begin
                // Descending loop: the last assignment, the lowest slave index, wins.
                if (((s_obi_addr[m*32 +: 32] & S_MASK[s*32 +: 32]) == S_BASE[s*32 +: 32])
                        && !(s_obi_we[m] && S_READ_ONLY[s])) begin
                    mapped[m] = 1'b1;
                    dest[m*S_IDX_WIDTH +: S_IDX_WIDTH] = s[S_IDX_WIDTH-1:0];
                end
            end
        end
    end

    // Round-robin arbitration per slave, starting after the last granted master.
    always @* begin : arbitrate
        integer m;
        integer s;
        integer k;
        integer cand;
        reg     found;

        gnt = {NUM_M{1'b0}};
        slave_req = {NUM_S{1'b0}};
        slave_owner = {NUM_S*M_IDX_WIDTH{1'b0}};
        rr_last_next = rr_last_reg;

        for (s = 0; s < NUM_S; s = s + 1) begin
            found = 1'b0;
            for (k = 1; k <= NUM_M; k = k + 1) begin
                cand = {{(32-M_IDX_WIDTH){1'b0}}, rr_last_reg[s*M_IDX_WIDTH +: M_IDX_WIDTH]} + k;
                if (cand >= NUM_M) begin
                    cand = cand - NUM_M;
                end
                if (!found && s_obi_req[cand] && mapped[cand]
                        && (dest[cand*S_IDX_WIDTH +: S_IDX_WIDTH] == s[S_IDX_WIDTH-1:0])) begin
                    // The slave sees the request whatever its gnt; a master that is not
                    // granted simply holds its request, as OBI requires.
                    found = 1'b1;
                    slave_req[s] = 1'b1;
                    slave_owner[s*M_IDX_WIDTH +: M_IDX_WIDTH] = cand[M_IDX_WIDTH-1:0];
                    if (m_obi_gnt[s]) begin
                        gnt[cand] = 1'b1;
                        rr_last_next[s*M_IDX_WIDTH +: M_IDX_WIDTH] = cand[M_IDX_WIDTH-1:0];
                    end
                end
            end
        end

        // Unmapped requests are granted at once by a built-in responder.
        for (m = 0; m < NUM_M; m = m + 1) begin
            if (s_obi_req[m] && !mapped[m]) begin
                gnt[m] = 1'b1;
            end
        end
    end

    // Request mux toward each slave.
    always @* begin : request_mux
        integer m;
        integer s;

        m_obi_addr_int = {NUM_S*32{1'b0}};
        m_obi_we_int = {NUM_S{1'b0}};
        m_obi_be_int = {NUM_S*4{1'b0}};
        m_obi_wdata_int = {NUM_S*32{1'b0}};
        for (s = 0; s < NUM_S; s = s + 1) begin
            for (m = 0; m < NUM_M; m = m + 1) begin
                if (slave_owner[s*M_IDX_WIDTH +: M_IDX_WIDTH] == m[M_IDX_WIDTH-1:0]) begin
                    m_obi_addr_int[s*32 +: 32] = s_obi_addr[m*32 +: 32];
                    m_obi_we_int[s] = s_obi_we[m];
                    m_obi_be_int[s*4 +: 4] = s_obi_be[m*4 +: 4];
                    m_obi_wdata_int[s*32 +: 32] = s_obi_wdata[m*32 +: 32];
                end
            end
        end
    end

    // Response tracking: which masters were granted, and where to.
    always @* begin
        resp_valid_next = gnt;
        resp_unmapped_next = s_obi_req & ~mapped;
        resp_slave_next = dest;
    end

    // Response steering, from registers only.
    always @* begin : response_mux
        integer m;
        integer s;

        s_obi_rdata_int = {NUM_M*32{1'b0}};
        for (m = 0; m < NUM_M; m = m + 1) begin
            for (s = 0; s < NUM_S; s = s + 1) begin
                if (resp_valid_reg[m] && !resp_unmapped_reg[m]
                        && resp_slave_reg[m*S_IDX_WIDTH +: S_IDX_WIDTH] == s[S_IDX_WIDTH-1:0]) begin
                    s_obi_rdata_int[m*32 +: 32] = m_obi_rdata[s*32 +: 32];
                end
            end
        end
    end

    always @(posedge clk) begin
        rr_last_reg <= rr_last_next;
        resp_valid_reg <= resp_valid_next;
        resp_unmapped_reg <= resp_unmapped_next;
        resp_slave_reg <= resp_slave_next;

        if (rst) begin
            // Start each arbiter as if the last master had just been served, so master 0 wins
            // the first contest.
            rr_last_reg <= {NUM_S{LAST_M[M_IDX_WIDTH-1:0]}};
            resp_valid_reg <= {NUM_M{1'b0}};
            resp_unmapped_reg <= {NUM_M{1'b0}};
        end
    end

    assign s_obi_gnt = gnt;
    assign s_obi_rvalid = resp_valid_reg;
    assign s_obi_rdata = s_obi_rdata_int;
    assign err_unmapped = resp_valid_reg & resp_unmapped_reg;

    assign m_obi_req = slave_req;
    assign m_obi_addr = m_obi_addr_int;
    assign m_obi_we = m_obi_we_int;
    assign m_obi_be = m_obi_be_int;
    assign m_obi_wdata = m_obi_wdata_int;

endmodule

`default_nettype wire
