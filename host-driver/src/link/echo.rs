//! The bulk echo: every bulk channel at once, both directions, against a board whose link
//! engine loops its receive windows back into its transmit slots (the firmware's echo mode:
//! weights 2 → 2, gradients 3 → 3, data 4 → trace 6). The host sends a position-addressed
//! pseudo-random stream on 2, 3, 4, reads 2, 3, 6, and compares SHA-256 of both ends per
//! channel. `wsctl link echo`, the hil tests and the bench run it.

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use ws_common::ctrl::cmd::{BulkMode, LinkMode};
use ws_common::ctrl::Status;
use ws_common::link::Channel;

use super::Link;
use crate::error::{Error, ProtocolError};

/// The channels the host sends on, by pair.
pub const SENDS: [Channel; 3] = [Channel::Weights, Channel::Gradients, Channel::Data];
/// The channels the echo comes back on, by pair.
pub const ECHOES: [Channel; 3] = [Channel::Weights, Channel::Gradients, Channel::Trace];

/// Word `i` of stream `seed` (splitmix64 of both): any part of a stream can be made again
/// from its offset.
pub fn stream_word(seed: u64, i: u64) -> u32 {
    let mut z = (seed << 40 ^ i).wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u32
}

/// Bytes `[from, from + len)` of stream `seed`; both multiples of 4.
pub fn stream_bytes(seed: u64, from: usize, len: usize) -> Vec<u8> {
    (from / 4..(from + len) / 4).flat_map(|i| stream_word(seed, i as u64).to_le_bytes()).collect()
}

/// What one echo run moved.
#[derive(Debug, Clone, PartialEq)]
pub struct EchoReport {
    /// Bytes each pair moved each way.
    pub per_channel: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// SHA-256 of each pair's stream (equal at both ends, or the run fails).
    pub sha256: [[u8; 32]; 3],
}

impl EchoReport {
    /// Payload bytes each way, all channels.
    pub fn bytes_each_way(&self) -> usize {
        3 * self.per_channel
    }
}

/// Runs the echo: `per_channel` bytes (rounded down to words) on each pair, streams
/// `seed`, `seed + 1`, `seed + 2`. `progress` gets the bytes echoed so far every half second.
/// Switches the board to its echo bulk mode first (a board whose streams moved on in
/// MemoryX mode refuses that with `WrongMode`: connect afresh). Fails if an echo differs (SHA-256), runs long, or nothing moves for `stall`.
pub fn run(
    link: &mut Link,
    per_channel: usize,
    seed: u64,
    stall: Duration,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<EchoReport, Error> {
    // The board echoes only in its echo bulk mode (its boot mode; `wsctl optim` leaves it in
    // MemoryX mode). A firmware that predates bulk modes only echoes, and says so.
    match link.request(&LinkMode { mode: BulkMode::Echo }, Duration::from_secs(30), 1) {
        Ok(_) => {}
        Err(e) if e.refusal() == Some(Status::UnknownOpcode) => {}
        Err(e) => return Err(e),
    }
    let per = per_channel & !3;
    let mut sent = [0usize; 3];
    let mut got = [0usize; 3];
    let mut pending: [Vec<u8>; 3] = Default::default();
    let mut sent_sha: [Sha256; 3] = Default::default();
    let mut got_sha: [Sha256; 3] = Default::default();
    let mut buf = vec![0u8; 256 << 10];
    let start = Instant::now();
    // A stall is measured in board time too: a slow simulator is not a stuck one.
    let mut last_move = crate::board_time::Deadline::new(stall, link.board_clock());
    let (mut last_total, mut last_print) = (0usize, start);
    loop {
        for i in 0..3 {
            if pending[i].is_empty() && sent[i] < per {
                let n = (per - sent[i]).min(64 << 10);
                pending[i] = stream_bytes(seed + i as u64, sent[i], n);
            }
            if !pending[i].is_empty() {
                let n = link.endpoint().write(SENDS[i], &pending[i]).map_err(ProtocolError::Stream)?;
                sent_sha[i].update(&pending[i][..n]);
                sent[i] += n;
                pending[i].drain(..n);
            }
        }
        link.pump(Duration::from_millis(1))?;
        for i in 0..3 {
            loop {
                let n = link.endpoint().read(ECHOES[i], &mut buf).map_err(ProtocolError::Stream)?;
                if n == 0 {
                    break;
                }
                got_sha[i].update(&buf[..n]);
                got[i] += n;
            }
            if got[i] > per {
                return Err(ProtocolError::Echo(format!(
                    "{:?} echoed {} B of {per} sent",
                    ECHOES[i], got[i]
                ))
                .into());
            }
        }
        let total: usize = got.iter().sum();
        if total == 3 * per {
            break;
        }
        if total > last_total {
            last_total = total;
            last_move.restart();
        } else if last_move.expired() {
            return Err(ProtocolError::Echo(format!(
                "no echoed byte for {} at {total} of {} B (sent {sent:?}, echoed {got:?}); endpoint {:?}",
                last_move.describe(),
                3 * per,
                link.endpoint().stats()
            ))
            .into());
        }
        let now = Instant::now();
        if now.duration_since(last_print) >= Duration::from_millis(500) {
            last_print = now;
            progress(total, 3 * per);
        }
    }
    progress(3 * per, 3 * per);
    let mut sha256 = [[0u8; 32]; 3];
    for i in 0..3 {
        let (a, b) =
            (std::mem::take(&mut sent_sha[i]).finalize(), std::mem::take(&mut got_sha[i]).finalize());
        if a != b {
            return Err(ProtocolError::Echo(format!(
                "{:?} -> {:?}: SHA-256 of the echo differs from what was sent",
                SENDS[i], ECHOES[i]
            ))
            .into());
        }
        sha256[i].copy_from_slice(&a);
    }
    Ok(EchoReport { per_channel: per, elapsed: start.elapsed(), sha256 })
}
