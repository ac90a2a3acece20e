//! Frame encoding and a resynchronising stream decoder.

use super::{Status, HEADER_LEN, MAGIC, MAX_FRAME, MAX_PAYLOAD, TRAILER_LEN, VERSION};
use crate::crc32c::Crc32c;

/// One parsed frame, borrowing the decoder's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Opcode (bit 7 set on responses).
    pub opcode: u8,
    /// Request id, echoed by the response.
    pub req_id: u16,
    /// Payload bytes.
    pub payload: &'a [u8],
}

/// Why the decoder dropped bytes. The decoder has already resynchronised when it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// A complete frame failed its CRC-32C.
    BadCrc,
    /// The header declared a payload longer than [`MAX_PAYLOAD`].
    TooLong,
    /// The header's version is not [`VERSION`]; the field holds what it carried.
    BadVersion(u8),
}

impl DecodeError {
    /// The status a device reports for this error.
    pub fn status(self) -> Status {
        match self {
            Self::BadCrc => Status::BadCrc,
            Self::TooLong => Status::FrameTooLong,
            Self::BadVersion(_) => Status::BadVersion,
        }
    }
}

/// Writes one frame into `out` and returns its length.
pub fn encode_frame(opcode: u8, req_id: u16, payload: &[u8], out: &mut [u8]) -> Result<usize, Status> {
    if payload.len() > MAX_PAYLOAD {
        return Err(Status::FrameTooLong);
    }
    let total = HEADER_LEN + payload.len() + TRAILER_LEN;
    let out = out.get_mut(..total).ok_or(Status::BadLength)?;
    out[0..2].copy_from_slice(&MAGIC);
    out[2] = VERSION;
    out[3] = opcode;
    out[4..6].copy_from_slice(&req_id.to_le_bytes());
    out[6..8].copy_from_slice(&(payload.len() as u16).to_le_bytes());
    out[HEADER_LEN..HEADER_LEN + payload.len()].copy_from_slice(payload);
    let mut crc = Crc32c::new();
    crc.update(&out[2..HEADER_LEN + payload.len()]);
    out[HEADER_LEN + payload.len()..].copy_from_slice(&crc.finish().to_le_bytes());
    Ok(total)
}

/// A frame decoder over a byte stream that never panics and never allocates.
///
/// Feed bytes with [`FrameDecoder::push`], then call [`FrameDecoder::poll`] until it returns
/// [`Event::Pending`]. Bytes that cannot start a frame are skipped. When a candidate frame
/// turns out bad (too long, wrong version, CRC mismatch) the decoder reports it once and
/// rescans from the byte after the false magic, so a real frame hidden inside garbage is
/// still found.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: [u8; MAX_FRAME],
    len: usize,
    /// Length of the frame returned by the last `poll`, dropped at the next call.
    consumed: usize,
    /// Bytes skipped while hunting for a magic.
    skipped: usize,
    /// Set when the buffer overflowed (only possible if `poll` is not called).
    overflowed: bool,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new()
    }
}

/// What one call to [`FrameDecoder::poll`] produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// Nothing complete yet: feed more bytes.
    Pending,
    /// A valid frame.
    Frame(Frame<'a>),
    /// A bad candidate frame was dropped.
    Error(DecodeError),
}

impl FrameDecoder {
    /// An empty decoder.
    pub const fn new() -> Self {
        Self { buf: [0; MAX_FRAME], len: 0, consumed: 0, skipped: 0, overflowed: false }
    }

    /// Bytes skipped as noise since the decoder was created.
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// Drops any partial frame.
    pub fn clear(&mut self) {
        self.len = 0;
        self.consumed = 0;
    }

    /// Buffers one byte. Returns `false` (and drops the byte) only if the caller skipped
    /// [`FrameDecoder::poll`] for longer than a maximum frame.
    pub fn push(&mut self, byte: u8) -> bool {
        self.release();
        if self.len < self.buf.len() {
            self.buf[self.len] = byte;
            self.len += 1;
            true
        } else {
            self.overflowed = true;
            false
        }
    }

    /// Buffers a byte and polls once: convenient when bytes arrive one at a time and the
    /// caller loops on [`FrameDecoder::poll`] afterwards anyway.
    pub fn feed(&mut self, byte: u8) -> Event<'_> {
        self.push(byte);
        self.poll()
    }

    /// Looks for the next complete frame or error in the buffered bytes.
    pub fn poll(&mut self) -> Event<'_> {
        self.release();
        match self.check() {
            Ok(Some(n)) => {
                self.consumed = n;
                Event::Frame(Frame {
                    opcode: self.buf[3],
                    req_id: u16::from_le_bytes([self.buf[4], self.buf[5]]),
                    payload: &self.buf[HEADER_LEN..n - TRAILER_LEN],
                })
            }
            Ok(None) => Event::Pending,
            Err(e) => {
                // Drop the false magic; the next poll rescans what followed it.
                self.drop_front(1);
                Event::Error(e)
            }
        }
    }

    fn release(&mut self) {
        if self.consumed > 0 {
            let n = self.consumed;
            self.consumed = 0;
            self.drop_front(n);
        }
    }

    /// `Ok(Some(n))` when `buf[..n]` is one complete valid frame, `Ok(None)` when more bytes
    /// are needed, `Err` when the candidate at the front is bad.
    fn check(&mut self) -> Result<Option<usize>, DecodeError> {
        // Hunt for the magic.
        while (self.len > 0 && self.buf[0] != MAGIC[0]) || (self.len > 1 && self.buf[1] != MAGIC[1]) {
            self.drop_front(1);
            self.skipped += 1;
        }
        if self.len < HEADER_LEN {
            return Ok(None);
        }
        if self.buf[2] != VERSION {
            return Err(DecodeError::BadVersion(self.buf[2]));
        }
        let plen = u16::from_le_bytes([self.buf[6], self.buf[7]]) as usize;
        if plen > MAX_PAYLOAD {
            return Err(DecodeError::TooLong);
        }
        let n = HEADER_LEN + plen + TRAILER_LEN;
        if self.len < n {
            return Ok(None);
        }
        let mut crc = Crc32c::new();
        crc.update(&self.buf[2..n - TRAILER_LEN]);
        let want = u32::from_le_bytes([self.buf[n - 4], self.buf[n - 3], self.buf[n - 2], self.buf[n - 1]]);
        if crc.finish() != want {
            return Err(DecodeError::BadCrc);
        }
        Ok(Some(n))
    }

    fn drop_front(&mut self, n: usize) {
        let n = n.min(self.len);
        self.buf.copy_within(n..self.len, 0);
        self.len -= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(op: u8, id: u16, p: &[u8]) -> ([u8; MAX_FRAME], usize) {
        let mut out = [0u8; MAX_FRAME];
        let n = encode_frame(op, id, p, &mut out).unwrap();
        (out, n)
    }

    fn decode_all(bytes: &[u8], mut on: impl FnMut(Result<(u8, u16, &[u8]), DecodeError>)) {
        let mut d = FrameDecoder::new();
        for &b in bytes {
            d.push(b);
            loop {
                match d.poll() {
                    Event::Pending => break,
                    Event::Frame(f) => on(Ok((f.opcode, f.req_id, f.payload))),
                    Event::Error(e) => on(Err(e)),
                }
            }
        }
    }

    #[test]
    fn roundtrip() {
        let (f, n) = frame(3, 0x1234, b"hello");
        let mut got = 0;
        decode_all(&f[..n], |r| {
            assert_eq!(r, Ok((3, 0x1234, &b"hello"[..])));
            got += 1;
        });
        assert_eq!(got, 1);
    }

    #[test]
    fn back_to_back_and_noise() {
        let (a, na) = frame(1, 1, b"a");
        let (b, nb) = frame(2, 2, &[]);
        let mut stream = [0u8; 64];
        let mut k = 0;
        for x in b"xxWzz" {
            stream[k] = *x;
            k += 1;
        }
        stream[k..k + na].copy_from_slice(&a[..na]);
        k += na;
        stream[k..k + nb].copy_from_slice(&b[..nb]);
        k += nb;
        let mut ops = [0u8; 4];
        let mut i = 0;
        decode_all(&stream[..k], |r| {
            ops[i] = r.unwrap().0;
            i += 1;
        });
        assert_eq!(&ops[..i], &[1, 2]);
    }

    #[test]
    fn corrupted_frame_is_reported_and_next_frame_survives() {
        let (mut a, na) = frame(1, 7, b"payload");
        a[9] ^= 0x40;
        let (b, nb) = frame(2, 8, b"ok");
        let mut s = [0u8; 64];
        s[..na].copy_from_slice(&a[..na]);
        s[na..na + nb].copy_from_slice(&b[..nb]);
        let mut errs = 0;
        let mut frames = 0;
        decode_all(&s[..na + nb], |r| match r {
            Err(DecodeError::BadCrc) => errs += 1,
            Ok((2, 8, p)) => {
                assert_eq!(p, b"ok");
                frames += 1
            }
            other => panic!("unexpected {other:?}"),
        });
        assert_eq!((errs, frames), (1, 1));
    }

    #[test]
    fn frame_hidden_after_false_magic_is_found() {
        // A false header whose length field swallows the real frame that follows.
        let (b, nb) = frame(5, 9, b"real");
        let mut s = [0u8; 64];
        s[..8].copy_from_slice(&[b'W', b'S', VERSION, 1, 0, 0, 20, 0]);
        s[8..8 + nb].copy_from_slice(&b[..nb]);
        let pad = 8 + nb + 20;
        let mut found = false;
        decode_all(&s[..pad], |r| {
            if let Ok((5, 9, p)) = r {
                assert_eq!(p, b"real");
                found = true;
            }
        });
        // The false candidate fails its CRC only once its 20 payload bytes have arrived; the
        // real frame inside it is then recovered by the rescan of the buffered bytes.
        assert!(found);
    }

    #[test]
    fn too_long_and_bad_version_are_reported() {
        let mut errs = [None; 4];
        let mut i = 0;
        decode_all(&[b'W', b'S', VERSION, 1, 0, 0, 0xff, 0xff], |r| {
            errs[i] = r.err();
            i += 1;
        });
        decode_all(&[b'W', b'S', 9, 1, 0, 0, 0, 0], |r| {
            errs[i] = r.err();
            i += 1;
        });
        assert_eq!(&errs[..i], &[Some(DecodeError::TooLong), Some(DecodeError::BadVersion(9))]);
    }
}
