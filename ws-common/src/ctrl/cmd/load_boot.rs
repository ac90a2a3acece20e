//! `LoadBoot`: the loader checks the CRC of the whole image in RAM against the accepted
//! header. On a match it answers `Ok`, keeps the header at `boot::HEADER_ADDR` (so a later
//! reset boots the same image), and jumps to the entry point; otherwise it answers
//! `BadImage` (reason `BadImageCrc`) and stays in the loader.

use crate::ctrl::{Command, Status};

/// Checks the loaded image and starts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadBoot;

impl Command<'_> for LoadBoot {
    const OPCODE: u8 = super::opcode::LOAD_BOOT;
    type Response = ();

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
    fn encode_response(_: &(), _out: &mut [u8]) -> Result<usize, Status> {
        Ok(0)
    }
    fn decode_response(_: &[u8]) -> Result<(), Status> {
        Ok(())
    }
}
