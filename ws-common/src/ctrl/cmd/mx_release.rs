//! `MxRelease` and `MxLayers`: MemoryX layers end with the job that made them (link v2).
//!
//! A job creates the layers it trains and releases them when it ends, succeeds or fails, so
//! the layer table and the weight store never fill up over jobs run one after another
//! (docs/firmware.md "Every job starts from a known state"). `MxRelease` disables each named
//! layer in the streamer (it completes once the layer has no chunk in flight) and frees its
//! store; a layer that does not exist is skipped. `MxLayers` says what is in use, and by
//! which layer, for `wsctl mx status` and for the message of a full store.

use crate::ctrl::{get_u16, get_u32, Command, Status, Writer};

/// Releases every layer whose bit is set; answers with `MxInfoData` after the release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MxRelease {
    /// Bit `i` releases layer `i`; `u16::MAX` releases them all.
    pub layers: u16,
}

impl<'a> Command<'a> for MxRelease {
    const OPCODE: u8 = super::opcode::MX_RELEASE;
    type Response = super::MxInfoData;

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u16(self.layers)?;
        Ok(w.len())
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if p.len() != 2 {
            return Err(Status::BadLength);
        }
        Ok(Self { layers: get_u16(p, 0)? })
    }
    fn encode_response(r: &super::MxInfoData, out: &mut [u8]) -> Result<usize, Status> {
        super::MxInfo::encode_response(r, out)
    }
    fn decode_response(d: &'a [u8]) -> Result<super::MxInfoData, Status> {
        super::MxInfo::decode_response(d)
    }
}

/// Asks for every created layer's [`MxLayerState`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MxLayers;

/// One created layer, as the firmware keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MxLayerState {
    /// Layer number.
    pub layer: u16,
    /// The streamer's optimizer code (0 SGD, 1 momentum, 2 Adam, 3 AdamW, 4/5 AMSGrad).
    pub opt: u8,
    /// Arrays kept: bit 0 w, 1 m, 2 v, 3 vmax.
    pub arrays: u8,
    /// Parameters.
    pub len: u32,
    /// The last step run (0 before the first).
    pub at: u32,
    /// Store bytes its arrays take.
    pub bytes: u32,
}

/// Every created layer, in layer order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MxLayerList {
    /// Entries in use.
    pub count: u8,
    /// The layers; the first `count` are valid.
    pub layers: [MxLayerState; MX_MAX_LAYERS],
}

impl MxLayerList {
    /// The valid entries.
    pub fn as_slice(&self) -> &[MxLayerState] {
        &self.layers[..usize::from(self.count).min(MX_MAX_LAYERS)]
    }
}

/// Layers one [`MxLayerList`] can carry (the firmware's table size).
pub const MX_MAX_LAYERS: usize = 16;

const ENTRY: usize = 16;

impl<'a> Command<'a> for MxLayers {
    const OPCODE: u8 = super::opcode::MX_LAYERS;
    type Response = MxLayerList;

    fn encode(&self, _out: &mut [u8]) -> Result<usize, Status> {
        Ok(0)
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if !p.is_empty() {
            return Err(Status::BadLength);
        }
        Ok(Self)
    }
    fn encode_response(r: &MxLayerList, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.bytes(&[r.count])?;
        for l in r.as_slice() {
            w.u16(l.layer)?;
            w.bytes(&[l.opt, l.arrays])?;
            w.u32(l.len)?;
            w.u32(l.at)?;
            w.u32(l.bytes)?;
        }
        Ok(w.len())
    }
    fn decode_response(d: &'a [u8]) -> Result<MxLayerList, Status> {
        let (&count, rest) = d.split_first().ok_or(Status::BadLength)?;
        let n = usize::from(count);
        if n > MX_MAX_LAYERS || rest.len() != n * ENTRY {
            return Err(Status::BadLength);
        }
        let mut r = MxLayerList { count, ..Default::default() };
        for (i, l) in r.layers.iter_mut().take(n).enumerate() {
            let e = &rest[i * ENTRY..];
            *l = MxLayerState {
                layer: get_u16(e, 0)?,
                opt: e[2],
                arrays: e[3],
                len: get_u32(e, 4)?,
                at: get_u32(e, 8)?,
                bytes: get_u32(e, 12)?,
            };
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_round_trip() {
        let mut b = [0u8; 8];
        let n = MxRelease { layers: 0b1011 }.encode(&mut b).unwrap();
        assert_eq!(MxRelease::decode(&b[..n]), Ok(MxRelease { layers: 0b1011 }));
        assert_eq!(MxRelease::decode(&b[..1]), Err(Status::BadLength));
        assert_eq!(MxRelease::decode(&[0, 0, 0]), Err(Status::BadLength));
    }

    #[test]
    fn layer_list_round_trip() {
        let mut r = MxLayerList { count: 2, ..Default::default() };
        r.layers[0] = MxLayerState { layer: 0, opt: 2, arrays: 7, len: 408, at: 20, bytes: 3 * 1632 };
        r.layers[1] = MxLayerState { layer: 5, opt: 0, arrays: 1, len: 1, at: 0, bytes: 32 };
        let mut b = [0u8; 1 + MX_MAX_LAYERS * ENTRY];
        let n = MxLayers::encode_response(&r, &mut b).unwrap();
        assert_eq!(n, 1 + 2 * ENTRY);
        assert_eq!(MxLayers::decode_response(&b[..n]), Ok(r));
        assert_eq!(MxLayers::decode_response(&b[..n - 1]), Err(Status::BadLength));
        b[0] = 17;
        assert_eq!(MxLayers::decode_response(&b[..n]), Err(Status::BadLength), "more than the table");
        assert_eq!(MxLayers::decode(&[0]), Err(Status::BadLength));
    }
}
