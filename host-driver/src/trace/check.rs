//! The trace validator: is the capture whole, do the hops agree, and does the timeline JSON
//! hold together.
//!
//! An *error* is something that cannot happen on a correct board with a complete capture: a
//! record lost or cut off, spans overlapping on one stream, a chunk that entered a block
//! (SwarmX's broadcast, SwarmX's reduce, MemoryX) and never left it, or left without
//! entering. A *note* is worth knowing but legitimate: a reduce that summed fewer ports than
//! its step used (the firmware masks a port that aborts, docs/swarmx.md), an aborted chunk, a
//! hop with no records at all (its probe was off), which leaves the paths through it unchecked.
//!
//! The streamer's own records are not checked for overlap: it keeps up to 8 chunks in flight
//! (docs/memoryx-store.md "Timing"). Nor are a wafer's FMA phases: its PEs run skewed, so one PE
//! starts instruction n + 1 while another still finishes n. A phase is checked on its own: it
//! ends at or after it begins, and some PE issued an FMA in it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::ops::RangeInclusive;

use serde_json::Value;
use ws_common::ctrl::cmd::TraceState;
use ws_common::flit::Kind;
use ws_common::mesh::TAG_NONE;
use ws_common::trace::{Record, RecordKind, Source};

use super::links::{source_name, ChunkKey, Hop, Links};
use super::log::{DecodeError, Lost};
use super::{Trace, TraceError};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The trace or the pipeline is wrong.
    Error,
    /// Legitimate, but worth a look.
    Note,
}

fn ports(p: &[u8]) -> String {
    p.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
}

fn not_broadcast(_key: &ChunkKey, missing: &[u8]) -> String {
    if missing.is_empty() {
        "left on no port".to_string()
    } else {
        format!("never left on port(s) {}, which the chunks before and after it left on", ports(missing))
    }
}

fn tag(layer: u16) -> String {
    if layer == TAG_NONE {
        "the metrics reduction".into()
    } else {
        format!("L{layer}")
    }
}

fn kind_word(k: RecordKind) -> &'static str {
    match k {
        RecordKind::Chunk => "chunk",
        RecordKind::Update => "update",
        RecordKind::Read => "read",
        RecordKind::Phase => "phase",
    }
}

fn lost_ranges(r: &[RangeInclusive<u32>]) -> String {
    Lost { ranges: r.to_vec() }.describe()
}

/// One thing the validator found. Each variant's message names the offending record's `seq`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Problem {
    /// A record does not decode (a bad kind or source, reserved bits, or an end before its
    /// begin).
    #[error("{0}")]
    Undecodable(DecodeError),
    /// the capture ends {bytes} bytes into a record: the last record is cut off; stop the capture only after the board's trace ring has drained
    #[error(
        "the capture ends {bytes} bytes into a record: the last record is cut off; stop the capture only after the board's trace ring has drained"
    )]
    Trailing {
        /// Bytes of the partial record.
        bytes: usize,
    },
    /// {count} record(s) lost on the board (seq {ranges}): the trace unit's buffer overflowed; drain channel 6 faster, or trace fewer hops
    #[error(
        "{count} record(s) lost on the board (seq {}): the trace unit's buffer overflowed; drain channel 6 faster, or trace fewer hops",
        lost_ranges(ranges)
    )]
    Lost {
        /// How many.
        count: u64,
        /// Which sequence numbers.
        ranges: Vec<RangeInclusive<u32>>,
    },
    /// record {seq} appears more than once: the capture joins two runs (or was appended to); capture one run per file
    #[error(
        "record {seq} appears more than once: the capture joins two runs (or was appended to); capture one run per file"
    )]
    Duplicate {
        /// The repeated sequence number.
        seq: u32,
    },
    /// the capture holds no records: check that the trace unit was enabled for the run and that channel 6 was read
    #[error("the capture holds no records: check that the trace unit was enabled for the run and that channel 6 was read")]
    Empty,
    /// record {seq} ({key}) begins at cycle {begin} at {hop}, before record {other} there ends (cycle {other_end}): a stream carries one chunk at a time
    #[error(
        "record {seq} ({key}) begins at cycle {begin} at {}, before record {other} there ends (cycle {other_end}): a stream carries one chunk at a time",
        source_name(*hop)
    )]
    Overlap {
        /// The hop.
        hop: Source,
        /// The later record.
        seq: u32,
        /// Its chunk.
        key: ChunkKey,
        /// Its first cycle.
        begin: u64,
        /// The record it overlaps.
        other: u32,
        /// That record's last cycle.
        other_end: u64,
    },
    /// record {seq} at {hop} ends at cycle {end}, before record {other}, written before it, ends (cycle {other_end}): a hop's records must come in the order its chunks end
    #[error(
        "record {seq} at {} ends at cycle {end}, before record {other}, written before it, ends (cycle {other_end}): a hop's records must come in the order its chunks end",
        source_name(*hop)
    )]
    Unordered {
        /// The hop.
        hop: Source,
        /// The record out of order.
        seq: u32,
        /// Its last cycle.
        end: u64,
        /// The record written before it.
        other: u32,
        /// That record's last cycle.
        other_end: u64,
    },
    /// weight chunk {key} entered SwarmX's broadcast (record {seq}) and never left on port(s) {missing}, which the chunks before and after it left on (or: left on no port)
    #[error(
        "weight chunk {key} entered SwarmX's broadcast (record {seq}) and {}",
        not_broadcast(key, missing)
    )]
    NotBroadcast {
        /// The SwarmX down-in record.
        seq: u32,
        /// Its chunk.
        key: ChunkKey,
        /// The ports that carried its step but not it; empty when no port carried the step.
        missing: Vec<u8>,
    },
    /// gradient chunk {key} entered SwarmX's reduce on port {port} (record {seq}) and never left up-out
    #[error(
        "gradient chunk {key} entered SwarmX's reduce on port {port} (record {seq}) and never left up-out"
    )]
    NotReduced {
        /// The SwarmX up-in record.
        seq: u32,
        /// The port.
        port: u8,
        /// Its chunk.
        key: ChunkKey,
    },
    /// gradient chunk {key} entered MemoryX (record {seq}) and was never updated
    #[error("gradient chunk {key} entered MemoryX (record {seq}) and was never updated")]
    NotUpdated {
        /// The MemoryX gradients-in record.
        seq: u32,
        /// Its chunk.
        key: ChunkKey,
    },
    /// MemoryX {what} chunk L{layer} s{step} c{chunk} (record {seq}) but its weights never left on weight-out
    #[error(
        "MemoryX {what} chunk L{layer} s{step} c{chunk} (record {seq}) but its weights never left on weight-out"
    )]
    NoWeightsOut {
        /// The streamer's record.
        seq: u32,
        /// "updated" or "read".
        what: &'static str,
        /// The layer.
        layer: u16,
        /// The step.
        step: u16,
        /// The chunk.
        chunk: u16,
    },
    /// record {seq}: {key} left {hop} without entering its block ({entry} has no record of it)
    #[error("record {seq}: {key} left {} without entering its block ({entry} has no record of it)", source_name(*hop))]
    Orphan {
        /// The record.
        seq: u32,
        /// Its hop.
        hop: Source,
        /// Its chunk.
        key: ChunkKey,
        /// Where it should have entered.
        entry: &'static str,
    },
    /// gradient chunk {key} left SwarmX's reduce (record {seq}) summed over port(s) {ports} while step {step} used port(s) {all}: a port was masked mid-step
    #[error(
        "gradient chunk {key} left SwarmX's reduce (record {seq}) summed over port(s) {} while its step used port(s) {}: a port was masked mid-step",
        ports(summed),
        ports(all)
    )]
    PartialReduce {
        /// The SwarmX up-out record.
        seq: u32,
        /// Its chunk.
        key: ChunkKey,
        /// The ports it was summed over.
        summed: Vec<u8>,
        /// The ports its step used.
        all: Vec<u8>,
    },
    /// record {seq}: an aborted chunk L{layer} s{step} c{chunk} passed {hop}
    #[error("record {seq}: an aborted chunk (error flits) L{layer} s{step} c{chunk} passed {}", source_name(*hop))]
    Aborted {
        /// The record.
        seq: u32,
        /// Its hop.
        hop: Source,
        /// The layer.
        layer: u16,
        /// The step.
        step: u16,
        /// The chunk.
        chunk: u16,
    },
    /// record {seq}: wafer {wafer}'s FMA phase of instruction {pc} ({layer}) {what}
    #[error("record {seq}: wafer {wafer}'s FMA phase of instruction {pc} ({}) {what}", tag(*layer))]
    BadPhase {
        /// The record.
        seq: u32,
        /// The wafer.
        wafer: u8,
        /// The instruction's index.
        pc: u16,
        /// The instruction's layer tag.
        layer: u16,
        /// What is wrong: it ends before it begins, or counts no FMA or no PE.
        what: &'static str,
    },
    /// record {seq}: a {kind} record from {hop}: only a wafer makes phase records, and a wafer makes nothing else
    #[error(
        "record {seq}: a {} record from {}: only a wafer makes phase records, and a wafer makes nothing else",
        kind_word(*kind),
        source_name(*hop)
    )]
    Misplaced {
        /// The record.
        seq: u32,
        /// Its source.
        hop: Source,
        /// Its kind.
        kind: RecordKind,
    },
    /// {have} has records but {missing} has none (its probe was off?), so chunks between them were not followed
    #[error("{have} has records but {missing} has none (its probe was off?), so chunks between them were not followed")]
    Untraced {
        /// The hop with records.
        have: &'static str,
        /// The hop without.
        missing: &'static str,
    },
    /// the capture is missing records, so some of the path errors may be records it lacks rather than chunks the board lost
    #[error(
        "the capture is missing records, so some of the path errors may be records it lacks rather than chunks the board lost"
    )]
    Incomplete,
    /// the host has {got} bytes of channel 6 but the board wrote {want} (stream positions {start} to {head}): read channel 6 up to the stop answer's `head` before decoding
    #[error(
        "the host has {got} bytes of channel 6 but the board wrote {want} (stream positions {start} to {head}): read channel 6 up to the stop answer's `head` before decoding"
    )]
    ShortCapture {
        /// Bytes the host has.
        got: u64,
        /// Bytes the board wrote.
        want: u64,
        /// The board's start position.
        start: u32,
        /// The board's head position.
        head: u32,
    },
    /// the board counted {board} lost record(s) but the host's seq gaps hold {host}: the capture does not match the unit's counts; capture one trace per file, from its start
    #[error(
        "the board counted {board} lost record(s) but the host's seq gaps hold {host}: the capture does not match the unit's counts; capture one trace per file, from its start"
    )]
    LostMismatch {
        /// The unit's LOST count.
        board: u32,
        /// The gaps the host found.
        host: u64,
    },
    /// the trace unit was still active when it answered, so records may have followed this capture: stop the trace before reading its end
    #[error(
        "the trace unit was still active when it answered, so records may have followed this capture: stop the trace before reading its end"
    )]
    StillActive,
    /// the timeline JSON is malformed: {0}
    #[error("the timeline JSON is malformed: {0}")]
    BadJson(String),
    /// timeline slices of records {seq} and {other} overlap on one thread (pid {pid}, tid {tid}): Perfetto would nest them wrongly
    #[error(
        "timeline slices of records {seq} and {other} overlap on one thread (pid {pid}, tid {tid}): Perfetto would nest them wrongly"
    )]
    SliceOverlap {
        /// The process.
        pid: u64,
        /// The thread.
        tid: u64,
        /// The later slice's record.
        seq: u64,
        /// The slice it overlaps.
        other: u64,
    },
    /// flow {id} starts at record {seq} but never finishes
    #[error("flow {id} starts at record {seq} but never finishes")]
    FlowUnfinished {
        /// The flow id.
        id: u64,
        /// The record of its start.
        seq: u64,
    },
    /// flow {id} reaches record {seq} without a start
    #[error("flow {id} reaches record {seq} without a start")]
    FlowUnstarted {
        /// The flow id.
        id: u64,
        /// The record of its step or finish.
        seq: u64,
    },
    /// flow {id} starts or finishes more than once (record {seq})
    #[error("flow {id} starts or finishes more than once (record {seq})")]
    FlowRepeated {
        /// The flow id.
        id: u64,
        /// A record of the extra start or finish.
        seq: u64,
    },
    /// flow {id}'s event at record {seq} lies in no slice of its thread, so Perfetto drops it
    #[error("flow {id}'s event at record {seq} lies in no slice of its thread, so Perfetto drops it")]
    FlowUnbound {
        /// The flow id.
        id: u64,
        /// The record the event names.
        seq: u64,
    },
}

impl Problem {
    /// Whether it is an error or a note.
    pub fn severity(&self) -> Severity {
        match self {
            Self::PartialReduce { .. }
            | Self::Aborted { .. }
            | Self::Untraced { .. }
            | Self::Incomplete
            | Self::StillActive => Severity::Note,
            _ => Severity::Error,
        }
    }
}

/// What the validator found, errors and notes, in the order the checks ran.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Every finding.
    pub problems: Vec<Problem>,
}

impl Report {
    /// The errors.
    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| p.severity() == Severity::Error)
    }

    /// The notes.
    pub fn notes(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| p.severity() == Severity::Note)
    }

    /// True when there is no error (notes allowed).
    pub fn is_ok(&self) -> bool {
        self.errors().next().is_none()
    }

    /// Adds another report's findings.
    pub fn merge(&mut self, other: Report) {
        self.problems.extend(other.problems);
    }

    /// `error: …` and `note: …` lines, errors first, at most `max` of each kind, then a count
    /// of the rest.
    pub fn render(&self, max: usize) -> String {
        let mut out = String::new();
        for (label, list) in [("error", self.errors().collect::<Vec<_>>()), ("note", self.notes().collect())]
        {
            for p in list.iter().take(max) {
                out.push_str(&format!("{label}: {p}\n"));
            }
            if list.len() > max {
                out.push_str(&format!("{label}: … and {} more\n", list.len() - max));
            }
        }
        out
    }

    /// The report when it has no error; otherwise [`TraceError::CheckFailed`] naming the first.
    pub fn into_result(self) -> Result<Self, TraceError> {
        let errors = self.errors().count();
        let first = self.errors().next().map(ToString::to_string);
        match first {
            None => Ok(self),
            Some(first) => Err(TraceError::CheckFailed { errors, first }),
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(usize::MAX))
    }
}

/// Checks a trace's records: the stream, each hop's spans, and every chunk's way through
/// SwarmX and MemoryX.
pub fn check(trace: &Trace) -> Report {
    let mut problems: Vec<Problem> = trace.undecodable.iter().copied().map(Problem::Undecodable).collect();
    if trace.trailing_bytes != 0 {
        problems.push(Problem::Trailing { bytes: trace.trailing_bytes });
    }
    if !trace.lost.is_empty() {
        problems.push(Problem::Lost { count: trace.lost.count(), ranges: trace.lost.ranges.clone() });
    }
    problems.extend(trace.duplicates.iter().map(|&seq| Problem::Duplicate { seq }));
    let records = &trace.records;
    if records.is_empty() {
        if trace.undecodable.is_empty() {
            problems.push(Problem::Empty);
        }
        return Report { problems };
    }
    spans(records, &mut problems);
    phases(records, &mut problems);
    let before = problems.len();
    paths(records, &mut problems);
    let incomplete = !trace.undecodable.is_empty() || trace.trailing_bytes != 0 || !trace.lost.is_empty();
    if incomplete && problems[before..].iter().any(|p| p.severity() == Severity::Error) {
        problems.push(Problem::Incomplete);
    }
    Report { problems }
}

/// Checks a capture against the trace unit's own counts (the answer to `TraceCtl` stop): the
/// host has every byte the unit wrote, and the unit's lost count is the host's `seq` gaps.
/// Stream positions are 32-bit, so a trace of 4 GiB or more is not compared.
pub fn check_board(trace: &Trace, state: &TraceState) -> Report {
    let mut problems = Vec::new();
    if state.active {
        problems.push(Problem::StillActive);
    }
    let want = u64::from(state.head.wrapping_sub(state.start));
    if trace.bytes != want {
        problems.push(Problem::ShortCapture { got: trace.bytes, want, start: state.start, head: state.head });
    } else if u64::from(state.lost) != trace.lost.count() {
        problems.push(Problem::LostMismatch { board: state.lost, host: trace.lost.count() });
    }
    Report { problems }
}

/// Every check of a capture: its records ([`check`]), the unit's counts when the host has
/// them ([`check_board`]), and the timeline made of it ([`check_perfetto`]).
pub fn check_capture(trace: &Trace, json: &Value, state: Option<&TraceState>) -> Report {
    let mut report = check(trace);
    if let Some(state) = state {
        report.merge(check_board(trace, state));
    }
    report.merge(check_perfetto(json));
    report
}

/// Per stream hop: records in the order their chunks end, and one chunk at a time.
fn spans(records: &[Record], problems: &mut Vec<Problem>) {
    let mut by_source: BTreeMap<Source, Vec<&Record>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.kind == RecordKind::Chunk) {
        by_source.entry(r.source).or_default().push(r);
    }
    for (source, mut list) in by_source {
        // `records` is in seq order: the order the unit wrote them, as each chunk ended.
        for w in list.windows(2) {
            if w[1].end < w[0].end {
                problems.push(Problem::Unordered {
                    hop: source,
                    seq: w[1].seq,
                    end: w[1].end,
                    other: w[0].seq,
                    other_end: w[0].end,
                });
            }
        }
        list.sort_by_key(|r| (r.begin, r.seq));
        // Against the furthest end so far, so a long span overlapping several is caught on each.
        let mut last: Option<&Record> = None;
        for r in list {
            if let Some(p) = last {
                if r.begin <= p.end {
                    problems.push(Problem::Overlap {
                        hop: source,
                        seq: r.seq,
                        key: ChunkKey::of(r),
                        begin: r.begin,
                        other: p.seq,
                        other_end: p.end,
                    });
                }
            }
            if last.is_none_or(|p| r.end > p.end) {
                last = Some(r);
            }
        }
    }
}

/// Each wafer FMA phase on its own: it ends at or after it begins, counts the FMAs its PEs
/// issued and the PEs that issued one (a phase with neither is never recorded); and phase
/// records come from wafers only.
fn phases(records: &[Record], problems: &mut Vec<Problem>) {
    for r in records {
        let phase = r.kind == RecordKind::Phase;
        let Source::Wafer(wafer) = r.source else {
            if phase {
                problems.push(Problem::Misplaced { seq: r.seq, hop: r.source, kind: r.kind });
            }
            continue;
        };
        if !phase {
            problems.push(Problem::Misplaced { seq: r.seq, hop: r.source, kind: r.kind });
            continue;
        }
        let (seq, pc, layer) = (r.seq, r.chunk, r.layer);
        let mut bad = |what| problems.push(Problem::BadPhase { seq, wafer, pc, layer, what });
        if r.end < r.begin {
            bad("ends before it begins");
        }
        if r.aux == 0 {
            bad("counts no FMA (aux 0)");
        }
        if r.flits == 0 {
            bad("counts no PE that issued an FMA (flits 0)");
        }
    }
}

/// The hops the path checks pair up, by name.
fn stage(h: Hop) -> Option<&'static str> {
    Some(match h {
        Hop::DownIn => "SwarmX down in",
        Hop::DownOut(_) => "SwarmX down out",
        Hop::UpIn(_) => "SwarmX up in",
        Hop::UpOut => "SwarmX up out",
        Hop::GradIn => "MemoryX gradients in",
        Hop::Update | Hop::Read => "the MemoryX streamer",
        Hop::WeightOut => "MemoryX weights out",
        Hop::FeedWeights | Hop::FeedGradients | Hop::Other => return None,
    })
}

/// Every chunk that entered a block left it, and nothing left a block without entering. A
/// pair of hops is checked only when both have records: a probe that is off (the unit's
/// PROBE_EN) leaves its hop out of the trace, which is a note, not a path error.
fn paths(records: &[Record], problems: &mut Vec<Problem>) {
    let links = Links::new(records);
    let present: BTreeSet<&'static str> = (0..records.len()).filter_map(|i| stage(links.hop(i))).collect();
    let mut untraced: BTreeSet<(&'static str, &'static str)> = BTreeSet::new();
    let mut traced = |have: Hop, need: &'static str| {
        let ok = present.contains(need);
        if !ok {
            untraced.insert((stage(have).unwrap_or("?"), need));
        }
        ok
    };
    let has = |i: usize, pred: &dyn Fn(Hop) -> bool| links.to(i).iter().any(|&j| pred(links.hop(j)));
    for (i, r) in records.iter().enumerate() {
        let key = ChunkKey::of(r);
        let seq = r.seq;
        let hop = links.hop(i);
        if r.kind == RecordKind::Chunk && r.flit_kind == Kind::Error as u8 {
            let (layer, step, chunk) = (r.layer, r.step, r.chunk);
            problems.push(Problem::Aborted { seq, hop: r.source, layer, step, chunk });
        }
        // Entered and never left.
        let exit = match hop {
            Hop::DownIn => Some("SwarmX down out"),
            Hop::UpIn(_) => Some("SwarmX up out"),
            Hop::GradIn => Some("the MemoryX streamer"),
            Hop::Update | Hop::Read => Some("MemoryX weights out"),
            _ => None,
        };
        match hop {
            _ if !exit.is_some_and(|e| traced(hop, e)) => {}
            Hop::DownIn => {
                let missing = links.missing_ports(i);
                if !missing.is_empty() || links.to(i).is_empty() {
                    problems.push(Problem::NotBroadcast { seq, key, missing });
                }
            }
            Hop::UpIn(port) if links.to(i).is_empty() => {
                problems.push(Problem::NotReduced { seq, port, key });
            }
            Hop::GradIn if !has(i, &|h| h == Hop::Update) => problems.push(Problem::NotUpdated { seq, key }),
            Hop::Update | Hop::Read if !has(i, &|h| h == Hop::WeightOut) => {
                let what = if hop == Hop::Update { "updated" } else { "read" };
                let (layer, step, chunk) = (r.layer, r.step, r.chunk);
                problems.push(Problem::NoWeightsOut { seq, what, layer, step, chunk });
            }
            _ => {}
        }
        // Left without entering.
        let entry = match hop {
            Hop::DownOut(_) => Some("SwarmX down in"),
            Hop::UpOut => Some("SwarmX up in"),
            Hop::Update => Some("MemoryX gradients in"),
            Hop::WeightOut => Some("the MemoryX streamer"),
            _ => None,
        };
        if let Some(entry) = entry.filter(|&e| traced(hop, e)) {
            if links.from(i).is_empty() {
                problems.push(Problem::Orphan { seq, hop: r.source, key, entry });
            }
        }
        if hop == Hop::UpOut && !links.from(i).is_empty() {
            let summed: Vec<u8> = links
                .from(i)
                .iter()
                .filter_map(|&j| match links.hop(j) {
                    Hop::UpIn(p) => Some(p),
                    _ => None,
                })
                .collect();
            let all = links.up_ports(r.step);
            if summed.len() < all.len() {
                problems.push(Problem::PartialReduce { seq, key, summed, all });
            }
        }
    }
    problems.extend(untraced.into_iter().map(|(have, missing)| Problem::Untraced { have, missing }));
}

/// Perfetto's reading of a JSON time in microseconds: truncated to whole nanoseconds.
fn perfetto_ns(v: &Value) -> Option<i64> {
    v.as_f64().map(|us| (us * 1000.0) as i64)
}

fn field(e: &Value, k: &str) -> u64 {
    e.get(k).and_then(Value::as_u64).unwrap_or(0)
}

/// Checks timeline JSON as Perfetto will read it: slices on a thread that do not overlap,
/// every flow started once and finished once, and every flow event inside a slice of its
/// thread.
pub fn check_perfetto(json: &Value) -> Report {
    let mut problems = Vec::new();
    let Some(events) = json.get("traceEvents").and_then(Value::as_array) else {
        problems.push(Problem::BadJson("no `traceEvents` array".into()));
        return Report { problems };
    };
    // (pid, tid) → (begin ns, end ns, seq), as Perfetto will place them.
    type Slices = HashMap<(u64, u64), Vec<(i64, i64, u64)>>;
    let mut slices = Slices::new();
    // (cat, name, id) → [(phase, (pid, tid), ns, seq)]
    type FlowEvent = (char, (u64, u64), i64, u64);
    let mut flows: BTreeMap<(String, String, u64), Vec<FlowEvent>> = BTreeMap::new();
    for (n, e) in events.iter().enumerate() {
        let ph = e.get("ph").and_then(Value::as_str).unwrap_or("");
        let track = (field(e, "pid"), field(e, "tid"));
        let seq = e.get("args").map(|a| field(a, "seq")).unwrap_or(0);
        match ph {
            "X" => match (e.get("ts").and_then(perfetto_ns), e.get("dur").and_then(perfetto_ns)) {
                (Some(ts), Some(dur)) if dur >= 0 => {
                    slices.entry(track).or_default().push((ts, ts + dur, seq))
                }
                _ => problems.push(Problem::BadJson(format!("slice event {n} has no usable ts and dur"))),
            },
            "s" | "t" | "f" => {
                let (Some(id), Some(ts)) =
                    (e.get("id").and_then(Value::as_u64), e.get("ts").and_then(perfetto_ns))
                else {
                    problems.push(Problem::BadJson(format!("flow event {n} has no numeric id and ts")));
                    continue;
                };
                let cat = e.get("cat").and_then(Value::as_str).unwrap_or("").to_string();
                let name = e.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                let c = ph.chars().next().unwrap_or('?');
                flows.entry((cat, name, id)).or_default().push((c, track, ts, seq));
            }
            _ => {}
        }
    }
    let mut tracks: Vec<_> = slices.into_iter().collect();
    tracks.sort_by_key(|(t, _)| *t);
    for ((pid, tid), list) in &mut tracks {
        list.sort();
        for w in list.windows(2) {
            if w[1].0 < w[0].1 {
                problems.push(Problem::SliceOverlap { pid: *pid, tid: *tid, seq: w[1].2, other: w[0].2 });
            }
        }
    }
    let tracks: Slices = tracks.into_iter().collect();
    let bound = |track: &(u64, u64), ts: i64| {
        tracks.get(track).is_some_and(|l| {
            let k = l.partition_point(|s| s.0 <= ts);
            k > 0 && ts <= l[k - 1].1
        })
    };
    for ((_, _, id), list) in &flows {
        let id = *id;
        let starts: Vec<_> = list.iter().filter(|e| e.0 == 's').collect();
        let finishes: Vec<_> = list.iter().filter(|e| e.0 == 'f').collect();
        match (starts.len(), finishes.len()) {
            (0, _) => problems.push(Problem::FlowUnstarted { id, seq: list[0].3 }),
            (_, 0) => problems.push(Problem::FlowUnfinished { id, seq: starts[0].3 }),
            (1, 1) => {}
            (s, _) => {
                let extra = if s > 1 { starts[1] } else { finishes[1] };
                problems.push(Problem::FlowRepeated { id, seq: extra.3 });
            }
        }
        for e in list {
            if !bound(&e.1, e.2) {
                problems.push(Problem::FlowUnbound { id, seq: e.3 });
            }
        }
    }
    Report { problems }
}
