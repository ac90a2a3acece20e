//! `wsctl check-pipeline`: the pipeline check of a trace capture (`.wstrace`): the updates
//! hidden under the wafers' compute, the iteration-boundary bubble and its stages against the
//! bound, the step against its ideal, each hop's and wafer's use, and a verdict that sets the
//! exit status. Everything it calls is `host_driver::trace::pipeline`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use host_driver::trace::pipeline::{check_pipeline, PipelineOptions};
use host_driver::trace::{self, Clock};

/// Reads a capture; the board is not needed.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The capture: link channel 6's bytes as the host received them (`.wstrace`).
    #[arg(value_name = "CAPTURE.wstrace")]
    file: PathBuf,
    /// The board clock the trace unit counts, in Hz (the board's `clock_hz`).
    #[arg(long, default_value_t = trace::DEFAULT_CLOCK_HZ, value_name = "HZ")]
    clock_hz: u64,
    /// The ideal cycles of a training step; derived from the wafers' FMAs when not given.
    #[arg(long, value_name = "CYCLES")]
    ideal: Option<u64>,
    /// The bubble's bound in cycles, in place of twice the simulated board's pipeline depths.
    #[arg(long, value_name = "CYCLES")]
    bound: Option<u64>,
    /// Print the verdict but exit 0 when the bubble is over the bound (a capture with nothing
    /// to measure still fails). `cargo xtask run` uses it while the next step's layer-0
    /// weights are read back from the store (docs/trace.md "check-pipeline").
    #[arg(long)]
    report_only: bool,
    /// Every boundary's row (by default the first, the largest bubbles and the last).
    #[arg(long)]
    all: bool,
}

pub fn run(a: Args) -> Result<()> {
    let clock = Clock::new(a.clock_hz)?;
    let t = trace::read_capture(&a.file)?;
    if !t.lost.is_empty() || !t.undecodable.is_empty() || t.trailing_bytes != 0 {
        eprintln!(
            "warning: the capture is incomplete ({} lost, {} undecodable, {} trailing bytes), so its figures may be wrong: `wsctl trace {} --check` lists what is missing",
            t.lost.count(),
            t.undecodable.len(),
            t.trailing_bytes,
            a.file.display()
        );
    }
    let opts = PipelineOptions { clock, ideal: a.ideal, bound: a.bound, ..PipelineOptions::default() };
    let report = check_pipeline(&t.records, &opts);
    print!("{}", if a.all { report.render_all() } else { report.render() });
    match report.result() {
        Err(e @ trace::PipelineError::Bubble { .. }) if a.report_only => {
            eprintln!("warning (--report-only): {e}");
        }
        r => r.with_context(|| format!("the pipeline check of {}", a.file.display()))?,
    }
    Ok(())
}
