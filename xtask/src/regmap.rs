//! `cargo xtask regen`: the register map is written once, in `hdl/regmap/*.toml`, and
//! generated everywhere from here: Verilog CSR blocks, the SoC map include, Rust constants
//! for host and firmware, firmware accessors and the Markdown reference.

mod markdown;
mod model;
mod rust;
mod verilog;

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Every generated file with its content.
pub fn generate(root: &Path) -> Result<Vec<(PathBuf, String)>> {
    let m = model::load(&root.join("hdl/regmap"))?;
    let mut out = Vec::new();
    for b in m.blocks.iter().filter(|b| b.info.hand_rtl.is_none()) {
        out.push((root.join(format!("hdl/rtl/gen/ws_{}_csr.v", b.info.name)), verilog::csr_block(b)));
    }
    out.push((root.join("hdl/rtl/gen/ws_soc_map.vh"), verilog::soc_map(&m)));
    out.push((root.join("ws-common/src/regmap/generated.rs"), rust::constants(&m)));
    out.push((root.join("firmware/src/pac.rs"), rust::pac(&m)));
    out.push((root.join("docs/registers.md"), markdown::reference(&m)));
    Ok(out)
}

/// Writes the generated files, or with `check` only compares and fails on drift.
pub fn regen(root: &Path, check: bool) -> Result<()> {
    let files = generate(root)?;
    let mut stale = Vec::new();
    for (path, content) in &files {
        let current = std::fs::read_to_string(path).unwrap_or_default();
        if current != *content {
            if check {
                stale.push(path.strip_prefix(root).unwrap_or(path).display().to_string());
            } else {
                std::fs::create_dir_all(path.parent().context("generated path has a parent")?)?;
                std::fs::write(path, content).with_context(|| format!("writing {}", path.display()))?;
                println!("regen: wrote {}", path.strip_prefix(root).unwrap_or(path).display());
            }
        }
    }
    if !stale.is_empty() {
        anyhow::bail!(
            "generated files differ from hdl/regmap/*.toml: {}\n  fix: run `cargo xtask regen` and commit the result",
            stale.join(", ")
        );
    }
    Ok(())
}
