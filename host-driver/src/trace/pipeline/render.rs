//! The pipeline report as `wsctl check-pipeline` prints it: plain-text tables in the style of
//! `wsctl trace`'s summary ([`crate::report::Table`]).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{median, median_u64, Boundary, IdealSource, LayerHiding, PipelineReport, Stage, Verdict};
use crate::report::{hz, Table};
use crate::trace::links::{source_name, wafer_port};

impl PipelineReport {
    fn us(&self, cycles: u64) -> String {
        format!("{:.2} us", self.clock.ns(cycles) as f64 / 1000.0)
    }

    /// The report as `wsctl check-pipeline` prints it: the steps and the window, then tables of
    /// the updates' hiding, the boundaries' bubbles (at most 12 of them: the
    /// first, the largest and the last), the step against its ideal, the hops' and wafers' use,
    /// the notes and the verdict.
    pub fn render(&self) -> String {
        self.render_with(false)
    }

    /// [`Self::render`] with every boundary's row.
    pub fn render_all(&self) -> String {
        self.render_with(true)
    }

    fn render_with(&self, all: bool) -> String {
        let mut out = String::new();
        self.render_steps(&mut out);
        self.render_hiding(&mut out);
        self.render_bubbles(&mut out, all);
        self.render_step(&mut out);
        self.render_use(&mut out);
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        let _ = match &self.verdict {
            Verdict::Pass { bubble } => writeln!(
                out,
                "pass: the bubble is {bubble} cycles (the median over {} boundaries), within the bound B = {}",
                self.measured(),
                self.bound.describe()
            ),
            Verdict::Fail { .. } => {
                writeln!(out, "FAIL: {}", self.result().err().map(|e| e.to_string()).unwrap_or_default())
            }
            Verdict::Unmeasured { reason } => writeln!(out, "no verdict: the capture cannot judge the pipeline: {reason}"),
        };
        out
    }

    fn measured(&self) -> usize {
        self.boundaries.iter().filter(|b| b.bubble.is_some()).count()
    }

    fn render_steps(&self, out: &mut String) {
        let wafers: BTreeSet<u8> = self.steps.iter().flat_map(|s| s.wafers.iter().map(|w| w.wafer)).collect();
        let list = |v: Vec<String>| v.join(", ");
        let steps = match (self.steps.first(), self.steps.last()) {
            (Some(a), Some(b)) => format!("{} (s{} ..= s{})", self.steps.len(), a.step, b.step),
            _ => "0".into(),
        };
        let _ = writeln!(
            out,
            "training steps  {steps} on wafer(s) {} (SwarmX port(s) {} of {})",
            list(wafers.iter().map(u8::to_string).collect()),
            list(
                wafers
                    .iter()
                    .map(|&w| wafer_port(self.ports, w).map_or("none".into(), |p| p.to_string()))
                    .collect()
            ),
            self.ports
        );
        if self.other_forwards > 0 {
            let _ = writeln!(
                out,
                "not counted     {} forward(s) of layer 0 outside training steps (evaluations)",
                self.other_forwards
            );
        }
        if let Some((b, e)) = self.window {
            let _ = writeln!(
                out,
                "window          cycles {b} ..= {e}: {} cycles, {} at {} (first training forward to last training FMA)",
                e - b + 1,
                self.us(e - b + 1),
                hz(self.clock.hz() as f64)
            );
        }
    }

    fn render_hiding(&self, out: &mut String) {
        if self.layers.is_empty() {
            return;
        }
        let pct = |f: Option<f64>| f.map_or("-".into(), |f| format!("{:.1}", 100.0 * f));
        out.push_str("\nMemoryX updates hidden under wafer compute\n");
        let mut t = Table::new([
            "layer",
            "updates",
            "update cycles",
            "hidden cycles",
            "hidden %",
            "steady-state hidden %",
        ]);
        let mut all = LayerHiding {
            layer: 0,
            updates: 0,
            update_cycles: 0,
            hidden_cycles: 0,
            steady_update_cycles: 0,
            steady_hidden_cycles: 0,
        };
        for l in &self.layers {
            t.row([
                l.layer.to_string(),
                l.updates.to_string(),
                l.update_cycles.to_string(),
                l.hidden_cycles.to_string(),
                pct(l.hidden()),
                pct(l.steady_hidden()),
            ]);
            all.updates += l.updates;
            all.update_cycles += l.update_cycles;
            all.hidden_cycles += l.hidden_cycles;
            all.steady_update_cycles += l.steady_update_cycles;
            all.steady_hidden_cycles += l.steady_hidden_cycles;
        }
        t.row([
            "all".to_string(),
            all.updates.to_string(),
            all.update_cycles.to_string(),
            all.hidden_cycles.to_string(),
            pct(all.hidden()),
            pct(all.steady_hidden()),
        ]);
        out.push_str(&t.render());
    }

    fn render_bubbles(&self, out: &mut String, all: bool) {
        if self.boundaries.is_empty() {
            return;
        }
        let opt = |v: Option<u64>| v.map_or("-".into(), |v| v.to_string());
        out.push_str("\niteration-boundary bubbles (cycles)\n");
        let mut head = vec!["steps", "layer 0", "t0", "t1", "bubble"];
        head.extend(Stage::ALL.iter().map(|s| s.name()));
        head.push("step");
        let mut t = Table::new(head);
        let shown = shown_boundaries(&self.boundaries, all);
        for (i, b) in self.boundaries.iter().enumerate() {
            if !shown[i] {
                continue;
            }
            let path = match b.forwarded {
                Some(true) => "forwarded",
                Some(false) => "read back",
                None => "-",
            };
            let mut row = vec![
                format!("s{} -> s{}", b.from, b.to),
                path.to_string(),
                opt(b.t0),
                opt(b.t1),
                b.bubble.map_or("-".into(), |v| v.to_string()),
            ];
            row.extend(Stage::ALL.iter().map(|&s| {
                if b.bubble.is_some() {
                    b.stage(s).to_string()
                } else {
                    "-".into()
                }
            }));
            row.push(opt(b.step_cycles));
            t.row(row);
        }
        let measured: Vec<&Boundary> = self.boundaries.iter().filter(|b| b.bubble.is_some()).collect();
        if !measured.is_empty() {
            let mut row = vec![
                "median".to_string(),
                String::new(),
                String::new(),
                String::new(),
                median(measured.iter().filter_map(|b| b.bubble).collect::<Vec<i64>>())
                    .map_or("-".into(), |m| m.to_string()),
            ];
            row.extend(
                Stage::ALL.iter().map(|&s| opt(median_u64(measured.iter().map(|b| b.stage(s)).collect()))),
            );
            row.push(opt(self.step_cycles));
            t.row(row);
        }
        out.push_str(&t.render());
        let hidden = shown.iter().filter(|s| !**s).count();
        if hidden > 0 {
            let _ = writeln!(out, "({hidden} more boundaries not shown: the first, the largest bubbles and the last are; --all lists every one)");
        }
    }

    fn render_step(&self, out: &mut String) {
        out.push('\n');
        let _ = writeln!(out, "bound  B = {} cycles", self.bound.describe());
        let step = match self.step_cycles {
            Some(c) => format!(
                "{c} cycles ({}), the median over {} boundaries",
                self.us(c),
                self.boundaries.iter().filter(|b| b.step_cycles.is_some()).count()
            ),
            None => "not measured (it needs two training steps with their forwards)".into(),
        };
        let _ = writeln!(out, "step   {step}");
        let Some(ideal) = self.ideal else {
            let _ = writeln!(out, "ideal  none (no training step with every wafer's forward; give one)");
            return;
        };
        let whence = match ideal.source {
            IdealSource::Given => "given".to_string(),
            IdealSource::Derived { steps, fmas, pes } => format!(
                "derived: {fmas} FMAs of a training step (FWD, DX and layer GRAD, the median over {steps} steps) over {pes} PEs"
            ),
        };
        let ratio = match self.step_cycles {
            Some(c) if ideal.cycles > 0 => {
                format!(", the step takes {:.2} x ideal", c as f64 / ideal.cycles as f64)
            }
            _ => String::new(),
        };
        let _ = writeln!(out, "ideal  {} cycles ({whence}){ratio}", ideal.cycles);
    }

    fn render_use(&self, out: &mut String) {
        if self.hops.is_empty() && self.wafers.is_empty() {
            return;
        }
        out.push_str("\nuse of the window\n");
        let mut t = Table::new(["hop", "records", "busy cycles", "busy %"]);
        for h in &self.hops {
            t.row([
                source_name(h.source),
                h.records.to_string(),
                h.busy_cycles.to_string(),
                format!("{:.1}", 100.0 * h.utilisation),
            ]);
        }
        out.push_str(&t.render());
        let window = self.window.map_or(1, |(b, e)| e - b + 1) as f64;
        let mut t = Table::new(["wafer", "PEs", "FMAs", "busy cycles", "busy %", "FMA use %"]);
        for w in &self.wafers {
            t.row([
                w.wafer.to_string(),
                w.pes.to_string(),
                w.fmas.to_string(),
                w.busy_cycles.to_string(),
                format!("{:.1}", 100.0 * w.busy_cycles as f64 / window),
                format!("{:.1}", 100.0 * w.fma_utilisation),
            ]);
        }
        out.push_str(&t.render());
    }
}

/// Boundary rows a report prints without `--all`.
pub const SHOWN_BOUNDARIES: usize = 12;

/// Which boundaries a table shows: all of them, or when there are more than
/// [`SHOWN_BOUNDARIES`], the first four, the four largest bubbles and the last two.
pub(super) fn shown_boundaries(b: &[Boundary], all: bool) -> Vec<bool> {
    let n = b.len();
    if all || n <= SHOWN_BOUNDARIES {
        return vec![true; n];
    }
    let mut shown: Vec<bool> = (0..n).map(|i| i < 4 || i + 2 >= n).collect();
    let mut by_bubble: Vec<usize> = (0..n).filter(|&i| !shown[i]).collect();
    by_bubble.sort_by_key(|&i| std::cmp::Reverse(b[i].bubble.unwrap_or(i64::MIN)));
    for i in by_bubble.into_iter().take(4) {
        shown[i] = true;
    }
    shown
}
