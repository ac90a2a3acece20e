//! `Stats`: the firmware's counters and the core's cycle counter, so the host can measure
//! rates (timer interrupts per simulated cycle, frames handled) without trusting wall time.

use crate::ctrl::{get_u32, get_u64, Command, Status, Writer};

/// Asks for [`StatsInfo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats;

/// Firmware counters at the moment the request was handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatsInfo {
    /// The core's `mcycle` counter.
    pub mcycle: u64,
    /// The machine timer's `mtime`.
    pub mtime: u64,
    /// Timer interrupts taken since boot.
    pub timer_ticks: u32,
    /// Cycles between timer interrupts, as programmed.
    pub tick_period: u32,
    /// Control frames accepted.
    pub frames_ok: u32,
    /// Frames dropped by the decoder (CRC, length, version).
    pub frames_bad: u32,
    /// Requests refused with a non-OK status.
    pub refused: u32,
}

impl Command<'_> for Stats {
    const OPCODE: u8 = super::opcode::STATS;
    type Response = StatsInfo;

    fn encode(&self, _out: &mut [u8]) -> Result<usize, Status> {
        Ok(0)
    }
    fn decode(p: &[u8]) -> Result<Self, Status> {
        if p.is_empty() {
            Ok(Self)
        } else {
            Err(Status::BadLength)
        }
    }
    fn encode_response(s: &StatsInfo, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u64(s.mcycle)?;
        w.u64(s.mtime)?;
        w.u32(s.timer_ticks)?;
        w.u32(s.tick_period)?;
        w.u32(s.frames_ok)?;
        w.u32(s.frames_bad)?;
        w.u32(s.refused)?;
        Ok(w.len())
    }
    fn decode_response(d: &[u8]) -> Result<StatsInfo, Status> {
        Ok(StatsInfo {
            mcycle: get_u64(d, 0)?,
            mtime: get_u64(d, 8)?,
            timer_ticks: get_u32(d, 16)?,
            tick_period: get_u32(d, 20)?,
            frames_ok: get_u32(d, 24)?,
            frames_bad: get_u32(d, 28)?,
            refused: get_u32(d, 32)?,
        })
    }
}
