//! `wsctl sim start | stop | status`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use host_driver::report;
use host_driver::sim::{self, SimHome, StartOptions, StopHow};
use host_driver::workspace;

use crate::ctx::Ctx;

#[derive(Debug, clap::Subcommand)]
pub enum SimCmd {
    /// Start ws-sim in the background (state in target/ws-sim/state.json, output in sim.log).
    Start(StartArgs),
    /// Stop the background simulator (quit, then SIGTERM, then SIGKILL).
    Stop,
    /// Show the background simulator: pid, ports, cycle, speed, traffic.
    Status,
}

#[derive(Debug, clap::Args)]
pub struct StartArgs {
    /// Firmware ELF to run [default: target/riscv32imc-unknown-none-elf/release/ws-firmware]
    #[arg(long, value_name = "PATH")]
    elf: Option<PathBuf>,
    /// Verilator threads of the model.
    #[arg(long, value_name = "N")]
    threads: Option<u32>,
    /// Dump FST waves into this file.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// First of the four ports [default: the board's link.port_base]; 0 = ephemeral.
    #[arg(long, value_name = "P")]
    port_base: Option<u16>,
    /// Run in this terminal instead (Ctrl-C stops it; no state file is written).
    #[arg(long)]
    foreground: bool,
    /// Return at READY instead of waiting for the firmware to answer a ping (a board left
    /// in its boot ROM's loader, or one to attach a debugger to before it boots).
    #[arg(long)]
    no_boot_wait: bool,
    /// The simulated cycles the firmware may take to answer its first ping
    /// [default: WS_SIM_BOOT_CYCLES or 50000000].
    #[arg(long, value_name = "CYCLES")]
    boot_cycles: Option<u64>,
}

pub fn run(ctx: &Ctx, cmd: SimCmd) -> Result<()> {
    let home = SimHome::default();
    match cmd {
        SimCmd::Start(a) => start(ctx, &home, a),
        SimCmd::Stop => stop(&home),
        SimCmd::Status => {
            let s = home.status()?;
            print!("{}", report::sim_status_report(&s));
            Ok(())
        }
    }
}

fn start(ctx: &Ctx, home: &SimHome, a: StartArgs) -> Result<()> {
    let board = ctx.board()?;
    board.sim_link().context("`wsctl sim start` needs a sim board")?;
    let mut opts = StartOptions::new(a.elf.unwrap_or_else(workspace::default_elf), &board.path);
    opts.threads = a.threads;
    opts.trace = a.trace;
    opts.port_base = a.port_base;
    opts.boot_cycles = match (a.no_boot_wait, a.boot_cycles) {
        (true, _) => None,
        (false, c) => Some(c.unwrap_or_else(sim::boot_cycles)),
    };
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancel);
    ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))
        .context("installing the Ctrl-C handler")?;
    opts.cancel = Some(cancel);
    if a.foreground {
        let status = sim::run_foreground(&opts)?;
        if !status.success() {
            bail!("ws-sim exited with {status}");
        }
        return Ok(());
    }
    opts.progress = true;
    let started = home.start(&opts)?;
    for n in &started.notes {
        eprintln!("note: {n}");
    }
    let s = &started.state;
    let booted = match started.booted {
        Some((cycles, wall)) => format!(
            "firmware answering at cycle {:.2} M, {:.1} s after READY",
            cycles as f64 / 1e6,
            wall.as_secs_f64()
        ),
        None => "not waited for boot".into(),
    };
    println!("ws-sim running ({booted}): pid {}, link {}, log {}, ctrl {}", s.pid, s.link, s.log, s.ctrl);
    println!("output: {}; stop it with `wsctl sim stop`", s.sim_log.display());
    Ok(())
}

fn stop(home: &SimHome) -> Result<()> {
    let s = home.stop()?;
    let pid = s.state.pid;
    match s.how {
        StopHow::Quit => match s.cycle {
            Some(c) => println!("ws-sim (pid {pid}) quit at cycle {c}"),
            None => println!("ws-sim (pid {pid}) quit"),
        },
        StopHow::Terminated => println!("ws-sim (pid {pid}) did not quit; stopped it with SIGTERM"),
        StopHow::Killed => println!("ws-sim (pid {pid}) ignored SIGTERM; killed it"),
        StopHow::AlreadyGone => println!("ws-sim (pid {pid}) had already exited; removed its state file"),
        StopHow::PidReused => {
            println!("pid {pid} now belongs to another program, left alone; removed the stale state file")
        }
    }
    Ok(())
}
