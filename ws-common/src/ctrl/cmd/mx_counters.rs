//! `MxCounters`: MemoryX's counters in one answer (link v2 only): the streamer's twelve
//! (docs/memoryx-store.md "Counters", in that order), its error count and last error, and the
//! data mover's.

use crate::ctrl::{get_u32, Command, Status, Writer};

/// Counters the answer holds.
pub const MX_COUNTERS: usize = 22;

/// Names of the counters, in answer order.
pub const MX_COUNTER_NAMES: [&str; MX_COUNTERS] = [
    "chunks_updated",
    "params_updated",
    "chunks_streamed",
    "params_streamed",
    "stall_mem",
    "stall_grad",
    "stall_out",
    "dropped_chunks",
    "dropped_flits",
    "framing_errors",
    "bus_errors",
    "lane_beats",
    "err_count",
    "last_err",
    "dma_ops",
    "dma_refused",
    "dma_status",
    "wout_flits",
    "wout_dropped",
    "grad_flits",
    "host_refusals",
    "steps",
];

/// Asks for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MxCounters;

/// The counters, [`MX_COUNTER_NAMES`] order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MxCounterValues(pub [u32; MX_COUNTERS]);

impl<'a> Command<'a> for MxCounters {
    const OPCODE: u8 = super::opcode::MX_COUNTERS;
    type Response = MxCounterValues;

    fn encode(&self, _out: &mut [u8]) -> Result<usize, Status> {
        Ok(0)
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if !p.is_empty() {
            return Err(Status::BadLength);
        }
        Ok(Self)
    }
    fn encode_response(r: &MxCounterValues, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        for v in r.0 {
            w.u32(v)?;
        }
        Ok(w.len())
    }
    fn decode_response(d: &'a [u8]) -> Result<MxCounterValues, Status> {
        if d.len() != 4 * MX_COUNTERS {
            return Err(Status::BadLength);
        }
        let mut v = [0u32; MX_COUNTERS];
        for (i, x) in v.iter_mut().enumerate() {
            *x = get_u32(d, 4 * i)?;
        }
        Ok(MxCounterValues(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut v = [0u32; MX_COUNTERS];
        for (i, x) in v.iter_mut().enumerate() {
            *x = i as u32 * 77;
        }
        let mut b = [0u8; 4 * MX_COUNTERS];
        let n = MxCounters::encode_response(&MxCounterValues(v), &mut b).unwrap();
        assert_eq!(MxCounters::decode_response(&b[..n]), Ok(MxCounterValues(v)));
        assert_eq!(MxCounters::decode_response(&b[..n - 4]), Err(Status::BadLength));
    }
}
