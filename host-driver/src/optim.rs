//! MemoryX as a hardware optimizer, from the host (issue 5 "Host", `wsctl optim`).
//!
//! - [`MxDevice`]: what a MemoryX must offer the host: create a layer with its optimizer,
//!   hyperparameters and learning-rate schedule, write and read its arrays (w, m, v, vmax as
//!   binary32 bit patterns), and run one optimizer step from the reduced gradients. The
//!   device computes each step's constants itself from the layer's schedule
//!   ([`ws_common::golden::schedule`] then [`step_consts`]), as the firmware does.
//! - [`Golden`]: an [`MxDevice`] on the host, built on the golden model
//!   ([`ws_common::golden::optim`]): the reference the board is compared with bit for bit, and
//!   `wsctl optim --golden`.
//! - [`files`]: the safetensors files: the model, the gradients of every step, the result with
//!   PyTorch's optimizer state names and the hyperparameters as metadata; and [`files::example`],
//!   a small model with gradients to try.
//! - [`run`]: a whole run: create the layers, write w and zeroed state, run K steps, read
//!   everything back, into a [`RunReport`] with a summary table.
//!
//! docs/host.md "wsctl optim" has the file conventions.

pub mod board;
pub mod files;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ws_common::golden::optim::{step_consts, update, Hyper, Kind, Param};
use ws_common::golden::schedule::Schedule;
use ws_common::golden::swarm::{node_lane, NodeConfig};

pub use board::{open_board, BoardMx};
pub use files::{Grads, Model, Tensor};

use crate::error::OptimError;
use crate::report::Table;
use crate::Result;

/// One of a layer's arrays in MemoryX (wire codes 0..3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Array {
    /// The weights.
    W = 0,
    /// SGD's momentum buffer, or Adam's first moment.
    M = 1,
    /// Adam's second moment.
    V = 2,
    /// amsgrad's running maximum of the second moment.
    Vmax = 3,
}

impl Array {
    /// Every array, in wire-code order.
    pub const ALL: [Array; 4] = [Array::W, Array::M, Array::V, Array::Vmax];

    /// The wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The array of a wire code.
    pub fn from_code(code: u8) -> Option<Array> {
        Array::ALL.get(usize::from(code)).copied()
    }

    /// Its short name: `w`, `m`, `v`, `vmax`.
    pub fn name(self) -> &'static str {
        match self {
            Array::W => "w",
            Array::M => "m",
            Array::V => "v",
            Array::Vmax => "vmax",
        }
    }

    /// PyTorch's name for this state of an optimizer (`exp_avg`, `exp_avg_sq`,
    /// `max_exp_avg_sq`, `momentum_buffer`), or None for the weights.
    pub fn torch_state(self, kind: Kind) -> Option<&'static str> {
        match (self, kind) {
            (Array::W, _) => None,
            (Array::M, Kind::Sgd) => Some("momentum_buffer"),
            (Array::M, _) => Some("exp_avg"),
            (Array::V, _) => Some("exp_avg_sq"),
            (Array::Vmax, _) => Some("max_exp_avg_sq"),
        }
    }
}

/// The arrays an optimizer keeps: w; SGD with momentum adds m; Adam and AdamW add m and v,
/// and amsgrad adds vmax.
pub fn arrays_for(h: &Hyper) -> &'static [Array] {
    match h.kind {
        Kind::Sgd if h.momentum == 0.0 => &[Array::W],
        Kind::Sgd => &[Array::W, Array::M],
        Kind::Adam | Kind::AdamW if h.amsgrad => &[Array::W, Array::M, Array::V, Array::Vmax],
        Kind::Adam | Kind::AdamW => &[Array::W, Array::M, Array::V],
    }
}

/// How a MemoryX layer is created.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerConfig {
    /// Parameters.
    pub len: u32,
    /// The optimizer and its hyperparameters.
    pub hyper: Hyper,
    /// The learning rate of every step.
    pub schedule: Schedule,
    /// Wafers whose gradients are summed (the gradient scale is 1/(workers·batch)).
    pub workers: u32,
    /// Samples per wafer and step.
    pub batch: u32,
    /// The last step the layer has run when it is created: 0 for a new layer, t to continue
    /// a run from a checkpoint of step t (write its arrays, then the next step is t + 1).
    pub start: u32,
}

/// A MemoryX that applies the optimizer: the board over the link, or [`Golden`] on the host.
///
/// Words are binary32 bit patterns. Steps are numbered from 1; the device computes each
/// step's constants from the layer's [`LayerConfig`] (`lr = schedule.lr_at(t)`, then
/// [`step_consts`]).
pub trait MxDevice {
    /// The device, for messages: "golden model (host)", "board `sim` at 127.0.0.1:7450".
    fn describe(&self) -> String;
    /// Creates layer `layer` with `cfg.len` parameters, every array zero.
    fn create_layer(&mut self, layer: u16, cfg: &LayerConfig) -> Result<()>;
    /// Writes a whole array of a layer (`words.len()` must be the layer's length).
    fn write_array(&mut self, layer: u16, array: Array, words: &[u32]) -> Result<()>;
    /// Reads a whole array of a layer (`len` must be the layer's length).
    fn read_array(&mut self, layer: u16, array: Array, len: u32) -> Result<Vec<u32>>;
    /// Runs step `t` on every layer given, with its reduced gradient (one word per parameter).
    fn step(&mut self, t: u32, grads: &[(u16, &[u32])]) -> Result<()>;
    /// Runs step `t` on every layer given, with the gradients of `wafers` wafers (wafer-major:
    /// wafer k's words are `[k·len, (k+1)·len)`), which SwarmX sums in its fixed order on
    /// ports 0..wafers−1 before the optimizer.
    fn step_wafers(&mut self, t: u32, wafers: u32, grads: &[(u16, &[u32])]) -> Result<()>;
}

/// Downstream ports of the simulated board's SwarmX node (`ws_soc`'s `SWARM_PORTS`): the
/// [`Golden`] reduction's tree shape unless told otherwise.
pub const SIM_SWARM_PORTS: usize = 4;

/// One layer of [`Golden`].
#[derive(Debug, Clone)]
struct GoldenLayer {
    cfg: LayerConfig,
    params: Vec<Param>,
    /// The last step run (0 before the first).
    at: u32,
}

/// An [`MxDevice`] on the host: [`ws_common::golden::optim`] over layers kept in `Vec`s, and
/// [`ws_common::golden::swarm`] for multi-wafer steps.
#[derive(Debug, Clone)]
pub struct Golden {
    layers: BTreeMap<u16, GoldenLayer>,
    swarm_ports: usize,
}

impl Default for Golden {
    fn default() -> Self {
        Golden { layers: BTreeMap::new(), swarm_ports: SIM_SWARM_PORTS }
    }
}

impl Golden {
    /// A device without layers, reducing wafers as the simulated board's node does.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reduces multi-wafer gradients as a node of `ports` downstream ports (2..=16) does.
    pub fn with_swarm_ports(self, ports: usize) -> Self {
        Golden { swarm_ports: ports, ..self }
    }

    fn layer(&mut self, layer: u16) -> Result<&mut GoldenLayer> {
        let device = self.describe();
        self.layers.get_mut(&layer).ok_or_else(|| OptimError::NoLayer { layer, device }.into())
    }
}

fn check_len(layer: u16, what: impl FnOnce() -> String, got: usize, want: u32) -> Result<()> {
    if got as u64 != u64::from(want) {
        return Err(OptimError::Length { layer, what: what(), got, want }.into());
    }
    Ok(())
}

impl MxDevice for Golden {
    fn describe(&self) -> String {
        "the golden model (host)".into()
    }

    fn create_layer(&mut self, layer: u16, cfg: &LayerConfig) -> Result<()> {
        if self.layers.contains_key(&layer) {
            return Err(OptimError::LayerExists { layer, device: self.describe() }.into());
        }
        if cfg.len == 0 {
            return Err(OptimError::ZeroLength { layer }.into());
        }
        let params = vec![Param::default(); cfg.len as usize];
        self.layers.insert(layer, GoldenLayer { cfg: *cfg, params, at: cfg.start });
        Ok(())
    }

    fn write_array(&mut self, layer: u16, array: Array, words: &[u32]) -> Result<()> {
        let l = self.layer(layer)?;
        check_len(layer, || format!("the {} array", array.name()), words.len(), l.cfg.len)?;
        for (p, &x) in l.params.iter_mut().zip(words) {
            *field(p, array) = x;
        }
        Ok(())
    }

    fn read_array(&mut self, layer: u16, array: Array, len: u32) -> Result<Vec<u32>> {
        let l = self.layer(layer)?;
        check_len(layer, || format!("the read of {}", array.name()), len as usize, l.cfg.len)?;
        Ok(l.params.iter_mut().map(|p| *field(p, array)).collect())
    }

    fn step(&mut self, t: u32, grads: &[(u16, &[u32])]) -> Result<()> {
        // Check every layer first: a refused step changes nothing.
        for &(layer, g) in grads {
            let l = self.layer(layer)?;
            check_len(layer, || "the gradient".into(), g.len(), l.cfg.len)?;
            if t != l.at + 1 {
                return Err(OptimError::StepOrder { t, layer, at: l.at }.into());
            }
        }
        for &(layer, g) in grads {
            let l = self.layer(layer)?;
            let c = &l.cfg;
            let k = step_consts(&c.hyper, t, c.schedule.lr_at(t), c.workers, c.batch);
            for (p, &gi) in l.params.iter_mut().zip(g) {
                *p = update(&k, *p, gi);
            }
            l.at = t;
        }
        Ok(())
    }

    fn step_wafers(&mut self, t: u32, wafers: u32, grads: &[(u16, &[u32])]) -> Result<()> {
        let ports = self.swarm_ports;
        if wafers == 0 || wafers as usize > ports || !(2..=16).contains(&ports) {
            return Err(OptimError::Wafers { wafers, ports, device: self.describe() }.into());
        }
        let mut reduced = Vec::with_capacity(grads.len());
        for &(layer, g) in grads {
            let len = self.layer(layer)?.cfg.len;
            check_len(layer, || format!("the {wafers} wafers' gradients"), g.len(), len * wafers)?;
            reduced.push((layer, reduce_wafers(ports, wafers, len as usize, g)));
        }
        let refs: Vec<(u16, &[u32])> = reduced.iter().map(|(l, g)| (*l, g.as_slice())).collect();
        self.step(t, &refs)
    }
}

/// SwarmX's sum of `wafers` wafers' gradients (wafer-major, `len` words each) on a node of
/// `ports` ports, ports 0..wafers−1 active, no scale.
pub fn reduce_wafers(ports: usize, wafers: u32, len: usize, words: &[u32]) -> Vec<u32> {
    let mask = ((1u32 << wafers) - 1) as u16;
    let cfg = NodeConfig::new(ports).mask(mask);
    let mut v = vec![0u32; ports];
    (0..len)
        .map(|i| {
            for (k, x) in v.iter_mut().enumerate().take(wafers as usize) {
                *x = words[k * len + i];
            }
            node_lane(&cfg, &v).expect("ports and wafers were checked")
        })
        .collect()
}

fn field(p: &mut Param, a: Array) -> &mut u32 {
    match a {
        Array::W => &mut p.w,
        Array::M => &mut p.m,
        Array::V => &mut p.v,
        Array::Vmax => &mut p.vmax,
    }
}

/// One layer after a run.
#[derive(Debug, Clone)]
pub struct LayerResult {
    /// The layer number on the device.
    pub layer: u16,
    /// The tensor's name.
    pub name: String,
    /// The tensor's shape.
    pub shape: Vec<usize>,
    /// How it was created.
    pub cfg: LayerConfig,
    /// Every array the optimizer keeps ([`arrays_for`]), read back after the last step.
    pub arrays: Vec<(Array, Vec<u32>)>,
}

impl LayerResult {
    /// The array `a`, if the optimizer keeps it.
    pub fn array(&self, a: Array) -> Option<&[u32]> {
        self.arrays.iter().find(|(x, _)| *x == a).map(|(_, v)| v.as_slice())
    }
}

/// What [`run`] did.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The device, as it describes itself.
    pub device: String,
    /// Steps run.
    pub steps: u32,
    /// Wafers whose gradients SwarmX summed each step; 0 for reduced gradients.
    pub wafers: u32,
    /// Every layer, in layer order.
    pub layers: Vec<LayerResult>,
    /// Creating and writing the layers.
    pub load_time: Duration,
    /// The steps.
    pub step_time: Duration,
    /// Reading back.
    pub read_time: Duration,
}

impl RunReport {
    /// Parameters over all layers.
    pub fn params(&self) -> u64 {
        self.layers.iter().map(|l| u64::from(l.cfg.len)).sum()
    }

    /// The summary `wsctl optim` prints: one row per layer, then the totals and times.
    pub fn summary(&self) -> String {
        let mut t = Table::new(["layer", "tensor", "shape", "params", "optimizer", "arrays"]);
        for l in &self.layers {
            let arrays: Vec<&str> = l.arrays.iter().map(|(a, _)| a.name()).collect();
            t.row([
                l.layer.to_string(),
                l.name.clone(),
                format!("{:?}", l.shape),
                l.cfg.len.to_string(),
                files::optimizer_name(l.cfg.hyper.kind).into(),
                arrays.join(","),
            ]);
        }
        let secs = self.step_time.as_secs_f64();
        let rate = if secs > 0.0 { self.params() as f64 * f64::from(self.steps) / secs } else { 0.0 };
        let wafers = match self.wafers {
            0 => String::new(),
            k => format!(" (gradients of {k} wafers summed by SwarmX)"),
        };
        format!(
            "{}{} layers, {} parameters, {} steps{wafers} on {}: load {:.3} s, steps {:.3} s ({:.3e} parameter updates/s), read back {:.3} s\n",
            t.render(),
            self.layers.len(),
            self.params(),
            self.steps,
            self.device,
            self.load_time.as_secs_f64(),
            secs,
            rate,
            self.read_time.as_secs_f64()
        )
    }
}

/// Where [`run`] is, for a progress indicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Layer `done` of `total` created and written.
    Loaded {
        /// Layers done.
        done: usize,
        /// Layers in all.
        total: usize,
    },
    /// Step `done` of `total` run.
    Stepped {
        /// Steps done.
        done: u32,
        /// Steps in all.
        total: u32,
    },
    /// Every layer read back.
    Read,
}

/// Runs `steps` optimizer steps of `model` on `dev`: tensor i (sorted by name) becomes layer
/// i, created with `cfg_for(tensor)` (its `len` is overridden by the tensor's), its w written
/// and its optimizer state written as zeros (the PyTorch initial state), then every step
/// t = 1..=steps gets each layer's gradient `step{t}/{name}` (or, for multi-wafer gradients,
/// every wafer's, through [`MxDevice::step_wafers`]), and every array the optimizer keeps is
/// read back.
pub fn run(
    dev: &mut dyn MxDevice,
    model: &Model,
    grads: &Grads,
    steps: u32,
    cfg_for: &dyn Fn(&Tensor) -> LayerConfig,
    progress: &mut dyn FnMut(Progress),
) -> Result<RunReport> {
    if grads.steps() < steps {
        return Err(OptimError::TooFewSteps { steps, have: grads.steps() }.into());
    }
    let t0 = Instant::now();
    let mut cfgs = Vec::with_capacity(model.tensors.len());
    for (i, tensor) in model.tensors.iter().enumerate() {
        let layer = i as u16; // Model::parse caps the count at 65536
        let cfg = LayerConfig { len: tensor.len(), ..cfg_for(tensor) };
        dev.create_layer(layer, &cfg)?;
        dev.write_array(layer, Array::W, &tensor.data)?;
        let zeros = vec![0u32; tensor.data.len()];
        for &a in &arrays_for(&cfg.hyper)[1..] {
            dev.write_array(layer, a, &zeros)?;
        }
        cfgs.push(cfg);
        progress(Progress::Loaded { done: i + 1, total: model.tensors.len() });
    }
    let load_time = t0.elapsed();
    let t1 = Instant::now();
    for t in 1..=steps {
        let g: Vec<(u16, &[u32])> = (0..model.tensors.len()).map(|i| (i as u16, grads.get(t, i))).collect();
        match grads.wafers() {
            0 => dev.step(t, &g)?,
            k => dev.step_wafers(t, k, &g)?,
        }
        progress(Progress::Stepped { done: t, total: steps });
    }
    let step_time = t1.elapsed();
    let t2 = Instant::now();
    let mut layers = Vec::with_capacity(cfgs.len());
    for (i, (tensor, cfg)) in model.tensors.iter().zip(cfgs).enumerate() {
        let layer = i as u16;
        let mut arrays = Vec::new();
        for &a in arrays_for(&cfg.hyper) {
            arrays.push((a, dev.read_array(layer, a, cfg.len)?));
        }
        layers.push(LayerResult {
            layer,
            name: tensor.name.clone(),
            shape: tensor.shape.clone(),
            cfg,
            arrays,
        });
    }
    progress(Progress::Read);
    Ok(RunReport {
        device: dev.describe(),
        steps,
        wafers: grads.wafers(),
        layers,
        load_time,
        step_time,
        read_time: t2.elapsed(),
    })
}

#[cfg(test)]
mod tests;
