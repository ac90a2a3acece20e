//! Unit tests of the go-back-N state machines, and a randomized test of sender and receiver
//! over a lossy byte stream framed by the real encoder and decoder.

use super::*;
use crate::link::{encode_frame, flags, frame_len, Channel, DecodeError, Decoder, Event, Header, MAX_FRAME};
use std::collections::VecDeque;
use std::vec::Vec;

const RTO: u64 = 10;

fn tx(s: &mut Sender<8>, now: u64) -> Vec<Transmit> {
    core::iter::from_fn(|| s.poll_transmit(now)).collect()
}

#[test]
fn in_order_delivery_and_cumulative_ack() {
    let mut s = Sender::<8>::new(4, 1000, RTO);
    let mut r = Receiver::new(1000, 4, 100, 5);
    for _ in 0..3 {
        s.queue(100).unwrap();
    }
    let sent = tx(&mut s, 0);
    assert_eq!(
        sent.iter().map(|t| (t.seq, t.offset, t.retx)).collect::<Vec<_>>(),
        [(0, 0, false), (1, 100, false), (2, 200, false)]
    );
    assert_eq!(r.on_data(0, 100, 0), RxDecision::Accept { offset: 0 });
    assert!(!r.ack_due(0));
    assert_eq!(r.on_data(1, 100, 0), RxDecision::Accept { offset: 100 });
    // window / 2 = 2 frames: an ACK is due.
    assert!(r.ack_due(0));
    let a = r.ack(false, 0);
    assert_eq!(a, AckInfo { ack: 2, credit: 1000, nak: false });
    let e = s.on_ack(a.ack, a.credit, a.nak);
    assert_eq!((e.frames, e.bytes, e.went_back), (2, 200, false));
    assert_eq!(r.on_data(2, 100, 1), RxDecision::Accept { offset: 200 });
    // The delayed ACK for a lone frame.
    assert!(!r.ack_due(5));
    assert!(r.ack_due(6));
    s.on_ack(r.ack(false, 0).ack, 1000, false);
    assert!(s.is_idle());
    assert_eq!(s.acked_bytes(), 300);
}

#[test]
fn window_limits_frames_in_flight() {
    let mut s = Sender::<8>::new(3, u32::MAX / 2, RTO);
    for _ in 0..3 {
        s.queue(1).unwrap();
    }
    assert_eq!(s.queue(1), Err(Stall::Window(3)));
    tx(&mut s, 0);
    s.on_ack(1, u32::MAX / 2, false);
    assert!(s.queue(1).is_ok());
    // A window larger than W is clamped.
    assert_eq!(Sender::<8>::new(100, 0, RTO).window(), 8);
}

#[test]
fn credit_exhaustion_stalls_and_release_reopens() {
    let mut s = Sender::<8>::new(8, 250, RTO);
    let mut r = Receiver::new(250, 8, 100, 1000);
    s.queue(100).unwrap();
    s.queue(100).unwrap();
    assert_eq!(s.queue(100), Err(Stall::Credit { need: 100, have: 50 }));
    assert_eq!(s.stats().credit_stalls, 1);
    assert!(s.queue(50).is_ok());
    assert_eq!(s.queue(1), Err(Stall::Credit { need: 1, have: 0 }));
    for t in tx(&mut s, 0) {
        assert!(matches!(r.on_data(t.seq, t.len, 0), RxDecision::Accept { .. }));
    }
    // Committed but not released: no credit growth, and the ACK (if sent) keeps 250.
    let a = r.ack(false, 0);
    assert_eq!(a.credit, 250);
    s.on_ack(a.ack, a.credit, false);
    assert!(s.queue(1).is_err());
    // The consumer frees 10 bytes: the peer has less than a frame of credit left, so even this
    // small growth is acknowledged at once.
    r.release(10);
    assert!(r.ack_due(0));
    let a = r.ack(false, 0);
    assert_eq!(a.credit, 260);
    s.on_ack(a.ack, a.credit, false);
    assert!(s.queue(10).is_ok());
    assert!(s.queue(1).is_err());
    // Release is bounded by what was committed.
    r.release(10_000);
    assert_eq!(r.credit(), 250 + 250);
}

#[test]
fn a_lost_credit_grant_to_an_idle_sender_is_refreshed() {
    let mut s = Sender::<8>::new(8, 100, RTO);
    let mut r = Receiver::new(100, 8, 100, 2);
    s.queue(100).unwrap();
    let t = tx(&mut s, 0);
    assert!(matches!(r.on_data(t[0].seq, 100, 0), RxDecision::Accept { .. }));
    let a = r.ack(false, 2);
    s.on_ack(a.ack, a.credit, false);
    assert!(s.is_idle() && s.queue(1).is_err());
    // The consumer frees the buffer; the ACK with the new credit is lost. The sender has
    // nothing outstanding, so it has no timeout to fall back on.
    r.release(100);
    assert!(r.ack_due(3));
    let _lost = r.ack(false, 3);
    assert!(!r.ack_due(3 + 7));
    // First refresh after 4 × ack_delay, then doubling intervals.
    assert!(r.ack_due(3 + 8));
    let _lost_again = r.ack(false, 11);
    assert!(!r.ack_due(11 + 15));
    assert!(r.ack_due(11 + 16));
    let a = r.ack(false, 27);
    assert_eq!(a.credit, 200);
    s.on_ack(a.ack, a.credit, false);
    s.queue(50).unwrap();
    let t = tx(&mut s, 28);
    // A frame past the old credit proves the grant arrived: the refresh stops.
    assert!(matches!(r.on_data(t[0].seq, 50, 28), RxDecision::Accept { .. }));
    r.ack(false, 28);
    assert!(!r.ack_due(10_000));
}

#[test]
fn a_sender_past_its_credit_is_refused_like_a_bad_crc() {
    let mut r = Receiver::new(100, 8, 100, 10);
    assert_eq!(r.on_data(0, 101, 0), RxDecision::Gap { nak: true });
    assert_eq!(r.stats().credit_violations, 1);
    assert_eq!(r.on_data(0, 100, 0), RxDecision::Accept { offset: 0 });
}

#[test]
fn gap_naks_once_then_go_back_recovers() {
    let mut s = Sender::<8>::new(8, 10_000, RTO);
    let mut r = Receiver::new(10_000, 8, 100, 100);
    for _ in 0..5 {
        s.queue(10).unwrap();
    }
    let sent = tx(&mut s, 0);
    // Frame 1 is lost.
    assert!(matches!(r.on_data(sent[0].seq, 10, 0), RxDecision::Accept { .. }));
    assert_eq!(r.on_data(2, 10, 0), RxDecision::Gap { nak: true });
    assert_eq!(r.on_data(3, 10, 0), RxDecision::Gap { nak: false });
    assert_eq!(r.on_bad_frame(), RxDecision::Gap { nak: false });
    assert_eq!(r.on_data(4, 10, 0), RxDecision::Gap { nak: false });
    let nak = r.ack(true, 0);
    assert_eq!(nak, AckInfo { ack: 1, credit: 10_000, nak: true });
    let e = s.on_ack(nak.ack, nak.credit, true);
    assert_eq!((e.frames, e.went_back), (1, true));
    // A copy of the same NAK does not rewind again.
    assert!(!s.on_ack(nak.ack, nak.credit, true).went_back);
    let again = tx(&mut s, 1);
    assert_eq!(
        again.iter().map(|t| (t.seq, t.retx)).collect::<Vec<_>>(),
        [(1, true), (2, true), (3, true), (4, true)]
    );
    for t in again {
        assert!(matches!(r.on_data(t.seq, t.len, 1), RxDecision::Accept { .. }));
    }
    assert_eq!(r.expected(), 5);
    assert_eq!(s.stats().retransmits, 4);
}

#[test]
fn lost_nak_is_repaired_by_the_timeout() {
    let mut s = Sender::<8>::new(8, 10_000, RTO);
    let mut r = Receiver::new(10_000, 8, 100, 100);
    s.queue(10).unwrap();
    s.queue(10).unwrap();
    tx(&mut s, 0);
    // Frame 0 lost; frame 1 makes the receiver NAK, and the NAK is lost too.
    assert_eq!(r.on_data(1, 10, 0), RxDecision::Gap { nak: true });
    let _lost = r.ack(true, 0);
    assert!(!s.on_tick(RTO - 1));
    assert!(s.on_tick(RTO));
    // The timer restarted: no second rewind on the next tick.
    assert!(!s.on_tick(RTO + 1));
    let again = tx(&mut s, RTO);
    assert_eq!(again.iter().map(|t| t.seq).collect::<Vec<_>>(), [0, 1]);
    for t in again {
        assert!(matches!(r.on_data(t.seq, t.len, RTO), RxDecision::Accept { .. }));
    }
    assert_eq!(s.stats().timeouts, 1);
}

#[test]
fn lost_ack_is_repaired_by_a_later_ack_or_by_a_duplicate() {
    let mut s = Sender::<8>::new(8, 10_000, RTO);
    let mut r = Receiver::new(10_000, 2, 100, 100);
    s.queue(10).unwrap();
    tx(&mut s, 0);
    assert!(matches!(r.on_data(0, 10, 0), RxDecision::Accept { .. }));
    let _lost = r.ack(false, 0);
    // Timeout: frame 0 again. The receiver sees a duplicate and re-ACKs.
    assert!(s.on_tick(RTO));
    let t = tx(&mut s, RTO);
    assert_eq!(r.on_data(t[0].seq, 10, RTO), RxDecision::Duplicate);
    assert!(r.ack_due(RTO));
    let a = r.ack(false, 0);
    assert_eq!(s.on_ack(a.ack, a.credit, false).frames, 1);
    assert!(s.is_idle());
    assert_eq!(r.stats().duplicates, 1);
}

#[test]
fn stale_and_bogus_acks_are_ignored() {
    let mut s = Sender::<8>::new(8, 1000, RTO);
    for _ in 0..4 {
        s.queue(10).unwrap();
    }
    tx(&mut s, 0);
    assert_eq!(s.on_ack(3, 1000, false).frames, 3);
    // A reordered older ACK with older credit.
    let e = s.on_ack(1, 900, false);
    assert!(e.ignored);
    assert_eq!(s.credit(), 1000);
    // An ack past anything sent.
    assert!(s.on_ack(9, 1000, false).ignored);
    // A NAK with nothing outstanding is harmless.
    assert_eq!(
        s.on_ack(4, 1000, true),
        AckEffect { frames: 1, bytes: 10, went_back: false, ignored: false, sent_at: Some(0) }
    );
    assert_eq!(s.stats().stale_acks, 2);
}

#[test]
fn duplicated_and_reordered_frames() {
    let mut r = Receiver::new(10_000, 8, 100, 100);
    // Frames 0, 2, 1, 1, 0, 2 arrive.
    assert!(matches!(r.on_data(0, 5, 0), RxDecision::Accept { offset: 0 }));
    assert_eq!(r.on_data(2, 5, 0), RxDecision::Gap { nak: true });
    assert!(matches!(r.on_data(1, 5, 0), RxDecision::Accept { offset: 5 }));
    assert_eq!(r.on_data(1, 5, 0), RxDecision::Duplicate);
    assert_eq!(r.on_data(0, 5, 0), RxDecision::Duplicate);
    // 2 was dropped as a gap; its retransmission is accepted.
    assert!(matches!(r.on_data(2, 5, 0), RxDecision::Accept { offset: 10 }));
    assert_eq!(r.committed(), 15);
}

#[test]
fn sequence_numbers_and_byte_counts_wrap() {
    let seq0 = u32::MAX - 2;
    let byte0 = u32::MAX - 15;
    let mut s = Sender::<8>::resume(seq0, byte0, 8, byte0.wrapping_add(100), RTO);
    let mut r = Receiver::resume(seq0, byte0, 100, 8, 10, 100);
    let mut offsets = Vec::new();
    for _ in 0..6 {
        offsets.push(s.queue(10).unwrap().offset);
    }
    assert_eq!(offsets[2], byte0.wrapping_add(20));
    let sent = tx(&mut s, 0);
    assert_eq!(sent.iter().map(|t| t.seq).collect::<Vec<_>>(), [seq0, seq0 + 1, seq0 + 2, 0, 1, 2]);
    // Lose the frame at seq 0 (after the wrap).
    for t in &sent {
        if t.seq == 0 {
            continue;
        }
        let d = r.on_data(t.seq, t.len, 0);
        if seq_lt(t.seq, 0) {
            assert_eq!(d, RxDecision::Accept { offset: t.offset });
        } else {
            assert!(matches!(d, RxDecision::Gap { .. }));
        }
    }
    let nak = r.ack(true, 0);
    assert_eq!(nak.ack, 0);
    assert!(s.on_ack(nak.ack, nak.credit, true).went_back);
    for t in tx(&mut s, 1) {
        assert_eq!(r.on_data(t.seq, t.len, 1), RxDecision::Accept { offset: t.offset });
    }
    assert_eq!(r.expected(), 3);
    assert_eq!(r.committed(), byte0.wrapping_add(60));
    let a = r.ack(false, 0);
    s.on_ack(a.ack, a.credit, false);
    assert!(s.is_idle());
    assert_eq!(s.acked_bytes(), byte0.wrapping_add(60));
}

// ---- Randomized: sender and receiver over a lossy framed byte stream ----

/// xorshift64*, so the test needs no dependency and replays from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// True with probability `ppm` per million.
    fn chance(&mut self, ppm: u64) -> bool {
        self.below(1_000_000) < ppm
    }
}

/// Fault rates in parts per million, per frame.
#[derive(Clone, Copy)]
struct Faults {
    drop: u64,
    dup: u64,
    flip: u64,
    truncate: u64,
    reorder: u64,
}

/// One direction of the wire: frames in flight for one tick, then a byte stream.
struct Wire {
    frames: Vec<Vec<u8>>,
    injected: u64,
}

impl Wire {
    fn send(&mut self, rng: &mut Rng, f: Faults, mut bytes: Vec<u8>) {
        if rng.chance(f.drop) {
            self.injected += 1;
            return;
        }
        if rng.chance(f.flip) {
            let bit = rng.below(bytes.len() as u64 * 8) as usize;
            bytes[bit / 8] ^= 1 << (bit % 8);
            self.injected += 1;
        }
        if rng.chance(f.truncate) {
            let keep = rng.below(bytes.len() as u64) as usize;
            bytes.truncate(keep);
            self.injected += 1;
        }
        if rng.chance(f.dup) {
            self.frames.push(bytes.clone());
            self.injected += 1;
        }
        if !self.frames.is_empty() && rng.chance(f.reorder) {
            let at = self.frames.len() - 1;
            self.frames.insert(at, bytes);
            self.injected += 1;
        } else {
            self.frames.push(bytes);
        }
    }

    /// The tick's bytes, cut in random pieces as a transport would deliver them.
    fn deliver(&mut self, rng: &mut Rng) -> Vec<Vec<u8>> {
        let all: Vec<u8> = self.frames.drain(..).flatten().collect();
        let mut out = Vec::new();
        let mut rest = &all[..];
        while !rest.is_empty() {
            let n = (1 + rng.below(3000) as usize).min(rest.len());
            out.push(rest[..n].to_vec());
            rest = &rest[n..];
        }
        out
    }
}

fn frame(h: Header, payload: &[u8]) -> Vec<u8> {
    let mut out = std::vec![0u8; frame_len(payload.len())];
    encode_frame(&h, payload, &mut out).unwrap();
    out
}

/// Decodes one piece fully.
fn decode_piece<const N: usize>(
    dec: &mut Decoder<N>,
    piece: &[u8],
    mut on: impl FnMut(Result<(Header, &[u8]), DecodeError>),
) {
    let mut input = piece;
    loop {
        let r = dec.feed(input);
        input = &input[r.consumed..];
        match r.event {
            Some(Event::Frame(f)) => on(Ok((f.header, f.payload))),
            Some(Event::Error(e)) => on(Err(e)),
            None => break,
        }
    }
}

/// Runs one transfer and returns (ticks, sender stats, receiver stats).
fn transfer(seed: u64, faults: Faults) -> (u64, SenderStats, ReceiverStats) {
    let mut rng = Rng(seed | 1);
    let ch = Channel::Gradients;
    let total = 20_000 + rng.below(60_000) as usize;
    let data: Vec<u8> = (0..total).map(|_| rng.next() as u8).collect();
    let max_payload = 1 + rng.below(1024) as u32;
    let window = 1 + rng.below(16) as u16;
    let buffer = max_payload + rng.below(8 * max_payload as u64) as u32;
    let ack_delay = 1 + rng.below(3);
    let rto = ack_delay + 4 + rng.below(6);
    // Start near the wrap of both seq and byte spaces.
    let seq0 = u32::MAX - rng.below(40) as u32;
    let byte0 = u32::MAX - rng.below(50_000) as u32;

    let mut tx = Sender::<16>::resume(seq0, byte0, window, byte0.wrapping_add(buffer), rto);
    let mut rx = Receiver::resume(seq0, byte0, buffer, window, max_payload, ack_delay);
    let (mut fwd, mut back) =
        (Wire { frames: Vec::new(), injected: 0 }, Wire { frames: Vec::new(), injected: 0 });
    let mut rx_dec = Decoder::<MAX_FRAME>::new();
    let mut tx_dec = Decoder::<MAX_FRAME>::new();
    let mut queued = 0usize;
    let mut out: Vec<u8> = Vec::with_capacity(total);
    // Bytes committed but not yet released by the (sometimes slow) consumer.
    let mut unreleased: VecDeque<u32> = VecDeque::new();

    for now in 0..200_000u64 {
        // Sender: admit what window and credit allow, then put up to 6 frames on the wire.
        while queued < total {
            let len = (1 + rng.below(max_payload as u64) as usize).min(total - queued) as u32;
            match tx.queue(len) {
                Ok(q) => {
                    assert_eq!(q.offset.wrapping_sub(byte0) as usize, queued);
                    queued += len as usize;
                }
                Err(_) => break,
            }
        }
        for _ in 0..6 {
            let Some(t) = tx.poll_transmit(now) else { break };
            let at = t.offset.wrapping_sub(byte0) as usize;
            let fl = flags::DATA | if t.retx { flags::RETX } else { 0 };
            let h = Header { seq: t.seq, ..Header::new(ch, fl) };
            fwd.send(&mut rng, faults, frame(h, &data[at..at + t.len as usize]));
        }
        // Receiver.
        for piece in fwd.deliver(&mut rng) {
            let mut naks = 0;
            decode_piece(&mut rx_dec, &piece, |ev| {
                let d = match ev {
                    Ok((h, p)) => {
                        assert_eq!(h.channel, ch);
                        let d = rx.on_data(h.seq, h.length, now);
                        if let RxDecision::Accept { offset } = d {
                            assert_eq!(offset.wrapping_sub(byte0) as usize, out.len());
                            let o = out.len();
                            if p != &data[o..o + p.len()] {
                                panic!(
                                    "seed {seed:#x}: frame seq {} len {} at {o} differs; flags {:#x}; {:?}",
                                    h.seq, h.length, h.flags, p
                                );
                            }
                            out.extend_from_slice(p);
                            unreleased.push_back(p.len() as u32);
                        }
                        d
                    }
                    Err(DecodeError::BadPayloadCrc { channel, .. }) if channel == ch => rx.on_bad_frame(),
                    Err(_) => RxDecision::Gap { nak: false },
                };
                if d == (RxDecision::Gap { nak: true }) {
                    naks += 1;
                }
            });
            for _ in 0..naks {
                let a = rx.ack(true, now);
                let h = Header { ack: a.ack, credit: a.credit, ..Header::new(ch, flags::ACK | flags::NAK) };
                back.send(&mut rng, faults, frame(h, &[]));
            }
        }
        // A consumer that stalls now and then.
        if !rng.chance(300_000) {
            for _ in 0..rng.below(4) {
                if let Some(n) = unreleased.pop_front() {
                    rx.release(n);
                }
            }
        }
        if rx.ack_due(now) {
            let a = rx.ack(false, now);
            let h = Header { ack: a.ack, credit: a.credit, ..Header::new(ch, flags::ACK) };
            back.send(&mut rng, faults, frame(h, &[]));
        }
        // Sender hears ACKs and NAKs.
        for piece in back.deliver(&mut rng) {
            decode_piece(&mut tx_dec, &piece, |ev| {
                if let Ok((h, _)) = ev {
                    tx.on_ack(h.ack, h.credit, h.has(flags::NAK));
                }
            });
        }
        tx.on_tick(now);
        if out.len() == total && tx.is_idle() {
            if let Some(i) = out.iter().zip(&data).position(|(a, b)| a != b) {
                panic!("seed {seed:#x}: delivered bytes differ from byte {i} of {total}");
            }
            assert_eq!(rx.committed(), byte0.wrapping_add(total as u32));
            return (now, *tx.stats(), *rx.stats());
        }
    }
    panic!(
        "seed {seed:#x}: transfer did not finish: {} of {} bytes, sender {:?}, receiver {:?}",
        out.len(),
        total,
        tx.stats(),
        rx.stats()
    );
}

#[test]
fn lossless_transfer_needs_no_retransmission() {
    let none = Faults { drop: 0, dup: 0, flip: 0, truncate: 0, reorder: 0 };
    for seed in 0..8u64 {
        let (_, s, r) = transfer(0x1234_5678 + seed * 0x9e37_79b9, none);
        assert_eq!(s.retransmits, 0, "seed {seed}");
        assert_eq!((r.duplicates, r.gaps, r.bad_frames), (0, 0, 0));
    }
}

#[test]
fn lossy_transfers_are_byte_identical() {
    // Well past the 1 % flips, 1 % drops, 0.1 % duplicates.
    let faults = Faults { drop: 30_000, dup: 10_000, flip: 30_000, truncate: 10_000, reorder: 10_000 };
    let mut recovered = 0;
    // WS_GBN_SEEDS=1000 for a longer soak.
    let seeds = std::env::var("WS_GBN_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(40u64);
    for seed in 0..seeds {
        let (_, s, r) = transfer(0xdead_beef ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15), faults);
        recovered += s.retransmits;
        assert!(r.frames > 0);
    }
    assert!(recovered > 0, "the faults never forced a retransmission");
}

#[test]
fn very_lossy_transfer_still_completes() {
    let faults = Faults { drop: 200_000, dup: 100_000, flip: 100_000, truncate: 50_000, reorder: 100_000 };
    for seed in 0..6u64 {
        transfer(0x5eed_0000 + seed, faults);
    }
}

#[test]
fn acks_give_rtt_samples_only_for_frames_sent_once() {
    let mut s = Sender::<8>::new(8, 10_000, RTO);
    for _ in 0..3 {
        s.queue(100).unwrap();
    }
    tx(&mut s, 5);
    // The newest frame the ack covers (seq 1) was sent once, at tick 5.
    assert_eq!(s.on_ack(2, 10_000, false).sent_at, Some(5));
    // Seq 2 times out and goes out again: its ack gives no sample (Karn's rule).
    assert!(s.on_tick(5 + RTO));
    let again = tx(&mut s, 20);
    assert_eq!(again.iter().map(|t| (t.seq, t.retx)).collect::<Vec<_>>(), [(2, true)]);
    assert_eq!(s.on_ack(3, 10_000, false).sent_at, None);
    // An ack that moves nothing gives nothing.
    assert_eq!(s.on_ack(3, 10_000, false).sent_at, None);
    // A timeout restarts the timer, and an ack arriving before the resend still gives none.
    s.queue(100).unwrap();
    tx(&mut s, 30);
    assert!(s.on_tick(30 + RTO));
    assert_eq!(s.on_ack(4, 10_000, false).sent_at, None);
}

#[test]
fn rtt_estimator_follows_rfc_6298() {
    let mut e = RttEstimator::new(1_000_000, 1_000, 10_000_000);
    assert_eq!((e.rto(), e.srtt()), (1_000_000, None));
    // First sample: SRTT = R, RTTVAR = R/2, RTO = SRTT + 4 RTTVAR (§2.2).
    e.sample(400_000);
    assert_eq!((e.srtt(), e.rto()), (Some(400_000), 400_000 + 4 * 200_000));
    // Then RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|, SRTT = 7/8 SRTT + 1/8 R (§2.3).
    e.sample(200_000);
    let rttvar = 200_000 - 50_000 + 50_000;
    let srtt = 400_000 - 50_000 + 25_000;
    assert_eq!((e.srtt(), e.rto()), (Some(srtt), srtt + 4 * rttvar));
    // A steady link converges to its round trip, never below the minimum.
    for _ in 0..200 {
        e.sample(300);
    }
    assert_eq!(e.rto(), 1_000);
    // Timeouts double the RTO up to the maximum (§5.5).
    e.backoff();
    assert_eq!(e.rto(), 2_000);
    for _ in 0..40 {
        e.backoff();
    }
    assert_eq!(e.rto(), 10_000_000);
    // A bad configuration (min above max, zero) still gives a usable timer.
    assert_eq!(RttEstimator::new(0, 50, 10).rto(), 10);
    assert_eq!(RttEstimator::new(0, 0, 0).rto(), 1);
}
