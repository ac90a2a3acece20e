//! `wsctl logs [--elf PATH] [--follow] [--link]`.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use host_driver::link::{Config, Link};
use host_driver::logs::{format_record, DefmtLog, LogDecoder, LogRecord, LogStream};
use host_driver::workspace;

use crate::ctx::Ctx;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Firmware ELF the board runs [default: target/riscv32imc-unknown-none-elf/release/ws-firmware]
    #[arg(long, value_name = "PATH")]
    elf: Option<PathBuf>,
    /// Keep printing new lines as they arrive (Ctrl-C to stop).
    #[arg(long, short = 'f')]
    follow: bool,
    /// Without --follow: stop once the log has been quiet this long.
    #[arg(long, default_value_t = 300, value_name = "MS")]
    quiet_ms: u64,
    /// Read the log from the link's log channel (protocol v2, channel 5) instead of the
    /// board's log UART: for boards whose UART is not wired to the host. The board keeps
    /// the first 4 KiB since boot until a host connects.
    #[arg(long)]
    link: bool,
}

fn print(r: &LogRecord) {
    match r {
        LogRecord::Line(_) => {
            println!("{}", format_record(r));
            let _ = std::io::stdout().flush();
        }
        LogRecord::Malformed(_) => eprintln!("{}", format_record(r)),
    }
}

pub fn run(ctx: &Ctx, a: Args) -> Result<()> {
    let elf = a.elf.unwrap_or_else(workspace::default_elf);
    let log = DefmtLog::from_elf(&elf)?;
    let (board, e) = ctx.endpoints()?;
    if a.link {
        let t =
            e.open_phy().with_context(|| format!("connecting to board `{}` ({})", board.name, e.source))?;
        // RESUME: reading the log must not restart the board's bulk streams.
        let cfg = Config { resume: true, ..Config::default() };
        let mut link = Link::connect(t, cfg, ctx.timeout())
            .with_context(|| format!("link v2 handshake with board `{}`", board.name))?;
        let mut dec = LogDecoder::new(log);
        let mut bytes = Vec::new();
        let mut quiet = Instant::now();
        loop {
            link.pump(Duration::from_millis(10))?;
            bytes.clear();
            if link.endpoint().take_log(&mut bytes) > 0 {
                quiet = Instant::now();
                for r in dec.push(&bytes) {
                    print(&r);
                }
            } else if !a.follow && quiet.elapsed() >= Duration::from_millis(a.quiet_ms) {
                break;
            }
        }
        let gaps = link.endpoint().stats().log_gaps;
        if gaps > 0 {
            eprintln!("wsctl logs: {gaps} gaps in the log channel: lines were lost");
        }
        return Ok(());
    }
    let mut stream = LogStream::connect(e.log, log)
        .with_context(|| format!("reading the log of board `{}` ({})", board.name, e.source))?;
    if a.follow {
        stream.follow(|r| {
            print(r);
            ControlFlow::Continue(())
        })?;
    } else {
        for r in stream.records_available(Duration::from_millis(a.quiet_ms))? {
            print(&r);
        }
    }
    Ok(())
}
