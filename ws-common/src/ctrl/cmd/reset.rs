//! `Reset`: the firmware acknowledges, drains the acknowledgement, then resets the core and
//! peripherals through the system-info block's RESET key.

use crate::ctrl::{Command, Status};

/// Requests a soft reset of the board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reset;

impl Command<'_> for Reset {
    const OPCODE: u8 = super::opcode::RESET;
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
