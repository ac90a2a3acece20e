//! Control channel (1) payloads and the firmware's response replay cache (docs/link.md
//! "Control").
//!
//! A control payload is `opcode u8, flags u8 (0), req_id u16, body`. The commands are the
//! ones of [`crate::ctrl::cmd`], unchanged: a request body is [`Command::encode`]'s output; a
//! response has the request's opcode with [`RESPONSE_BIT`] set, the same `req_id`, and a body
//! that starts with the [`Status`] byte.
//!
//! The host retries a request whose response did not arrive with the **same** `req_id`; the
//! firmware answers a repeated request from its [`ReplayCache`] without running the command
//! again, so every command (`Poke` and `Reset` included) is safe to retry.

use super::MAX_CTRL_PAYLOAD;
use crate::crc32c::crc32c;
use crate::ctrl::{Command, Status, RESPONSE_BIT};

/// Bytes of the control payload header.
pub const CTRL_HEADER_LEN: usize = 4;
/// Largest command body: a control payload minus its header.
pub const MAX_CTRL_BODY: usize = MAX_CTRL_PAYLOAD - CTRL_HEADER_LEN;

/// Why a control payload was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CtrlError {
    /// Fewer than [`CTRL_HEADER_LEN`] bytes.
    #[error("control payload of {0} bytes is shorter than its 4-byte header")]
    Short(usize),
    /// The flags byte is not zero.
    #[error("control payload flags {0:#04x} are reserved (must be 0)")]
    BadFlags(u8),
    /// The output buffer cannot hold the payload.
    #[error("control payload does not fit the output buffer")]
    BufferTooSmall,
    /// A response payload without its status byte.
    #[error("control response without a status byte")]
    NoStatus,
}

/// The header of a control payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtrlHeader {
    /// Opcode; bit 7 set on responses.
    pub opcode: u8,
    /// Request id, echoed by the response.
    pub req_id: u16,
}

impl CtrlHeader {
    /// Whether this is a response.
    pub const fn is_response(&self) -> bool {
        self.opcode & RESPONSE_BIT != 0
    }

    /// The four header bytes.
    pub const fn encode(&self) -> [u8; CTRL_HEADER_LEN] {
        let id = self.req_id.to_le_bytes();
        [self.opcode, 0, id[0], id[1]]
    }

    /// Splits a control payload into its header and body.
    pub fn decode(p: &[u8]) -> Result<(Self, &[u8]), CtrlError> {
        if p.len() < CTRL_HEADER_LEN {
            return Err(CtrlError::Short(p.len()));
        }
        if p[1] != 0 {
            return Err(CtrlError::BadFlags(p[1]));
        }
        Ok((Self { opcode: p[0], req_id: u16::from_le_bytes([p[2], p[3]]) }, &p[CTRL_HEADER_LEN..]))
    }
}

/// Writes the control payload of request `cmd` into `out`, returning its length.
pub fn encode_request<'a, C: Command<'a>>(cmd: &C, req_id: u16, out: &mut [u8]) -> Result<usize, CtrlError> {
    let cap = MAX_CTRL_PAYLOAD.min(out.len());
    let out = &mut out[..cap];
    if out.len() < CTRL_HEADER_LEN {
        return Err(CtrlError::BufferTooSmall);
    }
    out[..CTRL_HEADER_LEN].copy_from_slice(&CtrlHeader { opcode: C::OPCODE, req_id }.encode());
    let n = cmd.encode(&mut out[CTRL_HEADER_LEN..]).map_err(|_| CtrlError::BufferTooSmall)?;
    Ok(CTRL_HEADER_LEN + n)
}

/// Writes the control payload of a response to `C` (status byte, then the data on success).
pub fn encode_response<'a, C: Command<'a>>(
    req_id: u16,
    result: Result<&C::Response, Status>,
    out: &mut [u8],
) -> Result<usize, CtrlError> {
    encode_response_to(C::OPCODE, req_id, result.map(|r| |o: &mut [u8]| C::encode_response(r, o)), out)
}

/// Writes an error response to any opcode (unknown opcodes, bad bodies).
pub fn encode_error(opcode: u8, req_id: u16, status: Status, out: &mut [u8]) -> Result<usize, CtrlError> {
    encode_response_to(opcode, req_id, Err::<fn(&mut [u8]) -> Result<usize, Status>, _>(status), out)
}

fn encode_response_to<F: FnOnce(&mut [u8]) -> Result<usize, Status>>(
    opcode: u8,
    req_id: u16,
    result: Result<F, Status>,
    out: &mut [u8],
) -> Result<usize, CtrlError> {
    let cap = MAX_CTRL_PAYLOAD.min(out.len());
    let out = &mut out[..cap];
    if out.len() < CTRL_HEADER_LEN + 1 {
        return Err(CtrlError::BufferTooSmall);
    }
    out[..CTRL_HEADER_LEN].copy_from_slice(&CtrlHeader { opcode: opcode | RESPONSE_BIT, req_id }.encode());
    let n = match result {
        Ok(data) => {
            out[CTRL_HEADER_LEN] = Status::Ok as u8;
            data(&mut out[CTRL_HEADER_LEN + 1..]).map_err(|_| CtrlError::BufferTooSmall)?
        }
        Err(status) => {
            out[CTRL_HEADER_LEN] = status as u8;
            0
        }
    };
    Ok(CTRL_HEADER_LEN + 1 + n)
}

/// Parses a response body for `C`: the status byte, then (on `Ok`) the command's data. A
/// refusal is returned as its status; a malformed body as [`Status::BadLength`].
pub fn decode_response<'a, C: Command<'a>>(body: &'a [u8]) -> Result<C::Response, Status> {
    let (&status, data) = body.split_first().ok_or(Status::BadLength)?;
    match Status::from_u8(status) {
        Status::Ok => C::decode_response(data),
        other => Err(other),
    }
}

/// One cached response.
#[derive(Debug, Clone)]
struct Entry<const CAP: usize> {
    req_id: u16,
    opcode: u8,
    /// CRC-32C of the request body: a reused id with another body is a new request.
    req_crc: u32,
    len: u16,
    age: u32,
    bytes: [u8; CAP],
}

/// The firmware's fixed-capacity cache of its last `SLOTS` responses (each at most `CAP`
/// bytes), keyed by request id, opcode and a CRC of the request body.
///
/// On a request, the firmware first asks [`ReplayCache::lookup`]; a hit is a retry and gets
/// the cached response, unchanged, without running the command. A miss runs the command and
/// [`ReplayCache::insert`]s the response, evicting the oldest entry. A HELLO without RESUME
/// must [`ReplayCache::clear`] it: a new host process numbers its requests from scratch.
#[derive(Debug, Clone)]
pub struct ReplayCache<const SLOTS: usize, const CAP: usize> {
    entries: [Option<Entry<CAP>>; SLOTS],
    clock: u32,
}

impl<const SLOTS: usize, const CAP: usize> Default for ReplayCache<SLOTS, CAP> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const SLOTS: usize, const CAP: usize> ReplayCache<SLOTS, CAP> {
    /// An empty cache.
    pub const fn new() -> Self {
        const { assert!(SLOTS > 0 && CAP <= u16::MAX as usize, "cache needs a slot and CAP < 64 KiB") };
        Self { entries: [const { None }; SLOTS], clock: 0 }
    }

    /// Forgets every response.
    pub fn clear(&mut self) {
        self.entries = [const { None }; SLOTS];
    }

    /// The cached response payload for this request, if it is a retry.
    pub fn lookup(&self, req: &CtrlHeader, body: &[u8]) -> Option<&[u8]> {
        let crc = crc32c(body);
        self.entries
            .iter()
            .flatten()
            .find(|e| e.req_id == req.req_id && e.opcode == req.opcode && e.req_crc == crc)
            .map(|e| &e.bytes[..e.len as usize])
    }

    /// Caches `response` (a whole control payload) for the request `req` with `body`.
    /// A response longer than `CAP` is not cached (returns `false`): a retry of it runs the
    /// command again, so size `CAP` for every command that is not idempotent.
    pub fn insert(&mut self, req: &CtrlHeader, body: &[u8], response: &[u8]) -> bool {
        if response.len() > CAP {
            return false;
        }
        self.clock = self.clock.wrapping_add(1);
        let crc = crc32c(body);
        // The same id replaces its old entry, else the oldest (or an empty) slot is taken.
        let clock = self.clock;
        let slot = self
            .entries
            .iter()
            .position(|e| matches!(e, Some(e) if e.req_id == req.req_id))
            .or_else(|| self.entries.iter().position(Option::is_none))
            .unwrap_or_else(|| {
                let age = |e: &Option<Entry<CAP>>| e.as_ref().map_or(u32::MAX, |e| clock.wrapping_sub(e.age));
                (0..SLOTS).max_by_key(|&i| age(&self.entries[i])).unwrap_or(0)
            });
        let mut bytes = [0u8; CAP];
        bytes[..response.len()].copy_from_slice(response);
        self.entries[slot] = Some(Entry {
            req_id: req.req_id,
            opcode: req.opcode,
            req_crc: crc,
            len: response.len() as u16,
            age: self.clock,
            bytes,
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctrl::cmd::{Peek, Ping, Poke};

    #[test]
    fn request_and_response_roundtrip() {
        let mut out = [0u8; MAX_CTRL_PAYLOAD];
        let n = encode_request(&Peek { addr: 0x1000_0000, len: 8 }, 0xbeef, &mut out).unwrap();
        let (h, body) = CtrlHeader::decode(&out[..n]).unwrap();
        assert_eq!(h, CtrlHeader { opcode: Peek::OPCODE, req_id: 0xbeef });
        assert!(!h.is_response());
        assert_eq!(Peek::decode(body), Ok(Peek { addr: 0x1000_0000, len: 8 }));

        let data = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let n = encode_response::<Peek>(0xbeef, Ok(&&data[..]), &mut out).unwrap();
        let (h, body) = CtrlHeader::decode(&out[..n]).unwrap();
        assert!(h.is_response() && h.req_id == 0xbeef);
        assert_eq!(decode_response::<Peek>(body), Ok(&data[..]));

        let n = encode_error(0x55, 3, Status::UnknownOpcode, &mut out).unwrap();
        let (h, body) = CtrlHeader::decode(&out[..n]).unwrap();
        assert_eq!(h.opcode, 0xd5);
        assert_eq!(decode_response::<Ping>(body), Err(Status::UnknownOpcode));
    }

    #[test]
    fn header_refusals() {
        assert_eq!(CtrlHeader::decode(&[1, 0, 0]), Err(CtrlError::Short(3)));
        assert_eq!(CtrlHeader::decode(&[1, 4, 0, 0]), Err(CtrlError::BadFlags(4)));
        assert_eq!(decode_response::<Ping>(&[]), Err(Status::BadLength));
    }

    #[test]
    fn replay_cache_replays_retries_only() {
        let mut c = ReplayCache::<2, 64>::new();
        let poke = CtrlHeader { opcode: Poke::OPCODE, req_id: 1 };
        assert_eq!(c.lookup(&poke, b"body"), None);
        assert!(c.insert(&poke, b"body", b"resp1"));
        assert_eq!(c.lookup(&poke, b"body"), Some(&b"resp1"[..]));
        // Same id, other body or opcode: a new request.
        assert_eq!(c.lookup(&poke, b"other"), None);
        assert_eq!(c.lookup(&CtrlHeader { opcode: Ping::OPCODE, req_id: 1 }, b"body"), None);
        // Eviction of the oldest.
        let h2 = CtrlHeader { opcode: Ping::OPCODE, req_id: 2 };
        let h3 = CtrlHeader { opcode: Ping::OPCODE, req_id: 3 };
        assert!(c.insert(&h2, b"", b"r2"));
        assert!(c.insert(&h3, b"", b"r3"));
        assert_eq!(c.lookup(&poke, b"body"), None);
        assert_eq!(c.lookup(&h2, b""), Some(&b"r2"[..]));
        assert_eq!(c.lookup(&h3, b""), Some(&b"r3"[..]));
        // Re-inserting an id replaces its entry in place.
        assert!(c.insert(&h2, b"x", b"r2b"));
        assert_eq!(c.lookup(&h3, b""), Some(&b"r3"[..]));
        assert_eq!(c.lookup(&h2, b"x"), Some(&b"r2b"[..]));
        assert!(!c.insert(&h2, b"", &[0; 65]));
        c.clear();
        assert_eq!(c.lookup(&h3, b""), None);
    }
}
