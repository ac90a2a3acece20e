//! `wsctl stats`.

use anyhow::{Context, Result};
use host_driver::report;

use crate::ctx::Ctx;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(ctx: &Ctx, _: Args) -> Result<()> {
    let (_, _, mut client) = ctx.client()?;
    let s = client.stats().context("asking the firmware for its counters")?;
    // The clock turns cycle counts into board time; without it the counts still print.
    let clk = client.identity().ok().map(|id| id.clk_hz);
    print!("{}", report::stats_report(&s, clk));
    Ok(())
}
