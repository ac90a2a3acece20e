//! SwarmX on the host: the RTL's file lists, the testbench tops of nodes and cascades, and a
//! cycle-level model of SwarmX trees.
//!
//! - [`fp32_spec`], [`node_spec`]: [`BlockSpec`]s of the FPnew cell and of one node, with
//!   FPnew and common_cells from the installed package ([`crate::vbuild::fpnew`]).
//! - [`tb`]: testbench tops for a node or a cascade of nodes with one named `s_*`/`m_*`
//!   group per leaf port, so the harness's stream agents can drive every port; plus the
//!   flit stimulus (edge-case operands) the block tests and the bench share.
//! - [`model`]: the cycle-level tree model, calibrated against the RTL cascade, that predicts
//!   trees of 64 to 192 wafers.
//!
//! The design is described in `docs/swarmx.md`; the bits it must produce are
//! [`ws_common::golden::swarm`].

pub mod model;
pub mod tb;

use crate::dut::BlockSpec;
use crate::vbuild::{fpnew, BuildError};

/// Our RTL of a node, leaves first.
pub const NODE_FILES: &[&str] = &[
    "hdl/rtl/ws_fifo.v",
    "hdl/rtl/ws_swarm_fp32.v",
    "hdl/rtl/ws_swarm_addtree.v",
    "hdl/rtl/ws_swarm_node.v",
];

/// Repo-relative Verilator configuration of the SwarmX RTL (the flit header's unused fields).
pub const SWARM_VLT: &str = "hdl/lint/swarm.vlt";

/// Include directory of `ws_flit.vh`.
pub use crate::paths::RTL_INCLUDE_DIR;

/// Adds FPnew's sources (before everything else), its include directories and lint waivers,
/// and `hdl/rtl/include` (for `ws_flit.vh`) as include directory, to `spec`.
pub fn with_fpnew(spec: BlockSpec) -> Result<BlockSpec, BuildError> {
    let fp = fpnew::fma_sources()?;
    let mut spec = spec;
    let ours = std::mem::take(&mut spec.files);
    spec.files = fp.sources;
    spec.files.extend(ours);
    spec.include_dirs.extend(fp.include_dirs);
    spec.include_dirs.push(RTL_INCLUDE_DIR.into());
    spec.vlt_files.extend(fp.vlt_files);
    Ok(spec)
}

/// The FPnew cell `ws_swarm_fp32` alone: `op` 0 adds, 1 multiplies.
pub fn fp32_spec(op: u32, latency: u32) -> Result<BlockSpec, BuildError> {
    with_fpnew(
        BlockSpec::new("ws_swarm_fp32")
            .file("hdl/rtl/ws_swarm_fp32.v")
            .param("OP", op)
            .param("LATENCY", latency),
    )
}

/// Parameters of one `ws_swarm_node` (see its header in `hdl/rtl/ws_swarm_node.v`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeParams {
    /// `N_PORTS`: downstream ports, 2..=16.
    pub ports: u32,
    /// `SKID_DEPTH`: per-port buffer depth, a power of two.
    pub skid_depth: u32,
    /// `ADD_REGS`: pipeline registers per adder (cycles per tree level), >= 1.
    pub add_regs: u32,
    /// `MUL_REGS`: pipeline registers of the scale multiplier.
    pub mul_regs: u32,
    /// `BF16_EN`: build the second lane for the bf16 wire formats.
    pub bf16: bool,
    /// `SCALE_EN`: build the scale multiplier.
    pub scale: bool,
}

impl NodeParams {
    /// The defaults of the RTL for `ports` ports.
    pub const fn new(ports: u32) -> Self {
        NodeParams { ports, skid_depth: 16, add_regs: 3, mul_regs: 3, bf16: true, scale: true }
    }

    /// Without the scale multiplier (inner nodes of a tree).
    pub const fn no_scale(self) -> Self {
        NodeParams { scale: false, ..self }
    }

    /// Adder tree levels, ⌈log₂ ports⌉.
    pub const fn levels(&self) -> u32 {
        let mut l = 0;
        while (1u32 << l) < self.ports {
            l += 1;
        }
        l
    }

    /// Cycles from a fire of the aligner to the result's push into the output FIFO (the RTL's
    /// `PIPE_LATENCY`).
    pub const fn pipe_latency(&self) -> u32 {
        1 + self.levels() * self.add_regs + if self.scale { self.mul_regs } else { 0 }
    }

    /// The `-G` parameters, in the RTL's order.
    pub fn verilog_params(&self) -> Vec<(&'static str, u32)> {
        vec![
            ("N_PORTS", self.ports),
            ("SKID_DEPTH", self.skid_depth),
            ("ADD_REGS", self.add_regs),
            ("MUL_REGS", self.mul_regs),
            ("BF16_EN", self.bf16 as u32),
            ("SCALE_EN", self.scale as u32),
        ]
    }
}

/// One `ws_swarm_node` as the top module (flattened multi-port buses).
pub fn node_spec(p: &NodeParams) -> Result<BlockSpec, BuildError> {
    let mut spec = BlockSpec::new("ws_swarm_node").files(NODE_FILES.iter().copied());
    for (k, v) in p.verilog_params() {
        spec = spec.param(k, v);
    }
    with_fpnew(spec)
}

/// One node behind its register block (`ws_swarm_block`, `hdl/regmap/swarm.toml`) as the top.
pub fn block_spec(p: &NodeParams) -> Result<BlockSpec, BuildError> {
    let mut spec = BlockSpec::new("ws_swarm_block")
        .files(NODE_FILES.iter().copied())
        .files(["hdl/rtl/gen/ws_swarm_csr.v", "hdl/rtl/ws_swarm_block.v"]);
    for (k, v) in p.verilog_params() {
        spec = spec.param(k, v);
    }
    with_fpnew(spec)
}

/// A uniform tree of nodes to build: the fan-out of each level from the root down, and the
/// node parameters of each level (its `ports` must equal the level's fan-out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeShape {
    /// Parameters of the nodes of each level, root first.
    pub levels: Vec<NodeParams>,
}

impl TreeShape {
    /// One node.
    pub fn node(p: NodeParams) -> Self {
        TreeShape { levels: vec![p] }
    }

    /// A cascade with these fan-outs, the scale multiplier at the root only.
    pub fn cascade(fanout: &[u32]) -> Self {
        let levels = fanout
            .iter()
            .enumerate()
            .map(|(i, f)| if i == 0 { NodeParams::new(*f) } else { NodeParams::new(*f).no_scale() })
            .collect();
        TreeShape { levels }
    }

    /// Fan-out of each level.
    pub fn fanout(&self) -> Vec<usize> {
        self.levels.iter().map(|p| p.ports as usize).collect()
    }

    /// Leaves of the tree.
    pub fn leaves(&self) -> usize {
        self.fanout().iter().product()
    }

    /// Nodes of the tree.
    pub fn node_count(&self) -> usize {
        let mut total = 0;
        let mut width = 1;
        for f in self.fanout() {
            total += width;
            width *= f;
        }
        total
    }

    /// Module name of the generated top, e.g. `ws_swarm_tb_4x4_1a2b3c4d`: the fan-outs and a
    /// hash of every level's parameters, so different trees never share a file.
    pub fn top_name(&self) -> String {
        let dims: Vec<String> = self.levels.iter().map(|p| p.ports.to_string()).collect();
        // FNV-1a over the parameters: stable across runs and platforms.
        let mut h: u32 = 0x811c_9dc5;
        for p in &self.levels {
            for (_, v) in p.verilog_params() {
                for b in v.to_le_bytes() {
                    h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
                }
            }
        }
        format!("ws_swarm_tb_{}_{h:08x}", dims.join("x"))
    }
}
