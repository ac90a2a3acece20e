//! What every subcommand shares: the global options, the board, its endpoints, a client.

use std::time::Duration;

use anyhow::{Context, Result};
use host_driver::board::{Board, BOARD_ENV, DEFAULT_BOARD};
use host_driver::client::Client;
use host_driver::endpoints::Endpoints;
use host_driver::sim::SimHome;

/// Options every subcommand takes.
#[derive(Debug, clap::Args)]
pub struct Global {
    /// Board name (a folder under boards/) or path to a board.toml.
    #[arg(long, global = true, env = BOARD_ENV, default_value = DEFAULT_BOARD, value_name = "NAME|PATH")]
    pub board: String,
    /// Host-link address to use instead of the board's (log and control ports follow it).
    #[arg(long, global = true, value_name = "HOST:PORT")]
    pub addr: Option<String>,
    /// How long each request waits for its answer.
    #[arg(long, global = true, default_value_t = 2000, value_name = "MS")]
    pub timeout_ms: u64,
    /// Resend an unanswered idempotent request this many times.
    #[arg(long, global = true, default_value_t = 0, value_name = "N")]
    pub retries: u32,
}

/// The global options, with helpers to turn them into a board and a client.
#[derive(Debug)]
pub struct Ctx {
    pub global: Global,
}

impl Ctx {
    pub fn new(global: Global) -> Self {
        Self { global }
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.global.timeout_ms)
    }

    pub fn board(&self) -> Result<Board> {
        Board::load(&self.global.board).with_context(|| format!("loading board `{}`", self.global.board))
    }

    pub fn endpoints(&self) -> Result<(Board, Endpoints)> {
        let board = self.board()?;
        let e = Endpoints::resolve(&board, self.global.addr.as_deref(), &SimHome::default())
            .with_context(|| format!("finding the addresses of board `{}`", board.name))?;
        Ok((board, e))
    }

    /// A connected client and the board it talks to.
    pub fn client(&self) -> Result<(Board, Endpoints, Client)> {
        let (board, e) = self.endpoints()?;
        let link =
            e.open_link().with_context(|| format!("connecting to board `{}` ({})", board.name, e.source))?;
        let mut client = Client::new(link);
        client.set_timeout(self.timeout());
        client.set_retries(self.global.retries);
        Ok((board, e, client))
    }

    /// A link v2 session with the board: its PHY opened and HELLO said with `cfg`.
    pub fn link_v2(&self, cfg: host_driver::link::Config) -> Result<(Board, host_driver::link::Link)> {
        let (board, e) = self.endpoints()?;
        let t =
            e.open_phy().with_context(|| format!("connecting to board `{}` ({})", board.name, e.source))?;
        let link = host_driver::link::Link::connect(t, cfg, self.timeout())
            .with_context(|| format!("link v2 handshake with board `{}`", board.name))?;
        Ok((board, link))
    }
}
