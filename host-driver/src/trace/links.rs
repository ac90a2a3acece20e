//! Following a chunk from hop to hop.
//!
//! A record names its chunk by the chunk's flit header: (flit kind, layer, step, chunk). The
//! same key passes a hop more than once (the weights of a step stream once for the forward
//! pass and again for the backward pass), so a record's predecessor at the hop before is the
//! latest record with its key there that began at or before it did: streams keep their order,
//! and a chunk's first flit reaches a hop no earlier than the hop before.
//!
//! The paths (docs/architecture.md "One training step"):
//!
//! ```text
//! weights    MoverFeed ─┬→ SwarmDownIn → SwarmDownOut(p), every port p
//!          MxWeightOut ─┘
//! gradients  [MoverFeed →] SwarmUpIn(p), every port p → SwarmUpOut ─┬→ MxGradIn
//!                                                      MoverFeed ─┘
//!            MxGradIn → MxStreamer update → MxWeightOut (step + 1: the new weights)
//!                       MxStreamer read   → MxWeightOut (the same step)
//! ```
//!
//! The streamer frames an updated chunk with the gradients' step plus one, because those are
//! the weights of the next step (`o_hdr` in hdl/rtl/ws_mx_streamer.v); a STREAM read keeps its
//! step. The streamer's own records are matched on (layer, step, chunk) alone: they describe
//! the chunk it updates or reads, not a flit on a stream.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use ws_common::flit::Kind;
use ws_common::trace::{Record, RecordKind, Source, MAX_PORTS};

use crate::optim::SIM_SWARM_PORTS;

/// A chunk as its flit header names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkKey {
    /// The flit kind's 4-bit code (`ws_common::flit::Kind`).
    pub flit_kind: u8,
    /// The layer.
    pub layer: u16,
    /// The step (modulo 2^16).
    pub step: u16,
    /// The chunk's index in its layer.
    pub chunk: u16,
}

impl ChunkKey {
    /// The key of a record's chunk.
    pub fn of(r: &Record) -> Self {
        Self { flit_kind: r.flit_kind, layer: r.layer, step: r.step, chunk: r.chunk }
    }
}

impl fmt::Display for ChunkKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "L{} s{} c{} ({})", self.layer, self.step, self.chunk, kind_name(self.flit_kind))
    }
}

/// What a flit kind carries, as the timeline names it.
pub fn kind_name(flit_kind: u8) -> &'static str {
    match Kind::from_code(flit_kind) {
        Some(Kind::Weight) => "weights",
        Some(Kind::Gradient) => "gradients",
        Some(Kind::Data) => "data",
        Some(Kind::Control) => "control",
        Some(Kind::Error) => "aborted",
        None => "unknown kind",
    }
}

/// A source as the check and the summary name it.
pub fn source_name(s: Source) -> String {
    match s {
        Source::MoverFeed => "data mover feed".into(),
        Source::SwarmDownIn => "SwarmX down in".into(),
        Source::SwarmUpOut => "SwarmX up out".into(),
        Source::MxGradIn => "MemoryX gradients in".into(),
        Source::MxWeightOut => "MemoryX weights out".into(),
        Source::MxStreamer => "MemoryX streamer".into(),
        Source::SwarmDownOut(p) => format!("SwarmX down out {p}"),
        Source::SwarmUpIn(p) => format!("SwarmX up in {p}"),
        Source::Wafer(w) => format!("wafer {w} FMAs"),
    }
}

/// SwarmX's downstream ports as a capture shows them: one more than the highest port any
/// record names, since wafer 0 sits on the highest port (wafer w on port PORTS − 1 − w,
/// `ws_mx_block`) and every job runs on wafers 0 … W − 1; at least one more than the highest
/// wafer; and [`SIM_SWARM_PORTS`] (the simulated board) when no record names a port.
pub fn swarm_ports(records: &[Record]) -> u8 {
    let mut port = None;
    let mut wafer = None;
    for r in records {
        match r.source {
            Source::SwarmDownOut(p) | Source::SwarmUpIn(p) => port = port.max(Some(p)),
            Source::Wafer(w) => wafer = wafer.max(Some(w)),
            _ => {}
        }
    }
    let from_wafers = wafer.map_or(0, |w| w + 1);
    match port {
        Some(p) => (p + 1).max(from_wafers),
        None => (SIM_SWARM_PORTS as u8).max(from_wafers),
    }
}

/// The SwarmX port of wafer `wafer` on a node of `ports` downstream ports (PORTS − 1 − w), if
/// it has one.
pub fn wafer_port(ports: u8, wafer: u8) -> Option<u8> {
    ports.checked_sub(1)?.checked_sub(wafer)
}

/// The commit cycle of an update record: the first cycle at or after its end whose low 32 bits
/// are `aux`. The streamer commits after the lanes are done (t_done ≤ t_commit,
/// docs/memoryx-store.md "Trace records").
pub fn commit_cycle(r: &Record) -> u64 {
    r.end + u64::from(r.aux.wrapping_sub(r.end as u32))
}

/// The place of a record on a chunk's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hop {
    /// Weights leaving the data mover.
    FeedWeights,
    /// Gradients leaving the data mover (a host playing the wafers).
    FeedGradients,
    /// Weights into SwarmX's broadcast.
    DownIn,
    /// Weights out of SwarmX's port p.
    DownOut(u8),
    /// Gradients into SwarmX's port p.
    UpIn(u8),
    /// Reduced gradients out of SwarmX.
    UpOut,
    /// Gradients into MemoryX's streamer.
    GradIn,
    /// The streamer's update of a chunk.
    Update,
    /// The streamer's read of a chunk for a STREAM pass.
    Read,
    /// Weights out of the streamer.
    WeightOut,
    /// Not on a path the host follows: another flit kind on a stream, a record kind a source
    /// does not make, or a wafer's FMA phase.
    Other,
}

impl Hop {
    /// Where a record sits on its chunk's path.
    pub fn of(r: &Record) -> Self {
        let w = r.flit_kind == Kind::Weight as u8;
        let g = r.flit_kind == Kind::Gradient as u8;
        match (r.kind, r.source) {
            (RecordKind::Update, Source::MxStreamer) => Self::Update,
            (RecordKind::Read, Source::MxStreamer) => Self::Read,
            (RecordKind::Chunk, Source::MoverFeed) if w => Self::FeedWeights,
            (RecordKind::Chunk, Source::MoverFeed) if g => Self::FeedGradients,
            (RecordKind::Chunk, Source::SwarmDownIn) if w => Self::DownIn,
            (RecordKind::Chunk, Source::SwarmDownOut(p)) if w => Self::DownOut(p),
            (RecordKind::Chunk, Source::SwarmUpIn(p)) if g => Self::UpIn(p),
            (RecordKind::Chunk, Source::SwarmUpOut) if g => Self::UpOut,
            (RecordKind::Chunk, Source::MxGradIn) if g => Self::GradIn,
            (RecordKind::Chunk, Source::MxWeightOut) if w => Self::WeightOut,
            _ => Self::Other,
        }
    }
}

/// (hop, layer, step, chunk): the flit kind is implied by the hop.
type Slot = (Hop, u16, u16, u16);

/// The links between the records of one trace: for each record, the records its chunk came
/// from and went to.
#[derive(Debug, Clone, Default)]
pub struct Links {
    hops: Vec<Hop>,
    from: Vec<Vec<usize>>,
    to: Vec<Vec<usize>>,
    /// Per step, the SwarmX ports that carried any chunk of it upstream.
    up_ports: HashMap<u16, BTreeSet<u8>>,
    /// The chunks into SwarmX's broadcast in the order they entered it.
    down_in: Vec<usize>,
}

impl Links {
    /// Links `records` (indices into the slice name records from here on).
    pub fn new(records: &[Record]) -> Self {
        let hops: Vec<Hop> = records.iter().map(Hop::of).collect();
        let mut slots: HashMap<Slot, Vec<usize>> = HashMap::new();
        let mut up_ports: HashMap<u16, BTreeSet<u8>> = HashMap::new();
        for (i, (r, &h)) in records.iter().zip(&hops).enumerate() {
            if let Source::SwarmUpIn(p) = r.source {
                up_ports.entry(r.step).or_default().insert(p);
            }
            if h != Hop::Other {
                slots.entry((h, r.layer, r.step, r.chunk)).or_default().push(i);
            }
        }
        for v in slots.values_mut() {
            v.sort_by_key(|&i| (records[i].begin, records[i].seq));
        }
        // The latest record of any of `group`'s slots that began at or before `at`.
        let latest = |group: &[Slot], at: &Record| -> Option<usize> {
            group
                .iter()
                .filter_map(|s| slots.get(s))
                .filter_map(|v| {
                    let n = v.partition_point(|&i| records[i].begin <= at.begin);
                    n.checked_sub(1).map(|k| v[k])
                })
                .max_by_key(|&i| (records[i].begin, records[i].seq))
        };
        let mut from = vec![Vec::new(); records.len()];
        let mut to = vec![Vec::new(); records.len()];
        for (i, r) in records.iter().enumerate() {
            let (l, s, c) = (r.layer, r.step, r.chunk);
            let groups: Vec<Vec<Slot>> = match hops[i] {
                Hop::DownIn => vec![vec![(Hop::FeedWeights, l, s, c), (Hop::WeightOut, l, s, c)]],
                Hop::DownOut(_) => vec![vec![(Hop::DownIn, l, s, c)]],
                Hop::UpIn(_) => vec![vec![(Hop::FeedGradients, l, s, c)]],
                // A reduce sums one chunk from each port.
                Hop::UpOut => (0..MAX_PORTS).map(|p| vec![(Hop::UpIn(p), l, s, c)]).collect(),
                Hop::GradIn => vec![vec![(Hop::UpOut, l, s, c), (Hop::FeedGradients, l, s, c)]],
                Hop::Update => vec![vec![(Hop::GradIn, l, s, c)]],
                Hop::WeightOut => {
                    vec![vec![(Hop::Update, l, s.wrapping_sub(1), c), (Hop::Read, l, s, c)]]
                }
                Hop::FeedWeights | Hop::FeedGradients | Hop::Read | Hop::Other => Vec::new(),
            };
            for g in &groups {
                if let Some(p) = latest(g, r) {
                    from[i].push(p);
                    to[p].push(i);
                }
            }
        }
        for v in &mut to {
            v.sort_unstable();
        }
        let mut down_in: Vec<usize> = (0..records.len()).filter(|&i| hops[i] == Hop::DownIn).collect();
        down_in.sort_by_key(|&i| (records[i].begin, records[i].seq));
        Self { hops, from, to, up_ports, down_in }
    }

    /// Where record `i` sits on its chunk's path.
    pub fn hop(&self, i: usize) -> Hop {
        self.hops[i]
    }

    /// The records record `i`'s chunk came from (one per port into a reduce).
    pub fn from(&self, i: usize) -> &[usize] {
        &self.from[i]
    }

    /// The records record `i`'s chunk went to (one per port out of a broadcast).
    pub fn to(&self, i: usize) -> &[usize] {
        &self.to[i]
    }

    /// Every link, (from, to), ordered by `from` then `to`.
    pub fn edges(&self) -> Vec<(usize, usize)> {
        (0..self.to.len()).flat_map(|a| self.to[a].iter().map(move |&b| (a, b))).collect()
    }

    /// The SwarmX ports that carried any chunk of `step` upstream.
    pub fn up_ports(&self, step: u16) -> Vec<u8> {
        self.up_ports.get(&step).map(|s| s.iter().copied().collect()).unwrap_or_default()
    }

    /// The SwarmX ports broadcast chunk `i` ([`Hop::DownIn`]) left on.
    fn reached(&self, i: usize) -> BTreeSet<u8> {
        self.to[i]
            .iter()
            .filter_map(|&j| match self.hops[j] {
                Hop::DownOut(p) => Some(p),
                _ => None,
            })
            .collect()
    }

    /// For a weight chunk into SwarmX's broadcast (record `i`, [`Hop::DownIn`]): the ports
    /// that the chunks entering just before and just after it both left on, but it did not.
    /// The node changes its port mask only between chunks and a job keeps one mask, while
    /// jobs with the same step may use different wafers (the last evaluation batch takes
    /// fewer), so a chunk's neighbours, not its step, say where it should have gone.
    pub fn missing_ports(&self, i: usize) -> Vec<u8> {
        let reached = self.reached(i);
        let Some(k) = self.down_in.iter().position(|&j| j == i) else { return Vec::new() };
        let prev = k.checked_sub(1).map(|k| self.reached(self.down_in[k]));
        let next = self.down_in.get(k + 1).map(|&j| self.reached(j));
        let expected = match (prev, next) {
            (Some(a), Some(b)) => a.intersection(&b).copied().collect(),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => BTreeSet::new(),
        };
        expected.into_iter().filter(|p| !reached.contains(p)).collect()
    }

    /// The links as flow arrows: chains of records where the path neither splits nor joins
    /// (one link out, and that link the only one into the next record), and the links at a
    /// broadcast or a reduce as chains of two. Ordered by the first record's begin, then seq.
    pub fn chains(&self, records: &[Record]) -> Vec<Vec<usize>> {
        let straight = |a: usize, b: usize| self.to[a].len() == 1 && self.from[b].len() == 1;
        let continues = |a: usize| self.to[a].len() == 1 && straight(a, self.to[a][0]);
        let continued = |b: usize| self.from[b].len() == 1 && straight(self.from[b][0], b);
        let mut chains = Vec::new();
        for a in 0..records.len() {
            if continues(a) && !continued(a) {
                let mut chain = vec![a];
                let mut cur = a;
                // The hops form a DAG (the path order above), so this ends.
                while continues(cur) {
                    cur = self.to[cur][0];
                    chain.push(cur);
                }
                chains.push(chain);
            }
        }
        for (a, b) in self.edges() {
            if !straight(a, b) {
                chains.push(vec![a, b]);
            }
        }
        chains.sort_by_cached_key(|c| {
            (records[c[0]].begin, c.iter().map(|&i| records[i].seq).collect::<Vec<_>>())
        });
        chains
    }
}
