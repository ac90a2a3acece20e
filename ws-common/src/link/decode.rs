//! The resynchronising stream decoder (docs/link.md "Receiving").

use super::{frame_len, padded_len, DecodeError, Header, HEADER_LEN, MAGIC, MAX_PAYLOAD, TRAILER_LEN};
use crate::crc32c::Crc32c;

/// One good frame: both CRCs checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The header.
    pub header: Header,
    /// The payload without padding (`header.length` bytes), borrowed from the caller's input
    /// when the frame lay whole inside it, else from the decoder's buffer.
    pub payload: &'a [u8],
}

/// What the decoder found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// A good frame.
    Frame(Frame<'a>),
    /// A candidate frame was refused; the decoder resumes one byte after its magic.
    Error(DecodeError),
}

/// The result of one [`Decoder::feed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feed<'a> {
    /// Bytes of the input taken; feed the rest (`&input[consumed..]`) next.
    pub consumed: usize,
    /// A frame or an error, or `None` when the decoder needs more input.
    pub event: Option<Event<'a>>,
}

/// Resynchronising frame decoder over a byte stream, with `N` bytes of storage for a frame
/// that straddles two inputs. `N` bounds the frames it accepts: [`MAX_FRAME`](super::MAX_FRAME)
/// for a host, [`MAX_CTRL_FRAME`](super::MAX_CTRL_FRAME) for the firmware's FIFO channels.
///
/// [`Decoder::feed`] reports at most one event per call and says how much input it took:
///
/// ```
/// # use ws_common::link::{Decoder, Event, MAX_CTRL_FRAME};
/// # let bytes: &[u8] = &[];
/// let mut dec = Decoder::<MAX_CTRL_FRAME>::new();
/// let mut input = bytes;
/// loop {
///     let r = dec.feed(input);
///     input = &input[r.consumed..];
///     match r.event {
///         Some(Event::Frame(f)) => { /* f.header, f.payload */ }
///         Some(Event::Error(e)) => { /* count, report */ }
///         None => break, // all input taken; a partial frame, if any, is buffered
///     }
/// }
/// ```
///
/// Frames that lie whole inside one input are checked in place and returned borrowing it,
/// without a copy; only a frame cut by the end of an input is copied into the decoder.
/// Every byte fed is eventually either part of a delivered frame or counted in
/// [`Decoder::skipped`] (or still [`Decoder::buffered`]).
#[derive(Debug, Clone)]
pub struct Decoder<const N: usize> {
    buf: [u8; N],
    /// Live bytes are `buf[start..end]`; they always begin with a magic candidate (or a lone
    /// `'W'`) except while being rescanned after a refusal.
    start: usize,
    end: usize,
    skipped: u64,
    max_bulk: usize,
}

impl<const N: usize> Default for Decoder<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// Where the next magic is.
enum Hunt {
    /// No `'W'` at all.
    None,
    /// A `'W'` at this offset is the last byte: it may start a magic.
    Partial(usize),
    /// `"WS"` at this offset.
    At(usize),
}

fn hunt(b: &[u8]) -> Hunt {
    let mut i = 0;
    while let Some(p) = b[i..].iter().position(|&x| x == MAGIC[0]) {
        let at = i + p;
        match b.get(at + 1) {
            None => return Hunt::Partial(at),
            Some(&x) if x == MAGIC[1] => return Hunt::At(at),
            Some(_) => i = at + 1,
        }
    }
    Hunt::None
}

/// Whether the pcrc of a whole candidate frame matches.
fn pcrc_ok(h: &Header, frame: &[u8]) -> bool {
    if h.length == 0 {
        return true;
    }
    let end = HEADER_LEN + padded_len(h.length as usize);
    // pcrc covers header and padded payload: a pcrc over the payload alone would let the
    // next frame's header (20 bytes and their CRC) pass as the payload and pcrc of a frame
    // truncated after its header.
    let mut crc = Crc32c::new();
    crc.update(&frame[..end]);
    let t = &frame[end..end + TRAILER_LEN];
    crc.finish() == u32::from_le_bytes([t[0], t[1], t[2], t[3]])
}

impl<const N: usize> Decoder<N> {
    /// An empty decoder accepting bulk payloads up to [`MAX_PAYLOAD`] (or what fits in `N`).
    pub const fn new() -> Self {
        const { assert!(N >= HEADER_LEN + 2 * TRAILER_LEN, "a decoder must hold at least a header and a word") };
        Self { buf: [0; N], start: 0, end: 0, skipped: 0, max_bulk: MAX_PAYLOAD }
    }

    /// Limits bulk payloads to the negotiated `max_payload` (HELLO); longer frames are
    /// refused with [`DecodeError::TooLong`].
    pub fn set_max_bulk_payload(&mut self, max: usize) {
        self.max_bulk = max.min(MAX_PAYLOAD);
    }

    /// The largest payload that fits in this decoder's storage.
    pub const fn capacity_payload() -> usize {
        (N - HEADER_LEN - TRAILER_LEN) & !3
    }

    /// Bytes skipped since creation: noise, and the bytes of refused candidates.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Bytes held for a frame not yet complete.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Drops any partial frame (after a reconnect). The dropped bytes count as skipped.
    pub fn reset(&mut self) {
        self.skipped += self.buffered() as u64;
        self.start = 0;
        self.end = 0;
    }

    /// Checks a candidate header, including that its frame fits in the storage.
    fn header(&self, b: &[u8]) -> Result<Header, DecodeError> {
        let mut hb = [0u8; HEADER_LEN];
        hb.copy_from_slice(&b[..HEADER_LEN]);
        let h = Header::decode(&hb, self.max_bulk)?;
        if frame_len(h.length as usize) > N {
            let max = Self::capacity_payload() as u32;
            return Err(DecodeError::TooLong { channel: h.channel, length: h.length, max });
        }
        Ok(h)
    }

    fn append(&mut self, bytes: &[u8]) {
        if self.end + bytes.len() > N {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        self.buf[self.end..self.end + bytes.len()].copy_from_slice(bytes);
        self.end += bytes.len();
    }

    /// Takes bytes from `input` until it finds a frame or an error, or runs out of input.
    /// Feed `&[]` to drain events still inside buffered bytes; a `None` event means all
    /// input was taken.
    pub fn feed<'a>(&'a mut self, input: &'a [u8]) -> Feed<'a> {
        let mut used = 0;
        loop {
            if self.start == self.end {
                return self.feed_direct(input, used);
            }
            // Buffered path: a candidate began in an earlier input, or buffered bytes are
            // being rescanned after a refusal.
            match hunt(&self.buf[self.start..self.end]) {
                Hunt::None => {
                    self.skipped += (self.end - self.start) as u64;
                    self.start = self.end;
                    continue;
                }
                Hunt::Partial(p) => {
                    self.skipped += p as u64;
                    self.start += p;
                    if used == input.len() {
                        return Feed { consumed: used, event: None };
                    }
                    self.append(&input[used..used + 1]);
                    used += 1;
                    continue;
                }
                Hunt::At(p) => {
                    self.skipped += p as u64;
                    self.start += p;
                }
            }
            let have = self.end - self.start;
            if have < HEADER_LEN {
                let take = (HEADER_LEN - have).min(input.len() - used);
                self.append(&input[used..used + take]);
                used += take;
                if self.end - self.start < HEADER_LEN {
                    return Feed { consumed: used, event: None };
                }
            }
            let h = match self.header(&self.buf[self.start..self.end]) {
                Ok(h) => h,
                Err(e) => return self.refuse_buffered(used, e),
            };
            let flen = frame_len(h.length as usize);
            let have = self.end - self.start;
            if have < flen {
                let take = (flen - have).min(input.len() - used);
                self.append(&input[used..used + take]);
                used += take;
                if self.end - self.start < flen {
                    return Feed { consumed: used, event: None };
                }
            }
            let s = self.start;
            if !pcrc_ok(&h, &self.buf[s..s + flen]) {
                return self
                    .refuse_buffered(used, DecodeError::BadPayloadCrc { channel: h.channel, seq: h.seq });
            }
            self.start += flen;
            let payload = &self.buf[s + HEADER_LEN..s + HEADER_LEN + h.length as usize];
            return Feed { consumed: used, event: Some(Event::Frame(Frame { header: h, payload })) };
        }
    }

    /// Refuses the buffered candidate: resume one byte after its magic.
    fn refuse_buffered(&mut self, used: usize, e: DecodeError) -> Feed<'static> {
        self.start += 1;
        self.skipped += 1;
        Feed { consumed: used, event: Some(Event::Error(e)) }
    }

    /// The fast path, with nothing buffered: scan `input[used..]` in place.
    fn feed_direct<'a>(&mut self, input: &'a [u8], used: usize) -> Feed<'a> {
        self.start = 0;
        self.end = 0;
        let rest = &input[used..];
        let p = match hunt(rest) {
            Hunt::None => {
                self.skipped += rest.len() as u64;
                return Feed { consumed: input.len(), event: None };
            }
            Hunt::Partial(p) | Hunt::At(p) => p,
        };
        self.skipped += p as u64;
        let cand = &rest[p..];
        if cand.len() < HEADER_LEN {
            self.append(cand);
            return Feed { consumed: input.len(), event: None };
        }
        let refuse = |me: &mut Self, e| {
            me.skipped += 1;
            Feed { consumed: used + p + 1, event: Some(Event::Error(e)) }
        };
        let h = match self.header(cand) {
            Ok(h) => h,
            Err(e) => return refuse(self, e),
        };
        let flen = frame_len(h.length as usize);
        if cand.len() < flen {
            self.append(cand);
            return Feed { consumed: input.len(), event: None };
        }
        if !pcrc_ok(&h, &cand[..flen]) {
            return refuse(self, DecodeError::BadPayloadCrc { channel: h.channel, seq: h.seq });
        }
        let payload = &cand[HEADER_LEN..HEADER_LEN + h.length as usize];
        Feed { consumed: used + p + flen, event: Some(Event::Frame(Frame { header: h, payload })) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{encode_frame, flags, Channel, MAX_CTRL_FRAME, MAX_FRAME};
    use std::vec::Vec;

    /// What a decode produced, owned.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Got {
        Frame(Header, Vec<u8>),
        Error(DecodeError),
    }

    /// Decodes `stream` fed in pieces of `chunk` bytes (0: all at once).
    fn decode<const N: usize>(dec: &mut Decoder<N>, stream: &[u8], chunk: usize) -> Vec<Got> {
        let mut out = Vec::new();
        let pieces: Vec<&[u8]> = if chunk == 0 { std::vec![stream] } else { stream.chunks(chunk).collect() };
        for piece in pieces {
            let mut input = piece;
            loop {
                let r = dec.feed(input);
                input = &input[r.consumed..];
                match r.event {
                    Some(Event::Frame(f)) => out.push(Got::Frame(f.header, f.payload.to_vec())),
                    Some(Event::Error(e)) => out.push(Got::Error(e)),
                    None => {
                        assert!(input.is_empty());
                        break;
                    }
                }
            }
        }
        out
    }

    fn frame(ch: Channel, seq: u32, payload: &[u8]) -> Vec<u8> {
        let h = Header { seq, ..Header::new(ch, flags::DATA) };
        let mut out = std::vec![0u8; frame_len(payload.len())];
        encode_frame(&h, payload, &mut out).unwrap();
        out
    }

    fn header_of(f: &[u8]) -> Header {
        Header::decode(f[..24].try_into().unwrap(), MAX_PAYLOAD).unwrap()
    }

    fn all_chunkings(stream: &[u8], want: &[Got], skipped: u64) {
        for chunk in [0, 1, 2, 3, 5, 7, 24, 25, 64, 1000] {
            let mut d = Decoder::<MAX_FRAME>::new();
            assert_eq!(decode(&mut d, stream, chunk), want, "chunk {chunk}");
            assert_eq!(d.skipped(), skipped, "chunk {chunk}");
        }
    }

    #[test]
    fn back_to_back_frames_with_noise() {
        let a = frame(Channel::Weights, 1, &[7; 5]);
        let b = frame(Channel::Control, 0, &[]);
        let c = frame(Channel::Trace, 9, &[1, 2, 3, 4]);
        let mut s = b"xxWzzW".to_vec();
        s.extend_from_slice(&a);
        s.extend_from_slice(b"W");
        s.extend_from_slice(&b);
        s.extend_from_slice(&c);
        s.extend_from_slice(b"SW");
        let want = std::vec![
            Got::Frame(header_of(&a), std::vec![7; 5]),
            Got::Frame(header_of(&b), std::vec![]),
            Got::Frame(header_of(&c), std::vec![1, 2, 3, 4]),
        ];
        // 6 + 1 + 1 skipped; the trailing 'W' stays buffered.
        for chunk in [0, 1, 3, 24, 100] {
            let mut d = Decoder::<MAX_FRAME>::new();
            assert_eq!(decode(&mut d, &s, chunk), want);
            assert_eq!((d.skipped(), d.buffered()), (8, 1));
        }
    }

    #[test]
    fn corrupted_payload_is_reported_with_channel_and_seq_and_next_frame_survives() {
        let mut a = frame(Channel::Gradients, 41, b"payload!");
        a[26] ^= 0x10;
        let b = frame(Channel::Gradients, 42, b"ok");
        let s = [a.clone(), b.clone()].concat();
        let want = std::vec![
            Got::Error(DecodeError::BadPayloadCrc { channel: Channel::Gradients, seq: 41 }),
            Got::Frame(header_of(&b), b"ok".to_vec()),
        ];
        all_chunkings(&s, &want, a.len() as u64);
    }

    #[test]
    fn truncated_frame_loses_only_itself() {
        let a = frame(Channel::Data, 1, &[0xaa; 100]);
        let b = frame(Channel::Data, 2, &[0xbb; 100]);
        let cut = &a[..70];
        let s = [cut, &b[..]].concat();
        // The cut frame's header claims 100 bytes, so it swallows b's start: its pcrc fails,
        // and the rescan from one byte after its magic finds b.
        let want = std::vec![
            Got::Error(DecodeError::BadPayloadCrc { channel: Channel::Data, seq: 1 }),
            Got::Frame(header_of(&b), std::vec![0xbb; 100]),
        ];
        all_chunkings(&s, &want, 70);
    }

    #[test]
    fn next_header_never_passes_as_the_payload_of_a_frame_cut_after_its_header() {
        // 17 payload bytes pad to 20: exactly the next header's 20 CRC'd bytes, followed by
        // their hcrc. The pcrc covers the header too, so this cannot match (the randomized
        // go-back-N test found the hole when pcrc covered the payload only).
        let a = frame(Channel::Weights, 852, &[9; 17]);
        let b = frame(Channel::Weights, 853, &[1; 12]);
        let s = [&a[..HEADER_LEN], &b[..]].concat();
        let want = std::vec![
            Got::Error(DecodeError::BadPayloadCrc { channel: Channel::Weights, seq: 852 }),
            Got::Frame(header_of(&b), std::vec![1; 12]),
        ];
        all_chunkings(&s, &want, 24);
    }

    #[test]
    fn frame_inside_a_false_header_is_found() {
        // A false magic whose 24 "header" bytes contain the start of a real frame.
        let b = frame(Channel::Log, 3, b"real");
        let mut s = b"WS\x02\x01junkjunk".to_vec();
        s.extend_from_slice(&b);
        let want =
            std::vec![Got::Error(DecodeError::BadHeaderCrc), Got::Frame(header_of(&b), b"real".to_vec())];
        all_chunkings(&s, &want, 12);
    }

    #[test]
    fn header_errors_are_typed() {
        let mut v3 = frame(Channel::Control, 0, &[]);
        v3[2] = 3;
        let c = crate::crc32c::crc32c(&v3[..20]);
        v3[20..24].copy_from_slice(&c.to_le_bytes());
        let ok = frame(Channel::Control, 0, &[5]);
        let s = [v3.clone(), ok.clone()].concat();
        let want =
            std::vec![Got::Error(DecodeError::BadVersion(3)), Got::Frame(header_of(&ok), std::vec![5])];
        all_chunkings(&s, &want, 24);
    }

    #[test]
    fn capacity_and_negotiated_limit() {
        let big = frame(Channel::Weights, 0, &[1; 2000]);
        let mut d = Decoder::<MAX_CTRL_FRAME>::new();
        let got = decode(&mut d, &big, 0);
        assert_eq!(
            got[0],
            Got::Error(DecodeError::TooLong { channel: Channel::Weights, length: 2000, max: 1024 })
        );
        let mut d = Decoder::<MAX_FRAME>::new();
        d.set_max_bulk_payload(1024);
        let got = decode(&mut d, &big, 7);
        assert_eq!(
            got[0],
            Got::Error(DecodeError::TooLong { channel: Channel::Weights, length: 2000, max: 1024 })
        );
        let mut d = Decoder::<MAX_FRAME>::new();
        assert_eq!(decode(&mut d, &big, 7), std::vec![Got::Frame(header_of(&big), std::vec![1; 2000])]);
    }

    #[test]
    fn every_bit_flip_of_a_small_frame_is_caught_and_the_next_frame_kept() {
        let a = frame(Channel::Weights, 5, &[0x5a; 9]);
        let b = frame(Channel::Weights, 6, &[0xa5; 9]);
        for bit in 0..a.len() * 8 {
            let mut bad = a.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            let s = [bad, b.clone()].concat();
            let mut d = Decoder::<MAX_FRAME>::new();
            let got = decode(&mut d, &s, 0);
            assert!(got.iter().all(|g| !matches!(g, Got::Frame(h, _) if h.seq == 5)), "bit {bit}");
            assert_eq!(got.last(), Some(&Got::Frame(header_of(&b), std::vec![0xa5; 9])), "bit {bit}");
        }
    }
}
