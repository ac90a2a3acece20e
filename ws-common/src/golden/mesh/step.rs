//! One training step of the whole MLP on the mesh: forward through every layer, the loss
//! stage on the last, backward through every layer, with the gradients as the mesh emits
//! them.
//!
//! The no_std entry points take caller-provided buffers: a flat parameter vector and a flat
//! gradient vector (the layers one after the other, each in stream order,
//! [`Model::param_offset`]), the batch's inputs (N×d_0, sample-major) and labels, and a
//! workspace of [`workspace_words`] words laid out like a PE's SRAM, for the whole batch:
//!
//! ```text
//! [ out of layer 0 (N×d_1) | … | out of layer L−1 (N×d_L) | dx (N×max d_1..d_(L−1)) | loss (N) ]
//! ```
//!
//! The forward fills the outputs (the last are the logits); the loss stage turns the logits
//! into dz in place and writes each sample's loss; the backward walks the layers from the
//! last down, and for layer l: reduces its gradient from its input and its dz
//! ([`dense::weight_grad`]), then (for l > 0) forms dx ([`dense::input_grad`]) and overwrites
//! layer l−1's output with dz = relu_grad(output, dx). The gradient of layer L−1 is complete
//! first and leaves first: the egress order is layer L−1, …, 0, each layer chunk by chunk.
//!
//! `run` (with the `std` feature, for the host and the testbenches) allocates all of this and
//! returns it, with `StepOutput::gradient_flits` and `weight_flits` for the two streams.

use super::config::{Config, Model};
use super::dense;
use super::loss::softmax_xent;
use super::MeshError;
use core::ops::Range;

/// What leaves on the metrics port for one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Metrics {
    /// The sum of the samples' losses, reduced over the mesh in the configured order.
    pub loss: u32,
    /// Samples whose prediction equals their label.
    pub correct: u32,
    /// Samples in the step.
    pub samples: u32,
}

/// The samples of `x` for `model`, checked against `cfg`'s mesh.
fn samples_of(cfg: &Config<'_>, x: &[u32]) -> Result<usize, MeshError> {
    let width = cfg.model.dims.first().copied().unwrap_or(0);
    if width == 0 || !x.len().is_multiple_of(width) {
        return Err(MeshError::Length {
            what: "input",
            expected: x.len().checked_next_multiple_of(width.max(1)).unwrap_or(usize::MAX),
            got: x.len(),
        });
    }
    let n = x.len() / width;
    cfg.check_batch(n)?;
    Ok(n)
}

/// Words of the workspace for `samples` samples of `model` ([module docs](self)).
pub fn workspace_words(model: &Model<'_>, samples: usize) -> Result<usize, MeshError> {
    model.validate()?;
    let layers = model.layers();
    let outs: usize = model.dims[1..].iter().sum();
    let dx = model.dims[1..layers].iter().copied().max().unwrap_or(0);
    let per_sample = outs.checked_add(dx).and_then(|w| w.checked_add(1)).ok_or(MeshError::SizeOverflow)?;
    per_sample.checked_mul(samples).ok_or(MeshError::SizeOverflow)
}

/// Where the output of layer `l` sits in the workspace for `samples` samples.
pub fn output_range(model: &Model<'_>, samples: usize, l: usize) -> Range<usize> {
    let start = model.dims.iter().skip(1).take(l).fold(0usize, |a, d| a.saturating_add(*d));
    let width = model.dims.get(l.saturating_add(1)).copied().unwrap_or(0);
    start.saturating_mul(samples)..start.saturating_add(width).saturating_mul(samples)
}

/// The layout of a checked workspace: (outputs, dx, losses) lengths.
fn split_lengths(model: &Model<'_>, samples: usize) -> (usize, usize, usize) {
    let outs: usize = model.dims[1..].iter().sum();
    let dx = model.dims[1..model.layers()].iter().copied().max().unwrap_or(0);
    (outs * samples, dx * samples, samples)
}

/// Validates everything a pass needs; returns the sample count.
fn check(cfg: &Config<'_>, params: &[u32], x: &[u32], work: &[u32]) -> Result<usize, MeshError> {
    cfg.validate()?;
    let n = samples_of(cfg, x)?;
    let expected = cfg.model.param_words();
    if params.len() != expected {
        return Err(MeshError::Length { what: "parameter", expected, got: params.len() });
    }
    let expected = workspace_words(&cfg.model, n)?;
    if work.len() != expected {
        return Err(MeshError::Length { what: "workspace", expected, got: work.len() });
    }
    Ok(n)
}

/// Checks there is one label per sample, each a class of the last layer.
fn check_labels(model: &Model<'_>, samples: usize, labels: &[u32]) -> Result<(), MeshError> {
    if labels.len() != samples {
        return Err(MeshError::Length { what: "label", expected: samples, got: labels.len() });
    }
    let classes = model.classes();
    match labels.iter().enumerate().find(|(_, y)| **y as usize >= classes) {
        Some((sample, label)) => Err(MeshError::BadLabel { sample, label: *label, classes }),
        None => Ok(()),
    }
}

/// Layer `l`'s words of a flat parameter or gradient vector.
fn layer_words(model: &Model<'_>, l: usize) -> Range<usize> {
    model.param_offset(l)..model.param_offset(l + 1)
}

/// The forward through every layer: fills the outputs of `work` (the last are the logits).
pub fn forward(cfg: &Config<'_>, params: &[u32], x: &[u32], work: &mut [u32]) -> Result<(), MeshError> {
    let n = check(cfg, params, x, work)?;
    let model = &cfg.model;
    for l in 0..model.layers() {
        let layer = model.layer(l).ok_or(MeshError::NoLayers(model.dims.len()))?;
        let out = output_range(model, n, l);
        let (before, after) = work.split_at_mut(out.start);
        let input = if l == 0 { x } else { &before[output_range(model, n, l - 1)] };
        dense::forward(layer, &params[layer_words(model, l)], input, model.relu(l), &mut after[..out.len()])?;
    }
    Ok(())
}

/// The loss stage over the batch, after [`forward`]: turns the logits in `work` into dz,
/// writes each sample's loss, and returns the metrics.
pub fn loss(cfg: &Config<'_>, x: &[u32], labels: &[u32], work: &mut [u32]) -> Result<Metrics, MeshError> {
    cfg.validate()?;
    let n = samples_of(cfg, x)?;
    let model = &cfg.model;
    let expected = workspace_words(model, n)?;
    if work.len() != expected {
        return Err(MeshError::Length { what: "workspace", expected, got: work.len() });
    }
    check_labels(model, n, labels)?;
    let classes = model.classes();
    let (outs, dx, _) = split_lengths(model, n);
    let (acts, rest) = work.split_at_mut(outs);
    let losses = &mut rest[dx..];
    let logits = &mut acts[output_range(model, n, model.layers() - 1)];
    let mut correct = 0u32;
    for ((z, y), loss) in logits.chunks_exact_mut(classes).zip(labels).zip(losses.iter_mut()) {
        let r = softmax_xent(z, *y as usize)?;
        *loss = r.loss;
        correct += u32::from(r.pred == *y as usize);
    }
    let total = dense::reduce_sum(&cfg.mesh, cfg.order, losses)?;
    Ok(Metrics { loss: total, correct, samples: n as u32 })
}

/// The backward through every layer, after [`loss`]: writes every layer's gradient into
/// `grads` (flat, like the parameters).
pub fn backward(
    cfg: &Config<'_>,
    params: &[u32],
    x: &[u32],
    work: &mut [u32],
    grads: &mut [u32],
) -> Result<(), MeshError> {
    let n = check(cfg, params, x, work)?;
    let model = &cfg.model;
    if grads.len() != params.len() {
        return Err(MeshError::Length { what: "gradient", expected: params.len(), got: grads.len() });
    }
    let (outs, dx_len, _) = split_lengths(model, n);
    let (acts, rest) = work.split_at_mut(outs);
    let scratch = &mut rest[..dx_len];
    for l in (0..model.layers()).rev() {
        let layer = model.layer(l).ok_or(MeshError::NoLayers(model.dims.len()))?;
        let dz = output_range(model, n, l);
        let input = if l == 0 { x } else { &acts[output_range(model, n, l - 1)] };
        let g = &mut grads[layer_words(model, l)];
        dense::weight_grad(&cfg.mesh, cfg.order, layer, input, &acts[dz.clone()], g)?;
        if l > 0 {
            let dx = &mut scratch[..n * layer.inputs];
            dense::input_grad(layer, &params[layer_words(model, l)], &acts[dz], dx)?;
            let below = &mut acts[output_range(model, n, l - 1)];
            for (y, d) in below.iter_mut().zip(dx.iter()) {
                *y = dense::relu_grad(*y, *d);
            }
        }
    }
    Ok(())
}

/// A whole step: every buffer and label is checked first, then [`forward`], [`loss`],
/// [`backward`].
pub fn step(
    cfg: &Config<'_>,
    params: &[u32],
    x: &[u32],
    labels: &[u32],
    work: &mut [u32],
    grads: &mut [u32],
) -> Result<Metrics, MeshError> {
    let n = check(cfg, params, x, work)?;
    check_labels(&cfg.model, n, labels)?;
    if grads.len() != params.len() {
        return Err(MeshError::Length { what: "gradient", expected: params.len(), got: grads.len() });
    }
    forward(cfg, params, x, work)?;
    let metrics = loss(cfg, x, labels, work)?;
    backward(cfg, params, x, work, grads)?;
    Ok(metrics)
}

#[cfg(any(test, feature = "std"))]
pub use self::host::{run, weight_flits, StepOutput};

#[cfg(any(test, feature = "std"))]
mod host {
    extern crate std;
    use super::*;
    use crate::flit::{Flit, Kind};
    use std::vec::Vec;

    /// Everything one step produced ([`run`]).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct StepOutput {
        /// The metrics port's words.
        pub metrics: Metrics,
        /// Each layer's forward output (N×d_(l+1), sample-major); the last are the logits.
        pub outputs: Vec<Vec<u32>>,
        /// dz at the logits (softmax − one-hot) per sample.
        pub logit_grad: Vec<u32>,
        /// Each sample's loss.
        pub sample_losses: Vec<u32>,
        /// Every layer's gradient, flat like the parameters.
        pub grads: Vec<u32>,
    }

    /// Runs one step with buffers of its own.
    pub fn run(cfg: &Config<'_>, params: &[u32], x: &[u32], labels: &[u32]) -> Result<StepOutput, MeshError> {
        cfg.validate()?;
        let n = samples_of(cfg, x)?;
        let model = &cfg.model;
        check_labels(model, n, labels)?;
        let mut work = std::vec![0u32; workspace_words(model, n)?];
        let mut grads = std::vec![0u32; params.len()];
        forward(cfg, params, x, &mut work)?;
        let outputs = (0..model.layers()).map(|l| work[output_range(model, n, l)].to_vec()).collect();
        let metrics = loss(cfg, x, labels, &mut work)?;
        let logit_grad = work[output_range(model, n, model.layers() - 1)].to_vec();
        let sample_losses = work[work.len() - n..].to_vec();
        backward(cfg, params, x, &mut work, &mut grads)?;
        Ok(StepOutput { metrics, outputs, logit_grad, sample_losses, grads })
    }

    impl StepOutput {
        /// Layer `l`'s gradient (stream order).
        pub fn layer_grad(&self, model: &Model<'_>, l: usize) -> &[u32] {
            self.grads.get(layer_words(model, l)).unwrap_or(&[])
        }

        /// The gradient egress stream of the step: layer L−1 first, each layer chunk by
        /// chunk, as [`Kind::Gradient`] flits of step `step`.
        pub fn gradient_flits(&self, cfg: &Config<'_>, step: u16) -> Result<Vec<Flit>, MeshError> {
            let model = &cfg.model;
            let mut out = Vec::with_capacity(self.grads.len());
            for l in (0..model.layers()).rev() {
                let layer = model.layer(l).ok_or(MeshError::NoLayers(model.dims.len()))?;
                out.extend(cfg.stream.flits(Kind::Gradient, l, step, layer, self.layer_grad(model, l))?);
            }
            Ok(out)
        }
    }

    /// One pass of the weight ingress stream (forward, and the same again backward): layer 0
    /// first, as [`Kind::Weight`] flits of step `step`.
    pub fn weight_flits(cfg: &Config<'_>, params: &[u32], step: u16) -> Result<Vec<Flit>, MeshError> {
        cfg.validate()?;
        let model = &cfg.model;
        if params.len() != model.param_words() {
            return Err(MeshError::Length {
                what: "parameter",
                expected: model.param_words(),
                got: params.len(),
            });
        }
        let mut out = Vec::with_capacity(params.len());
        for l in 0..model.layers() {
            let layer = model.layer(l).ok_or(MeshError::NoLayers(model.dims.len()))?;
            out.extend(cfg.stream.flits(Kind::Weight, l, step, layer, &params[layer_words(model, l)])?);
        }
        Ok(out)
    }
}
