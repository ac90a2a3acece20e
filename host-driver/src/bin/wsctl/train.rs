//! `wsctl train`: train an MLP on a data set on the board (or, with `--golden`, on the host's
//! golden models), with held-out evaluation, curves and checkpoints (docs/train.md).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use host_driver::link::Config;
use host_driver::mesh::open_board;
use host_driver::train::data::Dataset;
use host_driver::train::report::{progress, summary_table, BoardFigures};
use host_driver::train::{
    self, Backend, Checkpoint, Event, GoldenBoard, Options, TrainConfig, STEPS_PER_REQUEST,
};
use indicatif::{ProgressBar, ProgressStyle};

use crate::ctx::Ctx;

/// Every key of the configuration is a flag too; a flag overrides `--config`'s value, and
/// `--resume` starts from the checkpoint's configuration.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A TOML file of configuration keys (docs/train.md "Configuration"); flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The data set: a safetensors file of `x` (N×D f32) and `y` (N u8/u32 labels). Default:
    /// the built-in digits (data/digits/README.md).
    #[arg(long, value_name = "FILE")]
    data: Option<PathBuf>,
    /// Hidden layer widths, input side first [default: 32].
    #[arg(long, value_delimiter = ',', value_name = "W,W,..")]
    hidden: Option<Vec<usize>>,
    /// The optimizer [default: adam].
    #[arg(long, value_parser = ["sgd", "momentum", "nesterov", "adam", "adamw"])]
    optimizer: Option<String>,
    /// Learning rate at the schedule's peak [default: 0.01].
    #[arg(long)]
    lr: Option<f64>,
    /// Momentum of `momentum` and `nesterov` [default: 0.9].
    #[arg(long)]
    momentum: Option<f64>,
    /// Weight decay [default: 0.01 for adamw, 0 otherwise].
    #[arg(long)]
    weight_decay: Option<f64>,
    /// Adam β1 [default: 0.9].
    #[arg(long)]
    beta1: Option<f64>,
    /// Adam β2 [default: 0.999].
    #[arg(long)]
    beta2: Option<f64>,
    /// Adam ε [default: 1e-8].
    #[arg(long)]
    eps: Option<f64>,
    /// Adam's AMSGrad variant.
    #[arg(long)]
    amsgrad: bool,
    /// `constant`, `step:SIZE:GAMMA` or `cosine:TMAX:ETAMIN` [default: constant].
    #[arg(long)]
    schedule: Option<String>,
    /// Linear warm-up steps [default: 0].
    #[arg(long)]
    warmup: Option<u32>,
    /// Samples per PE; a step takes wafers × PEs × this many samples [default: 4].
    #[arg(long)]
    batch_per_pe: Option<usize>,
    /// Epochs (passes over the train split) [default: 10].
    #[arg(long)]
    epochs: Option<u32>,
    /// Steps in all, instead of whole epochs.
    #[arg(long)]
    steps: Option<u32>,
    /// Wafers to train on [default: 2].
    #[arg(long)]
    wafers: Option<u8>,
    /// Seed of the split, the initial weights and every epoch's order [default: 1].
    #[arg(long)]
    seed: Option<u64>,
    /// Share of every class held out for testing [default: 0.2].
    #[arg(long)]
    test_fraction: Option<f64>,
    /// Also evaluate on the test split every N steps (0: at the end of every epoch only).
    #[arg(long, value_name = "N")]
    eval_every: Option<u32>,
    /// Write the checkpoint every N steps as well as at the end (0: at the end only).
    #[arg(long, value_name = "N")]
    checkpoint_every: Option<u32>,
    /// Run on the host's golden models instead of a board (the same loop, bit for bit).
    #[arg(long)]
    golden: bool,
    /// Continue from this checkpoint: its configuration, weights, optimizer state, step and
    /// generator state. Give a larger --epochs or --steps to train further.
    #[arg(long, value_name = "CKPT")]
    resume: Option<PathBuf>,
    /// Where the curves (CSV, PNG, SVG), the split and the checkpoint go.
    #[arg(long, value_name = "DIR", default_value = "train-out")]
    out_dir: PathBuf,
    /// The checkpoint file [default: OUT_DIR/checkpoint.safetensors].
    #[arg(long, value_name = "FILE")]
    checkpoint: Option<PathBuf>,
    /// Record the board's pipeline trace over the run (docs/trace.md): Perfetto JSON to FILE
    /// (open it in ui.perfetto.dev) and the raw records beside it (FILE with `.wstrace`, for
    /// `wsctl trace`), checked and summed up after the run.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Most training steps the board runs per request (MeshTrainRun, the next steps' samples
    /// streaming while it runs; at most 32); 1 sends a request per step. The results do not
    /// change.
    #[arg(long, value_name = "N", default_value_t = STEPS_PER_REQUEST,
          value_parser = clap::value_parser!(u32).range(1..=32))]
    steps_per_request: u32,
    /// The pipeline's debug switch: read each step's first layer back from the store once the
    /// step before has updated it, instead of forwarding MemoryX's updated weights straight
    /// into the next forward pass (docs/mesh-array.md "Forwarding"). The results do not
    /// change; the iteration boundary gets longer, and `check-pipeline` shows by how much.
    #[arg(long)]
    read_back: bool,
}

impl Args {
    /// The configuration: `--config`, else the checkpoint's, else the defaults; then the flags.
    fn config(&self, resume: Option<&Checkpoint>) -> Result<TrainConfig> {
        let mut c = match (&self.config, resume) {
            (Some(path), _) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading the configuration {}", path.display()))?;
                TrainConfig::from_toml(&text, &path.display().to_string())?
            }
            (None, Some(ck)) => ck.config.clone(),
            (None, None) => TrainConfig::default(),
        };
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = &self.$f { c.$f = v.clone(); } )* };
        }
        set!(hidden, optimizer, lr, beta1, beta2, eps, schedule, warmup, batch_per_pe, epochs);
        set!(wafers, seed, test_fraction, eval_every, checkpoint_every);
        if self.data.is_some() {
            c.data = self.data.clone();
        }
        if self.momentum.is_some() {
            c.momentum = self.momentum;
        }
        if self.weight_decay.is_some() {
            c.weight_decay = self.weight_decay;
        }
        if self.steps.is_some() {
            c.steps = self.steps;
        }
        if self.epochs.is_some() && self.steps.is_none() {
            // --epochs on the command line wins over a `steps` key of the file or checkpoint.
            c.steps = None;
        }
        c.amsgrad |= self.amsgrad;
        Ok(c)
    }
}

fn load_data(c: &TrainConfig) -> Result<Dataset> {
    Ok(match &c.data {
        None => Dataset::digits(),
        Some(p) => Dataset::load(p)?,
    })
}

fn board(ctx: &Ctx) -> Result<(Box<dyn Backend>, BoardFigures)> {
    let (board, link) = ctx.link_v2(Config::default())?;
    let mut mesh = open_board(link, &board.name)
        .with_context(|| format!("opening the mesh and MemoryX of board `{}`", board.name))?;
    crate::mx::note_released(mesh.mx().released_at_open());
    let fig = BoardFigures { clock_hz: board.clock_hz, pes: 0 };
    Ok((Box::new(train::Board::new(mesh, &board.name)), fig))
}

pub fn run(ctx: &Ctx, a: Args) -> Result<()> {
    let resume = match &a.resume {
        Some(p) => Some(Checkpoint::load(p)?),
        None => None,
    };
    let cfg = a.config(resume.as_ref())?;
    let data = load_data(&cfg)?;
    let (mut dev, mut fig): (Box<dyn Backend>, Option<BoardFigures>) = if a.golden {
        (Box::new(GoldenBoard::new()), None)
    } else {
        let (d, f) = board(ctx)?;
        (d, Some(f))
    };
    let checkpoint = a.checkpoint.clone().unwrap_or_else(|| a.out_dir.join("checkpoint.safetensors"));
    std::fs::create_dir_all(&a.out_dir)
        .with_context(|| format!("creating the output folder {}", a.out_dir.display()))?;
    eprintln!("data: {}", data.describe());
    let split = data.split(cfg.test_fraction, cfg.seed);
    write(&a.out_dir.join("split.json"), split.to_json())?;

    let bar = ProgressBar::hidden();
    let t0 = Instant::now();
    let (mut first, mut done) = (1u32, 0u32);
    let what = dev.describe();
    let opts = Options {
        checkpoint: Some(checkpoint.clone()),
        resume,
        trace: a.trace.is_some(),
        steps_per_request: a.steps_per_request,
        read_back: a.read_back,
    };
    let summary = train::train(dev.as_mut(), &cfg, &data, &opts, &mut |e| match e {
        Event::Started { run, limits, first: f, last, per_epoch, batch } => {
            if let Some(b) = &mut fig {
                b.pes = limits.pes;
            }
            println!("# the resolved configuration (stored in every checkpoint)");
            print!("{}", run.given.to_toml());
            eprintln!(
                "training MLP {:?} on {what}: steps {f}..={last}, {per_epoch} per epoch, {batch} samples per step",
                run.dims
            );
            first = *f;
            bar.set_length(u64::from(last + 1 - f));
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "step {prefix} {bar:30} {pos}/{len} [{elapsed}<{eta}] {wide_msg}",
                )
                .expect("progress template"),
            );
        }
        Event::Step { point, cycles, .. } => {
            done = point.step + 1 - first;
            bar.set_prefix(format!("{} (epoch {})", point.step, point.epoch + 1));
            bar.set_position(u64::from(done));
            bar.set_message(progress(point.loss, point.accuracy, done, t0.elapsed(), *cycles, fig));
        }
        Event::Eval(p) => say(
            &bar,
            format!(
                "epoch {:>3} (step {:>5}): train loss {:.4} acc {:6.2} %   test loss {:.4} acc {:6.2} %",
                p.epoch + 1,
                p.step,
                p.train_loss,
                p.train_accuracy * 100.0,
                p.test_loss,
                p.test_accuracy * 100.0
            ),
        ),
        Event::Checkpoint(path, step) => {
            say(&bar, format!("checkpoint: {} (step {step})", path.display()));
        }
    });
    bar.finish_and_clear();
    let summary = summary.with_context(|| format!("training on {what}"))?;
    print!("{}", summary_table(&summary, fig));

    let mut files = summary.curves.write_csv(&a.out_dir)?;
    let title = format!(
        "{} on {}: MLP {:?}, {}",
        summary.run.data_name,
        if a.golden { "the golden models" } else { "the board" },
        summary.run.dims,
        summary.run.given.optimizer
    );
    match summary.curves.plot(&a.out_dir, &title) {
        Ok(p) => files.extend(p),
        Err(host_driver::train::curves::CurvesError::NoFont { tried, files: p }) => {
            eprintln!("warning: found no font for the plot's text (looked for {tried}); the pictures have no text: install fonts-dejavu-core or set WS_PLOT_FONT");
            files.extend(p);
        }
        Err(e) => return Err(e.into()),
    }
    files.push(checkpoint);
    if let (Some(path), Some((state, bytes))) = (&a.trace, &summary.trace) {
        let hz = fig.map_or(host_driver::trace::DEFAULT_CLOCK_HZ, |f| f.clock_hz);
        files.extend(crate::trace::write_run_trace(path, state, bytes, hz)?);
    }
    println!("wrote:");
    for f in files {
        println!("  {}", f.display());
    }
    Ok(())
}

/// A line above the bar, or on stderr when the bar is not drawn (stderr is not a terminal),
/// so a log of the run keeps every epoch's line.
fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

fn write(path: &Path, text: String) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
