//! `MxStep`: one optimizer step of one MemoryX layer from gradients the host streams (link
//! v2, bulk mode MemoryX). The host sends the layer's `len` gradient words (binary32, already
//! reduced over workers and batch: MemoryX scales them by the layer's 1/(workers × batch)) on
//! channel 3 and this request; the firmware computes the step's constants from the layer's
//! hyperparameters and schedule, and the data mover feeds the words as gradient flits into the
//! lanes. The answer comes when every chunk of the step has retired in the store.
//!
//! Steps of a layer run in order from 1; any other `t` is refused, so a retried or replayed
//! step can never be applied twice.
//!
//! With `wafers` = K > 0 the host sends K wafers' gradients instead, K·`len` words interleaved
//! per parameter (word i·K + k is wafer k's gradient i), and the board's SwarmX node sums them
//! (ports 0..K−1, its fixed order, its scale when the host turned it on) before the lanes.
//! The firmware feeds such a step chunk by chunk: a chunk the node aborts (a wafer timed out,
//! a header mismatch) is acted on by the SwarmX policy (which may mask the port) and fed
//! again, up to [`MAX_REFEEDS`] times. A board without SwarmX answers `NotPresent`; K above
//! its ports, `BadArgument`.

use crate::ctrl::{get_u16, get_u32, Command, Status, Writer};

/// Times one chunk of a step is fed again after SwarmX aborted it, before the step fails.
pub const MAX_REFEEDS: u32 = 3;

/// Runs step `t` of `layer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MxStep {
    /// Layer.
    pub layer: u16,
    /// The step, 1 for the first; must be the layer's last step + 1.
    pub t: u32,
    /// 0: one reduced gradient per parameter. K: K wafers' gradients, summed by SwarmX.
    pub wafers: u8,
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
    /// Chunks fed again after SwarmX aborted them (0 without wafers).
    pub refed: u32,
}

impl<'a> Command<'a> for MxStep {
    const OPCODE: u8 = super::opcode::MX_STEP;
    type Response = MxStepDone;

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u16(self.layer)?;
        w.u32(self.t)?;
        w.bytes(&[self.wafers])?;
        Ok(w.len())
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if p.len() != 7 {
            return Err(Status::BadLength);
        }
        Ok(Self { layer: get_u16(p, 0)?, t: get_u32(p, 2)?, wafers: p[6] })
    }
    fn encode_response(r: &MxStepDone, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        for v in [r.t, r.chunks, r.lr, r.cycles, r.refed] {
            w.u32(v)?;
        }
        Ok(w.len())
    }
    fn decode_response(d: &'a [u8]) -> Result<MxStepDone, Status> {
        if d.len() != 20 {
            return Err(Status::BadLength);
        }
        Ok(MxStepDone {
            t: get_u32(d, 0)?,
            chunks: get_u32(d, 4)?,
            lr: get_u32(d, 8)?,
            cycles: get_u32(d, 12)?,
            refed: get_u32(d, 16)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut b = [0u8; 20];
        let q = MxStep { layer: 2, t: 7, wafers: 3 };
        let n = q.encode(&mut b).unwrap();
        assert_eq!(MxStep::decode(&b[..n]), Ok(q));
        assert_eq!(MxStep::decode(&b[..n - 1]), Err(Status::BadLength));
        let r = MxStepDone { t: 7, chunks: 3, lr: 0x3a83_126f, cycles: 999, refed: 2 };
        let n = MxStep::encode_response(&r, &mut b).unwrap();
        assert_eq!(MxStep::decode_response(&b[..n]), Ok(r));
    }
}
