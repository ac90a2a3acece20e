//! Whole-step tests: a step worked by hand, the documented orders against explicit loops,
//! mesh independence, uneven shapes, a finite-difference check against binary64, the
//! streams, and bad input.

// The reference model spells the documented orders out as index loops on purpose.
#![allow(clippy::needless_range_loop)]

extern crate std;

use super::dense::relu_grad;
use super::funcs::{exp, ln, SIGN};
use super::loss::softmax_xent;
use super::step::{self, run, weight_flits, Metrics};
use super::*;
use crate::flit::{Header, Kind};
use crate::golden::fp::{add, is_nan, CANONICAL_NAN, NEG_ZERO, ONE, POS_INF, POS_ZERO};
use crate::golden::optim::{div, fma};
use std::println;
use std::vec::Vec;

fn f(x: f32) -> u32 {
    x.to_bits()
}

fn v(x: u32) -> f64 {
    f64::from(f32::from_bits(x))
}

/// xorshift64*: deterministic data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [−1, 1).
    fn unit(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 23) as f32) - 1.0
    }

    fn below(&mut self, n: u32) -> u32 {
        ((self.next() >> 32) % u64::from(n)) as u32
    }
}

/// Parameters scaled like a He init, biases small.
fn init(model: &Model<'_>, rng: &mut Rng) -> Vec<u32> {
    let mut p = Vec::new();
    for l in 0..model.layers() {
        let layer = model.layer(l).unwrap();
        let scale = (2.0 / layer.inputs as f32).sqrt();
        for _ in 0..layer.outputs {
            p.push(f(0.1 * rng.unit()));
            for _ in 0..layer.inputs {
                p.push(f(scale * rng.unit()));
            }
        }
    }
    p
}

fn batch(model: &Model<'_>, n: usize, rng: &mut Rng) -> (Vec<u32>, Vec<u32>) {
    let x = (0..n * model.dims[0]).map(|_| f(rng.unit())).collect();
    let y = (0..n).map(|_| rng.below(model.classes() as u32)).collect();
    (x, y)
}

fn config(dims: &[usize], rows: usize, cols: usize, b: usize, order: Reduce) -> Config<'_> {
    Config {
        mesh: Mesh::new(rows, cols, b),
        model: Model::new(dims),
        sram: Sram::from_bytes(64 * 1024, 64),
        stream: StreamLayout::new(4),
        order,
    }
}

/// The documented Snake orders as plain loops over samples, rows and columns, written
/// without the module's kernels (only its loss stage, tested on its own).
fn reference(dims: &[usize], params: &[u32], x: &[u32], labels: &[u32]) -> (Vec<u32>, Metrics) {
    let model = Model::new(dims);
    let layers = model.layers();
    let n = labels.len();
    let w = |l: usize, i: usize, k: usize| params[model.param_offset(l) + i * (dims[l] + 1) + 1 + k];
    let b = |l: usize, i: usize| params[model.param_offset(l) + i * (dims[l] + 1)];
    // acts[l][s][k]: the input of layer l (acts[0] = x).
    let mut acts: Vec<Vec<Vec<u32>>> =
        std::vec![(0..n).map(|s| x[s * dims[0]..(s + 1) * dims[0]].to_vec()).collect()];
    for l in 0..layers {
        let mut next = Vec::new();
        for s in 0..n {
            let mut out = Vec::new();
            for i in 0..dims[l + 1] {
                let mut acc = b(l, i);
                for k in 0..dims[l] {
                    acc = fma(w(l, i, k), acts[l][s][k], acc);
                }
                if l + 1 < layers {
                    acc = if is_nan(acc) {
                        CANONICAL_NAN
                    } else if acc >> 31 != 0 {
                        POS_ZERO
                    } else {
                        acc
                    };
                }
                out.push(acc);
            }
            next.push(out);
        }
        acts.push(next);
    }
    let mut dz: Vec<Vec<u32>> = acts[layers].clone();
    let (mut loss, mut correct) = (NEG_ZERO, 0);
    for s in 0..n {
        let r = softmax_xent(&mut dz[s], labels[s] as usize).unwrap();
        loss = add(loss, r.loss);
        correct += u32::from(r.pred == labels[s] as usize);
    }
    let mut grads = std::vec![0u32; model.param_words()];
    for l in (0..layers).rev() {
        let off = model.param_offset(l);
        for i in 0..dims[l + 1] {
            let mut db = NEG_ZERO;
            for dzs in &dz {
                db = fma(dzs[i], ONE, db);
            }
            grads[off + i * (dims[l] + 1)] = db;
            for k in 0..dims[l] {
                let mut acc = NEG_ZERO;
                for s in 0..n {
                    acc = fma(dz[s][i], acts[l][s][k], acc);
                }
                grads[off + i * (dims[l] + 1) + 1 + k] = acc;
            }
        }
        if l > 0 {
            let mut below = Vec::new();
            for s in 0..n {
                let mut dx = std::vec![NEG_ZERO; dims[l]];
                for i in 0..dims[l + 1] {
                    for (k, d) in dx.iter_mut().enumerate() {
                        *d = fma(w(l, i, k), dz[s][i], *d);
                    }
                }
                below.push((0..dims[l]).map(|k| relu_grad(acts[l][s][k], dx[k])).collect());
            }
            dz = below;
        }
    }
    (grads, Metrics { loss, correct, samples: n as u32 })
}

/// A 2→2→2 step worked through by hand, operation by operation.
#[test]
fn tiny_step_by_hand() {
    let dims = [2, 2, 2];
    // Layer 0: W = [[1, 0], [0, -1]], b = [0, 0.5]. Layer 1: W = [[1, 1], [-1, 2]], b = [0, 1].
    let p: Vec<u32> =
        [0.0f32, 1.0, 0.0, 0.5, 0.0, -1.0, 0.0, 1.0, 1.0, 1.0, -1.0, 2.0].iter().map(|x| f(*x)).collect();
    let x = [f(1.0), f(2.0)];
    let cfg = config(&dims, 1, 1, 1, Reduce::Snake);
    let out = run(&cfg, &p, &x, &[0]).unwrap();
    // z0 = [1, 0.5 - 2] → y0 = [1, 0]; logits = [1 + 1·0, 1 - 1 + 0] = [1, 0].
    assert_eq!(out.outputs[0], [f(1.0), POS_ZERO]);
    assert_eq!(out.outputs[1], [f(1.0), POS_ZERO]);
    // Softmax: d = [+0, -1], e = [1, exp(-1)], S = 1 + e, r = 1/S.
    let e1 = exp(f(-1.0));
    let s = add(add(NEG_ZERO, ONE), e1);
    let r = div(ONE, s);
    let dz = [fma(ONE, r, ONE | SIGN), fma(e1, r, NEG_ZERO)];
    assert_eq!(out.logit_grad, dz);
    assert_eq!(out.metrics, Metrics { loss: add(ln(s), POS_ZERO ^ SIGN), correct: 1, samples: 1 });
    assert!((v(out.metrics.loss) - (1.0 + (-1f64).exp()).ln()).abs() < 1e-7);
    // Layer 1 gradient: db = dz, dW[i][k] = dz_i · y0_k. dz0 < 0, so dz0·(+0) = -0.
    let g1 = out.layer_grad(&cfg.model, 1);
    assert_eq!(g1, [dz[0], dz[0], NEG_ZERO, dz[1], dz[1], POS_ZERO]);
    // dx = W1ᵀ dz from -0 over the rows; the ReLU keeps unit 0 (y = 1), drops unit 1 (y = 0).
    let dx0 = fma(f(-1.0), dz[1], fma(ONE, dz[0], NEG_ZERO));
    let g0 = out.layer_grad(&cfg.model, 0);
    // Layer 0: db = [dx0, +0], dW row 0 = dx0·[1, 2], row 1 = (+0)·[1, 2] = +0.
    let two_dx0 = fma(dx0, f(2.0), NEG_ZERO);
    assert_eq!(g0, [dx0, dx0, two_dx0, POS_ZERO, POS_ZERO, POS_ZERO]);
    let p0 = 1.0 / (1.0 + (-1f64).exp());
    assert!((v(dx0) - ((p0 - 1.0) - (1.0 - p0))).abs() < 1e-7, "dx0 = dz0 - dz1");
}

/// The step is the documented chain of operations (an independent loop nest) for uneven
/// shapes, partial batches, batch per PE 1, 2, 4 and meshes 2×2, 4×4.
#[test]
fn step_is_the_documented_order() {
    let dims = [5, 7, 3];
    let mut rng = Rng(0x5eed_1234);
    let model = Model::new(&dims);
    let p = init(&model, &mut rng);
    for (rows, cols, b, n) in [
        (2, 2, 1, 3),
        (2, 2, 2, 8),
        (2, 2, 4, 13),
        (4, 4, 1, 16),
        (4, 4, 2, 23),
        (4, 4, 4, 64),
        (3, 2, 2, 11),
    ] {
        let (x, y) = batch(&model, n, &mut rng);
        let (want, metrics) = reference(&dims, &p, &x, &y);
        let got = run(&config(&dims, rows, cols, b, Reduce::Snake), &p, &x, &y).unwrap();
        assert_eq!(got.grads, want, "{rows}x{cols} B={b} N={n}");
        assert_eq!(got.metrics, metrics, "{rows}x{cols} B={b} N={n}");
    }
}

/// 64→128→64→10 with 64 samples: Snake gives the same bits on 2×2 (B = 16), 4×4 (B = 4), 8×8
/// (B = 1) and a half-empty 4×4 (B = 8); RowCol gives per-mesh bits, of which per-sample
/// values are still the same.
#[test]
fn snake_is_mesh_independent_rowcol_is_not() {
    let dims = [64, 128, 64, 10];
    let model = Model::new(&dims);
    let mut rng = Rng(0xabcd_ef01);
    let p = init(&model, &mut rng);
    let (x, y) = batch(&model, 64, &mut rng);
    let meshes = [(2, 2, 16), (4, 4, 4), (8, 8, 1), (4, 4, 8)];
    let snake: Vec<_> = meshes
        .iter()
        .map(|(r, c, b)| run(&config(&dims, *r, *c, *b, Reduce::Snake), &p, &x, &y).unwrap())
        .collect();
    for (m, s) in meshes.iter().zip(&snake).skip(1) {
        assert_eq!(s, &snake[0], "{m:?}");
    }
    let rowcol: Vec<_> = meshes[..3]
        .iter()
        .map(|(r, c, b)| run(&config(&dims, *r, *c, *b, Reduce::RowCol), &p, &x, &y).unwrap())
        .collect();
    let differ = |a: &[u32], b: &[u32]| a.iter().zip(b).filter(|(x, y)| x != y).count();
    for r in &rowcol {
        assert_eq!(
            (&r.outputs, &r.logit_grad, &r.sample_losses),
            (&snake[0].outputs, &snake[0].logit_grad, &snake[0].sample_losses)
        );
        assert_eq!(r.metrics.correct, snake[0].metrics.correct);
    }
    let d22 = differ(&rowcol[0].grads, &rowcol[2].grads);
    let ds = differ(&rowcol[1].grads, &snake[0].grads);
    println!("RowCol 2×2 vs 8×8: {d22} of {} gradient words differ; RowCol 4×4 vs Snake: {ds}", p.len());
    assert!(d22 > 0 && ds > 0, "the reduction order is observable");
    // RowCol's bits are its documented funnel: check one word by hand on the 8×8 mesh.
    let out = &rowcol[2];
    let (l, i, k) = (2, 3, 5);
    let off = model.param_offset(l) + i * 65 + 1 + k;
    let x_l = &snake[0].outputs[1]; // the input of layer 2
    let dz = &out.logit_grad;
    let mesh = Mesh::new(8, 8, 1);
    let g = |row: usize, col: usize| {
        let s = mesh.snake_pos(Pe { row, col }).unwrap();
        fma(dz[s * 10 + i], x_l[s * 64 + k], NEG_ZERO)
    };
    let mut t = None;
    for row in (0..8).rev() {
        let mut line = g(row, 7);
        for col in (0..7).rev() {
            line = add(line, g(row, col));
        }
        t = Some(t.map_or(line, |t| add(t, line)));
    }
    assert_eq!(out.grads[off], t.unwrap());
}

/// The f64 model of the same MLP (library exp and ln): the loss sum of a batch.
fn loss_f64(dims: &[usize], params: &[f64], x: &[f64], labels: &[u32], pre: &mut Vec<f64>) -> f64 {
    let layers = dims.len() - 1;
    let n = labels.len();
    let mut total = 0.0;
    for s in 0..n {
        let mut a: Vec<f64> = x[s * dims[0]..(s + 1) * dims[0]].to_vec();
        let mut off = 0;
        for l in 0..layers {
            let mut next = Vec::new();
            for i in 0..dims[l + 1] {
                let row = &params[off + i * (dims[l] + 1)..off + (i + 1) * (dims[l] + 1)];
                let z = row[0] + row[1..].iter().zip(&a).map(|(w, x)| w * x).sum::<f64>();
                if l + 1 < layers {
                    pre.push(z);
                }
                next.push(if l + 1 < layers { z.max(0.0) } else { z });
            }
            off += dims[l + 1] * (dims[l] + 1);
            a = next;
        }
        let m = a.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = a.iter().map(|z| (z - m).exp()).sum();
        total += sum.ln() - (a[labels[s] as usize] - m);
    }
    total
}

/// The golden gradients against central differences of the binary64 model: every parameter
/// of a 3→4→3 model, 5 samples on a 2×2 mesh with B = 2, within 10^−6·(1 + |g|).
#[test]
fn finite_difference_check_against_f64() {
    const TOL: f64 = 1e-6;
    let dims = [3, 4, 3];
    let model = Model::new(&dims);
    let mut rng = Rng(0x0fd0_c4ec);
    let p = init(&model, &mut rng);
    let (x, y) = batch(&model, 5, &mut rng);
    let out = run(&config(&dims, 2, 2, 2, Reduce::Snake), &p, &x, &y).unwrap();
    let p64: Vec<f64> = p.iter().map(|w| v(*w)).collect();
    let x64: Vec<f64> = x.iter().map(|w| v(*w)).collect();
    let mut pre = Vec::new();
    let l0 = loss_f64(&dims, &p64, &x64, &y, &mut pre);
    // No hidden unit sits near the ReLU's kink, where a difference quotient is meaningless.
    assert!(pre.iter().all(|z| z.abs() > 1e-3), "{pre:?}");
    assert!((v(out.metrics.loss) - l0).abs() < 1e-5 * l0, "loss {} vs {l0}", v(out.metrics.loss));
    let mut worst = 0.0f64;
    for j in 0..p.len() {
        let h = 1e-6;
        let mut q = p64.clone();
        q[j] += h;
        let up = loss_f64(&dims, &q, &x64, &y, &mut Vec::new());
        q[j] -= 2.0 * h;
        let down = loss_f64(&dims, &q, &x64, &y, &mut Vec::new());
        let fd = (up - down) / (2.0 * h);
        let g = v(out.grads[j]);
        let err = (g - fd).abs() / (1.0 + fd.abs());
        worst = worst.max(err);
        assert!(err <= TOL, "parameter {j}: golden {g}, finite difference {fd}");
    }
    println!("finite-difference check: worst |g − fd|/(1 + |fd|) = {worst:.2e} (tolerance {TOL:e})");
}

#[test]
fn streams_carry_layer_chunk_step() {
    let dims = [5, 7, 3];
    let model = Model::new(&dims);
    let cfg = Config { stream: StreamLayout::new(3), ..config(&dims, 2, 2, 1, Reduce::Snake) };
    let mut rng = Rng(3);
    let p = init(&model, &mut rng);
    let (x, y) = batch(&model, 4, &mut rng);
    let out = run(&cfg, &p, &x, &y).unwrap();
    let flits = out.gradient_flits(&cfg, 0x1_2345u32 as u16).unwrap();
    assert_eq!(flits.len(), p.len());
    // Layer 1 (3 rows of 8 words: one chunk of 24) leaves first, then layer 0 (7 rows of 6:
    // chunks of 18, 18, 6).
    let l1: Vec<_> = flits[..24].to_vec();
    assert!(l1
        .iter()
        .enumerate()
        .all(|(i, fl)| fl.header == Header::new(Kind::Gradient, 1, 0x2345, 0, i as u16)));
    assert_eq!(l1.iter().filter(|fl| fl.last).count(), 1);
    assert!(l1[23].last);
    let l0 = &flits[24..];
    let heads: Vec<(u16, u16, bool)> =
        l0.iter().map(|fl| (fl.header.chunk, fl.header.index, fl.last)).collect();
    assert_eq!(heads[17], (0, 17, true));
    assert_eq!(heads[18], (1, 0, false));
    assert_eq!(heads[41], (2, 5, true));
    let payloads: Vec<u32> = flits.iter().map(|fl| fl.payload).collect();
    assert_eq!(&payloads[..24], out.layer_grad(&model, 1));
    assert_eq!(&payloads[24..], out.layer_grad(&model, 0));
    let w = weight_flits(&cfg, &p, 7).unwrap();
    assert_eq!(w.iter().map(|fl| fl.payload).collect::<Vec<_>>(), p);
    assert_eq!(w[0].header, Header::new(Kind::Weight, 0, 7, 0, 0));
    assert_eq!(w[42].header, Header::new(Kind::Weight, 1, 7, 0, 0));
    assert!(weight_flits(&cfg, &p[1..], 7).is_err());
}

/// NaN, ±∞, huge and subnormal values go through the step by the documented rules, and
/// never panic.
#[test]
fn edge_values_follow_the_rules() {
    let dims = [4, 6, 3];
    let model = Model::new(&dims);
    let mut rng = Rng(77);
    let p = init(&model, &mut rng);
    let cfg = config(&dims, 2, 2, 1, Reduce::Snake);
    let (mut x, y) = batch(&model, 4, &mut rng);
    // Sample 1 has a NaN input, sample 2 an infinite one, sample 3 only subnormal inputs.
    x[4] = 0x7f80_0001;
    x[9] = POS_INF;
    for w in &mut x[12..16] {
        *w = (*w & SIGN) | 0x0000_0400;
    }
    let out = run(&cfg, &p, &x, &y).unwrap();
    let (want, metrics) = reference(&dims, &p, &x, &y);
    assert_eq!((&out.grads, out.metrics), (&want, metrics));
    assert!(out.outputs[1][3..6].iter().all(|z| *z == CANONICAL_NAN), "NaN poisons sample 1");
    assert_eq!(out.sample_losses[1], CANONICAL_NAN);
    assert_eq!(out.metrics.loss, CANONICAL_NAN, "and the batch loss");
    assert!(!is_nan(out.sample_losses[0]) && !is_nan(out.sample_losses[3]));
    // Sample 3's outputs are the biases' chains, subnormal products kept (no flush to zero).
    let first = super::dense::dot(&p[..5], &x[12..16]).unwrap();
    assert_eq!(out.outputs[0][18], super::dense::relu(first));
    // Huge weights: the logits overflow to ±inf; still no panic, and the loss is NaN or inf.
    let huge: Vec<u32> = p.iter().map(|w| f(f32::from_bits(*w) * 1e37)).collect();
    let out = run(&cfg, &huge, &x, &y).unwrap();
    assert_eq!(
        (&out.grads, out.metrics),
        (&reference(&dims, &huge, &x, &y).0, reference(&dims, &huge, &x, &y).1)
    );
    // Tiny weights: everything subnormal or zero, the softmax uniform.
    let tiny: Vec<u32> = p.iter().map(|w| f(f32::from_bits(*w) * 1e-40)).collect();
    let (x, y) = batch(&model, 4, &mut rng);
    let out = run(&cfg, &tiny, &x, &y).unwrap();
    assert_eq!(out.grads, reference(&dims, &tiny, &x, &y).0);
    assert!(out
        .logit_grad
        .iter()
        .all(|d| (v(*d) - 1.0 / 3.0).abs() < 1e-6 || (v(*d) + 2.0 / 3.0).abs() < 1e-6));
}

#[test]
fn bad_input_is_refused_before_the_step() {
    let dims = [4, 6, 3];
    let model = Model::new(&dims);
    let cfg = config(&dims, 2, 2, 2, Reduce::Snake);
    let mut rng = Rng(5);
    let p = init(&model, &mut rng);
    let (x, mut y) = batch(&model, 5, &mut rng);
    assert!(run(&cfg, &p, &x, &y).is_ok());
    y[3] = 3;
    assert_eq!(run(&cfg, &p, &x, &y).unwrap_err(), MeshError::BadLabel { sample: 3, label: 3, classes: 3 });
    y[3] = 0;
    assert!(matches!(run(&cfg, &p[1..], &x, &y), Err(MeshError::Length { what: "parameter", .. })));
    assert!(matches!(run(&cfg, &p, &x[1..], &y), Err(MeshError::Length { what: "input", .. })));
    assert!(matches!(run(&cfg, &p, &x, &y[1..]), Err(MeshError::Length { what: "label", .. })));
    let (x9, y9) = batch(&model, 9, &mut rng);
    assert_eq!(run(&cfg, &p, &x9, &y9).unwrap_err(), MeshError::BatchTooLarge { samples: 9, capacity: 8 });
    assert_eq!(run(&cfg, &p, &[], &[]).unwrap_err(), MeshError::EmptyBatch);
    let small = Config { sram: Sram::from_bytes(256, 16), ..cfg };
    assert!(matches!(run(&small, &p, &x, &y), Err(MeshError::SamplesExceedSram { max_batch_per_pe: 1, .. })));
    let zero = [4, 0, 3];
    assert_eq!(
        run(&config(&zero, 2, 2, 2, Reduce::Snake), &p, &x, &y).unwrap_err(),
        MeshError::ZeroDim { index: 1 }
    );
    // The no_std entry points check their buffers too.
    let n = 5;
    let mut work = std::vec![0u32; step::workspace_words(&model, n).unwrap()];
    let mut grads = std::vec![0u32; p.len()];
    assert!(step::step(&cfg, &p, &x, &y, &mut work[1..], &mut grads).is_err());
    assert!(step::step(&cfg, &p, &x, &y, &mut work, &mut grads[1..]).is_err());
    let m = step::step(&cfg, &p, &x, &y, &mut work, &mut grads).unwrap();
    assert_eq!(m, run(&cfg, &p, &x, &y).unwrap().metrics);
    // The message names what to change.
    let msg = std::format!(
        "{}",
        MeshError::SamplesExceedSram { batch_per_pe: 9, max_batch_per_pe: 4, needed: 5000, sram_words: 2048 }
    );
    assert!(msg.contains("at most 4 samples per PE"), "{msg}");
}
