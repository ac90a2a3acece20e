//! The training loop of `wsctl train`, the same on the board and on the golden models:
//! split, initial weights, per-epoch shuffles, a step per batch with the samples streamed
//! over the data channel, held-out evaluation, checkpoints and resuming from one.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::backend::{Backend, StepOut};
use super::checkpoint::{Arrays, Checkpoint, Figures};
use super::config::{Limits, Resolved, TrainConfig};
use super::curves::{Curves, EpochPoint, StepPoint};
use super::data::{Dataset, Split};
use super::rng::Rng;
use super::TrainError;
use crate::optim::{arrays_for, Array, LayerConfig};
use crate::Result;
use ws_common::ctrl::cmd::TraceState;

/// What the loop tells its caller as it goes.
#[derive(Debug, Clone)]
pub enum Event<'a> {
    /// Everything was checked; the layers are on the device and the first step is next.
    Started {
        /// The configuration.
        run: &'a Resolved,
        /// What the device holds.
        limits: Limits,
        /// The first step to run.
        first: u32,
        /// The last.
        last: u32,
        /// Steps per epoch.
        per_epoch: u32,
        /// Samples per step.
        batch: usize,
    },
    /// A step is done.
    Step {
        /// Its point of the curves.
        point: StepPoint,
        /// The device's answer.
        out: StepOut,
        /// Board cycles so far in the run, at the end of the request the step was in (`None`
        /// on the golden model).
        cycles: Option<u64>,
    },
    /// An evaluation on the test split is done.
    Eval(EpochPoint),
    /// A checkpoint was written.
    Checkpoint(PathBuf, u32),
}

/// How to run it, beyond the configuration.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Where to write checkpoints (every `checkpoint_every` steps and at the end).
    pub checkpoint: Option<PathBuf>,
    /// Continue from this checkpoint.
    pub resume: Option<Checkpoint>,
    /// Record the board's pipeline trace over the run's steps and evaluations.
    pub trace: bool,
    /// Most training steps in one request to the board (`MeshTrainRun`); 0 takes
    /// [`STEPS_PER_REQUEST`], 1 sends a request per step. A request also ends at every
    /// evaluation, checkpoint and epoch end. The numbers do not depend on it.
    pub steps_per_request: u32,
    /// The pipeline's debug switch: runs of steps read each step's first layer back from the
    /// store instead of forwarding it (`MeshTrainRun::read_back`). The numbers do not depend
    /// on it.
    pub read_back: bool,
}

/// Training steps per request by default: the host is off the critical path between them,
/// and the progress lines still come every few seconds on the simulated board.
pub const STEPS_PER_REQUEST: u32 = 16;

impl Options {
    /// [`Options::steps_per_request`], with 0 as the default.
    pub fn per_request(&self) -> u32 {
        match self.steps_per_request {
            0 => STEPS_PER_REQUEST,
            n => n,
        }
    }
}

/// The end of a run.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The configuration.
    pub run: Resolved,
    /// The first step this invocation ran, and the last.
    pub steps: (u32, u32),
    /// Samples per step.
    pub batch: usize,
    /// Mean loss of the last epoch's steps (of this invocation).
    pub train_loss: f64,
    /// Their accuracy.
    pub train_accuracy: f64,
    /// The last evaluation.
    pub test: Option<EpochPoint>,
    /// Board cycles over the run's steps and evaluations (`None` on the golden model).
    pub cycles: Option<u64>,
    /// Board cycles inside the training steps alone.
    pub step_cycles: Option<u64>,
    /// Mesh cycles of the busiest wafer, summed over the steps.
    pub mesh_cycles: u64,
    /// Wall time of the training steps alone.
    pub step_wall: Duration,
    /// Wall time of the whole run.
    pub wall: Duration,
    /// The curves.
    pub curves: Curves,
    /// Every layer's arrays after the last step.
    pub arrays: Arrays,
    /// The generator's state at the start of the next step's epoch.
    pub rng_state: u64,
    /// The board's pipeline trace, with [`Options::trace`]: the unit's final counts and
    /// channel 6's bytes (`crate::trace::Trace::from_bytes` decodes them).
    pub trace: Option<(TraceState, Vec<u8>)>,
}

impl Summary {
    /// Steps this invocation ran.
    pub fn ran(&self) -> u32 {
        self.steps.1 + 1 - self.steps.0
    }

    /// Multiply-adds of one step: per sample the forward pass, dW and db, and dx above
    /// layer 0 (docs/mesh-array.md "Ideal cycles").
    pub fn macs_per_step(&self) -> u64 {
        let d = &self.run.dims;
        let per_sample = d.windows(2).map(|w| (w[0] * w[1]) as u64).sum::<u64>() * 3 - (d[0] * d[1]) as u64;
        per_sample * self.batch as u64
    }

    /// The ideal cycles of a step: its MACs at one FMA per PE per cycle on every wafer.
    pub fn ideal_cycles(&self, pes: usize) -> f64 {
        self.macs_per_step() as f64 / (usize::from(self.run.given.wafers) * pes) as f64
    }
}

/// The initial weights: each layer's weights and biases uniform in ±1/√fan_in, as PyTorch's
/// `nn.Linear` draws them, from the run's generator, layer 0 first, row by row.
fn initial_weights(r: &Resolved, rng: &mut Rng) -> Vec<Vec<u32>> {
    (0..r.layers())
        .map(|l| {
            let k = 1.0 / (r.dims[l] as f32).sqrt();
            (0..r.layer_words(l)).map(|_| rng.uniform_f32(-k, k).to_bits()).collect()
        })
        .collect()
}

fn words(x: &[f32]) -> impl Iterator<Item = u32> + '_ {
    x.iter().map(|v| v.to_bits())
}

/// The samples `idx` as the device takes them: inputs sample-major, then labels.
fn gather(data: &Dataset, idx: &[usize]) -> (Vec<u32>, Vec<u32>) {
    let x = idx.iter().flat_map(|&i| words(data.sample(i))).collect();
    let y = idx.iter().map(|&i| data.label(i)).collect();
    (x, y)
}

/// Evaluates the test split on `dev`, in batches of every wafer's slots.
fn evaluate(
    dev: &mut dyn Backend,
    data: &Dataset,
    test: &[usize],
    per_wafer: usize,
    wafers: u8,
) -> Result<(f64, f64)> {
    let (mut loss, mut correct) = (0.0, 0.0);
    for part in test.chunks(per_wafer * usize::from(wafers)) {
        let (x, y) = gather(data, part);
        let w = part.len().div_ceil(per_wafer) as u8;
        let out = dev.eval(w, &x, &y)?;
        loss += out.loss_sum();
        correct += out.correct_count();
    }
    let n = test.len().max(1) as f64;
    Ok((loss / n, correct / n))
}

/// Trains `cfg` on `data` on `dev`, telling `on` as it goes.
///
/// Nothing streams before every check has passed: the configuration against the data set,
/// the device's limits, and a checkpoint to resume from against the configuration.
pub fn train(
    dev: &mut dyn Backend,
    cfg: &TrainConfig,
    data: &Dataset,
    opts: &Options,
    on: &mut dyn FnMut(&Event<'_>),
) -> Result<Summary> {
    let started = Instant::now();
    let r = cfg.resolve(data.d, data.classes, &data.name)?;
    let split: Split = data.split(cfg.test_fraction, cfg.seed);
    let limits = dev.setup(&r)?;
    r.check(&limits, split.train.len())?;
    if let Some(ck) = &opts.resume {
        ck.check_matches(&r)?;
    }
    let per_epoch = r.steps_per_epoch(&limits, split.train.len());
    let last = r.total_steps(&limits, split.train.len());
    let start = opts.resume.as_ref().map_or(0, |c| c.step);
    if start >= last {
        return Err(TrainError::Config(format!(
            "the checkpoint is at step {start} and the run ends at step {last}: give more --epochs or --steps"
        ))
        .into());
    }
    let (batch, per_wafer, wafers) = (r.batch(&limits), r.per_wafer(&limits), cfg.wafers);

    // The layers: fresh, or the checkpoint's, created at its step so that the bias
    // corrections and the schedule continue exactly.
    let mut rng = Rng::new(cfg.seed);
    let init = match &opts.resume {
        Some(ck) => {
            rng = Rng::from_state(ck.rng_state);
            ck.arrays.clone()
        }
        None => initial_weights(&r, &mut rng).into_iter().map(|w| vec![(Array::W, w)]).collect(),
    };
    for (l, layer) in init.iter().enumerate() {
        let len = r.layer_words(l);
        let lc = LayerConfig {
            len,
            hyper: r.hyper,
            schedule: r.schedule,
            workers: u32::from(wafers),
            batch: per_wafer as u32,
            start,
        };
        let mx = dev.mx();
        mx.create_layer(l as u16, &lc)?;
        for &a in arrays_for(&r.hyper) {
            let zero = vec![0; len as usize];
            let w = layer.iter().find(|(b, _)| *b == a).map_or(&zero, |(_, w)| w);
            mx.write_array(l as u16, a, w)?;
        }
    }
    on(&Event::Started { run: &r, limits, first: start + 1, last, per_epoch, batch });

    dev.set_read_back(opts.read_back);
    if opts.trace {
        dev.trace_start()?;
    }
    let mut curves = Curves::default();
    let cycles0 = dev.cycles();
    let (mut step_cycles, mut mesh_cycles, mut step_wall) = (0u64, 0u64, Duration::ZERO);
    let mut perm: Option<Vec<usize>> = None;
    let mut epoch_state = rng.state();
    let (mut epoch_loss, mut epoch_correct, mut epoch_steps) = (0.0f64, 0.0f64, 0u32);
    let mut test: Option<EpochPoint> = None;
    let mut next_state = rng.state();
    // A step after which the host must act: an evaluation, a checkpoint or an epoch's end.
    let boundary = |t: u32| {
        t == last
            || t % per_epoch == 0
            || (cfg.eval_every > 0 && t % cfg.eval_every == 0)
            || (opts.checkpoint.is_some() && cfg.checkpoint_every > 0 && t % cfg.checkpoint_every == 0)
    };
    let mut first = start + 1;
    while first <= last {
        let (epoch, pos) = ((first - 1) / per_epoch, ((first - 1) % per_epoch) as usize);
        if pos == 0 || perm.is_none() {
            epoch_state = rng.state();
            let mut p = split.train.clone();
            rng.shuffle(&mut p);
            perm = Some(p);
            if pos == 0 {
                (epoch_loss, epoch_correct, epoch_steps) = (0.0, 0.0, 0);
            }
        }
        // Steps first ..= end go to the device in one request; none of them but the last is
        // a boundary, so they share the epoch's order.
        let mut end = first;
        while !boundary(end) && end - first + 1 < opts.per_request() {
            end += 1;
        }
        let order = perm.as_ref().expect("shuffled above");
        let batches: Vec<_> = (first..=end)
            .map(|t| {
                let pos = ((t - 1) % per_epoch) as usize;
                gather(data, &order[pos * batch..(pos + 1) * batch])
            })
            .collect();
        let (c0, w0) = (dev.cycles(), Instant::now());
        let outs = dev.train_run(first, wafers, &batches)?;
        step_wall += w0.elapsed();
        if let (Some(a), Some(b)) = (c0, dev.cycles()) {
            step_cycles += b.saturating_sub(a);
        }
        let cycles = match (cycles0, dev.cycles()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        for (t, out) in (first..=end).zip(outs) {
            mesh_cycles += u64::from(out.mesh_cycles);
            let point = StepPoint {
                step: t,
                epoch,
                loss: (out.loss_sum() / batch as f64) as f32,
                accuracy: (out.correct_count() / batch as f64) as f32,
            };
            epoch_loss += out.loss_sum() / batch as f64;
            epoch_correct += out.correct_count() / batch as f64;
            epoch_steps += 1;
            curves.steps.push(point);
            on(&Event::Step { point, out, cycles });
        }
        let t = end;
        let epoch_end = t % per_epoch == 0;
        next_state = if epoch_end { rng.state() } else { epoch_state };

        if epoch_end || t == last || (cfg.eval_every > 0 && t % cfg.eval_every == 0) {
            let (test_loss, test_accuracy) = evaluate(dev, data, &split.test, per_wafer, wafers)?;
            let n = f64::from(epoch_steps.max(1));
            let p = EpochPoint {
                epoch,
                step: t,
                train_loss: (epoch_loss / n) as f32,
                train_accuracy: (epoch_correct / n) as f32,
                test_loss: test_loss as f32,
                test_accuracy: test_accuracy as f32,
            };
            curves.epochs.push(p);
            on(&Event::Eval(p));
            test = Some(p);
        }
        if let Some(path) = &opts.checkpoint {
            if t == last || (cfg.checkpoint_every > 0 && t % cfg.checkpoint_every == 0) {
                let ck = Checkpoint {
                    step: t,
                    epoch,
                    rng_state: next_state,
                    config: cfg.clone(),
                    arrays: read_arrays(dev, &r)?,
                };
                let fig = Figures {
                    train_loss: epoch_loss / f64::from(epoch_steps.max(1)),
                    test_accuracy: test.as_ref().map(|p| f64::from(p.test_accuracy)),
                    lr: r.schedule.lr_at(t),
                };
                ck.write(path, &r, &fig)?;
                on(&Event::Checkpoint(path.clone(), t));
            }
        }
        first = end + 1;
    }
    let trace = if opts.trace { Some(dev.trace_stop()?) } else { None };
    let arrays = read_arrays(dev, &r)?;
    let cycles = match (cycles0, dev.cycles()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    dev.release()?;
    let n = f64::from(epoch_steps.max(1));
    Ok(Summary {
        run: r,
        steps: (start + 1, last),
        batch,
        train_loss: epoch_loss / n,
        train_accuracy: epoch_correct / n,
        test,
        cycles,
        step_cycles: cycles0.map(|_| step_cycles),
        mesh_cycles,
        step_wall,
        wall: started.elapsed(),
        curves,
        arrays,
        rng_state: next_state,
        trace,
    })
}

/// Every array of every layer, read back from the device.
fn read_arrays(dev: &mut dyn Backend, r: &Resolved) -> Result<Arrays> {
    let mut out = Vec::with_capacity(r.layers());
    for l in 0..r.layers() {
        let mut layer = Vec::new();
        for &a in arrays_for(&r.hyper) {
            layer.push((a, dev.mx().read_array(l as u16, a, r.layer_words(l))?));
        }
        out.push(layer);
    }
    Ok(out)
}
