`default_nettype none

// ws_mesh_router: one router of the wafer mesh (docs/architecture.md "Wafer emulation"), with five
// ports (N, E, S, W and the local processing element), static routes chosen by color, and
// credit-based links. ws_mesh_fabric tiles it into a P x Q mesh. docs/mesh-router.md has the
// microarchitecture, the credit timing and the deadlock-freedom argument.
//
// Buffers. Every input port has one buffer of BUF_DEPTH flits per color (ws_mesh_router_buf),
// so a color that is stalled never holds up another one: weights (say color 0) and
// reductions (color 1) share the wires but no buffer.
//
// Links (ports N, E, S, W). A link is one flit per cycle, {color, data, last, user} with a
// valid bit and no ready, plus one credit wire per color in the other direction. Each output
// counts the free slots of the neighbour's buffer for every color (BUF_DEPTH after reset)
// and sends only with a credit; each input returns one credit pulse per flit that leaves its
// buffer. Every link signal comes from a register, so no combinational path crosses a
// router. A flit that arrives at a full buffer or with a color >= COLORS is dropped and
// flagged in stat_overflow (a broken credit protocol); a credit beyond BUF_DEPTH is ignored
// and flagged in stat_credit_err.
//
// Local port. One valid/ready stream per color in each direction, so that a PE that holds
// back one color never blocks another. s_local_ready is "buffer not full"; the output side is
// a two-flit skid per color whose room is a register, so the allocator sees only registers and
// m_local_ready reaches nothing but the skids (the router has no combinational path from any
// input to any output, and a local stream still runs at one flit per cycle).
//
// Routing. The table maps (input port, color) to a 5-bit output mask (bit p = port p of
// ws_mesh_flit.vh) and a quota, written through cfg_* one entry per cycle and all zero after
// reset. The head flit of a buffer leaves toward each output of its mask independently (a
// per-buffer copy mask remembers which copies are out) and is popped when the last copy has
// gone. A head whose mask is 0 is dropped at once and counted in cnt_misroute.
//
// Arbitration, per output and color (the "members" of (o, c) are the inputs whose entry for
// c has bit o):
//   - packets are atomic: once (o, c) has sent a flit without `last` from input i, it takes
//     color c only from input i until a flit with `last`;
//   - round robin (every member's quota 0): the next packet comes from the first member in
//     the cyclic order N, E, S, W, L after the previous packet's input that has a flit;
//   - ordered (a member with quota != 0): the members take turns in the cyclic order N, E,
//     S, W, L starting from the first member, each sending max(quota, 1) whole packets per
//     turn; the output waits for the member whose turn it is. The merged order is then fixed
//     by the table alone, whatever the timing.
// Colors then share the output flit by flit in round robin. FIFO order holds within every
// (input, color); across inputs it is the round-robin or ordered merge above.
//
// Configuration is meant for an idle router (stat_busy low); a write also restarts the
// rotation of every (output, color) not inside a packet at its first member.
//
// Counters (CNT_WIDTH bits, wrapping, zeroed by rst or cnt_clear): flits forwarded per output
// and color; busy cycles (a flit sent) and stall cycles (some head flit waits for the output
// and nothing is sent) per output; flits dropped for an empty route per input port.
module ws_mesh_router #(
    parameter COLORS = 2,        // colors (virtual channels) with their own buffers, 2..16
    parameter BUF_DEPTH = 4,     // flits per color per input port; power of two >= 2 (4: full rate per color)
    parameter DATA_WIDTH = 32,   // payload bits of a flit (`_data`)
    parameter USER_WIDTH = 64,   // header bits of a flit (`_user`, the ws_flit.vh header), carried unchanged
    parameter QUOTA_WIDTH = 8,   // bits of a route entry's quota (packets per turn of an ordered merge)
    parameter CNT_WIDTH = 32     // bits of every counter
) (
    input  wire                                 clk,
    input  wire                                 rst,

    // Link inputs from the neighbours: port p (0 N, 1 E, 2 S, 3 W) in bits [p*W +: W].
    input  wire [3:0]                           s_link_valid,
    input  wire [4*$clog2(COLORS)-1:0]          s_link_color,
    input  wire [4*DATA_WIDTH-1:0]              s_link_data,
    input  wire [3:0]                           s_link_last,
    input  wire [4*USER_WIDTH-1:0]              s_link_user,
    output wire [4*COLORS-1:0]                  s_link_credit,  // bit p*COLORS+c: a slot of (p, c) freed

    // Link outputs to the neighbours.
    output wire [3:0]                           m_link_valid,
    output wire [4*$clog2(COLORS)-1:0]          m_link_color,
    output wire [4*DATA_WIDTH-1:0]              m_link_data,
    output wire [3:0]                           m_link_last,
    output wire [4*USER_WIDTH-1:0]              m_link_user,
    input  wire [4*COLORS-1:0]                  m_link_credit,  // bit p*COLORS+c: a slot downstream freed

    // Local port from the PE, one stream per color c in bits [c*W +: W].
    input  wire [COLORS-1:0]                    s_local_valid,
    output wire [COLORS-1:0]                    s_local_ready,
    input  wire [COLORS*DATA_WIDTH-1:0]         s_local_data,
    input  wire [COLORS-1:0]                    s_local_last,
    input  wire [COLORS*USER_WIDTH-1:0]         s_local_user,

    // Local port to the PE.
    output wire [COLORS-1:0]                    m_local_valid,
    input  wire [COLORS-1:0]                    m_local_ready,
    output wire [COLORS*DATA_WIDTH-1:0]         m_local_data,
    output wire [COLORS-1:0]                    m_local_last,
    output wire [COLORS*USER_WIDTH-1:0]         m_local_user,

    // Route table write: entry (cfg_in_port, cfg_color) := {cfg_quota, cfg_out_mask}.
    input  wire                                 cfg_we,
    input  wire [2:0]                           cfg_in_port,    // 0..4; 5..7 ignored
    input  wire [$clog2(COLORS)-1:0]            cfg_color,      // >= COLORS ignored
    input  wire [4:0]                           cfg_out_mask,   // bit p: copy to output port p
    input  wire [QUOTA_WIDTH-1:0]               cfg_quota,      // 0: round robin; n: ordered, n packets per turn
    input  wire                                 cnt_clear,      // pulse: zero counters and sticky flags

    // Counters: output o, color c at [(o*COLORS+c)*CNT_WIDTH +: CNT_WIDTH]; port p at [p*CNT_WIDTH +: CNT_WIDTH].
    output wire [5*COLORS*CNT_WIDTH-1:0]        cnt_fwd,        // flits sent per output and color
    output wire [5*CNT_WIDTH-1:0]               cnt_busy,       // cycles a flit was sent, per output
    output wire [5*CNT_WIDTH-1:0]               cnt_stall,      // cycles a flit waited and none was sent, per output
    output wire [5*CNT_WIDTH-1:0]               cnt_misroute,   // flits dropped for an empty route, per input
    output wire [3:0]                           stat_overflow,  // sticky, per link input: flit lost (no room / bad color)
    output wire [3:0]                           stat_credit_err,// sticky, per link output: credit beyond BUF_DEPTH
    output wire                                 stat_busy       // a flit is buffered, in a packet, or unacknowledged
);

    `include "ws_mesh_flit.vh"

    localparam CW = $clog2(COLORS);
    localparam QW = QUOTA_WIDTH;
    // A buffered flit: {user, last, data}.
    localparam FW = USER_WIDTH + 1 + DATA_WIDTH;
    localparam LAST_BIT = DATA_WIDTH;
    // Input buffers (port p, color c) are numbered p*COLORS + c; so are (output, color) pairs.
    localparam VCS = WS_MESH_PORTS * COLORS;
    localparam VCS_W = $clog2(VCS);
    localparam CRED_W = $clog2(BUF_DEPTH + 1);
    localparam [31:0] BUF_DEPTH_32 = BUF_DEPTH;
    localparam [31:0] COLORS_32 = COLORS;
    localparam [CRED_W-1:0] CRED_FULL = BUF_DEPTH_32[CRED_W-1:0];
    localparam [CW:0] COLORS_W = COLORS_32[CW:0];

    initial begin
        if (COLORS < 2 || COLORS > 16) $error("ws_mesh_router: COLORS must be 2..16");
        if (BUF_DEPTH < 2 || (BUF_DEPTH & (BUF_DEPTH - 1)) != 0)
            $error("ws_mesh_router: BUF_DEPTH must be a power of two >= 2");
        if (DATA_WIDTH < 1) $error("ws_mesh_router: DATA_WIDTH must be >= 1");
        if (USER_WIDTH < 1) $error("ws_mesh_router: USER_WIDTH must be >= 1");
        if (QUOTA_WIDTH < 1 || QUOTA_WIDTH > 16) $error("ws_mesh_router: QUOTA_WIDTH must be 1..16");
        if (CNT_WIDTH < 1 || CNT_WIDTH > 64) $error("ws_mesh_router: CNT_WIDTH must be 1..64");
    end

    // The first port of `set` at or after `start` in the cyclic order 0..4 (`start` if none).
    function [2:0] first_port(input [4:0] set, input [2:0] start);
        integer k;
        reg [3:0] idx;
        reg found;
        begin
            first_port = start;
            found = 1'b0;
            for (k = 0; k < 5; k = k + 1) begin
                // Four bits: start + k reaches 8.
                idx = {1'b0, start} + k[3:0];
                if (idx >= 4'd5) idx = idx - 4'd5;
                if (!found && set[idx[2:0]]) begin
                    first_port = idx[2:0];
                    found = 1'b1;
                end
            end
        end
    endfunction

    // The first color of `set` at or after `start`, cyclically.
    function [CW-1:0] first_color(input [COLORS-1:0] set, input [CW-1:0] start);
        integer k;
        reg [CW:0] idx;
        reg found;
        begin
            first_color = start;
            found = 1'b0;
            for (k = 0; k < COLORS; k = k + 1) begin
                idx = {1'b0, start} + k[CW:0];
                if (idx >= COLORS_W) idx = idx - COLORS_W;
                if (!found && set[idx[CW-1:0]]) begin
                    first_color = idx[CW-1:0];
                    found = 1'b1;
                end
            end
        end
    endfunction

    function [2:0] next_port(input [2:0] p);
        next_port = (p == 3'd4) ? 3'd0 : p + 3'd1;
    endfunction

    function [CW-1:0] next_color(input [CW-1:0] c);
        next_color = (c == COLORS[CW-1:0] - 1'b1) ? {CW{1'b0}} : c + 1'b1;
    endfunction

    // ------------------------------------------------------------------ state

    // Per input buffer v = p*COLORS + c, and per (output, color) pair oc = o*COLORS + c.
    reg [4:0]               route_reg [0:VCS-1];        // output mask of each (input, color)
    reg [QW-1:0]            quota_reg [0:VCS-1];        // quota of each (input, color)
    reg [4:0]               sent_reg [0:VCS-1];         // copies of each head already sent
    reg [4:0]               sent_next [0:VCS-1];
    reg [VCS-1:0]           mid_reg, mid_next;          // (output, color) is inside a packet
    reg [2:0]               ptr_reg [0:VCS-1];          // (output, color): input of the packet / turn
    reg [2:0]               ptr_next [0:VCS-1];
    reg [QW-1:0]            served_reg [0:VCS-1];       // (output, color): packets of this turn sent
    reg [QW-1:0]            served_next [0:VCS-1];
    reg [CW-1:0]            cptr_reg [0:4];             // output: color to look at first
    reg [CW-1:0]            cptr_next [0:4];
    reg [CRED_W-1:0]        cred_reg [0:4*COLORS-1];    // link output credits per color
    reg [CRED_W-1:0]        cred_next [0:4*COLORS-1];
    reg [4*COLORS-1:0]      ret_reg;                    // credits returned to the upstream routers
    reg [3:0]               lk_valid_reg;
    reg [CW-1:0]            lk_color_reg [0:3];
    reg [FW-1:0]            lk_flit_reg [0:3];
    reg [1:0]               lo_count_reg [0:COLORS-1];  // local output skid per color: 0..2 flits
    reg [1:0]               lo_count_next [0:COLORS-1];
    reg [FW-1:0]            lo_head_reg [0:COLORS-1];   // the flit offered on m_local
    reg [FW-1:0]            lo_tail_reg [0:COLORS-1];   // the one behind it
    reg [CNT_WIDTH-1:0]     fwd_reg [0:VCS-1];
    reg [CNT_WIDTH-1:0]     fwd_next [0:VCS-1];
    reg [CNT_WIDTH-1:0]     busy_reg [0:4];
    reg [CNT_WIDTH-1:0]     busy_next [0:4];
    reg [CNT_WIDTH-1:0]     stall_reg [0:4];
    reg [CNT_WIDTH-1:0]     stall_next [0:4];
    reg [CNT_WIDTH-1:0]     misr_reg [0:4];
    reg [CNT_WIDTH-1:0]     misr_next [0:4];
    reg [3:0]               ovf_reg, ovf_next;
    reg [3:0]               cerr_reg, cerr_next;

    // ------------------------------------------------------------------ input buffers

    wire [VCS-1:0]      head_valid;
    wire [FW-1:0]       head_flit [0:VCS-1];
    wire [VCS-1:0]      buf_ready;
    reg  [VCS-1:0]      pop;

    genvar gp, gc;
    generate
        for (gp = 0; gp < WS_MESH_PORTS; gp = gp + 1) begin : gen_in
            for (gc = 0; gc < COLORS; gc = gc + 1) begin : gen_color
                localparam [CW-1:0] COLOR = gc;
                wire            push;
                wire [FW-1:0]   flit;
                if (gp < WS_MESH_LINKS) begin : gen_link
                    assign push = s_link_valid[gp] && s_link_color[gp*CW +: CW] == COLOR;
                    assign flit = {s_link_user[gp*USER_WIDTH +: USER_WIDTH], s_link_last[gp],
                                   s_link_data[gp*DATA_WIDTH +: DATA_WIDTH]};
                end else begin : gen_local
                    assign push = s_local_valid[gc];
                    assign flit = {s_local_user[gc*USER_WIDTH +: USER_WIDTH], s_local_last[gc],
                                   s_local_data[gc*DATA_WIDTH +: DATA_WIDTH]};
                    assign s_local_ready[gc] = buf_ready[gp*COLORS + gc];
                end

                ws_mesh_router_buf #(
                    .DEPTH(BUF_DEPTH),
                    .WIDTH(FW)
                ) buf_inst (
                    .clk(clk),
                    .rst(rst),
                    .s_valid(push),
                    .s_ready(buf_ready[gp*COLORS + gc]),
                    .s_data(flit),
                    .m_valid(head_valid[gp*COLORS + gc]),
                    .m_ready(pop[gp*COLORS + gc]),
                    .m_data(head_flit[gp*COLORS + gc])
                );
            end
        end
    endgenerate

    // ------------------------------------------------------------------ allocation

    reg [4:0]           rem [0:VCS-1];      // outputs each head still has to reach
    reg [4:0]           taken [0:VCS-1];    // outputs taking a copy of each head this cycle
    reg [VCS-1:0]       ordered;            // (output, color) merges in the ordered mode
    reg [VCS-1:0]       can_send;           // (output, color) has a flit it may send now
    reg [2:0]           cand [0:VCS-1];     // (output, color): the input it would take it from
    reg [4:0]           send;               // output sends a flit this cycle
    reg [CW-1:0]        send_color [0:4];
    reg [2:0]           send_in [0:4];
    reg [VCS_W-1:0]     send_vc [0:4];      // the input buffer it sends from
    reg [FW-1:0]        send_flit [0:4];
    reg [4:0]           waiting;            // some head waits for the output
    reg [VCS-1:0]       dropped;            // head dropped for an empty route

    reg [4:0]           a_members, a_reqs, a_sel;
    reg                 a_ord, a_room;

    always @* begin : alloc
        integer v, o, c, i;
        a_members = 5'd0;
        a_reqs = 5'd0;
        a_sel = 5'd0;
        a_ord = 1'b0;
        a_room = 1'b0;
        for (v = 0; v < VCS; v = v + 1) begin
            rem[v] = head_valid[v] ? (route_reg[v] & ~sent_reg[v]) : 5'd0;
        end

        for (o = 0; o < WS_MESH_PORTS; o = o + 1) begin
            waiting[o] = 1'b0;
            for (c = 0; c < COLORS; c = c + 1) begin
                for (i = 0; i < WS_MESH_PORTS; i = i + 1) begin
                    a_members[i] = route_reg[i*COLORS + c][o];
                    a_reqs[i] = rem[i*COLORS + c][o];
                end
                a_ord = 1'b0;
                for (i = 0; i < WS_MESH_PORTS; i = i + 1) begin
                    if (a_members[i] && quota_reg[i*COLORS + c] != {QW{1'b0}}) a_ord = 1'b1;
                end
                // Inside a packet only its input may continue; otherwise the ordered mode
                // waits for the member whose turn it is, and round robin takes any requester.
                if (mid_reg[o*COLORS + c]) begin
                    a_sel = 5'd1 << ptr_reg[o*COLORS + c];
                end else if (a_ord) begin
                    a_sel = a_members;
                end else begin
                    a_sel = a_reqs;
                end
                cand[o*COLORS + c] = first_port(a_sel, ptr_reg[o*COLORS + c]);
                // Room comes from registers only: link credits, or a local skid below two.
                if (o < WS_MESH_LINKS) begin
                    a_room = cred_reg[o*COLORS + c] != {CRED_W{1'b0}};
                end else begin
                    a_room = !lo_count_reg[c][1];
                end
                ordered[o*COLORS + c] = a_ord;
                can_send[o*COLORS + c] = (a_sel != 5'd0) && a_reqs[cand[o*COLORS + c]] && a_room;
                waiting[o] = waiting[o] | (a_reqs != 5'd0);
            end

            send[o] = can_send[o*COLORS +: COLORS] != {COLORS{1'b0}};
            send_color[o] = first_color(can_send[o*COLORS +: COLORS], cptr_reg[o]);
            send_in[o] = 3'd0;
            send_vc[o] = {VCS_W{1'b0}};
            for (i = 0; i < WS_MESH_PORTS; i = i + 1) begin
                for (c = 0; c < COLORS; c = c + 1) begin
                    if (send_color[o] == c[CW-1:0] && cand[o*COLORS + c] == i[2:0]) begin
                        v = i*COLORS + c;
                        send_in[o] = i[2:0];
                        send_vc[o] = v[VCS_W-1:0];
                    end
                end
            end
            send_flit[o] = head_flit[send_vc[o]];
        end

        for (i = 0; i < WS_MESH_PORTS; i = i + 1) begin
            for (c = 0; c < COLORS; c = c + 1) begin
                for (o = 0; o < WS_MESH_PORTS; o = o + 1) begin
                    taken[i*COLORS + c][o] = send[o] && send_in[o] == i[2:0] && send_color[o] == c[CW-1:0];
                end
                pop[i*COLORS + c] = head_valid[i*COLORS + c] && (rem[i*COLORS + c] & ~taken[i*COLORS + c]) == 5'd0;
                dropped[i*COLORS + c] = head_valid[i*COLORS + c] && route_reg[i*COLORS + c] == 5'd0;
                sent_next[i*COLORS + c] = pop[i*COLORS + c] ? 5'd0 : (sent_reg[i*COLORS + c] | taken[i*COLORS + c]);
            end
        end
    end

    // ------------------------------------------------------------------ next state

    reg [QW-1:0]        n_quota;
    reg [CNT_WIDTH-1:0] n_count;
    reg                 n_dec;

    always @* begin : next_state
        integer v, o, c, i;
        v = 0;
        n_quota = {QW{1'b0}};
        n_count = {CNT_WIDTH{1'b0}};
        n_dec = 1'b0;
        mid_next = mid_reg;
        ovf_next = ovf_reg;
        cerr_next = cerr_reg;

        for (o = 0; o < WS_MESH_PORTS; o = o + 1) begin
            for (c = 0; c < COLORS; c = c + 1) begin
                ptr_next[o*COLORS + c] = ptr_reg[o*COLORS + c];
                served_next[o*COLORS + c] = served_reg[o*COLORS + c];
                fwd_next[o*COLORS + c] = fwd_reg[o*COLORS + c];
                if (send[o] && send_color[o] == c[CW-1:0]) begin
                    n_quota = quota_reg[send_vc[o]];
                    if (!send_flit[o][LAST_BIT]) begin
                        mid_next[o*COLORS + c] = 1'b1;
                        ptr_next[o*COLORS + c] = send_in[o];
                    end else begin
                        mid_next[o*COLORS + c] = 1'b0;
                        if (ordered[o*COLORS + c] && served_reg[o*COLORS + c] + 1'b1 < n_quota) begin
                            // The turn goes on: more packets of this member's quota.
                            ptr_next[o*COLORS + c] = send_in[o];
                            served_next[o*COLORS + c] = served_reg[o*COLORS + c] + 1'b1;
                        end else begin
                            ptr_next[o*COLORS + c] = next_port(send_in[o]);
                            served_next[o*COLORS + c] = {QW{1'b0}};
                        end
                    end
                    fwd_next[o*COLORS + c] = fwd_reg[o*COLORS + c] + 1'b1;
                end
            end
            cptr_next[o] = cptr_reg[o];
            busy_next[o] = busy_reg[o];
            stall_next[o] = stall_reg[o];
            if (send[o]) begin
                cptr_next[o] = next_color(send_color[o]);
                busy_next[o] = busy_reg[o] + 1'b1;
            end else if (waiting[o]) begin
                stall_next[o] = stall_reg[o] + 1'b1;
            end
        end

        for (i = 0; i < WS_MESH_PORTS; i = i + 1) begin
            n_count = misr_reg[i];
            for (c = 0; c < COLORS; c = c + 1) begin
                if (dropped[i*COLORS + c]) n_count = n_count + 1'b1;
            end
            misr_next[i] = n_count;
        end

        for (o = 0; o < WS_MESH_LINKS; o = o + 1) begin
            for (c = 0; c < COLORS; c = c + 1) begin
                n_dec = send[o] && send_color[o] == c[CW-1:0];
                cred_next[o*COLORS + c] = cred_reg[o*COLORS + c];
                if (m_link_credit[o*COLORS + c] && !n_dec && cred_reg[o*COLORS + c] == CRED_FULL) begin
                    cerr_next[o] = 1'b1;
                end else if (m_link_credit[o*COLORS + c] && !n_dec) begin
                    cred_next[o*COLORS + c] = cred_reg[o*COLORS + c] + 1'b1;
                end else if (!m_link_credit[o*COLORS + c] && n_dec) begin
                    cred_next[o*COLORS + c] = cred_reg[o*COLORS + c] - 1'b1;
                end
            end
            // A flit with no room or a color that does not exist is lost: flag it.
            if (s_link_valid[o]) begin
                if ({1'b0, s_link_color[o*CW +: CW]} >= COLORS_W) ovf_next[o] = 1'b1;
                for (c = 0; c < COLORS; c = c + 1) begin
                    if (s_link_color[o*CW +: CW] == c[CW-1:0] && !buf_ready[o*COLORS + c]) ovf_next[o] = 1'b1;
                end
            end
        end

        // The local skids: push from the allocator, pop by the PE.
        for (c = 0; c < COLORS; c = c + 1) begin
            lo_count_next[c] = lo_count_reg[c];
            if (send[WS_MESH_PORT_L] && send_color[WS_MESH_PORT_L] == c[CW-1:0]) begin
                if (!(lo_count_reg[c] != 2'd0 && m_local_ready[c])) lo_count_next[c] = lo_count_reg[c] + 2'd1;
            end else if (lo_count_reg[c] != 2'd0 && m_local_ready[c]) begin
                lo_count_next[c] = lo_count_reg[c] - 2'd1;
            end
        end

        if (cnt_clear) begin
            for (v = 0; v < VCS; v = v + 1) fwd_next[v] = {CNT_WIDTH{1'b0}};
            for (o = 0; o < WS_MESH_PORTS; o = o + 1) begin
                busy_next[o] = {CNT_WIDTH{1'b0}};
                stall_next[o] = {CNT_WIDTH{1'b0}};
                misr_next[o] = {CNT_WIDTH{1'b0}};
            end
            ovf_next = 4'd0;
            cerr_next = 4'd0;
        end
    end

    always @(posedge clk) begin : registers
        integer v, o, c, i;
        for (i = 0; i < WS_MESH_PORTS; i = i + 1) begin
            for (c = 0; c < COLORS; c = c + 1) begin
                if (cfg_we && cfg_in_port == i[2:0] && cfg_color == c[CW-1:0]) begin
                    route_reg[i*COLORS + c] <= cfg_out_mask;
                    quota_reg[i*COLORS + c] <= cfg_quota;
                end
            end
        end
        for (v = 0; v < VCS; v = v + 1) begin
            sent_reg[v] <= sent_next[v];
            ptr_reg[v] <= ptr_next[v];
            served_reg[v] <= served_next[v];
            fwd_reg[v] <= fwd_next[v];
            // A table write restarts every rotation that is not inside a packet.
            if (cfg_we && !mid_reg[v]) begin
                ptr_reg[v] <= 3'd0;
                served_reg[v] <= {QW{1'b0}};
            end
        end
        for (o = 0; o < WS_MESH_PORTS; o = o + 1) begin
            cptr_reg[o] <= cptr_next[o];
            busy_reg[o] <= busy_next[o];
            stall_reg[o] <= stall_next[o];
            misr_reg[o] <= misr_next[o];
        end
        for (v = 0; v < 4*COLORS; v = v + 1) begin
            cred_reg[v] <= cred_next[v];
        end
        for (o = 0; o < WS_MESH_LINKS; o = o + 1) begin
            lk_color_reg[o] <= send_color[o];
            if (send[o]) lk_flit_reg[o] <= send_flit[o];
        end
        for (c = 0; c < COLORS; c = c + 1) begin
            lo_count_reg[c] <= lo_count_next[c];
            if (send[WS_MESH_PORT_L] && send_color[WS_MESH_PORT_L] == c[CW-1:0]) begin
                // Into the head if it is (or is becoming) free, else behind it.
                if (lo_count_reg[c] == 2'd0 || (lo_count_reg[c] == 2'd1 && m_local_ready[c])) begin
                    lo_head_reg[c] <= send_flit[WS_MESH_PORT_L];
                end else begin
                    lo_tail_reg[c] <= send_flit[WS_MESH_PORT_L];
                end
            end
            if (lo_count_reg[c] == 2'd2 && m_local_ready[c]) begin
                lo_head_reg[c] <= lo_tail_reg[c];
            end
        end
        mid_reg <= mid_next;
        ret_reg <= pop[4*COLORS-1:0];
        lk_valid_reg <= send[3:0];
        ovf_reg <= ovf_next;
        cerr_reg <= cerr_next;

        if (rst) begin
            for (v = 0; v < VCS; v = v + 1) begin
                route_reg[v] <= 5'd0;
                quota_reg[v] <= {QW{1'b0}};
                sent_reg[v] <= 5'd0;
                ptr_reg[v] <= 3'd0;
                served_reg[v] <= {QW{1'b0}};
                fwd_reg[v] <= {CNT_WIDTH{1'b0}};
            end
            for (o = 0; o < WS_MESH_PORTS; o = o + 1) begin
                cptr_reg[o] <= {CW{1'b0}};
                busy_reg[o] <= {CNT_WIDTH{1'b0}};
                stall_reg[o] <= {CNT_WIDTH{1'b0}};
                misr_reg[o] <= {CNT_WIDTH{1'b0}};
            end
            for (v = 0; v < 4*COLORS; v = v + 1) begin
                cred_reg[v] <= CRED_FULL;
            end
            mid_reg <= {VCS{1'b0}};
            ret_reg <= {(4*COLORS){1'b0}};
            lk_valid_reg <= 4'd0;
            for (c = 0; c < COLORS; c = c + 1) begin
                lo_count_reg[c] <= 2'd0;
            end
            ovf_reg <= 4'd0;
            cerr_reg <= 4'd0;
        end
    end

    // ------------------------------------------------------------------ outputs

    reg                 credits_home;
    reg                 flits_held;
    reg [COLORS-1:0]    lo_valid;

    always @* begin : status
        integer v, c;
        credits_home = 1'b1;
        for (v = 0; v < 4*COLORS; v = v + 1) begin
            if (cred_reg[v] != CRED_FULL) credits_home = 1'b0;
        end
        for (c = 0; c < COLORS; c = c + 1) begin
            lo_valid[c] = lo_count_reg[c] != 2'd0;
        end
        flits_held = (head_valid != {VCS{1'b0}}) || (mid_reg != {VCS{1'b0}}) || (lk_valid_reg != 4'd0) ||
                     (lo_valid != {COLORS{1'b0}}) || (ret_reg != {(4*COLORS){1'b0}});
    end

    assign s_link_credit = ret_reg;
    assign m_link_valid = lk_valid_reg;

    generate
        for (gp = 0; gp < WS_MESH_LINKS; gp = gp + 1) begin : gen_link_out
            assign m_link_color[gp*CW +: CW] = lk_color_reg[gp];
            assign m_link_data[gp*DATA_WIDTH +: DATA_WIDTH] = lk_flit_reg[gp][DATA_WIDTH-1:0];
            assign m_link_last[gp] = lk_flit_reg[gp][LAST_BIT];
            assign m_link_user[gp*USER_WIDTH +: USER_WIDTH] = lk_flit_reg[gp][FW-1:LAST_BIT+1];
        end
        for (gc = 0; gc < COLORS; gc = gc + 1) begin : gen_local_out
            assign m_local_data[gc*DATA_WIDTH +: DATA_WIDTH] = lo_head_reg[gc][DATA_WIDTH-1:0];
            assign m_local_last[gc] = lo_head_reg[gc][LAST_BIT];
            assign m_local_user[gc*USER_WIDTH +: USER_WIDTH] = lo_head_reg[gc][FW-1:LAST_BIT+1];
        end
        for (gp = 0; gp < WS_MESH_PORTS; gp = gp + 1) begin : gen_cnt_port
            assign cnt_busy[gp*CNT_WIDTH +: CNT_WIDTH] = busy_reg[gp];
            assign cnt_stall[gp*CNT_WIDTH +: CNT_WIDTH] = stall_reg[gp];
            assign cnt_misroute[gp*CNT_WIDTH +: CNT_WIDTH] = misr_reg[gp];
        end
        for (gp = 0; gp < VCS; gp = gp + 1) begin : gen_cnt_vc
            assign cnt_fwd[gp*CNT_WIDTH +: CNT_WIDTH] = fwd_reg[gp];
        end
    endgenerate

    assign m_local_valid = lo_valid;
    assign stat_overflow = ovf_reg;
    assign stat_credit_err = cerr_reg;
    assign stat_busy = flits_held || !credits_home;

endmodule

`default_nettype wire
