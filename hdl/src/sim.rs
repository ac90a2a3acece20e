//! The SoC simulator: the Verilated `ws_soc` ([`Soc`]) with the firmware loaded into RAM, and
//! `ws-sim`, which serves it on loopback TCP ports (docs/sim.md).
//!
//! - [`serve`] is all of `ws-sim`: board, model, program, listeners, main loop. The binary only
//!   parses [`SimOptions`] and prints errors.
//! - [`SimProcess`] starts `ws-sim` as a child process for tests, hil-tests and the bench, and
//!   talks to its control port.
//! - [`Soc`] runs the model in this process, for the bench and for tests that step cycles.

pub mod asm;
pub mod board;
pub mod elf;
pub mod options;
pub mod process;
pub mod programs;
pub mod server;
pub mod soc;

use std::path::PathBuf;
use std::time::Duration;

pub use options::{Demo, SimOptions};
pub use process::{parse_ready_line, ReadyInfo, SimProcess};
pub use server::serve;
pub use soc::{Soc, SocConfig, SocError, StopOn};

/// Why the simulator could not start, run, or be reached. Each message says what failed and
/// what to do next.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The board description is unusable.
    #[error("board file {path}: {msg}")]
    Board {
        /// The `board.toml`.
        path: PathBuf,
        /// What is wrong with it and how to fix it.
        msg: String,
    },
    /// The firmware image was refused.
    #[error(transparent)]
    Elf(#[from] elf::ElfError),
    /// The SoC model did not build or load.
    #[error(transparent)]
    Soc(#[from] SocError),
    /// A port could not be bound.
    #[error("cannot listen on {addr} ({source}): another ws-sim or another program holds the port; stop it (`wsctl sim stop`) or pick other ports with --port-base (0 = ephemeral)")]
    Bind {
        /// The address.
        addr: String,
        /// The socket error.
        source: std::io::Error,
    },
    /// The options do not make sense together.
    #[error("{0}")]
    Options(String),
    /// An operating-system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, and what to check.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The `ws-sim` binary was not found.
    #[error("cannot find the ws-sim binary (looked at {}): build it with `cargo build --release -p ws-hdl --bin ws-sim`, or point WS_SIM_BIN at it", looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    BinaryMissing {
        /// Where it was looked for.
        looked: Vec<PathBuf>,
    },
    /// `ws-sim` exited before printing its READY line.
    #[error("ws-sim exited ({status}) before it was ready; the last lines of {}:\n{tail}\nfix the problem shown above", log.display())]
    Exited {
        /// How it exited.
        status: String,
        /// Its stderr log.
        log: PathBuf,
        /// The last lines of the log.
        tail: String,
    },
    /// `ws-sim` did not print its READY line in time.
    #[error("ws-sim did not report READY within {waited:?}; the last lines of {}:\n{tail}\nfix the problem shown above, or wait longer (WS_SIM_READY_TIMEOUT=seconds; the first start builds the Verilated model)", log.display())]
    NotReady {
        /// How long it was given.
        waited: Duration,
        /// Its stderr log.
        log: PathBuf,
        /// The last lines of the log.
        tail: String,
    },
    /// A control request could not be made or its answer was unreadable.
    #[error("control request `{cmd}` to ws-sim at {addr} failed: {msg}; the simulator may have exited, see its log {}", log.display())]
    Ctrl {
        /// The request.
        cmd: String,
        /// The control port.
        addr: std::net::SocketAddr,
        /// What went wrong.
        msg: String,
        /// The simulator's stderr log.
        log: PathBuf,
    },
    /// The simulator answered a control request with `ok: false`.
    #[error("ws-sim refused `{cmd}`: {error}")]
    Refused {
        /// The request.
        cmd: String,
        /// The simulator's message.
        error: String,
    },
}

impl SimError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SimError {
        let what = what.into();
        move |source| SimError::Io { what, source }
    }
}
