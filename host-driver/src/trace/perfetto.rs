//! The timeline as Trace Event Format JSON (the JSON object form), which ui.perfetto.dev and
//! chrome://tracing open.
//!
//! Layout, top to bottom (`process_sort_index`), a thread per hop:
//!
//! | process | threads |
//! |---|---|
//! | MemoryX | gradients in, updates, stream reads, weights out |
//! | Data mover | feed |
//! | SwarmX | weights in (broadcast), gradients out (reduced) |
//! | Wafer w (SwarmX port p) | weights in (SwarmX down-out p), gradients out (SwarmX up-in p), `FMAs: instr n` per program instruction n |
//!
//! Wafer w sits on port p = PORTS − 1 − w, PORTS the node's downstream ports as the capture
//! shows them ([`swarm_ports`]). A wafer the capture gives no port (w ≥ PORTS) gets a process
//! of its own, "Wafer w FMAs". A wafer's phases overlap each other (its PEs run skewed), so each
//! instruction index has its own thread, where they do not.
//!
//! Every record is a complete slice (`"ph": "X"`). The streamer overlaps consecutive chunks
//! (docs/memoryx-store.md "Timing"), and a slice must nest in or follow the one before it on
//! its thread, so spans that overlap go to extra threads of the same hop ("updates #2"). A
//! stream hop never needs one unless its records are wrong, which [`super::check()`] reports.
//!
//! Flow arrows follow each chunk ([`super::links`]); counters count the chunks in flight in
//! SwarmX's broadcast and reduce and in MemoryX (gradients in, not yet updated).
//!
//! Time is in microseconds from the trace's first cycle. Perfetto's importer turns a number
//! of microseconds into nanoseconds by truncating `ts * 1000`, and binary fractions are
//! rarely exact, so each time is written as the middle of its nanosecond: the truncation then
//! lands on the nanosecond meant, and a slice that starts where the one before it ends does not
//! overlap it by a nanosecond.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::{json, Map, Value};
use ws_common::mesh::TAG_NONE;
use ws_common::trace::{PhaseOp, Record, RecordKind, Source, MAX_PORTS};

use super::links::{commit_cycle, kind_name, swarm_ports, wafer_port, Hop, Links};
use super::{Clock, Trace, TraceError};

const MX_PID: u32 = 1;
const MOVER_PID: u32 = 2;
const SWARM_PID: u32 = 3;
/// Port p's process: the wafer behind SwarmX port p.
const PORT_PID_BASE: u32 = 16;
/// Wafer w's own process, for a wafer with no SwarmX port on a node of the capture's ports.
const FMA_PID_BASE: u32 = PORT_PID_BASE + MAX_PORTS as u32;

/// Where a record goes: a process, and a hop's place among the process's threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Place {
    pid: u32,
    order: u32,
}

/// A record's place and its thread's name. A wafer's phases go to the process of its SwarmX
/// port, one thread per instruction index after the port's two: the phases of one wafer
/// overlap (its PEs run skewed), those of one instruction do not.
fn place(r: &Record, ports: u8) -> (Place, Cow<'static, str>) {
    let (pid, order, name) = match (r.source, r.kind) {
        (Source::MxGradIn, _) => (MX_PID, 0, "gradients in".into()),
        (Source::MxStreamer, RecordKind::Update) => (MX_PID, 1, "updates".into()),
        (Source::MxStreamer, RecordKind::Read) => (MX_PID, 2, "stream reads".into()),
        (Source::MxStreamer, RecordKind::Chunk | RecordKind::Phase) => (MX_PID, 3, "streamer".into()),
        (Source::MxWeightOut, _) => (MX_PID, 4, "weights out".into()),
        (Source::MoverFeed, _) => (MOVER_PID, 0, "feed".into()),
        (Source::SwarmDownIn, _) => (SWARM_PID, 0, "weights in (broadcast)".into()),
        (Source::SwarmUpOut, _) => (SWARM_PID, 1, "gradients out (reduced)".into()),
        (Source::SwarmDownOut(p), _) => (PORT_PID_BASE + u32::from(p), 0, "weights in".into()),
        (Source::SwarmUpIn(p), _) => (PORT_PID_BASE + u32::from(p), 1, "gradients out".into()),
        (Source::Wafer(w), _) => {
            let pid = match wafer_port(ports, w) {
                Some(p) => PORT_PID_BASE + u32::from(p),
                None => FMA_PID_BASE + u32::from(w),
            };
            (pid, 2 + u32::from(r.chunk), format!("FMAs: instr {}", r.chunk).into())
        }
    };
    (Place { pid, order }, name)
}

/// A process's name and sort index. Port p's process is named after the wafer behind it.
fn process(pid: u32, ports: u8) -> (String, u32) {
    match pid {
        MX_PID => ("MemoryX".into(), 0),
        MOVER_PID => ("Data mover".into(), 1),
        SWARM_PID => ("SwarmX".into(), 2),
        p if p >= FMA_PID_BASE => {
            let w = p - FMA_PID_BASE;
            (format!("Wafer {w} FMAs"), 3 + 2 * u32::from(MAX_PORTS) + w)
        }
        p => {
            let port = (p - PORT_PID_BASE) as u8;
            match u32::from(ports).checked_sub(1 + u32::from(port)) {
                Some(w) => (format!("Wafer {w} (SwarmX port {port})"), 3 + w),
                None => (format!("SwarmX port {port}"), 3 + u32::from(MAX_PORTS) + u32::from(port)),
            }
        }
    }
}

/// Each record's process and thread, and the threads' names.
struct Layout {
    /// Per record: (pid, tid).
    track: Vec<(u32, u32)>,
    /// (pid, tid) → thread name.
    threads: BTreeMap<(u32, u32), String>,
}

impl Layout {
    fn new(records: &[Record], ports: u8) -> Self {
        let mut by_place: BTreeMap<Place, (Cow<'static, str>, Vec<usize>)> = BTreeMap::new();
        for (i, r) in records.iter().enumerate() {
            let (p, name) = place(r, ports);
            by_place.entry(p).or_insert((name, Vec::new())).1.push(i);
        }
        let mut track = vec![(0, 0); records.len()];
        let mut threads = BTreeMap::new();
        let mut next_tid: HashMap<u32, u32> = HashMap::new();
        for (p, (name, mut idx)) in by_place {
            idx.sort_by_key(|&i| (records[i].begin, records[i].seq));
            // Greedy lanes: each span takes the first lane free by its first cycle, so lanes
            // are as few as the most spans that overlap at once.
            let mut lane_free: Vec<u64> = Vec::new();
            let mut lane_of = Vec::with_capacity(idx.len());
            for &i in &idx {
                let r = &records[i];
                let lane = match lane_free.iter().position(|&free| free <= r.begin) {
                    Some(l) => l,
                    None => {
                        lane_free.push(0);
                        lane_free.len() - 1
                    }
                };
                lane_free[lane] = r.end + 1;
                lane_of.push(lane);
            }
            let tid0 = *next_tid.entry(p.pid).or_insert(1);
            let name: &str = &name;
            for lane in 0..lane_free.len() {
                let tname = if lane == 0 { name.to_string() } else { format!("{name} #{}", lane + 1) };
                threads.insert((p.pid, tid0 + lane as u32), tname);
            }
            next_tid.insert(p.pid, tid0 + lane_free.len() as u32);
            for (&i, lane) in idx.iter().zip(lane_of) {
                track[i] = (p.pid, tid0 + lane as u32);
            }
        }
        Self { track, threads }
    }
}

/// Cycles to the timeline's microseconds (see the module doc for the half nanosecond).
struct Time {
    clock: Clock,
    origin: u64,
}

impl Time {
    fn ns(&self, cycle: u64) -> u64 {
        self.clock.ns(cycle.saturating_sub(self.origin))
    }

    fn us(ns: u64) -> f64 {
        (ns as f64 + 0.5) / 1000.0
    }

    /// A record's slice: its first cycle, and its length to the end of its last cycle.
    fn slice(&self, r: &Record) -> (u64, u64) {
        let ts = self.ns(r.begin);
        (ts, self.ns(r.end + 1) - ts)
    }
}

/// The name of a record's slice: `L{layer} c{chunk} {weights|gradients|update|read}`, and for
/// a wafer's phase `L{layer} {fwd|dx|grad|loss|op N}`, `metrics grad` for the metrics
/// reduction.
fn slice_name(r: &Record) -> String {
    let what = match r.kind {
        RecordKind::Update => "update",
        RecordKind::Read => "read",
        RecordKind::Chunk => kind_name(r.flit_kind),
        RecordKind::Phase => {
            let op = PhaseOp::from_op(r.flit_kind);
            let name = match op {
                PhaseOp::Other(n) => format!("op {n}"),
                op => op.name().to_string(),
            };
            return if r.layer == TAG_NONE {
                format!("metrics {name}")
            } else {
                format!("L{} {name}", r.layer)
            };
        }
    };
    format!("L{} c{} {what}", r.layer, r.chunk)
}

/// Chunks in flight in one block: (entered, left) cycles, `None` when the chunk never left.
struct InFlight {
    pid: u32,
    name: &'static str,
    spans: Vec<(u64, Option<u64>)>,
}

fn in_flight(records: &[Record], links: &Links) -> Vec<InFlight> {
    let mut broadcast = InFlight { pid: SWARM_PID, name: "broadcast", spans: Vec::new() };
    let mut reduce = InFlight { pid: SWARM_PID, name: "reduce", spans: Vec::new() };
    let mut updates = InFlight { pid: MX_PID, name: "updates", spans: Vec::new() };
    // Gradients into the reduce that never left it, one entry per chunk (not per port).
    let mut stuck: BTreeMap<(u16, u16, u16), u64> = BTreeMap::new();
    for (i, r) in records.iter().enumerate() {
        let last_out = links.to(i).iter().map(|&j| records[j].end + 1).max();
        match links.hop(i) {
            Hop::DownIn => {
                let done = links.missing_ports(i).is_empty();
                broadcast.spans.push((r.begin, last_out.filter(|_| done)));
            }
            Hop::UpOut => {
                let first_in = links.from(i).iter().map(|&j| records[j].begin).chain([r.begin]).min();
                reduce.spans.push((first_in.unwrap_or(r.begin), Some(r.end + 1)));
            }
            Hop::UpIn(_) if links.to(i).is_empty() => {
                let e = stuck.entry((r.layer, r.step, r.chunk)).or_insert(r.begin);
                *e = (*e).min(r.begin);
            }
            Hop::GradIn => updates.spans.push((r.begin, last_out)),
            _ => {}
        }
    }
    reduce.spans.extend(stuck.into_values().map(|b| (b, None)));
    // A block whose exit has no records at all (its probe was off) would look like it never
    // lets a chunk go: count only blocks traced at both ends.
    let traced = |exit: fn(Hop) -> bool| (0..records.len()).any(|i| exit(links.hop(i)));
    let mut blocks = Vec::new();
    if traced(|h| matches!(h, Hop::DownOut(_))) {
        blocks.push(broadcast);
    }
    if traced(|h| h == Hop::UpOut) {
        blocks.push(reduce);
    }
    if traced(|h| h == Hop::Update) {
        blocks.push(updates);
    }
    blocks.retain(|f| !f.spans.is_empty());
    blocks
}

/// The trace as Trace Event Format JSON, timed by `clock`.
pub fn to_perfetto(trace: &Trace, clock: Clock) -> Value {
    let records = &trace.records;
    let origin = trace.first_cycle().unwrap_or(0);
    let time = Time { clock, origin };
    let ports = swarm_ports(records);
    let layout = Layout::new(records, ports);
    let links = Links::new(records);
    let mut events = Vec::new();

    let pids: Vec<u32> = {
        let mut p: Vec<u32> = layout.threads.keys().map(|&(pid, _)| pid).collect();
        p.dedup();
        p
    };
    for &pid in &pids {
        let (name, sort) = process(pid, ports);
        events.push(json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}));
        events.push(
            json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}}),
        );
    }
    for (&(pid, tid), name) in &layout.threads {
        events
            .push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}));
        events.push(
            json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}}),
        );
    }

    let mut order: Vec<usize> = (0..records.len()).collect();
    order.sort_by_key(|&i| (records[i].begin, records[i].seq));
    for &i in &order {
        let r = &records[i];
        let (pid, tid) = layout.track[i];
        let (ts, dur) = time.slice(r);
        let mut args = if r.kind == RecordKind::Phase {
            json!({
                "fmas": r.aux,
                "PEs": r.flits,
                "step": r.step,
                "pc": r.chunk,
                "layer": r.layer,
                "op": r.flit_kind,
                "seq": r.seq,
                "begin_cycle": r.begin,
                "end_cycle": r.end,
            })
        } else {
            json!({
            "layer": r.layer,
            "chunk": r.chunk,
            "step": r.step,
            "flits": r.flits,
            "seq": r.seq,
            "begin_cycle": r.begin,
            "end_cycle": r.end,
            })
        };
        if r.kind == RecordKind::Update {
            args["commit_cycle"] = json!(commit_cycle(r));
        }
        let cat = match r.kind {
            RecordKind::Chunk => kind_name(r.flit_kind),
            RecordKind::Update => "update",
            RecordKind::Read => "read",
            RecordKind::Phase => "fma",
        };
        events.push(json!({
            "ph": "X", "name": slice_name(r), "cat": cat, "pid": pid, "tid": tid,
            "ts": Time::us(ts), "dur": Time::us(dur), "args": args,
        }));
    }

    for f in in_flight(records, &links) {
        let mut delta: BTreeMap<u64, i64> = BTreeMap::new();
        for (enter, leave) in &f.spans {
            *delta.entry(*enter).or_default() += 1;
            if let Some(l) = leave {
                *delta.entry(*l).or_default() -= 1;
            }
        }
        let mut n = 0i64;
        if delta.keys().next() != Some(&origin) {
            delta.insert(origin, 0);
        }
        for (cycle, d) in delta {
            n += d;
            events.push(json!({
                "ph": "C", "name": f.name, "pid": f.pid, "ts": Time::us(time.ns(cycle)),
                "args": {"chunks in flight": n},
            }));
        }
    }

    // Flow events come after every slice, and sit in the middle of their slice, so the
    // importer has opened the slice when it binds the flow to it.
    for (n, chain) in links.chains(records).iter().enumerate() {
        for (k, &i) in chain.iter().enumerate() {
            let ph = match k {
                0 => "s",
                k if k + 1 == chain.len() => "f",
                _ => "t",
            };
            let (pid, tid) = layout.track[i];
            let (ts, dur) = time.slice(&records[i]);
            events.push(json!({
                "ph": ph, "id": n + 1, "name": "chunk", "cat": "flow", "bp": "e",
                "pid": pid, "tid": tid, "ts": Time::us(ts + dur / 2), "args": {"seq": records[i].seq},
            }));
        }
    }

    let mut meta = Map::new();
    meta.insert("format".into(), json!("weightstream pipeline trace (ws_common::trace records)"));
    meta.insert("clock_hz".into(), json!(clock.hz()));
    meta.insert("origin_cycle".into(), json!(origin));
    meta.insert("records".into(), json!(records.len()));
    meta.insert("lost_records".into(), json!(trace.lost.count()));
    meta.insert("lost_seq".into(), json!(trace.lost.describe()));
    meta.insert("duplicate_seq".into(), json!(trace.duplicates));
    meta.insert("undecodable_records".into(), json!(trace.undecodable.len()));
    meta.insert("trailing_bytes".into(), json!(trace.trailing_bytes));
    json!({"traceEvents": events, "displayTimeUnit": "ns", "metadata": meta})
}

/// The JSON as text: `traceEvents` first, as every reader of the format expects, then the
/// other keys; one event per line, so a timeline can be diffed and grepped.
pub fn json_text(json: &Value) -> String {
    let text = |v: &Value| serde_json::to_string(v).expect("a serde_json::Value always serialises");
    let mut out = String::from("{\"traceEvents\": [");
    let events = json.get("traceEvents").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for (i, e) in events.iter().enumerate() {
        out.push_str(if i == 0 { "\n" } else { ",\n" });
        out.push_str(&text(e));
    }
    out.push_str("\n]");
    if let Some(obj) = json.as_object() {
        for (k, v) in obj.iter().filter(|(k, _)| *k != "traceEvents") {
            out.push_str(&format!(",\n{}: {}", text(&Value::String(k.clone())), text(v)));
        }
    }
    out.push_str("}\n");
    out
}

/// Writes the JSON to `path` ([`json_text`]).
pub fn write_json(path: &Path, json: &Value) -> Result<(), TraceError> {
    std::fs::write(path, json_text(json)).map_err(|source| TraceError::Write { path: path.into(), source })
}
