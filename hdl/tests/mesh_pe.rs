//! `ws_mesh_pe` alone (docs/mesh-pe.md): dense-layer forwards bit-exact against
//! `ws_common::golden::mesh::dense::forward`, the FMA utilisation at B = 1, 2, 4 and 8,
//! and the refusal of bad programs before they run.
//!
//! One model (FMA_LAT 3, MAX_B 16, SRAM_WORDS 3000 — not a power of two —, PROG_DEPTH 8)
//! serves every test: FPnew builds take minutes on this machine.

use rand::rngs::StdRng;
use rand::RngExt;
use ws_common::golden::mesh::dense;
use ws_common::golden::mesh::Layer;
use ws_hdl::dut::{run_test, BlockSpec, Dut, Pattern};
use ws_hdl::mesh_pe::{self as pe, err, Instr, PeParams};
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
