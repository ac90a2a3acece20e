//! The agents around `ws_link_tx`: the host's receiver of each bulk channel (the real
//! `gbn::Receiver` behind a lossy link), the line that carries its acks back to the DUT
//! (drops, delays, duplicates, stale and bogus values, acks for other channels), the fake RX
//! half raising ACK requests, and the firmware pushing frames into the TX FIFO.

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::RngExt;
use ws_common::link::gbn::{AckInfo, Receiver, RxDecision};
use ws_common::link::{flags, Channel, Header, MAX_CTRL_PAYLOAD};

use super::bench::byte_at;

/// How lossy the host side is.
#[derive(Debug, Clone)]
pub struct Knobs {
    /// A DATA frame is lost before the host sees it.
    pub p_drop_frame: f64,
    /// A DATA frame arrives with a bad pcrc (the host's `on_bad_frame`).
    pub p_bad_frame: f64,
    /// An ack is lost on its way back.
    pub p_drop_ack: f64,
    /// An ack arrives twice.
    pub p_dup_ack: f64,
    /// An old ack (stale values) is sent again.
    pub p_stale_ack: f64,
    /// A bogus ack (far past anything sent) follows.
    pub p_bogus_ack: f64,
    /// An ack for a channel without a TX sender (0, 1, 4, 5, 7) follows.
    pub p_foreign_ack: f64,
    /// Cycles an ack may take on the way back, beyond one (so acks reorder).
    pub delay_max: u64,
    /// Chance per cycle that the consumer frees bytes.
    pub release_rate: f64,
    /// Bytes it frees at most at a time.
    pub release_max: u32,
}

impl Knobs {
    /// A perfect link and a fast consumer.
    pub fn clean() -> Self {
        Knobs {
            p_drop_frame: 0.0,
            p_bad_frame: 0.0,
            p_drop_ack: 0.0,
            p_dup_ack: 0.0,
            p_stale_ack: 0.0,
            p_bogus_ack: 0.0,
            p_foreign_ack: 0.0,
            delay_max: 4,
            release_rate: 1.0,
            release_max: 1 << 20,
        }
    }

    /// Everything that can go wrong, often.
    pub fn lossy() -> Self {
        Knobs {
            p_drop_frame: 0.03,
            p_bad_frame: 0.02,
            p_drop_ack: 0.08,
            p_dup_ack: 0.08,
            p_stale_ack: 0.08,
            p_bogus_ack: 0.04,
            p_foreign_ack: 0.04,
            delay_max: 60,
            release_rate: 0.05,
            release_max: 2048,
        }
    }
}

/// The host's receiver of one bulk channel.
#[derive(Debug, Clone)]
pub struct Host {
    /// The golden receiver.
    pub rx: Receiver,
    /// Loss model.
    pub knobs: Knobs,
    /// NAKs it asked for.
    pub naks_sent: u64,
    /// Bytes delivered in order, checked against the stream.
    pub delivered: u64,
}

impl Host {
    /// A host receiver.
    pub fn new(rx: Receiver, knobs: Knobs) -> Self {
        Host { rx, knobs, naks_sent: 0, delivered: 0 }
    }

    /// The consumer frees some bytes now and then: the credit grows.
    pub fn consume(&mut self, rng: &mut StdRng) {
        if self.knobs.release_rate > 0.0 && rng.random_bool(self.knobs.release_rate) {
            let n = rng.random_range(1..=self.knobs.release_max);
            self.rx.release(n);
        }
    }

    /// An ACK the receiver's policy asks for now.
    pub fn poll_ack(&mut self, now: u64) -> Option<AckInfo> {
        self.rx.ack_due(now).then(|| self.rx.ack(false, now))
    }

    /// A DATA frame of slot `k` reached the host (unless the link loses it); returns a NAK to
    /// send, if any. Accepted payload must be the stream's bytes at the receiver's position.
    pub fn on_data(
        &mut self,
        rng: &mut StdRng,
        k: usize,
        seq: u32,
        off: u32,
        payload: &[u8],
        now: u64,
    ) -> Option<AckInfo> {
        if rng.random_bool(self.knobs.p_drop_frame) {
            return None;
        }
        let d = if rng.random_bool(self.knobs.p_bad_frame) {
            self.rx.on_bad_frame()
        } else {
            self.rx.on_data(seq, payload.len() as u32, now)
        };
        match d {
            RxDecision::Accept { offset } => {
                assert_eq!(offset, off, "slot {k} seq {seq}: accepted at {offset:#x}, cut at {off:#x}");
                for (i, &b) in payload.iter().enumerate() {
                    let pos = offset.wrapping_add(i as u32);
                    assert_eq!(b, byte_at(k, pos), "slot {k} seq {seq}: delivered byte at {pos:#x}");
                }
                self.delivered += payload.len() as u64;
                None
            }
            RxDecision::Duplicate => None,
            RxDecision::Gap { nak } => nak.then(|| {
                self.naks_sent += 1;
                self.rx.ack(true, now)
            }),
        }
    }
}

/// A peer ack on its way to the DUT.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    due: u64,
    /// Channel.
    pub ch: u8,
    /// `peer_ack`.
    pub ack: u32,
    /// `peer_credit`.
    pub credit: u32,
    /// `peer_nak`.
    pub nak: bool,
    /// Far past anything sent: the DUT must ignore the ack (not the credit).
    pub bogus: bool,
}

/// The acks from the host back to the DUT, at most one `peer_ack_valid` pulse per cycle.
#[derive(Debug, Default)]
pub struct AckLine {
    q: Vec<Pending>,
    history: [VecDeque<AckInfo>; 8],
    /// Pulses delivered.
    pub delivered: u64,
}

impl AckLine {
    /// Sends `info` for channel `ch`, through the loss model.
    pub fn schedule(&mut self, rng: &mut StdRng, now: u64, ch: u8, info: AckInfo, k: &Knobs) {
        let delay = |rng: &mut StdRng| now + 1 + rng.random_range(0..=k.delay_max);
        let p = Pending { due: 0, ch, ack: info.ack, credit: info.credit, nak: info.nak, bogus: false };
        if !rng.random_bool(k.p_drop_ack) {
            self.q.push(Pending { due: delay(rng), ..p });
        }
        if rng.random_bool(k.p_dup_ack) {
            self.q.push(Pending { due: delay(rng), ..p });
        }
        let hist = &mut self.history[ch as usize];
        if rng.random_bool(k.p_stale_ack) && !hist.is_empty() {
            let old = hist[rng.random_range(0..hist.len())];
            self.q.push(Pending { due: delay(rng), ack: old.ack, credit: old.credit, nak: old.nak, ..p });
        }
        hist.push_back(info);
        if hist.len() > 8 {
            hist.pop_front();
        }
        if rng.random_bool(k.p_bogus_ack) {
            let nak = rng.random_bool(0.5);
            self.q.push(Pending {
                due: delay(rng),
                ack: info.ack.wrapping_add(0x4000_0000),
                nak,
                bogus: true,
                ..p
            });
        }
        if rng.random_bool(k.p_foreign_ack) {
            let ch = [0u8, 1, 4, 5, 7][rng.random_range(0..5)];
            let (ack, credit, nak) = (rng.random(), rng.random(), rng.random_bool(0.5));
            self.q.push(Pending { due: delay(rng), ch, ack, credit, nak, bogus: true });
        }
    }

    /// An ack delivered at once, as a directed test wants it.
    pub fn now(&mut self, now: u64, ch: u8, ack: u32, credit: u32, nak: bool) {
        self.q.push(Pending { due: now, ch, ack, credit, nak, bogus: false });
    }

    /// An ack delivered in cycle `due`.
    pub fn at(&mut self, due: u64, ch: u8, ack: u32, credit: u32, nak: bool) {
        self.q.push(Pending { due, ch, ack, credit, nak, bogus: false });
    }

    /// A bogus ack delivered at once: one the DUT must ignore (the checker does not count it
    /// as acknowledging anything).
    pub fn now_bogus(&mut self, now: u64, ch: u8, ack: u32, credit: u32, nak: bool) {
        self.q.push(Pending { due: now, ch, ack, credit, nak, bogus: true });
    }

    /// The ack to pulse in this cycle: the one due first.
    pub fn pop(&mut self, now: u64, _rng: &mut StdRng) -> Option<Pending> {
        let i = (0..self.q.len()).filter(|&i| self.q[i].due <= now).min_by_key(|&i| self.q[i].due)?;
        self.delivered += 1;
        Some(self.q.swap_remove(i))
    }

    /// Whether nothing is on its way.
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
}

/// An `ack_sent` pulse and what was on the wires then.
#[derive(Debug, Clone, Copy)]
pub struct Pulse {
    /// Its cycle.
    pub cycle: u64,
    /// `rx_expected`.
    pub expected: u32,
    /// `rx_credit`.
    pub credit: u32,
    /// This slot's `ack_req` was up.
    pub req: bool,
    /// ... with `ack_req_nak`.
    pub nak: bool,
    /// No slot's `ack_req` was up.
    pub all_low: bool,
}

/// One bulk RX channel of the fake RX half: its ack and credit wander, and it raises
/// `ack_req` (sometimes with `ack_req_nak`) at random, clearing it on `ack_sent`.
#[derive(Debug, Clone, Default)]
pub struct RxReq {
    /// `rx_expected`.
    pub expected: u32,
    /// `rx_credit`.
    pub credit: u32,
    /// `ack_req`.
    pub req: bool,
    /// `ack_req_nak`.
    pub nak: bool,
    /// Chance per cycle to raise a request.
    pub rate: f64,
    /// Chance per cycle that the values move.
    pub bump: f64,
    /// Chance that a request is a NAK.
    pub nak_rate: f64,
    /// Pulses not yet matched with a frame.
    pub pulses: VecDeque<Pulse>,
    /// Requests raised.
    pub raised: u64,
    /// Requests served.
    pub served: u64,
}

impl RxReq {
    /// Before the drive: maybe raise a request, maybe move the values.
    pub fn before(&mut self, rng: &mut StdRng) {
        if !self.req && self.rate > 0.0 && rng.random_bool(self.rate) {
            self.req = true;
            self.nak = rng.random_bool(self.nak_rate);
            self.raised += 1;
        }
        if self.bump > 0.0 && rng.random_bool(self.bump) {
            self.expected = self.expected.wrapping_add(rng.random_range(0..3));
            self.credit = self.credit.wrapping_add(rng.random_range(0..4096));
        }
    }

    /// `ack_sent` pulsed for this slot in cycle `now`.
    pub fn on_sent(&mut self, now: u64, all_low: bool) {
        let (expected, credit, req, nak) = (self.expected, self.credit, self.req, self.req && self.nak);
        self.pulses.push_back(Pulse { cycle: now, expected, credit, req, nak, all_low });
        if self.req {
            self.req = false;
            self.nak = false;
            self.served += 1;
        }
    }
}

/// A frame the firmware pushes: its FIFO words and, if well formed, what must come out.
#[derive(Debug, Clone)]
pub struct FwFrame {
    /// Header words 0..4 and the padded payload.
    pub words: Vec<u32>,
    /// Well formed.
    pub good: bool,
    /// The header the wire must carry.
    pub h: Header,
    /// The payload.
    pub payload: Vec<u8>,
}

/// The FIFO words of a frame with header `h` and `payload`.
pub fn fw_frame(mut h: Header, payload: &[u8]) -> FwFrame {
    h.length = payload.len() as u32;
    let b = h.encode();
    let mut words: Vec<u32> =
        b[..20].chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    for c in payload.chunks(4) {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        words.push(u32::from_le_bytes(w));
    }
    FwFrame { words, good: true, h, payload: payload.to_vec() }
}

/// A random well-formed firmware frame: channel 0, 1, 5 or 7, valid flags, 0..=1024 bytes.
pub fn random_fw_frame(rng: &mut StdRng) -> FwFrame {
    let ch = [Channel::Link, Channel::Control, Channel::Log, Channel::Reserved][rng.random_range(0..4)];
    let mut choices = vec![flags::DATA, flags::DATA | flags::ACK, flags::ERROR, flags::DATA | flags::ERROR];
    if ch == Channel::Link {
        choices.extend([flags::HELLO, flags::HELLO | flags::ERROR]);
    }
    let f = choices[rng.random_range(0..choices.len())];
    let len = match rng.random_range(0..10) {
        0 => 0,
        1 => MAX_CTRL_PAYLOAD,
        2..=5 => rng.random_range(1..16),
        _ => rng.random_range(1..=MAX_CTRL_PAYLOAD),
    };
    let payload: Vec<u8> = (0..len).map(|_| rng.random()).collect();
    let h = Header { seq: rng.random(), ack: rng.random(), credit: rng.random(), ..Header::new(ch, f) };
    fw_frame(h, &payload)
}

/// The ways a firmware header can be malformed.
pub const MALFORMED: [&str; 9] = [
    "magic",
    "version",
    "bulk channel",
    "channel 9",
    "flag bit 6",
    "HELLO off channel 0",
    "RETX without DATA",
    "payload without DATA",
    "too long",
];

/// A malformed frame of kind `kind` (an index into [`MALFORMED`]), with some payload words.
pub fn malformed_fw_frame(rng: &mut StdRng, kind: usize) -> FwFrame {
    let mut f = random_fw_frame(rng);
    let w0 = &mut f.words[0];
    match kind {
        0 => *w0 ^= 1 << rng.random_range(0..16),
        1 => *w0 = (*w0 & !0x00ff_0000) | (u32::from(rng.random_range(3u8..=255)) << 16),
        2 => *w0 = (*w0 & 0x00ff_ffff) | (u32::from([2u8, 3, 4, 6][rng.random_range(0..4)]) << 24),
        3 => *w0 = (*w0 & 0x00ff_ffff) | (9 << 24),
        4 => f.words[1] |= 0x40 << rng.random_range(0..2),
        5 => {
            *w0 = (*w0 & 0x00ff_ffff) | (1 << 24);
            f.words[1] = (f.words[1] & !0xff) | u32::from(flags::HELLO);
        }
        6 => f.words[1] = (f.words[1] & !0xff) | u32::from(flags::RETX),
        7 => f.words[1] = (4 << 8) | u32::from(flags::ACK),
        _ => {
            let len = if rng.random_bool(0.5) { 1025 } else { rng.random_range(1026u32..=0xff_ffff) };
            f.words[1] = (len << 8) | u32::from(flags::DATA);
        }
    }
    f.good = false;
    f
}

/// The firmware: pushes batches of frames (with random valid gaps, the source's pattern),
/// commits each batch after its last word (in the same cycle or later), and checks the
/// firmware frames that come out, in order.
#[derive(Debug, Default)]
pub struct FwAgent {
    /// Batches still to push; each is committed once, after its last word.
    pub batches: VecDeque<Vec<FwFrame>>,
    cur: Option<Vec<FwFrame>>,
    target: u64,
    commit_at: Option<u64>,
    /// Chance that a batch commits in the cycle of its last word.
    pub same_cycle_rate: f64,
    /// Cycles a later commit waits at most.
    pub delay_max: u64,
    expect: VecDeque<(Header, Vec<u8>)>,
    /// Commit cycle of every frame that must come out, in order.
    pub committed: Vec<u64>,
    /// Frames that came out.
    pub seen: usize,
    /// Batches dropped for a malformed header: what cnt_fw_dropped must say.
    pub dropped_expected: u64,
}

impl FwAgent {
    /// Before the drive: start the next batch, or commit the current one when due.
    pub fn before(&mut self, now: u64, src: &mut ws_hdl::dut::StreamSource) -> bool {
        if self.cur.is_none() {
            if let Some(b) = self.batches.pop_front() {
                for f in &b {
                    for &w in &f.words {
                        src.push(u64::from(w));
                    }
                }
                self.target = src.sent() + src.pending() as u64;
                self.cur = Some(b);
            }
        }
        if self.commit_at.is_some_and(|t| now >= t) {
            self.commit_at = None;
            self.commit(now);
            return true;
        }
        false
    }

    /// A word went in this cycle; returns whether to commit in this same cycle.
    pub fn on_push(&mut self, now: u64, src: &mut ws_hdl::dut::StreamSource, rng: &mut StdRng) -> bool {
        if self.cur.is_none() || self.commit_at.is_some() || src.sent() != self.target {
            return false;
        }
        if rng.random_bool(self.same_cycle_rate) {
            self.commit(now);
            return true;
        }
        self.commit_at = Some(now + 1 + rng.random_range(0..=self.delay_max));
        false
    }

    fn commit(&mut self, now: u64) {
        let b = self.cur.take().expect("a batch to commit");
        let good = b.iter().take_while(|f| f.good).count();
        for f in &b[..good] {
            self.expect.push_back((f.h, f.payload.clone()));
            self.committed.push(now);
        }
        if good < b.len() {
            self.dropped_expected += 1;
        }
    }

    /// A frame of a firmware channel came out.
    pub fn check(&mut self, h: &Header, payload: &[u8], now: u64) {
        let (eh, ep) =
            self.expect.pop_front().unwrap_or_else(|| panic!("cycle {now}: unexpected firmware frame {h:?}"));
        assert_eq!(*h, eh, "cycle {now}: firmware frame #{} header", self.seen);
        assert!(payload == &ep[..], "cycle {now}: firmware frame #{} payload", self.seen);
        self.seen += 1;
    }

    /// A DATA frame of channel `ch` was granted in cycle `t`: no committed firmware frame
    /// may have been waiting then.
    pub fn check_priority(&self, t: u64, ch: u8) {
        if let Some(&c) = self.committed.get(self.seen) {
            assert!(
                c >= t,
                "a DATA frame of channel {ch} was granted at cycle {t} while firmware frame #{} (committed at cycle {c}) waited",
                self.seen
            );
        }
    }

    /// Whether every batch went in and every good frame came out.
    pub fn idle(&self) -> bool {
        self.batches.is_empty() && self.cur.is_none() && self.commit_at.is_none() && self.expect.is_empty()
    }
}
