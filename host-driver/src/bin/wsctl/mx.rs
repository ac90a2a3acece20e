//! `wsctl mx`: what MemoryX's weight store holds, and freeing it (docs/host.md "wsctl mx").
//! Every training job releases its layers when it ends and replaces what an earlier one left,
//! so these are for looking, and for a board whose host process died mid-job.

use anyhow::{Context, Result};
use host_driver::link::Config;
use host_driver::optim::board::{layer_list, optimizer_name};
use host_driver::report::Table;
use ws_common::ctrl::cmd::{MxInfo, MxLayers, MxRelease};

use crate::ctx::Ctx;

#[derive(Debug, clap::Subcommand)]
pub enum MxCmd {
    /// The store's size and use, and a table of the layers in it.
    Status,
    /// Release every layer (or those of --layers): the streamer disables them and their
    /// store is freed.
    Clear {
        /// Only these layers, as a bit mask (0x5 = layers 0 and 2).
        #[arg(long, value_parser = host_driver::parse::parse_mask16, default_value = "0xffff")]
        layers: u16,
    },
}

/// Tells the user that opening the board released layers an earlier job left.
pub fn note_released(mask: u16) {
    if mask != 0 {
        eprintln!("note: released MemoryX layers {} left on the board by an earlier job", layer_list(mask));
    }
}

pub fn run(ctx: &Ctx, cmd: MxCmd) -> Result<()> {
    let (_, mut link) = ctx.link_v2(Config::default())?;
    let (timeout, retries) = (ctx.timeout(), ctx.global.retries);
    if let MxCmd::Clear { layers } = cmd {
        let before = link.request(&MxInfo, timeout, retries).context("reading MemoryX (MxInfo)")?;
        let gone = before.layers & layers;
        link.request(&MxRelease { layers }, timeout, retries).context("releasing layers (MxRelease)")?;
        if gone == 0 {
            println!("no layers to release");
        } else {
            println!("released layers {}", layer_list(gone));
        }
    }
    let info = link.request(&MxInfo, timeout, retries).context("reading MemoryX (MxInfo)")?;
    let list = link.request(&MxLayers, timeout, retries).context("listing MemoryX's layers (MxLayers)")?;
    let used = info.store_bytes - info.free_bytes;
    println!(
        "store        {} KiB, {} bytes in use ({:.1} %), {} free",
        info.store_bytes / 1024,
        used,
        100.0 * f64::from(used) / f64::from(info.store_bytes.max(1)),
        info.free_bytes
    );
    println!("layer table  {} of {} entries", list.count, info.max_layers);
    if list.count > 0 {
        let mut t = Table::new(["layer", "params", "optimizer", "arrays", "step", "bytes"]);
        for l in list.as_slice() {
            let arrays: Vec<&str> = ["w", "m", "v", "vmax"]
                .iter()
                .enumerate()
                .filter(|(i, _)| l.arrays & (1 << i) != 0)
                .map(|(_, a)| *a)
                .collect();
            t.row([
                l.layer.to_string(),
                l.len.to_string(),
                optimizer_name(l.opt).to_string(),
                arrays.join(","),
                l.at.to_string(),
                l.bytes.to_string(),
            ]);
        }
        print!("{}", t.render());
        println!("free them with `wsctl mx clear`");
    }
    Ok(())
}
