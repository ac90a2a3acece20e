//! The wafer mesh top `ws_mesh` (`hdl/rtl/ws_mesh.v`): a P×Q array of PEs
//! ([`crate::mesh_pe`]) beside the routers of `ws_mesh_fabric` ([`crate::mesh`]), with the
//! weight ingress, gradient egress, metrics egress and sample ingress ports. This module has
//! its block spec, the route tables of its three colors, the snake, and a driver that loads
//! samples and programs, streams weights in and collects the two egress streams.
//! docs/mesh-array.md describes the array; `hdl/tests/mesh_array.rs` checks it against
//! `ws_common::golden::mesh::dense`.

use crate::dut::{BlockSpec, Dut, Pattern, StreamSink, StreamSource};
use crate::mesh::{self, bit, Endpoint, Entry, Geometry, Mesh, RouterParams, PORT_L, PORT_S};
use crate::mesh_pe::{Instr, PeParams, CFG_CTRL, CFG_PROG};
use crate::swarm::with_fpnew;
use crate::vbuild::BuildError;
use ws_common::flit::{Flit, Header, Kind};

pub mod scenario;
pub mod step;

/// Our RTL of the array, leaves first.
pub const ARRAY_FILES: &[&str] = &[
    "hdl/rtl/ws_optim_fma.v",
    "hdl/rtl/ws_mesh_pe_sram.v",
    "hdl/rtl/ws_mesh_div.v",
    "hdl/rtl/ws_mesh_loss.v",
    "hdl/rtl/ws_mesh_pe.v",
    "hdl/rtl/ws_mesh_router_buf.v",
    "hdl/rtl/ws_mesh_router.v",
    "hdl/rtl/ws_mesh_fabric.v",
    "hdl/rtl/ws_mesh_edge_in.v",
    "hdl/rtl/ws_mesh_edge_out.v",
    "hdl/rtl/ws_mesh_phases.v",
    "hdl/rtl/ws_mesh.v",
];
/// Build configuration of the array (with the router's and the PE's).
pub const ARRAY_VLT: &str = "hdl/lint/mesh_array.vlt";

pub use ws_common::mesh::{COLOR_RESULTS, COLOR_SNAKE, COLOR_WEIGHTS};

/// Parameters of one `ws_mesh`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArrayParams {
    /// P.
    pub rows: usize,
    /// Q.
    pub cols: usize,
    /// Every PE's parameters.
    pub pe: PeParams,
    /// Router flits per color per input.
    pub buf_depth: usize,
}

impl ArrayParams {
    /// The geometry.
    pub const fn geometry(&self) -> Geometry {
        Geometry::new(self.rows, self.cols)
    }

    /// The routers' parameters as `ws_mesh` sets them: 3 colors, a 1-bit header.
    pub const fn router(&self) -> RouterParams {
        let mut r = RouterParams::new();
        r.colors = 3;
        r.buf_depth = self.buf_depth;
        r.user_width = 1;
        r
    }
}

/// `ws_mesh` as the top module.
pub fn array_spec(p: &ArrayParams) -> Result<BlockSpec, BuildError> {
    let spec = BlockSpec::new("ws_mesh")
        .files(ARRAY_FILES.iter().copied())
        .include_dir(mesh::RTL_INCLUDE_DIR)
        .param("P", p.rows)
        .param("Q", p.cols)
        .param("SRAM_WORDS", p.pe.sram_words)
        .param("FMA_LAT", p.pe.fma_lat)
        .param("MAX_B", p.pe.max_b)
        .param("PROG_DEPTH", p.pe.prog_depth)
        .param("BUF_DEPTH", p.buf_depth);
    let mut spec = with_fpnew(spec)?;
    spec.vlt_files.push(crate::mesh_pe::MESH_PE_VLT.into());
    spec.vlt_files.push(mesh::LINT_FILE.into());
    spec.vlt_files.push(ARRAY_VLT.into());
    Ok(spec)
}

/// The router of snake position `pos` (docs/mesh.md "PEs and the snake").
pub fn snake_router(g: Geometry, pos: usize) -> usize {
    ws_common::mesh::snake_router(g.cols, pos)
}

/// The edge links of the ports: (weight ingress, gradient egress, metrics egress).
pub fn edges(g: Geometry) -> (usize, usize, usize) {
    let w = g.edge(0, mesh::PORT_W).unwrap_or(0);
    let exit = snake_router(g, g.routers() - 1);
    let grad = g.edge(exit, PORT_S).unwrap_or(0);
    let metrics = g.edge(g.routers() - 1, mesh::PORT_E).unwrap_or(0);
    (w, grad, metrics)
}

/// The route tables of `ws_mesh` as the firmware writes them (`ws_common::mesh::routes`):
/// color 0 a broadcast from the weight ingress to every PE, color 1 the snake (each PE's local
/// output to the next PE's local input, the last one's to the gradient egress), color 2 an
/// ordered gather to the metrics egress (each round arrives in router-index order), with the
/// edges declared so that [`Mesh::check`] can prove them.
pub fn routes(p: &ArrayParams) -> Mesh {
    let g = p.geometry();
    let (w, grad, metrics) = edges(g);
    let mut m = Mesh::new(g, p.router());
    for e in ws_common::mesh::routes(g.rows, g.cols) {
        m.set(e.router, e.in_port, e.color, Entry { mask: e.mask, quota: e.quota });
    }
    m.add_ingress(w, COLOR_WEIGHTS).add_egress(grad, COLOR_SNAKE).add_egress(metrics, COLOR_RESULTS);
    m
}

/// The same tables built with the generic route builders ([`Mesh::broadcast`],
/// [`Mesh::gather`]) and the snake walked by hand: the independent reference that the
/// firmware's tables ([`routes`]) are checked against.
pub fn reference_routes(p: &ArrayParams) -> Mesh {
    let g = p.geometry();
    let (w, grad, metrics) = edges(g);
    let mut m = Mesh::new(g, p.router());
    m.broadcast(COLOR_WEIGHTS, Endpoint::Edge(w));
    for pos in 0..g.routers() {
        let r = snake_router(g, pos);
        let out = if pos + 1 == g.routers() {
            PORT_S
        } else {
            let next = snake_router(g, pos + 1);
            (0..mesh::LINKS).find(|&port| g.neighbour(r, port) == Some(next)).unwrap_or(PORT_S)
        };
        m.set(r, PORT_L, COLOR_SNAKE, Entry::to(bit(out)));
        if let Some(n) = g.neighbour(r, out) {
            m.set(n, mesh::opposite(out), COLOR_SNAKE, Entry::to(bit(PORT_L)));
        }
    }
    m.add_egress(grad, COLOR_SNAKE);
    m.gather(COLOR_RESULTS, metrics, true);
    m
}

/// Writes the route tables (after [`Mesh::check`]).
pub fn configure_routes(dut: &mut Dut, m: &Mesh) {
    let we = dut.port("rt_cfg_we");
    let (r, inp, color, out, quota) = (
        dut.port("rt_cfg_router"),
        dut.port("rt_cfg_in_port"),
        dut.port("rt_cfg_color"),
        dut.port("rt_cfg_out_mask"),
        dut.port("rt_cfg_quota"),
    );
    for w in m.writes() {
        dut.set(r, w.router as u64);
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

pub use ws_common::mesh::ALL_PES;

/// One PE configuration write (one cycle).
pub fn cfg_write(dut: &mut Dut, pe: u8, addr: u16, data: u32) {
    let (v, p, a, d) =
        (dut.port("cfg_valid"), dut.port("cfg_pe"), dut.port("cfg_addr"), dut.port("cfg_data"));
    dut.set(v, 1);
    dut.set(p, u64::from(pe));
    dut.set(a, u64::from(addr));
    dut.set(d, u64::from(data));
    dut.tick();
    dut.set(v, 0);
    dut.eval();
}

/// Loads `prog` into PE `pe` (or every PE).
pub fn load_program(dut: &mut Dut, pe: u8, prog: &[Instr]) {
    load_program_at(dut, pe, 0, prog);
}

/// Loads `prog` into PE `pe` from instruction `base` on.
pub fn load_program_at(dut: &mut Dut, pe: u8, base: usize, prog: &[Instr]) {
    for (n, ins) in prog.iter().enumerate().map(|(n, i)| (base + n, i)) {
        for (w, word) in ins.words().iter().enumerate() {
            cfg_write(dut, pe, CFG_PROG + (4 * n + w) as u16, *word);
        }
    }
}

pub use ws_common::mesh::{start_word, Segment, GSEG, REG_CHAIN, REG_NSEG, REG_SEG, REG_STEP, TOP_REGS};

/// Layer ids with phase timestamps (`TS_LAYERS`, the default).
pub const TS_LAYERS: usize = 8;

/// Writes the step and the gradient header table (at most [`GSEG`] segments), which also
/// restarts the header sequence and starts a new step for the phase timestamps.
pub fn configure_step(dut: &mut Dut, step: u16, segments: &[Segment]) {
    for (n, sg) in segments.iter().enumerate() {
        for (w, word) in sg.words().into_iter().enumerate() {
            cfg_write(dut, TOP_REGS, REG_SEG + (4 * n + w) as u16, word);
        }
    }
    cfg_write(dut, TOP_REGS, REG_NSEG, segments.len() as u32);
    cfg_write(dut, TOP_REGS, REG_STEP, u32::from(step));
}

/// Writes the layer tag of each program instruction (`REG_TAG`), which the FMA phase records
/// carry.
pub fn configure_tags(dut: &mut Dut, tags: &[u16]) {
    for (n, t) in tags.iter().enumerate() {
        cfg_write(dut, TOP_REGS, ws_common::mesh::REG_TAG + n as u16, u32::from(*t));
    }
}

/// One FMA phase record (`m_ph_*`, `ws_mesh_phases`): one instruction's FMAs over the array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PhaseOut {
    /// The cycle (`ts_now`, which the harness drives with the run's cycle) of the first FMA.
    pub begin: u64,
    /// The cycle of the last FMA.
    pub end: u64,
    /// The opcode.
    pub op: u8,
    /// The instruction's layer tag.
    pub tag: u16,
    /// The STEP it began in.
    pub step: u16,
    /// The instruction's index.
    pub pc: u16,
    /// PEs that issued.
    pub pes: u16,
    /// FMAs issued.
    pub fmas: u32,
}

/// The phase timestamps of one layer id (cycles of `cnt_cycle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Phases {
    /// First weight word of the forward pass taken at the ingress.
    pub fwd_start: u64,
    /// Last weight word of the forward pass taken.
    pub fwd_end: u64,
    /// First weight word of the backward pass taken.
    pub bwd_start: u64,
    /// Last weight word of the backward pass taken.
    pub bwd_end: u64,
    /// Last gradient word of the layer handed out at the gradient egress.
    pub grad_last: u64,
}

/// The phase timestamps of layer id `layer` (< [`TS_LAYERS`]).
pub fn phases(dut: &Dut, layer: usize) -> Phases {
    Phases {
        fwd_start: counter(dut, "ts_fwd_start", layer),
        fwd_end: counter(dut, "ts_fwd_end", layer),
        bwd_start: counter(dut, "ts_bwd_start", layer),
        bwd_end: counter(dut, "ts_bwd_end", layer),
        grad_last: counter(dut, "ts_grad_last", layer),
    }
}

/// One word for the sample ingress: (PE, SRAM address, value).
pub type Sample = (usize, u32, u32);

/// Streams `samples` in through `s_x_*` with the valid pattern `pattern`.
pub fn load_samples(dut: &mut Dut, samples: &[Sample], pattern: Pattern) {
    let mut src =
        StreamSource::with_fields(dut, "s_x", &["data", "user"], dut.seed() ^ 0x55).pattern(pattern);
    for (pe, addr, v) in samples {
        src.push_beat(&[u64::from(*v), ((*pe as u64) << 15) | u64::from(*addr)]);
    }
    while src.pending() > 0 {
        src.drive(dut);
        dut.eval();
        src.sample(dut);
        dut.tick();
    }
    let v = dut.port("s_x_valid");
    dut.set(v, 0);
    dut.eval();
}

/// How the edge streams run during [`run`].
#[derive(Debug, Clone, Copy)]
pub struct Patterns {
    /// Valid of the weight ingress.
    pub weights: Pattern,
    /// Ready of the gradient egress.
    pub grads: Pattern,
    /// Ready of the metrics egress.
    pub results: Pattern,
}

/// What a run produced.
#[derive(Debug, Clone, Default)]
pub struct RunOut {
    /// Gradient egress flits (header, payload, last).
    pub grads: Vec<Flit>,
    /// Results egress beats (data, last).
    pub results: Vec<(u32, bool)>,
    /// Metrics egress flits (header, payload, last).
    pub metrics: Vec<Flit>,
    /// Weight words taken.
    pub weights_taken: usize,
    /// Cycles from the start to the last PE going idle.
    pub cycles: u64,
    /// Cycles from the start to the first and the last gradient egress beat.
    pub grad_span: Option<(u64, u64)>,
    /// `cnt_cycle` at the start.
    pub start_cycle: u64,
    /// `cnt_cycle` of each gradient word handed out.
    pub grad_times: Vec<u64>,
    /// `cnt_cycle` of each weight word taken.
    pub weight_times: Vec<u64>,
    /// The FMA phase records, in the order they left (`ts_now` = `cnt_cycle`).
    pub phases: Vec<PhaseOut>,
}

/// Starts every PE on its program of `len` instructions and runs until the array is drained:
/// every PE idle, every router idle (nothing buffered, no credit outstanding) and both egress
/// FIFOs empty, streaming `weights` in (payload and `last`, which closes each chunk).
///
/// # Panics
/// If the array does not drain within `limit` cycles.
pub fn run(dut: &mut Dut, len: u32, weights: &[Flit], pats: Patterns, limit: u64) -> RunOut {
    run_from(dut, 0, len, weights, pats, limit, &[])
}

/// [`run`] of the program at instruction `base` on, streaming `samples` into the PEs' sample
/// ports (valid pattern of the weights) while the program runs.
pub fn run_from(
    dut: &mut Dut,
    base: u32,
    len: u32,
    weights: &[Flit],
    pats: Patterns,
    limit: u64,
    samples: &[Sample],
) -> RunOut {
    let seed = dut.seed();
    let mut xsrc =
        StreamSource::with_fields(dut, "s_x", &["data", "user"], seed ^ 0x65).pattern(pats.weights);
    for (pe, addr, v) in samples {
        xsrc.push_beat(&[u64::from(*v), ((*pe as u64) << 15) | u64::from(*addr)]);
    }
    let mut wsrc =
        StreamSource::with_fields(dut, "s_w", &["data", "last", "user"], seed ^ 0x61).pattern(pats.weights);
    let mut gsink = StreamSink::with_fields(dut, "m_g", &["data", "last", "user"], seed ^ 0x62)
        .pattern(pats.grads)
        .unchecked();
    let mut rsink =
        StreamSink::with_fields(dut, "m_r", &["data", "last"], seed ^ 0x63).pattern(pats.results).unchecked();
    let mut msink = StreamSink::with_fields(dut, "m_m", &["data", "last", "user"], seed ^ 0x64)
        .pattern(pats.results)
        .unchecked();
    for f in weights {
        wsrc.push_beat(&[u64::from(f.payload), u64::from(f.last), f.header.pack()]);
    }
    cfg_write(dut, ALL_PES, CFG_CTRL, (len << 16) | (base << 8) | 1);
    let (busy, rbusy) = (dut.port("stat_busy"), dut.port("router_busy"));
    let (gv, rv, mv) = (dut.port("m_g_valid"), dut.port("m_r_valid"), dut.port("m_m_valid"));
    let start = dut.cycle();
    let cyc = dut.port("cnt_cycle");
    let (now, ph_busy) = (dut.port("ts_now"), dut.port("ph_busy"));
    let mut out = RunOut { start_cycle: dut.get(cyc), ..RunOut::default() };
    loop {
        let c = dut.get(cyc);
        dut.set(now, c);
        xsrc.drive(dut);
        wsrc.drive(dut);
        gsink.drive(dut);
        rsink.drive(dut);
        msink.drive(dut);
        dut.eval();
        let idle = dut.get_words(busy).iter().all(|w| *w == 0)
            && dut.get_words(rbusy).iter().all(|w| *w == 0)
            && !dut.get_bool(gv)
            && !dut.get_bool(rv)
            && !dut.get_bool(mv);
        if idle && xsrc.pending() == 0 {
            break;
        }
        xsrc.sample(dut);
        if wsrc.sample(dut).is_some() {
            out.weight_times.push(dut.get(cyc));
        }
        if let Some(b) = gsink.sample(dut) {
            let t = dut.cycle() - start;
            out.grad_span = Some((out.grad_span.map_or(t, |s| s.0), t));
            // A header that does not decode (a reserved kind) is kept as an error flit.
            let header = Header::unpack(b[2]).unwrap_or(Header::new(Kind::Error, 0, 0, 0, 0));
            out.grads.push(Flit { header, payload: b[0] as u32, last: b[1] != 0 });
            out.grad_times.push(dut.get(cyc));
        }
        if let Some(b) = rsink.sample(dut) {
            out.results.push((b[0] as u32, b[1] != 0));
        }
        if let Some(b) = msink.sample(dut) {
            let header = Header::unpack(b[2]).unwrap_or(Header::new(Kind::Error, 0, 0, 0, 0));
            out.metrics.push(Flit { header, payload: b[0] as u32, last: b[1] != 0 });
        }
        sample_phase(dut, &mut out.phases);
        dut.tick();
        assert!(
            dut.cycle() - start < limit,
            "the mesh did not drain within {limit} cycles ({} weight words left, {} gradient and {} result words out; PEs busy {:x?}, routers busy {:x?})",
            wsrc.pending(),
            out.grads.len(),
            out.results.len(),
            dut.get_words(busy),
            dut.get_words(rbusy)
        );
    }
    out.cycles = dut.cycle() - start;
    // The last instructions' records leave one per cycle once every PE is done.
    let mut left = 1024;
    while dut.get_bool(ph_busy) {
        assert!(left > 0, "the phase probe stays busy after the array drained");
        left -= 1;
        let c = dut.get(cyc);
        dut.set(now, c);
        dut.eval();
        sample_phase(dut, &mut out.phases);
        dut.tick();
    }
    for p in ["s_w_valid", "s_x_valid", "m_g_ready", "m_r_ready", "m_m_ready"] {
        let port = dut.port(p);
        dut.set(port, 0);
    }
    dut.eval();
    out.weights_taken = weights.len() - wsrc.pending();
    out
}

/// One step of a chained run ([`run_chain`]).
#[derive(Debug, Clone, Copy)]
pub struct ChainStep<'a> {
    /// The program's first instruction.
    pub base: u8,
    /// The program's length.
    pub len: u16,
    /// The step's weight stream (payload and `last`).
    pub weights: &'a [Flit],
    /// The step's samples, streamed into the PEs' sample ports while the step before it runs
    /// (the first step's are in place before the run).
    pub samples: &'a [Sample],
}

/// A chain fire as [`run_chain`] saw it.
#[derive(Debug, Clone, Default)]
pub struct Fire {
    /// `cnt_cycle` in the cycle the chain count went up.
    pub cycle: u64,
    /// `chain_cycle` after it.
    pub latched_cycle: u64,
    /// `chain_fmas` after it.
    pub latched_fmas: u64,
    /// Each PE's `cnt_fma` after it.
    pub pe_fmas: Vec<u64>,
    /// Whether the fire's advance was still pending after it (the ended step's last gradient
    /// words were still on their way to the egress).
    pub pending: bool,
}

/// A step advance as [`run_chain`] saw it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Advance {
    /// `cnt_cycle` in the cycle `chain_grad` changed.
    pub cycle: u64,
    /// `chain_grad` after it.
    pub latched_grad: u64,
    /// `cnt_grad_words` before the run plus the gradient words the sink took up to and in
    /// that cycle.
    pub grad_words: u64,
}

/// What a chained run produced.
#[derive(Debug, Clone, Default)]
pub struct ChainOut {
    /// Everything that left the array over all the steps; `cycles` runs to the drain.
    pub out: RunOut,
    /// Each PE's `cnt_fma` at the start and at the drain.
    pub start_fmas: Vec<u64>,
    /// Each PE's `cnt_fma` at the drain.
    pub end_fmas: Vec<u64>,
    /// `cnt_fma_total` at the start and at the drain.
    pub total_fmas: (u64, u64),
    /// `cnt_grad_words` at the start.
    pub start_grad_words: u64,
    /// `chain_count` at the start.
    pub start_chains: u64,
    /// `cnt_cycle` of each CHAIN write (one per step but the last).
    pub arms: Vec<u64>,
    /// The fires, one per step but the last.
    pub fires: Vec<Fire>,
    /// The advances.
    pub advances: Vec<Advance>,
    /// `cnt_cycle` at the drain.
    pub end_cycle: u64,
}

/// Runs `steps` back to back on `pes` PEs, the way a chained run goes: the first is started
/// with a CTRL write, each later one by the array itself from CHAIN, which is armed during
/// the step before it once that step's successor's samples are in. Every step's weights are
/// queued at the ingress from the start, so the next step's words wait in the array before its
/// chain fires. Runs until the last step has drained as [`run`] does.
///
/// # Panics
/// If the run does not drain within `limit` cycles.
pub fn run_chain(dut: &mut Dut, pes: usize, steps: &[ChainStep<'_>], pats: Patterns, limit: u64) -> ChainOut {
    let seed = dut.seed();
    let mut xsrc =
        StreamSource::with_fields(dut, "s_x", &["data", "user"], seed ^ 0x75).pattern(pats.weights);
    let mut wsrc =
        StreamSource::with_fields(dut, "s_w", &["data", "last", "user"], seed ^ 0x71).pattern(pats.weights);
    let mut gsink = StreamSink::with_fields(dut, "m_g", &["data", "last", "user"], seed ^ 0x72)
        .pattern(pats.grads)
        .unchecked();
    let mut rsink =
        StreamSink::with_fields(dut, "m_r", &["data", "last"], seed ^ 0x73).pattern(pats.results).unchecked();
    let mut msink = StreamSink::with_fields(dut, "m_m", &["data", "last", "user"], seed ^ 0x74)
        .pattern(pats.results)
        .unchecked();
    let push_samples = |src: &mut StreamSource, samples: &[Sample]| {
        for (pe, addr, v) in samples {
            src.push_beat(&[u64::from(*v), ((*pe as u64) << 15) | u64::from(*addr)]);
        }
    };
    let weights: usize = steps.iter().map(|s| s.weights.len()).sum();
    for f in steps.iter().flat_map(|s| s.weights) {
        wsrc.push_beat(&[u64::from(f.payload), u64::from(f.last), f.header.pack()]);
    }
    let fmas = |dut: &Dut| (0..pes).map(|r| counter(dut, "cnt_fma", r)).collect::<Vec<u64>>();
    let port = |dut: &Dut, name: &str| dut.get(dut.port(name));
    let mut chain = ChainOut {
        start_fmas: fmas(dut),
        total_fmas: (port(dut, "cnt_fma_total"), 0),
        start_grad_words: port(dut, "cnt_grad_words"),
        start_chains: port(dut, "chain_count"),
        ..ChainOut::default()
    };
    let first = steps[0];
    cfg_write(dut, ALL_PES, CFG_CTRL, start_word(first.base, first.len));
    if let Some(next) = steps.get(1) {
        push_samples(&mut xsrc, next.samples);
    }

    let (busy, rbusy) = (dut.port("stat_busy"), dut.port("router_busy"));
    let (gv, rv, mv) = (dut.port("m_g_valid"), dut.port("m_r_valid"), dut.port("m_m_valid"));
    let (cv, cp, ca, cd) =
        (dut.port("cfg_valid"), dut.port("cfg_pe"), dut.port("cfg_addr"), dut.port("cfg_data"));
    let (chains_p, grad_p) = (dut.port("chain_count"), dut.port("chain_grad"));
    let start = dut.cycle();
    let cyc = dut.port("cnt_cycle");
    let (now, ph_busy) = (dut.port("ts_now"), dut.port("ph_busy"));
    chain.out.start_cycle = dut.get(cyc);
    let (mut cur, mut armed_for) = (0usize, None);
    let (mut chains, mut grad_latch) = (chain.start_chains, dut.get(grad_p));
    loop {
        let c = dut.get(cyc);
        dut.set(now, c);
        // Arm the chain into the next step once that step's samples are all in.
        let arm = cur + 1 < steps.len() && armed_for != Some(cur) && xsrc.pending() == 0;
        if arm {
            let next = steps[cur + 1];
            dut.set(cv, 1);
            dut.set(cp, u64::from(TOP_REGS));
            dut.set(ca, u64::from(REG_CHAIN));
            dut.set(cd, u64::from(start_word(next.base, next.len)));
        }
        xsrc.drive(dut);
        wsrc.drive(dut);
        gsink.drive(dut);
        rsink.drive(dut);
        msink.drive(dut);
        dut.eval();
        let idle = dut.get_words(busy).iter().all(|w| *w == 0)
            && dut.get_words(rbusy).iter().all(|w| *w == 0)
            && !dut.get_bool(gv)
            && !dut.get_bool(rv)
            && !dut.get_bool(mv);
        if idle && cur + 1 == steps.len() && xsrc.pending() == 0 {
            break;
        }
        xsrc.sample(dut);
        if wsrc.sample(dut).is_some() {
            chain.out.weight_times.push(c);
        }
        if let Some(b) = gsink.sample(dut) {
            let t = dut.cycle() - start;
            chain.out.grad_span = Some((chain.out.grad_span.map_or(t, |s| s.0), t));
            let header = Header::unpack(b[2]).unwrap_or(Header::new(Kind::Error, 0, 0, 0, 0));
            chain.out.grads.push(Flit { header, payload: b[0] as u32, last: b[1] != 0 });
            chain.out.grad_times.push(c);
        }
        if let Some(b) = rsink.sample(dut) {
            chain.out.results.push((b[0] as u32, b[1] != 0));
        }
        if let Some(b) = msink.sample(dut) {
            let header = Header::unpack(b[2]).unwrap_or(Header::new(Kind::Error, 0, 0, 0, 0));
            chain.out.metrics.push(Flit { header, payload: b[0] as u32, last: b[1] != 0 });
        }
        sample_phase(dut, &mut chain.out.phases);
        dut.tick();
        if arm {
            dut.set(cv, 0);
            dut.eval();
            armed_for = Some(cur);
            chain.arms.push(c);
        }
        if dut.get(chains_p) != chains {
            chains = dut.get(chains_p);
            chain.fires.push(Fire {
                cycle: c,
                latched_cycle: port(dut, "chain_cycle"),
                latched_fmas: port(dut, "chain_fmas"),
                pe_fmas: fmas(dut),
                pending: port(dut, "chain_pending") != 0,
            });
            cur += 1;
            if let Some(next) = steps.get(cur + 1) {
                push_samples(&mut xsrc, next.samples);
            }
        }
        if dut.get(grad_p) != grad_latch {
            grad_latch = dut.get(grad_p);
            chain.advances.push(Advance {
                cycle: c,
                latched_grad: grad_latch,
                grad_words: chain.start_grad_words + chain.out.grads.len() as u64,
            });
        }
        assert!(
            dut.cycle() - start < limit,
            "the chained run did not drain within {limit} cycles (step {cur}, {} weight words left, {} gradient words out; PEs busy {:x?}, done {:x?}, chain armed {}, pending {})",
            wsrc.pending(),
            chain.out.grads.len(),
            dut.get_words(busy),
            dut.get_words(dut.port("stat_done")),
            port(dut, "chain_armed"),
            port(dut, "chain_pending")
        );
    }
    chain.out.cycles = dut.cycle() - start;
    chain.end_cycle = dut.get(cyc);
    let mut left = 1024;
    while dut.get_bool(ph_busy) {
        assert!(left > 0, "the phase probe stays busy after the array drained");
        left -= 1;
        let c = dut.get(cyc);
        dut.set(now, c);
        dut.eval();
        sample_phase(dut, &mut chain.out.phases);
        dut.tick();
    }
    for p in ["s_w_valid", "s_x_valid", "m_g_ready", "m_r_ready", "m_m_ready"] {
        let port = dut.port(p);
        dut.set(port, 0);
    }
    dut.eval();
    chain.out.weights_taken = weights - wsrc.pending();
    chain.end_fmas = fmas(dut);
    chain.total_fmas.1 = port(dut, "cnt_fma_total");
    chain
}

/// The phase record on `m_ph_*` this cycle, if one leaves.
fn sample_phase(dut: &Dut, out: &mut Vec<PhaseOut>) {
    if !dut.get_bool(dut.port("m_ph_valid")) {
        return;
    }
    let word4 = dut.get(dut.port("m_ph_word4")) as u32;
    out.push(PhaseOut {
        begin: dut.get(dut.port("m_ph_begin")),
        end: dut.get(dut.port("m_ph_end")),
        op: (word4 & 0xf) as u8,
        tag: ((word4 >> 4) & 0xfff) as u16,
        step: (word4 >> 16) as u16,
        pc: dut.get(dut.port("m_ph_pc")) as u16,
        pes: dut.get(dut.port("m_ph_pes")) as u16,
        fmas: dut.get(dut.port("m_ph_fmas")) as u32,
    });
}

/// Counter `index` of a flat counter bus of 32-bit counters.
pub fn counter(dut: &Dut, name: &str, index: usize) -> u64 {
    mesh::tb::counter(dut, name, index, 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The firmware's route tables (`ws_common::mesh::routes`) are exactly what the generic
    /// builders make, and they pass every check of [`Mesh::check`] (no loop, ordered merges
    /// with the right quotas, every PE reached), on square, flat, tall and single arrays.
    #[test]
    fn firmware_routes_equal_the_generic_builders() {
        for (rows, cols) in [(1, 1), (1, 5), (4, 1), (2, 2), (3, 5), (4, 4), (8, 8)] {
            let p = ArrayParams { rows, cols, pe: PeParams::default(), buf_depth: 4 };
            let (ours, reference) = (routes(&p), reference_routes(&p));
            assert_eq!(ours.writes(), reference.writes(), "{rows}x{cols}");
            ours.check().unwrap_or_else(|e| panic!("{rows}x{cols}: {e}"));
        }
    }
}
