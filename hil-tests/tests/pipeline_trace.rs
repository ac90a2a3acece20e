//! Scenario: the hardware pipeline trace (issue 21, docs/trace.md) of training runs on the
//! simulated board's two wafers.
//!
//! - Two traced runs of the digits, one after the other on one board (each a new host
//!   session): each trace is whole (every record the unit wrote arrived, none lost, the bytes
//!   match the unit's counts), passes every check of `host_driver::trace` (spans closed and
//!   ordered per hop, every chunk that entered SwarmX or MemoryX left it, flows paired), and
//!   shows what the run did: every step's weights broadcast to both wafers' ports, every
//!   gradient chunk up both ports, reduced, updated and streamed out. The two traces hold the
//!   same records but for their timestamps, and tracing changes nothing: both runs end
//!   bit-identical to the golden models.
//! - `check-pipeline` on a traced run: with layer 0 forwarded (the default) every boundary of
//!   the run is forwarded and the check passes; the same run with the debug switch
//!   (`--read-back`) reads layer 0 back at every boundary and fails, naming the update stage.
//!   Both end bit-identical to the golden models.
//! - A host that stops reading channel 6 over a run: the ring fills, records are lost and
//!   counted, and once it reads again (over a second run) the lost count the board reports is
//!   exactly the gap the host finds in the sequence numbers; the training is untouched.
//!
//! Needs: `ws-sim` and the firmware (`cargo xtask build`).

use std::collections::BTreeSet;
use std::time::Duration;

use hil_tests::{Needs, Rig};
use host_driver::link::{Config, Link};
use host_driver::trace::{self, Clock, Trace};
use host_driver::train::data::Dataset;
use host_driver::train::{self, Board, GoldenBoard, Options, Summary, TrainConfig};
use ws_common::ctrl::cmd::{TraceCtl, TraceOp, TRACE_ALL};
use ws_common::mesh::TAG_NONE;
use ws_common::trace::{PhaseOp, Record, RecordKind, Source};
use ws_hdl::sim::SimProcess;

const STEPS: u32 = 4;
/// Steps of the run whose trace overflows: more records than channel 6's ring and the host's
/// receive buffer hold.
const LONG: u32 = 12;

fn config(steps: u32) -> TrainConfig {
    TrainConfig { steps: Some(steps), wafers: 2, seed: 5, ..TrainConfig::default() }
}

fn link(sim: &SimProcess, cfg: Config) -> Link {
    let t = hil_tests::connect(sim, sim.phy_addr());
    Link::connect(Box::new(t), cfg, Duration::from_secs(30)).expect("HELLO")
}

fn board(sim: &SimProcess, cfg: Config) -> Board {
    Board::new(host_driver::mesh::open_board(link(sim, cfg), "sim").expect("the mesh"), "sim")
}

fn run(dev: &mut dyn train::Backend, steps: u32, opts: &Options) -> Summary {
    train::train(dev, &config(steps), &Dataset::digits(), opts, &mut |_| {}).expect("training")
}

fn golden(steps: u32) -> Summary {
    run(&mut GoldenBoard::new(), steps, &Options::default())
}

/// The records of `t` without their timestamps and sequence numbers: what the run did.
fn shape(t: &Trace) -> Vec<(u8, u8, u16, u16, u16, u16)> {
    let mut v: Vec<_> =
        t.records.iter().map(|r| (r.kind as u8, r.source.id(), r.layer, r.step, r.chunk, r.flits)).collect();
    v.sort_unstable();
    v
}

fn of(t: &Trace, s: Source, step: u16) -> impl Iterator<Item = &Record> {
    t.records.iter().filter(move |r| r.source == s && r.step == step)
}

/// Each wafer's FMA phases of every step: one record per instruction with FMAs (FWD and
/// GRAD of every layer, DX above layer 0, LOSS, the metrics GRAD), tagged with its layer, and
/// FMA counts that are what the shapes say: FWD and DX issue slots × K × M, GRAD samples ×
/// M × (K + 1) and the metrics reduction 2 per sample, with the same slots and samples in
/// every layer of a wafer, and the wafers' samples adding up to the batch.
fn shows_the_phases(t: &Trace, dims: &[usize], batch: usize) {
    let layers = dims.len() - 1;
    for step in 1..=STEPS as u16 {
        let mut samples = 0;
        for w in 0..2u8 {
            let ph: Vec<&Record> = of(t, Source::Wafer(w), step).collect();
            let find = |op: PhaseOp, tag: u16| {
                let v: Vec<&&Record> =
                    ph.iter().filter(|r| PhaseOp::from_op(r.flit_kind) == op && r.layer == tag).collect();
                assert_eq!(v.len(), 1, "step {step} wafer {w}: {} records of {op:?} tag {tag}", v.len());
                assert!(v[0].kind == RecordKind::Phase && v[0].begin <= v[0].end && v[0].flits >= 1);
                u64::from(v[0].aux)
            };
            let n = find(PhaseOp::Grad, TAG_NONE) / 2;
            let slots = find(PhaseOp::Fwd, 0) / (dims[0] * dims[1]) as u64;
            assert!(n >= 1 && slots >= n, "step {step} wafer {w}: {n} samples in {slots} slots");
            for l in 0..layers {
                let (k, m) = (dims[l] as u64, dims[l + 1] as u64);
                assert_eq!(
                    find(PhaseOp::Fwd, l as u16),
                    slots * k * m,
                    "step {step} wafer {w}: FWD L{l} FMAs"
                );
                assert_eq!(
                    find(PhaseOp::Grad, l as u16),
                    n * m * (k + 1),
                    "step {step} wafer {w}: GRAD L{l} FMAs"
                );
                if l > 0 {
                    assert_eq!(
                        find(PhaseOp::Dx, l as u16),
                        slots * k * m,
                        "step {step} wafer {w}: DX L{l} FMAs"
                    );
                }
            }
            find(PhaseOp::Loss, layers as u16 - 1);
            assert_eq!(ph.len(), 2 * layers + 2 + layers - 1, "step {step} wafer {w}: phase records");
            samples += n;
        }
        assert_eq!(samples, batch as u64, "step {step}: the wafers' samples");
    }
}

/// The trace shows the run: per step, weights down both wafers' ports, gradients up both,
/// reduced into MemoryX and every reduced chunk updated.
fn shows_the_run(t: &Trace, layers: u16) {
    // Wafer w sits on port 3 − w.
    for step in 1..=STEPS as u16 {
        for port in [3u8, 2] {
            let down: BTreeSet<u16> = of(t, Source::SwarmDownOut(port), step).map(|r| r.layer).collect();
            assert_eq!(down, (0..layers).collect(), "step {step}: weights of every layer into port {port}");
            let up: BTreeSet<u16> = of(t, Source::SwarmUpIn(port), step).map(|r| r.layer).collect();
            assert_eq!(up, (0..layers).collect(), "step {step}: gradients of every layer out of port {port}");
        }
        let reduced: BTreeSet<(u16, u16)> =
            of(t, Source::SwarmUpOut, step).map(|r| (r.layer, r.chunk)).collect();
        let updated: BTreeSet<(u16, u16)> = of(t, Source::MxStreamer, step)
            .filter(|r| r.kind == RecordKind::Update)
            .map(|r| (r.layer, r.chunk))
            .collect();
        assert!(!reduced.is_empty(), "step {step}: no reduced chunk");
        assert_eq!(reduced, updated, "step {step}: every reduced chunk is updated");
        for u in of(t, Source::MxStreamer, step).filter(|r| r.kind == RecordKind::Update) {
            let g = of(t, Source::MxGradIn, step)
                .find(|g| (g.layer, g.chunk) == (u.layer, u.chunk))
                .unwrap_or_else(|| {
                    panic!("step {step}: update of L{} c{} without its gradients", u.layer, u.chunk)
                });
            assert!(g.begin <= u.begin && u.begin <= u.end, "step {step}: the update follows its gradients");
        }
    }
}

#[test]
fn traced_runs_back_to_back_are_whole_checked_and_change_nothing() {
    let Some(rig) = Rig::open("pipeline_trace", Needs::default()) else { return };
    let Some(sim) = rig.sim() else { return };
    let want = golden(STEPS);
    let mut shapes = Vec::new();
    for job in 0..2 {
        let s =
            run(&mut board(sim, Config::default()), STEPS, &Options { trace: true, ..Options::default() });
        for (l, (a, b)) in s.arrays.iter().zip(&want.arrays).enumerate() {
            assert_eq!(a, b, "job {job}: layer {l} differs from the golden models");
        }
        let (state, bytes) = s.trace.as_ref().expect("the trace");
        let t = Trace::from_bytes(bytes);
        println!("job {job}: {} records, high water {}", t.records.len(), state.high_water);
        let json = trace::to_perfetto(&t, Clock::new(trace::DEFAULT_CLOCK_HZ).unwrap());
        let report = trace::check_capture(&t, &json, Some(state));
        assert!(report.is_ok(), "job {job}: {}", report.render(20));
        assert_eq!(state.lost, 0, "job {job}: records lost with a host reading channel 6");
        assert_eq!(t.records.len() as u32, state.records, "job {job}: records the unit wrote");
        shows_the_run(&t, s.run.layers() as u16);
        shows_the_phases(&t, &s.run.dims, s.batch);
        shapes.push(shape(&t));
    }
    assert_eq!(shapes[0], shapes[1], "the same run traced twice holds the same records");
}

#[test]
fn check_pipeline_passes_forwarded_and_fails_read_back_on_the_update_stage() {
    use host_driver::trace::pipeline::Stage;
    use host_driver::trace::{check_pipeline, PipelineOptions, Verdict};

    let Some(rig) = Rig::open("pipeline_check", Needs::default()) else { return };
    let Some(sim) = rig.sim() else { return };
    let want = golden(STEPS);
    for read_back in [false, true] {
        let opts = Options { trace: true, read_back, ..Options::default() };
        let s = run(&mut board(sim, Config::default()), STEPS, &opts);
        for (l, (a, b)) in s.arrays.iter().zip(&want.arrays).enumerate() {
            assert_eq!(a, b, "read back {read_back}: layer {l} differs from the golden models");
        }
        let (_, bytes) = s.trace.as_ref().expect("the trace");
        let t = Trace::from_bytes(bytes);
        let r = check_pipeline(&t.records, &PipelineOptions::default());
        assert_eq!(r.boundaries.len(), STEPS as usize - 1, "read back {read_back}: boundaries");
        for b in &r.boundaries {
            assert_eq!(b.forwarded, Some(!read_back), "read back {read_back}: s{} -> s{}", b.from, b.to);
        }
        println!("read back {read_back}: {:?}", r.verdict);
        if read_back {
            match r.verdict {
                Verdict::Fail { stage, .. } => assert_eq!(stage, Stage::Update, "the stage named"),
                ref v => panic!("read back: the check should fail, got {v:?}"),
            }
        } else {
            assert!(r.result().is_ok(), "forwarded: {}", r.render());
        }
    }
}

#[test]
fn a_host_that_stops_reading_loses_records_counted_and_training_is_untouched() {
    let Some(rig) = Rig::open("pipeline_trace_loss", Needs::default()) else { return };
    let Some(sim) = rig.sim() else { return };
    // A small receive buffer, so channel 6's credit runs out soon.
    let cfg = Config { rx_buffer: 4 << 10, ..Config::default() };
    let mut dev = board(sim, cfg);
    let started = dev.mesh().link().request(&TraceCtl { op: TraceOp::Start, probes: TRACE_ALL }, STALL, 0);
    let started = started.expect("trace start");
    // Nothing reads channel 6 while the run trains.
    let s = run(&mut dev, LONG, &Options::default());
    let want = golden(LONG);
    assert_eq!(s.arrays, want.arrays, "the run with a stalled trace differs from the golden models");
    let during = dev.mesh().link().request(&TraceCtl { op: TraceOp::Status, probes: 0 }, STALL, 0).unwrap();
    assert!(during.lost > 0, "the ring never filled: {during:?}");
    // Reading again: the host keeps what the endpoint holds and what the board still sends,
    // and a second run's records follow the lost ones, so the gap shows.
    let from = dev.mesh().link().keep_trace();
    assert_eq!(from, started.start, "nothing was read before");
    let again = run(&mut dev, LONG, &Options::default());
    assert_eq!(again.arrays, want.arrays, "the second run differs from the golden models");
    let (end, bytes) = dev.mesh().link().trace_stop(STALL).expect("the rest of the trace");
    let t = Trace::from_bytes(&bytes);
    println!(
        "{} records formed, {} lost ({}), high water {}",
        end.records + end.lost,
        end.lost,
        t.lost.describe(),
        end.high_water
    );
    assert_eq!(t.lost.count(), u64::from(end.lost), "the seq gaps are the records the board counted lost");
    assert_eq!(t.records.len() as u32, end.records);
    assert!(t.undecodable.is_empty() && t.trailing_bytes == 0);
}

const STALL: Duration = Duration::from_secs(20);
