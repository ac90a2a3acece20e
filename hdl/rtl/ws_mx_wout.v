`default_nettype none

// ws_mx_wout: the framer of MemoryX's weight-out stream. ws_mx_streamer hands it one beat of
// LANES fp32 weights per handshake, in chunk order, straight from the optimizer lanes (updated
// weights) or from the store (streamed weights); it emits weight flits, LANES per beat, with
// the flit header (ws_flit.vh) on m_user and the flits that carry data marked in m_keep.
//
// fp32 (s_bf16 low): beat in = beat out; flit j of the beat is weight j, its index is the
// beat's index + j.
// bf16 (s_bf16 high): the wire format of ws_common::flit (element 2i in bits 15:0 of flit i,
// 2i+1 in bits 31:16), rounded to nearest even from the fp32 master weight with any NaN
// becoming 0x7fc0 (ws_common::golden::fp::f32_to_bf16). Two beats in make one beat out; a
// chunk's odd last element leaves a zero high half, a short last beat clear keep bits.
//
// m_user's index field is the index of the beat's first flit; m_first / m_last mark the
// chunk's first and last beat, m_desc names the streamer's descriptor (for its timestamps).
// Flits past the chunk's end are zero. s_hdr gives the header's kind, layer, step and chunk
// (its index field is ignored); it must be stable for a chunk.
module ws_mx_wout #(
    parameter LANES = 1,       // flits per beat, 1, 2 or 4
    parameter DI = 3,          // descriptor index bits
    parameter FIFO_DEPTH = 8   // output FIFO, a power of two >= 2
) (
    input  wire                  clk,
    input  wire                  rst,

    input  wire                  s_valid,
    output wire                  s_ready,
    input  wire [32*LANES-1:0]   s_words,
    input  wire [$clog2(LANES):0] s_nv,     // weights in this beat, 1..LANES
    input  wire                  s_last,
    input  wire                  s_bf16,
    input  wire [63:0]           s_hdr,
    input  wire [DI-1:0]         s_desc,

    output wire                  m_valid,
    input  wire                  m_ready,
    output wire [32*LANES-1:0]   m_data,
    output wire [LANES-1:0]      m_keep,
    output wire                  m_last,
    output wire [63:0]           m_user,
    output wire                  m_first,
    output wire [DI-1:0]         m_desc
);

    `include "ws_flit.vh"

    localparam L = LANES;
    localparam NV_W = $clog2(LANES) + 1;
    localparam PW = 32 * L + L + 1 + 64 + 1 + DI;

    initial begin
        if (LANES != 1 && LANES != 2 && LANES != 4) $error("ws_mx_wout: LANES must be 1, 2 or 4");
    end

    // fp32 -> bf16 (ws_common::golden::fp::f32_to_bf16): round to nearest even on the 16
    // dropped bits; a carry into the exponent rounds the largest finite values to infinity;
    // any NaN becomes the canonical bf16 NaN.
    function automatic [15:0] to_bf16(input [31:0] x);
        begin
            if (x[30:23] == 8'hff && x[22:0] != 23'd0) to_bf16 = WS_BF16_CANONICAL_NAN;
            else to_bf16 = x[31:16] + {15'd0, x[15] && (x[14:0] != 15'd0 || x[16])};
        end
    endfunction

    reg                  half_valid_reg;
    reg [16*L-1:0]       half_reg;
    reg [15:0]           idx_reg;
    reg                  first_reg;

    reg [16*L-1:0] conv;
    integer i;
    always @* begin
        for (i = 0; i < L; i = i + 1) conv[16*i +: 16] = to_bf16(s_words[32*i +: 32]);
    end

    wire fifo_ready;
    assign s_ready = fifo_ready;
    wire s_fire = s_valid && fifo_ready;
    // In bf16, a beat that is not the chunk's last and finds no half waiting is held.
    wire hold = s_bf16 && !half_valid_reg && !s_last;
    wire push = s_fire && !hold;

    // What the pushed beat carries: its data (elements past the end zeroed) and keep.
    reg [32*L-1:0] out_data;
    reg [L-1:0]    out_keep;
    reg [NV_W:0]   elems;      // bf16 elements in the beat, 1..2L
    reg [NV_W:0]   flits;
    always @* begin
        out_data = {32 * L{1'b0}};
        out_keep = {L{1'b0}};
        elems = {1'b0, s_nv};
        if (s_bf16) begin
            if (half_valid_reg) elems = L[NV_W:0] + {1'b0, s_nv};
            for (i = 0; i < 2 * L; i = i + 1) begin
                if (i < elems) begin
                    if (half_valid_reg) out_data[16*i +: 16] = (i < L) ? half_reg[16*i +: 16] : conv[16*(i-L) +: 16];
                    else if (i < L) out_data[16*i +: 16] = conv[16*i +: 16];
                end
            end
            flits = (elems + 1'b1) >> 1;
        end else begin
            for (i = 0; i < L; i = i + 1) begin
                if (i < s_nv) out_data[32*i +: 32] = s_words[32*i +: 32];
            end
            flits = elems;
        end
        for (i = 0; i < L; i = i + 1) out_keep[i] = i < flits;
    end

    wire [63:0] out_user;
    assign out_user[WS_FLIT_INDEX_LSB +: WS_FLIT_INDEX_WIDTH] = idx_reg;
    assign out_user[WS_FLIT_INDEX_LSB-1:0] = s_hdr[WS_FLIT_INDEX_LSB-1:0];
    wire [WS_FLIT_INDEX_WIDTH-1:0] unused_hdr_index = s_hdr[WS_FLIT_INDEX_LSB +: WS_FLIT_INDEX_WIDTH];

    always @(posedge clk) begin
        if (s_fire) begin
            if (hold) begin
                half_valid_reg <= 1'b1;
                half_reg <= conv;
            end else begin
                half_valid_reg <= 1'b0;
                first_reg <= s_last;
                idx_reg <= s_last ? 16'd0 : idx_reg + L[15:0];
            end
        end
        if (rst) begin
            half_valid_reg <= 1'b0;
            idx_reg <= 16'd0;
            first_reg <= 1'b1;
        end
    end

    wire [PW-1:0] fifo_out;
    wire [$clog2(FIFO_DEPTH+1)-1:0] unused_level;
    ws_fifo #(.DEPTH(FIFO_DEPTH), .WIDTH(PW)) out_fifo_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(push),
        .s_ready(fifo_ready),
        .s_data({s_desc, first_reg, out_user, s_last, out_keep, out_data}),
        .m_valid(m_valid),
        .m_ready(m_ready),
        .m_data(fifo_out),
        .level(unused_level)
    );
    assign {m_desc, m_first, m_user, m_last, m_keep, m_data} = fifo_out;

endmodule

`default_nettype wire
