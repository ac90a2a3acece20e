//! `wsctl info`.

use std::time::Duration;

use anyhow::{Context, Result};
use host_driver::board::BoardKind;
use host_driver::report;
use host_driver::sim::SimCtrl;

use crate::ctx::Ctx;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(ctx: &Ctx, _: Args) -> Result<()> {
    let (board, e, mut client) = ctx.client()?;
    let id = client.identity().context("asking the board for its identity")?;
    // The simulated clock rate is a nicety: leave it out if the control port is not there.
    let sim = (board.kind == BoardKind::Sim)
        .then(|| SimCtrl::connect_timeout(e.ctrl, Duration::from_secs(1)).and_then(|mut c| c.stats()).ok())
        .flatten();
    println!("board `{}` on {}", board.name, client.describe());
    println!();
    print!("{}", report::identity_report(&id, sim.as_ref()));
    Ok(())
}
