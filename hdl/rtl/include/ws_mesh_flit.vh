// ws_mesh_flit.vh: what the wafer-mesh links carry beyond the house flit, for inclusion
// inside a module body (ws_mesh_router, ws_mesh_fabric).
//
// A mesh flit is the house flit of ws_flit.vh unchanged: `_data` (DATA_WIDTH bits, 32 by
// default), `_last` (closes a packet) and `_user` (USER_WIDTH bits, by default the 64-bit
// header {index, chunk, step, layer, kind}). The mesh adds no header field. The color (the
// virtual channel that selects the route and the buffer) travels beside the flit: on a
// router-to-router link as a `_color` sideband of $clog2(COLORS) bits, and on the local
// (PE) port as the index of the per-color stream the flit uses. Docs: docs/mesh-router.md.
// Hand-written; the Rust mirror is ws_hdl::mesh (PORT_*), and its tests parse this file.

// Router ports. Link ports are 0..3, so that a flat link bus slices as [p*W +: W]; the port a
// link arrives on at the neighbour is the opposite one, p ^ 2.
localparam [2:0] WS_MESH_PORT_N = 3'd0;  // toward row y-1
localparam [2:0] WS_MESH_PORT_E = 3'd1;  // toward column x+1
localparam [2:0] WS_MESH_PORT_S = 3'd2;  // toward row y+1
localparam [2:0] WS_MESH_PORT_W = 3'd3;  // toward column x-1
localparam [2:0] WS_MESH_PORT_L = 3'd4;  // the local processing element
localparam WS_MESH_PORTS = 5;
localparam WS_MESH_LINKS = 4;
