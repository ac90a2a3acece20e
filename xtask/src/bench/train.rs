//! The training rows: `wsctl train`'s loop (`host_driver::train`) on the simulated board.
//!
//! - held-out accuracy on the digits after a fixed budget of epochs at W = 2, beside
//!   scikit-learn's `MLPClassifier` with the same hidden widths, epochs, batch, learning rate
//!   and train/test split, trained in the same run (goal: within 1 point of it, and ≥ 96 %);
//! - simulated cycles per training step ÷ the ideal (MACs ÷ (wafers × PEs)) at W = 1 and 2;
//! - simulated cycles per step with the steps in runs (`MeshTrainRun`, the default) ÷ the same
//!   steps sent one request each, measured in the same bench run;
//! - wall seconds per training step, and simulated cycles per wall second while training.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use host_driver::link::{Config, Link};
use host_driver::mesh::open_board;
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

/// One run of `cfg` on a fresh simulated board.
fn on_board(ctx: &Ctx, cfg: &TrainConfig, opts: &Options, what: &str) -> Result<(Summary, usize)> {
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
    let s = train::train(&mut dev, cfg, &Dataset::digits(), opts, &mut |e| match e {
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
