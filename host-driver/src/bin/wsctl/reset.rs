//! `wsctl reset`.

use anyhow::{Context, Result};

use crate::ctx::Ctx;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// `link`: ask the firmware (control protocol); `jtag`: ndmreset through the debug module,
    /// which works even when the firmware does not answer.
    #[arg(long, value_enum, default_value_t = crate::flash::Via::Link)]
    via: crate::flash::Via,
    #[command(flatten)]
    jtag: crate::jtag_opts::JtagOpts,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<()> {
    if a.via == crate::flash::Via::Jtag {
        return crate::debug::reset(ctx, &a.jtag);
    }
    let (_, _, mut client) = ctx.client()?;
    client.reset().context("resetting the board")?;
    println!("reset acknowledged; the firmware reboots (see `wsctl logs`)");
    Ok(())
}
