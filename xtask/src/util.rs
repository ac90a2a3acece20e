//! Small helpers shared by the xtask commands.

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Where the workspace is and how chatty to be.
#[derive(Debug)]
pub struct Ctx {
    pub root: PathBuf,
}

impl Ctx {
    pub fn new() -> Self {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("xtask lives in the workspace")
            .to_path_buf();
        Self { root }
    }

    /// The firmware ELF `cargo xtask build` produces.
    pub fn firmware_elf(&self) -> PathBuf {
        self.root.join("target/riscv32imc-unknown-none-elf/release/ws-firmware")
    }

    /// A `cargo` command run from the workspace root.
    pub fn cargo(&self) -> Command {
        let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        c.current_dir(&self.root);
        c
    }

    /// The workspace's built binaries (`target/release`).
    pub fn bin(&self, name: &str) -> PathBuf {
        self.root.join("target/release").join(name)
    }
}

/// Runs a command, failing with its command line when it fails.
pub fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !status.success() {
        bail!("command failed ({status}): {cmd:?}");
    }
    Ok(())
}

/// Runs a command behind a spinner; its output is shown only when it fails.
pub fn run_quiet(label: &str, cmd: &mut Command) -> Result<()> {
    let pb = spinner(label);
    let out = cmd.output().with_context(|| format!("starting {cmd:?}"))?;
    pb.finish_and_clear();
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stdout));
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        bail!("{label} failed ({}): {cmd:?}", out.status);
    }
    Ok(())
}

/// A spinner on stderr (hidden automatically when stderr is not a terminal).
pub fn spinner(label: &str) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("valid template"),
    );
    pb.set_message(label.to_string());
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

/// A section heading, so long output reads as steps.
pub fn step(msg: &str) {
    eprintln!("\x1b[1m==> {msg}\x1b[0m");
}
