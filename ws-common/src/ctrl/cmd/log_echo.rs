//! `LogEcho`: the firmware logs one defmt line with the given arguments,
//! `log-echo value={=u32} tag={=i16}`, so the host can check the log path end to end.

use crate::ctrl::{get_u16, get_u32, Command, Status, Writer};

/// Asks the firmware to log a known line carrying these values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEcho {
    /// Logged as `value=`.
    pub value: u32,
    /// Logged as `tag=`.
    pub tag: i16,
}

impl Command<'_> for LogEcho {
    const OPCODE: u8 = super::opcode::LOG_ECHO;
    type Response = ();

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u32(self.value)?;
        w.u16(self.tag as u16)?;
        Ok(w.len())
    }
    fn decode(p: &[u8]) -> Result<Self, Status> {
        if p.len() != 6 {
            return Err(Status::BadLength);
        }
        Ok(Self { value: get_u32(p, 0)?, tag: get_u16(p, 4)? as i16 })
    }
    fn encode_response(_: &(), _out: &mut [u8]) -> Result<usize, Status> {
        Ok(0)
    }
    fn decode_response(_: &[u8]) -> Result<(), Status> {
        Ok(())
    }
}
