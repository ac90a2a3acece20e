//! The options every JTAG subcommand shares, and opening a [`Debugger`] from them.

use anyhow::{Context, Result};
use host_driver::board::{resolve, BoardKind};
use host_driver::jtag::{Debugger, ProbeSpec, TargetDescription, Wire};

use crate::ctx::Ctx;

/// How to reach the board's JTAG port.
#[derive(Debug, Clone, clap::Args)]
pub struct JtagOpts {
    /// A hardware probe, by probe-rs selector (hex ids) [default: the board's `[jtag] probe`;
    /// on a sim board, the simulator's JTAG server].
    #[arg(long, value_name = "VID:PID[:SERIAL]")]
    pub probe: Option<String>,
    /// The simulator's JTAG server [default: what the running simulator reports, else the
    /// board's `[jtag] port`].
    #[arg(long, value_name = "HOST:PORT")]
    pub jtag: Option<String>,
    /// Wire protocol to the simulator's JTAG server: xvc or bitbang (OpenOCD remote_bitbang).
    #[arg(long, default_value = "xvc", value_parser = clap::value_parser!(Wire))]
    pub wire: Wire,
}

impl JtagOpts {
    /// The probe these options and the board select.
    pub fn spec(&self, ctx: &Ctx) -> Result<ProbeSpec> {
        let board = ctx.board()?;
        let jtag = self.jtag.as_deref().map(resolve).transpose()?;
        let endpoints = if board.kind == BoardKind::Sim && jtag.is_none() && self.probe.is_none() {
            Some(ctx.endpoints()?.1)
        } else {
            None
        };
        Ok(ProbeSpec::for_board(&board, endpoints.as_ref(), jtag, self.probe.as_deref(), self.wire)?)
    }

    /// An attached debugger on the board's hart.
    pub fn debugger(&self, ctx: &Ctx) -> Result<Debugger> {
        let board = ctx.board()?;
        let target = TargetDescription::for_board(&board)?;
        let spec = self.spec(ctx)?;
        Debugger::attach(&spec, target)
            .with_context(|| format!("attaching to board `{}` over JTAG", board.name))
    }
}
