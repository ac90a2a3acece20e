//! IEEE-754 binary32 as the FPnew units in the RTL compute it, and the bf16 wire format.
//!
//! FPnew implements IEEE-754-2008 addition and multiplication (§5.4.1) with
//! round-to-nearest-even, subnormal inputs and outputs kept (no flush to zero), and one
//! deviation that matters for bit-exactness: every NaN result is the canonical quiet NaN
//! [`CANONICAL_NAN`] (`0x7fc0_0000`, positive, no payload), as RISC-V's F extension requires
//! (§11.3). Rust's `f32` operations follow IEEE-754 but propagate an input NaN's payload and
//! sign, so [`add`] and [`mul`] canonicalise every NaN result. Everything else (zero signs,
//! subnormals, overflow to infinity, inf − inf) comes from Rust's `f32`, which is correctly
//! rounded RNE on every target we build for (SSE2 on x86-64, soft-float on RISC-V).
//!
//! The zero rules that follow from IEEE-754 §6.3, which SwarmX relies on:
//! - `-0 + -0 = -0`, `+0 + -0 = +0`, `x + (-x) = +0` (RNE);
//! - `x + (-0) = x` for every non-NaN `x`, so `-0` is the identity SwarmX feeds for masked
//!   ports.
//!
//! bf16 is the upper half of a binary32: widening ([`bf16_to_f32`]) is exact. Narrowing
//! ([`f32_to_bf16`]) rounds to nearest even on bit 16, overflows to infinity, keeps the sign
//! of zero, rounds subnormals like normals (the exponent field is shared), and maps every NaN
//! to the canonical bf16 quiet NaN [`BF16_CANONICAL_NAN`] (`0x7fc0`).

/// The quiet NaN FPnew returns for every NaN result.
pub const CANONICAL_NAN: u32 = 0x7fc0_0000;
/// The bf16 quiet NaN [`f32_to_bf16`] returns for every NaN input.
pub const BF16_CANONICAL_NAN: u16 = 0x7fc0;
/// −0.0, the additive identity.
pub const NEG_ZERO: u32 = 0x8000_0000;
/// +0.0.
pub const POS_ZERO: u32 = 0x0000_0000;
/// 1.0.
pub const ONE: u32 = 0x3f80_0000;
/// +∞.
pub const POS_INF: u32 = 0x7f80_0000;
/// −∞.
pub const NEG_INF: u32 = 0xff80_0000;

/// True for every NaN encoding (quiet or signalling, any sign and payload).
pub const fn is_nan(x: u32) -> bool {
    (x & 0x7fff_ffff) > POS_INF
}

/// `x`, with any NaN replaced by [`CANONICAL_NAN`].
pub const fn canonicalize(x: u32) -> u32 {
    if is_nan(x) {
        CANONICAL_NAN
    } else {
        x
    }
}

/// `a + b` as FPnew's ADD computes it (RNE, canonical NaN).
pub fn add(a: u32, b: u32) -> u32 {
    canonicalize((f32::from_bits(a) + f32::from_bits(b)).to_bits())
}

/// `a × b` as FPnew's MUL computes it (RNE, canonical NaN).
pub fn mul(a: u32, b: u32) -> u32 {
    canonicalize((f32::from_bits(a) * f32::from_bits(b)).to_bits())
}

/// Widens a bf16 to binary32 (exact; a NaN keeps its payload, an adder canonicalises it).
pub const fn bf16_to_f32(h: u16) -> u32 {
    (h as u32) << 16
}

/// Narrows a binary32 to bf16: round to nearest, ties to even, on the 16 dropped bits; any
/// NaN becomes [`BF16_CANONICAL_NAN`].
pub const fn f32_to_bf16(x: u32) -> u16 {
    if is_nan(x) {
        return BF16_CANONICAL_NAN;
    }
    // Adding 0x7fff plus the kept LSB rounds half to even; a carry out of the mantissa bumps
    // the exponent, which is exactly the round-up of the largest finite values to infinity
    // and of the largest subnormals to the smallest normal. No overflow: x <= 0xff80_0000.
    let lsb = (x >> 16) & 1;
    ((x + 0x7fff + lsb) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f32) -> u32 {
        x.to_bits()
    }

    #[test]
    fn zero_signs_follow_rne() {
        assert_eq!(add(NEG_ZERO, NEG_ZERO), NEG_ZERO);
        assert_eq!(add(POS_ZERO, NEG_ZERO), POS_ZERO);
        assert_eq!(add(NEG_ZERO, POS_ZERO), POS_ZERO);
        assert_eq!(add(f(1.5), f(-1.5)), POS_ZERO);
        assert_eq!(mul(NEG_ZERO, f(3.0)), NEG_ZERO);
        assert_eq!(mul(f(-1e-30), f(1e-30)), NEG_ZERO, "underflow keeps the sign");
        // -0 is the identity for every non-NaN value.
        for x in [POS_ZERO, NEG_ZERO, 1, 0x8000_0001, 0x007f_ffff, f(1.0), f(-3.5), POS_INF, NEG_INF] {
            assert_eq!(add(x, NEG_ZERO), x, "{x:#x}");
            assert_eq!(add(NEG_ZERO, x), x, "{x:#x}");
        }
    }

    #[test]
    fn nans_are_canonical() {
        assert_eq!(add(POS_INF, NEG_INF), CANONICAL_NAN);
        assert_eq!(mul(POS_INF, POS_ZERO), CANONICAL_NAN);
        assert_eq!(add(0xffc0_1234, f(1.0)), CANONICAL_NAN);
        assert_eq!(add(0x7f80_0001, f(1.0)), CANONICAL_NAN, "signalling NaN");
        assert_eq!(mul(0xff80_0001, f(2.0)), CANONICAL_NAN);
        assert!(is_nan(CANONICAL_NAN) && !is_nan(POS_INF) && !is_nan(NEG_INF));
    }

    #[test]
    fn subnormals_overflow_and_extremes() {
        let min_sub = 1u32;
        assert_eq!(add(min_sub, min_sub), 2);
        assert_eq!(add(0x007f_ffff, 1), 0x0080_0000, "largest subnormal + min = smallest normal");
        assert_eq!(add(0x0080_0000, 0x8000_0001), 0x007f_ffff, "back to subnormal");
        assert_eq!(add(f(f32::MAX), f(f32::MAX)), POS_INF);
        assert_eq!(add(f(-f32::MAX), f(-f32::MAX)), NEG_INF);
        assert_eq!(mul(f(f32::MAX), f(2.0)), POS_INF);
        assert_eq!(mul(min_sub, f(0.5)), POS_ZERO, "ties to even: 0.5 ulp rounds to 0");
        assert_eq!(mul(3, f(0.5)), 2, "1.5 ulp rounds to 2");
        assert_eq!(add(f(1.0), f(f32::EPSILON / 2.0)), f(1.0), "tie to even");
    }

    #[test]
    fn bf16_conversions() {
        assert_eq!(bf16_to_f32(0x3f80), f(1.0));
        assert_eq!(f32_to_bf16(f(1.0)), 0x3f80);
        assert_eq!(f32_to_bf16(0x3f80_8000), 0x3f80, "tie, even stays");
        assert_eq!(f32_to_bf16(0x3f81_8000), 0x3f82, "tie, odd rounds up");
        assert_eq!(f32_to_bf16(0x3f80_8001), 0x3f81);
        assert_eq!(f32_to_bf16(0x7f7f_ffff), 0x7f80, "largest finite rounds to infinity");
        assert_eq!(f32_to_bf16(0x7f7f_7fff), 0x7f7f);
        assert_eq!(f32_to_bf16(NEG_ZERO), 0x8000);
        assert_eq!(f32_to_bf16(0x007f_ffff), 0x0080, "largest subnormal rounds to smallest normal");
        assert_eq!(f32_to_bf16(0x0000_8000), 0x0000, "half of the smallest bf16 subnormal, tie to even");
        assert_eq!(f32_to_bf16(0x0001_8000), 0x0002);
        assert_eq!(
            f32_to_bf16(0x7f80_0001),
            BF16_CANONICAL_NAN,
            "a NaN with a low payload must not become inf"
        );
        assert_eq!(f32_to_bf16(0xffc0_0000), BF16_CANONICAL_NAN);
        assert_eq!(f32_to_bf16(NEG_INF), 0xff80);
        // Widening then narrowing is the identity on non-NaN bf16.
        for h in 0..=u16::MAX {
            let w = bf16_to_f32(h);
            if !is_nan(w) {
                assert_eq!(f32_to_bf16(w), h);
            }
        }
    }
}
