//! A whole MLP training step on a `ws_mesh` array (docs/mesh-array.md "A whole step"): every
//! layer's forward, the loss stage, the metrics, and every layer's backward, from one program
//! per PE, checked word for word against `ws_common::golden::mesh::step::run`: the gradient
//! egress (every layer, last first, chunk by chunk, with its headers) and the metrics egress
//! (the step's loss sum and correct count). Shared by `hdl/tests/mesh_array.rs` and the bench.

use rand::rngs::StdRng;
use rand::RngExt;
use ws_common::flit::{Flit, Header, Kind};
use ws_common::golden::mesh::step::{self as golden, StepOutput};
use ws_common::golden::mesh::{Config, Layer, Mesh, Model, Reduce, Sram, StreamLayout};

use crate::dut::Dut;
use crate::mesh_pe::Instr;
use crate::mesh_top::scenario::{pe_counters, Pes, Values};
use crate::mesh_top::{self as top, Patterns, RunOut, Sample};

pub use ws_common::mesh::{StepMap, METRICS_ID};

/// One whole-step case.
#[derive(Debug, Clone)]
pub struct StepCase {
    /// Layer widths, input first (the last is the number of classes).
    pub dims: Vec<usize>,
    /// Slots per PE (B).
    pub b: usize,
    /// Samples (N ≤ PEs·B).
    pub n: usize,
    /// Rows per chunk of the streams.
    pub rows_per_chunk: usize,
    /// How the inputs are drawn.
    pub values: Values,
    /// How the parameters are drawn.
    pub params: Values,
    /// Backpressure on the edges.
    pub pats: Patterns,
}

/// One PE's program for a step (`ws_common::mesh::step_program`, what the firmware loads).
pub fn program(dims: &[usize], map: &StepMap, slots: usize, samples: usize, head: bool) -> Vec<Instr> {
    ws_common::mesh::step_program(dims, map, slots, samples, head).as_slice().to_vec()
}

/// What a step measured.
#[derive(Debug, Clone)]
pub struct StepMeasured {
    /// What left the array.
    pub out: RunOut,
    /// The golden step.
    pub golden: StepOutput,
    /// FMAs issued over all PEs.
    pub fmas: u64,
    /// The multiply-adds of the step: 3 × the MACs of the forward (forward, dx, dW/db),
    /// less layer 0's dx, which is never formed.
    pub ideal_macs: u64,
}

/// Checks a step's FMA phase records: one per instruction that issues FMAs, in the order the
/// instructions finish, each with its opcode, layer tag and step, a span inside the run, the
/// PEs that took part, and (where `want` knows it from the opcode, K and M) exactly the FMAs
/// the instruction issues; together they count every FMA the PEs counted. `prog` and `tags`
/// sit at instruction `base` on in the program store.
#[allow(clippy::too_many_arguments)]
fn check_phases(
    ctx: &str,
    out: &RunOut,
    base: usize,
    prog: &[Instr],
    tags: &[u16],
    step: u16,
    fmas: u64,
    want: impl Fn(u8, usize, usize) -> Option<u64>,
) {
    let mut seen = std::collections::BTreeSet::new();
    for ph in &out.phases {
        let pc = usize::from(ph.pc);
        let w = pc
            .checked_sub(base)
            .and_then(|i| prog.get(i))
            .map(|i| i.words())
            .unwrap_or_else(|| panic!("{ctx}: a phase record of instruction {pc}"));
        assert!(seen.insert(pc), "{ctx}: instruction {pc} recorded twice");
        let (op, k, m) = ((w[0] & 0xf) as u8, (w[1] & 0xffff) as usize, (w[1] >> 16) as usize);
        assert_eq!(
            (ph.op, ph.tag, ph.step),
            (op, tags[pc - base], step),
            "{ctx}: instruction {pc}'s op, tag, step"
        );
        assert!(
            out.start_cycle <= ph.begin && ph.begin <= ph.end && ph.end <= out.start_cycle + out.cycles,
            "{ctx}: instruction {pc}'s span {}..{} outside the run",
            ph.begin,
            ph.end
        );
        assert!(ph.pes >= 1 && ph.fmas >= 1, "{ctx}: instruction {pc} recorded with no FMA: {ph:?}");
        if let Some(n) = want(op, k, m) {
            assert_eq!(u64::from(ph.fmas), n, "{ctx}: instruction {pc} (op {op}, K {k}, M {m}): FMAs");
        }
    }
    // Every instruction with FMAs is there (MASK has none); the records add up to the counters.
    for (pc, i) in prog.iter().enumerate().map(|(n, i)| (base + n, i)) {
        let op = (i.words()[0] & 0xf) as u8;
        assert_eq!(seen.contains(&pc), op != 4, "{ctx}: instruction {pc} (op {op}) recorded");
    }
    let total: u64 = out.phases.iter().map(|p| u64::from(p.fmas)).sum();
    assert_eq!(total, fmas, "{ctx}: the phase records' FMAs against the PEs' counters");
}

/// The golden configuration of a case (the golden SRAM budget is not the RTL's: the PE
/// needs less, docs/mesh-pe.md, so the golden check gets room enough).
pub fn config<'a>(dims: &'a [usize], side: usize, b: usize, rows_per_chunk: usize) -> Config<'a> {
    Config {
        mesh: Mesh::new(side, side, b),
        model: Model::new(dims),
        sram: Sram { words: 1 << 24, program_words: 0 },
        stream: StreamLayout::new(rows_per_chunk),
        order: Reduce::Snake,
    }
}

/// FMAs the loss stage issues for one sample's logits `z` (ws_mesh_loss.v): d_y and the final
/// subtraction (2); per class x = z − m, the sum and dz (3), and 13 more for an exp that meets
/// no special value; 11 for ln(S) unless S is NaN.
pub fn loss_fmas(z: &[u32]) -> u64 {
    use ws_common::golden::fp::{add, is_nan};
    use ws_common::golden::mesh::funcs::{EXP_X_MAX, EXP_X_MIN, SIGN};
    use ws_common::golden::mesh::loss::fmax;
    let m = z.iter().skip(1).fold(z[0], |m, v| fmax(m, *v));
    let mut sum_nan = false;
    let mut n = 2;
    for v in z {
        let x = add(*v, m ^ SIGN);
        let f = f32::from_bits(x);
        let special = is_nan(x) || f > f32::from_bits(EXP_X_MAX) || f < f32::from_bits(EXP_X_MIN);
        sum_nan |= is_nan(x);
        n += if special { 3 } else { 16 };
    }
    n + if sum_nan { 0 } else { 11 }
}

/// One step of a case, drawn and computed by the golden model, ready to run.
struct Prepared {
    ctx: String,
    golden: StepOutput,
    cfg_dims: Vec<usize>,
    rows_per_chunk: usize,
    b: usize,
    /// Sample words (PE, address, value) for the step's map.
    samples: Vec<Sample>,
    /// Each PE's program.
    programs: Vec<Vec<Instr>>,
    tags: Vec<u16>,
    stream: Vec<Flit>,
    step: u16,
    /// Per PE, its samples' range.
    ranges: Vec<std::ops::Range<usize>>,
    slots: Vec<usize>,
    n: usize,
}

/// Draws a step of `c` whose samples and programs use `map`, numbered `step` (else a random
/// step).
fn prepare(rng: &mut StdRng, side: usize, c: &StepCase, map: &StepMap, step: Option<u16>) -> Prepared {
    let ctx = format!("{side}x{side} step {:?} B={} N={}", c.dims, c.b, c.n);
    let dims = &c.dims;
    let layers = dims.len() - 1;
    let cfg = config(dims, side, c.b, c.rows_per_chunk);
    let model = cfg.model;
    let params = super::scenario::draw(rng, model.param_words(), c.params);
    let x = super::scenario::draw(rng, c.n * dims[0], c.values);
    let classes = dims[layers] as u32;
    let labels: Vec<u32> = (0..c.n).map(|_| rng.random_range(0..classes)).collect();
    let golden = golden::run(&cfg, &params, &x, &labels).expect("a valid golden step");

    // The batch: x and the label of every slot, through the sample ingress.
    let pes = Pes::new(side, c.b, c.n);
    let at = &pes.at;
    let mut samples = Vec::new();
    for (r, (_, range)) in at.iter().enumerate() {
        for (j, s) in range.clone().enumerate() {
            for k in 0..dims[0] {
                samples.push((r, map.x + (j * dims[0] + k) as u32, x[s * dims[0] + k]));
            }
            samples.push((r, map.labels + j as u32, labels[s]));
        }
    }
    let programs = at
        .iter()
        .enumerate()
        .map(|(r, (pos, range))| program(dims, map, pes.slots(r), range.len(), *pos == 0))
        .collect();
    let tags = ws_common::mesh::step_program(dims, map, c.b, c.b, true).tags().to_vec();

    // The weight ingress: layers 0 … L−1 forward, then L−1 … 1 again for dx.
    let drawn = rng.random::<u16>();
    let step = step.unwrap_or(drawn);
    let layer = |l: usize| Layer::new(dims[l], dims[l + 1]);
    let mut stream = golden::weight_flits(&cfg, &params, step).expect("weight stream");
    for l in (1..layers).rev() {
        let w = &params[model.param_offset(l)..model.param_offset(l + 1)];
        stream.extend(cfg.stream.flits(Kind::Weight, l, step, layer(l), w).expect("backward stream"));
    }
    Prepared {
        ctx,
        golden,
        cfg_dims: dims.clone(),
        rows_per_chunk: c.rows_per_chunk,
        b: c.b,
        samples,
        programs,
        tags,
        stream,
        step,
        ranges: at.iter().map(|(_, r)| r.clone()).collect(),
        slots: (0..at.len()).map(|r| pes.slots(r)).collect(),
        n: c.n,
    }
}

/// Loads every PE's program of `p` from instruction `base` on.
fn load_programs(dut: &mut Dut, p: &Prepared, base: usize) {
    for (r, prog) in p.programs.iter().enumerate() {
        top::load_program_at(dut, r as u8, base, prog);
    }
}

/// Runs `p` (its programs loaded at `base`) with `next` streaming into the sample ports
/// meanwhile, and checks everything that left the array against the golden step.
fn execute(
    dut: &mut Dut,
    side: usize,
    p: &Prepared,
    base: usize,
    pats: Patterns,
    next: &[Sample],
) -> StepMeasured {
    let ctx = &p.ctx;
    let dims = &p.cfg_dims;
    let layers = dims.len() - 1;
    let cfg = config(dims, side, p.b, p.rows_per_chunk);
    let golden = p.golden.clone();
    let step = p.step;
    // The egress table: the metrics, then every layer's gradient, last layer first.
    let segs = ws_common::mesh::StepSegments::new(dims, cfg.stream);
    top::configure_step(dut, step, segs.as_slice());
    let len = p.programs[0].len() as u32;

    let routers = p.programs.len();
    let before: Vec<u64> = (0..routers).map(|r| pe_counters(dut, r)[0]).collect();
    let macs: u64 = (0..layers).map(|l| (dims[l] * dims[l + 1]) as u64).sum();
    let limit =
        40 * macs * p.b as u64 + 20_000 * p.b as u64 * dims[layers] as u64 + 100_000 + 20 * next.len() as u64;
    let out = top::run_from(dut, base as u32, len, &p.stream, pats, limit, next);

    assert_eq!(out.weights_taken, p.stream.len(), "{ctx}: weight words taken");
    check_clean(dut, ctx, routers);
    let pe_fmas: Vec<u64> = (0..routers).map(|r| pe_counters(dut, r)[0] - before[r]).collect();
    let fmas = check_outputs(p, side, base, &out, &pe_fmas);
    StepMeasured { out, golden, fmas, ideal_macs: (p.n as u64) * (2 * macs + dx_macs_of(dims)) }
}

/// The MACs of dx: every layer's but layer 0's, whose dx is never formed.
fn dx_macs_of(dims: &[usize]) -> u64 {
    (1..dims.len() - 1).map(|l| (dims[l] * dims[l + 1]) as u64).sum()
}

/// Nothing refused, every PE done, nothing beyond the egress table, misrouted or dropped.
fn check_clean(dut: &Dut, ctx: &str, routers: usize) {
    let stat = |name: &str| dut.get(dut.port(name));
    assert_eq!(stat("stat_err"), 0, "{ctx}: a PE refused its program (codes {:#x})", stat("stat_err_code"));
    assert_eq!(stat("stat_done"), u64::MAX >> (64 - routers), "{ctx}: PEs done");
    assert_eq!(stat("stat_grad_overrun"), 0, "{ctx}: gradient words beyond the table");
    assert!(dut.get_words(dut.port("cnt_misroute")).iter().all(|w| *w == 0), "{ctx}: misrouted flits");
    assert!(dut.get_words(dut.port("cnt_edge_drop")).iter().all(|w| *w == 0), "{ctx}: dropped flits");
}

/// Checks what step `p` (its programs at `base`) left in `out` against its golden step: the
/// metrics and gradient flits with their headers, no results, each PE's FMA issues
/// (`pe_fmas`, by router index) and the FMA phase records. Returns the step's FMAs.
fn check_outputs(p: &Prepared, side: usize, base: usize, out: &RunOut, pe_fmas: &[u64]) -> u64 {
    let ctx = &p.ctx;
    let dims = &p.cfg_dims;
    let layers = dims.len() - 1;
    let cfg = config(dims, side, p.b, p.rows_per_chunk);
    let golden = &p.golden;
    let step = p.step;
    let macs: u64 = (0..layers).map(|l| (dims[l] * dims[l + 1]) as u64).sum();

    // Metrics: the loss sum and the correct count (a binary32 sum of 1.0 flags, exact).
    let m = golden.metrics;
    let want_metrics: Vec<Flit> = [m.loss, (m.correct as f32).to_bits()]
        .iter()
        .enumerate()
        .map(|(i, v)| Flit {
            header: Header::new(Kind::Gradient, METRICS_ID, step, 0, i as u16),
            payload: *v,
            last: i == 1,
        })
        .collect();
    assert_eq!(out.metrics, want_metrics, "{ctx}: metrics (loss sum, correct count)");

    // Gradients: every layer, last first, word for word with headers.
    let want = golden.gradient_flits(&cfg, step).expect("gradient stream");
    assert_eq!(out.grads.len(), want.len(), "{ctx}: gradient words");
    for (j, (got, w)) in out.grads.iter().zip(&want).enumerate() {
        assert!(
            got == w,
            "{ctx}: gradient word {j} (layer {}, chunk {}, index {}): got {:#010x}, golden {:#010x}",
            w.header.layer,
            w.header.chunk,
            w.header.index,
            got.payload,
            w.payload
        );
    }
    assert!(out.results.is_empty(), "{ctx}: results in a step without DUMP");

    // FMAs: per slot the MACs of the forward, dx (not for layer 0) and the loss stage
    // (`loss_fmas`, from the golden logits), and per sample the two reductions (metrics: 2
    // words; each layer: M·(K+1)). An empty PE's junk slot runs a loss stage on junk logits,
    // whose specials are not predicted: only its bounds are checked.
    let dx_macs = dx_macs_of(dims);
    let grad_words: u64 = (0..layers).map(|l| (dims[l + 1] * (dims[l] + 1)) as u64).sum();
    let logits = &golden.outputs[layers - 1];
    let cls = dims[layers];
    let mut fmas = 0;
    for (r, range) in p.ranges.iter().enumerate() {
        let got = pe_fmas[r];
        fmas += got;
        if range.is_empty() {
            let base = macs + dx_macs;
            assert!(
                (base..=base + 16 * cls as u64 + 13).contains(&got),
                "{ctx}: empty PE {r}: FMA issues {got}"
            );
            continue;
        }
        let loss: u64 = range.clone().map(|s| loss_fmas(&logits[s * cls..(s + 1) * cls])).sum();
        let want = range.len() as u64 * (macs + dx_macs + 2 + grad_words) + loss;
        assert_eq!(got, want, "{ctx}: PE {r}: FMA issues");
    }
    let slots: usize = p.slots.iter().sum();
    check_phases(ctx, out, base, &p.programs[0], &p.tags, step, fmas, |op, k, m| {
        // FWD and DX run every slot (an empty PE one junk slot), GRAD every sample.
        match op {
            1 | 3 => Some((slots * k * m) as u64),
            5 => Some((p.n * m * (k + 1)) as u64),
            _ => None,
        }
    });
    fmas
}

/// Runs one whole step on a `side` × `side` array and checks the gradient and metrics egress
/// word for word, the FMA count of every PE and that nothing was refused, misrouted or lost.
///
/// # Panics
/// On any difference from the golden step.
pub fn run_step(dut: &mut Dut, rng: &mut StdRng, side: usize, c: &StepCase) -> StepMeasured {
    let p = prepare(rng, side, c, &StepMap::new(&c.dims, c.b), None);
    top::load_samples(dut, &p.samples, c.pats.weights);
    load_programs(dut, &p, 0);
    top::configure_tags(dut, &p.tags);
    execute(dut, side, &p, 0, c.pats, &[])
}

/// Two steps of `c` back to back on a double-buffered map, the way a run of steps goes on the
/// board: the second step's samples stream into the other buffer while the first runs
/// (through the PEs' sample ports, under the case's backpressure), both programs are loaded
/// before the first starts (the second from instruction `len` on), and each step is checked
/// against its golden step as [`run_step`] checks one.
///
/// # Panics
/// On any difference from the golden steps.
pub fn run_overlapped(dut: &mut Dut, rng: &mut StdRng, side: usize, c: &StepCase) -> [StepMeasured; 2] {
    let map = StepMap::double(&c.dims, c.b);
    let a = prepare(rng, side, c, &map, None);
    let b = prepare(rng, side, c, &map.flipped(), None);
    let len = a.programs[0].len();
    top::load_samples(dut, &a.samples, c.pats.weights);
    load_programs(dut, &b, len);
    load_programs(dut, &a, 0);
    // The tags of both: the second's after the first's.
    let tags: Vec<u16> = a.tags.iter().chain(&b.tags).copied().collect();
    top::configure_tags(dut, &tags);
    let first = execute(dut, side, &a, 0, c.pats, &b.samples);
    let second = execute(dut, side, &b, len, c.pats, &[]);
    [first, second]
}

/// What a chained run of whole steps measured ([`run_chained`]).
#[derive(Debug, Clone)]
pub struct ChainMeasured {
    /// Each step, checked as [`run_step`] checks one (its `out` holds that step's share).
    pub steps: Vec<StepMeasured>,
    /// The run as the driver saw it: fires, advances, every word.
    pub chain: top::ChainOut,
    /// Each step's weight stream's first word in the run's weight words.
    pub stream_at: Vec<usize>,
}

/// `n` steps of `c` back to back on a double-buffered map, chained by the array itself
/// (docs/mesh-array.md "Chained steps"): step k runs the program over buffer k mod 2 (at
/// instruction 0 or `len`, both loaded before the first starts), step k + 1's samples stream
/// into the other buffer while step k runs, and CHAIN is armed during step k for step k + 1.
/// The steps are numbered `first`, `first + 1`, ... (wrapping), from one STEP write: the array
/// advances the gradient headers' step itself. Each step is checked against its golden step as
/// [`run_step`] checks one, and the chain's marks against what the steps did: one fire per
/// step but the last, each fire's cycle and FMA total latched in its cycle (the FMAs between two
/// fires are the step's), and one advance per fire latching the gradient words of the steps
/// up to the one that ended.
///
/// # Panics
/// On any difference from the golden steps or the expected marks.
pub fn run_chained(
    dut: &mut Dut,
    rng: &mut StdRng,
    side: usize,
    c: &StepCase,
    n: usize,
    first: u16,
) -> ChainMeasured {
    let map = StepMap::double(&c.dims, c.b);
    let prepared: Vec<Prepared> = (0..n)
        .map(|k| {
            let m = if k.is_multiple_of(2) { map } else { map.flipped() };
            prepare(rng, side, c, &m, Some(first.wrapping_add(k as u16)))
        })
        .collect();
    let len = prepared[0].programs[0].len();
    for (k, p) in prepared.iter().enumerate().skip(2) {
        assert_eq!(p.programs, prepared[k % 2].programs, "step {k} runs the program of step {}", k % 2);
    }
    top::load_samples(dut, &prepared[0].samples, c.pats.weights);
    if let Some(b) = prepared.get(1) {
        load_programs(dut, b, len);
    }
    load_programs(dut, &prepared[0], 0);
    let tags: Vec<u16> = prepared.iter().take(2).flat_map(|p| p.tags.iter().copied()).collect();
    top::configure_tags(dut, &tags);
    // One table and one STEP write for the whole run: every step has the same shape.
    let cfg = config(&c.dims, side, c.b, c.rows_per_chunk);
    let segs = ws_common::mesh::StepSegments::new(&c.dims, cfg.stream);
    top::configure_step(dut, first, segs.as_slice());

    let base = |k: usize| if k.is_multiple_of(2) { 0 } else { len };
    let steps: Vec<top::ChainStep<'_>> = prepared
        .iter()
        .enumerate()
        .map(|(k, p)| top::ChainStep {
            base: base(k) as u8,
            len: len as u16,
            weights: &p.stream,
            samples: if k == 0 { &[] } else { &p.samples },
        })
        .collect();
    let routers = prepared[0].programs.len();
    let dims = &c.dims;
    let layers = dims.len() - 1;
    let macs: u64 = (0..layers).map(|l| (dims[l] * dims[l + 1]) as u64).sum();
    let limit = n as u64 * (40 * macs * c.b as u64 + 20_000 * c.b as u64 * dims[layers] as u64 + 100_000)
        + 20 * prepared.iter().map(|p| p.samples.len() as u64).sum::<u64>();
    let chain = top::run_chain(dut, routers, &steps, c.pats, limit);
    let ctx = format!("{side}x{side} chained {:?} B={} N={}", c.dims, c.b, c.n);
    let all = &chain.out;
    let stream: usize = prepared.iter().map(|p| p.stream.len()).sum();
    assert_eq!(all.weights_taken, stream, "{ctx}: weight words taken");
    check_clean(dut, &ctx, routers);
    assert_eq!(chain.fires.len(), n - 1, "{ctx}: one fire per step but the last");
    assert_eq!(dut.get(dut.port("chain_count")), chain.start_chains + n as u64 - 1, "{ctx}: the chain count");
    assert_eq!(dut.get(dut.port("chain_armed")), 0, "{ctx}: disarmed after the last fire");
    assert_eq!(dut.get(dut.port("chain_pending")), 0, "{ctx}: no advance left pending");
    assert_eq!(chain.advances.len(), n - 1, "{ctx}: one advance per fire");
    assert_eq!(chain.arms.len(), n - 1, "{ctx}: one CHAIN write per step but the last");

    // Split what left by step: the gradient and metrics words in step order (the headers
    // are checked, not used to split), the phase records by the step they carry.
    let (mut g_at, mut m_at, mut w_at) = (0usize, 0usize, 0usize);
    let mut measured = Vec::new();
    let mut stream_at = Vec::new();
    let mut fmas_before = chain.start_fmas.clone();
    let mut total_before = chain.total_fmas.0;
    let mut grad_total = chain.start_grad_words;
    let mut start_cycle = all.start_cycle;
    let mut phases_seen = 0;
    for (k, p) in prepared.iter().enumerate() {
        let ctx = format!("{ctx}, step {k} ({:#06x})", p.step);
        let g_words = p.golden.gradient_flits(&cfg, p.step).expect("gradient stream").len();
        let end_cycle = chain.fires.get(k).map_or(chain.end_cycle, |f| f.cycle);
        let phases: Vec<top::PhaseOut> = all.phases.iter().filter(|ph| ph.step == p.step).copied().collect();
        phases_seen += phases.len();
        let g_end = (g_at + g_words).min(all.grads.len());
        let m_end = (m_at + 2).min(all.metrics.len());
        let out = RunOut {
            grads: all.grads[g_at..g_end].to_vec(),
            grad_times: all.grad_times[g_at..g_end].to_vec(),
            metrics: all.metrics[m_at..m_end].to_vec(),
            weights_taken: p.stream.len(),
            weight_times: all.weight_times[w_at..w_at + p.stream.len()].to_vec(),
            start_cycle,
            cycles: end_cycle - start_cycle,
            phases,
            ..RunOut::default()
        };
        stream_at.push(w_at);
        (g_at, m_at, w_at) = (g_end, m_end, w_at + p.stream.len());
        let after = chain.fires.get(k).map_or(&chain.end_fmas, |f| &f.pe_fmas);
        let pe_fmas: Vec<u64> = after.iter().zip(&fmas_before).map(|(a, b)| a - b).collect();
        let fmas = check_outputs(p, side, base(k), &out, &pe_fmas);
        let total_after = chain.fires.get(k).map_or(chain.total_fmas.1, |f| f.latched_fmas);
        assert_eq!(total_after - total_before, fmas, "{ctx}: FMAs between the marks");
        grad_total += g_words as u64;
        if let Some(f) = chain.fires.get(k) {
            assert_eq!(f.latched_cycle, f.cycle, "{ctx}: the fire's latched cycle");
            assert!(f.cycle > start_cycle, "{ctx}: fires in order");
            assert!(
                chain.arms[k] >= start_cycle && chain.arms[k] < f.cycle,
                "{ctx}: CHAIN armed during the step (at {}, the step ran {start_cycle}..{})",
                chain.arms[k],
                f.cycle
            );
            let a = chain.advances[k];
            assert_eq!(a.latched_grad, grad_total, "{ctx}: the advance's gradient words");
            assert_eq!(a.grad_words, grad_total, "{ctx}: the advance came with the step's last word");
            assert!(a.cycle >= f.cycle, "{ctx}: the advance after its fire");
            start_cycle = f.cycle;
        }
        fmas_before = after.clone();
        total_before = total_after;
        measured.push(StepMeasured {
            out,
            golden: p.golden.clone(),
            fmas,
            ideal_macs: (p.n as u64) * (2 * macs + dx_macs_of(dims)),
        });
    }
    assert_eq!(g_at, all.grads.len(), "{ctx}: gradient words past the last step");
    assert_eq!(m_at, all.metrics.len(), "{ctx}: metrics words past the last step");
    assert_eq!(phases_seen, all.phases.len(), "{ctx}: phase records of no step");
    assert!(all.results.is_empty(), "{ctx}: results in steps without DUMP");
    assert_eq!(dut.get(dut.port("cnt_grad_words")), grad_total, "{ctx}: gradient words handed out");
    let pe_total: u64 = chain.end_fmas.iter().sum();
    assert_eq!(
        chain.total_fmas.1 % (1 << 32),
        pe_total % (1 << 32),
        "{ctx}: the FMA total against the PEs' counters"
    );
    ChainMeasured { steps: measured, chain, stream_at }
}
