//! `cargo xtask fuzz` (and a step of `cargo xtask test`): runs every cargo-fuzz target in
//! `fuzz/` for a bounded time, fails on the first crash, and reports execs/s.
//!
//! The targets (`fuzz/src/lib.rs` has their bodies) are the v2 link decoder, the firmware's
//! control request parser built for the host, and the host client's response parser. Each
//! starts from its checked-in seed corpus (`fuzz/corpus/<target>/`, written by
//! `cargo run --example gen_corpus` in `fuzz/`); what the run discovers goes to
//! `fuzz/target/corpus-work/<target>/`, so the checked-in corpus only changes on purpose.
//!
//! cargo-fuzz passes `-Z` flags to rustc; on a stable toolchain `RUSTC_BOOTSTRAP=1` allows
//! them, so no nightly is needed.

use crate::util::{run, run_quiet, spinner, step, Ctx};
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// Every fuzz target, in the order they run.
pub const TARGETS: &[&str] = &["link_decoder", "ctrl_request", "ctrl_response"];

/// Seconds per target in `cargo xtask test` (three targets: about a minute in all).
pub const DEFAULT_SECONDS: u64 = 20;

/// What one bounded run did.
#[derive(Debug, Clone, PartialEq)]
pub struct FuzzRun {
    /// The target.
    pub target: &'static str,
    /// Inputs executed.
    pub execs: u64,
    /// libFuzzer's average executions per second.
    pub execs_per_sec: f64,
    /// Seconds the run lasted.
    pub seconds: u64,
}

/// A `cargo fuzz …` command in `fuzz/` with the stable-toolchain escape hatch set.
fn cargo_fuzz(ctx: &Ctx) -> Command {
    let mut c = ctx.cargo();
    c.current_dir(ctx.root.join("fuzz")).env("RUSTC_BOOTSTRAP", "1").arg("fuzz");
    c
}

/// Installs cargo-fuzz if `cargo fuzz` is missing (for `cargo xtask setup`).
pub fn ensure_cargo_fuzz(ctx: &Ctx) -> Result<()> {
    let have = cargo_fuzz(ctx).arg("--version").output().is_ok_and(|o| o.status.success());
    if !have {
        step("installing cargo-fuzz (cargo install cargo-fuzz --locked)");
        run(ctx.cargo().args(["install", "cargo-fuzz", "--locked"]))
            .context("installing cargo-fuzz; check network access to crates.io")?;
    }
    Ok(())
}

/// Reads `stat::<name>: <value>` from libFuzzer's `-print_final_stats=1` output.
fn stat(log: &str, name: &str) -> Option<f64> {
    let key = format!("stat::{name}:");
    log.lines().rev().find_map(|l| l.trim().strip_prefix(&key)).and_then(|v| v.trim().parse().ok())
}

/// Builds every target once, then runs each for `seconds`.
pub fn fuzz(ctx: &Ctx, seconds: u64) -> Result<Vec<FuzzRun>> {
    ensure_cargo_fuzz(ctx)?;
    step("fuzz: building the targets (cargo fuzz build, instrumented)");
    run_quiet("cargo fuzz build", cargo_fuzz(ctx).arg("build"))
        .context("building the fuzz targets (fuzz/); see the output above")?;
    let fuzz_dir = ctx.root.join("fuzz");
    let mut runs = Vec::new();
    for &target in TARGETS {
        runs.push(run_one(ctx, &fuzz_dir, target, seconds)?);
    }
    for r in &runs {
        println!(
            "fuzz {:<14} {:>3} s  {:>10} execs  {:>9.0} execs/s",
            r.target, r.seconds, r.execs, r.execs_per_sec
        );
    }
    Ok(runs)
}

fn run_one(ctx: &Ctx, fuzz_dir: &Path, target: &'static str, seconds: u64) -> Result<FuzzRun> {
    let work = fuzz_dir.join("target/corpus-work").join(target);
    let artifacts = fuzz_dir.join("artifacts").join(target);
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    std::fs::create_dir_all(&artifacts).with_context(|| format!("creating {}", artifacts.display()))?;
    let seeds = fuzz_dir.join("corpus").join(target);
    let mut cmd = cargo_fuzz(ctx);
    cmd.args(["run", target])
        // New inputs go to the first directory; the checked-in seeds are only read.
        .arg(&work)
        .arg(&seeds)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .args(["-print_final_stats=1", "-timeout=10", "-rss_limit_mb=2048", "-max_len=16384"]);
    let pb = spinner(&format!("fuzz {target} for {seconds} s"));
    let out = cmd.output().with_context(|| format!("starting {cmd:?}"))?;
    pb.finish_and_clear();
    let log = String::from_utf8_lossy(&out.stderr);
    std::fs::write(fuzz_dir.join("target").join(format!("{target}.log")), log.as_bytes()).ok();
    if !out.status.success() {
        let crash = log
            .lines()
            .find_map(|l| l.split("Test unit written to ").nth(1))
            .map(str::trim)
            .unwrap_or("(no artifact written)")
            .to_string();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        eprintln!("{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        bail!(
            "fuzz target {target} failed ({}): crashing input {crash}; reproduce with \
             `cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run {target} {crash}`, then add the input \
             to fuzz/corpus/{target}/ once fixed",
            out.status
        );
    }
    Ok(FuzzRun {
        target,
        execs: stat(&log, "number_of_executed_units").unwrap_or(0.0) as u64,
        execs_per_sec: stat(&log, "average_exec_per_sec").unwrap_or(0.0),
        seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_final_stats() {
        let log = "#1234 DONE cov: 1\nstat::number_of_executed_units: 456789\nstat::average_exec_per_sec:   22839\n";
        assert_eq!(stat(log, "number_of_executed_units"), Some(456_789.0));
        assert_eq!(stat(log, "average_exec_per_sec"), Some(22_839.0));
        assert_eq!(stat(log, "peak_rss_mb"), None);
    }
}
