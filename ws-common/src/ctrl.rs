//! The control protocol: framed request/response traffic between the host and the firmware.
//!
//! This is the skeleton protocol that rides the host link's byte stream until the link issue
//! adds channels, DMA bulk transfer and retransmission. It already has what those will keep:
//! a magic for resynchronisation, a version byte, a request id for idempotent retries, a
//! bounded length and a CRC-32C over everything after the magic.
//!
//! ```text
//!  byte 0    1    2        3        4    5    6    7    8 ..        8+len .. 11+len
//!      +----+----+--------+--------+---------+---------+-------------+-------------+
//!      | 'W'| 'S'| version| opcode | req id  | length  | payload     | CRC-32C     |
//!      +----+----+--------+--------+---------+---------+-------------+-------------+
//!                 \______________ covered by the CRC (LE) ______________/
//! ```
//!
//! Requests use opcodes `0x01..=0x7f`. A response carries the request's opcode with bit 7
//! set, the same request id, and a payload that starts with a [`Status`] byte. A frame the
//! device could not parse is answered with [`FRAME_ERROR_OPCODE`].
//!
//! Each command is one type implementing [`Command`], in its own file under `cmd/`.

pub mod cmd;
mod frame;
mod status;

pub use frame::{encode_frame, DecodeError, Event, Frame, FrameDecoder};
pub use status::Status;

/// Two magic bytes that start every frame: "WS".
pub const MAGIC: [u8; 2] = *b"WS";
/// Protocol version carried in every frame.
pub const VERSION: u8 = 1;
/// Bytes before the payload.
pub const HEADER_LEN: usize = 8;
/// Bytes after the payload.
pub const TRAILER_LEN: usize = 4;
/// Largest payload a frame may carry.
pub const MAX_PAYLOAD: usize = 1024;
/// Largest frame on the wire.
pub const MAX_FRAME: usize = HEADER_LEN + MAX_PAYLOAD + TRAILER_LEN;
/// Bit set in the opcode of every response.
pub const RESPONSE_BIT: u8 = 0x80;
/// Opcode of the device's report of a frame it could not accept (bad CRC, bad length,
/// bad version). Its request id is 0 and its payload is one [`Status`] byte followed by
/// the device's protocol version.
pub const FRAME_ERROR_OPCODE: u8 = 0xff;
/// The GPIO/LED pattern of a stopped (panicked or faulted) firmware, 0b1010_0101, which the
/// timer's blink (LED0 only) never produces. A host that sees it on `gpio_out` knows the
/// firmware stopped; the reason is the last line of the defmt log.
pub const PANIC_LEDS: u8 = 0xa5;

/// A request/response pair of the control protocol.
///
/// The host encodes a request with [`Command::encode`] and decodes the answer with
/// [`Command::decode_response`]; the firmware does the reverse with [`Command::decode`] and
/// [`Command::encode_response`].
pub trait Command<'a>: Sized {
    /// The request opcode (`0x01..=0x7f`).
    const OPCODE: u8;
    /// What a successful response carries.
    type Response;

    /// Writes the request payload into `out`, returning its length.
    fn encode(&self, out: &mut [u8]) -> Result<usize, Status>;
    /// Parses a request payload.
    fn decode(payload: &'a [u8]) -> Result<Self, Status>;
    /// Writes a successful response's data (after the status byte) into `out`.
    fn encode_response(resp: &Self::Response, out: &mut [u8]) -> Result<usize, Status>;
    /// Parses a successful response's data (after the status byte).
    fn decode_response(data: &'a [u8]) -> Result<Self::Response, Status>;
}

/// Reads a little-endian `u16` at `at`, or fails with [`Status::BadLength`].
pub(crate) fn get_u16(p: &[u8], at: usize) -> Result<u16, Status> {
    p.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]])).ok_or(Status::BadLength)
}

/// Reads a little-endian `u32` at `at`, or fails with [`Status::BadLength`].
pub(crate) fn get_u32(p: &[u8], at: usize) -> Result<u32, Status> {
    p.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).ok_or(Status::BadLength)
}

/// Reads a little-endian `u64` at `at`, or fails with [`Status::BadLength`].
pub(crate) fn get_u64(p: &[u8], at: usize) -> Result<u64, Status> {
    Ok(get_u32(p, at)? as u64 | (get_u32(p, at + 4)? as u64) << 32)
}

/// Little-endian writer over a fixed buffer that fails with [`Status::BadLength`] instead of
/// panicking when the buffer is full.
pub(crate) struct Writer<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl<'b> Writer<'b> {
    pub(crate) fn new(buf: &'b mut [u8]) -> Self {
        Self { buf, len: 0 }
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) -> Result<(), Status> {
        let end = self.len + b.len();
        self.buf.get_mut(self.len..end).ok_or(Status::BadLength)?.copy_from_slice(b);
        self.len = end;
        Ok(())
    }
    pub(crate) fn u8(&mut self, v: u8) -> Result<(), Status> {
        self.bytes(&[v])
    }
    pub(crate) fn u16(&mut self, v: u16) -> Result<(), Status> {
        self.bytes(&v.to_le_bytes())
    }
    pub(crate) fn u32(&mut self, v: u32) -> Result<(), Status> {
        self.bytes(&v.to_le_bytes())
    }
    pub(crate) fn u64(&mut self, v: u64) -> Result<(), Status> {
        self.bytes(&v.to_le_bytes())
    }
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}
