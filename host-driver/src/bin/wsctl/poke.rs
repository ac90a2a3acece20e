//! `wsctl poke ADDR HEXBYTES | --u32 V`.

use anyhow::Result;
use host_driver::parse::{parse_u32, HexBytes};

use crate::ctx::Ctx;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Start address (4-byte aligned), e.g. 0x1003f000.
    // Not `addr`: that id is the global `--addr`.
    #[arg(value_parser = parse_u32, value_name = "ADDR")]
    address: u32,
    /// Bytes in address order, as hex: deadbeef, de:ad:be:ef.
    #[arg(required_unless_present = "u32")]
    bytes: Option<HexBytes>,
    /// Write this 32-bit value instead (little endian, as the core stores it).
    #[arg(long = "u32", value_parser = parse_u32, value_name = "V", conflicts_with = "bytes")]
    u32: Option<u32>,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<()> {
    let data = match (a.bytes, a.u32) {
        (Some(HexBytes(b)), _) => b,
        (None, Some(v)) => v.to_le_bytes().to_vec(),
        (None, None) => unreachable!("clap requires one of the two"),
    };
    let (_, _, mut client) = ctx.client()?;
    client.poke(a.address, &data)?;
    println!("wrote {} bytes at {:#010x}", data.len(), a.address);
    Ok(())
}
