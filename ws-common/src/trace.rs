//! Hardware trace records (docs/trace.md): what the trace unit (`hdl/rtl/ws_trace.v`) writes
//! into link channel 6's ring, one record per chunk per hop, stamped from one free-running
//! cycle counter.
//!
//! A record is eight little-endian 32-bit words (32 bytes):
//!
//! ```text
//!  word  31            16 15             8 7              0
//!  0     ├──────────────── begin[31:0] ────────────────────┤
//!  1     │ begin[47:32]   │     source     │     kind       │
//!  2     ├──────────────── end[31:0] ──────────────────────┤
//!  3     │ end[47:32]     │            flits               │
//!  4     ├─ the chunk's flit header, bits 31:0: step, layer, flit kind ─┤
//!  5     │ 0              │            chunk               │
//!  6     ├──────────────── seq ────────────────────────────┤
//!  7     ├──────────────── aux ────────────────────────────┤
//! ```
//!
//! - `begin`, `end`: 48-bit cycles of the unit's counter (cleared by reset only).
//! - `source`: the hop ([`Source`]).
//! - `kind`: [`RecordKind`].
//! - `flits`: flits of the chunk at this hop (a streamer record: parameters of the chunk).
//! - word 4 is bits 31:0 of the chunk's first flit header ([`crate::flit`]): the flit kind,
//!   the layer and the step. Word 5 carries the chunk.
//! - `seq`: the record's number since the unit was enabled, counting records that were lost
//!   to a full buffer too, so a gap in `seq` is exactly the records lost there.
//! - `aux`: [`RecordKind::Update`]: the low 32 bits of the cycle its last store write was
//!   acknowledged (commit); [`RecordKind::Phase`]: the FMAs the wafer's PEs issued in the
//!   phase (saturating); otherwise 0.
//!
//! A [`RecordKind::Phase`] record (source [`Source::Wafer`]) is one program instruction of
//! one wafer: `begin` its first FMA issue on any PE, `end` its last, `flits` the PEs that
//! issued one, word 4's flit kind field the PE opcode ([`PhaseOp`]), its layer field the
//! instruction's layer tag (`crate::mesh::REG_TAG`), its step the wafer's STEP, and word 5 the
//! instruction's index (`chunk`).

/// Bytes of a record.
pub const RECORD_BYTES: usize = 32;
/// Words of a record.
pub const RECORD_WORDS: usize = RECORD_BYTES / 4;
/// Cycle counter width, in bits.
pub const CYCLE_BITS: u32 = 48;

/// What a record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordKind {
    /// A chunk passing a stream hop: its first flit's handshake (`begin`) to its `last`
    /// flit's (`end`).
    Chunk = 1,
    /// MemoryX's streamer updated a chunk: its first gradient in (`begin`) to its last result
    /// out of the lanes (`end`), `aux` its commit.
    Update = 2,
    /// MemoryX's streamer read a chunk for a STREAM (forward) pass: descriptor allocated
    /// (`begin`) to its last word read (`end`).
    Read = 3,
    /// One program instruction of a wafer: its first FMA issue on any PE (`begin`) to its
    /// last (`end`), `aux` the FMAs issued.
    Phase = 4,
}

/// The PE opcode of a [`RecordKind::Phase`] record (`ws_mesh_pe`'s op field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PhaseOp {
    /// FWD: the forward pass of a layer.
    Fwd,
    /// DX: the input gradient of a layer.
    Dx,
    /// GRAD: a layer's weight gradient (or the metrics reduction, tag `TAG_NONE`).
    Grad,
    /// LOSS: softmax cross-entropy of the last layer.
    Loss,
    /// Any other opcode (no FMAs: never recorded by a well-formed wafer).
    Other(u8),
}

impl PhaseOp {
    /// The opcode's phase.
    pub fn from_op(op: u8) -> Self {
        match op {
            1 => Self::Fwd,
            3 => Self::Dx,
            5 => Self::Grad,
            6 => Self::Loss,
            o => Self::Other(o),
        }
    }

    /// A short name: `fwd`, `dx`, `grad`, `loss`, `op N`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fwd => "fwd",
            Self::Dx => "dx",
            Self::Grad => "grad",
            Self::Loss => "loss",
            Self::Other(_) => "op",
        }
    }
}

impl RecordKind {
    /// The kind of a record's kind byte, if it is one.
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::Chunk),
            2 => Some(Self::Update),
            3 => Some(Self::Read),
            4 => Some(Self::Phase),
            _ => None,
        }
    }
}

/// The hops a record comes from. Ids are stable: the host's timeline names tracks by them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// The data mover's feed (op 3 gradients, op 4 weights) as it leaves the mover.
    MoverFeed,
    /// Weight flits into SwarmX's broadcast (its upstream input).
    SwarmDownIn,
    /// Reduced gradient flits out of SwarmX toward MemoryX (its upstream output).
    SwarmUpOut,
    /// Gradient flits into MemoryX's streamer.
    MxGradIn,
    /// Weight flits out of MemoryX's streamer (updated or streamed weights).
    MxWeightOut,
    /// The streamer's own per-chunk records ([`RecordKind::Update`], [`RecordKind::Read`]).
    MxStreamer,
    /// Broadcast flits out of SwarmX's downstream port p: into the wafer behind it.
    SwarmDownOut(u8),
    /// Gradient flits into SwarmX's downstream port p: out of the wafer behind it.
    SwarmUpIn(u8),
    /// Wafer w's FMA phases ([`RecordKind::Phase`]).
    Wafer(u8),
}

/// The first id of [`Source::SwarmDownOut`].
pub const SWARM_DOWN_OUT_BASE: u8 = 0x10;
/// The first id of [`Source::SwarmUpIn`].
pub const SWARM_UP_IN_BASE: u8 = 0x20;
/// SwarmX ports the id space holds.
pub const MAX_PORTS: u8 = 16;
/// The first id of [`Source::Wafer`].
pub const WAFER_BASE: u8 = 0x30;
/// Wafers the id space holds.
pub const MAX_WAFERS: u8 = 16;

impl Source {
    /// The source id in a record.
    pub fn id(self) -> u8 {
        match self {
            Self::MoverFeed => 0x00,
            Self::SwarmDownIn => 0x02,
            Self::SwarmUpOut => 0x03,
            Self::MxGradIn => 0x04,
            Self::MxWeightOut => 0x05,
            Self::MxStreamer => 0x06,
            Self::SwarmDownOut(p) => SWARM_DOWN_OUT_BASE + p,
            Self::SwarmUpIn(p) => SWARM_UP_IN_BASE + p,
            Self::Wafer(w) => WAFER_BASE + w,
        }
    }

    /// The source of an id, if it names one.
    pub fn from_id(id: u8) -> Option<Self> {
        Some(match id {
            0x00 => Self::MoverFeed,
            0x02 => Self::SwarmDownIn,
            0x03 => Self::SwarmUpOut,
            0x04 => Self::MxGradIn,
            0x05 => Self::MxWeightOut,
            0x06 => Self::MxStreamer,
            p if (SWARM_DOWN_OUT_BASE..SWARM_DOWN_OUT_BASE + MAX_PORTS).contains(&p) => {
                Self::SwarmDownOut(p - SWARM_DOWN_OUT_BASE)
            }
            p if (SWARM_UP_IN_BASE..SWARM_UP_IN_BASE + MAX_PORTS).contains(&p) => {
                Self::SwarmUpIn(p - SWARM_UP_IN_BASE)
            }
            w if (WAFER_BASE..WAFER_BASE + MAX_WAFERS).contains(&w) => Self::Wafer(w - WAFER_BASE),
            _ => return None,
        })
    }
}

/// One decoded record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// What it describes.
    pub kind: RecordKind,
    /// Where.
    pub source: Source,
    /// First cycle (48 bits).
    pub begin: u64,
    /// Last cycle (48 bits).
    pub end: u64,
    /// Flits (or parameters) of the chunk.
    pub flits: u16,
    /// The flit kind of the chunk's header (`crate::flit::Kind` as its 4-bit value).
    pub flit_kind: u8,
    /// The layer of the chunk's header.
    pub layer: u16,
    /// The step of the chunk's header.
    pub step: u16,
    /// The chunk's index in its layer.
    pub chunk: u16,
    /// The record's sequence number (lost records count too).
    pub seq: u32,
    /// See the module doc.
    pub aux: u32,
}

/// Why 32 bytes are not a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordError {
    /// The kind byte names no [`RecordKind`].
    Kind(u8),
    /// The source byte names no [`Source`].
    Source(u8),
    /// `end` is before `begin`.
    Backwards {
        /// The record's sequence number.
        seq: u32,
    },
    /// Bits that must be zero are not.
    Reserved,
}

impl core::fmt::Display for RecordError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Kind(k) => write!(f, "unknown record kind {k}"),
            Self::Source(s) => write!(f, "unknown trace source 0x{s:02x}"),
            Self::Backwards { seq } => write!(f, "record {seq} ends before it begins"),
            Self::Reserved => write!(f, "reserved bits set"),
        }
    }
}

const LO16: u32 = 0xffff;

impl Record {
    /// Decodes one record from its eight words.
    pub fn decode(w: &[u32; RECORD_WORDS]) -> Result<Self, RecordError> {
        let kind = RecordKind::from_u8(w[1] as u8).ok_or(RecordError::Kind(w[1] as u8))?;
        let sid = (w[1] >> 8) as u8;
        let source = Source::from_id(sid).ok_or(RecordError::Source(sid))?;
        if w[5] >> 16 != 0 {
            return Err(RecordError::Reserved);
        }
        let begin = u64::from(w[0]) | u64::from(w[1] >> 16) << 32;
        let end = u64::from(w[2]) | u64::from(w[3] >> 16) << 32;
        let seq = w[6];
        if end < begin {
            return Err(RecordError::Backwards { seq });
        }
        Ok(Self {
            kind,
            source,
            begin,
            end,
            flits: (w[3] & LO16) as u16,
            flit_kind: (w[4] & 0xf) as u8,
            layer: ((w[4] >> 4) & 0xfff) as u16,
            step: (w[4] >> 16) as u16,
            chunk: (w[5] & LO16) as u16,
            seq,
            aux: w[7],
        })
    }

    /// Decodes a record from its 32 bytes.
    pub fn from_bytes(b: &[u8; RECORD_BYTES]) -> Result<Self, RecordError> {
        let mut w = [0u32; RECORD_WORDS];
        for (i, w) in w.iter_mut().enumerate() {
            *w = u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
        }
        Self::decode(&w)
    }

    /// The record's eight words (the inverse of [`Record::decode`], for models and tests).
    pub fn encode(&self) -> [u32; RECORD_WORDS] {
        let hi = |c: u64| ((c >> 32) as u32 & LO16) << 16;
        [
            self.begin as u32,
            hi(self.begin) | u32::from(self.source.id()) << 8 | self.kind as u32,
            self.end as u32,
            hi(self.end) | u32::from(self.flits),
            u32::from(self.step) << 16 | u32::from(self.layer & 0xfff) << 4 | u32::from(self.flit_kind & 0xf),
            u32::from(self.chunk),
            self.seq,
            self.aux,
        ]
    }
}

/// Extends a 32-bit timestamp taken at or before `now` (48 bits) to 48 bits: the latest
/// cycle at or before `now` whose low 32 bits are `t`. The streamer stamps its records with
/// the low 32 bits of its own counter, which counts from the same reset.
pub fn extend(now: u64, t: u32) -> u64 {
    let back = (now as u32).wrapping_sub(t);
    now.wrapping_sub(u64::from(back)) & ((1 << CYCLE_BITS) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let r = Record {
            kind: RecordKind::Update,
            source: Source::SwarmUpIn(3),
            begin: 0x1234_8765_4321,
            end: 0x1235_0000_0001,
            flits: 513,
            flit_kind: 1,
            layer: 0xabc,
            step: 0xfedc,
            chunk: 77,
            seq: 9,
            aux: 0xdead_beef,
        };
        assert_eq!(Record::decode(&r.encode()), Ok(r));
        let mut bytes = [0u8; RECORD_BYTES];
        for (i, w) in r.encode().iter().enumerate() {
            bytes[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
        assert_eq!(Record::from_bytes(&bytes), Ok(r));
    }

    #[test]
    fn bad_records_are_named() {
        let mut w = [0u32; RECORD_WORDS];
        w[1] = 9;
        assert_eq!(Record::decode(&w), Err(RecordError::Kind(9)));
        w[1] = 0x0701;
        assert_eq!(Record::decode(&w), Err(RecordError::Source(7)));
        w[1] = 0x0001;
        w[0] = 5;
        w[6] = 4;
        assert_eq!(Record::decode(&w), Err(RecordError::Backwards { seq: 4 }));
        w[2] = 5;
        w[5] = 1 << 16;
        assert_eq!(Record::decode(&w), Err(RecordError::Reserved));
    }

    #[test]
    fn every_source_id_round_trips() {
        for id in 0..=255u8 {
            if let Some(s) = Source::from_id(id) {
                assert_eq!(s.id(), id);
            }
        }
        assert_eq!(Source::from_id(0x13), Some(Source::SwarmDownOut(3)));
        assert_eq!(Source::from_id(0x01), None);
        assert_eq!(Source::from_id(0x31), Some(Source::Wafer(1)));
        assert_eq!(Source::from_id(0x40), None);
    }

    #[test]
    fn phase_ops_name_the_pe_opcodes() {
        assert_eq!(PhaseOp::from_op(1), PhaseOp::Fwd);
        assert_eq!(PhaseOp::from_op(3), PhaseOp::Dx);
        assert_eq!(PhaseOp::from_op(5), PhaseOp::Grad);
        assert_eq!(PhaseOp::from_op(6), PhaseOp::Loss);
        assert_eq!(PhaseOp::from_op(4), PhaseOp::Other(4));
        assert_eq!(
            Record::decode(&[0, 0x3004, 0, 0, 0, 0, 0, 0]).map(|r| (r.kind, r.source)),
            Ok((RecordKind::Phase, Source::Wafer(0)))
        );
    }

    #[test]
    fn extend_finds_the_latest_matching_cycle() {
        assert_eq!(extend(0x5_0000_0010, 0x10), 0x5_0000_0010);
        assert_eq!(extend(0x5_0000_0010, 0x8), 0x5_0000_0008);
        assert_eq!(extend(0x5_0000_0010, 0xffff_fff0), 0x4_ffff_fff0);
        assert_eq!(extend(0x10, 0xffff_fff0), 0xffff_ffff_fff0);
    }
}
