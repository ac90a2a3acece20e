//! `LoadData`: one chunk of the image, at a byte offset from its load address. Chunks may
//! come in any order and may be resent (a retry writes the same bytes again); each must lie
//! inside the accepted header's length and be word aligned.

use crate::ctrl::{get_u32, Command, Status, Writer, MAX_PAYLOAD};

/// Largest chunk: a payload minus the offset, rounded to words.
pub const MAX_LOAD_CHUNK: usize = (MAX_PAYLOAD - 4) / 4 * 4;

/// Writes `data` at `offset` into the image being loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadData<'a> {
    /// Byte offset from the image's load address, 4-byte aligned.
    pub offset: u32,
    /// Bytes, a multiple of 4 long.
    pub data: &'a [u8],
}

impl<'a> Command<'a> for LoadData<'a> {
    const OPCODE: u8 = super::opcode::LOAD_DATA;
    type Response = ();

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        if self.data.len() > MAX_LOAD_CHUNK {
            return Err(Status::BadLength);
        }
        let mut w = Writer::new(out);
        w.u32(self.offset)?;
        w.bytes(self.data)?;
        Ok(w.len())
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if p.len() < 4 || p.len() - 4 > MAX_LOAD_CHUNK {
            return Err(Status::BadLength);
        }
        Ok(Self { offset: get_u32(p, 0)?, data: &p[4..] })
    }
    fn encode_response(_: &(), _out: &mut [u8]) -> Result<usize, Status> {
        Ok(0)
    }
    fn decode_response(_: &[u8]) -> Result<(), Status> {
        Ok(())
    }
}
