//! The 24-byte frame header (docs/link.md "Frame").

use super::{flags, Channel, HEADER_LEN, MAGIC, MAX_PAYLOAD, VERSION};
use crate::crc32c::crc32c;

/// Why a candidate frame was refused. The [`Decoder`](super::Decoder) has already
/// resynchronised when it reports one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes do not start with the magic "WS" (only [`Header::decode`] reports this; the
    /// stream decoder hunts for the magic instead).
    #[error("no frame magic \"WS\" at the start of the header")]
    BadMagic,
    /// The header's CRC-32C (bytes 0..20) does not match: noise that looked like a magic, or a
    /// corrupted header.
    #[error("frame header CRC mismatch: a corrupted header or noise; the receiver resynchronised")]
    BadHeaderCrc,
    /// The header (CRC good) carries another protocol version.
    #[error("frame of link protocol version {0}, this side speaks version 2: skipped")]
    BadVersion(u8),
    /// The channel number is past 7.
    #[error("frame for channel {0}, which does not exist (0..=7)")]
    BadChannel(u8),
    /// Flag bits that are reserved or contradict each other or the channel.
    #[error("frame flags {flags:#04x} are invalid on channel {channel} (reserved bits, HELLO off channel 0, RETX without DATA, or a payload on a frame that carries none)")]
    BadFlags {
        /// The channel number.
        channel: u8,
        /// The flags byte.
        flags: u8,
    },
    /// The payload length is past what the channel allows (or the receiver can hold).
    #[error("frame on channel {channel} declares {length} payload bytes, more than the {max} allowed")]
    TooLong {
        /// The channel.
        channel: Channel,
        /// The declared length.
        length: u32,
        /// The limit that applied.
        max: u32,
    },
    /// The header was good but the payload's CRC-32C did not match: this frame was lost.
    #[error("payload CRC mismatch on channel {channel}, seq {seq}: the frame was dropped")]
    BadPayloadCrc {
        /// The frame's channel.
        channel: Channel,
        /// The frame's seq (meaningful if it was a DATA frame).
        seq: u32,
    },
}

/// A frame header, without magic, version and hcrc (the codec supplies those).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The channel.
    pub channel: Channel,
    /// [`flags`] bits.
    pub flags: u8,
    /// Payload bytes (before padding), at most [`MAX_PAYLOAD`].
    pub length: u32,
    /// Sequence number of a DATA frame on (channel, direction).
    pub seq: u32,
    /// Next seq the sender expects in the reverse direction (meaningful with ACK or NAK).
    pub ack: u32,
    /// Cumulative byte limit the sender will accept (meaningful with ACK or NAK).
    pub credit: u32,
}

impl Header {
    /// A header with every field zero except the channel and flags.
    pub const fn new(channel: Channel, flags: u8) -> Self {
        Self { channel, flags, length: 0, seq: 0, ack: 0, credit: 0 }
    }

    /// Whether any of `bits` is set.
    pub const fn has(&self, bits: u8) -> bool {
        self.flags & bits != 0
    }

    /// The 24 header bytes, hcrc included.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..2].copy_from_slice(&MAGIC);
        b[2] = VERSION;
        b[3] = self.channel as u8;
        b[4] = self.flags;
        b[5..8].copy_from_slice(&self.length.to_le_bytes()[..3]);
        b[8..12].copy_from_slice(&self.seq.to_le_bytes());
        b[12..16].copy_from_slice(&self.ack.to_le_bytes());
        b[16..20].copy_from_slice(&self.credit.to_le_bytes());
        let hcrc = crc32c(&b[..20]);
        b[20..24].copy_from_slice(&hcrc.to_le_bytes());
        b
    }

    /// Parses and checks 24 header bytes in the order docs/link.md "Receiving" gives: magic,
    /// hcrc, version, channel, flags, then the length against the channel's limit, with bulk
    /// channels limited to `max_bulk` (the negotiated `max_payload`, at most
    /// [`MAX_PAYLOAD`]).
    pub fn decode(b: &[u8; HEADER_LEN], max_bulk: usize) -> Result<Self, DecodeError> {
        if b[0..2] != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let want = u32::from_le_bytes([b[20], b[21], b[22], b[23]]);
        if crc32c(&b[..20]) != want {
            return Err(DecodeError::BadHeaderCrc);
        }
        if b[2] != VERSION {
            return Err(DecodeError::BadVersion(b[2]));
        }
        let channel = Channel::from_u8(b[3]).ok_or(DecodeError::BadChannel(b[3]))?;
        let word = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let h = Self {
            channel,
            flags: b[4],
            length: u32::from_le_bytes([b[5], b[6], b[7], 0]),
            seq: word(8),
            ack: word(12),
            credit: word(16),
        };
        h.check(max_bulk)?;
        Ok(h)
    }

    /// Checks flags and length as a receiver would (bulk channels limited to `max_bulk`):
    /// the encoder refuses to build a frame the decoder would refuse.
    pub fn check(&self, max_bulk: usize) -> Result<(), DecodeError> {
        let f = self.flags;
        let bad_flags = f & !flags::ALL != 0
            || (f & flags::HELLO != 0 && self.channel != Channel::Link)
            || (f & flags::RETX != 0 && f & flags::DATA == 0)
            || (self.length != 0 && f & (flags::DATA | flags::HELLO | flags::ERROR) == 0);
        if bad_flags {
            return Err(DecodeError::BadFlags { channel: self.channel as u8, flags: f });
        }
        let max = if self.channel.is_bulk() { max_bulk.min(MAX_PAYLOAD) } else { self.channel.max_payload() };
        if self.length as usize > max {
            return Err(DecodeError::TooLong { channel: self.channel, length: self.length, max: max as u32 });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{MAX_CTRL_PAYLOAD, MAX_PAYLOAD};

    fn sample() -> Header {
        Header {
            channel: Channel::Gradients,
            flags: flags::DATA | flags::ACK,
            length: 0x01_0000,
            seq: 0x0403_0201,
            ack: 0x0807_0605,
            credit: 0x0c0b_0a09,
        }
    }

    #[test]
    fn layout_is_the_documented_one() {
        let b = sample().encode();
        assert_eq!(&b[..8], &[b'W', b'S', 2, 3, 0x03, 0x00, 0x00, 0x01]);
        assert_eq!(&b[8..20], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), crc32c(&b[..20]));
        assert_eq!(Header::decode(&b, MAX_PAYLOAD), Ok(sample()));
    }

    #[test]
    fn every_single_bit_flip_is_caught() {
        let good = sample().encode();
        for bit in 0..HEADER_LEN * 8 {
            let mut b = good;
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(Header::decode(&b, MAX_PAYLOAD).is_err(), "bit {bit}");
        }
    }

    /// Encodes raw fields with a correct hcrc, to reach the checks behind it.
    fn raw(version: u8, channel: u8, flags: u8, length: u32) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..2].copy_from_slice(&MAGIC);
        b[2] = version;
        b[3] = channel;
        b[4] = flags;
        b[5..8].copy_from_slice(&length.to_le_bytes()[..3]);
        let c = crc32c(&b[..20]);
        b[20..].copy_from_slice(&c.to_le_bytes());
        b
    }

    #[test]
    fn field_checks() {
        let d = |b: [u8; HEADER_LEN]| Header::decode(&b, MAX_PAYLOAD);
        assert_eq!(d(raw(3, 1, 1, 4)), Err(DecodeError::BadVersion(3)));
        assert_eq!(d(raw(2, 8, 1, 4)), Err(DecodeError::BadChannel(8)));
        assert_eq!(d(raw(2, 1, 0x40, 0)), Err(DecodeError::BadFlags { channel: 1, flags: 0x40 }));
        assert_eq!(d(raw(2, 1, flags::HELLO, 0)), Err(DecodeError::BadFlags { channel: 1, flags: 8 }));
        assert_eq!(d(raw(2, 2, flags::RETX, 0)), Err(DecodeError::BadFlags { channel: 2, flags: 16 }));
        assert_eq!(d(raw(2, 2, flags::ACK, 4)), Err(DecodeError::BadFlags { channel: 2, flags: 2 }));
        assert!(d(raw(2, 0, flags::HELLO, 140)).is_ok());
        assert!(d(raw(2, 0, flags::HELLO | flags::ERROR, 140)).is_ok());
        assert!(d(raw(2, 7, flags::DATA, 4)).is_ok());
        assert!(d(raw(2, 1, flags::DATA, MAX_CTRL_PAYLOAD as u32)).is_ok());
        assert_eq!(
            d(raw(2, 1, flags::DATA, MAX_CTRL_PAYLOAD as u32 + 1)),
            Err(DecodeError::TooLong { channel: Channel::Control, length: 1025, max: 1024 })
        );
        assert!(d(raw(2, 2, flags::DATA, MAX_PAYLOAD as u32)).is_ok());
        assert!(matches!(
            d(raw(2, 2, flags::DATA, MAX_PAYLOAD as u32 + 1)),
            Err(DecodeError::TooLong { .. })
        ));
        assert!(matches!(d(raw(2, 2, flags::DATA, 0xff_ffff)), Err(DecodeError::TooLong { .. })));
        assert_eq!(
            Header::decode(&raw(2, 6, flags::DATA, 4097), 4096),
            Err(DecodeError::TooLong { channel: Channel::Trace, length: 4097, max: 4096 })
        );
        let mut b = raw(2, 1, 1, 0);
        b[0] = b'X';
        assert_eq!(Header::decode(&b, MAX_PAYLOAD), Err(DecodeError::BadMagic));
    }
}
