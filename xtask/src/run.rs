//! `cargo xtask run` and `cargo xtask sim`.
//!
//! `run` drives the board the way a person would, with the real CLI, and echoes each
//! command so it can be repeated by hand: start the simulator with the firmware (it returns
//! once the board answers), then the main job's commands (`host_driver::main_run`): the
//! identity table, the optimizer half of a training run (three wafers' gradients summed by
//! SwarmX into MemoryX's Adam, checked word for word against the golden model), SwarmX's port
//! table, whole mesh steps, a training run on the wafer with MemoryX and SwarmX in the loop,
//! MemoryX's store, and `wsctl train` on the digits (two wafers, held-out accuracy, curves and a
//! checkpoint under `target/run/train/`); then the decoded firmware log, and stop.

use crate::util::{step, Ctx};
use anyhow::{bail, Context, Result};
use std::process::Command;

/// The main run's training: three epochs of the digits (132 steps, each epoch's end
/// evaluated on the test split).
const TRAIN: host_driver::main_run::TrainLength = host_driver::main_run::TrainLength::Epochs(3);

fn wsctl(ctx: &Ctx, args: &[&str]) -> Result<()> {
    eprintln!("\x1b[2m$ wsctl {}\x1b[0m", args.join(" "));
    let status = Command::new(ctx.bin("wsctl"))
        .current_dir(&ctx.root)
        .args(args)
        .status()
        .with_context(|| format!("starting {}", ctx.bin("wsctl").display()))?;
    if !status.success() {
        bail!("`wsctl {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

pub fn run(ctx: &Ctx) -> Result<()> {
    let elf = ctx.firmware_elf();
    let elf = elf.to_str().context("firmware path is not UTF-8")?;
    step("boot the simulated board");
    // A simulator left running by an earlier `wsctl sim start` would hold the ports and the
    // old firmware; replace it.
    let _ = Command::new(ctx.bin("wsctl")).current_dir(&ctx.root).args(["sim", "stop"]).output();
    // Returns once the firmware answers (a wait bounded in simulated cycles).
    wsctl(ctx, &["sim", "start", "--elf", elf])?;
    let result = (|| {
        // The main job's commands, the list the jobs_in_a_row regression test runs too.
        for job in host_driver::main_run::jobs(&ctx.root.join("target/run"), 1, TRAIN) {
            if let Some(title) = job.title {
                step(title);
            }
            let args: Vec<&str> = job.args.iter().map(String::as_str).collect();
            wsctl(ctx, &args)?;
        }
        step("firmware log (defmt, decoded against the ELF)");
        wsctl(ctx, &["logs", "--elf", elf])?;
        step("simulator");
        wsctl(ctx, &["sim", "status"])
    })();
    let stopped = wsctl(ctx, &["sim", "stop"]);
    result?;
    stopped
}

pub fn sim(ctx: &Ctx, args: &[String]) -> Result<()> {
    let status = Command::new(ctx.bin("ws-sim"))
        .current_dir(&ctx.root)
        .arg("--elf")
        .arg(ctx.firmware_elf())
        .args(args)
        .status()
        .context("starting ws-sim")?;
    if !status.success() {
        bail!("ws-sim exited with {status}");
    }
    Ok(())
}
