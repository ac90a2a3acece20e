//! MemoryX optimizer-lane bench rows for `cargo xtask bench` (issue 5, docs/memoryx.md
//! "Figures"):
//!
//! - [`lane_rate`]: cycles per parameter per lane at steady state with no backpressure (goal
//!   ≤ 1.05), and the update-to-first-output latency (the pipeline depth), for LANES = 1, 2, 4,
//!   on the Verilated `ws_optim_lanes` the block tests use (built on first use, then cached),
//!   every result checked against the golden model on the way.
//!
//! Open-synthesis figures (ECP5-85F) are not measured yet; see docs/memoryx.md.

use serde::Serialize;

use crate::dut::{Dut, DutError, Pattern};
use crate::optim::{lanes_spec, random_param, run_chunk, set_consts};
use ws_common::golden::optim::{step_consts, Hyper, Param};

/// One [`lane_rate`] measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LaneRate {
    /// Lanes of the `ws_optim_lanes` instance.
    pub lanes: u32,
    /// Parameters streamed (per lane: `params / lanes`).
    pub params: u64,
    /// Cycles from the first parameter offered to the last result taken.
    pub cycles: u64,
    /// Cycles from the first parameter accepted to the first result valid: the pipeline
    /// depth (input register, datapath, output FIFO).
    pub first_out_latency: u64,
    /// (cycles − latency) / beats: cycles per parameter per lane at steady state (goal ≤ 1.05).
    pub cycles_per_param_per_lane: f64,
    /// Wall seconds of the build that produced the model (from its stamp on a cache hit).
    pub build_secs: f64,
    /// The model came from the cache.
    pub model_cache_hit: bool,
}

/// Streams `params` Adam updates (the longest path; every optimizer has the same latency)
/// through `ws_optim_lanes` with `lanes` lanes, `s_valid` and `m_ready` always high, and
/// reports the steady-state rate and the first-output latency. Panics if a result is not
/// bit-exact with the golden model.
pub fn lane_rate(lanes: u32, params: u64) -> Result<LaneRate, DutError> {
    let spec = lanes_spec(lanes)?;
    let mut dut = Dut::build(&spec)?;
    let (build_secs, model_cache_hit) = (dut.model().build_time.as_secs_f64(), dut.model().cache_hit);
    dut.reset(4);
    let c = step_consts(&Hyper::ADAM, 10, 1e-3, 1, 1);
    set_consts(&mut dut, &c);
    let mut rng = dut.rng(0xbe);
    let ps: Vec<(Param, u32)> = (0..params).map(|_| random_param(&mut rng)).collect();
    let r = run_chunk(&mut dut, lanes as usize, &c, &ps, Pattern::Always, Pattern::Always, 1);
    let steady = (r.cycles - r.first_out_latency) as f64 / r.beats.max(1) as f64;
    Ok(LaneRate {
        lanes,
        params,
        cycles: r.cycles,
        first_out_latency: r.first_out_latency,
        cycles_per_param_per_lane: steady,
        build_secs,
        model_cache_hit,
    })
}
