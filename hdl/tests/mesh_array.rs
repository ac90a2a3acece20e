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

use ws_common::flit::{Flit, Kind};
use ws_common::golden::mesh::{Layer, StreamLayout};
use ws_common::mesh::{ALL_PES, CFG_CTRL, CFG_PROG};
use ws_hdl::dut::{run_test, Dut, Pattern};
use ws_hdl::mesh::Geometry;
use ws_hdl::mesh_pe::Instr;
use ws_hdl::mesh_top::scenario::{
    checked_routes, draw, run_case, spec, value, Case, Map, Values, FULL, MIXED, TEST_PE as PE,
};
use ws_hdl::mesh_top::{self as top, Patterns};

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
            let ph = r.phases;
            eprintln!(
                "  {b:<3} {:<9} {:<8} {:.4}            {:.4}    {:.4}   {:.4}     ingress {:.4} words/cycle, reduction {:.4} per link ({} links)",
                r.fmas,
                r.out.cycles,
                per(r.fmas, 16 * r.out.cycles),
                per(fma_layer, r.fwd_cycles),
                per(fma_layer, r.dx_cycles),
                per((b * 40 * 65) as u64, r.grad_cycles),
                per(r.weight_words / 2, ph.fwd_end - ph.fwd_start + 1),
                per(r.reduce_link_flits, r.reduce_links * r.grad_cycles),
                r.reduce_links
            );
            // The snake: 15 hops between the 16 PEs' routers and the hop out of its end to the
            // gradient egress, each carrying every partial sum of the layer once.
            assert_eq!(r.reduce_links, 16, "links on the snake");
            assert_eq!(r.reduce_link_flits, 16 * 40 * 65, "partial sums on the snake's links");
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
            top::Segment { layer: 5, chunk_words: 2, words: 3, metrics: false },
            top::Segment { layer: 1, chunk_words: 3, words: 3, metrics: false },
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

/// Two steps back to back, the second's samples written into the other buffer through the
/// PEs' sample ports while the first runs (random backpressure on every edge), the second's
/// program started from instruction `len`: both bit-exact with their golden steps.
#[test]
fn samples_for_the_next_step_while_a_step_runs() {
    use ws_hdl::mesh_top::step::{run_overlapped, StepCase};
    run_test("mesh_array_overlap_2x2", &spec(2), 0x0b1a, |dut| {
        dut.reset(4);
        top::configure_routes(dut, &checked_routes(2));
        let mut rng = dut.rng(5);
        for c in [
            StepCase {
                dims: vec![6, 5, 3],
                b: 3,
                n: 10,
                rows_per_chunk: 2,
                values: Values::Mild(20),
                params: Values::Mild(20),
                pats: MIXED,
            },
            StepCase {
                dims: vec![9, 7, 3],
                b: 2,
                n: 5,
                rows_per_chunk: 3,
                values: Values::Uniform(1.0),
                params: Values::Uniform(1.0),
                pats: FULL,
            },
        ] {
            let [a, b] = run_overlapped(dut, &mut rng, 2, &c);
            eprintln!("{:?}: {} and {} cycles", c.dims, a.out.cycles, b.out.cycles);
        }
    });
}

/// Three steps back to back on two sample buffers, started once and then chained by the array
/// itself (docs/mesh-array.md "Chained steps"): CHAIN armed during each step, the next step's
/// samples streaming into the other buffer and its weights waiting at the ingress before the
/// chain fires, random backpressure on every edge. Every step is bit-exact with its golden
/// step, its gradient and metrics headers carry its own step (numbered from one STEP write,
/// through the 16-bit wrap), and the marks are the steps' (`run_chained`). Then a PE that
/// refuses the chained program stops the chain.
#[test]
fn chained_steps() {
    use ws_common::mesh::{start_word, REG_CHAIN};
    use ws_hdl::mesh_top::step::{run_chained, StepCase};
    run_test("mesh_array_chain_2x2", &spec(2), 0xc4a1, |dut| {
        dut.reset(4);
        top::configure_routes(dut, &checked_routes(2));
        let mut rng = dut.rng(6);
        let c = StepCase {
            dims: vec![6, 5, 3],
            b: 3,
            n: 10,
            rows_per_chunk: 2,
            values: Values::Mild(20),
            params: Values::Mild(20),
            pats: Patterns {
                weights: Pattern::Random(0.6),
                grads: Pattern::Random(0.5),
                results: Pattern::Mixed,
            },
        };
        let r = run_chained(dut, &mut rng, 2, &c, 3, 0xfffe);
        for (k, s) in r.steps.iter().enumerate() {
            eprintln!(
                "step {k} ({:#06x}): {} cycles, {} FMAs",
                s.out.grads[0].header.step, s.out.cycles, s.fmas
            );
        }
        for (f, a) in r.chain.fires.iter().zip(&r.chain.advances) {
            eprintln!(
                "fire at {}: {} FMAs so far, advance {} ({} cycles later) at {} gradient words",
                f.cycle,
                f.latched_fmas,
                if f.pending { "pending" } else { "at once" },
                a.cycle - f.cycle,
                a.latched_grad
            );
        }
        // The next step's first weight words were taken before its fire: they waited in the
        // array.
        for k in 1..3 {
            let first = r.steps[k].out.weight_times[0];
            assert!(first < r.chain.fires[k - 1].cycle, "step {k}'s first weight word before its fire");
        }
        // The phase timestamps start the chained step at the fire: the last step's layer 1
        // forward begins with its first word, taken after the fire (layer 0's first words,
        // taken before it, are not stamped reliably: docs/mesh-array.md "Chained steps").
        let last = &r.steps[2];
        let l1 = c.dims[1] * (c.dims[0] + 1);
        assert!(last.out.weight_times[l1] > r.chain.fires[1].cycle, "layer 1 after the fire");
        assert_eq!(
            top::phases(dut, 1).fwd_start,
            last.out.weight_times[l1],
            "the last step's layer 1 forward start"
        );

        // A PE that refuses the chained program stops the chain: PE 3's instruction 0 gets a
        // reserved opcode, the others' a MASK (no weights); the chain fires into it once, PE 3
        // refuses, and CHAIN armed again does not fire.
        let get = |dut: &Dut, name: &str| dut.get(dut.port(name));
        let chains = get(dut, "chain_count");
        for pe in 0..4u8 {
            let words = if pe == 3 { [0xf, 0, 0] } else { Instr::Mask { src: 0, dst: 16, count: 1 }.words() };
            for (w, word) in words.iter().enumerate() {
                top::cfg_write(dut, pe, CFG_PROG + w as u16, *word);
            }
        }
        top::cfg_write(dut, top::TOP_REGS, REG_CHAIN, start_word(0, 1));
        tick(dut, 40);
        assert_eq!(get(dut, "chain_count"), chains + 1, "the chain fires into the refused program");
        assert_eq!((get(dut, "stat_done"), get(dut, "stat_err")), (0b0111, 0b1000), "PE 3 refused");
        assert_eq!(get(dut, "stat_err_code") >> 12, 3, "PE 3's code: OP");
        top::cfg_write(dut, top::TOP_REGS, REG_CHAIN, start_word(0, 1));
        tick(dut, 200);
        assert_eq!(get(dut, "chain_count"), chains + 1, "no chain from a refused program");
        assert_eq!(get(dut, "chain_armed"), 1, "still armed");
        top::cfg_write(dut, top::TOP_REGS, REG_CHAIN, 0);
        assert_eq!(get(dut, "chain_armed"), 0, "disarmed");
    });
}

/// The advance of a chained step waits for the ended step's last gradient word and goes with
/// it (the next word is the new step's first, back to back), or goes at the fire when the
/// table is already exhausted; a STEP write cancels a pending advance; a disarmed CHAIN does
/// not fire. One GRAD of K = 0 per PE: one word (or 64) out of the snake per step, the egress
/// held closed so the words wait in the array.
#[test]
fn chain_advance_cancel_and_disarm() {
    use ws_common::flit::Header;
    use ws_common::mesh::{start_word, REG_CHAIN, REG_STEP};
    run_test("mesh_array_chain_advance", &spec(2), 0xad7a, |dut| {
        dut.reset(4);
        top::configure_routes(dut, &checked_routes(2));
        let g = Geometry::new(2, 2);
        for r in 0..4 {
            let head = (0..4).find(|&p| top::snake_router(g, p) == r) == Some(0);
            let grad = |m| Instr::Grad { head, b: u32::from(head), k: 0, m, x: 0, dz: 0 };
            top::load_program_at(dut, r as u8, 0, &[grad(1)]);
            top::load_program_at(dut, r as u8, 1, &[grad(64)]);
        }
        let seg = top::Segment { layer: 2, chunk_words: 1, words: 1, metrics: false };
        top::configure_step(dut, 0x100, &[seg]);
        let get = |dut: &Dut, name: &str| dut.get(dut.port(name));
        let chain =
            |dut: &mut Dut, base: u8| top::cfg_write(dut, top::TOP_REGS, REG_CHAIN, start_word(base, 1));
        let ready = dut.port("m_g_ready");
        dut.set(ready, 0);
        let wait_done = |dut: &mut Dut| {
            for _ in 0..500 {
                if dut.get(dut.port("stat_done")) == 0xf {
                    return;
                }
                dut.tick();
            }
            panic!("the PEs did not finish");
        };
        // Takes `n` words at the egress: (kind, step, chunk, index).
        let take = |dut: &mut Dut, n: usize| {
            let mut got = Vec::new();
            dut.set(ready, 1);
            for _ in 0..2000 {
                dut.eval();
                if dut.get_bool(dut.port("m_g_valid")) {
                    let h = Header::unpack(dut.get(dut.port("m_g_user"))).expect("a header");
                    got.push((h.kind, h.step, h.chunk, h.index));
                }
                dut.tick();
                if got.len() == n {
                    break;
                }
            }
            dut.set(ready, 0);
            dut.eval();
            assert_eq!(got.len(), n, "words at the egress");
            got
        };
        let (gk, ek) = (Kind::Gradient, Kind::Error);

        top::cfg_write(dut, ALL_PES, CFG_CTRL, start_word(0, 1));
        wait_done(dut);
        // Fire 1: step 0x100's word still waits at the egress, so the advance is pending.
        chain(dut, 0);
        tick(dut, 2);
        assert_eq!((get(dut, "chain_count"), get(dut, "chain_armed")), (1, 0), "fire 1");
        assert_eq!(get(dut, "chain_pending"), 1, "fire 1's advance waits for the word");
        wait_done(dut);
        // The advance goes with the word; the chained step's word, right behind it, is the
        // new step's segment 0.
        assert_eq!(take(dut, 1), vec![(gk, 0x100, 0, 0)], "the ended step's word");
        assert_eq!((get(dut, "chain_pending"), get(dut, "chain_grad")), (0, 1), "advanced with it");
        assert_eq!(take(dut, 1), vec![(gk, 0x101, 0, 0)], "the chained step's word");
        // Fire 2 into an exhausted table: the advance goes at once.
        chain(dut, 0);
        tick(dut, 2);
        assert_eq!(get(dut, "chain_count"), 2, "fire 2");
        assert_eq!((get(dut, "chain_pending"), get(dut, "chain_grad")), (0, 2), "advanced at the fire");
        wait_done(dut);
        // Fire 3 while step 0x102's word waits; a STEP write cancels its advance.
        chain(dut, 0);
        tick(dut, 2);
        assert_eq!((get(dut, "chain_count"), get(dut, "chain_pending")), (3, 1), "fire 3");
        top::cfg_write(dut, top::TOP_REGS, REG_STEP, 0x300);
        assert_eq!(get(dut, "chain_pending"), 0, "STEP cancels the advance");
        wait_done(dut);
        assert_eq!(take(dut, 2), vec![(gk, 0x300, 0, 0), (ek, 0x300, 0, 0)], "no advance after STEP");
        assert_eq!((get(dut, "chain_grad"), get(dut, "stat_grad_overrun")), (2, 1), "no advance latched");

        // Fire 4 into the 64-row program: the advance clears the overrun at once; the PEs stay
        // busy behind the closed egress. CHAIN armed meanwhile and then disarmed never fires.
        chain(dut, 1);
        tick(dut, 2);
        assert_eq!(get(dut, "chain_count"), 4, "fire 4");
        assert_eq!((get(dut, "chain_grad"), get(dut, "stat_grad_overrun")), (4, 0), "advanced at the fire");
        chain(dut, 0);
        tick(dut, 100);
        assert_eq!((get(dut, "chain_count"), get(dut, "chain_armed")), (4, 1), "armed while the PEs run");
        assert_ne!(get(dut, "stat_busy"), 0, "the PEs wait for the egress");
        top::cfg_write(dut, top::TOP_REGS, REG_CHAIN, 0);
        assert_eq!(get(dut, "chain_armed"), 0, "disarmed");
        let words = take(dut, 64);
        assert_eq!(words[0], (gk, 0x301, 0, 0), "the 64-row step's first word");
        assert!(words[1..].iter().all(|w| w.0 == ek), "the rest beyond the table");
        wait_done(dut);
        tick(dut, 100);
        assert_eq!((get(dut, "chain_count"), get(dut, "chain_armed")), (4, 0), "no fire once disarmed");
        assert_eq!(get(dut, "cnt_grad_words"), 68, "every word counted");
    });
}

/// `n` clock cycles with the inputs as they are.
fn tick(dut: &mut Dut, n: usize) {
    for _ in 0..n {
        dut.tick();
    }
}

/// Whole MLP steps: forward, loss, metrics and backward from one program per PE, the gradient
/// egress and the metrics egress bit-exact with `golden::mesh::step::run`: the issue's
/// 64→128→64→10 on 4×4 with B = 4 (a full batch, and one that leaves PEs short and empty,
/// under random backpressure), and a small MLP with edge values on 2×2.
#[test]
fn whole_mlp_step() {
    use ws_hdl::mesh_top::step::{run_step, StepCase};
    for (side, seed) in [(2usize, 0x57e9u64), (4, 0x57ea)] {
        run_test(&format!("mesh_array_step_{side}x{side}"), &spec(side), seed, |dut| {
            dut.reset(4);
            top::configure_routes(dut, &checked_routes(side));
            let mut rng = dut.rng(3);
            let cases = if side == 2 {
                vec![
                    StepCase {
                        dims: vec![5, 7, 6, 3],
                        b: 4,
                        n: 7,
                        rows_per_chunk: 2,
                        values: Values::Mild(20),
                        params: Values::Mild(20),
                        pats: MIXED,
                    },
                    StepCase {
                        dims: vec![9, 4, 1],
                        b: 2,
                        n: 3,
                        rows_per_chunk: 3,
                        values: Values::Uniform(1.0),
                        params: Values::Uniform(1.0),
                        pats: FULL,
                    },
                ]
            } else {
                let mlp = vec![64, 128, 64, 10];
                vec![
                    StepCase {
                        dims: mlp.clone(),
                        b: 4,
                        n: 64,
                        rows_per_chunk: 4,
                        values: Values::Uniform(1.0),
                        params: Values::Uniform(0.15),
                        pats: FULL,
                    },
                    StepCase {
                        dims: mlp,
                        b: 4,
                        n: 50,
                        rows_per_chunk: 3,
                        values: Values::Uniform(1.0),
                        params: Values::Uniform(0.15),
                        pats: MIXED,
                    },
                ]
            };
            for c in &cases {
                let r = run_step(dut, &mut rng, side, c);
                let m = r.golden.metrics;
                eprintln!(
                    "{side}x{side} {:?} B={} N={}: {} cycles, {} FMAs, ideal {} MACs: loss sum {:e}, {} of {} correct",
                    c.dims,
                    c.b,
                    c.n,
                    r.out.cycles,
                    r.fmas,
                    r.ideal_macs,
                    f32::from_bits(m.loss),
                    m.correct,
                    m.samples
                );
            }
        });
    }
}
