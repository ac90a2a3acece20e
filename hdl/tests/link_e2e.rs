//! End to end: the host's real protocol endpoint (`host_driver::link::Endpoint`, the
//! initiator) against the Verilated link engine top `ws_link` (docs/link-engine.md), joined
//! by the PHY word streams with the shared fault injector (`ws_common::link::fault`) in each
//! direction. The testbench plays the board's firmware on channel 0 (the HELLO reply) and
//! runs channels 2 and 3 in the engine's loopback, so every byte the host writes comes back
//! through the RX half, the DMA RAM and the TX half without a copy.
//!
//! One host tick is one DUT cycle; the host runs every [`HOST_EVERY`] cycles (its input and
//! output in batches, its timers in cycles). `cargo test -p ws-hdl --test link_e2e -- --nocapture`
//! prints the figures.

use std::collections::VecDeque;

use host_driver::link::{Config, Endpoint, LinkState, Role};
use sha2::{Digest, Sha256};
use ws_common::link::fault::{parse_rules, Dir, Injector, Kind};
use ws_common::link::hello::{Hello, HELLO_LEN};
use ws_common::link::{encode_frame, flags, frame_len, Channel, Header, CHANNELS};
use ws_hdl::dut::{Dut, Port};
use ws_hdl::link::{link_spec, LinkParams};

/// The model: 256 KiB of DMA RAM, a history ring that rescans a 4 KiB frame exactly.
const PARAMS: LinkParams = LinkParams {
    fw_rx_depth: 512,
    fw_tx_words: 512,
    hist_words: 2048,
    dma_bytes: 256 << 10,
    window: 16,
    ack_delay: 256,
    refresh: 1024,
};
/// The board's (and the host's) max_payload.
const MAX_PAYLOAD: u32 = 4096;
/// The board's retransmission timeout in cycles (above the round trip plus the host's
/// `ack_delay`, below a painful wait for a lost tail frame).
const BOARD_RTO: u32 = 20_000;
/// RX windows of channels 2, 3, 4 (base, len); 2 and 3 run in loopback.
const RX_WIN: [(u32, u32); 3] = [(0, 64 << 10), (64 << 10, 64 << 10), (128 << 10, 4 << 10)];
/// The host runs every this many cycles.
const HOST_EVERY: u64 = 16;
/// The host frames more only while fewer bytes than this wait for the PHY.
const HOST_QUEUE: usize = 8 << 10;
/// Loopback channels.
const LOOP: [Channel; 2] = [Channel::Weights, Channel::Gradients];

/// The host's configuration: ticks are cycles.
fn host_cfg() -> Config {
    Config {
        max_payload: MAX_PAYLOAD,
        window: 16,
        tx_buffer: 1 << 20,
        rx_buffer: 1 << 20,
        // The RTO adapts (RFC 6298) from 20 000 cycles, never below it.
        rto: 20_000,
        min_rto: 20_000,
        max_rto: 160_000,
        ack_delay: 256,
        hello_retry: 100_000,
        resume: false,
    }
}

/// xorshift64*, for stream contents.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn stream(len: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    (0..len).map(|_| r.next() as u8).collect()
}

fn sha(b: &[u8]) -> [u8; 32] {
    Sha256::digest(b).into()
}

/// Ports of `ws_link` the bench drives or reads every cycle or often.
struct Ports {
    s_valid: Port,
    s_ready: Port,
    s_data: Port,
    m_valid: Port,
    m_data: Port,
    fw_rx_valid: Port,
    fw_rx_data: Port,
    fw_tx_valid: Port,
    fw_tx_ready: Port,
    fw_tx_data: Port,
    fw_tx_commit: Port,
    ch_reset: Port,
    ext_valid: Port,
    ext_ready: Port,
    ext_addr: Port,
    ext_rvalid: Port,
    ext_rdata: Port,
}

impl Ports {
    fn new(d: &Dut) -> Ports {
        Ports {
            s_valid: d.port("s_phy_valid"),
            s_ready: d.port("s_phy_ready"),
            s_data: d.port("s_phy_data"),
            m_valid: d.port("m_phy_valid"),
            m_data: d.port("m_phy_data"),
            fw_rx_valid: d.port("fw_rx_valid"),
            fw_rx_data: d.port("fw_rx_data"),
            fw_tx_valid: d.port("fw_tx_valid"),
            fw_tx_ready: d.port("fw_tx_ready"),
            fw_tx_data: d.port("fw_tx_data"),
            fw_tx_commit: d.port("fw_tx_commit"),
            ch_reset: d.port("ch_reset"),
            ext_valid: d.port("ext_valid"),
            ext_ready: d.port("ext_ready"),
            ext_addr: d.port("ext_addr"),
            ext_rvalid: d.port("ext_rvalid"),
            ext_rdata: d.port("ext_rdata"),
        }
    }
}

/// The host application: writes a stream on each loopback channel, reads what comes back.
struct App {
    out: [Vec<u8>; CHANNELS],
    sent: [usize; CHANNELS],
    got: [Vec<u8>; CHANNELS],
    /// Largest read per host step.
    read_chunk: usize,
    /// Largest `readable` seen per channel.
    max_readable: [usize; CHANNELS],
}

impl App {
    fn new(lens: [usize; 2], read_chunk: usize) -> App {
        let mut out: [Vec<u8>; CHANNELS] = Default::default();
        for (i, ch) in LOOP.iter().enumerate() {
            out[ch.index()] = stream(lens[i], 0x5eed + i as u64);
        }
        App { out, sent: [0; CHANNELS], got: Default::default(), read_chunk, max_readable: [0; CHANNELS] }
    }

    fn step(&mut self, ep: &mut Endpoint) {
        let mut buf = vec![0u8; self.read_chunk];
        for ch in LOOP {
            let c = ch.index();
            if self.sent[c] < self.out[c].len() {
                let n = (64 << 10).min(self.out[c].len() - self.sent[c]);
                self.sent[c] += ep.write(ch, &self.out[c][self.sent[c]..self.sent[c] + n]).unwrap();
            }
            self.max_readable[c] = self.max_readable[c].max(ep.readable(ch));
            if ep.readable(ch) > 0 {
                let n = ep.read(ch, &mut buf).unwrap();
                self.got[c].extend_from_slice(&buf[..n]);
            }
        }
    }

    fn done(&self) -> bool {
        LOOP.iter().all(|c| self.got[c.index()].len() == self.out[c.index()].len())
    }
}

/// The engine, the host endpoint, the injectors and the firmware of channel 0.
struct Rig {
    dut: Dut,
    p: Ports,
    host: Endpoint,
    app: App,
    to_board: Injector,
    to_host: Injector,
    /// Bytes for the s_phy word stream (after the injector); whole frames.
    wire_in: VecDeque<u8>,
    /// m_phy bytes not yet through the injector.
    from_board: Vec<u8>,
    /// Words of the firmware RX frame being read.
    fw_rx: Vec<u32>,
    /// Words for the firmware TX FIFO, and whether to commit once they are in.
    fw_tx: VecDeque<u32>,
    commit_pending: bool,
    commit_now: bool,
    ch_reset_now: bool,
    /// HELLOs the firmware answered.
    hellos: u32,
    /// Cycle the host came up, and the last cycle a word crossed either PHY.
    up_at: Option<u64>,
    last_activity: u64,
    /// The external DMA port's consumer: the word address of the read it asks for, and the
    /// words read so far.
    ext_addr: Option<u32>,
    ext_words: Vec<u32>,
    scratch: Vec<u8>,
    after: Vec<u8>,
}

impl Rig {
    fn new(dut: Dut, faults: &str, seed: u64, app: App, cfg: Config) -> Rig {
        let rules = parse_rules(faults).unwrap();
        let p = Ports::new(&dut);
        let mut rig = Rig {
            dut,
            p,
            host: Endpoint::new(Role::Initiator, cfg),
            app,
            to_board: Injector::new(Dir::ToBoard, &rules, seed),
            to_host: Injector::new(Dir::ToHost, &rules, seed + 1),
            wire_in: VecDeque::new(),
            from_board: Vec::new(),
            fw_rx: Vec::new(),
            fw_tx: VecDeque::new(),
            commit_pending: false,
            commit_now: false,
            ch_reset_now: false,
            hellos: 0,
            up_at: None,
            last_activity: 0,
            ext_addr: None,
            ext_words: Vec::new(),
            scratch: Vec::new(),
            after: Vec::new(),
        };
        rig.boot();
        rig
    }

    fn set(&mut self, name: &str, v: u64) {
        let p = self.dut.port(name);
        self.dut.set(p, v);
    }

    fn set_words(&mut self, name: &str, w: &[u32]) {
        let p = self.dut.port(name);
        self.dut.set_words(p, w);
    }

    fn words(&self, name: &str) -> Vec<u32> {
        self.dut.get_words(self.dut.port(name))
    }

    fn word(&self, name: &str, i: usize) -> u32 {
        self.words(name)[i]
    }

    /// Reset, static configuration, RX windows of channels 2 and 3 open in loopback.
    fn boot(&mut self) {
        self.set("cfg_max_payload", u64::from(MAX_PAYLOAD));
        self.set("cfg_window", PARAMS.window as u64);
        self.set("cfg_rto", u64::from(BOARD_RTO));
        self.set("cfg_loopback", 0b11);
        self.set("m_phy_ready", 1);
        self.set("fw_rx_ready", 1);
        let bases: Vec<u32> = RX_WIN.iter().map(|w| w.0).collect();
        let lens: Vec<u32> = RX_WIN.iter().map(|w| w.1).collect();
        self.set_words("rx_win_base", &bases);
        self.set_words("rx_win_len", &lens);
        self.dut.reset(4);
        self.set("rx_win_en", 0b011);
        self.dut.tick();
    }

    /// The firmware's answer to a HELLO: reset every channel with the host's credit, then
    /// the board's own HELLO (credit = window length of each open RX window).
    fn answer_hello(&mut self, peer: &Hello) {
        self.hellos += 1;
        let mine = self.board_hello();
        let n = mine.negotiate(peer).expect("the board accepts the host's HELLO");
        self.set("cfg_max_payload", u64::from(n.max_payload));
        self.set("cfg_window", u64::from(n.window));
        let credit: Vec<u32> = [Channel::Weights, Channel::Gradients, Channel::Trace]
            .iter()
            .map(|c| peer.channel(*c).credit)
            .collect();
        self.set_words("ch_init_credit", &credit);
        self.ch_reset_now = true;
        let h = Header { length: HELLO_LEN as u32, ..Header::new(Channel::Link, flags::HELLO) };
        let hb = h.encode();
        let mut words: Vec<u32> =
            hb[..20].chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
        let mut pay = mine.encode().to_vec();
        pay.resize(pay.len().div_ceil(4) * 4, 0);
        words.extend(pay.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())));
        self.fw_tx.extend(words);
        self.commit_pending = true;
    }

    fn board_hello(&self) -> Hello {
        let mut h = Hello::new(MAX_PAYLOAD, PARAMS.window as u16);
        let active = self.dut.get(self.dut.port("rx_win_active"));
        for (j, ch) in [Channel::Weights, Channel::Gradients, Channel::Data].iter().enumerate() {
            if active >> j & 1 != 0 {
                h.state[ch.index()].credit = RX_WIN[j].1;
            }
        }
        h
    }

    /// A whole frame arrived in the firmware RX FIFO.
    fn fw_frame(&mut self) {
        let b: Vec<u8> = self.fw_rx.iter().flat_map(|w| w.to_le_bytes()).collect();
        let (ch, fl) = (b[3], b[4]);
        let len = u32::from_le_bytes([b[5], b[6], b[7], 0]) as usize;
        assert_eq!(ch, 0, "only channel 0 reaches the firmware here");
        if fl & flags::HELLO != 0 {
            let peer = Hello::decode(&b[24..24 + len]).expect("a valid HELLO");
            self.answer_hello(&peer);
        }
    }

    /// The host's turn: bytes from the board in, the application, bytes to the board out.
    fn host_step(&mut self, now: u64) {
        self.scratch.clear();
        if !self.from_board.is_empty() {
            self.to_host.push(&self.from_board, now, &mut self.scratch);
            self.from_board.clear();
        }
        self.to_host.poll(now, &mut self.scratch);
        if !self.scratch.is_empty() {
            self.host.input(&self.scratch, now);
        }
        if self.up_at.is_none() && self.host.is_up() {
            self.up_at = Some(now);
        }
        self.app.step(&mut self.host);
        self.scratch.clear();
        let budget = if self.wire_in.len() < HOST_QUEUE { HOST_QUEUE } else { 0 };
        self.host.output(now, &mut self.scratch, budget);
        self.after.clear();
        self.to_board.push(&self.scratch, now, &mut self.after);
        self.to_board.poll(now, &mut self.after);
        self.wire_in.extend(&self.after);
    }

    /// One DUT cycle with every agent.
    fn cycle(&mut self) {
        let now = self.dut.cycle();
        if now.is_multiple_of(HOST_EVERY) {
            self.host_step(now);
        }
        let p = &self.p;
        let word = (self.wire_in.len() >= 4).then(|| {
            u32::from_le_bytes([self.wire_in[0], self.wire_in[1], self.wire_in[2], self.wire_in[3]])
        });
        self.dut.set(p.s_valid, word.is_some() as u64);
        self.dut.set(p.s_data, u64::from(word.unwrap_or(0)));
        let fw_word = self.fw_tx.front().copied();
        self.dut.set(p.fw_tx_valid, fw_word.is_some() as u64);
        self.dut.set(p.fw_tx_data, u64::from(fw_word.unwrap_or(0)));
        self.dut.set(p.fw_tx_commit, self.commit_now as u64);
        self.dut.set(p.ch_reset, self.ch_reset_now as u64);
        self.dut.set(p.ext_valid, self.ext_addr.is_some() as u64);
        self.dut.set(p.ext_addr, u64::from(self.ext_addr.unwrap_or(0)));
        self.commit_now = false;
        self.ch_reset_now = false;
        self.dut.eval();
        let ext_taken = self.ext_addr.is_some() && self.dut.get_bool(p.ext_ready);
        if self.dut.get_bool(p.ext_rvalid) {
            self.ext_words.push(self.dut.get(p.ext_rdata) as u32);
        }
        let s_taken = word.is_some() && self.dut.get_bool(p.s_ready);
        let m_word = self.dut.get_bool(p.m_valid).then(|| self.dut.get(p.m_data) as u32);
        let fw_rx = self.dut.get_bool(p.fw_rx_valid).then(|| self.dut.get(p.fw_rx_data) as u32);
        let fw_taken = fw_word.is_some() && self.dut.get_bool(p.fw_tx_ready);
        self.dut.tick();

        if s_taken {
            self.wire_in.drain(..4);
        }
        if ext_taken {
            self.ext_addr = None;
        }
        if let Some(w) = m_word {
            self.from_board.extend_from_slice(&w.to_le_bytes());
        }
        if s_taken || m_word.is_some() {
            self.last_activity = now;
        }
        if fw_taken {
            self.fw_tx.pop_front();
            if self.fw_tx.is_empty() && self.commit_pending {
                self.commit_pending = false;
                self.commit_now = true;
            }
        }
        if let Some(w) = fw_rx {
            self.fw_rx.push(w);
            let len = self.fw_rx.get(1).map_or(usize::MAX, |w| (w >> 8) as usize);
            if self.fw_rx.len() >= 6 && self.fw_rx.len() == 6 + len.div_ceil(4) {
                self.fw_frame();
                self.fw_rx.clear();
            }
        }
    }

    /// Runs until the application is done (every stream back and acknowledged), at most
    /// `max` cycles; `each` runs after every host step.
    fn run(&mut self, max: u64, mut each: impl FnMut(&mut Rig)) -> u64 {
        let start = self.dut.cycle();
        while self.dut.cycle() - start < max {
            self.cycle();
            if self.dut.cycle().is_multiple_of(HOST_EVERY) {
                each(self);
                if self.app.done() && LOOP.iter().all(|&c| self.host.flushed(c)) {
                    return self.dut.cycle();
                }
            }
        }
        panic!(
            "not done in {max} cycles: got {:?} of {:?}, state {:?}, hellos {}",
            LOOP.map(|c| self.app.got[c.index()].len()),
            LOOP.map(|c| self.app.out[c.index()].len()),
            self.host.state(),
            self.hellos
        );
    }

    /// Runs until both PHYs have been idle for a while, so every frame sent was received.
    fn settle(&mut self) {
        for _ in 0..200_000 {
            self.cycle();
            let now = self.dut.cycle();
            if now.is_multiple_of(HOST_EVERY)
                && now - self.last_activity > 512
                && self.wire_in.is_empty()
                && self.from_board.is_empty()
            {
                return;
            }
        }
        panic!("the link never went idle");
    }

    fn check_streams(&self) {
        for ch in LOOP {
            let c = ch.index();
            assert_eq!(self.app.got[c].len(), self.app.out[c].len(), "{ch:?}: length");
            assert_eq!(
                sha(&self.app.got[c]),
                sha(&self.app.out[c]),
                "{ch:?}: SHA-256 of what came back differs"
            );
        }
    }

    fn sum(&self, name: &str) -> u64 {
        self.words(name).iter().map(|&w| u64::from(w)).sum()
    }

    /// Counters that agree between the engine and the host on any link: what the host sent
    /// on each loopback channel was accepted exactly once by the RX half, and what came back
    /// was cut by the TX half.
    fn check_counters_agree(&self) {
        for (k, ch) in LOOP.iter().enumerate() {
            let c = ch.index();
            let s = self.host.sender(*ch).unwrap().stats();
            let r = self.host.receiver(*ch).unwrap().stats();
            let len = self.app.out[c].len() as u64;
            assert_eq!(
                u64::from(self.word("rx_cnt_frames", c)),
                s.frames,
                "{ch:?}: RX frames vs host's new frames"
            );
            assert_eq!(u64::from(self.word("rx_cnt_bytes", c)), len, "{ch:?}: RX bytes");
            assert_eq!(r.bytes, len, "{ch:?}: host receiver bytes");
            assert_eq!(u64::from(self.word("tx_acked_bytes", k)), len, "{ch:?}: TX acked bytes");
            assert_eq!(u64::from(self.word("rx_committed", k)), len, "{ch:?}: RX committed");
            // TX frames on the channel = DATA (new + RETX) + ACK-only.
            let tx = u64::from(self.word("tx_cnt_frames", c));
            let acks = u64::from(self.word("tx_cnt_acks", k));
            let retx = u64::from(self.word("tx_cnt_retx", k));
            assert_eq!(tx - acks - retx, r.frames, "{ch:?}: TX new DATA frames vs host's accepted ones");
        }
        assert_eq!(u64::from(self.word("rx_cnt_frames", 0)), u64::from(self.hellos), "HELLOs");
    }
}

fn dut() -> Dut {
    let mut d = Dut::build(link_spec(&PARAMS)).expect("ws_link builds");
    d.set_seed(1);
    d
}

fn lens(n: usize) -> [usize; 2] {
    [n, n]
}

/// (a) A clean link: both loopback streams come back byte for byte, the engine's counters
/// agree with the host's, nothing is retransmitted; and the loopback rate at 4 KiB frames.
#[test]
fn clean_loopback_is_byte_identical_and_counters_agree() {
    let per = 4 << 20;
    let mut rig = Rig::new(dut(), "", 1, App::new(lens(per), 1 << 20), host_cfg());
    let end = rig.run(20_000_000, |_| {});
    let up = rig.up_at.unwrap();
    rig.settle();
    rig.check_streams();
    rig.check_counters_agree();
    assert!(matches!(rig.host.state(), LinkState::Up { max_payload: 4096, window: 16, resumed: false }));
    assert_eq!(rig.hellos, 1);
    // Nothing lost, nothing resent, nothing refused, on either side.
    for name in [
        "rx_cnt_pcrc_err",
        "rx_cnt_seq_err",
        "rx_cnt_win_viol",
        "rx_cnt_dropped",
        "tx_cnt_retx",
        "tx_cnt_timeouts",
    ] {
        assert_eq!(rig.sum(name), 0, "{name}");
    }
    for name in
        ["rx_cnt_skipped", "rx_cnt_hcrc_err", "rx_cnt_bad_version", "rx_cnt_bad_header", "tx_cnt_fw_dropped"]
    {
        assert_eq!(rig.sum(name), 0, "{name}");
    }
    for ch in LOOP {
        let s = rig.host.sender(ch).unwrap().stats();
        assert_eq!((s.retransmits, s.timeouts), (0, 0), "{ch:?}: host retransmits on a clean link");
    }
    let hs = rig.host.stats();
    assert_eq!(hs.payload_errors, [0; CHANNELS]);
    assert_eq!(hs.header_errors, 0);
    // Every frame the engine sent was decoded by the host, and every frame the host sent
    // was taken by the engine (DATA and HELLO delivered, ACK-only frames as peer acks).
    assert_eq!(hs.frames_in, rig.sum("tx_cnt_frames"), "host frames in vs TX frames");

    let cycles = end - up;
    let bytes = (2 * per) as f64;
    let rate = bytes / cycles as f64;
    let wire_out = rig.sum("tx_cnt_bytes") as f64 + 24.0 * rig.sum("tx_cnt_frames") as f64;
    eprintln!(
        "loopback at 4 KiB frames: {:.1} MiB each way in {cycles} cycles: {rate:.3} payload bytes/cycle per \
         direction = {:.4} of the 4 B/cycle line rate (framing bound {:.4}); board->host frames {} \
         ({} ACK-only), host->board frames {}; board->host wire bytes {:.0}",
        bytes / (1 << 20) as f64,
        rate / 4.0,
        4096.0 / 4124.0,
        rig.sum("tx_cnt_frames"),
        rig.sum("tx_cnt_acks"),
        hs.frames_out,
        wire_out
    );
}

/// (b) 1 % flips, 1 % drops, 0.1 % duplicates in both directions: the streams come back
/// intact, every payload hit is exactly one pcrc error on the receiving side, and both
/// sides retransmitted.
#[test]
fn faults_in_both_directions_are_repaired_and_accounted_for() {
    for seed in [7, 8, 9] {
        faults_run(seed);
    }
}

fn faults_run(seed: u64) {
    let per = 4 << 20;
    let faults = "both:flip:rate=0.01 both:drop:rate=0.01 both:dup:rate=0.001";
    let mut rig = Rig::new(dut(), faults, seed, App::new(lens(per), 1 << 20), host_cfg());
    let start = rig.dut.cycle();
    let end = rig.run(40_000_000, |_| {});
    let up = rig.up_at.unwrap();
    rig.settle();
    rig.check_streams();
    rig.check_counters_agree();

    let tb = rig.to_board.stats().clone();
    let th = rig.to_host.stats().clone();
    eprintln!("seed {seed}: to board: {}\nseed {seed}: to host:  {}", tb.summary(), th.summary());
    for s in [&tb, &th] {
        assert!(s.total(Kind::Flip) > 10 && s.total(Kind::Drop) > 10, "{}", s.summary());
    }
    // Board-bound: every payload hit is exactly one RX pcrc error on its channel.
    let rx_pcrc = rig.words("rx_cnt_pcrc_err");
    for (c, (&n, &hits)) in rx_pcrc.iter().zip(&tb.payload_hits).enumerate() {
        assert_eq!(u64::from(n), hits, "channel {c}: RX pcrc errors vs payload hits");
    }
    // Header hits: at least as many hcrc refusals (false candidates in rescans add a few).
    let hcrc = rig.sum("rx_cnt_hcrc_err");
    assert!(
        hcrc >= tb.header_hits && hcrc <= tb.header_hits + 16,
        "RX hcrc {hcrc} vs {} header hits",
        tb.header_hits
    );
    // Host-bound: every payload hit is exactly one host pcrc error.
    let hs = rig.host.stats().clone();
    assert_eq!(hs.payload_errors, th.payload_hits, "host pcrc errors vs payload hits");
    assert!(hs.header_errors >= th.header_hits && hs.header_errors <= th.header_hits + 16);
    // Both sides went back.
    let board_retx = rig.sum("tx_cnt_retx");
    let host_retx: u64 = LOOP.iter().map(|&c| rig.host.sender(c).unwrap().stats().retransmits).sum();
    assert!(board_retx > 0 && host_retx > 0, "retransmits: board {board_retx}, host {host_retx}");
    assert!(
        board_retx >= th.total_data(Kind::Drop),
        "board {board_retx} retx for {} dropped",
        th.total_data(Kind::Drop)
    );
    assert!(
        host_retx >= tb.total_data(Kind::Drop),
        "host {host_retx} retx for {} dropped",
        tb.total_data(Kind::Drop)
    );
    // Duplicated DATA frames were seen as such (sequence errors count gaps too).
    assert!(rig.sum("rx_cnt_seq_err") >= tb.total_data(Kind::Dup));
    let host_dups: u64 = LOOP.iter().map(|&c| rig.host.receiver(c).unwrap().stats().duplicates).sum();
    assert!(host_dups >= th.total_data(Kind::Dup));
    assert_eq!(rig.sum("rx_cnt_win_viol"), 0, "no frame past the board's credit");
    eprintln!(
        "seed {seed}: {:.3} payload bytes/cycle per direction (link up {} cycles after reset); board: retx {board_retx}, timeouts {}, naks {}, RX pcrc {}, hcrc {hcrc}, seq {}; host: retx {host_retx}, \
         pcrc {}, hcrc {}, HELLOs answered {}",
        (2 * per) as f64 / (end - up) as f64,
        up - start,
        rig.sum("tx_cnt_timeouts"),
        rig.sum("tx_cnt_naks"),
        rig.sum("rx_cnt_pcrc_err"),
        rig.sum("rx_cnt_seq_err"),
        hs.payload_errors.iter().sum::<u64>(),
        hs.header_errors,
        rig.hellos
    );
}

/// (c) A host that reads slower than the link (1 byte per cycle) with a 64 KiB receive
/// buffer: the board's TX stalls on credit, the stall propagates through loopback to the
/// host's sender, and no buffer ever passes its size.
#[test]
fn a_slow_host_reader_stalls_the_board_on_credit_without_overflow() {
    let rx_buffer = 64 << 10;
    let cfg = Config { rx_buffer, ..host_cfg() };
    let app = App::new([512 << 10, 0], HOST_EVERY as usize);
    let mut rig = Rig::new(dut(), "", 3, app, cfg);
    let mut stalled_mid_stream = false;
    rig.run(10_000_000, |r| {
        assert!(r.host.readable(Channel::Weights) <= rx_buffer as usize, "the host buffer overflowed");
        let total = r.app.out[2].len();
        stalled_mid_stream |= r.word("tx_cnt_credit_stall", 0) > 0 && r.app.got[2].len() < total / 2;
    });
    rig.settle();
    rig.check_streams();
    rig.check_counters_agree();
    let stall = rig.word("tx_cnt_credit_stall", 0);
    assert!(stalled_mid_stream && stall > 0, "the board's TX never stalled on credit");
    let r = rig.host.receiver(Channel::Weights).unwrap().stats();
    assert_eq!(r.credit_violations, 0, "the board sent past the host's credit");
    assert_eq!(rig.sum("rx_cnt_win_viol"), 0, "the host sent past the board's credit");
    let s = rig.host.sender(Channel::Weights).unwrap().stats();
    assert!(s.credit_stalls > 0, "the stall did not reach the host's sender through loopback");
    eprintln!(
        "slow reader: board TX credit-stall cycles {stall}, host sender credit stalls {}, largest host \
         buffer {} of {rx_buffer}",
        s.credit_stalls, rig.app.max_readable[2]
    );
}

/// A raw DATA frame for injection on the PHY.
fn raw_frame(ch: Channel, seq: u32, payload: &[u8]) -> Vec<u8> {
    let h = Header { seq, length: payload.len() as u32, ..Header::new(ch, flags::DATA) };
    let mut f = vec![0u8; frame_len(payload.len())];
    encode_frame(&h, payload, &mut f).unwrap();
    f
}

/// (d) DMA-window violations injected raw on the PHY while both loopback streams run:
/// a frame past the credit of channel 4 (not in loopback: its consumer is the testbench,
/// reading the DMA RAM through the external port), a frame for its closed window, and a
/// refused window geometry are each refused and counted; the streams are unharmed.
#[test]
fn window_violations_are_refused_and_counted_and_the_stream_continues() {
    let mut rig = Rig::new(dut(), "", 5, App::new(lens(512 << 10), 1 << 20), host_cfg());
    let viol = |r: &Rig| r.word("rx_cnt_win_viol", 4);
    let frames4 = |r: &Rig| r.word("rx_cnt_frames", 4);
    let wait = |r: &mut Rig, what: &str, f: &dyn Fn(&Rig) -> bool| {
        for _ in 0..100_000 {
            r.cycle();
            if f(r) {
                return;
            }
        }
        panic!("timed out waiting for {what}");
    };
    // Open channel 4's 4 KiB window (RX only, no loopback), then the streams start.
    rig.set("rx_win_en", 0b111);
    wait(&mut rig, "link up and streaming", &|r| r.app.got[2].len() > 64 << 10);
    assert_eq!(rig.dut.get(rig.dut.port("rx_win_active")), 0b111);
    let f1 = stream(4096, 99);
    let f2 = stream(64, 98);
    // F1 fills the window's credit exactly; F2 is in order but past it.
    rig.wire_in.extend(raw_frame(Channel::Data, 0, &f1));
    rig.wire_in.extend(raw_frame(Channel::Data, 1, &f2));
    wait(&mut rig, "F1 accepted, F2 refused", &|r| frames4(r) == 1 && viol(r) == 1);
    assert_eq!(rig.word("rx_committed", 2), 4096);
    // The consumer reads F1 through the external port while the loopback runs.
    let base = RX_WIN[2].0 / 4;
    let mut next = 0u32;
    while rig.ext_words.len() < 1024 {
        if rig.ext_addr.is_none() && next < 1024 {
            rig.ext_addr = Some(base + next);
            next += 1;
        }
        rig.cycle();
    }
    let got: Vec<u8> = rig.ext_words.iter().flat_map(|w| w.to_le_bytes()).collect();
    assert_eq!(got, f1, "F1 in the DMA RAM, read through the external port");
    // Released: F2's retransmission is accepted now.
    rig.set_words("rx_released", &[0, 0, 4096]);
    wait(&mut rig, "release", &|_| true);
    rig.wire_in.extend(raw_frame(Channel::Data, 1, &f2));
    wait(&mut rig, "F2 accepted", &|r| frames4(r) == 2);
    // Close the window: a frame for it is refused and counted, with no NAK.
    let acknaks = rig.word("tx_cnt_ack_naks", 2);
    rig.set("rx_win_en", 0b011);
    rig.wire_in.extend(raw_frame(Channel::Data, 2, &f2));
    wait(&mut rig, "frame for a closed window refused", &|r| viol(r) == 2);
    // A window that is not aligned to its length is refused and counted once.
    rig.set_words("rx_win_base", &[RX_WIN[0].0, RX_WIN[1].0, RX_WIN[2].0 + 64]);
    rig.set("rx_win_en", 0b111);
    wait(&mut rig, "misaligned window refused", &|r| viol(r) == 3);
    assert_eq!(rig.dut.get(rig.dut.port("rx_win_active")), 0b011);
    assert_eq!(frames4(&rig), 2);
    // The loopback streams continue to the end, unharmed.
    rig.run(10_000_000, |_| {});
    rig.settle();
    rig.check_streams();
    rig.check_counters_agree();
    assert_eq!(rig.word("tx_cnt_ack_naks", 2), acknaks, "no NAK for a closed window");
    assert_eq!((rig.word("rx_cnt_win_viol", 2), rig.word("rx_cnt_win_viol", 3)), (0, 0));
    assert_eq!(rig.word("rx_cnt_win_viol", 4), 3);
    eprintln!(
        "window violations on channel 4: {} (past the credit, closed window, misaligned enable); NAKs sent on it {}",
        viol(&rig),
        rig.word("tx_cnt_ack_naks", 2)
    );
}
