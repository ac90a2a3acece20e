//! `wsctl flash [--via jtag|link] [ELF]`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use host_driver::flash::{flash_elf, ElfImage, FlashStep};
use host_driver::loader::{self, FirmwareImage};
use host_driver::workspace;
use indicatif::{ProgressBar, ProgressStyle};

use crate::ctx::Ctx;
use crate::jtag_opts::JtagOpts;

/// The two ways an ELF reaches RAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Via {
    /// The debug module, over JTAG (probe-rs): works whatever the firmware is doing.
    Jtag,
    /// The boot ROM's loader, over the host link.
    Link,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The firmware ELF [default: target/riscv32imc-unknown-none-elf/release/ws-firmware].
    #[arg(value_name = "ELF")]
    elf: Option<PathBuf>,
    /// How to load it.
    #[arg(long, value_enum, default_value_t = Via::Jtag)]
    via: Via,
    #[command(flatten)]
    jtag: JtagOpts,
}

pub fn run(ctx: &Ctx, a: Args) -> Result<()> {
    let path = a.elf.unwrap_or_else(workspace::default_elf);
    match a.via {
        Via::Jtag => jtag(ctx, &a.jtag, &path),
        Via::Link => link(ctx, &path),
    }
}

fn bar(total: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:>9} [{bar:32}] {bytes}/{total_bytes} {binary_bytes_per_sec} {elapsed}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

fn jtag(ctx: &Ctx, opts: &JtagOpts, path: &std::path::Path) -> Result<()> {
    let image = ElfImage::read(path)?;
    let mut dbg = opts.debugger(ctx)?;
    // Refuse before anything is written (flash_elf checks again; this gives the message first).
    image.check_ram(dbg.target())?;
    println!(
        "flashing {} ({} bytes in {} segments, entry {:#010x}) through {}",
        path.display(),
        image.bytes(),
        image.segments.iter().filter(|s| !s.data.is_empty()).count(),
        image.entry,
        dbg.probe()
    );
    let mut current: Option<ProgressBar> = None;
    let mut on_step = |s: FlashStep| match s {
        FlashStep::Halting => {}
        FlashStep::Writing { done, total } | FlashStep::Verifying { done, total } => {
            let what = if matches!(s, FlashStep::Writing { .. }) { "writing" } else { "verifying" };
            if done == 0 {
                if let Some(b) = current.take() {
                    b.finish();
                }
                current = Some(bar(total, what));
            }
            if let Some(b) = &current {
                b.set_position(done);
            }
        }
        FlashStep::Starting => {
            if let Some(b) = current.take() {
                b.finish();
            }
        }
    };
    let r =
        flash_elf(&mut dbg, &image, &mut on_step).with_context(|| format!("flashing {}", path.display()))?;
    println!(
        "flashed and verified {} bytes ({} sent as whole words) in {:.2} s (write {:.1} KiB/s); started at {:#010x}",
        r.bytes,
        r.written,
        r.total.as_secs_f64(),
        r.write_bytes_per_s() / 1024.0,
        r.entry
    );
    match &image.boot {
        Ok(_) => println!("boot header written: the boot ROM boots this image after a reset"),
        Err(why) => println!("note: no boot header ({why}); the image runs until the next reset"),
    }
    Ok(())
}

fn link(ctx: &Ctx, path: &std::path::Path) -> Result<()> {
    let image = FirmwareImage::read(path)?;
    let (board, _, mut client) = ctx.client()?;
    let b = bar(image.bytes.len() as u64, "sending");
    let mut on_step = |p: loader::Progress| match p {
        loader::Progress::ResettingIntoLoader => b.set_message("resetting"),
        loader::Progress::Started { total } => {
            b.set_length(total as u64);
            b.set_message("sending");
        }
        loader::Progress::Sent { done } => b.set_position(done as u64),
        loader::Progress::Booting => {
            b.set_message("booting");
            b.enable_steady_tick(Duration::from_millis(100));
        }
    };
    let r = loader::flash_via_link(&mut client, &image, &mut on_step).with_context(|| {
        format!("flashing {} over the host link of board `{}`", path.display(), board.name)
    })?;
    b.finish();
    println!(
        "loaded {} bytes in {} frames at {:.1} KiB/s; the new firmware answered after {:.2} s",
        r.bytes,
        r.chunks,
        r.bytes_per_second() / 1024.0,
        r.total.as_secs_f64()
    );
    Ok(())
}
