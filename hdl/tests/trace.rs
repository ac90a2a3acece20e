//! `ws_trace`, the hardware trace unit (docs/trace.md), alone: driven cycle by cycle with
//! random traffic on its probes and its streamer port, a model of the link DMA RAM behind
//! `m_ext` (random ready patterns), and a model of the host that acknowledges the ring with a
//! random lag, reading each record out of the RAM as it acknowledges it, as the link would
//! have sent it by then.
//!
//! What is checked, at the SoC's parameters and at a small unit that loses a lot:
//!
//! - identity, build parameters and reset values; the cycle counter against the cycles run;
//! - disabled (reset), and with each of seven bad rings (length not a power of two, below 32,
//!   zero; base not aligned to it; START not a multiple of 32; past the DMA RAM): nothing
//!   formed, nothing written, STATUS.bad_ring, `link_ready_en` low, with the traffic on;
//! - `s_rec_ready` high in every cycle: the unit never stalls MemoryX;
//! - with light traffic, a prompt host and a mostly ready RAM (SoC parameters), nothing is
//!   lost but the streamer records of unknown type;
//! - every record the host reads decodes and equals the one the model
//!   (`ws_hdl::trace::Former`, `ws_common::trace::Record`) formed with that sequence number;
//!   no sequence number arrives twice; every one formed arrives or is lost, LOST is the number
//!   that did not arrive, RECORDS the number that did, SEQ the number formed;
//! - every word lands at RING_BASE + (position mod RING_LEN), never past the host's
//!   acknowledged position + RING_LEN, and `link_ready` only ever covers whole records
//!   written (checked every cycle, across the 2^32 wrap of the stream position);
//! - a host that stops acknowledging: the ring and the FIFO fill (HIGH_WATER = FIFO_DEPTH),
//!   records are lost and counted, and the trace carries on when it acknowledges again;
//! - PROBE_EN and CTRL.en cleared mid-chunk forget the open chunks; re-enabling restarts HEAD
//!   at the new START and the sequence at 0;
//! - the small unit: a chunk of more than 0xffff flits saturates its count.
//!
//! `WS_WAVES=1` dumps `target/waves/trace_*.fst`; a failing run is rerun with waves.

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::RngExt;
use ws_common::regmap::trace as reg;
use ws_common::trace::{Record, Source, RECORD_BYTES};
use ws_hdl::dut::{run_test, Dut, Pattern, Port, RegPort, StreamSink};
use ws_hdl::trace::{
    block_spec, Formed, Former, Inputs, PhaseRec, StreamerRec, TraceParams, REC_TYPE_STREAM, REC_TYPE_UPDATE,
    STREAMER_EN,
};

const CTRL_ON: u32 = reg::ctrl::EN.val(1) | reg::ctrl::LINK.val(1);
const CTRL_LINK: u32 = reg::ctrl::LINK.val(1);

/// A ring as firmware configures it.
#[derive(Debug, Clone, Copy)]
struct Ring {
    base: u32,
    len: u32,
    start: u32,
}

#[derive(Clone, Copy)]
struct Ports {
    fire: Port,
    last: Port,
    user: Port,
    rec_valid: Port,
    rec_ready: Port,
    rec_data: Port,
    rec_user: Port,
    ph_valid: Port,
    ph_begin: Port,
    ph_end: Port,
    ph_word4: Port,
    ph_pc: Port,
    ph_pes: Port,
    ph_fmas: Port,
    acked: Port,
    ready: Port,
    ready_en: Port,
    reg: RegPort,
}

enum Op {
    Write(u32, u32),
    Read(u32),
}

/// Random traffic: chunks on every probe at per-probe rates, bursts in which every probe
/// closes a chunk in the same cycle, and streamer records of both types and unknown ones.
struct Traffic {
    rng: StdRng,
    n: usize,
    on: bool,
    rate: Vec<f64>,
    left: Vec<u32>,
    rec_rate: f64,
    burst_rate: f64,
    burst_left: u32,
    /// Phase sources, and a phase record's probability per source and cycle.
    phases: u8,
    phase_rate: f64,
}

impl Traffic {
    /// Rates up to `fire` per probe, a streamer record with probability `rec` and a burst
    /// with probability `burst` per cycle.
    fn load(&mut self, fire: f64, rec: f64, burst: f64) {
        self.rate = (0..self.n).map(|_| self.rng.random_range(0.0..fire)).collect();
        self.rec_rate = rec;
        self.phase_rate = rec;
        self.burst_rate = burst;
        self.burst_left = 0;
        self.on = true;
    }

    fn chunk_len(&mut self) -> u32 {
        match self.rng.random_range(0..20) {
            0..=4 => 1,
            5..=11 => self.rng.random_range(2..=8),
            12..=17 => self.rng.random_range(9..=40),
            _ => self.rng.random_range(41..=300),
        }
    }

    fn next(&mut self, now: u64) -> Inputs {
        let mask = (1u32 << self.n) - 1;
        let user = (0..self.n).map(|_| self.rng.random::<u64>()).collect();
        // `last` of probes that do not fire is junk: the unit must look at it only with a fire.
        let mut inp =
            Inputs { fire: 0, last: self.rng.random::<u32>() & mask, user, rec: None, phase: Vec::new() };
        if !self.on {
            return inp;
        }
        if self.burst_left == 0 && self.rng.random_bool(self.burst_rate) {
            self.burst_left = self.rng.random_range(1..=3);
        }
        if self.burst_left > 0 {
            self.burst_left -= 1;
            inp.fire = mask;
            inp.last = mask;
            self.left.fill(0);
        } else {
            for i in 0..self.n {
                if !self.rng.random_bool(self.rate[i]) {
                    continue;
                }
                inp.fire |= 1 << i;
                if self.left[i] == 0 {
                    self.left[i] = self.chunk_len();
                }
                self.left[i] -= 1;
                if self.left[i] == 0 {
                    inp.last |= 1 << i;
                } else {
                    inp.last &= !(1 << i);
                }
            }
        }
        if self.rng.random_bool(self.rec_rate) {
            inp.rec = Some(self.streamer_rec(now));
        }
        // A burst also finishes an instruction on every wafer in the same cycle.
        let burst = inp.fire == mask && mask != 0;
        for _ in 0..self.phases {
            let on = burst || self.rng.random_bool(self.phase_rate);
            inp.phase.push(on.then(|| self.phase_rec(now)));
        }
        inp
    }

    /// A finished instruction a wafer could hand over at `now`.
    fn phase_rec(&mut self, now: u64) -> PhaseRec {
        let r = &mut self.rng;
        let begin = now.saturating_sub(r.random_range(0..=5000));
        PhaseRec {
            begin,
            end: r.random_range(begin..=now),
            word4: r.random(),
            pc: r.random_range(0..16),
            pes: r.random_range(1..=4),
            fmas: r.random(),
        }
    }

    /// A record the streamer could send at `now`: its stamps at or before now.
    fn streamer_rec(&mut self, now: u64) -> StreamerRec {
        let r = &mut self.rng;
        let ty = match r.random_range(0..20) {
            0 => [0u8, 3, 5, 15][r.random_range(0..4)],
            1..=9 => REC_TYPE_UPDATE,
            _ => REC_TYPE_STREAM,
        };
        let back = r.random_range(0..=now.min(5000)) as u32;
        let t_in = (now as u32).wrapping_sub(back);
        let t_done = t_in.wrapping_add(r.random_range(0..=back));
        let t = [t_in, t_done, r.random(), r.random(), r.random()];
        StreamerRec::new(ty, r.random::<u16>() & 0xfff, r.random(), r.random(), r.random(), t)
    }
}

/// The unit, the DMA RAM behind it, the host in front of the ring, and the model.
struct Tb<'a> {
    dut: &'a mut Dut,
    p: Ports,
    ext: StreamSink,
    ram: Vec<u32>,
    /// `dut.cycle()` when reset was released: the unit's counter is `dut.cycle() - t0`.
    t0: u64,
    traffic: Traffic,
    host: StdRng,
    /// Acknowledgements per cycle (0: the host has stopped).
    p_ack: f64,
    /// Ready positions seen, newest last: the host acknowledges one of them (a lag).
    seen: VecDeque<u32>,
    acked: u32,
    model: Former,
    /// The run's records by sequence number (`None`: lost at once), and which arrived.
    formed: Vec<Option<Record>>,
    arrived: Vec<bool>,
    n_arrived: u32,
    /// Bytes of the record the host is reading.
    partial: Vec<u8>,
    /// The ring of the current good run; `None` while any write would be a bug.
    ring: Option<Ring>,
    /// Words written in this run.
    writes: u32,
    /// `link_ready_en` expected (`None` while a restart is pending).
    ready_en: Option<bool>,
    /// The ring being enabled, while its restart is pending.
    opening: Option<Ring>,
}

impl<'a> Tb<'a> {
    fn new(dut: &'a mut Dut, params: &TraceParams) -> Self {
        let port = |n: &str| dut.port(n);
        let p = Ports {
            fire: port("probe_fire"),
            last: port("probe_last"),
            user: port("probe_user"),
            rec_valid: port("s_rec_valid"),
            rec_ready: port("s_rec_ready"),
            rec_data: port("s_rec_data"),
            rec_user: port("s_rec_user"),
            ph_valid: port("ph_valid"),
            ph_begin: port("ph_begin"),
            ph_end: port("ph_end"),
            ph_word4: port("ph_word4"),
            ph_pc: port("ph_pc"),
            ph_pes: port("ph_pes"),
            ph_fmas: port("ph_fmas"),
            acked: port("link_acked"),
            ready: port("link_ready"),
            ready_en: port("link_ready_en"),
            reg: RegPort::new(dut),
        };
        for q in [p.fire, p.rec_valid, p.ph_valid, p.acked] {
            dut.set(q, 0);
        }
        let ext = StreamSink::with_fields(dut, "m_ext", &["addr", "wdata"], dut.seed()).unchecked();
        dut.reset(4);
        let n = params.probes.len();
        Tb {
            t0: dut.cycle(),
            traffic: Traffic {
                rng: dut.rng(1),
                n,
                on: false,
                rate: vec![0.0; n],
                left: vec![0; n],
                rec_rate: 0.0,
                burst_rate: 0.0,
                burst_left: 0,
                phases: params.phases,
                phase_rate: 0.0,
            },
            host: dut.rng(2),
            dut,
            p,
            ext,
            ram: vec![0; params.dma_bytes as usize / 4],
            p_ack: 0.2,
            seen: VecDeque::new(),
            acked: 0,
            model: Former::new(&params.probes, params.phases),
            formed: Vec::new(),
            arrived: Vec::new(),
            n_arrived: 0,
            partial: Vec::new(),
            ring: None,
            writes: 0,
            ready_en: Some(false),
            opening: None,
        }
    }

    /// The unit's cycle counter in the coming cycle.
    fn now(&self) -> u64 {
        self.dut.cycle() - self.t0
    }

    fn step(&mut self, op: Option<Op>) -> u32 {
        let inp = self.traffic.next(self.now());
        self.step_with(inp, op)
    }

    /// One clock with these inputs and register access, everything checked.
    fn step_with(&mut self, inp: Inputs, op: Option<Op>) -> u32 {
        let now = self.now();
        let p = self.p;
        let d = &mut *self.dut;
        d.set(p.fire, u64::from(inp.fire));
        d.set(p.last, u64::from(inp.last));
        let words: Vec<u32> = inp.user.iter().flat_map(|&u| [u as u32, (u >> 32) as u32]).collect();
        d.set_words(p.user, &words);
        match inp.rec {
            Some(r) => {
                d.set(p.rec_valid, 1);
                d.set_words(p.rec_data, &r.data);
                d.set(p.rec_user, r.user);
            }
            None => {
                // Junk while idle: the unit must look at the record only with valid.
                d.set(p.rec_valid, 0);
                let junk: [u32; 5] = self.host.random();
                d.set_words(p.rec_data, &junk);
                d.set(p.rec_user, self.host.random());
            }
        }
        // Phase ports: each wafer's slot of every vector, junk where it does not offer one.
        let slots = usize::from(self.traffic.phases.max(1));
        let mut valid = 0u64;
        let (mut begin, mut end, mut word4, mut pc, mut pes, mut fmas) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for w in 0..slots {
            let ph = inp.phase.get(w).copied().flatten();
            valid |= u64::from(ph.is_some()) << w;
            let v = ph.unwrap_or_else(|| PhaseRec {
                begin: self.host.random::<u64>() & 0xffff_ffff_ffff,
                end: 0,
                word4: self.host.random(),
                pc: self.host.random(),
                pes: self.host.random(),
                fmas: self.host.random(),
            });
            begin.push(v.begin);
            end.push(v.end);
            word4.push(v.word4);
            pc.push(v.pc);
            pes.push(v.pes);
            fmas.push(v.fmas);
        }
        d.set(p.ph_valid, valid);
        d.set_words(p.ph_begin, &pack(&begin, 48));
        d.set_words(p.ph_end, &pack(&end, 48));
        d.set_words(p.ph_word4, &word4);
        d.set_words(p.ph_pc, &pack(&pc.iter().map(|&x| u64::from(x)).collect::<Vec<_>>(), 16));
        d.set_words(p.ph_pes, &pack(&pes.iter().map(|&x| u64::from(x)).collect::<Vec<_>>(), 16));
        d.set_words(p.ph_fmas, &fmas);
        d.set(p.acked, u64::from(self.acked));
        match op {
            Some(Op::Write(a, v)) => p.reg.start_write(d, a, v, 0xf),
            Some(Op::Read(a)) => p.reg.start_read(d, a),
            None => p.reg.release(d),
        }
        self.ext.drive(d);
        d.eval();

        assert!(
            d.get_bool(p.rec_ready),
            "s_rec_ready fell at cycle {now}: the unit must never stall MemoryX"
        );
        let ready = d.get(p.ready) as u32;
        if let Some(want) = self.ready_en {
            assert_eq!(d.get_bool(p.ready_en), want, "link_ready_en at cycle {now}");
        }
        // Whenever the unit drives the link, its ready position is inside the window from the
        // host's acknowledged position: never the old trace's end while a restart is pending
        // (a link window just opened at START would send stale ring bytes).
        if let (true, Some(r)) = (d.get_bool(p.ready_en), self.ring.or(self.opening)) {
            assert!(
                ready.wrapping_sub(self.acked) <= r.len,
                "link_ready {ready:#x} driven at cycle {now} outside the window from acked {:#x}",
                self.acked
            );
        }
        if let Some(ring) = self.ring {
            let head = ring.start.wrapping_add(32 * (self.writes / 8));
            assert_eq!(
                ready, head,
                "link_ready at cycle {now} is not the end of the whole records written ({} words)",
                self.writes
            );
            assert!(
                ready.wrapping_sub(self.acked) <= ring.len,
                "link_ready {ready:#x} is past acked {:#x} + RING_LEN",
                self.acked
            );
        }
        if let Some(beat) = self.ext.sample(self.dut) {
            self.ram_write(now, beat[0] as u32, beat[1] as u32);
        }
        let mut out = Vec::new();
        self.model.step(now, &inp, &mut out);
        for f in out {
            assert_eq!(f.seq() as usize, self.formed.len());
            self.formed.push(match f {
                Formed::Record(r) => Some(r),
                Formed::Lost(_) => None,
            });
            self.arrived.push(false);
        }
        self.dut.tick();
        p.reg.release(self.dut);
        self.host_step(ready);
        self.dut.eval();
        p.reg.data(self.dut)
    }

    fn ram_write(&mut self, now: u64, addr: u32, data: u32) {
        let ring = self.ring.unwrap_or_else(|| {
            panic!("cycle {now}: the unit wrote word {addr:#x} with no good ring (disabled, bad ring, or restarting)")
        });
        let pos = ring.start.wrapping_add(4 * self.writes);
        let want = (ring.base + (pos & (ring.len - 1))) / 4;
        assert_eq!(
            addr, want,
            "cycle {now}: word {} of the run (position {pos:#x}) went to the wrong address",
            self.writes
        );
        // START is a multiple of 32, so the record's first byte is at pos & !31.
        let end = (pos & !31).wrapping_add(32);
        assert!(
            end.wrapping_sub(self.acked) <= ring.len,
            "cycle {now}: wrote position {pos:#x} of a record ending at {end:#x}, past acked {:#x} + RING_LEN {:#x}",
            self.acked,
            ring.len
        );
        self.ram[addr as usize] = data;
        self.writes += 1;
    }

    /// The host: acknowledges (part of) a ready position it saw a while ago, reading the
    /// bytes out of the ring as it does.
    fn host_step(&mut self, ready: u32) {
        self.seen.push_back(ready);
        if self.seen.len() > 64 {
            self.seen.pop_front();
        }
        let Some(ring) = self.ring else { return };
        if self.p_ack == 0.0 || !self.host.random_bool(self.p_ack) {
            return;
        }
        let lag = self.host.random_range(0..self.seen.len());
        let target = self.seen[self.seen.len() - 1 - lag];
        let ahead = target.wrapping_sub(self.acked);
        if ahead == 0 || ahead > ring.len {
            return;
        }
        let n = if self.host.random_bool(0.5) { ahead } else { self.host.random_range(1..=ahead) };
        self.receive(ring, n);
    }

    fn receive(&mut self, ring: Ring, n: u32) {
        for _ in 0..n {
            let at = ring.base + (self.acked & (ring.len - 1));
            self.partial.push(self.ram[at as usize / 4].to_le_bytes()[at as usize % 4]);
            self.acked = self.acked.wrapping_add(1);
            if self.partial.len() == RECORD_BYTES {
                let bytes: [u8; RECORD_BYTES] = self.partial[..].try_into().unwrap();
                self.partial.clear();
                self.check_record(&bytes);
            }
        }
    }

    fn check_record(&mut self, bytes: &[u8; RECORD_BYTES]) {
        let rec = Record::from_bytes(bytes).unwrap_or_else(|e| {
            panic!("record ending at position {:#x} does not decode: {e}: {bytes:02x?}", self.acked)
        });
        let seq = rec.seq as usize;
        match self.formed.get(seq) {
            Some(Some(want)) => assert_eq!(rec, *want, "record {seq} differs from the model's"),
            Some(None) => panic!("record {seq} was a streamer record of unknown type, and arrived: {rec:?}"),
            None => panic!("record {seq} arrived, the model formed only {}: {rec:?}", self.formed.len()),
        }
        assert!(!self.arrived[seq], "record {seq} arrived twice");
        self.arrived[seq] = true;
        self.n_arrived += 1;
    }

    fn run(&mut self, cycles: u32) {
        for _ in 0..cycles {
            self.step(None);
        }
    }

    fn read(&mut self, addr: u32) -> u32 {
        self.step(Some(Op::Read(addr)))
    }

    /// Writes a register; the model follows PROBE_EN and CTRL.en from the next cycle, as the
    /// unit does.
    fn write(&mut self, addr: u32, value: u32) {
        self.step(Some(Op::Write(addr, value)));
        match addr {
            reg::PROBE_EN => self.model.probe_en = value,
            reg::CTRL if reg::ctrl::EN.get(value) == 0 => self.model.on = false,
            _ => {}
        }
    }

    /// Sets the DMA RAM's ready pattern. (The new sink does not know about a beat the old
    /// one saw stalled, so that one beat's stability goes unchecked.)
    fn ext_ready(&mut self, pattern: Pattern) {
        let seed = self.host.random();
        self.ext =
            StreamSink::with_fields(self.dut, "m_ext", &["addr", "wdata"], seed).pattern(pattern).unchecked();
    }

    fn status(&mut self) -> u32 {
        self.read(reg::STATUS)
    }

    /// Configures `ring` and raises CTRL.en (and CTRL.link): a new run, checked from there
    /// on, when `good`.
    fn enable(&mut self, ring: Ring, good: bool) {
        assert!(!good || !self.traffic.on, "the test raises en for a good run with the probes quiet");
        self.write(reg::RING_BASE, ring.base);
        self.write(reg::RING_LEN, ring.len);
        self.write(reg::START, ring.start);
        self.ring = None;
        self.ready_en = None;
        self.acked = ring.start;
        self.write(reg::CTRL, CTRL_ON);
        // From the write of en on, the old trace's end must no longer reach the link.
        self.opening = Some(ring);
        let mut st = self.status();
        for _ in 0..20 {
            if reg::status::RESTART.get(st) == 0 {
                break;
            }
            st = self.status();
        }
        assert_eq!(reg::status::RESTART.get(st), 0, "the restart never happened");
        assert_eq!(reg::status::ACTIVE.get(st), good as u32, "STATUS.active with {ring:x?}");
        assert_eq!(reg::status::BAD_RING.get(st), !good as u32, "STATUS.bad_ring with {ring:x?}");
        self.ready_en = Some(good);
        self.opening = None;
        if good {
            self.ring = Some(ring);
            self.writes = 0;
            self.formed.clear();
            self.arrived.clear();
            self.n_arrived = 0;
            self.partial.clear();
            self.model.restart();
            self.model.on = true;
            assert_eq!(self.read(reg::HEAD), ring.start, "HEAD restarts at START");
        }
        for r in [reg::SEQ, reg::RECORDS, reg::LOST, reg::HIGH_WATER] {
            assert_eq!(self.read(r), 0, "register {r:#x} after the restart");
        }
    }

    /// Stops the traffic, lets the host acknowledge everything, waits for the unit to be
    /// idle, and checks the run's accounting. Returns (formed, arrived, lost).
    fn finish_run(&mut self, name: &str) -> (u32, u32, u32) {
        let ring = self.ring.expect("a good run");
        self.traffic.on = false;
        self.p_ack = 1.0;
        let mut idle = false;
        for _ in 0..20_000 {
            self.run(31);
            let st = self.status();
            let head = ring.start.wrapping_add(32 * (self.writes / 8));
            if reg::status::BUSY.get(st) == 0 && self.acked == head {
                idle = true;
                break;
            }
        }
        assert!(idle, "the unit never drained");
        let seq = self.read(reg::SEQ);
        let records = self.read(reg::RECORDS);
        let lost = self.read(reg::LOST);
        let hw = self.read(reg::HIGH_WATER);
        assert_eq!(seq as usize, self.formed.len(), "SEQ is the records formed");
        assert_eq!(seq, self.model.seq());
        assert_eq!(self.writes % 8, 0, "a record was left half written");
        assert_eq!(records, self.writes / 8, "RECORDS is the records written");
        assert_eq!(records, self.n_arrived, "every record written arrived at the host");
        assert_eq!(lost, seq - self.n_arrived, "LOST is every record formed that did not arrive");
        assert_eq!(self.read(reg::HEAD), ring.start.wrapping_add(32 * records));
        eprintln!("{name}: {seq} records formed, {records} written, {lost} lost; FIFO high water {hw}");
        self.p_ack = 0.2;
        (seq, records, lost)
    }
}

/// The whole scenario on one unit; `rings` are the two good runs' rings. `quiet_lossless`:
/// the unit is big enough to lose nothing in the quiet phase.
fn scenario(dut: &mut Dut, params: &TraceParams, name: &str, rings: [Ring; 2], quiet_lossless: bool) {
    let mut tb = Tb::new(dut, params);
    let all = u32::MAX;

    // Identity, build parameters, reset values.
    assert_eq!(tb.read(0), reg::ID_WORD);
    let pr = tb.read(reg::PARAMS);
    assert_eq!(reg::params::PROBES.get(pr) as usize, params.probes.len());
    assert_eq!(reg::params::HOLD_DEPTH.get(pr), params.hold_depth);
    assert_eq!(reg::params::FIFO_DEPTH.get(pr), params.fifo_depth);
    assert_eq!(tb.read(reg::PROBE_EN), all, "every source enabled at reset");
    for r in [reg::CTRL, reg::STATUS, reg::HEAD, reg::SEQ, reg::RECORDS, reg::LOST] {
        assert_eq!(tb.read(r), 0, "register {r:#x} at reset");
    }
    let now = tb.now();
    assert_eq!(u64::from(tb.read(reg::CYCLE_LO)), now, "CYCLE_LO counts the cycles since reset");
    assert_eq!(tb.read(reg::CYCLE_HI), 0);

    // Disabled: traffic everywhere, nothing formed, nothing written (any write panics).
    tb.traffic.load(0.5, 0.05, 0.01);
    tb.run(500);
    assert_eq!(tb.read(reg::SEQ), 0);

    // Bad rings, with the traffic on: STATUS.bad_ring, nothing formed or written.
    let g = rings[0];
    let dma = params.dma_bytes;
    for bad in [
        Ring { len: 48, ..g },
        Ring { len: 16, ..g },
        Ring { len: 0, ..g },
        Ring { base: g.base + 32, ..g },
        Ring { start: g.start + 16, ..g },
        Ring { base: dma, ..g },
        Ring { base: 0, len: 2 * dma, ..g },
    ] {
        tb.enable(bad, false);
        tb.run(200);
        assert_eq!(tb.read(reg::SEQ), 0, "records formed with the bad ring {bad:x?}");
        tb.write(reg::CTRL, 0);
    }
    tb.traffic.on = false;

    // Run 1, across the 2^32 wrap of the stream position.
    tb.enable(rings[0], true);
    // Quiet: a prompt host, a RAM that is mostly ready, light traffic, no bursts.
    tb.p_ack = 0.5;
    tb.ext_ready(Pattern::Random(0.8));
    tb.traffic.load(0.1, 0.005, 0.0);
    tb.run(6000);
    let lost = tb.read(reg::LOST);
    if quiet_lossless {
        let unknown = tb.formed.iter().filter(|r| r.is_none()).count() as u32;
        assert_eq!(
            lost, unknown,
            "records lost with light traffic and a prompt host (beyond the unknown types)"
        );
    }
    // Bursts: every probe closes a chunk in the same cycle, up to three cycles running.
    tb.ext_ready(Pattern::Mixed);
    tb.p_ack = 0.2;
    tb.traffic.load(0.2, 0.01, 0.001);
    tb.run(4000);
    // Probe 1 and the streamer off for a while, mid-chunk.
    tb.write(reg::PROBE_EN, all & !0b10 & !STREAMER_EN);
    tb.run(1500);
    tb.write(reg::PROBE_EN, all);
    tb.run(1500);
    // The host stops acknowledging: ring and FIFO fill, records are lost and counted.
    tb.p_ack = 0.0;
    tb.traffic.load(0.5, 0.02, 0.005);
    tb.run(3000);
    assert!(tb.read(reg::LOST) > lost, "no record lost while the host did not acknowledge");
    assert_eq!(tb.read(reg::HIGH_WATER), params.fifo_depth, "the FIFO filled");
    let records = tb.read(reg::RECORDS);
    tb.p_ack = 0.2;
    tb.run(3000);
    assert!(tb.read(reg::RECORDS) > records + 20, "the trace did not resume");
    // Heavy traffic, a slow host, then en cleared mid-chunk with the traffic on.
    tb.p_ack = 0.05;
    tb.traffic.load(0.9, 0.05, 0.01);
    tb.run(3000);
    tb.write(reg::CTRL, CTRL_LINK);
    let seq = tb.read(reg::SEQ);
    tb.run(500);
    assert_eq!(tb.read(reg::SEQ), seq, "records formed after en cleared");
    let (formed, arrived, _) = tb.finish_run(&format!("{name} run 1"));
    assert!(arrived > 200 && formed > arrived, "run 1 wrote {arrived} of {formed} records");

    // Run 2: en again, at another START: HEAD and the sequence restart.
    tb.enable(rings[1], true);
    tb.traffic.load(0.15, 0.01, 0.0005);
    tb.run(6000);
    let (_, arrived, _) = tb.finish_run(&format!("{name} run 2"));
    assert!(arrived > 50, "run 2 wrote {arrived} records");
    // Every wafer's phase source took part.
    for w in 0..params.phases {
        let n = tb.formed.iter().flatten().filter(|r| r.source == Source::Wafer(w)).count();
        assert!(n > 10, "run 2 formed {n} phase records of wafer {w}");
    }
}

/// Fields of `width` bits each, field 0 lowest, as the 32-bit words of a vector port.
fn pack(fields: &[u64], width: u32) -> Vec<u32> {
    let bits = fields.len() * width as usize;
    let mut words = vec![0u32; bits.div_ceil(32)];
    for (i, &f) in fields.iter().enumerate() {
        for b in 0..width as usize {
            if f >> b & 1 != 0 {
                let at = i * width as usize + b;
                words[at / 32] |= 1 << (at % 32);
            }
        }
    }
    words
}

#[test]
fn soc_parameters() {
    let params = TraceParams::soc();
    let rings = [
        Ring { base: 0x4000, len: 1024, start: 0xffff_fe60 },
        Ring { base: 0xc000, len: 0x4000, start: 0x1000_0020 },
    ];
    run_test("trace_soc", &block_spec(&params), 11, |dut| scenario(dut, &params, "trace_soc", rings, true));
}

#[test]
fn small_unit_loses_and_counts() {
    let params = TraceParams {
        probes: vec![Source::MxGradIn, Source::MxWeightOut, Source::SwarmUpIn(1)],
        phases: 1,
        hold_depth: 1,
        fifo_depth: 4,
        dma_bytes: 4096,
    };
    let rings =
        [Ring { base: 0x800, len: 512, start: 0xffff_ffe0 }, Ring { base: 0, len: 4096, start: 0xa0 }];
    run_test("trace_small", &block_spec(&params), 12, |dut| {
        scenario(dut, &params, "trace_small", rings, false);

        // A chunk of 0x10004 flits on probe 0 counts 0xffff; a one-flit chunk on probe 2
        // closes in the same cycle as it ends.
        let mut tb = Tb::new(dut, &params);
        tb.enable(Ring { base: 0, len: 64, start: 0 }, true);
        let quiet = |user| Inputs { fire: 0, last: 0, user: vec![user; 3], rec: None, phase: Vec::new() };
        for i in 0..0x10004u32 {
            let last = i == 0x10003;
            let inp = Inputs {
                fire: 1 | (last as u32) << 2,
                last: (last as u32) * 0b101,
                ..quiet(u64::from(i) << 16)
            };
            tb.step_with(inp, None);
        }
        tb.step_with(quiet(0), None);
        let (formed, arrived, lost) = tb.finish_run("trace_small long chunk");
        assert_eq!((formed, arrived, lost), (2, 2, 0));
        let flits: Vec<u16> = tb.formed.iter().map(|r| r.expect("formed").flits).collect();
        assert_eq!(flits, [0xffff, 1]);
    });
}
