//! Link engine throughput for `cargo xtask bench`: the RX half (`ws_link_rx`) taking back to
//! back bulk DATA frames at full rate, as payload bytes per cycle against the PHY's 4 bytes
//! per cycle (docs/link.md; the goal is ≥ 0.95 of line rate at 4 KiB frames).

use crate::dut::{Dut, DutError};
use crate::link::{rx_spec, RxParams};
use ws_common::link::{encode_frame, flags, frame_len, Channel, Header};

/// One RX line-rate measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct RxLineRate {
    /// Payload bytes per frame.
    pub payload: usize,
    /// Frames sent.
    pub frames: usize,
    /// Cycles from the first word offered to the last frame committed.
    pub cycles: u64,
    /// Payload bytes committed to the DMA window.
    pub committed: u64,
    /// `committed / cycles`.
    pub bytes_per_cycle: f64,
    /// `bytes_per_cycle / 4` (the PHY word).
    pub of_line_rate: f64,
    /// The best a 4-byte-per-cycle link can do with this framing: payload / frame bytes.
    pub framing_bound: f64,
}

/// Streams `frames` DATA frames of `payload` bytes on channel 2 into a 64 KiB window, PHY
/// always valid, consumer releasing every committed byte at once.
pub fn rx_line_rate(payload: usize, frames: usize) -> Result<RxLineRate, DutError> {
    let p = RxParams::new();
    let mut dut = Dut::build(rx_spec(&p))?;
    let port = |d: &Dut, n: &str| d.port(n);
    let (valid, ready, data) =
        (port(&dut, "s_phy_valid"), port(&dut, "s_phy_ready"), port(&dut, "s_phy_data"));
    let (win_en, win_base, win_len) = (port(&dut, "win_en"), port(&dut, "win_base"), port(&dut, "win_len"));
    let (released, committed) = (port(&dut, "released"), port(&dut, "rx_committed"));
    dut.set(port(&dut, "cfg_max_payload"), payload as u64);
    dut.set(port(&dut, "fw_rx_ready"), 1);
    dut.set(port(&dut, "ack_sent"), 0);
    dut.set(port(&dut, "ch_reset"), 0);
    dut.set(port(&dut, "cnt_clear"), 0);
    dut.set_words(win_base, &[0, 0, 0]);
    dut.set_words(win_len, &[p.dma_bytes, 0, 0]);
    dut.set_words(released, &[0, 0, 0]);
    dut.set(win_en, 0);
    dut.reset(4);
    dut.set(win_en, 0b001);
    dut.ticks(4);

    let mut words = Vec::new();
    let body = vec![0xa5u8; payload];
    let mut buf = vec![0u8; frame_len(payload)];
    for seq in 0..frames as u32 {
        let h = Header { seq, length: payload as u32, ..Header::new(Channel::Weights, flags::DATA) };
        let n = encode_frame(&h, &body, &mut buf).unwrap_or(0);
        words.extend(buf[..n].chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])));
    }
    let total = (payload * frames) as u64;
    let start = dut.cycle();
    let mut i = 0;
    let limit = start + 4 * words.len() as u64 + 10_000;
    loop {
        let c = dut.get_words(committed)[0];
        dut.set_words(released, &[c, 0, 0]);
        if u64::from(c) >= total || dut.cycle() > limit {
            break;
        }
        if i < words.len() {
            dut.set(valid, 1);
            dut.set(data, u64::from(words[i]));
            dut.eval();
            if dut.get_bool(ready) {
                i += 1;
            }
        } else {
            dut.set(valid, 0);
        }
        dut.tick();
    }
    let cycles = dut.cycle() - start;
    let committed = u64::from(dut.get_words(committed)[0]);
    let bytes_per_cycle = committed as f64 / cycles as f64;
    Ok(RxLineRate {
        payload,
        frames,
        cycles,
        committed,
        bytes_per_cycle,
        of_line_rate: bytes_per_cycle / 4.0,
        framing_bound: payload as f64 / frame_len(payload) as f64,
    })
}
