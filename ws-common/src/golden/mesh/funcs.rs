//! The exp and ln units of the loss stage, made only of operations FPnew has: FMA, ADD, MUL,
//! a correctly rounded DIV, comparisons, and integer arithmetic on exponent fields.
//!
//! Neither is correctly rounded (IEEE-754-2019 §9.2 only recommends that); both are exactly
//! specified, so the RTL reproduces them bit for bit, and their error against binary64 is
//! measured by the tests of this module (figures in `docs/mesh.md`).
//!
//! # exp
//!
//! 1. Special values (IEEE-754-2019 §9.2.1): NaN → [`CANONICAL_NAN`]; x > [`EXP_X_MAX`]
//!    (89.0, +∞ included) → +∞; x < [`EXP_X_MIN`] (−105.0, −∞ included) → +0. Both are the
//!    correctly rounded results there (e^89 > 2^128, e^−105 < 2^−150).
//! 2. Range reduction x = n·ln2 + r:
//!    - `k = fma(x, INV_LN2, SHIFTER)`, with SHIFTER = 1.5·2^23: the one rounding (RNE) of
//!      x/ln2 + 1.5·2^23 lands on an integer, so n = round(x·INV_LN2) sits in k's low
//!      mantissa bits: `n = bits(k) − bits(SHIFTER)` as a signed integer, n ∈ [−151, 128];
//!    - `nf = k − SHIFTER` (exact), the float n;
//!    - `r_hi = fma(nf, −LN2_HI, x)` is exact (LN2_HI is ln2 rounded to binary32): for n = 0
//!      it is x; otherwise |x| > 0.34, the FMA forms x − n·LN2_HI unrounded, both terms are
//!      multiples of 2^−25, and the difference is below 2^−1 in magnitude, so it fits 24 bits;
//!    - `r = fma(nf, −LN2_LO, r_hi)`, LN2_LO = ln2 − LN2_HI rounded to binary32 (the
//!      Cody–Waite split), |r| ≤ 0.347.
//! 3. `p = exp(r)` by the degree-7 Taylor polynomial, coefficients 1/j! rounded to binary32
//!    ([`EXP_POLY`]), evaluated by Horner FMAs from the top: `p = c7`, then `p = fma(p, r, c_j)`
//!    for j = 6 down to 0. Its truncation error (≤ 0.347^8/8! < 2^−37 relative) is far below
//!    the rounding errors.
//! 4. Scale by 2^n (IEEE-754-2019 §5.3.3 scaleB): with a = ⌊n/2⌋ and b = n − a, both in
//!    [−76, 64], `y = mul(mul(p, 2^a), 2^b)`, the two powers of two built by exponent
//!    arithmetic (`(e + 127) << 23`). The first product is exact (p·2^a is normal), so the
//!    second rounds once: overflow gives +∞ and underflow gives the correctly rounded
//!    subnormal or +0, by the multiplier's own IEEE rules (§7.4, §7.5). No flush to zero.
//!
//! exp(±0) = 1 exactly, and the result is never negative.
//!
//! # ln
//!
//! 1. Special values (§9.2.1): NaN and x < 0 (not −0) → [`CANONICAL_NAN`]; ±0 → −∞; +∞ → +∞.
//! 2. A subnormal x is first multiplied by 2^23 (exact) and 23 taken off its exponent.
//! 3. x = 2^e·m with m ∈ [1, 2) from the bit fields (logB); if m > [`SQRT2_BITS`] (the
//!    binary32 just below √2), m is halved and e incremented (exponent arithmetic), so
//!    m ∈ [0.7071, 1.4142].
//! 4. `f = m − 1` (exact, Sterbenz), `s = div(f, f + 2)`, `z = s·s`, and
//!    `R = z·(2/3 + z·(2/5 + z·(2/7 + z·2/9)))` by Horner FMAs ([`LN_POLY`]), so that
//!    2·atanh(s) = 2s + s·R. Since f = 2s + s·f, ln(1+f) = f − s·(f − R): `t = f − R`,
//!    `l = fma(−s, t, f)`. The rounding errors of s and R only touch the correction term.
//!    The series after 2/9 contributes < 2^−32 relative.
//! 5. `y = fma(ef, LN2_HI, fma(ef, LN2_LO, l))` with `ef` = e as binary32 (an exact I2F).
//!
//! ln(1) = +0 exactly.

use crate::golden::fp::{add, is_nan, mul, CANONICAL_NAN, NEG_INF, ONE, POS_INF, POS_ZERO};
use crate::golden::optim::{div, fma};

/// The sign bit.
pub const SIGN: u32 = 0x8000_0000;
/// exp: above this input (89.0) the result is +∞.
pub const EXP_X_MAX: u32 = 0x42b2_0000;
/// exp: below this input (−105.0) the result is +0.
pub const EXP_X_MIN: u32 = 0xc2d2_0000;
/// 1/ln 2 rounded to binary32 (1.44269502…).
pub const INV_LN2: u32 = 0x3fb8_aa3b;
/// 1.5·2^23: adding it rounds to an integer held in the low mantissa bits.
pub const SHIFTER: u32 = 0x4b40_0000;
/// ln 2 rounded to binary32 (0.693147182…): the high part of the Cody–Waite split.
pub const LN2_HI: u32 = 0x3f31_7218;
/// ln 2 − LN2_HI rounded to binary32 (−1.90465421·10^−9): the low part.
pub const LN2_LO: u32 = 0xb102_e308;
/// 1/j! rounded to binary32 for j = 7 down to 0: the exp polynomial in Horner order.
pub const EXP_POLY: [u32; 8] =
    [0x3950_0d01, 0x3ab6_0b61, 0x3c08_8889, 0x3d2a_aaab, 0x3e2a_aaab, 0x3f00_0000, ONE, ONE];
/// The largest binary32 below √2 (1.41421354…): ln halves mantissas above it.
pub const SQRT2_BITS: u32 = 0x3fb5_04f3;
/// 2/9, 2/7, 2/5, 2/3 rounded to binary32: the ln polynomial in s² in Horner order.
pub const LN_POLY: [u32; 4] = [0x3e63_8e39, 0x3e92_4925, 0x3ecc_cccd, 0x3f2a_aaab];
/// 2.0.
const TWO: u32 = 0x4000_0000;
/// 2^23, to normalise subnormal inputs of ln.
const TWO_POW_23: u32 = 0x4b00_0000;

/// x < y for non-NaN binary32 (FPnew FLT; the callers have removed NaNs).
const fn less(x: u32, y: u32) -> bool {
    // Map to integers in the same order (−0 just below +0, which no threshold here meets).
    const fn key(v: u32) -> u32 {
        if v & SIGN != 0 {
            !v
        } else {
            v | SIGN
        }
    }
    key(x) < key(y)
}

/// 2^e for e ∈ [−126, 127], by exponent arithmetic.
const fn pow2(e: i32) -> u32 {
    ((e + 127) as u32) << 23
}

/// exp's range reduction of a finite x in [EXP_X_MIN, EXP_X_MAX]: (n, r_hi, r).
fn reduce(x: u32) -> (i32, u32, u32) {
    let k = fma(x, INV_LN2, SHIFTER);
    let n = k.wrapping_sub(SHIFTER) as i32;
    let nf = add(k, SHIFTER | SIGN);
    let r_hi = fma(nf, LN2_HI ^ SIGN, x);
    (n, r_hi, fma(nf, LN2_LO ^ SIGN, r_hi))
}

/// e^x as the exp unit computes it ([module docs](self)).
pub fn exp(x: u32) -> u32 {
    if is_nan(x) {
        return CANONICAL_NAN;
    }
    if less(EXP_X_MAX, x) {
        return POS_INF;
    }
    if less(x, EXP_X_MIN) {
        return POS_ZERO;
    }
    let (n, _, r) = reduce(x);
    let mut p = EXP_POLY[0];
    for c in &EXP_POLY[1..] {
        p = fma(p, r, *c);
    }
    let a = n >> 1;
    mul(mul(p, pow2(a)), pow2(n - a))
}

/// The natural logarithm as the ln unit computes it ([module docs](self)).
pub fn ln(x: u32) -> u32 {
    if is_nan(x) {
        return CANONICAL_NAN;
    }
    if x & !SIGN == 0 {
        return NEG_INF;
    }
    if x & SIGN != 0 {
        return CANONICAL_NAN;
    }
    if x == POS_INF {
        return POS_INF;
    }
    let (bits, adjust) = if x < 0x0080_0000 { (mul(x, TWO_POW_23), -23) } else { (x, 0) };
    let mut e = (bits >> 23) as i32 - 127 + adjust;
    let mut m = (bits & 0x007f_ffff) | ONE;
    if m > SQRT2_BITS {
        m -= 1 << 23;
        e += 1;
    }
    let f = add(m, ONE | SIGN);
    let s = div(f, add(f, TWO));
    let z = mul(s, s);
    let mut q = LN_POLY[0];
    for c in &LN_POLY[1..] {
        q = fma(q, z, *c);
    }
    let big_r = mul(q, z);
    let t = add(f, big_r ^ SIGN);
    let l = fma(s ^ SIGN, t, f);
    let ef = (e as f32).to_bits();
    fma(ef, LN2_HI, fma(ef, LN2_LO, l))
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::golden::fp::NEG_ZERO;
    use std::println;

    fn f(x: f32) -> u32 {
        x.to_bits()
    }

    fn v(x: u32) -> f64 {
        f64::from(f32::from_bits(x))
    }

    /// The binary32 ulp at the magnitude of `v` (2^−149 below the normal range).
    fn ulp32(v: f64) -> f64 {
        let v = v.abs();
        if v < f64::from(f32::MIN_POSITIVE) {
            return 2f64.powi(-149);
        }
        let e = ((v.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        2f64.powi(e - 23)
    }

    #[derive(Default, Debug)]
    struct Err {
        max_ulp: f64,
        at_ulp: u32,
        max_rel: f64,
        at_rel: u32,
        count: u64,
    }

    impl Err {
        /// Adds the error of `got` against the exact `want` at input `x`.
        fn add(&mut self, x: u32, got: u32, want: f64) {
            let g = f64::from(f32::from_bits(got));
            self.count += 1;
            if want > f64::from(f32::MAX) {
                // Beyond the overflow threshold the correct result is +∞; just below it
                // the unit must still be finite.
                let thr = 2f64.powi(128) * (1.0 - 2f64.powi(-25));
                assert!(want < thr || got == POS_INF, "{x:#x}: {g} for {want}");
                if want >= thr {
                    return;
                }
            }
            assert!(g.is_finite() || want.is_infinite(), "{x:#x}: {g} for {want}");
            let ulps = (g - want).abs() / ulp32(want);
            if ulps > self.max_ulp {
                self.max_ulp = ulps;
                self.at_ulp = x;
            }
            if want.abs() >= f64::from(f32::MIN_POSITIVE) {
                let rel = ((g - want) / want).abs();
                if rel > self.max_rel {
                    self.max_rel = rel;
                    self.at_rel = x;
                }
            }
        }
    }

    /// Every `stride`-th bit pattern of [lo, hi] (by order key), plus `extra`.
    fn sweep(lo: f32, hi: f32, stride: u32, mut each: impl FnMut(u32)) {
        // Walk negative values from −0 down, positive from +0 up, by bit pattern.
        let mut walk = |from: u32, to: u32| {
            let mut b = from;
            while b <= to {
                each(b);
                b = match b.checked_add(stride) {
                    Some(n) => n,
                    None => break,
                };
            }
            each(to);
        };
        if lo < 0.0 {
            walk(SIGN, f(lo));
        }
        if hi > 0.0 {
            walk(0, f(hi));
        }
    }

    #[test]
    fn constants_are_what_the_docs_say() {
        assert_eq!(f32::from_bits(INV_LN2), (1.0 / core::f64::consts::LN_2) as f32);
        assert_eq!(f32::from_bits(LN2_HI), core::f64::consts::LN_2 as f32);
        // ln2 − LN2_HI needs more than binary64's LN_2: add LN_2's own tail, ln 2 − LN_2.
        let tail = 2.319_046_813_846_299_6e-17;
        let lo = (core::f64::consts::LN_2 - f64::from(f32::from_bits(LN2_HI))) + tail;
        assert!((f64::from(f32::from_bits(LN2_LO)) - lo).abs() <= ulp32(lo), "{lo:e}");
        let mut fact = 1.0f64;
        for j in 0..8 {
            if j > 0 {
                fact *= f64::from(j);
            }
            assert_eq!(EXP_POLY[7 - j as usize], f((1.0 / fact) as f32), "1/{j}!");
        }
        for (i, k) in [9.0f64, 7.0, 5.0, 3.0].iter().enumerate() {
            assert_eq!(LN_POLY[i], f((2.0 / k) as f32));
        }
        assert_eq!(SQRT2_BITS, f(core::f32::consts::SQRT_2));
        assert!(f64::from(f32::from_bits(SQRT2_BITS)) < core::f64::consts::SQRT_2);
        assert_eq!((f32::from_bits(EXP_X_MAX), f32::from_bits(EXP_X_MIN)), (89.0, -105.0));
        assert!(89f64.exp() > f64::from(f32::MAX) && (-105f64).exp() < 2f64.powi(-150));
    }

    #[test]
    fn exp_special_values() {
        assert_eq!(exp(POS_ZERO), ONE);
        assert_eq!(exp(NEG_ZERO), ONE);
        assert_eq!(exp(CANONICAL_NAN), CANONICAL_NAN);
        assert_eq!(exp(0xffc0_1234), CANONICAL_NAN);
        assert_eq!(exp(0x7f80_0001), CANONICAL_NAN, "signalling NaN");
        assert_eq!(exp(POS_INF), POS_INF);
        assert_eq!(exp(NEG_INF), POS_ZERO);
        assert_eq!(exp(f(f32::MAX)), POS_INF);
        assert_eq!(exp(f(-f32::MAX)), POS_ZERO);
        assert_eq!(exp(1), ONE, "e^(2^-149) rounds to 1");
        assert_eq!(exp(SIGN | 1), ONE);
        // The overflow edge: 0x42b17217 is the largest input with a finite exp.
        assert_eq!(exp(0x42b1_7217), 0x7f7f_ff84, "correctly rounded");
        assert_eq!(exp(0x42b1_7218), POS_INF);
        // The underflow edge: e^x crosses 2^-150 at x = -103.972077.
        assert_eq!(exp(f(-103.972)), 1, "just above 2^-150: the smallest subnormal");
        assert_eq!(exp(f(-103.9721)), 0);
        assert_eq!(exp(f(-88.0)), 0x0041_edc4, "a subnormal result, correctly rounded");
        assert_eq!(exp(f(1.0)), f(core::f32::consts::E));
        for x in [-87.0f32, -50.0, -10.0, -1.0, -0.5, 0.25, 1.0, 10.0, 50.0, 88.0] {
            let want = f64::from(x).exp();
            let got = f64::from(f32::from_bits(exp(f(x))));
            assert!(((got - want) / want).abs() < 3e-7, "exp({x}) = {got}, want {want}");
        }
    }

    /// The documented bound: ≤ 1 ulp everywhere ([`EXP_MAX_ULP`]), relative ≤ 1.2·10^−7 on
    /// normal results. The sweep takes every 2039th bit pattern of [−105, 89], dense runs at
    /// the edges and at every reduction boundary x = (j + ½)·ln 2.
    #[test]
    fn exp_error_bound() {
        let mut e = Err::default();
        let mut check = |x: u32| {
            if is_nan(x) {
                return;
            }
            let xv = f64::from(f32::from_bits(x));
            e.add(x, exp(x), xv.exp());
            // The reduction's first step is exact (binary64 holds x − n·LN2_HI exactly).
            let (n, r_hi, r) = reduce(x);
            assert_eq!(v(r_hi), xv - f64::from(n) * v(LN2_HI), "r_hi of {x:#x}");
            assert!((-151..=128).contains(&n) && v(r).abs() <= 0.347, "{x:#x}: n = {n}, r = {}", v(r));
        };
        sweep(-105.0, 89.0, 2039, &mut check);
        for j in -152i32..=129 {
            let mid = f(((f64::from(j) + 0.5) * core::f64::consts::LN_2) as f32);
            for d in -300i32..=300 {
                let x = (mid as i32).wrapping_add(d) as u32;
                if less(x, f(89.0)) && less(f(-105.0), x) {
                    check(x);
                }
            }
        }
        for edge in [0x42b1_7217u32, f(-103.972_08), f(-87.33), 0, SIGN, f(-0.346_57), f(0.346_57)] {
            for d in 0..2000u32 {
                check(edge.wrapping_sub(1000).wrapping_add(d));
            }
        }
        println!(
            "exp unit: {} inputs, max {:.4} ulp at {:#x} ({:e}), max relative {:.3e} at {:#x} ({:e})",
            e.count,
            e.max_ulp,
            e.at_ulp,
            f32::from_bits(e.at_ulp),
            e.max_rel,
            e.at_rel,
            f32::from_bits(e.at_rel)
        );
        assert!(e.max_ulp <= EXP_MAX_ULP, "{e:?}");
        assert!(e.max_rel <= EXP_MAX_REL, "{e:?}");
    }

    /// The bound docs/mesh.md states for exp, in binary32 ulps of the exact result.
    const EXP_MAX_ULP: f64 = 1.0;
    /// The bound docs/mesh.md states for exp, relative, on normal results.
    const EXP_MAX_REL: f64 = 1.2e-7;
    /// The bound docs/mesh.md states for ln.
    const LN_MAX_ULP: f64 = 1.0;

    #[test]
    fn ln_special_values_and_bound() {
        assert_eq!(ln(ONE), POS_ZERO);
        assert_eq!(ln(POS_ZERO), NEG_INF);
        assert_eq!(ln(NEG_ZERO), NEG_INF);
        assert_eq!(ln(POS_INF), POS_INF);
        assert_eq!(ln(NEG_INF), CANONICAL_NAN);
        assert_eq!(ln(f(-1.0)), CANONICAL_NAN);
        assert_eq!(ln(SIGN | 1), CANONICAL_NAN);
        assert_eq!(ln(0x7fc0_0001), CANONICAL_NAN);
        assert_eq!(ln(f(2.0)), LN2_HI);
        let mut e = Err::default();
        let mut check = |x: u32| {
            if !is_nan(x) && x != POS_INF {
                e.add(x, ln(x), f64::from(f32::from_bits(x)).ln())
            }
        };
        // Every 4093rd positive pattern, subnormals included, then [1, 2^24] densely (the
        // loss stage takes ln of a softmax sum S ∈ [1, classes]).
        sweep(0.0, f32::MAX, 4093, &mut check);
        sweep(0.0, 16_777_216.0, 4093, |x| {
            if x >= ONE {
                check(x)
            }
        });
        for edge in [ONE, SQRT2_BITS, 0x3f35_04f3, 0x0080_0000, 1, f(10.0)] {
            for d in 0..2000u32 {
                check(edge.wrapping_sub(1000).wrapping_add(d) & !SIGN);
            }
        }
        println!(
            "ln unit: {} inputs, max {:.4} ulp at {:#x} ({:e}), max relative {:.3e} at {:#x}",
            e.count,
            e.max_ulp,
            e.at_ulp,
            f32::from_bits(e.at_ulp),
            e.max_rel,
            e.at_rel
        );
        assert!(e.max_ulp <= LN_MAX_ULP, "{e:?}");
    }

    /// Every binary32 input of [−105, 89] (exp) and every positive finite one (ln), on all
    /// cores: `cargo test -p ws-common --release exhaustive -- --ignored --nocapture`.
    #[test]
    #[ignore = "about 2·10^9 inputs: run in release"]
    fn exhaustive_exp_and_ln() {
        use std::sync::Mutex;
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2) as u32;
        let results = Mutex::new((Err::default(), Err::default()));
        std::thread::scope(|sc| {
            for t in 0..threads {
                let results = &results;
                sc.spawn(move || {
                    let (mut ee, mut le) = (Err::default(), Err::default());
                    let mut x = t;
                    loop {
                        if !is_nan(x) {
                            let v = f64::from(f32::from_bits(x));
                            if (-105.0..=89.0).contains(&v) {
                                ee.add(x, exp(x), v.exp());
                            }
                            if v > 0.0 && v.is_finite() {
                                le.add(x, ln(x), v.ln());
                            }
                        }
                        match x.checked_add(threads) {
                            Some(n) => x = n,
                            None => break,
                        }
                    }
                    let mut r = results.lock().unwrap();
                    let (re, rl) = &mut *r;
                    for (acc, part) in [(re, ee), (rl, le)] {
                        acc.count += part.count;
                        if part.max_ulp > acc.max_ulp {
                            (acc.max_ulp, acc.at_ulp) = (part.max_ulp, part.at_ulp);
                        }
                        if part.max_rel > acc.max_rel {
                            (acc.max_rel, acc.at_rel) = (part.max_rel, part.at_rel);
                        }
                    }
                });
            }
        });
        let (ee, le) = results.into_inner().unwrap();
        println!(
            "exhaustive exp: {ee:?}, at {:e} / {:e}",
            f32::from_bits(ee.at_ulp),
            f32::from_bits(ee.at_rel)
        );
        println!(
            "exhaustive ln: {le:?}, at {:e} / {:e}",
            f32::from_bits(le.at_ulp),
            f32::from_bits(le.at_rel)
        );
        assert!(ee.max_ulp <= EXP_MAX_ULP && ee.max_rel <= EXP_MAX_REL);
        assert!(le.max_ulp <= LN_MAX_ULP);
    }
}
