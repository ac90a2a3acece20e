//! `wsctl reset`.

use anyhow::{Context, Result};

use crate::ctx::Ctx;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(ctx: &Ctx, _: Args) -> Result<()> {
    let (_, _, mut client) = ctx.client()?;
    client.reset().context("resetting the board")?;
    println!("reset acknowledged; the firmware reboots (see `wsctl logs`)");
    Ok(())
}
