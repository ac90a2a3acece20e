//! The files of a `wsctl optim` run, in safetensors (docs/host.md "wsctl optim").
//!
//! - The **model**: F32 tensors of any shape; each is one MemoryX layer, in sorted-name order
//!   (safetensors keeps names sorted).
//! - The **gradients**: for each step t = 1..K and each model tensor N, an F32 tensor
//!   `step{t}/{N}` of N's shape (the gradient summed over workers and batch; the device scales
//!   it by 1/(workers·batch)). Other tensors are ignored.
//! - The **result**: for each tensor N, `N` (the weights) and the optimizer state under
//!   PyTorch's names, `N.momentum_buffer` (SGD with momentum), `N.exp_avg`, `N.exp_avg_sq`
//!   and `N.max_exp_avg_sq` (Adam, AdamW, amsgrad), all F32 with N's shape; `__metadata__`
//!   holds the step count, the optimizer, every hyperparameter and the schedule as strings.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use ws_common::golden::optim::Kind;
use ws_common::golden::schedule::{Schedule, ScheduleKind};

use super::{LayerConfig, RunReport};
use crate::error::OptimError;
use crate::Result;

/// One F32 tensor: its name, shape and values as binary32 bit patterns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor {
    /// The name in the file.
    pub name: String,
    /// The shape.
    pub shape: Vec<usize>,
    /// The values, row-major.
    pub data: Vec<u32>,
}

impl Tensor {
    /// Elements (the layer length; [`Model::parse`] refuses more than `u32::MAX`).
    pub fn len(&self) -> u32 {
        self.data.len() as u32
    }

    /// True when the tensor has no elements (never for a parsed model).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// A model: F32 tensors, sorted by name; tensor i is layer i.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    /// The tensors.
    pub tensors: Vec<Tensor>,
}

fn parse_err(what: &str, e: impl std::fmt::Display) -> crate::Error {
    OptimError::Parse { what: what.into(), reason: e.to_string() }.into()
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| OptimError::Read { path: path.into(), source }.into())
}

fn f32_words(what: &str, name: &str, v: &TensorView<'_>) -> Result<Vec<u32>> {
    if v.dtype() != Dtype::F32 {
        return Err(OptimError::Dtype {
            what: what.into(),
            tensor: name.into(),
            dtype: format!("{:?}", v.dtype()),
        }
        .into());
    }
    Ok(v.data().chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

impl Model {
    /// Reads a model file.
    pub fn load(path: &Path) -> Result<Model> {
        Model::parse(&read(path)?, &path.display().to_string())
    }

    /// Parses a model from the bytes of a safetensors file (`what` names it in errors):
    /// every tensor F32 and non-empty, at most 65536 tensors.
    pub fn parse(bytes: &[u8], what: &str) -> Result<Model> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| parse_err(what, e))?;
        let mut names: Vec<String> = st.names().into_iter().map(String::from).collect();
        names.sort();
        if names.is_empty() {
            return Err(OptimError::NoTensors { what: what.into() }.into());
        }
        if names.len() > 1 << 16 {
            return Err(OptimError::TooManyLayers { what: what.into(), count: names.len() }.into());
        }
        let mut tensors = Vec::with_capacity(names.len());
        for name in names {
            let v = st.tensor(&name).map_err(|e| parse_err(what, e))?;
            let data = f32_words(what, &name, &v)?;
            if data.is_empty() {
                return Err(
                    OptimError::Empty { what: what.into(), tensor: name, shape: v.shape().to_vec() }.into()
                );
            }
            if u32::try_from(data.len()).is_err() {
                return Err(OptimError::TooLarge { what: what.into(), tensor: name, len: data.len() }.into());
            }
            tensors.push(Tensor { shape: v.shape().to_vec(), name, data });
        }
        Ok(Model { tensors })
    }
}

/// The gradient of every step and layer of a model: one reduced gradient per parameter, or
/// the gradients of several wafers for SwarmX to sum.
#[derive(Debug, Clone)]
pub struct Grads {
    /// `by_step[t - 1][i]`: step t's gradient of tensor i (wafer-major: wafer k's words are
    /// `[k·len, (k+1)·len)`).
    by_step: Vec<Vec<Vec<u32>>>,
    /// Wafers per gradient; 0 for one reduced gradient.
    wafers: u32,
}

/// The name of step `t`'s gradient of tensor `name` in a gradients file.
pub fn grad_name(t: u32, name: &str) -> String {
    format!("step{t}/{name}")
}

/// The name of wafer `k`'s step-`t` gradient of tensor `name` in a multi-wafer gradients file.
pub fn wafer_grad_name(t: u32, k: u32, name: &str) -> String {
    format!("step{t}/wafer{k}/{name}")
}

impl Grads {
    /// Reads a gradients file for `steps` steps of `model`.
    pub fn load(path: &Path, model: &Model, steps: u32) -> Result<Grads> {
        Grads::parse(&read(path)?, &path.display().to_string(), model, steps)
    }

    /// Reads a multi-wafer gradients file ([`Grads::parse_wafers`]).
    pub fn load_wafers(path: &Path, model: &Model, steps: u32, wafers: u32) -> Result<Grads> {
        Grads::parse_wafers(&read(path)?, &path.display().to_string(), model, steps, wafers)
    }

    /// Parses the gradients of steps 1..=`steps` for every tensor of `model`: each
    /// `step{t}/{N}` must be there, F32, with N's shape.
    pub fn parse(bytes: &[u8], what: &str, model: &Model, steps: u32) -> Result<Grads> {
        Grads::parse_wafers(bytes, what, model, steps, 0)
    }

    /// As [`Grads::parse`], with `wafers` > 0 gradients per step and tensor: each
    /// `step{t}/wafer{k}/{N}` for k < `wafers`.
    pub fn parse_wafers(bytes: &[u8], what: &str, model: &Model, steps: u32, wafers: u32) -> Result<Grads> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| parse_err(what, e))?;
        let mut by_step = Vec::with_capacity(steps as usize);
        for t in 1..=steps {
            let mut layers = Vec::with_capacity(model.tensors.len());
            for m in &model.tensors {
                let names: Vec<String> = if wafers == 0 {
                    vec![grad_name(t, &m.name)]
                } else {
                    (0..wafers).map(|k| wafer_grad_name(t, k, &m.name)).collect()
                };
                let mut words = Vec::with_capacity(m.data.len() * names.len());
                for name in names {
                    let v = st
                        .tensor(&name)
                        .map_err(|_| OptimError::MissingGrad { what: what.into(), name: name.clone() })?;
                    if v.shape() != m.shape.as_slice() {
                        return Err(OptimError::GradShape {
                            name,
                            what: what.into(),
                            got: v.shape().to_vec(),
                            want: m.shape.clone(),
                        }
                        .into());
                    }
                    words.extend(f32_words(what, &name, &v)?);
                }
                layers.push(words);
            }
            by_step.push(layers);
        }
        Ok(Grads { by_step, wafers })
    }

    /// Wafers per gradient; 0 for one reduced gradient per parameter.
    pub fn wafers(&self) -> u32 {
        self.wafers
    }

    /// Steps held.
    pub fn steps(&self) -> u32 {
        self.by_step.len() as u32
    }

    /// Step `t`'s (1-based) gradient of tensor `i`; with wafers, all of them, wafer-major.
    pub fn get(&self, t: u32, i: usize) -> &[u32] {
        &self.by_step[t as usize - 1][i]
    }
}

/// Encodes F32 tensors (name, shape, bit patterns) and metadata as a safetensors file.
pub fn encode(tensors: &[Tensor], metadata: Option<HashMap<String, String>>, what: &str) -> Result<Vec<u8>> {
    let bytes: Vec<Vec<u8>> =
        tensors.iter().map(|t| t.data.iter().flat_map(|w| w.to_le_bytes()).collect()).collect();
    let mut views = Vec::with_capacity(tensors.len());
    for (t, b) in tensors.iter().zip(&bytes) {
        let v = TensorView::new(Dtype::F32, t.shape.clone(), b)
            .map_err(|e| OptimError::Encode { what: what.into(), reason: e.to_string() })?;
        views.push((t.name.as_str(), v));
    }
    Ok(safetensors::serialize(views, metadata)
        .map_err(|e| OptimError::Encode { what: what.into(), reason: e.to_string() })?)
}

/// Writes `bytes` to `path`.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(|source| OptimError::Write { path: path.into(), source }.into())
}

/// The `__metadata__` of a safetensors file (empty when it has none).
pub fn metadata_of(bytes: &[u8], what: &str) -> Result<HashMap<String, String>> {
    let (_, m) = SafeTensors::read_metadata(bytes).map_err(|e| parse_err(what, e))?;
    Ok(m.metadata().clone().unwrap_or_default())
}

/// The optimizer's name as `--optimizer` takes it: `sgd`, `adam`, `adamw`.
pub fn optimizer_name(k: Kind) -> &'static str {
    match k {
        Kind::Sgd => "sgd",
        Kind::Adam => "adam",
        Kind::AdamW => "adamw",
    }
}

/// A schedule's form as `--schedule` takes it: `constant`, `step:SIZE:GAMMA`,
/// `cosine:TMAX:ETAMIN` (numbers printed so they read back to the same bits).
pub fn schedule_spec(k: &ScheduleKind) -> String {
    match *k {
        ScheduleKind::Constant => "constant".into(),
        ScheduleKind::Step { step_size, gamma } => format!("step:{step_size}:{gamma:?}"),
        ScheduleKind::Cosine { t_max, eta_min } => format!("cosine:{t_max}:{eta_min:?}"),
    }
}

/// Parses `--schedule`: `constant`, `step:SIZE:GAMMA` or `cosine:TMAX:ETAMIN` (SIZE, TMAX ≥ 1;
/// GAMMA, ETAMIN finite).
pub fn parse_schedule(s: &str) -> Result<ScheduleKind, String> {
    let parts: Vec<&str> = s.trim().split(':').collect();
    let usage = || format!("`{s}` is not a schedule: use constant, step:SIZE:GAMMA or cosine:TMAX:ETAMIN");
    let n = |x: &str| x.parse::<u32>().ok().filter(|&n| n >= 1);
    let f = |x: &str| x.parse::<f64>().ok().filter(|x| x.is_finite());
    match parts.as_slice() {
        ["constant"] => Ok(ScheduleKind::Constant),
        ["step", a, b] => match (n(a), f(b)) {
            (Some(step_size), Some(gamma)) => Ok(ScheduleKind::Step { step_size, gamma }),
            _ => Err(usage()),
        },
        ["cosine", a, b] => match (n(a), f(b)) {
            (Some(t_max), Some(eta_min)) => Ok(ScheduleKind::Cosine { t_max, eta_min }),
            _ => Err(usage()),
        },
        _ => Err(usage()),
    }
}

/// The metadata of one layer configuration, by key.
fn config_fields(c: &LayerConfig) -> Vec<(&'static str, String)> {
    let h = &c.hyper;
    let s: &Schedule = &c.schedule;
    vec![
        ("optimizer", optimizer_name(h.kind).into()),
        ("lr", format!("{:?}", s.lr)),
        ("schedule", schedule_spec(&s.kind)),
        ("warmup", s.warmup.to_string()),
        ("weight_decay", format!("{:?}", h.weight_decay)),
        ("maximize", h.maximize.to_string()),
        ("momentum", format!("{:?}", h.momentum)),
        ("dampening", format!("{:?}", h.dampening)),
        ("nesterov", h.nesterov.to_string()),
        ("beta1", format!("{:?}", h.beta1)),
        ("beta2", format!("{:?}", h.beta2)),
        ("eps", format!("{:?}", h.eps)),
        ("amsgrad", h.amsgrad.to_string()),
        ("workers", c.workers.to_string()),
        ("batch", c.batch.to_string()),
    ]
}

/// The result's `__metadata__`: `step`, `format`, and every field of the layers'
/// configuration (optimizer, lr, schedule, warmup, hyperparameters, workers, batch). A field
/// that differs between layers is written per layer as `{N}.{field}` instead.
pub fn result_metadata(r: &RunReport) -> HashMap<String, String> {
    let mut m = HashMap::new();
    m.insert("format".into(), "weightstream-optim-1".into());
    m.insert("step".into(), r.steps.to_string());
    m.insert("wafers".into(), r.wafers.to_string());
    let per: Vec<Vec<(&str, String)>> = r.layers.iter().map(|l| config_fields(&l.cfg)).collect();
    if let Some(first) = per.first() {
        for (k, (key, value)) in first.iter().enumerate() {
            if per.iter().all(|p| p[k].1 == *value) {
                m.insert((*key).into(), value.clone());
            } else {
                for (l, p) in r.layers.iter().zip(&per) {
                    m.insert(format!("{}.{key}", l.name), p[k].1.clone());
                }
            }
        }
    }
    m
}

/// The result file of a run: weights, optimizer state under PyTorch's names, and metadata.
pub fn result_bytes(r: &RunReport) -> Result<Vec<u8>> {
    let mut tensors = Vec::new();
    for l in &r.layers {
        for (a, words) in &l.arrays {
            let name = match a.torch_state(l.cfg.hyper.kind) {
                None => l.name.clone(),
                Some(s) => format!("{}.{s}", l.name),
            };
            tensors.push(Tensor { name, shape: l.shape.clone(), data: words.clone() });
        }
    }
    encode(&tensors, Some(result_metadata(r)), "the result")
}

/// Writes the result file of a run to `path`.
pub fn write_result(path: &Path, r: &RunReport) -> Result<()> {
    write(path, &result_bytes(r)?)
}

/// Steps of gradients [`example`] writes.
pub const EXAMPLE_STEPS: u32 = 20;

/// The tensors of [`example`]: two weight matrices and a bias whose length is not a multiple
/// of 8 (lanes and chunks then do not divide it).
pub const EXAMPLE_TENSORS: [(&str, &[usize]); 3] =
    [("fc1.weight", &[16, 24]), ("fc2.weight", &[8, 16]), ("fc3.bias", &[10])];

/// xorshift64*: reproducible values from a seed without a dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15 | 1)
    }

    /// Uniform in [−a, a).
    fn uniform(&mut self, a: f32) -> u32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) as f32 / (1u32 << 24) as f32;
        ((2.0 * x - 1.0) * a).to_bits()
    }
}

/// A small model and [`EXAMPLE_STEPS`] steps of gradients for it ([`EXAMPLE_TENSORS`],
/// values from `seed`): the bytes of the model file and of the gradients file.
pub fn example(seed: u64) -> Result<(Vec<u8>, Vec<u8>)> {
    example_wafers(seed, 0)
}

/// As [`example`], with `wafers` > 0 gradients per step and tensor
/// (`step{t}/wafer{k}/{N}`), for SwarmX to sum.
pub fn example_wafers(seed: u64, wafers: u32) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut r = Rng::new(seed);
    let model: Vec<Tensor> = EXAMPLE_TENSORS
        .iter()
        .map(|(name, shape)| {
            let n = shape.iter().product();
            Tensor {
                name: (*name).into(),
                shape: shape.to_vec(),
                data: (0..n).map(|_| r.uniform(0.5)).collect(),
            }
        })
        .collect();
    let mut grads = Vec::new();
    for t in 1..=EXAMPLE_STEPS {
        for m in &model {
            let names: Vec<String> = if wafers == 0 {
                vec![grad_name(t, &m.name)]
            } else {
                (0..wafers).map(|k| wafer_grad_name(t, k, &m.name)).collect()
            };
            for name in names {
                let data = (0..m.data.len()).map(|_| r.uniform(0.1)).collect();
                grads.push(Tensor { name, shape: m.shape.clone(), data });
            }
        }
    }
    let meta = |k: &str| {
        Some(HashMap::from([("content".to_string(), k.to_string()), ("seed".into(), seed.to_string())]))
    };
    Ok((
        encode(&model, meta("model"), "the example model")?,
        encode(&grads, meta("gradients"), "the example gradients")?,
    ))
}

/// Writes [`example_wafers`] as `DIR/model.safetensors` and `DIR/grads.safetensors`
/// (creating DIR) and returns both paths.
pub fn write_example(dir: &Path, seed: u64, wafers: u32) -> Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir).map_err(|source| OptimError::Write { path: dir.into(), source })?;
    let (m, g) = example_wafers(seed, wafers)?;
    let (mp, gp) = (dir.join("model.safetensors"), dir.join("grads.safetensors"));
    write(&mp, &m)?;
    write(&gp, &g)?;
    Ok((mp, gp))
}
