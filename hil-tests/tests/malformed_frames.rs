//! Scenario: a thousand malformed control frames do not crash the firmware.
//!
//! Needs: nothing but the host link. Frames are corrupted in every way the decoder must
//! catch: bad CRC, bad version, oversized length, truncation, bit flips in the header, random
//! garbage, and valid frames with unknown opcodes or wrong payload sizes. Afterwards the
//! firmware still answers, its counters saw the damage, and it never entered its panic state.

use std::time::Duration;

use hil_tests::{Needs, Rig};
use rand::{RngExt, SeedableRng};
use ws_common::ctrl::{cmd, encode_frame, MAX_FRAME, MAX_PAYLOAD, PANIC_LEDS, VERSION};

fn malformed(rng: &mut rand::rngs::StdRng, i: usize) -> Vec<u8> {
    let mut buf = vec![0u8; MAX_FRAME];
    let plen = rng.random_range(0..64usize);
    let payload: Vec<u8> = (0..plen).map(|_| rng.random()).collect();
    let opcode = rng.random_range(1u8..=0x7f);
    let n = encode_frame(opcode, i as u16, &payload, &mut buf).expect("fits");
    buf.truncate(n);
    match i % 8 {
        0 => {
            let at = rng.random_range(8..n);
            buf[at] ^= 1 << rng.random_range(0..8); // payload or CRC bit flip
        }
        1 => buf[2] = VERSION.wrapping_add(rng.random_range(1..=255)), // wrong version
        2 => {
            let len = rng.random_range(MAX_PAYLOAD as u16 + 1..=u16::MAX); // oversized length
            buf[6..8].copy_from_slice(&len.to_le_bytes());
        }
        3 => buf.truncate(rng.random_range(2..n)), // truncated, the next frame follows
        4 => buf = (0..rng.random_range(1..200)).map(|_| rng.random()).collect(), // garbage
        5 => {
            // A well-formed frame with an opcode no firmware knows.
            let n = encode_frame(rng.random_range(0x40u8..=0x7f), i as u16, &payload, &mut buf).unwrap();
            buf.truncate(n);
        }
        6 => {
            // A known command with a payload of the wrong size.
            let n = encode_frame(cmd::opcode::PEEK, i as u16, &payload[..plen.min(5)], &mut buf).unwrap();
            buf.truncate(n);
        }
        _ => {
            let at = rng.random_range(2..8);
            buf[at] ^= 1 << rng.random_range(0..8); // header bit flip
        }
    }
    buf
}

#[test]
fn thousand_malformed_frames_then_ping() {
    let Some(mut rig) = Rig::open("malformed_frames", Needs::default()) else {
        return;
    };
    let before = rig.client.stats().expect("stats");
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_0001);
    for i in 0..1000 {
        rig.client.send_raw(&malformed(&mut rng, i)).expect("send");
        if i % 50 == 49 {
            // Keep the board's receive FIFO from being the thing under test; read what it said.
            rig.client.drain(Duration::from_millis(20));
        }
    }
    // A truncated frame may leave the decoder waiting for bytes that never come; a frame's
    // worth of zeros completes (and fails) anything pending, as a host would after an error.
    rig.client.send_raw(&[0u8; MAX_FRAME]).unwrap();
    rig.client.drain(Duration::from_millis(500));

    // The firmware works through the flood at the simulated core's speed: the first answer
    // may take a while on a loaded machine, and a slow answer is not what this checks.
    rig.client.set_timeout(Duration::from_secs(60));
    for nonce in [1u32, 0xffff_ffff, 0x1234_5678] {
        rig.client.ping(nonce).expect("ping after 1000 malformed frames");
    }
    let after = rig.client.stats().expect("stats");
    assert!(after.frames_bad > before.frames_bad + 300, "decoder errors counted: {before:?} -> {after:?}");
    assert!(after.refused > before.refused + 100, "refusals counted: {before:?} -> {after:?}");
    let id = rig.client.identity().expect("identity still answers");
    assert!(id.clk_hz > 0);
    if let Some(sim) = rig.sim() {
        let stats = sim.stats().expect("simulator stats");
        let gpio = stats["gpio_out"].as_u64().unwrap_or(0) as u8;
        assert_ne!(gpio, PANIC_LEDS, "the firmware shows its panic LEDs");
    }
}
