//! A behavioural model of an FT232H / FT2232H (channel A) in synchronous 245 FIFO mode, seen
//! from its FIFO pins, for the `ws_phy_ft245` testbench.
//!
//! What it models (DS_FT2232H / DS_FT232H §4.4 "FT245 Synchronous FIFO Interface Mode", FTDI
//! AN_130 §4.3 and §4.4):
//!
//! - the chip's two buffers toward USB, [`BUFFER`] bytes each: RX (host -> FPGA) and TX
//!   (FPGA -> host);
//! - every transfer happens on a rising edge of CLKOUT: a byte leaves RX when RD# and RXF# are
//!   both low at the edge, a byte enters TX when WR# and TXE# are both low; the chip's outputs
//!   (RXF#, TXE#, ADBUS) change after the edge, and RXF# rises after the edge that took the
//!   last byte, TXE# after the edge that filled the buffer;
//! - ADBUS is driven by the chip while OE# is low (the head of RX while RXF# is low, junk
//!   otherwise); with OE# high it carries what the FPGA drives, or junk when nobody does, so
//!   a DUT that samples the bus at the wrong time sees garbage;
//! - the USB host: it sends packets of up to [`PACKET`] bytes into RX when there is room for
//!   them and reads up to [`PACKET`] bytes out of TX per poll, at a speed that changes in
//!   phases from stopped to faster than the FIFO bus ([`Phases`]), so RXF# and TXE# toggle
//!   often, and optionally holds RXF# / TXE# high for 1..3 clocks after each 512-byte packet
//!   boundary. Those boundary gaps are an assumption made to stress the FPGA (the datasheet's
//!   waveforms do not show their length); a correct FPGA side cannot tell them from a host
//!   that is slow for a moment.
//!
//! Every clock it checks the FPGA's pins and panics with the ft_clk cycle on a violation:
//! bus contention (the FPGA drives while OE# is low), a missing turnaround cycle in either
//! direction, RD# without OE# low since the clock before, RD# and WR# together, WR# without
//! driving the bus, and RD# / WR# low for an edge although RXF# / TXE# was already high at
//! the edge before (the FPGA has exactly one clock to react to a flag; the edge right after a
//! flag rises is harmless, because the chip moves a byte only when its own flag is low).
//! Bytes the host receives are compared with what it should receive as they arrive.

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::RngExt;
use ws_hdl::dut::{Dut, Port};

use super::common::Window;

/// The chip's buffer per direction (the FT2232H's 4 KiB per channel).
pub const BUFFER: usize = 4096;
/// Bytes in a high-speed bulk packet.
pub const PACKET: usize = 512;

/// How the USB host behaves: the speeds (bytes per CLKOUT cycle) its phases pick from, for
/// sending into RX and reading out of TX, and whether the chip's flags gap at packet
/// boundaries.
#[derive(Debug, Clone, Copy)]
pub struct Host {
    /// Speeds of the host's sending, bytes per clock.
    pub feed: &'static [f64],
    /// Speeds of the host's reading, bytes per clock.
    pub drain: &'static [f64],
    /// RXF# / TXE# high for 1..3 clocks after each 512-byte packet, half the time.
    pub boundary_gaps: bool,
}

/// A host that stalls, trickles and now and then outruns the bus, slower than the bus on
/// average so that the chip's buffers hover near empty (RX) and full (TX) and the flags
/// toggle often.
pub const HOST_RANDOM: Host = Host {
    feed: &[0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.45, 1.0],
    drain: &[0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.45, 1.0],
    boundary_gaps: true,
};

/// A host that is never the bottleneck: the ceiling of the FIFO bus.
pub const HOST_FAST: Host = Host { feed: &[8.0], drain: &[8.0], boundary_gaps: false };

/// The pins of the DUT the chip is wired to.
#[derive(Debug, Clone, Copy)]
struct Pins {
    rxf_n: Port,
    txe_n: Port,
    data_i: Port,
    data_o: Port,
    data_oe: Port,
    rd_n: Port,
    wr_n: Port,
    oe_n: Port,
}

/// The FPGA's outputs during one cycle and the chip's flags during the same cycle, all as
/// "asserted" (true = the active-low pin is low), as the chip sees them at the edge that
/// ends the cycle.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    oe: bool,
    rd: bool,
    wr: bool,
    doe: bool,
    dout: u8,
    rxf: bool,
    txe: bool,
}

/// What happened on the pins, for the report and to prove the corners were reached.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    /// Bytes read by the FPGA (host -> FPGA).
    pub rx_bytes: u64,
    /// Bytes written by the FPGA (FPGA -> host).
    pub tx_bytes: u64,
    /// RXF# changes.
    pub rxf_edges: u64,
    /// TXE# changes.
    pub txe_edges: u64,
    /// Edges with WR# low and TXE# high: the byte in flight when TXE# rose, to be offered
    /// again.
    pub held_writes: u64,
    /// Edges with RD# low and RXF# high: the read in flight when RXF# rose.
    pub empty_reads: u64,
    /// Changes of bus direction (the FPGA starting or stopping to drive, OE# falling).
    pub turnarounds: u64,
    /// The longest run of bytes in one direction that the other direction ended (the last
    /// run, which nothing ended, is not counted).
    pub max_run: u64,
    run: u64,
    run_is_write: bool,
    /// From the first byte moved to the last.
    pub window: Window,
}

impl Stats {
    fn count_run(&mut self, write: bool) {
        if write != self.run_is_write {
            self.max_run = self.max_run.max(self.run);
            self.run = 0;
            self.run_is_write = write;
        }
        self.run += 1;
    }
}

/// The chip.
#[derive(Debug)]
pub struct Ft232h {
    pins: Pins,
    rx_buf: VecDeque<u8>,
    tx_buf: VecDeque<u8>,
    to_send: VecDeque<u8>,
    expect: Vec<u8>,
    received: usize,
    next_packet: usize,
    feed: Phases,
    drain: Phases,
    gaps: bool,
    rx_gap: u32,
    tx_gap: u32,
    prev: Sample,
    rxf_n: bool,
    txe_n: bool,
    junk: StdRng,
    /// What happened so far.
    pub stats: Stats,
}

impl Ft232h {
    /// A chip whose host will send `to_fpga` and expects to receive `from_fpga`, wired to
    /// the `ft_*` pins of `dut`. Drives the chip's idle outputs.
    pub fn new(dut: &mut Dut, host: Host, to_fpga: &[u8], from_fpga: &[u8], seed: u64) -> Self {
        let pins = Pins {
            rxf_n: dut.port("ft_rxf_n"),
            txe_n: dut.port("ft_txe_n"),
            data_i: dut.port("ft_data_i"),
            data_o: dut.port("ft_data_o"),
            data_oe: dut.port("ft_data_oe"),
            rd_n: dut.port("ft_rd_n"),
            wr_n: dut.port("ft_wr_n"),
            oe_n: dut.port("ft_oe_n"),
        };
        let mut feed = Phases::new(ws_hdl::dut::rng(seed, 0xfeed), host.feed);
        let next_packet = Self::packet_size(&mut feed);
        let mut chip = Ft232h {
            pins,
            rx_buf: VecDeque::with_capacity(BUFFER),
            tx_buf: VecDeque::with_capacity(BUFFER),
            to_send: to_fpga.iter().copied().collect(),
            expect: from_fpga.to_vec(),
            received: 0,
            next_packet,
            feed,
            drain: Phases::new(ws_hdl::dut::rng(seed, 0xd4a1), host.drain),
            gaps: host.boundary_gaps,
            rx_gap: 0,
            tx_gap: 0,
            prev: Sample::default(),
            rxf_n: true,
            txe_n: true,
            junk: ws_hdl::dut::rng(seed, 0x10c4),
            stats: Stats::default(),
        };
        chip.drive(dut);
        chip
    }

    /// A packet the host sends: often full, often short (the end of a write), sometimes
    /// tiny (a host writing a few bytes at a time), which makes RXF# toggle every few clocks.
    fn packet_size(feed: &mut Phases) -> usize {
        let r = feed.rng();
        match r.random_range(0..10) {
            0..3 => PACKET,
            3..6 => r.random_range(1..=PACKET),
            _ => r.random_range(1..=16),
        }
    }

    /// Everything the host sent has been read by the FPGA and everything it expected has
    /// arrived.
    pub fn done(&self) -> bool {
        self.to_send.is_empty() && self.rx_buf.is_empty() && self.received == self.expect.len()
    }

    /// Bytes still to move, for a message when a run stalls.
    pub fn status(&self) -> String {
        format!(
            "host still to send {} B, chip RX buffer {} B, chip TX buffer {} B, host received {}/{} B",
            self.to_send.len(),
            self.rx_buf.len(),
            self.tx_buf.len(),
            self.received,
            self.expect.len()
        )
    }

    /// One CLKOUT cycle: checks the FPGA's pins, moves the bytes this rising edge moves,
    /// runs the USB side, ticks the DUT's `ft_clk` and drives the chip's outputs for the
    /// next cycle. The DUT must be settled (the caller's other clock low).
    pub fn cycle(&mut self, dut: &mut Dut) {
        let cycle = dut.cycle();
        let p = self.pins;
        let s = Sample {
            oe: !dut.get_bool(p.oe_n),
            rd: !dut.get_bool(p.rd_n),
            wr: !dut.get_bool(p.wr_n),
            doe: dut.get_bool(p.data_oe),
            dout: dut.get(p.data_o) as u8,
            rxf: !self.rxf_n,
            txe: !self.txe_n,
        };
        self.check(cycle, &s);
        if s.doe != self.prev.doe || (s.oe && !self.prev.oe) {
            self.stats.turnarounds += 1;
        }

        // The edge.
        if s.rd && s.rxf {
            self.rx_buf.pop_front().expect("RXF# low means the buffer holds a byte");
            self.stats.rx_bytes += 1;
            self.stats.window.note(cycle);
            self.stats.count_run(false);
            if self.gaps && self.stats.rx_bytes.is_multiple_of(PACKET as u64) && self.junk.random_bool(0.5) {
                self.rx_gap = self.junk.random_range(1..=3);
            }
        } else if s.rd {
            self.stats.empty_reads += 1;
        }
        if s.wr && s.txe {
            self.tx_buf.push_back(s.dout);
            self.stats.tx_bytes += 1;
            self.stats.window.note(cycle);
            self.stats.count_run(true);
            if self.gaps && self.stats.tx_bytes.is_multiple_of(PACKET as u64) && self.junk.random_bool(0.5) {
                self.tx_gap = self.junk.random_range(1..=3);
            }
        } else if s.wr {
            self.stats.held_writes += 1;
        }
        self.usb(cycle);
        self.prev = s;
        dut.tick();

        // The chip's outputs after the edge.
        let rxf_n = self.rx_buf.is_empty() || self.rx_gap > 0;
        let txe_n = self.tx_buf.len() >= BUFFER || self.tx_gap > 0;
        self.stats.rxf_edges += u64::from(rxf_n != self.rxf_n);
        self.stats.txe_edges += u64::from(txe_n != self.txe_n);
        self.rxf_n = rxf_n;
        self.txe_n = txe_n;
        self.rx_gap = self.rx_gap.saturating_sub(1);
        self.tx_gap = self.tx_gap.saturating_sub(1);
        self.drive(dut);
    }

    /// Drives RXF#, TXE# and ADBUS for the cycle that starts now. The chip drives ADBUS as
    /// soon as OE# is low (the OE#-to-data time is well inside a clock), so the bus follows
    /// the OE# the FPGA has just set.
    fn drive(&mut self, dut: &mut Dut) {
        let p = self.pins;
        let bus = if !dut.get_bool(p.oe_n) {
            match (self.rxf_n, self.rx_buf.front()) {
                (false, Some(&b)) => b,
                _ => self.junk.random(),
            }
        } else if dut.get_bool(p.data_oe) {
            dut.get(p.data_o) as u8
        } else {
            self.junk.random()
        };
        dut.set(p.rxf_n, u64::from(self.rxf_n));
        dut.set(p.txe_n, u64::from(self.txe_n));
        dut.set(p.data_i, u64::from(bus));
    }

    /// The protocol rules (see the module doc), on the sample of this edge and the one
    /// before.
    fn check(&self, cycle: u64, s: &Sample) {
        let p = &self.prev;
        let fail = |what: &str| -> ! {
            panic!(
                "FT232H model: protocol violation at ft_clk cycle {cycle}: {what}\n  this edge:  {s:?}\n  edge before: {p:?}"
            )
        };
        if s.doe && s.oe {
            fail("bus contention: the FPGA drives ADBUS while OE# is low, so the chip drives it too");
        }
        if s.doe && p.oe {
            fail("no turnaround: the FPGA drives ADBUS in the cycle right after OE# was low (the chip may still drive)");
        }
        if s.oe && p.doe {
            fail("no turnaround: OE# low in the cycle right after the FPGA drove ADBUS (its drivers may still be on)");
        }
        if s.rd && !(s.oe && p.oe) {
            fail("RD# low without OE# low since the clock before (OE# must lead RD# by one clock)");
        }
        if s.rd && s.wr {
            fail("RD# and WR# low together");
        }
        if s.wr && !s.doe {
            fail("WR# low while the FPGA does not drive ADBUS");
        }
        if s.wr && !p.txe {
            fail("WR# low although TXE# was already high at the edge before (the chip is full)");
        }
        if s.rd && !p.rxf {
            fail("RD# low although RXF# was already high at the edge before (the chip is empty)");
        }
    }

    /// The USB side of one clock: an OUT packet into RX when the host has one, its speed
    /// allows and the buffer has room (the chip NAKs it otherwise); an IN packet out of TX
    /// when the host polls.
    fn usb(&mut self, cycle: u64) {
        let credit = self.feed.credit(2.0 * PACKET as f64);
        if !self.to_send.is_empty() {
            let n = self.next_packet.min(self.to_send.len());
            if credit >= n as f64 && BUFFER - self.rx_buf.len() >= n {
                self.rx_buf.extend(self.to_send.drain(..n));
                self.feed.spend(n as f64);
                self.next_packet = Self::packet_size(&mut self.feed);
            }
        }
        let credit = self.drain.credit(2.0 * PACKET as f64);
        let n = self.tx_buf.len().min(PACKET);
        if n > 0 && credit >= n as f64 {
            self.drain.spend(n as f64);
            for b in self.tx_buf.drain(..n) {
                let i = self.received;
                let want = self.expect.get(i).copied();
                assert!(
                    want == Some(b),
                    "FT232H model: byte #{i} to the host is {b:#04x} at ft_clk cycle {cycle}, expected {} \
                     (a byte was lost, duplicated or corrupted on the way out)",
                    want.map_or("nothing more".to_string(), |w| format!("{w:#04x}"))
                );
                self.received += 1;
            }
        }
    }
}

/// A host-side speed that changes every few hundred to few thousand cycles: from stopped to
/// flat out, so the chip's flags (or the AXI handshakes) toggle often and also sit still for
/// long stretches.
#[derive(Debug)]
pub struct Phases {
    rng: StdRng,
    choices: &'static [f64],
    left: u32,
    rate: f64,
    credit: f64,
}

impl Phases {
    /// A speed drawn from `choices` (units per cycle) for each phase.
    pub fn new(rng: StdRng, choices: &'static [f64]) -> Self {
        Phases { rng, choices, left: 0, rate: 0.0, credit: 0.0 }
    }

    /// Units the host may move in this cycle (credit accumulates while it is not spent, up to
    /// `cap`).
    pub fn credit(&mut self, cap: f64) -> f64 {
        if self.left == 0 {
            self.left = self.rng.random_range(64..2048);
            self.rate = self.choices[self.rng.random_range(0..self.choices.len())];
        }
        self.left -= 1;
        self.credit = (self.credit + self.rate).min(cap);
        self.credit
    }

    /// Spends `n` units of credit.
    pub fn spend(&mut self, n: f64) {
        self.credit -= n;
    }

    /// A random draw for the caller's own choices.
    pub fn rng(&mut self) -> &mut StdRng {
        &mut self.rng
    }
}
