//! What `wsctl train` prints: the progress line of every step and the summary table at the
//! end. Plain functions of the run's figures, so they have tests.

use std::time::Duration;

use super::run::Summary;
use crate::report::Table;

/// The board's clock and mesh, for the figures in simulated time (`None` on the golden
/// model, which has no clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoardFigures {
    /// The board's clock in Hz (board.toml `clock_hz`).
    pub clock_hz: u64,
    /// PEs of each wafer's mesh.
    pub pes: usize,
}

/// Steps per second of `wall`, 0 for no time.
fn per_second(n: f64, wall: Duration) -> f64 {
    let s = wall.as_secs_f64();
    if s > 0.0 {
        n / s
    } else {
        0.0
    }
}

/// A count with thousands separators: 1234567 → "1,234,567".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The progress bar's message after a step: the batch's loss and accuracy, and the rate in
/// wall time and, on a board, in simulated time (steps per second of board time at its
/// clock).
pub fn progress(
    loss: f32,
    accuracy: f32,
    steps: u32,
    wall: Duration,
    cycles: Option<u64>,
    board: Option<BoardFigures>,
) -> String {
    let mut s = format!(
        "loss {loss:.4}  acc {:5.1} %  {:.2} steps/s wall",
        accuracy * 100.0,
        per_second(f64::from(steps), wall)
    );
    if let (Some(c), Some(b)) = (cycles, board) {
        if c > 0 {
            let sim_s = c as f64 / b.clock_hz as f64;
            s.push_str(&format!("  {:.0} steps/s simulated", f64::from(steps) / sim_s));
        }
    }
    s
}

/// The table printed at the end of a run.
pub fn summary_table(s: &Summary, board: Option<BoardFigures>) -> String {
    let r = &s.run;
    let ran = s.ran();
    let mut t = Table::new(["", ""]);
    let mut row = |k: &str, v: String| {
        t.row([k.to_string(), v]);
    };
    row("data", r.data_name.clone());
    row(
        "model",
        format!(
            "MLP {} ({} parameters), {}, {}",
            r.dims.iter().map(ToString::to_string).collect::<Vec<_>>().join("→"),
            thousands(r.params()),
            r.given.optimizer,
            r.schedule_text()
        ),
    );
    row(
        "batch",
        format!(
            "{} samples per step on {} wafer(s), {} per PE",
            s.batch, r.given.wafers, r.given.batch_per_pe
        ),
    );
    row("steps", format!("{}..={} ({ran} run here)", s.steps.0, s.steps.1));
    row(
        "final train loss",
        format!("{:.4}  (accuracy {:.2} %, last epoch's steps)", s.train_loss, s.train_accuracy * 100.0),
    );
    match &s.test {
        Some(p) => row(
            "test accuracy",
            format!(
                "{:.2} %  (loss {:.4}, after step {}, epoch {})",
                p.test_accuracy * 100.0,
                p.test_loss,
                p.step,
                p.epoch + 1
            ),
        ),
        None => row("test accuracy", "not evaluated".into()),
    }
    match (s.step_cycles, board) {
        (Some(c), Some(b)) => {
            let per = c as f64 / f64::from(ran.max(1));
            let ideal = s.ideal_cycles(b.pes);
            row(
                "simulated cycles/step",
                format!(
                    "{}  ({:.2}× the ideal {} = {} MACs ÷ ({} wafers × {} PEs); busiest mesh {})",
                    thousands(per.round() as u64),
                    per / ideal,
                    thousands(ideal.round() as u64),
                    thousands(s.macs_per_step()),
                    r.given.wafers,
                    b.pes,
                    thousands(s.mesh_cycles / u64::from(ran.max(1))),
                ),
            );
            row(
                "simulated rate",
                format!(
                    "{:.0} cycles per wall second; {:.3} ms of board time per step at {} MHz",
                    per_second(c as f64, s.step_wall),
                    per / b.clock_hz as f64 * 1e3,
                    b.clock_hz as f64 / 1e6
                ),
            );
        }
        _ => row("simulated cycles/step", "none: the golden models have no board clock".into()),
    }
    row(
        "wall time/step",
        format!(
            "{:.3} s  ({:.1} s in all, evaluations included)",
            s.step_wall.as_secs_f64() / f64::from(ran.max(1)),
            s.wall.as_secs_f64()
        ),
    );
    row(
        "parameters updated/s",
        format!("{:.0} (wall)", per_second(r.params() as f64 * f64::from(ran), s.step_wall)),
    );
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_by_three() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn progress_names_both_rates_on_a_board_only() {
        let b = BoardFigures { clock_hz: 50_000_000, pes: 4 };
        let s = progress(0.5, 0.75, 10, Duration::from_secs(5), Some(5_000_000), Some(b));
        assert!(s.contains("loss 0.5000"), "{s}");
        assert!(s.contains(" 75.0 %"), "{s}");
        assert!(s.contains("2.00 steps/s wall"), "{s}");
        // 10 steps in 0.1 s of board time.
        assert!(s.contains("100 steps/s simulated"), "{s}");
        let g = progress(0.5, 0.75, 10, Duration::from_secs(5), None, None);
        assert!(!g.contains("simulated"), "{g}");
    }
}
