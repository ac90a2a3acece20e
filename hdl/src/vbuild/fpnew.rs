//! FPnew and the PULP common cells, from the installed CV32E40P package, for blocks that do
//! floating-point maths (SwarmX's adder tree, later the MemoryX optimizer lanes).
//!
//! docs/architecture.md ("Floating point") fixes FPnew as the FP unit. It ships inside
//! `pythondata-cpu-cv32e40p` (in the project venv, never copied into the repository) under
//! `rtl/vendor/pulp_platform_fpnew/` and `rtl/vendor/pulp_platform_common_cells/`. The file
//! list comes from the package's own `cv32e40p_fpu_manifest.flist`, so a package upgrade that
//! moves a file shows up here as an error naming the manifest, not as a stale path.
//!
//! ```no_run
//! use ws_hdl::dut::BlockSpec;
//! let fp = ws_hdl::vbuild::fpnew::fma_sources().unwrap();
//! let spec = BlockSpec::new("ws_swarm_fp32")
//!     .files(fp.sources.iter().cloned())
//!     .file("hdl/rtl/ws_swarm_fp32.v");
//! let spec = fp.include_dirs.iter().fold(spec, |s, d| s.include_dir(d));
//! ```

use std::path::PathBuf;

use super::soc::check_cpu_package;
use super::BuildError;
use crate::paths;

/// The package manifest the file list is read from, relative to the package's
/// `system_verilog/` directory.
pub const FPU_MANIFEST: &str = "cv32e40p_fpu_manifest.flist";

/// Repo-relative Verilator configuration with the lint waivers for FPnew and common_cells.
pub const FPNEW_VLT: &str = "hdl/lint/fpnew.vlt";

/// What `fpnew_fma` needs, in compile order (packages first). Names are matched against the
/// manifest's entries by file name.
const FMA_FILES: &[&str] =
    &["cf_math_pkg.sv", "fpnew_pkg.sv", "lzc.sv", "fpnew_classifier.sv", "fpnew_rounding.sv", "fpnew_fma.sv"];

/// Absolute source files and include directories of FPnew (or a part of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FpnewSources {
    /// Sources in compile order, packages first.
    pub sources: Vec<PathBuf>,
    /// `+incdir+` directories (common_cells' `include/`, for `registers.svh`).
    pub include_dirs: Vec<PathBuf>,
    /// Verilator configuration with the third-party lint waivers ([`FPNEW_VLT`]).
    pub vlt_files: Vec<PathBuf>,
}

/// Everything `fpnew_top` needs (all operation groups, the T-Head divider/square root
/// included), in the manifest's order.
pub fn sources() -> Result<FpnewSources, BuildError> {
    let pkg = check_cpu_package()?;
    let manifest = pkg.join(FPU_MANIFEST);
    let text = std::fs::read_to_string(&manifest)
        .map_err(|source| BuildError::Input { path: manifest.clone(), source })?;
    let rtl = pkg.join("rtl");
    let mut sources = Vec::new();
    let mut include_dirs = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("//") {
            continue;
        }
        let (is_inc, entry) = match line.strip_prefix("+incdir+") {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        if !(entry.contains("pulp_platform_fpnew") || entry.contains("pulp_platform_common_cells")) {
            continue;
        }
        let rel = entry.replace("${DESIGN_RTL_DIR}/", "");
        let path = rtl.join(rel);
        if !path.exists() {
            return Err(BuildError::SocFiles {
                path: manifest.clone(),
                msg: format!(
                    "lists {} which does not exist: reinstall the package with `cargo xtask setup`",
                    path.display()
                ),
            });
        }
        if is_inc {
            include_dirs.push(path);
        } else {
            sources.push(path);
        }
    }
    if sources.is_empty() {
        return Err(BuildError::SocFiles {
            path: manifest,
            msg: "names no FPnew sources: is this pythondata-cpu-cv32e40p==1.0.1.post1909?".into(),
        });
    }
    Ok(FpnewSources { sources, include_dirs, vlt_files: vec![paths::in_workspace(FPNEW_VLT)] })
}

/// The subset for a bare `fpnew_fma` (add, multiply, FMA of one format): the packages, the
/// leading-zero counter, the classifier, the rounding unit and the FMA itself. `fpnew_fma.sv`
/// is taken from FPnew's `src/` directory, next to the manifest's `fpnew_pkg.sv`.
pub fn fma_sources() -> Result<FpnewSources, BuildError> {
    let all = sources()?;
    // The manifest configures CV32E40P's multi-format FMA; the single-format `fpnew_fma.sv`
    // sits beside it in FPnew's `src/` but is not listed, so look there too.
    let fpnew_src = all
        .sources
        .iter()
        .find(|p| p.file_name().is_some_and(|n| n == "fpnew_pkg.sv"))
        .and_then(|p| p.parent())
        .map(PathBuf::from);
    let mut picked = Vec::new();
    for want in FMA_FILES {
        let listed = all.sources.iter().find(|p| p.file_name().is_some_and(|n| n == *want)).cloned();
        let beside = fpnew_src.as_ref().map(|d| d.join(want)).filter(|p| p.is_file());
        match listed.or(beside) {
            Some(p) => picked.push(p),
            None => {
                return Err(BuildError::SocFiles {
                    path: paths::cpu_package_dir().join(FPU_MANIFEST),
                    msg: format!(
                        "does not list {want}, which fpnew_fma needs, and it is not beside fpnew_pkg.sv"
                    ),
                })
            }
        }
    }
    Ok(FpnewSources { sources: picked, ..all })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fma_subset_is_in_compile_order() {
        if check_cpu_package().is_err() {
            eprintln!("skipped: the CV32E40P package is not installed");
            return;
        }
        let fp = fma_sources().unwrap();
        let names: Vec<String> =
            fp.sources.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, FMA_FILES);
        assert!(fp.include_dirs.iter().any(|d| d.join("common_cells/registers.svh").is_file()));
        let all = sources().unwrap();
        assert!(all.sources.iter().any(|p| p.ends_with("fpnew_top.sv")));
    }
}
