//! `MxCreate`: creates one MemoryX layer (link v2). The firmware places its arrays in the
//! weight store (first fit, each on a store beat), writes its layer-table entry, and keeps the
//! optimizer's hyperparameters and learning-rate schedule to compute every step's constants
//! (`golden::optim::step_consts` of `schedule.lr_at(t)`). Every array starts at zero.
//!
//! A layer that exists already, a length of 0, a layer number past the table, a store too full
//! for its arrays, or hyperparameters that do not decode are refused and change nothing.

use crate::ctrl::{get_u16, get_u32, Command, Status, Writer};
use crate::golden::hyper_wire::{decode_hyper, encode_hyper, HYPER_LEN};
use crate::golden::optim::Hyper;
use crate::golden::schedule::{Schedule, SCHEDULE_LEN};

/// Creates a layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MxCreate {
    /// Layer number (below `MxInfoData::max_layers`).
    pub layer: u16,
    /// Parameters.
    pub len: u32,
    /// Wafers whose gradients are summed.
    pub workers: u32,
    /// Samples per wafer and step (the gradient scale is 1/(workers·batch)).
    pub batch: u32,
    /// The optimizer and its hyperparameters.
    pub hyper: Hyper,
    /// The learning rate of every step.
    pub schedule: Schedule,
    /// The last step the layer has run: 0 for a new layer; t to continue a run from step t
    /// (its arrays then written with the state of step t), so the next step is t + 1 and the
    /// bias correction and the learning-rate schedule go on exactly.
    pub start: u32,
}

/// Where the layer went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MxLayerInfo {
    /// Parameters per chunk.
    pub chunk: u32,
    /// Byte addresses of w, m, v and vmax in the store (0 for an array the optimizer does
    /// not keep).
    pub bases: [u32; 4],
}

const LEN: usize = 18 + HYPER_LEN + SCHEDULE_LEN;

impl<'a> Command<'a> for MxCreate {
    const OPCODE: u8 = super::opcode::MX_CREATE;
    type Response = MxLayerInfo;

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut h = [0u8; HYPER_LEN];
        encode_hyper(&self.hyper, &mut h);
        let mut s = [0u8; SCHEDULE_LEN];
        self.schedule.encode(&mut s);
        let mut w = Writer::new(out);
        w.u16(self.layer)?;
        w.u32(self.len)?;
        w.u32(self.workers)?;
        w.u32(self.batch)?;
        w.bytes(&h)?;
        w.bytes(&s)?;
        w.u32(self.start)?;
        Ok(w.len())
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if p.len() != LEN {
            return Err(Status::BadLength);
        }
        let mut h = [0u8; HYPER_LEN];
        h.copy_from_slice(&p[14..14 + HYPER_LEN]);
        let mut s = [0u8; SCHEDULE_LEN];
        s.copy_from_slice(&p[14 + HYPER_LEN..14 + HYPER_LEN + SCHEDULE_LEN]);
        Ok(Self {
            layer: get_u16(p, 0)?,
            len: get_u32(p, 2)?,
            workers: get_u32(p, 6)?,
            batch: get_u32(p, 10)?,
            hyper: decode_hyper(&h).map_err(|_| Status::BadArgument)?,
            schedule: Schedule::decode(&s).map_err(|_| Status::BadArgument)?,
            start: get_u32(p, 14 + HYPER_LEN + SCHEDULE_LEN)?,
        })
    }
    fn encode_response(r: &MxLayerInfo, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u32(r.chunk)?;
        for b in r.bases {
            w.u32(b)?;
        }
        Ok(w.len())
    }
    fn decode_response(d: &'a [u8]) -> Result<MxLayerInfo, Status> {
        if d.len() != 20 {
            return Err(Status::BadLength);
        }
        let mut bases = [0u32; 4];
        for (i, b) in bases.iter_mut().enumerate() {
            *b = get_u32(d, 4 + 4 * i)?;
        }
        Ok(MxLayerInfo { chunk: get_u32(d, 0)?, bases })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::golden::optim::Kind;

    #[test]
    fn round_trip_and_refusals() {
        let c = MxCreate {
            layer: 2,
            len: 385,
            workers: 2,
            batch: 8,
            hyper: Hyper { kind: Kind::AdamW, weight_decay: 0.01, ..Hyper::ADAM },
            schedule: Schedule::constant(1e-3),
            start: 70_000,
        };
        let mut b = [0u8; 128];
        let n = c.encode(&mut b).unwrap();
        assert_eq!(n, LEN);
        assert_eq!(MxCreate::decode(&b[..n]), Ok(c));
        assert_eq!(MxCreate::decode(&b[..n - 1]), Err(Status::BadLength));
        b[14] = 0xee; // an unknown optimizer code
        assert_eq!(MxCreate::decode(&b[..n]), Err(Status::BadArgument));
        let r = MxLayerInfo { chunk: 256, bases: [0, 0x800, 0x1000, 0] };
        let n = MxCreate::encode_response(&r, &mut b).unwrap();
        assert_eq!(MxCreate::decode_response(&b[..n]), Ok(r));
    }
}
