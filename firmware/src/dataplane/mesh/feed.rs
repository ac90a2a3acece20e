//! How a store-fed job's weights reach SwarmX's broadcast (docs/mesh-array.md "Weights from
//! the store"): the streamer STREAMs each layer from the store straight down the broadcast
//! (the data mover's WOUT_CTRL.reads), no copy anywhere.
//!
//! - Forward: every layer in order, queued at once, so layer l + 1's chunks are read while
//!   the wafers compute layer l.
//! - Backward: a layer's old weights (for its dx) are STREAMed before its gradients arrive,
//!   because the PE program takes a layer's weights (DX) before it sends the layer's
//!   gradients (GRAD). A layer's STREAM waits until every update chunk of the layer above has
//!   retired: the streamer hands out its weight-out in descriptor order, so a STREAM chunk
//!   queued among the updates would hold them until the wafers take it, which they do only
//!   after those updates' gradients have left them.

use ws_common::ctrl::Status;

use super::train::{Job, Layers};
use crate::dataplane::{fault, MemoryXPlane};

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
}
