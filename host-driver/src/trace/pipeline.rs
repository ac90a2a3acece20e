//! `check-pipeline`: what a capture says about the weight-streaming pipeline across training
//! steps (docs/trace.md "check-pipeline"), from the wafers' FMA phases and the stream hops:
//!
//! - how much of MemoryX's update time the wafers' compute hides, per layer;
//! - the bubble at each iteration boundary, from the last gradient of layer 0 into MemoryX to
//!   the next step's first FMA of layer 0 on the latest wafer, split into the stages of the path
//!   (update, scheduler, store read, switch, wafer; a forwarded boundary has no store read),
//!   against a bound of twice the configured pipeline depths on the forwarding path
//!   ([`PipelineDepths`]);
//! - the cycles of a step against an ideal;
//! - each stream hop's and each wafer's use over the training steps.
//!
//! [`check_pipeline`] analyses decoded records into a [`PipelineReport`];
//! [`PipelineReport::render`] prints it as tables and [`PipelineReport::result`] is the verdict
//! for an exit status.
//!
//! Step numbers are 16 bits and wrap, and an evaluation may run with a training step's number
//! (it evaluates the weights of that step), so records are paired with a training step by time
//! as well as by number: a training step is a run of backward phases (DX, or a layer's GRAD)
//! with one step number, its forward of layer 0 on a wafer is the latest FWD of layer 0 with
//! that number beginning before the wafer's first backward phase of it, and the records of its
//! boundary lie between its first backward phase and the next step's.

use std::collections::{BTreeMap, HashMap};

use ws_common::mesh::TAG_NONE;
use ws_common::trace::{PhaseOp, Record, RecordKind, Source};

use super::links::{commit_cycle, swarm_ports, wafer_port, Hop, Links};
use super::Clock;

mod render;
mod report;
#[cfg(test)]
mod tests;

pub use report::*;

/// The median: the middle value, the mean of the two middle ones (rounded down) for an even
/// count.
fn median<T: Copy + Ord + Into<i128>>(mut v: Vec<T>) -> Option<i128> {
    v.sort_unstable();
    let n = v.len();
    match n {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2].into()),
        n => Some((v[n / 2 - 1].into() + v[n / 2].into()).div_euclid(2)),
    }
}

fn median_u64(v: Vec<u64>) -> Option<u64> {
    median(v).map(|m| m as u64)
}

/// Inclusive spans merged into disjoint, ordered ones (adjacent spans join).
fn merged(mut spans: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    spans.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
    for (b, e) in spans {
        match out.last_mut() {
            Some(last) if b <= last.1.saturating_add(1) => last.1 = last.1.max(e),
            _ => out.push((b, e)),
        }
    }
    out
}

/// Cycles of `b ..= e` that merged spans cover.
fn covered(merged: &[(u64, u64)], b: u64, e: u64) -> u64 {
    let k = merged.partition_point(|s| s.1 < b);
    merged[k..].iter().take_while(|s| s.0 <= e).map(|s| s.1.min(e) - s.0.max(b) + 1).sum()
}

/// Cycles of the window `w` that the spans cover.
fn busy_in(spans: impl Iterator<Item = (u64, u64)>, w: (u64, u64)) -> u64 {
    let m = merged(spans.filter(|&(b, e)| e >= w.0 && b <= w.1).collect());
    covered(&m, w.0, w.1)
}

fn phase_wafer(r: &Record) -> Option<u8> {
    match (r.kind, r.source) {
        (RecordKind::Phase, Source::Wafer(w)) => Some(w),
        _ => None,
    }
}

fn op(r: &Record) -> PhaseOp {
    PhaseOp::from_op(r.flit_kind)
}

/// A backward phase: DX, or a layer's GRAD (not the metrics reduction).
fn is_backward(r: &Record) -> bool {
    matches!(op(r), PhaseOp::Dx | PhaseOp::Grad) && r.layer != TAG_NONE
}

/// A phase that computes a layer: FWD, DX or a layer's GRAD (not LOSS, not the metrics
/// reduction), which the derived ideal counts.
fn is_layer_work(r: &Record) -> bool {
    match op(r) {
        PhaseOp::Fwd | PhaseOp::Dx => true,
        PhaseOp::Grad => r.layer != TAG_NONE,
        PhaseOp::Loss | PhaseOp::Other(_) => false,
    }
}

/// The records of each (hop, layer, step), by begin.
struct Index<'a> {
    records: &'a [Record],
    by: HashMap<(Hop, u16, u16), Vec<usize>>,
}

impl<'a> Index<'a> {
    fn new(records: &'a [Record]) -> Self {
        let mut by: HashMap<(Hop, u16, u16), Vec<usize>> = HashMap::new();
        for (i, r) in records.iter().enumerate() {
            let h = Hop::of(r);
            if h != Hop::Other {
                by.entry((h, r.layer, r.step)).or_default().push(i);
            }
        }
        for v in by.values_mut() {
            v.sort_by_key(|&i| (records[i].begin, records[i].seq));
        }
        Self { records, by }
    }

    fn list(&self, hop: Hop, layer: u16, step: u16) -> &[usize] {
        self.by.get(&(hop, layer, step)).map_or(&[], Vec::as_slice)
    }

    /// The first record of the last pass of (layer, step) at `hop` that began at or before
    /// `bound`. A pass carries a layer's chunks in order, so it starts where the chunk index
    /// last failed to rise: an earlier pass with the same step (an evaluation's) is skipped.
    fn pass_start(&self, hop: Hop, layer: u16, step: u16, bound: u64) -> Option<usize> {
        let list = self.list(hop, layer, step);
        let n = list.partition_point(|&i| self.records[i].begin <= bound);
        let mut k = n.checked_sub(1)?;
        while k > 0 && self.records[list[k - 1]].chunk < self.records[list[k]].chunk {
            k -= 1;
        }
        Some(list[k])
    }

    /// The record of (layer, step) at `hop` beginning in `lo .. hi` that ends last.
    fn last_end_in(&self, hop: Hop, layer: u16, step: u16, lo: u64, hi: u64) -> Option<usize> {
        self.list(hop, layer, step)
            .iter()
            .copied()
            .filter(|&i| (lo..hi).contains(&self.records[i].begin))
            .max_by_key(|&i| (self.records[i].end, self.records[i].seq))
    }
}

/// The training steps: runs of backward phases with one step number, in time order.
fn training_steps(records: &[Record]) -> Vec<TrainingStep> {
    let mut backward: Vec<&Record> =
        records.iter().filter(|r| phase_wafer(r).is_some() && is_backward(r)).collect();
    backward.sort_by_key(|r| (r.begin, r.seq));
    let mut steps: Vec<TrainingStep> = Vec::new();
    // Per step: wafer → (first backward begin, last backward end).
    let mut spans: Vec<BTreeMap<u8, (u64, u64)>> = Vec::new();
    for r in backward {
        let w = phase_wafer(r).expect("a phase");
        if steps.last().is_none_or(|s| s.step != r.step) {
            steps.push(TrainingStep {
                step: r.step,
                wafers: Vec::new(),
                start: None,
                first_backward: r.begin,
                end: r.end,
            });
            spans.push(BTreeMap::new());
        }
        let s = steps.last_mut().expect("pushed");
        s.end = s.end.max(r.end);
        let e = spans.last_mut().expect("pushed").entry(w).or_insert((r.begin, r.end));
        e.1 = e.1.max(r.end);
    }
    // Each wafer's forwards of layer 0, by begin.
    let mut forwards: BTreeMap<(u8, u16), Vec<u64>> = BTreeMap::new();
    for r in records {
        if let Some(w) = phase_wafer(r).filter(|_| op(r) == PhaseOp::Fwd && r.layer == 0) {
            forwards.entry((w, r.step)).or_default().push(r.begin);
        }
    }
    for v in forwards.values_mut() {
        v.sort_unstable();
    }
    for (s, spans) in steps.iter_mut().zip(spans) {
        for (w, (first_backward, end)) in spans {
            let forward = forwards.get(&(w, s.step)).and_then(|v| {
                let n = v.partition_point(|&b| b < first_backward);
                n.checked_sub(1).map(|k| v[k])
            });
            let from = forward.unwrap_or(first_backward);
            let fmas = records
                .iter()
                .filter(|r| phase_wafer(r) == Some(w) && r.step == s.step && is_layer_work(r))
                .filter(|r| (from..=end).contains(&r.begin))
                .map(|r| u64::from(r.aux))
                .sum();
            s.wafers.push(WaferStep { wafer: w, forward, first_backward, end, fmas });
        }
        s.start = s.wafers.iter().filter_map(|w| w.forward).max();
    }
    steps
}

/// Analyses a capture's records (in any order) for the pipeline check.
pub fn check_pipeline(records: &[Record], opts: &PipelineOptions) -> PipelineReport {
    let ports = opts.ports.unwrap_or_else(|| swarm_ports(records));
    let bound = opts.bound.map_or(Bound::Depths(opts.depths), Bound::Given);
    let mut notes = Vec::new();
    let steps = training_steps(records);
    let index = Index::new(records);
    let links = Links::new(records);
    let has_phases = records.iter().any(|r| phase_wafer(r).is_some());
    if !has_phases {
        notes.push(
            "the capture holds no wafer FMA phase records (sources 0x30 + w), so it shows no training step"
                .into(),
        );
    }
    for s in &steps {
        for w in s.wafers.iter().filter(|w| w.forward.is_none()) {
            notes.push(format!(
                "training step s{}: wafer {} has no forward of layer 0 in the capture before its backward phases",
                s.step, w.wafer
            ));
        }
    }
    let chosen: usize = steps.iter().map(|s| s.wafers.iter().filter(|w| w.forward.is_some()).count()).sum();
    let all_forwards =
        records.iter().filter(|r| phase_wafer(r).is_some() && op(r) == PhaseOp::Fwd && r.layer == 0).count();
    let other_forwards = all_forwards.saturating_sub(chosen);

    let window = steps.first().map(|first| {
        let begin = first.wafers.iter().map(|w| w.forward.unwrap_or(w.first_backward)).min();
        let end = steps.iter().map(|s| s.end).max().unwrap_or(first.end);
        (begin.unwrap_or(first.first_backward), end)
    });

    let layers = if has_phases { hiding(records, &steps) } else { Vec::new() };
    let boundaries: Vec<Boundary> = steps
        .windows(2)
        .map(|pair| boundary(&pair[0], &pair[1], &index, &links, ports, &mut notes))
        .collect();
    let step_cycles = median_u64(boundaries.iter().filter_map(|b| b.step_cycles).collect());
    let pes = pes_of(records);
    let ideal = match opts.ideal {
        Some(cycles) => Some(Ideal { cycles, source: IdealSource::Given }),
        None => derived_ideal(&steps, &pes),
    };
    let (hops, wafers) = match window {
        Some(w) => busy(records, w, &pes),
        None => (Vec::new(), Vec::new()),
    };
    let verdict = verdict(&steps, &boundaries, bound.cycles(), has_phases);
    PipelineReport {
        clock: opts.clock,
        ports,
        steps,
        other_forwards,
        window,
        layers,
        boundaries,
        bound,
        step_cycles,
        ideal,
        hops,
        wafers,
        notes,
        verdict,
    }
}

/// Per wafer: its PEs, the most that issued an FMA in one phase.
fn pes_of(records: &[Record]) -> BTreeMap<u8, u16> {
    let mut pes: BTreeMap<u8, u16> = BTreeMap::new();
    for r in records {
        if let Some(w) = phase_wafer(r) {
            let p = pes.entry(w).or_default();
            *p = (*p).max(r.flits);
        }
    }
    pes
}

/// Per layer: the updates' cycles under the union of every wafer's phases.
fn hiding(records: &[Record], steps: &[TrainingStep]) -> Vec<LayerHiding> {
    let compute =
        merged(records.iter().filter(|r| phase_wafer(r).is_some()).map(|r| (r.begin, r.end)).collect());
    // The first training step's updates: its step number, beginning between its first backward
    // phase and the next step's.
    let first = steps.first().map(|s| {
        let hi = steps.get(1).map_or(u64::MAX, |n| n.first_backward);
        (s.step, s.first_backward, hi)
    });
    let mut layers: BTreeMap<u16, LayerHiding> = BTreeMap::new();
    for r in records.iter().filter(|r| Hop::of(r) == Hop::Update) {
        let l = layers.entry(r.layer).or_insert(LayerHiding {
            layer: r.layer,
            updates: 0,
            update_cycles: 0,
            hidden_cycles: 0,
            steady_update_cycles: 0,
            steady_hidden_cycles: 0,
        });
        let len = r.end - r.begin + 1;
        let hidden = covered(&compute, r.begin, r.end);
        l.updates += 1;
        l.update_cycles += len;
        l.hidden_cycles += hidden;
        let warmup = first.is_some_and(|(step, lo, hi)| r.step == step && (lo..hi).contains(&r.begin));
        if !warmup {
            l.steady_update_cycles += len;
            l.steady_hidden_cycles += hidden;
        }
    }
    layers.into_values().collect()
}

/// The boundary from training step `a` to `b`, with its stages.
fn boundary(
    a: &TrainingStep,
    b: &TrainingStep,
    index: &Index<'_>,
    links: &Links,
    ports: u8,
    notes: &mut Vec<String>,
) -> Boundary {
    let records = index.records;
    let (from, to) = (a.step, b.step);
    let name = format!("boundary s{from} -> s{to}");
    if to != from.wrapping_add(1) {
        notes.push(format!(
            "{name}: the step numbers are not consecutive (a training step is missing from the capture?)"
        ));
    }
    // The records of the boundary's `from` side begin between a's first backward phase and b's.
    let (lo, hi) = (a.first_backward, b.first_backward);
    let t0 = index.last_end_in(Hop::GradIn, 0, from, lo, hi).map(|i| records[i].end);
    if t0.is_none() {
        notes.push(format!("{name}: no gradient chunk of layer 0 into MemoryX, so no t0 and no bubble"));
    }
    let t1 = b.start;
    if t1.is_none() {
        notes.push(format!("{name}: no wafer's forward of layer 0 of s{to}, so no t1 and no bubble"));
    }
    let step_cycles = match (a.start, b.start) {
        (Some(x), Some(y)) if y >= x => Some(y - x),
        _ => None,
    };
    let bubble = t0.zip(t1).map(|(t0, t1)| t1 as i64 - t0 as i64);
    let mut out = Boundary { from, to, t0, t1, bubble, stages: [0; 5], step_cycles, forwarded: None };
    let (Some(t0), Some(t1)) = (t0, t1) else { return out };

    // The end of each stage but the last, as the records mark it.
    let update = index.last_end_in(Hop::Update, 0, from, lo, hi).map(|i| {
        let r = &records[i];
        r.end.max(commit_cycle(r))
    });
    let read = index.pass_start(Hop::Read, 0, to, t1);
    let weights_out = match read {
        // The weights the read put out, which on weight-out may follow updated weights of the
        // same step.
        Some(i) => links
            .to(i)
            .iter()
            .copied()
            .filter(|&j| links.hop(j) == Hop::WeightOut)
            .min_by_key(|&j| records[j].begin)
            .or_else(|| index.pass_start(Hop::WeightOut, 0, to, t1)),
        None => index.pass_start(Hop::WeightOut, 0, to, t1),
    }
    .map(|i| records[i].begin);
    let switch = b
        .wafers
        .iter()
        .filter_map(|w| {
            let port = wafer_port(ports, w.wafer)?;
            let i = index.pass_start(Hop::DownOut(port), 0, to, w.forward?)?;
            Some(records[i].begin)
        })
        .max();
    let read = read.map(|i| records[i].begin);
    let mut marks = [update, read, weights_out, switch];
    if update.is_none() {
        notes.push(format!("{name}: no update of layer 0 of s{from}: its time is in the next stage"));
    }
    if read.is_some() {
        out.forwarded = Some(false);
    } else if weights_out.is_some() {
        // Forwarded (docs/mesh-array.md "Forwarding"): the update's own flits, stamped with
        // step `to`, went on to the wafers. No read and no store-read stage.
        out.forwarded = Some(true);
        marks[1] = weights_out;
    } else {
        notes.push(format!("{name}: no store read of layer 0 of s{to}: its time is in the next stage"));
    }
    if weights_out.is_none() {
        notes.push(format!(
            "{name}: no weights of layer 0 of s{to} out of MemoryX: their time is in the next stage"
        ));
    }
    if switch.is_none() {
        notes.push(format!(
            "{name}: no weights of layer 0 of s{to} out of a wafer's SwarmX port: their time is in the wafer stage"
        ));
    }
    if t1 > t0 {
        // Each stage ends at its mark, kept between the previous stage's end and t1, so the
        // stages are never negative and add up to the bubble.
        let mut at = t0;
        for (k, m) in marks.iter().enumerate() {
            let end = m.map_or(at, |m| m.clamp(at, t1));
            out.stages[k] = end - at;
            at = end;
        }
        out.stages[Stage::Wafer.index()] = t1 - at;
    }
    out
}

/// The ideal step from the FMAs: per training step with every wafer's forward, its FMAs over
/// its wafers' PEs; the medians of both.
fn derived_ideal(steps: &[TrainingStep], pes: &BTreeMap<u8, u16>) -> Option<Ideal> {
    let whole: Vec<&TrainingStep> =
        steps.iter().filter(|s| s.wafers.iter().all(|w| w.forward.is_some())).collect();
    let fmas = median_u64(whole.iter().map(|s| s.wafers.iter().map(|w| w.fmas).sum()).collect())?;
    let pe_count = median_u64(
        whole
            .iter()
            .map(|s| s.wafers.iter().map(|w| u64::from(pes.get(&w.wafer).copied().unwrap_or(0))).sum())
            .collect(),
    )?;
    (pe_count > 0).then(|| Ideal {
        cycles: fmas.div_ceil(pe_count),
        source: IdealSource::Derived { steps: whole.len(), fmas, pes: pe_count },
    })
}

/// Each chunk hop's and each wafer's use of the window.
fn busy(records: &[Record], w: (u64, u64), pes: &BTreeMap<u8, u16>) -> (Vec<HopBusy>, Vec<WaferBusy>) {
    let len = (w.1 - w.0 + 1) as f64;
    let inside = |r: &&Record| r.end >= w.0 && r.begin <= w.1;
    let mut by_source: BTreeMap<Source, Vec<(u64, u64)>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.kind == RecordKind::Chunk).filter(inside) {
        by_source.entry(r.source).or_default().push((r.begin, r.end));
    }
    let hops = by_source
        .into_iter()
        .map(|(source, spans)| {
            let records = spans.len();
            let busy_cycles = busy_in(spans.into_iter(), w);
            HopBusy { source, records, busy_cycles, utilisation: busy_cycles as f64 / len }
        })
        .collect();
    let wafers = pes
        .iter()
        .map(|(&wafer, &pes)| {
            let mine = || records.iter().filter(move |r| phase_wafer(r) == Some(wafer));
            let fmas: u64 = mine().filter(|r| (w.0..=w.1).contains(&r.begin)).map(|r| u64::from(r.aux)).sum();
            let busy_cycles = busy_in(mine().map(|r| (r.begin, r.end)), w);
            let fma_utilisation = fmas as f64 / (f64::from(pes.max(1)) * len);
            WaferBusy { wafer, pes, fmas, busy_cycles, fma_utilisation }
        })
        .collect();
    (hops, wafers)
}

fn verdict(steps: &[TrainingStep], boundaries: &[Boundary], bound: u64, has_phases: bool) -> Verdict {
    let measured: Vec<&Boundary> = boundaries.iter().filter(|b| b.bubble.is_some()).collect();
    let Some(bubble) = median(measured.iter().filter_map(|b| b.bubble).collect::<Vec<i64>>()) else {
        let reason = match boundaries.first() {
            _ if !has_phases => "it holds no wafer FMA phase records".to_string(),
            None => format!(
                "it holds {} training step(s) (step numbers with DX or layer GRAD phases), and a bubble lies between two",
                steps.len()
            ),
            Some(b) => format!(
                "no boundary between its {} training steps could be measured (s{} -> s{} has no {})",
                steps.len(),
                b.from,
                b.to,
                if b.t0.is_none() { "gradient chunk of layer 0 into MemoryX" } else { "forward of layer 0 after it" }
            ),
        };
        return Verdict::Unmeasured { reason };
    };
    let bubble = bubble as i64;
    if bubble <= bound as i64 {
        return Verdict::Pass { bubble };
    }
    // The stage with the largest median; the earliest on the path on a tie.
    let (stage, stage_cycles) = Stage::ALL
        .iter()
        .map(|&s| (s, median_u64(measured.iter().map(|b| b.stage(s)).collect()).unwrap_or(0)))
        .fold((Stage::Update, 0), |best, (s, c)| if c > best.1 { (s, c) } else { best });
    Verdict::Fail { bubble, stage, stage_cycles }
}

impl PipelineReport {
    /// The verdict as a result: `Err` when the steady-state bubble is above the bound, or when
    /// the capture has no boundary to measure.
    pub fn result(&self) -> Result<(), PipelineError> {
        match &self.verdict {
            Verdict::Pass { .. } => Ok(()),
            Verdict::Fail { bubble, stage, stage_cycles } => Err(PipelineError::Bubble {
                bubble: *bubble,
                bound: self.bound.describe(),
                stage: *stage,
                stage_cycles: *stage_cycles,
            }),
            Verdict::Unmeasured { reason } => Err(PipelineError::Unmeasured { reason: reason.clone() }),
        }
    }
}
