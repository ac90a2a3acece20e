//! Testbench support for SwarmX: edge-case operands, and generated testbench tops.
//!
//! The node's downstream ports are flattened buses (`s_dn_valid[N-1:0]`,
//! `s_dn_data[N*32-1:0]`, ...), which the harness's stream agents cannot drive one port at a
//! time. [`tree_top_verilog`] therefore writes a small Verilog top for a node or a uniform
//! cascade of nodes in which every leaf port is its own named group (`s_dn3_valid`,
//! `m_dn3_data`, ...), and every node's CSR-facing ports appear as `n<id>_<port>` (nodes
//! numbered breadth first as in [`ws_common::golden::swarm::Tree`]). [`tree_spec`] writes the
//! top under `target/swarm/` and returns its block spec; the top's content is part of the
//! model's cache key. [`TreeTb`] puts a stream agent on every port and steps the whole tree.

use std::fmt::Write as _;
use std::path::PathBuf;

use rand::{Rng, RngExt};

use super::{with_fpnew, TreeShape, NODE_FILES};
use crate::dut::{Beat, BlockSpec, Dut, Pattern, Port, StreamSink, StreamSource};
use crate::paths;
use crate::vbuild::BuildError;
use ws_common::flit::{pack_bf16, Flit, Header, Kind};
use ws_common::golden::fp;
use ws_common::golden::swarm::{Dtype, NodeConfig, Tree};

/// Special binary32 operands the random data mixes in: zeros, infinities, NaNs (quiet,
/// signalling, with payloads and signs), the subnormal range ends, the normal range ends,
/// and values at rounding ties.
pub const EDGE_OPERANDS: &[u32] = &[
    fp::POS_ZERO,
    fp::NEG_ZERO,
    fp::POS_INF,
    fp::NEG_INF,
    fp::CANONICAL_NAN,
    0xffc0_0000, // negative quiet NaN
    0x7fc0_1234, // quiet NaN with payload
    0x7f80_0001, // signalling NaN
    0xff8f_0f0f, // negative signalling NaN
    0x0000_0001, // smallest subnormal
    0x8000_0001,
    0x007f_ffff, // largest subnormal
    0x807f_ffff,
    0x0080_0000, // smallest normal
    0x8080_0000,
    0x7f7f_ffff, // largest finite
    0xff7f_ffff,
    0x3f80_0000, // 1.0
    0xbf80_0000,
    0x4b80_0000, // 2^24: +1 is a tie
    0x3380_0000, // 2^-24
    0x0040_0000, // half the normal range boundary
];

/// One random operand: 1 in 4 from [`EDGE_OPERANDS`], 1 in 8 with an extreme exponent (huge
/// or tiny, including subnormals), the rest spread over moderate magnitudes so that sums
/// round in interesting ways.
pub fn operand(rng: &mut impl Rng) -> u32 {
    match rng.random_range(0..8u32) {
        0 | 1 => EDGE_OPERANDS[rng.random_range(0..EDGE_OPERANDS.len())],
        2 => {
            let sign = rng.random::<u32>() & 0x8000_0000;
            let exp: u32 = match rng.random_range(0..4u32) {
                0 => 0,                          // subnormal
                1 => rng.random_range(1..4),     // tiny normal
                2 => rng.random_range(250..255), // huge
                _ => 254,
            };
            sign | (exp << 23) | (rng.random::<u32>() & 0x007f_ffff)
        }
        _ => {
            let sign = rng.random::<u32>() & 0x8000_0000;
            let exp: u32 = rng.random_range(100..160);
            sign | (exp << 23) | (rng.random::<u32>() & 0x007f_ffff)
        }
    }
}

/// The values of one aligned set of `n` flits: independent [`operand`]s, with some sets
/// built for cancellation (`x` and `-x` on neighbouring ports, which sums to +0 under RNE) or
/// for many equal exponents (carries and ties).
pub fn operand_set(rng: &mut impl Rng, n: usize) -> Vec<u32> {
    let mut v: Vec<u32> = (0..n).map(|_| operand(rng)).collect();
    match rng.random_range(0..8u32) {
        0 => {
            for i in (1..n).step_by(2) {
                v[i] = v[i - 1] ^ 0x8000_0000;
            }
        }
        1 => {
            let exp = rng.random_range(120..135u32) << 23;
            for x in v.iter_mut() {
                *x = (*x & 0x807f_ffff) | exp;
            }
        }
        2 => {
            for x in v.iter_mut() {
                *x = if rng.random_bool(0.5) { fp::NEG_ZERO } else { fp::POS_ZERO };
            }
        }
        _ => {}
    }
    v
}

/// A bf16 operand: the upper half of an [`operand`], with bf16-specific NaNs and the
/// smallest bf16 subnormal mixed in.
pub fn bf16_operand(rng: &mut impl Rng) -> u16 {
    match rng.random_range(0..16u32) {
        0 => 0x7f81, // signalling NaN
        1 => 0x0001, // smallest bf16 subnormal
        2 => 0x8001,
        _ => (operand(rng) >> 16) as u16,
    }
}

/// Where generated tops are written: `<workspace>/target/swarm/`.
pub fn generated_dir() -> PathBuf {
    paths::workspace_root().join("target").join("swarm")
}

/// Width of a CSR-facing port of `ws_swarm_node`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsrWidth {
    /// One bit per downstream port.
    Ports,
    /// One 32-bit counter per downstream port.
    Counters,
    /// A fixed width.
    Bits(u32),
}

impl CsrWidth {
    /// Bits for a node with `ports` downstream ports.
    pub const fn bits(self, ports: u32) -> u32 {
        match self {
            CsrWidth::Ports => ports,
            CsrWidth::Counters => ports * 32,
            CsrWidth::Bits(b) => b,
        }
    }
}

/// A CSR-facing port of `ws_swarm_node`: its name, direction and width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CsrPort {
    /// Port name on the node.
    pub name: &'static str,
    /// Driven by the testbench (`true`) or by the node.
    pub input: bool,
    /// Width.
    pub width: CsrWidth,
}

/// Every CSR-facing port of `ws_swarm_node`, in declaration order (docs/swarmx.md
/// "Configuration and status ports"). The block tests check this list against the built
/// model, so the two cannot drift.
pub const CSR_PORTS: &[CsrPort] = &[
    CsrPort { name: "cfg_port_mask", input: true, width: CsrWidth::Ports },
    CsrPort { name: "cfg_dtype", input: true, width: CsrWidth::Bits(2) },
    CsrPort { name: "cfg_scale_en", input: true, width: CsrWidth::Bits(1) },
    CsrPort { name: "cfg_scale", input: true, width: CsrWidth::Bits(32) },
    CsrPort { name: "cfg_timeout", input: true, width: CsrWidth::Bits(32) },
    CsrPort { name: "cnt_clear", input: true, width: CsrWidth::Bits(1) },
    CsrPort { name: "stat_up_mask", input: false, width: CsrWidth::Ports },
    CsrPort { name: "stat_dn_mask", input: false, width: CsrWidth::Ports },
    CsrPort { name: "stat_dropping", input: false, width: CsrWidth::Ports },
    CsrPort { name: "cnt_up_flits", input: false, width: CsrWidth::Counters },
    CsrPort { name: "cnt_dn_flits", input: false, width: CsrWidth::Counters },
    CsrPort { name: "cnt_up_wait", input: false, width: CsrWidth::Counters },
    CsrPort { name: "cnt_dn_stall", input: false, width: CsrWidth::Counters },
    CsrPort { name: "cnt_bcast", input: false, width: CsrWidth::Bits(32) },
    CsrPort { name: "cnt_reduced", input: false, width: CsrWidth::Bits(32) },
    CsrPort { name: "cnt_dropped", input: false, width: CsrWidth::Bits(32) },
    CsrPort { name: "cnt_errors", input: false, width: CsrWidth::Bits(32) },
    CsrPort { name: "stat_lat_last", input: false, width: CsrWidth::Bits(32) },
    CsrPort { name: "stat_lat_max", input: false, width: CsrWidth::Bits(32) },
    CsrPort { name: "err_pulse", input: false, width: CsrWidth::Bits(1) },
    CsrPort { name: "err_code", input: false, width: CsrWidth::Bits(4) },
    CsrPort { name: "err_port", input: false, width: CsrWidth::Bits(4) },
    CsrPort { name: "err_timeout_ports", input: false, width: CsrWidth::Ports },
    CsrPort { name: "err_mismatch_ports", input: false, width: CsrWidth::Ports },
    CsrPort { name: "err_forward_ports", input: false, width: CsrWidth::Ports },
    CsrPort { name: "err_last_payload", input: false, width: CsrWidth::Bits(32) },
    CsrPort { name: "err_last_user", input: false, width: CsrWidth::Bits(64) },
];

/// Writes the Verilog of the testbench top of `shape` and returns it.
pub fn tree_top_verilog(shape: &TreeShape) -> String {
    let top = shape.top_name();
    let fan = shape.fanout();
    let leaves = shape.leaves();
    let mut v = String::new();
    let _ = writeln!(v, "`default_nettype none\n");
    let _ = writeln!(
        v,
        "// {top}: generated by ws_hdl::swarm::tb::tree_top_verilog for the block tests; do not edit.\n// A tree of ws_swarm_node with fan-outs {fan:?} (root first); leaf ports and node CSR ports by name."
    );
    let _ = writeln!(v, "module {top} (\n    input  wire clk,\n    input  wire rst,");
    // Root upstream port.
    let _ = writeln!(
        v,
        "    input  wire s_up_valid,\n    output wire s_up_ready,\n    input  wire [31:0] s_up_data,\n    input  wire s_up_last,\n    input  wire [63:0] s_up_user,"
    );
    let _ = writeln!(
        v,
        "    output wire m_up_valid,\n    input  wire m_up_ready,\n    output wire [31:0] m_up_data,\n    output wire m_up_last,\n    output wire [63:0] m_up_user,"
    );
    for i in 0..leaves {
        let _ = writeln!(
            v,
            "    output wire m_dn{i}_valid,\n    input  wire m_dn{i}_ready,\n    output wire [31:0] m_dn{i}_data,\n    output wire m_dn{i}_last,\n    output wire [63:0] m_dn{i}_user,"
        );
        let _ = writeln!(
            v,
            "    input  wire s_dn{i}_valid,\n    output wire s_dn{i}_ready,\n    input  wire [31:0] s_dn{i}_data,\n    input  wire s_dn{i}_last,\n    input  wire [63:0] s_dn{i}_user,"
        );
    }
    // Node CSR ports.
    let mut csr_lines = Vec::new();
    let mut id = 0usize;
    let mut width = 1usize;
    for p in &shape.levels {
        for _ in 0..width {
            for c in CSR_PORTS {
                let w = c.width.bits(p.ports);
                let dir = if c.input { "input  wire" } else { "output wire" };
                csr_lines.push(format!("    {dir} [{}:0] n{id}_{}", w - 1, c.name));
            }
            id += 1;
        }
        width *= p.ports as usize;
    }
    let _ = writeln!(v, "{}\n);\n", csr_lines.join(",\n"));

    // Each node's ports as local buses: up (to its parent) and dn (to its children).
    let mut id = 0usize;
    let mut width = 1usize;
    let mut level_first = Vec::new();
    for p in &shape.levels {
        level_first.push(id);
        for _ in 0..width {
            let n = p.ports;
            let _ = writeln!(
                v,
                "    wire n{id}_s_up_valid, n{id}_s_up_ready, n{id}_s_up_last;\n    wire [31:0] n{id}_s_up_data;\n    wire [63:0] n{id}_s_up_user;"
            );
            let _ = writeln!(
                v,
                "    wire n{id}_m_up_valid, n{id}_m_up_ready, n{id}_m_up_last;\n    wire [31:0] n{id}_m_up_data;\n    wire [63:0] n{id}_m_up_user;"
            );
            let _ = writeln!(
                v,
                "    wire [{m}:0] n{id}_m_dn_valid, n{id}_m_dn_ready, n{id}_m_dn_last;\n    wire [{d}:0] n{id}_m_dn_data;\n    wire [{u}:0] n{id}_m_dn_user;",
                m = n - 1,
                d = n * 32 - 1,
                u = n * 64 - 1
            );
            let _ = writeln!(
                v,
                "    wire [{m}:0] n{id}_s_dn_valid, n{id}_s_dn_ready, n{id}_s_dn_last;\n    wire [{d}:0] n{id}_s_dn_data;\n    wire [{u}:0] n{id}_s_dn_user;",
                m = n - 1,
                d = n * 32 - 1,
                u = n * 64 - 1
            );
            let params: Vec<String> =
                p.verilog_params().iter().map(|(k, val)| format!("        .{k}({val})")).collect();
            let mut conns = vec!["        .clk(clk)".to_string(), "        .rst(rst)".to_string()];
            for s in ["s_up", "m_up", "m_dn", "s_dn"] {
                for f in ["valid", "ready", "data", "last", "user"] {
                    conns.push(format!("        .{s}_{f}(n{id}_{s}_{f})"));
                }
            }
            for c in CSR_PORTS {
                conns.push(format!("        .{}(n{id}_{})", c.name, c.name));
            }
            let _ = writeln!(
                v,
                "    ws_swarm_node #(\n{}\n    ) node{id}_inst (\n{}\n    );\n",
                params.join(",\n"),
                conns.join(",\n")
            );
            id += 1;
        }
        width *= p.ports as usize;
    }
    // Root to the top's upstream port.
    for f in ["valid", "data", "last", "user"] {
        let _ = writeln!(v, "    assign n0_s_up_{f} = s_up_{f};");
        let _ = writeln!(v, "    assign m_up_{f} = n0_m_up_{f};");
    }
    let _ = writeln!(v, "    assign s_up_ready = n0_s_up_ready;\n    assign n0_m_up_ready = m_up_ready;");
    // Inner links: child c of node k at level l is node level_first[l+1] + j*f + c.
    let mut width = 1usize;
    for (l, p) in shape.levels.iter().enumerate() {
        let f = p.ports as usize;
        for j in 0..width {
            let k = level_first[l] + j;
            for c in 0..f {
                let (lo1, hi1) = (c, c);
                let (dlo, dhi) = (c * 32, c * 32 + 31);
                let (ulo, uhi) = (c * 64, c * 64 + 63);
                if l + 1 < shape.levels.len() {
                    let child = level_first[l + 1] + j * f + c;
                    let _ = writeln!(
                        v,
                        "    assign n{child}_s_up_valid = n{k}_m_dn_valid[{lo1}];\n    assign n{k}_m_dn_ready[{hi1}] = n{child}_s_up_ready;\n    assign n{child}_s_up_data = n{k}_m_dn_data[{dhi}:{dlo}];\n    assign n{child}_s_up_last = n{k}_m_dn_last[{lo1}];\n    assign n{child}_s_up_user = n{k}_m_dn_user[{uhi}:{ulo}];"
                    );
                    let _ = writeln!(
                        v,
                        "    assign n{k}_s_dn_valid[{lo1}] = n{child}_m_up_valid;\n    assign n{child}_m_up_ready = n{k}_s_dn_ready[{hi1}];\n    assign n{k}_s_dn_data[{dhi}:{dlo}] = n{child}_m_up_data;\n    assign n{k}_s_dn_last[{lo1}] = n{child}_m_up_last;\n    assign n{k}_s_dn_user[{uhi}:{ulo}] = n{child}_m_up_user;"
                    );
                } else {
                    let leaf = j * f + c;
                    let _ = writeln!(
                        v,
                        "    assign m_dn{leaf}_valid = n{k}_m_dn_valid[{lo1}];\n    assign n{k}_m_dn_ready[{hi1}] = m_dn{leaf}_ready;\n    assign m_dn{leaf}_data = n{k}_m_dn_data[{dhi}:{dlo}];\n    assign m_dn{leaf}_last = n{k}_m_dn_last[{lo1}];\n    assign m_dn{leaf}_user = n{k}_m_dn_user[{uhi}:{ulo}];"
                    );
                    let _ = writeln!(
                        v,
                        "    assign n{k}_s_dn_valid[{lo1}] = s_dn{leaf}_valid;\n    assign s_dn{leaf}_ready = n{k}_s_dn_ready[{hi1}];\n    assign n{k}_s_dn_data[{dhi}:{dlo}] = s_dn{leaf}_data;\n    assign n{k}_s_dn_last[{lo1}] = s_dn{leaf}_last;\n    assign n{k}_s_dn_user[{uhi}:{ulo}] = s_dn{leaf}_user;"
                    );
                }
            }
        }
        width *= f;
    }
    let _ = writeln!(v, "\nendmodule\n\n`default_nettype wire");
    v
}

/// Writes the top of `shape` to [`generated_dir`] (only when its content changed, so the
/// file's timestamp stays put) and returns the block spec that builds it with the node RTL
/// and FPnew.
pub fn tree_spec(shape: &TreeShape) -> Result<BlockSpec, BuildError> {
    let dir = generated_dir();
    std::fs::create_dir_all(&dir).map_err(crate::vbuild::io_err("creating", &dir))?;
    let path = dir.join(format!("{}.v", shape.top_name()));
    let text = tree_top_verilog(shape);
    if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
        // Write to a private name and rename, so a concurrent test never reads half a file.
        let tmp = dir.join(format!(".{}.v.{}", shape.top_name(), std::process::id()));
        std::fs::write(&tmp, &text).map_err(crate::vbuild::io_err("writing", &tmp))?;
        std::fs::rename(&tmp, &path).map_err(crate::vbuild::io_err("renaming into place", &path))?;
    }
    let spec = BlockSpec::new(shape.top_name()).files(NODE_FILES.iter().copied()).file(path);
    with_fpnew(spec)
}

/// A built tree top with a stream agent on every port: `s_dn<i>` / `m_dn<i>` for each leaf,
/// `s_up` / `m_up` at the root. One [`TreeTb::step`] is one clock cycle of everything.
#[derive(Debug)]
pub struct TreeTb {
    /// The tree.
    pub shape: TreeShape,
    /// Uplink sources, one per leaf (`s_dn<i>`).
    pub leaf_src: Vec<StreamSource>,
    /// Downlink sinks, one per leaf (`m_dn<i>`).
    pub leaf_sink: Vec<StreamSink>,
    /// Downlink source at the root (`s_up`).
    pub up_src: StreamSource,
    /// Uplink sink at the root (`m_up`).
    pub up_sink: StreamSink,
    /// Cycle (of [`Dut::cycle`]) before which leaf `i`'s source stays idle: skew.
    pub leaf_start: Vec<u64>,
    /// Handshake cycles, when [`TreeTb::record`] is on.
    pub times: Option<Handshakes>,
}

/// The cycle of every handshake of a run (for the bench and the model's calibration).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Handshakes {
    /// `s_dn<i>` (leaf uplink) handshakes, per leaf.
    pub leaf_up: Vec<Vec<u64>>,
    /// `m_dn<i>` (leaf downlink) handshakes, per leaf.
    pub leaf_dn: Vec<Vec<u64>>,
    /// `s_up` (root downlink) handshakes.
    pub root_dn: Vec<u64>,
    /// `m_up` (root uplink) handshakes.
    pub root_up: Vec<u64>,
}

impl TreeTb {
    /// Agents on every port of `dut` (built from [`tree_spec`] of `shape`), with the given
    /// valid pattern on the sources and ready pattern on the sinks, seeded from `seed`.
    pub fn new(dut: &Dut, shape: &TreeShape, seed: u64, sources: Pattern, sinks: Pattern) -> Self {
        let n = shape.leaves();
        let salt = |i: usize, k: u64| seed ^ (k << 40) ^ (i as u64).wrapping_mul(0x9e37_79b9);
        TreeTb {
            shape: shape.clone(),
            leaf_src: (0..n)
                .map(|i| StreamSource::new(dut, &format!("s_dn{i}"), salt(i, 1)).pattern(sources))
                .collect(),
            leaf_sink: (0..n)
                .map(|i| StreamSink::new(dut, &format!("m_dn{i}"), salt(i, 2)).pattern(sinks))
                .collect(),
            up_src: StreamSource::new(dut, "s_up", salt(0, 3)).pattern(sources),
            up_sink: StreamSink::new(dut, "m_up", salt(0, 4)).pattern(sinks),
            leaf_start: vec![0; n],
            times: None,
        }
    }

    /// Records the cycle of every handshake from now on (see [`TreeTb::times`]).
    pub fn record(&mut self) {
        let n = self.shape.leaves();
        self.times = Some(Handshakes {
            leaf_up: vec![Vec::new(); n],
            leaf_dn: vec![Vec::new(); n],
            ..Default::default()
        });
    }

    /// The port `n<node>_<name>` of a node's CSR-facing ports.
    pub fn csr(dut: &Dut, node: usize, name: &str) -> Port {
        dut.port(&format!("n{node}_{name}"))
    }

    /// Drives node `node`'s configuration inputs from `cfg` and `timeout` (cycles, 0 = off).
    pub fn configure(dut: &mut Dut, node: usize, cfg: &NodeConfig, timeout: u32) {
        let set = |dut: &mut Dut, name: &str, v: u64| {
            let p = Self::csr(dut, node, name);
            dut.set(p, v);
        };
        set(dut, "cfg_port_mask", u64::from(cfg.mask));
        set(dut, "cfg_dtype", cfg.dtype as u64);
        set(dut, "cfg_scale_en", cfg.scale.is_some() as u64);
        set(dut, "cfg_scale", u64::from(cfg.scale.unwrap_or(fp::ONE)));
        set(dut, "cfg_timeout", u64::from(timeout));
        set(dut, "cnt_clear", 0);
    }

    /// A node's CSR output `name` (up to 64 bits; `index` selects the port of the per-port
    /// counters and is ignored otherwise).
    pub fn read(dut: &Dut, node: usize, name: &str, index: usize) -> u64 {
        let p = Self::csr(dut, node, name);
        let per_port = CSR_PORTS.iter().any(|c| c.name == name && c.width == CsrWidth::Counters);
        if per_port {
            u64::from(dut.get_words(p)[index])
        } else {
            dut.get(p)
        }
    }

    /// True when every leaf's path to the root is active in `nodes` (breadth-first configs).
    pub fn leaf_active(&self, nodes: &[NodeConfig], leaf: usize) -> bool {
        let fan = self.shape.fanout();
        let mut idx = leaf;
        let mut active = true;
        // Walk from the last level up: the node at each level and the port it uses.
        let mut level_first = Vec::new();
        let mut width = 1;
        let mut id = 0;
        for f in &fan {
            level_first.push(id);
            id += width;
            width *= f;
        }
        for l in (0..fan.len()).rev() {
            let port = idx % fan[l];
            idx /= fan[l];
            let node = level_first[l] + idx;
            active &= nodes[node].mask >> port & 1 == 1;
        }
        active
    }

    /// One clock cycle: every agent drives, the model settles, every agent samples, the clock
    /// ticks. Returns the beat the root's uplink sink took, if any (already checked against
    /// its expected beats unless the sink is unchecked).
    pub fn step(&mut self, dut: &mut Dut) -> Option<Beat> {
        let now = dut.cycle();
        for (i, s) in self.leaf_src.iter_mut().enumerate() {
            if now >= self.leaf_start[i] {
                s.drive(dut);
            }
        }
        self.up_src.drive(dut);
        for s in &mut self.leaf_sink {
            s.drive(dut);
        }
        self.up_sink.drive(dut);
        dut.eval();
        let mut times = self.times.take();
        for (i, s) in self.leaf_src.iter_mut().enumerate() {
            if now >= self.leaf_start[i] && s.sample(dut).is_some() {
                if let Some(t) = times.as_mut() {
                    t.leaf_up[i].push(now);
                }
            }
        }
        if self.up_src.sample(dut).is_some() {
            if let Some(t) = times.as_mut() {
                t.root_dn.push(now);
            }
        }
        for (i, s) in self.leaf_sink.iter_mut().enumerate() {
            if s.sample(dut).is_some() {
                if let Some(t) = times.as_mut() {
                    t.leaf_dn[i].push(now);
                }
            }
        }
        let got = self.up_sink.sample(dut);
        if got.is_some() {
            if let Some(t) = times.as_mut() {
                t.root_up.push(now);
            }
        }
        self.times = times;
        dut.tick();
        got
    }

    /// Beats still expected anywhere, or queued in any source.
    pub fn busy(&self) -> bool {
        self.up_sink.outstanding() > 0
            || self.leaf_sink.iter().any(|s| s.outstanding() > 0)
            || self.up_src.pending() > 0
            || self.leaf_src.iter().any(|s| s.pending() > 0)
    }

    /// Steps until nothing is expected or queued, at most `limit` cycles.
    ///
    /// # Panics
    /// When `limit` runs out: something was dropped or the tree deadlocked.
    pub fn run(&mut self, dut: &mut Dut, limit: u64) {
        let start = dut.cycle();
        while self.busy() {
            self.step(dut);
            assert!(
                dut.cycle() - start < limit,
                "tree made no progress for {limit} cycles: {} uplink flits outstanding, {} downlink flits outstanding, {} uplink flits queued",
                self.up_sink.outstanding(),
                self.leaf_sink.iter().map(|s| s.outstanding()).sum::<usize>(),
                self.leaf_src.iter().map(|s| s.pending()).sum::<usize>()
            );
        }
        self.up_sink.finish();
        for s in &self.leaf_sink {
            s.finish();
        }
    }
}

/// The (stream beat) of a flit as the agents see it: `[data, last, user]`.
pub fn beat(f: &Flit) -> [u64; 3] {
    [u64::from(f.payload), f.last as u64, f.header.pack()]
}

/// What [`push_gradients`] queued.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pushed {
    /// Flits queued on each leaf.
    pub per_leaf: u64,
    /// Flits expected at the root.
    pub reduced: u64,
    /// Chunks.
    pub chunks: u64,
}

/// Queues `flits` gradient flits per leaf, in chunks of 1..=`max_chunk` flits with
/// random (layer, step, chunk) headers, with random edge-case payloads (two bf16 per payload
/// where the leaf nodes read bf16), and expects at the root exactly what
/// [`ws_common::golden::swarm::Tree::reduce`] says for `nodes`.
pub fn push_gradients(
    tb: &mut TreeTb,
    nodes: &[NodeConfig],
    rng: &mut impl Rng,
    flits: u64,
    max_chunk: u16,
) -> Pushed {
    let fan = tb.shape.fanout();
    let tree = Tree { fanout: &fan, nodes };
    let leaves = tb.shape.leaves();
    let first_leaf_node = tree.node_id(fan.len() - 1, 0);
    let bf16_in = nodes[first_leaf_node].dtype != Dtype::Fp32;
    let mut pushed = Pushed::default();
    let mut layer = rng.random_range(0..4096u16);
    let mut step = rng.random::<u16>();
    let mut chunk = rng.random::<u16>();
    let mut payloads = vec![0u32; leaves];
    while pushed.per_leaf < flits {
        let len = rng.random_range(1..=max_chunk).min((flits - pushed.per_leaf) as u16).max(1);
        for index in 0..len {
            let header = Header::new(Kind::Gradient, layer, step, chunk, index);
            let last = index + 1 == len;
            if bf16_in {
                let lo = operand_set(rng, leaves);
                let hi = operand_set(rng, leaves);
                for i in 0..leaves {
                    let (l, h) = if rng.random_range(0..16u32) == 0 {
                        (bf16_operand(rng), bf16_operand(rng))
                    } else {
                        ((lo[i] >> 16) as u16, (hi[i] >> 16) as u16)
                    };
                    payloads[i] = pack_bf16(l, h);
                }
            } else {
                payloads = operand_set(rng, leaves);
            }
            let hu = header.pack();
            for (i, src) in tb.leaf_src.iter_mut().enumerate() {
                src.push_beat(&[u64::from(payloads[i]), last as u64, hu]);
            }
            let out = tree.reduce(header, last, &payloads).expect("golden tree");
            for f in out.as_slice() {
                tb.up_sink.expect_beat(&beat(f));
                pushed.reduced += 1;
            }
            pushed.per_leaf += 1;
        }
        pushed.chunks += 1;
        chunk = chunk.wrapping_add(1);
        if rng.random_range(0..4u32) == 0 {
            layer = (layer + 1) % 4096;
        }
        if rng.random_range(0..16u32) == 0 {
            step = step.wrapping_add(1);
        }
    }
    pushed
}

/// Queues `flits` weight flits at the root's downlink (chunks of up to 64) and expects each
/// on every leaf whose path is active in `nodes`.
pub fn push_weights(tb: &mut TreeTb, nodes: &[NodeConfig], rng: &mut impl Rng, flits: u64) {
    let leaves = tb.shape.leaves();
    let active: Vec<bool> = (0..leaves).map(|i| tb.leaf_active(nodes, i)).collect();
    let mut index = 0u16;
    let chunk = rng.random::<u16>();
    for k in 0..flits {
        let last = rng.random_range(0..64u32) == 0 || k + 1 == flits;
        let h = Header::new(Kind::Weight, 7, 1, chunk, index);
        let b = [u64::from(rng.random::<u32>()), last as u64, h.pack()];
        tb.up_src.push_beat(&b);
        for (i, s) in tb.leaf_sink.iter_mut().enumerate() {
            if active[i] {
                s.expect_beat(&b);
            }
        }
        index = if last { 0 } else { index.wrapping_add(1) };
    }
}
