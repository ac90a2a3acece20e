//! Measurements for `cargo xtask bench`: how fast the Verilated SoC runs (with the firmware,
//! with only a spinning core, and against a bare CV32E40P in a minimal harness), and how long
//! the model takes to build cold and to find in the cache.
//!
//! Everything runs in this process, with the model loaded over the same C ABI `ws-sim` uses,
//! so the figures are those of the simulator minus its socket handling. The functions return
//! plain structs; printing the table and writing JSON is the xtask's job.

pub mod link;
pub mod mesh;
pub mod optim;
pub mod swarm;

use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::dl;
use crate::paths;
use crate::sim::board::{self, SimBoard};
use crate::sim::elf::Image;
use crate::sim::options::Demo;
use crate::sim::server::{demo_image, RESET_CYCLES};
use crate::sim::{programs, SimError, Soc, SocConfig, SocError, StopOn};
use crate::vbuild::soc::{check_cpu_package, SocBuild, SocFiles};
use crate::vbuild::{self, BuildEvent, BuiltModel, ModelSpec};

/// One cycles-per-second measurement of the SoC model.
#[derive(Debug, Clone, PartialEq)]
pub struct CyclesPerSecond {
    /// What ran: the ELF path, or `demo spin`.
    pub program: String,
    /// Verilator threads of the model.
    pub threads: u32,
    /// Cycles timed.
    pub cycles: u64,
    /// Wall time of those cycles.
    pub elapsed: Duration,
    /// `cycles / elapsed`.
    pub cycles_per_second: f64,
    /// The model's name (`ws_soc-t<threads>`).
    pub model: String,
    /// The model came from the cache (nothing was compiled for this measurement).
    pub model_cache_hit: bool,
}

/// The SoC running the firmware against a bare core and against the SoC running only its
/// core, see [`soc_vs_bare_core`].
#[derive(Debug, Clone, PartialEq)]
pub struct CoreRatio {
    /// The firmware (or the program given) on the SoC.
    pub soc: CyclesPerSecond,
    /// The `spin` program on the same SoC model.
    pub soc_spin: CyclesPerSecond,
    /// The bare CV32E40P in its minimal harness.
    pub bare: CyclesPerSecond,
    /// `soc / bare` cycles per second: what the SoC's fabric and peripherals cost on top of
    /// the core (docs/architecture.md's figure).
    pub ratio: f64,
    /// `soc / soc_spin` cycles per second: what the firmware's activity costs on the same model.
    pub spin_ratio: f64,
}

/// Cold and cached build times of one SoC model.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildTimes {
    /// The model's name.
    pub model: String,
    /// Verilator threads of the model.
    pub threads: u32,
    /// Verilating and compiling everything, the Verilator runtime objects included, into an
    /// empty cache.
    pub cold: Duration,
    /// The same call again: hashing the inputs and finding the stamp.
    pub cached: Duration,
}

/// Cycles simulated before timing starts, so the boot ROM jump and the first cache misses of
/// the host are not part of the figure.
const WARMUP_CYCLES: u64 = 10_000;

/// Runs `cycles` cycles of the SoC model built with `threads` Verilator threads, with the
/// firmware ELF `elf` in RAM (or the `spin` demo when `None`), and reports cycles per wall
/// second. The model is built first if it is not in the cache (progress on stderr); the build
/// and the load are not timed. The run does not stop when the core sleeps, so a firmware that
/// waits in WFI is measured at full speed.
pub fn soc_cycles_per_second(
    threads: u32,
    elf: Option<&Path>,
    cycles: u64,
) -> Result<CyclesPerSecond, SimError> {
    let board = sim_board()?;
    let image = match elf {
        Some(p) => Image::read(p)?,
        None => demo_image(Demo::Spin, &programs::spin(), board.ram_base),
    };
    let program = elf.map_or_else(|| "demo spin".to_string(), |p| p.display().to_string());
    measure(threads, &board, &image, program, cycles)
}

/// Cycles per second of the SoC model running the `spin` demo (`j .`): the core works alone,
/// no peripheral does anything, but the crossbars, RAM, debug module and register blocks are
/// still evaluated every cycle.
pub fn soc_spin_cycles_per_second(threads: u32, cycles: u64) -> Result<CyclesPerSecond, SimError> {
    soc_cycles_per_second(threads, None, cycles)
}

/// Cycles per second of a bare CV32E40P (`cv32e40p_top`, FPU off) in a minimal C++ memory
/// harness (`hdl/sim/ws_core_bench_shim.cpp`: both ports granted at once and answered the next
/// cycle, the whole memory filled with `j .`), the reference docs/architecture.md measures the SoC
/// against (about 1.4 M cycles/s on one core of the CI machines). Its model is built and
/// cached like the SoC's (about 15 s the first time).
pub fn bare_core_cycles_per_second(threads: u32, cycles: u64) -> Result<CyclesPerSecond, SimError> {
    let threads = threads.max(1);
    let model = crate::vbuild::build(&bare_core_spec(threads)?, &mut vbuild::stderr_progress)
        .map_err(SocError::from)?;
    let core = BareCore::load(&model, 1 << 14)?;
    // SAFETY (all calls below): `core.h` is live until `destroy`, called once at the end.
    unsafe {
        for w in 0..(1u32 << 14) {
            (core.api.mem_write)(core.h, w, JUMP_TO_SELF);
        }
        (core.api.reset)(core.h, RESET_CYCLES);
        (core.api.run)(core.h, WARMUP_CYCLES);
    }
    let t = Instant::now();
    // SAFETY: as above.
    unsafe { (core.api.run)(core.h, cycles) };
    let elapsed = t.elapsed();
    // SAFETY: as above; the handle is not used after this.
    let fetches = unsafe {
        let f = (core.api.fetches)(core.h);
        (core.api.destroy)(core.h);
        f
    };
    // `j .` fetches about every other cycle; far fewer means the figure is of an idle model.
    if fetches < cycles / 8 {
        return Err(SimError::Io {
            what: format!(
                "the bare core fetched {fetches} times in {cycles} cycles: it is not running; check {BARE_CORE_SHIM} against cv32e40p_top's ports"
            ),
            source: std::io::Error::other("bare core stalled"),
        });
    }
    Ok(CyclesPerSecond {
        program: "bare cv32e40p: j .".into(),
        threads,
        cycles,
        elapsed,
        cycles_per_second: cycles as f64 / elapsed.as_secs_f64().max(1e-9),
        model: model.name,
        model_cache_hit: model.cache_hit,
    })
}

/// [`soc_cycles_per_second`] with `elf`, [`soc_spin_cycles_per_second`] and
/// [`bare_core_cycles_per_second`], and the ratios of the first to the other two.
pub fn soc_vs_bare_core(threads: u32, elf: &Path, cycles: u64) -> Result<CoreRatio, SimError> {
    let soc = soc_cycles_per_second(threads, Some(elf), cycles)?;
    let soc_spin = soc_spin_cycles_per_second(threads, cycles)?;
    let bare = bare_core_cycles_per_second(threads, cycles)?;
    let ratio = |a: &CyclesPerSecond, b: &CyclesPerSecond| {
        if b.cycles_per_second > 0.0 {
            a.cycles_per_second / b.cycles_per_second
        } else {
            0.0
        }
    };
    Ok(CoreRatio { ratio: ratio(&soc, &bare), spin_ratio: ratio(&soc, &soc_spin), soc, soc_spin, bare })
}

/// `j .` (RV32I `jal x0, 0`).
const JUMP_TO_SELF: u32 = 0x0000_006f;

/// Repo-relative path of the bare-core harness.
const BARE_CORE_SHIM: &str = "hdl/sim/ws_core_bench_shim.cpp";

/// ABI version of [`BARE_CORE_SHIM`].
const BARE_CORE_ABI: u32 = 1;

/// The bare core's model: the CV32E40P files of the SoC's file list (the core and its
/// packages, without the debug module and common cells) and the same lint waivers.
fn bare_core_spec(threads: u32) -> Result<ModelSpec, SimError> {
    check_cpu_package().map_err(SocError::from)?;
    let files = SocFiles::load().map_err(SocError::from)?;
    let pkg = paths::cpu_package_dir();
    let mut spec = ModelSpec::new(format!("cv32e40p_bare-t{threads}"), "cv32e40p_top");
    spec.sources = files
        .package_files
        .iter()
        .filter(|f| f.starts_with("rtl/include") || f.to_string_lossy().starts_with("rtl/cv32e40p_"))
        .chain(files.package_sim_files.iter())
        .map(|f| pkg.join(f))
        .collect();
    spec.include_dirs = files.package_include_dirs();
    spec.vlt_files = files.vlt_files.iter().map(paths::in_workspace).collect();
    spec.shim_files = vec![paths::in_workspace(BARE_CORE_SHIM)];
    spec.threads = threads;
    Ok(spec)
}

#[derive(Clone, Copy)]
struct BareApi {
    create: unsafe extern "C" fn(u32) -> *mut c_void,
    destroy: unsafe extern "C" fn(*mut c_void),
    mem_write: unsafe extern "C" fn(*mut c_void, u32, u32) -> i32,
    reset: unsafe extern "C" fn(*mut c_void, u64),
    run: unsafe extern "C" fn(*mut c_void, u64) -> u64,
    fetches: unsafe extern "C" fn(*mut c_void) -> u64,
}

struct BareCore {
    api: BareApi,
    h: *mut c_void,
}

impl BareCore {
    fn load(model: &BuiltModel, words: u32) -> Result<BareCore, SimError> {
        let lerr = |source| SocError::Load { lib: model.lib.clone(), dir: model.dir.clone(), source };
        let lib = dl::open(&model.lib).map_err(lerr)?;
        // SAFETY: the signatures match hdl/sim/ws_core_bench_shim.cpp, checked by its ABI
        // number.
        unsafe {
            let abi: unsafe extern "C" fn() -> u32 = dl::sym(lib, "ws_core_abi").map_err(lerr)?;
            let found = abi();
            if found != BARE_CORE_ABI {
                return Err(SocError::Abi { lib: model.lib.clone(), dir: model.dir.clone(), found }.into());
            }
            let api = BareApi {
                create: dl::sym(lib, "ws_core_create").map_err(lerr)?,
                destroy: dl::sym(lib, "ws_core_destroy").map_err(lerr)?,
                mem_write: dl::sym(lib, "ws_core_mem_write").map_err(lerr)?,
                reset: dl::sym(lib, "ws_core_reset").map_err(lerr)?,
                run: dl::sym(lib, "ws_core_run").map_err(lerr)?,
                fetches: dl::sym(lib, "ws_core_fetches").map_err(lerr)?,
            };
            Ok(BareCore { api, h: (api.create)(words) })
        }
    }
}

/// Builds the SoC model with `threads` threads into a fresh, empty cache (a real, cold build:
/// a minute or two on two cores), then makes the same call again, which finds it. The
/// temporary cache under `target/ws-bench/` is removed afterwards.
pub fn build_times(threads: u32, progress: &mut dyn FnMut(&BuildEvent)) -> Result<BuildTimes, SimError> {
    let stamp = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let root: PathBuf = paths::workspace_root()
        .join("target")
        .join("ws-bench")
        .join(format!("cold-cache-{}-{stamp}", std::process::id()));
    let build = SocBuild { threads: threads.max(1), cache_root: Some(root.clone()), ..SocBuild::default() };
    let result = (|| {
        let t = Instant::now();
        let model = Soc::build(&build, progress)?;
        let cold = t.elapsed();
        let t = Instant::now();
        let again = Soc::build(&build, progress)?;
        let cached = t.elapsed();
        if !again.cache_hit {
            return Err(SimError::Io {
                what: format!(
                    "the second build of `{}` in {} was not a cache hit; the cache key is not stable, see hdl/src/vbuild/fingerprint.rs",
                    model.name,
                    root.display()
                ),
                source: std::io::Error::other("cache miss"),
            });
        }
        Ok(BuildTimes { model: model.name, threads: build.threads, cold, cached })
    })();
    let _ = std::fs::remove_dir_all(&root);
    result
}

fn sim_board() -> Result<SimBoard, SimError> {
    board::load(Path::new("boards/sim/board.toml"))
}

fn measure(
    threads: u32,
    board: &SimBoard,
    image: &Image,
    program: String,
    cycles: u64,
) -> Result<CyclesPerSecond, SimError> {
    let build = SocBuild { threads: threads.max(1), ..SocBuild::default() };
    let model = Soc::build(&build, &mut vbuild::stderr_progress)?;
    let (name, hit) = (model.name.clone(), model.cache_hit);
    let cfg = SocConfig { uart_div_fallback: board.uart_div(), ..SocConfig::default() };
    let mut soc = Soc::load(model, &cfg)?;
    image.load(&mut soc, board.ram_base)?;
    soc.reset(RESET_CYCLES);
    let mut sink = Vec::new();
    run(&mut soc, WARMUP_CYCLES, &mut sink);
    let t = Instant::now();
    run(&mut soc, cycles, &mut sink);
    let elapsed = t.elapsed();
    Ok(CyclesPerSecond {
        program,
        threads: build.threads,
        cycles,
        elapsed,
        cycles_per_second: cycles as f64 / elapsed.as_secs_f64().max(1e-9),
        model: name,
        model_cache_hit: hit,
    })
}

/// Runs exactly `cycles`, draining link and log output as a host would, so a chatty firmware
/// never sees backpressure.
fn run(soc: &mut Soc, cycles: u64, sink: &mut Vec<u8>) {
    const CHUNK: u64 = 1 << 20;
    let mut done = 0;
    while done < cycles {
        let r = soc.run((cycles - done).min(CHUNK), StopOn::default());
        done += r.cycles;
        sink.clear();
        soc.take_tx(sink, 1 << 20);
        sink.clear();
        soc.take_log(sink);
        if r.cycles == 0 {
            break;
        }
    }
}
