//! The store-fed jobs of [`BoardMesh`] (docs/mesh-array.md "On SwarmX", "Runs of steps"):
//! the weights come from MemoryX's store down SwarmX's broadcast, and only the samples cross
//! the link, on channel 4 while the request runs. [`BoardMesh::train_on`] is one training
//! step (`MeshTrain`), [`BoardMesh::train_run`] consecutive steps in one request
//! (`MeshTrainRun`), [`BoardMesh::eval_on`] the forward pass for evaluation (`MeshEval`).

use ws_common::ctrl::cmd::{MeshEval, MeshRunDone, MeshStepDone, MeshTrain, MeshTrainRun, MAX_RUN_STEPS};
use ws_common::ctrl::Status;
use ws_common::link::Channel;

use super::{wafer_stream, BoardMesh, Shape, STALL};
use crate::error::{Error, MeshError, ProtocolError};
use crate::Result;

/// A store-fed job refused as `NotPresent`: the board lacks a part the job streams through.
const NO_STREAM: &str = "has no wafer mesh on SwarmX or a data mover older than version 1.1 (no \
                         WOUT_CTRL.reads, so its weights cannot stream from the store): `wsctl info` \
                         lists the blocks and their versions; load the bitstream that goes with this \
                         firmware";

impl BoardMesh {
    /// Runs training step `t` with MemoryX in the loop (`MeshTrain`): the board takes the
    /// weights of MemoryX layers 0 … L−1 (created with the setup's layer shapes, at step
    /// t − 1), runs the step on `x` and `labels`, and MemoryX applies its optimizer step `t`
    /// to every layer with the mesh's gradients. Only the samples cross the link.
    pub fn train(&mut self, t: u32, x: &[u32], labels: &[u32]) -> Result<MeshStepDone> {
        self.train_on(t, 1, x, labels)
    }

    /// Held-out evaluation (`MeshEval`): the forward pass of the set-up MLP with the weights
    /// of MemoryX layers 0 … L−1 on `x` and `labels`, spread over `wafers` wafers as
    /// [`BoardMesh::train_on`] spreads them; nothing is updated. The answer's loss and
    /// correct count are summed over the wafers in wafer order.
    pub fn eval_on(&mut self, wafers: u8, x: &[u32], labels: &[u32]) -> Result<MeshStepDone> {
        let (s, samples) = self.fed_samples(wafers, x, labels, "an evaluation", "evaluate")?;
        let n = labels.len();
        let q = MeshEval { samples: n as u16, wafers };
        let layers = s.dims.len() - 1;
        self.request_fed(&q, &samples).map_err(|e| match e.refusal() {
            Some(Status::BadStep) | Some(Status::NoLayer) => MeshError::Usage(format!(
                "the board refused the evaluation: run `setup` first and create MemoryX layers 0..{layers} \
                 (one per mesh layer)"
            ))
            .into(),
            Some(st) => MeshError::Board {
                board: self.name.clone(),
                what: format!(
                    "failed the evaluation of {n} samples on {wafers} wafers ({st:?}): `wsctl logs` says why"
                ),
            }
            .into(),
            None => e,
        })
    }

    /// [`BoardMesh::train`] on `wafers` wafers: wafer w takes samples w·C … (C = the plan's
    /// capacity), and SwarmX sums their gradients in its fixed order.
    pub fn train_on(&mut self, t: u32, wafers: u8, x: &[u32], labels: &[u32]) -> Result<MeshStepDone> {
        let (s, samples) = self.fed_samples(wafers, x, labels, "the first step", "take")?;
        let q = MeshTrain { t, samples: labels.len() as u16, wafers };
        let done = self.request_fed(&q, &samples);
        let then = "its layers may hold a half-applied update, so start the run again (the next job starts \
                    from a known state and replaces them); `wsctl mesh train --checkpoint FILE` keeps the \
                    last whole step";
        done.map_err(|e| self.train_error(e, &format!("train step {t}"), s.dims.len() - 1, then))
    }
}

impl BoardMesh {
    /// The pipeline's debug switch (docs/mesh-array.md "Forwarding"): with `on`, the runs of
    /// [`BoardMesh::train_run`] read each step's first layer back from the store once the step
    /// before has updated it, instead of forwarding MemoryX's updated weights into the next
    /// forward pass. The numbers are the same; the iteration boundary is longer.
    pub fn set_read_back(&mut self, on: bool) {
        self.read_back = on;
    }

    /// Training steps `t`, `t` + 1, … on `wafers` wafers in one request (`MeshTrainRun`), one
    /// step per batch of `batches` (each `(x, labels)`, all of the same size, at most
    /// [`MAX_RUN_STEPS`]): each step is exactly [`BoardMesh::train_on`]'s, and every step's
    /// samples stream on channel 4 one after the other while the board runs, held back only by
    /// the link's credit, so the host is not on the critical path between steps. The answer
    /// has every step's [`MeshStepDone`] in step order and the board cycles the run took.
    pub fn train_run(&mut self, t: u32, wafers: u8, batches: &[(&[u32], &[u32])]) -> Result<MeshRunDone> {
        let n = batches.first().map_or(0, |b| b.1.len());
        if batches.is_empty() || batches.len() > MAX_RUN_STEPS || batches.iter().any(|b| b.1.len() != n) {
            return Err(MeshError::Usage(format!(
                "a run takes 1 to {MAX_RUN_STEPS} steps of equal size: {} steps of sizes {:?}",
                batches.len(),
                batches.iter().map(|b| b.1.len()).collect::<Vec<_>>()
            ))
            .into());
        }
        let mut samples = Vec::new();
        let mut shape = None;
        for (x, labels) in batches {
            let (s, bytes) = self.fed_samples(wafers, x, labels, "the first step", "take")?;
            samples.extend_from_slice(&bytes);
            shape = Some(s);
        }
        let layers = shape.map_or(0, |s| s.dims.len() - 1);
        let steps = batches.len() as u16;
        let last = t.saturating_add(u32::from(steps) - 1);
        let q = MeshTrainRun { t, steps, samples: n as u16, wafers, read_back: self.read_back };
        let then = "the layers may hold a half-applied update, so resume from the last checkpoint (the \
                    next job starts from a known state and replaces them)";
        let what = format!("train steps {t}..={last}");
        let run = self.request_fed(&q, &samples).map_err(|e| self.train_error(e, &what, layers, then))?;
        if run.steps().len() != batches.len() {
            return Err(MeshError::Board {
                board: self.name.clone(),
                what: format!(
                    "answered {} of the {} steps of the run from step {t}",
                    run.steps().len(),
                    steps
                ),
            }
            .into());
        }
        Ok(run)
    }
}

impl BoardMesh {
    /// The samples of a store-fed job (`MeshTrain`, `MeshEval`), checked against the setup
    /// and laid out wafer by wafer; `before` and `verb` word the refusals.
    fn fed_samples(
        &self,
        wafers: u8,
        x: &[u32],
        labels: &[u32],
        before: &str,
        verb: &str,
    ) -> Result<(Shape, Vec<u8>)> {
        let s = self.shape.clone().ok_or_else(|| MeshError::Usage(format!("run `setup` before {before}")))?;
        let n = labels.len();
        if n == 0 || n as u32 > s.plan.capacity_of(wafers) || x.len() != n * s.dims[0] {
            return Err(MeshError::Usage(format!(
                "{n} samples of {} input words: {wafers} wafers {verb} 1 to {} samples of {} words",
                x.len(),
                s.plan.capacity_of(wafers),
                s.dims[0]
            ))
            .into());
        }
        let samples = wafer_stream(&s, x, labels);
        Ok((s, samples))
    }

    /// What a store-fed training request's refusal or failure `e` tells the user: `what` names
    /// the steps ("train step 3"), `layers` the mesh layers, `then` what to do after a step
    /// failed part way.
    fn train_error(&self, e: Error, what: &str, layers: usize, then: &str) -> Error {
        let board = |what: String| MeshError::Board { board: self.name.clone(), what }.into();
        match e.refusal() {
            Some(Status::BadStep) | Some(Status::NoLayer) => MeshError::Usage(format!(
                "the board refused {what}: run `setup` first, create MemoryX layers 0..{layers} \
                 (one per mesh layer) and train them in order from step 1"
            ))
            .into(),
            Some(Status::BadArgument) => board(format!(
                "refused {what}: each MemoryX layer l must hold exactly the mesh layer's (d_l + 1)·d_(l+1) \
                 parameters, and SwarmX's ports of the wafers must be in its mask"
            )),
            Some(Status::NotPresent) => board(NO_STREAM.into()),
            Some(st) => board(format!("failed {what} ({st:?}): `wsctl logs` says why; {then}")),
            None => e,
        }
    }

    /// Sends a store-fed request while its samples stream on channel 4.
    fn request_fed<R: crate::client::Request>(&mut self, q: &R, samples: &[u8]) -> Result<R::Output> {
        let mut sent = 0usize;
        self.mx.link().request_with(q, STALL, 0, &mut |ep| {
            if sent == samples.len() {
                return Ok(false);
            }
            let k = ep.write(Channel::Data, &samples[sent..]).map_err(ProtocolError::Stream)?;
            sent += k;
            Ok(k > 0)
        })
    }
}
