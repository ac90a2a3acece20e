//! `ws_mesh_pe` alone (docs/mesh-pe.md): dense-layer forwards bit-exact against
//! `ws_common::golden::mesh::dense::forward`, the backward (dx, the ReLU mask, and the PE's
//! step of the Snake dW/db reduction) bit-exact against `dense::input_grad`,
//! `dense::relu_backward`, `dense::weight_grad` and `dense::reduce_sum`, the FMA utilisation
//! of each phase at B = 1, 2, 4 and 8, and the refusal of bad programs before they run.
//!
//! One model (FMA_LAT 3, MAX_B 16, SRAM_WORDS 3000 — not a power of two —, PROG_DEPTH 8)
//! serves every test: FPnew builds take minutes on this machine.

use rand::rngs::StdRng;
use rand::RngExt;
use ws_common::golden::mesh::dense;
use ws_common::golden::mesh::{Layer, Mesh, Reduce};
use ws_hdl::dut::{run_test, BlockSpec, Dut, Pattern};
use ws_hdl::mesh_pe::{self as pe, err, Feeds, Instr, PeParams};
use ws_hdl::swarm::tb;

/// Marks a refusal case that must run instead (the boundary that still fits).
const OK: u32 = 0;

const PARAMS: PeParams = PeParams { sram_words: 3000, fma_lat: 3, max_b: 16, prog_depth: 8 };

fn spec() -> BlockSpec {
    pe::pe_spec(&PARAMS).expect("FPnew sources (run `cargo xtask setup`)")
}

/// How the test values are drawn.
#[derive(Debug, Clone, Copy)]
enum Values {
    /// SwarmX's operand mix: 1 in 4 edge values (±0, ±inf, NaN, subnormals, range ends), 1 in
    /// 8 extreme exponents. Most long chains end in NaN or inf, so use it on short rows.
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

/// One FWD case: a K→M layer over B samples.
#[derive(Debug, Clone, Copy)]
struct Case {
    k: usize,
    m: usize,
    b: usize,
    relu: bool,
    values: Values,
    src: Pattern,
    sink: Pattern,
}

/// Loads x at `xbase`, runs [FWD, DUMP] with y at `ybase`, and checks every output word and
/// the status against the golden forward. Returns the status.
fn run_case(dut: &mut Dut, rng: &mut StdRng, c: &Case, xbase: u32, ybase: u32) -> pe::Status {
    let layer = Layer::new(c.k, c.m);
    let params: Vec<u32> = (0..layer.words().unwrap()).map(|_| value(rng, c.values)).collect();
    let x: Vec<u32> = (0..c.b * c.k).map(|_| value(rng, c.values)).collect();
    let mut want = vec![0u32; c.b * c.m];
    dense::forward(layer, &params, &x, c.relu, &mut want).unwrap();

    pe::load_sram(dut, xbase, &x);
    let (k, m, b) = (c.k as u32, c.m as u32, c.b as u32);
    pe::load_program(
        dut,
        &[
            Instr::Fwd { relu: c.relu, b, k, m, src: xbase, dst: ybase },
            Instr::Dump { src: ybase, count: b * m },
        ],
    );
    let limit = 100 * (params.len() as u64 * c.b as u64 + 1000);
    let (st, out, taken) = pe::run(dut, 2, &params, c.src, c.sink, limit);
    assert!(st.done && !st.err, "{c:?}: status {st:?}");
    assert_eq!(taken, params.len(), "{c:?}: weight words taken");
    assert_eq!(st.fma, (c.b * c.k * c.m) as u64, "{c:?}: FMA issues");
    assert_eq!(out.len(), want.len(), "{c:?}: result words");
    for (j, ((got, last), w)) in out.iter().zip(&want).enumerate() {
        let (s, i) = (j / c.m, j % c.m);
        assert!(
            got == w,
            "{c:?}: sample {s} output {i}: got {got:#010x}, golden {w:#010x} (bias {:#010x}, row {:x?}, x {:x?})",
            params[layer.bias(i)],
            &params[layer.bias(i)..layer.bias(i + 1)],
            &x[s * c.k..(s + 1) * c.k]
        );
        assert_eq!(*last, j + 1 == want.len(), "{c:?}: m_last at word {j}");
    }
    st
}

#[test]
fn forward_is_bit_exact() {
    run_test("mesh_pe_forward", &spec(), 0x7e57, |dut| {
        dut.reset(4);
        let mut rng = dut.rng(1);
        let mut cases = Vec::new();
        for b in [1, 2, 4] {
            for (k, m) in [(5, 7), (1, 3), (3, 1)] {
                cases.push(Case {
                    k,
                    m,
                    b,
                    relu: true,
                    values: Values::Edges,
                    src: Pattern::Mixed,
                    sink: Pattern::Mixed,
                });
            }
            cases.push(Case {
                k: 64,
                m: 128,
                b,
                relu: b != 2,
                values: Values::Mild(50),
                src: Pattern::Mixed,
                sink: Pattern::Mixed,
            });
        }
        // Slots beyond the FMA latency, odd B, no ReLU, full rate and stalls.
        cases.push(Case {
            k: 13,
            m: 9,
            b: 7,
            relu: false,
            values: Values::Mild(8),
            src: Pattern::Always,
            sink: Pattern::Random(0.3),
        });
        cases.push(Case {
            k: 9,
            m: 13,
            b: 16,
            relu: true,
            values: Values::Edges,
            src: Pattern::Bursty { on: 6.0, off: 20.0 },
            sink: Pattern::Always,
        });
        for (n, c) in cases.iter().enumerate() {
            // Move the buffers around: x below or above y, odd addresses.
            let (xbase, ybase) = if n % 2 == 0 {
                (17 + n as u32, 1100 + 3 * n as u32)
            } else {
                (2999 - (c.b * c.k) as u32, 5 * n as u32)
            };
            let st = run_case(dut, &mut rng, c, xbase, ybase);
            eprintln!(
                "{:>3}→{:<3} B={:<2} {:?}/{:?}: {} FMAs in {} FWD cycles ({:.3})",
                c.k,
                c.m,
                c.b,
                c.src,
                c.sink,
                st.fma,
                st.fwd_cycles,
                st.utilisation()
            );
        }
    });
}

/// Two layers chained in SRAM (y of the first is x of the second), then one dump.
#[test]
fn two_layers_chain_in_sram() {
    run_test("mesh_pe_two_layers", &spec(), 0x2a, |dut| {
        dut.reset(4);
        let mut rng = dut.rng(2);
        let (b, d0, d1, d2) = (3usize, 5usize, 7usize, 4usize);
        let (l0, l1) = (Layer::new(d0, d1), Layer::new(d1, d2));
        let p0: Vec<u32> = (0..l0.words().unwrap()).map(|_| value(&mut rng, Values::Mild(10))).collect();
        let p1: Vec<u32> = (0..l1.words().unwrap()).map(|_| value(&mut rng, Values::Mild(10))).collect();
        let x: Vec<u32> = (0..b * d0).map(|_| value(&mut rng, Values::Mild(10))).collect();
        let mut h = vec![0; b * d1];
        let mut z = vec![0; b * d2];
        dense::forward(l0, &p0, &x, true, &mut h).unwrap();
        dense::forward(l1, &p1, &h, false, &mut z).unwrap();
        let (xb, hb, zb) = (0u32, (b * d0) as u32, (b * (d0 + d1)) as u32);
        pe::load_sram(dut, xb, &x);
        let (bb, d0, d1, d2) = (b as u32, d0 as u32, d1 as u32, d2 as u32);
        pe::load_program(
            dut,
            &[
                Instr::Fwd { relu: true, b: bb, k: d0, m: d1, src: xb, dst: hb },
                Instr::Fwd { relu: false, b: bb, k: d1, m: d2, src: hb, dst: zb },
                Instr::Dump { src: xb, count: bb * (d0 + d1 + d2) },
            ],
        );
        let weights: Vec<u32> = p0.iter().chain(&p1).copied().collect();
        let (st, out, taken) = pe::run(dut, 3, &weights, Pattern::Mixed, Pattern::Mixed, 100_000);
        assert!(st.done && !st.err, "status {st:?}");
        assert_eq!(taken, weights.len());
        let want: Vec<u32> = x.iter().chain(&h).chain(&z).copied().collect();
        let got: Vec<u32> = out.iter().map(|(d, _)| *d).collect();
        assert_eq!(got, want, "x, then y of layer 0, then y of layer 1");
    });
}

/// FMA-busy cycles over FWD cycles at full rate on both streams, against the ideal of one FMA
/// per cycle and the schedule's B / max(B, FMA_LAT).
#[test]
fn fma_utilisation() {
    run_test("mesh_pe_utilisation", &spec(), 0x5eed, |dut| {
        dut.reset(4);
        let mut rng = dut.rng(3);
        eprintln!("ws_mesh_pe FMA utilisation, 64→128 forward, FMA_LAT {}:", PARAMS.fma_lat);
        eprintln!("  B   FMAs     FWD cycles  utilisation  B/max(B,L)");
        for b in [1usize, 2, 4, 8] {
            let c = Case {
                k: 64,
                m: 128,
                b,
                relu: true,
                values: Values::Mild(100),
                src: Pattern::Always,
                sink: Pattern::Always,
            };
            let st = run_case(dut, &mut rng, &c, 0, 1200);
            let ideal = b as f64 / (b as f64).max(f64::from(PARAMS.fma_lat));
            eprintln!(
                "  {b:<3} {:<8} {:<11} {:.4}       {:.4}",
                st.fma,
                st.fwd_cycles,
                st.utilisation(),
                ideal
            );
        }
    });
}

/// Each refusal: the program does not start (no weight word taken, no FMA, SRAM untouched),
/// the code and the instruction are reported, and a good program runs after it.
#[test]
fn bad_programs_are_refused() {
    run_test("mesh_pe_refuse", &spec(), 0xbad, |dut| {
        dut.reset(4);
        let mut rng = dut.rng(4);
        let sram = PARAMS.sram_words;
        let fwd = |b: u32, k: u32, m: u32, src: u32, dst: u32| Instr::Fwd { relu: true, b, k, m, src, dst };
        let ok = fwd(2, 4, 3, 0, 100);
        let dx = |b: u32, k: u32, m: u32, src: u32, dst: u32| Instr::Dx { b, k, m, src, dst };
        let grad = |head: bool, b: u32, k: u32, m: u32, x: u32, dz: u32| Instr::Grad { head, b, k, m, x, dz };
        let loss = |b: u32, c: u32, src: u32, lab: u32, dst: u32| Instr::Loss { b, c, src, lab, dst };
        let weights: Vec<u32> = (0..3 * 5).map(|_| value(&mut rng, Values::Mild(10))).collect();
        let sentinel: Vec<u32> = (0..16).map(|i| 0x1234_0000 + i).collect();
        pe::load_sram(dut, 100, &sentinel);
        // (program, length, code, pc)
        let cases: Vec<(Vec<Instr>, u32, u32, u32)> = vec![
            (vec![ok], 0, err::LEN, 0),
            (vec![ok], PARAMS.prog_depth + 1, err::LEN, 0),
            (vec![ok, Instr::Raw([0, 1, 0])], 2, err::OP, 1),
            (vec![ok, Instr::Raw([7, 1, 0])], 2, err::OP, 1),
            (vec![Instr::Raw([1 | (2 << 8) | (1 << 5), 4 | (3 << 16), 100 << 16])], 1, err::OP, 0),
            (vec![fwd(0, 4, 3, 0, 100)], 1, err::SHAPE, 0),
            (vec![fwd(2, 0, 3, 0, 100)], 1, err::SHAPE, 0),
            (vec![ok, fwd(2, 4, 0, 0, 100)], 2, err::SHAPE, 1),
            (vec![Instr::Dump { src: 0, count: 0 }], 1, err::SHAPE, 0),
            (vec![fwd(PARAMS.max_b + 1, 4, 3, 0, 100)], 1, err::BATCH, 0),
            // More samples than the SRAM holds: 16 samples of 64→128 need 3072 words of 3000.
            (vec![fwd(16, 128, 64, 1000, 0)], 1, err::SRC, 0),
            (vec![fwd(16, 64, 128, 0, 1024)], 1, err::DST, 0),
            (vec![fwd(1, 4, 3, sram - 4, 0)], 1, OK, 0),
            (vec![fwd(1, 4, 3, sram - 3, 0)], 1, err::SRC, 0),
            (vec![fwd(1, 4, 3, 0, sram - 2)], 1, err::DST, 0),
            (vec![Instr::Dump { src: sram - 1, count: 2 }], 1, err::SRC, 0),
            (vec![ok, ok, fwd(2, 4, 3, 0, 7)], 3, err::OVERLAP, 2),
            (vec![fwd(2, 4, 3, 8, 4)], 1, err::OVERLAP, 0),
            // DX: dz (B×M) at src, dx (B×K) at dst.
            (vec![dx(2, 4, 3, 0, 200)], 1, OK, 0),
            (vec![Instr::Raw([3 | (1 << 4) | (2 << 8), 4 | (3 << 16), 100 << 16])], 1, err::OP, 0),
            (vec![dx(0, 4, 3, 0, 100)], 1, err::SHAPE, 0),
            (vec![dx(2, 4, 0, 0, 100)], 1, err::SHAPE, 0),
            (vec![dx(PARAMS.max_b + 1, 4, 3, 0, 100)], 1, err::BATCH, 0),
            (vec![dx(2, 4, 3, sram - 5, 0)], 1, err::SRC, 0),
            (vec![dx(2, 4, 3, 0, sram - 7)], 1, err::DST, 0),
            (vec![dx(2, 4, 3, 10, 5)], 1, err::OVERLAP, 0),
            // MASK: d at src, y at dst.
            (vec![Instr::Mask { src: 0, dst: 0, count: 0 }], 1, err::SHAPE, 0),
            (vec![Instr::Mask { src: sram - 3, dst: 0, count: 4 }], 1, err::SRC, 0),
            (vec![Instr::Mask { src: 0, dst: sram - 3, count: 4 }], 1, err::DST, 0),
            (vec![Instr::Mask { src: 0, dst: 3, count: 4 }], 1, err::OVERLAP, 0),
            (vec![Instr::Raw([4 | (1 << 4), 4, 8 << 16])], 1, err::OP, 0),
            // GRAD: x (B×K) at x, dz (B×M) at dz; a head needs samples; B = 0 passes through.
            (vec![grad(true, 0, 4, 3, 0, 100)], 1, err::SHAPE, 0),
            (vec![grad(false, 2, 4, 0, 0, 100)], 1, err::SHAPE, 0),
            (vec![grad(false, PARAMS.max_b + 1, 4, 3, 0, 100)], 1, err::BATCH, 0),
            (vec![grad(false, 2, 4, 3, sram - 7, 0)], 1, err::SRC, 0),
            (vec![grad(true, 2, 4, 3, 0, sram - 5)], 1, err::DST, 0),
            (vec![ok, grad(false, 16, 128, 64, 1000, 0)], 2, err::SRC, 1),
            // LOSS: logits (B×C) at src, labels (B) at lab, (loss, flag) pairs (2B) at dst.
            (vec![Instr::Raw([6 | (1 << 4) | (2 << 8), 10 | (50 << 16), 60 << 16])], 1, err::OP, 0),
            (vec![loss(0, 10, 0, 50, 60)], 1, err::SHAPE, 0),
            (vec![loss(2, 0, 0, 50, 60)], 1, err::SHAPE, 0),
            (vec![loss(2, 10, sram - 19, 0, 200)], 1, err::SRC, 0),
            (vec![loss(2, 10, 0, sram - 1, 200)], 1, err::SRC, 0),
            (vec![loss(2, 10, 0, 50, sram - 3)], 1, err::DST, 0),
            (vec![loss(2, 10, 0, 50, 19)], 1, err::OVERLAP, 0),
            (vec![loss(2, 10, 0, 19, 200)], 1, err::OVERLAP, 0),
            (vec![ok, loss(2, 10, 0, 50, 51)], 2, err::OVERLAP, 1),
        ];
        for (n, (prog, len, code, pc)) in cases.iter().enumerate() {
            pe::load_program(dut, prog);
            if *code == OK {
                // The boundary case fits: it runs (weights for one 4→3 layer).
                let (st, _, taken) = pe::run(dut, *len, &weights, Pattern::Always, Pattern::Always, 10_000);
                assert!(st.done && !st.err && taken == weights.len(), "case {n}: {st:?}");
                continue;
            }
            let (st, out, taken) = pe::run(dut, *len, &weights, Pattern::Always, Pattern::Always, 10_000);
            assert!(st.err && !st.done, "case {n} {prog:x?}: not refused: {st:?}");
            assert_eq!((st.code, st.pc), (*code, *pc), "case {n} {prog:x?}: code, pc");
            assert_eq!((taken, st.fma, out.len()), (0, 0, 0), "case {n}: something ran");
        }
        // Writes outside the program store or the SRAM poison the next start until a clear.
        pe::cfg_write(dut, pe::CFG_PROG + 4 * PARAMS.prog_depth as u16, 0);
        pe::load_program(dut, &[Instr::Dump { src: 100, count: 16 }]);
        let (st, out, _) = pe::run(dut, 1, &[], Pattern::Always, Pattern::Always, 1000);
        assert!(st.err && st.code == err::RANGE && out.is_empty(), "program overflow: {st:?}");
        pe::cfg_write(dut, pe::CFG_CTRL, 2);
        pe::cfg_write(dut, pe::CFG_SRAM + sram as u16, 0);
        let (st, _, _) = pe::run(dut, 1, &[], Pattern::Always, Pattern::Always, 1000);
        assert!(st.err && st.code == err::RANGE, "SRAM overflow: {st:?}");
        pe::cfg_write(dut, pe::CFG_CTRL, 2);
        // Nothing refused touched the SRAM: the sentinel is still there.
        let (st, out, _) = pe::run(dut, 1, &[], Pattern::Always, Pattern::Random(0.5), 1000);
        assert!(st.done && !st.err, "dump after clear: {st:?}");
        let got: Vec<u32> = out.iter().map(|(d, _)| *d).collect();
        assert_eq!(got, sentinel);
    });
}

/// One DX case: dx of a K→M layer over B samples from dz, then (optionally) the ReLU mask of
/// the layer below, which turns dx into its dz in place over a stored output y.
#[derive(Debug, Clone, Copy)]
struct BwdCase {
    k: usize,
    m: usize,
    b: usize,
    values: Values,
    src: Pattern,
    sink: Pattern,
}

/// Loads dz and y, runs [DX, MASK, DUMP dx, DUMP dz-below] and checks dx against
/// `dense::input_grad` and the masked result against `dense::relu_backward`.
fn run_bwd_case(dut: &mut Dut, rng: &mut StdRng, c: &BwdCase, bases: [u32; 3]) -> pe::Status {
    let [dz_at, dx_at, y_at] = bases;
    let layer = Layer::new(c.k, c.m);
    let params: Vec<u32> = (0..layer.words().unwrap()).map(|_| value(rng, c.values)).collect();
    let dz: Vec<u32> = (0..c.b * c.m).map(|_| value(rng, c.values)).collect();
    // The stored outputs of the layer below: ReLU outputs and the odd edge value.
    let y: Vec<u32> = (0..c.b * c.k).map(|_| dense::relu(value(rng, Values::Mild(6)))).collect();
    let mut dx = vec![0u32; c.b * c.k];
    dense::input_grad(layer, &params, &dz, &mut dx).unwrap();
    let mut masked = dx.clone();
    dense::relu_backward(&y, &mut masked).unwrap();

    pe::load_sram(dut, dz_at, &dz);
    pe::load_sram(dut, y_at, &y);
    let (k, m, b) = (c.k as u32, c.m as u32, c.b as u32);
    pe::load_program(
        dut,
        &[
            Instr::Dx { b, k, m, src: dz_at, dst: dx_at },
            Instr::Dump { src: dx_at, count: b * k },
            Instr::Mask { src: dx_at, dst: y_at, count: b * k },
            Instr::Dump { src: y_at, count: b * k },
        ],
    );
    let limit = 100 * (params.len() as u64 * c.b as u64 + 1000);
    let (st, out, taken) = pe::run(dut, 4, &params, c.src, c.sink, limit);
    assert!(st.done && !st.err, "{c:?}: status {st:?}");
    assert_eq!(taken, params.len(), "{c:?}: weight words taken");
    assert_eq!(st.fma, (c.b * c.k * c.m) as u64, "{c:?}: FMA issues");
    assert_eq!(out.len(), 2 * dx.len(), "{c:?}: result words");
    for (j, ((got, _), w)) in out.iter().zip(&dx).enumerate() {
        let (s, kk) = (j / c.k, j % c.k);
        let col: Vec<u32> = (0..c.m).map(|i| params[layer.weight(i, kk)]).collect();
        assert!(
            got == w,
            "{c:?}: dx of sample {s} input {kk}: got {got:#010x}, golden {w:#010x} (column {col:x?}, dz {:x?})",
            &dz[s * c.m..(s + 1) * c.m]
        );
    }
    for (j, ((got, _), w)) in out[dx.len()..].iter().zip(&masked).enumerate() {
        assert!(
            got == w,
            "{c:?}: mask word {j}: got {got:#010x}, golden {w:#010x} (y {:#010x}, dx {:#010x})",
            y[j],
            dx[j]
        );
    }
    st
}

#[test]
fn dx_and_mask_are_bit_exact() {
    run_test("mesh_pe_dx", &spec(), 0xd0d0, |dut| {
        dut.reset(4);
        let mut rng = dut.rng(5);
        let mut cases = Vec::new();
        for b in [1, 2, 4] {
            for (k, m) in [(5, 7), (1, 3), (3, 1), (2, 1)] {
                cases.push(BwdCase {
                    k,
                    m,
                    b,
                    values: Values::Edges,
                    src: Pattern::Mixed,
                    sink: Pattern::Mixed,
                });
            }
            cases.push(BwdCase {
                k: 64,
                m: 40,
                b,
                values: Values::Mild(50),
                src: Pattern::Mixed,
                sink: Pattern::Mixed,
            });
        }
        // K·B below the FMA latency (the accumulator hazard), long slots, full rate, stalls.
        cases.push(BwdCase {
            k: 1,
            m: 9,
            b: 1,
            values: Values::Mild(8),
            src: Pattern::Always,
            sink: Pattern::Always,
        });
        cases.push(BwdCase {
            k: 13,
            m: 9,
            b: 7,
            values: Values::Mild(8),
            src: Pattern::Always,
            sink: Pattern::Random(0.3),
        });
        cases.push(BwdCase {
            k: 9,
            m: 13,
            b: 16,
            values: Values::Edges,
            src: Pattern::Bursty { on: 6.0, off: 20.0 },
            sink: Pattern::Always,
        });
        for (n, c) in cases.iter().enumerate() {
            let (bk, bm) = ((c.b * c.k) as u32, (c.b * c.m) as u32);
            // dz, dx, y: apart, at odd places, and at the top of the SRAM.
            let bases = if n % 2 == 0 {
                [3 + n as u32, 1000 + 7 * n as u32, 2000 + n as u32]
            } else {
                [PARAMS.sram_words - bm, 11 * n as u32, 1500 - bk]
            };
            let st = run_bwd_case(dut, &mut rng, c, bases);
            eprintln!(
                "{:>3}→{:<3} B={:<2} {:?}/{:?}: {} FMAs in {} DX cycles ({:.3})",
                c.k,
                c.m,
                c.b,
                c.src,
                c.sink,
                st.fma,
                st.dx_cycles,
                st.fma as f64 / st.dx_cycles as f64
            );
        }
    });
}

/// Every sample's x and dz of a K→M layer over a batch, and the layer.
struct GradBatch {
    layer: Layer,
    x: Vec<u32>,
    dz: Vec<u32>,
}

impl GradBatch {
    fn new(rng: &mut StdRng, k: usize, m: usize, n: usize, values: Values) -> Self {
        let x = (0..n * k).map(|_| value(rng, values)).collect();
        let dz = (0..n * m).map(|_| value(rng, values)).collect();
        GradBatch { layer: Layer::new(k, m), x, dz }
    }
}

/// Runs the Snake reduction of `batch` on one PE model, playing each snake position in turn
/// (B slots each, the last ones partly or wholly empty): position 0 is the head, and each
/// later position takes the previous one's `m1_*` words on `s1_*`. Checks `m1_last` at row
/// ends, the FMA count and the words taken, and returns the end of the snake's words and
/// the total GRAD cycles and FMAs.
fn snake_on_one_pe(
    dut: &mut Dut,
    batch: &GradBatch,
    b: usize,
    positions: usize,
    pats: [Pattern; 2],
    bases: [u32; 2],
) -> (Vec<u32>, u64, u64) {
    let (k, m) = (batch.layer.inputs, batch.layer.outputs);
    let n = batch.x.len() / k.max(1);
    let words = m * (k + 1);
    let mut sums: Vec<u32> = Vec::new();
    let (mut cycles, mut fmas) = (0, 0);
    for pos in 0..positions {
        let slots = (pos * b..((pos + 1) * b).min(n)).len();
        let [x_at, dz_at] = bases;
        if slots > 0 {
            pe::load_sram(dut, x_at, &batch.x[pos * b * k..(pos * b + slots) * k]);
            pe::load_sram(dut, dz_at, &batch.dz[pos * b * m..(pos * b + slots) * m]);
        }
        let (k32, m32, s32) = (k as u32, m as u32, slots as u32);
        pe::load_program(dut, &[Instr::Grad { head: pos == 0, b: s32, k: k32, m: m32, x: x_at, dz: dz_at }]);
        let feeds =
            Feeds { partials: &sums, partials_pattern: pats[0], sums_pattern: pats[1], ..Feeds::default() };
        let o = pe::run_feeds(dut, 1, &feeds, 200 * (words * (b + 1)) as u64 + 5000);
        let ctx = format!("{k}→{m} B={b} position {pos} ({slots} slots)");
        assert!(o.status.done && !o.status.err, "{ctx}: status {:?}", o.status);
        assert_eq!(o.partials_taken, if pos == 0 { 0 } else { words }, "{ctx}: partials taken");
        assert_eq!(o.status.fma, (slots * words) as u64, "{ctx}: FMA issues");
        assert_eq!(o.sums.len(), words, "{ctx}: words sent");
        for (j, (_, last)) in o.sums.iter().enumerate() {
            assert_eq!(*last, j % (k + 1) == k, "{ctx}: m1_last at word {j}");
        }
        cycles += o.status.grad_cycles;
        fmas += o.status.fma;
        sums = o.sums.iter().map(|(d, _)| *d).collect();
    }
    (sums, cycles, fmas)
}

#[test]
fn snake_reduction_is_bit_exact() {
    run_test("mesh_pe_grad", &spec(), 0x6a6a, |dut| {
        dut.reset(4);
        let mut rng = dut.rng(6);
        // (K, M, B, samples, positions, values, s1 pattern, m1 pattern)
        let cases = [
            (5, 7, 1, 3, 3, Values::Edges, Pattern::Mixed, Pattern::Mixed),
            (5, 7, 2, 5, 4, Values::Edges, Pattern::Mixed, Pattern::Mixed),
            (3, 1, 4, 9, 3, Values::Edges, Pattern::Mixed, Pattern::Mixed),
            (1, 3, 4, 8, 2, Values::Mild(10), Pattern::Random(0.5), Pattern::Bursty { on: 5.0, off: 9.0 }),
            (2, 2, 3, 4, 3, Values::Mild(10), Pattern::Always, Pattern::Always),
            (64, 10, 4, 7, 2, Values::Mild(50), Pattern::Mixed, Pattern::Mixed),
            (13, 9, 16, 20, 2, Values::Mild(8), Pattern::Always, Pattern::Random(0.3)),
        ];
        for (k, m, b, n, positions, values, p_in, p_out) in cases {
            let batch = GradBatch::new(&mut rng, k, m, n, values);
            let mut want = vec![0u32; batch.layer.words().unwrap()];
            // Any mesh with the same B and enough slots: the Snake bits do not depend on it.
            let mesh = Mesh::new(1, positions, b);
            dense::weight_grad(&mesh, Reduce::Snake, batch.layer, &batch.x, &batch.dz, &mut want).unwrap();
            let bases = [100 + k as u32, 2999 - (b * m) as u32];
            let (got, cycles, fmas) = snake_on_one_pe(dut, &batch, b, positions, [p_in, p_out], bases);
            for (j, (g, w)) in got.iter().zip(&want).enumerate() {
                let (i, jj) = (j / (k + 1), j % (k + 1));
                assert!(g == w, "{k}→{m} B={b} N={n}: row {i} word {jj}: got {g:#010x}, golden {w:#010x}");
            }
            eprintln!("{k:>3}→{m:<3} B={b:<2} N={n:<2} on {positions} positions: {fmas} FMAs in {cycles} GRAD cycles");
        }
        // The loss reduction: rows of one word (K = 0), x̃ = 1.
        for (b, n, positions) in [(1, 3, 3), (4, 6, 2), (3, 3, 1)] {
            let losses: Vec<u32> = (0..n).map(|_| value(&mut rng, Values::Mild(5))).collect();
            let batch = GradBatch { layer: Layer::new(0, 1), x: Vec::new(), dz: losses.clone() };
            let want = dense::reduce_sum(&Mesh::new(1, positions, b), Reduce::Snake, &losses).unwrap();
            let (got, _, _) = snake_on_one_pe_loss(dut, &batch, b, n, positions);
            assert_eq!(got, vec![want], "loss over {n} samples, B={b}");
        }
    });
}

/// [`snake_on_one_pe`] for rows of one word (K = 0), where the batch size cannot come from x.
fn snake_on_one_pe_loss(
    dut: &mut Dut,
    batch: &GradBatch,
    b: usize,
    n: usize,
    positions: usize,
) -> (Vec<u32>, u64, u64) {
    let mut sums: Vec<u32> = Vec::new();
    let (mut cycles, mut fmas) = (0, 0);
    for pos in 0..positions {
        let slots = (pos * b..((pos + 1) * b).min(n)).len();
        if slots > 0 {
            pe::load_sram(dut, 40, &batch.dz[pos * b..pos * b + slots]);
        }
        pe::load_program(dut, &[Instr::Grad { head: pos == 0, b: slots as u32, k: 0, m: 1, x: 0, dz: 40 }]);
        let feeds = Feeds {
            partials: &sums,
            partials_pattern: Pattern::Mixed,
            sums_pattern: Pattern::Mixed,
            ..Feeds::default()
        };
        let o = pe::run_feeds(dut, 1, &feeds, 10_000);
        assert!(o.status.done && !o.status.err, "loss position {pos}: {:?}", o.status);
        assert_eq!(o.sums.iter().map(|(_, l)| *l).collect::<Vec<_>>(), vec![true]);
        cycles += o.status.grad_cycles;
        fmas += o.status.fma;
        sums = o.sums.iter().map(|(d, _)| *d).collect();
    }
    (sums, cycles, fmas)
}

/// FMA-busy cycles over the cycles of DX and of GRAD at full rate on every stream, 64→128.
#[test]
fn backward_utilisation() {
    run_test("mesh_pe_bwd_utilisation", &spec(), 0xb0b0, |dut| {
        dut.reset(4);
        let mut rng = dut.rng(7);
        eprintln!("ws_mesh_pe backward FMA utilisation, 64→128, FMA_LAT {}:", PARAMS.fma_lat);
        eprintln!("  B   DX FMAs  DX cycles  DX util  GRAD FMAs  GRAD cycles  GRAD util");
        for b in [1usize, 2, 4, 8] {
            let c = BwdCase {
                k: 64,
                m: 128,
                b,
                values: Values::Mild(100),
                src: Pattern::Always,
                sink: Pattern::Always,
            };
            let dx = run_bwd_case(dut, &mut rng, &c, [0, 1100, 1700]);
            // One non-head position at full rate: the steady state of a PE inside the snake.
            let batch = GradBatch::new(&mut rng, 64, 128, b, Values::Mild(100));
            pe::load_sram(dut, 0, &batch.x);
            pe::load_sram(dut, 1100, &batch.dz);
            let incoming: Vec<u32> = (0..128 * 65).map(|_| value(&mut rng, Values::Mild(100))).collect();
            pe::load_program(dut, &[Instr::Grad { head: false, b: b as u32, k: 64, m: 128, x: 0, dz: 1100 }]);
            let o = pe::run_feeds(dut, 1, &Feeds { partials: &incoming, ..Feeds::default() }, 1_000_000);
            assert!(o.status.done && o.sums.len() == incoming.len(), "GRAD B={b}: {:?}", o.status);
            // Bit-exact too: each word continues the incoming chain over this PE's slots.
            for (j, ((got, _), acc)) in o.sums.iter().zip(&incoming).enumerate() {
                let (i, jj) = (j / 65, j % 65);
                let mut a = *acc;
                for s in 0..b {
                    let xt = if jj == 0 { 1f32.to_bits() } else { batch.x[s * 64 + jj - 1] };
                    a = ws_common::golden::optim::fma(batch.dz[s * 128 + i], xt, a);
                }
                assert_eq!(*got, a, "GRAD B={b} word {j}");
            }
            let g = o.status;
            eprintln!(
                "  {b:<3} {:<8} {:<10} {:.4}   {:<10} {:<12} {:.4}",
                dx.fma,
                dx.dx_cycles,
                dx.fma as f64 / dx.dx_cycles as f64,
                g.fma,
                g.grad_cycles,
                g.fma as f64 / g.grad_cycles as f64
            );
        }
    });
}

/// Logits that walk the loss stage's edges (docs/mesh.md "The loss stage"): NaN, ±∞, logits
/// so far apart that z − m overflows, gaps that make e subnormal or 0, subnormal logits, ties
/// and ±0.
fn edge_logits() -> Vec<(Vec<f32>, u32)> {
    let nan = f32::from_bits(0xffc0_0001);
    let snan = f32::from_bits(0x7f80_0001);
    let sub = f32::from_bits(1);
    vec![
        (vec![1.0, nan, 2.0], 0),
        (vec![1.0, snan, 2.0], 2),
        (vec![f32::INFINITY, 2.0], 1),
        (vec![f32::NEG_INFINITY, 2.0], 1),
        (vec![f32::NEG_INFINITY, 2.0], 0),
        (vec![f32::NEG_INFINITY, f32::NEG_INFINITY], 0),
        (vec![3e38, -3e38], 1),
        (vec![3e38, -3e38], 0),
        (vec![0.0, -90.0, -200.0], 0),
        (vec![0.0, -90.0, -200.0], 1),
        (vec![sub, -sub, 0.0], 0),
        (vec![-0.0, 0.0, -0.0, 0.0], 3),
        (vec![5.0, 5.0, 5.0], 2),
        (vec![-7.5], 0),
        (vec![88.0, 0.0, -16.0, 1e-30], 2),
        (vec![-1e30, -1e30 + 1e24, f32::MIN_POSITIVE], 2),
    ]
}

/// What the loss stage should leave for one sample: dz over the logits, the loss and the
/// flag. A label that is no class gives a NaN loss, flag +0 and dz = softmax without the
/// one-hot (ws_mesh_loss.v), which the golden function refuses: it is built from its parts.
fn loss_golden(z: &[u32], label: u32) -> (Vec<u32>, u32, u32) {
    use ws_common::golden::fp::{add, CANONICAL_NAN, NEG_ZERO, ONE};
    use ws_common::golden::mesh::funcs::{exp, SIGN};
    use ws_common::golden::mesh::loss::softmax_xent;
    use ws_common::golden::optim::fma;
    let mut dz = z.to_vec();
    if (label as usize) < z.len() {
        let r = softmax_xent(&mut dz, label as usize).unwrap();
        let flag = if r.pred == label as usize { ONE } else { 0 };
        return (dz, r.loss, flag);
    }
    // Softmax with no one-hot: the same operations, with −0 for every class.
    let mut with0 = z.to_vec();
    let r = softmax_xent(&mut with0, 0).unwrap();
    let neg_m = r.max ^ SIGN;
    for v in dz.iter_mut() {
        *v = fma(exp(add(*v, neg_m)), r.recip, NEG_ZERO);
    }
    (dz, CANONICAL_NAN, 0)
}

/// One LOSS run: B samples of C classes at `bases` = [logits, labels, (loss, flag)], then a
/// DUMP of dz and of the pairs, checked word for word. Returns the status.
fn run_loss(
    dut: &mut Dut,
    z: &[u32],
    labels: &[u32],
    c: usize,
    bases: [u32; 3],
    sink: Pattern,
) -> pe::Status {
    let b = labels.len();
    let [zb, lb, db] = bases;
    pe::load_sram(dut, zb, z);
    pe::load_sram(dut, lb, labels);
    let (b32, c32) = (b as u32, c as u32);
    pe::load_program(
        dut,
        &[
            Instr::Loss { b: b32, c: c32, src: zb, lab: lb, dst: db },
            Instr::Dump { src: zb, count: b32 * c32 },
            Instr::Dump { src: db, count: 2 * b32 },
        ],
    );
    let (st, out, _) = pe::run(dut, 3, &[], Pattern::Always, sink, 5000 * b as u64 * (c as u64 + 4));
    assert!(st.done && !st.err, "C={c} B={b}: {st:?}");
    assert_eq!(out.len(), b * c + 2 * b, "C={c} B={b}: words dumped");
    for s in 0..b {
        let (dz, loss, flag) = loss_golden(&z[s * c..(s + 1) * c], labels[s]);
        let ctx = format!("C={c} B={b} sample {s} z={:x?} label {}", &z[s * c..(s + 1) * c], labels[s]);
        for (i, want) in dz.iter().enumerate() {
            let got = out[s * c + i].0;
            assert!(got == *want, "{ctx}: dz_{i} {got:#010x}, golden {want:#010x}");
        }
        let (gl, gf) = (out[b * c + 2 * s].0, out[b * c + 2 * s + 1].0);
        assert!(gl == loss, "{ctx}: loss {gl:#010x}, golden {loss:#010x}");
        assert!(gf == flag, "{ctx}: flag {gf:#010x}, golden {flag:#010x}");
    }
    st
}

#[test]
fn loss_stage_is_bit_exact() {
    run_test("mesh_pe_loss", &spec(), 0x1055, |dut| {
        dut.reset(4);
        let mut rng = dut.rng(7);
        // Random logits of every size class, labels anywhere; FMA count and cycles when no
        // exp or ln meets a special value (16·C + 13 FMAs a sample, docs/mesh-pe.md).
        for (c, b, spread, sink) in [
            (10, 4, 8.0f32, Pattern::Always),
            (1, 2, 3.0, Pattern::Mixed),
            (2, 3, 1.0, Pattern::Random(0.5)),
            (17, 5, 30.0, Pattern::Always),
            (10, 16, 4.0, Pattern::Bursty { on: 4.0, off: 9.0 }),
        ] {
            let z: Vec<u32> = (0..b * c).map(|_| rng.random_range(-spread..spread).to_bits()).collect();
            let labels: Vec<u32> = (0..b).map(|_| rng.random_range(0..c as u32)).collect();
            let bases = [7, 2000 + c as u32, PARAMS.sram_words - 2 * b as u32];
            let st = run_loss(dut, &z, &labels, c, bases, sink);
            assert_eq!(st.fma, (b * (16 * c + 13)) as u64, "C={c} B={b}: FMAs");
            // Latency-bound: (FMA_LAT + 2) cycles an FMA, 85·C + 131 a sample at FMA_LAT 3,
            // 27 fewer for C = 1 (ln(1): f = 0, a one-cycle division), one to start.
            let per = 85 * c + 131 - if c == 1 { 27 } else { 0 };
            assert_eq!(st.loss_cycles, (b * per + 1) as u64, "C={c} B={b}: LOSS cycles");
            eprintln!(
                "loss C={c:<2} B={b:<2}: {} FMAs, {} LOSS cycles ({:.1} a sample)",
                st.fma,
                st.loss_cycles,
                st.loss_cycles as f64 / b as f64
            );
        }
        // Wide logits (exp underflows to subnormals and 0, e^88 near the top) and edge values.
        for _ in 0..4 {
            let (c, b) = (rng.random_range(1..12usize), rng.random_range(1..6usize));
            let z: Vec<u32> = (0..b * c)
                .map(|_| {
                    if rng.random_range(0..3) == 0 {
                        tb::operand(&mut rng)
                    } else {
                        rng.random_range(-120.0f32..90.0).to_bits()
                    }
                })
                .collect();
            let labels: Vec<u32> = (0..b).map(|_| rng.random_range(0..c as u32)).collect();
            run_loss(dut, &z, &labels, c, [100, 50, 1000], Pattern::Mixed);
        }
        for (z, label) in edge_logits() {
            let z: Vec<u32> = z.iter().map(|v| v.to_bits()).collect();
            run_loss(dut, &z, &[label], z.len(), [300, 299, 0], Pattern::Always);
        }
        // Labels that are no class: a NaN loss, flag +0, no one-hot.
        let z: Vec<u32> = [1.0f32, -2.0, 0.5, 3.0, 0.0, 1.0].iter().map(|v| v.to_bits()).collect();
        run_loss(dut, &z, &[3, u32::MAX], 3, [10, 20, 30], Pattern::Always);
    });
}
