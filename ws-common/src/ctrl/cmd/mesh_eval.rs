//! [`MeshEval`]: held-out evaluation on the board's wafers (docs/mesh-array.md "Several
//! wafers"). The forward pass of the set-up MLP with the weights of MemoryX layers 0 … L−1
//! (whatever step they are at; nothing is updated), streamed from the store down SwarmX's
//! broadcast to wafers 0 … W−1, on N samples the host streams on channel 4 exactly as for
//! [`MeshTrain`](super::MeshTrain). Each PE runs the forward layers, the loss stage and the
//! metrics reduction (`ws_common::mesh::eval_program`); the answer is a
//! [`MeshStepDone`](super::MeshStepDone) with the loss sum and correct count summed over the
//! wafers in wafer order, no gradient words.

use crate::ctrl::{get_u16, Command, Status, Writer};

use super::{MeshStep, MeshStepDone};

/// Runs the forward pass for evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeshEval {
    /// Samples (1 ..= the plan's capacity × wafers).
    pub samples: u16,
    /// Wafers to spread them over (1 ..= the plan's wafers); wafer w takes samples w·C …
    /// (C = PEs × B), so the last wafers may get none.
    pub wafers: u8,
}

impl<'a> Command<'a> for MeshEval {
    const OPCODE: u8 = super::opcode::MESH_EVAL;
    type Response = MeshStepDone;

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u16(self.samples)?;
        w.u8(self.wafers)?;
        Ok(w.len())
    }

    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if p.len() != 3 {
            return Err(Status::BadLength);
        }
        Ok(Self { samples: get_u16(p, 0)?, wafers: p[2] })
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
        let mut b = [0u8; 8];
        let q = MeshEval { samples: 360, wafers: 2 };
        let n = q.encode(&mut b).unwrap();
        assert_eq!(MeshEval::decode(&b[..n]), Ok(q));
        assert_eq!(MeshEval::decode(&b[..n - 1]), Err(Status::BadLength));
    }
}
