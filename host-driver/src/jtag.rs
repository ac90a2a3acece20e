//! JTAG debug and flashing through probe-rs (docs/jtag.md).
//!
//! On the simulated board the probe is [`SimProbe`], our probe-rs driver for `ws-sim`'s JTAG
//! server (XVC 1.0 or OpenOCD remote_bitbang over loopback TCP); on a real board it is any
//! probe probe-rs drives itself (FTDI FT2232H/FT232H, J-Link, CMSIS-DAP), chosen by
//! `--probe VID:PID[:SERIAL]` or the board's `[jtag] probe`. Either way probe-rs' own RISC-V
//! implementation talks to the SoC's riscv-dbg debug module (RISC-V External Debug Support
//! 0.13.2): the DTM over JTAG (§6), abstract commands for registers (§3.6), and system-bus
//! access (§3.10) or the program buffer for memory.
//!
//! - [`probe`]: [`SimProbe`] and its [`Wire`] protocols.
//! - [`target`]: the board's probe-rs target description (`boards/<board>/*.yaml`).
//! - [`Debugger`]: an attached session with one call per debug step (halt, resume, reset,
//!   registers, memory), each bounded by a stated timeout and failing with the step named.
//! - [`mod@bench`]: JTAG flash throughput over both wire protocols, for `cargo xtask bench`.
//!
//! Flashing an ELF is [`crate::flash`].

pub mod bench;
mod debugger;
pub mod probe;
pub mod target;

use std::net::SocketAddr;

pub use self::debugger::{CoreState, Debugger, Registers, HALT_TIMEOUT};
pub use self::probe::{SimProbe, Wire};
pub use self::target::TargetDescription;

use crate::board::{Board, BoardKind};
use crate::endpoints::Endpoints;
use crate::error::{JtagError, Result};
use crate::sim::SimCtrl;

/// Which probe to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeSpec {
    /// The simulator's JTAG server.
    Sim {
        /// Its address.
        addr: SocketAddr,
        /// The wire protocol to speak.
        wire: Wire,
    },
    /// A probe probe-rs drives itself, by selector `VID:PID[:SERIAL]` (hex ids).
    Usb {
        /// The selector.
        selector: String,
        /// TCK in kHz, if the board or the command line sets one.
        speed_khz: Option<u32>,
    },
}

impl std::fmt::Display for ProbeSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeSpec::Sim { addr, wire } => write!(f, "ws-sim JTAG {addr} ({})", wire.name()),
            ProbeSpec::Usb { selector, .. } => write!(f, "probe {selector}"),
        }
    }
}

impl ProbeSpec {
    /// The probe for `board`: `probe` (a selector) if given, else on a simulated board its
    /// JTAG server (`jtag`, else the running simulator's, from its control port, else the
    /// board file's `[jtag] port`), else the board's `[jtag] probe`.
    pub fn for_board(
        board: &Board,
        endpoints: Option<&Endpoints>,
        jtag: Option<SocketAddr>,
        probe: Option<&str>,
        wire: Wire,
    ) -> Result<ProbeSpec> {
        let speed_khz = board.jtag.as_ref().and_then(|j| j.speed_khz);
        if let Some(selector) = probe {
            return Ok(ProbeSpec::Usb { selector: selector.to_string(), speed_khz });
        }
        if let Some(addr) = jtag {
            return Ok(ProbeSpec::Sim { addr, wire });
        }
        if board.kind == BoardKind::Sim {
            return Ok(ProbeSpec::Sim { addr: sim_jtag_addr(board, endpoints)?, wire });
        }
        match board.jtag.as_ref().and_then(|j| j.probe.clone()) {
            Some(selector) => Ok(ProbeSpec::Usb { selector, speed_khz }),
            None => Err(JtagError::NoProbe { board: board.name.clone() }.into()),
        }
    }
}

/// The JTAG address of a simulated board: what its control port reports (`stats` → `jtag`,
/// right even for ephemeral ports), else the board file's `[jtag] port` on the link host.
pub fn sim_jtag_addr(board: &Board, endpoints: Option<&Endpoints>) -> Result<SocketAddr> {
    if let Some(e) = endpoints {
        if let Ok(mut ctrl) = SimCtrl::connect(e.ctrl) {
            if let Some(addr) = ctrl.request("stats").ok().and_then(|v| v["jtag"].as_str()?.parse().ok()) {
                return Ok(addr);
            }
        }
    }
    let link = board.sim_link()?;
    let port = board.jtag.as_ref().and_then(|j| j.port).unwrap_or(link.ports().jtag);
    link.addr(port)
}

/// An error and its causes on one line, each cause once: probe-rs wraps our probe's errors
/// in generic variants whose own text says little.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(e);
    while let Some(err) = cur {
        let text = err.to_string();
        // probe-rs' wrappers ("An error which is specific to the debug probe in use
        // occurred.") say nothing their cause does not say better.
        let generic = err.source().is_some() && text.trim_end_matches('.').ends_with("occurred");
        if !generic && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = err.source();
    }
    parts.join(": ")
}
