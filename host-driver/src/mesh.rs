//! The board's wafer mesh over link protocol v2 (docs/mesh-array.md "Firmware driver"):
//! [`BoardMesh::setup`] names an MLP and the batch per PE, [`BoardMesh::step`] runs one
//! training step: the samples go on channel 4, the weights on channel 2, the gradients come
//! back on channel 2 while the board runs the step, and the answer carries the loss sum, the
//! correct count and the mesh's counters.
//!
//! Shapes are checked here first with the same rules the firmware applies
//! (`ws_common::mesh::check_step`), so a refusal names what to change.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ws_common::ctrl::cmd::{MeshPlan, MeshSetup, MeshStep, MeshStepDone, MeshTrain, MESH_MAX_DIMS};
use ws_common::ctrl::Status;
use ws_common::golden::mesh::step::{run, Metrics};
use ws_common::golden::mesh::{Config, Layer, Mesh, Model, Reduce, Sram, StreamLayout};
use ws_common::link::Channel;
use ws_common::mesh::{check_step, StepMap};

use crate::error::{Error, MeshError, ProtocolError};
use crate::link::{Endpoint, Link};
use crate::optim::BoardMx;
use crate::Result;

/// How long a mesh request may wait without a word moving (a simulated board is slow).
pub const STALL: Duration = Duration::from_secs(120);

/// The shape a setup named.
#[derive(Debug, Clone)]
struct Shape {
    dims: Vec<usize>,
    b: usize,
    plan: MeshPlan,
}

/// What one step gave back.
#[derive(Debug, Clone)]
pub struct StepResult {
    /// The board's answer.
    pub done: MeshStepDone,
    /// Every layer's dW/db, last layer first (`golden::mesh::step::StepOutput` order).
    pub gradients: Vec<u32>,
}

/// The board's mesh, and its MemoryX (whose layers a train step updates).
pub struct BoardMesh {
    mx: BoardMx,
    name: String,
    shape: Option<Shape>,
}

impl std::fmt::Debug for BoardMesh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoardMesh").field("name", &self.name).finish_non_exhaustive()
    }
}

/// Opens the mesh on a connected link: switches the bulk channels to MemoryX's rings (the
/// mesh shares them) through [`crate::optim::open_board`]. `name` names the board in messages.
pub fn open_board(link: Link, name: &str) -> Result<BoardMesh> {
    let mx = crate::optim::open_board(link, name)?;
    Ok(BoardMesh { mx, name: format!("board `{name}`"), shape: None })
}

fn bytes(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

impl BoardMesh {
    /// The link, for other requests between steps.
    pub fn link(&mut self) -> &mut Link {
        self.mx.link()
    }

    /// The board's MemoryX: the layers a train step updates are created and read through it
    /// (`MxDevice`).
    pub fn mx(&mut self) -> &mut BoardMx {
        &mut self.mx
    }

    /// Sets the mesh up for the MLP `dims` (input width first, classes last) with `b` samples
    /// per PE and `rows_per_chunk` weight rows per chunk.
    pub fn setup(&mut self, dims: &[usize], b: usize, rows_per_chunk: usize) -> Result<MeshPlan> {
        let shape_err = |source| MeshError::Shape { dims: dims.to_vec(), b, source };
        // The limits every mesh has; the board checks its own SRAM, slots and program store.
        check_step(dims, b, rows_per_chunk, usize::MAX, u32::MAX, usize::MAX).map_err(shape_err)?;
        let mut q = MeshSetup {
            b: b as u16,
            rows_per_chunk: rows_per_chunk.min(0xffff) as u16,
            dims: [0; MESH_MAX_DIMS],
            ndims: dims.len() as u8,
        };
        for (d, &w) in q.dims.iter_mut().zip(dims) {
            *d = w as u16;
        }
        let plan = self.mx.link().request(&q, STALL, 0).map_err(|e| match e.refusal() {
            Some(Status::BadArgument) => MeshError::Board {
                board: self.name.clone(),
                what: format!(
                    "refused MLP {dims:?} with B = {b}: each PE would need {} SRAM words, {b} sample slots \
                     and {} instructions, or a chunk of {rows_per_chunk} rows is more than half a link ring; \
                     use a smaller batch per PE, narrower layers or fewer rows per chunk",
                    StepMap::new(dims, b).words,
                    4 * (dims.len() - 1),
                ),
            }
            .into(),
            Some(Status::NotPresent) => MeshError::Board {
                board: self.name.clone(),
                what: "has no wafer mesh (its SoC was built without one; the simulated board has a 2x2 mesh)"
                    .into(),
            }
            .into(),
            _ => e,
        })?;
        self.shape = Some(Shape { dims: dims.to_vec(), b, plan });
        Ok(plan)
    }

    /// The plan of the last setup.
    pub fn plan(&self) -> Option<&MeshPlan> {
        self.shape.as_ref().map(|s| &s.plan)
    }

    /// Runs step `step` on N samples: `x` (N·d_0 words, sample-major), `labels` (N class
    /// indices), `params` (every layer's rows of bias then weights, layer 0 first, as
    /// `golden::mesh::Model` lays them out).
    pub fn step(&mut self, step: u16, x: &[u32], labels: &[u32], params: &[u32]) -> Result<StepResult> {
        let s =
            self.shape.clone().ok_or_else(|| MeshError::Usage("run `setup` before the first step".into()))?;
        let n = labels.len();
        let usage = |what: String| -> Error { MeshError::Usage(what).into() };
        if n == 0 || n as u32 > s.plan.capacity {
            return Err(usage(format!(
                "{n} samples: the mesh holds 1 to {} ({} PEs x {} per PE)",
                s.plan.capacity,
                u32::from(s.plan.rows) * u32::from(s.plan.cols),
                s.b
            )));
        }
        if x.len() != n * s.dims[0] {
            return Err(usage(format!("{} input words for {n} samples of width {}", x.len(), s.dims[0])));
        }
        let layers = s.dims.len() - 1;
        let words = |l: usize| Layer::new(s.dims[l], s.dims[l + 1]).words().unwrap_or(0);
        let offset = |l: usize| (0..l).map(words).sum::<usize>();
        if params.len() != offset(layers) {
            return Err(usage(format!("{} parameter words for an MLP of {}", params.len(), offset(layers))));
        }
        let mut samples = bytes(x);
        samples.extend(bytes(labels));
        let mut weights = Vec::with_capacity(4 * s.plan.weight_words as usize);
        for l in (0..layers).chain((1..layers).rev()) {
            weights.extend(bytes(&params[offset(l)..offset(l + 1)]));
        }
        let want = 4 * s.plan.grad_words as usize;
        let (mut sent_s, mut sent_w) = (0usize, 0usize);
        let mut got: Vec<u8> = Vec::with_capacity(want);
        let mut buf = vec![0u8; 64 << 10];
        let mut take = |ep: &mut Endpoint, got: &mut Vec<u8>| -> Result<bool> {
            let mut moved = false;
            while got.len() < want {
                let room = (want - got.len()).min(buf.len());
                let n = ep.read(Channel::Weights, &mut buf[..room]).map_err(ProtocolError::Stream)?;
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                moved = true;
            }
            Ok(moved)
        };
        let q = MeshStep { step, samples: n as u16 };
        let done = self.mx.link().request_with(&q, STALL, 0, &mut |ep| {
            let mut moved = take(ep, &mut got)?;
            if sent_s < samples.len() {
                let k = ep.write(Channel::Data, &samples[sent_s..]).map_err(ProtocolError::Stream)?;
                sent_s += k;
                moved |= k > 0;
            }
            if sent_w < weights.len() {
                let k = ep.write(Channel::Weights, &weights[sent_w..]).map_err(ProtocolError::Stream)?;
                sent_w += k;
                moved |= k > 0;
            }
            Ok(moved)
        });
        let done = done.map_err(|e| match e.refusal() {
            Some(Status::BadStep) => usage("the board has no mesh setup (it was reset?): run `setup` again".into()),
            Some(st) => MeshError::Board {
                board: self.name.clone(),
                what: format!(
                    "failed step {step} ({st:?}); its PEs may hold a half-run program: reset the board (`wsctl reset`) and set the mesh up again"
                ),
            }
            .into(),
            None => e,
        })?;
        // The answer comes once the board has queued every word; the last may still be on
        // the wire.
        let deadline = std::time::Instant::now() + STALL;
        while got.len() < want {
            self.mx.link().pump(Duration::from_millis(2))?;
            let before = got.len();
            take(self.mx.link().endpoint(), &mut got)?;
            if got.len() == before && std::time::Instant::now() > deadline {
                return Err(MeshError::Board {
                    board: self.name.clone(),
                    what: format!("sent {} of the {want} gradient bytes of step {step}", got.len()),
                }
                .into());
            }
        }
        let gradients = got.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        Ok(StepResult { done, gradients })
    }
}

impl BoardMesh {
    /// Runs training step `t` with MemoryX in the loop (`MeshTrain`): the board takes the
    /// weights of MemoryX layers 0 … L−1 (created with the setup's layer shapes, at step
    /// t − 1), runs the step on `x` and `labels`, and MemoryX applies its optimizer step `t`
    /// to every layer with the mesh's gradients. Only the samples cross the link.
    pub fn train(&mut self, t: u32, x: &[u32], labels: &[u32]) -> Result<MeshStepDone> {
        let s =
            self.shape.clone().ok_or_else(|| MeshError::Usage("run `setup` before the first step".into()))?;
        let n = labels.len();
        if n == 0 || n as u32 > s.plan.capacity || x.len() != n * s.dims[0] {
            return Err(MeshError::Usage(format!(
                "{n} samples of {} input words: the mesh takes 1 to {} samples of {} words",
                x.len(),
                s.plan.capacity,
                s.dims[0]
            ))
            .into());
        }
        let mut samples = bytes(x);
        samples.extend(bytes(labels));
        let mut sent = 0usize;
        let q = MeshTrain { t, samples: n as u16 };
        let done = self.mx.link().request_with(&q, STALL, 0, &mut |ep| {
            if sent == samples.len() {
                return Ok(false);
            }
            let k = ep.write(Channel::Data, &samples[sent..]).map_err(ProtocolError::Stream)?;
            sent += k;
            Ok(k > 0)
        });
        let layers = s.dims.len() - 1;
        done.map_err(|e| match e.refusal() {
            Some(Status::BadStep) | Some(Status::NoLayer) => MeshError::Usage(format!(
                "the board refused train step {t}: run `setup` first, create MemoryX layers 0..{layers} \
                 (one per mesh layer) and train them in order from step 1"
            ))
            .into(),
            Some(Status::BadArgument) => MeshError::Board {
                board: self.name.clone(),
                what: format!(
                    "refused train step {t}: each MemoryX layer l must hold exactly the mesh layer's \
                     (d_l + 1)·d_(l+1) parameters, SwarmX's last port (the mesh's) must be in its mask, \
                     and the backward weights must fit the staging ring"
                ),
            }
            .into(),
            Some(st) => MeshError::Board {
                board: self.name.clone(),
                what: format!(
                    "failed train step {t} ({st:?}); its PEs may hold a half-run program and its layers a \
                     half-applied update: reset the board (`wsctl reset`) and start the run again; \
                     `wsctl mesh train --checkpoint FILE` keeps the last whole step"
                ),
            }
            .into(),
            None => e,
        })
    }
}

/// The golden model of one step on the plan's mesh (`golden::mesh::step::run`, the order the
/// array reduces in): the metrics, and the gradient words in the order the board sends them.
pub fn golden_step(
    plan: &MeshPlan,
    dims: &[usize],
    rows_per_chunk: usize,
    step: u16,
    params: &[u32],
    x: &[u32],
    labels: &[u32],
) -> Result<(Metrics, Vec<u32>)> {
    let cfg = Config {
        mesh: Mesh::new(usize::from(plan.rows), usize::from(plan.cols), usize::from(plan.b)),
        model: Model::new(dims),
        // The golden budget is not the PE's (docs/mesh-pe.md); the board checked its own.
        sram: Sram { words: 1 << 24, program_words: 0 },
        stream: StreamLayout::new(rows_per_chunk),
        order: Reduce::Snake,
    };
    let bad = |e: ws_common::golden::mesh::MeshError| -> Error {
        MeshError::Usage(format!("golden model: {e}")).into()
    };
    let out = run(&cfg, params, x, labels).map_err(bad)?;
    let flits = out.gradient_flits(&cfg, step).map_err(bad)?;
    Ok((out.metrics, flits.iter().map(|f| f.payload).collect()))
}

/// The golden model of one step's gradients, flat like the parameters (layer 0 first), and
/// its metrics: what a train step feeds MemoryX, before SwarmX.
pub fn golden_grads(
    plan: &MeshPlan,
    dims: &[usize],
    params: &[u32],
    x: &[u32],
    labels: &[u32],
) -> Result<(Metrics, Vec<u32>)> {
    let cfg = Config {
        mesh: Mesh::new(usize::from(plan.rows), usize::from(plan.cols), usize::from(plan.b)),
        model: Model::new(dims),
        sram: Sram { words: 1 << 24, program_words: 0 },
        stream: StreamLayout::new(1),
        order: Reduce::Snake,
    };
    let out = run(&cfg, params, x, labels)
        .map_err(|e| -> Error { MeshError::Usage(format!("golden model: {e}")).into() })?;
    Ok((out.metrics, out.grads))
}

/// One row of a training run's table.
#[derive(Debug, Clone)]
pub struct TrainRow {
    /// The board's answer.
    pub done: MeshStepDone,
    /// Samples.
    pub samples: usize,
    /// Wall time of the step.
    pub wall: Duration,
    /// Words of the layers (weights and optimizer state) that differ from the golden model
    /// after the step (`None`: not checked).
    pub diff: Option<usize>,
    /// The board's loss equals the golden model's.
    pub loss_exact: bool,
}

/// A training run with MemoryX in the loop, as `wsctl mesh train` and `cargo xtask run`
/// drive it.
#[derive(Debug, Clone)]
pub struct TrainRun {
    /// Layer widths, input first, classes last.
    pub dims: Vec<usize>,
    /// Samples per PE.
    pub batch_per_pe: usize,
    /// Steps.
    pub steps: u32,
    /// The optimizer.
    pub hyper: ws_common::golden::optim::Hyper,
    /// Its learning rate.
    pub lr: f64,
    /// Seed of the parameters and the data.
    pub seed: u64,
    /// Check every step against the golden mesh, SwarmX node and optimizer.
    pub verify: bool,
    /// Where to keep the checkpoint ([`checkpoint_bytes`]): rewritten after every completed
    /// step, through a temporary file and a rename, so a run that fails part way leaves the
    /// last whole step.
    pub checkpoint: Option<PathBuf>,
}

/// The `format` of a `wsctl mesh train` checkpoint's metadata.
pub const CHECKPOINT_FORMAT: &str = "weightstream-mesh-train-1";

/// A training run's checkpoint as a safetensors file.
///
/// - Layer l's parameters are the tensor `layer{l}` of shape [d_(l+1), d_l + 1]. Row i is
///   output i: its bias, then its d_l input weights (`golden::mesh::Model::param_offset`).
/// - The optimizer state sits beside it under PyTorch's names (`layer{l}.exp_avg`,
///   `layer{l}.exp_avg_sq`, `layer{l}.momentum_buffer`, …), in the same shape.
/// - The metadata holds `format` ([`CHECKPOINT_FORMAT`]), `step` (the last completed step),
///   `dims`, `batch_per_pe`, `samples`, `seed`, `optimizer`, `lr` and `loss` (the last
///   step's loss per sample).
pub fn checkpoint_bytes(
    run: &TrainRun,
    step: u32,
    samples: usize,
    loss: f32,
    arrays: &[Vec<(crate::optim::Array, Vec<u32>)>],
) -> Result<Vec<u8>> {
    use crate::optim::files::{encode, optimizer_name};
    use crate::optim::Tensor;
    let dims = &run.dims;
    let mut tensors = Vec::new();
    for (l, layer) in arrays.iter().enumerate() {
        for (a, words) in layer {
            let name = match a.torch_state(run.hyper.kind) {
                None => format!("layer{l}"),
                Some(s) => format!("layer{l}.{s}"),
            };
            tensors.push(Tensor { name, shape: vec![dims[l + 1], dims[l] + 1], data: words.clone() });
        }
    }
    let dims_text: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    let meta: std::collections::HashMap<String, String> = [
        ("format", CHECKPOINT_FORMAT.to_string()),
        ("step", step.to_string()),
        ("dims", dims_text.join(",")),
        ("batch_per_pe", run.batch_per_pe.to_string()),
        ("samples", samples.to_string()),
        ("seed", run.seed.to_string()),
        ("optimizer", optimizer_name(run.hyper.kind).to_string()),
        ("lr", format!("{:?}", run.lr)),
        ("loss", format!("{loss:?}")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    encode(&tensors, Some(meta), "the checkpoint")
}

/// Writes `bytes` to `path` whole or not at all: a temporary file beside it, then a rename.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|source| crate::error::OptimError::Write { path: path.into(), source }.into())
}

/// xorshift64: random parameters and samples that need no crate and repeat with the seed
/// (the seed must not be 0).
#[derive(Debug, Clone)]
pub struct Gen(pub u64);

impl Gen {
    /// The next 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A binary32 in [−scale, scale), as bits.
    pub fn f32(&mut self, scale: f32) -> u32 {
        let u = (self.bits() >> 40) as f32 / (1u64 << 24) as f32;
        ((2.0 * u - 1.0) * scale).to_bits()
    }
}

impl TrainRun {
    /// Runs it on `dev`: sets the mesh up, creates MemoryX layers 0 … L−1 with random
    /// weights (and zero optimizer state), and trains on one batch of a synthetic task (the
    /// label is the argmax of a fixed random linear map of the input) for `steps` steps,
    /// calling `row` after each.
    pub fn run(&self, dev: &mut BoardMesh, row: &mut dyn FnMut(&TrainRow)) -> Result<Vec<TrainRow>> {
        use crate::optim::{arrays_for, Array, Golden, LayerConfig, MxDevice};
        use ws_common::ctrl::cmd::SwarmStatus;
        use ws_common::golden::schedule::Schedule;
        use ws_common::golden::swarm::{node_lane, NodeConfig};

        let dims = &self.dims;
        let plan = dev.setup(dims, self.batch_per_pe, 1)?;
        let ports = usize::from(dev.link().request(&SwarmStatus, STALL, 1)?.ports);
        let n = plan.capacity as usize;
        let classes = *dims.last().unwrap_or(&1);
        let mut gen = Gen(self.seed.max(1));
        let teacher: Vec<f32> = (0..classes * dims[0]).map(|_| f32::from_bits(gen.f32(1.0))).collect();
        let x: Vec<u32> = (0..n * dims[0]).map(|_| gen.f32(1.0)).collect();
        let labels: Vec<u32> = (0..n)
            .map(|s| {
                let score = |c: usize| -> f32 {
                    (0..dims[0]).map(|k| teacher[c * dims[0] + k] * f32::from_bits(x[s * dims[0] + k])).sum()
                };
                (0..classes).max_by(|&a, &c| score(a).total_cmp(&score(c))).unwrap_or(0) as u32
            })
            .collect();
        let layers = dims.len() - 1;
        let words = |l: usize| ((dims[l] + 1) * dims[l + 1]) as u32;
        let mut gold = Golden::new().with_swarm_ports(ports);
        for (l, &inputs) in dims[..layers].iter().enumerate() {
            let cfg = LayerConfig {
                len: words(l),
                hyper: self.hyper,
                schedule: Schedule::constant(self.lr),
                workers: 1,
                batch: n as u32,
            };
            // He-style scale: the inputs' variance kept through the ReLUs.
            let scale = (2.0 / inputs as f32).sqrt();
            let w: Vec<u32> = (0..words(l)).map(|_| gen.f32(scale)).collect();
            for d in [dev.mx() as &mut dyn MxDevice, &mut gold] {
                d.create_layer(l as u16, &cfg)?;
                d.write_array(l as u16, Array::W, &w)?;
                for &a in &arrays_for(&self.hyper)[1..] {
                    d.write_array(l as u16, a, &vec![0; words(l) as usize])?;
                }
            }
        }
        let node = NodeConfig::new(ports).mask(1 << (ports - 1));
        let mut rows = Vec::new();
        for t in 1..=self.steps {
            let golden = if self.verify {
                let params = (0..layers)
                    .map(|l| gold.read_array(l as u16, Array::W, words(l)))
                    .collect::<Result<Vec<_>>>()?
                    .concat();
                Some(golden_grads(&plan, dims, &params, &x, &labels)?)
            } else {
                None
            };
            let t0 = std::time::Instant::now();
            let done = dev.train(t, &x, &labels)?;
            let wall = t0.elapsed();
            let (mut diff, mut loss_exact) = (None, true);
            if let Some((metrics, grads)) = golden {
                loss_exact = done.loss == metrics.loss && done.correct == (metrics.correct as f32).to_bits();
                let mut at = 0;
                let mut reduced = Vec::new();
                for l in 0..layers {
                    let g = &grads[at..at + words(l) as usize];
                    at += g.len();
                    let mut v = vec![0u32; ports];
                    let r: Vec<u32> = g
                        .iter()
                        .map(|&w| {
                            v[ports - 1] = w;
                            node_lane(&node, &v).unwrap_or(w)
                        })
                        .collect();
                    reduced.push(r);
                }
                let refs: Vec<(u16, &[u32])> =
                    reduced.iter().enumerate().map(|(l, g)| (l as u16, g.as_slice())).collect();
                gold.step(t, &refs)?;
                let mut d = 0;
                for l in 0..layers {
                    for &a in arrays_for(&self.hyper) {
                        let got = dev.mx().read_array(l as u16, a, words(l))?;
                        let want = gold.read_array(l as u16, a, words(l))?;
                        d += got.iter().zip(&want).filter(|(p, q)| p != q).count();
                    }
                }
                diff = Some(d);
            }
            if let Some(path) = &self.checkpoint {
                let mut arrays = Vec::with_capacity(layers);
                for l in 0..layers {
                    let mut layer = Vec::new();
                    for &a in arrays_for(&self.hyper) {
                        layer.push((a, dev.mx().read_array(l as u16, a, words(l))?));
                    }
                    arrays.push(layer);
                }
                let loss = f32::from_bits(done.loss) / n as f32;
                write_whole(path, &checkpoint_bytes(self, t, n, loss, &arrays)?)?;
            }
            let r = TrainRow { done, samples: n, wall, diff, loss_exact };
            row(&r);
            rows.push(r);
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::files::{metadata_of, Model};
    use crate::optim::Array;
    use ws_common::golden::optim::Hyper;

    fn run(hyper: Hyper) -> TrainRun {
        TrainRun {
            dims: vec![3, 4, 2],
            batch_per_pe: 2,
            steps: 5,
            hyper,
            lr: 0.02,
            seed: 9,
            verify: false,
            checkpoint: None,
        }
    }

    #[test]
    fn a_checkpoint_reads_back_with_its_names_shapes_and_metadata() {
        let r = run(Hyper::ADAM);
        let mut gen = Gen(3);
        let arrays: Vec<Vec<(Array, Vec<u32>)>> = [(3usize, 4usize), (4, 2)]
            .iter()
            .map(|&(i, o)| {
                [Array::W, Array::M, Array::V]
                    .iter()
                    .map(|&a| (a, (0..(i + 1) * o).map(|_| gen.f32(1.0)).collect()))
                    .collect()
            })
            .collect();
        let bytes = checkpoint_bytes(&r, 4, 32, 0.25, &arrays).unwrap();
        let meta = metadata_of(&bytes, "t").unwrap();
        for (k, v) in [
            ("format", CHECKPOINT_FORMAT),
            ("step", "4"),
            ("dims", "3,4,2"),
            ("batch_per_pe", "2"),
            ("samples", "32"),
            ("optimizer", "adam"),
            ("loss", "0.25"),
        ] {
            assert_eq!(meta.get(k).map(String::as_str), Some(v), "{k}");
        }
        let m = Model::parse(&bytes, "t").unwrap();
        let names: Vec<&str> = m.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "layer0",
                "layer0.exp_avg",
                "layer0.exp_avg_sq",
                "layer1",
                "layer1.exp_avg",
                "layer1.exp_avg_sq"
            ]
        );
        for (t, (l, a)) in m.tensors.iter().zip([(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]) {
            assert_eq!(t.shape, [[4, 4], [2, 5]][l]);
            assert!(t.data == arrays[l][a].1, "{}", t.name);
        }
    }

    #[test]
    fn a_checkpoint_is_written_whole() {
        let dir = std::env::temp_dir().join(format!("ws-ckpt-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.safetensors");
        write_whole(&path, b"first").unwrap();
        write_whole(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert!(!dir.join("c.safetensors.partial").exists());
        let e = write_whole(&dir.join("missing/c.safetensors"), b"x").unwrap_err();
        assert!(e.to_string().contains("check that its folder exists"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
