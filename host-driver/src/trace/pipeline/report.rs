//! The figures of a pipeline check ([`super::check_pipeline`]): the configured depths and the
//! bound, the stages of a bubble, and the report with its verdict.

use ws_common::trace::Source;

use super::Clock;

/// The pipeline depths on an iteration boundary's path, in cycles.
///
/// With forwarding (the default, docs/mesh-array.md "Forwarding") the next step's first FMA of
/// layer 0 needs the layer's first chunk, which MemoryX updated long before the last gradient
/// came in; it waits in the forward buffer, SwarmX's broadcast and the mesh ingress for the
/// wafers to chain into the step. Those three are the path, and the bubble's bound is twice
/// their sum. The update and the store read are the read-back path's depths (the debug
/// switch, `wsctl train --read-back`): the bound does not allow for them, so a run with
/// forwarding off fails the check, on its largest stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipelineDepths {
    /// MemoryX's forward buffer: an updated weight in to out (`ws_fifo`).
    pub forward_buffer: u64,
    /// SwarmX's broadcast: a weight flit into the node to the same flit out of a port.
    pub switch: u64,
    /// The mesh ingress: the router hops from the wafer's port to the PEs and the PE pipeline
    /// to the first FMA issue.
    pub mesh_ingress: u64,
    /// Off the forwarding path: MemoryX's update of the last chunk, the optimizer lanes'
    /// pipeline and the store write of its results (last gradient in to commit).
    pub update: u64,
    /// Off the forwarding path: a STREAM read's descriptor to its first weight out of the
    /// streamer.
    pub store_read: u64,
}

impl PipelineDepths {
    /// The simulated board's depths, from each block's own measurements:
    /// - forward buffer 2: `ws_fifo` shows a word two cycles after it took it
    ///   (hdl/rtl/ws_fifo.v);
    /// - switch 2: SwarmX's broadcast registers a flit once on the way in and once out;
    /// - mesh ingress 8: the edge link, the router hops to the farthest PE of a 2 × 2 wafer
    ///   and the PE's operand stages before its first FMA issue;
    /// - update 76: the optimizer lanes' 46 cycles (docs/memoryx.md) and about 30 from the
    ///   last result to its store write's acknowledgement (docs/memoryx-store.md, "committed"
    ///   against "update done");
    /// - store read 40: the simulated store's 24 cycles of read latency and the streamer's 16
    ///   (docs/memoryx-store.md, "Update-to-first-weight-out latency").
    pub const fn simulated() -> Self {
        Self { forward_buffer: 2, switch: 2, mesh_ingress: 8, update: 76, store_read: 40 }
    }

    /// The sum of the depths on the forwarding path.
    pub fn sum(&self) -> u64 {
        self.forward_buffer + self.switch + self.mesh_ingress
    }

    /// The bubble's bound: twice the sum.
    pub fn bound(&self) -> u64 {
        2 * self.sum()
    }
}

impl Default for PipelineDepths {
    fn default() -> Self {
        Self::simulated()
    }
}

/// The bubble's bound and where it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Twice the sum of the depths.
    Depths(PipelineDepths),
    /// Given by the caller.
    Given(u64),
}

impl Bound {
    /// The bound in cycles.
    pub fn cycles(&self) -> u64 {
        match self {
            Self::Depths(d) => d.bound(),
            Self::Given(c) => *c,
        }
    }

    /// `24 = 2 x (forward buffer 2 + switch 2 + mesh ingress 8)`, or `500 (given)`.
    pub fn describe(&self) -> String {
        match self {
            Self::Depths(d) => format!(
                "{} = 2 x (forward buffer {} + switch {} + mesh ingress {})",
                d.bound(),
                d.forward_buffer,
                d.switch,
                d.mesh_ingress
            ),
            Self::Given(c) => format!("{c} (given)"),
        }
    }
}

/// What [`super::check_pipeline`] is told beyond the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PipelineOptions {
    /// The board clock, for times in microseconds.
    pub clock: Clock,
    /// The pipeline depths of the bound.
    pub depths: PipelineDepths,
    /// A bound in cycles in place of twice the depths.
    pub bound: Option<u64>,
    /// The ideal cycles of a training step; derived from the FMAs when `None`.
    pub ideal: Option<u64>,
    /// SwarmX's downstream ports (wafer w on port PORTS − 1 − w); inferred from the capture
    /// when `None` ([`crate::trace::links::swarm_ports`]).
    pub ports: Option<u8>,
}

/// The stages of an iteration-boundary bubble, in path order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// The last gradient of layer 0 in to its update done (its last result out of the lanes,
    /// or its commit if later).
    Update,
    /// The update done to the next step's first read of layer 0 from the store.
    Scheduler,
    /// That read to its first weights out of MemoryX.
    StoreRead,
    /// Weights out of MemoryX to the latest wafer port's first weights of layer 0.
    Switch,
    /// The port's weights to the latest wafer's first FMA of layer 0.
    Wafer,
}

impl Stage {
    /// Every stage, in path order.
    pub const ALL: [Stage; 5] = [Self::Update, Self::Scheduler, Self::StoreRead, Self::Switch, Self::Wafer];

    /// Its name: `update`, `scheduler`, `store read`, `switch`, `wafer`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Update => "update",
            Self::Scheduler => "scheduler",
            Self::StoreRead => "store read",
            Self::Switch => "switch",
            Self::Wafer => "wafer",
        }
    }

    /// What to look at when the stage holds the bubble.
    pub fn hint(self) -> &'static str {
        match self {
            Self::Update => {
                "the next forward waited for layer 0's update to finish: it was read back from the store (forwarding off: `--read-back`, or the layer does not fit the forward buffer, docs/mesh-array.md \"Forwarding\"); with forwarding, look at the optimizer lanes and the store writes (docs/memoryx-store.md \"Timing\")"
            }
            Self::Scheduler => {
                "nothing sent layer 0 on for the next step until long after its update: look at what the core does between the steps (docs/mesh-array.md \"Chained steps\") and at the forward buffer"
            }
            Self::StoreRead => {
                "the store takes long from a read of layer 0 to its first weights out: look at the store's read path and what is queued ahead of the read"
            }
            Self::Switch => {
                "layer 0's weights wait in SwarmX's broadcast: look at its buffering and the slowest port's backpressure"
            }
            Self::Wafer => {
                "the wafers start layer 0's FMAs long after its weights reach them: look at the mesh ingress (router hops, PE pipeline) and the previous step's tail on the wafer"
            }
        }
    }

    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// One wafer in one training step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaferStep {
    /// The wafer.
    pub wafer: u8,
    /// The begin of its forward of layer 0, if the capture has it.
    pub forward: Option<u64>,
    /// The begin of its first backward phase (DX, or a layer's GRAD).
    pub first_backward: u64,
    /// The end of its last backward phase.
    pub end: u64,
    /// FMAs of its FWD, DX and layer GRAD phases in the step (not LOSS, not the metrics
    /// reduction).
    pub fmas: u64,
}

/// One training step: a step number whose phases include a backward one, paired by time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrainingStep {
    /// The step number (16 bits, wrapping).
    pub step: u16,
    /// Its wafers, by wafer.
    pub wafers: Vec<WaferStep>,
    /// t1: the latest begin of the wafers' forwards of layer 0 (of those the capture has).
    pub start: Option<u64>,
    /// The earliest begin of any wafer's backward phases.
    pub first_backward: u64,
    /// The latest end of any wafer's backward phases.
    pub end: u64,
}

/// One iteration boundary: from training step `from` to the next, `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boundary {
    /// The step before.
    pub from: u16,
    /// The step after.
    pub to: u16,
    /// The end of the last gradient chunk of layer 0 of `from` into MemoryX.
    pub t0: Option<u64>,
    /// The latest begin of the wafers' forwards of layer 0 of `to`.
    pub t1: Option<u64>,
    /// t1 − t0: negative when the next forward started before the last gradient arrived.
    pub bubble: Option<i64>,
    /// Cycles per [`Stage`], in path order: each at least 0, summing to the bubble when it is
    /// positive (all 0 otherwise).
    pub stages: [u64; 5],
    /// The cycles from `from`'s t1 to `to`'s.
    pub step_cycles: Option<u64>,
    /// How layer 0's weights of `to` left MemoryX: `Some(true)` forwarded from the update,
    /// `Some(false)` read back from the store, `None` when the capture does not say.
    pub forwarded: Option<bool>,
}

impl Boundary {
    /// The cycles of one stage.
    pub fn stage(&self, s: Stage) -> u64 {
        self.stages[s.index()]
    }
}

/// MemoryX's updates of one layer under the wafers' compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerHiding {
    /// The layer.
    pub layer: u16,
    /// Its update records.
    pub updates: usize,
    /// Their cycles, summed.
    pub update_cycles: u64,
    /// Their cycles during which some wafer had a phase open, summed.
    pub hidden_cycles: u64,
    /// `update_cycles` without the first training step's updates.
    pub steady_update_cycles: u64,
    /// `hidden_cycles` without the first training step's updates.
    pub steady_hidden_cycles: u64,
}

impl LayerHiding {
    /// The hidden share of the update cycles, 0 to 1.
    pub fn hidden(&self) -> Option<f64> {
        ratio(self.hidden_cycles, self.update_cycles)
    }

    /// The same without the first training step.
    pub fn steady_hidden(&self) -> Option<f64> {
        ratio(self.steady_hidden_cycles, self.steady_update_cycles)
    }
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// One stream hop's use of the analysis window.
#[derive(Debug, Clone, PartialEq)]
pub struct HopBusy {
    /// The hop.
    pub source: Source,
    /// Its chunk records in the window.
    pub records: usize,
    /// Cycles of the window in which one of its chunks was passing.
    pub busy_cycles: u64,
    /// `busy_cycles` over the window, 0 to 1.
    pub utilisation: f64,
}

/// One wafer's use of the analysis window.
#[derive(Debug, Clone, PartialEq)]
pub struct WaferBusy {
    /// The wafer.
    pub wafer: u8,
    /// Its PEs: the most that issued an FMA in one phase, over the capture.
    pub pes: u16,
    /// FMAs of its phases that begin in the window.
    pub fmas: u64,
    /// Cycles of the window in which one of its phases was open.
    pub busy_cycles: u64,
    /// `fmas` over `pes` × the window, 0 to 1.
    pub fma_utilisation: f64,
}

/// Where the ideal step comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdealSource {
    /// Given by the caller.
    Given,
    /// The FMAs of a training step (FWD, DX and layer GRAD phases of every wafer; the median
    /// over the steps with every wafer's forward) over the PEs of its wafers.
    Derived {
        /// Training steps it is the median of.
        steps: usize,
        /// FMAs of a step.
        fmas: u64,
        /// PEs of a step's wafers.
        pes: u64,
    },
}

/// The ideal cycles of a training step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ideal {
    /// Cycles.
    pub cycles: u64,
    /// Where they come from.
    pub source: IdealSource,
}

/// The verdict on the steady-state bubble (the median over the boundaries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// At most the bound.
    Pass {
        /// The median bubble.
        bubble: i64,
    },
    /// Above the bound.
    Fail {
        /// The median bubble.
        bubble: i64,
        /// The stage with the largest median.
        stage: Stage,
        /// Its median cycles.
        stage_cycles: u64,
    },
    /// No boundary could be measured.
    Unmeasured {
        /// Why.
        reason: String,
    },
}

/// A pipeline check that did not pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    /// the bubble is {bubble} cycles, above the bound B = {bound}: the {stage} stage takes {stage_cycles} of them; {hint}
    #[error(
        "the bubble is {bubble} cycles, above the bound B = {bound}: the {} stage takes {stage_cycles} of them; {}",
        stage.name(),
        stage.hint()
    )]
    Bubble {
        /// The median bubble.
        bubble: i64,
        /// The bound, described ([`Bound::describe`]).
        bound: String,
        /// The stage with the largest median.
        stage: Stage,
        /// Its median cycles.
        stage_cycles: u64,
    },
    /// the capture cannot judge the pipeline: {reason}
    #[error("the capture cannot judge the pipeline: {reason}")]
    Unmeasured {
        /// Why.
        reason: String,
    },
}

/// What [`super::check_pipeline`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineReport {
    /// The board clock of the times.
    pub clock: Clock,
    /// SwarmX's downstream ports the wafers were mapped with.
    pub ports: u8,
    /// The training steps, in time order.
    pub steps: Vec<TrainingStep>,
    /// Forwards of layer 0 that belong to no training step (evaluations), counted per wafer.
    pub other_forwards: usize,
    /// First and last cycle of the analysis window: the first training step's first forward
    /// of layer 0 to the last training step's last backward phase.
    pub window: Option<(u64, u64)>,
    /// Per layer with updates, by layer.
    pub layers: Vec<LayerHiding>,
    /// Between consecutive training steps.
    pub boundaries: Vec<Boundary>,
    /// The bubble's bound.
    pub bound: Bound,
    /// The median of the boundaries' step cycles.
    pub step_cycles: Option<u64>,
    /// The ideal step.
    pub ideal: Option<Ideal>,
    /// Per chunk hop with records in the window, in [`Source`] order.
    pub hops: Vec<HopBusy>,
    /// Per wafer with phases, by wafer.
    pub wafers: Vec<WaferBusy>,
    /// What could not be measured as defined, and what was done instead.
    pub notes: Vec<String>,
    /// The verdict.
    pub verdict: Verdict,
}
