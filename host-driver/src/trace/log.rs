//! Link channel 6's bytes to ordered records, and what was lost on the way.
//!
//! The channel delivers bytes in pieces of any size (link frames, USB packets, reads of a
//! capture), so [`TraceLog`] keeps a partial record for the next piece. Records are numbered by
//! the trace unit, lost ones included (ws_common::trace, `seq`), so a gap in `seq` is exactly
//! what the board dropped. A `.wstrace` capture is the channel's bytes as they came, nothing
//! added, so a capture replays through the same decoder.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use ws_common::trace::{Record, RecordError, RECORD_BYTES};

use super::TraceError;

/// A record that does not decode, and where it is in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the record at byte {offset} of the trace does not decode: {error}")]
pub struct DecodeError {
    /// Byte offset of the record's first byte since the start of the stream.
    pub offset: u64,
    /// What is wrong with it.
    pub error: RecordError,
}

/// Accumulates channel 6's bytes and decodes them into records.
#[derive(Debug, Clone, Default)]
pub struct TraceLog {
    /// The start of a record whose end has not come yet (fewer than [`RECORD_BYTES`]).
    partial: Vec<u8>,
    /// Bytes taken in so far.
    bytes: u64,
    /// Decoded records, in arrival order.
    records: Vec<Record>,
    undecodable: Vec<DecodeError>,
}

impl TraceLog {
    /// An empty log, at byte 0 of the stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next piece of the stream; returns how many records it completed (decodable
    /// or not).
    pub fn push(&mut self, mut piece: &[u8]) -> usize {
        let before = self.records.len() + self.undecodable.len();
        if !self.partial.is_empty() {
            let take = (RECORD_BYTES - self.partial.len()).min(piece.len());
            self.partial.extend_from_slice(&piece[..take]);
            self.bytes += take as u64;
            piece = &piece[take..];
            if self.partial.len() == RECORD_BYTES {
                let rec = std::mem::take(&mut self.partial);
                self.decode(&rec);
            }
        }
        while piece.len() >= RECORD_BYTES {
            let (rec, rest) = piece.split_at(RECORD_BYTES);
            self.bytes += RECORD_BYTES as u64;
            self.decode(rec);
            piece = rest;
        }
        self.partial.extend_from_slice(piece);
        self.bytes += piece.len() as u64;
        self.records.len() + self.undecodable.len() - before
    }

    /// Decodes the complete record that ends at `self.bytes`.
    fn decode(&mut self, rec: &[u8]) {
        let offset = self.bytes - RECORD_BYTES as u64;
        let rec: &[u8; RECORD_BYTES] = rec.try_into().expect("a whole record");
        match Record::from_bytes(rec) {
            Ok(r) => self.records.push(r),
            Err(error) => self.undecodable.push(DecodeError { offset, error }),
        }
    }

    /// The records decoded so far, in arrival order.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// The records that did not decode so far.
    pub fn undecodable(&self) -> &[DecodeError] {
        &self.undecodable
    }

    /// Bytes taken in so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes of a record still waiting for the rest of it.
    pub fn pending(&self) -> usize {
        self.partial.len()
    }

    /// Ends the stream: the records ordered by `seq`, what was lost, and a partial record left
    /// at the end.
    pub fn finish(self) -> Trace {
        let mut t = Trace::from_records(self.records);
        t.undecodable = self.undecodable;
        t.trailing_bytes = self.partial.len();
        t.bytes = self.bytes;
        t
    }
}

/// Records lost on the board: the gaps in `seq`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lost {
    /// The missing sequence numbers, as ascending, disjoint ranges.
    pub ranges: Vec<RangeInclusive<u32>>,
}

impl Lost {
    /// How many records are missing.
    pub fn count(&self) -> u64 {
        self.ranges.iter().map(|r| u64::from(r.end() - r.start()) + 1).sum()
    }

    /// True when nothing is missing.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The ranges as `3, 7..=9`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .ranges
            .iter()
            .map(|r| {
                if r.start() == r.end() {
                    r.start().to_string()
                } else {
                    format!("{}..={}", r.start(), r.end())
                }
            })
            .collect();
        parts.join(", ")
    }
}

/// A finished stream: the records in `seq` order and what is wrong with the stream itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// The decoded records, ordered by `seq` (a repeated `seq` keeps its arrival order).
    pub records: Vec<Record>,
    /// Records that did not decode, in stream order.
    pub undecodable: Vec<DecodeError>,
    /// Bytes of a record cut off at the end of the stream (0 when it ended on a record).
    pub trailing_bytes: usize,
    /// The `seq` gaps. The unit numbers from 0 when it is enabled, so records missing before
    /// the first one count as lost too.
    pub lost: Lost,
    /// Sequence numbers seen more than once.
    pub duplicates: Vec<u32>,
    /// Bytes in the stream.
    pub bytes: u64,
}

impl Trace {
    /// Decodes a whole stream (a capture's bytes).
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut log = TraceLog::new();
        log.push(bytes);
        log.finish()
    }

    /// A trace of records given directly (models and tests); `bytes` counts them as encoded.
    pub fn from_records(records: impl IntoIterator<Item = Record>) -> Self {
        let mut records: Vec<Record> = records.into_iter().collect();
        // Stable, so a duplicated seq keeps its arrival order.
        records.sort_by_key(|r| r.seq);
        let mut lost = Lost::default();
        let mut duplicates = Vec::new();
        // u64 so that a gap ending at u32::MAX does not overflow.
        let mut next = 0u64;
        for (i, r) in records.iter().enumerate() {
            let seq = u64::from(r.seq);
            if i > 0 && r.seq == records[i - 1].seq {
                if duplicates.last() != Some(&r.seq) {
                    duplicates.push(r.seq);
                }
                continue;
            }
            if seq > next {
                lost.ranges.push(next as u32..=r.seq - 1);
            }
            next = seq + 1;
        }
        let bytes = (records.len() * RECORD_BYTES) as u64;
        Self { records, undecodable: Vec::new(), trailing_bytes: 0, lost, duplicates, bytes }
    }

    /// The first cycle of any record.
    pub fn first_cycle(&self) -> Option<u64> {
        self.records.iter().map(|r| r.begin).min()
    }

    /// The last cycle of any record.
    pub fn last_cycle(&self) -> Option<u64> {
        self.records.iter().map(|r| r.end).max()
    }
}

/// Records as the channel carries them: eight little-endian words each, concatenated (for
/// models, tests and synthetic captures).
pub fn to_bytes(records: &[Record]) -> Vec<u8> {
    records.iter().flat_map(|r| r.encode()).flat_map(u32::to_le_bytes).collect()
}

/// Reads a `.wstrace` capture and decodes it.
pub fn read_capture(path: &Path) -> Result<Trace, TraceError> {
    let bytes = std::fs::read(path).map_err(|source| TraceError::Read { path: path.into(), source })?;
    Ok(Trace::from_bytes(&bytes))
}

/// Writes channel 6's bytes as a `.wstrace` capture.
pub fn write_capture(path: &Path, bytes: &[u8]) -> Result<(), TraceError> {
    std::fs::write(path, bytes).map_err(|source| TraceError::Write { path: path.into(), source })
}

/// Where the capture of a timeline written to `json` goes: beside it, as `.wstrace`.
pub fn capture_beside(json: &Path) -> Result<PathBuf, TraceError> {
    let raw = json.with_extension("wstrace");
    if raw == json {
        return Err(TraceError::SamePath { path: json.into() });
    }
    Ok(raw)
}
