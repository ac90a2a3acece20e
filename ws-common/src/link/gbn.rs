//! Go-back-N with credits: the sender and receiver state machines of one direction of one
//! bulk channel (docs/link.md "Bulk channels" and "The go-back-N state machines").
//!
//! Both are pure logic: no I/O, no buffers, no clock of their own. The sender says which
//! frame (seq, byte offset, length) to put on the wire next; the caller keeps the bytes (on
//! the board, the DMA window between the acked and the sent pointers; on the host, its ring)
//! and supplies a monotonic tick. The receiver says whether to accept a frame, and when to
//! send an ACK or a NAK.
//!
//! All sequence numbers and byte counts are wrapping `u32`s compared with
//! [`seq_lt`], so a stream may run forever; a window must stay below 2^31
//! frames and a receive buffer below 2^31 bytes.

use super::{seq_diff, seq_lt};

/// Why the sender cannot queue a frame now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Stall {
    /// `window` frames are unacknowledged.
    #[error("go-back-N window full: {0} frames unacknowledged")]
    Window(u16),
    /// The peer's credit does not cover the frame.
    #[error("peer credit exhausted: {need} bytes needed, {have} granted")]
    Credit {
        /// Bytes the frame needs beyond what has been sent.
        need: u32,
        /// Bytes of credit left.
        have: u32,
    },
}

/// A frame the sender admitted into its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    /// Its sequence number.
    pub seq: u32,
    /// Its first byte's position in the stream (wrapping byte count since the start).
    pub offset: u32,
}

/// A frame to put on the wire now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Sequence number.
    pub seq: u32,
    /// Stream position of its first byte.
    pub offset: u32,
    /// Payload bytes.
    pub len: u32,
    /// Whether it was sent before: set the RETX flag.
    pub retx: bool,
}

/// What an ACK or NAK did to the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AckEffect {
    /// Frames newly acknowledged (their bytes may be freed).
    pub frames: u32,
    /// Bytes newly acknowledged.
    pub bytes: u32,
    /// Whether the sender went back to the ack (a NAK).
    pub went_back: bool,
    /// Whether the ack was outside what was sent, or behind, and was ignored as stale.
    pub ignored: bool,
    /// When the newest frame this ack covers was put on the wire, if it was sent exactly
    /// once: `now - sent_at` is then a round-trip sample for [`RttEstimator`]. A frame
    /// that was retransmitted gives none (Karn's rule, RFC 6298 §3): its ack cannot tell
    /// which copy it answers.
    pub sent_at: Option<u64>,
}

/// Counters of a sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SenderStats {
    /// Frames transmitted (first time).
    pub frames: u64,
    /// Frames retransmitted.
    pub retransmits: u64,
    /// NAKs honoured.
    pub naks: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Acks ignored as stale or out of range.
    pub stale_acks: u64,
    /// Times [`Sender::queue`] refused for credit.
    pub credit_stalls: u64,
}

/// Go-back-N sender of one channel direction, with a window of up to `W` frames.
#[derive(Debug, Clone)]
pub struct Sender<const W: usize> {
    window: u16,
    /// Oldest unacknowledged seq.
    acked: u32,
    /// Next seq to put on the wire (rewinds on NAK or timeout).
    send: u32,
    /// One past the highest seq ever transmitted.
    high: u32,
    /// Next seq to queue.
    next: u32,
    /// Stream position after the last queued frame.
    queued_bytes: u32,
    /// Stream position after the last acknowledged frame.
    acked_bytes: u32,
    /// Peer's cumulative byte limit.
    credit: u32,
    /// The ack of the NAK last honoured: the receiver NAKs once per gap, and a copy of that
    /// NAK must not rewind the sender twice.
    nak_honoured: Option<u32>,
    rto: u64,
    offsets: [u32; W],
    lens: [u32; W],
    sent_at: [u64; W],
    /// Whether the frame in the slot has been sent more than once (no RTT sample from it).
    resent: [bool; W],
    stats: SenderStats,
}

impl<const W: usize> Sender<W> {
    /// A sender at seq 0 and byte 0, with `window` frames (at most `W`), the peer's initial
    /// `credit` and a retransmission timeout of `rto` ticks.
    pub fn new(window: u16, credit: u32, rto: u64) -> Self {
        Self::resume(0, 0, window, credit, rto)
    }

    /// A sender that continues a stream after a reconnect: the peer's HELLO said it expects
    /// `next_seq` and has committed `committed` bytes.
    pub fn resume(next_seq: u32, committed: u32, window: u16, credit: u32, rto: u64) -> Self {
        const { assert!(W > 0 && W < (1 << 15), "window must be 1..32768 frames") };
        Self {
            window: window.clamp(1, W as u16),
            acked: next_seq,
            send: next_seq,
            high: next_seq,
            next: next_seq,
            queued_bytes: committed,
            acked_bytes: committed,
            credit,
            nak_honoured: None,
            rto,
            offsets: [0; W],
            lens: [0; W],
            sent_at: [0; W],
            resent: [false; W],
            stats: SenderStats::default(),
        }
    }

    fn slot(seq: u32) -> usize {
        seq as usize % W
    }

    /// The effective window.
    pub fn window(&self) -> u16 {
        self.window
    }

    /// Frames queued and not yet acknowledged.
    pub fn in_flight(&self) -> u32 {
        self.next.wrapping_sub(self.acked)
    }

    /// Oldest unacknowledged seq.
    pub fn acked_seq(&self) -> u32 {
        self.acked
    }

    /// Next seq to be queued.
    pub fn next_seq(&self) -> u32 {
        self.next
    }

    /// Stream position after the last acknowledged byte: the bytes before it may be freed.
    pub fn acked_bytes(&self) -> u32 {
        self.acked_bytes
    }

    /// Stream position after the last queued byte.
    pub fn queued_bytes(&self) -> u32 {
        self.queued_bytes
    }

    /// The peer's credit as last heard.
    pub fn credit(&self) -> u32 {
        self.credit
    }

    /// Whether everything queued has been acknowledged.
    pub fn is_idle(&self) -> bool {
        self.acked == self.next
    }

    /// Counters.
    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }

    /// Sets the retransmission timeout (an [`RttEstimator`] adapts it to the link; the
    /// board's engine keeps a fixed one).
    pub fn set_rto(&mut self, rto: u64) {
        self.rto = rto.max(1);
    }

    /// Whether a frame of `len` bytes could be queued now.
    pub fn can_queue(&self, len: u32) -> Result<(), Stall> {
        if self.in_flight() >= self.window as u32 {
            return Err(Stall::Window(self.window));
        }
        let end = self.queued_bytes.wrapping_add(len);
        if seq_diff(self.credit, end) < 0 {
            let have = seq_diff(self.credit, self.queued_bytes).max(0) as u32;
            return Err(Stall::Credit { need: len, have });
        }
        Ok(())
    }

    /// Admits a frame of `len` payload bytes into the window. The caller must keep its bytes
    /// (stream positions `offset..offset + len`) until they are acknowledged.
    pub fn queue(&mut self, len: u32) -> Result<Queued, Stall> {
        if let Err(e) = self.can_queue(len) {
            if matches!(e, Stall::Credit { .. }) {
                self.stats.credit_stalls += 1;
            }
            return Err(e);
        }
        let seq = self.next;
        let s = Self::slot(seq);
        self.offsets[s] = self.queued_bytes;
        self.lens[s] = len;
        self.next = seq.wrapping_add(1);
        self.queued_bytes = self.queued_bytes.wrapping_add(len);
        Ok(Queued { seq, offset: self.offsets[s] })
    }

    /// The next frame to put on the wire, if any; `now` stamps it for the timeout.
    pub fn poll_transmit(&mut self, now: u64) -> Option<Transmit> {
        if self.send == self.next {
            return None;
        }
        let seq = self.send;
        let s = Self::slot(seq);
        let retx = seq_lt(seq, self.high);
        self.send = seq.wrapping_add(1);
        if !retx {
            self.high = self.send;
            self.stats.frames += 1;
        } else {
            self.stats.retransmits += 1;
        }
        self.resent[s] = retx;
        self.sent_at[s] = now;
        Some(Transmit { seq, offset: self.offsets[s], len: self.lens[s], retx })
    }

    /// Applies the `ack` and `credit` of a frame with ACK (and `nak` if it had NAK) from the
    /// peer's receiver.
    pub fn on_ack(&mut self, ack: u32, credit: u32, nak: bool) -> AckEffect {
        let mut eff = AckEffect::default();
        // Credit is absolute and only grows; an older value is a reordered or stale frame.
        if seq_lt(self.credit, credit) {
            self.credit = credit;
        }
        // A valid ack lies in acked..=high (what was transmitted).
        if seq_lt(ack, self.acked) || seq_lt(self.high, ack) {
            self.stats.stale_acks += 1;
            eff.ignored = true;
            return eff;
        }
        if self.acked != ack {
            let newest = Self::slot(ack.wrapping_sub(1));
            // A frame covered by the ack but never put back on the wire since a rewind
            // (`send` behind it) still carries its first send's stamp, which is a valid sample.
            eff.sent_at = (!self.resent[newest]).then_some(self.sent_at[newest]);
        }
        while self.acked != ack {
            let s = Self::slot(self.acked);
            eff.frames += 1;
            eff.bytes = eff.bytes.wrapping_add(self.lens[s]);
            self.acked_bytes = self.acked_bytes.wrapping_add(self.lens[s]);
            self.acked = self.acked.wrapping_add(1);
        }
        if eff.frames > 0 {
            self.nak_honoured = None;
        }
        if seq_lt(self.send, self.acked) {
            // Acks for frames not yet (re)sent since a rewind: skip them.
            self.send = self.acked;
        }
        if nak && self.acked != self.high && self.nak_honoured != Some(ack) {
            self.nak_honoured = Some(ack);
            self.send = self.acked;
            self.stats.naks += 1;
            eff.went_back = true;
        }
        eff
    }

    /// Checks the retransmission timer: when the oldest unacknowledged frame was (re)sent
    /// `rto` ticks or more before `now`, goes back to it. Returns whether it did.
    pub fn on_tick(&mut self, now: u64) -> bool {
        if self.acked == self.high {
            return false;
        }
        let s = Self::slot(self.acked);
        if now.wrapping_sub(self.sent_at[s]) < self.rto {
            return false;
        }
        // Restart the timer so a sender that cannot transmit right away does not rewind
        // on every tick.
        self.sent_at[s] = now;
        // Its ack may now answer either copy: no RTT sample from it.
        self.resent[s] = true;
        self.send = self.acked;
        self.nak_honoured = None;
        self.stats.timeouts += 1;
        true
    }
}

/// The retransmission timer of RFC 6298, in the caller's ticks: a smoothed round-trip time
/// and its variation from the samples [`AckEffect::sent_at`] gives, and an RTO that backs off
/// exponentially on each timeout.
///
/// A fixed RTO cannot serve both a board on PCIe (round trips of microseconds) and the
/// simulated board, whose link moves 4 bytes per simulated cycle at a few hundred kHz of
/// simulation: there a full window of 4 KiB frames on three channels takes about a second to
/// drain, so a 50 ms timer fires on every window and go-back-N resends it forever (measured:
/// 0.07 MiB/s echoed, 20× the frames the board accepted). The estimator learns the queueing
/// the window causes and times out only on a real loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RttEstimator {
    srtt: u64,
    rttvar: u64,
    rto: u64,
    min: u64,
    max: u64,
    sampled: bool,
}

impl RttEstimator {
    /// An estimator that starts at `initial` (RFC 6298 §2.1 says 1 s where nothing is known)
    /// and keeps the RTO within `min..=max`.
    pub fn new(initial: u64, min: u64, max: u64) -> Self {
        let max = max.max(1);
        let min = min.clamp(1, max);
        Self { srtt: 0, rttvar: 0, rto: initial.clamp(min, max), min, max, sampled: false }
    }

    /// The current retransmission timeout.
    pub fn rto(&self) -> u64 {
        self.rto
    }

    /// The smoothed round-trip time, once a sample arrived.
    pub fn srtt(&self) -> Option<u64> {
        self.sampled.then_some(self.srtt)
    }

    /// Takes a round-trip sample `r` (RFC 6298 §2.2 and §2.3, with α = 1/8 and β = 1/4; the
    /// clock granularity G is one tick).
    pub fn sample(&mut self, r: u64) {
        if !self.sampled {
            self.srtt = r;
            self.rttvar = r / 2;
            self.sampled = true;
        } else {
            let err = self.srtt.abs_diff(r);
            self.rttvar = self.rttvar - self.rttvar / 4 + err / 4;
            self.srtt = self.srtt - self.srtt / 8 + r / 8;
        }
        let rto = self.srtt.saturating_add(self.rttvar.saturating_mul(4).max(1));
        self.rto = rto.clamp(self.min, self.max);
    }

    /// A timeout fired: double the RTO (RFC 6298 §5.5), up to the maximum.
    pub fn backoff(&mut self) {
        self.rto = self.rto.saturating_mul(2).clamp(self.min, self.max);
    }
}

/// What the receiver decided about a DATA frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxDecision {
    /// In order: commit the payload at stream position `offset` (it had been written at the
    /// window's uncommitted tail) and count it.
    Accept {
        /// Stream position of the frame's first byte.
        offset: u32,
    },
    /// Already received: drop it, and re-acknowledge (an ACK is now due).
    Duplicate,
    /// Ahead of the expected seq, or refused: drop it. `nak` says whether to send a NAK now
    /// (the first time for this gap).
    Gap {
        /// Send a NAK with `ack = expected`.
        nak: bool,
    },
}

/// The `ack` and `credit` to put in an ACK or NAK frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckInfo {
    /// The next expected seq.
    pub ack: u32,
    /// Cumulative byte limit.
    pub credit: u32,
    /// Set the NAK flag.
    pub nak: bool,
}

/// Counters of a receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReceiverStats {
    /// Frames accepted.
    pub frames: u64,
    /// Payload bytes accepted.
    pub bytes: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
    /// Frames dropped because a frame before them was missing.
    pub gaps: u64,
    /// Frames that failed their pcrc on this channel.
    pub bad_frames: u64,
    /// Frames past the credit (a misbehaving sender), dropped.
    pub credit_violations: u64,
    /// NAKs requested.
    pub naks: u64,
}

/// Go-back-N receiver of one channel direction, with a receive buffer of `buffer` bytes.
#[derive(Debug, Clone)]
pub struct Receiver {
    expected: u32,
    committed: u32,
    released: u32,
    buffer: u32,
    /// Credit in the last ACK sent.
    advertised: u32,
    /// `expected` when the last NAK was sent: one NAK per gap.
    nak_for: Option<u32>,
    /// Frames accepted since the last ACK.
    unacked: u32,
    /// Tick of the first frame accepted since the last ACK.
    unacked_since: u64,
    ack_every: u32,
    ack_delay: u64,
    max_frame: u32,
    /// Whether a duplicate asked for a re-ACK.
    reack: bool,
    /// Credit refresh: when an ACK raised the credit of a peer that had less than a frame
    /// left, that ACK is repeated (with doubling intervals) until a frame past the old credit
    /// proves the peer heard it. Without this, a lost ACK would leave an idle, credit-stalled
    /// sender waiting forever: it has nothing outstanding, so no timeout fires.
    refresh: u64,
    refresh_gap: u64,
    refresh_at: Option<u64>,
    /// The credit the peer had before the grant being refreshed.
    refresh_proof: u32,
    stats: ReceiverStats,
}

impl Receiver {
    /// A receiver at seq 0 with a `buffer`-byte window (its initial credit), acknowledging
    /// at least every `window / 2` frames, and at the latest `ack_delay` ticks after the
    /// first frame it has not acknowledged; `max_payload` is the negotiated frame size.
    pub fn new(buffer: u32, window: u16, max_payload: u32, ack_delay: u64) -> Self {
        Self::resume(0, 0, buffer, window, max_payload, ack_delay)
    }

    /// A receiver that continues after a reconnect from its own state.
    pub fn resume(
        expected: u32,
        committed: u32,
        buffer: u32,
        window: u16,
        max_payload: u32,
        ack_delay: u64,
    ) -> Self {
        let buffer = buffer.min(i32::MAX as u32);
        Self {
            expected,
            committed,
            released: committed,
            buffer,
            advertised: committed.wrapping_add(buffer),
            nak_for: None,
            unacked: 0,
            unacked_since: 0,
            ack_every: (window as u32 / 2).max(1),
            ack_delay,
            max_frame: max_payload.max(1),
            reack: false,
            refresh: (4 * ack_delay).max(1),
            refresh_gap: 0,
            refresh_at: None,
            refresh_proof: 0,
            stats: ReceiverStats::default(),
        }
    }

    /// Sets the first interval of the credit refresh (default `4 × ack_delay` ticks; it
    /// doubles up to 64 times that while the peer stays silent).
    pub fn set_refresh(&mut self, ticks: u64) {
        self.refresh = ticks.max(1);
    }

    /// The next seq expected.
    pub fn expected(&self) -> u32 {
        self.expected
    }

    /// Stream position after the last committed byte.
    pub fn committed(&self) -> u32 {
        self.committed
    }

    /// The credit now: released bytes plus the buffer.
    pub fn credit(&self) -> u32 {
        self.released.wrapping_add(self.buffer)
    }

    /// Counters.
    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }

    /// Decides about a DATA frame with `seq` and `len` payload bytes that passed both CRCs,
    /// at tick `now`.
    pub fn on_data(&mut self, seq: u32, len: u32, now: u64) -> RxDecision {
        if seq == self.expected {
            let end = self.committed.wrapping_add(len);
            if seq_diff(self.credit(), end) < 0 {
                // Past the credit: refused as if it had failed its CRC.
                self.stats.credit_violations += 1;
                return self.gap();
            }
            let offset = self.committed;
            self.committed = end;
            if self.refresh_at.is_some() && seq_lt(self.refresh_proof, end) {
                self.refresh_at = None;
            }
            self.expected = seq.wrapping_add(1);
            self.nak_for = None;
            if self.unacked == 0 {
                self.unacked_since = now;
            }
            self.unacked += 1;
            self.stats.frames += 1;
            self.stats.bytes += len as u64;
            RxDecision::Accept { offset }
        } else if seq_lt(seq, self.expected) {
            self.stats.duplicates += 1;
            self.reack = true;
            RxDecision::Duplicate
        } else {
            self.stats.gaps += 1;
            self.gap()
        }
    }

    /// A frame on this channel failed its pcrc (the decoder's `BadPayloadCrc`).
    pub fn on_bad_frame(&mut self) -> RxDecision {
        self.stats.bad_frames += 1;
        self.gap()
    }

    fn gap(&mut self) -> RxDecision {
        let nak = self.nak_for != Some(self.expected);
        if nak {
            self.nak_for = Some(self.expected);
            self.stats.naks += 1;
        }
        RxDecision::Gap { nak }
    }

    /// The consumer freed `bytes` committed bytes: the credit grows by as much.
    pub fn release(&mut self, bytes: u32) {
        let room = self.committed.wrapping_sub(self.released);
        self.released = self.released.wrapping_add(bytes.min(room));
    }

    /// Whether the peer, as far as it has heard, has less than a frame of credit left.
    fn peer_short(&self) -> bool {
        seq_diff(self.advertised, self.committed) < self.max_frame as i32
    }

    /// Whether an ACK is due at tick `now`: every `window / 2` accepted frames; after a
    /// duplicate; `ack_delay` ticks after the first unacknowledged frame; when the credit
    /// grew by a frame; when it grew at all while the peer is left with less than a frame of
    /// credit (else a sender stalled on credit would wait for a timeout); and when a credit
    /// refresh is due.
    pub fn ack_due(&self, now: u64) -> bool {
        let grown = self.credit().wrapping_sub(self.advertised);
        self.reack
            || self.unacked >= self.ack_every
            || (self.unacked > 0 && now.wrapping_sub(self.unacked_since) >= self.ack_delay)
            || (grown != 0 && (grown >= self.max_frame || self.peer_short()))
            || self.refresh_at.is_some_and(|t| now >= t)
    }

    /// The fields of an ACK (or, with `nak`, a NAK) frame to send at tick `now`; resets the
    /// ACK timers.
    pub fn ack(&mut self, nak: bool, now: u64) -> AckInfo {
        let credit = self.credit();
        if credit != self.advertised && self.peer_short() {
            // A grant to a peer that may be stalled: repeat it until the peer uses it.
            self.refresh_proof = self.advertised;
            self.refresh_gap = self.refresh;
            self.refresh_at = Some(now.wrapping_add(self.refresh_gap));
        } else if self.refresh_at.is_some() {
            self.refresh_gap = (self.refresh_gap * 2).min(64 * self.refresh);
            self.refresh_at = Some(now.wrapping_add(self.refresh_gap));
        }
        self.advertised = credit;
        self.unacked = 0;
        self.reack = false;
        AckInfo { ack: self.expected, credit, nak }
    }
}

#[cfg(test)]
mod tests;
