//! `TraceCtl`: starts, stops or asks about the hardware pipeline trace (link v2; docs/trace.md).
//!
//! Starting opens link channel 6's window on the trace ring at the channel's current stream
//! position and enables the trace unit with the given probes (and MemoryX's streamer records),
//! so one record per chunk per hop reaches the host while jobs run. Stopping makes every
//! record written so far sendable and disables the unit. Every answer carries the unit's
//! counts, so a host that has read `head` bytes of channel 6 knows it has the whole trace and
//! how many records were lost on the board.

use crate::ctrl::{get_u32, Command, Status, Writer};

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TraceOp {
    /// Stop tracing; the answer's `head` is the end of the trace on channel 6.
    Stop = 0,
    /// Start tracing with `probes`.
    Start = 1,
    /// Only answer the counts.
    Status = 2,
}

/// The request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceCtl {
    /// What to do.
    pub op: TraceOp,
    /// Start: bit i enables stream probe i, bit 31 MemoryX's streamer records
    /// ([`TRACE_ALL`] for everything). Ignored otherwise.
    pub probes: u32,
}

/// Every probe and the streamer's records.
pub const TRACE_ALL: u32 = u32::MAX;

/// The trace unit's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TraceState {
    /// The unit is writing records.
    pub active: bool,
    /// Channel 6's stream position where this trace began.
    pub start: u32,
    /// Channel 6's stream position after the last whole record written.
    pub head: u32,
    /// Records written.
    pub records: u32,
    /// Records lost to full buffers (a full ring: the host is not reading channel 6).
    pub lost: u32,
    /// The most records its FIFO held.
    pub high_water: u32,
    /// The unit's cycle counter, low 32 bits, when it answered.
    pub cycle: u32,
    /// Stream probes the unit has.
    pub probes: u32,
}

impl<'a> Command<'a> for TraceCtl {
    const OPCODE: u8 = super::opcode::TRACE_CTL;
    type Response = TraceState;

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u8(self.op as u8)?;
        w.u32(self.probes)?;
        Ok(w.len())
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if p.len() != 5 {
            return Err(Status::BadLength);
        }
        let op = match p[0] {
            0 => TraceOp::Stop,
            1 => TraceOp::Start,
            2 => TraceOp::Status,
            _ => return Err(Status::BadArgument),
        };
        Ok(Self { op, probes: get_u32(p, 1)? })
    }
    fn encode_response(r: &TraceState, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        for v in [u32::from(r.active), r.start, r.head, r.records, r.lost, r.high_water, r.cycle, r.probes] {
            w.u32(v)?;
        }
        Ok(w.len())
    }
    fn decode_response(d: &'a [u8]) -> Result<TraceState, Status> {
        if d.len() != 32 {
            return Err(Status::BadLength);
        }
        let g = |i: usize| get_u32(d, 4 * i);
        Ok(TraceState {
            active: g(0)? != 0,
            start: g(1)?,
            head: g(2)?,
            records: g(3)?,
            lost: g(4)?,
            high_water: g(5)?,
            cycle: g(6)?,
            probes: g(7)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_answer_round_trip() {
        let mut b = [0u8; 64];
        let q = TraceCtl { op: TraceOp::Start, probes: 0x8000_00ff };
        let n = q.encode(&mut b).unwrap();
        assert_eq!(TraceCtl::decode(&b[..n]), Ok(q));
        assert_eq!(TraceCtl::decode(&[3, 0, 0, 0, 0]), Err(Status::BadArgument));
        assert_eq!(TraceCtl::decode(&[1, 0, 0]), Err(Status::BadLength));
        let s = TraceState {
            active: true,
            start: 64,
            head: 4160,
            records: 128,
            lost: 2,
            high_water: 9,
            cycle: 77,
            probes: 13,
        };
        let n = TraceCtl::encode_response(&s, &mut b).unwrap();
        assert_eq!(TraceCtl::decode_response(&b[..n]), Ok(s));
        assert_eq!(TraceCtl::decode_response(&b[..n - 1]), Err(Status::BadLength));
    }
}
