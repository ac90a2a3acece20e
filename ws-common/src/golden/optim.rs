//! MemoryX's optimizers, bit for bit: SGD (weight decay, momentum, dampening, Nesterov,
//! maximize), Adam (L2 weight decay, amsgrad, maximize) and AdamW (decoupled weight decay),
//! as the optimizer lanes (`hdl/rtl/ws_optim_lane.v`) compute them.
//!
//! Two halves, both used by the firmware, the host and the testbenches:
//! - [`step_consts`]: the per-step scalars the firmware computes once per step and layer and
//!   hands to the lanes ([`Consts`]): the gradient scale 1/(workers·batch) with the sign of
//!   `maximize` folded in, the bias corrections 1−β1ᵗ and 1−β2ᵗ and what derives from them.
//!   They are computed in binary64 from binary64 hyperparameters, as PyTorch computes them in
//!   Python floats, and rounded once to binary32.
//! - [`update`]: one parameter's update, in the exact order of binary32 operations of the
//!   lane, with [`fma`] where the lane fuses. Every operation is IEEE-754 RNE with subnormals
//!   kept and FPnew's canonical NaN ([`super::fp`]); [`div`] and [`sqrt`] are correctly
//!   rounded (IEEE-754 §5.4.1).
//!
//! The operation sequences, and where they differ from PyTorch's, are in `docs/memoryx.md`.

use super::fp::{self, canonicalize, is_nan, CANONICAL_NAN, ONE, POS_INF};

/// `a × b + c` with a single rounding (IEEE-754 §5.4.1 fusedMultiplyAdd, RNE), as FPnew's
/// FMADD computes it; any NaN result is [`CANONICAL_NAN`].
///
/// `core` has no `f32::mul_add`, so it is computed in binary64: the product of two binary32
/// values is exact there, the sum is rounded to odd (the TwoSum error decides the last bit),
/// and rounding that to binary32 is then correct, because 53 ≥ 24 + 2 (Boldo & Melquiond,
/// "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd").
pub fn fma(a: u32, b: u32, c: u32) -> u32 {
    let x = f64::from(f32::from_bits(a));
    let y = f64::from(f32::from_bits(b));
    let z = f64::from(f32::from_bits(c));
    let xy = x * y; // exact: 24 + 24 significant bits, exponents within binary64's range
    let s = xy + z;
    if !s.is_finite() || s == 0.0 {
        // Infinities and NaNs propagate as in binary32; a zero sum is exact (its sign follows
        // the RNE rules, which are the same in both formats).
        return canonicalize((s as f32).to_bits());
    }
    // TwoSum (Knuth): err is exactly xy + z − s; no overflow is possible here.
    let bb = s - xy;
    let err = (xy - (s - bb)) + (z - bb);
    let mut bits = s.to_bits();
    if err != 0.0 && bits & 1 == 0 {
        // Round to odd: step to the neighbour on the side of the exact value.
        if (err > 0.0) == (s > 0.0) {
            bits += 1;
        } else {
            bits -= 1;
        }
    }
    canonicalize((f64::from_bits(bits) as f32).to_bits())
}

/// `a / b`, correctly rounded (RNE), canonical NaN.
pub fn div(a: u32, b: u32) -> u32 {
    canonicalize((f32::from_bits(a) / f32::from_bits(b)).to_bits())
}

/// √a, correctly rounded (RNE): √±0 = ±0, √+∞ = +∞, the root of anything negative or NaN is
/// [`CANONICAL_NAN`].
///
/// `core` has no `f32::sqrt`, so this is the bit-level algorithm of `ws_optim_sqrt.v`:
/// normalise the significand, make the exponent even, take a 25-bit integer root of a 50-bit
/// radicand by restoring digit recurrence (one bit per step), then round on the 25th bit with
/// the remainder as sticky.
pub fn sqrt(a: u32) -> u32 {
    if is_nan(a) {
        return CANONICAL_NAN;
    }
    if a & 0x7fff_ffff == 0 {
        return a;
    }
    if a >> 31 != 0 {
        return CANONICAL_NAN;
    }
    if a == POS_INF {
        return POS_INF;
    }
    let e = ((a >> 23) & 0xff) as i32;
    let f = a & 0x007f_ffff;
    // m ∈ [2^23, 2^24), a = m · 2^(x − 23).
    let (mut m, mut x) = if e == 0 {
        let lz = f.leading_zeros() - 8;
        (f << lz, -126 - lz as i32)
    } else {
        (f | 0x0080_0000, e - 127)
    };
    if x & 1 != 0 {
        m <<= 1;
        x -= 1;
    }
    let (root, rem) = isqrt_steps(u64::from(m) << 25);
    let sticky = rem != 0;
    let round = root & 1 != 0;
    let mut sig = (root >> 1) as u32; // [2^23, 2^24)
    let mut half = x >> 1;
    if round && (sticky || sig & 1 != 0) {
        sig += 1;
        if sig == 1 << 24 {
            sig >>= 1;
            half += 1;
        }
    }
    (((half + 127) as u32) << 23) | (sig & 0x007f_ffff)
}

/// The integer root of a 50-bit radicand, 25 restoring steps: (root, remainder).
fn isqrt_steps(r: u64) -> (u64, u64) {
    let (mut root, mut rem) = (0u64, 0u64);
    for i in (0..25).rev() {
        rem = (rem << 2) | ((r >> (2 * i)) & 3);
        let trial = (root << 2) | 1;
        if rem >= trial {
            rem -= trial;
            root = (root << 1) | 1;
        } else {
            root <<= 1;
        }
    }
    (root, rem)
}

/// The larger of `a` and `b` as `torch.maximum` gives it: a NaN in either is the result
/// (canonical here), and +0 is larger than −0 (IEEE-754-2019 §9.6 maximum).
pub fn max(a: u32, b: u32) -> u32 {
    if is_nan(a) || is_nan(b) {
        return CANONICAL_NAN;
    }
    if order_key(a) >= order_key(b) {
        a
    } else {
        b
    }
}

/// Maps non-NaN binary32 to integers in the same order (the comparator of `ws_optim_max`).
const fn order_key(x: u32) -> u32 {
    if x >> 31 != 0 {
        !x
    } else {
        x | 0x8000_0000
    }
}

/// Which optimizer a layer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `torch.optim.SGD`: plain, with momentum/dampening, or Nesterov.
    Sgd,
    /// `torch.optim.Adam`, weight decay as L2 on the gradient.
    Adam,
    /// `torch.optim.AdamW`, decoupled weight decay.
    AdamW,
}

/// One layer's hyperparameters, binary64 like PyTorch's Python floats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hyper {
    /// The optimizer.
    pub kind: Kind,
    /// Weight decay (L2 for SGD and Adam, decoupled for AdamW); 0 disables it.
    pub weight_decay: f64,
    /// Ascend instead of descend.
    pub maximize: bool,
    /// SGD momentum; 0 disables the momentum buffer.
    pub momentum: f64,
    /// SGD dampening.
    pub dampening: f64,
    /// SGD Nesterov momentum.
    pub nesterov: bool,
    /// Adam β1.
    pub beta1: f64,
    /// Adam β2.
    pub beta2: f64,
    /// Adam ε.
    pub eps: f64,
    /// Adam amsgrad (keeps the running maximum of v as extra state).
    pub amsgrad: bool,
}

impl Hyper {
    /// `torch.optim.SGD` defaults (no momentum, no weight decay).
    pub const SGD: Hyper = Hyper {
        kind: Kind::Sgd,
        weight_decay: 0.0,
        maximize: false,
        momentum: 0.0,
        dampening: 0.0,
        nesterov: false,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        amsgrad: false,
    };
    /// `torch.optim.Adam` defaults.
    pub const ADAM: Hyper = Hyper { kind: Kind::Adam, ..Hyper::SGD };
    /// `torch.optim.AdamW` defaults (weight decay 0.01).
    pub const ADAMW: Hyper = Hyper { kind: Kind::AdamW, weight_decay: 0.01, ..Hyper::SGD };
}

/// [`Consts::flags`]: the Adam datapath (else SGD).
pub const FLAG_ADAM: u32 = 1 << 0;
/// [`Consts::flags`]: add `wd·w` to the gradient (L2 weight decay).
pub const FLAG_L2: u32 = 1 << 1;
/// [`Consts::flags`]: SGD keeps a momentum buffer in `m`.
pub const FLAG_MOMENTUM: u32 = 1 << 2;
/// [`Consts::flags`]: first SGD step, the momentum buffer starts as the gradient.
pub const FLAG_INIT: u32 = 1 << 3;
/// [`Consts::flags`]: SGD Nesterov momentum.
pub const FLAG_NESTEROV: u32 = 1 << 4;
/// [`Consts::flags`]: Adam amsgrad (`vmax` is live state).
pub const FLAG_AMSGRAD: u32 = 1 << 5;
/// Every defined flag bit.
pub const FLAGS_ALL: u32 = 0x3f;

/// The per-step constants of one layer: what the firmware writes into a lane's configuration
/// (binary32 bit patterns, the lane's `cfg_*` ports in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Consts {
    /// `FLAG_*` bits.
    pub flags: u32,
    /// ±1/(workers·batch), negative when maximising.
    pub gscale: u32,
    /// L2 weight decay (used when [`FLAG_L2`]).
    pub wd: u32,
    /// Multiplier of w before the update: 1 − lr·wd for AdamW, 1 otherwise.
    pub decay: u32,
    /// Multiplier of m: SGD momentum, Adam β1.
    pub k1: u32,
    /// Multiplier of g into m: SGD 1 − dampening, Adam 1 − β1.
    pub k2: u32,
    /// Adam β2.
    pub beta2: u32,
    /// Adam 1 − β2.
    pub c2: u32,
    /// Adam 1/√(1 − β2ᵗ).
    pub ibc2s: u32,
    /// Adam ε.
    pub eps: u32,
    /// The step: −lr for SGD, −lr/(1 − β1ᵗ) for Adam(W).
    pub neg_rate: u32,
}

/// The constants of step `t` (1 for the first step) with learning rate `lr` (the firmware's
/// schedule has already been applied), for gradients summed over `workers × batch` samples.
/// Pure: the same inputs give the same bits on the firmware, the host and the testbench.
pub fn step_consts(h: &Hyper, t: u32, lr: f64, workers: u32, batch: u32) -> Consts {
    let f = |x: f64| (x as f32).to_bits();
    let n = f64::from(workers.max(1)) * f64::from(batch.max(1));
    let gscale = if h.maximize { -1.0 / n } else { 1.0 / n };
    let mut c = Consts { gscale: f(gscale), decay: ONE, k2: ONE, ibc2s: ONE, ..Consts::default() };
    match h.kind {
        Kind::Sgd => {
            c.neg_rate = f(-lr);
            if h.weight_decay != 0.0 {
                c.flags |= FLAG_L2;
                c.wd = f(h.weight_decay);
            }
            if h.momentum != 0.0 {
                c.flags |= FLAG_MOMENTUM;
                c.k1 = f(h.momentum);
                c.k2 = f(1.0 - h.dampening);
                if t <= 1 {
                    c.flags |= FLAG_INIT;
                }
                if h.nesterov {
                    c.flags |= FLAG_NESTEROV;
                }
            }
        }
        Kind::Adam | Kind::AdamW => {
            c.flags |= FLAG_ADAM;
            if h.amsgrad {
                c.flags |= FLAG_AMSGRAD;
            }
            let bc1 = 1.0 - powi(h.beta1, t);
            let bc2 = 1.0 - powi(h.beta2, t);
            c.k1 = f(h.beta1);
            c.k2 = f(1.0 - h.beta1);
            c.beta2 = f(h.beta2);
            c.c2 = f(1.0 - h.beta2);
            c.ibc2s = f(1.0 / sqrt_f64(bc2));
            c.eps = f(h.eps);
            c.neg_rate = f(-(lr / bc1));
            if h.weight_decay != 0.0 {
                if h.kind == Kind::Adam {
                    c.flags |= FLAG_L2;
                    c.wd = f(h.weight_decay);
                } else {
                    c.decay = f(1.0 - lr * h.weight_decay);
                }
            }
        }
    }
    c
}

/// `x^t` by squaring (binary64), as `beta ** step` in Python to within an ulp of binary64.
fn powi(x: f64, mut t: u32) -> f64 {
    let (mut acc, mut b) = (1.0f64, x);
    while t != 0 {
        if t & 1 != 0 {
            acc *= b;
        }
        b *= b;
        t >>= 1;
    }
    acc
}

/// Correctly rounded √x of a positive finite binary64 (`core` has no `f64::sqrt`): the same
/// restoring recurrence as [`sqrt`], 54 bits wide in a u128. Returns 0 for x ≤ 0.
fn sqrt_f64(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return if x.is_finite() { 0.0 } else { x };
    }
    let b = x.to_bits();
    let e = ((b >> 52) & 0x7ff) as i64;
    let fr = b & ((1 << 52) - 1);
    let (mut m, mut ex) = if e == 0 {
        let lz = fr.leading_zeros() - 11;
        (fr << lz, -1022 - i64::from(lz))
    } else {
        (fr | (1 << 52), e - 1023)
    };
    if ex & 1 != 0 {
        m <<= 1;
        ex -= 1;
    }
    // Radicand m·2^54 ∈ [2^106, 2^108): a 54-bit root, 53 bits plus the rounding bit.
    let r = u128::from(m) << 54;
    let (mut root, mut rem) = (0u128, 0u128);
    for i in (0..54).rev() {
        rem = (rem << 2) | ((r >> (2 * i)) & 3);
        let trial = (root << 2) | 1;
        if rem >= trial {
            rem -= trial;
            root = (root << 1) | 1;
        } else {
            root <<= 1;
        }
    }
    let mut sig = (root >> 1) as u64;
    let mut half = ex >> 1;
    if root & 1 != 0 && (rem != 0 || sig & 1 != 0) {
        sig += 1;
        if sig == 1 << 53 {
            sig >>= 1;
            half += 1;
        }
    }
    f64::from_bits((((half + 1023) as u64) << 52) | (sig & ((1 << 52) - 1)))
}

/// One parameter's state: the weight and the optimizer state (binary32 bits). SGD keeps its
/// momentum buffer in `m`; Adam's first and second moments are `m` and `v`, and amsgrad's
/// running maximum of v is `vmax`. State an optimizer does not use passes through unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Param {
    /// The weight.
    pub w: u32,
    /// Momentum buffer (SGD) or first moment (Adam).
    pub m: u32,
    /// Second moment (Adam).
    pub v: u32,
    /// Running maximum of the second moment (Adam with amsgrad).
    pub vmax: u32,
}

/// One parameter's update with the reduced gradient `g`, in the lane's order of operations
/// (docs/memoryx.md "Operation sequences").
pub fn update(c: &Consts, p: Param, g: u32) -> Param {
    let flag = |f: u32| c.flags & f != 0;
    let g1 = fp::mul(g, c.gscale);
    let g2 = if flag(FLAG_L2) { fma(c.wd, p.w, g1) } else { g1 };
    let w1 = fp::mul(p.w, c.decay);
    let (m, v, vmax, u) = if flag(FLAG_ADAM) {
        let m = fma(c.k2, g2, fp::mul(c.k1, p.m));
        let v = fma(fp::mul(c.c2, g2), g2, fp::mul(c.beta2, p.v));
        let (vmax, vv) = if flag(FLAG_AMSGRAD) {
            let x = max(p.vmax, v);
            (x, x)
        } else {
            (p.vmax, v)
        };
        let den = fma(sqrt(vv), c.ibc2s, c.eps);
        (m, v, vmax, div(m, den))
    } else if flag(FLAG_MOMENTUM) {
        let m = if flag(FLAG_INIT) { g2 } else { fma(c.k2, g2, fp::mul(c.k1, p.m)) };
        let u = if flag(FLAG_NESTEROV) { fma(c.k1, m, g2) } else { m };
        (m, p.v, p.vmax, u)
    } else {
        (p.m, p.v, p.vmax, g2)
    };
    Param { w: fma(c.neg_rate, u, w1), m, v, vmax }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// xorshift64*: deterministic operands without a dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn u32(&mut self) -> u32 {
            (self.next() >> 32) as u32
        }
        /// Any bit pattern half the time, else a moderate magnitude.
        fn operand(&mut self) -> u32 {
            let x = self.u32();
            match x & 3 {
                0 => self.u32(),
                1 => (x & 0x807f_ffff) | ((self.u32() % 8) << 23), // tiny and subnormal
                _ => (x & 0x807f_ffff) | ((100 + self.u32() % 50) << 23),
            }
        }
    }

    fn edges() -> Vec<u32> {
        std::vec![
            0,
            0x8000_0000,
            1,
            0x8000_0001,
            0x007f_ffff,
            0x0080_0000,
            0x0080_0001,
            ONE,
            0xbf80_0000,
            0x3f80_0001,
            0x3fff_ffff,
            0x4080_0000,
            0x7f7f_ffff,
            0xff7f_ffff,
            POS_INF,
            0xff80_0000,
            CANONICAL_NAN,
            0xffc0_0001,
            0x7f80_0001,
            0x0000_0004,
            0x0040_0000,
            0x3400_0000,
        ]
    }

    fn std_fma(a: u32, b: u32, c: u32) -> u32 {
        canonicalize(f32::from_bits(a).mul_add(f32::from_bits(b), f32::from_bits(c)).to_bits())
    }

    fn std_sqrt(a: u32) -> u32 {
        canonicalize(f32::from_bits(a).sqrt().to_bits())
    }

    #[test]
    fn fma_is_std_mul_add() {
        let e = edges();
        for &a in &e {
            for &b in &e {
                for &c in &e {
                    assert_eq!(fma(a, b, c), std_fma(a, b, c), "fma({a:#x}, {b:#x}, {c:#x})");
                }
            }
        }
        let mut r = Rng(0x1234_5678_9abc_def1);
        for i in 0..400_000 {
            let (a, b) = (r.operand(), r.operand());
            // Every fourth c cancels most of the product, where double rounding would show.
            let c = if i % 4 == 0 { fp::mul(a, b) ^ 0x8000_0000 ^ (r.u32() & 0xff) } else { r.operand() };
            assert_eq!(fma(a, b, c), std_fma(a, b, c), "fma({a:#x}, {b:#x}, {c:#x})");
        }
    }

    #[test]
    fn fma_double_rounding_case() {
        // 1 + 2^-24 + 2^-60: binary64 rounds the sum to the binary32 tie 1 + 2^-24, which
        // would then round to even (1.0); the exact value is above the tie.
        let a = (1.0f32 + f32::EPSILON).to_bits(); // 1 + 2^-23
        let b = (0.5f32 + f32::EPSILON).to_bits(); // 0.5 + 2^-23: a·b = 0.5 + 2^-22.415…
        assert_eq!(fma(a, b, 0x3f00_0000), std_fma(a, b, 0x3f00_0000));
        let x = f32::from_bits(0x3f80_0001);
        let y = f32::from_bits(0x3380_0000); // 2^-24
        assert_eq!(fma(x.to_bits(), y.to_bits(), ONE), std_fma(x.to_bits(), y.to_bits(), ONE));
    }

    #[test]
    fn sqrt_is_correctly_rounded() {
        for a in edges() {
            assert_eq!(sqrt(a), std_sqrt(a), "sqrt({a:#x})");
        }
        // Every subnormal exponent, exact squares, and random patterns.
        for k in 0..23 {
            assert_eq!(sqrt(1 << k), std_sqrt(1 << k));
            assert_eq!(sqrt((2 << k) - 1), std_sqrt((2 << k) - 1));
        }
        for i in 1..5000u32 {
            let sq = (i as f32) * (i as f32);
            assert_eq!(sqrt(sq.to_bits()), (i as f32).to_bits(), "exact square {i}");
        }
        let mut r = Rng(7);
        for _ in 0..1_000_000 {
            let a = r.operand() & 0x7fff_ffff;
            assert_eq!(sqrt(a), std_sqrt(a), "sqrt({a:#x})");
        }
    }

    #[test]
    fn sqrt_f64_is_correctly_rounded() {
        let mut r = Rng(99);
        for _ in 0..200_000 {
            let x = f64::from_bits(r.next() & 0x7fef_ffff_ffff_ffff);
            assert_eq!(sqrt_f64(x).to_bits(), x.sqrt().to_bits(), "sqrt({x:e})");
        }
        assert_eq!(sqrt_f64(4.0), 2.0);
        assert_eq!(
            sqrt_f64(f64::MIN_POSITIVE / 1024.0).to_bits(),
            (f64::MIN_POSITIVE / 1024.0).sqrt().to_bits()
        );
    }

    #[test]
    fn max_follows_torch_maximum() {
        assert_eq!(max(0, 0x8000_0000), 0);
        assert_eq!(max(0x8000_0000, 0), 0);
        assert_eq!(max(ONE, CANONICAL_NAN), CANONICAL_NAN);
        assert_eq!(max(0x7f80_0001, ONE), CANONICAL_NAN);
        assert_eq!(max(0xbf80_0000, 0xc000_0000), 0xbf80_0000);
        assert_eq!(max(1, 0), 1);
        assert_eq!(max(POS_INF, 0x7f7f_ffff), POS_INF);
    }

    #[test]
    fn consts_follow_pytorch_scalars() {
        let h = Hyper { beta1: 0.9, beta2: 0.999, ..Hyper::ADAM };
        let c = step_consts(&h, 1, 1e-3, 2, 8);
        assert_eq!(f32::from_bits(c.gscale), 1.0 / 16.0);
        assert_eq!(c.k2, ((1.0f64 - 0.9) as f32).to_bits());
        assert_eq!(c.c2, ((1.0f64 - 0.999) as f32).to_bits());
        // t = 1: bc1 = 1 − β1, step = lr/(1 − β1); bc2 = 1 − β2.
        assert_eq!(c.neg_rate, ((-(1e-3 / (1.0 - 0.9f64))) as f32).to_bits());
        assert_eq!(c.ibc2s, ((1.0 / (1.0 - 0.999f64).sqrt()) as f32).to_bits());
        assert_eq!(c.flags, FLAG_ADAM);
        let c = step_consts(&Hyper { maximize: true, weight_decay: 0.1, ..Hyper::ADAMW }, 10, 0.5, 1, 1);
        assert_eq!(c.gscale, 0xbf80_0000);
        assert_eq!(c.decay, 0.95f32.to_bits());
        assert_eq!(c.flags & FLAG_L2, 0);
        let s = Hyper { momentum: 0.9, dampening: 0.1, nesterov: true, weight_decay: 1e-4, ..Hyper::SGD };
        assert_eq!(step_consts(&s, 1, 0.1, 1, 1).flags, FLAG_MOMENTUM | FLAG_INIT | FLAG_NESTEROV | FLAG_L2);
        assert_eq!(step_consts(&s, 2, 0.1, 1, 1).flags, FLAG_MOMENTUM | FLAG_NESTEROV | FLAG_L2);
        assert_eq!(step_consts(&Hyper::SGD, 5, 0.1, 1, 1).flags, 0);
        for t in [1u32, 2, 3, 10, 1000, 100_000] {
            let (ours, std) = (powi(0.999, t), 0.999f64.powi(t as i32));
            assert!(((ours - std) / std).abs() < 1e-12, "t = {t}: {ours} vs {std}");
        }
    }

    #[test]
    fn sgd_plain_momentum_nesterov_by_hand() {
        let f = |x: f32| x.to_bits();
        let p = Param { w: f(1.0), m: f(0.5), v: f(7.0), vmax: f(9.0) };
        // Plain: w − lr·g; state passes through.
        let c = step_consts(&Hyper::SGD, 3, 0.25, 1, 2);
        let q = update(&c, p, f(2.0));
        assert_eq!(q, Param { w: f(0.75), ..p });
        // Momentum 0.5 after the first step: buf = 0.5·0.5 + 1·g.
        let h = Hyper { momentum: 0.5, ..Hyper::SGD };
        let q = update(&step_consts(&h, 2, 0.5, 1, 1), p, f(1.0));
        assert_eq!((q.m, q.w), (f(1.25), f(1.0 - 0.625)));
        // First step: buf = g, exactly, −0 included.
        let q = update(&step_consts(&h, 1, 0.5, 1, 1), Param { m: f(f32::NAN), ..p }, 0x8000_0000);
        assert_eq!((q.m, q.w), (0x8000_0000, f(1.0)));
        // Nesterov: u = g + μ·buf.
        let hn = Hyper { nesterov: true, ..h };
        let q = update(&step_consts(&hn, 2, 0.5, 1, 1), p, f(1.0));
        assert_eq!(q.w, f(1.0 - 0.5 * (1.0 + 0.5 * 1.25)));
    }

    #[test]
    fn adam_first_step_is_lr_sign_g() {
        // With t = 1 and no eps, Adam's first step is lr·sign(g) (m̂ = g, v̂ = g²).
        let h = Hyper { eps: 0.0, ..Hyper::ADAM };
        let c = step_consts(&h, 1, 0.01, 1, 1);
        // (g² must stay normal in binary32, else v loses bits.)
        for g in [3.0f32, -0.25, 1e-10, -7e15] {
            let q = update(&c, Param { w: 0, ..Param::default() }, g.to_bits());
            let w = f32::from_bits(q.w);
            assert!((w + 0.01 * g.signum()).abs() < 1e-8, "g = {g}: w = {w}");
        }
        // amsgrad keeps the maximum and uses it.
        let ha = Hyper { amsgrad: true, ..Hyper::ADAM };
        let c = step_consts(&ha, 5, 0.01, 1, 1);
        let p = Param { w: ONE, m: 0, v: 0, vmax: 4.0f32.to_bits() };
        let q = update(&c, p, 0x3c00_0000);
        assert_eq!(q.vmax, 4.0f32.to_bits());
        assert!(f32::from_bits(q.v) < 1e-3);
    }

    #[test]
    fn nan_and_inf_propagate_canonically() {
        let c = step_consts(&Hyper::ADAM, 3, 1e-3, 1, 1);
        let q = update(&c, Param { w: ONE, ..Param::default() }, 0x7fc0_1234);
        assert_eq!((q.w, q.m, q.v), (CANONICAL_NAN, CANONICAL_NAN, CANONICAL_NAN));
        let q = update(&c, Param { w: ONE, ..Param::default() }, POS_INF);
        assert_eq!(q.w, CANONICAL_NAN, "inf/inf");
        let c = step_consts(&Hyper::SGD, 1, 1e38, 1, 1);
        assert_eq!(update(&c, Param { w: 0xff7f_ffff, ..Param::default() }, 0x7f00_0000).w, 0xff80_0000);
    }
}
