//! Frame encoding: into one buffer, or as the bytes around a payload (scatter-gather).

use super::{frame_len, padded_len, DecodeError, Header, HEADER_LEN, MAX_PAYLOAD, TRAILER_LEN};
use crate::crc32c::Crc32c;

/// Why a frame could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The output buffer is shorter than the frame.
    #[error("output buffer of {have} bytes cannot hold a {need}-byte frame")]
    BufferTooSmall {
        /// Bytes the frame needs.
        need: usize,
        /// Bytes the buffer has.
        have: usize,
    },
    /// The header (with the payload's length) is one a receiver would refuse.
    #[error("refusing to encode a frame the receiver would reject: {0}")]
    Invalid(DecodeError),
}

/// Sets `header.length` from the payload and checks the header as a receiver with the full
/// [`MAX_PAYLOAD`] limit would.
fn prepare(header: &Header, payload: &[u8]) -> Result<Header, EncodeError> {
    let mut h = *header;
    // Lengths past u24 must not wrap into a short, valid-looking field.
    h.length = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    h.check(MAX_PAYLOAD).map_err(EncodeError::Invalid)?;
    Ok(h)
}

/// Writes one frame (header, payload zero padded to a multiple of 4, pcrc over both) into `out` and
/// returns its length, [`frame_len`]`(payload.len())`. `header.length` is ignored: the
/// payload's length is written.
pub fn encode_frame(header: &Header, payload: &[u8], out: &mut [u8]) -> Result<usize, EncodeError> {
    let h = prepare(header, payload)?;
    let total = frame_len(payload.len());
    let have = out.len();
    let out = out.get_mut(..total).ok_or(EncodeError::BufferTooSmall { need: total, have })?;
    out[..HEADER_LEN].copy_from_slice(&h.encode());
    if payload.is_empty() {
        return Ok(total);
    }
    let padded = padded_len(payload.len());
    let body = &mut out[HEADER_LEN..HEADER_LEN + padded];
    body[..payload.len()].copy_from_slice(payload);
    body[payload.len()..].fill(0);
    // pcrc covers the header too (docs/link.md "Frame"). CRC the *source*, which the copy
    // just pulled into L1: CRC'ing the copy waits on the write-allocates of its lines,
    // CRC'ing the source before the copy waits on DRAM, and a fused copy-and-CRC loop
    // measured slower than either.
    let mut crc = Crc32c::new();
    crc.update(&out[..HEADER_LEN]);
    crc.update(payload);
    crc.update(&[0u8; 3][..padded - payload.len()]);
    out[total - TRAILER_LEN..].copy_from_slice(&crc.finish().to_le_bytes());
    Ok(total)
}

/// The bytes that go around a payload sent from where it lies: `head`, then the payload,
/// then [`FrameParts::tail`] (zero padding and pcrc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameParts {
    /// The 24 header bytes.
    pub head: [u8; HEADER_LEN],
    tail: [u8; 3 + TRAILER_LEN],
    tail_len: u8,
}

impl FrameParts {
    /// Padding and pcrc: empty for a frame without payload.
    pub fn tail(&self) -> &[u8] {
        &self.tail[..self.tail_len as usize]
    }

    /// Bytes on the wire: head, payload and tail.
    pub fn wire_len(&self, payload_len: usize) -> usize {
        HEADER_LEN + payload_len + self.tail_len as usize
    }
}

/// Computes the header and trailer of a frame for `payload` without copying it, for
/// zero-copy transports (a `writev`, a DMA descriptor chain).
pub fn frame_parts(header: &Header, payload: &[u8]) -> Result<FrameParts, EncodeError> {
    let h = prepare(header, payload)?;
    let mut parts = FrameParts { head: h.encode(), tail: [0; 3 + TRAILER_LEN], tail_len: 0 };
    if payload.is_empty() {
        return Ok(parts);
    }
    let pad = padded_len(payload.len()) - payload.len();
    let mut crc = Crc32c::new();
    crc.update(&parts.head);
    crc.update(payload);
    crc.update(&[0u8; 3][..pad]);
    parts.tail[pad..pad + TRAILER_LEN].copy_from_slice(&crc.finish().to_le_bytes());
    parts.tail_len = (pad + TRAILER_LEN) as u8;
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{flags, Channel, MAX_CTRL_PAYLOAD};

    #[test]
    fn parts_match_the_whole_frame() {
        let data: [u8; 300] = core::array::from_fn(|i| (i * 13) as u8);
        for len in [0usize, 1, 2, 3, 4, 5, 255, 256, 299] {
            let h = Header { seq: len as u32, ..Header::new(Channel::Weights, flags::DATA) };
            let mut out = [0u8; 400];
            let n = encode_frame(&h, &data[..len], &mut out).unwrap();
            assert_eq!(n, frame_len(len));
            assert_eq!(n % 4, 0);
            let p = frame_parts(&h, &data[..len]).unwrap();
            assert_eq!(p.wire_len(len), n);
            let mut cat = [0u8; 400];
            cat[..24].copy_from_slice(&p.head);
            cat[24..24 + len].copy_from_slice(&data[..len]);
            cat[24 + len..n].copy_from_slice(p.tail());
            assert_eq!(&cat[..n], &out[..n], "len {len}");
        }
    }

    #[test]
    fn refusals() {
        let mut out = [0u8; 64];
        let h = Header::new(Channel::Control, flags::DATA);
        assert_eq!(
            encode_frame(&h, &[1; 40], &mut out),
            Err(EncodeError::BufferTooSmall { need: 68, have: 64 })
        );
        let big = [0u8; MAX_CTRL_PAYLOAD + 1];
        assert!(matches!(frame_parts(&h, &big), Err(EncodeError::Invalid(DecodeError::TooLong { .. }))));
        let ack_only = Header::new(Channel::Data, flags::ACK);
        assert!(matches!(
            frame_parts(&ack_only, &[1]),
            Err(EncodeError::Invalid(DecodeError::BadFlags { .. }))
        ));
        assert_eq!(encode_frame(&ack_only, &[], &mut out), Ok(24));
    }
}
