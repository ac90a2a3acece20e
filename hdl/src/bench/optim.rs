//! MemoryX optimizer-lane bench rows for `cargo xtask bench` (issue 5, docs/memoryx.md
//! "Figures"):
//!
//! - [`lane_rate`]: cycles per parameter per lane at steady state with no backpressure (goal
//!   ≤ 1.05), and the update-to-first-output latency (the pipeline depth), for LANES = 1, 2, 4,
//!   on the Verilated `ws_optim_lanes` the block tests use (built on first use, then cached),
//!   every result checked against the golden model on the way;
//! - [`streamer_figures`]: the weight store and streamer around the lanes (`ws_mx_sim_top`):
//!   cycles per parameter per lane with the store not the limit, the achieved parameter rate
//!   as a fraction of the store's bandwidth bound with the store the limit, and the latency
//!   from a chunk's gradient to its first weight out at three chunk sizes
//!   (docs/memoryx-store.md "Figures");
//! - [`synth_ecp5_lanes`]: LUTs, DSPs, BRAMs and Fmax of `ws_optim_lanes` on an ECP5-85F.

use serde::Serialize;

use crate::dut::{Dut, DutError, Pattern};
use crate::mx::scenario::{check_layer, init_layers, layout, measured_step, rate, setup, store_rate};
use crate::mx::{cnt, sim_spec, Mx, MxParams, Stall, Store};
use crate::optim::{lanes_spec, random_param, run_chunk, set_consts, LANE_FILES};
use crate::synth::{self, Ecp5Job, SynthError, SynthFigures};
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

/// Steady state of one optimizer with the store not the limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FullRate {
    /// "Adam", "SGD", "AdamW amsgrad".
    pub optimizer: &'static str,
    /// Bytes the store moves per parameter (8 per array: read and written back).
    pub store_bytes_per_param: u32,
    /// Parameters per cycle after the first chunk.
    pub params_per_cycle: f64,
    /// Cycles per parameter per lane (goal ≤ 1.05 where the store is not the limit).
    pub cycles_per_param_per_lane: f64,
    /// The store moves at least a full bus per parameter-cycle: store-bound by construction.
    pub store_bound: bool,
}

/// The achieved rate of one optimizer with the store's bandwidth cut so that it is the limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoreBound {
    /// "Adam" or "SGD".
    pub optimizer: &'static str,
    /// The store's bandwidth under the duty-cycle stall, bytes per cycle.
    pub bytes_per_cycle: f64,
    /// Parameters per cycle over the whole step (first gradient in to last write
    /// acknowledged).
    pub params_per_cycle: f64,
    /// Bytes per parameter the store moves (24 for Adam, 8 for SGD).
    pub store_bytes_per_param: u32,
    /// `params_per_cycle` ÷ (bytes per cycle ÷ store bytes per parameter) (goal ≥ 0.9).
    pub fraction: f64,
    /// The issue's bytes per parameter, which count the gradient too (28 and 12).
    pub issue_bytes_per_param: u32,
    /// `params_per_cycle` against the issue's bound.
    pub issue_fraction: f64,
}

/// One chunk alone through the streamer, cycles from its first gradient beat.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChunkLatency {
    /// Parameters in the chunk.
    pub params: u32,
    /// To its first weight beat out: the update-to-first-weight-out latency.
    pub first_weight_out: u32,
    /// To its update done.
    pub update_done: u32,
    /// To its last weight beat out.
    pub last_weight_out: u32,
    /// To its last store write acknowledged.
    pub committed: u32,
}

/// [`streamer_figures`]' result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamerFigures {
    /// Lanes.
    pub lanes: u32,
    /// The store's full bandwidth, bytes per cycle.
    pub bus_bytes_per_cycle: u32,
    /// The store's read latency, cycles.
    pub mem_latency: u32,
    /// Adam, SGD and AdamW with amsgrad at full bandwidth.
    pub full: Vec<FullRate>,
    /// Adam and SGD with the store the limit.
    pub store: Vec<StoreBound>,
    /// Chunks of 8, 32 and 128 store beats alone.
    pub latency: Vec<ChunkLatency>,
    /// Stall counters at the end: memory, gradient, output.
    pub stalls: [u32; 3],
}

/// Runs one step each of Adam, SGD and AdamW with amsgrad (layers of 8192 × LANES
/// parameters in chunks of 64 store beats) with no backpressure, then Adam and SGD with the
/// store's bandwidth cut by a duty-cycle stall (half the cycles for Adam, seven in eight for
/// SGD), then one chunk alone of 8, 32 and 128 beats, on the default `ws_mx_sim_top` of
/// `lanes` lanes; every weight-out flit and finally every array checked against the golden
/// model. Panics on a mismatch.
pub fn streamer_figures(lanes: u32, seed: u64) -> Result<StreamerFigures, DutError> {
    let p = MxParams::new(lanes);
    let mut dut = Dut::build(sim_spec(&p)?)?;
    dut.set_seed(seed);
    Ok(streamer_figures_on(&mut dut, p))
}

/// [`streamer_figures`] on a built `ws_mx_sim_top` with parameters `p` (the block test runs
/// it under `run_test`, which reruns a failure with waves).
pub fn streamer_figures_on(dut: &mut Dut, p: MxParams) -> StreamerFigures {
    let lanes = p.lanes;
    let mut rng = dut.rng(3);
    let mut mx = Mx::new(dut, p);
    let k = p.beat_words();
    let n = 8192 * lanes;
    let adam = Hyper { weight_decay: 0.0, ..Hyper::ADAM };
    let adamw_ams = Hyper { amsgrad: true, ..Hyper::ADAMW };
    let lat = Hyper::ADAM;
    let specs = [
        (n, 64 * k, adam, false),
        (n, 64 * k, Hyper::SGD, false),
        (n, 64 * k, adamw_ams, false),
        (8 * k, 8 * k, lat, false),
        (32 * k, 32 * k, lat, false),
        (128 * k, 128 * k, lat, false),
    ];
    let layers = layout(&p, &specs, &mut rng);
    let mut store = Store::random(p.mem_bytes, &mut rng);
    init_layers(&mut store, &layers, &mut rng);
    setup(&mut mx, &store, &layers);
    let bus = p.beat_bytes();

    // Full bandwidth, no backpressure: the lanes are the limit.
    mx.patterns(Pattern::Always, Pattern::Always, Pattern::Always, Stall::Never);
    let mut full = Vec::new();
    let mut t = 1u16;
    for (l, name) in [(&layers[0], "Adam"), (&layers[1], "SGD"), (&layers[2], "AdamW amsgrad")] {
        let recs = measured_step(&mut mx, &mut store, l, t, &mut rng);
        let r = rate(&recs, lanes);
        let traffic = 8 * l.desc.arrays().count_ones();
        for pair in recs.windows(2) {
            assert!(pair[0].t_wfirst() < pair[1].t_done(), "no overlap between chunks: {pair:x?}");
            assert!(pair[0].t_wfirst() < pair[0].t_done(), "no forwarding: {:x?}", pair[0]);
        }
        full.push(FullRate {
            optimizer: name,
            store_bytes_per_param: traffic,
            params_per_cycle: r.params_per_cycle,
            cycles_per_param_per_lane: r.cpp_lane,
            store_bound: traffic * lanes >= bus,
        });
    }
    t += 1;

    // The store as the limit: its bandwidth cut by a duty-cycle stall.
    let mut bound = Vec::new();
    for (l, name, period, stalled, issue_bytes) in
        [(&layers[0], "Adam", 2u32, 1u32, 28u32), (&layers[1], "SGD", 8, 7, 12)]
    {
        mx.patterns(Pattern::Always, Pattern::Always, Pattern::Always, Stall::Duty { period, stalled });
        let recs = measured_step(&mut mx, &mut store, l, t, &mut rng);
        let achieved = store_rate(&recs);
        let bpc = f64::from(bus) * f64::from(period - stalled) / f64::from(period);
        let traffic = 8 * l.desc.arrays().count_ones();
        bound.push(StoreBound {
            optimizer: name,
            bytes_per_cycle: bpc,
            params_per_cycle: achieved,
            store_bytes_per_param: traffic,
            fraction: achieved / (bpc / f64::from(traffic)),
            issue_bytes_per_param: issue_bytes,
            issue_fraction: achieved / (bpc / f64::from(issue_bytes)),
        });
    }
    mx.patterns(Pattern::Always, Pattern::Always, Pattern::Always, Stall::Never);

    // One chunk alone: gradient in to first weight out.
    let mut latency = Vec::new();
    for l in &layers[3..] {
        let r = measured_step(&mut mx, &mut store, l, t, &mut rng)[0];
        latency.push(ChunkLatency {
            params: r.n(),
            first_weight_out: r.t_wfirst() - r.t_in(),
            update_done: r.t_done() - r.t_in(),
            last_weight_out: r.t_wlast() - r.t_in(),
            committed: r.t_commit() - r.t_in(),
        });
    }
    let stalls = [cnt::STALL_MEM, cnt::STALL_GRAD, cnt::STALL_OUT].map(|c| mx.counter(c));
    for l in &layers {
        check_layer(&mut mx, &store, l, "after the figures");
    }
    StreamerFigures {
        lanes,
        bus_bytes_per_cycle: bus,
        mem_latency: p.mem_latency,
        full,
        store: bound,
        latency,
        stalls,
    }
}

/// Synthesises `ws_optim_lanes` with `lanes` lanes (default parameters: DIVSQRT_STEPS = 2)
/// for an ECP5-85F with [`synth::ecp5`] at a 100 MHz target. This takes minutes (tens of
/// minutes at four lanes).
pub fn synth_ecp5_lanes(lanes: u32) -> Result<SynthFigures, SynthError> {
    let job =
        Ecp5Job::new(format!("ws_optim_lanes_{lanes}"), "ws_optim_lanes", LANE_FILES).param("LANES", lanes);
    synth::ecp5(&job)
}
