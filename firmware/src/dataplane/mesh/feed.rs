//! How a store-fed job's weights reach SwarmX's broadcast (docs/mesh-array.md "On SwarmX",
//! "Weights from the store").
//!
//! - **Streamed** (`feed_streamed`, a data mover with WOUT_CTRL.reads): the streamer STREAMs
//!   each layer from the store straight down the broadcast, no copy anywhere. Forward: every
//!   layer in order, queued at once, so layer l + 1's chunks are read while the wafers
//!   compute layer l. Backward: a layer's old weights (for its dx) are STREAMed before its
//!   gradients arrive, because the PE program takes a layer's weights (DX) before it sends
//!   the layer's gradients (GRAD). A layer's STREAM waits until every update chunk of the
//!   layer above has retired: the streamer hands out its weight-out in descriptor order, so a
//!   STREAM chunk queued among the updates would hold them until the wafers take it, which
//!   they do only after those updates' gradients have left them.
//! - **Staged** (`stage` and `feed_staged`, a version 1.0 data mover): each forward piece goes
//!   store → TX0's ring (op 2) → broadcast (op 4), and the backward passes' weights are staged
//!   in that ring before anything is updated.

use ws_common::ctrl::Status;
use ws_common::mesh::GSEG;

use super::train::{Job, Layers, STAGE_PIECE};
use super::Setup;
use crate::dataplane::{fault, MemoryXPlane, TX_WEIGHTS};
use crate::hal::link::LinkEngine;
use crate::hal::mx::{Op, Ring};

/// Where a staged job's weights sit in TX0's ring.
#[derive(Debug, Clone, Copy)]
pub(super) struct Staged {
    ring: Ring,
    /// The ring offset of word 0 of the staging.
    at: u32,
    /// Each backward layer's first word, in words from `at`.
    back: [u32; GSEG],
    /// Words staged (the forward pieces go after them).
    words: u32,
}

impl Staged {
    /// The ring at word `words` of the staging.
    fn at(&self, words: u32) -> Ring {
        let len = self.ring.len;
        Ring { base: self.ring.base, len, off: (self.at + 4 * words) & (len - 1) }
    }
}

impl MemoryXPlane {
    /// Streams the job's weights from the store (WOUT_CTRL.reads on for the job's weights):
    /// the forward pass, then for training each layer's old weights from the last down to
    /// layer 1, each once the layer above has retired its updates. Returns once every
    /// weight has been queued; `errs` is the streamer's error count at the job's start.
    pub(super) fn feed_streamed(&mut self, job: Job, layers: &Layers, errs: u32) -> Result<(), Status> {
        let nl = layers.len();
        self.mx.set_wout_reads(true);
        for l in 0..nl {
            self.mx.stream(l, self.budget).map_err(fault)?;
        }
        if job != Job::Eval && nl > 1 {
            // The last layer's dx follows the loss: its weights queue behind the forward.
            self.mx.stream(nl - 1, self.budget).map_err(fault)?;
            for l in (1..nl - 1).rev() {
                let above = layers[l + 1].chunks();
                self.mx.wait_done(l + 1, above, errs, self.budget).map_err(fault)?;
                self.mx.stream(l, self.budget).map_err(fault)?;
            }
        }
        Ok(())
    }

    /// Stages a training job's backward weights (layers L−1 … 1) in TX0's ring, before
    /// anything is updated; the forward pieces go after them. TX0's ready position never
    /// moves, so the link sends none of it.
    pub(super) fn stage(
        &mut self,
        job: Job,
        s: &Setup,
        layers: &Layers,
        eng: &LinkEngine,
    ) -> Result<Staged, Status> {
        // TX0's ring is all free once the host has everything it was sent.
        let ring = Self::rings(eng)[3];
        if !(0..self.budget.max(1)).any(|_| eng.tx_ready(TX_WEIGHTS) == eng.tx_acked(TX_WEIGHTS)) {
            return Err(Status::Timeout);
        }
        let mut st = Staged {
            ring: Ring { base: ring.base, len: ring.len, off: 0 },
            at: eng.tx_ready(TX_WEIGHTS) & (ring.len - 1),
            back: [0; GSEG],
            words: 0,
        };
        if job != Job::Eval {
            for l in (1..layers.len()).rev() {
                st.back[l] = st.words;
                let (addr, words) = (layers[l].info.bases[0], s.layer_words(l));
                let mut done = 0;
                while done < words {
                    let piece = (words - done).min(STAGE_PIECE);
                    let to = st.at(st.words + done);
                    self.mx
                        .mover(Op::StoreToRing, to, addr + 4 * done, piece, (0, 0, 0, 0), self.budget)
                        .map_err(fault)?;
                    done += piece;
                }
                st.words += words;
            }
        }
        Ok(st)
    }

    /// Feeds a staged job: each forward layer a piece at a time through the ring (op 2, then
    /// op 4), then the staged backward copies (op 4).
    pub(super) fn feed_staged(
        &mut self,
        st: &Staged,
        job: Job,
        s: &Setup,
        layers: &Layers,
        step: u16,
    ) -> Result<(), Status> {
        let nl = layers.len();
        let fwd = st.at(st.words);
        for (l, layer) in layers.iter().enumerate() {
            let (base, words) = (layer.info.bases[0], s.layer_words(l));
            let mut done = 0;
            while done < words {
                let piece = (words - done).min(STAGE_PIECE);
                self.mx
                    .mover(Op::StoreToRing, fwd, base + 4 * done, piece, (0, 0, 0, 0), self.budget)
                    .map_err(fault)?;
                let hdr = (l as u32, u32::from(step), STAGE_PIECE, done / STAGE_PIECE);
                self.mx.mover(Op::RingToMesh, fwd, 0, piece, hdr, self.budget).map_err(fault)?;
                done += piece;
            }
        }
        if job != Job::Eval {
            for l in (1..nl).rev() {
                let words = s.layer_words(l);
                let mut done = 0;
                while done < words {
                    let piece = (words - done).min(STAGE_PIECE);
                    let hdr = (l as u32, u32::from(step), STAGE_PIECE, done / STAGE_PIECE);
                    self.mx
                        .mover(Op::RingToMesh, st.at(st.back[l] + done), 0, piece, hdr, self.budget)
                        .map_err(fault)?;
                    done += piece;
                }
            }
        }
        Ok(())
    }
}
