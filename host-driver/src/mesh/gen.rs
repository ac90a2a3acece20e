//! The random parameters and samples of the mesh commands and tests.

/// xorshift64: random parameters and samples that need no crate and repeat with the seed
/// (the seed must not be 0).
#[derive(Debug, Clone)]
pub struct Gen(pub u64);

impl Gen {
    /// The next 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A binary32 in [−scale, scale), as bits.
    pub fn f32(&mut self, scale: f32) -> u32 {
        let u = (self.bits() >> 40) as f32 / (1u64 << 24) as f32;
        ((2.0 * u - 1.0) * scale).to_bits()
    }
}
