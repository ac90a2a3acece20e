//! `wsctl peek ADDR [LEN]`.

use anyhow::Result;
use host_driver::parse::{parse_len, parse_u32};
use host_driver::report;

use crate::ctx::Ctx;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Start address (4-byte aligned), e.g. 0x10000000.
    // Not `addr`: that id is the global `--addr`.
    #[arg(value_parser = parse_u32, value_name = "ADDR")]
    address: u32,
    /// Bytes to read (a multiple of 4), e.g. 64, 0x100 or 4K.
    #[arg(value_parser = parse_len, default_value = "64")]
    len: usize,
    /// `link`: the firmware reads (inside its peek window); `jtag`: the debug module reads
    /// over the system bus, any address, even with the firmware halted or hung.
    #[arg(long, value_enum, default_value_t = crate::flash::Via::Link)]
    via: crate::flash::Via,
    #[command(flatten)]
    jtag: crate::jtag_opts::JtagOpts,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<()> {
    if a.via == crate::flash::Via::Jtag {
        return crate::debug::peek(ctx, &a.jtag, a.address, a.len);
    }
    let (_, _, mut client) = ctx.client()?;
    let data = client.peek(a.address, a.len)?;
    print!("{}", report::hexdump(a.address, &data));
    Ok(())
}
