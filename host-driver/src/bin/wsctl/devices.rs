//! `wsctl devices`.

use anyhow::Result;
use host_driver::transport::probe;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_: Args) -> Result<()> {
    let (seen, notes) = probe::scan();
    print!("{}", probe::report(&seen, &notes));
    Ok(())
}
