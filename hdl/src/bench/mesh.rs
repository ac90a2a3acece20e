//! Wafer-mesh bench rows for `cargo xtask bench` (issue 7, docs/mesh-array.md "Tests and
//! figures"):
//!
//! - [`array_utilisation`]: a 64→40 dense layer forward and backward on a 4×4 `ws_mesh` with
//!   every port at full rate, at batch per PE B = 1, 2, 4 and 8, every word checked against
//!   the golden model on the way ([`crate::mesh_top::scenario`], the array tests' scenario):
//!   FMA utilisation of the whole run and of the busiest PE in each phase (FWD, DX, GRAD)
//!   against the ideal of one FMA per PE per cycle; the weight-ingress words per cycle the
//!   mesh absorbs in the forward (the arithmetic-intensity balance point); the router links'
//!   utilisation by the dW/db reduction;
//! - [`mlp_step`]: a whole 64→128→64→10 training step (forward, loss, metrics, backward) on
//!   4×4, its cycles against the ideal MACs ÷ PEs, and the loss stage's share;
//! - [`synth_ecp5_pe`], [`synth_ecp5_router`]: one PE and one router on an ECP5-85F, and from
//!   them the largest mesh that fits.

use serde::Serialize;

use crate::dut::{Dut, DutError};
use crate::mesh;
use crate::mesh_pe::{PeParams, PE_FILES};
use crate::mesh_top::scenario::{self, Case, Values, FULL};
use crate::mesh_top::step::{self, StepCase};
use crate::mesh_top::{self as top};
use crate::synth::{self, Ecp5Job, SynthError, SynthFigures};

/// The PEs of the bench array: the tests' PE with room for 8 sample slots.
pub const BENCH_PE: PeParams = PeParams { sram_words: 2048, fma_lat: 3, max_b: 8, prog_depth: 16 };

/// One B of [`array_utilisation`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Utilisation {
    /// Mesh side (PEs = side²).
    pub side: usize,
    /// Samples per PE.
    pub b: usize,
    /// Layer inputs.
    pub k: usize,
    /// Layer outputs.
    pub m: usize,
    /// FMAs of the whole run, every PE.
    pub fmas: u64,
    /// Cycles from the first weight word to the last word out.
    pub cycles: u64,
    /// FMAs ÷ (PEs × cycles).
    pub whole: f64,
    /// The busiest PE's FWD: B·K·M FMAs ÷ its FWD cycles.
    pub fwd: f64,
    /// The busiest PE's DX: B·K·M ÷ its DX cycles.
    pub dx: f64,
    /// The busiest PE's GRAD: B·M·(K + 1) ÷ its GRAD cycles.
    pub grad: f64,
    /// Weight words per cycle taken at the ingress during the forward (first to last word of
    /// the first pass), with the ingress always valid.
    pub ingress_words_per_cycle: f64,
    /// Reduction-color flits per used N/E/S/W router link ÷ the busiest PE's GRAD cycles.
    pub reduce_link_util: f64,
    /// Router links the reduction used.
    pub reduce_links: u64,
}

/// Runs the 64→40 layer forward and backward at each B of `bs` (each ≤ 8) on a `side` ×
/// `side` array of [`BENCH_PE`]s with every port at full rate. Panics if a word differs from
/// the golden model.
pub fn array_utilisation(side: usize, bs: &[usize], seed: u64) -> Result<Vec<Utilisation>, DutError> {
    let mut dut = Dut::build(top::array_spec(&scenario::params(side, BENCH_PE))?)?;
    dut.set_seed(seed);
    dut.reset(4);
    top::configure_routes(&mut dut, &scenario::checked_routes(side));
    let mut rng = dut.rng(2);
    let pes = (side * side) as f64;
    let (k, m) = (64usize, 40usize);
    let mut out = Vec::new();
    for &b in bs {
        let c = Case {
            k,
            m,
            b,
            n: side * side * b,
            relu: true,
            rows_per_chunk: 8,
            backward: true,
            values: Values::Mild(100),
            pats: FULL,
        };
        let r = scenario::run_case(&mut dut, &mut rng, side, &c);
        let per = |n: usize, cycles: u64| n as f64 / cycles.max(1) as f64;
        let ph = r.phases;
        let fwd_span = ph.fwd_end - ph.fwd_start + 1;
        out.push(Utilisation {
            side,
            b,
            k,
            m,
            fmas: r.fmas,
            cycles: r.out.cycles,
            whole: r.fmas as f64 / (pes * r.out.cycles as f64),
            fwd: per(b * k * m, r.fwd_cycles),
            dx: per(b * k * m, r.dx_cycles),
            grad: per(b * m * (k + 1), r.grad_cycles),
            ingress_words_per_cycle: per(r.weight_words as usize / 2, fwd_span),
            reduce_link_util: r.reduce_link_flits as f64
                / (r.reduce_links.max(1) * r.grad_cycles.max(1)) as f64,
            reduce_links: r.reduce_links,
        });
    }
    Ok(out)
}

/// What [`mlp_step`] measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MlpStep {
    /// Cycles from the start to the array drained.
    pub cycles: u64,
    /// FMAs over every PE (the MACs, the loss stage, the reductions).
    pub fmas: u64,
    /// The step's multiply-adds: forward, dW/db and dx (no dx of layer 0), every sample.
    pub ideal_macs: u64,
    /// The busiest PE's cycles in LOSS instructions.
    pub loss_cycles: u64,
}

/// One whole training step of a 64→128→64→10 MLP (ReLU on the hidden layers) on a `side` ×
/// `side` array of [`BENCH_PE`]s at `b` samples per PE, every port at full rate: forward,
/// loss, metrics and backward from one program per PE, the gradients and the metrics checked
/// against `golden::mesh::step::run`.
pub fn mlp_step(side: usize, b: usize, seed: u64) -> Result<MlpStep, DutError> {
    let mut dut = Dut::build(top::array_spec(&scenario::params(side, BENCH_PE))?)?;
    dut.set_seed(seed);
    dut.reset(4);
    top::configure_routes(&mut dut, &scenario::checked_routes(side));
    let mut rng = dut.rng(5);
    let c = StepCase {
        dims: vec![64, 128, 64, 10],
        b,
        n: side * side * b,
        rows_per_chunk: 8,
        values: Values::Uniform(1.0),
        params: Values::Uniform(0.15),
        pats: FULL,
    };
    let before: Vec<u64> = (0..side * side).map(|r| top::counter(&dut, "cnt_loss_cycles", r)).collect();
    let r = step::run_step(&mut dut, &mut rng, side, &c);
    let loss_cycles =
        (0..side * side).map(|i| top::counter(&dut, "cnt_loss_cycles", i) - before[i]).max().unwrap_or(0);
    Ok(MlpStep { cycles: r.out.cycles, fmas: r.fmas, ideal_macs: r.ideal_macs, loss_cycles })
}

/// Synthesises one `ws_mesh_pe` as the array tests build it ([`scenario::TEST_PE`]: 2048
/// SRAM words, FMA_LAT 3, MAX_B 4, 16 instructions) for an ECP5-85F. Minutes.
pub fn synth_ecp5_pe() -> Result<SynthFigures, SynthError> {
    let p = scenario::TEST_PE;
    let job = Ecp5Job::new("ws_mesh_pe", "ws_mesh_pe", PE_FILES)
        .param("SRAM_WORDS", p.sram_words)
        .param("FMA_LAT", p.fma_lat)
        .param("MAX_B", p.max_b)
        .param("PROG_DEPTH", p.prog_depth);
    synth::ecp5(&job)
}

/// Synthesises one `ws_mesh_router` as `ws_mesh` instantiates it (3 colors, 4-flit
/// buffers, 1-bit headers) for an ECP5-85F. Minutes.
pub fn synth_ecp5_router() -> Result<SynthFigures, SynthError> {
    let job = Ecp5Job::new("ws_mesh_router", "ws_mesh_router", mesh::ROUTER_FILES)
        .param("COLORS", 3)
        .param("BUF_DEPTH", 4)
        .param("USER_WIDTH", 1);
    synth::ecp5(&job)
}
