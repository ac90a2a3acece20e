//! `wsctl trace`: a hardware pipeline trace capture (link channel 6's bytes, `.wstrace`) to a
//! Perfetto timeline, with a summary of each hop's use and, with `--check`, the validator.
//! `wsctl train --trace` saves its run's trace through [`write_run_trace`]. Everything they call
//! is `host_driver::trace`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use host_driver::trace::{self, Clock, Trace};
use ws_common::ctrl::cmd::TraceState;

/// Reads a capture; the board is not needed.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The capture: link channel 6's bytes as the host received them (`.wstrace`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Write the timeline here as Trace Event Format JSON (open it in ui.perfetto.dev).
    #[arg(short, long, value_name = "OUT.json")]
    out: Option<PathBuf>,
    /// The board clock the trace unit counts, in Hz (the board's `clock_hz`).
    #[arg(long, default_value_t = trace::DEFAULT_CLOCK_HZ, value_name = "HZ")]
    clock_hz: u64,
    /// Check the trace (lost records, overlapping spans, chunks that entered a block and never
    /// left it, unpaired flows) and fail on any error.
    #[arg(long)]
    check: bool,
}

/// Errors and notes printed before the count of the rest.
const SHOWN: usize = 20;

pub fn run(a: Args) -> Result<()> {
    let clock = Clock::new(a.clock_hz)?;
    let t = trace::read_capture(&a.file)?;
    let json = trace::to_perfetto(&t, clock);
    if let Some(out) = &a.out {
        trace::write_json(out, &json).context("writing the timeline")?;
    }
    print!("{}", trace::summary_table(&trace::summarize(&t), clock));
    if let Some(out) = &a.out {
        println!("wrote {} (open it in ui.perfetto.dev)", out.display());
    }
    if !a.check {
        if !t.lost.is_empty() || !t.undecodable.is_empty() || t.trailing_bytes != 0 {
            eprintln!(
                "warning: the capture is incomplete ({} lost, {} undecodable, {} trailing bytes): run with --check for details",
                t.lost.count(),
                t.undecodable.len(),
                t.trailing_bytes
            );
        }
        return Ok(());
    }
    let report = trace::check_capture(&t, &json, None);
    print!("{}", report.render(SHOWN));
    report.into_result().with_context(|| format!("checking {}", a.file.display()))?;
    println!("check passed");
    Ok(())
}

/// `wsctl train --trace FILE`: the run's trace as FILE (Perfetto JSON) and its capture beside
/// it (`.wstrace`), summed up and checked against the unit's counts. A failed check is a
/// warning: the run itself is done and its files are written. Returns the files written.
pub fn write_run_trace(path: &Path, state: &TraceState, bytes: &[u8], clock_hz: u64) -> Result<Vec<PathBuf>> {
    let clock = Clock::new(clock_hz)?;
    let raw = trace::capture_beside(path)?;
    trace::write_capture(&raw, bytes).context("saving the run's trace")?;
    let t = Trace::from_bytes(bytes);
    let json = trace::to_perfetto(&t, clock);
    trace::write_json(path, &json).context("writing the run's timeline")?;
    println!("pipeline trace:");
    print!("{}", trace::summary_table(&trace::summarize(&t), clock));
    let report = trace::check_capture(&t, &json, Some(state));
    print!("{}", report.render(SHOWN));
    // The pipeline's verdict in a line; `wsctl check-pipeline` prints its tables.
    let pipe = trace::check_pipeline(&t.records, &trace::PipelineOptions { clock, ..Default::default() });
    match pipe.result() {
        Ok(()) => {
            let bubble = match &pipe.verdict {
                trace::Verdict::Pass { bubble } | trace::Verdict::Fail { bubble, .. } => bubble.to_string(),
                trace::Verdict::Unmeasured { .. } => "?".into(),
            };
            println!(
                "pipeline: the bubble is {bubble} cycles, within the bound; `wsctl check-pipeline {}` for the tables",
                raw.display()
            )
        }
        Err(e) => println!("pipeline: {e}; `wsctl check-pipeline {}` for the tables", raw.display()),
    }
    let errors = report.errors().count();
    if errors > 0 {
        eprintln!(
            "warning: the trace check found {errors} error(s); `wsctl trace {} --check` lists them all",
            raw.display()
        );
    }
    Ok(vec![path.to_path_buf(), raw])
}
