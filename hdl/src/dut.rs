//! The block testbench harness: one RTL module, Verilated with chosen parameters, driven from
//! a Rust test.
//!
//! ```no_run
//! use ws_hdl::dut::{BlockSpec, Dut};
//! let spec = BlockSpec::new("ws_fifo").file("hdl/rtl/ws_fifo.v").param("DEPTH", 16);
//! let mut dut = Dut::build(&spec).unwrap();
//! let s_valid = dut.port("s_valid");
//! dut.reset(4);
//! dut.set(s_valid, 1);
//! dut.tick();
//! ```
//!
//! How it works: [`Dut::build`] hands the module to the cached builder ([`crate::vbuild`])
//! with a generated C++ shim ([`shim`]) that exposes the ports of `V<top>.h` through a flat C
//! ABI, and loads the library with `dlopen`. Every parameter set is its own cached library, so
//! a parameter sweep needs no rebuild of the test binary, and any number of models live in one
//! process. Block models are built with FST support only when waves are wanted
//! ([`BlockSpec::waves`], `WS_WAVES=1`): [`run_test`] reruns a failing test with waves on a
//! traced build of the same model.
//!
//! Helpers: [`StreamSource`] / [`StreamSink`] drive `s_*` / `m_*` valid/ready groups with
//! seeded random patterns and check no-drop/no-dup and the handshake rules; [`RegPort`]
//! drives the house register port of the CSR blocks (docs/soc.md "Bus").

pub mod ports;
mod regport;
mod run;
pub mod shim;
mod stream;

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use rand::rngs::StdRng;
use rand::SeedableRng;

pub use ports::Direction;
pub use regport::RegPort;
pub use run::{run_test, waves_requested};
pub use stream::{Beat, Pattern, StreamSink, StreamSource};

use crate::dl;
use crate::vbuild::{self, BuildError, BuildEvent, BuiltModel, ModelSpec, OptLevel};

/// One RTL module to test. Relative paths are taken from the workspace root.
#[derive(Debug, Clone, Default)]
pub struct BlockSpec {
    /// Top module.
    pub top: String,
    /// Its source files and those of its submodules.
    pub files: Vec<PathBuf>,
    /// `+incdir+` directories.
    pub include_dirs: Vec<PathBuf>,
    /// Parameters of the top module (`-G`), values as Verilog literals.
    pub params: Vec<(String, String)>,
    /// `+define+`s.
    pub defines: Vec<(String, Option<String>)>,
    /// Verilator configuration files (lint waivers).
    pub vlt_files: Vec<PathBuf>,
    /// Build a `-O0` model instead of `-O3` (faster to build, slower to run).
    pub debug_build: bool,
    /// Build the model with FST support. Off by default: Verilator's trace code is most of
    /// what a big model compiles (the 4×4 mesh: 13 MB of its 20 MB of C++), so a model is
    /// built with it only when waves are asked for (`WS_WAVES=1`) or a failing test is rerun
    /// with waves, which builds the traced variant beside the plain one.
    pub waves: bool,
    /// Cache root override (see [`crate::paths::default_cache_root`]).
    pub cache_root: Option<PathBuf>,
}

impl BlockSpec {
    /// A spec for module `top`.
    pub fn new(top: impl Into<String>) -> Self {
        BlockSpec { top: top.into(), ..Default::default() }
    }

    /// Adds a source file.
    pub fn file(mut self, path: impl Into<PathBuf>) -> Self {
        self.files.push(path.into());
        self
    }

    /// Adds source files.
    pub fn files<P: Into<PathBuf>>(mut self, paths: impl IntoIterator<Item = P>) -> Self {
        self.files.extend(paths.into_iter().map(Into::into));
        self
    }

    /// Sets a parameter of the top module.
    pub fn param(mut self, name: impl Into<String>, value: impl std::fmt::Display) -> Self {
        let name = name.into();
        self.params.retain(|(k, _)| *k != name);
        self.params.push((name, value.to_string()));
        self
    }

    /// Builds the model with FST support (see [`BlockSpec::waves`]).
    pub fn with_waves(mut self, on: bool) -> Self {
        self.waves = on;
        self
    }

    /// Adds an include directory.
    pub fn include_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.include_dirs.push(dir.into());
        self
    }

    /// Adds a `+define+`.
    pub fn define(mut self, name: impl Into<String>, value: Option<&str>) -> Self {
        self.defines.push((name.into(), value.map(str::to_string)));
        self
    }

    /// The vbuild spec of this block.
    pub fn model_spec(&self) -> ModelSpec {
        let mut name = self.top.clone();
        for (k, v) in &self.params {
            name.push_str(&format!("-{k}{v}"));
        }
        if name.len() > 80 {
            name.truncate(80);
        }
        let mut spec = ModelSpec::new(vbuild::sanitize(&name), self.top.clone());
        spec.sources = self.files.clone();
        spec.include_dirs = self.include_dirs.clone();
        spec.params = self.params.clone();
        spec.defines = self.defines.clone();
        spec.vlt_files = self.vlt_files.clone();
        spec.shim_generator = Some(shim::GENERATOR);
        spec.trace_fst = self.waves || waves_requested();
        spec.opt = if self.debug_build { OptLevel::Debug } else { OptLevel::Release };
        spec.cache_root = self.cache_root.clone();
        spec
    }
}

impl From<&BlockSpec> for BlockSpec {
    fn from(s: &BlockSpec) -> Self {
        s.clone()
    }
}

/// Why a DUT could not be built or loaded.
#[derive(Debug, thiserror::Error)]
pub enum DutError {
    /// The model did not build.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The library did not load.
    #[error("cannot load {lib}: {source}; delete {dir} to force a rebuild")]
    Load {
        /// The library.
        lib: PathBuf,
        /// Its model directory.
        dir: PathBuf,
        /// The loader error.
        source: libloading::Error,
    },
    /// The library speaks another shim ABI.
    #[error("{lib} has shim ABI {found}, this harness speaks {expected}; delete {dir} to rebuild it")]
    Abi {
        /// The library.
        lib: PathBuf,
        /// Its model directory.
        dir: PathBuf,
        /// ABI found.
        found: u32,
        /// ABI expected.
        expected: u32,
    },
    /// An FST file could not be opened.
    #[error("cannot open FST file {0}: check that its directory is writable")]
    Trace(PathBuf),
    /// The model was built without FST support.
    #[error("cannot dump waves into {0}: the model was built without FST support; build it with `BlockSpec::with_waves(true)` or set WS_WAVES=1")]
    NoWaves(PathBuf),
}

/// A port handle from [`Dut::port`]. Cheap to copy; valid for the DUT that made it (and
/// every DUT of the same model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Port {
    idx: u32,
    width: u32,
    dir: Direction,
}

impl Port {
    /// Width in bits.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Direction.
    pub fn direction(&self) -> Direction {
        self.dir
    }

    /// Number of 32-bit words of the value.
    pub fn words(&self) -> usize {
        self.width.div_ceil(32) as usize
    }

    /// All-ones mask of the port's width (for widths up to 64).
    pub fn mask(&self) -> u64 {
        if self.width >= 64 {
            u64::MAX
        } else {
            (1u64 << self.width) - 1
        }
    }
}

/// A top-level port of the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Name.
    pub name: String,
    /// Handle.
    pub port: Port,
}

type Handle = *mut c_void;

/// The shim's C ABI (see [`shim`]).
#[derive(Clone, Copy)]
struct Api {
    create: unsafe extern "C" fn() -> Handle,
    destroy: unsafe extern "C" fn(Handle),
    set: unsafe extern "C" fn(Handle, u32, u64),
    get: unsafe extern "C" fn(Handle, u32) -> u64,
    set_words: unsafe extern "C" fn(Handle, u32, *const u32, u32),
    get_words: unsafe extern "C" fn(Handle, u32, *mut u32, u32),
    eval: unsafe extern "C" fn(Handle),
    tick: unsafe extern "C" fn(Handle, u32, u64),
    time: unsafe extern "C" fn(Handle) -> u64,
    trace_open: unsafe extern "C" fn(Handle, *const c_char) -> i32,
    trace_close: unsafe extern "C" fn(Handle),
}

fn load_api(model: &BuiltModel) -> Result<(Api, Vec<PortInfo>), DutError> {
    let load_err = |source| DutError::Load { lib: model.lib.clone(), dir: model.dir.clone(), source };
    let lib = dl::open(&model.lib).map_err(load_err)?;
    // SAFETY: every type below is the exact signature the generated shim defines.
    unsafe {
        let abi: unsafe extern "C" fn() -> u32 = dl::sym(lib, "ws_dut_abi").map_err(load_err)?;
        let found = abi();
        if found != shim::ABI_VERSION {
            return Err(DutError::Abi {
                lib: model.lib.clone(),
                dir: model.dir.clone(),
                found,
                expected: shim::ABI_VERSION,
            });
        }
        let api = Api {
            create: dl::sym(lib, "ws_dut_create").map_err(load_err)?,
            destroy: dl::sym(lib, "ws_dut_destroy").map_err(load_err)?,
            set: dl::sym(lib, "ws_dut_set").map_err(load_err)?,
            get: dl::sym(lib, "ws_dut_get").map_err(load_err)?,
            set_words: dl::sym(lib, "ws_dut_set_words").map_err(load_err)?,
            get_words: dl::sym(lib, "ws_dut_get_words").map_err(load_err)?,
            eval: dl::sym(lib, "ws_dut_eval").map_err(load_err)?,
            tick: dl::sym(lib, "ws_dut_tick").map_err(load_err)?,
            time: dl::sym(lib, "ws_dut_time").map_err(load_err)?,
            trace_open: dl::sym(lib, "ws_dut_trace_open").map_err(load_err)?,
            trace_close: dl::sym(lib, "ws_dut_trace_close").map_err(load_err)?,
        };
        let count: unsafe extern "C" fn() -> u32 = dl::sym(lib, "ws_dut_port_count").map_err(load_err)?;
        let name: unsafe extern "C" fn(u32) -> *const c_char =
            dl::sym(lib, "ws_dut_port_name").map_err(load_err)?;
        let dir: unsafe extern "C" fn(u32) -> u32 = dl::sym(lib, "ws_dut_port_dir").map_err(load_err)?;
        let width: unsafe extern "C" fn(u32) -> u32 = dl::sym(lib, "ws_dut_port_width").map_err(load_err)?;
        let ports = (0..count())
            .map(|i| {
                let n = name(i);
                let n = if n.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(n).to_string_lossy().into_owned()
                };
                let dir = match dir(i) {
                    0 => Direction::Input,
                    1 => Direction::Output,
                    _ => Direction::Inout,
                };
                PortInfo { name: n, port: Port { idx: i, width: width(i), dir } }
            })
            .collect();
        Ok((api, ports))
    }
}

/// A running instance of a block model.
pub struct Dut {
    api: Api,
    handle: NonNull<c_void>,
    ports: Vec<PortInfo>,
    clk: Option<Port>,
    rst: Option<Port>,
    cycle: u64,
    model: BuiltModel,
    trace: Option<PathBuf>,
    seed: u64,
}

impl std::fmt::Debug for Dut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dut")
            .field("top", &self.model.top)
            .field("lib", &self.model.lib)
            .field("cycle", &self.cycle)
            .field("trace", &self.trace)
            .finish()
    }
}

impl Dut {
    /// Builds (or reuses) the model of `spec` and creates an instance. Build progress goes to
    /// stderr.
    pub fn build(spec: impl Into<BlockSpec>) -> Result<Dut, DutError> {
        let spec = spec.into();
        Self::build_with(&spec, &mut vbuild::stderr_progress)
    }

    /// As [`Dut::build`], reporting progress to `progress`.
    pub fn build_with(spec: &BlockSpec, progress: &mut dyn FnMut(&BuildEvent)) -> Result<Dut, DutError> {
        let model = vbuild::build(&spec.model_spec(), progress)?;
        Self::load(model)
    }

    /// Creates an instance of an already built block model.
    pub fn load(model: BuiltModel) -> Result<Dut, DutError> {
        let (api, ports) = load_api(&model)?;
        // SAFETY: `create` allocates a fresh model; it never returns null (new throws).
        let raw = unsafe { (api.create)() };
        let handle = NonNull::new(raw).ok_or_else(|| DutError::Load {
            lib: model.lib.clone(),
            dir: model.dir.clone(),
            source: libloading::Error::DlOpenUnknown,
        })?;
        let find = |n: &str| ports.iter().find(|p| p.name == n).map(|p| p.port);
        let clk = find("clk");
        let rst = find("rst");
        Ok(Dut { api, handle, clk, rst, ports, cycle: 0, model, trace: None, seed: 0 })
    }

    /// The built model behind this instance.
    pub fn model(&self) -> &BuiltModel {
        &self.model
    }

    /// All top-level ports, in declaration order.
    pub fn ports(&self) -> &[PortInfo] {
        &self.ports
    }

    /// The port called `name`, if the module has one.
    pub fn try_port(&self, name: &str) -> Option<Port> {
        self.ports.iter().find(|p| p.name == name).map(|p| p.port)
    }

    /// The port called `name`.
    ///
    /// # Panics
    /// If there is none; the message lists the ports that exist.
    pub fn port(&self, name: &str) -> Port {
        self.try_port(name).unwrap_or_else(|| {
            let names: Vec<&str> = self.ports.iter().map(|p| p.name.as_str()).collect();
            panic!("{} has no port `{name}`; its ports are: {}", self.model.top, names.join(", "))
        })
    }

    /// Uses `name` as the clock for [`Dut::tick`] (default: `clk`).
    pub fn set_clock(&mut self, name: &str) {
        self.clk = Some(self.port(name));
    }

    /// Uses `name` as the active-high reset for [`Dut::reset`] (default: `rst`).
    pub fn set_reset(&mut self, name: &str) {
        self.rst = Some(self.port(name));
    }

    fn h(&self) -> Handle {
        self.handle.as_ptr()
    }

    /// Drives input `p` with `value` (truncated to the port width; wider ports get `value` in
    /// their low 64 bits and zeros above).
    ///
    /// # Panics
    /// If `p` is an output.
    #[inline]
    pub fn set(&mut self, p: Port, value: u64) {
        assert!(
            p.dir != Direction::Output,
            "{}: port #{} is an output and cannot be driven",
            self.model.top,
            p.idx
        );
        // SAFETY: the handle is live and p.idx comes from this model's port table.
        unsafe { (self.api.set)(self.h(), p.idx, value) }
    }

    /// Reads port `p` (the low 64 bits of wider ports).
    #[inline]
    pub fn get(&self, p: Port) -> u64 {
        // SAFETY: as in `set`.
        unsafe { (self.api.get)(self.h(), p.idx) }
    }

    /// Reads a port as a flag (`value != 0`).
    #[inline]
    pub fn get_bool(&self, p: Port) -> bool {
        self.get(p) != 0
    }

    /// Drives a port of any width from 32-bit words, least significant first. Missing words
    /// are zero; bits above the width are dropped.
    pub fn set_words(&mut self, p: Port, words: &[u32]) {
        assert!(
            p.dir != Direction::Output,
            "{}: port #{} is an output and cannot be driven",
            self.model.top,
            p.idx
        );
        // SAFETY: the shim reads at most `words.len()` words.
        unsafe { (self.api.set_words)(self.h(), p.idx, words.as_ptr(), words.len() as u32) }
    }

    /// Reads a port of any width as 32-bit words, least significant first.
    pub fn get_words(&self, p: Port) -> Vec<u32> {
        let mut out = vec![0u32; p.words()];
        // SAFETY: the shim writes at most `out.len()` words.
        unsafe { (self.api.get_words)(self.h(), p.idx, out.as_mut_ptr(), out.len() as u32) };
        out
    }

    /// Settles combinational logic after inputs changed, without a clock edge. Call it
    /// before reading outputs that depend combinationally on inputs set in this cycle.
    #[inline]
    pub fn eval(&mut self) {
        // SAFETY: the handle is live.
        unsafe { (self.api.eval)(self.h()) }
    }

    /// One clock cycle: inputs settle, rising edge, falling edge.
    #[inline]
    pub fn tick(&mut self) {
        self.ticks(1);
    }

    /// `n` clock cycles with the inputs held.
    ///
    /// # Panics
    /// If the module has no `clk` port and no clock was chosen with [`Dut::set_clock`].
    pub fn ticks(&mut self, n: u64) {
        let clk = self.clk.unwrap_or_else(|| {
            panic!("{} has no `clk` port: pick its clock with Dut::set_clock", self.model.top)
        });
        // SAFETY: the handle is live and clk is an input of this model.
        unsafe { (self.api.tick)(self.h(), clk.idx, n) };
        self.cycle += n;
    }

    /// Holds the reset high for `cycles` clock cycles, then releases it (no tick after).
    ///
    /// # Panics
    /// If there is no `rst` port and none was chosen with [`Dut::set_reset`].
    pub fn reset(&mut self, cycles: u64) {
        let rst = self.rst.unwrap_or_else(|| {
            panic!("{} has no `rst` port: pick its reset with Dut::set_reset", self.model.top)
        });
        self.set(rst, 1);
        self.ticks(cycles);
        self.set(rst, 0);
        self.eval();
    }

    /// Clock cycles run so far.
    pub fn cycle(&self) -> u64 {
        self.cycle
    }

    /// Simulation time in the trace's units (10 per cycle).
    pub fn time(&self) -> u64 {
        // SAFETY: the handle is live.
        unsafe { (self.api.time)(self.h()) }
    }

    /// Starts an FST dump of every signal into `path` (its directory is created).
    pub fn trace_to(&mut self, path: impl AsRef<Path>) -> Result<(), DutError> {
        let path = path.as_ref();
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let c = CString::new(path.to_string_lossy().as_bytes())
            .map_err(|_| DutError::Trace(path.to_path_buf()))?;
        // SAFETY: the handle is live and `c` outlives the call (the shim copies the name).
        let rc = unsafe { (self.api.trace_open)(self.h(), c.as_ptr()) };
        if rc == -2 {
            return Err(DutError::NoWaves(path.to_path_buf()));
        }
        if rc != 0 {
            return Err(DutError::Trace(path.to_path_buf()));
        }
        self.trace = Some(path.to_path_buf());
        Ok(())
    }

    /// Closes the FST dump, if one is open.
    pub fn trace_close(&mut self) {
        // SAFETY: the handle is live; closing without a trace is a no-op.
        unsafe { (self.api.trace_close)(self.h()) };
        self.trace = None;
    }

    /// The FST file being written, if any.
    pub fn trace_path(&self) -> Option<&Path> {
        self.trace.as_deref()
    }

    /// The seed of the test this DUT runs in ([`run_test`]), 0 otherwise.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Sets the seed reported by [`Dut::seed`].
    pub fn set_seed(&mut self, seed: u64) {
        self.seed = seed;
    }

    /// A random generator derived from the test seed and `salt`, so every agent of a test
    /// has its own reproducible stream.
    pub fn rng(&self, salt: u64) -> StdRng {
        rng(self.seed, salt)
    }
}

impl Drop for Dut {
    fn drop(&mut self) {
        // SAFETY: the handle is live and dropped exactly once; destroy closes the trace.
        unsafe { (self.api.destroy)(self.h()) };
    }
}

/// A reproducible random generator for (`seed`, `salt`).
pub fn rng(seed: u64, salt: u64) -> StdRng {
    // SplitMix64 finaliser: nearby seeds and salts give unrelated streams.
    let mut z = seed ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    StdRng::seed_from_u64(z ^ (z >> 31))
}
