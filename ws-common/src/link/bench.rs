//! The host-side link codec bench (issue 4, "Bench rows"): encode + CRC and decode + CRC
//! check on one core, as GB/s and as a ratio to `memcpy` of the same buffer in the same run,
//! and the frame overhead at 256 B, 4 KiB and 64 KiB. `cargo xtask bench` calls
//! [`run`] and prints the table; needs the `std` feature.

use super::{encode_frame, flags, frame_len, overhead, Channel, Decoder, Event, Header, MAX_FRAME};
use std::boxed::Box;
use std::hint::black_box;
use std::time::Instant;
use std::vec;
use std::vec::Vec;

/// Payload sizes the overhead row reports.
pub const OVERHEAD_SIZES: [usize; 3] = [256, 4096, 65_536];

/// What [`run`] measured. Throughputs are payload bytes per second / 1e9, best of the
/// repeats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkBench {
    /// Bytes of payload per pass.
    pub buffer_bytes: usize,
    /// Payload bytes per frame.
    pub frame_payload: usize,
    /// Whether the CRC ran on the CPU's CRC instruction (SSE4.2) or the slicing-by-8 tables.
    pub crc_accelerated: bool,
    /// `copy_from_slice` of the buffer into another: the baseline of the ratios.
    pub memcpy_gbps: f64,
    /// The same copy done frame by frame at the wire's frame stride (what any copying
    /// encoder must do; a single large memcpy can use non-temporal stores), for context.
    pub memcpy_framed_gbps: f64,
    /// CRC-32C alone over the buffer.
    pub crc_gbps: f64,
    /// CRC-32C alone over one frame's payload, again and again (L1-resident).
    pub crc_hot_gbps: f64,
    /// [`encode_frame`] of every frame into a wire buffer (copy + pad + both CRCs).
    pub encode_gbps: f64,
    /// [`Decoder::feed`] over the wire buffer: find, check both CRCs, deliver in place.
    pub decode_gbps: f64,
    /// The same, copying every payload out to a destination buffer.
    pub decode_copy_gbps: f64,
    /// `encode_gbps / memcpy_gbps` (goal ≥ 0.5).
    pub encode_ratio: f64,
    /// `decode_gbps / memcpy_gbps` (goal ≥ 0.5).
    pub decode_ratio: f64,
    /// `decode_copy_gbps / memcpy_gbps`.
    pub decode_copy_ratio: f64,
    /// (payload bytes, non-payload wire bytes as a fraction of the payload) for
    /// [`OVERHEAD_SIZES`].
    pub overhead: [(usize, f64); 3],
}

/// Best-of-`repeats` seconds of `f`.
fn best(repeats: u32, mut f: impl FnMut()) -> f64 {
    (0..repeats.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Measures on the calling thread: `buffer_bytes` of payload (64 MiB in `cargo xtask
/// bench`) in frames of `frame_payload` bytes (4 KiB), best of `repeats` passes.
pub fn run(buffer_bytes: usize, frame_payload: usize, repeats: u32) -> LinkBench {
    let frame_payload = frame_payload.clamp(1, super::MAX_PAYLOAD);
    let frames = buffer_bytes.div_ceil(frame_payload);
    let buffer_bytes = frames * frame_payload;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let src: Vec<u8> = (0..buffer_bytes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut dst = vec![0u8; buffer_bytes];
    let mut wire = vec![0u8; frames * frame_len(frame_payload)];
    let gb = buffer_bytes as f64 / 1e9;

    // Warm every buffer (page faults are not what is measured).
    dst.copy_from_slice(&src);
    wire.fill(1);

    let memcpy = best(repeats, || {
        dst.copy_from_slice(black_box(&src));
        black_box(&dst);
    });
    let stride = frame_len(frame_payload);
    let memcpy_framed = best(repeats, || {
        for (i, p) in src.chunks(frame_payload).enumerate() {
            let at = i * stride + super::HEADER_LEN;
            wire[at..at + p.len()].copy_from_slice(black_box(p));
        }
        black_box(&wire);
    });
    let crc = best(repeats, || {
        black_box(crate::crc32c::crc32c(black_box(&src)));
    });
    let hot = &src[..frame_payload.min(src.len())];
    let hot_rounds = (buffer_bytes / hot.len().max(1)).max(1);
    let crc_hot = best(repeats, || {
        for _ in 0..hot_rounds {
            black_box(crate::crc32c::crc32c(black_box(hot)));
        }
    });
    let mut wire_len = 0;
    let encode = best(repeats, || {
        let mut at = 0;
        for (i, p) in src.chunks(frame_payload).enumerate() {
            let h = Header { seq: i as u32, ..Header::new(Channel::Weights, flags::DATA) };
            at += encode_frame(&h, p, &mut wire[at..]).unwrap_or(0);
        }
        wire_len = at;
    });
    let wire = &wire[..wire_len];
    let mut dec: Box<Decoder<MAX_FRAME>> = Box::default();
    let mut decode_pass = |copy: bool, dst: &mut [u8]| -> usize {
        let mut input = wire;
        let mut at = 0;
        loop {
            let r = dec.feed(input);
            input = &input[r.consumed..];
            match r.event {
                Some(Event::Frame(f)) => {
                    if copy {
                        dst[at..at + f.payload.len()].copy_from_slice(f.payload);
                    }
                    at += f.payload.len();
                }
                Some(Event::Error(_)) => {}
                None => break,
            }
        }
        at
    };
    let mut delivered = 0;
    let decode = best(repeats, || delivered = decode_pass(false, &mut dst));
    assert_eq!(delivered, buffer_bytes, "decode lost frames");
    dst.fill(0);
    let decode_copy = best(repeats, || delivered = decode_pass(true, &mut dst));
    assert!(dst == src, "decode delivered other bytes");

    let memcpy_gbps = gb / memcpy;
    let encode_gbps = gb / encode;
    let decode_gbps = gb / decode;
    let decode_copy_gbps = gb / decode_copy;
    LinkBench {
        buffer_bytes,
        frame_payload,
        crc_accelerated: crate::crc32c::accelerated(),
        memcpy_gbps,
        memcpy_framed_gbps: gb / memcpy_framed,
        crc_gbps: gb / crc,
        crc_hot_gbps: (hot_rounds * hot.len()) as f64 / 1e9 / crc_hot,
        encode_gbps,
        decode_gbps,
        decode_copy_gbps,
        encode_ratio: encode_gbps / memcpy_gbps,
        decode_ratio: decode_gbps / memcpy_gbps,
        decode_copy_ratio: decode_copy_gbps / memcpy_gbps,
        overhead: OVERHEAD_SIZES.map(|n| (n, overhead(n))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_run_is_consistent() {
        let b = run(1 << 20, 4096, 1);
        assert_eq!(b.buffer_bytes, 1 << 20);
        assert!(b.memcpy_gbps > 0.0 && b.encode_gbps > 0.0 && b.decode_gbps > 0.0);
        assert_eq!(b.overhead[0].0, 256);
        assert!((b.overhead[1].1 - 28.0 / 4096.0).abs() < 1e-12);
    }

    /// `cargo test --release -p ws-common --features std bench_print -- --ignored --nocapture`
    #[test]
    #[ignore = "a bench, not a test: run it by name"]
    fn bench_print() {
        for payload in [256usize, 4096, 65_536] {
            std::println!("{:?}", run(64 << 20, payload, 5));
        }
    }
}
