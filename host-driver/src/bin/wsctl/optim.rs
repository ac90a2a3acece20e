//! `wsctl optim`: MemoryX as a hardware optimizer (docs/host.md "wsctl optim").

use std::path::PathBuf;

use anyhow::{Context, Result};
use host_driver::link::Config;
use host_driver::optim::files::{self, Grads, Model};
use host_driver::optim::{open_board, run as run_optim, Golden, LayerConfig, MxDevice, Progress};
use ws_common::golden::optim::Hyper;
use ws_common::golden::schedule::{Schedule, ScheduleKind};

use crate::ctx::Ctx;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    sub: Option<Sub>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Write a small model (3 tensors) and 20 steps of gradients to try `wsctl optim` with.
    Example {
        /// Folder for model.safetensors and grads.safetensors.
        #[arg(long, value_name = "DIR")]
        out_dir: PathBuf,
        /// Seed of the random values.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Write W wafers' gradients per step and tensor (`step{t}/wafer{k}/{N}`) for
        /// `wsctl optim --wafers W`, instead of one reduced gradient.
        #[arg(long, default_value_t = 0, value_name = "W")]
        wafers: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Optimizer {
    Sgd,
    Adam,
    Adamw,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The model: F32 tensors, one MemoryX layer each.
    #[arg(long, value_name = "FILE", required = true)]
    model: Option<PathBuf>,
    /// The gradients: `step{t}/{tensor}` for t = 1..K (with --wafers W,
    /// `step{t}/wafer{k}/{tensor}` for k = 0..W-1).
    #[arg(long, value_name = "FILE", required = true)]
    grads: Option<PathBuf>,
    /// Steps to run (K).
    #[arg(long, value_name = "K", required = true)]
    steps: Option<u32>,
    /// Where to write the weights and optimizer state.
    #[arg(long, value_name = "FILE", required = true)]
    out: Option<PathBuf>,
    /// The optimizer.
    #[arg(long, value_enum, required = true)]
    optimizer: Option<Optimizer>,
    /// Learning rate (default: 0.001 for Adam/AdamW, 0.01 for SGD).
    #[arg(long)]
    lr: Option<f64>,
    /// SGD momentum.
    #[arg(long, default_value_t = 0.0)]
    momentum: f64,
    /// SGD Nesterov momentum (needs --momentum).
    #[arg(long)]
    nesterov: bool,
    /// SGD dampening.
    #[arg(long, default_value_t = 0.0)]
    dampening: f64,
    /// Weight decay (default: 0.01 for AdamW, 0 otherwise).
    #[arg(long)]
    weight_decay: Option<f64>,
    /// Adam β1.
    #[arg(long, default_value_t = 0.9)]
    beta1: f64,
    /// Adam β2.
    #[arg(long, default_value_t = 0.999)]
    beta2: f64,
    /// Adam ε.
    #[arg(long, default_value_t = 1e-8)]
    eps: f64,
    /// Adam amsgrad.
    #[arg(long)]
    amsgrad: bool,
    /// Ascend instead of descend.
    #[arg(long)]
    maximize: bool,
    /// Learning-rate schedule: constant, step:SIZE:GAMMA or cosine:TMAX:ETAMIN.
    #[arg(long, default_value = "constant", value_parser = files::parse_schedule)]
    schedule: ScheduleKind,
    /// Linear warm-up over N steps.
    #[arg(long, default_value_t = 0, value_name = "N")]
    warmup: u32,
    /// Wafers whose gradients are summed (gradient scale 1/(workers·batch)).
    #[arg(long, default_value_t = 1, value_name = "N")]
    workers: u32,
    /// Samples per wafer and step.
    #[arg(long, default_value_t = 1, value_name = "N")]
    batch: u32,
    /// Each step's gradients come from W wafers, which the board's SwarmX node sums in its
    /// fixed order (ports 0..W-1) before the optimizer; 0: one reduced gradient.
    #[arg(long, default_value_t = 0, value_name = "W")]
    wafers: u32,
    /// Run the golden model on the host instead of the board.
    #[arg(long)]
    golden: bool,
    /// After the board's run, run the golden model on the same files and compare every word;
    /// fail if one differs.
    #[arg(long, conflicts_with = "golden")]
    verify: bool,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<()> {
    if let Some(Sub::Example { out_dir, seed, wafers }) = a.sub {
        let (m, g) = files::write_example(&out_dir, seed, wafers)?;
        let w = if wafers > 0 { format!(" --wafers {wafers}") } else { String::new() };
        println!(
            "wrote {} and {} ({} steps); try: wsctl optim --golden --model {} --grads {} --steps {} --optimizer adam{w} --out out.safetensors",
            m.display(),
            g.display(),
            files::EXAMPLE_STEPS,
            m.display(),
            g.display(),
            files::EXAMPLE_STEPS
        );
        return Ok(());
    }
    let r = a.run;
    // clap requires these without a subcommand.
    let (Some(model), Some(grads), Some(steps), Some(out), Some(opt)) =
        (r.model, r.grads, r.steps, r.out, r.optimizer)
    else {
        anyhow::bail!("pass --model, --grads, --steps, --out and --optimizer (see `wsctl optim --help`)");
    };
    let base = match opt {
        Optimizer::Sgd => Hyper::SGD,
        Optimizer::Adam => Hyper::ADAM,
        Optimizer::Adamw => Hyper::ADAMW,
    };
    let hyper = Hyper {
        weight_decay: r.weight_decay.unwrap_or(base.weight_decay),
        maximize: r.maximize,
        momentum: r.momentum,
        dampening: r.dampening,
        nesterov: r.nesterov,
        beta1: r.beta1,
        beta2: r.beta2,
        eps: r.eps,
        amsgrad: r.amsgrad,
        ..base
    };
    let lr = r.lr.unwrap_or(if opt == Optimizer::Sgd { 0.01 } else { 1e-3 });
    let cfg = LayerConfig {
        len: 0,
        hyper,
        schedule: Schedule { lr, kind: r.schedule, warmup: r.warmup },
        workers: r.workers,
        batch: r.batch,
        start: 0,
    };
    let m = Model::load(&model)?;
    let g = Grads::load_wafers(&grads, &m, steps, r.wafers)?;
    let mut dev: Box<dyn MxDevice> = if r.golden { Box::new(Golden::new()) } else { board_device(ctx)? };
    let bar = indicatif::ProgressBar::new(u64::from(steps));
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:12} {bar:40} {pos}/{len} steps, {elapsed}")
            .expect("progress template"),
    );
    bar.set_message("loading");
    let report = run_optim(dev.as_mut(), &m, &g, steps, &|_| cfg, &mut |p| match p {
        Progress::Loaded { .. } => {}
        Progress::Stepped { done, .. } => {
            bar.set_message("stepping");
            bar.set_position(u64::from(done));
        }
        Progress::Read => bar.set_message("read back"),
    })
    .with_context(|| {
        format!("running {steps} steps of {} on {}", files::optimizer_name(hyper.kind), dev.describe())
    })?;
    bar.finish_and_clear();
    files::write_result(&out, &report)?;
    print!("{}", report.summary());
    println!("wrote {}", out.display());
    if r.verify {
        let gold = run_optim(&mut Golden::new(), &m, &g, steps, &|_| cfg, &mut |_| {})
            .context("running the golden model for --verify")?;
        let (words, diff) = compare(&report, &gold);
        if diff > 0 {
            anyhow::bail!(
                "the board's result differs from the golden model in {diff} of {words} words: keep {} and report it with this command line",
                out.display()
            );
        }
        println!("verified: all {words} words (weights and optimizer state) bit-exact with the golden model");
    }
    Ok(())
}

/// Words compared and words that differ between two runs of the same files.
fn compare(a: &host_driver::optim::RunReport, b: &host_driver::optim::RunReport) -> (usize, usize) {
    let (mut words, mut diff) = (0, 0);
    for (x, y) in a.layers.iter().zip(&b.layers) {
        for ((_, p), (_, q)) in x.arrays.iter().zip(&y.arrays) {
            words += p.len();
            diff += p.iter().zip(q).filter(|(u, v)| u != v).count() + p.len().abs_diff(q.len());
        }
    }
    (words, diff)
}

/// The board's MemoryX over link v2: its bulk channels switched to MemoryX's rings.
fn board_device(ctx: &Ctx) -> Result<Box<dyn MxDevice>> {
    let (board, link) = ctx.link_v2(Config::default())?;
    let dev = open_board(link, &board.name)
        .with_context(|| format!("opening MemoryX on board `{}`", board.name))?;
    crate::mx::note_released(dev.released_at_open());
    Ok(Box::new(dev))
}
