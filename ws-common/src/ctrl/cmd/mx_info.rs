//! `MxInfo`: MemoryX's build parameters and what of its store is in use (link v2 only).

use crate::ctrl::{get_u16, get_u32, Command, Status, Writer};

/// Asks for [`MxInfoData`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MxInfo;

/// MemoryX as the firmware sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MxInfoData {
    /// Optimizer lanes.
    pub lanes: u8,
    /// 32-bit words per store beat (a layer's chunk is a multiple of it).
    pub beat_words: u8,
    /// Layer table entries.
    pub max_layers: u8,
    /// Bulk mode in force ([`super::BulkMode`] code).
    pub mode: u8,
    /// Bytes of the weight store.
    pub store_bytes: u32,
    /// Bytes not allocated to a layer.
    pub free_bytes: u32,
    /// Layers created (a bit per layer).
    pub layers: u16,
    /// Parameters per chunk the firmware gives a new layer.
    pub chunk: u16,
}

const LEN: usize = 16;

impl<'a> Command<'a> for MxInfo {
    const OPCODE: u8 = super::opcode::MX_INFO;
    type Response = MxInfoData;

    fn encode(&self, _out: &mut [u8]) -> Result<usize, Status> {
        Ok(0)
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if !p.is_empty() {
            return Err(Status::BadLength);
        }
        Ok(Self)
    }
    fn encode_response(r: &MxInfoData, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.bytes(&[r.lanes, r.beat_words, r.max_layers, r.mode])?;
        w.u32(r.store_bytes)?;
        w.u32(r.free_bytes)?;
        w.u16(r.layers)?;
        w.u16(r.chunk)?;
        Ok(w.len())
    }
    fn decode_response(d: &'a [u8]) -> Result<MxInfoData, Status> {
        if d.len() != LEN {
            return Err(Status::BadLength);
        }
        Ok(MxInfoData {
            lanes: d[0],
            beat_words: d[1],
            max_layers: d[2],
            mode: d[3],
            store_bytes: get_u32(d, 4)?,
            free_bytes: get_u32(d, 8)?,
            layers: get_u16(d, 12)?,
            chunk: get_u16(d, 14)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let r = MxInfoData {
            lanes: 1,
            beat_words: 8,
            max_layers: 16,
            mode: 1,
            store_bytes: 1 << 20,
            free_bytes: 12345,
            layers: 0b101,
            chunk: 256,
        };
        let mut b = [0u8; 32];
        let n = MxInfo::encode_response(&r, &mut b).unwrap();
        assert_eq!(MxInfo::decode_response(&b[..n]), Ok(r));
        assert_eq!(MxInfo::decode_response(&b[..n - 1]), Err(Status::BadLength));
        assert_eq!(MxInfo::decode(&[1]), Err(Status::BadLength));
    }
}
