//! [`MeshTrainRun`]: consecutive training steps t, t + 1, … t + S − 1 in one request, with
//! MemoryX in the loop on W wafers (docs/mesh-array.md "Runs of steps"). Each step is exactly a
//! [`MeshTrain`](super::MeshTrain) of the same size: the host streams every step's samples
//! on channel 4 one step after the other, in [`MeshTrain`](super::MeshTrain)'s layout, and
//! the link's credit holds it back while the board's receive ring is full, so the next
//! steps' samples are already on the board when a step ends and the host is not on the
//! critical path between steps. The answer carries every step's [`MeshStepDone`] and the
//! board cycles the run took.

use crate::ctrl::{get_u16, get_u32, Command, Status, Writer};

use super::{MeshStep, MeshStepDone};

/// Most steps one request runs: their answers fill one control payload.
pub const MAX_RUN_STEPS: usize = 32;
/// Bytes of one step's answer inside a [`MeshRunDone`].
const STEP_BYTES: usize = 22;

/// Runs `steps` training steps from `t` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeshTrainRun {
    /// The first step's optimizer step (every layer's last step + 1).
    pub t: u32,
    /// Steps to run (1 ..= [`MAX_RUN_STEPS`]).
    pub steps: u16,
    /// Samples of each step (1 ..= the plan's capacity × wafers).
    pub samples: u16,
    /// Wafers (1 ..= the plan's wafers), as for [`MeshTrain`](super::MeshTrain).
    pub wafers: u8,
    /// The debug switch of the pipeline (docs/mesh-array.md "Forwarding"): each step's first
    /// layer is read back from the store after the step before has updated it, instead of
    /// forwarded from MemoryX's update output. The numbers are the same; only the time
    /// differs. Flags byte bit 0 on the wire (the other bits must be 0).
    pub read_back: bool,
}

/// Flags byte: [`MeshTrainRun::read_back`].
const FLAG_READ_BACK: u8 = 1;

/// What a run did: each step's answer, in step order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeshRunDone {
    /// Board cycles (the timer's `mtime`) from the first step's start to the last step's end.
    pub cycles: u32,
    done: [MeshStepDone; MAX_RUN_STEPS],
    len: u16,
}

impl Default for MeshRunDone {
    fn default() -> Self {
        Self { cycles: 0, done: [MeshStepDone::default(); MAX_RUN_STEPS], len: 0 }
    }
}

impl MeshRunDone {
    /// Adds a step's answer; `false` when the run is full.
    pub fn push(&mut self, d: MeshStepDone) -> bool {
        match self.done.get_mut(usize::from(self.len)) {
            Some(slot) => {
                *slot = d;
                self.len += 1;
                true
            }
            None => false,
        }
    }

    /// The steps' answers.
    pub fn steps(&self) -> &[MeshStepDone] {
        &self.done[..usize::from(self.len)]
    }
}

impl<'a> Command<'a> for MeshTrainRun {
    const OPCODE: u8 = super::opcode::MESH_TRAIN_RUN;
    type Response = MeshRunDone;

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u32(self.t)?;
        w.u16(self.steps)?;
        w.u16(self.samples)?;
        w.u8(self.wafers)?;
        w.u8(if self.read_back { FLAG_READ_BACK } else { 0 })?;
        Ok(w.len())
    }

    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if p.len() != 10 {
            return Err(Status::BadLength);
        }
        let q = Self {
            t: get_u32(p, 0)?,
            steps: get_u16(p, 4)?,
            samples: get_u16(p, 6)?,
            wafers: p[8],
            read_back: p[9] & FLAG_READ_BACK != 0,
        };
        if q.steps == 0 || usize::from(q.steps) > MAX_RUN_STEPS || p[9] & !FLAG_READ_BACK != 0 {
            return Err(Status::BadArgument);
        }
        Ok(q)
    }

    fn encode_response(r: &MeshRunDone, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u32(r.cycles)?;
        w.u16(r.len)?;
        let mut n = w.len();
        for d in r.steps() {
            n += MeshStep::encode_response(d, out.get_mut(n..).ok_or(Status::BadLength)?)?;
        }
        Ok(n)
    }

    fn decode_response(d: &'a [u8]) -> Result<MeshRunDone, Status> {
        let len = get_u16(d, 4)?;
        if usize::from(len) > MAX_RUN_STEPS || d.len() != 6 + usize::from(len) * STEP_BYTES {
            return Err(Status::BadLength);
        }
        let mut r = MeshRunDone { cycles: get_u32(d, 0)?, ..Default::default() };
        for c in d[6..].chunks_exact(STEP_BYTES) {
            r.push(MeshStep::decode_response(c)?);
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut b = [0u8; crate::ctrl::MAX_PAYLOAD];
        let q = MeshTrainRun { t: 70_000, steps: 12, samples: 32, wafers: 2, read_back: false };
        let n = q.encode(&mut b).unwrap();
        assert_eq!(MeshTrainRun::decode(&b[..n]), Ok(q));
        assert_eq!(MeshTrainRun::decode(&b[..n - 1]), Err(Status::BadLength));
        let back = MeshTrainRun { read_back: true, ..q };
        let n = back.encode(&mut b).unwrap();
        assert_eq!(MeshTrainRun::decode(&b[..n]), Ok(back));
        b[n - 1] = 0x82;
        assert_eq!(MeshTrainRun::decode(&b[..n]), Err(Status::BadArgument), "unknown flags are refused");
        for steps in [0, MAX_RUN_STEPS as u16 + 1] {
            let n = MeshTrainRun { steps, ..q }.encode(&mut b).unwrap();
            assert_eq!(MeshTrainRun::decode(&b[..n]), Err(Status::BadArgument));
        }

        let mut r = MeshRunDone { cycles: 123_456, ..Default::default() };
        for i in 0..MAX_RUN_STEPS as u32 {
            let d =
                MeshStepDone { step: i as u16, loss: i, correct: 2 * i, cycles: 3, fmas: 4, grad_words: 5 };
            assert!(r.push(d));
        }
        assert!(!r.push(MeshStepDone::default()), "a full run takes no more");
        // The largest answer fits a control payload beside its status byte.
        let n = MeshTrainRun::encode_response(&r, &mut b[..crate::ctrl::MAX_PAYLOAD - 1]).unwrap();
        assert_eq!(n, 6 + MAX_RUN_STEPS * STEP_BYTES);
        assert_eq!(MeshTrainRun::decode_response(&b[..n]), Ok(r));
        assert_eq!(MeshTrainRun::decode_response(&b[..n - 1]), Err(Status::BadLength));
        let empty = MeshRunDone::default();
        let n = MeshTrainRun::encode_response(&empty, &mut b).unwrap();
        assert_eq!(MeshTrainRun::decode_response(&b[..n]).unwrap().steps(), &[]);
    }
}
