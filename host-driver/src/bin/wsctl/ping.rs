//! `wsctl ping`.

use std::time::Duration;

use anyhow::{bail, Result};
use host_driver::report;

use crate::ctx::Ctx;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many pings to send.
    #[arg(long, short = 'c', default_value_t = 1)]
    count: u32,
    /// Pause between pings.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    interval_ms: u64,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<()> {
    let (_, _, mut client) = ctx.client()?;
    let peer = client.describe();
    let mut rtts = Vec::new();
    for i in 0..a.count {
        if i > 0 && a.interval_ms > 0 {
            std::thread::sleep(Duration::from_millis(a.interval_ms));
        }
        let nonce = 0x5057_0000 ^ i.wrapping_mul(0x9e37_79b9);
        match client.ping(nonce) {
            Ok(rtt) => {
                println!("ping {}: answer from {peer} in {}", i + 1, report::ms(rtt));
                rtts.push(rtt);
            }
            // A single ping reports its error as is; a series goes on past a lost one.
            Err(e) if e.is_timeout() && a.count > 1 => println!("ping {}: {e}", i + 1),
            Err(e) => return Err(e.into()),
        }
    }
    if a.count > 1 {
        println!("{}", report::ping_summary(&rtts, a.count as usize));
    }
    if rtts.is_empty() {
        bail!("no ping was answered by {peer}");
    }
    Ok(())
}
