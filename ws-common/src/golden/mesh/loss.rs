//! Softmax cross-entropy on the last layer, per sample, and the prediction.
//!
//! For one sample with logits `z_0 … z_(C−1)` and label `y`, in this order (each line one
//! FPnew operation or a loop of them, i always increasing):
//!
//! ```text
//! m    = z_0;  m = fmax(m, z_i) for i = 1 … C−1    FPnew MINMAX (maximumNumber, see fmax)
//! pred = argmax(z)                                 the first index of the largest value
//! d_y  = z_y − m                                   FPnew ADD with m's sign flipped
//! e_i  = exp(z_i − m)                              the exp unit (super::funcs::exp)
//! S    = −0;  S = S + e_i for i = 0 … C−1          FPnew ADD
//! r    = 1 / S                                     correctly rounded DIV (FPnew DIVSQRT)
//! dz_i = fma(e_i, r, −1 if i = y else −0)          softmax − one-hot, one rounding
//! loss = ln(S) − d_y                               the ln unit (super::funcs::ln), then ADD
//! ```
//!
//! dz is the gradient of this sample's loss, unscaled: the mesh emits gradients of the *sum*
//! of the losses, and MemoryX applies 1/(workers·batch) (`golden::optim`'s `gscale`). For
//! i ≠ y, `fma(e_i, r, −0)` is the rounded product e_i·r. One reciprocal and C multiplies
//! instead of C divisions keep the DIVSQRT unit off the per-class path; the price is up to
//! one more rounding than e_i / S (documented in docs/mesh.md).
//!
//! **fmax** is FPnew's MAX (RISC-V `fmax.s`, IEEE-754-2019 §9.6 maximumNumber): a NaN
//! operand loses to a number, two NaNs give the canonical NaN, and −0 < +0. A NaN logit
//! therefore does not become m, but it still poisons its own e_i and with it S (below).
//!
//! **argmax**: a scan from i = 0 that moves to i only when z_i is greater than the best so
//! far (IEEE-754-2019 §5.11 compareQuietGreater, so −0 and +0 tie), with a NaN greater than
//! everything and not greater than another NaN. Ties go to the lowest index; the first NaN
//! wins. That is `torch.argmax`. The sample counts as correct when `pred == y`.
//!
//! **Edge cases** follow from the operations:
//! - a NaN logit makes its own e_i NaN, hence S, 1/S, every dz_i and the loss (IEEE-754-2019
//!   §6.2; m stays the largest number);
//! - a +∞ logit makes m = +∞ and ∞ − ∞ = NaN (§7.2), so the same;
//! - a −∞ logit (beside a finite maximum) gets e_i = +0, and the loss is +∞ if it is the
//!   label's; logits so far apart that z_i − m overflows to −∞ likewise;
//! - S ≥ 1 whenever it is not NaN (the maximum contributes exp(+0) = 1 exactly), so 1/S and
//!   ln S never meet 0 or ∞.

use super::funcs::{exp, ln, SIGN};
use super::MeshError;
use crate::golden::fp::{add, is_nan, CANONICAL_NAN, NEG_ZERO, ONE};
use crate::golden::optim::{div, fma};

/// −1.0.
const NEG_ONE: u32 = ONE | SIGN;

/// What one sample's loss stage produced besides dz.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SampleLoss {
    /// The cross-entropy loss, −ln softmax(z)_y.
    pub loss: u32,
    /// The predicted class ([`argmax`]).
    pub pred: usize,
    /// The largest logit m ([`fmax`]: NaNs lose).
    pub max: u32,
    /// The softmax denominator S = Σ exp(z_i − m).
    pub sum: u32,
    /// 1/S.
    pub recip: u32,
}

/// The larger of `a` and `b` as FPnew's MAX gives it ([module docs](self)).
pub fn fmax(a: u32, b: u32) -> u32 {
    match (is_nan(a), is_nan(b)) {
        (true, true) => CANONICAL_NAN,
        (true, false) => b,
        (false, true) => a,
        // −0 < +0: compare the sign-magnitude patterns as ordered integers.
        (false, false) => {
            let key = |v: u32| if v & SIGN != 0 { !v } else { v | SIGN };
            if key(a) >= key(b) {
                a
            } else {
                b
            }
        }
    }
}

/// `a > b` for [`argmax`]: numeric (−0 = +0), a NaN above every number, never above a NaN.
pub fn greater(a: u32, b: u32) -> bool {
    if is_nan(b) {
        return false;
    }
    is_nan(a) || f32::from_bits(a) > f32::from_bits(b)
}

/// The first index of the largest logit (NaN largest), `None` for no logits.
pub fn argmax(z: &[u32]) -> Option<usize> {
    let mut best = 0;
    for i in 1..z.len() {
        if greater(z[i], z[best]) {
            best = i;
        }
    }
    (!z.is_empty()).then_some(best)
}

/// The loss stage of one sample ([module docs](self)): `z` holds the C logits and gets dz.
pub fn softmax_xent(z: &mut [u32], label: usize) -> Result<SampleLoss, MeshError> {
    let classes = z.len();
    let (first, _) = z.split_first().ok_or(MeshError::ZeroDim { index: 0 })?;
    if label >= classes {
        let label = u32::try_from(label).unwrap_or(u32::MAX);
        return Err(MeshError::BadLabel { sample: 0, label, classes });
    }
    let m = z[1..].iter().fold(*first, |m, v| fmax(m, *v));
    let pred = argmax(z).unwrap_or(0);
    let neg_m = m ^ SIGN;
    let d_y = add(z[label], neg_m);
    for v in z.iter_mut() {
        *v = exp(add(*v, neg_m));
    }
    let sum = z.iter().fold(NEG_ZERO, |s, e| add(s, *e));
    let recip = div(ONE, sum);
    for (i, v) in z.iter_mut().enumerate() {
        *v = fma(*v, recip, if i == label { NEG_ONE } else { NEG_ZERO });
    }
    let loss = add(ln(sum), d_y ^ SIGN);
    Ok(SampleLoss { loss, pred, max: m, sum, recip })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::golden::fp::{NEG_INF, POS_INF, POS_ZERO};

    fn f(x: f32) -> u32 {
        x.to_bits()
    }

    fn v(x: u32) -> f64 {
        f64::from(f32::from_bits(x))
    }

    #[test]
    fn by_hand() {
        // Equal logits: softmax 1/C, loss ln C, dz = 1/C − [i = y].
        let mut z = [f(3.0); 4];
        let r = softmax_xent(&mut z, 2).unwrap();
        assert_eq!((r.max, r.sum, r.recip, r.pred), (f(3.0), f(4.0), f(0.25), 0));
        assert_eq!(z, [f(0.25), f(0.25), f(-0.75), f(0.25)]);
        assert!((v(r.loss) - 4f64.ln()).abs() < 1e-7);
        // One class: the loss and the gradient are +0.
        let mut z = [f(-7.5)];
        let r = softmax_xent(&mut z, 0).unwrap();
        assert_eq!((r.loss, z[0], r.pred), (POS_ZERO, POS_ZERO, 0));
        // Two classes at 0 and ln 3: p = (1/4, 3/4).
        let mut z = [f(0.0), f(3f32.ln())];
        let r = softmax_xent(&mut z, 0).unwrap();
        assert_eq!(r.pred, 1);
        assert!((v(z[0]) + 0.75).abs() < 1e-7 && (v(z[1]) - 0.75).abs() < 1e-7, "{z:?}");
        assert!((v(r.loss) - 4f64.ln()).abs() < 2e-7, "{}", v(r.loss));
        assert_eq!(z[1], r.recip, "e_1 = exp(+0) = 1, so dz_1 = 1·r");
    }

    #[test]
    fn fmax_is_fpnew_max() {
        assert_eq!(fmax(f(1.0), f(2.0)), f(2.0));
        assert_eq!(fmax(f(-1.0), f(-2.0)), f(-1.0));
        assert_eq!(fmax(NEG_ZERO, POS_ZERO), POS_ZERO);
        assert_eq!(fmax(POS_ZERO, NEG_ZERO), POS_ZERO);
        assert_eq!(fmax(0xffc0_0001, f(-3.0)), f(-3.0), "a NaN loses");
        assert_eq!(fmax(f(-3.0), 0x7f80_0001), f(-3.0), "a signalling NaN too");
        assert_eq!(fmax(0xffc0_0001, 0x7f80_0001), CANONICAL_NAN);
        assert_eq!(fmax(NEG_INF, f(-1e38)), f(-1e38));
        assert_eq!(fmax(POS_INF, f(1e38)), POS_INF);
        assert_eq!(fmax(0x8000_0001, 0x8000_0002), 0x8000_0001);
    }

    #[test]
    fn argmax_ties_and_nans() {
        assert_eq!(argmax(&[]), None);
        assert_eq!(argmax(&[f(1.0), f(3.0), f(3.0)]), Some(1));
        assert_eq!(argmax(&[NEG_ZERO, POS_ZERO]), Some(0), "-0 and +0 tie");
        assert_eq!(argmax(&[f(1.0), CANONICAL_NAN, f(5.0), 0x7fc0_0001]), Some(1), "the first NaN wins");
        assert_eq!(argmax(&[NEG_INF, NEG_INF]), Some(0));
        assert_eq!(argmax(&[f(-1e30), POS_INF]), Some(1));
    }

    #[test]
    fn edge_logits_never_panic_and_follow_the_rules() {
        // NaN poisons everything.
        let mut z = [f(1.0), 0xffc0_0001, f(2.0)];
        let r = softmax_xent(&mut z, 0).unwrap();
        assert_eq!((r.loss, r.pred, r.max), (CANONICAL_NAN, 1, f(2.0)));
        assert!(z.iter().all(|d| *d == CANONICAL_NAN));
        // +inf: inf - inf.
        let mut z = [POS_INF, f(2.0)];
        let r = softmax_xent(&mut z, 1).unwrap();
        assert_eq!((r.loss, r.pred, z), (CANONICAL_NAN, 0, [CANONICAL_NAN; 2]));
        // -inf beside a finite maximum: e = 0, exactly one-hot.
        let mut z = [NEG_INF, f(2.0)];
        let r = softmax_xent(&mut z, 1).unwrap();
        assert_eq!((r.loss, z), (POS_ZERO, [POS_ZERO, POS_ZERO]));
        let mut z = [NEG_INF, f(2.0)];
        assert_eq!(softmax_xent(&mut z, 0).unwrap().loss, POS_INF);
        assert_eq!(z, [NEG_ONE, ONE]);
        // Huge logits: z_i − m overflows to −inf.
        let mut z = [f(3e38), f(-3e38)];
        let r = softmax_xent(&mut z, 1).unwrap();
        assert_eq!((r.loss, z), (POS_INF, [ONE, NEG_ONE]));
        let mut z = [f(3e38), f(-3e38)];
        assert_eq!(softmax_xent(&mut z, 0).unwrap().loss, POS_ZERO);
        // Large but finite gaps: the smaller class underflows through subnormals to 0.
        let mut z = [f(0.0), f(-90.0), f(-200.0)];
        let r = softmax_xent(&mut z, 0).unwrap();
        assert!(z[1] != POS_ZERO && z[1] < 0x0080_0000, "e^-90 is subnormal: {:#x}", z[1]);
        assert_eq!((z[0], z[2], r.sum, r.loss), (POS_ZERO, POS_ZERO, ONE, POS_ZERO));
        let mut z = [f(0.0), f(-90.0), f(-200.0)];
        let r = softmax_xent(&mut z, 1).unwrap();
        assert_eq!((r.loss, z[1]), (f(90.0), NEG_ONE));
        // Tiny (subnormal) logits: softmax 1/C.
        let mut z = [1, 0x8000_0001, 0];
        softmax_xent(&mut z, 0).unwrap();
        assert_eq!(z[1], div(ONE, f(3.0)));
        // Bad input is an error, not a panic.
        assert_eq!(softmax_xent(&mut [], 0), Err(MeshError::ZeroDim { index: 0 }));
        assert_eq!(
            softmax_xent(&mut [f(1.0); 3], 3),
            Err(MeshError::BadLabel { sample: 0, label: 3, classes: 3 })
        );
    }
}
