//! Dense layers on the mesh: the forward, dx, ReLU and the batch reductions, each in its fixed
//! order.
//!
//! Buffers are sample-major: the activations of a batch of N samples with width K are
//! `x[s·K + k]`. A layer's parameters (and its gradient) are in stream order
//! ([`stream`](super::stream)): `b_i` at word `i·(K+1)`, `w_ik` at `i·(K+1) + 1 + k`.
//! `fma(a, b, c)` is `a·b + c` rounded once (FPnew FMADD); every result is RNE with
//! subnormals kept and canonical NaNs.
//!
//! # Per sample (the same on every PE, for every mesh)
//!
//! - **Forward**, output i of sample s: `acc = b_i`, then `acc = fma(w_ik, x_sk, acc)` for
//!   k = 0, 1, …, K−1 (the order the row's words arrive in), then `y_si = relu(acc)` on every
//!   layer but the last. A PE with B samples interleaves them on its FMA pipeline (word
//!   w_ik is used B times); each sample's chain keeps its order.
//! - **ReLU** `relu(z)`: a NaN stays the canonical NaN (IEEE-754-2019 §6.2), a value with the
//!   sign bit set (−0 included) becomes +0, anything else passes. A selection, not
//!   arithmetic, so no rounding.
//! - **ReLU backward** `relu_grad(y, dy)`: dy where the stored output y > 0 (not ±0, not
//!   NaN), else +0, as PyTorch's `threshold_backward(dy, y, 0)`.
//! - **dx** of sample s (not computed for layer 0): `acc = −0`, then
//!   `acc = fma(w_ik, dz_si, acc)` for rows i = 0, 1, …, M−1 (the order the rows stream in
//!   again). The bias words of the backward stream are not used. −0 is the additive identity
//!   (§6.3), so the first step is the rounded product w_0k·dz_s0 itself.
//!
//! # Over the batch (dW, db, and the loss)
//!
//! Gradient word j of row i is a sum over the N samples of `dz_si · x̃_sj`, with x̃_s0 = 1
//! (the bias input, so `db_i = Σ dz_si`) and x̃_s(1+k) = x_sk. With the [`Reduce`] order:
//!
//! - [`Reduce::Snake`]: `acc = −0`, then `acc = fma(dz_si, x̃_sj, acc)` for s = 0, 1, …,
//!   N−1. On the mesh the running sum enters the snake at position 0, each PE applies its own
//!   slots in slot order and hands it to the next PE of the snake (an empty slot does
//!   nothing), and the end of the snake sends it to the gradient egress. Since samples lie
//!   in increasing order along the snake, the result is this one chain, whatever P, Q and B.
//! - [`Reduce::RowCol`]: each PE forms `g = −0`, `g = fma(dz_si, x̃_sj, g)` over its slots in
//!   slot order (−0 if it has none). Row r adds from its east end: `R_r = g(r, Q−1)`, then
//!   `R_r = R_r + g(r, c)` for c = Q−2 down to 0. Column 0 adds from its south end:
//!   `T = R_(P−1)`, then `T = T + R_r` for r = P−2 down to 0. PE (0, 0) sends T out. Each
//!   `+` is one FPnew ADD of the value arriving from the neighbour and the local one (IEEE
//!   addition is commutative, so operand order does not matter; association does).
//!
//! ```text
//!   Snake (2×3, B = 2; a PE's slots in brackets)     RowCol (2×3)
//!   [s0 s1] ──► [s2 s3] ──► [s4 s5]                  g00 ◄─ g01 ◄─ g02   R0 = (g02 + g01) + g00
//!                              │                      ▲
//!   [s10 s11] ◄─ [s8 s9] ◄── [s6 s7]                 g10 ◄─ g11 ◄─ g12   R1 = (g12 + g11) + g10
//!       └──► gradient egress                         T = R1 + R0, out at PE (0, 0)
//! ```
//!
//! The loss of the step is the same reduction of the per-sample losses with x̃ = 1, so each
//! step is `fma(loss_s, 1, acc)`, which equals `acc + loss_s` (one ADD).

use super::geometry::{Mesh, Pe};
use super::stream::Layer;
use super::{MeshError, Reduce};
use crate::golden::fp::{add, canonicalize, is_nan, CANONICAL_NAN, NEG_ZERO, ONE, POS_ZERO};
use crate::golden::optim::fma;
use core::ops::Range;

/// The ReLU ([module docs](self)).
pub const fn relu(z: u32) -> u32 {
    if is_nan(z) {
        CANONICAL_NAN
    } else if z >> 31 != 0 {
        POS_ZERO
    } else {
        z
    }
}

/// The ReLU backward: `dy` where the ReLU's output `y` is > 0, else +0.
pub const fn relu_grad(y: u32, dy: u32) -> u32 {
    if !is_nan(y) && y >> 31 == 0 && y != POS_ZERO {
        dy
    } else {
        POS_ZERO
    }
}

/// One output before the activation: `row` is the K + 1 stream words of a row (bias
/// first), `x` the sample's K inputs. Returns `None` if the lengths disagree.
pub fn dot(row: &[u32], x: &[u32]) -> Option<u32> {
    let (bias, w) = row.split_first()?;
    if w.len() != x.len() {
        return None;
    }
    let mut acc = *bias;
    for (w, x) in w.iter().zip(x) {
        acc = fma(*w, *x, acc);
    }
    // K ≥ 1 puts the bias through an FMA; canonicalise for the K = 0 callers of a bare row.
    Some(canonicalize(acc))
}

/// Checks that `buf` holds `samples · width` words.
fn check_len(what: &'static str, buf: &[u32], samples: usize, width: usize) -> Result<(), MeshError> {
    let expected = samples.checked_mul(width).ok_or(MeshError::SizeOverflow)?;
    if buf.len() != expected {
        return Err(MeshError::Length { what, expected, got: buf.len() });
    }
    Ok(())
}

/// Checks a layer's shape and its parameter (or gradient) buffer.
fn check_layer(what: &'static str, layer: Layer, params: &[u32]) -> Result<(), MeshError> {
    if layer.inputs == 0 || layer.outputs == 0 {
        return Err(MeshError::ZeroDim { index: usize::from(layer.inputs != 0) });
    }
    let expected = layer.words().ok_or(MeshError::SizeOverflow)?;
    if params.len() != expected {
        return Err(MeshError::Length { what, expected, got: params.len() });
    }
    Ok(())
}

/// The samples in a buffer of `words` words of width `width` (which must divide it).
fn samples_in(what: &'static str, words: usize, width: usize) -> Result<usize, MeshError> {
    if width == 0 || !words.is_multiple_of(width) {
        return Err(MeshError::Length {
            what,
            expected: words.checked_next_multiple_of(width.max(1)).unwrap_or(usize::MAX),
            got: words,
        });
    }
    Ok(words / width)
}

/// The forward of `layer` for every sample of `x` (N×K): `y` (N×M) gets `relu(Wx + b)`, or
/// `Wx + b` when `relu` is false.
pub fn forward(
    layer: Layer,
    params: &[u32],
    x: &[u32],
    relu_on: bool,
    y: &mut [u32],
) -> Result<(), MeshError> {
    check_layer("parameter", layer, params)?;
    let n = samples_in("input", x.len(), layer.inputs)?;
    check_len("output", y, n, layer.outputs)?;
    for (xs, ys) in x.chunks_exact(layer.inputs).zip(y.chunks_exact_mut(layer.outputs)) {
        for (row, out) in params.chunks_exact(layer.row_words()).zip(ys.iter_mut()) {
            let z = dot(row, xs).unwrap_or(CANONICAL_NAN);
            *out = if relu_on { relu(z) } else { z };
        }
    }
    Ok(())
}

/// dx of `layer` for every sample: `dz` (N×M) in, `dx` (N×K) out, each an FMA chain over the
/// rows in stream order from −0.
pub fn input_grad(layer: Layer, params: &[u32], dz: &[u32], dx: &mut [u32]) -> Result<(), MeshError> {
    check_layer("parameter", layer, params)?;
    let n = samples_in("dz", dz.len(), layer.outputs)?;
    check_len("dx", dx, n, layer.inputs)?;
    for (dzs, dxs) in dz.chunks_exact(layer.outputs).zip(dx.chunks_exact_mut(layer.inputs)) {
        dxs.fill(NEG_ZERO);
        for (row, g) in params.chunks_exact(layer.row_words()).zip(dzs) {
            for (acc, w) in dxs.iter_mut().zip(&row[1..]) {
                *acc = fma(*w, *g, *acc);
            }
        }
    }
    Ok(())
}

/// The ReLU backward in place: `grad` holds dy (the gradient at the ReLU's output `y`) and
/// gets dz. Both N×M.
pub fn relu_backward(y: &[u32], grad: &mut [u32]) -> Result<(), MeshError> {
    if y.len() != grad.len() {
        return Err(MeshError::Length { what: "gradient", expected: y.len(), got: grad.len() });
    }
    for (g, y) in grad.iter_mut().zip(y) {
        *g = relu_grad(*y, *g);
    }
    Ok(())
}

/// One PE's (or one run's) FMA chain over `samples` from `acc`.
fn chain(samples: Range<usize>, mut acc: u32, term: &mut impl FnMut(usize) -> (u32, u32)) -> u32 {
    for s in samples {
        let (a, b) = term(s);
        acc = fma(a, b, acc);
    }
    acc
}

/// Σ over samples 0..`samples` of `a_s · b_s` (`term(s) = (a_s, b_s)`) in the `order` of
/// the [module docs](self). The caller has checked the mesh and `samples ≤ capacity`.
fn reduce_terms(
    mesh: &Mesh,
    order: Reduce,
    samples: usize,
    mut term: impl FnMut(usize) -> (u32, u32),
) -> u32 {
    match order {
        Reduce::Snake => chain(0..samples, NEG_ZERO, &mut term),
        Reduce::RowCol => {
            let mut total = None;
            for row in (0..mesh.rows).rev() {
                let mut line = None;
                for col in (0..mesh.cols).rev() {
                    let pos = mesh.snake_pos(Pe { row, col }).unwrap_or(usize::MAX);
                    let g = chain(mesh.samples_at(pos, samples), NEG_ZERO, &mut term);
                    line = Some(line.map_or(g, |v| add(v, g)));
                }
                let line = line.unwrap_or(NEG_ZERO);
                total = Some(total.map_or(line, |t| add(t, line)));
            }
            total.unwrap_or(NEG_ZERO)
        }
    }
}

/// Checks the mesh and that `samples` fit it.
fn check_mesh(mesh: &Mesh, samples: usize) -> Result<(), MeshError> {
    mesh.validate()?;
    if samples == 0 {
        return Err(MeshError::EmptyBatch);
    }
    if samples > mesh.capacity() {
        return Err(MeshError::BatchTooLarge { samples, capacity: mesh.capacity() });
    }
    Ok(())
}

/// The sum of one value per sample (the per-sample losses) over the mesh in `order`.
pub fn reduce_sum(mesh: &Mesh, order: Reduce, values: &[u32]) -> Result<u32, MeshError> {
    check_mesh(mesh, values.len())?;
    Ok(reduce_terms(mesh, order, values.len(), |s| (values[s], ONE)))
}

/// The gradient of `layer` over the batch, in stream order (db_i, dW_i0, …): `x` (N×K) is
/// the layer's input, `dz` (N×M) the gradient at its output before the activation.
pub fn weight_grad(
    mesh: &Mesh,
    order: Reduce,
    layer: Layer,
    x: &[u32],
    dz: &[u32],
    grad: &mut [u32],
) -> Result<(), MeshError> {
    check_layer("gradient", layer, grad)?;
    let n = samples_in("input", x.len(), layer.inputs)?;
    check_len("dz", dz, n, layer.outputs)?;
    check_mesh(mesh, n)?;
    let (k_in, m_out) = (layer.inputs, layer.outputs);
    for (i, row) in grad.chunks_exact_mut(layer.row_words()).enumerate() {
        row[0] = reduce_terms(mesh, order, n, |s| (dz[s * m_out + i], ONE));
        for (k, g) in row[1..].iter_mut().enumerate() {
            *g = reduce_terms(mesh, order, n, |s| (dz[s * m_out + i], x[s * k_in + k]));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::golden::fp::{mul, NEG_INF, POS_INF};

    fn f(x: f32) -> u32 {
        x.to_bits()
    }

    #[test]
    fn relu_rules() {
        assert_eq!(relu(f(2.5)), f(2.5));
        assert_eq!(relu(f(-2.5)), POS_ZERO);
        assert_eq!(relu(NEG_ZERO), POS_ZERO);
        assert_eq!(relu(POS_ZERO), POS_ZERO);
        assert_eq!(relu(1), 1, "subnormals pass");
        assert_eq!(relu(0x8000_0001), POS_ZERO);
        assert_eq!(relu(POS_INF), POS_INF);
        assert_eq!(relu(NEG_INF), POS_ZERO);
        assert_eq!(relu(0xffc0_0001), CANONICAL_NAN);
        assert_eq!(relu_grad(f(0.5), f(-3.0)), f(-3.0));
        assert_eq!(relu_grad(1, f(-3.0)), f(-3.0));
        assert_eq!(relu_grad(POS_INF, f(7.0)), f(7.0));
        assert_eq!(relu_grad(POS_ZERO, f(7.0)), POS_ZERO);
        assert_eq!(relu_grad(CANONICAL_NAN, f(7.0)), POS_ZERO);
        assert_eq!(relu_grad(f(1.0), CANONICAL_NAN), CANONICAL_NAN);
    }

    #[test]
    fn dot_starts_from_the_bias_and_fuses() {
        // 2^24 + 1 + 1: the chain from the bias rounds twice to 2^24 where (1 + 1) + 2^24
        // would be exact; the FMA rounds once per step.
        let big = f(16_777_216.0);
        assert_eq!(dot(&[big, f(1.0), f(1.0)], &[f(1.0), f(1.0)]), Some(big));
        assert_eq!(dot(&[f(1.0), f(1.0), big], &[f(1.0), f(1.0)]), Some(f(16_777_218.0)));
        // fused: (1 + 2^-23)(1 - 2^-23) - 1 = -2^-46 exactly, lost by a separate multiply.
        let a = f(1.0 + f32::EPSILON);
        let b = f(1.0 - f32::EPSILON);
        assert_eq!(dot(&[f(-1.0), a], &[b]), Some(f(-(2f32.powi(-46)))));
        assert_eq!(dot(&[f(1.0)], &[]), Some(f(1.0)));
        assert_eq!(dot(&[0x7f80_0001], &[]), Some(CANONICAL_NAN));
        assert_eq!(dot(&[], &[]), None);
        assert_eq!(dot(&[1, 2], &[]), None);
    }

    #[test]
    fn forward_and_dx_by_hand() {
        // W = [[1, 2], [-3, 0.5]], b = [0.5, -1], x = [2, 4].
        let layer = Layer::new(2, 2);
        let p = [f(0.5), f(1.0), f(2.0), f(-1.0), f(-3.0), f(0.5)];
        let x = [f(2.0), f(4.0)];
        let mut y = [0; 2];
        forward(layer, &p, &x, true, &mut y).unwrap();
        assert_eq!(y, [f(10.5), POS_ZERO]); // 0.5 + 2 + 8; -1 - 6 + 2 = -5 → 0
        forward(layer, &p, &x, false, &mut y).unwrap();
        assert_eq!(y, [f(10.5), f(-5.0)]);
        // dx = Wᵀ dz with dz = [1, -2]: [1 + 6, 2 - 1].
        let mut dx = [0; 2];
        input_grad(layer, &p, &[f(1.0), f(-2.0)], &mut dx).unwrap();
        assert_eq!(dx, [f(7.0), f(1.0)]);
        // The chain starts at -0, so it stays -0 only while every product is -0:
        // dx_0 = (1·-0) + (-1·+0) = -0, dx_1 = (2·-0) + (0.5·+0) = +0.
        input_grad(layer, &p, &[NEG_ZERO, POS_ZERO], &mut dx).unwrap();
        assert_eq!(dx, [NEG_ZERO, POS_ZERO]);
        input_grad(Layer::new(1, 1), &[f(9.0), f(1.0)], &[NEG_ZERO], &mut dx[..1]).unwrap();
        assert_eq!(dx[0], NEG_ZERO);
        let mut g = [f(4.0), f(5.0)];
        relu_backward(&[f(10.5), POS_ZERO], &mut g).unwrap();
        assert_eq!(g, [f(4.0), POS_ZERO]);
    }

    #[test]
    fn bad_buffers_are_errors() {
        let l = Layer::new(2, 3);
        let p = [0u32; 9];
        let mut y = [0u32; 3];
        assert!(matches!(forward(l, &p[..8], &[0; 2], true, &mut y), Err(MeshError::Length { .. })));
        assert!(matches!(forward(l, &p, &[0; 3], true, &mut y), Err(MeshError::Length { .. })));
        assert!(matches!(forward(l, &p, &[0; 4], true, &mut y), Err(MeshError::Length { .. })));
        assert_eq!(
            forward(Layer::new(0, 3), &[0; 3], &[], true, &mut y),
            Err(MeshError::ZeroDim { index: 0 })
        );
        assert_eq!(
            forward(Layer::new(2, 0), &[], &[0; 2], true, &mut []),
            Err(MeshError::ZeroDim { index: 1 })
        );
        assert!(input_grad(l, &p, &[0; 3], &mut [0; 3]).is_err());
        assert!(relu_backward(&[0; 2], &mut [0; 3]).is_err());
        let m = Mesh::new(2, 2, 1);
        assert_eq!(reduce_sum(&m, Reduce::Snake, &[]), Err(MeshError::EmptyBatch));
        assert_eq!(
            reduce_sum(&m, Reduce::Snake, &[0; 5]),
            Err(MeshError::BatchTooLarge { samples: 5, capacity: 4 })
        );
        assert!(reduce_sum(&Mesh::new(2, 0, 1), Reduce::Snake, &[0]).is_err());
        let mut g = [0u32; 9];
        assert!(weight_grad(&m, Reduce::Snake, l, &[0; 4], &[0; 3], &mut g).is_err());
        assert!(weight_grad(&m, Reduce::Snake, l, &[0; 10], &[0; 15], &mut g).is_err());
    }

    /// Both orders, spelled out as the explicit loops of the module docs.
    #[test]
    fn reduction_orders_are_the_documented_loops() {
        let vals: [u32; 11] = core::array::from_fn(|i| f(1.0 + (i as f32) * 0.37e-7 * (i as f32 + 1.0)));
        let big = f(16_777_216.0);
        let mut with_big = vals;
        with_big[3] = big;
        for v in [vals, with_big] {
            let mesh = Mesh::new(2, 3, 2); // 12 slots, 11 samples: the last PE holds one
            let snake = v.iter().fold(NEG_ZERO, |acc, x| fma(*x, ONE, acc));
            assert_eq!(reduce_sum(&mesh, Reduce::Snake, &v).unwrap(), snake);
            // Snake positions: (0,0)=s0,s1 (0,1)=s2,s3 (0,2)=s4,s5 (1,2)=s6,s7 (1,1)=s8,s9 (1,0)=s10.
            let g = |a: usize, b: Option<usize>| {
                let x = add(NEG_ZERO, v[a]);
                b.map_or(x, |b| add(x, v[b]))
            };
            let r0 = add(add(g(4, Some(5)), g(2, Some(3))), g(0, Some(1)));
            let r1 = add(add(g(6, Some(7)), g(8, Some(9))), g(10, None));
            assert_eq!(reduce_sum(&mesh, Reduce::RowCol, &v).unwrap(), add(r1, r0));
        }
        // The orders are observable: 2^24 then ones.
        let v = [big, f(1.0), f(1.0), f(1.0)];
        assert_eq!(reduce_sum(&Mesh::new(1, 4, 1), Reduce::Snake, &v).unwrap(), big);
        // RowCol on 1×4: ((1 + 1) + 1) + 2^24 from the east = 2^24 + 3 → 2^24 + 4 (RNE).
        assert_eq!(reduce_sum(&Mesh::new(1, 4, 1), Reduce::RowCol, &v).unwrap(), f(16_777_220.0));
        // 2×2 with B = 1: row 1 = (s2 + s3), row 0 = (s1 + s0) = 2^24 + 1 → 2^24; T = 2 + 2^24.
        assert_eq!(reduce_sum(&Mesh::new(2, 2, 1), Reduce::RowCol, &v).unwrap(), f(16_777_218.0));
        // An empty PE adds -0, the identity.
        assert_eq!(reduce_sum(&Mesh::new(2, 2, 1), Reduce::RowCol, &[NEG_ZERO]).unwrap(), NEG_ZERO);
    }

    #[test]
    fn weight_grad_is_the_sequential_fma_loop() {
        let layer = Layer::new(3, 2);
        let n = 5;
        let x: [u32; 15] = core::array::from_fn(|i| f((i as f32 * 0.731).sin()));
        let dz: [u32; 10] = core::array::from_fn(|i| f((i as f32 * 1.37).cos() * 1e-3));
        for mesh in [Mesh::new(1, 1, 5), Mesh::new(2, 2, 2), Mesh::new(1, 5, 1)] {
            let mut g = [0u32; 8];
            weight_grad(&mesh, Reduce::Snake, layer, &x, &dz, &mut g).unwrap();
            for i in 0..2 {
                let mut db = NEG_ZERO;
                for s in 0..n {
                    db = fma(dz[s * 2 + i], ONE, db);
                }
                assert_eq!(g[layer.bias(i)], db);
                for k in 0..3 {
                    let mut acc = NEG_ZERO;
                    for s in 0..n {
                        acc = fma(dz[s * 2 + i], x[s * 3 + k], acc);
                    }
                    assert_eq!(g[layer.weight(i, k)], acc, "{mesh:?} dW[{i}][{k}]");
                }
            }
        }
        // B = 1 on one PE: the partial of one sample is the rounded product.
        let mut g = [0u32; 2];
        weight_grad(
            &Mesh::new(1, 1, 1),
            Reduce::RowCol,
            Layer::new(1, 1),
            &[f(3.0)],
            &[f(1.0 / 3.0)],
            &mut g,
        )
        .unwrap();
        assert_eq!(g, [f(1.0 / 3.0), mul(f(3.0), f(1.0 / 3.0))]);
    }
}
