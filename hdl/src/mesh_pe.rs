//! The wafer-mesh processing element `ws_mesh_pe` (`hdl/rtl/ws_mesh_pe.v`): its block spec, its
//! program encoding (FWD, DX, MASK, GRAD, DUMP), and a driver that loads a PE, runs a program
//! with the weight stream and the Snake reduction's incoming partial sums, and collects the
//! results stream, the outgoing partial sums and the counters. `hdl/tests/mesh_pe.rs` checks
//! it against `ws_common::golden::mesh::dense`; docs/mesh-pe.md describes the PE.

use crate::dut::{BlockSpec, Dut, Pattern, StreamSink, StreamSource};
use crate::swarm::with_fpnew;
use crate::vbuild::BuildError;

/// Repo-relative lint configuration of the PE (used with `hdl/lint/fpnew.vlt`).
pub const MESH_PE_VLT: &str = "hdl/lint/mesh_pe.vlt";

/// Our RTL files of the PE, in compile order.
pub const PE_FILES: &[&str] = &[
    "hdl/rtl/ws_optim_fma.v",
    "hdl/rtl/ws_mesh_pe_sram.v",
    "hdl/rtl/ws_mesh_div.v",
    "hdl/rtl/ws_mesh_loss.v",
    "hdl/rtl/ws_mesh_pe.v",
];

/// The loss stage's iterative divider alone (`hdl/rtl/ws_mesh_div.v`).
pub fn div_spec() -> BlockSpec {
    let mut spec = BlockSpec::new("ws_mesh_div").file("hdl/rtl/ws_mesh_div.v");
    spec.vlt_files.push(MESH_PE_VLT.into());
    spec
}

/// Cycles from `start` to `done` of `ws_mesh_div` for finite nonzero operands.
pub const DIV_CYCLES: u64 = 28;

pub use ws_common::mesh::{Instr, CFG_CTRL, CFG_PROG, CFG_SRAM};

/// `stat_err_code` values (see the header of `ws_mesh_pe.v`).
pub mod err {
    /// A program or SRAM write since the last clear fell outside the PE's memory.
    pub const RANGE: u32 = 1;
    /// Program length 0 or more than `PROG_DEPTH`.
    pub const LEN: u32 = 2;
    /// Unknown op or reserved bits set.
    pub const OP: u32 = 3;
    /// A zero B, K, M or count where one is needed.
    pub const SHAPE: u32 = 4;
    /// B larger than `MAX_B`.
    pub const BATCH: u32 = 5;
    /// The source region passes the end of the SRAM.
    pub const SRC: u32 = 6;
    /// The destination region passes the end of the SRAM.
    pub const DST: u32 = 7;
    /// A region that is written overlaps one that is read.
    pub const OVERLAP: u32 = 8;
}

/// Parameters of one `ws_mesh_pe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeParams {
    /// `SRAM_WORDS`: local SRAM in 32-bit words.
    pub sram_words: u32,
    /// `FMA_LAT`: pipeline registers of the FPnew FMA.
    pub fma_lat: u32,
    /// `MAX_B`: most sample slots per PE.
    pub max_b: u32,
    /// `PROG_DEPTH`: instructions of the program store.
    pub prog_depth: u32,
}

impl PeParams {
    /// The RTL's defaults.
    pub const fn new() -> Self {
        PeParams { sram_words: 2048, fma_lat: 3, max_b: 16, prog_depth: 16 }
    }
}

impl Default for PeParams {
    fn default() -> Self {
        Self::new()
    }
}

/// The PE with FPnew, ready for [`crate::dut::Dut::build`].
pub fn pe_spec(p: &PeParams) -> Result<BlockSpec, BuildError> {
    let spec = BlockSpec::new("ws_mesh_pe")
        .files(PE_FILES.iter().copied())
        .param("SRAM_WORDS", p.sram_words)
        .param("FMA_LAT", p.fma_lat)
        .param("MAX_B", p.max_b)
        .param("PROG_DEPTH", p.prog_depth);
    let mut spec = with_fpnew(spec)?;
    spec.vlt_files.push(MESH_PE_VLT.into());
    Ok(spec)
}

/// What the PE reported after a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Status {
    /// `stat_done`.
    pub done: bool,
    /// `stat_err`.
    pub err: bool,
    /// `stat_err_code`.
    pub code: u32,
    /// `stat_err_pc`.
    pub pc: u32,
    /// `cnt_fma`: FMA issues.
    pub fma: u64,
    /// `cnt_fwd_cycles`: cycles in FWD instructions.
    pub fwd_cycles: u64,
    /// `cnt_dx_cycles`: cycles in DX instructions.
    pub dx_cycles: u64,
    /// `cnt_grad_cycles`: cycles in GRAD instructions.
    pub grad_cycles: u64,
    /// `cnt_loss_cycles`: cycles in LOSS instructions.
    pub loss_cycles: u64,
    /// Cycles from the start to the end of the program.
    pub cycles: u64,
}

impl Status {
    /// FMA-busy cycles over FWD cycles (for a program of FWD instructions).
    pub fn utilisation(&self) -> f64 {
        self.fma as f64 / self.fwd_cycles.max(1) as f64
    }

    /// FMA-busy cycles over the cycles of every FMA instruction (FWD, DX, GRAD).
    pub fn fma_utilisation(&self) -> f64 {
        self.fma as f64 / (self.fwd_cycles + self.dx_cycles + self.grad_cycles).max(1) as f64
    }
}

/// One configuration write (one cycle).
pub fn cfg_write(dut: &mut Dut, addr: u16, data: u32) {
    let (v, a, d) = (dut.port("cfg_valid"), dut.port("cfg_addr"), dut.port("cfg_data"));
    dut.set(v, 1);
    dut.set(a, u64::from(addr));
    dut.set(d, u64::from(data));
    dut.tick();
    dut.set(v, 0);
    dut.eval();
}

/// Writes `words` to the SRAM from word `base` on.
pub fn load_sram(dut: &mut Dut, base: u32, words: &[u32]) {
    for (i, w) in words.iter().enumerate() {
        cfg_write(dut, CFG_SRAM + (base as usize + i) as u16, *w);
    }
}

/// Writes `prog` to the program store from instruction 0.
pub fn load_program(dut: &mut Dut, prog: &[Instr]) {
    for (n, ins) in prog.iter().enumerate() {
        for (w, word) in ins.words().iter().enumerate() {
            cfg_write(dut, CFG_PROG + (4 * n + w) as u16, *word);
        }
    }
}

/// Reads the status and counters.
pub fn status(dut: &Dut) -> Status {
    Status {
        done: dut.get_bool(dut.port("stat_done")),
        err: dut.get_bool(dut.port("stat_err")),
        code: dut.get(dut.port("stat_err_code")) as u32,
        pc: dut.get(dut.port("stat_err_pc")) as u32,
        fma: dut.get(dut.port("cnt_fma")),
        fwd_cycles: dut.get(dut.port("cnt_fwd_cycles")),
        dx_cycles: dut.get(dut.port("cnt_dx_cycles")),
        grad_cycles: dut.get(dut.port("cnt_grad_cycles")),
        loss_cycles: dut.get(dut.port("cnt_loss_cycles")),
        cycles: 0,
    }
}

/// What goes into a PE during one program and how its outputs are taken.
#[derive(Debug, Clone)]
pub struct Feeds<'a> {
    /// Words for `s_*` (the weight stream).
    pub weights: &'a [u32],
    /// Valid pattern of `s_*`.
    pub weights_pattern: Pattern,
    /// Words for `s1_*` (incoming running sums).
    pub partials: &'a [u32],
    /// Valid pattern of `s1_*`.
    pub partials_pattern: Pattern,
    /// Ready pattern of `m_*`.
    pub results_pattern: Pattern,
    /// Ready pattern of `m1_*`.
    pub sums_pattern: Pattern,
}

impl Default for Feeds<'_> {
    /// Nothing to feed, every stream at full rate.
    fn default() -> Self {
        Feeds {
            weights: &[],
            weights_pattern: Pattern::Always,
            partials: &[],
            partials_pattern: Pattern::Always,
            results_pattern: Pattern::Always,
            sums_pattern: Pattern::Always,
        }
    }
}

/// What a program produced ([`run_feeds`]).
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Status and counters (differences over the run).
    pub status: Status,
    /// Every `(data, last)` beat of `m_*`.
    pub results: Vec<(u32, bool)>,
    /// Every `(data, last)` beat of `m1_*`.
    pub sums: Vec<(u32, bool)>,
    /// Weight words taken.
    pub weights_taken: usize,
    /// Partial sums taken.
    pub partials_taken: usize,
}

/// Starts a program of `len` instructions and runs it to the end with `feeds`. Stops at
/// `stat_busy` low (a refused program never starts).
///
/// # Panics
/// If the program does not end within `limit` cycles.
pub fn run_feeds(dut: &mut Dut, len: u32, feeds: &Feeds<'_>, limit: u64) -> Outcome {
    let before = status(dut);
    let seed = dut.seed();
    let mut wsrc = StreamSource::with_fields(dut, "s", &["data"], seed ^ 0x11).pattern(feeds.weights_pattern);
    let mut psrc =
        StreamSource::with_fields(dut, "s1", &["data"], seed ^ 0x33).pattern(feeds.partials_pattern);
    let mut rsink = StreamSink::with_fields(dut, "m", &["data", "last"], seed ^ 0x22)
        .pattern(feeds.results_pattern)
        .unchecked();
    let mut ssink = StreamSink::with_fields(dut, "m1", &["data", "last"], seed ^ 0x44)
        .pattern(feeds.sums_pattern)
        .unchecked();
    for w in feeds.weights {
        wsrc.push(u64::from(*w));
    }
    for w in feeds.partials {
        psrc.push(u64::from(*w));
    }
    let busy = dut.port("stat_busy");
    cfg_write(dut, CFG_CTRL, (len << 16) | 1);
    let start = dut.cycle();
    let mut out = Outcome::default();
    loop {
        wsrc.drive(dut);
        psrc.drive(dut);
        rsink.drive(dut);
        ssink.drive(dut);
        dut.eval();
        if !dut.get_bool(busy) {
            break;
        }
        wsrc.sample(dut);
        psrc.sample(dut);
        if let Some(b) = rsink.sample(dut) {
            out.results.push((b[0] as u32, b[1] != 0));
        }
        if let Some(b) = ssink.sample(dut) {
            out.sums.push((b[0] as u32, b[1] != 0));
        }
        dut.tick();
        assert!(dut.cycle() - start < limit, "the program did not end within {limit} cycles");
    }
    // Leave the inputs quiet for what follows.
    for p in ["s_valid", "s1_valid", "m_ready", "m1_ready"] {
        let port = dut.port(p);
        dut.set(port, 0);
    }
    dut.eval();
    let mut st = status(dut);
    st.fma -= before.fma;
    st.fwd_cycles -= before.fwd_cycles;
    st.dx_cycles -= before.dx_cycles;
    st.grad_cycles -= before.grad_cycles;
    st.loss_cycles -= before.loss_cycles;
    st.cycles = dut.cycle() - start;
    out.status = st;
    out.weights_taken = feeds.weights.len() - wsrc.pending();
    out.partials_taken = feeds.partials.len() - psrc.pending();
    out
}

/// Starts a program of `len` instructions and runs it to the end: `weights` go in on `s_*`
/// with the valid pattern `src`, the results stream is taken with the ready pattern `sink`.
/// Returns the status (counters as differences over this run), every `(data, last)` beat
/// of `m_*` and the weight words taken. Stops at `stat_busy` low (a refused program never
/// starts). Nothing goes in on `s1_*`; `m1_*` is always ready.
///
/// # Panics
/// If the program does not end within `limit` cycles.
pub fn run(
    dut: &mut Dut,
    len: u32,
    weights: &[u32],
    src: Pattern,
    sink: Pattern,
    limit: u64,
) -> (Status, Vec<(u32, bool)>, usize) {
    let feeds = Feeds {
        weights,
        weights_pattern: src,
        results_pattern: sink,
        sums_pattern: Pattern::Always,
        ..Feeds::default()
    };
    let o = run_feeds(dut, len, &feeds, limit);
    (o.status, o.results, o.weights_taken)
}
