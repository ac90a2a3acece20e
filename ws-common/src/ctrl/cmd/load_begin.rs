//! `LoadBegin`: hands the boot-ROM loader an image header (`ws_common::boot`). The loader
//! checks magic, version, header CRC, alignment, window and entry before it accepts a single
//! data byte; a refusal is `BadImage`, with the reason in `LoaderInfo::last_error`.

use crate::boot::HEADER_LEN;
use crate::ctrl::{Command, Status, Writer};

/// The encoded image header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadBegin<'a> {
    /// Exactly [`HEADER_LEN`] bytes.
    pub header: &'a [u8],
}

impl<'a> Command<'a> for LoadBegin<'a> {
    const OPCODE: u8 = super::opcode::LOAD_BEGIN;
    type Response = ();

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        if self.header.len() != HEADER_LEN {
            return Err(Status::BadLength);
        }
        let mut w = Writer::new(out);
        w.bytes(self.header)?;
        Ok(w.len())
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if p.len() != HEADER_LEN {
            return Err(Status::BadLength);
        }
        Ok(Self { header: p })
    }
    fn encode_response(_: &(), _out: &mut [u8]) -> Result<usize, Status> {
        Ok(0)
    }
    fn decode_response(_: &[u8]) -> Result<(), Status> {
        Ok(())
    }
}
