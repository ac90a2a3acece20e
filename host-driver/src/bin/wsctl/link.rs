//! `wsctl link`: the board over link protocol v2 (docs/link.md).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use host_driver::link::{Config, Link, LinkState};
use host_driver::report;
use ws_common::ctrl::cmd::Ping;
use ws_common::link::Channel;

use crate::ctx::Ctx;

#[derive(Debug, clap::Subcommand)]
pub enum LinkCmd {
    /// Say HELLO and show what was negotiated and the board's channel state.
    Hello,
    /// Ping over the v2 control channel (retried under one request id with --retries).
    Ping {
        /// How many pings to send.
        #[arg(long, short = 'c', default_value_t = 4)]
        count: u32,
    },
}

pub fn run(ctx: &Ctx, cmd: LinkCmd) -> Result<()> {
    let (board, e) = ctx.endpoints()?;
    let t = e.open_phy().with_context(|| format!("connecting to board `{}` ({})", board.name, e.source))?;
    let mut link = Link::connect(t, Config::default(), ctx.timeout())
        .with_context(|| format!("link v2 handshake with board `{}`", board.name))?;
    match cmd {
        LinkCmd::Hello => {
            let LinkState::Up { max_payload, window, resumed } = link.endpoint().state().clone() else {
                unreachable!("connect returns only once the link is up")
            };
            println!(
                "link v2 up with {}: max_payload {max_payload} B, window {window} frames{}",
                link.describe(),
                if resumed { ", resumed" } else { "" }
            );
            let rows: Vec<_> =
                Channel::ALL.iter().filter_map(|&c| link.endpoint().peer_state(c).map(|s| (c, s))).collect();
            print!("{}", report::link_channels(&rows));
        }
        LinkCmd::Ping { count } => {
            let mut rtts = Vec::new();
            for i in 0..count {
                let nonce = 0x5632_0000 ^ i.wrapping_mul(0x9e37_79b9);
                let t0 = Instant::now();
                let got = link.request(&Ping { nonce }, ctx.timeout(), ctx.global.retries)?;
                anyhow::ensure!(got == nonce, "ping echo mismatch: sent {nonce:#010x}, got {got:#010x}");
                let rtt: Duration = t0.elapsed();
                println!("ping {}: answer over link v2 in {}", i + 1, report::ms(rtt));
                rtts.push(rtt);
            }
            println!("{} ({} retries)", report::ping_summary(&rtts, count as usize), link.retries);
        }
    }
    Ok(())
}
