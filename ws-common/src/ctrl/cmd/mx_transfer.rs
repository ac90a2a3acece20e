//! `MxWrite` and `MxRead`: move one array of a MemoryX layer between the host and the weight
//! store over bulk channel 2 (link v2, bulk mode MemoryX). The words themselves never pass
//! through a control frame or the CPU: for a write the host streams `count × 4` bytes on
//! channel 2 and sends the request; the firmware has the data mover copy them from the
//! channel's receive window into the store as they arrive, and answers when all are in. For
//! a read the data mover copies the store into channel 2's transmit window and the engine
//! sends them; the answer comes once every byte is queued.
//!
//! The firmware checks the layer, that its optimizer keeps the array, and that
//! `offset + count` lies inside the layer; the store address is its own.

use crate::ctrl::{get_u16, get_u32, Command, Status, Writer};

/// One array of a layer's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum MxArray {
    /// The weights.
    W = 0,
    /// SGD's momentum buffer, Adam's first moment.
    M = 1,
    /// Adam's second moment.
    V = 2,
    /// amsgrad's running maximum of v.
    Vmax = 3,
}

impl MxArray {
    /// The array with wire code `v`.
    pub fn from_u8(v: u8) -> Option<MxArray> {
        match v {
            0 => Some(MxArray::W),
            1 => Some(MxArray::M),
            2 => Some(MxArray::V),
            3 => Some(MxArray::Vmax),
            _ => None,
        }
    }
}

/// Words `offset .. offset + count` of one array of one layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MxRange {
    /// Layer.
    pub layer: u16,
    /// Array.
    pub array: MxArray,
    /// First parameter.
    pub offset: u32,
    /// Parameters, at least 1.
    pub count: u32,
}

const LEN: usize = 11;

impl MxRange {
    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u16(self.layer)?;
        w.bytes(&[self.array as u8])?;
        w.u32(self.offset)?;
        w.u32(self.count)?;
        Ok(w.len())
    }
    fn decode(p: &[u8]) -> Result<Self, Status> {
        if p.len() != LEN {
            return Err(Status::BadLength);
        }
        let r = Self {
            layer: get_u16(p, 0)?,
            array: MxArray::from_u8(p[2]).ok_or(Status::BadArgument)?,
            offset: get_u32(p, 3)?,
            count: get_u32(p, 7)?,
        };
        if r.count == 0 {
            return Err(Status::BadLength);
        }
        Ok(r)
    }
}

/// Host → store: the words follow on channel 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MxWrite(pub MxRange);

/// Store → host: the words follow on channel 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MxRead(pub MxRange);

macro_rules! transfer_command {
    ($t:ident, $op:ident) => {
        impl<'a> Command<'a> for $t {
            const OPCODE: u8 = super::opcode::$op;
            /// Words moved.
            type Response = u32;

            fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
                self.0.encode(out)
            }
            fn decode(p: &'a [u8]) -> Result<Self, Status> {
                MxRange::decode(p).map($t)
            }
            fn encode_response(words: &u32, out: &mut [u8]) -> Result<usize, Status> {
                let mut w = Writer::new(out);
                w.u32(*words)?;
                Ok(w.len())
            }
            fn decode_response(d: &'a [u8]) -> Result<u32, Status> {
                if d.len() != 4 {
                    return Err(Status::BadLength);
                }
                get_u32(d, 0)
            }
        }
    };
}

transfer_command!(MxWrite, MX_WRITE);
transfer_command!(MxRead, MX_READ);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let r = MxRange { layer: 3, array: MxArray::V, offset: 17, count: 1000 };
        let mut b = [0u8; 16];
        let n = MxWrite(r).encode(&mut b).unwrap();
        assert_eq!(MxWrite::decode(&b[..n]), Ok(MxWrite(r)));
        assert_eq!(MxRead::decode(&b[..n]), Ok(MxRead(r)));
        b[2] = 4;
        assert_eq!(MxRead::decode(&b[..n]), Err(Status::BadArgument));
        let z = MxRange { count: 0, ..r };
        let n = MxWrite(z).encode(&mut b).unwrap();
        assert_eq!(MxWrite::decode(&b[..n]), Err(Status::BadLength));
        assert_eq!(MxWrite::decode(&b[..n - 1]), Err(Status::BadLength));
        assert_eq!(MxRead::decode_response(&[1, 0, 0, 0]), Ok(1));
    }
}
