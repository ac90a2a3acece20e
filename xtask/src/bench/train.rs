//! The training rows: `wsctl train`'s loop (`host_driver::train`) on the simulated board.
//!
//! - held-out accuracy on the digits after a fixed budget of epochs at W = 2, beside
//!   scikit-learn's `MLPClassifier` with the same hidden widths, epochs, batch, learning rate
//!   and train/test split, trained in the same run (goal: within 1 point of it, and ≥ 96 %);
//! - simulated cycles per training step ÷ the ideal (MACs ÷ (wafers × PEs)) at W = 1 and 2;
//! - simulated cycles per step with the steps in runs (`MeshTrainRun`, the default) ÷ the same
//!   steps sent one request each, measured in the same bench run;
//! - wall seconds per training step, and simulated cycles per wall second while training;
//! - the pipeline from the hardware trace (`wsctl check-pipeline`'s figures, docs/trace.md):
//!   the iteration-boundary bubble ÷ its bound (twice the pipeline depths on the path) at
//!   first-layer widths 64, 256 and 1024, the share of each layer's updates hidden under the
//!   wafers' compute, the traced step ÷ the ideal, and W = 2 against W = 1 at a fixed batch
//!   per PE.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use host_driver::link::{Config, Link};
use host_driver::mesh::open_board;
use host_driver::trace::{self, PipelineOptions, PipelineReport, Verdict};
use host_driver::train::data::Dataset;
use host_driver::train::{self, Options, Summary, TrainConfig};
use host_driver::transport::SimTransport;
use ws_hdl::sim::{SimOptions, SimProcess};

use super::{ratio, row, Row};
use crate::util::{spinner, step, Ctx};

/// Epochs of the accuracy rows: 44 steps each of the default configuration.
const EPOCHS: u32 = 20;
/// Steps of the W = 1 cycles row.
const STEPS_W1: u32 = 20;

/// Steps of each traced pipeline run.
const STEPS_PIPE: u32 = 8;

/// One run of `cfg` on the digits on a fresh simulated board.
fn on_board(ctx: &Ctx, cfg: &TrainConfig, opts: &Options, what: &str) -> Result<(Summary, usize)> {
    on_board_with(ctx, cfg, &Dataset::digits(), opts, what)
}

/// One run of `cfg` on `data` on a fresh simulated board.
fn on_board_with(
    ctx: &Ctx,
    cfg: &TrainConfig,
    data: &Dataset,
    opts: &Options,
    what: &str,
) -> Result<(Summary, usize)> {
    std::env::set_var("WS_SIM_BIN", ctx.bin("ws-sim"));
    let sim = SimProcess::start(&SimOptions { quiet: true, ..SimOptions::with_elf(ctx.firmware_elf()) })?;
    let clock = host_driver::board_time::BoardClock::follow(sim.ctrl_addr()).ok();
    let link = Link::connect(
        Box::new(SimTransport::connect(sim.phy_addr())?.with_clock(clock)),
        Config::default(),
        Duration::from_secs(60),
    )?;
    let mesh = open_board(link, "sim")?;
    let mut dev = train::Board::new(mesh, "sim");
    let pb = spinner(what);
    let mut pes = 0;
    let s = train::train(&mut dev, cfg, data, opts, &mut |e| match e {
        train::Event::Started { limits, .. } => pes = limits.pes,
        train::Event::Step { point, .. } => pb.set_message(format!("{what}: step {}", point.step)),
        _ => {}
    })
    .with_context(|| format!("training on the simulated board ({what})"))?;
    pb.finish_and_clear();
    Ok((s, pes))
}

/// scikit-learn's `MLPClassifier` on the same split: its test accuracy.
fn sklearn(ctx: &Ctx, cfg: &TrainConfig, batch: usize, dir: &Path) -> Result<f64> {
    let data = Dataset::digits();
    let split = dir.join("split.json");
    std::fs::write(&split, data.split(cfg.test_fraction, cfg.seed).to_json())?;
    let hidden: Vec<String> = cfg.hidden.iter().map(ToString::to_string).collect();
    let out = Command::new(ctx.root.join(".venv/bin/python"))
        .arg(ctx.root.join("data/digits/sklearn_baseline.py"))
        .arg("--data")
        .arg(ctx.root.join("data/digits/digits.safetensors"))
        .arg("--split")
        .arg(&split)
        .args(["--hidden", &hidden.join(",")])
        .args(["--epochs", &cfg.epochs.to_string(), "--seed", &cfg.seed.to_string()])
        .args(["--lr", &cfg.lr.to_string(), "--batch", &batch.to_string()])
        .output()
        .context(
            "running data/digits/sklearn_baseline.py (cargo xtask setup installs scikit-learn for the bench)",
        )?;
    if !out.status.success() {
        bail!("sklearn_baseline.py failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("sklearn_baseline.py's JSON")?;
    v["test_accuracy"].as_f64().context("sklearn_baseline.py printed no test_accuracy")
}

fn cycle_rows(s: &Summary, pes: usize, rows: &mut Vec<Row>) {
    let w = s.run.given.wafers;
    let ran = f64::from(s.ran());
    let per = s.step_cycles.unwrap_or(0) as f64 / ran;
    let ideal = s.ideal_cycles(pes);
    rows.push(ratio(
        row(&format!("train digits W={w}: simulated cycles per step"), per, "cycles"),
        per / ideal,
        "ideal: MACs ÷ (wafers × PEs)",
    ));
    rows.push(row(&format!("train digits W={w}: wall per step"), s.step_wall.as_secs_f64() / ran, "s"));
    rows.push(row(
        &format!("train digits W={w}: simulated cycles per wall second while training"),
        s.step_cycles.unwrap_or(0) as f64 / s.step_wall.as_secs_f64().max(1e-9),
        "cycles/s",
    ));
}

/// A data set of `d` features in [0, 1) and 10 classes in turn, for timing runs only: what the
/// pipeline does does not depend on what it learns.
fn synthetic(d: usize, n: usize) -> Dataset {
    let mut x = Vec::with_capacity(n * d);
    let mut v: u32 = 0x9e37_79b9;
    for _ in 0..n * d {
        v ^= v << 13;
        v ^= v >> 17;
        v ^= v << 5;
        x.push((v >> 8) as f32 / (1u32 << 24) as f32);
    }
    let y = (0..n).map(|i| (i % 10) as u32).collect();
    Dataset { name: format!("synthetic {d}"), x, y, n, d, classes: 10 }
}

/// A traced run's pipeline report (`wsctl check-pipeline`'s figures).
fn pipeline(s: &Summary) -> Result<PipelineReport> {
    let (_, bytes) = s.trace.as_ref().context("the run kept no trace")?;
    let t = trace::Trace::from_bytes(bytes);
    if !t.lost.is_empty() {
        bail!("the trace lost {} records: the pipeline figures would be wrong", t.lost.count());
    }
    Ok(trace::check_pipeline(&t.records, &PipelineOptions::default()))
}

/// The median bubble of a report, and its bound.
fn bubble(r: &PipelineReport) -> Result<(f64, f64)> {
    match &r.verdict {
        Verdict::Pass { bubble } | Verdict::Fail { bubble, .. } => {
            Ok((*bubble as f64, r.bound.cycles() as f64))
        }
        Verdict::Unmeasured { reason } => bail!("no bubble measured: {reason}"),
    }
}

/// The pipeline rows: traced runs of a few steps on fresh boards, each width with the first
/// layer forwarded (the default) and read back from the store (the debug switch, `--read-back`),
/// so the forwarding's gain is a ratio measured in the same bench.
pub(super) fn pipeline_rows(ctx: &Ctx, rows: &mut Vec<Row>) -> Result<()> {
    step("the pipeline from the hardware trace: the iteration bubble, hidden updates, scaling");
    let traced = Options { trace: true, ..Options::default() };
    let read_back = Options { trace: true, read_back: true, ..Options::default() };
    let mut w2_step = None;
    // First-layer width: the digits (64), and synthetic data 256 wide at 2 samples per PE (the
    // most at which a PE's 2,048-word SRAM holds two sample buffers, so the steps chain:
    // docs/mesh-array.md "Chained steps") and 1024 wide at 1 (one buffer only, so the core
    // places each step's samples between the steps, and the bubble shows it; 4 × 1024 words
    // of x would not fit at all, and 4096 fits at no batch).
    for (d, b) in [(64usize, 4usize), (256, 2), (1024, 1)] {
        let cfg = TrainConfig { steps: Some(STEPS_PIPE), batch_per_pe: b, ..TrainConfig::default() };
        let data = if d == 64 { Dataset::digits() } else { synthetic(d, 400) };
        let (s, _) = on_board_with(ctx, &cfg, &data, &traced, &format!("traced, first layer {d} wide"))?;
        let r = pipeline(&s)?;
        let (s_rb, _) =
            on_board_with(ctx, &cfg, &data, &read_back, &format!("traced, first layer {d} wide, read back"))?;
        let r_rb = pipeline(&s_rb)?;
        let (fwd, bound) = bubble(&r)?;
        let (bubble_rb, _) = bubble(&r_rb)?;
        rows.push(ratio(
            row(&format!("pipeline W=2: iteration bubble, first layer {d} inputs, B={b}"), fwd, "cycles"),
            fwd.max(0.0) / bound,
            "the bound: 2 × the pipeline depths on the forwarding path (goal ≤ 1)",
        ));
        rows.push(ratio(
            row(
                &format!("pipeline W=2 read back: iteration bubble, first layer {d} inputs, B={b}"),
                bubble_rb,
                "cycles",
            ),
            bubble_rb.max(0.0) / bound,
            "the same bound: forwarding off puts the update and a store read on the path",
        ));
        if let (Some(fwd), Some(back)) = (r.step_cycles, r_rb.step_cycles) {
            rows.push(ratio(
                row(
                    &format!("pipeline W=2: traced step, first layer {d} inputs, B={b}"),
                    fwd as f64,
                    "cycles",
                ),
                fwd as f64 / back as f64,
                "the same step read back, measured here (goal < 1)",
            ));
        }
        if d != 64 {
            continue;
        }
        for l in &r.layers {
            let h = l.steady_hidden().or(l.hidden()).unwrap_or(0.0);
            rows.push(ratio(
                row(&format!("pipeline W=2: layer {} updates hidden under compute", l.layer), h * 100.0, "%"),
                h,
                "all of them (goal ≥ 0.99 in steady state)",
            ));
        }
        if let (Some(step), Some(ideal)) = (r.step_cycles, r.ideal) {
            rows.push(ratio(
                row("pipeline W=2: traced step, B=4", step as f64, "cycles"),
                step as f64 / ideal.cycles as f64,
                "ideal: FMAs ÷ (wafers × PEs) (goal ≤ 1.15)",
            ));
            w2_step = Some(step as f64);
        }
    }
    let w1 = TrainConfig { wafers: 1, steps: Some(STEPS_PIPE), ..TrainConfig::default() };
    let (s1, _) = on_board(ctx, &w1, &traced, "traced, W = 1")?;
    let r1 = pipeline(&s1)?;
    if let (Some(one), Some(two)) = (r1.step_cycles, w2_step) {
        rows.push(row("pipeline W=1: traced step, B=4", one as f64, "cycles"));
        rows.push(ratio(
            row("pipeline W=2: traced step at a fixed batch per wafer", two, "cycles"),
            two / one as f64,
            "W = 1 (goal: 1 but for SwarmX's log W reduce; this SoC carries 2 wafers)",
        ));
    }
    Ok(())
}

/// The training rows.
pub(super) fn train_rows(ctx: &Ctx, rows: &mut Vec<Row>) -> Result<()> {
    let dir = ctx.root.join("target/bench/train");
    std::fs::create_dir_all(&dir)?;
    step(&format!(
        "training: the digits on the simulated board, {EPOCHS} epochs at W = 2, beside scikit-learn"
    ));
    let cfg = TrainConfig { epochs: EPOCHS, ..TrainConfig::default() };
    let (s2, pes) = on_board(ctx, &cfg, &Options::default(), &format!("W = 2, {EPOCHS} epochs"))?;
    let ours = f64::from(s2.test.map_or(0.0, |p| p.test_accuracy));
    let theirs = sklearn(ctx, &cfg, s2.batch, &dir)?;
    let hidden = format!("{:?}", cfg.hidden);
    rows.push(row(
        &format!("train digits: scikit-learn MLPClassifier {hidden}, test accuracy"),
        theirs * 100.0,
        "%",
    ));
    rows.push(ratio(
        row(&format!("train digits W=2: board, {EPOCHS} epochs, test accuracy"), ours * 100.0, "%"),
        ours / theirs,
        "scikit-learn's accuracy (goal ≥ 0.99 and ≥ 96 %)",
    ));
    cycle_rows(&s2, pes, rows);
    let w1 = TrainConfig { wafers: 1, steps: Some(STEPS_W1), ..TrainConfig::default() };
    let (s1, pes) = on_board(ctx, &w1, &Options::default(), &format!("W = 1, {STEPS_W1} steps"))?;
    cycle_rows(&s1, pes, rows);

    // The same steps in runs of 16 and one request each, on fresh boards.
    let short = TrainConfig { steps: Some(STEPS_W1), ..TrainConfig::default() };
    let per_step = |s: &Summary| s.step_cycles.unwrap_or(0) as f64 / f64::from(s.ran());
    let (runs, _) = on_board(ctx, &short, &Options::default(), &format!("W = 2, {STEPS_W1} steps in runs"))?;
    let one = Options { steps_per_request: 1, ..Options::default() };
    let (single, _) = on_board(ctx, &short, &one, &format!("W = 2, {STEPS_W1} steps, a request each"))?;
    rows.push(row(
        "train digits W=2: simulated cycles per step, a request per step",
        per_step(&single),
        "cycles",
    ));
    rows.push(ratio(
        row("train digits W=2: simulated cycles per step, runs of 16 steps", per_step(&runs), "cycles"),
        per_step(&runs) / per_step(&single),
        "a request per step, measured here (goal < 1)",
    ));
    Ok(())
}
