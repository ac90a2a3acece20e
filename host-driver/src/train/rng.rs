//! The training run's random numbers: SplitMix64, whose whole state is one `u64`.
//!
//! A `wsctl train` run draws its split, its weight initialisation and each epoch's shuffle from
//! one [`Rng`]. A checkpoint stores [`Rng::state`] and a resumed run continues with
//! [`Rng::from_state`], so it draws exactly the numbers the uninterrupted run would have.
//!
//! SplitMix64 is the generator of Steele, Lea and Flood, "Fast Splittable Pseudorandom Number
//! Generators" (OOPSLA 2014): a Weyl sequence (add the golden-ratio constant 0x9E3779B97F4A7C15)
//! passed through a 64-bit finaliser. It is small, fast, passes BigCrush, and visits every
//! `u64` state once per period of 2⁶⁴; it is not cryptographic, which training does not need.

/// The Weyl increment: 2⁶⁴ divided by the golden ratio, rounded to odd.
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// A SplitMix64 generator. Equal states give equal sequences, on every platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator seeded with `seed` (any value, 0 included).
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// A generator that continues from a state saved by [`Rng::state`].
    pub fn from_state(state: u64) -> Rng {
        Rng { state }
    }

    /// The whole state: store it in a checkpoint, resume with [`Rng::from_state`].
    pub fn state(&self) -> u64 {
        self.state
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n`, without modulo bias.
    ///
    /// 2⁶⁴ mod n of the 2⁶⁴ raw values would make the low results more likely, so draws below
    /// that many are rejected and drawn again (at most one draw in two for any n).
    ///
    /// # Panics
    ///
    /// When `n` is 0: there is no integer in `0..0`.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "Rng::below(0): the range 0..0 is empty");
        // 2⁶⁴ mod n, computed in 64 bits as (2⁶⁴ − n) mod n.
        let threshold = n.wrapping_neg() % n;
        loop {
            let r = self.next_u64();
            if r >= threshold {
                return r % n;
            }
        }
    }

    /// Puts `items` in a uniformly random order (Fisher–Yates: Knuth, TAOCP vol. 2 §3.4.2,
    /// algorithm P).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }

    /// A uniform `f32` between `lo` and `hi`, for weight initialisation.
    ///
    /// The top 24 bits of a draw give u = k/2²⁴ in [0, 1), every value exact in f32 (the
    /// significand has 24 bits); the result is `lo + (hi − lo)·u`, which rounding can carry
    /// to `hi` itself.
    pub fn uniform_f32(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 * (1.0 / (1u32 << 24) as f32);
        lo + (hi - lo) * u
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_zero_gives_the_reference_outputs() {
        // SplitMix64's published outputs for seed 0 (as in the reference splitmix64.c).
        let mut r = Rng::new(0);
        let got: Vec<u64> = (0..4).map(|_| r.next_u64()).collect();
        assert_eq!(
            got,
            [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F, 0xF88B_B8A8_724C_81EC]
        );
    }

    #[test]
    fn from_state_continues_the_same_sequence() {
        let mut a = Rng::new(42);
        for _ in 0..17 {
            a.next_u64();
        }
        let mut b = Rng::from_state(a.state());
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_eq!(a.below(1000), b.below(1000));
        assert_eq!(a.uniform_f32(-1.0, 1.0).to_bits(), b.uniform_f32(-1.0, 1.0).to_bits());
        assert_eq!(a, b);
    }

    #[test]
    fn shuffle_is_a_permutation_and_depends_on_the_seed() {
        let original: Vec<u32> = (0..1000).collect();
        let mut a = original.clone();
        Rng::new(1).shuffle(&mut a);
        assert_ne!(a, original, "1000 items left in order");
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, original);

        let mut again = original.clone();
        Rng::new(1).shuffle(&mut again);
        assert_eq!(again, a, "same seed, same order");
        let mut other = original.clone();
        Rng::new(2).shuffle(&mut other);
        assert_ne!(other, a, "another seed, another order");

        // Empty and single-item slices are left alone without drawing.
        let mut r = Rng::new(3);
        r.shuffle::<u8>(&mut []);
        r.shuffle(&mut [7]);
        assert_eq!(r.state(), 3);
    }

    #[test]
    fn below_stays_in_range_and_reaches_every_value() {
        let mut r = Rng::new(7);
        for n in [1u64, 2, 3, 10, 1 << 33, u64::MAX] {
            for _ in 0..200 {
                assert!(r.below(n) < n);
            }
        }
        let mut seen = [0u32; 6];
        for _ in 0..6000 {
            seen[r.below(6) as usize] += 1;
        }
        // Each face expects 1000; 850..1150 is more than 5 standard deviations (σ ≈ 29).
        assert!(seen.iter().all(|&c| (850..1150).contains(&c)), "{seen:?}");
    }

    #[test]
    fn uniform_f32_stays_between_its_bounds() {
        let mut r = Rng::new(9);
        let (mut min, mut max) = (f32::MAX, f32::MIN);
        for _ in 0..10_000 {
            let v = r.uniform_f32(-0.5, 0.25);
            assert!((-0.5..=0.25).contains(&v), "{v}");
            min = min.min(v);
            max = max.max(v);
        }
        assert!(min < -0.49 && max > 0.24, "{min}..{max}");
    }

    #[test]
    #[should_panic(expected = "empty")]
    fn below_zero_panics() {
        Rng::new(0).below(0);
    }
}
