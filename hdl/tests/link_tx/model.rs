//! The golden `gbn::Sender` in lockstep with the DUT's senders of channels 2 and 3, and the
//! cut rule of docs/link.md computed independently of the RTL.

use std::collections::VecDeque;

use ws_common::link::gbn::{Sender, Transmit};
use ws_common::link::seq_diff;

use super::bench::{Bench, TxChan, TxState};

/// The golden `gbn::Sender` run in lockstep with a TX slot whose grants are visible
/// (channels 2 and 3 pulse `ack_sent` in the cycle they grant a DATA frame): the same events
/// in the same cycles, in the DUT's order (grant, then the ack registered the cycle before,
/// then the timer in a cycle with neither), and the same state after every cycle.
#[derive(Debug, Clone)]
pub struct RefSender {
    /// The model.
    pub s: Sender<16>,
    /// What it transmitted, to compare with the frames when they are decoded.
    pub expect: VecDeque<Transmit>,
    pub(crate) ack: Option<(u32, u32, bool)>,
    pub(crate) next_ack: Option<(u32, u32, bool)>,
    /// Grants seen.
    pub grants: u64,
    /// Grants in the same cycle as an ack.
    pub collisions: u64,
    /// ... of which the ack acknowledged every frame outstanding, up to the new frame being
    /// granted in that cycle (the case where the frame's offset is not in the table yet).
    pub same_frame: u64,
}

impl RefSender {
    pub(crate) fn new(t: &TxChan, window: u16, rto: u32) -> Self {
        RefSender {
            s: Sender::resume(t.start_seq, t.start_bytes, window, t.max_credit, u64::from(rto)),
            expect: VecDeque::new(),
            ack: None,
            next_ack: None,
            grants: 0,
            collisions: 0,
            same_frame: 0,
        }
    }
}

impl Bench {
    /// The window the DUT uses: cfg_window clamped to 1..=WINDOW.
    pub fn window_eff(&self) -> u32 {
        u32::from(self.cfg.window).clamp(1, self.params.window as u32)
    }

    /// The cut rule of docs/link.md, computed independently: min(max_payload, ready - sent,
    /// credit - sent) rounded down to words, 0 when that is less than a word.
    pub fn cut(&self, ready: u32, sent: u32, credit: u32) -> u32 {
        let mp = self.cfg.max_payload.clamp(4, 65536) & !3;
        let (d, c) = (seq_diff(ready, sent), seq_diff(credit, sent));
        if d < 4 || c < 4 {
            return 0;
        }
        (d as u32).min(c as u32).min(mp) & !3
    }

    pub(crate) fn lockstep(&mut self, granted: [bool; 2], active: u64) {
        let now = self.now;
        for (k, &granted) in granted.iter().enumerate() {
            let st = self.state[k];
            let len_new = self.cut(self.tx[k].ready, st.sent_bytes, st.credit);
            let Some(r) = self.refs[k].as_mut() else { continue };
            let m = TxState {
                acked: r.s.acked_seq(),
                send: st.send,
                next: r.s.next_seq(),
                sent_bytes: r.s.queued_bytes(),
                acked_bytes: r.s.acked_bytes(),
                credit: r.s.credit(),
            };
            assert_eq!(st, m, "slot {k}: the DUT's sender state differs from gbn::Sender's at cycle {now}");
            let had_ack = r.ack.is_some();
            if granted {
                r.grants += 1;
                r.collisions += u64::from(had_ack);
                let t = match r.s.poll_transmit(now) {
                    Some(t) => t,
                    None => {
                        assert!(
                            len_new >= 4,
                            "slot {k}: a new frame granted at cycle {now} with nothing to cut"
                        );
                        r.s.queue(len_new)
                            .unwrap_or_else(|e| panic!("slot {k}: a new frame granted at cycle {now}: {e}"));
                        r.s.poll_transmit(now).expect("the frame just queued")
                    }
                };
                if !t.retx && r.s.acked_seq() != t.seq && r.ack.is_some_and(|a| a.0 == t.seq) {
                    r.same_frame += 1;
                }
                r.expect.push_back(t);
            }
            if let Some((a, c, n)) = r.ack.take() {
                r.s.on_ack(a, c, n);
            }
            if !granted && !had_ack && self.cfg.rto != 0 && active >> k & 1 == 1 {
                r.s.on_tick(now);
            }
            r.ack = r.next_ack.take();
        }
    }
}
