//! Pieces both PHY testbenches use: random bytes and their little-endian words, and the
//! throughput window.

use rand::rngs::StdRng;
use rand::RngExt;

/// `bytes` as little-endian 32-bit words (stream byte 0 in bits 7:0, docs/link.md "Frame");
/// the length must be a multiple of 4.
pub fn le_words(bytes: &[u8]) -> Vec<u32> {
    assert!(bytes.len().is_multiple_of(4), "a whole number of words");
    bytes.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// `n` random bytes.
pub fn random_bytes(rng: &mut StdRng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.random::<u8>()).collect()
}

/// The cycles between the first and the last transfer of a run, for throughput figures that
/// leave out the reset and the drain at the end.
#[derive(Debug, Default, Clone, Copy)]
pub struct Window {
    first: Option<u64>,
    last: u64,
}

impl Window {
    /// Notes a transfer in `cycle`.
    pub fn note(&mut self, cycle: u64) {
        self.first.get_or_insert(cycle);
        self.last = cycle;
    }

    /// Cycles from the first transfer to the last, both included.
    pub fn cycles(&self) -> u64 {
        self.first.map_or(0, |f| self.last - f + 1)
    }
}
