//! `wsctl completions SHELL`.

use anyhow::Result;
use clap::CommandFactory;
use clap_complete::Shell;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell: bash, zsh, fish, elvish or powershell.
    shell: Shell,
}

pub fn run(a: Args) -> Result<()> {
    clap_complete::generate(a.shell, &mut crate::Cli::command(), "wsctl", &mut std::io::stdout());
    Ok(())
}
