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
pub const RTL_INCLUDE_DIR: &str = "hdl/rtl/include";
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

/// Testbench agents for `ws_mesh_router` and `ws_mesh_fabric`.
///
/// Their ports are flat buses (`s_local_valid[R*COLORS-1:0]`, `m_link_data[4*W-1:0]`, ...), so
/// the agents work on lanes of them: [`Pins`] keeps a shadow of every port an agent uses,
/// [`Pins::sample`] reads the outputs once per cycle and [`Pins::drive`] writes the inputs.
/// Neither block has a combinational path from an input to an output (every output is a
/// register), so a cycle is: sample, let every agent decide, drive, tick.
///
/// - [`LocalSource`] / [`LocalSink`]: a per-color valid/ready stream of the local port, with a
///   random valid / ready [`Pattern`]; the sink checks that a stalled flit stays put.
/// - [`LinkTx`]: an upstream router. It sends flits of any color only with a credit, starting
///   with BUF_DEPTH per color, and takes back the credits the DUT returns after a random delay.
/// - [`LinkRx`]: a downstream router. It buffers what arrives per color, fails if a buffer
///   would overflow (a flit sent without credit), drains at a random rate, and returns one
///   credit per drained flit after a random delay.
/// - [`Tagger`] writes (source, sequence number) into each flit's `user` bits;
///   [`SinkCheck`] checks what a sink receives against the flow model ([`super::Mesh::deliver`]):
///   nothing lost, nothing duplicated, every source in order, packets whole, and the exact order
///   where the model fixes it.
pub mod tb {
    use std::collections::{BTreeMap, VecDeque};

    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    use super::{CfgWrite, RouterParams};
    use crate::dut::{Dut, Pattern, Port};

    /// A flit as the agents see it: `data` and `user` up to 64 bits each.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Flit {
        /// `_data`.
        pub data: u64,
        /// `_last`.
        pub last: bool,
        /// `_user`.
        pub user: u64,
    }

    const fn mask(width: u32) -> u64 {
        if width >= 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        }
    }

    /// A handle of a port in [`Pins`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Pin(usize);

    /// `width` bits (at most 64) of a port, from bit `lsb`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Field {
        pin: Pin,
        lsb: u32,
        width: u32,
    }

    #[derive(Debug)]
    struct Slot {
        name: String,
        port: Port,
        input: bool,
        words: Vec<u32>,
    }

    /// Shadows of the DUT ports the agents use, so that many agents can share one flat bus.
    #[derive(Debug, Default)]
    pub struct Pins {
        slots: Vec<Slot>,
    }

    impl Pins {
        /// No ports yet.
        pub fn new() -> Self {
            Pins::default()
        }

        /// The port `name` (added on first use).
        pub fn pin(&mut self, dut: &Dut, name: &str) -> Pin {
            if let Some(i) = self.slots.iter().position(|s| s.name == name) {
                return Pin(i);
            }
            let port = dut.port(name);
            let input = port.direction() != crate::dut::Direction::Output;
            self.slots.push(Slot { name: name.to_string(), port, input, words: vec![0; port.words()] });
            Pin(self.slots.len() - 1)
        }

        /// Bits `lsb .. lsb+width` of port `name`.
        ///
        /// # Panics
        /// If the field is wider than 64 bits or does not fit the port.
        pub fn field(&mut self, dut: &Dut, name: &str, lsb: u32, width: u32) -> Field {
            let pin = self.pin(dut, name);
            let w = self.slots[pin.0].port.width();
            assert!(width <= 64 && lsb + width <= w, "{name}[{lsb} +: {width}] does not fit its {w} bits");
            Field { pin, lsb, width }
        }

        /// The current value of a field (outputs: as last sampled; inputs: as last set).
        pub fn get(&self, f: Field) -> u64 {
            let words = &self.slots[f.pin.0].words;
            let mut v = 0u64;
            let mut done = 0;
            while done < f.width {
                let b = f.lsb + done;
                let take = (32 - b % 32).min(f.width - done);
                let chunk = u64::from(words[(b / 32) as usize] >> (b % 32)) & mask(take);
                v |= chunk << done;
                done += take;
            }
            v
        }

        /// Sets an input field for the next [`Pins::drive`] (bits above its width are dropped).
        pub fn set(&mut self, f: Field, value: u64) {
            let words = &mut self.slots[f.pin.0].words;
            let mut done = 0;
            while done < f.width {
                let b = f.lsb + done;
                let take = (32 - b % 32).min(f.width - done);
                let m = (mask(take) as u32) << (b % 32);
                let w = &mut words[(b / 32) as usize];
                *w = (*w & !m) | ((((value >> done) & mask(take)) as u32) << (b % 32));
                done += take;
            }
        }

        /// Reads every output port in use.
        pub fn sample(&mut self, dut: &Dut) {
            for s in self.slots.iter_mut().filter(|s| !s.input) {
                s.words = dut.get_words(s.port);
            }
        }

        /// Writes every input port in use.
        pub fn drive(&self, dut: &mut Dut) {
            for s in self.slots.iter().filter(|s| s.input) {
                dut.set_words(s.port, &s.words);
            }
        }
    }

    /// A seeded on/off generator following a [`Pattern`] (the same patterns as the harness's
    /// stream agents: `Mixed` switches every 32..512 cycles and includes long stalls).
    #[derive(Debug)]
    pub struct Gate {
        pattern: Pattern,
        rng: StdRng,
        on: bool,
        current: Pattern,
        left: u32,
    }

    impl Gate {
        /// A gate with `pattern` and its own random stream.
        pub fn new(pattern: Pattern, rng: StdRng) -> Self {
            Gate { pattern, rng, on: true, current: Pattern::Always, left: 0 }
        }

        /// On or off this cycle.
        pub fn draw(&mut self) -> bool {
            let p = match self.pattern {
                Pattern::Mixed => {
                    if self.left == 0 {
                        self.left = self.rng.random_range(32..512);
                        self.current = match self.rng.random_range(0..6) {
                            0 => Pattern::Always,
                            1 => Pattern::Random(0.5),
                            2 => Pattern::Random(0.1),
                            3 => Pattern::Random(0.9),
                            4 => Pattern::Bursty { on: 8.0, off: 8.0 },
                            _ => Pattern::Bursty { on: 3.0, off: 40.0 },
                        };
                    }
                    self.left -= 1;
                    self.current
                }
                p => p,
            };
            match p {
                Pattern::Always | Pattern::Mixed => true,
                Pattern::Random(prob) => self.rng.random_bool(prob.clamp(0.0, 1.0)),
                Pattern::Bursty { on, off } => {
                    let mean = if self.on { on } else { off };
                    if self.rng.random_bool((1.0 / mean.max(1.0)).clamp(0.0, 1.0)) {
                        self.on = !self.on;
                    }
                    self.on
                }
            }
        }
    }

    /// One local stream of a router or fabric: lane `k` of `<prefix>_valid/_ready/_data/
    /// _last/_user` (router: k = color; fabric: k = router·COLORS + color).
    #[derive(Debug, Clone, Copy)]
    pub struct StreamLane {
        valid: Field,
        ready: Field,
        data: Field,
        last: Field,
        user: Field,
    }

    impl StreamLane {
        /// Lane `k` of the group `prefix` (`"s_local"` or `"m_local"`).
        pub fn new(pins: &mut Pins, dut: &Dut, prefix: &str, k: usize, p: &RouterParams) -> Self {
            let k = k as u32;
            StreamLane {
                valid: pins.field(dut, &format!("{prefix}_valid"), k, 1),
                ready: pins.field(dut, &format!("{prefix}_ready"), k, 1),
                data: pins.field(dut, &format!("{prefix}_data"), k * p.data_width, p.data_width),
                last: pins.field(dut, &format!("{prefix}_last"), k, 1),
                user: pins.field(dut, &format!("{prefix}_user"), k * p.user_width, p.user_width),
            }
        }

        fn read(&self, pins: &Pins) -> Flit {
            Flit { data: pins.get(self.data), last: pins.get(self.last) != 0, user: pins.get(self.user) }
        }

        fn write(&self, pins: &mut Pins, f: &Flit) {
            pins.set(self.data, f.data);
            pins.set(self.last, u64::from(f.last));
            pins.set(self.user, f.user);
        }
    }

    /// One credit link of a router or fabric: lane `k` of `<prefix>_valid/_color/_data/_last/
    /// _user/_credit` (router: k = port 0..3; fabric edges: k = edge link).
    #[derive(Debug, Clone, Copy)]
    pub struct LinkLane {
        valid: Field,
        color: Field,
        data: Field,
        last: Field,
        user: Field,
        credit: Field,
    }

    impl LinkLane {
        /// Lane `k` of the group `prefix` (`"s_link"`, `"m_link"`, `"s_edge"`, `"m_edge"`).
        pub fn new(pins: &mut Pins, dut: &Dut, prefix: &str, k: usize, p: &RouterParams) -> Self {
            let k = k as u32;
            let cw = p.color_width();
            LinkLane {
                valid: pins.field(dut, &format!("{prefix}_valid"), k, 1),
                color: pins.field(dut, &format!("{prefix}_color"), k * cw, cw),
                data: pins.field(dut, &format!("{prefix}_data"), k * p.data_width, p.data_width),
                last: pins.field(dut, &format!("{prefix}_last"), k, 1),
                user: pins.field(dut, &format!("{prefix}_user"), k * p.user_width, p.user_width),
                credit: pins.field(dut, &format!("{prefix}_credit"), k * p.colors as u32, p.colors as u32),
            }
        }
    }

    /// Feeds flits into a local input stream with a random valid pattern, holding each flit
    /// until it is taken.
    #[derive(Debug)]
    pub struct LocalSource {
        lane: StreamLane,
        queue: VecDeque<Flit>,
        gate: Gate,
        junk: StdRng,
        holding: bool,
        sent: u64,
    }

    impl LocalSource {
        /// A source on `lane`; `rng` seeds its pattern and idle junk.
        pub fn new(lane: StreamLane, pattern: Pattern, mut rng: StdRng) -> Self {
            let gate = Gate::new(pattern, StdRng::from_rng(&mut rng));
            LocalSource { lane, queue: VecDeque::new(), gate, junk: rng, holding: false, sent: 0 }
        }

        /// Queues a flit.
        pub fn push(&mut self, f: Flit) {
            self.queue.push_back(f);
        }

        /// Flits not yet taken.
        pub fn pending(&self) -> usize {
            self.queue.len()
        }

        /// Flits taken.
        pub fn sent(&self) -> u64 {
            self.sent
        }

        /// One cycle (after [`Pins::sample`], before [`Pins::drive`]): the flit the coming
        /// clock edge transfers, if any.
        pub fn step(&mut self, pins: &mut Pins) -> Option<Flit> {
            if !self.holding && !self.queue.is_empty() && self.gate.draw() {
                self.holding = true;
            }
            pins.set(self.lane.valid, u64::from(self.holding));
            if self.holding {
                let f = self.queue[0];
                self.lane.write(pins, &f);
                if pins.get(self.lane.ready) != 0 {
                    self.holding = false;
                    self.sent += 1;
                    return self.queue.pop_front();
                }
            } else {
                // Junk while idle: a DUT that takes data without valid shows up as a mismatch.
                let f = Flit { data: self.junk.random(), last: self.junk.random(), user: self.junk.random() };
                self.lane.write(pins, &f);
            }
            None
        }
    }

    /// Takes flits from a local output stream with a random ready pattern and checks the
    /// handshake rule: a flit offered and not taken stays, unchanged, until it is.
    #[derive(Debug)]
    pub struct LocalSink {
        name: String,
        lane: StreamLane,
        gate: Gate,
        stalled: Option<Flit>,
        received: u64,
    }

    impl LocalSink {
        /// A sink on `lane` called `name` in messages.
        pub fn new(name: impl Into<String>, lane: StreamLane, pattern: Pattern, rng: StdRng) -> Self {
            LocalSink { name: name.into(), lane, gate: Gate::new(pattern, rng), stalled: None, received: 0 }
        }

        /// Flits received.
        pub fn received(&self) -> u64 {
            self.received
        }

        /// One cycle: the flit the coming edge transfers, if any.
        ///
        /// # Panics
        /// If a stalled flit was withdrawn or changed.
        pub fn step(&mut self, pins: &mut Pins, cycle: u64) -> Option<Flit> {
            let valid = pins.get(self.lane.valid) != 0;
            let f = self.lane.read(pins);
            if let Some(prev) = self.stalled.take() {
                assert!(valid, "{}: valid dropped at cycle {cycle} before {prev:x?} was taken", self.name);
                assert_eq!(f, prev, "{}: a stalled flit changed at cycle {cycle}", self.name);
            }
            let ready = self.gate.draw();
            pins.set(self.lane.ready, u64::from(ready));
            if !valid {
                return None;
            }
            if ready {
                self.received += 1;
                Some(f)
            } else {
                self.stalled = Some(f);
                None
            }
        }
    }

    /// Credits waiting to mature: (cycle, color).
    #[derive(Debug, Default)]
    struct Due(Vec<(u64, usize)>);

    impl Due {
        fn push(&mut self, at: u64, color: usize) {
            self.0.push((at, color));
        }

        /// Removes and returns the earliest matured entry of `color`.
        fn take(&mut self, now: u64, color: usize) -> bool {
            let best = self
                .0
                .iter()
                .enumerate()
                .filter(|(_, d)| d.1 == color && d.0 <= now)
                .min_by_key(|(_, d)| d.0);
            match best.map(|(i, _)| i) {
                Some(i) => {
                    self.0.swap_remove(i);
                    true
                }
                None => false,
            }
        }
    }

    /// An upstream router driving a credit link into the DUT.
    #[derive(Debug)]
    pub struct LinkTx {
        name: String,
        lane: LinkLane,
        depth: usize,
        queues: Vec<VecDeque<Flit>>,
        credits: Vec<usize>,
        due: Due,
        max_delay: u64,
        gate: Gate,
        rng: StdRng,
        sent: Vec<u64>,
    }

    impl LinkTx {
        /// A transmitter on `lane` with BUF_DEPTH credits per color; the DUT's credits
        /// become usable 0..=`max_delay` cycles after it returns them.
        pub fn new(
            name: impl Into<String>,
            lane: LinkLane,
            p: &RouterParams,
            pattern: Pattern,
            max_delay: u64,
            mut rng: StdRng,
        ) -> Self {
            let gate = Gate::new(pattern, StdRng::from_rng(&mut rng));
            LinkTx {
                name: name.into(),
                lane,
                depth: p.buf_depth,
                queues: vec![VecDeque::new(); p.colors],
                credits: vec![p.buf_depth; p.colors],
                due: Due::default(),
                max_delay,
                gate,
                rng,
                sent: vec![0; p.colors],
            }
        }

        /// Queues a flit of `color`.
        pub fn push(&mut self, color: usize, f: Flit) {
            self.queues[color].push_back(f);
        }

        /// Flits not yet sent.
        pub fn pending(&self) -> usize {
            self.queues.iter().map(VecDeque::len).sum()
        }

        /// Flits sent per color.
        pub fn sent(&self) -> &[u64] {
            &self.sent
        }

        /// Every credit is back: the DUT holds none of this link's flits.
        pub fn idle(&self) -> bool {
            self.due.0.is_empty() && self.credits.iter().all(|&c| c == self.depth)
        }

        /// One cycle: the (color, flit) sent into the DUT on the coming edge, if any.
        ///
        /// # Panics
        /// If the DUT returns more credits than it was sent flits.
        pub fn step(&mut self, pins: &mut Pins, cycle: u64) -> Option<(usize, Flit)> {
            let bits = pins.get(self.lane.credit);
            for c in 0..self.credits.len() {
                if bits >> c & 1 == 1 {
                    let d = self.rng.random_range(0..=self.max_delay);
                    self.due.push(cycle + d, c);
                }
                while self.due.take(cycle, c) {
                    self.credits[c] += 1;
                    assert!(
                        self.credits[c] <= self.depth,
                        "{}: color {c} got more credits back than it sent flits (cycle {cycle})",
                        self.name
                    );
                }
            }
            let ready: Vec<usize> = (0..self.queues.len())
                .filter(|&c| self.credits[c] > 0 && !self.queues[c].is_empty())
                .collect();
            if !ready.is_empty() && self.gate.draw() {
                let c = ready[self.rng.random_range(0..ready.len())];
                let f = self.queues[c].pop_front().expect("non-empty");
                self.credits[c] -= 1;
                self.sent[c] += 1;
                pins.set(self.lane.valid, 1);
                pins.set(self.lane.color, c as u64);
                pins.set(self.lane.data, f.data);
                pins.set(self.lane.last, u64::from(f.last));
                pins.set(self.lane.user, f.user);
                return Some((c, f));
            }
            pins.set(self.lane.valid, 0);
            pins.set(self.lane.data, self.rng.random());
            pins.set(self.lane.user, self.rng.random());
            None
        }
    }

    /// A downstream router taking a credit link out of the DUT.
    #[derive(Debug)]
    pub struct LinkRx {
        name: String,
        lane: LinkLane,
        depth: usize,
        bufs: Vec<VecDeque<Flit>>,
        gates: Vec<Gate>,
        due: Due,
        max_delay: u64,
        rng: StdRng,
        received: Vec<u64>,
        busy: u64,
        hold_until: Vec<u64>,
    }

    impl LinkRx {
        /// A receiver on `lane` with a BUF_DEPTH buffer per color, each drained with
        /// `pattern`; a credit goes back 1..=1+`max_delay` cycles after its flit is drained.
        pub fn new(
            name: impl Into<String>,
            lane: LinkLane,
            p: &RouterParams,
            pattern: Pattern,
            max_delay: u64,
            mut rng: StdRng,
        ) -> Self {
            let gates = (0..p.colors).map(|_| Gate::new(pattern, StdRng::from_rng(&mut rng))).collect();
            LinkRx {
                name: name.into(),
                lane,
                depth: p.buf_depth,
                bufs: vec![VecDeque::new(); p.colors],
                gates,
                due: Due::default(),
                max_delay,
                rng,
                received: vec![0; p.colors],
                busy: 0,
                hold_until: vec![0; p.colors],
            }
        }

        /// Drains nothing of `color` before cycle `until` (credit starvation of one color).
        pub fn hold(&mut self, color: usize, until: u64) {
            self.hold_until[color] = until;
        }

        /// Flits received per color.
        pub fn received(&self) -> &[u64] {
            &self.received
        }

        /// Cycles the link carried a flit.
        pub fn busy(&self) -> u64 {
            self.busy
        }

        /// Every buffered flit is drained and its credit returned.
        pub fn idle(&self) -> bool {
            self.due.0.is_empty() && self.bufs.iter().all(VecDeque::is_empty)
        }

        /// One cycle: the (color, flit) on the link this cycle, if any.
        ///
        /// # Panics
        /// If a flit arrives for a buffer that is full (sent without a credit) or with a color
        /// that does not exist.
        pub fn step(&mut self, pins: &mut Pins, cycle: u64) -> Option<(usize, Flit)> {
            let mut bits = 0u64;
            for c in 0..self.bufs.len() {
                if self.due.take(cycle, c) {
                    bits |= 1 << c;
                }
            }
            pins.set(self.lane.credit, bits);
            // Drain flits that arrived in earlier cycles (a real buffer pops at the earliest
            // one cycle after the write), and schedule their credits.
            for c in 0..self.bufs.len() {
                if !self.bufs[c].is_empty() && cycle >= self.hold_until[c] && self.gates[c].draw() {
                    self.bufs[c].pop_front();
                    let d = self.rng.random_range(0..=self.max_delay);
                    self.due.push(cycle + 1 + d, c);
                }
            }
            if pins.get(self.lane.valid) == 0 {
                return None;
            }
            let c = pins.get(self.lane.color) as usize;
            assert!(c < self.bufs.len(), "{}: flit with color {c} at cycle {cycle}", self.name);
            let f = Flit {
                data: pins.get(self.lane.data),
                last: pins.get(self.lane.last) != 0,
                user: pins.get(self.lane.user),
            };
            self.bufs[c].push_back(f);
            assert!(
                self.bufs[c].len() <= self.depth,
                "{}: color {c} flit at cycle {cycle} arrived at a full buffer of {} (sent without a credit)",
                self.name,
                self.depth
            );
            self.received[c] += 1;
            self.busy += 1;
            Some((c, f))
        }
    }

    /// Writes (source, sequence number) into the low `user` bits of a flit, so that a sink
    /// can tell where each flit comes from.
    #[derive(Debug, Clone, Copy)]
    pub struct Tagger {
        src_bits: u32,
        data_width: u32,
        user_width: u32,
    }

    impl Tagger {
        /// Tags for `sources` sources in flits of `p`'s widths.
        ///
        /// # Panics
        /// If the header cannot hold the source and at least 4 bits of sequence number.
        pub fn new(sources: usize, p: &RouterParams) -> Self {
            let src_bits = usize::BITS - sources.saturating_sub(1).leading_zeros();
            assert!(src_bits + 4 <= p.user_width.min(64), "USER_WIDTH {} too narrow for tags", p.user_width);
            Tagger { src_bits, data_width: p.data_width.min(64), user_width: p.user_width.min(64) }
        }

        /// Flit `seq` of source `src`, with random payload and random upper header bits.
        pub fn flit(&self, src: usize, seq: u64, last: bool, rng: &mut StdRng) -> Flit {
            let tag = src as u64 | (seq << self.src_bits);
            let tag_bits = (self.src_bits + 24).min(self.user_width);
            let high = rng.random::<u64>() & !mask(tag_bits);
            Flit {
                data: rng.random::<u64>() & mask(self.data_width),
                last,
                user: ((tag & mask(tag_bits)) | high) & mask(self.user_width),
            }
        }

        /// The source of a tagged flit.
        pub fn source(&self, f: &Flit) -> usize {
            (f.user & mask(self.src_bits)) as usize
        }
    }

    /// Checks one sink: every source's flits in order with none lost or added, packets whole
    /// (no flit of another source inside one), and the exact order where it is fixed.
    #[derive(Debug)]
    pub struct SinkCheck {
        name: String,
        tagger: Tagger,
        per_source: BTreeMap<usize, VecDeque<Flit>>,
        exact: Option<VecDeque<Flit>>,
        packet_of: Option<usize>,
        received: u64,
    }

    impl SinkCheck {
        /// A check named `name` in messages.
        pub fn new(name: impl Into<String>, tagger: Tagger) -> Self {
            SinkCheck {
                name: name.into(),
                tagger,
                per_source: BTreeMap::new(),
                exact: None,
                packet_of: None,
                received: 0,
            }
        }

        /// Expects `flits`, in this order per source, and in exactly this order overall if
        /// `exact` (from a [`super::Stream`] of the flow model).
        pub fn expect(&mut self, flits: impl IntoIterator<Item = Flit>, exact: bool) {
            let mut all = VecDeque::new();
            for f in flits {
                self.per_source.entry(self.tagger.source(&f)).or_default().push_back(f);
                all.push_back(f);
            }
            if exact {
                self.exact.get_or_insert_with(VecDeque::new).extend(all);
            }
        }

        /// Flits expected and not yet received.
        pub fn outstanding(&self) -> usize {
            self.per_source.values().map(VecDeque::len).sum()
        }

        /// Flits received.
        pub fn received(&self) -> u64 {
            self.received
        }

        /// Checks a received flit.
        ///
        /// # Panics
        /// On a flit nobody sent here (duplicate or spurious), one out of its source's order
        /// (reordered or a predecessor lost), one inside another source's packet, or one out of
        /// the exact order.
        pub fn receive(&mut self, f: Flit, cycle: u64) {
            self.received += 1;
            let src = self.tagger.source(&f);
            let name = &self.name;
            let n = self.received;
            let q = self.per_source.get_mut(&src).unwrap_or_else(|| {
                panic!("{name}: flit #{n} {f:x?} at cycle {cycle} comes from source {src}, which sends nothing here")
            });
            match q.pop_front() {
                None => panic!("{name}: flit #{n} {f:x?} at cycle {cycle}: source {src} has nothing more to send here (duplicate)"),
                Some(exp) => assert!(
                    exp == f,
                    "{name}: flit #{n} at cycle {cycle} from source {src} is {f:x?}, expected {exp:x?} (lost, reordered or corrupted)"
                ),
            }
            if let Some(p) = self.packet_of {
                assert!(
                    p == src,
                    "{name}: flit #{n} at cycle {cycle} from source {src} inside a packet of source {p}"
                );
            }
            self.packet_of = if f.last { None } else { Some(src) };
            if let Some(exact) = self.exact.as_mut() {
                let exp = exact.pop_front();
                assert!(
                    exp == Some(f),
                    "{name}: flit #{n} at cycle {cycle} is {f:x?} from source {src}, but the ordered merge fixes {exp:x?} here"
                );
            }
        }

        /// Checks that everything expected arrived.
        ///
        /// # Panics
        /// If some flits never did.
        pub fn finish(&self) {
            let left: Vec<String> = self
                .per_source
                .iter()
                .filter(|(_, q)| !q.is_empty())
                .map(|(s, q)| format!("source {s}: {} (next {:x?})", q.len(), q[0]))
                .collect();
            assert!(
                left.is_empty(),
                "{}: flits never arrived after {} received: {}",
                self.name,
                self.received,
                left.join("; ")
            );
        }
    }

    /// Loads route entries through the config port, one per cycle (`cfg_router` is driven
    /// only when the DUT has it, i.e. for the fabric).
    pub fn configure(dut: &mut Dut, writes: &[CfgWrite]) {
        let we = dut.port("cfg_we");
        let router = dut.try_port("cfg_router");
        let (inp, color, out, quota) =
            (dut.port("cfg_in_port"), dut.port("cfg_color"), dut.port("cfg_out_mask"), dut.port("cfg_quota"));
        for w in writes {
            if let Some(r) = router {
                dut.set(r, w.router as u64);
            }
            dut.set(inp, w.in_port as u64);
            dut.set(color, w.color as u64);
            dut.set(out, u64::from(w.mask));
            dut.set(quota, u64::from(w.quota));
            dut.set(we, 1);
            dut.tick();
        }
        dut.set(we, 0);
        dut.eval();
    }

    /// Counter `index` of a flat counter bus (`cnt_fwd`, `cnt_busy`, ...) of `width`-bit
    /// counters.
    pub fn counter(dut: &Dut, name: &str, index: usize, width: u32) -> u64 {
        let words = dut.get_words(dut.port(name));
        let lsb = index as u32 * width;
        let mut v = 0u64;
        for b in 0..width.min(64) {
            let i = lsb + b;
            v |= u64::from(words[(i / 32) as usize] >> (i % 32) & 1) << b;
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mesh(p: usize, q: usize) -> Mesh {
        Mesh::new(Geometry::new(p, q), RouterParams::new())
    }

    #[test]
    fn ports_match_the_verilog_header() {
        let text =
            std::fs::read_to_string(crate::paths::in_workspace("hdl/rtl/include/ws_mesh_flit.vh")).unwrap();
        let want = [
            ("WS_MESH_PORT_N", PORT_N),
            ("WS_MESH_PORT_E", PORT_E),
            ("WS_MESH_PORT_S", PORT_S),
            ("WS_MESH_PORT_W", PORT_W),
            ("WS_MESH_PORT_L", PORT_L),
            ("WS_MESH_PORTS", PORTS),
            ("WS_MESH_LINKS", LINKS),
        ];
        for (name, value) in want {
            let line = text
                .lines()
                .find(|l| l.starts_with("localparam") && l.contains(&format!(" {name} ")))
                .unwrap_or_else(|| panic!("{name} missing from ws_mesh_flit.vh"));
            let rhs = line.split('=').nth(1).unwrap().split(';').next().unwrap().trim();
            let v: usize = rhs.rsplit('d').next().unwrap().parse().unwrap();
            assert_eq!(v, value, "{name}");
        }
    }

    #[test]
    fn geometry_edges_round_trip() {
        for (p, q) in [(1, 1), (2, 3), (4, 4), (3, 1)] {
            let g = Geometry::new(p, q);
            let mut seen = BTreeSet::new();
            for r in 0..g.routers() {
                for port in 0..LINKS {
                    match (g.neighbour(r, port), g.edge(r, port)) {
                        (Some(n), None) => assert_eq!(g.neighbour(n, opposite(port)), Some(r)),
                        (None, Some(e)) => {
                            assert_eq!(g.edge_port(e), (r, port));
                            assert!(seen.insert(e));
                        }
                        other => panic!("{p}x{q} r{r} port {port}: {other:?}"),
                    }
                }
            }
            assert_eq!(seen.len(), g.edges());
        }
        // A lone router's edges are its ports.
        let g = Geometry::new(1, 1);
        for port in 0..LINKS {
            assert_eq!(g.edge(0, port), Some(port));
        }
    }

    #[test]
    fn standard_patterns_pass_the_checker() {
        for (p, q) in [(1, 1), (2, 2), (3, 3), (4, 4), (8, 8), (2, 5)] {
            let g = Geometry::new(p, q);
            let mut m = mesh(p, q);
            let ingress = g.edge(0, PORT_W).unwrap();
            let egress = g.edge(g.router(p - 1, q - 1), PORT_E).unwrap();
            m.broadcast(0, Endpoint::Edge(ingress)).gather(1, egress, true);
            let plan = m.check().unwrap_or_else(|e| panic!("{p}x{q}: {e}"));
            let bcast = plan.flows.iter().find(|f| f.color == 0).unwrap();
            assert_eq!(bcast.sinks.len(), g.routers(), "broadcast reaches every PE");
            let gathers: Vec<&Flow> = plan.flows.iter().filter(|f| f.color == 1).collect();
            assert_eq!(gathers.len(), g.routers());
            assert!(gathers.iter().all(|f| f.sinks == vec![Endpoint::Edge(egress)]));
            // Round robin gathers pass too.
            let mut m = mesh(p, q);
            m.broadcast(1, Endpoint::Local(g.router(p - 1, 0))).gather(0, egress, false);
            m.check().unwrap_or_else(|e| panic!("{p}x{q}: {e}"));
        }
    }

    #[test]
    fn a_loop_is_refused() {
        // Color 1 around the 2x2 ring: r0 E -> r1 S -> r3 W -> r2 N -> r0.
        let mut m = mesh(2, 2);
        m.set(0, PORT_L, 1, Entry::to(bit(PORT_E)))
            .set(1, PORT_W, 1, Entry::to(bit(PORT_S)))
            .set(3, PORT_N, 1, Entry::to(bit(PORT_W) | bit(PORT_L)))
            .set(2, PORT_E, 1, Entry::to(bit(PORT_N)))
            .set(0, PORT_S, 1, Entry::to(bit(PORT_E)));
        match m.check() {
            Err(RouteError::Loop { color: 1, path }) => {
                assert_eq!(path.first(), path.last());
                assert_eq!(path.len(), 5, "{}", show_path(&path));
            }
            other => panic!("{other:?}"),
        }
        let msg = m.check().unwrap_err().to_string();
        assert!(msg.contains("loop") && msg.contains("r0.S"), "{msg}");
        // A U-turn between two routers is a loop as well.
        let mut m = mesh(1, 2);
        m.set(0, PORT_E, 0, Entry::to(bit(PORT_E))).set(1, PORT_W, 0, Entry::to(bit(PORT_W)));
        assert!(matches!(m.check(), Err(RouteError::Loop { color: 0, .. })));
        // The model refuses it too, instead of running forever.
        assert!(m.deliver::<u32>(0, &BTreeMap::new()).is_err());
    }

    #[test]
    fn bad_configurations_are_named() {
        let g = Geometry::new(2, 2);
        // Off the array through an edge that is not an egress.
        let mut m = mesh(2, 2);
        m.set(0, PORT_L, 0, Entry::to(bit(PORT_N)));
        assert!(matches!(m.check(), Err(RouteError::OffMesh { router: 0, port: PORT_N, edge: 0, .. })));
        m.add_egress(0, 0);
        m.check().unwrap();
        // A dead end.
        let mut m = mesh(2, 2);
        m.set(0, PORT_L, 0, Entry::to(bit(PORT_E)));
        assert!(matches!(
            m.check(),
            Err(RouteError::DeadEnd { at: Channel { router: 1, port: PORT_W }, .. })
        ));
        // Reconvergence: r0 copies east and south, both branches meet at r3.
        let mut m = mesh(2, 2);
        m.set(0, PORT_L, 0, Entry::to(bit(PORT_E) | bit(PORT_S)))
            .set(1, PORT_W, 0, Entry::to(bit(PORT_S)))
            .set(2, PORT_N, 0, Entry::to(bit(PORT_E)))
            .set(3, PORT_N, 0, Entry::to(bit(PORT_L)))
            .set(3, PORT_W, 0, Entry::to(bit(PORT_L)));
        assert!(matches!(m.check(), Err(RouteError::Reconvergent { .. })), "{:?}", m.check());
        // A multicast into a merge.
        let mut m = Mesh::new(Geometry::new(1, 1), RouterParams::new());
        m.set(0, PORT_N, 0, Entry::to(bit(PORT_S) | bit(PORT_L))).set(0, PORT_E, 0, Entry::to(bit(PORT_S)));
        assert!(matches!(m.check_routers(), Err(RouteError::MulticastFunnel { out: PORT_S, .. })));
        // Mixed ordered / round robin.
        let mut m = Mesh::new(Geometry::new(1, 1), RouterParams::new());
        m.set(0, PORT_N, 0, Entry { mask: bit(PORT_S), quota: 2 }).set(0, PORT_E, 0, Entry::to(bit(PORT_S)));
        assert!(matches!(m.check_routers(), Err(RouteError::MixedOrder { .. })));
        // A quota that does not match the sources behind the input.
        let mut m = mesh(2, 2);
        let egress = g.edge(3, PORT_E).unwrap();
        m.gather(1, egress, true);
        m.check().unwrap();
        let e = m.entry(3, PORT_N, 1);
        assert_eq!(e.quota, 2, "r1 sends its own and r0's packets");
        m.set(3, PORT_N, 1, Entry { quota: 1, ..e });
        assert!(matches!(m.check(), Err(RouteError::QuotaMismatch { sources: 2, quota: 1, .. })));
        // A quota beyond QUOTA_WIDTH.
        let mut m = Mesh::new(Geometry::new(1, 1), RouterParams { quota_width: 2, ..RouterParams::new() });
        m.set(0, PORT_N, 0, Entry { mask: bit(PORT_S), quota: 4 });
        assert!(matches!(m.check_routers(), Err(RouteError::QuotaTooLarge { max: 3, .. })));
    }

    #[test]
    fn the_model_orders_an_ordered_gather() {
        // 2x2 gather to the east edge of r3: r0 -> r1 -> r3 and r2 -> r3.
        let g = Geometry::new(2, 2);
        let mut m = mesh(2, 2);
        let egress = g.edge(3, PORT_E).unwrap();
        m.gather(1, egress, true);
        let mut inject = BTreeMap::new();
        for r in 0..4 {
            // Two rounds of one packet (two flits) per PE.
            inject.insert(
                Endpoint::Local(r),
                vec![((r, 0), false), ((r, 1), true), ((r, 2), false), ((r, 3), true)],
            );
        }
        let d = m.deliver(1, &inject).unwrap();
        let s = &d.sinks[&Endpoint::Edge(egress)];
        assert!(s.exact);
        assert_eq!(s.stalled, 0);
        let order: Vec<usize> = s.items.iter().step_by(2).map(|((r, _), _)| *r).collect();
        // r3 takes N (r1: r0 then r1) before W (r2) before L (r3), every round.
        assert_eq!(order, vec![0, 1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(d.forwarded[&Channel { router: 3, port: PORT_E }], 16);
        assert_eq!(d.forwarded[&Channel { router: 0, port: PORT_E }], 4);
        // On 3x3 the order is the router index too: row by row, west to east.
        let g3 = Geometry::new(3, 3);
        let mut m3 = mesh(3, 3);
        let e3 = g3.edge(8, PORT_E).unwrap();
        m3.gather(1, e3, true);
        let inj3: BTreeMap<Endpoint, Items<usize>> =
            (0..9).map(|r| (Endpoint::Local(r), vec![(r, true), (r, true)])).collect();
        let s3 = &m3.deliver(1, &inj3).unwrap().sinks[&Endpoint::Edge(e3)];
        let order3: Vec<usize> = s3.items.iter().map(|(r, _)| *r).collect();
        assert_eq!(order3, (0..9).chain(0..9).collect::<Vec<_>>());
        // Round robin keeps only each source's order.
        let mut m = mesh(2, 2);
        m.gather(1, egress, false);
        let d = m.deliver(1, &inject).unwrap();
        assert!(!d.sinks[&Endpoint::Edge(egress)].exact);
        // One PE sends a packet less: the ordered merge would wait for it.
        let mut m = mesh(2, 2);
        m.gather(1, egress, true);
        inject.get_mut(&Endpoint::Local(2)).unwrap().truncate(2);
        let d = m.deliver(1, &inject).unwrap();
        assert_eq!(d.sinks[&Endpoint::Edge(egress)].stalled, 2, "r3's own last packet waits behind r2's");
    }

    #[test]
    fn writes_cover_every_entry() {
        let mut m = mesh(2, 3);
        m.broadcast(0, Endpoint::Local(4));
        let w = m.writes();
        assert_eq!(w.len(), 6 * PORTS * 2);
        assert_eq!(w.iter().filter(|w| w.mask != 0).count(), 6);
    }
}
