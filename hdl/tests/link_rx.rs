//! `ws_link_rx`, the receive half of the host-link engine, alone (docs/link-engine-rx.md).
//!
//! Streams of frames built with the real `ws_common::link` encoder go in under random
//! backpressure, with every fault docs/link.md "Receiving" deals with: random bit flips in
//! headers and payloads, dropped bytes and dropped words (byte-granular resync), truncated
//! frames followed by good ones, random garbage and false magics between frames, duplicated,
//! reordered and lost frames, frames past the credit, bulk lengths that are not multiples of
//! 4, header field errors, closed windows and refused window enables, and a firmware FIFO
//! that overflows. The reference is the golden code itself:
//!
//! - `ws_common::link::Decoder` over the same bytes says which frames and errors the engine
//!   must find, in order, and how many bytes it must skip; every `ev_*` decision of the DUT
//!   is matched against it one to one;
//! - one `gbn::Receiver` per bulk channel, ticked by the clock, says accept / duplicate / gap
//!   and NAK, and its `ack_due` must equal the DUT's `ack_req` in every cycle; the test plays
//!   the TX half, pulsing `ack_sent` at random and checking `rx_expected` and `rx_credit`;
//! - firmware FIFO frames are checked word for word (header words and padded payload), bulk
//!   payloads in a model of the DMA RAM at every accept, and no DMA write may touch committed
//!   bytes the consumer has not released; peer acks are checked pulse by pulse; every counter
//!   is compared at the end of every batch.
//!
//! Two parameter sets: A (defaults-like, 16-frame window) and B (window 4, fast credit
//! refresh, and seq and byte positions that start 16 frames and 4 KiB before the u32 wrap,
//! through the `INIT_SEQ` / `INIT_POS` test hook). `line_rate` measures one word per cycle.

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::RngExt;
use ws_common::crc32c::crc32c;
use ws_common::link::gbn::{Receiver, RxDecision};
use ws_common::link::{
    encode_frame, flags, frame_len, seq_diff, Channel, DecodeError, Decoder, Event, Header, HEADER_LEN,
    MAX_FRAME,
};
use ws_hdl::dut::{run_test, Dut, Pattern, Port, StreamSink, StreamSource};
use ws_hdl::link::{rx_ev, rx_spec, RxParams};

/// Credit field of the ACK-only frame that ends every batch (random acks never set bit 31).
const FENCE_MARK: u32 = 0xfe4c_0000;

/// A parameter set and the configuration the test programs.
#[derive(Debug, Clone, Copy)]
struct Setup {
    p: RxParams,
    max_payload: u32,
    /// (base, len) of the windows of channels 2, 3, 4.
    win: [(u32, u32); 3],
}

const SETUP_A: Setup = Setup {
    p: RxParams {
        fw_depth: 512,
        hist_words: 1024,
        dma_bytes: 32_768,
        window: 16,
        ack_delay: 64,
        refresh: 256,
        init_seq: 0,
        init_pos: 0,
    },
    max_payload: 2048,
    win: [(0, 8192), (8192, 4096), (16_384, 16_384)],
};

const SETUP_B: Setup = Setup {
    p: RxParams {
        fw_depth: 2048,
        hist_words: 2048,
        dma_bytes: 65_536,
        window: 4,
        ack_delay: 300,
        refresh: 40,
        init_seq: 0xffff_fff0,
        init_pos: 0xffff_f000,
    },
    max_payload: 1024,
    win: [(32_768, 4096), (0, 2048), (4096, 1024)],
};

/// Word `pos` (a multiple of 4) of bulk channel `ch`'s stream: every retransmission of a
/// position carries the same bytes.
fn content_word(ch: u8, pos: u32) -> u32 {
    let mut z = ((u64::from(ch) << 32) | u64::from(pos)) ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u32
}

fn content(ch: u8, pos: u32, len: u32) -> Vec<u8> {
    (0..len / 4).flat_map(|i| content_word(ch, pos.wrapping_add(4 * i)).to_le_bytes()).collect()
}

fn frame(h: &Header, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; frame_len(payload.len())];
    encode_frame(h, payload, &mut out).expect("test frames are valid");
    out
}

/// A header with raw fields and a correct hcrc, to reach the checks behind the hcrc.
fn raw_header(version: u8, channel: u8, fl: u8, length: u32) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_LEN];
    b[0..2].copy_from_slice(b"WS");
    b[2] = version;
    b[3] = channel;
    b[4] = fl;
    b[5..8].copy_from_slice(&length.to_le_bytes()[..3]);
    let c = crc32c(&b[..20]);
    b[20..].copy_from_slice(&c.to_le_bytes());
    b
}

fn words_of(bytes: &[u8]) -> Vec<u32> {
    assert_eq!(bytes.len() % 4, 0);
    bytes.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn is_dma(ch: Channel) -> bool {
    matches!(ch, Channel::Weights | Channel::Gradients | Channel::Data)
}

/// What the golden decoder found, in stream order.
#[derive(Debug, Clone)]
enum Ref {
    /// Both CRCs good.
    Frame {
        h: Header,
        payload: Vec<u8>,
    },
    /// Header good, pcrc bad (the header is read back from the stream).
    BadPcrc {
        h: Header,
    },
    Hcrc,
    Version,
    HeaderErr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PeerAck {
    ch: u8,
    ack: u32,
    credit: u32,
    nak: bool,
}

fn peer_ack_of(h: &Header) -> Option<PeerAck> {
    let ch = h.channel as u8;
    ((ch == 2 || ch == 3 || ch == 6) && h.has(flags::ACK | flags::NAK)).then_some(PeerAck {
        ch,
        ack: h.ack,
        credit: h.credit,
        nak: h.has(flags::NAK),
    })
}

/// Runs the golden decoder over a whole batch (one input, so every refusal is found at
/// `consumed - 1`, its magic). Returns the events, the peer acks and the bytes skipped.
fn reference(stream: &[u8], max_bulk: u32) -> (Vec<Ref>, Vec<PeerAck>, u32) {
    let mut dec = Decoder::<MAX_FRAME>::new();
    dec.set_max_bulk_payload(max_bulk as usize);
    let mut at = 0;
    let mut refs = Vec::new();
    loop {
        let r = dec.feed(&stream[at..]);
        at += r.consumed;
        let e = match r.event {
            None => break,
            Some(Event::Frame(f)) => Ref::Frame { h: f.header, payload: f.payload.to_vec() },
            Some(Event::Error(DecodeError::BadHeaderCrc)) => Ref::Hcrc,
            Some(Event::Error(DecodeError::BadVersion(_))) => Ref::Version,
            Some(Event::Error(DecodeError::BadPayloadCrc { channel, seq })) => {
                let m = at - 1;
                let hb: &[u8; HEADER_LEN] = stream[m..m + HEADER_LEN].try_into().unwrap();
                let h = Header::decode(hb, max_bulk as usize).expect("a pcrc error has a good header");
                assert_eq!((h.channel, h.seq), (channel, seq), "reference: header of the bad frame");
                Ref::BadPcrc { h }
            }
            Some(Event::Error(DecodeError::BadMagic)) => unreachable!("the stream decoder hunts"),
            Some(Event::Error(_)) => Ref::HeaderErr,
        };
        refs.push(e);
    }
    assert_eq!(dec.buffered(), 0, "reference: every batch ends on a whole frame");
    let acks = refs
        .iter()
        .filter_map(|r| match r {
            Ref::Frame { h, .. } | Ref::BadPcrc { h } => peer_ack_of(h),
            _ => None,
        })
        .collect();
    (refs, acks, dec.skipped() as u32)
}

/// The DUT's ports the test uses besides the two stream groups.
#[derive(Debug)]
struct Ports {
    ev_valid: Port,
    ev_ch: Port,
    ev_code: Port,
    ev_nak: Port,
    pa_valid: Port,
    pa_ch: Port,
    pa_ack: Port,
    pa_credit: Port,
    pa_nak: Port,
    dma_we: Port,
    dma_waddr: Port,
    dma_wdata: Port,
    ack_req: Port,
    ack_req_nak: Port,
    ack_sent: Port,
    rx_expected: Port,
    rx_credit: Port,
    rx_committed: Port,
    win_en: Port,
    win_base: Port,
    win_len: Port,
    released: Port,
    ch_reset: Port,
    win_active: Port,
    max_payload: Port,
    s_phy_ready: Port,
    fw_rx_level: Port,
    cnt: [Port; 6],
    cnt_engine: [Port; 4],
}

impl Ports {
    fn new(dut: &Dut) -> Self {
        let p = |n: &str| dut.port(n);
        Ports {
            ev_valid: p("ev_valid"),
            ev_ch: p("ev_ch"),
            ev_code: p("ev_code"),
            ev_nak: p("ev_nak"),
            pa_valid: p("peer_ack_valid"),
            pa_ch: p("peer_ack_ch"),
            pa_ack: p("peer_ack"),
            pa_credit: p("peer_credit"),
            pa_nak: p("peer_nak"),
            dma_we: p("dma_we"),
            dma_waddr: p("dma_waddr"),
            dma_wdata: p("dma_wdata"),
            ack_req: p("ack_req"),
            ack_req_nak: p("ack_req_nak"),
            ack_sent: p("ack_sent"),
            rx_expected: p("rx_expected"),
            rx_credit: p("rx_credit"),
            rx_committed: p("rx_committed"),
            win_en: p("win_en"),
            win_base: p("win_base"),
            win_len: p("win_len"),
            released: p("released"),
            ch_reset: p("ch_reset"),
            win_active: p("win_active"),
            max_payload: p("cfg_max_payload"),
            s_phy_ready: p("s_phy_ready"),
            fw_rx_level: p("fw_rx_level"),
            cnt: ["cnt_frames", "cnt_bytes", "cnt_pcrc_err", "cnt_seq_err", "cnt_win_viol", "cnt_dropped"]
                .map(p),
            cnt_engine: ["cnt_skipped", "cnt_hcrc_err", "cnt_bad_version", "cnt_bad_header"].map(p),
        }
    }
}

/// Every counter of the DUT, as the test expects it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Counts {
    /// frames, bytes, pcrc_err, seq_err, win_viol, dropped, per channel.
    ch: [[u32; 8]; 6],
    /// skipped, hcrc_err, bad_version, bad_header.
    engine: [u32; 4],
}

const FRAMES: usize = 0;
const BYTES: usize = 1;
const PCRC: usize = 2;
const SEQ: usize = 3;
const WIN: usize = 4;
const DROPPED: usize = 5;

impl Counts {
    fn read(dut: &Dut, p: &Ports) -> Self {
        let mut c = Counts::default();
        for (k, port) in p.cnt.iter().enumerate() {
            c.ch[k].copy_from_slice(&dut.get_words(*port));
        }
        for (k, port) in p.cnt_engine.iter().enumerate() {
            c.engine[k] = dut.get(*port) as u32;
        }
        c
    }

    fn add(&mut self, kind: usize, ch: u8, n: u32) {
        let v = &mut self.ch[kind][ch as usize];
        *v = v.wrapping_add(n);
    }
}

/// The golden receiver of one bulk channel and what the test knows about its window.
#[derive(Debug)]
struct Chan {
    rx: Receiver,
    /// A NAK the DUT owes (a gap asked for one; an ACK or an accept clears it).
    nak_pending: bool,
    base: u32,
    len: u32,
    released: u32,
    /// A new released pointer and the cycle it was driven in: the DUT registers it, so the
    /// golden model takes it from the next cycle on.
    pending_release: Option<(u32, u64)>,
}

/// The sender side of one bulk channel, as the test generates frames.
#[derive(Debug, Clone, Copy, Default)]
struct TxState {
    seq: u32,
    off: u32,
}

/// Frame mix and fault rates of a batch.
#[derive(Debug, Clone, Copy)]
struct Mix {
    frames: usize,
    bulk: f64,
    fifo: f64,
    ack_only: f64,
    misc: f64,
    bad_len: f64,
    hdr_err: f64,
    /// Probability that a frame is damaged (bit flip, lost bytes or word, truncation).
    damage: f64,
    /// Probability of each of drop, duplicate and swap-with-next per frame.
    shuffle: f64,
    /// Probability of garbage before a frame.
    garbage: f64,
    /// Probability that a bulk frame is sent past the credit anyway.
    past_credit: f64,
    /// Largest FIFO payload.
    fifo_max: usize,
}

const CLEAN: Mix = Mix {
    frames: 100,
    bulk: 6.0,
    fifo: 2.0,
    ack_only: 1.0,
    misc: 0.0,
    bad_len: 0.0,
    hdr_err: 0.0,
    damage: 0.0,
    shuffle: 0.0,
    garbage: 0.0,
    past_credit: 0.0,
    fifo_max: 1024,
};

const LOSSY: Mix = Mix {
    misc: 0.4,
    bad_len: 0.3,
    hdr_err: 0.3,
    damage: 0.12,
    shuffle: 0.06,
    garbage: 0.15,
    past_credit: 0.2,
    ..CLEAN
};

struct Tb {
    s: Setup,
    p: Ports,
    src: StreamSource,
    sink: StreamSink,
    rng: StdRng,
    chans: [Option<Chan>; 3],
    tx: [TxState; 3],
    released: [u32; 3],
    ram: Vec<u32>,
    refs: VecDeque<Ref>,
    exp_pa: VecDeque<PeerAck>,
    /// Words the firmware must read, in order (the sink itself is unchecked so that a test
    /// can change its ready pattern between batches).
    fifo_exp: VecDeque<u32>,
    fence_seen: bool,
    ch_reset_pulse: u64,
    counts: Counts,
    tally: [u64; 13],
    ev_log: Vec<(u8, u8, bool)>,
    fifo_drops: u64,
    acks_sent: u64,
    naks_sent: u64,
    accepted_bytes: u64,
    /// Probability per cycle that the TX half answers a pending ACK request.
    ack_p: f64,
    /// Probability per cycle and channel of an ACK piggybacked on a DATA frame.
    piggyback_p: f64,
    /// (slot, cycle) of every `ack_sent`.
    ack_log: Vec<(usize, u64)>,
    /// The decision the next frame gets instead of the golden one (a frame cancelled by
    /// `ch_reset`).
    override_next: Option<u8>,
    /// FIFO words committed and unread right after the last decision: until the next one
    /// the level can only fall, so a frame dropped as not fitting must exceed the room left.
    level_after_event: usize,
}

impl Tb {
    fn new(dut: &mut Dut, s: Setup) -> Self {
        let seed = dut.seed();
        let p = Ports::new(dut);
        let src = StreamSource::new(dut, "s_phy", seed);
        let sink = StreamSink::new(dut, "fw_rx", seed).unchecked();
        Tb {
            s,
            p,
            src,
            sink,
            rng: dut.rng(0x11),
            chans: [None, None, None],
            tx: [TxState::default(); 3],
            released: [s.p.init_pos; 3],
            ram: vec![0; s.p.dma_bytes as usize / 4],
            refs: VecDeque::new(),
            exp_pa: VecDeque::new(),
            fifo_exp: VecDeque::new(),
            fence_seen: false,
            ch_reset_pulse: 0,
            counts: Counts::default(),
            tally: [0; 13],
            ev_log: Vec::new(),
            fifo_drops: 0,
            acks_sent: 0,
            naks_sent: 0,
            accepted_bytes: 0,
            ack_p: 0.3,
            piggyback_p: 0.002,
            ack_log: Vec::new(),
            override_next: None,
            level_after_event: 0,
        }
    }

    fn set_windows(&self, dut: &mut Dut) {
        let bases: Vec<u32> = self.s.win.iter().map(|w| w.0).collect();
        let lens: Vec<u32> = self.s.win.iter().map(|w| w.1).collect();
        dut.set_words(self.p.win_base, &bases);
        dut.set_words(self.p.win_len, &lens);
    }

    fn new_chan(&self, i: usize) -> Chan {
        let (base, len) = self.s.win[i];
        let p = &self.s.p;
        let mut rx = Receiver::resume(
            p.init_seq,
            p.init_pos,
            len,
            p.window as u16,
            self.s.max_payload,
            u64::from(p.ack_delay),
        );
        rx.set_refresh(u64::from(p.refresh));
        Chan { rx, nak_pending: false, base, len, released: p.init_pos, pending_release: None }
    }

    /// Reset, configuration, windows open, then the HELLO-without-RESUME `ch_reset`.
    fn start(&mut self, dut: &mut Dut) {
        dut.set(self.p.ack_sent, 0);
        dut.set(self.p.ch_reset, 0);
        dut.set(dut.port("cnt_clear"), 0);
        dut.set(self.p.win_en, 0);
        dut.set(self.p.max_payload, u64::from(self.s.max_payload));
        dut.set_words(self.p.released, &self.released);
        self.set_windows(dut);
        dut.reset(4);
        dut.set(self.p.win_en, 0b111);
        self.idle(dut, 3);
        assert_eq!(dut.get(self.p.win_active), 0b111, "windows open");
        // The credit grew from nothing to a window: the ACK policy announces it.
        assert_eq!(dut.get(self.p.ack_req), 0b111, "an opened window asks for an ACK");
        self.ch_reset_pulse = 0b111;
        self.idle(dut, 2);
        assert_eq!(dut.get(self.p.ack_req), 0, "ch_reset takes the window's credit as advertised");
    }

    /// Cycles with nothing new on the PHY.
    fn idle(&mut self, dut: &mut Dut, n: u32) {
        for _ in 0..n {
            self.step(dut);
        }
    }

    fn set_released(&mut self, dut: &mut Dut, i: usize, value: u32) {
        self.released[i] = value;
        dut.set_words(self.p.released, &self.released);
        if let Some(c) = &mut self.chans[i] {
            c.pending_release = Some((value, dut.cycle()));
        }
    }

    /// One clock cycle: check what the DUT shows, play the TX half and the consumer, tick.
    fn step(&mut self, dut: &mut Dut) {
        let now = dut.cycle();
        for c in self.chans.iter_mut().flatten() {
            if let Some((r, at)) = c.pending_release {
                if now > at {
                    c.rx.release(r.wrapping_sub(c.released));
                    c.released = r;
                    c.pending_release = None;
                }
            }
        }
        if dut.get_bool(self.p.dma_we) {
            let a = dut.get(self.p.dma_waddr) as u32;
            let d = dut.get(self.p.dma_wdata) as u32;
            self.on_dma(a, d);
        }
        if dut.get_bool(self.p.pa_valid) {
            let got = PeerAck {
                ch: dut.get(self.p.pa_ch) as u8,
                ack: dut.get(self.p.pa_ack) as u32,
                credit: dut.get(self.p.pa_credit) as u32,
                nak: dut.get_bool(self.p.pa_nak),
            };
            let want = self.exp_pa.pop_front();
            assert_eq!(Some(got), want, "peer ack at cycle {now}");
            if got.credit & 0xffff_0000 == FENCE_MARK {
                self.fence_seen = true;
            }
        }
        if dut.get_bool(self.p.ev_valid) {
            let ch = dut.get(self.p.ev_ch) as u8;
            let code = dut.get(self.p.ev_code) as u8;
            let nak = dut.get_bool(self.p.ev_nak);
            self.on_event(ch, code, nak, now - 1);
        }
        // The level counts exactly the committed words the firmware has not read.
        assert_eq!(dut.get(self.p.fw_rx_level), self.fifo_exp.len() as u64, "fw_rx_level at cycle {now}");

        // The ACK requests against the golden policy, and the TX half answering them.
        let req = dut.get(self.p.ack_req);
        let req_nak = dut.get(self.p.ack_req_nak);
        let mut sent = 0u64;
        let mut rx_words: Option<(Vec<u32>, Vec<u32>)> = None;
        for i in 0..3 {
            let Some(c) = &mut self.chans[i] else { continue };
            if self.ch_reset_pulse >> i & 1 == 1 {
                continue;
            }
            let due = c.rx.ack_due(now) || c.nak_pending;
            assert_eq!(req >> i & 1 == 1, due, "ack_req of channel {} at cycle {now}: {:?}", i + 2, c.rx);
            assert_eq!(
                req_nak >> i & 1 == 1,
                c.nak_pending,
                "ack_req_nak of channel {} at cycle {now}",
                i + 2
            );
            // Requests are answered after a random delay; the TX half also piggybacks acks on
            // DATA frames it sends anyway, at any time.
            if (due && self.rng.random_bool(self.ack_p)) || self.rng.random_bool(self.piggyback_p) {
                let (exp, cred) = rx_words.get_or_insert_with(|| {
                    (dut.get_words(self.p.rx_expected), dut.get_words(self.p.rx_credit))
                });
                assert_eq!(exp[i], c.rx.expected(), "rx_expected of channel {} at cycle {now}", i + 2);
                assert_eq!(cred[i], c.rx.credit(), "rx_credit of channel {} at cycle {now}", i + 2);
                c.rx.ack(c.nak_pending, now);
                self.acks_sent += 1;
                self.naks_sent += u64::from(c.nak_pending);
                c.nak_pending = false;
                self.ack_log.push((i, now));
                sent |= 1 << i;
            }
        }
        dut.set(self.p.ack_sent, sent);
        dut.set(self.p.ch_reset, self.ch_reset_pulse);
        if self.ch_reset_pulse != 0 {
            for i in 0..3 {
                if self.ch_reset_pulse >> i & 1 == 1 {
                    self.chans[i] = Some(self.new_chan(i));
                    self.tx[i] = TxState { seq: self.s.p.init_seq, off: self.s.p.init_pos };
                }
            }
            self.ch_reset_pulse = 0;
        }

        self.src.drive(dut);
        self.sink.drive(dut);
        dut.eval();
        self.src.sample(dut);
        if let Some(beat) = self.sink.sample(dut) {
            let want = self.fifo_exp.pop_front();
            assert_eq!(
                Some(beat[0] as u32),
                want,
                "firmware FIFO word at cycle {now} (a partial, lost or spurious frame), {} words still expected",
                self.fifo_exp.len()
            );
        }
        dut.tick();
    }

    /// A DMA write: inside an open window, never over committed bytes not yet released.
    fn on_dma(&mut self, addr: u32, data: u32) {
        let b = addr * 4;
        let c = self
            .chans
            .iter()
            .flatten()
            .find(|c| b >= c.base && b < c.base + c.len)
            .unwrap_or_else(|| panic!("DMA write to {b:#x} outside every open window"));
        let r = b - c.base;
        let mask = c.len - 1;
        let held = c.rx.committed().wrapping_sub(c.released);
        let ahead = r.wrapping_sub(c.rx.committed() & mask) & mask;
        assert!(
            ahead < c.len - held,
            "DMA write at ring offset {r:#x} hits {held} committed, unreleased bytes (committed {:#x}, released {:#x})",
            c.rx.committed(),
            c.released
        );
        self.ram[addr as usize] = data;
    }

    /// A decision of the DUT against the next event of the golden decoder.
    fn on_event(&mut self, ch: u8, code: u8, nak: bool, t: u64) {
        let r = self.refs.pop_front().unwrap_or_else(|| {
            panic!(
                "DUT decided {} on channel {ch} at cycle {t}, the decoder found nothing",
                rx_ev::name(code)
            )
        });
        let (want, want_nak, want_ch) = self.judge(&r, code, t);
        assert!(
            code == want && nak == want_nak && want_ch.is_none_or(|c| c == ch),
            "cycle {t}: DUT decided {} (channel {ch}, nak {nak}), expected {} (channel {want_ch:?}, nak {want_nak}) for {r:?}",
            rx_ev::name(code),
            rx_ev::name(want),
        );
        self.tally[code as usize] += 1;
        self.ev_log.push((ch, code, nak));
        self.level_after_event = self.fifo_exp.len();
    }

    /// The decision the golden models make about `r` (a FIFO frame takes the DUT's word on
    /// whether it fitted, then is checked word by word).
    fn judge(&mut self, r: &Ref, dut_code: u8, t: u64) -> (u8, bool, Option<u8>) {
        match r {
            Ref::Hcrc => {
                self.counts.engine[1] += 1;
                (rx_ev::HCRC, false, None)
            }
            Ref::Version => {
                self.counts.engine[2] += 1;
                (rx_ev::VERSION, false, None)
            }
            Ref::HeaderErr => {
                self.counts.engine[3] += 1;
                (rx_ev::HEADER, false, None)
            }
            Ref::BadPcrc { h } => {
                let ch = h.channel as u8;
                self.counts.add(PCRC, ch, 1);
                let mut nak = false;
                if is_dma(h.channel) && h.has(flags::DATA) && h.length.is_multiple_of(4) {
                    if let Some(c) = &mut self.chans[ch as usize - 2] {
                        if let RxDecision::Gap { nak: n } = c.rx.on_bad_frame() {
                            nak = n;
                            c.nak_pending |= n;
                        }
                    }
                }
                (rx_ev::PCRC, nak, Some(ch))
            }
            Ref::Frame { h, .. } if self.override_next.is_some() => {
                let code = self.override_next.take().unwrap();
                self.counts.add(DROPPED, h.channel as u8, 1);
                (code, false, Some(h.channel as u8))
            }
            Ref::Frame { h, payload } => self.judge_frame(h, payload, dut_code, t),
        }
    }

    fn judge_frame(&mut self, h: &Header, payload: &[u8], dut_code: u8, t: u64) -> (u8, bool, Option<u8>) {
        let ch = h.channel as u8;
        let len = h.length;
        let data = h.has(flags::DATA);
        let code = match h.channel {
            Channel::Link | Channel::Control | Channel::Reserved => {
                if dut_code == rx_ev::FIFO {
                    let mut bytes = h.encode().to_vec();
                    bytes.extend_from_slice(payload);
                    bytes.resize(bytes.len().div_ceil(4) * 4, 0);
                    self.fifo_exp.extend(words_of(&bytes));
                    self.counts.add(FRAMES, ch, 1);
                    self.counts.add(BYTES, ch, len);
                    rx_ev::FIFO
                } else {
                    let words = 6 + (len as usize).div_ceil(4);
                    assert!(
                        words + self.level_after_event > self.s.p.fw_depth as usize,
                        "a {words}-word frame dropped as not fitting with at most {} words in the FIFO",
                        self.level_after_event
                    );
                    self.counts.add(DROPPED, ch, 1);
                    self.fifo_drops += 1;
                    rx_ev::FIFO_FULL
                }
            }
            Channel::Log => rx_ev::DROP,
            Channel::Trace if data || len > 0 => rx_ev::DROP,
            Channel::Trace => rx_ev::CTRL,
            _ if !data && len > 0 => rx_ev::DROP,
            _ if !data => rx_ev::CTRL,
            _ => {
                let i = ch as usize - 2;
                let ram = &self.ram;
                match &mut self.chans[i] {
                    Some(c) if len.is_multiple_of(4) => {
                        let cv = c.rx.stats().credit_violations;
                        match c.rx.on_data(h.seq, len, t) {
                            RxDecision::Accept { offset } => {
                                for (j, w) in words_of(payload).iter().enumerate() {
                                    let pos = offset.wrapping_add(4 * j as u32);
                                    let a = (c.base + (pos & (c.len - 1))) / 4;
                                    assert_eq!(
                                        ram[a as usize], *w,
                                        "channel {ch} seq {} byte {pos:#x}: DMA RAM word {a:#x}",
                                        h.seq
                                    );
                                    assert_eq!(
                                        *w,
                                        content_word(ch, pos),
                                        "channel {ch} stream byte {pos:#x}"
                                    );
                                }
                                c.nak_pending = false;
                                self.counts.add(FRAMES, ch, 1);
                                self.counts.add(BYTES, ch, len);
                                self.accepted_bytes += u64::from(len);
                                return (rx_ev::ACCEPT, false, Some(ch));
                            }
                            RxDecision::Duplicate => {
                                self.counts.add(SEQ, ch, 1);
                                rx_ev::DUP
                            }
                            RxDecision::Gap { nak } => {
                                c.nak_pending |= nak;
                                let credit = c.rx.stats().credit_violations != cv;
                                self.counts.add(if credit { WIN } else { SEQ }, ch, 1);
                                let code = if credit { rx_ev::CREDIT } else { rx_ev::GAP };
                                return (code, nak, Some(ch));
                            }
                        }
                    }
                    _ => {
                        self.counts.add(WIN, ch, 1);
                        rx_ev::WINDOW
                    }
                }
            }
        };
        if code == rx_ev::DROP {
            self.counts.add(DROPPED, ch, 1);
        }
        (code, false, Some(ch))
    }

    // ------------------------------------------------------------------ stimulus

    fn rand_ack(&mut self) -> (u32, u32) {
        (self.rng.random(), self.rng.random::<u32>() >> 1)
    }

    /// One bulk DATA frame of slot `i`, cut from the sender's stream position.
    fn bulk_frame(&mut self, i: usize, mix: &Mix) -> Option<Vec<u8>> {
        let ch = 2 + i as u8;
        let tx = self.tx[i];
        let mut len = 4 * self.rng.random_range(0..=self.s.max_payload / 4);
        if self.rng.random_bool(0.5) {
            len = len.min(256);
        }
        if let Some(c) = &self.chans[i] {
            let room = seq_diff(c.rx.credit(), tx.off).max(0) as u32;
            if len > room && !self.rng.random_bool(mix.past_credit) {
                len = room & !3;
                if len == 0 {
                    return None;
                }
            }
        }
        let (ack, credit) = self.rand_ack();
        let mut fl = flags::DATA;
        if self.rng.random_bool(0.2) {
            fl |= flags::ACK;
        }
        if self.rng.random_bool(0.1) {
            fl |= flags::RETX;
        }
        let h = Header { seq: tx.seq, ack, credit, ..Header::new(Channel::from_u8(ch).unwrap(), fl) };
        self.tx[i] = TxState { seq: tx.seq.wrapping_add(1), off: tx.off.wrapping_add(len) };
        Some(frame(&h, &content(ch, tx.off, len)))
    }

    fn fifo_frame(&mut self, mix: &Mix) -> Vec<u8> {
        let ch = [0u8, 1, 1, 7][self.rng.random_range(0..4)];
        let mut len = self.rng.random_range(0..=mix.fifo_max);
        if self.rng.random_bool(0.6) {
            len = len.min(48);
        }
        let mut fl = flags::DATA;
        if ch == 0 {
            fl = [flags::HELLO, flags::HELLO | flags::ERROR, flags::DATA][self.rng.random_range(0..3)];
            if fl & flags::HELLO != 0 {
                len = 140;
            }
        }
        let payload: Vec<u8> = (0..len).map(|_| self.rng.random()).collect();
        let h = Header { seq: self.rng.random(), ..Header::new(Channel::from_u8(ch).unwrap(), fl) };
        frame(&h, &payload)
    }

    fn ack_only_frame(&mut self) -> Vec<u8> {
        let ch = [2u8, 3, 6][self.rng.random_range(0..3)];
        let fl = if self.rng.random_bool(0.3) { flags::ACK | flags::NAK } else { flags::ACK };
        let (ack, credit) = self.rand_ack();
        frame(&Header { ack, credit, ..Header::new(Channel::from_u8(ch).unwrap(), fl) }, &[])
    }

    /// Frames the engine must drop or only look at: channel 5, DATA on 6, ERROR on a bulk
    /// channel, a flagless frame on channel 4.
    fn misc_frame(&mut self) -> Vec<u8> {
        let n = self.rng.random_range(1..64);
        let payload: Vec<u8> = (0..n).map(|_| self.rng.random()).collect();
        match self.rng.random_range(0..4) {
            0 => frame(&Header::new(Channel::Log, flags::DATA), &payload),
            1 => frame(&Header::new(Channel::Trace, flags::DATA | flags::ACK), &payload),
            2 => frame(&Header::new(Channel::Gradients, flags::ERROR), &payload),
            _ => frame(&Header::new(Channel::Data, 0), &[]),
        }
    }

    /// A bulk DATA frame whose length is not a multiple of 4 (a window violation).
    fn bad_len_frame(&mut self) -> Vec<u8> {
        let i = self.rng.random_range(0..3);
        let len = 4 * self.rng.random_range(0..16) + self.rng.random_range(1..4);
        let h = Header {
            seq: self.tx[i].seq,
            ..Header::new(Channel::from_u8(2 + i as u8).unwrap(), flags::DATA)
        };
        frame(&h, &vec![0x5a; len as usize])
    }

    /// A header with a good hcrc and a field the decoder refuses.
    fn hdr_err_frame(&mut self) -> Vec<u8> {
        let maxb = self.s.max_payload;
        match self.rng.random_range(0..7) {
            0 => raw_header([1u8, 3, 0x57][self.rng.random_range(0..3)], 1, flags::DATA, 8),
            1 => raw_header(2, self.rng.random_range(8..=255), flags::DATA, 8),
            2 => raw_header(2, 1, flags::DATA | 0x40, 8),
            3 => raw_header(2, 1, flags::HELLO, 0),
            4 => raw_header(2, 2, flags::RETX, 0),
            5 => raw_header(2, 3, flags::ACK, 8),
            _ => {
                if self.rng.random_bool(0.5) {
                    raw_header(2, 1, flags::DATA, 1025)
                } else {
                    raw_header(2, 2, flags::DATA, maxb + 4 * self.rng.random_range(1..100))
                }
            }
        }
    }

    fn garbage(&mut self) -> Vec<u8> {
        let n = self.rng.random_range(1..48);
        match self.rng.random_range(0..4) {
            0 => (0..n).map(|_| self.rng.random()).collect(),
            1 => (0..n).map(|_| [b'W', b'S', 0, 2][self.rng.random_range(0..4)]).collect(),
            2 => {
                // A false magic with a plausible version and channel.
                let mut g = vec![b'W', b'S', 2, self.rng.random_range(0..8)];
                g.extend((0..n).map(|_| self.rng.random::<u8>()));
                g
            }
            _ => vec![0; n],
        }
    }

    /// Damages one frame on the wire.
    fn damage(&mut self, f: &mut Vec<u8>) {
        let n = f.len();
        match self.rng.random_range(0..5) {
            0 | 1 => {
                // Bit flips, in the header half the time.
                let in_hdr = self.rng.random_bool(0.5) || n <= HEADER_LEN;
                let (lo, hi) = if in_hdr { (0, HEADER_LEN.min(n)) } else { (HEADER_LEN, n) };
                for _ in 0..self.rng.random_range(1..=3) {
                    let at = self.rng.random_range(lo..hi);
                    f[at] ^= 1 << self.rng.random_range(0..8);
                }
            }
            2 => {
                let k = self.rng.random_range(1..=3).min(n - 1);
                let at = self.rng.random_range(0..n - k);
                f.drain(at..at + k);
            }
            3 => {
                let at = 4 * self.rng.random_range(0..n / 4);
                f.drain(at..at + 4);
            }
            _ => {
                let cut = self.rng.random_range(1..n);
                f.truncate(cut);
            }
        }
    }

    /// The bytes of one batch: frames with faults, a run of zeros longer than any frame (so
    /// no candidate reaches past it), and the fence, an ACK-only frame marked `fence`.
    fn gen_batch(&mut self, mix: &Mix, fence: u32) -> Vec<u8> {
        let weights = [mix.bulk, mix.fifo, mix.ack_only, mix.misc, mix.bad_len, mix.hdr_err];
        let total: f64 = weights.iter().sum();
        let mut frames: Vec<Vec<u8>> = Vec::new();
        while frames.len() < mix.frames {
            let mut x = self.rng.random::<f64>() * total;
            let mut kind = 0;
            while kind < weights.len() - 1 && x >= weights[kind] {
                x -= weights[kind];
                kind += 1;
            }
            let f = match kind {
                0 => {
                    let i = self.rng.random_range(0..3);
                    match self.bulk_frame(i, mix) {
                        Some(f) => f,
                        None => continue,
                    }
                }
                1 => self.fifo_frame(mix),
                2 => self.ack_only_frame(),
                3 => self.misc_frame(),
                4 => self.bad_len_frame(),
                _ => self.hdr_err_frame(),
            };
            frames.push(f);
        }
        // Lost, duplicated and reordered frames.
        let mut i = 0;
        while i < frames.len() {
            if self.rng.random_bool(mix.shuffle) {
                frames.remove(i);
                continue;
            }
            if self.rng.random_bool(mix.shuffle) {
                let at = (i + self.rng.random_range(1..4)).min(frames.len());
                let copy = frames[i].clone();
                frames.insert(at, copy);
            }
            if i + 1 < frames.len() && self.rng.random_bool(mix.shuffle) {
                frames.swap(i, i + 1);
            }
            i += 1;
        }
        let mut out = Vec::new();
        for mut f in frames {
            if self.rng.random_bool(mix.garbage) {
                out.extend(self.garbage());
            }
            if self.rng.random_bool(mix.damage) {
                self.damage(&mut f);
            }
            out.extend(f);
        }
        let longest = frame_len(self.s.max_payload.max(1024) as usize);
        let zeros = longest + 8 + (4 - (out.len() + longest + 8) % 4) % 4;
        out.extend(std::iter::repeat_n(0u8, zeros));
        out.extend(frame(
            &Header {
                ack: fence,
                credit: FENCE_MARK | (fence & 0xffff),
                ..Header::new(Channel::Weights, flags::ACK)
            },
            &[],
        ));
        assert_eq!(out.len() % 4, 0);
        out
    }

    // ------------------------------------------------------------------ batches

    /// Feeds `bytes` (a whole number of words ending with a fence) and runs until the DUT has
    /// decided everything in it, then checks every counter.
    fn run_bytes(&mut self, dut: &mut Dut, bytes: &[u8]) {
        self.feed(bytes);
        self.settle(dut, 40 * bytes.len() as u64 + 20_000);
    }

    /// Queues `bytes` on the PHY and their golden decisions.
    fn feed(&mut self, bytes: &[u8]) {
        let (refs, acks, skipped) = reference(bytes, self.s.max_payload);
        assert!(self.refs.is_empty() && self.exp_pa.is_empty());
        self.refs.extend(refs);
        self.exp_pa.extend(acks);
        self.counts.engine[0] = self.counts.engine[0].wrapping_add(skipped);
        self.fence_seen = false;
        for w in words_of(bytes) {
            self.src.push(u64::from(w));
        }
    }

    /// Runs until everything fed is decided, then checks the counters and channel state.
    fn settle(&mut self, dut: &mut Dut, max_cycles: u64) {
        let limit = dut.cycle() + max_cycles;
        while !(self.fence_seen && self.refs.is_empty() && self.src.pending() == 0) {
            assert!(
                dut.cycle() < limit,
                "batch stuck at cycle {}: {} words unsent, {} decisions and {} peer acks missing, next {:?}",
                dut.cycle(),
                self.src.pending(),
                self.refs.len(),
                self.exp_pa.len(),
                self.refs.front()
            );
            self.step(dut);
        }
        // Counters count the registered event, a cycle later.
        self.idle(dut, 2);
        assert_eq!(Counts::read(dut, &self.p), self.counts, "counters at cycle {}", dut.cycle());
        let (exp, com) = (dut.get_words(self.p.rx_expected), dut.get_words(self.p.rx_committed));
        for (i, c) in self.chans.iter().enumerate() {
            if let Some(c) = c {
                assert_eq!((exp[i], com[i]), (c.rx.expected(), c.rx.committed()), "channel {} state", i + 2);
            }
        }
    }

    /// Waits until the firmware has read every frame delivered.
    fn drain_fifo(&mut self, dut: &mut Dut) {
        let limit = dut.cycle() + 200_000;
        while !self.fifo_exp.is_empty() {
            assert!(dut.cycle() < limit, "firmware FIFO does not drain: {} words left", self.fifo_exp.len());
            self.step(dut);
        }
    }

    /// One random batch, then the consumer releases part of what was committed and the sender
    /// goes back to what the receiver expects (go-back-N at batch granularity).
    fn batch(&mut self, dut: &mut Dut, mix: &Mix, fence: u32) {
        for i in 0..3 {
            if let Some(c) = &self.chans[i] {
                self.tx[i] = TxState { seq: c.rx.expected(), off: c.rx.committed() };
            }
        }
        let bytes = self.gen_batch(mix, fence);
        self.run_bytes(dut, &bytes);
        for i in 0..3 {
            if let Some(c) = &self.chans[i] {
                let held = c.rx.committed().wrapping_sub(c.released);
                let free = match self.rng.random_range(0..4) {
                    0 => 0,
                    1 => held,
                    _ => 4 * self.rng.random_range(0..=held / 4),
                };
                let r = c.released.wrapping_add(free);
                self.set_released(dut, i, r);
            }
        }
        self.idle(dut, 2);
    }

    /// Closes channel 4's window, runs a batch against the closed window, tries the enables
    /// the engine must refuse, reopens it and resets the channel (HELLO without RESUME).
    fn window_refusals(&mut self, dut: &mut Dut, fence: u32) {
        dut.set(self.p.win_en, 0b011);
        self.chans[2] = None;
        self.idle(dut, 2);
        assert_eq!(dut.get(self.p.win_active), 0b011);
        self.batch(dut, &LOSSY, fence);
        let (base, len) = self.s.win[2];
        let dma = self.s.p.dma_bytes;
        let bad = [
            (base + 64, len),
            (base, len - 4),
            (base, 32),
            (dma, len),
            (dma - len / 2, len),
            (base, 1 << 31),
        ];
        for (b, l) in bad {
            dut.set_words(self.p.win_base, &[self.s.win[0].0, self.s.win[1].0, b]);
            dut.set_words(self.p.win_len, &[self.s.win[0].1, self.s.win[1].1, l]);
            dut.set(self.p.win_en, 0b111);
            self.idle(dut, 3);
            assert_eq!(dut.get(self.p.win_active), 0b011, "window {b:#x}+{l:#x} must be refused");
            self.counts.add(WIN, 4, 1);
            dut.set(self.p.win_en, 0b011);
            self.idle(dut, 2);
        }
        self.set_windows(dut);
        dut.set(self.p.win_en, 0b111);
        self.idle(dut, 2);
        assert_eq!(dut.get(self.p.win_active), 0b111);
        self.released[2] = self.s.p.init_pos;
        dut.set_words(self.p.released, &self.released);
        self.ch_reset_pulse = 0b100;
        self.idle(dut, 2);
        assert_eq!(Counts::read(dut, &self.p), self.counts, "window refusals counted");
    }

    fn summary(&self, name: &str, dut: &Dut) {
        let names: Vec<String> = (0..13)
            .filter(|&k| self.tally[k] > 0)
            .map(|k| format!("{} {}", rx_ev::name(k as u8), self.tally[k]))
            .collect();
        eprintln!(
            "{name}: {} cycles, {} frame decisions ({}), {} bulk bytes accepted, {} bytes skipped, {} ACKs sent ({} NAK), {} FIFO drops",
            dut.cycle(),
            self.tally.iter().sum::<u64>(),
            names.join(", "),
            self.accepted_bytes,
            self.counts.engine[0],
            self.acks_sent,
            self.naks_sent,
            self.fifo_drops
        );
    }
}

/// The randomized run of one parameter set: clean and lossy batches under Mixed backpressure,
/// a FIFO overflow, a full-rate lossy batch, and the window refusals.
fn random_run(name: &str, s: Setup, seed: u64, batches: u32) {
    run_test(name, &rx_spec(&s.p), seed, |dut| {
        let w0 = std::time::Instant::now();
        let mut tb = Tb::new(dut, s);
        tb.start(dut);
        for b in 0..batches {
            let fence = b;
            // A TX half that answers at once, one that is busy, and one that hardly ever
            // sends (so every trigger of the ACK policy fires: count, timer, refresh).
            tb.ack_p = [0.3, 0.02, 0.0005][b as usize % 3];
            match b % 16 {
                0 => tb.batch(dut, &CLEAN, fence),
                3 => {
                    // A firmware that barely reads: frames that do not fit are dropped whole.
                    tb.sink = StreamSink::new(dut, "fw_rx", seed ^ 0x77)
                        .pattern(Pattern::Random(0.001))
                        .unchecked();
                    let drops = tb.fifo_drops;
                    tb.batch(dut, &Mix { fifo: 8.0, bulk: 1.0, frames: 120, ..LOSSY }, fence);
                    assert!(tb.fifo_drops > drops, "a slow firmware must see FIFO drops");
                    tb.sink = StreamSink::new(dut, "fw_rx", seed ^ 0x78).unchecked();
                }
                5 => {
                    // Full rate on the PHY while faults hit the stream.
                    tb.src = StreamSource::new(dut, "s_phy", seed ^ 0x79).pattern(Pattern::Always);
                    tb.batch(dut, &LOSSY, fence);
                    tb.src = StreamSource::new(dut, "s_phy", seed ^ 0x7a);
                }
                7 if b == 7 => tb.window_refusals(dut, fence),
                _ if b % 4 == 1 => tb.batch(dut, &CLEAN, fence),
                _ => tb.batch(dut, &LOSSY, fence),
            }
            tb.drain_fifo(dut);
        }
        tb.summary(name, dut);
        // The run exercised what it claims to.
        for code in [
            rx_ev::FIFO,
            rx_ev::ACCEPT,
            rx_ev::DUP,
            rx_ev::GAP,
            rx_ev::CREDIT,
            rx_ev::WINDOW,
            rx_ev::PCRC,
            rx_ev::HCRC,
        ] {
            assert!(tb.tally[code as usize] > 0, "no {} decision in the run", rx_ev::name(code));
        }
        assert!(tb.naks_sent > 0 && tb.counts.engine[2] > 0 && tb.counts.engine[3] > 0);
        for (i, c) in tb.chans.iter().enumerate() {
            let c = c.as_ref().unwrap();
            let (seqs, bytes) =
                (c.rx.expected().wrapping_sub(s.p.init_seq), c.rx.committed().wrapping_sub(s.p.init_pos));
            eprintln!(
                "{name}: channel {} took seq {:#x}..{:#x}, bytes {:#x}..{:#x}",
                i + 2,
                s.p.init_seq,
                c.rx.expected(),
                s.p.init_pos,
                c.rx.committed()
            );
            if s.p.init_seq != 0 {
                // Across the u32 wrap of both the seq and the byte position.
                assert!(
                    seqs > s.p.init_seq.wrapping_neg() && bytes > s.p.init_pos.wrapping_neg(),
                    "channel {} did not wrap",
                    i + 2
                );
            }
        }
        eprintln!("{name}: {:.1} s", w0.elapsed().as_secs_f64());
    });
}

#[test]
fn random_streams_set_a() {
    random_run("link_rx_a", SETUP_A, 0xa1, 40);
}

/// Window 4, a 1 KiB window on channel 4 (credit always tight), a fast credit refresh, and
/// seq / byte positions that cross the u32 wrap within the first batches.
#[test]
fn random_streams_set_b_across_the_wrap() {
    random_run("link_rx_b", SETUP_B, 0xb2, 36);
}

/// The resync cases of docs/link.md "Receiving", one by one, with the decisions spelled out.
#[test]
fn resync_cases() {
    run_test("link_rx_resync", &rx_spec(&SETUP_A.p), 3, |dut| {
        let mut tb = Tb::new(dut, SETUP_A);
        tb.start(dut);
        let ctl = |seq: u32, n: usize| {
            frame(&Header { seq, ..Header::new(Channel::Control, flags::DATA) }, &vec![seq as u8; n])
        };
        let bulk = |seq: u32, off: u32| {
            frame(&Header { seq, ..Header::new(Channel::Weights, flags::DATA) }, &content(2, off, 64))
        };
        let mut s = Vec::new();
        // A truncated frame followed by a good one loses only itself.
        let a = ctl(1, 100);
        s.extend_from_slice(&a[..70]);
        s.extend(ctl(2, 100));
        // A false header whose 24 bytes hold the start of a real frame.
        s.extend_from_slice(b"WS\x02\x01junkjunk");
        s.extend(ctl(3, 4));
        // Noise with lone 'W's, then a frame one byte off the word grid.
        s.extend_from_slice(b"xxWzzW");
        s.extend(ctl(4, 5));
        // A frame cut right after its header, with 17 payload bytes: the next header is not
        // taken for its payload (docs/link.md "Why pcrc covers the header").
        s.extend_from_slice(&ctl(5, 17)[..HEADER_LEN]);
        s.extend(ctl(6, 12));
        // Bulk: in order, a duplicate, a gap (one NAK), a second frame of the gap (no NAK),
        // the missing frame, then a bad pcrc (a gap with a fresh NAK).
        s.extend(bulk(0, 0));
        s.extend(bulk(0, 0));
        s.extend(bulk(2, 128));
        s.extend(bulk(3, 192));
        s.extend(bulk(1, 64));
        let mut bad = bulk(2, 128);
        bad[40] ^= 4;
        s.extend(bad);
        // A lost byte and a lost word before good frames.
        let mut f = ctl(7, 9);
        f.remove(30);
        s.extend(f);
        s.extend(ctl(8, 9));
        let mut f = ctl(9, 9);
        f.drain(4..8);
        s.extend(f);
        s.extend(ctl(10, 9));
        s.resize(s.len() + 1100 + (4 - s.len() % 4) % 4, 0);
        s.extend(frame(
            &Header { ack: 7, credit: FENCE_MARK, ..Header::new(Channel::Weights, flags::ACK) },
            &[],
        ));
        tb.run_bytes(dut, &s);
        tb.drain_fifo(dut);
        use rx_ev::*;
        let want: Vec<(u8, u8, bool)> = vec![
            (1, PCRC, false),
            (1, FIFO, false),
            (1, FIFO, false),
            (1, FIFO, false),
            (1, PCRC, false),
            (1, FIFO, false),
            (2, ACCEPT, false),
            (2, DUP, false),
            (2, GAP, true),
            (2, GAP, false),
            (2, ACCEPT, false),
            (2, PCRC, true),
            (1, PCRC, false),
            (1, FIFO, false),
            (1, FIFO, false),
            (2, CTRL, false),
        ];
        // The false header and the lost word are refused by their hcrc, between the
        // decisions above.
        let got: Vec<(u8, u8, bool)> = tb.ev_log.iter().copied().filter(|e| e.1 != HCRC).collect();
        assert_eq!(got, want);
        assert_eq!(tb.tally[HCRC as usize], 2);
        assert_eq!(tb.fifo_drops, 0);
    });
}

/// The credit refresh (docs/link.md "Bulk channels"): a sender left with less than a frame of
/// credit gets a small grant; the ACK carrying it is repeated after REFRESH cycles, then at
/// doubling intervals up to 64 x REFRESH, until a frame past the old credit proves it arrived.
#[test]
fn credit_refresh_schedule() {
    run_test("link_rx_refresh", &rx_spec(&SETUP_A.p), 5, |dut| {
        let mut tb = Tb::new(dut, SETUP_A);
        tb.ack_p = 1.0;
        tb.piggyback_p = 0.0;
        tb.start(dut);
        // Channel 3 (slot 1, a 4 KiB window): two 2 KiB frames use up the credit.
        let ch = Channel::Gradients;
        let mut s = Vec::new();
        for seq in 0..2u32 {
            s.extend(frame(&Header { seq, ..Header::new(ch, flags::DATA) }, &content(3, 2048 * seq, 2048)));
        }
        s.extend(frame(&Header { credit: FENCE_MARK, ..Header::new(Channel::Weights, flags::ACK) }, &[]));
        tb.run_bytes(dut, &s);
        tb.idle(dut, 2 * SETUP_A.p.ack_delay);
        assert_eq!(dut.get(tb.p.ack_req), 0);
        // The consumer frees 1 KiB, less than a frame: an ACK at once, then the refreshes.
        tb.ack_log.clear();
        tb.set_released(dut, 1, 1024);
        let r = u64::from(SETUP_A.p.refresh);
        let want: Vec<u64> = [1, 2, 4, 8, 16, 32, 64, 64].iter().map(|k| k * r).collect();
        let limit = dut.cycle() + want.iter().sum::<u64>() + 1000;
        while tb.ack_log.len() < want.len() + 1 {
            assert!(dut.cycle() < limit, "refresh ACKs so far: {:?}", tb.ack_log);
            tb.step(dut);
        }
        let times: Vec<u64> = tb.ack_log.iter().map(|a| a.1).collect();
        assert!(tb.ack_log.iter().all(|a| a.0 == 1), "{:?}", tb.ack_log);
        let gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps, want, "refresh intervals");
        // A frame past the old credit (4096) proves the grant: its ACK, then silence.
        let mut s = frame(&Header { seq: 2, ..Header::new(ch, flags::DATA) }, &content(3, 4096, 1024));
        s.extend(frame(&Header { credit: FENCE_MARK | 1, ..Header::new(Channel::Weights, flags::ACK) }, &[]));
        tb.run_bytes(dut, &s);
        tb.ack_log.clear();
        tb.idle(dut, 4 * 64 * SETUP_A.p.refresh);
        assert_eq!(tb.ack_log.len(), 1, "after the proof only the frame's own ACK: {:?}", tb.ack_log);
        eprintln!("credit refresh: intervals {gaps:?} cycles, stopped by the frame past the grant");
    });
}

/// A `ch_reset` (HELLO without RESUME) under a frame being written cancels it: no commit, no
/// further DMA writes, counted as dropped; the retransmission from seq 0 is accepted.
#[test]
fn ch_reset_cancels_a_frame_in_flight() {
    run_test("link_rx_cancel", &rx_spec(&SETUP_A.p), 6, |dut| {
        let mut tb = Tb::new(dut, SETUP_A);
        tb.src = StreamSource::new(dut, "s_phy", 6).pattern(Pattern::Always);
        tb.start(dut);
        let f = frame(&Header::new(Channel::Weights, flags::DATA), &content(2, 0, 2048));
        let mut s = f.clone();
        s.extend(frame(&Header { credit: FENCE_MARK, ..Header::new(Channel::Weights, flags::ACK) }, &[]));
        tb.feed(&s);
        while tb.src.sent() < 200 {
            tb.step(dut);
        }
        tb.override_next = Some(rx_ev::DROP);
        tb.ch_reset_pulse = 0b001;
        let writes = tb.ram.clone();
        tb.step(dut);
        // At most the write already registered lands after the reset.
        tb.step(dut);
        let snapshot = tb.ram.clone();
        tb.settle(dut, 10_000);
        assert_eq!(tb.ram, snapshot, "DMA writes after the cancel");
        assert!(writes.iter().any(|&w| w != 0), "the frame had started being written");
        assert_eq!(tb.tally[rx_ev::DROP as usize], 1);
        let mut s = f;
        s.extend(frame(&Header { credit: FENCE_MARK | 1, ..Header::new(Channel::Weights, flags::ACK) }, &[]));
        tb.run_bytes(dut, &s);
        assert_eq!(tb.tally[rx_ev::ACCEPT as usize], 1);
    });
}

/// The rescan is exact for refused frames up to `keep_limit()` bytes (4 032 in set A). A longer
/// one, here an 8 KiB bulk frame cut after 3 000 bytes, is rescanned from its last 4 032
/// bytes only: a frame that starts before that (F0) is lost to go-back-N, one after it (F1)
/// is found, and the bytes given up count as skipped.
#[test]
fn rescan_of_a_long_frame_is_bounded() {
    let s0 = Setup { max_payload: 8192, ..SETUP_A };
    run_test("link_rx_long_rescan", &rx_spec(&s0.p), 7, |dut| {
        let mut tb = Tb::new(dut, s0);
        tb.start(dut);
        let big = frame(&Header::new(Channel::Weights, flags::DATA), &content(2, 0, 8192));
        let ctl = |seq: u32| {
            frame(&Header { seq, ..Header::new(Channel::Control, flags::DATA) }, &[seq as u8; 100])
        };
        let mut s = big[..3000].to_vec();
        let f0 = ctl(1);
        s.extend(&f0);
        s.resize(6000, 0);
        s.extend(ctl(2));
        s.resize(big.len() + 1200, 0);
        s.extend(frame(&Header { credit: FENCE_MARK, ..Header::new(Channel::Weights, flags::ACK) }, &[]));
        tb.feed(&s);
        // The decoder finds F0 (its second event); the engine cannot.
        let lost = tb.refs.remove(1).unwrap();
        assert!(matches!(&lost, Ref::Frame { h, .. } if h.seq == 1), "{lost:?}");
        tb.counts.engine[0] += f0.len() as u32;
        tb.settle(dut, 100_000);
        tb.drain_fifo(dut);
        use rx_ev::*;
        let codes: Vec<u8> = tb.ev_log.iter().map(|e| e.1).collect();
        assert_eq!(codes, [PCRC, FIFO, CTRL]);
    });
}

/// Line rate: clean frames back to back with valid and ready always high go in at one word
/// per cycle (s_phy_ready never falls), on the word grid and one byte off it.
#[test]
fn line_rate() {
    run_test("link_rx_line_rate", &rx_spec(&SETUP_A.p), 4, |dut| {
        let mut tb = Tb::new(dut, SETUP_A);
        tb.src = StreamSource::new(dut, "s_phy", 4).pattern(Pattern::Always);
        tb.sink = StreamSink::new(dut, "fw_rx", 4).pattern(Pattern::Always).unchecked();
        tb.ack_p = 1.0;
        tb.start(dut);
        for offset in [0usize, 1, 3] {
            // Bulk frames within the credit on all three channels, and FIFO frames.
            let mut s = vec![0x11u8; offset];
            let mut frames = 0;
            for k in 0..24u32 {
                let i = (k % 3) as usize;
                let c = tb.chans[i].as_ref().unwrap();
                let len = 512;
                if seq_diff(c.rx.credit(), tb.tx[i].off.wrapping_add(len)) < 0 {
                    continue;
                }
                let ch = 2 + i as u8;
                let tx = tb.tx[i];
                let h = Header { seq: tx.seq, ..Header::new(Channel::from_u8(ch).unwrap(), flags::DATA) };
                s.extend(frame(&h, &content(ch, tx.off, len)));
                tb.tx[i] = TxState { seq: tx.seq.wrapping_add(1), off: tx.off.wrapping_add(len) };
                s.extend(frame(&Header::new(Channel::Control, flags::DATA), &[k as u8; 60]));
                frames += 2;
            }
            s.resize(s.len() + (4 - s.len() % 4) % 4, 0);
            s.extend(frame(
                &Header { credit: FENCE_MARK | offset as u32, ..Header::new(Channel::Weights, flags::ACK) },
                &[],
            ));
            let words = s.len() / 4;
            let (refs, acks, skipped) = reference(&s, SETUP_A.max_payload);
            tb.refs.extend(refs);
            tb.exp_pa.extend(acks);
            tb.counts.engine[0] += skipped;
            tb.fence_seen = false;
            for w in words_of(&s) {
                tb.src.push(u64::from(w));
            }
            let (c0, sent0) = (dut.cycle(), tb.src.sent());
            let mut stalls = 0;
            while tb.src.pending() > 0 {
                if !dut.get_bool(tb.p.s_phy_ready) {
                    stalls += 1;
                }
                tb.step(dut);
            }
            let feed = dut.cycle() - c0;
            while !(tb.fence_seen && tb.refs.is_empty()) {
                tb.step(dut);
            }
            let total = dut.cycle() - c0;
            tb.idle(dut, 2);
            assert_eq!(Counts::read(dut, &tb.p), tb.counts);
            assert_eq!(tb.src.sent() - sent0, words as u64);
            assert_eq!(stalls, 0, "s_phy_ready fell at full rate");
            assert_eq!(feed, words as u64, "{words} words took {feed} cycles to go in");
            // The last word's decision comes a fixed pipeline latency later.
            assert!(total <= words as u64 + 8, "{words} words decided in {total} cycles");
            eprintln!(
                "line rate, byte offset {offset}: {frames} frames and the fence, {words} words in {feed} cycles ({:.3} cycles/word), last decision {} cycles after the last word",
                feed as f64 / words as f64,
                total - feed
            );
            tb.drain_fifo(dut);
            for i in 0..3 {
                let c = tb.chans[i].as_ref().unwrap().rx.committed();
                tb.set_released(dut, i, c);
            }
            tb.idle(dut, 4);
        }
        tb.summary("link_rx_line_rate", dut);
        assert_eq!(tb.fifo_drops, 0, "a firmware that always reads never loses a frame");
        // cnt_clear zeros every counter.
        assert_ne!(Counts::read(dut, &tb.p), Counts::default());
        let clear = dut.port("cnt_clear");
        dut.set(clear, 1);
        dut.tick();
        dut.set(clear, 0);
        dut.tick();
        assert_eq!(Counts::read(dut, &tb.p), Counts::default(), "after cnt_clear");
    });
}
