//! The log ring: the defmt byte stream kept for the link's log channel (channel 5,
//! docs/link.md "Channels"), beside the UART. The main loop sends it to the host in channel 5
//! frames once a host has said HELLO; until then it holds the first lines since boot.
//!
//! It never blocks the logger and never corrupts a line: a frame that starts with less than
//! [`RESERVE`] bytes free is skipped whole (and counted), and a frame that fills the ring
//! midway is cut and closed with a zero byte, which the host's rzcobs decoder drops as one
//! malformed frame. Host-testable: no registers.

/// Bytes the ring holds.
pub const CAPACITY: usize = 4096;
/// Free bytes a frame needs to start.
pub const RESERVE: usize = 256;

/// A byte ring of whole defmt frames.
pub struct LogRing {
    buf: [u8; CAPACITY],
    head: usize,
    len: usize,
    skip: bool,
    cut: bool,
    /// Frames skipped or cut for want of room.
    pub dropped: u32,
}

impl core::fmt::Debug for LogRing {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LogRing")
            .field("len", &self.len)
            .field("dropped", &self.dropped)
            .finish_non_exhaustive()
    }
}

impl Default for LogRing {
    fn default() -> Self {
        Self::new()
    }
}

impl LogRing {
    /// An empty ring.
    pub const fn new() -> Self {
        Self { buf: [0; CAPACITY], head: 0, len: 0, skip: false, cut: false, dropped: 0 }
    }

    /// Bytes waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A frame starts.
    pub fn begin(&mut self) {
        self.cut = false;
        self.skip = CAPACITY - self.len < RESERVE;
        if self.skip {
            self.dropped = self.dropped.wrapping_add(1);
        }
    }

    /// Bytes of the current frame.
    pub fn put(&mut self, bytes: &[u8]) {
        if self.skip || self.cut {
            return;
        }
        for &b in bytes {
            // One byte stays free for the zero that closes a cut frame.
            if self.len + 1 >= CAPACITY {
                self.cut = true;
                self.dropped = self.dropped.wrapping_add(1);
                return;
            }
            self.push(b);
        }
    }

    /// The frame ends (its own bytes end with the rzcobs zero; a cut one gets one here).
    pub fn end(&mut self) {
        if self.cut {
            self.push(0);
        }
        self.skip = false;
        self.cut = false;
    }

    fn push(&mut self, b: u8) {
        self.buf[(self.head + self.len) % CAPACITY] = b;
        self.len += 1;
    }

    /// Moves up to `out.len()` bytes out, oldest first; returns how many.
    pub fn take(&mut self, out: &mut [u8]) -> usize {
        let n = out.len().min(self.len);
        for o in out[..n].iter_mut() {
            *o = self.buf[self.head];
            self.head = (self.head + 1) % CAPACITY;
        }
        self.len -= n;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn frame(r: &mut LogRing, body: &[u8]) {
        r.begin();
        r.put(body);
        r.put(&[0]);
        r.end();
    }

    #[test]
    fn frames_come_out_in_order_and_whole_or_not_at_all() {
        let mut r = LogRing::new();
        frame(&mut r, b"one");
        frame(&mut r, b"two");
        let mut out = [0u8; 16];
        let n = r.take(&mut out);
        assert_eq!(&out[..n], b"one\0two\0");
        assert!(r.is_empty());

        // Fill to just under the reserve: the next frame is skipped whole.
        let big = [7u8; CAPACITY - RESERVE];
        frame(&mut r, &big[..CAPACITY - RESERVE - 1]);
        assert_eq!(r.len(), CAPACITY - RESERVE);
        // Room is exactly RESERVE: "three" goes in; then there is less: "four" is skipped.
        frame(&mut r, b"three");
        assert_eq!((r.len(), r.dropped), (CAPACITY - RESERVE + 6, 0));
        frame(&mut r, b"four");
        assert_eq!((r.len(), r.dropped), (CAPACITY - RESERVE + 6, 1));

        // A frame that fills the ring midway is cut and closed with a zero.
        let mut r = LogRing::new();
        let mut s = Vec::new();
        frame(&mut r, &[1u8; CAPACITY - RESERVE - 10]);
        r.begin();
        r.put(&[2u8; 400]);
        r.end();
        assert_eq!(r.len(), CAPACITY);
        let mut out = [0u8; CAPACITY];
        let n = r.take(&mut out);
        s.extend_from_slice(&out[..n]);
        assert_eq!(*s.last().unwrap(), 0, "a cut frame still ends in a zero");
        assert_eq!(r.dropped, 1);
        // Wrap-around keeps the order.
        frame(&mut r, b"after");
        let n = r.take(&mut out);
        assert_eq!(&out[..n], b"after\0");
    }
}
