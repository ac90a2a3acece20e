//! Randomised robustness test of the frame decoder: streams of valid frames mixed with
//! noise, bit flips, truncations and false headers. The decoder must never panic, must
//! deliver every intact frame that is not overlapped by damage, and must never deliver a
//! frame that was not sent.

use ws_common::ctrl::{encode_frame, Event, FrameDecoder, MAX_FRAME, MAX_PAYLOAD};

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn random_streams_never_confuse_the_decoder() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut delivered = 0u64;
    let mut sent_intact = 0u64;
    for round in 0..2_000u64 {
        let mut stream = Vec::new();
        // (req_id, payload) of frames left intact, in order.
        let mut intact = Vec::new();
        // (req_id, payload) of every frame sent, damaged or not.
        let mut sent = Vec::new();
        for k in 0..8u16 {
            let len = match rng.below(4) {
                0 => 0,
                1 => rng.below(16) as usize,
                2 => rng.below(MAX_PAYLOAD as u64 + 1) as usize,
                _ => MAX_PAYLOAD,
            };
            let payload: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let mut buf = [0u8; MAX_FRAME];
            let id = (round as u16).wrapping_mul(8).wrapping_add(k);
            let n = encode_frame(0x10, id, &payload, &mut buf).unwrap();
            let mut frame = buf[..n].to_vec();
            sent.push((id, payload.clone()));
            match rng.below(6) {
                0 => {
                    let at = rng.below(n as u64) as usize;
                    frame[at] ^= 1 << rng.below(8);
                }
                1 => frame.truncate(rng.below(n as u64) as usize),
                _ => intact.push((id, payload)),
            }
            stream.extend_from_slice(&frame);
            // Noise between frames, sometimes shaped like a header.
            match rng.below(4) {
                0 => stream.extend((0..rng.below(40)).map(|_| rng.next() as u8)),
                1 => stream.extend_from_slice(b"WS"),
                _ => {}
            }
        }
        sent_intact += intact.len() as u64;
        let mut d = FrameDecoder::new();
        let mut got = Vec::new();
        for &b in &stream {
            d.push(b);
            loop {
                match d.poll() {
                    Event::Pending => break,
                    Event::Frame(f) => got.push((f.req_id, f.payload.to_vec())),
                    Event::Error(_) => {}
                }
            }
        }
        // Everything delivered is byte-for-byte a frame that was sent, in order. (A damaged
        // frame can still arrive whole by coincidence, e.g. a truncated CRC byte replaced by
        // an identical byte that follows; its content is then exactly what was sent.)
        let mut it = sent.iter();
        for g in &got {
            assert!(
                it.any(|s| s == g),
                "round {round}: delivered frame id {} was never sent with that content",
                g.0
            );
        }
        delivered += got.len() as u64;
    }
    // Damage can swallow a following frame (a truncated header's length covers it), but the
    // decoder's rescan must recover the vast majority.
    assert!(delivered * 100 >= sent_intact * 90, "delivered {delivered} of {sent_intact} intact frames");
}
