//! `cargo xtask test`: every check CI runs, in the order that fails fastest.

use crate::util::{run, step, Ctx};
use anyhow::{Context, Result};

const HOST_TARGET: &str = "x86_64-unknown-linux-gnu";

/// The target crates, each its own cargo workspace: the firmware and the boot ROM.
const TARGET_CRATES: &[&str] = &["firmware", "firmware/bootrom"];

pub fn test(ctx: &Ctx) -> Result<()> {
    let in_dir = |dir: &str| {
        let mut c = ctx.cargo();
        c.current_dir(ctx.root.join(dir));
        c
    };

    step("format (cargo fmt --check)");
    run(ctx.cargo().args(["fmt", "--all", "--check"])).context("run `cargo fmt --all` to fix")?;
    for dir in TARGET_CRATES {
        run(in_dir(dir).args(["fmt", "--check"]))
            .with_context(|| format!("run `cargo fmt` in {dir}/ to fix"))?;
    }

    run(in_dir("fuzz").args(["fmt", "--check"])).context("run `cargo fmt` in fuzz/ to fix")?;

    step("register map is up to date (cargo xtask regen --check)");
    crate::regmap::regen(&ctx.root, true)?;

    step("clippy -D warnings (host workspace)");
    run(ctx.cargo().args(["clippy", "--workspace", "--all-targets", "--quiet", "--", "-D", "warnings"]))?;
    for dir in TARGET_CRATES {
        step(&format!("clippy -D warnings ({dir}: target, then host-side tests)"));
        run(in_dir(dir).args(["clippy", "--release", "--quiet", "--", "-D", "warnings"]))?;
        run(in_dir(dir).args([
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
    }

    step("docs build without warnings (cargo doc)");
    run(ctx.cargo().env("RUSTDOCFLAGS", "-D warnings").args(["doc", "--workspace", "--no-deps", "--quiet"]))?;

    for dir in TARGET_CRATES {
        step(&format!("{dir}: logic unit tests (on the host)"));
        run(in_dir(dir).args(["test", "--lib", "--quiet", "--target", HOST_TARGET]))?;
    }

    crate::build::build(ctx)?;

    step("workspace tests: protocol, block testbenches, host driver, hardware-in-the-loop on the simulated board");
    let tests = || {
        let mut c = ctx.cargo();
        c.env("WS_SIM_BIN", ctx.bin("ws-sim")).env("WS_FIRMWARE_ELF", ctx.firmware_elf());
        c
    };
    if has_nextest(ctx) {
        // Every test in its own process, two at a time across all binaries
        // (.config/nextest.toml); `cargo test` would run the binaries one after another and
        // leave a core idle through every single-test binary. nextest does not run
        // doctests, so they follow.
        run(tests().args(["nextest", "run", "--workspace"]))?;
        run(tests().args(["test", "--workspace", "--doc", "--quiet"]))?;
    } else {
        eprintln!("(cargo-nextest not found: running the tests with cargo test, one binary at a time)");
        run(tests().args(["test", "--workspace", "--quiet"]))?;
    }
    step("fuzz: every target for a bounded time (cargo xtask fuzz)");
    crate::fuzz::fuzz(ctx, crate::fuzz::DEFAULT_SECONDS)?;
    eprintln!("all tests passed");
    Ok(())
}

/// Whether `cargo nextest` is installed.
fn has_nextest(ctx: &Ctx) -> bool {
    ctx.cargo().args(["nextest", "--version"]).output().is_ok_and(|o| o.status.success())
}
