//! The SoC model spec, from the RTL engineer's file list `hdl/soc_files.toml`.
//!
//! The file list names the CV32E40P package files (relative to the package's `system_verilog/`
//! directory, which lives in the project venv and is never copied into the repository) and our
//! own RTL (relative to the repository). Simulation builds add the package's latch-based clock
//! gate (`package_sim_files`), our `hdl/sim/sim.vlt` with the `public_flat_*` hooks the shim
//! needs, and the shim `hdl/sim/ws_soc_shim.cpp`.

use std::path::PathBuf;

use serde::Deserialize;

use super::fingerprint::{hex, sources_hash};
use super::{BuildError, ModelSpec, OptLevel};
use crate::paths;

/// Repo-relative path of the file list.
pub const SOC_FILES: &str = "hdl/soc_files.toml";
/// Repo-relative path of our Verilator config with the shim's public signals.
pub const SIM_VLT: &str = "hdl/sim/sim.vlt";
/// Repo-relative path of the SoC shim.
pub const SOC_SHIM: &str = "hdl/sim/ws_soc_shim.cpp";
/// Repo-relative path of the boot ROM image, a build artifact: `cargo xtask build` builds
/// `firmware/bootrom` and writes it. It is not checked in because the ROM's bytes depend on
/// where the checkout lives (cargo's crate hashes order the sections), not only on its code.
pub const BOOTROM_HEX: &str = "target/bootrom/bootrom.hex";

/// `hdl/soc_files.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocFiles {
    /// Top module (`ws_soc`).
    pub top: String,
    /// Include directories inside the package.
    #[serde(default)]
    pub package_incdirs: Vec<PathBuf>,
    /// Package sources for every build.
    #[serde(default)]
    pub package_files: Vec<PathBuf>,
    /// Package sources for simulation only (the latch clock gate).
    #[serde(default)]
    pub package_sim_files: Vec<PathBuf>,
    /// Our RTL, repo-relative.
    #[serde(default)]
    pub rtl_files: Vec<PathBuf>,
    /// FPGA-only RTL (the pass-through clock gate); not used by simulation.
    #[serde(default)]
    pub fpga_files: Vec<PathBuf>,
    /// Verilator configuration files, repo-relative.
    #[serde(default)]
    pub vlt_files: Vec<PathBuf>,
    /// Add FPnew's FMA (MemoryX's optimizer lanes) from the package's FPU manifest.
    #[serde(default)]
    pub fpnew_fma: bool,
}

impl SocFiles {
    /// Reads `hdl/soc_files.toml` from the workspace.
    pub fn load() -> Result<SocFiles, BuildError> {
        let path = paths::in_workspace(SOC_FILES);
        let text = std::fs::read_to_string(&path).map_err(|e| BuildError::SocFiles {
            path: path.clone(),
            msg: format!(
                "cannot read the SoC file list ({e}); it is written with the SoC RTL in hdl/rtl/ (see docs/soc.md)"
            ),
        })?;
        toml::from_str(&text).map_err(|e| BuildError::SocFiles { path, msg: format!("malformed: {e}") })
    }

    /// Absolute paths of the package sources for a simulation build, in order: packages,
    /// core, debug, then the simulation-only files.
    pub fn package_sources(&self) -> Vec<PathBuf> {
        let pkg = paths::cpu_package_dir();
        self.package_files.iter().chain(self.package_sim_files.iter()).map(|f| pkg.join(f)).collect()
    }

    /// Absolute include directories inside the package.
    pub fn package_include_dirs(&self) -> Vec<PathBuf> {
        let pkg = paths::cpu_package_dir();
        self.package_incdirs.iter().map(|d| pkg.join(d)).collect()
    }
}

/// Options of the SoC simulation model.
#[derive(Debug, Clone)]
pub struct SocBuild {
    /// Verilator `--threads`.
    pub threads: u32,
    /// FST trace support.
    pub trace_fst: bool,
    /// C++ optimisation.
    pub opt: OptLevel,
    /// Cache root override.
    pub cache_root: Option<PathBuf>,
    /// Wafer meshes on SwarmX (`ws_soc`'s WAFERS, 1..=[`MAX_WAFERS`]; docs/mesh-array.md
    /// "Several wafers").
    pub wafers: u32,
}

/// Wafers of the default simulated board.
pub const DEFAULT_WAFERS: u32 = 2;
/// The most wafers a SoC carries (SwarmX's four downstream ports).
pub const MAX_WAFERS: u32 = 4;

impl Default for SocBuild {
    fn default() -> Self {
        SocBuild {
            threads: 1,
            trace_fst: false,
            opt: OptLevel::Release,
            cache_root: None,
            wafers: DEFAULT_WAFERS,
        }
    }
}

/// Checks that the CV32E40P package is installed.
pub fn check_cpu_package() -> Result<PathBuf, BuildError> {
    let pkg = paths::cpu_package_dir();
    if pkg.join("rtl").is_dir() {
        Ok(pkg)
    } else {
        Err(BuildError::ToolMissing {
            what: format!("the CV32E40P package at {}", pkg.display()),
            fix: "run `cargo xtask setup` (pip installs pythondata-cpu-cv32e40p into <workspace>/.venv)"
                .into(),
        })
    }
}

/// The model spec of the simulated SoC.
pub fn soc_spec(opts: &SocBuild) -> Result<ModelSpec, BuildError> {
    check_cpu_package()?;
    let files = SocFiles::load()?;
    if !(1..=MAX_WAFERS).contains(&opts.wafers) {
        return Err(BuildError::SocFiles {
            path: paths::in_workspace(SOC_FILES),
            msg: format!("{} wafers: the SoC carries 1 to {MAX_WAFERS} (SwarmX's ports)", opts.wafers),
        });
    }
    let mut name = format!("{}-t{}-w{}", files.top, opts.threads.max(1), opts.wafers);
    if opts.trace_fst {
        name.push_str("-fst");
    }
    let mut spec = ModelSpec::new(name, files.top.clone());
    spec.sources = files.package_sources();
    spec.include_dirs = files.package_include_dirs();
    spec.vlt_files = files.vlt_files.iter().map(paths::in_workspace).collect();
    if files.fpnew_fma {
        let fp = super::fpnew::fma_sources()?;
        for src in fp.sources {
            if !spec.sources.contains(&src) {
                spec.sources.push(src);
            }
        }
        spec.include_dirs.extend(fp.include_dirs);
        spec.include_dirs.push(paths::in_workspace(crate::mesh::RTL_INCLUDE_DIR));
        spec.vlt_files.extend(fp.vlt_files);
    }
    spec.sources.extend(files.rtl_files.iter().map(paths::in_workspace));
    spec.vlt_files.push(paths::in_workspace(SIM_VLT));
    spec.shim_files = vec![paths::in_workspace(SOC_SHIM)];
    spec.threads = opts.threads.max(1);
    spec.trace_fst = opts.trace_fst;
    spec.opt = opts.opt;
    spec.cache_root = opts.cache_root.clone();

    // BUILD_HASH: the first 32 bits of SHA-256 over the HDL the model is built from
    // (sysinfo.toml BUILD_HASH), boot ROM image included.
    let bootrom = paths::in_workspace(BOOTROM_HEX);
    if !bootrom.is_file() {
        return Err(BuildError::ToolMissing {
            what: format!("the boot ROM image {}", bootrom.display()),
            fix: "run `cargo xtask build`: it builds firmware/bootrom and writes the image".into(),
        });
    }
    let mut hashed = spec.sources.clone();
    hashed.push(bootrom.clone());
    let h = sources_hash(&hashed)?;
    spec.params.push(("BUILD_HASH".into(), format!("32'h{}", hex(&h[..4]))));
    // $readmemh resolves relative names against the simulator's working directory; pin the
    // image by absolute path so ws-sim runs from anywhere.
    spec.params.push(("BOOTROM_INIT".into(), format!("\"{}\"", bootrom.display())));
    spec.params.push(("WAFERS".into(), opts.wafers.to_string()));
    Ok(spec)
}

/// The first 32 bits of the SoC's source hash, as `soc_spec` passes it in `BUILD_HASH`.
pub fn build_hash_of(spec: &ModelSpec) -> Option<u32> {
    spec.params
        .iter()
        .find(|(k, _)| k == "BUILD_HASH")
        .and_then(|(_, v)| u32::from_str_radix(v.trim_start_matches("32'h"), 16).ok())
}
