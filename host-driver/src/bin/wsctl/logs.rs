//! `wsctl logs [--elf PATH] [--follow]`.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use host_driver::logs::{format_record, DefmtLog, LogRecord, LogStream};
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
