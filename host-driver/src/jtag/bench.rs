//! Bench measurements of the JTAG path, for `cargo xtask bench` (STYLE.md: benchmarks, not
//! timed tests). Both need a running `ws-sim`; the caller starts it and passes its JTAG
//! address (`stats` → `jtag`).
//!
//! - [`tck_rate`]: TCK periods per wall second the simulator clocks through one protocol,
//!   with nothing but Run-Test/Idle on the wire: the protocol's ceiling. It depends on what
//!   the core does meanwhile (a core asleep in WFI simulates faster than a halted one), so
//!   [`flash_throughput`] measures it with the core halted, as during the flash.
//! - [`flash_throughput`]: a real `flash_elf` of the firmware (reset, write, verify, start),
//!   its write rate in bytes/s, and that rate as a fraction of the protocol's theoretical
//!   rate, one payload bit per TCK period (`tck_rate / 8` bytes/s).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Instant;

use probe_rs::probe::RawJtagIo;

use super::{Debugger, ProbeSpec, SimProbe, TargetDescription, Wire};
use crate::board::Board;
use crate::error::Result;
use crate::flash::{flash_elf, ElfImage};

/// TCK periods [`tck_rate`] clocks by default: 2^18, about a second over XVC.
pub const TCK_SAMPLE: u64 = 1 << 18;

/// One JTAG flash measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JtagFlashBench {
    /// The protocol measured.
    pub wire: Wire,
    /// Bytes written (and verified).
    pub bytes: u64,
    /// Write throughput, bytes per second.
    pub write_bytes_per_s: f64,
    /// The whole flash (reset, write, verify, start), bytes per second.
    pub flash_bytes_per_s: f64,
    /// TCK periods per second the protocol reaches ([`tck_rate`]).
    pub tck_per_s: f64,
    /// `write_bytes_per_s / (tck_per_s / 8)`: the share of the wire's bit rate that is payload.
    pub fraction_of_tck: f64,
}

/// TCK periods per second the JTAG server at `addr` clocks over `wire`, measured over `tck`
/// periods in Run-Test/Idle (the state machine is reset first).
pub fn tck_rate(addr: SocketAddr, wire: Wire, tck: u64) -> Result<f64> {
    let mut p = SimProbe::connect(addr, wire)?;
    let step = |e: probe_rs::probe::DebugProbeError| {
        super::debugger::step_error("clocking Run-Test/Idle for the TCK rate", e.into())
    };
    p.reset_jtag_state_machine().map_err(step)?;
    let t = Instant::now();
    let mut left = tck;
    while left > 0 {
        let n = left.min(1 << 16);
        // The last bit captures, so the exchange waits for the server to clock them all.
        for i in 0..n {
            p.shift_bit(false, false, i == n - 1).map_err(step)?;
        }
        p.read_captured_bits().map_err(step)?;
        left -= n;
    }
    Ok(tck as f64 / t.elapsed().as_secs_f64().max(1e-9))
}

/// Flashes `elf` into the simulated `board` at `addr` over `wire` and reports the rates.
pub fn flash_throughput(addr: SocketAddr, wire: Wire, board: &Board, elf: &Path) -> Result<JtagFlashBench> {
    let image = ElfImage::read(elf)?;
    let spec = ProbeSpec::Sim { addr, wire };
    // Halt the core first, so the clock rate is measured as the flash runs: a sleeping core
    // (WFI, clock gated) simulates several times faster than one in Debug Mode. It stays
    // halted between the two sessions (riscv-dbg keeps `halted` across `dmactive`).
    Debugger::attach(&spec, TargetDescription::for_board(board)?)?.reset_and_halt()?;
    let tck_per_s = tck_rate(addr, wire, TCK_SAMPLE)?;
    let mut dbg = Debugger::attach(&spec, TargetDescription::for_board(board)?)?;
    let r = flash_elf(&mut dbg, &image, &mut |_| {})?;
    let write_bytes_per_s = r.write_bytes_per_s();
    Ok(JtagFlashBench {
        wire,
        bytes: r.bytes,
        write_bytes_per_s,
        flash_bytes_per_s: r.bytes as f64 / r.total.as_secs_f64().max(1e-9),
        tck_per_s,
        fraction_of_tck: write_bytes_per_s / (tck_per_s / 8.0),
    })
}
