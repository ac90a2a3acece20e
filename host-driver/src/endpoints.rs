//! Which addresses to talk to: the link, log and control ports of the chosen board.
//!
//! In order of precedence: an explicit `--addr HOST:PORT` (the link port; log and control
//! follow it as in [`SimPorts`]); the simulator recorded by `wsctl sim start` for this board
//! (it may run on other ports than the board file says); the board file's `[link]`.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::board::{resolve, Board, SimPorts};
use crate::board_time::BoardClock;
use crate::error::Result;
use crate::sim::SimHome;
use crate::transport::{SimTransport, Transport};

/// Where an address came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--addr`.
    Override,
    /// The running simulator's state file.
    RunningSim {
        /// Its pid.
        pid: u32,
    },
    /// The board file.
    Board {
        /// The board name.
        name: String,
        /// Its board file.
        path: PathBuf,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Override => f.write_str("address from --addr"),
            Source::RunningSim { pid } => write!(f, "address from `wsctl sim start`, pid {pid}"),
            Source::Board { name, path } => write!(f, "board `{name}`'s address from {}", path.display()),
        }
    }
}

/// The addresses of one board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// Host-link port.
    pub link: SocketAddr,
    /// defmt log port.
    pub log: SocketAddr,
    /// Simulator control port.
    pub ctrl: SocketAddr,
    /// The link engine's PHY (link protocol v2).
    pub phy: SocketAddr,
    /// Where they came from.
    pub source: Source,
}

impl Endpoints {
    /// The endpoints for `board`, honouring `addr` (a `HOST:PORT` link address) and a
    /// simulator recorded in `home`.
    pub fn resolve(board: &Board, addr: Option<&str>, home: &SimHome) -> Result<Self> {
        if let Some(a) = addr {
            let link = resolve(a)?;
            let ports = SimPorts::from_base(link.port());
            let with = |port| SocketAddr::new(link.ip(), port);
            return Ok(Self {
                link,
                log: with(ports.log),
                ctrl: with(ports.ctrl),
                phy: with(ports.phy),
                source: Source::Override,
            });
        }
        let sim = board.sim_link()?;
        if let Some(state) = home.running(&mut Vec::new())? {
            if same_file(&state.board, &board.path) {
                return Ok(Self {
                    link: state.link,
                    log: state.log,
                    ctrl: state.ctrl,
                    phy: state.phy.unwrap_or_else(|| {
                        SocketAddr::new(state.link.ip(), SimPorts::from_base(state.link.port()).phy)
                    }),
                    source: Source::RunningSim { pid: state.pid },
                });
            }
        }
        let ports = sim.ports();
        Ok(Self {
            link: sim.addr(ports.link)?,
            log: sim.addr(ports.log)?,
            ctrl: sim.addr(ports.ctrl)?,
            phy: sim.addr(ports.phy)?,
            source: Source::Board { name: board.name.clone(), path: board.path.clone() },
        })
    }

    /// Opens the host link (protocol v1 bytes).
    pub fn open_link(&self) -> Result<Box<dyn Transport>> {
        Ok(Box::new(SimTransport::connect(self.link)?.with_clock(self.clock())))
    }

    /// Opens the link engine's PHY (protocol v2).
    pub fn open_phy(&self) -> Result<Box<dyn Transport>> {
        Ok(Box::new(SimTransport::connect(self.phy)?.with_clock(self.clock())))
    }

    /// The simulator's cycle counter, when its control port answers: waits on the links
    /// opened here are then bounded in simulated cycles (`crate::board_time`).
    pub fn clock(&self) -> Option<BoardClock> {
        BoardClock::follow(self.ctrl).ok()
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim_board() -> Board {
        Board::load(crate::workspace::root().join("boards/sim").to_str().unwrap()).unwrap()
    }

    #[test]
    fn override_and_board_addresses() {
        let home = SimHome::at(std::env::temp_dir().join("ws-endpoints-none"));
        let board = sim_board();
        let e = Endpoints::resolve(&board, Some("127.0.0.1:9000"), &home).unwrap();
        assert_eq!((e.link.port(), e.log.port(), e.ctrl.port()), (9000, 9001, 9002));
        assert_eq!(e.source, Source::Override);
        let e = Endpoints::resolve(&board, None, &home).unwrap();
        assert_eq!((e.link.port(), e.log.port(), e.ctrl.port()), (7450, 7451, 7452));
        assert!(e.source.to_string().ends_with("boards/sim/board.toml"), "{}", e.source);
        let bad = Endpoints::resolve(&board, Some("nonsense"), &home).unwrap_err().to_string();
        assert!(bad.contains("--addr 127.0.0.1:7450"), "{bad}");
    }
}
