//! The flit: what every block-to-block stream of the data plane carries (docs/architecture.md
//! "Links").
//!
//! A flit is a 32-bit payload, a `last` bit that closes a chunk, and a 64-bit header carried
//! beside the payload on the stream's `_user` sideband:
//!
//! ```text
//!  63          48 47          32 31          16 15           4 3      0
//! ┌──────────────┬──────────────┬──────────────┬──────────────┬────────┐
//! │    index     │    chunk     │     step     │    layer     │  kind  │
//! └──────────────┴──────────────┴──────────────┴──────────────┴────────┘
//! ```
//!
//! - `kind`: [`Kind`]; 5..=15 are reserved and rejected by [`Header::unpack`].
//! - `layer`: the layer the chunk belongs to (12 bits).
//! - `step`: the training step, modulo 2¹⁶.
//! - `chunk`: the chunk of the layer, modulo 2¹⁶.
//! - `index`: the flit's position inside its chunk, counted from 0. SwarmX aligns the
//!   gradient flits of its ports on the whole header and checks `last` too, so a lost, extra
//!   or reordered flit shows up as a mismatch instead of being summed into the wrong place.
//!
//! The payload is one fp32 value or, in the bf16 wire format, two bf16 values: element `2i`
//! in bits 15:0 and element `2i + 1` in bits 31:16 of flit `i` ([`pack_bf16`]).
//!
//! An [`Kind::Error`] flit (always `last`) reports an aborted chunk. Its header carries the
//! layer, step, chunk and index of the aborted chunk, and its payload an [`ErrorPayload`]: the
//! error code, and the path of downstream port ids from the node that forwarded it last back
//! to the node that detected the fault.
//!
//! The same layout is written for the RTL in `hdl/rtl/include/ws_flit.vh`; a test in this module reads
//! that file and checks that every constant agrees.

/// Width of the payload, in bits.
pub const PAYLOAD_WIDTH: u32 = 32;
/// Width of the header (`_user` sideband), in bits.
pub const USER_WIDTH: u32 = 64;

/// Lowest bit of `kind`.
pub const KIND_LSB: u32 = 0;
/// Width of `kind`.
pub const KIND_WIDTH: u32 = 4;
/// Lowest bit of `layer`.
pub const LAYER_LSB: u32 = 4;
/// Width of `layer`.
pub const LAYER_WIDTH: u32 = 12;
/// Lowest bit of `step`.
pub const STEP_LSB: u32 = 16;
/// Width of `step`.
pub const STEP_WIDTH: u32 = 16;
/// Lowest bit of `chunk`.
pub const CHUNK_LSB: u32 = 32;
/// Width of `chunk`.
pub const CHUNK_WIDTH: u32 = 16;
/// Lowest bit of `index`.
pub const INDEX_LSB: u32 = 48;
/// Width of `index`.
pub const INDEX_WIDTH: u32 = 16;

/// Lowest bit of the error code in an error flit's payload.
pub const ERR_CODE_LSB: u32 = 0;
/// Width of the error code.
pub const ERR_CODE_WIDTH: u32 = 4;
/// Lowest bit of the hop count.
pub const ERR_HOPS_LSB: u32 = 4;
/// Width of the hop count.
pub const ERR_HOPS_WIDTH: u32 = 4;
/// Lowest bit of the port path: 4-bit port ids, the last forwarder's port in the lowest nibble.
pub const ERR_PATH_LSB: u32 = 8;
/// Width of the port path (six 4-bit port ids).
pub const ERR_PATH_WIDTH: u32 = 24;
/// Port ids the path holds.
pub const ERR_PATH_PORTS: usize = (ERR_PATH_WIDTH / 4) as usize;

const fn mask(width: u32) -> u64 {
    (1u64 << width) - 1
}

/// What a flit carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// Weights, MemoryX → wafers (broadcast down the SwarmX tree).
    Weight = 0,
    /// Gradients, wafers → MemoryX (summed up the SwarmX tree).
    Gradient = 1,
    /// Training samples to the wafers.
    Data = 2,
    /// Control words.
    Control = 3,
    /// An aborted chunk; the payload is an [`ErrorPayload`].
    Error = 4,
}

impl Kind {
    /// The kind with code `v`, if it is defined.
    pub const fn from_code(v: u8) -> Option<Kind> {
        Some(match v {
            0 => Kind::Weight,
            1 => Kind::Gradient,
            2 => Kind::Data,
            3 => Kind::Control,
            4 => Kind::Error,
            _ => return None,
        })
    }
}

/// Why a header or payload does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlitError {
    /// The kind field holds a reserved code.
    ReservedKind(u8),
    /// The error code field holds a reserved code.
    ReservedErrorCode(u8),
    /// The hop count is 0 or larger than the path holds.
    BadHops(u8),
}

/// The flit header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// What the flit carries.
    pub kind: Kind,
    /// Layer (12 bits; higher bits are dropped by [`Header::pack`]).
    pub layer: u16,
    /// Training step, modulo 2¹⁶.
    pub step: u16,
    /// Chunk of the layer, modulo 2¹⁶.
    pub chunk: u16,
    /// Flit index inside the chunk.
    pub index: u16,
}

impl Header {
    /// A header with every field given.
    pub const fn new(kind: Kind, layer: u16, step: u16, chunk: u16, index: u16) -> Self {
        Header { kind, layer, step, chunk, index }
    }

    /// The `_user` word.
    pub const fn pack(&self) -> u64 {
        ((self.kind as u64 & mask(KIND_WIDTH)) << KIND_LSB)
            | ((self.layer as u64 & mask(LAYER_WIDTH)) << LAYER_LSB)
            | ((self.step as u64 & mask(STEP_WIDTH)) << STEP_LSB)
            | ((self.chunk as u64 & mask(CHUNK_WIDTH)) << CHUNK_LSB)
            | ((self.index as u64 & mask(INDEX_WIDTH)) << INDEX_LSB)
    }

    /// Decodes a `_user` word.
    pub const fn unpack(user: u64) -> Result<Header, FlitError> {
        let code = ((user >> KIND_LSB) & mask(KIND_WIDTH)) as u8;
        let kind = match Kind::from_code(code) {
            Some(k) => k,
            None => return Err(FlitError::ReservedKind(code)),
        };
        Ok(Header {
            kind,
            layer: ((user >> LAYER_LSB) & mask(LAYER_WIDTH)) as u16,
            step: ((user >> STEP_LSB) & mask(STEP_WIDTH)) as u16,
            chunk: ((user >> CHUNK_LSB) & mask(CHUNK_WIDTH)) as u16,
            index: ((user >> INDEX_LSB) & mask(INDEX_WIDTH)) as u16,
        })
    }

    /// The same header with another kind.
    pub const fn with_kind(self, kind: Kind) -> Self {
        Header { kind, ..self }
    }

    /// The same header with another index.
    pub const fn with_index(self, index: u16) -> Self {
        Header { index, ..self }
    }

    /// (layer, step, chunk): what identifies a chunk, and what SwarmX matches when it
    /// discards the rest of an aborted chunk.
    pub const fn chunk_key(&self) -> (u16, u16, u16) {
        (self.layer & mask(LAYER_WIDTH) as u16, self.step, self.chunk)
    }
}

/// One flit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flit {
    /// The header (`_user`).
    pub header: Header,
    /// The payload (`_data`).
    pub payload: u32,
    /// Closes the chunk (`_last`).
    pub last: bool,
}

/// Two bf16 values in one payload: `lo` is the even element, in bits 15:0.
pub const fn pack_bf16(lo: u16, hi: u16) -> u32 {
    (lo as u32) | ((hi as u32) << 16)
}

/// The two bf16 values of a payload, (even element, odd element).
pub const fn unpack_bf16(payload: u32) -> (u16, u16) {
    (payload as u16, (payload >> 16) as u16)
}

/// Error codes of an error flit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ErrorCode {
    /// An active port had no flit within the configured timeout while others had.
    Timeout = 1,
    /// A port's header (or `last`) differed from its peers'.
    Mismatch = 2,
    /// A flit of a kind the uplink does not reduce (not a gradient) reached the aligner.
    Kind = 3,
}

impl ErrorCode {
    /// The code with value `v`, if it is defined.
    pub const fn from_code(v: u8) -> Option<ErrorCode> {
        Some(match v {
            1 => ErrorCode::Timeout,
            2 => ErrorCode::Mismatch,
            3 => ErrorCode::Kind,
            _ => return None,
        })
    }
}

/// The payload of an error flit.
///
/// `path[0]` is the downstream port of the node that sent the flit last (the one directly
/// below the reader); `path[hops - 1]` is the port on which the detecting node saw the fault.
/// A node that forwards an error flit received on port `p` shifts `p` in at `path[0]`; past
/// [`ERR_PATH_PORTS`] hops the oldest (deepest) ids fall off, and `hops` saturates at 15.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorPayload {
    /// What went wrong.
    pub code: ErrorCode,
    /// Nodes the flit passed, the detecting node included (1..=15).
    pub hops: u8,
    /// Port ids, nearest node first; entries at and past `hops` are zero.
    pub path: [u8; ERR_PATH_PORTS],
}

impl ErrorPayload {
    /// What the detecting node emits when it blames its port `port`.
    pub const fn detected(code: ErrorCode, port: u8) -> Self {
        let mut path = [0u8; ERR_PATH_PORTS];
        path[0] = port & 0xf;
        ErrorPayload { code, hops: 1, path }
    }

    /// What a node emits when it forwards this error, received on its port `port`.
    pub const fn forwarded(self, port: u8) -> Self {
        let mut path = [0u8; ERR_PATH_PORTS];
        path[0] = port & 0xf;
        let mut i = 1;
        while i < ERR_PATH_PORTS {
            path[i] = self.path[i - 1];
            i += 1;
        }
        let hops = if self.hops >= 15 { 15 } else { self.hops + 1 };
        ErrorPayload { code: self.code, hops, path }
    }

    /// The port at the node that detected the fault, if the path still holds it.
    pub const fn origin_port(&self) -> Option<u8> {
        if self.hops >= 1 && self.hops as usize <= ERR_PATH_PORTS {
            Some(self.path[self.hops as usize - 1])
        } else {
            None
        }
    }

    /// The payload word.
    pub const fn pack(&self) -> u32 {
        let mut path = 0u32;
        let mut i = 0;
        while i < ERR_PATH_PORTS {
            path |= ((self.path[i] & 0xf) as u32) << (4 * i);
            i += 1;
        }
        ((self.code as u32) << ERR_CODE_LSB)
            | (((self.hops & 0xf) as u32) << ERR_HOPS_LSB)
            | (path << ERR_PATH_LSB)
    }

    /// Decodes a payload word.
    pub const fn unpack(word: u32) -> Result<ErrorPayload, FlitError> {
        let c = ((word >> ERR_CODE_LSB) & 0xf) as u8;
        let code = match ErrorCode::from_code(c) {
            Some(c) => c,
            None => return Err(FlitError::ReservedErrorCode(c)),
        };
        let hops = ((word >> ERR_HOPS_LSB) & 0xf) as u8;
        if hops == 0 {
            return Err(FlitError::BadHops(hops));
        }
        let mut path = [0u8; ERR_PATH_PORTS];
        let mut i = 0;
        while i < ERR_PATH_PORTS {
            path[i] = ((word >> (ERR_PATH_LSB + 4 * i as u32)) & 0xf) as u8;
            i += 1;
        }
        Ok(ErrorPayload { code, hops, path })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::String;
    use std::vec::Vec;

    use super::*;

    #[test]
    fn header_round_trips_and_fields_sit_where_documented() {
        let h = Header::new(Kind::Gradient, 0xabc, 0x1234, 0xbeef, 0x0102);
        let u = h.pack();
        assert_eq!(u, 0x0102_beef_1234_abc1);
        assert_eq!(Header::unpack(u), Ok(h));
        assert_eq!(Header::unpack(0x5), Err(FlitError::ReservedKind(5)));
        // Fields do not overlap and cover the word.
        let widths = [
            (KIND_LSB, KIND_WIDTH),
            (LAYER_LSB, LAYER_WIDTH),
            (STEP_LSB, STEP_WIDTH),
            (CHUNK_LSB, CHUNK_WIDTH),
            (INDEX_LSB, INDEX_WIDTH),
        ];
        let mut covered = 0u64;
        for (lsb, w) in widths {
            let m = mask(w) << lsb;
            assert_eq!(covered & m, 0);
            covered |= m;
        }
        assert_eq!(covered, u64::MAX);
        // The layer is truncated to its field.
        assert_eq!(Header::unpack(Header::new(Kind::Weight, 0xffff, 0, 0, 0).pack()).unwrap().layer, 0xfff);
    }

    #[test]
    fn bf16_lanes() {
        assert_eq!(pack_bf16(0x3f80, 0xc000), 0xc000_3f80);
        assert_eq!(unpack_bf16(0xc000_3f80), (0x3f80, 0xc000));
    }

    #[test]
    fn error_payload_path() {
        let e = ErrorPayload::detected(ErrorCode::Timeout, 3);
        assert_eq!(e.pack(), 0x0000_0311);
        assert_eq!(ErrorPayload::unpack(e.pack()), Ok(e));
        let f = e.forwarded(2).forwarded(14);
        assert_eq!(f.hops, 3);
        assert_eq!(f.path[..3], [14, 2, 3]);
        assert_eq!(f.origin_port(), Some(3));
        assert_eq!(f.pack(), 0x0003_2e31);
        let mut g = e;
        for _ in 0..20 {
            g = g.forwarded(1);
        }
        assert_eq!(g.hops, 15);
        assert_eq!(g.origin_port(), None);
        assert_eq!(ErrorPayload::unpack(0x10), Err(FlitError::ReservedErrorCode(0)));
        assert_eq!(ErrorPayload::unpack(0x01), Err(FlitError::BadHops(0)));
    }

    /// `localparam NAME = VALUE;` lines of the Verilog include, values as plain numbers or
    /// sized literals (`4'd2`, `32'h7fc0_0000`).
    fn vh_constants(text: &str) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for line in text.lines() {
            let line = line.split("//").next().unwrap_or("").trim();
            let Some(rest) = line.strip_prefix("localparam") else { continue };
            let rest = rest.trim().trim_end_matches(';');
            // Optional range: `localparam [3:0] NAME = ...`.
            let rest = match rest.strip_prefix('[') {
                Some(r) => r.split_once(']').map(|(_, r)| r.trim()).unwrap_or(r),
                None => rest,
            };
            let (name, value) = rest.split_once('=').expect("localparam without a value");
            let value = value.trim().replace('_', "");
            let v = match value.split_once('\'') {
                Some((_, lit)) => {
                    let (radix, digits) = lit.split_at(1);
                    let r = match radix {
                        "d" => 10,
                        "h" => 16,
                        "b" => 2,
                        other => panic!("radix {other} in {line}"),
                    };
                    u64::from_str_radix(digits, r).unwrap()
                }
                None => value.parse().unwrap(),
            };
            out.push((String::from(name.trim()), v));
        }
        out
    }

    #[test]
    fn verilog_include_agrees() {
        let text = include_str!("../../hdl/rtl/include/ws_flit.vh");
        let got = vh_constants(text);
        let want: &[(&str, u64)] = &[
            ("WS_FLIT_PAYLOAD_WIDTH", PAYLOAD_WIDTH as u64),
            ("WS_FLIT_USER_WIDTH", USER_WIDTH as u64),
            ("WS_FLIT_KIND_LSB", KIND_LSB as u64),
            ("WS_FLIT_KIND_WIDTH", KIND_WIDTH as u64),
            ("WS_FLIT_LAYER_LSB", LAYER_LSB as u64),
            ("WS_FLIT_LAYER_WIDTH", LAYER_WIDTH as u64),
            ("WS_FLIT_STEP_LSB", STEP_LSB as u64),
            ("WS_FLIT_STEP_WIDTH", STEP_WIDTH as u64),
            ("WS_FLIT_CHUNK_LSB", CHUNK_LSB as u64),
            ("WS_FLIT_CHUNK_WIDTH", CHUNK_WIDTH as u64),
            ("WS_FLIT_INDEX_LSB", INDEX_LSB as u64),
            ("WS_FLIT_INDEX_WIDTH", INDEX_WIDTH as u64),
            ("WS_KIND_WEIGHT", Kind::Weight as u64),
            ("WS_KIND_GRADIENT", Kind::Gradient as u64),
            ("WS_KIND_DATA", Kind::Data as u64),
            ("WS_KIND_CONTROL", Kind::Control as u64),
            ("WS_KIND_ERROR", Kind::Error as u64),
            ("WS_ERR_CODE_LSB", ERR_CODE_LSB as u64),
            ("WS_ERR_CODE_WIDTH", ERR_CODE_WIDTH as u64),
            ("WS_ERR_HOPS_LSB", ERR_HOPS_LSB as u64),
            ("WS_ERR_HOPS_WIDTH", ERR_HOPS_WIDTH as u64),
            ("WS_ERR_PATH_LSB", ERR_PATH_LSB as u64),
            ("WS_ERR_PATH_WIDTH", ERR_PATH_WIDTH as u64),
            ("WS_ERR_TIMEOUT", ErrorCode::Timeout as u64),
            ("WS_ERR_MISMATCH", ErrorCode::Mismatch as u64),
            ("WS_ERR_KIND", ErrorCode::Kind as u64),
            ("WS_DTYPE_FP32", crate::golden::swarm::Dtype::Fp32 as u64),
            ("WS_DTYPE_BF16", crate::golden::swarm::Dtype::Bf16 as u64),
            ("WS_DTYPE_BF16_OUT", crate::golden::swarm::Dtype::Bf16Out as u64),
            ("WS_FP32_CANONICAL_NAN", crate::golden::fp::CANONICAL_NAN as u64),
            ("WS_FP32_NEG_ZERO", crate::golden::fp::NEG_ZERO as u64),
            ("WS_FP32_ONE", crate::golden::fp::ONE as u64),
            ("WS_BF16_CANONICAL_NAN", crate::golden::fp::BF16_CANONICAL_NAN as u64),
        ];
        for (name, value) in want {
            let found = got.iter().find(|(n, _)| n == name);
            assert_eq!(found.map(|(_, v)| *v), Some(*value), "hdl/rtl/include/ws_flit.vh: {name}");
        }
        assert_eq!(got.len(), want.len(), "ws_flit.vh has constants this test does not check: {got:?}");
    }
}
