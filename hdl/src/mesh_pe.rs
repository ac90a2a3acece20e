//! The wafer-mesh processing element `ws_mesh_pe` (`hdl/rtl/ws_mesh_pe.v`): its block spec, its
//! program encoding, and a driver that loads a PE, runs a program and collects the results
//! stream and the counters. `hdl/tests/mesh_pe.rs` checks it against
//! `ws_common::golden::mesh::dense`; docs/mesh-pe.md describes the PE.

use crate::dut::{BlockSpec, Dut, Pattern, StreamSink, StreamSource};
use crate::swarm::with_fpnew;
use crate::vbuild::BuildError;

/// Repo-relative lint configuration of the PE (used with `hdl/lint/fpnew.vlt`).
pub const MESH_PE_VLT: &str = "hdl/lint/mesh_pe.vlt";

/// Our RTL files of the PE, in compile order.
pub const PE_FILES: &[&str] =
    &["hdl/rtl/ws_optim_fma.v", "hdl/rtl/ws_mesh_pe_sram.v", "hdl/rtl/ws_mesh_pe.v"];

/// `cfg_addr` of the control register.
pub const CFG_CTRL: u16 = 0x0000;
/// `cfg_addr` of word 0 of instruction 0; instruction n word w is at `CFG_PROG + 4n + w`.
pub const CFG_PROG: u16 = 0x1000;
/// `cfg_addr` of SRAM word 0; word a is at `CFG_SRAM + a`.
pub const CFG_SRAM: u16 = 0x8000;

/// `stat_err_code` values (see the header of `ws_mesh_pe.v`).
pub mod err {
    /// A program or SRAM write since the last clear fell outside the PE's memory.
    pub const RANGE: u32 = 1;
    /// Program length 0 or more than `PROG_DEPTH`.
    pub const LEN: u32 = 2;
    /// Unknown op or reserved bits set.
    pub const OP: u32 = 3;
    /// B, K, M or a dump count of 0.
    pub const SHAPE: u32 = 4;
    /// B larger than `MAX_B`.
    pub const BATCH: u32 = 5;
    /// The source region (B·K inputs, or the dump) passes the end of the SRAM.
    pub const SRC: u32 = 6;
    /// The destination region (B·M outputs) passes the end of the SRAM.
    pub const DST: u32 = 7;
    /// Source and destination overlap.
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

/// One PE instruction (three 32-bit words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Instr {
    /// M rows of K+1 weight words (bias first) from `s_*`; y of B samples at `dst` (B×M,
    /// sample-major) from x at `src` (B×K).
    Fwd {
        /// ReLU on the outputs.
        relu: bool,
        /// Samples.
        b: u32,
        /// Inputs.
        k: u32,
        /// Outputs.
        m: u32,
        /// Word address of x.
        src: u32,
        /// Word address of y.
        dst: u32,
    },
    /// Sends SRAM words `src .. src + count` on `m_*`.
    Dump {
        /// First word.
        src: u32,
        /// Words.
        count: u32,
    },
    /// Three raw words (for testing the checks).
    Raw([u32; 3]),
}

impl Instr {
    /// The three words of the instruction.
    pub fn words(&self) -> [u32; 3] {
        match *self {
            Instr::Fwd { relu, b, k, m, src, dst } => {
                [1 | (u32::from(relu) << 4) | (b << 8), k | (m << 16), src | (dst << 16)]
            }
            Instr::Dump { src, count } => [2, count, src],
            Instr::Raw(w) => w,
        }
    }
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
    /// Cycles from the start to the end of the program.
    pub cycles: u64,
}

impl Status {
    /// FMA-busy cycles over FWD cycles.
    pub fn utilisation(&self) -> f64 {
        self.fma as f64 / self.fwd_cycles.max(1) as f64
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
        cycles: 0,
    }
}

/// Starts a program of `len` instructions and runs it to the end: `weights` go in on `s_*`
/// with the valid pattern `src`, the results stream is taken with the ready pattern `sink`.
/// Returns the status (counters as differences over this run) and every `(data, last)` beat
/// of `m_*`. Stops at `stat_busy` low (a refused program never starts).
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
    let before = status(dut);
    let seed = dut.seed();
    let mut source = StreamSource::with_fields(dut, "s", &["data"], seed ^ 0x11).pattern(src);
    let mut sinker =
        StreamSink::with_fields(dut, "m", &["data", "last"], seed ^ 0x22).pattern(sink).unchecked();
    for w in weights {
        source.push(u64::from(*w));
    }
    let busy = dut.port("stat_busy");
    cfg_write(dut, CFG_CTRL, (len << 16) | 1);
    let start = dut.cycle();
    let mut out = Vec::new();
    loop {
        source.drive(dut);
        sinker.drive(dut);
        dut.eval();
        if !dut.get_bool(busy) {
            break;
        }
        source.sample(dut);
        if let Some(b) = sinker.sample(dut) {
            out.push((b[0] as u32, b[1] != 0));
        }
        dut.tick();
        assert!(dut.cycle() - start < limit, "the program did not end within {limit} cycles");
    }
    // Leave the inputs quiet for what follows.
    let (sv, mr) = (dut.port("s_valid"), dut.port("m_ready"));
    dut.set(sv, 0);
    dut.set(mr, 0);
    dut.eval();
    let mut st = status(dut);
    st.fma -= before.fma;
    st.fwd_cycles -= before.fwd_cycles;
    st.cycles = dut.cycle() - start;
    (st, out, weights.len() - source.pending())
}
