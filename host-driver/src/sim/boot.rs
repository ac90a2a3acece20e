//! Waiting for the simulated board's firmware to boot (docs/host.md "Waiting for the
//! board").
//!
//! `ws-sim` prints READY as soon as its ports listen; the boot ROM then checks the image and
//! copies it, and the firmware sets up its blocks, about 1.5 M cycles in all: seconds of wall
//! time on a loaded machine. A board is up when its firmware answers a ping on the host link.
//! The wait is bounded in simulated cycles ([`BOOT_CYCLES`], read from the control port), so
//! a slow machine is waited for and a board that never boots is reported, with what its log
//! said last.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::board_time::BoardClock;
use crate::client::Client;
use crate::error::{Result, SimError};
use crate::logs::{DefmtLog, LogStream};
use crate::sim::SimCtrl;
use crate::transport::SimTransport;

/// Simulated cycles the firmware may take from READY to its first answer: 1 s of the
/// simulated board's 50 MHz, twenty times what today's firmware needs.
pub const BOOT_CYCLES: u64 = 50_000_000;

/// Environment variable overriding [`BOOT_CYCLES`].
pub const BOOT_CYCLES_ENV: &str = "WS_SIM_BOOT_CYCLES";

/// The boot limit: [`BOOT_CYCLES_ENV`] or [`BOOT_CYCLES`].
pub fn boot_cycles() -> u64 {
    std::env::var(BOOT_CYCLES_ENV).ok().and_then(|v| crate::parse::parse_u64(&v).ok()).unwrap_or(BOOT_CYCLES)
}

/// Where the simulator listens, for the boot wait.
#[derive(Debug, Clone, Copy)]
pub struct BootPorts {
    /// The host link (protocol v1: the firmware's and the boot ROM's pings).
    pub link: SocketAddr,
    /// The control port (the cycle counter).
    pub ctrl: SocketAddr,
    /// The log port (the defmt log, for the error).
    pub log: SocketAddr,
}

/// Pings the board until it answers; `progress` is told the cycles simulated so far.
/// Returns the cycle count at the first answer.
pub fn wait_for_boot(ports: BootPorts, elf: &Path, limit: u64, progress: &mut dyn FnMut(u64)) -> Result<u64> {
    let clock = BoardClock::follow(ports.ctrl)?;
    let start = clock.cycles();
    let transport = SimTransport::connect(ports.link)?.with_clock(Some(clock.clone()));
    let mut client = Client::new(Box::new(transport));
    // A short wall try; the board clock stretches it on a slow machine.
    client.set_timeout(Duration::from_millis(200));
    loop {
        match client.ping(0xb007_0001) {
            Ok(_) => return Ok(clock.cycles()),
            Err(e) if e.is_timeout() => {}
            Err(e) => return Err(e),
        }
        let ran = clock.cycles().saturating_sub(start);
        progress(ran);
        if ran >= limit || clock.stalled() {
            let stats = SimCtrl::connect(ports.ctrl).and_then(|mut c| c.stats()).ok();
            return Err(SimError::NoBoot {
                cycles: ran,
                limit,
                stalled: clock.stalled(),
                leds: stats.map_or(0, |s| s.gpio_out),
                last_log: last_log_lines(ports.log, elf, 6),
            }
            .into());
        }
    }
}

/// The last `n` lines of the board's defmt log, decoded, indented for a message.
fn last_log_lines(log: SocketAddr, elf: &Path, n: usize) -> String {
    let lines = DefmtLog::from_elf(elf)
        .and_then(|d| LogStream::connect(log, d))
        .and_then(|mut s| s.read_available(Duration::from_millis(300)));
    match lines {
        Ok(l) if l.is_empty() => "  (the firmware logged nothing)".into(),
        Ok(l) => l[l.len().saturating_sub(n)..]
            .iter()
            .map(|x| format!("  {}", crate::logs::format(x)))
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("  (could not read the log: {e})"),
    }
}
