//! What a trace says about the pipeline in a few numbers: how busy each hop was over the
//! trace, how busy each wafer's PEs were, and when each (layer, step) ran.
//!
//! Cycles are inclusive: a record's span covers cycles `begin ..= end`, so a chunk of n flits
//! at one flit per cycle is busy n cycles.

use std::collections::BTreeMap;

use ws_common::flit::Kind;
use ws_common::mesh::TAG_NONE;
use ws_common::trace::{Record, RecordKind, Source};

use super::links::source_name;
use super::{Clock, Trace};
use crate::report::{hz, Table};

/// One hop's use of the trace's span.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceUse {
    /// The hop.
    pub source: Source,
    /// Its records.
    pub records: usize,
    /// Cycles in which at least one of its spans was open.
    pub busy_cycles: u64,
    /// `busy_cycles` over the trace's span, 0 to 1.
    pub utilisation: f64,
}

/// One wafer's FMA phases over the trace's span.
#[derive(Debug, Clone, PartialEq)]
pub struct WaferUse {
    /// The wafer.
    pub wafer: u8,
    /// Its phase records.
    pub phases: usize,
    /// Its PEs: the most that issued an FMA in any one phase.
    pub pes: u16,
    /// FMAs issued, over all its phases.
    pub fmas: u64,
    /// Cycles in which at least one of its phases was open (some PE was computing).
    pub busy_cycles: u64,
    /// `busy_cycles` over the trace's span, 0 to 1.
    pub utilisation: f64,
    /// `fmas` over `pes` × the trace's span: the share of the PEs' cycles that issued an FMA.
    pub fma_utilisation: f64,
}

/// First and last cycle of one (layer, step), over every hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    /// The layer.
    pub layer: u16,
    /// The step.
    pub step: u16,
    /// The first cycle of any of its records.
    pub first_cycle: u64,
    /// The last cycle of any of its records.
    pub last_cycle: u64,
    /// First and last cycle of its weight chunks (and the streamer's reads), if any.
    pub weights: Option<(u64, u64)>,
    /// First and last cycle of its gradient chunks (and the streamer's updates), if any.
    pub gradients: Option<(u64, u64)>,
    /// First and last cycle of its FMA phases on any wafer, if any.
    pub fmas: Option<(u64, u64)>,
}

/// The numbers of a trace.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Summary {
    /// Records decoded.
    pub records: usize,
    /// Records lost on the board.
    pub lost: u64,
    /// The first cycle of any record.
    pub first_cycle: Option<u64>,
    /// The last cycle of any record.
    pub last_cycle: Option<u64>,
    /// Cycles from the first to the last, both counted (0 for an empty trace).
    pub span_cycles: u64,
    /// Per hop, in [`Source`] order (the wafers' phases are in `wafers`).
    pub sources: Vec<SourceUse>,
    /// Per wafer with phase records, by wafer.
    pub wafers: Vec<WaferUse>,
    /// Per (layer, step), by first cycle.
    pub phases: Vec<Phase>,
}

/// Cycles covered by the union of inclusive spans.
pub(super) fn union_cycles(mut spans: Vec<(u64, u64)>) -> u64 {
    spans.sort_unstable();
    let mut total = 0;
    let mut open: Option<(u64, u64)> = None;
    for (b, e) in spans {
        open = match open {
            Some((ob, oe)) if b <= oe + 1 => Some((ob, oe.max(e))),
            Some((ob, oe)) => {
                total += oe - ob + 1;
                Some((b, e))
            }
            None => Some((b, e)),
        };
    }
    total + open.map_or(0, |(b, e)| e - b + 1)
}

fn widen(range: &mut Option<(u64, u64)>, r: &Record) {
    *range = Some(match *range {
        Some((b, e)) => (b.min(r.begin), e.max(r.end)),
        None => (r.begin, r.end),
    });
}

/// Summarises a trace.
pub fn summarize(trace: &Trace) -> Summary {
    let records = &trace.records;
    let first_cycle = trace.first_cycle();
    let last_cycle = trace.last_cycle();
    let span_cycles = match (first_cycle, last_cycle) {
        (Some(f), Some(l)) => l - f + 1,
        _ => 0,
    };
    let mut by_source: BTreeMap<Source, Vec<(u64, u64)>> = BTreeMap::new();
    let mut phases: BTreeMap<(u16, u16), Phase> = BTreeMap::new();
    // Per wafer: spans, PEs, FMAs.
    type Phases = (Vec<(u64, u64)>, u16, u64);
    let mut wafers: BTreeMap<u8, Phases> = BTreeMap::new();
    for r in records {
        if let (Source::Wafer(w), RecordKind::Phase) = (r.source, r.kind) {
            let e = wafers.entry(w).or_default();
            e.0.push((r.begin, r.end));
            e.1 = e.1.max(r.flits);
            e.2 += u64::from(r.aux);
            // The metrics reduction is no layer's.
            if r.layer == TAG_NONE {
                continue;
            }
        } else {
            by_source.entry(r.source).or_default().push((r.begin, r.end));
        }
        let p = phases.entry((r.layer, r.step)).or_insert(Phase {
            layer: r.layer,
            step: r.step,
            first_cycle: r.begin,
            last_cycle: r.end,
            weights: None,
            gradients: None,
            fmas: None,
        });
        p.first_cycle = p.first_cycle.min(r.begin);
        p.last_cycle = p.last_cycle.max(r.end);
        let weights = match r.kind {
            RecordKind::Read => Some(true),
            RecordKind::Update => Some(false),
            RecordKind::Chunk if r.flit_kind == Kind::Weight as u8 => Some(true),
            RecordKind::Chunk if r.flit_kind == Kind::Gradient as u8 => Some(false),
            RecordKind::Chunk | RecordKind::Phase => None,
        };
        match weights {
            Some(true) => widen(&mut p.weights, r),
            Some(false) => widen(&mut p.gradients, r),
            None if r.kind == RecordKind::Phase => widen(&mut p.fmas, r),
            None => {}
        }
    }
    let sources = by_source
        .into_iter()
        .map(|(source, spans)| {
            let records = spans.len();
            let busy_cycles = union_cycles(spans);
            let utilisation = busy_cycles as f64 / span_cycles.max(1) as f64;
            SourceUse { source, records, busy_cycles, utilisation }
        })
        .collect();
    let span = span_cycles.max(1) as f64;
    let wafers = wafers
        .into_iter()
        .map(|(wafer, (spans, pes, fmas))| {
            let phases = spans.len();
            let busy_cycles = union_cycles(spans);
            WaferUse {
                wafer,
                phases,
                pes,
                fmas,
                busy_cycles,
                utilisation: busy_cycles as f64 / span,
                fma_utilisation: fmas as f64 / (f64::from(pes.max(1)) * span),
            }
        })
        .collect();
    let mut phases: Vec<Phase> = phases.into_values().collect();
    phases.sort_by_key(|p| (p.first_cycle, p.step, p.layer));
    Summary {
        records: records.len(),
        lost: trace.lost.count(),
        first_cycle,
        last_cycle,
        span_cycles,
        sources,
        wafers,
        phases,
    }
}

/// The summary as `wsctl trace` prints it: the totals, then a table of the hops.
pub fn summary_table(s: &Summary, clock: Clock) -> String {
    let mut out = format!("records  {} ({} lost)\n", s.records, s.lost);
    if let (Some(f), Some(l)) = (s.first_cycle, s.last_cycle) {
        let us = clock.ns(s.span_cycles) as f64 / 1000.0;
        out.push_str(&format!(
            "span     {} cycles ({f} ..= {l}), {us:.2} us at {}\n",
            s.span_cycles,
            hz(clock.hz() as f64)
        ));
    }
    if !s.sources.is_empty() {
        let mut t = Table::new(["source", "records", "busy cycles", "busy %"]);
        for u in &s.sources {
            t.row([
                source_name(u.source),
                u.records.to_string(),
                u.busy_cycles.to_string(),
                format!("{:.1}", 100.0 * u.utilisation),
            ]);
        }
        out.push_str(&t.render());
    }
    if !s.wafers.is_empty() {
        let mut t = Table::new(["wafer", "phases", "PEs", "FMAs", "busy cycles", "busy %", "FMA use %"]);
        for u in &s.wafers {
            t.row([
                u.wafer.to_string(),
                u.phases.to_string(),
                u.pes.to_string(),
                u.fmas.to_string(),
                u.busy_cycles.to_string(),
                format!("{:.1}", 100.0 * u.utilisation),
                format!("{:.1}", 100.0 * u.fma_utilisation),
            ]);
        }
        out.push_str(&t.render());
    }
    out
}
