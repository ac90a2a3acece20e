//! `wsctl halt | resume | regs`, and the JTAG arms of `wsctl reset --via jtag` and
//! `wsctl peek --via jtag`: debug steps through the debug module (docs/jtag.md).

use anyhow::Result;

use crate::ctx::Ctx;
use crate::jtag_opts::JtagOpts;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    jtag: JtagOpts,
}

/// `wsctl halt`.
pub fn halt(ctx: &Ctx, a: Args) -> Result<()> {
    let mut dbg = a.jtag.debugger(ctx)?;
    let pc = dbg.halt()?;
    println!("halted at pc {pc:#010x}; `wsctl resume` lets it go on");
    Ok(())
}

/// `wsctl resume`.
pub fn resume(ctx: &Ctx, a: Args) -> Result<()> {
    let mut dbg = a.jtag.debugger(ctx)?;
    let before = dbg.state()?;
    dbg.resume()?;
    println!("{} -> {}", before, dbg.state()?);
    Ok(())
}

/// `wsctl regs`.
pub fn regs(ctx: &Ctx, a: Args) -> Result<()> {
    let mut dbg = a.jtag.debugger(ctx)?;
    let r = dbg.registers()?;
    print!("{r}");
    Ok(())
}

/// `wsctl reset --via jtag`: ndmreset through the debug module, then run.
pub fn reset(ctx: &Ctx, opts: &JtagOpts) -> Result<()> {
    let mut dbg = opts.debugger(ctx)?;
    dbg.reset()?;
    println!("reset through the debug module (ndmreset); the firmware reboots");
    Ok(())
}

/// `wsctl peek --via jtag`: system-bus reads, any address, running or halted.
pub fn peek(ctx: &Ctx, opts: &JtagOpts, addr: u32, len: usize) -> Result<()> {
    let mut dbg = opts.debugger(ctx)?;
    let data = dbg.read(u64::from(addr), len)?;
    print!("{}", host_driver::report::hexdump(addr, &data));
    Ok(())
}
