//! CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, init and final xor 0xFFFF_FFFF), as
//! used by iSCSI (RFC 3720 §B.4) and by every weightstream frame.
//!
//! Three implementations compute the same function:
//! - [`Crc32c::update_bytewise`]: one 1 KiB table, a byte per step. Small; what the 32-bit
//!   firmware and the 8 KiB boot ROM use through [`Crc32c::update`].
//! - [`Crc32c::update_slice8`]: slicing-by-8 (Kounavis and Berry, "A Systematic Approach to
//!   Building High Performance Software-Based CRC Generators", 2005) over eight 1 KiB tables
//!   computed at compile time, 8 bytes per step. [`Crc32c::update`] uses it on 64-bit targets.
//! - with the `std` feature on x86_64, the SSE4.2 `crc32` instruction (Intel SDM Vol. 2A,
//!   "CRC32"), detected at run time: three independent streams over lanes of 1 KiB, 128 B
//!   and 32 B, interleaved to hide the instruction's 3-cycle latency, merged with table-driven
//!   zeros operators (the same maths as [`Crc32c::combine`]). [`Crc32c::update`] prefers it
//!   when the CPU has it.

/// The reflected Castagnoli polynomial.
const POLY: u32 = 0x82F6_3B78;

/// Slicing tables: `TABLES[0]` is the classic bytewise table; `TABLES[k][b]` is the CRC of
/// byte `b` followed by `k` zero bytes.
static TABLES: [[u32; 256]; 8] = build_tables();

const fn build_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ POLY } else { crc >> 1 };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

/// The bytewise table alone, so a build that only uses [`Crc32c::update_bytewise`] links
/// 1 KiB, not 8.
static TABLE0: [u32; 256] = build_tables()[0];

/// A running CRC-32C.
#[derive(Debug, Clone, Copy)]
pub struct Crc32c(u32);

impl Default for Crc32c {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32c {
    /// Starts a new CRC.
    pub const fn new() -> Self {
        Self(!0)
    }

    /// Feeds bytes with the fastest implementation this build and CPU have.
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        {
            if hw::available() {
                // SAFETY: `available` checked that the CPU has SSE4.2.
                self.0 = unsafe { hw::update(self.0, bytes) };
                return;
            }
        }
        #[cfg(target_pointer_width = "64")]
        self.update_slice8(bytes);
        #[cfg(not(target_pointer_width = "64"))]
        self.update_bytewise(bytes);
    }

    /// Feeds bytes one at a time through the 1 KiB table.
    pub fn update_bytewise(&mut self, bytes: &[u8]) {
        let mut crc = self.0;
        for &b in bytes {
            crc = TABLE0[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
        }
        self.0 = crc;
    }

    /// Feeds bytes eight at a time (slicing-by-8).
    pub fn update_slice8(&mut self, bytes: &[u8]) {
        let t = &TABLES;
        let mut crc = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let lo = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) ^ crc;
            let hi = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
            crc = t[7][(lo & 0xff) as usize]
                ^ t[6][((lo >> 8) & 0xff) as usize]
                ^ t[5][((lo >> 16) & 0xff) as usize]
                ^ t[4][(lo >> 24) as usize]
                ^ t[3][(hi & 0xff) as usize]
                ^ t[2][((hi >> 8) & 0xff) as usize]
                ^ t[1][((hi >> 16) & 0xff) as usize]
                ^ t[0][(hi >> 24) as usize];
        }
        for &b in chunks.remainder() {
            crc = t[0][((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
        }
        self.0 = crc;
    }

    /// The CRC of everything fed so far.
    pub const fn finish(&self) -> u32 {
        !self.0
    }

    /// Resumes from a running register value (what hardware keeps between words: starts
    /// at `0xFFFF_FFFF`, and the CRC is its complement).
    pub const fn from_register(register: u32) -> Self {
        Self(register)
    }

    /// The running register value (the complement of [`Crc32c::finish`]).
    pub const fn register(&self) -> u32 {
        self.0
    }

    /// CRC-32C of `a ‖ b` from `crc(a)`, `crc(b)` and `b`'s length, without reading the
    /// bytes (the "zeros operator" of zlib's `crc32_combine`, in GF(2)).
    pub fn combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
        // Register form: crc(a‖b) = shift(crc(a), len_b) ^ crc(b), where shift advances a
        // finished CRC over len_b zero bytes of a raw (init 0, no final xor) CRC.
        gf2::shift_bytes(crc_a, len_b) ^ crc_b
    }
}

/// CRC-32C of one buffer.
pub fn crc32c(bytes: &[u8]) -> u32 {
    let mut c = Crc32c::new();
    c.update(bytes);
    c.finish()
}

/// GF(2) polynomial arithmetic modulo the (reflected) Castagnoli polynomial.
mod gf2 {
    use super::POLY;

    /// `a * b mod P` in the reflected bit order (bit 31 is x^0).
    pub(super) const fn mul(a: u32, mut b: u32) -> u32 {
        let mut m = 1u32 << 31;
        let mut p = 0u32;
        while m != 0 {
            if a & m != 0 {
                p ^= b;
            }
            b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
            m >>= 1;
        }
        p
    }

    /// x^(8·2^k) mod P for k = 0..64 (x^8 is 0x0080_0000 reflected).
    const POW2: [u32; 64] = {
        let mut t = [0u32; 64];
        t[0] = 1 << 23;
        let mut k = 1;
        while k < 64 {
            t[k] = mul(t[k - 1], t[k - 1]);
            k += 1;
        }
        t
    };

    /// x^(8·n) mod P.
    pub(super) const fn xpow8n(mut n: u64) -> u32 {
        let mut p = 1u32 << 31; // x^0
        let mut k = 0;
        while n != 0 {
            if n & 1 != 0 {
                p = mul(POW2[k], p);
            }
            n >>= 1;
            k += 1;
        }
        p
    }

    /// Advances a CRC value over `n` zero bytes (raw register, no pre/post inversion).
    pub(super) fn shift_bytes(crc: u32, n: u64) -> u32 {
        mul(xpow8n(n), crc)
    }
}

#[cfg(all(feature = "std", target_arch = "x86_64"))]
mod hw {
    //! SSE4.2 `crc32` path. The instruction computes exactly the reflected CRC-32C register
    //! update (Intel SDM Vol. 2A), so it drops in for the table step.
    use core::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};

    /// Shift tables: four 256-entry tables (one per register byte) that advance a raw CRC
    /// register over a fixed number of zero bytes. The zeros operator for a fixed length is
    /// linear, so it splits by byte.
    type Shift = [[u32; 256]; 4];

    /// Lane lengths, longest first, each with its shift-by-one-lane and shift-by-two-lanes
    /// tables (24 KiB in all, host only).
    static S1024: Shift = shift_tables(1024);
    static S2048: Shift = shift_tables(2048);
    static S128: Shift = shift_tables(128);
    static S256: Shift = shift_tables(256);
    static S32: Shift = shift_tables(32);
    static S64: Shift = shift_tables(64);

    const fn shift_tables(n: u64) -> Shift {
        let op = super::gf2::xpow8n(n);
        let mut t = [[0u32; 256]; 4];
        let mut k = 0;
        while k < 4 {
            let mut b = 0;
            while b < 256 {
                t[k][b] = super::gf2::mul(op, (b as u32) << (8 * k));
                b += 1;
            }
            k += 1;
        }
        t
    }

    #[inline]
    fn shift(t: &Shift, crc: u32) -> u32 {
        t[0][(crc & 0xff) as usize]
            ^ t[1][((crc >> 8) & 0xff) as usize]
            ^ t[2][((crc >> 16) & 0xff) as usize]
            ^ t[3][(crc >> 24) as usize]
    }

    /// Whether the CPU has SSE4.2 (cached by std's detection).
    #[inline]
    pub(super) fn available() -> bool {
        std::is_x86_feature_detected!("sse4.2")
    }

    /// Loads 8 little-endian bytes at `o`.
    #[inline(always)]
    fn word(b: &[u8], o: usize) -> u64 {
        u64::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3], b[o + 4], b[o + 5], b[o + 6], b[o + 7]])
    }

    /// Consumes whole blocks of three `L`-byte lanes: crc32 has a latency of 3 and a
    /// throughput of 1 per cycle, so one dependent stream would use a third of the unit.
    ///
    /// # Safety
    /// The CPU must support SSE4.2.
    #[target_feature(enable = "sse4.2")]
    #[inline]
    unsafe fn lanes<'b, const L: usize>(
        mut crc: u64,
        mut rest: &'b [u8],
        one: &Shift,
        two: &Shift,
    ) -> (u64, &'b [u8]) {
        while rest.len() >= 3 * L {
            let (blk, tail) = rest.split_at(3 * L);
            let (a, bc) = blk.split_at(L);
            let (b, c) = bc.split_at(L);
            let (mut ca, mut cb, mut cc) = (crc, 0u64, 0u64);
            let mut o = 0;
            while o < L {
                ca = _mm_crc32_u64(ca, word(a, o));
                cb = _mm_crc32_u64(cb, word(b, o));
                cc = _mm_crc32_u64(cc, word(c, o));
                o += 8;
            }
            // Streams b and c started from 0, so crc(a‖b‖c) = shift2(ca) ^ shift1(cb) ^ cc
            // (the register is linear in its starting value).
            crc = (shift(two, ca as u32) ^ shift(one, cb as u32) ^ cc as u32) as u64;
            rest = tail;
        }
        (crc, rest)
    }

    /// Updates a raw CRC register over `bytes`.
    ///
    /// # Safety
    /// The CPU must support SSE4.2.
    #[target_feature(enable = "sse4.2")]
    pub(super) unsafe fn update(crc: u32, bytes: &[u8]) -> u32 {
        // SAFETY: this function's caller guarantees SSE4.2, all `lanes` needs.
        let (crc, rest) = unsafe { lanes::<1024>(crc as u64, bytes, &S1024, &S2048) };
        let (crc, rest) = unsafe { lanes::<128>(crc, rest, &S128, &S256) };
        let (mut crc, rest) = unsafe { lanes::<32>(crc, rest, &S32, &S64) };
        let mut words = rest.chunks_exact(8);
        for w in &mut words {
            crc = _mm_crc32_u64(crc, word(w, 0));
        }
        let mut crc = crc as u32;
        for &b in words.remainder() {
            crc = _mm_crc32_u8(crc, b);
        }
        crc
    }
}

/// Whether [`Crc32c::update`] uses the CPU's CRC instruction on this machine (for the bench's
/// report).
pub fn accelerated() -> bool {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        hw::available()
    }
    #[cfg(not(all(feature = "std", target_arch = "x86_64")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_ways(data: &[u8]) -> [u32; 3] {
        let mut a = Crc32c::new();
        a.update_bytewise(data);
        let mut b = Crc32c::new();
        b.update_slice8(data);
        let mut c = Crc32c::new();
        c.update(data);
        [a.finish(), b.finish(), c.finish()]
    }

    #[test]
    fn check_value() {
        // The CRC catalogue's check value for CRC-32/ISCSI over "123456789".
        assert_eq!(all_ways(b"123456789"), [0xE306_9283; 3]);
        assert_eq!(all_ways(b""), [0; 3]);
    }

    #[test]
    fn rfc3720_vectors() {
        // RFC 3720 §B.4: 32 bytes of zeros, of ones, incrementing, decrementing.
        assert_eq!(all_ways(&[0u8; 32]), [0x8A91_36AA; 3]);
        assert_eq!(all_ways(&[0xffu8; 32]), [0x62A8_AB43; 3]);
        let inc: [u8; 32] = core::array::from_fn(|i| i as u8);
        assert_eq!(all_ways(&inc), [0x46DD_794E; 3]);
        let dec: [u8; 32] = core::array::from_fn(|i| 31 - i as u8);
        assert_eq!(all_ways(&dec), [0x113F_DB5C; 3]);
    }

    #[test]
    fn implementations_agree_on_every_length_and_alignment() {
        let data: [u8; 7000] = core::array::from_fn(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8);
        for start in 0..9 {
            for len in (0..200).chain([1023, 3071, 3072, 3073, 6144, 6500, 6990 - start]) {
                let d = &data[start..start + len];
                let r = all_ways(d);
                assert_eq!(r[0], r[1], "slice8 start {start} len {len}");
                assert_eq!(r[0], r[2], "update start {start} len {len}");
            }
        }
    }

    #[test]
    fn incremental_matches_oneshot() {
        let data: [u8; 100] = core::array::from_fn(|i| (i * 7) as u8);
        let mut c = Crc32c::new();
        c.update(&data[..33]);
        c.update(&data[33..]);
        assert_eq!(c.finish(), crc32c(&data));
    }

    #[test]
    fn combine_matches_concatenation() {
        let data: [u8; 300] = core::array::from_fn(|i| (i * 31 + 5) as u8);
        for split in [0, 1, 7, 150, 299, 300] {
            let (a, b) = data.split_at(split);
            assert_eq!(Crc32c::combine(crc32c(a), crc32c(b), b.len() as u64), crc32c(&data), "split {split}");
        }
    }
}
