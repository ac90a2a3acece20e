//! The board's wafer mesh over link protocol v2 (docs/mesh-array.md "Firmware driver"):
//! [`BoardMesh::setup`] names an MLP and the batch per PE, [`BoardMesh::step`] runs one
//! training step: the samples go on channel 4, the weights on channel 2, the gradients come
//! back on channel 2 while the board runs the step, and the answer carries the loss sum, the
//! correct count and the mesh's counters.
//!
//! Shapes are checked here first with the same rules the firmware applies
//! (`ws_common::mesh::check_step`), so a refusal names what to change.

use std::time::Duration;

use ws_common::ctrl::cmd::{MeshPlan, MeshSetup, MeshStep, MeshStepDone, MESH_MAX_DIMS};
use ws_common::ctrl::Status;
use ws_common::golden::mesh::Layer;
use ws_common::link::Channel;
use ws_common::mesh::{check_step, StepMap};

use crate::error::{Error, MeshError, ProtocolError};
use crate::link::{Endpoint, Link};
use crate::optim::BoardMx;
use crate::Result;

mod fed;
mod gen;
mod golden;
mod train;

pub use gen::Gen;
pub use golden::{golden_grads, golden_step};
pub use train::{checkpoint_bytes, TrainRow, TrainRun, CHECKPOINT_FORMAT};

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
    /// Runs of steps read each step's first layer back from the store instead of forwarding
    /// it (`MeshTrainRun::read_back`, the pipeline's debug switch).
    read_back: bool,
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
    Ok(BoardMesh { mx, name: format!("board `{name}`"), shape: None, read_back: false })
}

fn bytes(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The samples as a store-fed job takes them on channel 4: wafer by wafer (wafer w holds
/// samples w·C … (w + 1)·C − 1, C = the plan's capacity), each wafer's inputs then its labels.
fn wafer_stream(s: &Shape, x: &[u32], labels: &[u32]) -> Vec<u8> {
    let (cap, d0) = (s.plan.capacity.max(1) as usize, s.dims[0]);
    let mut out = Vec::with_capacity(4 * (x.len() + labels.len()));
    for (w, lab) in labels.chunks(cap).enumerate() {
        let from = w * cap;
        out.extend(bytes(&x[from * d0..(from + lab.len()) * d0]));
        out.extend(bytes(lab));
    }
    out
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

    /// The board's cycle counter, where the transport follows one (the simulator).
    pub fn board_cycles(&mut self) -> Option<u64> {
        self.mx.link().board_clock().map(|c| c.cycles())
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
                    "failed step {step} ({st:?}): `wsctl logs` says why (a PE's refusal, a word count that did not match the step, a link stream ahead of its data); the next job starts from a known state, so run it again, and reset the board (`wsctl reset`) if it fails the same way"
                ),
            }
            .into(),
            None => e,
        })?;
        // The answer comes once the board has queued every word; the last may still be on
        // the wire.
        let deadline = crate::board_time::Deadline::new(STALL, self.mx.link().board_clock());
        while got.len() < want {
            self.mx.link().pump(Duration::from_millis(2))?;
            let before = got.len();
            take(self.mx.link().endpoint(), &mut got)?;
            if got.len() == before && deadline.expired() {
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
