//! A training run with MemoryX and SwarmX in the loop (`wsctl mesh train`, `cargo xtask run`),
//! checked step by step against the golden models, and its safetensors checkpoint
//! (docs/mesh-array.md "On SwarmX").

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{golden_grads, BoardMesh, Gen, STALL};
use ws_common::ctrl::cmd::MeshStepDone;

use crate::Result;

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
                start: 0,
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
