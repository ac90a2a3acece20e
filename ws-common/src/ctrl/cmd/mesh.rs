//! The wafer mesh's host commands (link v2, bulk mode MemoryX; docs/mesh-array.md "Firmware
//! driver"):
//!
//! - [`MeshSetup`] names an MLP and the batch per PE. The firmware checks the shape against the
//!   array ([`crate::mesh::check_step`]), writes the route tables of the reference dataflow
//!   and the egress table, and answers with the [`MeshPlan`]: what every step will take and
//!   give.
//! - [`MeshStep`] runs one training step of N samples. The host streams, while the request
//!   runs, the samples on channel 4 (N·d_0 input words, sample-major, then N labels), the
//!   weights on channel 2 (every layer forward, 0 … L−1, then L−1 … 1 again for the backward
//!   pass; each layer's rows of bias then weights), and reads the gradients back on channel 2
//!   (every layer's dW/db, last layer first, as `golden::mesh::step` orders them). The answer
//!   carries the step's loss sum and correct count from the metrics egress, and the counters.
//!
//! - [`MeshTrain`] runs one training step with MemoryX in the loop on W wafers: the weights
//!   come from MemoryX's store (MemoryX layers 0 … L−1, created by the host with the mesh's
//!   layer shapes), down SwarmX's broadcast to every wafer on its port, and each wafer's
//!   gradients go up its port; SwarmX sums them in its fixed order into MemoryX's optimizer,
//!   which applies step `t` to every layer. Only the samples cross the link (channel 4: wafer
//!   0's inputs then its labels, then wafer 1's, …; wafer w takes samples w·C … of the
//!   request, C = PEs × B); the answer comes once every layer's update has retired in the
//!   store, with the wafers' metrics summed in wafer order.
//! - [`MeshEval`](super::MeshEval) runs the forward pass only, for held-out evaluation.
//!
//! The firmware only sequences: it places each PE's samples with the data mover, loads the
//! programs, starts the PEs, feeds the weights and moves the capture ring's position; no
//! sample, weight or gradient word passes through the CPU.

use crate::ctrl::{get_u16, get_u32, Command, Status, Writer};
use crate::mesh::MAX_STEP_LAYERS;

/// Layer widths a setup can name.
pub const MESH_MAX_DIMS: usize = MAX_STEP_LAYERS + 1;

/// Configures the mesh for an MLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeshSetup {
    /// Samples per PE (B).
    pub b: u16,
    /// Weight rows per chunk of the streams (and of the gradient egress).
    pub rows_per_chunk: u16,
    /// Layer widths d_0 … d_L (input first; the last is the number of classes).
    pub dims: [u16; MESH_MAX_DIMS],
    /// Widths used.
    pub ndims: u8,
}

impl MeshSetup {
    /// The widths used.
    pub fn dims(&self) -> &[u16] {
        &self.dims[..usize::from(self.ndims).min(MESH_MAX_DIMS)]
    }
}

/// What a setup gives every step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MeshPlan {
    /// P.
    pub rows: u8,
    /// Q.
    pub cols: u8,
    /// Samples per PE.
    pub b: u16,
    /// The PEs' MAX_B.
    pub max_b: u16,
    /// Instructions per PE program.
    pub prog_len: u16,
    /// SRAM words a PE uses.
    pub sram_used: u32,
    /// SRAM words a PE has.
    pub sram_words: u32,
    /// Weight words a step takes on channel 2 (forward, then the backward pass).
    pub weight_words: u32,
    /// Gradient words a step gives back on channel 2.
    pub grad_words: u32,
    /// Largest batch of one wafer: PEs × B.
    pub capacity: u32,
    /// Wafers the board carries (each a mesh of this shape on a SwarmX port).
    pub wafers: u8,
}

impl MeshPlan {
    /// Samples `wafers` wafers hold together.
    pub fn capacity_of(&self, wafers: u8) -> u32 {
        self.capacity.saturating_mul(u32::from(wafers))
    }
}

/// Runs one training step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeshStep {
    /// The step number in the gradient headers (16 bits).
    pub step: u16,
    /// Samples (1 ..= the plan's capacity).
    pub samples: u16,
}

/// Runs one training step with MemoryX in the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeshTrain {
    /// The optimizer step of every layer (each layer's last step + 1); its low 16 bits are
    /// the step in the gradient headers.
    pub t: u32,
    /// Samples (1 ..= the plan's capacity × wafers).
    pub samples: u16,
    /// Wafers to train on (1 ..= the plan's wafers): wafers 0 … W−1, whose gradients SwarmX
    /// sums.
    pub wafers: u8,
}

/// What a step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MeshStepDone {
    /// The step.
    pub step: u16,
    /// The loss summed over the samples (binary32 bits).
    pub loss: u32,
    /// Correct predictions (binary32 bits of the count, as the metrics egress carries it).
    pub correct: u32,
    /// Mesh cycles from the start of the PEs to the last one done (the busiest wafer's).
    pub cycles: u32,
    /// FMAs issued over every PE of every wafer.
    pub fmas: u32,
    /// Gradient words that left the mesh (each wafer's; they are equal).
    pub grad_words: u32,
}

impl<'a> Command<'a> for MeshSetup {
    const OPCODE: u8 = super::opcode::MESH_SETUP;
    type Response = MeshPlan;

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u16(self.b)?;
        w.u16(self.rows_per_chunk)?;
        w.u8(self.ndims)?;
        for d in self.dims() {
            w.u16(*d)?;
        }
        Ok(w.len())
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        let ndims = *p.get(4).ok_or(Status::BadLength)?;
        let n = usize::from(ndims);
        if n > MESH_MAX_DIMS {
            return Err(Status::BadArgument);
        }
        if p.len() != 5 + 2 * n {
            return Err(Status::BadLength);
        }
        let mut dims = [0u16; MESH_MAX_DIMS];
        for (i, d) in dims[..n].iter_mut().enumerate() {
            *d = get_u16(p, 5 + 2 * i)?;
        }
        Ok(Self { b: get_u16(p, 0)?, rows_per_chunk: get_u16(p, 2)?, dims, ndims })
    }
    fn encode_response(r: &MeshPlan, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u8(r.rows)?;
        w.u8(r.cols)?;
        for v in [r.b, r.max_b, r.prog_len] {
            w.u16(v)?;
        }
        for v in [r.sram_used, r.sram_words, r.weight_words, r.grad_words, r.capacity] {
            w.u32(v)?;
        }
        w.u8(r.wafers)?;
        Ok(w.len())
    }
    fn decode_response(d: &'a [u8]) -> Result<MeshPlan, Status> {
        if d.len() != 29 {
            return Err(Status::BadLength);
        }
        Ok(MeshPlan {
            rows: d[0],
            cols: d[1],
            b: get_u16(d, 2)?,
            max_b: get_u16(d, 4)?,
            prog_len: get_u16(d, 6)?,
            sram_used: get_u32(d, 8)?,
            sram_words: get_u32(d, 12)?,
            weight_words: get_u32(d, 16)?,
            grad_words: get_u32(d, 20)?,
            capacity: get_u32(d, 24)?,
            wafers: d[28],
        })
    }
}

impl<'a> Command<'a> for MeshStep {
    const OPCODE: u8 = super::opcode::MESH_STEP;
    type Response = MeshStepDone;

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u16(self.step)?;
        w.u16(self.samples)?;
        Ok(w.len())
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if p.len() != 4 {
            return Err(Status::BadLength);
        }
        Ok(Self { step: get_u16(p, 0)?, samples: get_u16(p, 2)? })
    }
    fn encode_response(r: &MeshStepDone, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u16(r.step)?;
        for v in [r.loss, r.correct, r.cycles, r.fmas, r.grad_words] {
            w.u32(v)?;
        }
        Ok(w.len())
    }
    fn decode_response(d: &'a [u8]) -> Result<MeshStepDone, Status> {
        if d.len() != 22 {
            return Err(Status::BadLength);
        }
        Ok(MeshStepDone {
            step: get_u16(d, 0)?,
            loss: get_u32(d, 2)?,
            correct: get_u32(d, 6)?,
            cycles: get_u32(d, 10)?,
            fmas: get_u32(d, 14)?,
            grad_words: get_u32(d, 18)?,
        })
    }
}

impl<'a> Command<'a> for MeshTrain {
    const OPCODE: u8 = super::opcode::MESH_TRAIN;
    type Response = MeshStepDone;

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u32(self.t)?;
        w.u16(self.samples)?;
        w.u8(self.wafers)?;
        Ok(w.len())
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if p.len() != 7 {
            return Err(Status::BadLength);
        }
        Ok(Self { t: get_u32(p, 0)?, samples: get_u16(p, 4)?, wafers: p[6] })
    }
    fn encode_response(r: &MeshStepDone, out: &mut [u8]) -> Result<usize, Status> {
        MeshStep::encode_response(r, out)
    }
    fn decode_response(d: &'a [u8]) -> Result<MeshStepDone, Status> {
        MeshStep::decode_response(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut b = [0u8; 64];
        let mut dims = [0u16; MESH_MAX_DIMS];
        dims[..4].copy_from_slice(&[64, 128, 64, 10]);
        let q = MeshSetup { b: 4, rows_per_chunk: 2, dims, ndims: 4 };
        let n = q.encode(&mut b).unwrap();
        assert_eq!(n, 13);
        assert_eq!(MeshSetup::decode(&b[..n]), Ok(q));
        assert_eq!(MeshSetup::decode(&b[..n - 1]), Err(Status::BadLength));
        b[4] = 9;
        assert_eq!(MeshSetup::decode(&b[..n]), Err(Status::BadArgument));
        assert_eq!(MeshSetup::decode(&[]), Err(Status::BadLength));
        let r = MeshPlan {
            rows: 2,
            cols: 2,
            b: 4,
            max_b: 8,
            prog_len: 12,
            sram_used: 1588,
            sram_words: 4096,
            weight_words: 99,
            grad_words: 77,
            capacity: 16,
            wafers: 2,
        };
        let n = MeshSetup::encode_response(&r, &mut b).unwrap();
        assert_eq!(MeshSetup::decode_response(&b[..n]), Ok(r));
        let q = MeshStep { step: 7, samples: 13 };
        let n = q.encode(&mut b).unwrap();
        assert_eq!(MeshStep::decode(&b[..n]), Ok(q));
        let q = MeshTrain { t: 70_000, samples: 3, wafers: 2 };
        let n = q.encode(&mut b).unwrap();
        assert_eq!(MeshTrain::decode(&b[..n]), Ok(q));
        assert_eq!(MeshTrain::decode(&b[..n - 1]), Err(Status::BadLength));
        let r = MeshStepDone { step: 7, loss: 1, correct: 2, cycles: 3, fmas: 4, grad_words: 5 };
        let n = MeshStep::encode_response(&r, &mut b).unwrap();
        assert_eq!(MeshStep::decode_response(&b[..n]), Ok(r));
    }
}
