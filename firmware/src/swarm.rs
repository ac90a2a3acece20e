//! SwarmX health and port-masking policy (docs/swarmx.md "Recovery"): which downstream ports
//! take part in the reduction, the scale that goes with them, and what to do when the node
//! aborts a chunk. Plain Rust, tested on the host; the registers are `hal::swarm`'s job.
//!
//! The node never sums a faulty chunk: it sends an error flit upstream in place of the sum,
//! latches the first abort in ERR/ERR_PORTS and keeps aborting every later chunk the same
//! fault touches. Recovery is ours:
//!
//! - **Timeout**: the ports without a flit when the timeout expired are masked at once. A port
//!   that stopped answering would time out every chunk; nothing is gained by waiting.
//! - **Mismatch** (a header or `last` that differs from its peers'), and a flit of the wrong
//!   kind: the port gets a strike. One corrupted header costs one chunk and the port is in
//!   step again, so a single strike is forgiven; a port that skipped a chunk stays behind
//!   and is blamed for every chunk after, so [`MISMATCH_LIMIT`] strikes without a clean chunk
//!   in between mask it. Progress (reduced flits without a new abort) clears the strikes.
//! - **A child's error flit** (a cascade below this node): reported, nothing masked here; the
//!   child's own policy masks its port.
//! - **The last active port is never masked**: with nobody left to reduce, the step cannot
//!   go on, and the host hears so ([`EventKind::LastPort`]) and decides.
//!
//! The mask in effect is the host's mask minus the ports masked here; the scale, when the
//! host asked for one, is 1/(active ports) in binary32 (the division rounded once, as the
//! golden model `ws_common::golden::swarm` takes it). Both reach the node together and take
//! effect at its next chunk boundary, which an abort creates. Every decision becomes an
//! [`Event`] in a small ring the host drains (`wsctl swarm status`).

use ws_common::flit::ErrorCode;

/// Downstream ports a node can have.
pub const MAX_PORTS: usize = 16;
/// Strikes (aborted chunks blamed on a port with no clean chunk between) that mask it.
pub const MISMATCH_LIMIT: u8 = 3;
/// Events kept for the host; older ones are overwritten and counted as lost.
pub const EVENTS: usize = 16;

/// What the policy thinks of one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortState {
    /// Past the node's ports, or left out of the host's mask.
    Off,
    /// Taking part in the reduction.
    Active,
    /// Masked here after a timeout.
    MaskedTimeout,
    /// Masked here after [`MISMATCH_LIMIT`] strikes.
    MaskedMismatch,
}

impl PortState {
    /// The code the host protocol carries.
    pub const fn code(self) -> u8 {
        match self {
            PortState::Off => 0,
            PortState::Active => 1,
            PortState::MaskedTimeout => 2,
            PortState::MaskedMismatch => 3,
        }
    }
}

/// One latched abort, as the node's ERR registers hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Abort {
    /// ERR.code (`ErrorCode`).
    pub code: u8,
    /// ERR.port: the port blamed.
    pub port: u8,
    /// ERR_PORTS.timeout: ports without a flit when the timeout expired.
    pub timeout_ports: u16,
    /// ERR_PORTS.mismatch: ports whose header differed.
    pub mismatch_ports: u16,
    /// ERR_FORWARD: the port whose child's error flit was forwarded (0 when it is ours).
    pub forwarded: u16,
    /// The aborted chunk's layer, step and chunk (from the error flit's header).
    pub layer: u16,
    /// Its step.
    pub step: u16,
    /// Its chunk.
    pub chunk: u16,
}

/// What an [`Event`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum EventKind {
    /// A chunk was aborted (every abort, masked or not).
    Abort = 1,
    /// A port was masked; `mask` is the mask now in effect.
    Masked = 2,
    /// The policy would have masked the last active port and did not.
    LastPort = 3,
    /// The host set a new mask, clearing the policy's.
    HostMask = 4,
}

/// One decision, for the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Numbered from 1, so the host sees what it missed.
    pub seq: u32,
    /// What happened.
    pub kind: EventKind,
    /// The abort's `ErrorCode` (0 for a host mask).
    pub code: u8,
    /// The port concerned.
    pub port: u8,
    /// The mask in effect after the event.
    pub mask: u16,
    /// The aborted chunk's layer, step, chunk.
    pub layer: u16,
    /// Its step.
    pub step: u16,
    /// Its chunk.
    pub chunk: u16,
}

/// What the node must be told: PORT_MASK and SCALE (binary32 bits, `None` = CTRL.scale_en 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeSettings {
    /// PORT_MASK.
    pub mask: u16,
    /// SCALE when scaling.
    pub scale: Option<u32>,
}

/// Why a host request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The mask names a port the node does not have.
    NoSuchPort,
    /// The mask is empty.
    NoPorts,
}

/// The policy of one node.
#[derive(Debug, Clone)]
pub struct Policy {
    ports: u8,
    wanted: u16,
    masked: u16,
    masked_timeout: u16,
    strikes: [u8; MAX_PORTS],
    scale: bool,
    events: [Option<Event>; EVENTS],
    next_seq: u32,
    read_seq: u32,
    lost: u32,
}

/// All ports of a node with `ports` ports.
const fn all(ports: u8) -> u16 {
    if ports as usize >= MAX_PORTS {
        u16::MAX
    } else {
        (1u16 << ports) - 1
    }
}

impl Policy {
    /// A node of `ports` ports (capped at [`MAX_PORTS`]), every port active, no scale.
    pub fn new(ports: u8) -> Self {
        let ports = ports.min(MAX_PORTS as u8);
        Policy {
            ports,
            wanted: all(ports),
            masked: 0,
            masked_timeout: 0,
            strikes: [0; MAX_PORTS],
            scale: false,
            events: [None; EVENTS],
            next_seq: 1,
            read_seq: 1,
            lost: 0,
        }
    }

    /// The node's ports.
    pub fn ports(&self) -> u8 {
        self.ports
    }

    /// The host's mask and scale choice. Clears every mask and strike of the policy's own
    /// (the host has decided which ports take part).
    pub fn set_host(&mut self, mask: u16, scale: bool) -> Result<NodeSettings, Refused> {
        if mask & !all(self.ports) != 0 {
            return Err(Refused::NoSuchPort);
        }
        if mask == 0 {
            return Err(Refused::NoPorts);
        }
        self.wanted = mask;
        self.masked = 0;
        self.masked_timeout = 0;
        self.strikes = [0; MAX_PORTS];
        self.scale = scale;
        let settings = self.settings();
        self.push(EventKind::HostMask, 0, 0, &Abort::default());
        Ok(settings)
    }

    /// The host's mask.
    pub fn host_mask(&self) -> u16 {
        self.wanted
    }

    /// Whether the host asked for the 1/(active ports) scale.
    pub fn scaling(&self) -> bool {
        self.scale
    }

    /// The ports taking part now.
    pub fn active(&self) -> u16 {
        self.wanted & !self.masked
    }

    /// What the node must hold now.
    pub fn settings(&self) -> NodeSettings {
        self.settings_within(u16::MAX)
    }

    /// What the node must hold while only the ports of `fed` have a wafer behind them (a
    /// step of K wafers feeds ports 0..K−1): the active ports among them, and the scale
    /// over their count. A port with no wafer is left out rather than left to time out.
    pub fn settings_within(&self, fed: u16) -> NodeSettings {
        let mask = self.active() & fed;
        let n = mask.count_ones();
        NodeSettings { mask, scale: self.scale.then(|| (1.0f32 / n.max(1) as f32).to_bits()) }
    }

    /// Port `p`'s state.
    pub fn state(&self, p: usize) -> PortState {
        let bit = 1u16.checked_shl(p as u32).unwrap_or(0);
        if p >= self.ports as usize || self.wanted & bit == 0 {
            PortState::Off
        } else if self.masked & bit == 0 {
            PortState::Active
        } else if self.masked_timeout & bit != 0 {
            PortState::MaskedTimeout
        } else {
            PortState::MaskedMismatch
        }
    }

    /// Port `p`'s strikes.
    pub fn strikes(&self, p: usize) -> u8 {
        self.strikes.get(p).copied().unwrap_or(0)
    }

    /// The node reduced flits and aborted nothing since the last look: every port is in
    /// step, strikes are forgiven.
    pub fn on_progress(&mut self) {
        self.strikes = [0; MAX_PORTS];
    }

    /// Acts on one latched abort. Returns the node's new settings when the mask changed.
    pub fn on_abort(&mut self, a: &Abort) -> Option<NodeSettings> {
        self.push(EventKind::Abort, a.code, a.port, a);
        if a.forwarded != 0 {
            // A child's error flit: its node's policy deals with its ports.
            return None;
        }
        let active = self.active();
        let mut to_mask = 0u16;
        let mut timeout = 0u16;
        match ErrorCode::from_code(a.code) {
            Some(ErrorCode::Timeout) => {
                to_mask = a.timeout_ports & active;
                timeout = to_mask;
            }
            Some(ErrorCode::Mismatch) | Some(ErrorCode::Kind) => {
                let mut blamed = a.mismatch_ports & active;
                if blamed == 0 && (a.port as usize) < self.ports as usize {
                    blamed = (1u16 << a.port) & active;
                }
                for p in 0..self.ports as usize {
                    if blamed & (1 << p) != 0 {
                        self.strikes[p] = self.strikes[p].saturating_add(1);
                        if self.strikes[p] >= MISMATCH_LIMIT {
                            to_mask |= 1 << p;
                        }
                    }
                }
            }
            None => {}
        }
        if to_mask == 0 {
            return None;
        }
        let mut changed = false;
        for p in 0..self.ports as usize {
            let bit = 1u16 << p;
            if to_mask & bit == 0 {
                continue;
            }
            if self.active() == bit {
                self.push(EventKind::LastPort, a.code, p as u8, a);
                continue;
            }
            self.masked |= bit;
            if timeout & bit != 0 {
                self.masked_timeout |= bit;
            }
            changed = true;
            self.push(EventKind::Masked, a.code, p as u8, a);
        }
        changed.then(|| self.settings())
    }

    fn push(&mut self, kind: EventKind, code: u8, port: u8, a: &Abort) {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        let slot = seq as usize % EVENTS;
        if let Some(old) = self.events[slot] {
            if old.seq >= self.read_seq {
                self.lost = self.lost.saturating_add(1);
                self.read_seq = old.seq.wrapping_add(1);
            }
        }
        self.events[slot] = Some(Event {
            seq,
            kind,
            code,
            port,
            mask: self.active(),
            layer: a.layer,
            step: a.step,
            chunk: a.chunk,
        });
    }

    /// Moves the events the host has not seen, oldest first, into `out`; returns how many.
    pub fn drain(&mut self, out: &mut [Event]) -> usize {
        let mut n = 0;
        while n < out.len() && self.read_seq != self.next_seq {
            if let Some(e) = self.events[self.read_seq as usize % EVENTS] {
                if e.seq == self.read_seq {
                    out[n] = e;
                    n += 1;
                }
            }
            self.read_seq = self.read_seq.wrapping_add(1);
        }
        n
    }

    /// Events overwritten before the host read them.
    pub fn lost(&self) -> u32 {
        self.lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout(ports: u16, port: u8) -> Abort {
        Abort { code: ErrorCode::Timeout as u8, port, timeout_ports: ports, ..Abort::default() }
    }

    fn mismatch(ports: u16, chunk: u16) -> Abort {
        Abort {
            code: ErrorCode::Mismatch as u8,
            port: ports.trailing_zeros() as u8,
            mismatch_ports: ports,
            chunk,
            ..Abort::default()
        }
    }

    fn events(p: &mut Policy) -> Vec<Event> {
        let mut out = [Event {
            seq: 0,
            kind: EventKind::Abort,
            code: 0,
            port: 0,
            mask: 0,
            layer: 0,
            step: 0,
            chunk: 0,
        }; EVENTS];
        let n = p.drain(&mut out);
        out[..n].to_vec()
    }

    #[test]
    fn a_timeout_masks_the_port_and_rescales() {
        let mut p = Policy::new(4);
        p.set_host(0b1111, true).unwrap();
        assert_eq!(p.settings().scale, Some(0.25f32.to_bits()));
        events(&mut p);
        let s = p.on_abort(&timeout(0b0100, 2)).expect("the mask changes");
        assert_eq!(s.mask, 0b1011);
        assert_eq!(s.scale, Some((1.0f32 / 3.0).to_bits()));
        assert_eq!(p.state(2), PortState::MaskedTimeout);
        assert_eq!(p.state(1), PortState::Active);
        let ev = events(&mut p);
        assert_eq!(ev.iter().map(|e| e.kind).collect::<Vec<_>>(), [EventKind::Abort, EventKind::Masked]);
        assert_eq!((ev[1].port, ev[1].mask), (2, 0b1011));
        // The same port timing out again (a chunk already in flight) changes nothing.
        assert_eq!(p.on_abort(&timeout(0b0100, 2)), None);
    }

    #[test]
    fn a_step_of_fewer_wafers_leaves_the_unfed_ports_out() {
        let mut p = Policy::new(4);
        p.set_host(0b1111, true).unwrap();
        // Three wafers on ports 0..2: port 3 has nothing behind it and must not time out.
        let s = p.settings_within(0b0111);
        assert_eq!(s, NodeSettings { mask: 0b0111, scale: Some((1.0f32 / 3.0).to_bits()) });
        // A port the policy masked stays out within the fed ones, and the scale follows.
        p.on_abort(&timeout(0b0010, 1)).unwrap();
        let s = p.settings_within(0b0111);
        assert_eq!(s, NodeSettings { mask: 0b0101, scale: Some(0.5f32.to_bits()) });
        // The host's own mask is untouched by the step.
        assert_eq!((p.host_mask(), p.active()), (0b1111, 0b1101));
    }

    #[test]
    fn one_mismatch_is_forgiven_repeated_ones_mask() {
        let mut p = Policy::new(4);
        assert_eq!(p.on_abort(&mismatch(0b0010, 7)), None);
        assert_eq!(p.strikes(1), 1);
        p.on_progress();
        assert_eq!(p.strikes(1), 0);
        // A port one chunk behind is blamed for every chunk.
        for c in 0..MISMATCH_LIMIT - 1 {
            assert_eq!(p.on_abort(&mismatch(0b0010, 8 + c as u16)), None);
        }
        let s = p.on_abort(&mismatch(0b0010, 20)).expect("masked at the limit");
        assert_eq!(s, NodeSettings { mask: 0b1101, scale: None });
        assert_eq!(p.state(1), PortState::MaskedMismatch);
        let masked = events(&mut p).into_iter().find(|e| e.kind == EventKind::Masked).unwrap();
        assert_eq!((masked.port, masked.chunk), (1, 20));
    }

    #[test]
    fn the_last_port_is_never_masked() {
        let mut p = Policy::new(2);
        p.on_abort(&timeout(0b01, 0)).unwrap();
        assert_eq!(p.active(), 0b10);
        assert_eq!(p.on_abort(&timeout(0b10, 1)), None);
        assert_eq!(p.active(), 0b10);
        let ev = events(&mut p);
        assert!(ev.iter().any(|e| e.kind == EventKind::LastPort && e.port == 1));
    }

    #[test]
    fn forwarded_errors_mask_nothing_here() {
        let mut p = Policy::new(4);
        let a = Abort { forwarded: 0b1000, ..timeout(0b1000, 3) };
        assert_eq!(p.on_abort(&a), None);
        assert_eq!(p.active(), 0b1111);
        assert_eq!(events(&mut p).len(), 1);
    }

    #[test]
    fn host_masks_are_checked_and_reset_the_policy() {
        let mut p = Policy::new(3);
        assert_eq!(p.set_host(0b1000, false), Err(Refused::NoSuchPort));
        assert_eq!(p.set_host(0, false), Err(Refused::NoPorts));
        p.on_abort(&timeout(0b001, 0)).unwrap();
        let s = p.set_host(0b011, true).unwrap();
        assert_eq!(s, NodeSettings { mask: 0b011, scale: Some(0.5f32.to_bits()) });
        assert_eq!(p.state(0), PortState::Active);
        assert_eq!(p.state(2), PortState::Off);
        assert_eq!(p.state(9), PortState::Off);
    }

    #[test]
    fn events_overflow_is_counted_and_the_newest_kept() {
        let mut p = Policy::new(16);
        for c in 0..(EVENTS as u16 + 5) {
            p.on_abort(&mismatch(0, c));
        }
        assert_eq!(p.lost(), 5);
        let ev = events(&mut p);
        assert_eq!(ev.len(), EVENTS);
        assert_eq!(ev[0].chunk, 5);
        assert!(ev.windows(2).all(|w| w[1].seq == w[0].seq + 1));
        assert!(events(&mut p).is_empty());
    }

    #[test]
    fn sixteen_ports_and_odd_inputs_do_not_panic() {
        let mut p = Policy::new(200);
        assert_eq!(p.ports(), 16);
        assert_eq!(p.active(), u16::MAX);
        for code in 0..=255u8 {
            let a = Abort {
                code,
                port: code,
                timeout_ports: u16::MAX,
                mismatch_ports: u16::MAX,
                ..Abort::default()
            };
            p.on_abort(&a);
        }
        assert_eq!(p.active().count_ones(), 1, "all but the last port masked");
    }
}
