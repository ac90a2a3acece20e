//! `wsctl link`: the board over link protocol v2 (docs/link.md).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use host_driver::link::{echo, Config, Link, LinkState};
use host_driver::report;
use ws_common::ctrl::cmd::{LinkCounters, Ping};
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
    /// The link engine's counters per channel: frames, bytes, CRC and sequence errors,
    /// window violations, retransmits, credit stalls.
    Stats,
    /// Stream through the board's echo windows on every bulk channel at once, both ways,
    /// and compare SHA-256 at both ends (the firmware's default link mode).
    Echo {
        /// MiB each way, split over the three channel pairs.
        #[arg(long, default_value_t = 16)]
        mib: usize,
    },
}

pub fn run(ctx: &Ctx, cmd: LinkCmd) -> Result<()> {
    let (_, mut link) = ctx.link_v2(Config::default())?;
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
        LinkCmd::Stats => print!("{}", report::link_counters(&counters(ctx, &mut link)?)),
        LinkCmd::Echo { mib } => {
            let before = counters(ctx, &mut link)?;
            let bar = indicatif::ProgressBar::new((mib as u64) << 20);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:40} {bytes}/{total_bytes} echoed, {bytes_per_sec}",
                )
                .expect("progress template"),
            );
            let r = echo::run(&mut link, (mib << 20) / 3, 1, Duration::from_secs(30), &mut |done, _| {
                bar.set_position(done as u64)
            })?;
            bar.finish_and_clear();
            let after = counters(ctx, &mut link)?;
            let delta: Vec<u32> = after.iter().zip(&before).map(|(a, b)| a.wrapping_sub(*b)).collect();
            println!(
                "echo: {:.1} MiB each way over channels 2, 3, 4 -> 2, 3, 6 in {:.2} s ({:.2} MiB/s each way), SHA-256 equal at both ends",
                r.bytes_each_way() as f64 / 1048576.0,
                r.elapsed.as_secs_f64(),
                r.bytes_each_way() as f64 / 1048576.0 / r.elapsed.as_secs_f64()
            );
            print!("{}", report::link_counters(&delta));
        }
    }
    Ok(())
}

/// Every counter of the link engine, index 0 on.
fn counters(ctx: &Ctx, link: &mut Link) -> Result<Vec<u32>> {
    let n = ws_common::link::counters::COUNT;
    link.request(&LinkCounters { first: 0, count: n }, ctx.timeout(), ctx.global.retries)
        .context("reading the link engine's counters (LinkCounters)")
}
