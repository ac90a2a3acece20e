//! The per-connection buffers of the server: bounded output queues, the log history every log
//! client replays, and the line splitter of the control port. Plain data structures, so the
//! bounds that keep a misbehaving client from growing the simulator's memory are unit-tested
//! without sockets.

use std::collections::VecDeque;
use std::io::{self, Write};

/// Bytes waiting to be written to one non-blocking socket.
#[derive(Debug, Default)]
pub(crate) struct OutBuf {
    buf: Vec<u8>,
    off: usize,
}

impl OutBuf {
    /// Bytes not yet written.
    pub(crate) fn pending(&self) -> usize {
        self.buf.len() - self.off
    }

    /// Queues `data`.
    pub(crate) fn push(&mut self, data: &[u8]) {
        self.compact();
        self.buf.extend_from_slice(data);
    }

    /// The queue itself, so [`crate::sim::Soc::take_tx`] can append in place.
    pub(crate) fn vec_for_append(&mut self) -> &mut Vec<u8> {
        self.compact();
        &mut self.buf
    }

    /// Forgets everything queued; returns how many bytes that was.
    pub(crate) fn clear(&mut self) -> usize {
        let n = self.pending();
        self.buf.clear();
        self.off = 0;
        n
    }

    /// Writes as much as the socket takes without blocking. An error means the peer is gone.
    pub(crate) fn write_to(&mut self, w: &mut impl Write) -> io::Result<()> {
        while self.off < self.buf.len() {
            match w.write(&self.buf[self.off..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.off += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.off == self.buf.len() {
            self.buf.clear();
            self.off = 0;
        }
        Ok(())
    }

    // Drop the written prefix only once it dominates, so a slow reader does not make every
    // push copy the whole queue.
    fn compact(&mut self) {
        if self.off > 0 && self.off >= self.buf.len() / 2 {
            self.buf.drain(..self.off);
            self.off = 0;
        }
    }
}

/// The UART log since the simulator started, bounded: once it exceeds its capacity the oldest
/// bytes are dropped. Positions are absolute byte offsets in the log stream, so each client
/// only keeps the position of the next byte it needs.
#[derive(Debug)]
pub(crate) struct LogHistory {
    buf: VecDeque<u8>,
    start: u64,
    cap: usize,
}

impl LogHistory {
    pub(crate) fn new(cap: usize) -> Self {
        LogHistory { buf: VecDeque::new(), start: 0, cap: cap.max(1) }
    }

    /// Position of the oldest byte still held.
    pub(crate) fn start(&self) -> u64 {
        self.start
    }

    /// Position after the newest byte.
    pub(crate) fn end(&self) -> u64 {
        self.start + self.buf.len() as u64
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        self.buf.extend(data);
        let over = self.buf.len().saturating_sub(self.cap);
        if over > 0 {
            self.buf.drain(..over);
            self.start += over as u64;
        }
    }

    /// The longest contiguous run of bytes from `pos` (moved up to [`Self::start`] if those
    /// bytes were dropped), and the position it starts at.
    pub(crate) fn from(&self, pos: u64) -> (&[u8], u64) {
        let pos = pos.clamp(self.start, self.end());
        let skip = (pos - self.start) as usize;
        let (a, b) = self.buf.as_slices();
        if skip < a.len() {
            (&a[skip..], pos)
        } else {
            (&b[skip - a.len()..], pos)
        }
    }
}

/// Splits a control connection's bytes into request lines, refusing lines longer than a
/// bound instead of buffering them.
#[derive(Debug, Default)]
pub(crate) struct LineReader {
    buf: Vec<u8>,
    skipping: bool,
}

/// One item from [`LineReader::feed`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A complete request, trimmed.
    Request(String),
    /// A line exceeded the bound; the rest of it is discarded.
    TooLong,
}

impl LineReader {
    /// Longest request line accepted.
    pub(crate) const MAX: usize = 4096;

    pub(crate) fn feed(&mut self, data: &[u8], out: &mut Vec<Line>) {
        for chunk in data.split_inclusive(|&b| b == b'\n') {
            let complete = chunk.last() == Some(&b'\n');
            if self.skipping {
                self.skipping = !complete;
                continue;
            }
            self.buf.extend_from_slice(chunk);
            if complete && self.buf.len() > Self::MAX + 1 {
                self.buf.clear();
                out.push(Line::TooLong);
            } else if complete {
                let text = String::from_utf8_lossy(&self.buf).trim().to_string();
                self.buf.clear();
                if !text.is_empty() {
                    out.push(Line::Request(text));
                }
            } else if self.buf.len() > Self::MAX {
                self.buf.clear();
                self.skipping = true;
                out.push(Line::TooLong);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that takes at most `room` bytes, then would block.
    struct Slow {
        got: Vec<u8>,
        room: usize,
    }

    impl Write for Slow {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = b.len().min(self.room);
            self.room -= n;
            self.got.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn out_buf_keeps_what_a_slow_reader_did_not_take() {
        let mut o = OutBuf::default();
        o.push(b"hello world");
        let mut w = Slow { got: Vec::new(), room: 5 };
        o.write_to(&mut w).unwrap();
        assert_eq!(o.pending(), 6);
        o.push(b"!");
        w.room = 100;
        o.write_to(&mut w).unwrap();
        assert_eq!(w.got, b"hello world!");
        assert_eq!(o.pending(), 0);
        o.push(b"x");
        assert_eq!(o.clear(), 1);
    }

    #[test]
    fn log_history_is_bounded_and_clients_skip_dropped_bytes() {
        let mut h = LogHistory::new(8);
        h.push(b"abcdef");
        assert_eq!(h.from(0), (&b"abcdef"[..], 0));
        h.push(b"ghij");
        assert_eq!((h.start(), h.end()), (2, 10));
        // A client at 0 lost "ab" and resumes at the oldest byte held.
        let mut got = Vec::new();
        let mut pos = 0;
        while pos < h.end() {
            let (s, p) = h.from(pos);
            got.extend_from_slice(s);
            pos = p + s.len() as u64;
        }
        assert_eq!(got, b"cdefghij");
        assert!(h.from(10).0.is_empty());
        assert!(h.from(99).0.is_empty());
    }

    #[test]
    fn line_reader_splits_trims_and_refuses_long_lines() {
        let mut r = LineReader::default();
        let mut out = Vec::new();
        r.feed(b"sta", &mut out);
        r.feed(b"ts\r\n\n  pause \nres", &mut out);
        assert_eq!(out, vec![Line::Request("stats".into()), Line::Request("pause".into())]);
        out.clear();
        r.feed(b"ume\n", &mut out);
        assert_eq!(out, vec![Line::Request("resume".into())]);
        out.clear();
        r.feed(&vec![b'x'; LineReader::MAX + 1], &mut out);
        r.feed(&vec![b'x'; 10_000], &mut out);
        r.feed(b"tail\nquit\n", &mut out);
        assert_eq!(out, vec![Line::TooLong, Line::Request("quit".into())]);
        out.clear();
        let mut long = vec![b'y'; LineReader::MAX + 10];
        long.extend_from_slice(b"\nstats\n");
        r.feed(&long, &mut out);
        assert_eq!(out, vec![Line::TooLong, Line::Request("stats".into())]);
    }
}
