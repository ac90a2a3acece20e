//! `cargo xtask`: the single entry point for working on weightstream.
mod regmap;
use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "weightstream developer tasks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Regenerate the register map outputs from hdl/regmap/*.toml.
    Regen {
        /// Only check that the checked-in files are up to date.
        #[arg(long)]
        check: bool,
    },
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Regen { check } => regmap::regen(&root(), check),
    }
}
