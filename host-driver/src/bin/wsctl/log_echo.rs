//! `wsctl log-echo VALUE TAG`.

use anyhow::{Context, Result};
use host_driver::parse::parse_u32;

use crate::ctx::Ctx;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Logged as `value=` (u32; decimal or 0x hex).
    #[arg(value_parser = parse_u32)]
    value: u32,
    /// Logged as `tag=` (i16, may be negative).
    #[arg(allow_negative_numbers = true)]
    tag: i16,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<()> {
    let (_, _, mut client) = ctx.client()?;
    client.log_echo(a.value, a.tag).context("asking the firmware to log")?;
    println!("the firmware logged `log-echo value={} tag={}`; see `wsctl logs`", a.value, a.tag);
    Ok(())
}
