//! The mesh array `ws_mesh` (docs/mesh-array.md): dense layers forward, and forward plus
//! backward, on 2×2 and 4×4 arrays of PEs and routers, bit-exact against
//! `ws_common::golden::mesh::dense` (the per-sample words: outputs, dz, dx) and the Snake
//! reduction of dW/db (`dense::weight_grad`, `Reduce::Snake`) as it leaves at the gradient
//! egress, with random backpressure on the weight ingress, the gradient egress and the
//! results egress, batches per PE of 1, 2 and 4, partial batches and layer shapes that do not
//! divide the mesh.
//!
//! Two models (2×2 and 4×4), the same PE parameters: FMA_LAT 3, MAX_B 4, SRAM_WORDS 2048,
//! PROG_DEPTH 16, BUF_DEPTH 4.

use rand::rngs::StdRng;
use rand::RngExt;
use ws_common::flit::{Flit, Kind};
use ws_common::golden::mesh::dense;
use ws_common::golden::mesh::{Layer, Mesh, Reduce, StreamLayout};
use ws_hdl::dut::{run_test, BlockSpec, Dut, Pattern};
use ws_hdl::mesh::Geometry;
use ws_hdl::mesh_pe::{Instr, PeParams};
use ws_hdl::mesh_top::{self as top, ArrayParams, Patterns, RunOut};
use ws_hdl::swarm::tb;

const PE: PeParams = PeParams { sram_words: 2048, fma_lat: 3, max_b: 4, prog_depth: 16 };

fn params(n: usize) -> ArrayParams {
    ArrayParams { rows: n, cols: n, pe: PE, buf_depth: 4 }
}

fn spec(n: usize) -> BlockSpec {
    top::array_spec(&params(n)).expect("FPnew sources (run `cargo xtask setup`)")
}

/// How the test values are drawn.
#[derive(Debug, Clone, Copy)]
enum Values {
    /// SwarmX's operand mix (±0, ±inf, NaN, subnormals, range ends, extreme exponents).
    Edges,
    /// Uniform in [-2, 2], with an edge operand 1 time in `n`.
    Mild(u32),
}

fn value(rng: &mut StdRng, v: Values) -> u32 {
    match v {
        Values::Edges => tb::operand(rng),
        Values::Mild(n) => {
            if rng.random_range(0..n) == 0 {
                tb::EDGE_OPERANDS[rng.random_range(0..tb::EDGE_OPERANDS.len())]
            } else {
                rng.random_range(-2.0f32..2.0).to_bits()
            }
        }
    }
}

fn draw(rng: &mut StdRng, n: usize, v: Values) -> Vec<u32> {
    (0..n).map(|_| value(rng, v)).collect()
}

/// One dense-layer case on the array.
#[derive(Debug, Clone, Copy)]
struct Case {
    /// K, M.
    k: usize,
    m: usize,
    /// Slots per PE (B) and samples in the batch (N ≤ PEs·B).
    b: usize,
    n: usize,
    relu: bool,
    /// Rows per chunk of the streams.
    rows_per_chunk: usize,
    /// Forward and backward (else the forward only).
    backward: bool,
    values: Values,
    pats: Patterns,
}

const MIXED: Patterns = Patterns { weights: Pattern::Mixed, grads: Pattern::Mixed, results: Pattern::Mixed };
const FULL: Patterns =
    Patterns { weights: Pattern::Always, grads: Pattern::Always, results: Pattern::Always };

/// Where a PE keeps things (word addresses), for B slots of a K→M layer: x (B×K), y and then
/// dz in place (B×M), dy (B×M), dx (B×K).
struct Map {
    x: u32,
    y: u32,
    dy: u32,
    dx: u32,
}

impl Map {
    fn new(b: usize, k: usize, m: usize) -> Self {
        let (bk, bm) = ((b * k) as u32, (b * m) as u32);
        Map { x: 0, y: bk, dy: bk + bm, dx: bk + 2 * bm }
    }
}

/// Per PE (router index): its snake position and its samples.
struct Pes {
    geometry: Geometry,
    mesh: Mesh,
    /// (snake position, samples) by router index.
    at: Vec<(usize, std::ops::Range<usize>)>,
}

impl Pes {
    fn new(side: usize, b: usize, n: usize) -> Self {
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
    fn slots(&self, r: usize) -> usize {
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
struct Measured {
    out: RunOut,
    fmas: u64,
    fwd_cycles: u64,
    dx_cycles: u64,
    grad_cycles: u64,
}

/// Loads the batch, runs the case's program on every PE, and checks every word that leaves
/// against the golden model.
fn run_case(dut: &mut Dut, rng: &mut StdRng, side: usize, c: &Case) -> Measured {
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
    let out = top::run(dut, len, &stream, c.pats, limit);

    assert_eq!(out.weights_taken, stream.len(), "{ctx}: weight words taken");
    let stat = |name: &str| dut.get(dut.port(name));
    assert_eq!(stat("stat_err"), 0, "{ctx}: a PE refused its program (codes {:#x})", stat("stat_err_code"));
    assert_eq!(stat("stat_done"), (1u64 << routers) - 1, "{ctx}: PEs done");
    let misroutes = dut.get_words(dut.port("cnt_misroute"));
    assert!(misroutes.iter().all(|w| *w == 0), "{ctx}: misrouted flits");
    let drops = dut.get_words(dut.port("cnt_edge_drop"));
    assert!(drops.iter().all(|w| *w == 0), "{ctx}: flits of a wrong color at an egress");
    let mut m_out = Measured { out, fmas: 0, fwd_cycles: 0, dx_cycles: 0, grad_cycles: 0 };
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

/// (FMAs, FWD, DX, GRAD cycles) of PE `r`.
fn pe_counters(dut: &Dut, r: usize) -> [u64; 4] {
    ["cnt_fma", "cnt_fwd_cycles", "cnt_dx_cycles", "cnt_grad_cycles"].map(|n| top::counter(dut, n, r))
}

/// The cases of one mesh: every B, shapes that do not divide the mesh, partial batches.
fn cases(side: usize, backward: bool) -> Vec<Case> {
    let pes = side * side;
    let mut v = Vec::new();
    for b in [1, 2, 4] {
        let full = pes * b;
        // A full batch, and a partial one that leaves the last PE(s) empty or short.
        for (n, (k, m), values) in [
            (full, (5, 7), Values::Mild(20)),
            (if full > b + 1 { full - b - 1 } else { 1 }, (13, 9), Values::Mild(40)),
            (full.div_ceil(2), (3, 1), Values::Edges),
        ] {
            v.push(Case { k, m, b, n, relu: true, rows_per_chunk: 1 + b, backward, values, pats: MIXED });
        }
    }
    // No ReLU, one input, random backpressure of its own, and a wider layer.
    v.push(Case {
        k: 1,
        m: 6,
        b: 2,
        n: pes + 1,
        relu: false,
        rows_per_chunk: 4,
        backward,
        values: Values::Mild(10),
        pats: Patterns {
            weights: Pattern::Random(0.4),
            grads: Pattern::Random(0.3),
            results: Pattern::Bursty { on: 5.0, off: 12.0 },
        },
    });
    v.push(Case {
        k: 64,
        m: 10,
        b: 4,
        n: 3 * pes + 2,
        relu: true,
        rows_per_chunk: 3,
        backward,
        values: Values::Mild(50),
        pats: MIXED,
    });
    v
}

fn run_cases(name: &str, side: usize, backward: bool, seed: u64) {
    run_test(name, &spec(side), seed, |dut| {
        dut.reset(4);
        top::configure_routes(dut, &checked_routes(side));
        let mut rng = dut.rng(1);
        for c in cases(side, backward) {
            let r = run_case(dut, &mut rng, side, &c);
            eprintln!(
                "{side}x{side} {:>2}→{:<2} B={} N={:<2}: {} cycles, {} FMAs",
                c.k, c.m, c.b, c.n, r.out.cycles, r.fmas
            );
        }
    });
}

fn checked_routes(side: usize) -> ws_hdl::mesh::Mesh {
    let m = top::routes(&params(side));
    m.check().expect("the array's route tables pass the checker");
    m
}

#[test]
fn forward_2x2() {
    run_cases("mesh_array_fwd_2x2", 2, false, 0xa22);
}

#[test]
fn forward_4x4() {
    run_cases("mesh_array_fwd_4x4", 4, false, 0xa44);
}

#[test]
fn forward_backward_2x2() {
    run_cases("mesh_array_bwd_2x2", 2, true, 0xb22);
}

#[test]
fn forward_backward_4x4() {
    run_cases("mesh_array_bwd_4x4", 4, true, 0xb44);
}

/// FMA utilisation of the whole array at full rate on every port: 64→40 on 4×4, every PE
/// full, forward and backward.
#[test]
fn array_utilisation() {
    run_test("mesh_array_utilisation", &spec(4), 0x5eed, |dut| {
        dut.reset(4);
        top::configure_routes(dut, &checked_routes(4));
        let mut rng = dut.rng(2);
        eprintln!("ws_mesh 4x4 FMA utilisation, 64→40, every port at full rate, FMA_LAT {}:", PE.fma_lat);
        eprintln!("  B   FMAs      cycles   FMAs/(16·cycles)  FWD util  DX util  GRAD util");
        for b in [1usize, 2, 4] {
            let c = Case {
                k: 64,
                m: 40,
                b,
                n: 16 * b,
                relu: true,
                rows_per_chunk: 8,
                backward: true,
                values: Values::Mild(100),
                pats: FULL,
            };
            let r = run_case(dut, &mut rng, 4, &c);
            let per = |n: u64, cyc: u64| n as f64 / cyc.max(1) as f64;
            let fma_layer = (b * 64 * 40) as u64;
            eprintln!(
                "  {b:<3} {:<9} {:<8} {:.4}            {:.4}    {:.4}   {:.4}",
                r.fmas,
                r.out.cycles,
                per(r.fmas, 16 * r.out.cycles),
                per(fma_layer, r.fwd_cycles),
                per(fma_layer, r.dx_cycles),
                per((b * 40 * 65) as u64, r.grad_cycles)
            );
        }
    });
}

/// Gradient words beyond the header table leave as error flits and set `stat_grad_overrun`,
/// which the next step's STEP write clears; a table of several segments numbers each layer
/// from chunk 0.
#[test]
fn gradient_headers_follow_the_table() {
    run_test("mesh_array_headers", &spec(2), 0x4ead, |dut| {
        dut.reset(4);
        top::configure_routes(dut, &checked_routes(2));
        let mut rng = dut.rng(3);
        // One 3→2 layer (8 gradient words), B = 1 on every PE, forward and backward.
        let (k, m) = (3u32, 2u32);
        let layer = Layer::new(3, 2);
        let w = draw(&mut rng, 8, Values::Mild(10));
        let map = Map::new(1, 3, 2);
        let mut samples = Vec::new();
        for r in 0..4 {
            for a in 0..3 {
                samples.push((r, map.x + a, value(&mut rng, Values::Mild(10))));
            }
            for a in 0..2 {
                samples.push((r, map.dy + a, value(&mut rng, Values::Mild(10))));
            }
        }
        top::load_samples(dut, &samples, Pattern::Always);
        let g = Geometry::new(2, 2);
        for r in 0..4 {
            let pos = (0..4).find(|&p| top::snake_router(g, p) == r).unwrap();
            let prog = [
                Instr::Fwd { relu: false, b: 1, k, m, src: map.x, dst: map.y },
                Instr::Dx { b: 1, k, m, src: map.dy, dst: map.dx },
                Instr::Grad { head: pos == 0, b: 1, k, m, x: map.x, dz: map.dy },
            ];
            top::load_program(dut, r as u8, &prog);
        }
        let layout = StreamLayout::new(1);
        let pass: Vec<Flit> = layout.flits(Kind::Weight, 2, 7, layer, &w).unwrap().collect();
        let stream: Vec<Flit> = pass.iter().chain(&pass).copied().collect();
        // The table says: layer 5 of 3 words in chunks of 2, then layer 1 of 3 words in one
        // chunk; the last 2 of the 8 words are beyond it.
        let segs = [
            top::Segment { layer: 5, chunk_words: 2, words: 3 },
            top::Segment { layer: 1, chunk_words: 3, words: 3 },
        ];
        top::configure_step(dut, 0x1234, &segs);
        let out = top::run(dut, 3, &stream, MIXED, 50_000);
        let got: Vec<(Kind, u16, u16, u16, u16, bool)> = out
            .grads
            .iter()
            .map(|f| (f.header.kind, f.header.layer, f.header.step, f.header.chunk, f.header.index, f.last))
            .collect();
        let (gk, e) = (Kind::Gradient, Kind::Error);
        let want = vec![
            (gk, 5, 0x1234, 0, 0, false),
            (gk, 5, 0x1234, 0, 1, true),
            (gk, 5, 0x1234, 1, 0, true),
            (gk, 1, 0x1234, 0, 0, false),
            (gk, 1, 0x1234, 0, 1, false),
            (gk, 1, 0x1234, 0, 2, true),
            (e, 5, 0x1234, 0, 0, true),
            (e, 5, 0x1234, 0, 0, true),
        ];
        assert_eq!(got, want, "gradient headers");
        assert_eq!(dut.get(dut.port("stat_grad_overrun")), 1, "overrun flagged");
        let ph = top::phases(dut, 5);
        assert_eq!(ph.grad_last, out.grad_times[2], "layer 5's last gradient word");
        assert_eq!(top::phases(dut, 1).grad_last, out.grad_times[5], "layer 1's last gradient word");
        top::configure_step(dut, 0x1235, &segs);
        assert_eq!(dut.get(dut.port("stat_grad_overrun")), 0, "STEP clears the overrun");
    });
}
