//! Fault injection on a link byte stream (docs/link.md "Fault injection"): the simulator puts
//! one [`Injector`] on each direction of its link port, and host-side tests put them between
//! two endpoints.
//!
//! The injector parses the stream with the real [`Decoder`], so it damages whole frames and
//! knows exactly what it did to which (channel, seq): the receivers' counters can then be
//! held to account for every fault. At most one fault hits a frame (the first rule, in the
//! order given, that fires), and the faults are chosen so each has one detectable effect:
//!
//! | kind | what happens to the frame | how the receiver sees it |
//! |---|---|---|
//! | `flip` | one random bit is inverted, never in the 2 magic bytes | in the payload or pcrc: exactly one pcrc error on its channel; in the header: an hcrc error |
//! | `drop` | it is not forwarded | a seq gap (DATA) or nothing (an ACK, repaired by the next) |
//! | `dup` | it is forwarded twice | a duplicate (DATA) or a repeated ACK |
//! | `trunc` | it is cut after 3 or more bytes, before its end | cut after the header: exactly one pcrc error on its channel; inside it: an hcrc error |
//! | `delay` | it and everything behind it wait `delay` ticks | a retransmission timeout, if long enough |
//!
//! [`FaultStats::payload_hits`] is therefore matched exactly by the receiver's pcrc errors
//! (they name channel and seq). Header hits are matched by hcrc errors from below only: after
//! refusing a candidate the receiver rescans its bytes, and a "WS" inside a random payload is
//! a false candidate it refuses too (about one per 64 KiB rescanned).
//!
//! A damaged magic would make the frame vanish silently, which `drop` already covers, so
//! flips spare it; a cut inside the magic likewise. With no rules the injector forwards its
//! input untouched (bytes that are not frames included); with rules it forwards only what it
//! parsed as frames and counts the rest in [`FaultStats::unparsed`].
//!
//! Rules are written `DIR:KIND:WHEN[:ch=LIST][:delay=TICKS]`, for example
//! `both:flip:rate=0.01`, `h2b:drop:every=100:ch=2,3`, `b2h:dup:at=5,17` or
//! `h2b:delay:rate=0.001:delay=50000`. `DIR` is `h2b` (host to board), `b2h` or `both`;
//! `WHEN` is `rate=P` (probability per frame, 0..=1), `every=N` (every Nth frame, counting
//! from 1) or `at=I,J,…` (the frames with these indices, counting from 0). Frames are counted
//! per rule over the channels it selects (default: all).

use super::{encode_frame, flags, Channel, Decoder, Event, Header, CHANNELS, HEADER_LEN, MAX_FRAME};
use std::boxed::Box;
use std::collections::VecDeque;
use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

/// Which direction of the link a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Host to board.
    ToBoard,
    /// Board to host.
    ToHost,
}

impl Dir {
    /// `h2b` or `b2h`.
    pub fn name(self) -> &'static str {
        match self {
            Dir::ToBoard => "h2b",
            Dir::ToHost => "b2h",
        }
    }
}

/// What a rule does to a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Invert one bit.
    Flip,
    /// Do not forward it.
    Drop,
    /// Forward it twice.
    Dup,
    /// Forward only its first bytes.
    Truncate,
    /// Hold it (and what follows) for the rule's delay.
    Delay,
}

impl Kind {
    /// Every kind, in the order of [`FaultStats::injected`].
    pub const ALL: [Kind; 5] = [Kind::Flip, Kind::Drop, Kind::Dup, Kind::Truncate, Kind::Delay];

    /// The name used in rules and reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Flip => "flip",
            Kind::Drop => "drop",
            Kind::Dup => "dup",
            Kind::Truncate => "trunc",
            Kind::Delay => "delay",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// When a rule fires.
#[derive(Debug, Clone, PartialEq)]
pub enum When {
    /// With this probability per frame.
    Rate(f64),
    /// On every Nth frame (N ≥ 1).
    Every(u64),
    /// On the frames with these indices (sorted).
    At(Vec<u64>),
}

/// One fault rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The directions it applies to.
    pub dirs: [bool; 2],
    /// What it does.
    pub kind: Kind,
    /// When.
    pub when: When,
    /// Bit `c` set: applies to channel `c`.
    pub channels: u8,
    /// Ticks a `delay` holds the frame.
    pub delay: u64,
}

/// Default hold of a `delay` rule, in the injector's ticks.
pub const DEFAULT_DELAY: u64 = 1000;

impl Rule {
    /// Parses `DIR:KIND:WHEN[:ch=LIST][:delay=TICKS]` (see the module docs).
    pub fn parse(spec: &str) -> Result<Rule, String> {
        let bad = |why: String| {
            format!(
                "fault rule `{spec}`: {why} (form: DIR:KIND:WHEN[:ch=LIST][:delay=TICKS], e.g. both:flip:rate=0.01:ch=2,3)"
            )
        };
        let mut parts = spec.split(':');
        let dirs = match parts.next().unwrap_or("") {
            "h2b" => [true, false],
            "b2h" => [false, true],
            "both" => [true, true],
            d => return Err(bad(format!("direction `{d}` is not h2b, b2h or both"))),
        };
        let kind = match parts.next().unwrap_or("") {
            "flip" => Kind::Flip,
            "drop" => Kind::Drop,
            "dup" => Kind::Dup,
            "trunc" => Kind::Truncate,
            "delay" => Kind::Delay,
            k => return Err(bad(format!("kind `{k}` is not flip, drop, dup, trunc or delay"))),
        };
        let when_s = parts.next().ok_or_else(|| bad("WHEN is missing".into()))?;
        let when = match when_s.split_once('=') {
            Some(("rate", p)) => {
                let p: f64 = p.parse().map_err(|_| bad(format!("rate `{p}` is not a number")))?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(bad(format!("rate {p} is outside 0..=1")));
                }
                When::Rate(p)
            }
            Some(("every", n)) => match n.parse::<u64>() {
                Ok(n) if n >= 1 => When::Every(n),
                _ => return Err(bad(format!("every `{n}` is not a whole number ≥ 1"))),
            },
            Some(("at", list)) => {
                let mut v = list
                    .split(',')
                    .map(|i| i.parse::<u64>().map_err(|_| bad(format!("frame index `{i}` is not a number"))))
                    .collect::<Result<Vec<_>, _>>()?;
                v.sort_unstable();
                When::At(v)
            }
            _ => return Err(bad(format!("WHEN `{when_s}` is not rate=P, every=N or at=I,J"))),
        };
        let mut rule = Rule { dirs, kind, when, channels: 0xff, delay: DEFAULT_DELAY };
        for opt in parts {
            match opt.split_once('=') {
                Some(("ch", list)) => {
                    rule.channels = 0;
                    for c in list.split(',') {
                        match c.parse::<usize>() {
                            Ok(c) if c < CHANNELS => rule.channels |= 1 << c,
                            _ => return Err(bad(format!("channel `{c}` is not 0..=7"))),
                        }
                    }
                }
                Some(("delay", t)) => {
                    rule.delay =
                        t.parse().map_err(|_| bad(format!("delay `{t}` is not a number of ticks")))?
                }
                _ => return Err(bad(format!("option `{opt}` is not ch=LIST or delay=TICKS"))),
            }
        }
        Ok(rule)
    }
}

/// One injected fault, for the receivers' accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Injected {
    /// What was done.
    pub kind: Kind,
    /// The frame's channel.
    pub channel: Channel,
    /// Its flags (DATA or not tells whether the receiver can see a loss).
    pub flags: u8,
    /// Its seq.
    pub seq: u32,
}

/// What an injector did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Frames parsed.
    pub frames: u64,
    /// Faults injected, per kind ([`Kind::ALL`] order) and channel.
    pub injected: [[u64; CHANNELS]; 5],
    /// Of those, faults on DATA frames (the rest hit ACK, HELLO or control frames).
    pub injected_data: [[u64; CHANNELS]; 5],
    /// Flips and truncations that hit a header (the receiver sees an hcrc error).
    pub header_hits: u64,
    /// Flips and truncations that hit a payload or pcrc, per channel (the receiver sees
    /// exactly one pcrc error each).
    pub payload_hits: [u64; CHANNELS],
    /// Input bytes that were not part of a frame (dropped while rules were active).
    pub unparsed: u64,
}

impl FaultStats {
    /// Faults of `kind` on every channel.
    pub fn total(&self, kind: Kind) -> u64 {
        self.injected[kind.index()].iter().sum()
    }

    /// Faults of `kind` on DATA frames of every channel.
    pub fn total_data(&self, kind: Kind) -> u64 {
        self.injected_data[kind.index()].iter().sum()
    }

    /// One line: `frames 1000, flip 10 (9 data), drop 12 (12 data), …`.
    pub fn summary(&self) -> String {
        let mut s = format!("frames {}", self.frames);
        for k in Kind::ALL {
            s.push_str(&format!(", {} {} ({} data)", k.name(), self.total(k), self.total_data(k)));
        }
        if self.unparsed > 0 {
            s.push_str(&format!(", {} unparsed bytes dropped", self.unparsed));
        }
        s
    }
}

/// xorshift64*: small, seeded, the same on every platform.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The fault injector of one link direction.
pub struct Injector {
    dir: Dir,
    rules: Vec<(Rule, u64)>,
    decoder: Box<Decoder<MAX_FRAME>>,
    rng: Rng,
    /// Frames held by a delay, with the tick they may leave; everything behind a held frame
    /// waits in order.
    held: VecDeque<(u64, Vec<u8>)>,
    frame: Vec<u8>,
    stats: FaultStats,
    log: Vec<Injected>,
    keep_log: bool,
}

impl core::fmt::Debug for Injector {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Injector").field("dir", &self.dir).field("rules", &self.rules).finish_non_exhaustive()
    }
}

impl Injector {
    /// An injector for `dir` applying the rules of `rules` that select that direction,
    /// seeded with `seed`.
    pub fn new(dir: Dir, rules: &[Rule], seed: u64) -> Self {
        let d = match dir {
            Dir::ToBoard => 0,
            Dir::ToHost => 1,
        };
        Self {
            dir,
            rules: rules.iter().filter(|r| r.dirs[d]).map(|r| (r.clone(), 0)).collect(),
            decoder: Box::new(Decoder::new()),
            rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            held: VecDeque::new(),
            frame: Vec::new(),
            stats: FaultStats::default(),
            log: Vec::new(),
            keep_log: false,
        }
    }

    /// Also records every fault in [`Injector::log`] (tests use it to match each fault with
    /// its detection).
    pub fn with_log(mut self) -> Self {
        self.keep_log = true;
        self
    }

    /// Whether any rule applies: without rules, [`Injector::push`] is a plain copy.
    pub fn is_active(&self) -> bool {
        !self.rules.is_empty()
    }

    /// What was done so far.
    pub fn stats(&self) -> &FaultStats {
        &self.stats
    }

    /// Every fault so far, if [`Injector::with_log`] was asked for.
    pub fn log(&self) -> &[Injected] {
        &self.log
    }

    /// Feeds `input` at tick `now`; appends what leaves the injector to `out`.
    pub fn push(&mut self, input: &[u8], now: u64, out: &mut Vec<u8>) {
        if !self.is_active() {
            self.release(now, out);
            if self.held.is_empty() {
                out.extend_from_slice(input);
            } else {
                self.held.push_back((0, input.to_vec()));
            }
            return;
        }
        let mut rest = input;
        loop {
            let skipped = self.decoder.skipped();
            let r = self.decoder.feed(rest);
            let consumed = r.consumed;
            let found = match r.event {
                Some(Event::Frame(f)) => {
                    self.frame.resize(super::frame_len(f.payload.len()), 0);
                    // The decoder accepted header and payload, so they re-encode to the very
                    // bytes that arrived.
                    let n = encode_frame(&f.header, f.payload, &mut self.frame).unwrap_or(0);
                    self.frame.truncate(n);
                    Some(Some(f.header))
                }
                Some(Event::Error(_)) => Some(None),
                None => None,
            };
            rest = &rest[consumed..];
            self.stats.unparsed += self.decoder.skipped() - skipped;
            match found {
                Some(Some(header)) => {
                    self.stats.frames += 1;
                    self.apply(header, now, out);
                }
                Some(None) => {}
                None => break,
            }
        }
        self.release(now, out);
    }

    /// Releases delayed frames whose time has come (call it when no input arrives too).
    pub fn poll(&mut self, now: u64, out: &mut Vec<u8>) {
        self.release(now, out);
    }

    /// Whether frames are being held by a delay.
    pub fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    fn fire(&mut self, header: &Header) -> Option<(Kind, u64)> {
        let ch = header.channel as u8;
        let mut hit = None;
        for i in 0..self.rules.len() {
            let (rule, count) = &mut self.rules[i];
            if rule.channels & (1 << ch) == 0 {
                continue;
            }
            let index = *count;
            *count += 1;
            if hit.is_some() {
                // Keep every rule's frame count exact even when an earlier rule fired.
                continue;
            }
            let fires = match &rule.when {
                When::Rate(p) => {
                    let p = *p;
                    self.rng.unit() < p
                }
                When::Every(n) => (index + 1) % n == 0,
                When::At(v) => v.binary_search(&index).is_ok(),
            };
            if fires {
                hit = Some((self.rules[i].0.kind, self.rules[i].0.delay));
            }
        }
        hit
    }

    fn apply(&mut self, header: Header, now: u64, out: &mut Vec<u8>) {
        let Some((kind, delay)) = self.fire(&header) else {
            self.emit(0, out);
            return;
        };
        let ch = header.channel as usize;
        self.stats.injected[kind.index()][ch] += 1;
        if header.has(flags::DATA) {
            self.stats.injected_data[kind.index()][ch] += 1;
        }
        if self.keep_log {
            self.log.push(Injected { kind, channel: header.channel, flags: header.flags, seq: header.seq });
        }
        let len = self.frame.len() as u64;
        match kind {
            Kind::Flip => {
                let bit = 16 + self.rng.below(len * 8 - 16);
                self.frame[(bit / 8) as usize] ^= 1 << (bit % 8);
                self.hit(bit / 8 < HEADER_LEN as u64, ch);
                self.emit(0, out);
            }
            Kind::Drop => {}
            Kind::Dup => {
                let copy = self.frame.clone();
                self.emit(0, out);
                self.frame = copy;
                self.emit(0, out);
            }
            Kind::Truncate => {
                let keep = 3 + self.rng.below(len - 3);
                self.frame.truncate(keep as usize);
                self.hit(keep < HEADER_LEN as u64, ch);
                self.emit(0, out);
            }
            Kind::Delay => self.emit(now.saturating_add(delay).max(1), out),
        }
    }

    fn hit(&mut self, header: bool, ch: usize) {
        if header {
            self.stats.header_hits += 1;
        } else {
            self.stats.payload_hits[ch] += 1;
        }
    }

    /// Sends the current frame now, or holds it until `until` (0: no hold of its own, but it
    /// still waits behind held frames).
    fn emit(&mut self, until: u64, out: &mut Vec<u8>) {
        if until == 0 && self.held.is_empty() {
            out.extend_from_slice(&self.frame);
        } else {
            self.held.push_back((until, core::mem::take(&mut self.frame)));
        }
    }

    fn release(&mut self, now: u64, out: &mut Vec<u8>) {
        while let Some((until, _)) = self.held.front() {
            if *until > now {
                break;
            }
            if let Some((_, bytes)) = self.held.pop_front() {
                out.extend_from_slice(&bytes);
            }
        }
    }
}

/// Parses a comma-free list of rules separated by `;` or whitespace (the control port's
/// `fault` command and repeated `--fault` options).
pub fn parse_rules(specs: &str) -> Result<Vec<Rule>, String> {
    specs.split(|c: char| c == ';' || c.is_whitespace()).filter(|s| !s.is_empty()).map(Rule::parse).collect()
}

/// Renders a rule back to its text form.
pub fn rule_text(r: &Rule) -> String {
    let dir = match r.dirs {
        [true, true] => "both",
        [true, false] => "h2b",
        _ => "b2h",
    };
    let when = match &r.when {
        When::Rate(p) => format!("rate={p}"),
        When::Every(n) => format!("every={n}"),
        When::At(v) => format!("at={}", v.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(",")),
    };
    let mut s = format!("{dir}:{}:{when}", r.kind.name());
    if r.channels != 0xff {
        let chs: Vec<String> =
            (0..CHANNELS).filter(|c| r.channels & (1 << c) != 0).map(|c| c.to_string()).collect();
        s.push_str(&format!(":ch={}", chs.join(",")));
    }
    if r.kind == Kind::Delay {
        s.push_str(&format!(":delay={}", r.delay));
    }
    s
}

#[cfg(test)]
mod tests;
