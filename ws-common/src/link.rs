//! Host link protocol version 2: the frames every byte between the host and the board travels
//! in (docs/link.md is the contract; this module is its one implementation, shared by the
//! firmware, the host driver, the simulator's fault injector and the HDL testbenches).
//!
//! ```text
//!  byte 0    1    2        3        4      5..8          8..12  12..16  16..20  20..24
//!      +----+----+--------+--------+------+-------------+------+-------+-------+------+
//!      | 'W'| 'S'| version| channel| flags| length u24  | seq  | ack   | credit| hcrc |
//!      +----+----+--------+--------+------+-------------+------+-------+-------+------+
//!      | payload, zero padded to a multiple of 4 | pcrc: CRC-32C of header + padded payload |
//!      +-----------------------------------------+------------------------------------------+
//! ```
//!
//! - [`Header`]: the 24-byte header and its checks.
//! - [`encode_frame`] / [`frame_parts`]: a whole frame into a buffer, or only the bytes
//!   around a payload the caller sends from where it lies (scatter-gather).
//! - [`Decoder`]: the resynchronising stream decoder ("Receiving" in docs/link.md).
//! - [`gbn`]: go-back-N sender and receiver state machines of the bulk channels.
//! - [`hello`]: the connect handshake payload and version negotiation.
//! - [`control`]: the control-channel payload header and the firmware's replay cache.
//! - `fault` (`std` feature): the fault injector of the simulator and the host tests.
//!
//! Everything here is `no_std` and allocation-free; buffers are fixed-capacity (const
//! generics) or the caller's.

mod decode;
mod encode;
mod header;

pub mod control;
pub mod counters;
pub mod gbn;
pub mod hello;

#[cfg(feature = "std")]
pub mod bench;
#[cfg(feature = "std")]
pub mod fault;

pub use decode::{Decoder, Event, Feed, Frame};
pub use encode::{encode_frame, frame_parts, EncodeError, FrameParts};
pub use header::{DecodeError, Header};

/// Two magic bytes that start every frame: "WS".
pub const MAGIC: [u8; 2] = *b"WS";
/// Link protocol major version carried in every header.
pub const VERSION: u8 = 2;
/// Link protocol minor version (HELLO only; minor versions are compatible).
pub const VERSION_MINOR: u8 = 1;
/// Header bytes.
pub const HEADER_LEN: usize = 24;
/// Bytes after the padded payload (the pcrc), when the payload is not empty.
pub const TRAILER_LEN: usize = 4;
/// Largest payload any frame may carry.
pub const MAX_PAYLOAD: usize = 65_536;
/// Largest payload of a frame on channels 0 (link), 1 (control), 5 (log) and 7.
pub const MAX_CTRL_PAYLOAD: usize = 1024;
/// Largest frame on the wire.
pub const MAX_FRAME: usize = frame_len(MAX_PAYLOAD);
/// Largest frame on channels 0, 1, 5 and 7: what a firmware-side decoder must hold.
pub const MAX_CTRL_FRAME: usize = frame_len(MAX_CTRL_PAYLOAD);
/// Default go-back-N window in frames (HELLO negotiates the minimum of both sides).
pub const DEFAULT_WINDOW: u16 = 16;
/// Number of channel numbers (0..=7), the size of per-channel tables.
pub const CHANNELS: usize = 8;

/// `len` rounded up to a multiple of 4: the payload bytes on the wire.
pub const fn padded_len(len: usize) -> usize {
    (len + 3) & !3
}

/// Bytes on the wire of a frame with a `len`-byte payload: 24 without payload, else
/// 24 + padded payload + 4.
pub const fn frame_len(len: usize) -> usize {
    if len == 0 {
        HEADER_LEN
    } else {
        HEADER_LEN + padded_len(len) + TRAILER_LEN
    }
}

/// Overhead of a frame carrying `len` (> 0) payload bytes: the bytes on the wire that are
/// not payload, as a fraction of the payload (28 / 4096 = 0.68 % at 4 KiB).
pub fn overhead(len: usize) -> f64 {
    (frame_len(len) - len) as f64 / len.max(1) as f64
}

/// Flag bits of the header's `flags` byte.
pub mod flags {
    /// `seq` and the payload are meaningful: a sequenced data frame.
    pub const DATA: u8 = 1 << 0;
    /// `ack` and `credit` are meaningful.
    pub const ACK: u8 = 1 << 1;
    /// The receiver saw a gap or a bad frame: go back to `ack`.
    pub const NAK: u8 = 1 << 2;
    /// Connect handshake (channel 0 only).
    pub const HELLO: u8 = 1 << 3;
    /// This DATA frame is a retransmission (counters only).
    pub const RETX: u8 = 1 << 4;
    /// A refusal; the payload says why.
    pub const ERROR: u8 = 1 << 5;
    /// Every defined bit; bits 6 and 7 must be zero.
    pub const ALL: u8 = DATA | ACK | NAK | HELLO | RETX | ERROR;
}

/// The channel a frame belongs to (header byte 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Channel {
    /// 0: HELLO handshake and link-level ERROR reports (firmware FIFO).
    Link = 0,
    /// 1: control requests and responses (firmware FIFO).
    Control = 1,
    /// 2: bulk weights, both directions (DMA, go-back-N).
    Weights = 2,
    /// 3: bulk gradients, both directions (DMA, go-back-N).
    Gradients = 3,
    /// 4: training samples, host to board (DMA, go-back-N).
    Data = 4,
    /// 5: defmt log bytes, board to host (firmware FIFO, sequenced, not retransmitted).
    Log = 5,
    /// 6: hardware timestamps, board to host (DMA, go-back-N).
    Trace = 6,
    /// 7: reserved; a valid header value with no user yet.
    Reserved = 7,
}

impl Channel {
    /// Every channel, by number.
    pub const ALL: [Channel; CHANNELS] = [
        Self::Link,
        Self::Control,
        Self::Weights,
        Self::Gradients,
        Self::Data,
        Self::Log,
        Self::Trace,
        Self::Reserved,
    ];

    /// The channel with this number, or `None` past 7.
    pub const fn from_u8(v: u8) -> Option<Self> {
        if (v as usize) < CHANNELS {
            Some(Self::ALL[v as usize])
        } else {
            None
        }
    }

    /// The channel's number.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Whether the channel is a DMA bulk channel with go-back-N and credits (2, 3, 4, 6).
    pub const fn is_bulk(self) -> bool {
        matches!(self, Self::Weights | Self::Gradients | Self::Data | Self::Trace)
    }

    /// The largest payload the protocol allows on this channel before negotiation.
    pub const fn max_payload(self) -> usize {
        if self.is_bulk() {
            MAX_PAYLOAD
        } else {
            MAX_CTRL_PAYLOAD
        }
    }

    /// Lower-case name, for counters and messages.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Link => "link",
            Self::Control => "control",
            Self::Weights => "weights",
            Self::Gradients => "gradients",
            Self::Data => "data",
            Self::Log => "log",
            Self::Trace => "trace",
            Self::Reserved => "reserved",
        }
    }
}

impl core::fmt::Display for Channel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} ({})", self.name(), *self as u8)
    }
}

/// `a` is before `b` in wrapping sequence (or byte-count) space: `b - a` taken as a signed
/// 32-bit distance is positive. Sequence numbers and credits are compared only this way.
pub const fn seq_lt(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) > 0
}

/// `a − b` in wrapping sequence (or byte-count) space, as a signed distance: negative when
/// `a` is behind `b`.
pub const fn seq_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}
