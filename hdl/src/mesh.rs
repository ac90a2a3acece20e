//! The wafer mesh's routed fabric on the host: geometry, route tables and the checker that
//! refuses a bad one, a flow model that predicts what the fabric delivers, the block specs of
//! `ws_mesh_router` / `ws_mesh_fabric`, and testbench agents for their credit links and
//! local streams.
//!
//! - [`Geometry`]: a P×Q array of routers, router `r = y·Q + x`, the port numbering of
//!   `hdl/rtl/include/ws_mesh_flit.vh` ([`PORT_N`] … [`PORT_L`]) and the edge-link numbering of
//!   `ws_mesh_fabric`. A lone router is the 1×1 mesh whose four links are all edges.
//! - [`Mesh`]: every router's route table (per input port and color: an output mask and an
//!   ordered-merge quota), the edge links driven from outside ([`Mesh::add_ingress`]) and those
//!   allowed to carry flits off the array ([`Mesh::add_egress`]); builders for the two
//!   standard patterns ([`Mesh::broadcast`], [`Mesh::gather`]); [`Mesh::writes`], the config
//!   writes that load it.
//! - [`Mesh::check`]: what firmware and host must run before a step starts. It refuses loops
//!   (a cycle in a color's channel graph), routes off the array, flows that end in an empty
//!   entry or reach a router twice, multicasts that share an output with another input, and
//!   ordered merges whose quotas do not match the sources behind them ([`RouteError`]).
//! - [`Mesh::deliver`]: the flow model. Given what every source injects, it returns what
//!   every sink receives and how many flits cross every output: in exact order where the
//!   routers fix the order (single-input outputs, ordered merges), per source otherwise.
//! - [`tb`]: lane-wise access to flat buses ([`tb::Pins`]), local-stream and credit-link
//!   agents, flit tagging and a per-sink scoreboard.
//!
//! The design is documented in `docs/mesh-router.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::dut::BlockSpec;

/// Port toward row y−1.
pub const PORT_N: usize = 0;
/// Port toward column x+1.
pub const PORT_E: usize = 1;
/// Port toward row y+1.
pub const PORT_S: usize = 2;
/// Port toward column x−1.
pub const PORT_W: usize = 3;
/// The local processing element.
pub const PORT_L: usize = 4;
/// Ports of a router.
pub const PORTS: usize = 5;
/// Link ports of a router (N, E, S, W).
pub const LINKS: usize = 4;
/// One-letter names of the ports, by index.
pub const PORT_NAMES: [&str; PORTS] = ["N", "E", "S", "W", "L"];

/// The port a link leaving on `port` arrives on at the neighbour.
pub const fn opposite(port: usize) -> usize {
    port ^ 2
}

/// Bit of `port` in an output mask.
pub const fn bit(port: usize) -> u8 {
    1 << port
}

/// Our RTL of one router, leaves first.
pub const ROUTER_FILES: &[&str] = &["hdl/rtl/ws_mesh_router_buf.v", "hdl/rtl/ws_mesh_router.v"];
/// Our RTL of the fabric, leaves first.
pub const FABRIC_FILES: &[&str] =
    &["hdl/rtl/ws_mesh_router_buf.v", "hdl/rtl/ws_mesh_router.v", "hdl/rtl/ws_mesh_fabric.v"];
/// Include directory of `ws_mesh_flit.vh`.
pub use crate::paths::RTL_INCLUDE_DIR;
/// The lint waivers of the mesh RTL.
pub const LINT_FILE: &str = "hdl/lint/mesh.vlt";

/// Parameters of `ws_mesh_router` (and of every router of a `ws_mesh_fabric`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RouterParams {
    /// `COLORS`: colors (virtual channels), 2..=16.
    pub colors: usize,
    /// `BUF_DEPTH`: flits per color per input port, a power of two ≥ 2.
    pub buf_depth: usize,
    /// `DATA_WIDTH`: payload bits (the testbench agents handle up to 64).
    pub data_width: u32,
    /// `USER_WIDTH`: header bits (up to 64 for the agents).
    pub user_width: u32,
    /// `QUOTA_WIDTH`: bits of a route entry's quota.
    pub quota_width: u32,
    /// `CNT_WIDTH`: bits of every counter.
    pub cnt_width: u32,
}

impl Default for RouterParams {
    fn default() -> Self {
        RouterParams::new()
    }
}

impl RouterParams {
    /// The RTL's defaults: 2 colors, 4 flits per color, 32-bit payload, the 64-bit house
    /// header, 8-bit quotas, 32-bit counters.
    pub const fn new() -> Self {
        RouterParams {
            colors: 2,
            buf_depth: 4,
            data_width: 32,
            user_width: 64,
            quota_width: 8,
            cnt_width: 32,
        }
    }

    /// Bits of a color field, ⌈log₂ colors⌉.
    pub const fn color_width(&self) -> u32 {
        let mut w = 0;
        while (1usize << w) < self.colors {
            w += 1;
        }
        w
    }

    /// The largest quota an entry can hold.
    pub const fn max_quota(&self) -> u32 {
        (1u32 << self.quota_width) - 1
    }

    /// The `-G` parameters, in the RTL's order.
    pub fn verilog_params(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("COLORS", self.colors as u64),
            ("BUF_DEPTH", self.buf_depth as u64),
            ("DATA_WIDTH", u64::from(self.data_width)),
            ("USER_WIDTH", u64::from(self.user_width)),
            ("QUOTA_WIDTH", u64::from(self.quota_width)),
            ("CNT_WIDTH", u64::from(self.cnt_width)),
        ]
    }
}

/// `ws_mesh_router` alone as the top module.
pub fn router_spec(p: &RouterParams) -> BlockSpec {
    let mut spec =
        BlockSpec::new("ws_mesh_router").files(ROUTER_FILES.iter().copied()).include_dir(RTL_INCLUDE_DIR);
    spec.vlt_files.push(LINT_FILE.into());
    for (k, v) in p.verilog_params() {
        spec = spec.param(k, v);
    }
    spec
}

/// `ws_mesh_fabric` with `geometry.rows` × `geometry.cols` routers as the top module.
pub fn fabric_spec(geometry: Geometry, p: &RouterParams) -> BlockSpec {
    let mut spec = BlockSpec::new("ws_mesh_fabric")
        .files(FABRIC_FILES.iter().copied())
        .include_dir(RTL_INCLUDE_DIR)
        .param("P", geometry.rows)
        .param("Q", geometry.cols);
    spec.vlt_files.push(LINT_FILE.into());
    for (k, v) in p.verilog_params() {
        spec = spec.param(k, v);
    }
    spec
}

/// The shape of a mesh: `rows` × `cols` routers; row 0 is the north edge, column 0 the west.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Geometry {
    /// P, the number of rows.
    pub rows: usize,
    /// Q, the number of columns.
    pub cols: usize,
}

impl Geometry {
    /// A `rows` × `cols` mesh.
    pub const fn new(rows: usize, cols: usize) -> Self {
        Geometry { rows, cols }
    }

    /// Routers, P·Q.
    pub const fn routers(&self) -> usize {
        self.rows * self.cols
    }

    /// Edge links, 2·(P+Q).
    pub const fn edges(&self) -> usize {
        2 * (self.rows + self.cols)
    }

    /// Index of the router in row `y`, column `x`.
    pub const fn router(&self, y: usize, x: usize) -> usize {
        y * self.cols + x
    }

    /// (row, column) of router `r`.
    pub const fn coords(&self, r: usize) -> (usize, usize) {
        (r / self.cols, r % self.cols)
    }

    /// The router across link port `port` of router `r`, if it is inside the array.
    pub const fn neighbour(&self, r: usize, port: usize) -> Option<usize> {
        let (y, x) = self.coords(r);
        match port {
            PORT_N if y > 0 => Some(r - self.cols),
            PORT_E if x + 1 < self.cols => Some(r + 1),
            PORT_S if y + 1 < self.rows => Some(r + self.cols),
            PORT_W if x > 0 => Some(r - 1),
            _ => None,
        }
    }

    /// The edge link that port `port` of router `r` is, if it leaves the array
    /// (`ws_mesh_fabric` numbering: north x, east Q+y, south Q+P+x, west 2Q+P+y).
    pub const fn edge(&self, r: usize, port: usize) -> Option<usize> {
        let (y, x) = self.coords(r);
        match port {
            PORT_N if y == 0 => Some(x),
            PORT_E if x + 1 == self.cols => Some(self.cols + y),
            PORT_S if y + 1 == self.rows => Some(self.cols + self.rows + x),
            PORT_W if x == 0 => Some(2 * self.cols + self.rows + y),
            _ => None,
        }
    }

    /// The (router, port) that edge link `e` belongs to.
    ///
    /// # Panics
    /// If `e` is not below [`Geometry::edges`].
    pub fn edge_port(&self, e: usize) -> (usize, usize) {
        let (p, q) = (self.rows, self.cols);
        assert!(e < self.edges(), "edge {e} of a {p}x{q} mesh does not exist");
        if e < q {
            (self.router(0, e), PORT_N)
        } else if e < q + p {
            (self.router(e - q, q - 1), PORT_E)
        } else if e < 2 * q + p {
            (self.router(p - 1, e - q - p), PORT_S)
        } else {
            (self.router(e - 2 * q - p, 0), PORT_W)
        }
    }
}

/// Where flits enter or leave the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Endpoint {
    /// The local port (the PE) of router `r`.
    Local(usize),
    /// Edge link `e`.
    Edge(usize),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Local(r) => write!(f, "PE {r}"),
            Endpoint::Edge(e) => write!(f, "edge link {e}"),
        }
    }
}

/// A router input or output: router `router`, port `port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Channel {
    /// Router index.
    pub router: usize,
    /// Port index ([`PORT_N`] … [`PORT_L`]).
    pub port: usize,
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}.{}", self.router, PORT_NAMES[self.port])
    }
}

fn show_path(path: &[Channel]) -> String {
    path.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" -> ")
}

fn show_mask(mask: u8) -> String {
    let s: String = (0..PORTS).filter(|p| mask >> p & 1 == 1).map(|p| PORT_NAMES[p]).collect();
    if s.is_empty() {
        "-".into()
    } else {
        s
    }
}

/// One route entry: what the head flit of buffer (input port, color) does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Entry {
    /// Output ports that get a copy (bit p = port p). 0 drops the flit (counted as a misroute).
    pub mask: u8,
    /// 0: the outputs merge this input round robin; n > 0: in an ordered merge, this input
    /// sends n whole packets per turn.
    pub quota: u32,
}

impl Entry {
    /// An entry with an output mask and quota 0.
    pub const fn to(mask: u8) -> Self {
        Entry { mask, quota: 0 }
    }
}

/// One write of the config port (`cfg_*` of `ws_mesh_router`, plus `cfg_router` of the fabric).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CfgWrite {
    /// Router index (`cfg_router`).
    pub router: usize,
    /// `cfg_in_port`.
    pub in_port: usize,
    /// `cfg_color`.
    pub color: usize,
    /// `cfg_out_mask`.
    pub mask: u8,
    /// `cfg_quota`.
    pub quota: u32,
}

/// Why a route configuration is refused. Each message names the place and what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// A cycle in a color's channel graph.
    #[error("color {color}: the routes form a loop {}: flits on it circle (and multiply) forever and its buffers can deadlock; remove one entry of the loop", show_path(.path))]
    Loop {
        /// The color.
        color: usize,
        /// Router inputs around the loop, back to the first.
        path: Vec<Channel>,
    },
    /// A route leaves the array through an edge link that is not an egress.
    #[error("color {color}: router {router} sends to port {} = edge link {edge}, which is not an egress for this color; route it inside the array or declare the egress", PORT_NAMES[*.port])]
    OffMesh {
        /// The color.
        color: usize,
        /// Router.
        router: usize,
        /// Its output port.
        port: usize,
        /// The edge link.
        edge: usize,
    },
    /// A flow reaches an input whose entry is empty: its flits would be dropped.
    #[error("color {color}: flits from {from} reach {at}, whose route entry is empty, and would be dropped; give that entry outputs")]
    DeadEnd {
        /// The color.
        color: usize,
        /// Where the flow starts.
        from: Endpoint,
        /// The input with the empty entry.
        at: Channel,
    },
    /// A flow reaches the same router input or output twice (a multicast whose branches meet
    /// again).
    #[error("color {color}: flits from {from} reach {at} twice; every destination would get duplicates and the branches can deadlock each other; make the routes of this color a tree")]
    Reconvergent {
        /// The color.
        color: usize,
        /// Where the flow starts.
        from: Endpoint,
        /// The input or output reached twice.
        at: Channel,
    },
    /// A multicast entry shares one of its outputs with another input of the same color.
    #[error("color {color}: router {router} output {} merges inputs {} and at least one of them is a multicast; packet-atomic merges and multicast copies can wait on each other in a cycle, so a multicast entry must own each of its outputs", PORT_NAMES[*.out], show_mask(*.inputs))]
    MulticastFunnel {
        /// The color.
        color: usize,
        /// Router.
        router: usize,
        /// The shared output.
        out: usize,
        /// Inputs routed to it (a port mask).
        inputs: u8,
    },
    /// Some inputs of a merge are ordered (quota > 0) and others are not.
    #[error("color {color}: router {router} output {} merges inputs {} with quotas that are zero for some and not for others; give all of them a quota (ordered) or none (round robin)", PORT_NAMES[*.out], show_mask(*.inputs))]
    MixedOrder {
        /// The color.
        color: usize,
        /// Router.
        router: usize,
        /// The output.
        out: usize,
        /// Inputs routed to it (a port mask).
        inputs: u8,
    },
    /// An ordered merge whose quota differs from the number of sources behind the input.
    #[error("color {color}: router {router} input {} has quota {quota} toward output {}, but {sources} sources send through it; with one packet per source per round the merge would wait forever for packets that never come; set the quota to {sources}", PORT_NAMES[*.input], PORT_NAMES[*.out])]
    QuotaMismatch {
        /// The color.
        color: usize,
        /// Router.
        router: usize,
        /// The merged input.
        input: usize,
        /// The output.
        out: usize,
        /// The quota set.
        quota: u32,
        /// Sources whose flits pass through the input.
        sources: usize,
    },
    /// A quota beyond what QUOTA_WIDTH holds.
    #[error("color {color}: router {router} input {} has quota {quota}, more than the {max} that QUOTA_WIDTH holds; build the mesh with a wider QUOTA_WIDTH", PORT_NAMES[*.input])]
    QuotaTooLarge {
        /// The color.
        color: usize,
        /// Router.
        router: usize,
        /// The input.
        input: usize,
        /// The quota set.
        quota: u32,
        /// The largest quota allowed.
        max: u32,
    },
}

/// One flow of a checked configuration: where a source's flits go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// The color.
    pub color: usize,
    /// Where it starts.
    pub source: Endpoint,
    /// Where copies leave the fabric.
    pub sinks: Vec<Endpoint>,
    /// Every router output a copy crosses (local and edge outputs included).
    pub outputs: Vec<Channel>,
}

/// What [`Mesh::check`] found in a configuration it accepts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// Every flow, by color and source.
    pub flows: Vec<Flow>,
}

/// A sequence of flits as the flow model sees them: an item and its `last` bit.
pub type Items<T> = Vec<(T, bool)>;

/// What one output or sink carries in the flow model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stream<T> {
    /// The flits, in the order the hardware sends them if `exact`, otherwise in some order
    /// that keeps every source's own order and every packet whole.
    pub items: Items<T>,
    /// The routers fix the order completely (every merge on the way is ordered).
    pub exact: bool,
    /// Flits left behind in ordered merges that waited for a member whose flits ran out
    /// (the hardware would wait for them forever): 0 in a consistent configuration.
    pub stalled: usize,
}

/// The flow model's answer for one color ([`Mesh::deliver`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery<T> {
    /// What every sink that receives anything gets.
    pub sinks: BTreeMap<Endpoint, Stream<T>>,
    /// Flits sent on every router output (local and edge outputs included).
    pub forwarded: BTreeMap<Channel, usize>,
    /// Flits dropped at inputs with an empty entry.
    pub dropped: BTreeMap<Channel, usize>,
}

/// The routes of a whole mesh and the edge links that connect it to the outside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mesh {
    /// Its shape.
    pub geometry: Geometry,
    /// The routers' parameters.
    pub params: RouterParams,
    /// Entry (r, port, color) at `(r * PORTS + port) * colors + color`.
    entries: Vec<Entry>,
    /// (edge, color) driven from outside.
    ingress: BTreeSet<(usize, usize)>,
    /// (edge, color) that may carry flits off the array.
    egress: BTreeSet<(usize, usize)>,
}

impl Mesh {
    /// A mesh whose tables are all empty (as after reset).
    pub fn new(geometry: Geometry, params: RouterParams) -> Self {
        Mesh {
            geometry,
            params,
            entries: vec![Entry::default(); geometry.routers() * PORTS * params.colors],
            ingress: BTreeSet::new(),
            egress: BTreeSet::new(),
        }
    }

    fn idx(&self, r: usize, port: usize, color: usize) -> usize {
        assert!(r < self.geometry.routers(), "router {r} does not exist");
        assert!(port < PORTS, "port {port} does not exist");
        assert!(color < self.params.colors, "color {color} does not exist ({} colors)", self.params.colors);
        (r * PORTS + port) * self.params.colors + color
    }

    /// The entry of router `r`, input `port`, color `color`.
    pub fn entry(&self, r: usize, port: usize, color: usize) -> Entry {
        self.entries[self.idx(r, port, color)]
    }

    /// Sets an entry.
    ///
    /// # Panics
    /// On a router, port or color that does not exist, or a mask above 5 bits.
    pub fn set(&mut self, r: usize, port: usize, color: usize, entry: Entry) -> &mut Self {
        assert!(entry.mask < 32, "mask {:#x} has bits above the five ports", entry.mask);
        let i = self.idx(r, port, color);
        self.entries[i] = entry;
        self
    }

    /// Declares edge link `edge` as driven from outside on `color` (weight or sample ingress).
    pub fn add_ingress(&mut self, edge: usize, color: usize) -> &mut Self {
        self.ingress.insert((edge, color));
        self
    }

    /// Declares edge link `edge` as a place where `color` may leave the array (an egress).
    pub fn add_egress(&mut self, edge: usize, color: usize) -> &mut Self {
        self.egress.insert((edge, color));
        self
    }

    /// Inputs of router `r` routed to output `out` on `color` (a port mask).
    pub fn members(&self, r: usize, out: usize, color: usize) -> u8 {
        (0..PORTS).filter(|&i| self.entry(r, i, color).mask >> out & 1 == 1).fold(0, |m, i| m | bit(i))
    }

    /// True when output `out` of router `r` merges `color` in the ordered mode (some member
    /// has a quota), as the RTL decides it.
    pub fn is_ordered(&self, r: usize, out: usize, color: usize) -> bool {
        (0..PORTS).any(|i| {
            let e = self.entry(r, i, color);
            e.mask >> out & 1 == 1 && e.quota != 0
        })
    }

    /// Every entry as a config write, router by router (empty entries included, so the writes
    /// also clear what an earlier configuration left).
    pub fn writes(&self) -> Vec<CfgWrite> {
        let mut out = Vec::with_capacity(self.entries.len());
        for router in 0..self.geometry.routers() {
            for in_port in 0..PORTS {
                for color in 0..self.params.colors {
                    let e = self.entry(router, in_port, color);
                    out.push(CfgWrite { router, in_port, color, mask: e.mask, quota: e.quota });
                }
            }
        }
        out
    }

    /// Where a copy sent on output `out` of router `r` goes: the neighbour's input, or the
    /// edge link / local port it leaves through.
    fn next_hop(&self, r: usize, out: usize) -> Result<Channel, Endpoint> {
        if out == PORT_L {
            return Err(Endpoint::Local(r));
        }
        match self.geometry.neighbour(r, out) {
            Some(n) => Ok(Channel { router: n, port: opposite(out) }),
            None => Err(Endpoint::Edge(
                self.geometry.edge(r, out).expect("a link port without neighbour is an edge"),
            )),
        }
    }

    /// Where flits of `color` enter: every local input with a non-empty entry, and every
    /// ingress edge of the color.
    fn sources(&self, color: usize) -> Vec<(Endpoint, Channel)> {
        let mut out = Vec::new();
        for r in 0..self.geometry.routers() {
            if self.entry(r, PORT_L, color).mask != 0 {
                out.push((Endpoint::Local(r), Channel { router: r, port: PORT_L }));
            }
        }
        for &(e, c) in &self.ingress {
            if c == color {
                let (router, port) = self.geometry.edge_port(e);
                out.push((Endpoint::Edge(e), Channel { router, port }));
            }
        }
        out
    }

    /// Finds a cycle among the entries of `color` (input channel → input channel edges).
    fn find_loop(&self, color: usize) -> Option<Vec<Channel>> {
        let n = self.geometry.routers() * PORTS;
        // 0 unvisited, 1 on the stack, 2 done.
        let mut state = vec![0u8; n];
        let mut stack: Vec<Channel> = Vec::new();
        for start in 0..n {
            if state[start] == 0 {
                if let Some(cycle) = self.dfs(color, start, &mut state, &mut stack) {
                    return Some(cycle);
                }
            }
        }
        None
    }

    fn dfs(
        &self,
        color: usize,
        node: usize,
        state: &mut [u8],
        stack: &mut Vec<Channel>,
    ) -> Option<Vec<Channel>> {
        let ch = Channel { router: node / PORTS, port: node % PORTS };
        state[node] = 1;
        stack.push(ch);
        let mask = self.entry(ch.router, ch.port, color).mask;
        for out in (0..PORTS).filter(|o| mask >> o & 1 == 1) {
            if let Ok(next) = self.next_hop(ch.router, out) {
                let ni = next.router * PORTS + next.port;
                if state[ni] == 1 {
                    let at = stack.iter().position(|c| *c == next).unwrap_or(0);
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(next);
                    return Some(cycle);
                }
                if state[ni] == 0 {
                    if let Some(c) = self.dfs(color, ni, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state[node] = 2;
        None
    }

    /// The rules each router must satisfy alone: quotas that fit, and per (output, color) no
    /// multicast in a merge and no mix of ordered and round-robin inputs.
    pub fn check_routers(&self) -> Result<(), RouteError> {
        let max = self.params.max_quota();
        for r in 0..self.geometry.routers() {
            for color in 0..self.params.colors {
                for input in 0..PORTS {
                    let e = self.entry(r, input, color);
                    if e.quota > max {
                        return Err(RouteError::QuotaTooLarge {
                            color,
                            router: r,
                            input,
                            quota: e.quota,
                            max,
                        });
                    }
                }
                for out in 0..PORTS {
                    let inputs = self.members(r, out, color);
                    if inputs.count_ones() < 2 {
                        continue;
                    }
                    let member = |i: usize| inputs >> i & 1 == 1;
                    if (0..PORTS).any(|i| member(i) && self.entry(r, i, color).mask.count_ones() > 1) {
                        return Err(RouteError::MulticastFunnel { color, router: r, out, inputs });
                    }
                    let ordered =
                        (0..PORTS).filter(|&i| member(i) && self.entry(r, i, color).quota != 0).count();
                    if ordered != 0 && ordered != inputs.count_ones() as usize {
                        return Err(RouteError::MixedOrder { color, router: r, out, inputs });
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks the whole configuration, as firmware and host must before a step starts, and
    /// returns its flows. Per color: no loop, nothing off the array but at egress edges,
    /// every flow ending at sinks (no empty entry on its way), no router input reached twice
    /// by one source, [`Mesh::check_routers`], and ordered merges whose every input's quota
    /// equals the number of sources behind it (the contract of an ordered merge: every
    /// source of the color sends one packet per round).
    pub fn check(&self) -> Result<Plan, RouteError> {
        self.check_routers()?;
        let mut plan = Plan::default();
        for color in 0..self.params.colors {
            if let Some(path) = self.find_loop(color) {
                return Err(RouteError::Loop { color, path });
            }
            // Off the array.
            for r in 0..self.geometry.routers() {
                for input in 0..PORTS {
                    let mask = self.entry(r, input, color).mask;
                    for port in (0..LINKS).filter(|o| mask >> o & 1 == 1) {
                        if let Err(Endpoint::Edge(edge)) = self.next_hop(r, port) {
                            if !self.egress.contains(&(edge, color)) {
                                return Err(RouteError::OffMesh { color, router: r, port, edge });
                            }
                        }
                    }
                }
            }
            // Flows, and how many sources pass through every input.
            let mut behind: BTreeMap<Channel, usize> = BTreeMap::new();
            for (source, start) in self.sources(color) {
                let mut seen = BTreeSet::new();
                let mut flow = Flow { color, source, sinks: Vec::new(), outputs: Vec::new() };
                let mut todo = vec![start];
                while let Some(at) = todo.pop() {
                    if !seen.insert(at) {
                        return Err(RouteError::Reconvergent { color, from: source, at });
                    }
                    *behind.entry(at).or_insert(0) += 1;
                    let mask = self.entry(at.router, at.port, color).mask;
                    if mask == 0 {
                        return Err(RouteError::DeadEnd { color, from: source, at });
                    }
                    for out in (0..PORTS).filter(|o| mask >> o & 1 == 1) {
                        // Two branches of one multicast meeting in one output.
                        let oc = Channel { router: at.router, port: out };
                        if flow.outputs.contains(&oc) {
                            return Err(RouteError::Reconvergent { color, from: source, at: oc });
                        }
                        flow.outputs.push(oc);
                        match self.next_hop(at.router, out) {
                            Ok(next) => todo.push(next),
                            Err(sink) => flow.sinks.push(sink),
                        }
                    }
                }
                flow.sinks.sort();
                flow.outputs.sort();
                plan.flows.push(flow);
            }
            // Ordered merges: quota = sources behind the input.
            for r in 0..self.geometry.routers() {
                for out in 0..PORTS {
                    if !self.is_ordered(r, out, color) {
                        continue;
                    }
                    let inputs = self.members(r, out, color);
                    for input in (0..PORTS).filter(|i| inputs >> i & 1 == 1) {
                        let quota = self.entry(r, input, color).quota;
                        let sources = behind.get(&Channel { router: r, port: input }).copied().unwrap_or(0);
                        if sources > 0 && quota as usize != sources {
                            return Err(RouteError::QuotaMismatch {
                                color,
                                router: r,
                                input,
                                out,
                                quota,
                                sources,
                            });
                        }
                    }
                }
            }
        }
        Ok(plan)
    }

    /// Sets the quota of every input of every merge of `color` to the number of sources
    /// behind it (what [`Mesh::check`] requires of ordered merges), making every merge of the
    /// color with two or more inputs ordered.
    pub fn order_merges(&mut self, color: usize) -> &mut Self {
        let mut behind: BTreeMap<Channel, usize> = BTreeMap::new();
        for (_, start) in self.sources(color) {
            let mut seen = BTreeSet::new();
            let mut todo = vec![start];
            while let Some(at) = todo.pop() {
                if !seen.insert(at) {
                    continue;
                }
                *behind.entry(at).or_insert(0) += 1;
                let mask = self.entry(at.router, at.port, color).mask;
                for out in (0..PORTS).filter(|o| mask >> o & 1 == 1) {
                    if let Ok(next) = self.next_hop(at.router, out) {
                        todo.push(next);
                    }
                }
            }
        }
        for r in 0..self.geometry.routers() {
            for out in 0..PORTS {
                let inputs = self.members(r, out, color);
                if inputs.count_ones() < 2 {
                    continue;
                }
                for input in (0..PORTS).filter(|i| inputs >> i & 1 == 1) {
                    let n = behind.get(&Channel { router: r, port: input }).copied().unwrap_or(0);
                    let i = self.idx(r, input, color);
                    self.entries[i].quota = n.max(1) as u32;
                }
            }
        }
        self
    }

    /// Routes `color` as a broadcast from `root` to every PE (the root's own PE included):
    /// along the root's row both ways, then up and down every column. Each router has one
    /// entry for the color and it is the only input of each of its outputs, so the tree has
    /// no merge. An edge root is declared as ingress.
    ///
    /// # Panics
    /// If `root` is an edge link that does not exist.
    pub fn broadcast(&mut self, color: usize, root: Endpoint) -> &mut Self {
        let g = self.geometry;
        let (root_router, root_port) = match root {
            Endpoint::Local(r) => (r, PORT_L),
            Endpoint::Edge(e) => {
                self.add_ingress(e, color);
                g.edge_port(e)
            }
        };
        let (ry, rx) = g.coords(root_router);
        for r in 0..g.routers() {
            let (y, x) = g.coords(r);
            let mut mask = bit(PORT_L);
            let input;
            if y == ry {
                input = if x == rx {
                    root_port
                } else if x > rx {
                    PORT_W
                } else {
                    PORT_E
                };
                if x >= rx && x + 1 < g.cols {
                    mask |= bit(PORT_E);
                }
                if x <= rx && x > 0 {
                    mask |= bit(PORT_W);
                }
                if y > 0 {
                    mask |= bit(PORT_N);
                }
                if y + 1 < g.rows {
                    mask |= bit(PORT_S);
                }
            } else if y > ry {
                input = PORT_N;
                if y + 1 < g.rows {
                    mask |= bit(PORT_S);
                }
            } else {
                input = PORT_S;
                if y > 0 {
                    mask |= bit(PORT_N);
                }
            }
            self.set(r, input, color, Entry::to(mask));
        }
        self
    }

    /// Routes `color` as a gather from every PE to edge link `egress` (declared as egress):
    /// each row toward the egress column, then that column toward the egress row. With
    /// `ordered`, every merge is ordered with quotas from [`Mesh::order_merges`], so the
    /// order in which the packets of one round leave is fixed by the table alone.
    pub fn gather(&mut self, color: usize, egress: usize, ordered: bool) -> &mut Self {
        let g = self.geometry;
        self.add_egress(egress, color);
        let (er, ep) = g.edge_port(egress);
        let (ey, ex) = g.coords(er);
        for r in 0..g.routers() {
            let (y, x) = g.coords(r);
            let (out, inputs): (usize, Vec<usize>) = if x != ex {
                let from =
                    if x < ex { (x > 0).then_some(PORT_W) } else { (x + 1 < g.cols).then_some(PORT_E) };
                (if x < ex { PORT_E } else { PORT_W }, from.into_iter().collect())
            } else {
                let mut v = Vec::new();
                if ex > 0 {
                    v.push(PORT_W);
                }
                if ex + 1 < g.cols {
                    v.push(PORT_E);
                }
                // From the north above the egress row, from the south below it.
                if y > 0 && y <= ey {
                    v.push(PORT_N);
                }
                if y + 1 < g.rows && y >= ey {
                    v.push(PORT_S);
                }
                let out = if y < ey {
                    PORT_S
                } else if y > ey {
                    PORT_N
                } else {
                    ep
                };
                (out, v)
            };
            self.set(r, PORT_L, color, Entry::to(bit(out)));
            for i in inputs {
                if i != out {
                    self.set(r, i, color, Entry::to(bit(out)));
                }
            }
        }
        if ordered {
            self.order_merges(color);
        }
        self
    }

    /// The flow model for `color`: what the routers deliver when each source of `inject`
    /// sends its items. An output with one input passes that input's stream on; an ordered
    /// merge interleaves its inputs' packets by the rotation of the RTL (members in port
    /// order N, E, S, W, L, each max(quota, 1) packets per turn, from the first member); a
    /// round-robin merge keeps each input's order and whole packets but fixes nothing else.
    /// Entries with an empty mask drop what reaches them.
    ///
    /// # Errors
    /// If the color's routes contain a loop (the model would not end).
    pub fn deliver<T: Clone>(
        &self,
        color: usize,
        inject: &BTreeMap<Endpoint, Items<T>>,
    ) -> Result<Delivery<T>, RouteError> {
        if let Some(path) = self.find_loop(color) {
            return Err(RouteError::Loop { color, path });
        }
        let mut memo: BTreeMap<Channel, Stream<T>> = BTreeMap::new();
        let mut d = Delivery { sinks: BTreeMap::new(), forwarded: BTreeMap::new(), dropped: BTreeMap::new() };
        for r in 0..self.geometry.routers() {
            for out in 0..PORTS {
                if self.members(r, out, color) == 0 {
                    continue;
                }
                let s = self.out_stream(color, Channel { router: r, port: out }, inject, &mut memo);
                if !s.items.is_empty() {
                    d.forwarded.insert(Channel { router: r, port: out }, s.items.len());
                }
                if let Err(sink) = self.next_hop(r, out) {
                    if !s.items.is_empty() || s.stalled > 0 {
                        d.sinks.insert(sink, s);
                    }
                }
            }
            for input in 0..PORTS {
                if self.entry(r, input, color).mask == 0 {
                    let n = self
                        .in_stream(color, Channel { router: r, port: input }, inject, &mut memo)
                        .items
                        .len();
                    if n > 0 {
                        d.dropped.insert(Channel { router: r, port: input }, n);
                    }
                }
            }
        }
        Ok(d)
    }

    fn in_stream<T: Clone>(
        &self,
        color: usize,
        at: Channel,
        inject: &BTreeMap<Endpoint, Items<T>>,
        memo: &mut BTreeMap<Channel, Stream<T>>,
    ) -> Stream<T> {
        let injected = |ep: Endpoint| Stream {
            items: inject.get(&ep).cloned().unwrap_or_default(),
            exact: true,
            stalled: 0,
        };
        if at.port == PORT_L {
            return injected(Endpoint::Local(at.router));
        }
        match self.geometry.neighbour(at.router, at.port) {
            Some(n) => self.out_stream(color, Channel { router: n, port: opposite(at.port) }, inject, memo),
            // Whatever the test drives into an edge link, declared as ingress or not.
            None => injected(Endpoint::Edge(self.geometry.edge(at.router, at.port).expect("edge"))),
        }
    }

    fn out_stream<T: Clone>(
        &self,
        color: usize,
        out: Channel,
        inject: &BTreeMap<Endpoint, Items<T>>,
        memo: &mut BTreeMap<Channel, Stream<T>>,
    ) -> Stream<T> {
        if let Some(s) = memo.get(&out) {
            return s.clone();
        }
        let r = out.router;
        let members: Vec<usize> =
            (0..PORTS).filter(|&i| self.members(r, out.port, color) >> i & 1 == 1).collect();
        let inputs: Vec<Stream<T>> = members
            .iter()
            .map(|&i| self.in_stream(color, Channel { router: r, port: i }, inject, memo))
            .collect();
        let s = if inputs.is_empty() {
            Stream { items: Vec::new(), exact: true, stalled: 0 }
        } else if inputs.len() == 1 {
            inputs[0].clone()
        } else if self.is_ordered(r, out.port, color) {
            // The RTL's rotation: whole packets, max(quota, 1) per turn, members in port order.
            let quotas: Vec<usize> =
                members.iter().map(|&i| (self.entry(r, i, color).quota as usize).max(1)).collect();
            let mut pos = vec![0usize; inputs.len()];
            let mut items = Vec::new();
            let mut turn = 0;
            'rotation: loop {
                for _ in 0..quotas[turn] {
                    let src = &inputs[turn].items;
                    // Whole packets only: the hardware waits inside a packet as well.
                    let Some(end) = src[pos[turn]..].iter().position(|(_, last)| *last) else {
                        break 'rotation;
                    };
                    items.extend_from_slice(&src[pos[turn]..pos[turn] + end + 1]);
                    pos[turn] += end + 1;
                }
                turn = (turn + 1) % inputs.len();
            }
            let left: usize = inputs.iter().zip(&pos).map(|(s, p)| s.items.len() - p).sum();
            Stream {
                items,
                exact: inputs.iter().all(|s| s.exact),
                stalled: left + inputs.iter().map(|s| s.stalled).sum::<usize>(),
            }
        } else {
            Stream {
                items: inputs.iter().flat_map(|s| s.items.iter().cloned()).collect(),
                exact: false,
                stalled: inputs.iter().map(|s| s.stalled).sum(),
            }
        };
        memo.insert(out, s.clone());
        s
    }
}

pub mod tb;

#[cfg(test)]
mod tests;
