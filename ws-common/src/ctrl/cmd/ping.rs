//! `Ping`: liveness check. The device echoes the nonce.

use crate::ctrl::{get_u32, Command, Status, Writer};

/// Asks the device to echo `nonce`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ping {
    /// Echoed back unchanged.
    pub nonce: u32,
}

impl Command<'_> for Ping {
    const OPCODE: u8 = super::opcode::PING;
    type Response = u32;

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u32(self.nonce)?;
        Ok(w.len())
    }
    fn decode(p: &[u8]) -> Result<Self, Status> {
        if p.len() != 4 {
            return Err(Status::BadLength);
        }
        Ok(Self { nonce: get_u32(p, 0)? })
    }
    fn encode_response(resp: &u32, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u32(*resp)?;
        Ok(w.len())
    }
    fn decode_response(d: &[u8]) -> Result<u32, Status> {
        get_u32(d, 0)
    }
}
