//! A training run's configuration: what `wsctl train` takes from its flags or a TOML file
//! (`--config`), resolved against the data set, checked against the board's limits before
//! anything streams, printed, and stored in every checkpoint.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use ws_common::golden::optim::Hyper;
use ws_common::golden::schedule::{Schedule, ScheduleKind};
use ws_common::mesh::{check_step, MAX_STEP_LAYERS};

use super::TrainError;
use crate::optim::files::{parse_schedule, schedule_spec};

/// The configuration as a user writes it. Every field has a default, so a TOML file names
/// only what it changes; an unknown key is refused (a typo must not be ignored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// The data set: a safetensors file of `x` and `y` (data/digits/README.md "The file"),
    /// or `None` for the built-in digits.
    pub data: Option<PathBuf>,
    /// Hidden layer widths, input side first (the input and output widths come from the
    /// data set).
    pub hidden: Vec<usize>,
    /// `sgd`, `momentum`, `nesterov`, `adam` or `adamw`.
    pub optimizer: String,
    /// Learning rate (at the schedule's peak).
    pub lr: f64,
    /// Momentum of `momentum` and `nesterov` (0.9 unless given).
    pub momentum: Option<f64>,
    /// Weight decay (0.01 for AdamW, 0 otherwise, unless given).
    pub weight_decay: Option<f64>,
    /// Adam β1.
    pub beta1: f64,
    /// Adam β2.
    pub beta2: f64,
    /// Adam ε.
    pub eps: f64,
    /// Adam's AMSGrad variant.
    pub amsgrad: bool,
    /// `constant`, `step:SIZE:GAMMA` or `cosine:TMAX:ETAMIN`.
    pub schedule: String,
    /// Linear warm-up steps.
    pub warmup: u32,
    /// Samples per PE (B); a step takes wafers × PEs × B samples.
    pub batch_per_pe: usize,
    /// Epochs (passes over the train split); `steps` overrides.
    pub epochs: u32,
    /// Steps in all, instead of whole epochs.
    pub steps: Option<u32>,
    /// Wafers to train on (each a mesh on a SwarmX port).
    pub wafers: u8,
    /// Seed of the split, the initial weights and the order of every epoch.
    pub seed: u64,
    /// Share of every class held out for the test split.
    pub test_fraction: f64,
    /// Evaluate on the test split every this many steps too (0: once per epoch only).
    pub eval_every: u32,
    /// Write a checkpoint every this many steps (0: only at the end).
    pub checkpoint_every: u32,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            data: None,
            hidden: vec![32],
            optimizer: "adam".into(),
            lr: 0.01,
            momentum: None,
            weight_decay: None,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            amsgrad: false,
            schedule: "constant".into(),
            warmup: 0,
            batch_per_pe: 4,
            epochs: 10,
            steps: None,
            wafers: 2,
            seed: 1,
            test_fraction: 0.2,
            eval_every: 0,
            checkpoint_every: 0,
        }
    }
}

/// What the board (or the golden model standing in for it) can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wafers it carries.
    pub wafers: u8,
    /// PEs of each wafer's mesh.
    pub pes: usize,
    /// Sample slots per PE.
    pub max_b: usize,
    /// SRAM words per PE.
    pub sram_words: u32,
    /// Instructions per PE program.
    pub prog_depth: usize,
    /// Bytes of MemoryX's weight store free for the run's layers.
    pub store_bytes: u64,
    /// MemoryX layers.
    pub layers: usize,
}

impl Limits {
    /// The simulated board's build parameters (`ws_soc`: WAFERS 2, MESH_P 2, MESH_MAX_B 4,
    /// 2,048 SRAM words and 16 instructions per PE, MX_STORE_BYTES 1 MiB, 16 layers): what a
    /// `--golden` run is checked against, so it refuses what the board would.
    pub const SIM: Limits = Limits {
        wafers: 2,
        pes: 4,
        max_b: 4,
        sram_words: 2048,
        prog_depth: 16,
        store_bytes: 1 << 20,
        layers: 16,
    };
}

/// The configuration resolved against a data set: the whole MLP and the optimizer.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// As given, with the defaults filled in.
    pub given: TrainConfig,
    /// Layer widths: the data set's features, the hidden widths, its classes.
    pub dims: Vec<usize>,
    /// The optimizer.
    pub hyper: Hyper,
    /// The learning-rate schedule.
    pub schedule: Schedule,
    /// The data set's name (`digits` or the file's stem).
    pub data_name: String,
}

fn bad(what: impl Into<String>) -> TrainError {
    TrainError::Config(what.into())
}

impl TrainConfig {
    /// Reads a TOML file of [`TrainConfig`] keys.
    pub fn from_toml(text: &str, what: &str) -> Result<TrainConfig, TrainError> {
        toml::from_str(text).map_err(|e| bad(format!("{what}: {e}")))
    }

    /// The configuration as TOML: what `wsctl train` prints and every checkpoint stores.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("the configuration has only TOML-representable fields")
    }

    /// The keys a run can continue with different values (how long it runs, how often it
    /// evaluates and checkpoints, where its data file lies), blanked, as TOML: two runs with
    /// the same text train the same way step for step.
    pub fn identity(&self) -> String {
        TrainConfig { epochs: 0, steps: None, eval_every: 0, checkpoint_every: 0, data: None, ..self.clone() }
            .to_toml()
    }

    /// Resolves the optimizer and the MLP for a data set of `features` inputs and `classes`
    /// classes, refusing values no board can run.
    pub fn resolve(&self, features: usize, classes: usize, data_name: &str) -> Result<Resolved, TrainError> {
        let base = match self.optimizer.as_str() {
            "sgd" | "momentum" | "nesterov" => Hyper::SGD,
            "adam" => Hyper::ADAM,
            "adamw" => Hyper::ADAMW,
            other => {
                return Err(bad(format!("optimizer `{other}`: use sgd, momentum, nesterov, adam or adamw")))
            }
        };
        let momentum = match self.optimizer.as_str() {
            "momentum" | "nesterov" => self.momentum.unwrap_or(0.9),
            _ => self.momentum.unwrap_or(0.0),
        };
        let hyper = Hyper {
            weight_decay: self.weight_decay.unwrap_or(base.weight_decay),
            momentum,
            nesterov: self.optimizer == "nesterov",
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.eps,
            amsgrad: self.amsgrad,
            ..base
        };
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(bad(format!("learning rate {}: give a positive number such as 0.01", self.lr)));
        }
        let kind: ScheduleKind = parse_schedule(&self.schedule).map_err(bad)?;
        let schedule = Schedule { lr: self.lr, kind, warmup: self.warmup };
        if !(self.test_fraction > 0.0 && self.test_fraction < 1.0) {
            return Err(bad(format!(
                "test fraction {}: give a share between 0 and 1, such as 0.2",
                self.test_fraction
            )));
        }
        if self.wafers == 0 {
            return Err(bad("0 wafers: train on at least 1"));
        }
        if self.steps == Some(0) || (self.steps.is_none() && self.epochs == 0) {
            return Err(bad("nothing to train: give at least 1 epoch or 1 step"));
        }
        if self.hidden.contains(&0) {
            return Err(bad(format!("hidden widths {:?}: every width must be at least 1", self.hidden)));
        }
        let mut dims = vec![features];
        dims.extend(&self.hidden);
        dims.push(classes);
        Ok(Resolved { given: self.clone(), dims, hyper, schedule, data_name: data_name.into() })
    }
}

impl Resolved {
    /// Layers of the MLP.
    pub fn layers(&self) -> usize {
        self.dims.len() - 1
    }

    /// Parameters of layer `l`: (d_l + 1) · d_(l+1), bias first in every row.
    pub fn layer_words(&self, l: usize) -> u32 {
        ((self.dims[l] + 1) * self.dims[l + 1]) as u32
    }

    /// Parameters of the whole MLP.
    pub fn params(&self) -> u64 {
        (0..self.layers()).map(|l| u64::from(self.layer_words(l))).sum()
    }

    /// Samples of one wafer's step: PEs × B.
    pub fn per_wafer(&self, limits: &Limits) -> usize {
        limits.pes * self.given.batch_per_pe
    }

    /// Samples of one training step.
    pub fn batch(&self, limits: &Limits) -> usize {
        self.per_wafer(limits) * usize::from(self.given.wafers)
    }

    /// Refuses, before anything streams, what the board cannot run: more wafers than it
    /// carries, more layers than the mesh program holds, a batch per PE beyond its slots or
    /// its SRAM, a model (weights and optimizer state) beyond the weight store, a batch larger
    /// than the train split. Each message says what to change.
    pub fn check(&self, limits: &Limits, train_samples: usize) -> Result<(), TrainError> {
        let g = &self.given;
        if g.wafers > limits.wafers {
            return Err(bad(format!(
                "{} wafers: the board carries {} (its SoC's WAFERS build parameter); use --wafers {} or fewer",
                g.wafers, limits.wafers, limits.wafers
            )));
        }
        if self.layers() > MAX_STEP_LAYERS || self.layers() > limits.layers {
            return Err(bad(format!(
                "{} layers: the mesh program holds at most {}; use fewer hidden widths",
                self.layers(),
                MAX_STEP_LAYERS.min(limits.layers)
            )));
        }
        check_step(&self.dims, g.batch_per_pe, 1, limits.max_b, limits.sram_words, limits.prog_depth)
            .map_err(|e| bad(format!("MLP {:?} with {} samples per PE: {e}", self.dims, g.batch_per_pe)))?;
        let arrays = crate::optim::arrays_for(&self.hyper).len() as u64;
        let need = self.params() * arrays * 4;
        if need > limits.store_bytes {
            return Err(bad(format!(
                "MLP {:?} has {} parameters; with {} optimizer arrays that is {need} bytes and the weight store \
                 has {} free: use narrower hidden layers, or free the store with `wsctl mx clear`",
                self.dims,
                self.params(),
                arrays,
                limits.store_bytes
            )));
        }
        let batch = self.batch(limits);
        if batch > train_samples {
            return Err(bad(format!(
                "a step takes {batch} samples ({} wafers x {} PEs x {} per PE) and the train split has \
                 {train_samples}: use a smaller --batch-per-pe or fewer --wafers",
                g.wafers, limits.pes, g.batch_per_pe
            )));
        }
        Ok(())
    }

    /// Steps of one epoch: whole batches of the train split (the remainder of a shuffled
    /// epoch is left out, so every step has the same batch and gradient scale).
    pub fn steps_per_epoch(&self, limits: &Limits, train_samples: usize) -> u32 {
        (train_samples / self.batch(limits).max(1)) as u32
    }

    /// Steps in all.
    pub fn total_steps(&self, limits: &Limits, train_samples: usize) -> u32 {
        self.given.steps.unwrap_or(self.given.epochs * self.steps_per_epoch(limits, train_samples))
    }

    /// The schedule as text (`constant`, `step:…`), for reports.
    pub fn schedule_text(&self) -> String {
        schedule_spec(&self.schedule.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digits(c: &TrainConfig) -> Result<Resolved, TrainError> {
        c.resolve(64, 10, "digits")
    }

    #[test]
    fn toml_round_trips_and_names_what_it_changes() {
        let c = TrainConfig::from_toml("hidden = [16, 8]\noptimizer = \"sgd\"\nlr = 0.1\n", "t").unwrap();
        assert_eq!((c.hidden.clone(), c.optimizer.as_str(), c.wafers), (vec![16, 8], "sgd", 2));
        assert_eq!(TrainConfig::from_toml(&c.to_toml(), "t").unwrap(), c);
        let e = TrainConfig::from_toml("hiden = [3]", "cfg.toml").unwrap_err().to_string();
        assert!(e.contains("cfg.toml") && e.contains("hiden"), "{e}");
    }

    #[test]
    fn refusals_say_what_to_change() {
        let sim = Limits::SIM;
        let refuse = |c: TrainConfig, want: &str| {
            let e = digits(&c).and_then(|r| r.check(&sim, 1437)).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        };
        refuse(TrainConfig { wafers: 3, ..Default::default() }, "use --wafers 2 or fewer");
        refuse(TrainConfig { batch_per_pe: 5, ..Default::default() }, "samples per PE");
        refuse(TrainConfig { hidden: vec![400, 300], batch_per_pe: 4, ..Default::default() }, "SRAM");
        refuse(TrainConfig { hidden: vec![8; 7], ..Default::default() }, "layers");
        refuse(TrainConfig { hidden: vec![1000], ..Default::default() }, "SRAM words per PE");
        refuse(TrainConfig { optimizer: "lion".into(), ..Default::default() }, "use sgd");
        refuse(TrainConfig { lr: -1.0, ..Default::default() }, "positive");
        refuse(TrainConfig { epochs: 0, ..Default::default() }, "nothing to train");
        let r = digits(&TrainConfig::default()).unwrap();
        let small_store = Limits { store_bytes: 20_000, ..sim };
        let e = r.check(&small_store, 1437).unwrap_err().to_string();
        assert!(e.contains("2410 parameters") && e.contains("28920 bytes") && e.contains("mx clear"), "{e}");
        assert!(r.check(&sim, 31).unwrap_err().to_string().contains("train split has 31"));
        assert!(r.check(&sim, 1437).is_ok());
        assert_eq!(
            (r.dims.clone(), r.batch(&sim), r.steps_per_epoch(&sim, 1437)),
            (vec![64, 32, 10], 32, 44)
        );
    }

    #[test]
    fn the_identity_ignores_how_long_a_run_is() {
        let a = digits(&TrainConfig::default()).unwrap();
        let b = digits(&TrainConfig { epochs: 3, steps: Some(7), checkpoint_every: 5, ..Default::default() })
            .unwrap();
        assert_eq!(a.given.identity(), b.given.identity());
        let c = digits(&TrainConfig { lr: 0.02, ..Default::default() }).unwrap();
        assert_ne!(a.given.identity(), c.given.identity());
    }
}
