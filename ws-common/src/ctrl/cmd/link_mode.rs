//! `LinkMode`: who consumes the bulk channels 2 and 3 (link protocol v2 only). In `Echo`, the
//! boot default, the link engine loops every bulk byte back from the RAM it landed in (the
//! link's self-test, `wsctl link echo`). In `MemoryX`, channel 2 carries weights and state
//! to and from the weight store and channel 3 gradients into it (docs/memoryx-soc.md).
//! Channel 4 stays looped back to 6 in both. Switch while the channels are idle (nothing
//! sent that the board has not consumed); the firmware refuses otherwise.

use crate::ctrl::{Command, Status, Writer};

/// The consumer of bulk channels 2 and 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum BulkMode {
    /// Looped back by the link engine.
    Echo = 0,
    /// MemoryX: 2 = weights and state, 3 = gradients.
    MemoryX = 1,
}

impl BulkMode {
    /// The mode with wire code `v`.
    pub fn from_u8(v: u8) -> Option<BulkMode> {
        match v {
            0 => Some(BulkMode::Echo),
            1 => Some(BulkMode::MemoryX),
            _ => None,
        }
    }
}

/// Sets the bulk mode; the response is the mode now in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkMode {
    /// The mode wanted.
    pub mode: BulkMode,
}

impl<'a> Command<'a> for LinkMode {
    const OPCODE: u8 = super::opcode::LINK_MODE;
    type Response = BulkMode;

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.bytes(&[self.mode as u8])?;
        Ok(w.len())
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        let [m] = p else { return Err(Status::BadLength) };
        Ok(Self { mode: BulkMode::from_u8(*m).ok_or(Status::BadArgument)? })
    }
    fn encode_response(resp: &BulkMode, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.bytes(&[*resp as u8])?;
        Ok(w.len())
    }
    fn decode_response(d: &'a [u8]) -> Result<BulkMode, Status> {
        let [m] = d else { return Err(Status::BadLength) };
        BulkMode::from_u8(*m).ok_or(Status::BadArgument)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let mut b = [0u8; 2];
        let n = LinkMode { mode: BulkMode::MemoryX }.encode(&mut b).unwrap();
        assert_eq!(LinkMode::decode(&b[..n]), Ok(LinkMode { mode: BulkMode::MemoryX }));
        assert_eq!(LinkMode::decode(&[2]), Err(Status::BadArgument));
        assert_eq!(LinkMode::decode(&[]), Err(Status::BadLength));
        assert_eq!(LinkMode::decode_response(&[0]), Ok(BulkMode::Echo));
    }
}
