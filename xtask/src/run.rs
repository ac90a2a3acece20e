//! `cargo xtask run` and `cargo xtask sim`.
//!
//! `run` drives the board the way a person would, with the real CLI, and echoes each
//! command so it can be repeated by hand: start the simulator with the firmware, wait for
//! the board to answer, print its identity table, run the optimizer half of a training run
//! (three wafers' gradients summed by SwarmX into MemoryX's Adam, 20 steps, checked word for
//! word against the golden model), print SwarmX's port table and the decoded firmware log,
//! stop.

use crate::util::{step, Ctx};
use anyhow::{bail, Context, Result};
use std::process::Command;

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
    wsctl(ctx, &["sim", "start", "--elf", elf])?;
    let result = (|| {
        wsctl(ctx, &["ping", "--count", "3"])?;
        step("board identity");
        wsctl(ctx, &["info"])?;
        step("training run: 3 wafers' gradients summed by SwarmX, Adam applied by MemoryX, 20 steps");
        let dir = ctx.root.join("target/run");
        let d = |f: &str| dir.join(f).display().to_string();
        wsctl(ctx, &["optim", "example", "--wafers", "3", "--out-dir", &d("")])?;
        wsctl(
            ctx,
            &[
                "optim",
                "--model",
                &d("model.safetensors"),
                "--grads",
                &d("grads.safetensors"),
                "--steps",
                "20",
                "--optimizer",
                "adam",
                "--lr",
                "0.01",
                "--workers",
                "3",
                "--wafers",
                "3",
                "--out",
                &d("result.safetensors"),
                "--verify",
            ],
        )?;
        wsctl(ctx, &["swarm", "status"])?;
        step("wafer mesh: whole MLP training steps (forward, loss, backward) on the SoC's 2x2 mesh");
        wsctl(ctx, &["mesh", "step", "--dims", "16,24,12,5", "--batch-per-pe", "4", "--steps", "2"])?;
        step(
            "training run on the wafer: MemoryX streams the weights through SwarmX to the mesh, the mesh's \
             gradients go back through SwarmX into Adam, 20 steps",
        );
        wsctl(
            ctx,
            &[
                "mesh",
                "train",
                "--dims",
                "16,24,12,5",
                "--steps",
                "20",
                "--verify",
                "--checkpoint",
                &d("mesh.safetensors"),
            ],
        )?;
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
