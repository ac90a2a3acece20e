//! A `wsctl train` checkpoint: a safetensors file any reader opens.
//!
//! - Layer l of the MLP is `layers.{l}.weight` [d_(l+1), d_l] and `layers.{l}.bias`
//!   [d_(l+1)], as a PyTorch `nn.Linear` names them.
//! - Its optimizer state sits beside each under PyTorch's names: `layers.{l}.weight.exp_avg`,
//!   `….exp_avg_sq`, `….max_exp_avg_sq`, `….momentum_buffer`.
//! - The metadata holds `format` ([`FORMAT`]), `step` (the last step done), `epoch`,
//!   `rng_state` (the run's generator at the start of the epoch of the next step, so the
//!   order of the samples continues exactly), `config` (the whole configuration as TOML),
//!   `dims`, `optimizer`, `lr` (the last step's), `train_loss` and `test_accuracy`.
//!
//! On the board a layer's row i is output i's bias then its d_l weights
//! (`golden::mesh::Model`); the file splits the rows and [`Checkpoint::parse`] joins them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::config::{Resolved, TrainConfig};
use super::TrainError;
use crate::optim::files::{encode, metadata_of, optimizer_name, Model};
use crate::optim::{arrays_for, Array, Tensor};

/// The `format` of a `wsctl train` checkpoint's metadata.
pub const FORMAT: &str = "weightstream-train-1";

/// Every array of every layer, layer 0 first, each as the board lays it out (rows of bias
/// then weights).
pub type Arrays = Vec<Vec<(Array, Vec<u32>)>>;

/// What a checkpoint holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// The last step done.
    pub step: u32,
    /// The epoch of that step (from 0).
    pub epoch: u32,
    /// The run's generator at the start of the epoch of step `step + 1`.
    pub rng_state: u64,
    /// The run's configuration.
    pub config: TrainConfig,
    /// The layers.
    pub arrays: Arrays,
}

/// Figures stored beside the state, for a person reading the file.
#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    /// Mean loss of the steps of the last epoch.
    pub train_loss: f64,
    /// Accuracy on the test split at the last evaluation.
    pub test_accuracy: Option<f64>,
    /// The last step's learning rate.
    pub lr: f64,
}

fn tensor_name(l: usize, part: &str, a: Array, r: &Resolved) -> String {
    match a.torch_state(r.hyper.kind) {
        None => format!("layers.{l}.{part}"),
        Some(s) => format!("layers.{l}.{part}.{s}"),
    }
}

impl Checkpoint {
    /// The file's bytes.
    pub fn bytes(&self, r: &Resolved, fig: &Figures) -> crate::Result<Vec<u8>> {
        let mut tensors = Vec::new();
        for (l, layer) in self.arrays.iter().enumerate() {
            let (inputs, outputs) = (r.dims[l], r.dims[l + 1]);
            for (a, words) in layer {
                let rows = words.chunks_exact(inputs + 1);
                let weight: Vec<u32> = rows.clone().flat_map(|row| row[1..].iter().copied()).collect();
                let bias: Vec<u32> = rows.map(|row| row[0]).collect();
                tensors.push(Tensor {
                    name: tensor_name(l, "weight", *a, r),
                    shape: vec![outputs, inputs],
                    data: weight,
                });
                tensors.push(Tensor {
                    name: tensor_name(l, "bias", *a, r),
                    shape: vec![outputs],
                    data: bias,
                });
            }
        }
        let dims: Vec<String> = r.dims.iter().map(|d| d.to_string()).collect();
        let meta: HashMap<String, String> = [
            ("format", FORMAT.to_string()),
            ("step", self.step.to_string()),
            ("epoch", self.epoch.to_string()),
            ("rng_state", format!("{:#018x}", self.rng_state)),
            ("config", self.config.to_toml()),
            ("dims", dims.join(",")),
            ("data", r.data_name.clone()),
            ("optimizer", optimizer_name(r.hyper.kind).to_string()),
            ("lr", format!("{:?}", fig.lr)),
            ("train_loss", format!("{:?}", fig.train_loss)),
            ("test_accuracy", fig.test_accuracy.map(|a| format!("{a:?}")).unwrap_or_default()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        encode(&tensors, Some(meta), "the checkpoint")
    }

    /// Writes it to `path` whole or not at all: a temporary file beside it, then a rename,
    /// so a run killed while writing keeps the previous checkpoint.
    pub fn write(&self, path: &Path, r: &Resolved, fig: &Figures) -> crate::Result<()> {
        let bytes = self.bytes(r, fig)?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".partial");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, &bytes)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|source| crate::error::OptimError::Write { path: path.into(), source }.into())
    }

    /// Reads a checkpoint file.
    pub fn load(path: &Path) -> crate::Result<Checkpoint> {
        let bytes = std::fs::read(path).map_err(|e| {
            TrainError::Checkpoint(format!("{}: {e}; give the file `--checkpoint` wrote", path.display()))
        })?;
        Checkpoint::parse(&bytes, &path.display().to_string())
    }

    /// Parses a checkpoint's bytes; `what` names it in messages.
    pub fn parse(bytes: &[u8], what: &str) -> crate::Result<Checkpoint> {
        let bad = |m: String| -> crate::Error { TrainError::Checkpoint(format!("{what}: {m}")).into() };
        let meta = metadata_of(bytes, what)?;
        let get = |k: &str| {
            meta.get(k)
                .ok_or_else(|| bad(format!("no `{k}` in its metadata: is it a `wsctl train` checkpoint?")))
        };
        if get("format")? != FORMAT {
            return Err(bad(format!(
                "format `{}`, not `{FORMAT}`: is it a `wsctl train` checkpoint?",
                get("format")?
            )));
        }
        let num = |k: &str| -> crate::Result<u64> {
            let v = get(k)?;
            let parsed = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            };
            parsed.map_err(|_| bad(format!("`{k}` is `{v}`, not a number")))
        };
        let config = TrainConfig::from_toml(get("config")?, &format!("{what}'s config"))
            .map_err(crate::Error::from)?;
        let (step, epoch, rng_state) = (num("step")? as u32, num("epoch")? as u32, num("rng_state")?);
        let dims: Vec<usize> = get("dims")?
            .split(',')
            .map(|d| d.parse().map_err(|_| bad(format!("dims `{d}`"))))
            .collect::<crate::Result<_>>()?;
        let model = Model::parse(bytes, what)?;
        let find = |name: &str, len: usize| -> crate::Result<&[u32]> {
            let t = model
                .tensors
                .iter()
                .find(|t| t.name == name)
                .ok_or_else(|| bad(format!("no tensor `{name}`")))?;
            if t.data.len() != len {
                return Err(bad(format!(
                    "`{name}` has {} values, the MLP {dims:?} needs {len}",
                    t.data.len()
                )));
            }
            Ok(&t.data)
        };
        // The optimizer decides the arrays; resolve only for it (widths come from `dims`).
        let r = config.resolve(dims[0], *dims.last().unwrap_or(&1), "").map_err(crate::Error::from)?;
        if dims.len() != config.hidden.len() + 2 || dims[1..dims.len() - 1] != config.hidden[..] {
            return Err(bad(format!(
                "dims {dims:?} do not match its config's hidden widths {:?}",
                config.hidden
            )));
        }
        let r = Resolved { dims: dims.clone(), ..r };
        let mut arrays = Vec::new();
        for l in 0..dims.len() - 1 {
            let (inputs, outputs) = (dims[l], dims[l + 1]);
            let mut layer = Vec::new();
            for &a in arrays_for(&r.hyper) {
                let w = find(&tensor_name(l, "weight", a, &r), outputs * inputs)?;
                let b = find(&tensor_name(l, "bias", a, &r), outputs)?;
                let mut words = Vec::with_capacity(outputs * (inputs + 1));
                for i in 0..outputs {
                    words.push(b[i]);
                    words.extend_from_slice(&w[i * inputs..(i + 1) * inputs]);
                }
                layer.push((a, words));
            }
            arrays.push(layer);
        }
        Ok(Checkpoint { step, epoch, rng_state, config, arrays })
    }

    /// Refuses to continue `r` from this checkpoint unless it was written by a run of the same
    /// configuration (all but how long it runs and how often it evaluates and checkpoints) on
    /// the same data set's shape; the message lists what differs.
    pub fn check_matches(&self, r: &Resolved) -> Result<(), TrainError> {
        let (mine, theirs) = (r.given.identity(), self.config.identity());
        if mine == theirs {
            return Ok(());
        }
        let lines = |t: &str| t.lines().map(str::to_string).collect::<Vec<_>>();
        let (a, b) = (lines(&theirs), lines(&mine));
        let differ: Vec<String> = b.iter().filter(|l| !a.contains(l)).cloned().collect();
        let had: Vec<String> = a.iter().filter(|l| !b.contains(l)).cloned().collect();
        Err(TrainError::Checkpoint(format!(
            "the checkpoint is of a different configuration: it has {} where this run has {}; resume with the \
             checkpoint's configuration (its `config` metadata, e.g. `--config` from it) or start a new run",
            had.join(", "),
            differ.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::rng::Rng;

    fn sample(config: TrainConfig) -> (Resolved, Checkpoint) {
        let r = config.resolve(5, 3, "t").unwrap();
        let mut rng = Rng::new(4);
        let arrays = (0..r.layers())
            .map(|l| {
                arrays_for(&r.hyper)
                    .iter()
                    .map(|&a| (a, (0..r.layer_words(l)).map(|_| rng.next_u64() as u32).collect()))
                    .collect()
            })
            .collect();
        (r.clone(), Checkpoint { step: 12, epoch: 1, rng_state: 0xdead_beef_0123, config: r.given, arrays })
    }

    #[test]
    fn round_trips_with_pytorch_names() {
        let (r, c) = sample(TrainConfig { hidden: vec![4], ..Default::default() });
        let bytes = c.bytes(&r, &Figures { train_loss: 0.5, test_accuracy: Some(0.9), lr: 0.01 }).unwrap();
        assert_eq!(Checkpoint::parse(&bytes, "t").unwrap(), c);
        let m = Model::parse(&bytes, "t").unwrap();
        let names: Vec<&str> = m.tensors.iter().map(|t| t.name.as_str()).collect();
        for n in ["layers.0.weight", "layers.0.bias", "layers.1.weight.exp_avg", "layers.1.bias.exp_avg_sq"] {
            assert!(names.contains(&n), "{n} in {names:?}");
        }
        let w = m.tensors.iter().find(|t| t.name == "layers.0.weight").unwrap();
        assert_eq!(w.shape, [4, 5]);
        assert_eq!(w.data[0], c.arrays[0][0].1[1], "row 0's first weight follows its bias");
        let (r, c) = sample(TrainConfig { optimizer: "momentum".into(), ..Default::default() });
        let bytes = c.bytes(&r, &Figures::default()).unwrap();
        let m = Model::parse(&bytes, "t").unwrap();
        assert!(m.tensors.iter().any(|t| t.name == "layers.0.weight.momentum_buffer"));
        assert_eq!(Checkpoint::parse(&bytes, "t").unwrap(), c);
    }

    #[test]
    fn another_configuration_is_refused_with_what_differs() {
        let (_, c) = sample(TrainConfig::default());
        let other = TrainConfig { lr: 0.5, ..Default::default() }.resolve(5, 3, "t").unwrap();
        let e = c.check_matches(&other).unwrap_err().to_string();
        assert!(e.contains("lr = 0.01") && e.contains("lr = 0.5"), "{e}");
        let longer = TrainConfig { epochs: 99, ..Default::default() }.resolve(5, 3, "t").unwrap();
        assert!(c.check_matches(&longer).is_ok());
        let e = Checkpoint::parse(b"not a file", "x.safetensors").unwrap_err().to_string();
        assert!(e.contains("x.safetensors"), "{e}");
    }
}
