//! `MxStep`: one optimizer step of one MemoryX layer from gradients the host streams (link
//! v2, bulk mode MemoryX). The host sends the layer's `len` gradient words (binary32, already
//! reduced over workers and batch: MemoryX scales them by the layer's 1/(workers × batch)) on
//! channel 3 and this request; the firmware computes the step's constants from the layer's
//! hyperparameters and schedule, and the data mover feeds the words as gradient flits into the
//! lanes. The answer comes when every chunk of the step has retired in the store.
//!
//! Steps of a layer run in order from 1; any other `t` is refused, so a retried or replayed
//! step can never be applied twice.

use crate::ctrl::{get_u16, get_u32, Command, Status, Writer};

/// Runs step `t` of `layer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MxStep {
    /// Layer.
    pub layer: u16,
    /// The step, 1 for the first; must be the layer's last step + 1.
    pub t: u32,
}

/// What the step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MxStepDone {
    /// The step.
    pub t: u32,
    /// Update chunks retired.
    pub chunks: u32,
    /// The learning rate the schedule gave (binary32 bits).
    pub lr: u32,
    /// MemoryX cycles from the first gradient flit to the last retirement.
    pub cycles: u32,
}

impl<'a> Command<'a> for MxStep {
    const OPCODE: u8 = super::opcode::MX_STEP;
    type Response = MxStepDone;

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u16(self.layer)?;
        w.u32(self.t)?;
        Ok(w.len())
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if p.len() != 6 {
            return Err(Status::BadLength);
        }
        Ok(Self { layer: get_u16(p, 0)?, t: get_u32(p, 2)? })
    }
    fn encode_response(r: &MxStepDone, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        for v in [r.t, r.chunks, r.lr, r.cycles] {
            w.u32(v)?;
        }
        Ok(w.len())
    }
    fn decode_response(d: &'a [u8]) -> Result<MxStepDone, Status> {
        if d.len() != 16 {
            return Err(Status::BadLength);
        }
        Ok(MxStepDone {
            t: get_u32(d, 0)?,
            chunks: get_u32(d, 4)?,
            lr: get_u32(d, 8)?,
            cycles: get_u32(d, 12)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut b = [0u8; 16];
        let n = MxStep { layer: 2, t: 7 }.encode(&mut b).unwrap();
        assert_eq!(MxStep::decode(&b[..n]), Ok(MxStep { layer: 2, t: 7 }));
        assert_eq!(MxStep::decode(&b[..n - 1]), Err(Status::BadLength));
        let r = MxStepDone { t: 7, chunks: 3, lr: 0x3a83_126f, cycles: 999 };
        let n = MxStep::encode_response(&r, &mut b).unwrap();
        assert_eq!(MxStep::decode_response(&b[..n]), Ok(r));
    }
}
