// ws_flit.vh: the flit format of the data-plane streams, for inclusion inside a module body.
//
// Hand-written to match ws-common/src/flit.rs and ws-common/src/golden/ (the Rust side is the
// documentation); `cargo test -p ws-common` parses this file and fails if a constant differs.
// Every stream carries `_data` (the 32-bit payload), `_last` (closes a chunk) and `_user`
// (the 64-bit header below). Include it inside a module: the constants are localparams, so
// each module gets its own copy and none leaks into the global namespace.

// Widths of the stream fields.
localparam WS_FLIT_PAYLOAD_WIDTH = 32;
localparam WS_FLIT_USER_WIDTH = 64;

// Header (`_user`) fields: {index[63:48], chunk[47:32], step[31:16], layer[15:4], kind[3:0]}.
localparam WS_FLIT_KIND_LSB = 0;
localparam WS_FLIT_KIND_WIDTH = 4;
localparam WS_FLIT_LAYER_LSB = 4;
localparam WS_FLIT_LAYER_WIDTH = 12;
localparam WS_FLIT_STEP_LSB = 16;
localparam WS_FLIT_STEP_WIDTH = 16;
localparam WS_FLIT_CHUNK_LSB = 32;
localparam WS_FLIT_CHUNK_WIDTH = 16;
localparam WS_FLIT_INDEX_LSB = 48;
localparam WS_FLIT_INDEX_WIDTH = 16;

// Kinds (5..15 reserved).
localparam [3:0] WS_KIND_WEIGHT = 4'd0;
localparam [3:0] WS_KIND_GRADIENT = 4'd1;
localparam [3:0] WS_KIND_DATA = 4'd2;
localparam [3:0] WS_KIND_CONTROL = 4'd3;
localparam [3:0] WS_KIND_ERROR = 4'd4;

// Error flit payload: {path[31:8] (six 4-bit port ids, nearest node in [11:8]), hops[7:4],
// code[3:0]}.
localparam WS_ERR_CODE_LSB = 0;
localparam WS_ERR_CODE_WIDTH = 4;
localparam WS_ERR_HOPS_LSB = 4;
localparam WS_ERR_HOPS_WIDTH = 4;
localparam WS_ERR_PATH_LSB = 8;
localparam WS_ERR_PATH_WIDTH = 24;
localparam [3:0] WS_ERR_TIMEOUT = 4'd1;
localparam [3:0] WS_ERR_MISMATCH = 4'd2;
localparam [3:0] WS_ERR_KIND = 4'd3;

// SwarmX uplink wire formats (cfg_dtype).
localparam [1:0] WS_DTYPE_FP32 = 2'd0;      // fp32 in, fp32 out
localparam [1:0] WS_DTYPE_BF16 = 2'd1;      // 2 x bf16 in, fp32 out (two flits per flit in)
localparam [1:0] WS_DTYPE_BF16_OUT = 2'd2;  // 2 x bf16 in, 2 x bf16 out (RNE from fp32)

// Floating-point constants (ws_common::golden::fp).
localparam [31:0] WS_FP32_CANONICAL_NAN = 32'h7fc0_0000;
localparam [31:0] WS_FP32_NEG_ZERO = 32'h8000_0000;
localparam [31:0] WS_FP32_ONE = 32'h3f80_0000;
localparam [15:0] WS_BF16_CANONICAL_NAN = 16'h7fc0;
