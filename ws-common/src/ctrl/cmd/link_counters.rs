//! `LinkCounters`: read a run of the link engine's counters (docs/link-engine.md "Counter
//! index"). Link protocol v2 only: the firmware's link server answers it from the engine it
//! drives; the v1 server does not know it.

use crate::ctrl::{get_u32, Command, Status, Writer, MAX_PAYLOAD};

/// Most counters one request returns: a response payload minus its status byte, in words.
pub const MAX_LINK_COUNTERS: usize = (MAX_PAYLOAD - 1) / 4;

/// Reads counters `first .. first + count` (wrapping u32 each; 0 for an index with none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkCounters {
    /// First counter index.
    pub first: u8,
    /// How many, 1 ..= [`MAX_LINK_COUNTERS`] and not past index 255.
    pub count: u8,
}

/// The counters, little-endian u32 each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterWords<'a>(pub &'a [u8]);

impl CounterWords<'_> {
    /// Counter `i` of the run.
    pub fn get(&self, i: usize) -> Option<u32> {
        get_u32(self.0, 4 * i).ok()
    }
    /// How many counters the run holds.
    pub fn len(&self) -> usize {
        self.0.len() / 4
    }
    /// True for an empty run.
    pub fn is_empty(&self) -> bool {
        self.0.len() < 4
    }
}

impl<'a> Command<'a> for LinkCounters {
    const OPCODE: u8 = super::opcode::LINK_COUNTERS;
    type Response = CounterWords<'a>;

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.bytes(&[self.first, self.count])?;
        Ok(w.len())
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        let [first, count] = p else { return Err(Status::BadLength) };
        if *count == 0 || *count as usize > MAX_LINK_COUNTERS || *first as usize + *count as usize > 256 {
            return Err(Status::BadLength);
        }
        Ok(Self { first: *first, count: *count })
    }
    fn encode_response(resp: &CounterWords<'a>, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.bytes(resp.0)?;
        Ok(w.len())
    }
    fn decode_response(d: &'a [u8]) -> Result<CounterWords<'a>, Status> {
        if !d.len().is_multiple_of(4) {
            return Err(Status::BadLength);
        }
        Ok(CounterWords(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let mut b = [0u8; 8];
        let n = LinkCounters { first: 0x10, count: 8 }.encode(&mut b).unwrap();
        assert_eq!(LinkCounters::decode(&b[..n]), Ok(LinkCounters { first: 0x10, count: 8 }));
        assert_eq!(LinkCounters::decode(&[0, 0]), Err(Status::BadLength));
        assert_eq!(LinkCounters::decode(&[250, 10]), Err(Status::BadLength));
        assert_eq!(LinkCounters::decode(&[1]), Err(Status::BadLength));
        let w = LinkCounters::decode_response(&[1, 0, 0, 0, 2, 0, 0, 0]).unwrap();
        assert_eq!((w.len(), w.get(1), w.get(2)), (2, Some(2), None));
        assert!(LinkCounters::decode_response(&[1, 2, 3]).is_err());
    }
}
