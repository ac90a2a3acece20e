//! The connect handshake: the HELLO payload and version negotiation (docs/link.md "Connect").
//!
//! ```text
//!  offset 0   major u8, minor u8
//!         2   flags u16 (bit 0 RESUME)
//!         4   max_payload u32
//!         8   window u16, channels u8, reserved u8
//!        12   8 × { rx_expected u32, rx_committed u32, tx_next u32, credit u32 }
//!       140   session u32 (2.1: the sender's connection attempt; absent in 2.0)
//! ```

use super::{Channel, CHANNELS, MAX_PAYLOAD, VERSION, VERSION_MINOR};
use crate::ctrl;

/// Bytes of a HELLO payload as this side sends it (protocol 2.1).
pub const HELLO_LEN: usize = HELLO_MIN_LEN + 4;
/// The shortest HELLO a receiver accepts: the 2.0 layout, without `session`.
pub const HELLO_MIN_LEN: usize = 12 + CHANNELS * 16;
/// Value of the `channels` field: channels 0..=6 are in use (7 is reserved).
pub const CHANNELS_IN_USE: u8 = 7;

/// HELLO `flags` bits.
pub mod hello_flags {
    /// Keep the board's channel state instead of resetting every channel.
    pub const RESUME: u16 = 1 << 0;
    /// Every defined bit.
    pub const ALL: u16 = RESUME;
}

/// One channel's state as a side reports it in HELLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChannelState {
    /// The next seq this side expects to receive on the channel.
    pub rx_expected: u32,
    /// Payload bytes this side has committed on the channel since the channel was reset.
    pub rx_committed: u32,
    /// The next seq this side will send on the channel.
    pub tx_next: u32,
    /// The cumulative byte limit this side accepts on the channel.
    pub credit: u32,
}

/// Why a HELLO was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    /// The payload is shorter than the version fields or the v2 layout.
    #[error("HELLO payload of {len} bytes is too short ({HELLO_MIN_LEN} expected)")]
    Short {
        /// Bytes received.
        len: usize,
    },
    /// The peer speaks another major version.
    #[error(
        "board speaks link protocol {}.{}, wsctl speaks {}.{}: flash firmware built from this checkout (wsctl flash) or use a matching wsctl",
        peer.0, peer.1, ours.0, ours.1
    )]
    VersionMismatch {
        /// The peer's (major, minor).
        peer: (u8, u8),
        /// This side's (major, minor).
        ours: (u8, u8),
    },
    /// Reserved flag bits are set.
    #[error("HELLO flags {0:#06x} have reserved bits set")]
    BadFlags(u16),
    /// `max_payload` is 0 or past [`MAX_PAYLOAD`].
    #[error("HELLO max_payload {0} is outside 1..=65536")]
    BadMaxPayload(u32),
    /// `window` is 0.
    #[error("HELLO window of 0 frames")]
    BadWindow,
    /// `channels` is 0 or past 8.
    #[error("HELLO declares {0} channels (1..=8 allowed)")]
    BadChannels(u8),
}

/// A HELLO payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// Protocol major version.
    pub major: u8,
    /// Protocol minor version.
    pub minor: u8,
    /// [`hello_flags`] bits.
    pub flags: u16,
    /// The largest bulk payload the sender will send or accept.
    pub max_payload: u32,
    /// The go-back-N window in frames.
    pub window: u16,
    /// Channels in use ([`CHANNELS_IN_USE`]).
    pub channels: u8,
    /// Per-channel state, by channel number.
    pub state: [ChannelState; CHANNELS],
    /// The sender's connection attempt (2.1), 0 when unknown (a 2.0 peer). A host picks a new
    /// one per process and keeps it across its HELLO retries, so the board can tell a
    /// retried HELLO, which must not reset streams already flowing, from a new host.
    pub session: u32,
}

/// What both sides use after the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// The smaller of both `max_payload`s.
    pub max_payload: u32,
    /// The smaller of both windows.
    pub window: u16,
    /// The minor version both speak (the smaller).
    pub minor: u8,
    /// Whether the channel state carries over (both asked for RESUME).
    pub resume: bool,
}

impl Hello {
    /// This side's HELLO with fresh (all zero) channel state.
    pub const fn new(max_payload: u32, window: u16) -> Self {
        Self {
            major: VERSION,
            minor: VERSION_MINOR,
            flags: 0,
            max_payload,
            window,
            channels: CHANNELS_IN_USE,
            state: [ChannelState { rx_expected: 0, rx_committed: 0, tx_next: 0, credit: 0 }; CHANNELS],
            session: 0,
        }
    }

    /// The state of one channel.
    pub fn channel(&self, ch: Channel) -> &ChannelState {
        &self.state[ch.index()]
    }

    /// The payload bytes.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0] = self.major;
        b[1] = self.minor;
        b[2..4].copy_from_slice(&self.flags.to_le_bytes());
        b[4..8].copy_from_slice(&self.max_payload.to_le_bytes());
        b[8..10].copy_from_slice(&self.window.to_le_bytes());
        b[10] = self.channels;
        for (i, s) in self.state.iter().enumerate() {
            let o = 12 + 16 * i;
            b[o..o + 4].copy_from_slice(&s.rx_expected.to_le_bytes());
            b[o + 4..o + 8].copy_from_slice(&s.rx_committed.to_le_bytes());
            b[o + 8..o + 12].copy_from_slice(&s.tx_next.to_le_bytes());
            b[o + 12..o + 16].copy_from_slice(&s.credit.to_le_bytes());
        }
        b[HELLO_MIN_LEN..HELLO_LEN].copy_from_slice(&self.session.to_le_bytes());
        b
    }

    /// Parses and validates a HELLO payload. The version is checked first, so a peer of
    /// another major version is named even if the rest of its layout differs. Bytes past
    /// [`HELLO_LEN`] (a later minor version's additions) are ignored.
    pub fn decode(p: &[u8]) -> Result<Self, HelloError> {
        if p.len() < 2 {
            return Err(HelloError::Short { len: p.len() });
        }
        if p[0] != VERSION {
            return Err(HelloError::VersionMismatch { peer: (p[0], p[1]), ours: (VERSION, VERSION_MINOR) });
        }
        if p.len() < HELLO_MIN_LEN {
            return Err(HelloError::Short { len: p.len() });
        }
        let u32_at = |o: usize| u32::from_le_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]]);
        let mut state = [ChannelState::default(); CHANNELS];
        for (i, s) in state.iter_mut().enumerate() {
            let o = 12 + 16 * i;
            *s = ChannelState {
                rx_expected: u32_at(o),
                rx_committed: u32_at(o + 4),
                tx_next: u32_at(o + 8),
                credit: u32_at(o + 12),
            };
        }
        let h = Self {
            major: p[0],
            minor: p[1],
            flags: u16::from_le_bytes([p[2], p[3]]),
            max_payload: u32_at(4),
            window: u16::from_le_bytes([p[8], p[9]]),
            channels: p[10],
            state,
            session: if p.len() >= HELLO_LEN { u32_at(HELLO_MIN_LEN) } else { 0 },
        };
        h.validate()?;
        Ok(h)
    }

    /// Checks the fields a receiver relies on.
    pub fn validate(&self) -> Result<(), HelloError> {
        if self.major != VERSION {
            return Err(HelloError::VersionMismatch {
                peer: (self.major, self.minor),
                ours: (VERSION, VERSION_MINOR),
            });
        }
        if self.flags & !hello_flags::ALL != 0 {
            return Err(HelloError::BadFlags(self.flags));
        }
        if self.max_payload == 0 || self.max_payload as usize > MAX_PAYLOAD {
            return Err(HelloError::BadMaxPayload(self.max_payload));
        }
        if self.window == 0 {
            return Err(HelloError::BadWindow);
        }
        if self.channels == 0 || self.channels as usize > CHANNELS {
            return Err(HelloError::BadChannels(self.channels));
        }
        Ok(())
    }

    /// What both sides use, from this side's HELLO and the peer's.
    pub fn negotiate(&self, peer: &Hello) -> Result<Negotiated, HelloError> {
        self.validate()?;
        peer.validate()?;
        Ok(Negotiated {
            max_payload: self.max_payload.min(peer.max_payload),
            window: self.window.min(peer.window),
            minor: self.minor.min(peer.minor),
            resume: self.flags & peer.flags & hello_flags::RESUME != 0,
        })
    }
}

/// Recognises a version 1 board's answer to a HELLO: v1 firmware does not know the v2 header
/// and replies with its frame-error frame (`ws_common::ctrl`, opcode
/// [`ctrl::FRAME_ERROR_OPCODE`], payload `[status, version]`). Returns the mismatch to report,
/// or `None` if `bytes` hold no such frame.
pub fn detect_v1_reply(bytes: &[u8]) -> Option<HelloError> {
    let mut dec = ctrl::FrameDecoder::new();
    for &b in bytes {
        dec.push(b);
        loop {
            match dec.poll() {
                ctrl::Event::Pending => break,
                ctrl::Event::Frame(f) if f.opcode == ctrl::FRAME_ERROR_OPCODE => {
                    let v = f.payload.get(1).copied().unwrap_or(ctrl::VERSION);
                    return Some(HelloError::VersionMismatch {
                        peer: (v, 0),
                        ours: (VERSION, VERSION_MINOR),
                    });
                }
                _ => {}
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn roundtrip_and_layout() {
        let mut h = Hello::new(4096, 16);
        h.flags = hello_flags::RESUME;
        h.state[2] = ChannelState { rx_expected: 1, rx_committed: 2, tx_next: 3, credit: 4 };
        h.session = 0x0102_0304;
        let b = h.encode();
        assert_eq!(&b[..12], &[2, 1, 1, 0, 0, 0x10, 0, 0, 16, 0, 7, 0]);
        assert_eq!(&b[12 + 32..12 + 48], &[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0]);
        assert_eq!(&b[140..], &[4, 3, 2, 1]);
        assert_eq!(Hello::decode(&b), Ok(h));
        assert_eq!(h.channel(Channel::Weights).credit, 4);
        // A 2.0 HELLO (no session) is still understood.
        assert_eq!(Hello::decode(&b[..HELLO_MIN_LEN]), Ok(Hello { session: 0, ..h }));
    }

    #[test]
    fn version_mismatch_names_both_versions() {
        let mut b = Hello::new(4096, 16).encode();
        b[0] = 3;
        b[1] = 1;
        let e = Hello::decode(&b[..2]).unwrap_err();
        assert_eq!(e, HelloError::VersionMismatch { peer: (3, 1), ours: (2, 1) });
        let msg = e.to_string();
        assert!(msg.contains("3.1") && msg.contains("2.1"), "{msg}");
    }

    #[test]
    fn validation() {
        let good = Hello::new(4096, 16);
        assert_eq!(Hello::decode(&good.encode()[..100]), Err(HelloError::Short { len: 100 }));
        let bad = |f: fn(&mut Hello)| {
            let mut h = good;
            f(&mut h);
            Hello::decode(&h.encode())
        };
        assert_eq!(bad(|h| h.flags = 2), Err(HelloError::BadFlags(2)));
        assert_eq!(bad(|h| h.max_payload = 0), Err(HelloError::BadMaxPayload(0)));
        assert_eq!(bad(|h| h.max_payload = 65_537), Err(HelloError::BadMaxPayload(65_537)));
        assert_eq!(bad(|h| h.window = 0), Err(HelloError::BadWindow));
        assert_eq!(bad(|h| h.channels = 9), Err(HelloError::BadChannels(9)));
        let mut longer = [0u8; HELLO_LEN + 8];
        longer[..HELLO_LEN].copy_from_slice(&good.encode());
        assert_eq!(Hello::decode(&longer), Ok(good));
    }

    #[test]
    fn negotiation_takes_minimums() {
        let mut a = Hello::new(65_536, 32);
        let mut b = Hello::new(4096, 16);
        a.flags = hello_flags::RESUME;
        let n = a.negotiate(&b).unwrap();
        assert_eq!(n, Negotiated { max_payload: 4096, window: 16, minor: 1, resume: false });
        b.flags = hello_flags::RESUME;
        assert!(a.negotiate(&b).unwrap().resume);
    }

    #[test]
    fn v1_board_is_recognised() {
        // The v1 frame-error frame: opcode 0xff, id 0, payload [status, version].
        let mut out = [0u8; ctrl::MAX_FRAME];
        let n =
            ctrl::encode_frame(ctrl::FRAME_ERROR_OPCODE, 0, &[ctrl::Status::BadVersion as u8, 1], &mut out)
                .unwrap();
        let e = detect_v1_reply(&out[..n]).unwrap();
        assert_eq!(e, HelloError::VersionMismatch { peer: (1, 0), ours: (2, 1) });
        assert!(detect_v1_reply(b"noise").is_none());
    }
}
