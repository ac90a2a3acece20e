//! `wsctl mesh`: whole MLP training steps on the board's wafer mesh (docs/mesh-array.md
//! "Firmware driver").

use std::time::Instant;

use anyhow::{Context, Result};
use host_driver::link::Config;
use host_driver::mesh::{golden_step, open_board, BoardMesh, Gen, TrainRun};
use host_driver::report::Table;

use crate::ctx::Ctx;

#[derive(Debug, clap::Subcommand)]
pub enum MeshCmd {
    /// Run training steps of an MLP with random parameters and samples on the mesh, check
    /// every gradient word and the metrics against the golden model, and print a table.
    Step(StepArgs),
    /// A training run with MemoryX and SwarmX in the loop: the weights stream from MemoryX's
    /// store through SwarmX's broadcast to the mesh, the gradients go back through SwarmX into
    /// MemoryX's optimizer. One batch of a synthetic task, a table of the loss per step; with
    /// --verify every step is checked against the golden mesh, node and optimizer.
    Train(TrainArgs),
}

#[derive(Debug, clap::Args)]
pub struct TrainArgs {
    /// Layer widths, input first, classes last (1 to 7 layers).
    #[arg(long, value_delimiter = ',', default_value = "16,24,12,5")]
    dims: Vec<usize>,
    /// Samples per PE (B); the batch fills the mesh.
    #[arg(long, default_value_t = 4)]
    batch_per_pe: usize,
    /// Steps.
    #[arg(long, default_value_t = 20)]
    steps: u32,
    /// The optimizer.
    #[arg(long, default_value = "adam", value_parser = ["sgd", "momentum", "adam", "adamw"])]
    optimizer: String,
    /// Learning rate.
    #[arg(long, default_value_t = 0.02)]
    lr: f64,
    /// Seed of the weights and the data.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Check every step (loss, weights, optimizer state) against the golden models.
    #[arg(long)]
    verify: bool,
    /// Keep the weights and optimizer state of the last completed step in this safetensors
    /// file (rewritten whole after every step; `layer{l}` is [d_(l+1), d_l + 1], bias first).
    #[arg(long, value_name = "FILE")]
    checkpoint: Option<std::path::PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct StepArgs {
    /// Layer widths, input first, classes last (1 to 7 layers).
    #[arg(long, value_delimiter = ',', default_value = "16,24,12,5")]
    dims: Vec<usize>,
    /// Samples per PE (B).
    #[arg(long, default_value_t = 4)]
    batch_per_pe: usize,
    /// Samples per step (default: every slot of the mesh).
    #[arg(long)]
    samples: Option<usize>,
    /// Weight rows per chunk of the streams.
    #[arg(long, default_value_t = 3)]
    rows_per_chunk: usize,
    /// Steps to run.
    #[arg(long, default_value_t = 2)]
    steps: u16,
    /// Seed of the random parameters and samples.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(ctx: &Ctx, cmd: MeshCmd) -> Result<()> {
    match cmd {
        MeshCmd::Step(a) => step(ctx, a),
        MeshCmd::Train(a) => train(ctx, a),
    }
}

fn connect(ctx: &Ctx) -> Result<BoardMesh> {
    let (board, link) = ctx.link_v2(Config::default())?;
    let mut dev = open_board(link, &board.name)?;
    crate::mx::note_released(dev.mx().released_at_open());
    Ok(dev)
}

fn train(ctx: &Ctx, a: TrainArgs) -> Result<()> {
    use ws_common::golden::optim::Hyper;
    let hyper = match a.optimizer.as_str() {
        "sgd" => Hyper::SGD,
        "momentum" => Hyper { momentum: 0.9, ..Hyper::SGD },
        "adamw" => Hyper::ADAMW,
        _ => Hyper::ADAM,
    };
    let mut dev = connect(ctx)?;
    let run = TrainRun {
        dims: a.dims.clone(),
        batch_per_pe: a.batch_per_pe,
        steps: a.steps,
        hyper,
        lr: a.lr,
        seed: a.seed,
        verify: a.verify,
        checkpoint: a.checkpoint.clone(),
    };
    eprintln!(
        "training MLP {:?} on the mesh, {} with lr {}, {} steps{}",
        a.dims,
        a.optimizer,
        a.lr,
        a.steps,
        if a.verify { ", each checked against the golden models" } else { "" }
    );
    let rows = run.run(&mut dev, &mut |r| {
        eprintln!(
            "step {}/{}: loss {:.4}",
            r.done.step,
            a.steps,
            f32::from_bits(r.done.loss) / r.samples as f32
        )
    })?;
    let mut table =
        Table::new(["step", "samples", "loss/sample", "correct", "mesh cycles", "FMAs", "wall", "golden"]);
    let mut bad = 0;
    for r in &rows {
        let golden = match r.diff {
            None => "not checked".to_string(),
            Some(0) if r.loss_exact => "bit-exact".into(),
            Some(d) => {
                bad += 1;
                format!("{d} words differ{}", if r.loss_exact { "" } else { ", loss differs" })
            }
        };
        table.row([
            r.done.step.to_string(),
            r.samples.to_string(),
            format!("{:.4}", f32::from_bits(r.done.loss) / r.samples as f32),
            format!("{}/{}", f32::from_bits(r.done.correct), r.samples),
            r.done.cycles.to_string(),
            r.done.fmas.to_string(),
            format!("{:.1} s", r.wall.as_secs_f64()),
            golden,
        ]);
    }
    print!("{}", table.render());
    if let (Some(path), Some(last)) = (&a.checkpoint, rows.last()) {
        println!("checkpoint: {} (step {}, weights and optimizer state)", path.display(), last.done.step);
    }
    anyhow::ensure!(bad == 0, "{bad} step(s) differ from the golden models: the board's data path is wrong");
    Ok(())
}

fn step(ctx: &Ctx, a: StepArgs) -> Result<()> {
    let mut dev = connect(ctx)?;
    let plan = dev.setup(&a.dims, a.batch_per_pe, a.rows_per_chunk)?;
    let pes = u32::from(plan.rows) * u32::from(plan.cols);
    println!(
        "mesh {}x{}: MLP {:?}, B = {}, {} of {} SRAM words and {} instructions per PE; \
         {} weight words in and {} gradient words out per step",
        plan.rows,
        plan.cols,
        a.dims,
        plan.b,
        plan.sram_used,
        plan.sram_words,
        plan.prog_len,
        plan.weight_words,
        plan.grad_words
    );
    let n = a.samples.unwrap_or(plan.capacity as usize);
    let mut gen = Gen(a.seed.max(1));
    let params: Vec<u32> = (0..plan.grad_words).map(|_| gen.f32(0.4)).collect();
    let classes = *a.dims.last().context("--dims is empty")? as u64;
    // Multiply-adds per sample: forward, dW/db, and dx above layer 0; the ideal step takes
    // them at 1 FMA per PE per cycle.
    let macs: u64 =
        a.dims.windows(2).map(|w| (w[0] * w[1]) as u64).sum::<u64>() * 3 - (a.dims[0] * a.dims[1]) as u64;
    let ideal = (macs * n as u64).div_ceil(u64::from(pes)).max(1);
    let mut table = Table::new([
        "step",
        "samples",
        "loss/sample",
        "correct",
        "cycles",
        "vs ideal",
        "FMAs",
        "FMA util",
        "wall",
        "golden",
    ]);
    let mut bad = 0;
    for k in 0..a.steps {
        let step = k + 1;
        let x: Vec<u32> = (0..n * a.dims[0]).map(|_| gen.f32(1.0)).collect();
        let labels: Vec<u32> = (0..n).map(|_| (gen.bits() % classes) as u32).collect();
        eprintln!("step {step}/{}: {n} samples ...", a.steps);
        let t0 = Instant::now();
        let got = dev.step(step, &x, &labels, &params)?;
        let wall = t0.elapsed();
        let (metrics, want) = golden_step(&plan, &a.dims, a.rows_per_chunk, step, &params, &x, &labels)?;
        let diff = got.gradients.iter().zip(&want).filter(|(g, w)| g != w).count()
            + got.gradients.len().abs_diff(want.len());
        let same = diff == 0
            && got.done.loss == metrics.loss
            && got.done.correct == (metrics.correct as f32).to_bits();
        bad += usize::from(!same);
        if diff != 0 {
            let idx: Vec<usize> = got
                .gradients
                .iter()
                .zip(&want)
                .enumerate()
                .filter(|(_, (g, w))| g != w)
                .map(|(i, _)| i)
                .collect();
            if let (Some(&first), Some(&last)) = (idx.first(), idx.last()) {
                eprintln!(
                    "step {step}: gradient words {first}..={last} of {} differ ({} of them); word {first}: board {:#010x}, golden {:#010x}",
                    want.len(),
                    idx.len(),
                    got.gradients[first],
                    want[first]
                );
            }
        }
        let d = got.done;
        let util = f64::from(d.fmas) / (f64::from(d.cycles.max(1)) * f64::from(pes));
        table.row([
            step.to_string(),
            n.to_string(),
            format!("{:.4}", f32::from_bits(d.loss) / n as f32),
            format!("{}/{n}", f32::from_bits(d.correct)),
            d.cycles.to_string(),
            format!("{:.2}", f64::from(d.cycles) / ideal as f64),
            d.fmas.to_string(),
            format!("{util:.3}"),
            format!("{:.1} s", wall.as_secs_f64()),
            if same { "bit-exact".into() } else { format!("{diff} words differ") },
        ]);
    }
    print!("{}", table.render());
    println!(
        "ideal: {macs} MACs per sample x {n} samples / {pes} PEs = {ideal} cycles at 1 FMA per PE per cycle; \
         FMA util = FMAs / (cycles x PEs), the loss stage's FMAs included"
    );
    anyhow::ensure!(bad == 0, "{bad} step(s) differ from the golden model: the mesh or its driver is wrong");
    Ok(())
}
