//! The checkers every decoded frame goes through, and the counter check at the end of a run.

use ws_common::link::{flags, seq_diff, seq_lt, Header};
use ws_hdl::dut::Dut;

use super::bench::{byte_at, Bench, RX_CH, TX_CH};

impl Bench {
    pub(crate) fn on_ack_only(&mut self, h: &Header) {
        let j = RX_CH
            .iter()
            .position(|&c| c == h.channel as u8)
            .unwrap_or_else(|| panic!("ACK-only frame on channel {}", h.channel));
        assert!(
            h.flags == flags::ACK || h.flags == flags::ACK | flags::NAK,
            "ACK-only frame flags {:#x}",
            h.flags
        );
        assert_eq!((h.length, h.seq), (0, 0), "ACK-only frame length / seq");
        let p = self.rx[j]
            .pulses
            .pop_front()
            .unwrap_or_else(|| panic!("ACK-only frame on channel {} without an ack_sent pulse", h.channel));
        assert!(
            p.req,
            "ACK-only frame on channel {} that nobody requested (pulse at {})",
            h.channel, p.cycle
        );
        assert_eq!(h.has(flags::NAK), p.nak, "NAK flag of the ACK-only frame built at cycle {}", p.cycle);
        assert_eq!(
            (h.ack, h.credit),
            (p.expected, p.credit),
            "ACK-only frame values vs the wires at cycle {}",
            p.cycle
        );
        self.counts.acks[j] += 1;
        self.counts.ack_naks[j] += u64::from(h.has(flags::NAK));
    }

    pub(crate) fn on_data(&mut self, h: &Header, payload: &[u8]) {
        let now = self.now;
        let ch = h.channel as u8;
        let k = TX_CH.iter().position(|&c| c == ch).unwrap_or_else(|| panic!("DATA frame on channel {ch}"));
        let mp = self.cfg.max_payload.clamp(4, 65536) & !3;
        let w = u32::from(self.cfg.window).clamp(1, self.params.window as u32);
        let len = h.length;
        assert!(
            len.is_multiple_of(4) && (4..=mp).contains(&len),
            "ch {ch} seq {}: length {len} (max {mp})",
            h.seq
        );
        assert!(!h.has(flags::NAK), "ch {ch}: a DATA frame with NAK");
        // Piggybacked acks on 2 and 3, none on 6.
        if k < 2 {
            assert!(h.has(flags::ACK), "ch {ch} seq {}: DATA frame without the piggybacked ACK", h.seq);
            let p = self.rx[k]
                .pulses
                .pop_front()
                .unwrap_or_else(|| panic!("ch {ch}: DATA frame without an ack_sent pulse"));
            assert_eq!(
                (h.ack, h.credit),
                (p.expected, p.credit),
                "ch {ch} seq {}: piggybacked ack vs the wires at cycle {}",
                h.seq,
                p.cycle
            );
            assert!(
                p.all_low,
                "ch {ch} seq {}: DATA frame granted at cycle {} while an ACK request was up",
                h.seq, p.cycle
            );
            self.fw.check_priority(p.cycle, ch);
        } else {
            assert!(!h.has(flags::ACK) && h.ack == 0 && h.credit == 0, "ch 6 frame with ack fields: {h:?}");
        }
        let model = self.refs.get_mut(k).and_then(|r| r.as_mut()).map(|r| {
            let m = r
                .expect
                .pop_front()
                .unwrap_or_else(|| panic!("ch {ch} seq {}: a frame gbn::Sender did not send", h.seq));
            assert_eq!(
                (h.seq, len, h.has(flags::RETX)),
                (m.seq, m.len, m.retx),
                "ch {ch}: frame vs gbn::Sender's transmit"
            );
            m
        });
        let t = &mut self.tx[k];
        let seq = h.seq;
        let retx = h.has(flags::RETX);
        assert_eq!(
            retx,
            seq_lt(seq, t.seen_high),
            "ch {ch} seq {seq}: RETX flag wrong (next new seq {})",
            t.seen_high
        );
        let off = if retx {
            let (off, l) =
                t.cut_of(seq).unwrap_or_else(|| panic!("ch {ch}: retransmission of unknown seq {seq}"));
            assert_eq!(l, len, "ch {ch} seq {seq}: a retransmission re-cut the frame");
            t.retx += 1;
            off
        } else {
            let off = t.cut_end;
            let end = off.wrapping_add(len);
            assert!(
                seq_diff(t.max_credit, end) >= 0,
                "ch {ch} seq {seq}: frame ends at {end:#x}, past the credit {:#x}",
                t.max_credit
            );
            assert!(
                seq_diff(t.ready, end) >= 0,
                "ch {ch} seq {seq}: frame ends at {end:#x}, past ready {:#x}",
                t.ready
            );
            assert!(
                seq_diff(seq, t.max_ack) < w as i32,
                "ch {ch} seq {seq}: past the window (acked {}, window {w})",
                t.max_ack
            );
            t.cuts.push_back((seq, off, len));
            if t.cuts.len() > 8 * self.params.window {
                t.cuts.pop_front();
            }
            t.seen_high = seq.wrapping_add(1);
            t.cut_end = end;
            t.new_frames += 1;
            off
        };
        if let Some(m) = model {
            assert_eq!(off, m.offset, "ch {ch} seq {seq}: offset vs gbn::Sender's transmit");
        }
        if let Some(prev) = t.last_seq {
            let next = prev.wrapping_add(1);
            if seq != next {
                if seq_lt(seq, next) {
                    t.rewinds += 1;
                } else {
                    assert!(
                        seq_diff(t.max_ack, seq) >= 0,
                        "ch {ch}: seq jumped from {prev} to {seq} past the ack {}",
                        t.max_ack
                    );
                }
            }
        }
        t.last_seq = Some(seq);
        // Bytes still in the window (not overwritten by the producer) must be the stream's.
        let horizon = t.ready.wrapping_sub(t.len);
        for (i, &b) in payload.iter().enumerate() {
            let pos = off.wrapping_add(i as u32);
            if seq_diff(pos, horizon) >= 0 {
                assert_eq!(
                    b,
                    byte_at(k, pos),
                    "ch {ch} seq {seq} (retx {retx}): byte {i} at stream position {pos:#x}, cycle {now}"
                );
            }
        }
        if let Some(host) = self.host[k].as_mut() {
            if let Some(info) = host.on_data(&mut self.rng, k, seq, off, payload, now) {
                let knobs = host.knobs.clone();
                self.acks.schedule(&mut self.rng, now, ch, info, &knobs);
            }
        }
    }

    /// Checks every counter against what was decoded and computed.
    pub fn check_counters(&self, dut: &Dut) {
        let p = &self.p;
        let frames = dut.get_words(p.cnt_frames);
        let bytes = dut.get_words(p.cnt_bytes);
        for c in 0..8 {
            assert_eq!(u64::from(frames[c]), self.counts.frames[c] & 0xffff_ffff, "cnt_frames[{c}]");
            assert_eq!(u64::from(bytes[c]), self.counts.bytes[c] & 0xffff_ffff, "cnt_bytes[{c}]");
        }
        let retx = dut.get_words(p.cnt_retx);
        let cs = dut.get_words(p.cnt_credit_stall);
        let ws = dut.get_words(p.cnt_window_stall);
        let to = dut.get_words(p.cnt_timeouts);
        let naks = dut.get_words(p.cnt_naks);
        for k in 0..3 {
            let t = &self.tx[k];
            assert_eq!(u64::from(retx[k]), t.retx, "cnt_retx[{k}]");
            assert_eq!(u64::from(cs[k]), t.model_credit_stall, "cnt_credit_stall[{k}]");
            assert_eq!(u64::from(ws[k]), t.model_window_stall, "cnt_window_stall[{k}]");
            // Every rewind seen on the wire was a NAK or a timeout (two may fold into one).
            assert!(
                t.rewinds <= u64::from(naks[k]) + u64::from(to[k]),
                "slot {k}: {} rewinds, {} NAKs, {} timeouts",
                t.rewinds,
                naks[k],
                to[k]
            );
            if let Some(h) = &self.host[k] {
                assert!(
                    u64::from(naks[k]) <= h.naks_sent,
                    "slot {k}: {} NAKs honoured, {} sent",
                    naks[k],
                    h.naks_sent
                );
            }
        }
        let acks = dut.get_words(p.cnt_acks);
        let an = dut.get_words(p.cnt_ack_naks);
        for j in 0..3 {
            assert_eq!(u64::from(acks[j]), self.counts.acks[j], "cnt_acks[{j}]");
            assert_eq!(u64::from(an[j]), self.counts.ack_naks[j], "cnt_ack_naks[{j}]");
        }
        assert_eq!(dut.get(p.cnt_fw_dropped), self.fw.dropped_expected, "cnt_fw_dropped");
    }
}
