//! The wire form of [`Hyper`], for the control command that creates a MemoryX layer: fixed
//! length ([`HYPER_LEN`]), little-endian.
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | optimizer: 0 SGD, 1 Adam, 2 AdamW |
//! | 4..8 | flags: bit 0 maximize, bit 1 nesterov, bit 2 amsgrad |
//! | 8..56 | weight_decay, momentum, dampening, beta1, beta2, eps (f64 each) |

use super::optim::{Hyper, Kind};
use super::schedule::{f64_at, finite, u32_at, DecodeError};

/// Bytes of [`encode_hyper`].
pub const HYPER_LEN: usize = 56;

const MAXIMIZE: u32 = 1;
const NESTEROV: u32 = 2;
const AMSGRAD: u32 = 4;

/// The wire form of `h`.
pub fn encode_hyper(h: &Hyper, out: &mut [u8; HYPER_LEN]) {
    let code: u32 = match h.kind {
        Kind::Sgd => 0,
        Kind::Adam => 1,
        Kind::AdamW => 2,
    };
    let mut flags = 0;
    for (on, bit) in [(h.maximize, MAXIMIZE), (h.nesterov, NESTEROV), (h.amsgrad, AMSGRAD)] {
        if on {
            flags |= bit;
        }
    }
    out[0..4].copy_from_slice(&code.to_le_bytes());
    out[4..8].copy_from_slice(&flags.to_le_bytes());
    for (i, x) in [h.weight_decay, h.momentum, h.dampening, h.beta1, h.beta2, h.eps].iter().enumerate() {
        out[8 + 8 * i..16 + 8 * i].copy_from_slice(&x.to_le_bytes());
    }
}

/// Reads the wire form; refuses unknown optimizer codes and flag bits and non-finite numbers.
pub fn decode_hyper(b: &[u8; HYPER_LEN]) -> Result<Hyper, DecodeError> {
    let kind = match u32_at(b, 0) {
        0 => Kind::Sgd,
        1 => Kind::Adam,
        2 => Kind::AdamW,
        c => return Err(DecodeError::UnknownOptimizer(c)),
    };
    let flags = u32_at(b, 4);
    if flags & !(MAXIMIZE | NESTEROV | AMSGRAD) != 0 {
        return Err(DecodeError::UnknownFlags(flags & !(MAXIMIZE | NESTEROV | AMSGRAD)));
    }
    let x = |i: usize, name| finite(f64_at(b, 8 + 8 * i), name);
    Ok(Hyper {
        kind,
        maximize: flags & MAXIMIZE != 0,
        nesterov: flags & NESTEROV != 0,
        amsgrad: flags & AMSGRAD != 0,
        weight_decay: x(0, "weight_decay")?,
        momentum: x(1, "momentum")?,
        dampening: x(2, "dampening")?,
        beta1: x(3, "beta1")?,
        beta2: x(4, "beta2")?,
        eps: x(5, "eps")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let all = [
            Hyper::SGD,
            Hyper { momentum: 0.9, dampening: 0.1, nesterov: true, weight_decay: 1e-4, ..Hyper::SGD },
            Hyper { amsgrad: true, maximize: true, beta1: 0.8, beta2: 0.99, eps: 1e-6, ..Hyper::ADAM },
            Hyper::ADAMW,
        ];
        for h in all {
            let mut b = [0u8; HYPER_LEN];
            encode_hyper(&h, &mut b);
            assert_eq!(decode_hyper(&b), Ok(h));
        }
        let mut b = [0u8; HYPER_LEN];
        encode_hyper(&all[2], &mut b);
        assert_eq!(&b[0..8], &[1, 0, 0, 0, 5, 0, 0, 0]);
        assert_eq!(&b[32..40], &0.8f64.to_le_bytes());
    }

    #[test]
    fn refuses_bad_input() {
        let mut b = [0u8; HYPER_LEN];
        encode_hyper(&Hyper::ADAM, &mut b);
        let mut k = b;
        k[0] = 3;
        assert_eq!(decode_hyper(&k), Err(DecodeError::UnknownOptimizer(3)));
        let mut f = b;
        f[4] = 8;
        assert_eq!(decode_hyper(&f), Err(DecodeError::UnknownFlags(8)));
        let mut e = b;
        e[48..56].copy_from_slice(&f64::NEG_INFINITY.to_le_bytes());
        assert_eq!(decode_hyper(&e), Err(DecodeError::NotFinite("eps")));
        let mut m = b;
        m[16..24].copy_from_slice(&f64::NAN.to_le_bytes());
        assert_eq!(decode_hyper(&m), Err(DecodeError::NotFinite("momentum")));
    }
}
