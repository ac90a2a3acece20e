//! `cargo xtask test`: every check CI runs, in the order that fails fastest.

use crate::util::{run, step, Ctx};
use anyhow::{Context, Result};

const HOST_TARGET: &str = "x86_64-unknown-linux-gnu";

pub fn test(ctx: &Ctx) -> Result<()> {
    step("format (cargo fmt --check)");
    run(ctx.cargo().args(["fmt", "--all", "--check"])).context("run `cargo fmt --all` to fix")?;
    run(ctx.cargo().current_dir(ctx.root.join("firmware")).args(["fmt", "--check"]))
        .context("run `cargo fmt` in firmware/ to fix")?;

    step("register map is up to date (cargo xtask regen --check)");
    crate::regmap::regen(&ctx.root, true)?;

    step("clippy -D warnings (host workspace)");
    run(ctx.cargo().args(["clippy", "--workspace", "--all-targets", "--quiet", "--", "-D", "warnings"]))?;
    step("clippy -D warnings (firmware, target and host-side tests)");
    let fw = || {
        let mut c = ctx.cargo();
        c.current_dir(ctx.root.join("firmware"));
        c
    };
    run(fw().args(["clippy", "--release", "--quiet", "--", "-D", "warnings"]))?;
    run(fw().args([
        "clippy",
        "--lib",
        "--tests",
        "--quiet",
        "--target",
        HOST_TARGET,
        "--",
        "-D",
        "warnings",
    ]))?;

    step("docs build without warnings (cargo doc)");
    run(ctx.cargo().env("RUSTDOCFLAGS", "-D warnings").args(["doc", "--workspace", "--no-deps", "--quiet"]))?;

    step("firmware logic unit tests (on the host)");
    run(fw().args(["test", "--lib", "--quiet", "--target", HOST_TARGET]))?;

    crate::build::build(ctx)?;

    step("workspace tests: protocol, block testbenches, host driver, hardware-in-the-loop on the simulated board");
    run(ctx.cargo().env("WS_SIM_BIN", ctx.bin("ws-sim")).env("WS_FIRMWARE_ELF", ctx.firmware_elf()).args([
        "test",
        "--workspace",
        "--quiet",
    ]))?;
    eprintln!("all tests passed");
    Ok(())
}
