//! A wafer mesh (docs/mesh-array.md "In the SoC", slot 25 + wafer; "Several wafers"): route tables, PE programs and
//! the egress table through the block's configuration registers, the start of a step, and
//! what a step leaves behind (done and error bits, the metrics FIFO, the counters). The
//! numbers themselves never pass through here: samples and weights reach the PEs through the
//! data mover (ops 4 and 5), gradients leave through its capture sink.

use ws_common::mesh::{
    start_word, Instr, Route, Segment, ALL_PES, CFG_CTRL, CFG_PROG, REG_CHAIN, REG_NSEG, REG_SEG, REG_STEP,
    REG_TAG, TAG_SLOTS, TOP_REGS,
};
use ws_common::regmap::mesh as reg;

use crate::pac;

/// The array's build parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeshParams {
    /// P, rows of PEs.
    pub rows: u8,
    /// Q, columns of PEs.
    pub cols: u8,
    /// Sample slots per PE (MAX_B).
    pub max_b: u8,
    /// SRAM words of each PE.
    pub sram_words: u32,
    /// Instructions each PE's program store holds.
    pub prog_depth: u16,
    /// This wafer's index (WAFER.index).
    pub wafer: u8,
    /// Wafers the SoC carries (WAFER.count).
    pub wafers: u8,
    /// Its SwarmX downstream port (0xff: none).
    pub port: u8,
}

impl MeshParams {
    /// PEs in the array.
    pub fn pes(&self) -> usize {
        usize::from(self.rows) * usize::from(self.cols)
    }
}

/// A configuration write the array did not take (FLAGS.bad_route, FLAGS.bad_target).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigRefused {
    /// A ROUTE write named a router past the array.
    Route,
    /// A CFG_DATA write went to a PE that does not exist.
    Target,
}

/// What the array latched for chained steps (docs/mesh-array.md "Chained steps"): CHAIN_STAT,
/// CHAIN_CYCLE, CHAIN_FMAS and CHAIN_GRAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChainMarks {
    /// Fires since reset (wraps at 2^16).
    pub chains: u16,
    /// CHAIN is armed: the next step starts when the running one ends.
    pub armed: bool,
    /// The last fire's advance (STEP + 1, the egress table restarted) still waits for the
    /// ended step's last gradient words.
    pub pending: bool,
    /// The array's cycle counter at the last fire.
    pub cycle: u32,
    /// FMAS at the last fire: the difference of two fires is one step's FMAs.
    pub fmas: u32,
    /// GRAD_WORDS at the last advance: the difference of two advances is one step's
    /// gradient words.
    pub grad: u32,
}

/// Counter groups of CNT_SEL.
pub mod group {
    /// FMA issues of a PE.
    pub const FMAS: u32 = 0;
    /// Phase timestamps (index: layer id): forward start.
    pub const FWD_START: u32 = 8;
    /// The last gradient word of a layer id.
    pub const LAST_GRAD: u32 = 12;
    /// The cycle counter.
    pub const CYCLES: u32 = 13;
}

/// The mesh block.
#[derive(Debug)]
pub struct MeshHw {
    r: pac::Mesh,
    params: MeshParams,
}

impl MeshHw {
    /// Takes the block when the SoC has it (its slot reads the mesh's ID word); `None` for an
    /// empty slot, which reads 0.
    pub fn probe(r: pac::Mesh) -> Option<Self> {
        if r.id().read() != reg::ID_WORD {
            return None;
        }
        let (p, m, w) = (r.params().read(), r.mems().read(), r.wafer().read());
        let params = MeshParams {
            rows: reg::params::ROWS.get(p) as u8,
            cols: reg::params::COLS.get(p) as u8,
            max_b: reg::params::MAX_B.get(p) as u8,
            sram_words: reg::mems::SRAM_WORDS.get(m),
            prog_depth: reg::mems::PROG_DEPTH.get(m) as u16,
            wafer: reg::wafer::INDEX.get(w) as u8,
            wafers: reg::wafer::COUNT.get(w) as u8,
            port: reg::wafer::PORT.get(w) as u8,
        };
        Some(Self { r, params })
    }

    /// The build parameters.
    pub fn params(&self) -> MeshParams {
        self.params
    }

    /// Writes `words` from `addr` on of PE `pe` (or [`ALL_PES`], or [`TOP_REGS`]); the block
    /// advances the address itself (docs/mesh-array.md "Registers").
    pub fn cfg(&self, pe: u8, addr: u16, words: &[u32]) {
        self.r
            .cfg_target()
            .write(reg::cfg_target::ADDR.val(u32::from(addr)) | reg::cfg_target::PE.val(u32::from(pe)));
        for w in words {
            self.r.cfg_data().write(*w);
        }
    }

    /// Writes one route-table entry.
    pub fn route(&self, e: &Route) {
        self.r.route().write(e.word());
    }

    /// Loads a program into PE `pe`.
    pub fn load_program(&self, pe: u8, prog: &[Instr]) {
        self.load_program_at(pe, 0, prog);
    }

    /// Loads `prog` into PE `pe` from instruction `base` on (docs/mesh-pe.md "Samples while
    /// running": a second program beside the first).
    pub fn load_program_at(&self, pe: u8, base: u16, prog: &[Instr]) {
        let addr = CFG_PROG.wrapping_add(base.wrapping_mul(4));
        self.r
            .cfg_target()
            .write(reg::cfg_target::ADDR.val(u32::from(addr)) | reg::cfg_target::PE.val(u32::from(pe)));
        for i in prog {
            // The program store skips word 3 of each instruction slot by itself.
            for w in i.words() {
                self.r.cfg_data().write(w);
            }
        }
    }

    /// The layer tag of each program instruction, which the array's FMA phase records carry
    /// (`ws_common::mesh::Program::tags`; docs/trace.md "FMA phases").
    pub fn set_tags(&self, base: u16, tags: &[u16]) {
        let n = tags.len().min(TAG_SLOTS.saturating_sub(usize::from(base)));
        self.r.cfg_target().write(
            reg::cfg_target::ADDR.val(u32::from(REG_TAG + base))
                | reg::cfg_target::PE.val(u32::from(TOP_REGS)),
        );
        for t in &tags[..n] {
            self.r.cfg_data().write(u32::from(*t));
        }
    }

    /// The step of the gradient headers alone, keeping the egress table (a STEP write
    /// restarts it at its first segment).
    pub fn set_step_number(&self, step: u16) {
        self.cfg(TOP_REGS, REG_STEP, &[u32::from(step)]);
    }

    /// The step of the gradient headers and the egress table (which restarts the header
    /// sequence and the phase timestamps).
    pub fn set_step(&self, step: u16, segments: &[Segment]) {
        for (n, sg) in segments.iter().enumerate() {
            self.cfg(TOP_REGS, REG_SEG + 4 * n as u16, &sg.words());
        }
        self.cfg(TOP_REGS, REG_NSEG, &[segments.len() as u32]);
        self.cfg(TOP_REGS, REG_STEP, &[u32::from(step)]);
    }

    /// Where the data mover's next sample words (op 5) go: PE `pe`, SRAM word `addr` on.
    pub fn sample_target(&self, pe: u8, addr: u32) {
        self.r.sx_target().write(reg::sx_target::ADDR.val(addr) | reg::sx_target::PE.val(u32::from(pe)));
    }

    /// Where the mesh's streams go (CTRL): `capture`, the gradient egress to the data mover's
    /// capture sink; `swarm`, the mesh on its SwarmX port (weights from the broadcast,
    /// gradients up to MemoryX); `samples`, the data mover's sample feed (op 5) comes here.
    pub fn set_ctrl(&self, capture: bool, swarm: bool, samples: bool) {
        self.r.ctrl().write(
            reg::ctrl::GRAD_CAPTURE.val(u32::from(capture))
                | reg::ctrl::SWARM.val(u32::from(swarm))
                | reg::ctrl::SAMPLES.val(u32::from(samples)),
        );
    }

    /// Starts every PE's program of `len` instructions.
    pub fn start(&self, len: usize) {
        self.start_at(0, len);
    }

    /// Starts every PE on the `len` instructions from `base` on.
    pub fn start_at(&self, base: usize, len: usize) {
        self.cfg(ALL_PES, CFG_CTRL, &[((len as u32) << 16) | ((base as u32 & 0xff) << 8) | 1]);
    }

    /// Whether the block has CHAIN and its marks (version 1.1 on).
    pub fn can_chain(&self) -> bool {
        let (_, major, minor) = ws_common::regmap::split_id_word(self.r.id().read());
        (major, minor) >= (1, 1)
    }

    /// Arms CHAIN: once the running step ends (every PE done, none refused), the array starts
    /// every PE on the `len` instructions from `base` on by itself, and advances STEP by one
    /// once the ended step's gradient words have left (docs/mesh-array.md "Chained steps").
    /// Arm it while the step before runs, after the next step's samples are placed.
    pub fn chain(&self, base: usize, len: usize) {
        self.cfg(TOP_REGS, REG_CHAIN, &[start_word((base & 0xff) as u8, (len & 0xffff) as u16)]);
    }

    /// Disarms CHAIN (a fire that already happened stands: see [`Self::chain_marks`]).
    pub fn unchain(&self) {
        self.cfg(TOP_REGS, REG_CHAIN, &[0]);
    }

    /// What the array latched for chained steps.
    pub fn chain_marks(&self) -> ChainMarks {
        let st = self.r.chain_stat().read();
        ChainMarks {
            chains: reg::chain_stat::CHAINS.get(st) as u16,
            armed: reg::chain_stat::ARMED.get(st) != 0,
            pending: reg::chain_stat::PENDING.get(st) != 0,
            cycle: self.r.chain_cycle().read(),
            fmas: self.r.chain_fmas().read(),
            grad: self.r.chain_grad().read(),
        }
    }

    /// FMA issues of every PE together since reset (FMAS), wrapping at 2^32.
    pub fn fmas_total(&self) -> u32 {
        self.r.fmas().read()
    }

    /// The PEs done and refused since the last start (bit = router index).
    pub fn done(&self) -> (u16, u16) {
        let d = self.r.done().read();
        (reg::done::DONE.get(d) as u16, reg::done::ERR.get(d) as u16)
    }

    /// Whether any PE runs or any router holds a flit.
    pub fn busy(&self) -> bool {
        self.r.busy().read() != 0
    }

    /// Why the PEs 0..7 refused their programs (4 bits each).
    pub fn err_codes(&self) -> u32 {
        self.r.err_codes().read()
    }

    /// Clears and returns a configuration write the array did not take since the last look.
    pub fn take_refused(&self) -> Option<ConfigRefused> {
        let f = self.r.flags().read();
        let (route, target) = (reg::flags::BAD_ROUTE.get(f) != 0, reg::flags::BAD_TARGET.get(f) != 0);
        if route || target {
            self.r.flags().write(reg::flags::BAD_ROUTE.val(1) | reg::flags::BAD_TARGET.val(1));
        }
        match (route, target) {
            (true, _) => Some(ConfigRefused::Route),
            (false, true) => Some(ConfigRefused::Target),
            _ => None,
        }
    }

    /// A gradient word came beyond the egress table, or a router buffer overflowed.
    pub fn faulted(&self) -> bool {
        let f = self.r.flags().read();
        reg::flags::GRAD_OVERRUN.get(f) != 0 || reg::flags::OVERFLOW.get(f) != 0
    }

    /// Takes every word of the metrics FIFO of step `step` into `out` (index order); returns
    /// how many were there. Words of an earlier step are dropped; a word of a later step
    /// (a chained step's, docs/mesh-array.md "Chained steps") stays at the head for its step.
    pub fn take_metrics(&self, step: u16, out: &mut [u32]) -> usize {
        let mut n = 0;
        while reg::flags::METRICS_COUNT.get(self.r.flags().read()) != 0 {
            let (v, h) = (self.r.metrics().read(), self.r.metrics_hdr().read());
            let i = reg::metrics_hdr::INDEX.get(h) as usize;
            // Step numbers wrap: "later" is up to half the 16-bit range ahead.
            let ahead = (reg::metrics_hdr::STEP.get(h) as u16).wrapping_sub(step);
            if ahead != 0 && ahead < 0x8000 {
                break;
            }
            if ahead == 0 {
                if let Some(slot) = out.get_mut(i) {
                    *slot = v;
                    n += 1;
                }
            }
            self.r.cmd().write(reg::cmd::POP_METRICS.val(1));
        }
        n
    }

    /// Empties the metrics and results FIFOs (words of a step nobody will ask for); returns
    /// how many words each held.
    pub fn drain_fifos(&self) -> (u32, u32) {
        let mut n = (0u32, 0u32);
        // Each FIFO holds at most 255 words (its count field), so the loops end.
        while reg::flags::METRICS_COUNT.get(self.r.flags().read()) != 0 && n.0 < 256 {
            self.r.cmd().write(reg::cmd::POP_METRICS.val(1));
            n.0 += 1;
        }
        while reg::flags::RESULTS_COUNT.get(self.r.flags().read()) != 0 && n.1 < 256 {
            self.r.cmd().write(reg::cmd::POP_RESULTS.val(1));
            n.1 += 1;
        }
        n
    }

    /// Counter `index` of group `group` (CNT_SEL).
    pub fn counter(&self, group: u32, index: u32) -> u32 {
        self.r.cnt_sel().write(reg::cnt_sel::INDEX.val(index) | reg::cnt_sel::GROUP.val(group));
        self.r.cnt_value().read()
    }

    /// (weight words taken, sample words written, gradient words out) since reset.
    pub fn words(&self) -> (u32, u32, u32) {
        (self.r.feed_words().read(), self.r.sample_words().read(), self.r.grad_words().read())
    }
}
