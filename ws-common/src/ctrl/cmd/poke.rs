//! `Poke`: write bytes into the device's address space, inside the firmware's poke window.
//! Stores are aligned 32-bit words, so address and length must be multiples of 4.

use crate::ctrl::{get_u32, Command, Status, Writer, MAX_PAYLOAD};

/// Largest data length of one poke: a payload minus the address, rounded to words.
pub const MAX_POKE: usize = (MAX_PAYLOAD - 4) / 4 * 4;

/// Writes `data` at `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Poke<'a> {
    /// Start address, 4-byte aligned.
    pub addr: u32,
    /// Bytes to store, a multiple of 4 long.
    pub data: &'a [u8],
}

impl<'a> Command<'a> for Poke<'a> {
    const OPCODE: u8 = super::opcode::POKE;
    type Response = ();

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        if self.data.len() > MAX_POKE {
            return Err(Status::BadLength);
        }
        let mut w = Writer::new(out);
        w.u32(self.addr)?;
        w.bytes(self.data)?;
        Ok(w.len())
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if p.len() < 4 || p.len() - 4 > MAX_POKE {
            return Err(Status::BadLength);
        }
        Ok(Self { addr: get_u32(p, 0)?, data: &p[4..] })
    }
    fn encode_response(_: &(), _out: &mut [u8]) -> Result<usize, Status> {
        Ok(0)
    }
    fn decode_response(_: &[u8]) -> Result<(), Status> {
        Ok(())
    }
}
