//! `cargo xtask build`: firmware, host tools and the simulator model, each only when its
//! inputs changed (cargo and the Verilator cache decide).

use crate::util::{run, run_quiet, step, Ctx};
use anyhow::{Context, Result};

pub fn build(ctx: &Ctx) -> Result<()> {
    crate::bootrom::bootrom(ctx)?;
    firmware(ctx)?;
    host_tools(ctx)?;
    sim_model(ctx, 1)?;
    Ok(())
}

pub fn firmware(ctx: &Ctx) -> Result<()> {
    step("firmware (riscv32imc-unknown-none-elf)");
    run(ctx.cargo().current_dir(ctx.root.join("firmware")).args(["build", "--release", "--quiet"]))
        .context("building the firmware")
}

pub fn host_tools(ctx: &Ctx) -> Result<()> {
    step("host tools (wsctl, ws-sim)");
    run(ctx.cargo().args(["build", "--release", "--quiet", "-p", "host-driver", "-p", "ws-hdl", "--bins"]))
        .context("building wsctl and ws-sim")
}

/// Builds the Verilated SoC, or finds it in the cache keyed by the hash of its inputs.
pub fn sim_model(ctx: &Ctx, threads: u32) -> Result<()> {
    step(&format!("simulator model ({threads} Verilator thread{})", if threads == 1 { "" } else { "s" }));
    run_quiet(
        "verilating the SoC (cached by input hash)",
        std::process::Command::new(ctx.bin("ws-sim")).current_dir(&ctx.root).args([
            "--build-only",
            "--threads",
            &threads.to_string(),
        ]),
    )
}
