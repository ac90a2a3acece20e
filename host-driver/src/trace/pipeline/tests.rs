//! check-pipeline on synthetic captures built through `Record::encode`, like the trace's own
//! tests: two wafers of 4 PEs (wafer 0 on SwarmX port 3, wafer 1 on port 2) training a
//! two-layer MLP, two chunks a layer, with every latency on the boundary's path set by the
//! test, so each figure of the report is known exactly.

use ws_common::flit::Kind;
use ws_common::mesh::TAG_NONE;
use ws_common::trace::{Record, RecordKind, Source};

use super::*;
use crate::trace::{check, check_perfetto, summarize, summary_table, to_bytes, to_perfetto, Problem, Trace};

const W: u8 = Kind::Weight as u8;
const G: u8 = Kind::Gradient as u8;
const FWD: u8 = 1;
const DX: u8 = 3;
const GRAD: u8 = 5;
const LOSS: u8 = 6;
const FLITS: u64 = 16;
const PES: u16 = 4;
/// FMAs of one wafer's layer phase (FWD, DX, GRAD), its LOSS and its metrics reduction.
const LAYER_FMAS: u32 = 400;
const LOSS_FMAS: u32 = 40;
const METRICS_FMAS: u32 = 8;
/// Wafer 1 is behind port 2, whose weights leave SwarmX this many cycles after port 3's: its
/// phases begin this much after wafer 0's.
const SKEW: u64 = 2;
/// Gradient chunk of layer 0, chunk 1 into MemoryX: this long after the forward's start, and
/// its last flit 15 cycles later (t0).
const T0: u64 = 500 + FLITS - 1;

/// Latencies on the boundary's path.
#[derive(Debug, Clone, Copy)]
struct Lat {
    /// Update done to the next read of layer 0.
    sched: u64,
    /// A read to its first weights out of MemoryX.
    read: u64,
    /// Weights out of MemoryX to port 3's first flit.
    switch: u64,
    /// A port's first flit to its wafer's first FMA.
    wafer: u64,
}

const FAST: Lat = Lat { sched: 10, read: 12, switch: 4, wafer: 6 };

/// `trace::tests::rec` of step `step`.
#[allow(clippy::too_many_arguments)]
fn rec(
    kind: RecordKind,
    source: Source,
    flit_kind: u8,
    layer: u16,
    step: u16,
    chunk: u16,
    begin: u64,
    len: u64,
) -> Record {
    Record { step, ..crate::trace::tests::rec(kind, source, flit_kind, layer, chunk, begin, len) }
}

#[derive(Default)]
struct Cap {
    rs: Vec<Record>,
}

impl Cap {
    fn chunk(&mut self, source: Source, flit_kind: u8, layer: u16, step: u16, c: u16, begin: u64) {
        self.rs.push(rec(RecordKind::Chunk, source, flit_kind, layer, step, c, begin, FLITS));
    }

    #[allow(clippy::too_many_arguments)]
    fn phase(&mut self, wafer: u8, op: u8, layer: u16, step: u16, pc: u16, begin: u64, len: u64, fmas: u32) {
        let mut r = rec(RecordKind::Phase, Source::Wafer(wafer), op, layer, step, pc, begin, len);
        r.flits = PES;
        r.aux = fmas;
        self.rs.push(r);
    }

    /// A STREAM pass of `layer`'s two chunks at `step`: read at `r`, out of MemoryX
    /// `lat.read` later, into SwarmX a cycle after that, out of port 3 `lat.switch` after
    /// leaving MemoryX and out of port 2 `SKEW` after port 3.
    fn weights(&mut self, layer: u16, step: u16, r: u64, lat: Lat) {
        for c in 0..2u16 {
            let r = r + 20 * u64::from(c);
            let out = r + lat.read;
            self.rs.push(rec(RecordKind::Read, Source::MxStreamer, W, layer, step, c, r, lat.read + FLITS));
            self.chunk(Source::MxWeightOut, W, layer, step, c, out);
            self.chunk(Source::SwarmDownIn, W, layer, step, c, out + 1);
            self.chunk(Source::SwarmDownOut(3), W, layer, step, c, out + lat.switch);
            self.chunk(Source::SwarmDownOut(2), W, layer, step, c, out + lat.switch + SKEW);
        }
    }

    /// A forward pass whose first FMA on wafer 0 is at `f`: both layers' weights read in
    /// time for it, and on each wafer FWD 0 and FWD 1 (overlapping: the PEs run skewed), LOSS
    /// and the metrics reduction (instructions 0 to 3 of the step program). An evaluation is
    /// this alone.
    fn forward(&mut self, step: u16, f: u64, lat: Lat) {
        let r = f - lat.read - lat.switch - lat.wafer;
        self.weights(0, step, r, lat);
        self.weights(1, step, r + 40, lat);
        for w in 0..2u8 {
            let f = f + SKEW * u64::from(w);
            self.phase(w, FWD, 0, step, 0, f, 100, LAYER_FMAS);
            self.phase(w, FWD, 1, step, 1, f + 80, 100, LAYER_FMAS);
            self.phase(w, LOSS, 1, step, 2, f + 180, 10, LOSS_FMAS);
            self.phase(w, GRAD, TAG_NONE, step, 3, f + 190, 10, METRICS_FMAS);
        }
    }

    /// The backward pass of the step whose forward began at `f`: on each wafer DX 1, GRAD 1
    /// and GRAD 0 (instructions 4, 5 and 7; MASK at 6 issues no FMA); both layers' gradients
    /// up both ports, reduced, into MemoryX and updated in `upd` cycles each (committed 5
    /// cycles after), their new weights out. Returns the update of layer 0 done (its last
    /// commit).
    fn backward(&mut self, step: u16, f: u64, upd: u64) -> u64 {
        for w in 0..2u8 {
            let f = f + SKEW * u64::from(w);
            self.phase(w, DX, 1, step, 4, f + 200, 100, LAYER_FMAS);
            self.phase(w, GRAD, 1, step, 5, f + 300, 100, LAYER_FMAS);
            self.phase(w, GRAD, 0, step, 7, f + 400, 100, LAYER_FMAS);
        }
        let mut done = 0;
        for (layer, g) in [(1, f + 400), (0, f + 474)] {
            for c in 0..2u16 {
                let g = g + 20 * u64::from(c);
                self.chunk(Source::SwarmUpIn(3), G, layer, step, c, g);
                self.chunk(Source::SwarmUpIn(2), G, layer, step, c, g + 2);
                self.chunk(Source::SwarmUpOut, G, layer, step, c, g + 5);
                self.chunk(Source::MxGradIn, G, layer, step, c, g + 6);
                let mut u = rec(RecordKind::Update, Source::MxStreamer, G, layer, step, c, g + 6, upd);
                done = u.end + 5;
                u.aux = done as u32;
                self.rs.push(u);
                self.chunk(Source::MxWeightOut, W, layer, step.wrapping_add(1), c, u.end - 10);
            }
        }
        done
    }

    /// A training step from `f`; returns its update of layer 0 done.
    fn train(&mut self, step: u16, f: u64, upd: u64, lat: Lat) -> u64 {
        self.forward(step, f, lat);
        self.backward(step, f, upd)
    }

    /// The records numbered as the unit numbers them, in the order their spans end.
    fn records(mut self) -> Vec<Record> {
        self.rs.sort_by_key(|r| (r.end, r.begin, r.source.id()));
        for (i, r) in self.rs.iter_mut().enumerate() {
            r.seq = i as u32;
        }
        self.rs
    }
}

/// The next forward's start when nothing but the path's latencies lies after `done`.
fn next(done: u64, lat: Lat) -> u64 {
    done + lat.sched + lat.read + lat.switch + lat.wafer
}

const F5: u64 = 2000;

/// An evaluation with step number `first` at cycle 1000, then three training steps from
/// `first` at F5: the first updates in 60 cycles, the others in 40. Returns the records and
/// each training step's forward start (wafer 0).
fn three_steps(first: u16, lat: Lat) -> (Vec<Record>, [u64; 3]) {
    let mut c = Cap::default();
    c.forward(first, 1000, lat);
    let done = c.train(first, F5, 60, lat);
    let f6 = next(done, lat);
    let done = c.train(first.wrapping_add(1), f6, 40, lat);
    let f7 = next(done, lat);
    c.train(first.wrapping_add(2), f7, 40, lat);
    (c.records(), [F5, f6, f7])
}

fn report(rs: &[Record]) -> PipelineReport {
    check_pipeline(rs, &PipelineOptions::default())
}

#[test]
fn a_clean_capture_with_phases_passes_the_trace_check_and_perfetto() {
    let (rs, _) = three_steps(5, FAST);
    let t = Trace::from_bytes(&to_bytes(&rs));
    let r = check(&t);
    assert!(r.problems.is_empty(), "{r}");
    let json = to_perfetto(&t, Clock::default());
    let p = check_perfetto(&json);
    assert!(p.problems.is_empty(), "{p}");
    // Each wafer's phases sit in its port's process, one thread per instruction.
    let events = json["traceEvents"].as_array().unwrap();
    let meta = |what: &str, pid: u64, tid: u64| {
        events
            .iter()
            .find(|e| e["ph"] == "M" && e["name"] == what && e["pid"] == pid && e["tid"] == tid)
            .map(|e| e["args"]["name"].as_str().unwrap().to_string())
    };
    let fwd0: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["ph"] == "X" && e["cat"] == "fma" && e["args"]["pc"] == 0).collect();
    assert_eq!(fwd0.len(), 8, "an evaluation and three steps on two wafers");
    let mut places: Vec<(String, String)> = fwd0
        .iter()
        .map(|e| {
            let (pid, tid) = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            (meta("process_name", pid, 0).unwrap(), meta("thread_name", pid, tid).unwrap())
        })
        .collect();
    places.sort();
    places.dedup();
    assert_eq!(
        places,
        [
            ("Wafer 0 (SwarmX port 3)".to_string(), "FMAs: instr 0".to_string()),
            ("Wafer 1 (SwarmX port 2)".to_string(), "FMAs: instr 0".to_string()),
        ]
    );
    let first = fwd0[0];
    assert_eq!(first["name"], "L0 fwd");
    assert_eq!(first["args"]["fmas"], LAYER_FMAS);
    assert_eq!(first["args"]["PEs"], PES);
    assert_eq!(first["args"]["step"], 5);
    let names: Vec<&str> =
        events.iter().filter(|e| e["cat"] == "fma").map(|e| e["name"].as_str().unwrap()).collect();
    for n in ["L1 fwd", "L1 loss", "metrics grad", "L1 dx", "L1 grad", "L0 grad"] {
        assert!(names.contains(&n), "{n}");
    }
    // FWD 0 and FWD 1 of one wafer overlap: on one thread Perfetto would nest them wrongly.
    let pcs: std::collections::BTreeSet<(u64, u64)> = events
        .iter()
        .filter(|e| e["cat"] == "fma")
        .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
        .collect();
    assert_eq!(pcs.len(), 2 * 7, "seven instructions with FMAs on each wafer");
}

#[test]
fn bad_phases_are_caught() {
    let (mut rs, _) = three_steps(5, FAST);
    let i = rs.iter().position(|r| r.kind == RecordKind::Phase && r.chunk == 3).unwrap();
    rs[i].aux = 0;
    let seq = rs[i].seq;
    let j = rs.iter().position(|r| r.kind == RecordKind::Phase && r.chunk == 4).unwrap();
    rs[j].flits = 0;
    let k = rs.iter().position(|r| r.source == Source::MxGradIn).unwrap();
    rs[k].source = Source::Wafer(1);
    let report = check(&Trace::from_bytes(&to_bytes(&rs)));
    let msg = report.to_string();
    assert!(
        report
            .errors()
            .any(|p| matches!(p, Problem::BadPhase { seq: s, layer: TAG_NONE, pc: 3, .. } if *s == seq)),
        "{msg}"
    );
    assert!(msg.contains("FMA phase of instruction 3 (the metrics reduction) counts no FMA"), "{msg}");
    assert!(msg.contains("counts no PE that issued an FMA"), "{msg}");
    assert!(msg.contains("a chunk record from wafer 1 FMAs"), "{msg}");
}

#[test]
fn three_steps_give_the_bubble_and_its_stages() {
    let (rs, [f5, f6, f7]) = three_steps(5, FAST);
    let r = report(&rs);
    assert_eq!(r.ports, 4);
    assert_eq!(r.steps.iter().map(|s| s.step).collect::<Vec<_>>(), [5, 6, 7]);
    assert_eq!(
        r.steps.iter().map(|s| s.start).collect::<Vec<_>>(),
        [Some(f5 + SKEW), Some(f6 + SKEW), Some(f7 + SKEW)]
    );
    // The evaluation before step 5 has step 5's number and came first: its forwards are not
    // step 5's.
    assert_eq!(r.steps[0].wafers[0].forward, Some(f5));
    assert_eq!(r.other_forwards, 2);

    // Step 5's update of layer 0 is done 60 - 1 + 5 cycles after its last gradient began,
    // which ended 15 after beginning: 49 cycles of update; step 6's, 40 cycles long: 29.
    assert_eq!(r.boundaries.len(), 2);
    let b = &r.boundaries[0];
    assert_eq!((b.from, b.to), (5, 6));
    assert_eq!(b.t0, Some(f5 + T0));
    assert_eq!(b.t1, Some(f6 + SKEW));
    assert_eq!(b.bubble, Some(83));
    // update, scheduler, store read, switch (port 2 is SKEW after port 3), wafer.
    assert_eq!(b.stages, [49, 10, 12, 4 + SKEW, 6]);
    assert_eq!(b.step_cycles, Some(f6 - f5));
    let b = &r.boundaries[1];
    assert_eq!(b.bubble, Some(63));
    assert_eq!(b.stages, [29, 10, 12, 6, 6]);
    assert_eq!(r.step_cycles, Some((f6 - f5 + f7 - f6) / 2));
    assert_eq!(r.step_cycles, Some(586));

    // Layer 0 read back at every boundary: the bound of the forwarding path does not allow
    // for the update and the store read, and the update stage has the largest median.
    assert!(r.boundaries.iter().all(|b| b.forwarded == Some(false)));
    assert_eq!(r.bound, Bound::Depths(PipelineDepths::simulated()));
    assert_eq!(r.bound.cycles(), 24);
    assert_eq!(r.verdict, Verdict::Fail { bubble: 73, stage: Stage::Update, stage_cycles: 39 });
    assert!(r.notes.is_empty(), "{:?}", r.notes);
}

#[test]
fn hidden_updates_and_utilisation() {
    let (rs, [f5, _, f7]) = three_steps(5, FAST);
    let r = report(&rs);
    // Layer 1 updates while the wafers compute GRAD 0: all hidden. Layer 0's chunk 0 begins
    // 22 cycles before wafer 1's last FMA, chunk 1 two cycles before.
    let l0 = r.layers.iter().find(|l| l.layer == 0).unwrap();
    assert_eq!((l0.updates, l0.update_cycles, l0.hidden_cycles), (6, 2 * 60 + 4 * 40, 3 * 24));
    assert_eq!((l0.steady_update_cycles, l0.steady_hidden_cycles), (4 * 40, 2 * 24));
    assert!((l0.steady_hidden().unwrap() - 0.3).abs() < 1e-12);
    let l1 = r.layers.iter().find(|l| l.layer == 1).unwrap();
    assert_eq!(l1.hidden(), Some(1.0));

    // The window: step 5's first FMA to step 7's last (wafer 1's GRAD 0).
    let window = (f5, f7 + SKEW + 499);
    assert_eq!(r.window, Some(window));
    let len = window.1 - window.0 + 1;
    let hop = |s| r.hops.iter().find(|h| h.source == s).unwrap();
    // The last gradient chunk leaves SwarmX 13 cycles after the window ends.
    let up = hop(Source::SwarmUpOut);
    assert_eq!((up.records, up.busy_cycles), (12, 12 * FLITS - 13));
    assert!((up.utilisation - (12 * FLITS - 13) as f64 / len as f64).abs() < 1e-12);
    // Port 3's first chunk of step 5 ends inside the window; the evaluation's are outside.
    assert_eq!(hop(Source::SwarmDownOut(3)).records, 3 * 4);
    // A wafer: 5 layer phases, LOSS and the metrics a step; busy 500 cycles a step.
    let w0 = &r.wafers[0];
    let fmas = 3 * u64::from(5 * LAYER_FMAS + LOSS_FMAS + METRICS_FMAS);
    assert_eq!((w0.wafer, w0.pes, w0.fmas, w0.busy_cycles), (0, PES, fmas, 1500));
    assert!((w0.fma_utilisation - fmas as f64 / (f64::from(PES) * len as f64)).abs() < 1e-12);

    // The ideal: 5 layer phases of 400 FMAs on each of two wafers, over 8 PEs.
    assert_eq!(
        r.ideal,
        Some(Ideal { cycles: 500, source: IdealSource::Derived { steps: 3, fmas: 4000, pes: 8 } })
    );
    let given = check_pipeline(&rs, &PipelineOptions { ideal: Some(550), ..Default::default() });
    assert_eq!(given.ideal, Some(Ideal { cycles: 550, source: IdealSource::Given }));
    assert!(
        given.render().contains("ideal  550 cycles (given), the step takes 1.07 x ideal"),
        "{}",
        given.render()
    );
}

#[test]
fn an_evaluation_between_steps_with_the_next_steps_number_is_skipped() {
    let mut c = Cap::default();
    let done = c.train(5, F5, 40, FAST);
    // The evaluation of the weights after step 5 runs with step 6's number.
    let eval = done + 50;
    c.forward(6, eval, FAST);
    let f6 = eval + 300;
    let done6 = c.train(6, f6, 40, FAST);
    c.train(7, next(done6, FAST), 40, FAST);
    let rs = c.records();
    assert!(check(&Trace::from_bytes(&to_bytes(&rs))).problems.is_empty());
    let r = report(&rs);
    assert_eq!(r.steps[1].start, Some(f6 + SKEW));
    assert_eq!(r.other_forwards, 2);
    let b = &r.boundaries[0];
    assert_eq!(b.bubble, Some((f6 + SKEW - (F5 + T0)) as i64));
    // The scheduler stage runs to the training forward's read, not the evaluation's.
    let read = f6 - FAST.read - FAST.switch - FAST.wafer;
    assert_eq!(b.stages, [29, read - done, 12, 6, 6]);
    // The ideal counts the training steps' FMAs only.
    assert_eq!(r.ideal.map(|i| i.cycles), Some(500));
}

#[test]
fn step_numbers_that_wrap_pair_by_time() {
    let (rs, _) = three_steps(0xffff, FAST);
    let r = report(&rs);
    assert_eq!(r.steps.iter().map(|s| s.step).collect::<Vec<_>>(), [0xffff, 0, 1]);
    assert_eq!(r.boundaries.iter().map(|b| b.bubble).collect::<Vec<_>>(), [Some(83), Some(63)]);
    assert_eq!(r.boundaries[0].stages, [49, 10, 12, 6, 6]);
    assert!(r.notes.is_empty(), "{:?}", r.notes);
}

#[test]
fn a_late_store_read_fails_naming_the_scheduler() {
    let late = Lat { sched: 400, ..FAST };
    let (rs, _) = three_steps(5, late);
    let r = report(&rs);
    assert_eq!(r.boundaries[1].stages, [29, 400, 12, 6, 6]);
    // Bubbles of 49 + 430 and 29 + 430 cycles.
    assert_eq!(r.verdict, Verdict::Fail { bubble: 463, stage: Stage::Scheduler, stage_cycles: 400 });
    let e = r.result().unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with(
            "the bubble is 463 cycles, above the bound B = 24 = 2 x (forward buffer 2 + switch 2 + mesh ingress 8): the scheduler stage takes 400 of them; "
        ),
        "{msg}"
    );
    assert!(r.render().contains(&format!("FAIL: {msg}")));
    // A slow read of the store is named as such.
    let slow = Lat { read: 400, ..FAST };
    let r = report(&three_steps(5, slow).0);
    assert!(
        matches!(r.verdict, Verdict::Fail { stage: Stage::StoreRead, stage_cycles: 400, .. }),
        "{:?}",
        r.verdict
    );
    assert!(r.result().unwrap_err().to_string().contains("the store read stage takes 400 of them"));
}

#[test]
fn a_forward_that_starts_before_the_last_gradient_passes() {
    // Each next forward starts 100 cycles before the last gradient of layer 0 arrives (its
    // chunks pipelined with the update).
    let mut c = Cap::default();
    c.train(5, F5, 60, FAST);
    let f6 = F5 + T0 - 100;
    c.train(6, f6, 40, FAST);
    c.train(7, f6 + T0 - 100, 40, FAST);
    let r = report(&c.records());
    assert_eq!(r.steps.len(), 3);
    let b = &r.boundaries[0];
    assert_eq!(b.bubble, Some(SKEW as i64 - 100));
    assert_eq!(b.stages, [0; 5]);
    assert_eq!(r.verdict, Verdict::Pass { bubble: -98 });
    assert!(r.result().is_ok());
}

#[test]
fn a_given_bound_replaces_the_depths() {
    let (rs, _) = three_steps(5, FAST);
    let r = check_pipeline(&rs, &PipelineOptions { bound: Some(50), ..Default::default() });
    assert_eq!(r.bound, Bound::Given(50));
    // Medians: update 39, scheduler 10, store read 12, switch 6, wafer 6.
    assert_eq!(r.verdict, Verdict::Fail { bubble: 73, stage: Stage::Update, stage_cycles: 39 });
    assert!(r.result().unwrap_err().to_string().contains("above the bound B = 50 (given): the update stage"));
}

#[test]
fn a_boundary_without_a_read_is_forwarded() {
    let (rs, _) = three_steps(5, FAST);
    let rs: Vec<Record> = rs.into_iter().filter(|r| r.kind != RecordKind::Read).collect();
    let r = report(&rs);
    // Weights of layer 0 out of MemoryX with no store read: forwarded. The scheduler stage
    // runs to them (after the update's new weights of the same step, which the pass rule
    // skips), and there is no store-read stage.
    assert!(r.boundaries.iter().all(|b| b.forwarded == Some(true)));
    assert_eq!(r.boundaries[1].stages, [29, 22, 0, 6, 6]);
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    assert!(r.render().contains("s6 -> s7  forwarded"), "{}", r.render());
}

#[test]
fn a_capture_without_phases_or_boundaries_has_no_verdict() {
    let mut c = Cap::default();
    c.train(5, F5, 40, FAST);
    let one = c.records();
    let r = report(&one);
    assert_eq!(r.steps.len(), 1);
    assert!(matches!(&r.verdict, Verdict::Unmeasured { reason } if reason.contains("1 training step")));
    assert!(r.result().is_err());
    let none: Vec<Record> = one.into_iter().filter(|r| r.kind != RecordKind::Phase).collect();
    let r = report(&none);
    assert!(r.steps.is_empty() && r.layers.is_empty());
    assert!(
        matches!(&r.verdict, Verdict::Unmeasured { reason } if reason.contains("no wafer FMA phase records"))
    );
    assert!(r.render().contains("no verdict"), "{}", r.render());
}

#[test]
fn the_report_renders_as_tables() {
    let (rs, _) = three_steps(5, FAST);
    let text = report(&rs).render();
    for want in [
        "training steps  3 (s5 ..= s7) on wafer(s) 0, 1 (SwarmX port(s) 3, 2 of 4)\n",
        "not counted     2 forward(s) of layer 0 outside training steps (evaluations)\n",
        "MemoryX updates hidden under wafer compute\n",
        "layer  updates  update cycles  hidden cycles  hidden %  steady-state hidden %\n",
        "0      6        280            72             25.7      30.0\n",
        "steps     layer 0    t0    t1    bubble  update  scheduler  store read  switch  wafer  step\n",
        "s5 -> s6  read back  2515  2598  83      49      10         12          6       6      596\n",
        "median                           73      39      10         12          6       6      586\n",
        "bound  B = 24 = 2 x (forward buffer 2 + switch 2 + mesh ingress 8) cycles\n",
        "ideal  500 cycles (derived: 4000 FMAs of a training step",
        "SwarmX up out",
        "FAIL: the bubble is 73 cycles, above the bound B = 24 = 2 x (forward buffer 2 + switch 2 + mesh ingress 8): the update stage takes 39 of them",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
}

#[test]
fn the_summary_counts_each_wafers_fmas() {
    let (rs, [f5, ..]) = three_steps(5, FAST);
    let s = summarize(&Trace::from_bytes(&to_bytes(&rs)));
    assert!(s.sources.iter().all(|u| !matches!(u.source, Source::Wafer(_))));
    assert_eq!(s.wafers.len(), 2);
    let w = &s.wafers[1];
    // The evaluation (FWD 0, FWD 1, LOSS, metrics) and three training steps.
    let fmas = u64::from(2 * LAYER_FMAS + LOSS_FMAS + METRICS_FMAS)
        + 3 * u64::from(5 * LAYER_FMAS + LOSS_FMAS + METRICS_FMAS);
    assert_eq!((w.wafer, w.phases, w.pes, w.fmas, w.busy_cycles), (1, 4 + 3 * 7, PES, fmas, 200 + 3 * 500));
    assert!((w.fma_utilisation - fmas as f64 / (f64::from(PES) * s.span_cycles as f64)).abs() < 1e-12);
    // Layer 0 with step 5's number computed from the evaluation's forward to the training step's
    // GRAD 0; the metrics reduction is no layer's.
    let p = s.phases.iter().find(|p| (p.layer, p.step) == (0, 5)).unwrap();
    assert_eq!(p.fmas, Some((1000, f5 + SKEW + 499)));
    assert!(s.phases.iter().all(|p| p.layer != TAG_NONE));
    let table = summary_table(&s, Clock::default());
    assert!(table.contains("wafer  phases  PEs  FMAs  busy cycles  busy %  FMA use %"), "{table}");
}

#[test]
fn a_long_run_shows_the_first_the_largest_and_the_last_boundaries() {
    let b = |i: u16, bubble: i64| Boundary {
        from: i,
        to: i + 1,
        t0: None,
        t1: None,
        bubble: Some(bubble),
        stages: [0; 5],
        step_cycles: None,
        forwarded: None,
    };
    let few: Vec<Boundary> = (0..render::SHOWN_BOUNDARIES as u16).map(|i| b(i, 10)).collect();
    assert!(render::shown_boundaries(&few, false).iter().all(|s| *s));
    let mut many: Vec<Boundary> = (0..40).map(|i| b(i, 100 + i64::from(i % 3))).collect();
    for (i, big) in [(10, 9000), (20, 8000), (25, 7000), (30, 6000), (31, 5000)] {
        many[i].bubble = Some(big);
    }
    let shown = render::shown_boundaries(&many, false);
    let at: Vec<usize> = (0..40).filter(|&i| shown[i]).collect();
    assert_eq!(at, [0, 1, 2, 3, 10, 20, 25, 30, 38, 39], "the first 4, the 4 largest, the last 2");
    assert!(render::shown_boundaries(&many, true).iter().all(|s| *s), "--all shows every one");
}
