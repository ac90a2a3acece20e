//! `cargo xtask bench` (filled in below).
use crate::util::Ctx;
use anyhow::Result;
pub fn bench(_ctx: &Ctx) -> Result<()> {
    anyhow::bail!("bench: not yet wired")
}
