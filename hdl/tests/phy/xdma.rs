//! Behavioural models of the Xilinx XDMA IP's AXI4-Stream channel (PG195), both ends of it,
//! for the `ws_phy_xdma_axis` testbench.
//!
//! - [`H2c`] is the IP's H2C master: the host's `write()`s, each cut into descriptors, become
//!   beats. As PG195 "DMA H2C Stream" says, data is packed per descriptor only (a descriptor
//!   starts at byte lane 0 of a new beat), tkeep is all ones except on a descriptor's last
//!   beat when its length is not a multiple of the width, and tlast marks the last beat of
//!   the write. Bytes outside tkeep are random. tvalid has random gaps.
//! - [`C2h`] is the IP's C2H slave and the host's reads behind it: a read of a fixed size is
//!   posted, the IP takes beats (tready, with random stalls) until the read is full or a beat
//!   with tlast ends it (the driver's `eop_flush` mode), then the host takes a while to post
//!   the next read (tready low). Every cycle it checks the adapter's C2H output against
//!   AXI4-Stream and PG195 "DMA C2H Stream" (tvalid held with the same beat until tready;
//!   tkeep non-zero, packed to the LSB, whole 32-bit words, all ones except with tlast) and
//!   against the adapter's documented tlast policy (`MAX_BURST_BEATS`, `IDLE_FLUSH`,
//!   `LAST_HOLDOFF`), and compares every word with what the engine sent, panicking with the
//!   cycle number.

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::RngExt;
use ws_hdl::dut::{Dut, Port};

use super::common::Window;

/// The adapter's parameters, as the models need them.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// AXI4-Stream width in bits.
    pub data_width: usize,
    /// C2H: beats after which a packet ends; 0 = no limit.
    pub max_burst_beats: usize,
    /// C2H: cycles of s_valid low, +1, that end a packet.
    pub idle_flush: usize,
    /// C2H: cycles with tvalid low after each tlast beat.
    pub last_holdoff: usize,
}

impl Params {
    fn words(&self) -> usize {
        self.data_width / 32
    }

    fn bytes(&self) -> usize {
        self.data_width / 8
    }
}

/// On/off decisions with a changing density: always, often, rarely, bursts and long stalls,
/// switching every 32..512 cycles (the harness's `Pattern::Mixed`, for AXI signals, which
/// are not a `s_*` / `m_*` group the harness's agents can drive).
#[derive(Debug)]
pub struct Gaps {
    rng: StdRng,
    left: u32,
    mode: u8,
    on: bool,
    always: bool,
}

impl Gaps {
    /// Mixed gaps, or none at all with `always`.
    pub fn new(rng: StdRng, always: bool) -> Self {
        Gaps { rng, left: 0, mode: 0, on: true, always }
    }

    /// Whether to offer in this cycle.
    pub fn next(&mut self) -> bool {
        if self.always {
            return true;
        }
        if self.left == 0 {
            self.left = self.rng.random_range(32..512);
            self.mode = self.rng.random_range(0..6);
        }
        self.left -= 1;
        match self.mode {
            0 => true,
            1 => self.rng.random_bool(0.5),
            2 => self.rng.random_bool(0.1),
            3 => self.rng.random_bool(0.9),
            4 => self.flip(8.0, 8.0),
            _ => self.flip(3.0, 40.0),
        }
    }

    fn flip(&mut self, on: f64, off: f64) -> bool {
        let mean = if self.on { on } else { off };
        if self.rng.random_bool(1.0 / mean) {
            self.on = !self.on;
        }
        self.on
    }
}

#[derive(Debug, Clone, Copy)]
struct Axis {
    tdata: Port,
    tkeep: Port,
    tlast: Port,
    tvalid: Port,
    tready: Port,
}

impl Axis {
    fn new(dut: &Dut, prefix: &str) -> Self {
        Axis {
            tdata: dut.port(&format!("{prefix}_tdata")),
            tkeep: dut.port(&format!("{prefix}_tkeep")),
            tlast: dut.port(&format!("{prefix}_tlast")),
            tvalid: dut.port(&format!("{prefix}_tvalid")),
            tready: dut.port(&format!("{prefix}_tready")),
        }
    }
}

#[derive(Debug, Clone)]
struct Beat {
    data: Vec<u32>,
    keep: u64,
    last: bool,
}

/// The IP's H2C channel master.
#[derive(Debug)]
pub struct H2c {
    axis: Axis,
    p: Params,
    beats: VecDeque<Beat>,
    gaps: Gaps,
    holding: bool,
    junk: StdRng,
    /// Writes queued.
    pub writes: u64,
    /// Granules of 1..3 bytes queued (the adapter must drop and count them).
    pub bad_granules: u64,
    /// Words the adapter must deliver.
    pub words: u64,
    /// Beats taken.
    pub beats_taken: u64,
    /// From the first beat taken to the last.
    pub window: Window,
}

impl H2c {
    /// The master on `s_axis_h2c_*`, with random tvalid gaps unless `full_rate`.
    pub fn new(dut: &Dut, p: Params, seed: u64, full_rate: bool) -> Self {
        H2c {
            axis: Axis::new(dut, "s_axis_h2c"),
            p,
            beats: VecDeque::new(),
            gaps: Gaps::new(ws_hdl::dut::rng(seed, 0x42c), full_rate),
            holding: false,
            junk: ws_hdl::dut::rng(seed, 0x42d),
            writes: 0,
            bad_granules: 0,
            words: 0,
            beats_taken: 0,
            window: Window::default(),
        }
    }

    /// Queues one host write of `bytes`, cut into descriptors of the lengths `descs` (which
    /// add up to its length), and returns the words the adapter must deliver for it: every
    /// whole 4-byte granule of every descriptor, in order.
    pub fn write(&mut self, bytes: &[u8], descs: &[usize]) -> Vec<u32> {
        assert_eq!(descs.iter().sum::<usize>(), bytes.len());
        let mut out = Vec::new();
        let mut at = 0;
        for (d, &len) in descs.iter().enumerate() {
            let desc = &bytes[at..at + len];
            at += len;
            for g in desc.chunks(4) {
                if g.len() == 4 {
                    out.push(u32::from_le_bytes([g[0], g[1], g[2], g[3]]));
                } else {
                    self.bad_granules += 1;
                }
            }
            let n = desc.len().div_ceil(self.p.bytes());
            for (b, chunk) in desc.chunks(self.p.bytes()).enumerate() {
                let mut lanes: Vec<u8> = (0..self.p.bytes()).map(|_| self.junk.random()).collect();
                lanes[..chunk.len()].copy_from_slice(chunk);
                let data = lanes.chunks(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect();
                let keep = if chunk.len() == 64 { u64::MAX } else { (1u64 << chunk.len()) - 1 };
                let last = d == descs.len() - 1 && b == n - 1;
                self.beats.push_back(Beat { data, keep, last });
            }
        }
        self.writes += 1;
        self.words += out.len() as u64;
        out
    }

    /// Beats not yet taken.
    pub fn pending(&self) -> usize {
        self.beats.len()
    }

    /// Drives the channel for this cycle (before `Dut::eval`).
    pub fn drive(&mut self, dut: &mut Dut) {
        if !self.holding && !self.beats.is_empty() && self.gaps.next() {
            self.holding = true;
        }
        let a = self.axis;
        dut.set(a.tvalid, u64::from(self.holding));
        if self.holding {
            let b = &self.beats[0];
            dut.set_words(a.tdata, &b.data);
            dut.set(a.tkeep, b.keep);
            dut.set(a.tlast, u64::from(b.last));
        } else {
            let junk: Vec<u32> = (0..self.p.words()).map(|_| self.junk.random()).collect();
            dut.set_words(a.tdata, &junk);
            dut.set(a.tkeep, self.junk.random());
            dut.set(a.tlast, self.junk.random_range(0..2));
        }
    }

    /// After `Dut::eval`: takes the beat if the adapter is ready.
    pub fn sample(&mut self, dut: &Dut) {
        if self.holding && dut.get_bool(self.axis.tready) {
            self.holding = false;
            self.beats.pop_front();
            self.beats_taken += 1;
            self.window.note(dut.cycle());
        }
    }
}

/// How the host reads C2H.
#[derive(Debug, Clone, Copy)]
pub struct Reads {
    /// Bytes per read (the host's transfer size), a multiple of the stream width.
    pub size: usize,
    /// Random tready stalls while a read is posted, and random delays between reads.
    pub random: bool,
}

/// The IP's C2H channel slave, with the host's reads behind it.
#[derive(Debug)]
pub struct C2h {
    axis: Axis,
    s_valid: Port,
    p: Params,
    reads: Reads,
    gaps: Gaps,
    rng: StdRng,
    expect: VecDeque<u32>,
    left_in_read: usize,
    post_in: u32,
    ready_now: bool,
    stalled: Option<(Vec<u32>, u64, bool, u64)>,
    valid_before: bool,
    packet_beats: usize,
    holdoff_left: usize,
    s_valid_history: VecDeque<bool>,
    /// Words received.
    pub received: u64,
    /// Beats received.
    pub beats: u64,
    /// Packets (tlast beats) received.
    pub packets: u64,
    /// Packets that ended short of MAX_BURST_BEATS (idle flushes).
    pub idle_packets: u64,
    /// Reads completed.
    pub reads_done: u64,
    /// Bytes of the reads completed.
    pub read_bytes: u64,
    /// From the first beat to the last.
    pub window: Window,
}

impl C2h {
    /// The slave on `m_axis_c2h_*`, expecting `expect`; it watches `s_valid` for the tlast
    /// policy.
    pub fn new(dut: &Dut, p: Params, reads: Reads, expect: &[u32], seed: u64) -> Self {
        assert!(reads.size.is_multiple_of(p.bytes()));
        C2h {
            axis: Axis::new(dut, "m_axis_c2h"),
            s_valid: dut.port("s_valid"),
            p,
            reads,
            gaps: Gaps::new(ws_hdl::dut::rng(seed, 0xc2a), !reads.random),
            rng: ws_hdl::dut::rng(seed, 0xc2b),
            expect: expect.iter().copied().collect(),
            left_in_read: reads.size,
            post_in: 0,
            ready_now: false,
            stalled: None,
            valid_before: false,
            packet_beats: 0,
            holdoff_left: 0,
            s_valid_history: VecDeque::new(),
            received: 0,
            beats: 0,
            packets: 0,
            idle_packets: 0,
            reads_done: 0,
            read_bytes: 0,
            window: Window::default(),
        }
    }

    /// Words still expected.
    pub fn outstanding(&self) -> usize {
        self.expect.len()
    }

    /// Drives tready for this cycle (before `Dut::eval`): a read is posted and no stall.
    pub fn drive(&mut self, dut: &mut Dut) {
        let posted = if self.post_in > 0 {
            self.post_in -= 1;
            false
        } else {
            true
        };
        self.ready_now = posted && self.gaps.next();
        dut.set(self.axis.tready, u64::from(self.ready_now));
    }

    /// After `Dut::eval`: checks the beat on offer and takes it if tready is up.
    pub fn sample(&mut self, dut: &Dut) {
        let cycle = dut.cycle();
        let a = self.axis;
        let valid = dut.get_bool(a.tvalid);
        let fail = |what: String| -> ! { panic!("XDMA C2H model: cycle {cycle}: {what}") };
        let beat = valid.then(|| (dut.get_words(a.tdata), dut.get(a.tkeep), dut.get_bool(a.tlast)));

        if let Some((data, keep, last, since)) = self.stalled.take() {
            match &beat {
                Some((d, k, l)) if *d == data && *k == keep && *l == last => {}
                Some(_) => {
                    fail(format!("the beat offered since cycle {since} changed before tready took it"))
                }
                None => {
                    fail(format!("tvalid dropped before tready took the beat offered since cycle {since}"))
                }
            }
            self.valid_before = true;
        }
        if self.holdoff_left > 0 {
            if valid {
                fail(format!(
                    "tvalid {} cycles after a tlast beat; LAST_HOLDOFF is {}",
                    self.p.last_holdoff - self.holdoff_left + 1,
                    self.p.last_holdoff
                ));
            }
            self.holdoff_left -= 1;
        }
        if let Some((data, keep, last)) = beat {
            let full = if self.p.bytes() == 64 { u64::MAX } else { (1u64 << self.p.bytes()) - 1 };
            if keep == 0
                || keep & !full != 0
                || keep & (keep + 1) != 0
                || !keep.count_ones().is_multiple_of(4)
            {
                fail(format!("tkeep {keep:#x} is not 1..{} whole words packed to the LSB", self.p.words()));
            }
            if !last && keep != full {
                fail(format!("tkeep {keep:#x} without tlast (PG195: all ones except the last beat)"));
            }
            let nth = self.packet_beats + 1;
            let max = self.p.max_burst_beats;
            if max > 0 && nth == max && !last {
                fail(format!("beat {nth} of a packet without tlast; MAX_BURST_BEATS is {max}"));
            }
            // A beat that was not on offer in the previous cycle was loaded in it: if it
            // ends a packet short of the limit, s_valid was low for IDLE_FLUSH + 1 cycles up
            // to then.
            let fresh = !self.valid_before;
            if fresh && last && (max == 0 || nth < max) {
                let need = self.p.idle_flush + 1;
                let idle = self.s_valid_history.len() >= need && self.s_valid_history.iter().all(|v| !v);
                if !idle {
                    fail(format!(
                        "tlast on beat {nth} of a packet, but s_valid was not low for the {need} cycles before (IDLE_FLUSH {}): {:?}",
                        self.p.idle_flush, self.s_valid_history
                    ));
                }
            }
            if self.ready_now {
                let words = (keep.count_ones() / 4) as usize;
                for (i, &w) in data.iter().take(words).enumerate() {
                    match self.expect.pop_front() {
                        Some(e) if e == w => {}
                        Some(e) => fail(format!(
                            "word {i} of the beat is {w:#010x}, expected {e:#010x} (word #{} of the stream): dropped, duplicated or corrupted",
                            self.received
                        )),
                        None => fail(format!("word {w:#010x} nobody sent (duplicated or spurious)")),
                    }
                    self.received += 1;
                }
                self.beats += 1;
                self.window.note(cycle);
                let bytes = keep.count_ones() as usize;
                assert!(bytes <= self.left_in_read, "a beat straddles two reads");
                self.left_in_read -= bytes;
                self.packet_beats += 1;
                if last {
                    self.packets += 1;
                    if max == 0 || nth < max {
                        self.idle_packets += 1;
                    }
                    self.packet_beats = 0;
                    self.holdoff_left = self.p.last_holdoff;
                }
                if last || self.left_in_read == 0 {
                    self.reads_done += 1;
                    self.read_bytes += (self.reads.size - self.left_in_read) as u64;
                    self.left_in_read = self.reads.size;
                    // The host hands the buffer over and posts the next read: a few cycles,
                    // sometimes an interrupt's worth.
                    self.post_in = if !self.reads.random {
                        0
                    } else if self.rng.random_bool(0.1) {
                        self.rng.random_range(200..2000)
                    } else {
                        self.rng.random_range(0..20)
                    };
                }
                self.valid_before = false;
            } else {
                self.stalled = Some((data, keep, last, cycle));
                self.valid_before = true;
            }
        } else {
            self.valid_before = false;
        }

        self.s_valid_history.push_back(dut.get_bool(self.s_valid));
        if self.s_valid_history.len() > self.p.idle_flush + 1 {
            self.s_valid_history.pop_front();
        }
    }
}
