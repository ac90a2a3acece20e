//! `wsctl swarm`: the board's SwarmX node over link protocol v2 (docs/swarmx.md "Firmware and
//! host"): its ports, their state under the firmware's masking policy, and its counters.

use anyhow::{Context, Result};
use host_driver::link::Config;
use host_driver::report;
use ws_common::ctrl::cmd::{SwarmConfig, SwarmEvents, SwarmStatus};

use crate::ctx::Ctx;

#[derive(Debug, clap::Subcommand)]
pub enum SwarmCmd {
    /// The node's configuration and counters, and a table of its ports: state (active, or
    /// masked by the firmware after a timeout or repeated mismatches), strikes, flits and
    /// stall cycles each way.
    Status,
    /// Set which ports take part, the wire format, the 1/(active ports) scale and the
    /// timeout. Clears the ports the firmware masked.
    Config {
        /// Active ports as a bit mask (0x0f = ports 0..3).
        #[arg(long, value_parser = host_driver::parse::parse_mask16)]
        mask: u16,
        /// Wire format: fp32, bf16 (bf16 in, fp32 sums) or bf16-out (bf16 in and out).
        #[arg(long, default_value = "fp32", value_parser = ["fp32", "bf16", "bf16-out"])]
        dtype: String,
        /// Multiply each sum by 1/(active ports).
        #[arg(long)]
        scale: bool,
        /// Cycles an active port may lag its peers before it is flagged (0: never).
        #[arg(long, default_value_t = 100_000)]
        timeout: u32,
        /// Fault injection for rigs: wafers (a port mask) whose gradients the board reads and
        /// never sends in multi-wafer optimizer steps (`wsctl optim --wafers`), as if they had
        /// stopped answering. The node times them out and the firmware masks them.
        #[arg(long, value_parser = host_driver::parse::parse_mask16, default_value = "0")]
        inject_dead: u16,
    },
    /// The firmware's events since the last read: aborted chunks, masked ports.
    Events,
}

pub fn run(ctx: &Ctx, cmd: SwarmCmd) -> Result<()> {
    let (_, mut link) = ctx.link_v2(Config::default())?;
    let (timeout, retries) = (ctx.timeout(), ctx.global.retries);
    match cmd {
        SwarmCmd::Status => {
            let s = link
                .request(&SwarmStatus, timeout, retries)
                .context("reading SwarmX's status (SwarmStatus)")?;
            print!("{}", report::swarm_status(&s));
        }
        SwarmCmd::Config { mask, dtype, scale, timeout: cycles, inject_dead } => {
            let dtype = match dtype.as_str() {
                "bf16" => 1,
                "bf16-out" => 2,
                _ => 0,
            };
            let q = SwarmConfig { mask, dtype, scale, timeout: cycles, dead: inject_dead };
            let s = link.request(&q, timeout, retries).with_context(|| {
                format!("configuring SwarmX (SwarmConfig {q:?}): the mask must name only ports the node has")
            })?;
            print!("{}", report::swarm_status(&s));
        }
        SwarmCmd::Events => {
            let ev = link
                .request(&SwarmEvents, timeout, retries)
                .context("reading SwarmX's events (SwarmEvents)")?;
            print!("{}", report::swarm_events(&ev));
        }
    }
    Ok(())
}
