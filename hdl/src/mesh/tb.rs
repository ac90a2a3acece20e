//! Testbench agents for `ws_mesh_router` and `ws_mesh_fabric`.
//!
//! Their ports are flat buses (`s_local_valid[R*COLORS-1:0]`, `m_link_data[4*W-1:0]`, ...), so
//! the agents work on lanes of them: [`Pins`] keeps a shadow of every port an agent uses,
//! [`Pins::sample`] reads the outputs once per cycle and [`Pins::drive`] writes the inputs.
//! Neither block has a combinational path from an input to an output (every output is a
//! register), so a cycle is: sample, let every agent decide, drive, tick.
//!
//! - [`LocalSource`] / [`LocalSink`]: a per-color valid/ready stream of the local port, with a
//!   random valid / ready [`Pattern`]; the sink checks that a stalled flit stays put.
//! - [`LinkTx`]: an upstream router. It sends flits of any color only with a credit, starting
//!   with BUF_DEPTH per color, and takes back the credits the DUT returns after a random delay.
//! - [`LinkRx`]: a downstream router. It buffers what arrives per color, fails if a buffer
//!   would overflow (a flit sent without credit), drains at a random rate, and returns one
//!   credit per drained flit after a random delay.
//! - [`Tagger`] writes (source, sequence number) into each flit's `user` bits;
//!   [`SinkCheck`] checks what a sink receives against the flow model ([`super::Mesh::deliver`]):
//!   nothing lost, nothing duplicated, every source in order, packets whole, and the exact order
//!   where the model fixes it.

use std::collections::{BTreeMap, VecDeque};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::{CfgWrite, RouterParams};
use crate::dut::{Dut, Pattern, Port};

/// A flit as the agents see it: `data` and `user` up to 64 bits each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flit {
    /// `_data`.
    pub data: u64,
    /// `_last`.
    pub last: bool,
    /// `_user`.
    pub user: u64,
}

const fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// A handle of a port in [`Pins`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pin(usize);

/// `width` bits (at most 64) of a port, from bit `lsb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pin: Pin,
    lsb: u32,
    width: u32,
}

#[derive(Debug)]
struct Slot {
    name: String,
    port: Port,
    input: bool,
    words: Vec<u32>,
}

/// Shadows of the DUT ports the agents use, so that many agents can share one flat bus.
#[derive(Debug, Default)]
pub struct Pins {
    slots: Vec<Slot>,
}

impl Pins {
    /// No ports yet.
    pub fn new() -> Self {
        Pins::default()
    }

    /// The port `name` (added on first use).
    pub fn pin(&mut self, dut: &Dut, name: &str) -> Pin {
        if let Some(i) = self.slots.iter().position(|s| s.name == name) {
            return Pin(i);
        }
        let port = dut.port(name);
        let input = port.direction() != crate::dut::Direction::Output;
        self.slots.push(Slot { name: name.to_string(), port, input, words: vec![0; port.words()] });
        Pin(self.slots.len() - 1)
    }

    /// Bits `lsb .. lsb+width` of port `name`.
    ///
    /// # Panics
    /// If the field is wider than 64 bits or does not fit the port.
    pub fn field(&mut self, dut: &Dut, name: &str, lsb: u32, width: u32) -> Field {
        let pin = self.pin(dut, name);
        let w = self.slots[pin.0].port.width();
        assert!(width <= 64 && lsb + width <= w, "{name}[{lsb} +: {width}] does not fit its {w} bits");
        Field { pin, lsb, width }
    }

    /// The current value of a field (outputs: as last sampled; inputs: as last set).
    pub fn get(&self, f: Field) -> u64 {
        let words = &self.slots[f.pin.0].words;
        let mut v = 0u64;
        let mut done = 0;
        while done < f.width {
            let b = f.lsb + done;
            let take = (32 - b % 32).min(f.width - done);
            let chunk = u64::from(words[(b / 32) as usize] >> (b % 32)) & mask(take);
            v |= chunk << done;
            done += take;
        }
        v
    }

    /// Sets an input field for the next [`Pins::drive`] (bits above its width are dropped).
    pub fn set(&mut self, f: Field, value: u64) {
        let words = &mut self.slots[f.pin.0].words;
        let mut done = 0;
        while done < f.width {
            let b = f.lsb + done;
            let take = (32 - b % 32).min(f.width - done);
            let m = (mask(take) as u32) << (b % 32);
            let w = &mut words[(b / 32) as usize];
            *w = (*w & !m) | ((((value >> done) & mask(take)) as u32) << (b % 32));
            done += take;
        }
    }

    /// Reads every output port in use.
    pub fn sample(&mut self, dut: &Dut) {
        for s in self.slots.iter_mut().filter(|s| !s.input) {
            s.words = dut.get_words(s.port);
        }
    }

    /// Writes every input port in use.
    pub fn drive(&self, dut: &mut Dut) {
        for s in self.slots.iter().filter(|s| s.input) {
            dut.set_words(s.port, &s.words);
        }
    }
}

/// A seeded on/off generator following a [`Pattern`] (the same patterns as the harness's
/// stream agents: `Mixed` switches every 32..512 cycles and includes long stalls).
#[derive(Debug)]
pub struct Gate {
    pattern: Pattern,
    rng: StdRng,
    on: bool,
    current: Pattern,
    left: u32,
}

impl Gate {
    /// A gate with `pattern` and its own random stream.
    pub fn new(pattern: Pattern, rng: StdRng) -> Self {
        Gate { pattern, rng, on: true, current: Pattern::Always, left: 0 }
    }

    /// On or off this cycle.
    pub fn draw(&mut self) -> bool {
        let p = match self.pattern {
            Pattern::Mixed => {
                if self.left == 0 {
                    self.left = self.rng.random_range(32..512);
                    self.current = match self.rng.random_range(0..6) {
                        0 => Pattern::Always,
                        1 => Pattern::Random(0.5),
                        2 => Pattern::Random(0.1),
                        3 => Pattern::Random(0.9),
                        4 => Pattern::Bursty { on: 8.0, off: 8.0 },
                        _ => Pattern::Bursty { on: 3.0, off: 40.0 },
                    };
                }
                self.left -= 1;
                self.current
            }
            p => p,
        };
        match p {
            Pattern::Always | Pattern::Mixed => true,
            Pattern::Random(prob) => self.rng.random_bool(prob.clamp(0.0, 1.0)),
            Pattern::Bursty { on, off } => {
                let mean = if self.on { on } else { off };
                if self.rng.random_bool((1.0 / mean.max(1.0)).clamp(0.0, 1.0)) {
                    self.on = !self.on;
                }
                self.on
            }
        }
    }
}

/// One local stream of a router or fabric: lane `k` of `<prefix>_valid/_ready/_data/
/// _last/_user` (router: k = color; fabric: k = router·COLORS + color).
#[derive(Debug, Clone, Copy)]
pub struct StreamLane {
    valid: Field,
    ready: Field,
    data: Field,
    last: Field,
    user: Field,
}

impl StreamLane {
    /// Lane `k` of the group `prefix` (`"s_local"` or `"m_local"`).
    pub fn new(pins: &mut Pins, dut: &Dut, prefix: &str, k: usize, p: &RouterParams) -> Self {
        let k = k as u32;
        StreamLane {
            valid: pins.field(dut, &format!("{prefix}_valid"), k, 1),
            ready: pins.field(dut, &format!("{prefix}_ready"), k, 1),
            data: pins.field(dut, &format!("{prefix}_data"), k * p.data_width, p.data_width),
            last: pins.field(dut, &format!("{prefix}_last"), k, 1),
            user: pins.field(dut, &format!("{prefix}_user"), k * p.user_width, p.user_width),
        }
    }

    fn read(&self, pins: &Pins) -> Flit {
        Flit { data: pins.get(self.data), last: pins.get(self.last) != 0, user: pins.get(self.user) }
    }

    fn write(&self, pins: &mut Pins, f: &Flit) {
        pins.set(self.data, f.data);
        pins.set(self.last, u64::from(f.last));
        pins.set(self.user, f.user);
    }
}

/// One credit link of a router or fabric: lane `k` of `<prefix>_valid/_color/_data/_last/
/// _user/_credit` (router: k = port 0..3; fabric edges: k = edge link).
#[derive(Debug, Clone, Copy)]
pub struct LinkLane {
    valid: Field,
    color: Field,
    data: Field,
    last: Field,
    user: Field,
    credit: Field,
}

impl LinkLane {
    /// Lane `k` of the group `prefix` (`"s_link"`, `"m_link"`, `"s_edge"`, `"m_edge"`).
    pub fn new(pins: &mut Pins, dut: &Dut, prefix: &str, k: usize, p: &RouterParams) -> Self {
        let k = k as u32;
        let cw = p.color_width();
        LinkLane {
            valid: pins.field(dut, &format!("{prefix}_valid"), k, 1),
            color: pins.field(dut, &format!("{prefix}_color"), k * cw, cw),
            data: pins.field(dut, &format!("{prefix}_data"), k * p.data_width, p.data_width),
            last: pins.field(dut, &format!("{prefix}_last"), k, 1),
            user: pins.field(dut, &format!("{prefix}_user"), k * p.user_width, p.user_width),
            credit: pins.field(dut, &format!("{prefix}_credit"), k * p.colors as u32, p.colors as u32),
        }
    }
}

/// Feeds flits into a local input stream with a random valid pattern, holding each flit
/// until it is taken.
#[derive(Debug)]
pub struct LocalSource {
    lane: StreamLane,
    queue: VecDeque<Flit>,
    gate: Gate,
    junk: StdRng,
    holding: bool,
    sent: u64,
}

impl LocalSource {
    /// A source on `lane`; `rng` seeds its pattern and idle junk.
    pub fn new(lane: StreamLane, pattern: Pattern, mut rng: StdRng) -> Self {
        let gate = Gate::new(pattern, StdRng::from_rng(&mut rng));
        LocalSource { lane, queue: VecDeque::new(), gate, junk: rng, holding: false, sent: 0 }
    }

    /// Queues a flit.
    pub fn push(&mut self, f: Flit) {
        self.queue.push_back(f);
    }

    /// Flits not yet taken.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Flits taken.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// One cycle (after [`Pins::sample`], before [`Pins::drive`]): the flit the coming
    /// clock edge transfers, if any.
    pub fn step(&mut self, pins: &mut Pins) -> Option<Flit> {
        if !self.holding && !self.queue.is_empty() && self.gate.draw() {
            self.holding = true;
        }
        pins.set(self.lane.valid, u64::from(self.holding));
        if self.holding {
            let f = self.queue[0];
            self.lane.write(pins, &f);
            if pins.get(self.lane.ready) != 0 {
                self.holding = false;
                self.sent += 1;
                return self.queue.pop_front();
            }
        } else {
            // Junk while idle: a DUT that takes data without valid shows up as a mismatch.
            let f = Flit { data: self.junk.random(), last: self.junk.random(), user: self.junk.random() };
            self.lane.write(pins, &f);
        }
        None
    }
}

/// Takes flits from a local output stream with a random ready pattern and checks the
/// handshake rule: a flit offered and not taken stays, unchanged, until it is.
#[derive(Debug)]
pub struct LocalSink {
    name: String,
    lane: StreamLane,
    gate: Gate,
    stalled: Option<Flit>,
    received: u64,
}

impl LocalSink {
    /// A sink on `lane` called `name` in messages.
    pub fn new(name: impl Into<String>, lane: StreamLane, pattern: Pattern, rng: StdRng) -> Self {
        LocalSink { name: name.into(), lane, gate: Gate::new(pattern, rng), stalled: None, received: 0 }
    }

    /// Flits received.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// One cycle: the flit the coming edge transfers, if any.
    ///
    /// # Panics
    /// If a stalled flit was withdrawn or changed.
    pub fn step(&mut self, pins: &mut Pins, cycle: u64) -> Option<Flit> {
        let valid = pins.get(self.lane.valid) != 0;
        let f = self.lane.read(pins);
        if let Some(prev) = self.stalled.take() {
            assert!(valid, "{}: valid dropped at cycle {cycle} before {prev:x?} was taken", self.name);
            assert_eq!(f, prev, "{}: a stalled flit changed at cycle {cycle}", self.name);
        }
        let ready = self.gate.draw();
        pins.set(self.lane.ready, u64::from(ready));
        if !valid {
            return None;
        }
        if ready {
            self.received += 1;
            Some(f)
        } else {
            self.stalled = Some(f);
            None
        }
    }
}

/// Credits waiting to mature: (cycle, color).
#[derive(Debug, Default)]
struct Due(Vec<(u64, usize)>);

impl Due {
    fn push(&mut self, at: u64, color: usize) {
        self.0.push((at, color));
    }

    /// Removes and returns the earliest matured entry of `color`.
    fn take(&mut self, now: u64, color: usize) -> bool {
        let best =
            self.0.iter().enumerate().filter(|(_, d)| d.1 == color && d.0 <= now).min_by_key(|(_, d)| d.0);
        match best.map(|(i, _)| i) {
            Some(i) => {
                self.0.swap_remove(i);
                true
            }
            None => false,
        }
    }
}

/// An upstream router driving a credit link into the DUT.
#[derive(Debug)]
pub struct LinkTx {
    name: String,
    lane: LinkLane,
    depth: usize,
    queues: Vec<VecDeque<Flit>>,
    credits: Vec<usize>,
    due: Due,
    max_delay: u64,
    gate: Gate,
    rng: StdRng,
    sent: Vec<u64>,
}

impl LinkTx {
    /// A transmitter on `lane` with BUF_DEPTH credits per color; the DUT's credits
    /// become usable 0..=`max_delay` cycles after it returns them.
    pub fn new(
        name: impl Into<String>,
        lane: LinkLane,
        p: &RouterParams,
        pattern: Pattern,
        max_delay: u64,
        mut rng: StdRng,
    ) -> Self {
        let gate = Gate::new(pattern, StdRng::from_rng(&mut rng));
        LinkTx {
            name: name.into(),
            lane,
            depth: p.buf_depth,
            queues: vec![VecDeque::new(); p.colors],
            credits: vec![p.buf_depth; p.colors],
            due: Due::default(),
            max_delay,
            gate,
            rng,
            sent: vec![0; p.colors],
        }
    }

    /// Queues a flit of `color`.
    pub fn push(&mut self, color: usize, f: Flit) {
        self.queues[color].push_back(f);
    }

    /// Flits not yet sent.
    pub fn pending(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }

    /// Flits sent per color.
    pub fn sent(&self) -> &[u64] {
        &self.sent
    }

    /// Every credit is back: the DUT holds none of this link's flits.
    pub fn idle(&self) -> bool {
        self.due.0.is_empty() && self.credits.iter().all(|&c| c == self.depth)
    }

    /// One cycle: the (color, flit) sent into the DUT on the coming edge, if any.
    ///
    /// # Panics
    /// If the DUT returns more credits than it was sent flits.
    pub fn step(&mut self, pins: &mut Pins, cycle: u64) -> Option<(usize, Flit)> {
        let bits = pins.get(self.lane.credit);
        for c in 0..self.credits.len() {
            if bits >> c & 1 == 1 {
                let d = self.rng.random_range(0..=self.max_delay);
                self.due.push(cycle + d, c);
            }
            while self.due.take(cycle, c) {
                self.credits[c] += 1;
                assert!(
                    self.credits[c] <= self.depth,
                    "{}: color {c} got more credits back than it sent flits (cycle {cycle})",
                    self.name
                );
            }
        }
        let ready: Vec<usize> =
            (0..self.queues.len()).filter(|&c| self.credits[c] > 0 && !self.queues[c].is_empty()).collect();
        if !ready.is_empty() && self.gate.draw() {
            let c = ready[self.rng.random_range(0..ready.len())];
            let f = self.queues[c].pop_front().expect("non-empty");
            self.credits[c] -= 1;
            self.sent[c] += 1;
            pins.set(self.lane.valid, 1);
            pins.set(self.lane.color, c as u64);
            pins.set(self.lane.data, f.data);
            pins.set(self.lane.last, u64::from(f.last));
            pins.set(self.lane.user, f.user);
            return Some((c, f));
        }
        pins.set(self.lane.valid, 0);
        pins.set(self.lane.data, self.rng.random());
        pins.set(self.lane.user, self.rng.random());
        None
    }
}

/// A downstream router taking a credit link out of the DUT.
#[derive(Debug)]
pub struct LinkRx {
    name: String,
    lane: LinkLane,
    depth: usize,
    bufs: Vec<VecDeque<Flit>>,
    gates: Vec<Gate>,
    due: Due,
    max_delay: u64,
    rng: StdRng,
    received: Vec<u64>,
    busy: u64,
    hold_until: Vec<u64>,
}

impl LinkRx {
    /// A receiver on `lane` with a BUF_DEPTH buffer per color, each drained with
    /// `pattern`; a credit goes back 1..=1+`max_delay` cycles after its flit is drained.
    pub fn new(
        name: impl Into<String>,
        lane: LinkLane,
        p: &RouterParams,
        pattern: Pattern,
        max_delay: u64,
        mut rng: StdRng,
    ) -> Self {
        let gates = (0..p.colors).map(|_| Gate::new(pattern, StdRng::from_rng(&mut rng))).collect();
        LinkRx {
            name: name.into(),
            lane,
            depth: p.buf_depth,
            bufs: vec![VecDeque::new(); p.colors],
            gates,
            due: Due::default(),
            max_delay,
            rng,
            received: vec![0; p.colors],
            busy: 0,
            hold_until: vec![0; p.colors],
        }
    }

    /// Drains nothing of `color` before cycle `until` (credit starvation of one color).
    pub fn hold(&mut self, color: usize, until: u64) {
        self.hold_until[color] = until;
    }

    /// Flits received per color.
    pub fn received(&self) -> &[u64] {
        &self.received
    }

    /// Cycles the link carried a flit.
    pub fn busy(&self) -> u64 {
        self.busy
    }

    /// Every buffered flit is drained and its credit returned.
    pub fn idle(&self) -> bool {
        self.due.0.is_empty() && self.bufs.iter().all(VecDeque::is_empty)
    }

    /// One cycle: the (color, flit) on the link this cycle, if any.
    ///
    /// # Panics
    /// If a flit arrives for a buffer that is full (sent without a credit) or with a color
    /// that does not exist.
    pub fn step(&mut self, pins: &mut Pins, cycle: u64) -> Option<(usize, Flit)> {
        let mut bits = 0u64;
        for c in 0..self.bufs.len() {
            if self.due.take(cycle, c) {
                bits |= 1 << c;
            }
        }
        pins.set(self.lane.credit, bits);
        // Drain flits that arrived in earlier cycles (a real buffer pops at the earliest
        // one cycle after the write), and schedule their credits.
        for c in 0..self.bufs.len() {
            if !self.bufs[c].is_empty() && cycle >= self.hold_until[c] && self.gates[c].draw() {
                self.bufs[c].pop_front();
                let d = self.rng.random_range(0..=self.max_delay);
                self.due.push(cycle + 1 + d, c);
            }
        }
        if pins.get(self.lane.valid) == 0 {
            return None;
        }
        let c = pins.get(self.lane.color) as usize;
        assert!(c < self.bufs.len(), "{}: flit with color {c} at cycle {cycle}", self.name);
        let f = Flit {
            data: pins.get(self.lane.data),
            last: pins.get(self.lane.last) != 0,
            user: pins.get(self.lane.user),
        };
        self.bufs[c].push_back(f);
        assert!(
            self.bufs[c].len() <= self.depth,
            "{}: color {c} flit at cycle {cycle} arrived at a full buffer of {} (sent without a credit)",
            self.name,
            self.depth
        );
        self.received[c] += 1;
        self.busy += 1;
        Some((c, f))
    }
}

/// Writes (source, sequence number) into the low `user` bits of a flit, so that a sink
/// can tell where each flit comes from.
#[derive(Debug, Clone, Copy)]
pub struct Tagger {
    src_bits: u32,
    data_width: u32,
    user_width: u32,
}

impl Tagger {
    /// Tags for `sources` sources in flits of `p`'s widths.
    ///
    /// # Panics
    /// If the header cannot hold the source and at least 4 bits of sequence number.
    pub fn new(sources: usize, p: &RouterParams) -> Self {
        let src_bits = usize::BITS - sources.saturating_sub(1).leading_zeros();
        assert!(src_bits + 4 <= p.user_width.min(64), "USER_WIDTH {} too narrow for tags", p.user_width);
        Tagger { src_bits, data_width: p.data_width.min(64), user_width: p.user_width.min(64) }
    }

    /// Flit `seq` of source `src`, with random payload and random upper header bits.
    pub fn flit(&self, src: usize, seq: u64, last: bool, rng: &mut StdRng) -> Flit {
        let tag = src as u64 | (seq << self.src_bits);
        let tag_bits = (self.src_bits + 24).min(self.user_width);
        let high = rng.random::<u64>() & !mask(tag_bits);
        Flit {
            data: rng.random::<u64>() & mask(self.data_width),
            last,
            user: ((tag & mask(tag_bits)) | high) & mask(self.user_width),
        }
    }

    /// The source of a tagged flit.
    pub fn source(&self, f: &Flit) -> usize {
        (f.user & mask(self.src_bits)) as usize
    }
}

/// Checks one sink: every source's flits in order with none lost or added, packets whole
/// (no flit of another source inside one), and the exact order where it is fixed.
#[derive(Debug)]
pub struct SinkCheck {
    name: String,
    tagger: Tagger,
    per_source: BTreeMap<usize, VecDeque<Flit>>,
    exact: Option<VecDeque<Flit>>,
    packet_of: Option<usize>,
    received: u64,
}

impl SinkCheck {
    /// A check named `name` in messages.
    pub fn new(name: impl Into<String>, tagger: Tagger) -> Self {
        SinkCheck {
            name: name.into(),
            tagger,
            per_source: BTreeMap::new(),
            exact: None,
            packet_of: None,
            received: 0,
        }
    }

    /// Expects `flits`, in this order per source, and in exactly this order overall if
    /// `exact` (from a [`super::Stream`] of the flow model).
    pub fn expect(&mut self, flits: impl IntoIterator<Item = Flit>, exact: bool) {
        let mut all = VecDeque::new();
        for f in flits {
            self.per_source.entry(self.tagger.source(&f)).or_default().push_back(f);
            all.push_back(f);
        }
        if exact {
            self.exact.get_or_insert_with(VecDeque::new).extend(all);
        }
    }

    /// Flits expected and not yet received.
    pub fn outstanding(&self) -> usize {
        self.per_source.values().map(VecDeque::len).sum()
    }

    /// Flits received.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Checks a received flit.
    ///
    /// # Panics
    /// On a flit nobody sent here (duplicate or spurious), one out of its source's order
    /// (reordered or a predecessor lost), one inside another source's packet, or one out of
    /// the exact order.
    pub fn receive(&mut self, f: Flit, cycle: u64) {
        self.received += 1;
        let src = self.tagger.source(&f);
        let name = &self.name;
        let n = self.received;
        let q = self.per_source.get_mut(&src).unwrap_or_else(|| {
            panic!(
                "{name}: flit #{n} {f:x?} at cycle {cycle} comes from source {src}, which sends nothing here"
            )
        });
        match q.pop_front() {
            None => panic!("{name}: flit #{n} {f:x?} at cycle {cycle}: source {src} has nothing more to send here (duplicate)"),
            Some(exp) => assert!(
                exp == f,
                "{name}: flit #{n} at cycle {cycle} from source {src} is {f:x?}, expected {exp:x?} (lost, reordered or corrupted)"
            ),
        }
        if let Some(p) = self.packet_of {
            assert!(
                p == src,
                "{name}: flit #{n} at cycle {cycle} from source {src} inside a packet of source {p}"
            );
        }
        self.packet_of = if f.last { None } else { Some(src) };
        if let Some(exact) = self.exact.as_mut() {
            let exp = exact.pop_front();
            assert!(
                exp == Some(f),
                "{name}: flit #{n} at cycle {cycle} is {f:x?} from source {src}, but the ordered merge fixes {exp:x?} here"
            );
        }
    }

    /// Checks that everything expected arrived.
    ///
    /// # Panics
    /// If some flits never did.
    pub fn finish(&self) {
        let left: Vec<String> = self
            .per_source
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(s, q)| format!("source {s}: {} (next {:x?})", q.len(), q[0]))
            .collect();
        assert!(
            left.is_empty(),
            "{}: flits never arrived after {} received: {}",
            self.name,
            self.received,
            left.join("; ")
        );
    }
}

/// Loads route entries through the config port, one per cycle (`cfg_router` is driven
/// only when the DUT has it, i.e. for the fabric).
pub fn configure(dut: &mut Dut, writes: &[CfgWrite]) {
    let we = dut.port("cfg_we");
    let router = dut.try_port("cfg_router");
    let (inp, color, out, quota) =
        (dut.port("cfg_in_port"), dut.port("cfg_color"), dut.port("cfg_out_mask"), dut.port("cfg_quota"));
    for w in writes {
        if let Some(r) = router {
            dut.set(r, w.router as u64);
        }
        dut.set(inp, w.in_port as u64);
        dut.set(color, w.color as u64);
        dut.set(out, u64::from(w.mask));
        dut.set(quota, u64::from(w.quota));
        dut.set(we, 1);
        dut.tick();
    }
    dut.set(we, 0);
    dut.eval();
}

/// Counter `index` of a flat counter bus (`cnt_fwd`, `cnt_busy`, ...) of `width`-bit
/// counters.
pub fn counter(dut: &Dut, name: &str, index: usize, width: u32) -> u64 {
    let words = dut.get_words(dut.port(name));
    let lsb = index as u32 * width;
    let mut v = 0u64;
    for b in 0..width.min(64) {
        let i = lsb + b;
        v |= u64::from(words[(i / 32) as usize] >> (i % 32) & 1) << b;
    }
    v
}
