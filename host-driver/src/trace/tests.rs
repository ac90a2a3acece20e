//! The trace on synthetic records: a two-wafer training step built through `Record::encode`,
//! and the same step broken in each way the check must catch.

use serde_json::Value;
use ws_common::flit::Kind;
use ws_common::trace::{Record, RecordKind, Source, RECORD_BYTES};

use super::*;

const FLITS: u16 = 16;
const STEP: u16 = 5;
const W: u8 = Kind::Weight as u8;
const G: u8 = Kind::Gradient as u8;

pub(in crate::trace) fn rec(
    kind: RecordKind,
    source: Source,
    flit_kind: u8,
    layer: u16,
    chunk: u16,
    begin: u64,
    len: u64,
) -> Record {
    Record {
        kind,
        source,
        begin,
        end: begin + len - 1,
        flits: FLITS,
        flit_kind,
        layer,
        step: STEP,
        chunk,
        seq: 0,
        aux: 0,
    }
}

fn chunk(source: Source, flit_kind: u8, layer: u16, chunk_: u16, begin: u64) -> Record {
    rec(RecordKind::Chunk, source, flit_kind, layer, chunk_, begin, u64::from(FLITS))
}

/// Numbers records as the unit does: in the order their spans end.
fn numbered(mut rs: Vec<Record>) -> Vec<Record> {
    rs.sort_by_key(|r| (r.end, r.begin, r.source.id()));
    for (i, r) in rs.iter_mut().enumerate() {
        r.seq = i as u32;
    }
    rs
}

/// One weight pass of a chunk: mover → SwarmX → ports 3 and 2.
fn weight_pass(rs: &mut Vec<Record>, layer: u16, c: u16, t: u64) {
    rs.push(chunk(Source::MoverFeed, W, layer, c, t));
    rs.push(chunk(Source::SwarmDownIn, W, layer, c, t + 1));
    rs.push(chunk(Source::SwarmDownOut(3), W, layer, c, t + 3));
    rs.push(chunk(Source::SwarmDownOut(2), W, layer, c, t + 3));
}

/// Step 5 of a 2-layer MLP on two wafers (SwarmX ports 3 and 2), two chunks a layer: the
/// forward pass's weights (layers 0, 1), then per layer from the last the backward pass's
/// weights and the gradients up both ports, reduced, updated, and the new weights out.
fn two_wafer_step() -> Vec<Record> {
    let mut rs = Vec::new();
    let gap = u64::from(FLITS) + 4;
    let mut t = 1000;
    for layer in 0..2 {
        for c in 0..2 {
            weight_pass(&mut rs, layer, c, t);
            t += gap;
        }
    }
    t += 200;
    for layer in (0..2).rev() {
        for c in 0..2 {
            weight_pass(&mut rs, layer, c, t);
            t += gap;
        }
        t += 50;
        for c in 0..2 {
            rs.push(chunk(Source::SwarmUpIn(3), G, layer, c, t));
            rs.push(chunk(Source::SwarmUpIn(2), G, layer, c, t + 2));
            rs.push(chunk(Source::SwarmUpOut, G, layer, c, t + 5));
            rs.push(chunk(Source::MxGradIn, G, layer, c, t + 6));
            // First gradient in to the last result out of the lanes, then the commit.
            let mut upd =
                rec(RecordKind::Update, Source::MxStreamer, G, layer, c, t + 6, 86 + u64::from(FLITS));
            upd.aux = (upd.end + 30) as u32;
            rs.push(upd);
            let mut out = chunk(Source::MxWeightOut, W, layer, c, t + 6 + 86);
            out.step = STEP + 1;
            rs.push(out);
            t += gap;
        }
        t += 150;
    }
    numbered(rs)
}

fn trace_of(rs: &[Record]) -> Trace {
    Trace::from_bytes(&to_bytes(rs))
}

fn seq_of(rs: &[Record], f: impl Fn(&Record) -> bool) -> u32 {
    rs.iter().find(|r| f(r)).expect("a matching record").seq
}

fn events<'a>(json: &'a Value, ph: &str) -> Vec<&'a Value> {
    json["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == ph).collect()
}

/// (pid, tid) → "process / thread".
fn track_names(json: &Value) -> std::collections::HashMap<(u64, u64), String> {
    let meta = events(json, "M");
    let pname = |pid: u64| {
        meta.iter()
            .find(|e| e["name"] == "process_name" && e["pid"] == pid)
            .map(|e| e["args"]["name"].as_str().unwrap().to_string())
            .unwrap()
    };
    meta.iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| {
            let (pid, tid) = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            ((pid, tid), format!("{} / {}", pname(pid), e["args"]["name"].as_str().unwrap()))
        })
        .collect()
}

#[test]
fn pieces_of_any_size_decode_alike() {
    let rs = two_wafer_step();
    let bytes = to_bytes(&rs);
    let whole = Trace::from_bytes(&bytes);
    assert_eq!(whole.records, rs);
    assert!(whole.lost.is_empty() && whole.duplicates.is_empty() && whole.trailing_bytes == 0);
    for size in [1, 7, 31, 32, 33, 100] {
        let mut log = TraceLog::new();
        let done: usize = bytes.chunks(size).map(|p| log.push(p)).sum();
        assert_eq!(done, rs.len());
        assert_eq!(log.pending(), 0);
        assert_eq!(log.finish(), whole, "pieces of {size}");
    }
}

#[test]
fn records_are_ordered_by_seq() {
    let rs = two_wafer_step();
    let mut shuffled = rs.clone();
    shuffled.reverse();
    shuffled.swap(3, 17);
    assert_eq!(trace_of(&shuffled).records, rs);
}

#[test]
fn a_partial_trailing_record_is_kept_and_reported() {
    let rs = two_wafer_step();
    let mut bytes = to_bytes(&rs);
    bytes.extend_from_slice(&to_bytes(&rs[..1])[..5]);
    let mut log = TraceLog::new();
    log.push(&bytes[..bytes.len() - 3]);
    assert_eq!(log.pending(), 2);
    log.push(&bytes[bytes.len() - 3..]);
    assert_eq!(log.pending(), 5);
    let t = log.finish();
    assert_eq!(t.records.len(), rs.len());
    assert_eq!(t.trailing_bytes, 5);
    let report = check(&t);
    assert_eq!(report.errors().cloned().collect::<Vec<_>>(), vec![Problem::Trailing { bytes: 5 }]);
    assert!(report.to_string().contains("5 bytes into a record"), "{report}");
}

#[test]
fn undecodable_records_name_their_offset() {
    let rs = two_wafer_step();
    let mut bytes = to_bytes(&rs);
    // Record 3's kind byte (word 1, byte 0).
    bytes[3 * RECORD_BYTES + 4] = 9;
    let t = Trace::from_bytes(&bytes);
    assert_eq!(t.records.len(), rs.len() - 1);
    let e = t.undecodable[0];
    assert_eq!(e.offset, 96);
    assert_eq!(e.to_string(), "the record at byte 96 of the trace does not decode: unknown record kind 9");
    let report = check(&t);
    assert!(report.errors().any(|p| *p == Problem::Undecodable(e)));
    // Its seq is missing from the ordered records too.
    assert!(report.errors().any(|p| matches!(p, Problem::Lost { count: 1, .. })));
}

#[test]
fn a_clean_step_passes_the_check() {
    let t = trace_of(&two_wafer_step());
    let report = check(&t);
    assert!(report.problems.is_empty(), "{report}");
    assert!(check_perfetto(&to_perfetto(&t, Clock::default())).problems.is_empty());
    assert!(report.into_result().is_ok());
}

#[test]
fn links_follow_each_chunk() {
    let rs = two_wafer_step();
    let links = Links::new(&rs);
    let find = |source: Source, layer: u16, c: u16, nth: usize| {
        rs.iter()
            .enumerate()
            .filter(|(_, r)| r.source == source && r.layer == layer && r.chunk == c)
            .nth(nth)
            .map(|(i, _)| i)
            .unwrap()
    };
    // The backward pass's weights (the second pass of L1 c0) link to their own pass.
    let feed = find(Source::MoverFeed, 1, 0, 1);
    let down_in = find(Source::SwarmDownIn, 1, 0, 1);
    assert_eq!(links.from(down_in), [feed]);
    let mut ports: Vec<Source> = links.to(down_in).iter().map(|&j| rs[j].source).collect();
    ports.sort();
    assert_eq!(ports, [Source::SwarmDownOut(2), Source::SwarmDownOut(3)]);
    // The gradients: two ports into one reduce, then straight on to the new weights.
    let up_out = find(Source::SwarmUpOut, 0, 1, 0);
    assert_eq!(links.from(up_out).len(), 2);
    let grad_in = links.to(up_out)[0];
    let update = links.to(grad_in)[0];
    let out = links.to(update)[0];
    assert_eq!(
        (rs[update].kind, rs[out].source, rs[out].step),
        (RecordKind::Update, Source::MxWeightOut, STEP + 1)
    );
    let chains = links.chains(&rs);
    assert!(chains.contains(&vec![up_out, grad_in, update, out]));
    // 8 weight passes: mover → down-in, then one arrow per port; 4 gradient chunks: one arrow
    // per port into the reduce, then one chain.
    assert_eq!(chains.len(), 8 * 3 + 4 * 3);
}

#[test]
fn the_perfetto_json_has_the_tracks_slices_and_flows() {
    let rs = two_wafer_step();
    let t = trace_of(&rs);
    let text = json_text(&to_perfetto(&t, Clock::default()));
    assert!(text.starts_with("{\"traceEvents\": [\n{"), "{}", &text[..40]);
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json, to_perfetto(&t, Clock::default()));
    assert_eq!(json["displayTimeUnit"], "ns");
    assert_eq!(json["metadata"]["records"], rs.len());
    assert_eq!(json["metadata"]["lost_records"], 0);
    assert_eq!(json["metadata"]["clock_hz"], DEFAULT_CLOCK_HZ);

    let names = track_names(&json);
    let mut all: Vec<&str> = names.values().map(String::as_str).collect();
    all.sort();
    assert_eq!(
        all,
        [
            "Data mover / feed",
            "MemoryX / gradients in",
            "MemoryX / updates",
            "MemoryX / updates #2",
            "MemoryX / weights out",
            "SwarmX / gradients out (reduced)",
            "SwarmX / weights in (broadcast)",
            "Wafer 0 (SwarmX port 3) / gradients out",
            "Wafer 0 (SwarmX port 3) / weights in",
            "Wafer 1 (SwarmX port 2) / gradients out",
            "Wafer 1 (SwarmX port 2) / weights in",
        ]
    );

    let slices = events(&json, "X");
    assert_eq!(slices.len(), rs.len());
    let track = |e: &Value| names[&(e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap())].clone();
    // The first record: the forward pass's first weight chunk leaving the mover, at time 0,
    // 16 cycles of 20 ns.
    let first = slices.iter().find(|e| e["args"]["seq"] == 0).unwrap();
    assert_eq!(first["name"], "L0 c0 weights");
    assert_eq!(track(first), "Data mover / feed");
    assert_eq!((first["ts"].as_f64().unwrap() * 1000.0) as i64, 0);
    assert_eq!((first["dur"].as_f64().unwrap() * 1000.0) as i64, 320);
    for k in ["layer", "chunk", "step", "flits", "seq", "begin_cycle", "end_cycle"] {
        assert!(first["args"].get(k).is_some(), "{k}");
    }
    assert_eq!(first["args"]["begin_cycle"], 1000);
    let upd = slices.iter().find(|e| e["cat"] == "update").unwrap();
    assert_eq!(upd["name"], "L1 c0 update");
    let r = rs.iter().find(|r| r.kind == RecordKind::Update).unwrap();
    assert_eq!(upd["args"]["commit_cycle"], r.end + 30);

    let (s, tt, f) = (events(&json, "s"), events(&json, "t"), events(&json, "f"));
    assert_eq!((s.len(), tt.len(), f.len()), (36, 8, 36));
    assert!(f.iter().all(|e| e["bp"] == "e"));
    // A gradient chain runs up-out → gradients in → update → weights out.
    let id = s.iter().find(|e| track(e) == "SwarmX / gradients out (reduced)").unwrap()["id"].clone();
    let path: Vec<String> =
        events(&json, "s").into_iter().chain(tt).chain(f).filter(|e| e["id"] == id).map(track).collect();
    assert_eq!(
        path,
        [
            "SwarmX / gradients out (reduced)",
            "MemoryX / gradients in",
            "MemoryX / updates",
            "MemoryX / weights out"
        ]
    );

    // The reduce counter: a chunk's first flits arrive while the chunk before drains (up-out
    // ends 21 cycles after port 3's first flit; the next chunk comes 20 cycles later), and it
    // ends empty.
    let reduce: Vec<i64> = events(&json, "C")
        .iter()
        .filter(|e| e["name"] == "reduce")
        .map(|e| e["args"]["chunks in flight"].as_i64().unwrap())
        .collect();
    assert_eq!(reduce.iter().max(), Some(&2));
    assert_eq!(reduce.last(), Some(&0));
    let updates: Vec<i64> = events(&json, "C")
        .iter()
        .filter(|e| e["name"] == "updates")
        .map(|e| e["args"]["chunks in flight"].as_i64().unwrap())
        .collect();
    assert_eq!(updates.iter().max(), Some(&2), "the streamer overlaps two chunks");
    assert_eq!(updates.last(), Some(&0));
}

#[test]
fn the_json_is_deterministic() {
    let t = trace_of(&two_wafer_step());
    let a = serde_json::to_string(&to_perfetto(&t, Clock::default())).unwrap();
    let b = serde_json::to_string(&to_perfetto(&t, Clock::default())).unwrap();
    assert_eq!(a, b);
}

#[test]
fn times_survive_perfettos_truncation() {
    // 7 cycles at 50 MHz: 140 ns, as Perfetto reads it back.
    let ns = Clock::default().ns(7);
    assert_eq!(ns, 140);
    for ns in 0..100_000u64 {
        let us = (ns as f64 + 0.5) / 1000.0;
        assert_eq!((us * 1000.0) as u64, ns);
    }
    assert_eq!(Clock::new(33_000_000).unwrap().ns(1), 30);
    assert!(matches!(Clock::new(0), Err(TraceError::Clock { hz: 0 })));
    assert!(Clock::new(MAX_CLOCK_HZ + 1).is_err());
}

#[test]
fn a_chunk_that_never_leaves_the_reduce_is_caught() {
    let rs = two_wafer_step();
    let gone = seq_of(&rs, |r| r.source == Source::SwarmUpOut && r.layer == 0 && r.chunk == 1);
    let kept: Vec<Record> = rs.iter().filter(|r| r.seq != gone).copied().collect();
    // Renumbered, so that only the missing reduce is wrong.
    let kept = numbered(kept);
    let t = trace_of(&kept);
    let report = check(&t);
    let not_reduced: Vec<(u8, u32)> = report
        .errors()
        .filter_map(|p| match p {
            Problem::NotReduced { port, seq, key } => {
                assert_eq!((key.layer, key.step, key.chunk, key.flit_kind), (0, STEP, 1, G));
                Some((*port, *seq))
            }
            _ => None,
        })
        .collect();
    let up_in = |p| seq_of(&kept, |r| r.source == Source::SwarmUpIn(p) && r.layer == 0 && r.chunk == 1);
    assert_eq!(not_reduced.len(), 2, "{report}");
    assert!(not_reduced.contains(&(3, up_in(3))) && not_reduced.contains(&(2, up_in(2))));
    let msg = report.to_string();
    assert!(msg.contains(&format!("entered SwarmX's reduce on port 3 (record {})", up_in(3))), "{msg}");
    assert!(matches!(report.into_result(), Err(TraceError::CheckFailed { .. })));
    // The counter shows it stuck.
    let json = to_perfetto(&t, Clock::default());
    let last = events(&json, "C").into_iter().rfind(|e| e["name"] == "reduce").unwrap().clone();
    assert_eq!(last["args"]["chunks in flight"], 1);
}

#[test]
fn overlapping_spans_on_one_source_are_caught() {
    let mut rs = two_wafer_step();
    // Port 3's second forward chunk starts inside its first.
    let first = rs.iter().position(|r| r.source == Source::SwarmDownOut(3)).unwrap();
    let second =
        rs.iter().enumerate().skip(first + 1).find(|(_, r)| r.source == Source::SwarmDownOut(3)).unwrap().0;
    let shift = rs[second].begin - (rs[first].end - 2);
    rs[second].begin -= shift;
    rs[second].end -= shift;
    let (a, b) = (rs[first].seq, rs[second].seq);
    let t = trace_of(&rs);
    let report = check(&t);
    assert!(
        report
            .errors()
            .any(|p| matches!(p, Problem::Overlap { hop: Source::SwarmDownOut(3), seq, other, .. }
            if *seq == b && *other == a)),
        "{report}"
    );
    assert!(report.to_string().contains(&format!("before record {a} there ends")));
    // The timeline still opens: the overlapping span gets a thread of its own.
    let json = to_perfetto(&t, Clock::default());
    assert!(track_names(&json).values().any(|n| n == "Wafer 0 (SwarmX port 3) / weights in #2"));
    assert!(check_perfetto(&json).problems.is_empty());
}

#[test]
fn a_seq_gap_is_reported_as_lost() {
    let rs = two_wafer_step();
    let kept: Vec<Record> = rs.iter().filter(|r| !(10..=12).contains(&r.seq)).copied().collect();
    let t = trace_of(&kept);
    assert_eq!(t.lost.ranges, vec![10..=12]);
    assert_eq!(t.lost.count(), 3);
    let report = check(&t);
    assert_eq!(report.problems[0], Problem::Lost { count: 3, ranges: vec![10..=12] });
    assert!(report.to_string().contains("3 record(s) lost on the board (seq 10..=12)"));
    // What the lost records leave behind is put in context.
    assert_eq!(report.notes().last(), Some(&Problem::Incomplete));
    let json = to_perfetto(&t, Clock::default());
    assert_eq!(json["metadata"]["lost_records"], 3);
    assert_eq!(json["metadata"]["lost_seq"], "10..=12");
    // Missing from the start counts too, and a repeated seq is its own error.
    let mut late = rs[2..].to_vec();
    late.push(rs[5]);
    let t = trace_of(&late);
    assert_eq!(t.lost.ranges, vec![0..=1]);
    assert_eq!(t.duplicates, vec![5]);
    assert!(check(&t).errors().any(|p| *p == Problem::Duplicate { seq: 5 }));
}

#[test]
fn a_flow_without_a_finish_is_caught() {
    let t = trace_of(&two_wafer_step());
    let mut json = to_perfetto(&t, Clock::default());
    let list = json["traceEvents"].as_array_mut().unwrap();
    let at = list.iter().position(|e| e["ph"] == "f").unwrap();
    let (id, start_seq) = {
        let id = list[at]["id"].as_u64().unwrap();
        let s = list.iter().find(|e| e["ph"] == "s" && e["id"] == id).unwrap();
        (id, s["args"]["seq"].as_u64().unwrap())
    };
    list.remove(at);
    let report = check_perfetto(&json);
    assert_eq!(report.problems, vec![Problem::FlowUnfinished { id, seq: start_seq }]);
    assert_eq!(
        report.problems[0].to_string(),
        format!("flow {id} starts at record {start_seq} but never finishes")
    );
}

#[test]
fn flows_outside_their_slice_are_caught() {
    let t = trace_of(&two_wafer_step());
    let mut json = to_perfetto(&t, Clock::default());
    let list = json["traceEvents"].as_array_mut().unwrap();
    let s = list.iter_mut().find(|e| e["ph"] == "s").unwrap();
    s["ts"] = serde_json::json!(1e9);
    let report = check_perfetto(&json);
    assert!(matches!(report.problems[..], [Problem::FlowUnbound { .. }]), "{report}");
    assert!(matches!(check_perfetto(&serde_json::json!({})).problems[..], [Problem::BadJson(_)]));
}

#[test]
fn other_broken_paths_are_caught() {
    let rs = two_wafer_step();
    // Port 2 misses a forward weight chunk: not broadcast to every port of its step.
    let gone = seq_of(&rs, |r| r.source == Source::SwarmDownOut(2) && r.layer == 1);
    let down_in = seq_of(&rs, |r| r.source == Source::SwarmDownIn && r.layer == 1);
    let t = trace_of(&numbered(rs.iter().filter(|r| r.seq != gone).copied().collect()));
    let down_in = t.records.iter().find(|r| r.begin == rs[down_in as usize].begin).unwrap().seq;
    let report = check(&t);
    assert!(
        report.errors().any(|p| matches!(p, Problem::NotBroadcast { seq, missing, .. }
            if *seq == down_in && missing == &[2])),
        "{report}"
    );

    // A gradient chunk into MemoryX that is never updated, and its weights with it.
    let gone: Vec<u32> = rs
        .iter()
        .filter(|r| {
            (r.source == Source::MxStreamer || r.source == Source::MxWeightOut)
                && r.layer == 1
                && r.chunk == 0
        })
        .map(|r| r.seq)
        .collect();
    let t = trace_of(&numbered(rs.iter().filter(|r| !gone.contains(&r.seq)).copied().collect()));
    let report = check(&t);
    assert_eq!(report.errors().count(), 1, "{report}");
    assert!(matches!(
        report.problems[0],
        Problem::NotUpdated { key: ChunkKey { layer: 1, chunk: 0, .. }, .. }
    ));

    // A reduce over port 3 alone is a note, and a weight-out with no update an error.
    let gone = seq_of(&rs, |r| r.source == Source::SwarmUpIn(2) && r.layer == 0 && r.chunk == 0);
    let mut kept: Vec<Record> = rs.iter().filter(|r| r.seq != gone).copied().collect();
    let out =
        kept.iter_mut().find(|r| r.source == Source::MxWeightOut && r.layer == 0 && r.chunk == 0).unwrap();
    out.step = 9;
    let t = trace_of(&numbered(kept));
    let report = check(&t);
    assert!(report.notes().any(|p| matches!(p, Problem::PartialReduce { summed, all, .. }
        if summed == &[3] && all == &[2, 3])));
    assert!(report.errors().any(|p| matches!(p, Problem::Orphan { hop: Source::MxWeightOut, .. })));
    assert!(report.errors().any(|p| matches!(p, Problem::NoWeightsOut { what: "updated", layer: 0, .. })));
}

#[test]
fn an_empty_capture_is_an_error() {
    let report = check(&Trace::from_bytes(&[]));
    assert_eq!(report.problems, vec![Problem::Empty]);
    assert!(summary_table(&summarize(&Trace::default()), Clock::default()).starts_with("records  0 (0 lost)"));
}

#[test]
fn the_summary_counts_busy_cycles_and_phases() {
    let rs = two_wafer_step();
    let t = trace_of(&rs);
    let s = summarize(&t);
    assert_eq!(s.records, rs.len());
    let first = rs.iter().map(|r| r.begin).min().unwrap();
    let last = rs.iter().map(|r| r.end).max().unwrap();
    assert_eq!((s.first_cycle, s.last_cycle, s.span_cycles), (Some(first), Some(last), last - first + 1));
    let use_of = |src| s.sources.iter().find(|u| u.source == src).unwrap();
    // 8 weight passes of 16 flits, back to back with gaps.
    assert_eq!(use_of(Source::MoverFeed).busy_cycles, 8 * 16);
    assert_eq!(use_of(Source::SwarmUpOut).busy_cycles, 4 * 16);
    let u = use_of(Source::SwarmUpOut);
    assert!((u.utilisation - 64.0 / s.span_cycles as f64).abs() < 1e-12);
    // Two updates of a layer overlap: their union, not their sum.
    let upd = rs.iter().filter(|r| r.kind == RecordKind::Update && r.layer == 1).collect::<Vec<_>>();
    let one_layer = upd[1].end - upd[0].begin + 1;
    assert_eq!(use_of(Source::MxStreamer).busy_cycles, 2 * one_layer);
    // Layer 1 of step 5 starts with its forward weights and ends with its last update.
    let p = s.phases.iter().find(|p| (p.layer, p.step) == (1, STEP)).unwrap();
    let l1: Vec<&Record> = rs.iter().filter(|r| r.layer == 1 && r.step == STEP).collect();
    assert_eq!(p.first_cycle, l1.iter().map(|r| r.begin).min().unwrap());
    assert_eq!(p.last_cycle, l1.iter().map(|r| r.end).max().unwrap());
    assert!(p.weights.unwrap().0 < p.gradients.unwrap().0);
    // The new weights are step 6's.
    assert!(s.phases.iter().any(|p| p.step == STEP + 1 && p.gradients.is_none()));
    let table = summary_table(&s, Clock::default());
    assert!(table.contains("records  56 (0 lost)"), "{table}");
    assert!(table.contains("SwarmX up out"), "{table}");
    assert!(table.contains("at 50 MHz"), "{table}");
}

#[test]
fn captures_round_trip_through_a_file() {
    let rs = two_wafer_step();
    let dir = std::env::temp_dir().join(format!("ws-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("step.wstrace");
    write_capture(&path, &to_bytes(&rs)).unwrap();
    assert_eq!(read_capture(&path).unwrap().records, rs);
    let json_path = dir.join("step.json");
    write_json(&json_path, &to_perfetto(&trace_of(&rs), Clock::default())).unwrap();
    let back: Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    assert_eq!(back["metadata"]["records"], rs.len());
    std::fs::remove_dir_all(&dir).unwrap();
    let e = read_capture(&dir.join("missing.wstrace")).unwrap_err();
    assert!(e.to_string().contains("raw bytes of link channel 6"), "{e}");
}

#[test]
fn a_hop_without_records_is_a_note_not_an_error() {
    // Port probes off for the reduce's output: the gradients' way up is not followed.
    let rs = two_wafer_step();
    let t = trace_of(&numbered(rs.iter().filter(|r| r.source != Source::SwarmUpOut).copied().collect()));
    let report = check(&t);
    assert!(report.is_ok(), "{report}");
    assert_eq!(
        report.notes().cloned().collect::<Vec<_>>(),
        vec![Problem::Untraced { have: "SwarmX up in", missing: "SwarmX up out" }]
    );
    // Nor does the timeline count the reduce's chunks as stuck.
    let json = to_perfetto(&t, Clock::default());
    assert!(events(&json, "C").iter().all(|e| e["name"] != "reduce"));
    assert!(events(&json, "C").iter().any(|e| e["name"] == "broadcast"));
}

#[test]
fn the_board_counts_must_match_the_capture() {
    use ws_common::ctrl::cmd::TraceState;
    let rs = two_wafer_step();
    let full = trace_of(&rs);
    let bytes = (rs.len() * RECORD_BYTES) as u32;
    let state = TraceState {
        start: 0xffff_ff00,
        head: 0xffff_ff00u32.wrapping_add(bytes),
        records: rs.len() as u32,
        ..Default::default()
    };
    assert!(check_board(&full, &state).problems.is_empty());
    let json = to_perfetto(&full, Clock::default());
    assert!(check_capture(&full, &json, Some(&state)).problems.is_empty());
    // The host stopped reading early.
    let short = trace_of(&rs[..10]);
    assert!(matches!(check_board(&short, &state).problems[..], [Problem::ShortCapture { got: 320, .. }]));
    // The board lost two records the host does not see as gaps.
    let lost = TraceState { lost: 2, active: true, ..state };
    let r = check_board(&full, &lost);
    assert_eq!(r.problems, vec![Problem::StillActive, Problem::LostMismatch { board: 2, host: 0 }]);
    assert_eq!(r.errors().count(), 1);
}

#[test]
fn the_capture_goes_beside_its_timeline() {
    assert_eq!(
        capture_beside(std::path::Path::new("out/run.json")).unwrap(),
        std::path::Path::new("out/run.wstrace")
    );
    assert!(matches!(capture_beside(std::path::Path::new("run.wstrace")), Err(TraceError::SamePath { .. })));
}

#[test]
fn a_job_on_fewer_wafers_is_not_a_missing_port() {
    // An evaluation's last batch runs on one wafer (port 3) after batches on two, all at
    // step 0: its chunks reach port 3 alone, and only a chunk that misses a port both its
    // neighbours reached is an error.
    let gap = u64::from(FLITS) + 4;
    let pass = |plan: &[(u16, &[u8])]| {
        let mut rs = Vec::new();
        for (k, &(c, ports)) in plan.iter().enumerate() {
            let t = 1000 + k as u64 * gap;
            rs.push(chunk(Source::SwarmDownIn, W, 0, c, t));
            for &p in ports {
                rs.push(chunk(Source::SwarmDownOut(p), W, 0, c, t + 2));
            }
        }
        trace_of(&numbered(rs))
    };
    let report = check(&pass(&[(0, &[3, 2]), (1, &[3, 2]), (2, &[3]), (3, &[3])]));
    assert!(!report.errors().any(|p| matches!(p, Problem::NotBroadcast { .. })), "{report}");
    // Chunk 1 without port 2 between two chunks that reached it: an error, on chunk 1 alone.
    let t = pass(&[(0, &[3, 2]), (1, &[3]), (2, &[3, 2])]);
    let c1 = t.records.iter().find(|r| r.source == Source::SwarmDownIn && r.chunk == 1).unwrap().seq;
    let broken: Vec<_> = check(&t)
        .problems
        .into_iter()
        .filter_map(|p| match p {
            Problem::NotBroadcast { seq, missing, .. } => Some((seq, missing)),
            _ => None,
        })
        .collect();
    assert_eq!(broken, vec![(c1, vec![2])]);
}
