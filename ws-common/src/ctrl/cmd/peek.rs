//! `Peek`: read bytes from the device's address space, inside the firmware's peek window.
//! Accesses are done as aligned 32-bit loads, so address and length must be multiples of 4.

use crate::ctrl::{get_u16, get_u32, Command, Status, Writer, MAX_PAYLOAD};

/// Largest `len` of one peek: a response payload minus its status byte, rounded to words.
pub const MAX_PEEK: usize = (MAX_PAYLOAD - 1) / 4 * 4;

/// Reads `len` bytes at `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peek {
    /// Start address, 4-byte aligned.
    pub addr: u32,
    /// Byte count, a multiple of 4, at most [`MAX_PEEK`].
    pub len: u16,
}

/// Bytes read by a peek.
pub type PeekData<'a> = &'a [u8];

impl<'a> Command<'a> for Peek {
    const OPCODE: u8 = super::opcode::PEEK;
    type Response = PeekData<'a>;

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u32(self.addr)?;
        w.u16(self.len)?;
        Ok(w.len())
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if p.len() != 6 {
            return Err(Status::BadLength);
        }
        let peek = Self { addr: get_u32(p, 0)?, len: get_u16(p, 4)? };
        if peek.len as usize > MAX_PEEK {
            return Err(Status::BadLength);
        }
        Ok(peek)
    }
    fn encode_response(resp: &PeekData<'a>, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.bytes(resp)?;
        Ok(w.len())
    }
    fn decode_response(d: &'a [u8]) -> Result<PeekData<'a>, Status> {
        Ok(d)
    }
}
