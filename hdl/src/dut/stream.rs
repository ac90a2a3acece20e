//! Stream agents for `s_*` (sink side of the DUT) and `m_*` (source side) valid/ready groups.
//!
//! The house rule is that no block drops or duplicates a flit under backpressure
//! (docs/architecture.md "Links"). The agents check it: a [`StreamSource`] feeds beats with a
//! random `valid` pattern, a [`StreamSink`] pulls them with a random `ready` pattern and
//! compares every beat against a scoreboard of expected beats, in order. The sink also checks
//! the handshake rule of the DUT's output: once `valid` is up it stays up, with the same data,
//! until `ready` takes the beat.
//!
//! One cycle of a test looks like this:
//!
//! ```no_run
//! # use ws_hdl::dut::{Dut, StreamSource, StreamSink};
//! # fn f(dut: &mut Dut, src: &mut StreamSource, sink: &mut StreamSink) {
//! src.drive(dut);          // valid + data for this cycle
//! sink.drive(dut);         // ready for this cycle
//! dut.eval();              // settle ready/valid that depend on the other side
//! if let Some(beat) = src.sample(dut) {
//!     sink.expect_beat(&beat); // the golden model says what comes out
//! }
//! sink.sample(dut);        // checks what the DUT presented
//! dut.tick();              // the handshakes happen on this edge
//! # }
//! ```

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::RngExt;

use super::{Dut, Port};

/// One transfer: the values of the stream's data fields (`data`, then `last`, `user`, ...),
/// each up to 64 bits.
pub type Beat = Vec<u64>;

/// Field suffixes a stream group may carry, in beat order.
const FIELD_SUFFIXES: &[&str] = &["data", "last", "user", "keep", "id", "dest"];

/// How often `valid` (source) or `ready` (sink) is offered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    /// Every cycle.
    Always,
    /// Each cycle independently with this probability.
    Random(f64),
    /// On/off bursts: the mean lengths in cycles of the on and off periods.
    Bursty {
        /// Mean on-period length in cycles.
        on: f64,
        /// Mean off-period length in cycles.
        off: f64,
    },
    /// Switches between the patterns above every 32..512 cycles, including long stalls and
    /// full-rate stretches. The default: it finds the most corner cases per cycle.
    Mixed,
}

#[derive(Debug)]
struct PatternGen {
    pattern: Pattern,
    rng: StdRng,
    on: bool,
    current: Pattern,
    left: u32,
}

impl PatternGen {
    fn new(pattern: Pattern, rng: StdRng) -> Self {
        PatternGen { pattern, rng, on: true, current: Pattern::Always, left: 0 }
    }

    fn next(&mut self) -> bool {
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
            Pattern::Always => true,
            Pattern::Random(prob) => self.rng.random_bool(prob.clamp(0.0, 1.0)),
            Pattern::Bursty { on, off } => {
                let mean = if self.on { on } else { off };
                if self.rng.random_bool((1.0 / mean.max(1.0)).clamp(0.0, 1.0)) {
                    self.on = !self.on;
                }
                self.on
            }
            Pattern::Mixed => true,
        }
    }
}

fn field_ports(dut: &Dut, prefix: &str, fields: Option<&[&str]>) -> (Vec<Port>, Vec<String>) {
    let mut ports = Vec::new();
    let mut names = Vec::new();
    match fields {
        Some(list) => {
            for f in list {
                let n = format!("{prefix}_{f}");
                ports.push(dut.port(&n));
                names.push(n);
            }
        }
        None => {
            for f in FIELD_SUFFIXES {
                let n = format!("{prefix}_{f}");
                if let Some(p) = dut.try_port(&n) {
                    ports.push(p);
                    names.push(n);
                }
            }
        }
    }
    (ports, names)
}

fn read_beat(dut: &Dut, fields: &[Port]) -> Beat {
    fields.iter().map(|p| dut.get(*p)).collect()
}

/// Feeds beats into a `<prefix>_valid/_ready/_data...` input group of the DUT.
#[derive(Debug)]
pub struct StreamSource {
    name: String,
    valid: Port,
    ready: Port,
    fields: Vec<Port>,
    queue: VecDeque<Beat>,
    gen: PatternGen,
    junk: StdRng,
    holding: bool,
    sent: u64,
}

impl StreamSource {
    /// A source for the group `prefix` (e.g. `"s"` or `"s_link"`), with every field of
    /// `data/last/user/keep/id/dest` the DUT has. `seed` fixes the valid pattern.
    ///
    /// # Panics
    /// If the DUT has no `<prefix>_valid` or `<prefix>_ready`.
    pub fn new(dut: &Dut, prefix: &str, seed: u64) -> Self {
        let (fields, _) = field_ports(dut, prefix, None);
        Self::make(dut, prefix, fields, seed)
    }

    /// A source driving exactly the fields `<prefix>_<field>` listed, in beat order.
    pub fn with_fields(dut: &Dut, prefix: &str, fields: &[&str], seed: u64) -> Self {
        let (fields, _) = field_ports(dut, prefix, Some(fields));
        Self::make(dut, prefix, fields, seed)
    }

    fn make(dut: &Dut, prefix: &str, fields: Vec<Port>, seed: u64) -> Self {
        StreamSource {
            name: prefix.to_string(),
            valid: dut.port(&format!("{prefix}_valid")),
            ready: dut.port(&format!("{prefix}_ready")),
            fields,
            queue: VecDeque::new(),
            gen: PatternGen::new(Pattern::Mixed, super::rng(seed, 0x5151)),
            junk: super::rng(seed, 0x7a7a),
            holding: false,
            sent: 0,
        }
    }

    /// Sets the valid pattern.
    pub fn pattern(mut self, pattern: Pattern) -> Self {
        self.gen.pattern = pattern;
        self
    }

    /// Queues a beat with a single field.
    pub fn push(&mut self, value: u64) {
        self.queue.push_back(vec![value]);
    }

    /// Queues a beat (one value per field).
    pub fn push_beat(&mut self, beat: &[u64]) {
        self.queue.push_back(beat.to_vec());
    }

    /// Beats queued and not yet accepted.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Beats the DUT accepted.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Drives valid and the fields for this cycle. Call before [`Dut::eval`] and
    /// [`StreamSource::sample`].
    pub fn drive(&mut self, dut: &mut Dut) {
        if !self.holding && !self.queue.is_empty() && self.gen.next() {
            self.holding = true;
        }
        dut.set(self.valid, self.holding as u64);
        if self.holding {
            let beat = &self.queue[0];
            for (i, p) in self.fields.iter().enumerate() {
                dut.set(*p, beat.get(i).copied().unwrap_or(0));
            }
        } else {
            // Junk while idle: a DUT that samples data without valid shows up as a mismatch.
            for p in &self.fields {
                let v = self.junk.random::<u64>();
                dut.set(*p, v);
            }
        }
    }

    /// After [`Dut::eval`]: the beat the coming clock edge transfers, if any.
    pub fn sample(&mut self, dut: &Dut) -> Option<Beat> {
        if self.holding && dut.get_bool(self.ready) {
            self.holding = false;
            self.sent += 1;
            return self.queue.pop_front();
        }
        None
    }

    /// The group prefix.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Pulls beats from a `<prefix>_valid/_ready/_data...` output group of the DUT and checks
/// them against expected beats.
#[derive(Debug)]
pub struct StreamSink {
    name: String,
    valid: Port,
    ready: Port,
    fields: Vec<Port>,
    field_names: Vec<String>,
    gen: PatternGen,
    expected: VecDeque<Beat>,
    check: bool,
    check_stable: bool,
    stalled: Option<(Beat, u64)>,
    ready_now: bool,
    received: u64,
}

impl StreamSink {
    /// A sink for the group `prefix` (e.g. `"m"` or `"m_link"`) with every field of
    /// `data/last/user/keep/id/dest` the DUT has. `seed` fixes the ready pattern.
    ///
    /// # Panics
    /// If the DUT has no `<prefix>_valid` or `<prefix>_ready`.
    pub fn new(dut: &Dut, prefix: &str, seed: u64) -> Self {
        let (fields, names) = field_ports(dut, prefix, None);
        Self::make(dut, prefix, fields, names, seed)
    }

    /// A sink reading exactly the fields `<prefix>_<field>` listed, in beat order.
    pub fn with_fields(dut: &Dut, prefix: &str, fields: &[&str], seed: u64) -> Self {
        let (fields, names) = field_ports(dut, prefix, Some(fields));
        Self::make(dut, prefix, fields, names, seed)
    }

    fn make(dut: &Dut, prefix: &str, fields: Vec<Port>, field_names: Vec<String>, seed: u64) -> Self {
        StreamSink {
            name: prefix.to_string(),
            valid: dut.port(&format!("{prefix}_valid")),
            ready: dut.port(&format!("{prefix}_ready")),
            fields,
            field_names,
            gen: PatternGen::new(Pattern::Mixed, super::rng(seed, 0x3e3e)),
            expected: VecDeque::new(),
            check: true,
            check_stable: true,
            stalled: None,
            ready_now: false,
            received: 0,
        }
    }

    /// Sets the ready pattern.
    pub fn pattern(mut self, pattern: Pattern) -> Self {
        self.gen.pattern = pattern;
        self
    }

    /// Accepts beats without comparing them (the test checks what [`StreamSink::sample`]
    /// returns itself).
    pub fn unchecked(mut self) -> Self {
        self.check = false;
        self
    }

    /// Allows the DUT to withdraw `valid` or change data before a handshake (for blocks that
    /// document it).
    pub fn allow_unstable(mut self) -> Self {
        self.check_stable = false;
        self
    }

    /// Expects a single-field beat next (after any already expected).
    pub fn expect(&mut self, value: u64) {
        self.expected.push_back(vec![value]);
    }

    /// Expects a beat next (after any already expected).
    pub fn expect_beat(&mut self, beat: &[u64]) {
        self.expected.push_back(beat.to_vec());
    }

    /// Expected beats not yet seen.
    pub fn outstanding(&self) -> usize {
        self.expected.len()
    }

    /// Beats received.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Drives ready for this cycle.
    pub fn drive(&mut self, dut: &mut Dut) {
        self.ready_now = self.gen.next();
        dut.set(self.ready, self.ready_now as u64);
    }

    /// After [`Dut::eval`]: the beat the coming clock edge transfers, if any, checked against
    /// the expected beats and the handshake rules.
    ///
    /// # Panics
    /// On a beat that differs from the next expected one, a beat nobody expected (a
    /// duplicate), or a `valid` withdrawn / data changed before the handshake.
    pub fn sample(&mut self, dut: &Dut) -> Option<Beat> {
        let valid = dut.get_bool(self.valid);
        let cycle = dut.cycle();
        if let Some((prev, since)) = self.stalled.take() {
            if self.check_stable {
                assert!(
                    valid,
                    "{}: valid dropped at cycle {cycle} before the beat {} offered since cycle {since} was taken",
                    self.name,
                    self.show(&prev)
                );
                let now = read_beat(dut, &self.fields);
                assert!(
                    now == prev,
                    "{}: data changed at cycle {cycle} while stalled (valid high, ready low): {} became {}",
                    self.name,
                    self.show(&prev),
                    self.show(&now)
                );
            }
        }
        if !valid {
            return None;
        }
        let beat = read_beat(dut, &self.fields);
        if !self.ready_now {
            self.stalled = Some((beat, cycle));
            return None;
        }
        self.received += 1;
        if self.check {
            match self.expected.pop_front() {
                None => panic!(
                    "{}: beat #{} {} at cycle {cycle} was not expected (duplicated or spurious)",
                    self.name,
                    self.received,
                    self.show(&beat)
                ),
                Some(exp) => assert!(
                    exp == beat,
                    "{}: beat #{} at cycle {cycle} is {}, expected {} (a beat was dropped, duplicated or corrupted)",
                    self.name,
                    self.received,
                    self.show(&beat),
                    self.show(&exp)
                ),
            }
        }
        Some(beat)
    }

    /// Checks that every expected beat arrived.
    ///
    /// # Panics
    /// If some did not: they were dropped (or the test stopped too early).
    pub fn finish(&self) {
        assert!(
            self.expected.is_empty(),
            "{}: {} expected beats never arrived after {} received (dropped?); next expected {}",
            self.name,
            self.expected.len(),
            self.received,
            self.show(&self.expected[0])
        );
    }

    fn show(&self, beat: &[u64]) -> String {
        let parts: Vec<String> =
            beat.iter().zip(self.field_names.iter()).map(|(v, n)| format!("{n}={v:#x}")).collect();
        format!("{{{}}}", parts.join(", "))
    }

    /// The group prefix.
    pub fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_have_the_requested_density() {
        let mut g = PatternGen::new(Pattern::Random(0.25), crate::dut::rng(1, 2));
        let on = (0..10_000).filter(|_| g.next()).count();
        assert!((2000..3000).contains(&on), "{on}");
        let mut g = PatternGen::new(Pattern::Always, crate::dut::rng(1, 2));
        assert!((0..100).all(|_| g.next()));
        let mut g = PatternGen::new(Pattern::Mixed, crate::dut::rng(1, 2));
        let on = (0..10_000).filter(|_| g.next()).count();
        assert!((1000..9900).contains(&on), "{on}");
    }
}
