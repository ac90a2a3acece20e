//! `LoaderInfo`: asks the boot-ROM loader for its state (`ws_common::boot`). The firmware does
//! not know this opcode and answers `UnknownOpcode`, which is how a host tells the two apart.

use crate::ctrl::{get_u16, get_u32, Command, Status, Writer};

/// Asks for [`LoaderState`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoaderInfo;

/// Where the loader is in receiving an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoaderState {
    /// Loader protocol version.
    pub version: u8,
    /// 0: waiting for a header (`LoadBegin`); 1: receiving data for an accepted header.
    pub phase: u8,
    /// The last refusal, as `boot::ImageError::code` (0: none).
    pub last_error: u8,
    /// The RAM an image may occupy: base.
    pub window_base: u32,
    /// The RAM an image may occupy: length in bytes.
    pub window_len: u32,
    /// Largest `LoadData` chunk in bytes.
    pub max_chunk: u16,
    /// Data bytes written since the accepted header (rewrites count again).
    pub bytes_written: u32,
}

impl Command<'_> for LoaderInfo {
    const OPCODE: u8 = super::opcode::LOADER_INFO;
    type Response = LoaderState;

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
    fn encode_response(r: &LoaderState, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u8(r.version)?;
        w.u8(r.phase)?;
        w.u8(r.last_error)?;
        w.u8(0)?;
        w.u32(r.window_base)?;
        w.u32(r.window_len)?;
        w.u16(r.max_chunk)?;
        w.u32(r.bytes_written)?;
        Ok(w.len())
    }
    fn decode_response(d: &[u8]) -> Result<LoaderState, Status> {
        if d.len() != 18 {
            return Err(Status::BadLength);
        }
        Ok(LoaderState {
            version: d[0],
            phase: d[1],
            last_error: d[2],
            window_base: get_u32(d, 4)?,
            window_len: get_u32(d, 8)?,
            max_chunk: get_u16(d, 12)?,
            bytes_written: get_u32(d, 14)?,
        })
    }
}
