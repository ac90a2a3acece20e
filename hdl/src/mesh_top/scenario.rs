//! The array tests' scenario (`hdl/tests/mesh_array.rs`), shared with the bench rows
//! ([`crate::bench::mesh`]): one dense layer on a `ws_mesh` array, forward or forward plus
//! backward, with the batch spread over the PEs, the weights streamed (twice for a backward),
//! and every word, gradient flit, counter and timestamp checked against
//! `ws_common::golden::mesh::dense`.

use rand::rngs::StdRng;
use rand::RngExt;
use ws_common::flit::{Flit, Kind};
use ws_common::golden::mesh::dense;
use ws_common::golden::mesh::{Layer, Mesh, Reduce, StreamLayout};

use crate::dut::{BlockSpec, Dut, Pattern};
use crate::mesh::Geometry;
use crate::mesh_pe::{Instr, PeParams};
use crate::mesh_top::{self as top, ArrayParams, Patterns, RunOut};
use crate::swarm::tb;

/// The PE parameters of the array tests: FMA_LAT 3, MAX_B 4, SRAM_WORDS 2048, PROG_DEPTH 16.
pub const TEST_PE: PeParams = PeParams { sram_words: 2048, fma_lat: 3, max_b: 4, prog_depth: 16 };

/// A `side` × `side` array of `pe` PEs with 4-flit router buffers.
pub fn params(side: usize, pe: PeParams) -> ArrayParams {
    ArrayParams { rows: side, cols: side, pe, buf_depth: 4 }
}

/// The block spec of a `side` × `side` array of [`TEST_PE`]s.
///
/// # Panics
/// When FPnew's sources are not installed.
pub fn spec(side: usize) -> BlockSpec {
    top::array_spec(&params(side, TEST_PE)).expect("FPnew sources (run `cargo xtask setup`)")
}

/// How the test values are drawn.
#[derive(Debug, Clone, Copy)]
pub enum Values {
    /// SwarmX's operand mix (±0, ±inf, NaN, subnormals, range ends, extreme exponents).
    Edges,
    /// Uniform in [-2, 2], with an edge operand 1 time in `n`.
    Mild(u32),
    /// Uniform in [-a, a] (a trained network's scale: no edge values).
    Uniform(f32),
}

/// One value drawn as `v` says.
pub fn value(rng: &mut StdRng, v: Values) -> u32 {
    match v {
        Values::Edges => tb::operand(rng),
        Values::Mild(n) => {
            if rng.random_range(0..n) == 0 {
                tb::EDGE_OPERANDS[rng.random_range(0..tb::EDGE_OPERANDS.len())]
            } else {
                rng.random_range(-2.0f32..2.0).to_bits()
            }
        }
        Values::Uniform(a) => rng.random_range(-a..a).to_bits(),
    }
}

/// `n` values drawn as `v` says.
pub fn draw(rng: &mut StdRng, n: usize, v: Values) -> Vec<u32> {
    (0..n).map(|_| value(rng, v)).collect()
}

/// One dense-layer case on the array.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// Inputs (K).
    pub k: usize,
    /// Outputs (M).
    pub m: usize,
    /// Slots per PE (B).
    pub b: usize,
    /// Samples in the batch (N ≤ PEs·B).
    pub n: usize,
    /// ReLU on the outputs.
    pub relu: bool,
    /// Rows per chunk of the streams.
    pub rows_per_chunk: usize,
    /// Forward and backward (else the forward only).
    pub backward: bool,
    /// How the weights, inputs and output gradients are drawn.
    pub values: Values,
    /// Backpressure on the weight ingress, the gradient and the results egress.
    pub pats: Patterns,
}

/// Mixed random valid/ready on every port.
pub const MIXED: Patterns =
    Patterns { weights: Pattern::Mixed, grads: Pattern::Mixed, results: Pattern::Mixed };
/// Every port at full rate.
pub const FULL: Patterns =
    Patterns { weights: Pattern::Always, grads: Pattern::Always, results: Pattern::Always };

/// Where a PE keeps things (word addresses), for B slots of a K→M layer: x (B×K), y and then
/// dz in place (B×M), dy (B×M), dx (B×K).
#[derive(Debug, Clone, Copy)]
pub struct Map {
    /// x, B×K.
    pub x: u32,
    /// y, then dz in place, B×M.
    pub y: u32,
    /// dy, B×M.
    pub dy: u32,
    /// dx, B×K.
    pub dx: u32,
}

impl Map {
    /// The map of B slots of a K→M layer.
    pub fn new(b: usize, k: usize, m: usize) -> Self {
        let (bk, bm) = ((b * k) as u32, (b * m) as u32);
        Map { x: 0, y: bk, dy: bk + bm, dx: bk + 2 * bm }
    }
}

/// Per PE (router index): its snake position and its samples.
pub(crate) struct Pes {
    pub(crate) geometry: Geometry,
    pub(crate) mesh: Mesh,
    /// (snake position, samples) by router index.
    pub(crate) at: Vec<(usize, std::ops::Range<usize>)>,
}

impl Pes {
    pub(crate) fn new(side: usize, b: usize, n: usize) -> Self {
        let geometry = Geometry::new(side, side);
        let mesh = Mesh::new(side, side, b);
        let mut at = vec![(0, 0..0); geometry.routers()];
        for pos in 0..geometry.routers() {
            at[top::snake_router(geometry, pos)] = (pos, mesh.samples_at(pos, n));
        }
        Pes { geometry, mesh, at }
    }

    /// Slots a PE runs its per-sample instructions for: its samples, or one junk slot on an
    /// empty PE, which must still take every weight word of the multicast and send one result
    /// packet per round.
    pub(crate) fn slots(&self, r: usize) -> usize {
        self.at[r].1.len().max(1)
    }
}

/// The result packets of one round, in router-index order: PE r sends `words(r)` words, the
/// last with `last`. Returns each PE's words.
fn split_round<'a>(
    ctx: &str,
    results: &'a [(u32, bool)],
    at: &mut usize,
    routers: usize,
    words: impl Fn(usize) -> usize,
) -> Vec<&'a [(u32, bool)]> {
    let mut out = Vec::new();
    for r in 0..routers {
        let w = words(r);
        assert!(*at + w <= results.len(), "{ctx}: results end at PE {r} ({} words)", results.len());
        let packet = &results[*at..*at + w];
        for (j, (_, last)) in packet.iter().enumerate() {
            assert_eq!(*last, j + 1 == w, "{ctx}: PE {r} result word {j}: last");
        }
        out.push(packet);
        *at += w;
    }
    out
}

/// Compares one PE's words of a sample-major buffer with the golden buffer.
fn check_words(
    ctx: &str,
    what: &str,
    got: &[(u32, bool)],
    want: &[u32],
    samples: std::ops::Range<usize>,
    width: usize,
) {
    for (j, s) in samples.enumerate() {
        for c in 0..width {
            let (g, w) = (got[j * width + c].0, want[s * width + c]);
            assert!(g == w, "{ctx}: {what} of sample {s} word {c}: got {g:#010x}, golden {w:#010x}");
        }
    }
}

/// What a case measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// What left the array, with handshake times.
    pub out: RunOut,
    /// FMAs issued over all PEs.
    pub fmas: u64,
    /// The busiest PE's FWD cycles.
    pub fwd_cycles: u64,
    /// The busiest PE's DX cycles.
    pub dx_cycles: u64,
    /// The busiest PE's GRAD cycles.
    pub grad_cycles: u64,
    /// Weight words the array took.
    pub weight_words: u64,
    /// The layer's phase timestamps.
    pub phases: top::Phases,
    /// Flits each router sent on its N, E, S, W outputs in the reduction's color during the
    /// run, summed over the routers.
    pub reduce_link_flits: u64,
    /// The number of N/E/S/W router outputs that carried any of them.
    pub reduce_links: u64,
}

/// Loads the batch, runs the case's program on every PE, and checks every word that leaves
/// against the golden model.
///
/// # Panics
/// On any word, header, counter or timestamp that differs from the golden model.
pub fn run_case(dut: &mut Dut, rng: &mut StdRng, side: usize, c: &Case) -> Measured {
    let ctx = format!("{side}x{side} {c:?}");
    let layer = Layer::new(c.k, c.m);
    let words = layer.words().unwrap();
    let w = draw(rng, words, c.values);
    let x = draw(rng, c.n * c.k, c.values);
    let dy = draw(rng, c.n * c.m, c.values);
    let mut y = vec![0u32; c.n * c.m];
    dense::forward(layer, &w, &x, c.relu, &mut y).unwrap();
    let mut dz = dy.clone();
    if c.relu {
        dense::relu_backward(&y, &mut dz).unwrap();
    }
    let mut dx = vec![0u32; c.n * c.k];
    dense::input_grad(layer, &w, &dz, &mut dx).unwrap();
    let pes = Pes::new(side, c.b, c.n);
    let mut grad = vec![0u32; words];
    dense::weight_grad(&pes.mesh, Reduce::Snake, layer, &x, &dz, &mut grad).unwrap();

    // Samples in through the sample ingress: x and dy of every slot.
    let map = Map::new(c.b, c.k, c.m);
    let mut samples = Vec::new();
    for (r, (_, range)) in pes.at.iter().enumerate() {
        for (j, s) in range.clone().enumerate() {
            for kk in 0..c.k {
                samples.push((r, map.x + (j * c.k + kk) as u32, x[s * c.k + kk]));
            }
            if c.backward {
                for i in 0..c.m {
                    samples.push((r, map.dy + (j * c.m + i) as u32, dy[s * c.m + i]));
                }
            }
        }
    }
    top::load_samples(dut, &samples, c.pats.weights);

    // One program per PE.
    let (k, m) = (c.k as u32, c.m as u32);
    for (r, (pos, range)) in pes.at.iter().enumerate() {
        let b = pes.slots(r) as u32;
        let mut prog = vec![Instr::Fwd { relu: c.relu, b, k, m, src: map.x, dst: map.y }];
        if c.backward {
            // dz where y was (MASK), or dy itself for a layer without ReLU.
            let dz_at = if c.relu { map.y } else { map.dy };
            if c.relu {
                prog.push(Instr::Mask { src: map.dy, dst: map.y, count: b * m });
            }
            prog.push(Instr::Dx { b, k, m, src: dz_at, dst: map.dx });
            let n = range.len() as u32;
            prog.push(Instr::Grad { head: *pos == 0, b: n, k, m, x: map.x, dz: dz_at });
            prog.push(Instr::Dump { src: dz_at, count: b * m });
            prog.push(Instr::Dump { src: map.dx, count: b * k });
        } else {
            prog.push(Instr::Dump { src: map.y, count: b * m });
        }
        top::load_program(dut, r as u8, &prog);
    }
    let len = if !c.backward {
        2
    } else if c.relu {
        6
    } else {
        5
    };
    let passes = if c.backward { 2 } else { 1 };
    let layout = StreamLayout::new(c.rows_per_chunk);
    // A layer id with timestamps and any step: the headers must carry them.
    let (id, step) = (rng.random_range(0..top::TS_LAYERS), rng.random::<u16>());
    let pass: Vec<Flit> = layout.flits(Kind::Weight, id, step, layer, &w).unwrap().collect();
    top::configure_step(dut, step, &[top::Segment::new(id, layer, layout)]);
    let stream: Vec<Flit> = (0..passes).flat_map(|_| pass.iter().copied()).collect();
    let routers = pes.geometry.routers();
    let limit = 200 * (stream.len() * c.b) as u64 + 200 * (words * routers) as u64 + 20_000;
    let before: Vec<[u64; 4]> = (0..routers).map(|r| pe_counters(dut, r)).collect();
    let links_before = reduce_link_counters(dut, routers);
    let out = top::run(dut, len, &stream, c.pats, limit);
    let links: Vec<u64> =
        reduce_link_counters(dut, routers).iter().zip(&links_before).map(|(a, b)| a - b).collect();

    assert_eq!(out.weights_taken, stream.len(), "{ctx}: weight words taken");
    let stat = |name: &str| dut.get(dut.port(name));
    assert_eq!(stat("stat_err"), 0, "{ctx}: a PE refused its program (codes {:#x})", stat("stat_err_code"));
    assert_eq!(stat("stat_done"), u64::MAX >> (64 - routers), "{ctx}: PEs done");
    let misroutes = dut.get_words(dut.port("cnt_misroute"));
    assert!(misroutes.iter().all(|w| *w == 0), "{ctx}: misrouted flits");
    let drops = dut.get_words(dut.port("cnt_edge_drop"));
    assert!(drops.iter().all(|w| *w == 0), "{ctx}: flits of a wrong color at an egress");
    let weight_words = out.weights_taken as u64;
    let mut m_out = Measured {
        out,
        fmas: 0,
        fwd_cycles: 0,
        dx_cycles: 0,
        grad_cycles: 0,
        weight_words,
        phases: top::phases(dut, id),
        reduce_link_flits: links.iter().sum(),
        reduce_links: links.iter().filter(|&&n| n > 0).count() as u64,
    };
    for (r, (_, range)) in pes.at.iter().enumerate() {
        let now = pe_counters(dut, r);
        let d: Vec<u64> = (0..4).map(|i| now[i] - before[r][i]).collect();
        let b = pes.slots(r);
        let want_fma = (b * c.k * c.m * passes) + if c.backward { range.len() * words } else { 0 };
        assert_eq!(d[0], want_fma as u64, "{ctx}: PE {r}: FMA issues");
        m_out.fmas += d[0];
        m_out.fwd_cycles = m_out.fwd_cycles.max(d[1]);
        m_out.dx_cycles = m_out.dx_cycles.max(d[2]);
        m_out.grad_cycles = m_out.grad_cycles.max(d[3]);
    }

    // The results egress: one packet per PE per DUMP, in router-index order.
    let out = &m_out.out;
    let mut at = 0;
    if c.backward {
        let dzs = split_round(&ctx, &out.results, &mut at, routers, |r| pes.slots(r) * c.m);
        let dxs = split_round(&ctx, &out.results, &mut at, routers, |r| pes.slots(r) * c.k);
        for (r, (_, range)) in pes.at.iter().enumerate() {
            check_words(&format!("{ctx} PE {r}"), "dz", dzs[r], &dz, range.clone(), c.m);
            check_words(&format!("{ctx} PE {r}"), "dx", dxs[r], &dx, range.clone(), c.k);
        }
    } else {
        let ys = split_round(&ctx, &out.results, &mut at, routers, |r| pes.slots(r) * c.m);
        for (r, (_, range)) in pes.at.iter().enumerate() {
            check_words(&format!("{ctx} PE {r}"), "y", ys[r], &y, range.clone(), c.m);
        }
    }
    assert_eq!(at, out.results.len(), "{ctx}: extra result words");

    // The gradient egress: the reduced rows in stream order, as gradient flits of the layer
    // and step, chunk by chunk.
    let ph = top::phases(dut, id);
    let wt = &out.weight_times;
    if c.backward {
        let want: Vec<Flit> = layout.flits(Kind::Gradient, id, step, layer, &grad).unwrap().collect();
        assert_eq!(out.grads.len(), want.len(), "{ctx}: gradient words");
        for (j, (g, want)) in out.grads.iter().zip(&want).enumerate() {
            let (i, jj) = (j / (c.k + 1), j % (c.k + 1));
            assert!(
                g.payload == want.payload,
                "{ctx}: gradient row {i} word {jj}: got {:#010x}, golden {:#010x}",
                g.payload,
                want.payload
            );
            assert_eq!(
                (g.header, g.last),
                (want.header, want.last),
                "{ctx}: gradient word {j}: header, last"
            );
        }
        // The phase timestamps are the cycles of the ingress and egress handshakes.
        let want_ph = top::Phases {
            fwd_start: wt[0],
            fwd_end: wt[words - 1],
            bwd_start: wt[words],
            bwd_end: wt[2 * words - 1],
            grad_last: *out.grad_times.last().unwrap(),
        };
        assert_eq!(ph, want_ph, "{ctx}: phase timestamps of layer {id}");
    } else {
        assert!(out.grads.is_empty(), "{ctx}: gradient words in a forward");
        assert_eq!(
            (ph.fwd_start, ph.fwd_end),
            (wt[0], wt[words - 1]),
            "{ctx}: forward timestamps of layer {id}"
        );
    }
    assert_eq!(dut.get(dut.port("stat_grad_overrun")), 0, "{ctx}: gradient words beyond the table");
    m_out
}

/// Flits sent in the reduction's color (1) on every router's N, E, S and W outputs, router by
/// router (`cnt_link_flits`).
fn reduce_link_counters(dut: &Dut, routers: usize) -> Vec<u64> {
    (0..routers)
        .flat_map(|r| (0..4).map(move |o| (r * 5 + o) * 3 + 1))
        .map(|i| top::counter(dut, "cnt_link_flits", i))
        .collect()
}

/// (FMAs, FWD, DX, GRAD cycles) of PE `r`.
pub fn pe_counters(dut: &Dut, r: usize) -> [u64; 4] {
    ["cnt_fma", "cnt_fwd_cycles", "cnt_dx_cycles", "cnt_grad_cycles"].map(|n| top::counter(dut, n, r))
}

/// The array's route tables, checked by the route checker.
///
/// # Panics
/// When the checker refuses them.
pub fn checked_routes(side: usize) -> crate::mesh::Mesh {
    let m = top::routes(&params(side, TEST_PE));
    m.check().expect("the array's route tables pass the checker");
    m
}
