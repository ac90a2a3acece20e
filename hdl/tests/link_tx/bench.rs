//! The `ws_link_tx` bench: a synchronous DMA RAM answering the DUT's reads, the PHY sink
//! feeding the real `ws_common::link::Decoder`, and one [`Bench::cycle`] that runs every agent
//! for one clock. The agents (producers, host receivers, the fake RX half, the firmware) are
//! in `agents.rs`, the frame checkers in `check.rs`, the lockstep `gbn::Sender` in
//! `model.rs`, the port table in `ports.rs`.

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::RngExt;
use ws_common::link::{flags, seq_diff, seq_lt, Decoder, Event, Header, MAX_FRAME};
use ws_hdl::dut::{rng, BlockSpec, Dut, Pattern, Port, StreamSink, StreamSource};

use super::agents::{AckLine, FwAgent, Host, RxReq};
use super::model::RefSender;
use super::ports::Ports;

/// Channel of TX slot k (docs/link-engine-tx.md "Ports").
pub const TX_CH: [u8; 3] = [2, 3, 6];
/// Channel of RX slot j.
pub const RX_CH: [u8; 3] = [2, 3, 4];

/// One parameter set of the RTL.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// `WINDOW`.
    pub window: usize,
    /// `FW_FIFO_WORDS`.
    pub fw_words: usize,
    /// `DMA_AW`.
    pub dma_aw: u32,
}

impl Params {
    /// The block spec of this parameter set.
    pub fn spec(&self) -> BlockSpec {
        let mut s = BlockSpec::new("ws_link_tx")
            .files([
                "hdl/rtl/ws_link_crc32c.v",
                "hdl/rtl/ws_link_tx_gbn.v",
                "hdl/rtl/ws_link_tx_fw.v",
                "hdl/rtl/ws_link_tx.v",
            ])
            .param("WINDOW", self.window)
            .param("FW_FIFO_WORDS", self.fw_words)
            .param("DMA_AW", self.dma_aw);
        s.vlt_files.push("hdl/lint/link_tx.vlt".into());
        s
    }

    /// Bytes of DMA RAM.
    pub fn dma_bytes(&self) -> u32 {
        4 << self.dma_aw
    }
}

/// The two parameter sets the tests sweep: the default (16-frame window, 512-word FIFO,
/// 64 KiB of DMA RAM) and a small window with a bigger FIFO and RAM (room for 64 KiB frames).
pub const PARAMS: [Params; 2] =
    [Params { window: 16, fw_words: 512, dma_aw: 14 }, Params { window: 4, fw_words: 1024, dma_aw: 16 }];

/// The sender state the DUT exports for one TX slot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxState {
    /// `tx_acked_seq`.
    pub acked: u32,
    /// `tx_send_seq`.
    pub send: u32,
    /// `tx_next_seq`.
    pub next: u32,
    /// `tx_sent_bytes`.
    pub sent_bytes: u32,
    /// `acked_bytes`.
    pub acked_bytes: u32,
    /// `tx_credit`.
    pub credit: u32,
}

/// The configuration of one bench run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Ready pattern of the PHY.
    pub phy: Pattern,
    /// Valid pattern of the firmware's pushes.
    pub fw_pattern: Pattern,
    /// `cfg_max_payload`.
    pub max_payload: u32,
    /// `cfg_window` (and the host receivers' window).
    pub window: u16,
    /// `cfg_rto` in cycles.
    pub rto: u32,
}

/// A decoded frame (its payload was checked when it came) and when its first word crossed
/// the PHY handshake.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Its header.
    pub h: Header,
    /// Cycle of its first word.
    pub first: u64,
}

/// The byte of TX slot `k`'s stream at position `pos`: a hash, so a byte read from the
/// wrong place or at the wrong time shows.
pub fn byte_at(k: usize, pos: u32) -> u8 {
    let mut z = u64::from(pos) ^ ((k as u64 + 1) << 40);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u8
}

/// One bulk TX channel: its window, the producer's pointer, and the checker's view of the
/// frames seen on the wire.
#[derive(Debug, Clone)]
pub struct TxChan {
    /// Window enabled.
    pub en: bool,
    /// Window base (bytes).
    pub base: u32,
    /// Window length (bytes).
    pub len: u32,
    /// Seq and byte position the stream starts at (`ch_init_*`).
    pub start_seq: u32,
    /// See `start_seq`.
    pub start_bytes: u32,
    /// Bytes the producer makes ready in all.
    pub total: u32,
    /// The producer's pointer (`win_ready`).
    pub ready: u32,
    /// Producer step limit per advance (bytes); 0 stops it.
    pub step_max: u32,
    /// Producer: chance per cycle to advance.
    pub step_rate: f64,
    /// Next new seq the checker expects.
    pub seen_high: u32,
    /// Stream position after the last new frame.
    pub cut_end: u32,
    /// The cuts seen, newest last: (seq, offset, len).
    pub cuts: VecDeque<(u32, u32, u32)>,
    /// Seq of the last DATA frame.
    pub last_seq: Option<u32>,
    /// Largest credit delivered to the DUT (wrapping order), the initial one included.
    pub max_credit: u32,
    /// Largest ack delivered to the DUT that was not bogus.
    pub max_ack: u32,
    /// Rewinds seen (a seq at or below the previous one).
    pub rewinds: u64,
    /// DATA frames with RETX.
    pub retx: u64,
    /// New DATA frames.
    pub new_frames: u64,
    /// Credit-stall cycles computed from the DUT's state.
    pub model_credit_stall: u64,
    /// Window-stall cycles computed from the DUT's state.
    pub model_window_stall: u64,
}

impl TxChan {
    /// A disabled channel.
    pub fn off() -> Self {
        TxChan {
            en: false,
            base: 0,
            len: 0,
            start_seq: 0,
            start_bytes: 0,
            total: 0,
            ready: 0,
            step_max: 0,
            step_rate: 0.0,
            seen_high: 0,
            cut_end: 0,
            cuts: VecDeque::new(),
            last_seq: None,
            max_credit: 0,
            max_ack: 0,
            rewinds: 0,
            retx: 0,
            new_frames: 0,
            model_credit_stall: 0,
            model_window_stall: 0,
        }
    }

    /// An enabled channel with a window at `base` of `len` bytes, starting at `seq` and
    /// byte position `bytes` with `credit` from the peer, to send `total` bytes.
    pub fn on(base: u32, len: u32, seq: u32, bytes: u32, credit: u32, total: u32) -> Self {
        TxChan {
            en: true,
            base,
            len,
            start_seq: seq,
            start_bytes: bytes,
            total,
            ready: bytes,
            step_max: 512,
            step_rate: 0.2,
            seen_high: seq,
            cut_end: bytes,
            max_credit: credit,
            max_ack: seq,
            ..Self::off()
        }
    }

    /// The stream position after the last byte the producer will make ready.
    pub fn end(&self) -> u32 {
        self.start_bytes.wrapping_add(self.total)
    }

    /// The recorded cut (offset, length) of `seq`.
    pub fn cut_of(&self, seq: u32) -> Option<(u32, u32)> {
        self.cuts.iter().rev().find(|c| c.0 == seq).map(|c| (c.1, c.2))
    }
}

/// Frames and bytes per channel as decoded, to compare with the DUT's counters.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    /// Frames per channel number.
    pub frames: [u64; 8],
    /// Payload bytes per channel number.
    pub bytes: [u64; 8],
    /// ACK-only frames per RX slot.
    pub acks: [u64; 3],
    /// ... of them with NAK.
    pub ack_naks: [u64; 3],
}

/// The bench.
pub struct Bench {
    /// Ports.
    pub p: Ports,
    /// RTL parameters.
    pub params: Params,
    /// Run configuration.
    pub cfg: Config,
    /// The test's random stream.
    pub rng: StdRng,
    /// DMA RAM, one u32 per word.
    pub ram: Vec<u32>,
    rdata: u32,
    /// PHY side.
    pub sink: StreamSink,
    /// Firmware pushes.
    pub fw_src: StreamSource,
    dec: Box<Decoder<MAX_FRAME>>,
    word_cycles: VecDeque<u64>,
    words_in: u64,
    words_base: u64,
    /// Every frame decoded.
    pub log: Vec<Seen>,
    /// Bulk TX channels.
    pub tx: [TxChan; 3],
    /// Host receivers of the bulk TX channels.
    pub host: [Option<Host>; 3],
    /// The fake RX half.
    pub rx: [RxReq; 3],
    /// The firmware.
    pub fw: FwAgent,
    /// Peer acks on their way to the DUT.
    pub acks: AckLine,
    /// Frames decoded, per channel.
    pub counts: Counts,
    /// Clock cycles since reset.
    pub now: u64,
    /// The sender state exported in the current cycle.
    pub state: [TxState; 3],
    /// Lockstep models of slots 0 and 1.
    pub refs: [Option<RefSender>; 2],
    /// Slots 0 and 1 were granted a DATA frame in the last cycle.
    pub last_grants: [bool; 2],
    /// Cycles with m_phy_valid low, from the first word on.
    pub idle_cycles: u64,
    /// Cycle of the first PHY word.
    pub first_word: Option<u64>,
    /// Cycle of the last PHY word.
    pub last_word: u64,
    /// PHY words in all.
    pub words: u64,
    /// Last cycle m_phy_valid was up.
    pub last_busy: u64,
}

impl Bench {
    /// A bench on `dut` (not yet reset).
    pub fn new(dut: &mut Dut, params: Params, cfg: Config) -> Self {
        let seed = dut.seed();
        let p = Ports::new(dut);
        let sink = StreamSink::with_fields(dut, "m_phy", &["data"], seed ^ 0x77).pattern(cfg.phy).unchecked();
        let fw_src = StreamSource::with_fields(dut, "fw_tx", &["data"], seed ^ 0x99).pattern(cfg.fw_pattern);
        Bench {
            p,
            params,
            rng: rng(seed, 0x71),
            ram: vec![0; 1 << params.dma_aw],
            rdata: 0,
            sink,
            fw_src,
            dec: Box::new(Decoder::new()),
            word_cycles: VecDeque::new(),
            words_in: 0,
            words_base: 0,
            log: Vec::new(),
            tx: [TxChan::off(), TxChan::off(), TxChan::off()],
            host: [None, None, None],
            rx: [RxReq::default(), RxReq::default(), RxReq::default()],
            fw: FwAgent::default(),
            acks: AckLine::default(),
            counts: Counts::default(),
            now: 0,
            state: [TxState::default(); 3],
            refs: [None, None],
            last_grants: [false; 2],
            idle_cycles: 0,
            first_word: None,
            last_word: 0,
            words: 0,
            last_busy: 0,
            cfg,
        }
    }

    /// Resets the DUT, drives the configuration and loads every channel's start state with
    /// a `ch_reset` pulse (the test hook for streams that start near the u32 wrap).
    pub fn start(&mut self, dut: &mut Dut) {
        self.dec.set_max_bulk_payload(self.cfg.max_payload as usize);
        dut.set(self.p.cfg_max_payload, u64::from(self.cfg.max_payload));
        dut.set(self.p.cfg_window, u64::from(self.cfg.window));
        dut.set(self.p.cfg_rto, u64::from(self.cfg.rto));
        dut.set(self.p.fw_tx_commit, 0);
        dut.set(self.p.peer_ack_valid, 0);
        dut.set(self.p.cnt_clear, 0);
        dut.set(self.p.ack_req, 0);
        dut.set(self.p.ack_req_nak, 0);
        self.drive_windows(dut);
        dut.reset(4);
        let t = &self.tx;
        dut.set_words(self.p.ch_init_seq, &[t[0].start_seq, t[1].start_seq, t[2].start_seq]);
        dut.set_words(self.p.ch_init_bytes, &[t[0].start_bytes, t[1].start_bytes, t[2].start_bytes]);
        dut.set_words(self.p.ch_init_credit, &[t[0].max_credit, t[1].max_credit, t[2].max_credit]);
        dut.set_words(self.p.win_ready, &[t[0].ready, t[1].ready, t[2].ready]);
        dut.set(self.p.ch_reset, 0b111);
        dut.tick();
        dut.set(self.p.ch_reset, 0);
        dut.eval();
        self.read_state(dut, false);
        let w = self.window_eff() as u16;
        for k in 0..2 {
            self.refs[k] = Some(RefSender::new(&self.tx[k], w, self.cfg.rto));
        }
        self.now = 0;
    }

    /// Loads a new stream state into slot `k` with a `ch_reset` pulse (a HELLO), and
    /// restarts its checker with it.
    pub fn reload(&mut self, dut: &mut Dut, k: usize, chan: TxChan) {
        let mut words = |p: Port, v: u32| {
            let mut w = dut.get_words(p);
            w.resize(3, 0);
            w[k] = v;
            dut.set_words(p, &w);
        };
        words(self.p.ch_init_seq, chan.start_seq);
        words(self.p.ch_init_bytes, chan.start_bytes);
        words(self.p.ch_init_credit, chan.max_credit);
        // The counters run on across a ch_reset.
        let old = &self.tx[k];
        let chan = TxChan {
            model_credit_stall: old.model_credit_stall,
            model_window_stall: old.model_window_stall,
            retx: old.retx,
            new_frames: old.new_frames,
            rewinds: old.rewinds,
            ..chan
        };
        self.tx[k] = chan;
        self.drive_windows(dut);
        dut.set(self.p.ch_reset, 1 << k);
        let keep = if k < 2 { self.refs[k].take() } else { None };
        self.cycle(dut);
        dut.set(self.p.ch_reset, 0);
        dut.eval();
        self.read_state(dut, false);
        if k < 2 {
            // The model starts over too; frames still to be decoded were sent by the old one.
            let mut r = RefSender::new(&self.tx[k], self.window_eff() as u16, self.cfg.rto);
            r.expect = keep.map(|o| o.expect).unwrap_or_default();
            self.refs[k] = Some(r);
        }
    }

    /// Drives win_en/base/len from `tx`.
    pub fn drive_windows(&mut self, dut: &mut Dut) {
        let t = &self.tx;
        let en = t.iter().enumerate().fold(0u64, |a, (k, c)| a | (u64::from(c.en) << k));
        dut.set(self.p.win_en, en);
        dut.set_words(self.p.win_base, &[t[0].base, t[1].base, t[2].base]);
        dut.set_words(self.p.win_len, &[t[0].len, t[1].len, t[2].len]);
    }

    /// Writes stream bytes `from..to` of slot `k` into its window (the producer).
    pub fn produce(&mut self, k: usize, to: u32) {
        let (base, len) = (self.tx[k].base, self.tx[k].len);
        let mut pos = self.tx[k].ready;
        while pos != to {
            let a = base.wrapping_add(pos & (len - 1));
            let w = &mut self.ram[(a >> 2) as usize];
            let sh = 8 * (a & 3);
            *w = (*w & !(0xff << sh)) | (u32::from(byte_at(k, pos)) << sh);
            pos = pos.wrapping_add(1);
        }
        self.tx[k].ready = to;
    }

    /// Runs one clock cycle: every agent, then the checks on what the DUT did.
    pub fn cycle(&mut self, dut: &mut Dut) {
        let now = self.now;
        // ---- agents before the edge
        self.producers();
        for (host, &ch) in self.host.iter_mut().zip(TX_CH.iter()) {
            if let Some(h) = host.as_mut() {
                h.consume(&mut self.rng);
                if let Some(info) = h.poll_ack(now) {
                    self.acks.schedule(&mut self.rng, now, ch, info, &h.knobs);
                }
            }
        }
        for r in self.rx.iter_mut() {
            r.before(&mut self.rng);
        }
        let commit = self.fw.before(now, &mut self.fw_src);
        let pulse = self.acks.pop(now, &mut self.rng);

        // ---- drive
        let t = &self.tx;
        dut.set_words(self.p.win_ready, &[t[0].ready, t[1].ready, t[2].ready]);
        let r = &self.rx;
        dut.set_words(self.p.rx_expected, &[r[0].expected, r[1].expected, r[2].expected]);
        dut.set_words(self.p.rx_credit, &[r[0].credit, r[1].credit, r[2].credit]);
        let bits = |f: &dyn Fn(&RxReq) -> bool| {
            r.iter().enumerate().fold(0u64, |a, (j, x)| a | (u64::from(f(x)) << j))
        };
        let req = bits(&|x| x.req);
        dut.set(self.p.ack_req, req);
        dut.set(self.p.ack_req_nak, bits(&|x| x.req && x.nak));
        dut.set(self.p.dma_rdata, u64::from(self.rdata));
        dut.set(self.p.fw_tx_commit, u64::from(commit));
        match pulse {
            Some(a) => {
                dut.set(self.p.peer_ack_valid, 1);
                dut.set(self.p.peer_ack_ch, u64::from(a.ch));
                dut.set(self.p.peer_ack, u64::from(a.ack));
                dut.set(self.p.peer_credit, u64::from(a.credit));
                dut.set(self.p.peer_nak, u64::from(a.nak));
                if let Some(k) = TX_CH.iter().position(|&c| c == a.ch) {
                    if let Some(r) = self.refs.get_mut(k).and_then(|r| r.as_mut()) {
                        r.next_ack = Some((a.ack, a.credit, a.nak));
                    }
                    let t = &mut self.tx[k];
                    if seq_lt(t.max_credit, a.credit) {
                        t.max_credit = a.credit;
                    }
                    if !a.bogus && seq_lt(t.max_ack, a.ack) {
                        t.max_ack = a.ack;
                    }
                }
            }
            None => dut.set(self.p.peer_ack_valid, 0),
        }
        self.fw_src.drive(dut);
        self.sink.drive(dut);
        dut.eval();

        // ---- sample
        self.rdata = if dut.get_bool(self.p.dma_re) {
            let a = dut.get(self.p.dma_raddr) as usize;
            self.ram[a]
        } else {
            self.rng.random()
        };
        let sent = dut.get(self.p.ack_sent);
        let all_low = req == 0;
        // A pulse with the slot's request low is a DATA grant of TX slot j (0 and 1).
        let granted = [sent & 1 == 1 && req & 1 == 0, sent >> 1 & 1 == 1 && req >> 1 & 1 == 0];
        self.last_grants = granted;
        for j in 0..3 {
            if sent >> j & 1 == 1 {
                self.rx[j].on_sent(now, all_low);
            }
        }
        if self.fw_src.sample(dut).is_some() && self.fw.on_push(now, &mut self.fw_src, &mut self.rng) {
            // The last word of a batch went in and the batch commits in the same cycle.
            dut.set(self.p.fw_tx_commit, 1);
        }
        self.read_state(dut, true);
        self.check_state();
        let active = dut.get(self.p.win_active);
        self.lockstep(granted, active);
        if dut.get_bool(self.p.m_phy_valid) {
            self.last_busy = now;
        }
        match self.sink.sample(dut) {
            Some(beat) => self.on_word(beat[0] as u32),
            None => {
                if self.first_word.is_some() {
                    self.idle_cycles += 1;
                }
            }
        }
        dut.tick();
        self.now += 1;
    }

    fn producers(&mut self) {
        for k in 0..3 {
            let t = &self.tx[k];
            if !t.en || t.step_max == 0 || t.ready == t.end() || !self.rng.random_bool(t.step_rate) {
                continue;
            }
            // Room: the producer may write up to acked_bytes + len.
            let room = self.state[k].acked_bytes.wrapping_add(t.len).wrapping_sub(t.ready);
            let left = t.end().wrapping_sub(t.ready);
            let most = room.min(left).min(t.step_max);
            if most == 0 {
                continue;
            }
            let n = self.rng.random_range(1..=most);
            let to = t.ready.wrapping_add(n);
            self.produce(k, to);
        }
    }

    fn read_state(&mut self, dut: &Dut, count: bool) {
        let a = dut.get_words(self.p.tx_acked_seq);
        let s = dut.get_words(self.p.tx_send_seq);
        let n = dut.get_words(self.p.tx_next_seq);
        let sb = dut.get_words(self.p.tx_sent_bytes);
        let ab = dut.get_words(self.p.acked_bytes);
        let c = dut.get_words(self.p.tx_credit);
        let active = dut.get(self.p.win_active);
        for k in 0..3 {
            let st = TxState {
                acked: a[k],
                send: s[k],
                next: n[k],
                sent_bytes: sb[k],
                acked_bytes: ab[k],
                credit: c[k],
            };
            self.state[k] = st;
            // The stall counters' definitions (docs/link-engine-tx.md), from the state.
            let t = &mut self.tx[k];
            if count && active >> k & 1 == 1 && st.send == st.next {
                let data = seq_diff(t.ready, st.sent_bytes) >= 4;
                let cred = seq_diff(st.credit, st.sent_bytes) >= 4;
                let full = st.next.wrapping_sub(st.acked)
                    >= u32::from(self.cfg.window).clamp(1, self.params.window as u32);
                if data && !cred {
                    t.model_credit_stall += 1;
                }
                if data && cred && full {
                    t.model_window_stall += 1;
                }
            }
        }
    }

    fn check_state(&self) {
        let w = u32::from(self.cfg.window).clamp(1, self.params.window as u32);
        for k in 0..3 {
            let st = self.state[k];
            let out = st.next.wrapping_sub(st.acked);
            assert!(out <= w, "slot {k}: {out} frames outstanding, window {w} (cycle {})", self.now);
            assert!(seq_diff(st.send, st.acked) >= 0 && seq_diff(st.next, st.send) >= 0, "slot {k}: {st:?}");
            if let Some(h) = &self.host[k] {
                let c = h.rx.committed();
                assert!(
                    seq_diff(c, st.acked_bytes) >= 0,
                    "slot {k}: acked_bytes {:#x} past what the host committed {c:#x}",
                    st.acked_bytes
                );
            }
        }
    }

    fn on_word(&mut self, w: u32) {
        let now = self.now;
        self.first_word.get_or_insert(now);
        self.last_word = now;
        self.words += 1;
        self.word_cycles.push_back(now);
        self.words_in += 1;
        let bytes = w.to_le_bytes();
        let mut input: &[u8] = &bytes;
        loop {
            let r = self.dec.feed(input);
            input = &input[r.consumed..];
            match r.event {
                Some(Event::Frame(f)) => {
                    let h = f.header;
                    let payload = f.payload.to_vec();
                    self.on_frame(h, payload);
                }
                Some(Event::Error(e)) => panic!("cycle {now}: the decoder refused the DUT's output: {e}"),
                None => break,
            }
        }
        assert_eq!(self.dec.skipped(), 0, "cycle {now}: the decoder skipped bytes");
    }

    fn on_frame(&mut self, h: Header, payload: Vec<u8>) {
        let now = self.now;
        let wire_words = ws_common::link::frame_len(h.length as usize) as u64 / 4;
        let first_idx = self.words_in - wire_words;
        while self.words_base < first_idx {
            self.word_cycles.pop_front();
            self.words_base += 1;
        }
        let first = self.word_cycles[0];
        let ch = h.channel as usize;
        self.counts.frames[ch] += 1;
        self.counts.bytes[ch] += u64::from(h.length);
        match ch {
            0 | 1 | 5 | 7 => self.fw.check(&h, &payload, now),
            _ if h.has(flags::DATA) => self.on_data(&h, &payload),
            _ => self.on_ack_only(&h),
        }
        self.log.push(Seen { h, first });
    }

    /// Runs until `done` holds, at most `max` cycles.
    ///
    /// # Panics
    /// If `done` does not hold after `max` cycles.
    pub fn run_until(&mut self, dut: &mut Dut, max: u64, what: &str, done: impl Fn(&Bench) -> bool) {
        let start = self.now;
        while !done(self) {
            assert!(self.now - start < max, "{what}: not done after {max} cycles (cycle {})", self.now);
            self.cycle(dut);
        }
    }

    /// Runs until the PHY has been idle for 100 cycles and no frame is half decoded.
    pub fn settle(&mut self, dut: &mut Dut) {
        self.run_until(dut, 1_000_000, "settle", |b| b.now - b.last_busy > 100 && b.dec.buffered() == 0);
    }

    /// Runs `n` cycles.
    pub fn run(&mut self, dut: &mut Dut, n: u64) {
        for _ in 0..n {
            self.cycle(dut);
        }
    }

    /// Reads a counter bus.
    pub fn counter(&self, dut: &Dut, p: Port) -> Vec<u32> {
        dut.get_words(p)
    }
}
