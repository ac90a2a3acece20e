//! The trace unit (slot 18, `hdl/regmap/trace.toml`, docs/trace.md): one record per chunk per
//! stream hop, written into link channel 6's ring by the unit itself. This driver only starts,
//! drains and reads it.

use ws_common::regmap::trace as reg;

use crate::hal::link::Window;
use crate::pac;

/// The trace unit.
#[derive(Debug)]
pub struct TraceUnit {
    r: pac::Trace,
    probes: u32,
}

impl TraceUnit {
    /// Takes the unit when its slot reads its ID word; `None` otherwise (an empty slot reads 0).
    pub fn probe(r: pac::Trace) -> Option<Self> {
        if r.id().read() != reg::ID_WORD {
            return None;
        }
        let probes = reg::params::PROBES.get(r.params().read());
        Some(Self { r, probes })
    }

    /// Stream probes the unit has.
    pub fn probes(&self) -> u32 {
        self.probes
    }

    /// Switches the unit off: it forms and writes nothing and lets go of the link slot's
    /// ready position (the register's value counts again).
    pub fn off(&self) {
        self.r.ctrl().write(0);
    }

    /// Starts a trace into `ring` from stream position `at` (the slot's ready position, so the
    /// ring is empty), with `probes` (bit i stream probe i, bit 31 the streamer's records).
    /// False when the unit refused the ring.
    pub fn start(&self, ring: Window, at: u32, probes: u32) -> bool {
        self.off();
        self.r.ring_base().write(ring.base);
        self.r.ring_len().write(ring.len);
        self.r.start().write(at);
        self.r.probe_en().write(probes);
        self.r.ctrl().write(reg::ctrl::EN.val(1) | reg::ctrl::LINK.val(1));
        // The restart waits only for a record being written: a few cycles.
        for _ in 0..64 {
            let s = self.r.status().read();
            if reg::status::RESTART.get(s) == 0 {
                return reg::status::ACTIVE.get(s) != 0;
            }
        }
        false
    }

    /// Stops forming records and waits, up to `budget` polls, until the ones formed are
    /// written (the host must be reading channel 6 for that). The unit keeps the link slot's
    /// ready position. Returns HEAD: the end of the trace on the stream.
    pub fn drain(&self, budget: u32) -> u32 {
        let c = self.r.ctrl().read();
        self.r.ctrl().write(reg::ctrl::EN.set(c, 0));
        for _ in 0..budget.max(1) {
            if reg::status::BUSY.get(self.r.status().read()) == 0 {
                break;
            }
        }
        self.r.head().read()
    }

    /// STATUS: bit 0 active, 1 bad ring, 2 busy, 3 restart pending.
    pub fn status(&self) -> u32 {
        self.r.status().read()
    }

    /// The end of the last whole record written.
    pub fn head(&self) -> u32 {
        self.r.head().read()
    }

    /// The low 32 bits of the unit's free-running cycle counter, the clock of every record.
    pub fn cycle(&self) -> u32 {
        self.r.cycle_lo().read()
    }

    /// The unit's counts. Records formed but still unwritten (a ring the host does not read)
    /// count as lost: they are past the trace's end for whoever reads up to `head`.
    pub fn state(&self) -> ws_common::ctrl::cmd::TraceState {
        let s = self.r.status().read();
        let records = self.r.records().read();
        let lost = self.r.lost().read();
        let pending = self.r.seq().read().wrapping_sub(records).wrapping_sub(lost);
        let enabled = reg::ctrl::EN.get(self.r.ctrl().read()) != 0;
        ws_common::ctrl::cmd::TraceState {
            active: enabled && reg::status::ACTIVE.get(s) != 0,
            start: self.r.start().read(),
            head: self.r.head().read(),
            records,
            lost: if enabled { lost } else { lost.wrapping_add(pending) },
            high_water: self.r.high_water().read(),
            cycle: self.cycle(),
            probes: self.probes,
        }
    }
}
