use super::*;
use crate::link::{frame_len, DecodeError};
use std::vec;

/// A stream of `n` DATA frames on channels 2..=4 with payloads of 0..600 bytes (multiples of
/// 4 on bulk channels), seq counting per channel, plus an ACK-only frame every 7th.
fn frames(n: usize, seed: u64) -> Vec<(Header, Vec<u8>)> {
    let mut rng = Rng(seed | 1);
    let mut seq = [0u32; CHANNELS];
    (0..n)
        .map(|i| {
            let ch = Channel::ALL[2 + (rng.below(3) as usize)];
            if i % 7 == 6 {
                let mut h = Header::new(ch, flags::ACK);
                h.ack = i as u32;
                h.credit = 1 << 20;
                return (h, Vec::new());
            }
            let len = 4 * rng.below(150) as usize;
            let payload: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let mut h = Header::new(ch, flags::DATA);
            h.length = len as u32;
            h.seq = seq[ch as usize];
            seq[ch as usize] += 1;
            (h, payload)
        })
        .collect()
}

fn encode_all(fs: &[(Header, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (h, p) in fs {
        let mut buf = vec![0u8; frame_len(p.len())];
        let n = encode_frame(h, p, &mut buf).unwrap();
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// Pushes `wire` through `inj` in chunks of random size, ticking once per chunk.
fn through(inj: &mut Injector, wire: &[u8], seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed | 1);
    let mut out = Vec::new();
    let mut rest = wire;
    let mut now = 0;
    while !rest.is_empty() {
        let n = (1 + rng.below(3000) as usize).min(rest.len());
        inj.push(&rest[..n], now, &mut out);
        rest = &rest[n..];
        now += 1;
    }
    out
}

/// What a receiver decodes: the frames and the errors.
fn decode(wire: &[u8]) -> (Vec<(Header, Vec<u8>)>, Vec<DecodeError>) {
    let mut dec = Box::new(Decoder::<MAX_FRAME>::new());
    let (mut got, mut errs) = (Vec::new(), Vec::new());
    let mut rest = wire;
    loop {
        let r = dec.feed(rest);
        rest = &rest[r.consumed..];
        match r.event {
            Some(Event::Frame(f)) => got.push((f.header, f.payload.to_vec())),
            Some(Event::Error(e)) => errs.push(e),
            None => break,
        }
    }
    (got, errs)
}

/// Every fault that hit a payload is exactly one `BadPayloadCrc` on its channel; every one
/// that hit a header is a `BadHeaderCrc`, and the decoder may add a few more of those: after
/// a refusal it rescans the frame's own bytes, where a random "WS" is a false candidate.
fn check_detection(s: &FaultStats, errs: &[DecodeError], wire_bytes: usize, what: &str) {
    // A false candidate needs "WS" at a rescanned position: 1 in 65 536, generously bounded.
    let slack = 3 + wire_bytes as u64 / 8192;
    for ch in Channel::ALL {
        let bad = errs
            .iter()
            .filter(|e| matches!(e, DecodeError::BadPayloadCrc { channel, .. } if *channel == ch))
            .count();
        assert_eq!(bad as u64, s.payload_hits[ch as usize], "{what}: payload CRC errors on {ch:?}");
    }
    let hdr = errs.iter().filter(|e| matches!(e, DecodeError::BadHeaderCrc)).count() as u64;
    assert!(
        hdr >= s.header_hits && hdr <= s.header_hits + slack,
        "{what}: {hdr} header CRC errors for {} hits",
        s.header_hits
    );
    assert_eq!(
        errs.len() as u64,
        hdr + s.payload_hits.iter().sum::<u64>(),
        "{what}: only CRC errors expected: {errs:?}"
    );
    assert_eq!(
        s.header_hits + s.payload_hits.iter().sum::<u64>(),
        s.total(Kind::Flip) + s.total(Kind::Truncate)
    );
}

#[test]
fn rules_parse_and_render() {
    let r = Rule::parse("both:flip:rate=0.01:ch=2,3").unwrap();
    assert_eq!((r.dirs, r.kind, r.channels), ([true, true], Kind::Flip, 0b1100));
    assert_eq!(r.when, When::Rate(0.01));
    assert_eq!(rule_text(&r), "both:flip:rate=0.01:ch=2,3");
    let r = Rule::parse("h2b:delay:every=10:delay=500").unwrap();
    assert_eq!((r.when.clone(), r.delay), (When::Every(10), 500));
    assert_eq!(rule_text(&r), "h2b:delay:every=10:delay=500");
    let r = Rule::parse("b2h:dup:at=9,3").unwrap();
    assert_eq!(r.when, When::At(vec![3, 9]));
    assert_eq!(parse_rules("h2b:drop:every=3; b2h:trunc:rate=1").unwrap().len(), 2);
    for (bad, why) in [
        ("up:flip:rate=0.1", "direction `up`"),
        ("h2b:melt:rate=0.1", "kind `melt`"),
        ("h2b:flip", "WHEN is missing"),
        ("h2b:flip:rate=2", "outside 0..=1"),
        ("h2b:flip:every=0", "every `0`"),
        ("h2b:flip:rate=0.1:ch=9", "channel `9`"),
        ("h2b:flip:rate=0.1:speed=3", "option `speed=3`"),
    ] {
        let e = Rule::parse(bad).unwrap_err();
        assert!(e.contains(why) && e.contains("DIR:KIND:WHEN"), "{bad}: {e}");
    }
}

#[test]
fn without_rules_the_stream_is_copied_untouched() {
    let mut wire = encode_all(&frames(200, 1));
    wire.extend_from_slice(b"not a frame at all");
    let mut inj = Injector::new(Dir::ToBoard, &[Rule::parse("b2h:drop:rate=1").unwrap()], 1);
    assert!(!inj.is_active(), "a b2h rule does not apply to h2b");
    assert_eq!(through(&mut inj, &wire, 2), wire);
}

#[test]
fn every_flip_and_every_truncation_is_exactly_one_crc_error() {
    for (spec, kind) in [("h2b:flip:rate=1", Kind::Flip), ("h2b:trunc:every=2", Kind::Truncate)] {
        for seed in 0..20 {
            let sent = frames(300, seed);
            let mut inj = Injector::new(Dir::ToBoard, &parse_rules(spec).unwrap(), seed).with_log();
            let mut out = through(&mut inj, &encode_all(&sent), seed);
            // A clean tail flushes a truncated frame the decoder is still waiting on.
            out.extend_from_slice(&encode_all(&frames(40, 99)[..]));
            let (got, errs) = decode(&out);
            let n = inj.stats().total(kind);
            assert!(n > 0);
            check_detection(inj.stats(), &errs, out.len(), &format!("{spec} seed {seed}"));
            assert_eq!(got.len() as u64, 300 + 40 - n, "{spec} seed {seed}");
            assert_eq!(inj.log().len() as u64, n);
        }
    }
}

#[test]
fn drops_and_dups_remove_and_repeat_exactly_the_logged_frames() {
    let sent = frames(500, 7);
    let rules = parse_rules("h2b:drop:at=0,10,11,499 h2b:dup:every=50").unwrap();
    let mut inj = Injector::new(Dir::ToBoard, &rules, 3).with_log();
    let (got, errs) = decode(&through(&mut inj, &encode_all(&sent), 4));
    assert!(errs.is_empty());
    let mut want = Vec::new();
    for (i, f) in sent.iter().enumerate() {
        match i {
            0 | 10 | 11 | 499 => {}
            _ if (i + 1) % 50 == 0 => {
                want.push(f.clone());
                want.push(f.clone());
            }
            _ => want.push(f.clone()),
        }
    }
    assert_eq!(got, want);
    assert_eq!(inj.stats().total(Kind::Drop), 4);
    // Frame 499 is both dropped and every 50th: the first rule that fires wins.
    assert_eq!(inj.stats().total(Kind::Dup), 9);
    assert_eq!(
        inj.log()[0],
        Injected { kind: Kind::Drop, channel: sent[0].0.channel, flags: flags::DATA, seq: 0 }
    );
}

#[test]
fn a_delay_holds_the_frame_and_everything_behind_it() {
    let sent = frames(6, 5);
    let wire = encode_all(&sent);
    let rules = parse_rules("h2b:delay:at=1:delay=10").unwrap();
    let mut inj = Injector::new(Dir::ToBoard, &rules, 1);
    let mut out = Vec::new();
    inj.push(&wire, 100, &mut out);
    let (got, _) = decode(&out);
    assert_eq!(got, sent[..1].to_vec(), "only the frame before the delayed one leaves");
    assert!(inj.holding());
    inj.poll(109, &mut out);
    assert_eq!(decode(&out).0.len(), 1);
    inj.poll(110, &mut out);
    assert_eq!(decode(&out).0, sent, "all of it, in order, once the delay is over");
    assert!(!inj.holding());
}

#[test]
fn channel_filters_and_frame_counts_are_per_rule() {
    let sent = frames(400, 11);
    let rules = parse_rules("h2b:drop:every=2:ch=3").unwrap();
    let mut inj = Injector::new(Dir::ToBoard, &rules, 1);
    let (got, _) = decode(&through(&mut inj, &encode_all(&sent), 2));
    let on3: Vec<_> = sent.iter().filter(|f| f.0.channel == Channel::Gradients).collect();
    let kept3 = got.iter().filter(|f| f.0.channel == Channel::Gradients).count();
    assert_eq!(kept3, on3.len() - on3.len() / 2);
    assert_eq!(got.len(), sent.len() - on3.len() / 2);
    assert_eq!(inj.stats().injected[Kind::Drop as usize][3], (on3.len() / 2) as u64);
}

#[test]
fn mixed_faults_at_rates_account_for_every_frame() {
    for seed in 0..10 {
        let sent = frames(2000, seed + 100);
        let rules =
            parse_rules("both:flip:rate=0.01 both:drop:rate=0.01 both:dup:rate=0.001 both:trunc:rate=0.005")
                .unwrap();
        let mut inj = Injector::new(Dir::ToHost, &rules, seed);
        let mut out = through(&mut inj, &encode_all(&sent), seed);
        out.extend_from_slice(&encode_all(&frames(40, 99)));
        let (got, errs) = decode(&out);
        let s = inj.stats();
        assert_eq!(s.frames, 2000);
        check_detection(s, &errs, out.len(), &format!("seed {seed}"));
        let expect = 2000 + 40 + s.total(Kind::Dup)
            - s.total(Kind::Drop)
            - s.total(Kind::Flip)
            - s.total(Kind::Truncate);
        assert_eq!(got.len() as u64, expect, "seed {seed}: {}", s.summary());
    }
}
