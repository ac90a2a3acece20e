//! [`Soc`]: the Verilated `ws_soc` loaded in-process, over the C ABI of
//! `hdl/sim/ws_soc_shim.cpp`.

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use crate::dl;
use crate::vbuild::soc::{soc_spec, SocBuild};
use crate::vbuild::{self, BuildError, BuildEvent, BuiltModel};

/// ABI version of the shim this code speaks.
const ABI: u32 = 2;

/// Why the SoC could not be created or used.
#[derive(Debug, thiserror::Error)]
pub enum SocError {
    /// The model did not build.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The library did not load.
    #[error("cannot load the SoC model {lib}: {source}; delete {dir} to force a rebuild")]
    Load {
        /// The library.
        lib: PathBuf,
        /// Its model directory.
        dir: PathBuf,
        /// Loader error.
        source: libloading::Error,
    },
    /// The library was built from another shim.
    #[error("the SoC model {lib} has shim ABI {found}, ws-hdl speaks {ABI}: delete {dir} to rebuild it")]
    Abi {
        /// The library.
        lib: PathBuf,
        /// Its model directory.
        dir: PathBuf,
        /// ABI found.
        found: u32,
    },
    /// Tracing was requested from a model without FST support, or the file failed to open.
    #[error("FST trace: {0}")]
    Trace(String),
    /// The RAM backdoor is missing (ws_ram's `mem` is not public).
    #[error("the SoC model has no RAM backdoor: ws_ram's `mem` must be public_flat_rw (hdl/sim/sim.vlt) and the RAM instance named ram_inst")]
    NoBackdoor,
    /// A backdoor access outside RAM.
    #[error("RAM backdoor access at word {word} is outside the {words}-word RAM")]
    OutOfRange {
        /// Word index.
        word: u32,
        /// RAM size in words.
        words: u32,
    },
}

type H = *mut c_void;

#[derive(Clone, Copy)]
struct Api {
    create: unsafe extern "C" fn(*const c_char, u32) -> H,
    error: unsafe extern "C" fn(H) -> *const c_char,
    destroy: unsafe extern "C" fn(H),
    trace_window: unsafe extern "C" fn(H, u64, u64),
    trace_flush: unsafe extern "C" fn(H),
    reset: unsafe extern "C" fn(H, u64),
    run: unsafe extern "C" fn(H, u64, u32, *mut u32) -> u64,
    cycle: unsafe extern "C" fn(H) -> u64,
    push_rx: unsafe extern "C" fn(H, *const u8, u64),
    rx_pending: unsafe extern "C" fn(H) -> u64,
    take_tx: unsafe extern "C" fn(H, *mut u8, u64) -> u64,
    tx_pending: unsafe extern "C" fn(H) -> u64,
    set_tx_cap: unsafe extern "C" fn(H, u64),
    take_log: unsafe extern "C" fn(H, *mut u8, u64) -> u64,
    counter: unsafe extern "C" fn(H, u32) -> u64,
    gpio_out: unsafe extern "C" fn(H) -> u32,
    core_sleep: unsafe extern "C" fn(H) -> u32,
    set_gpio_in: unsafe extern "C" fn(H, u32),
    set_jtag: unsafe extern "C" fn(H, u32, u32, u32, u32),
    get_tdo: unsafe extern "C" fn(H) -> u32,
    ram_write: unsafe extern "C" fn(H, u32, u32) -> i32,
    ram_read: unsafe extern "C" fn(H, u32, *mut u32) -> i32,
    push_phy: unsafe extern "C" fn(H, *const u8, u64),
    phy_rx_pending: unsafe extern "C" fn(H) -> u64,
    take_phy: unsafe extern "C" fn(H, *mut u8, u64) -> u64,
    phy_busy: unsafe extern "C" fn(H) -> u32,
}

/// When [`Soc::run`] may return before running all the cycles asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StopOn {
    /// Return when the core sleeps (WFI) and no host byte is waiting.
    pub sleep: bool,
    /// Return when a board-to-host byte was collected.
    pub tx: bool,
}

/// Why [`Soc::run`] returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunResult {
    /// Cycles run.
    pub cycles: u64,
    /// The board-to-host buffer is full: take bytes with [`Soc::take_tx`].
    pub tx_full: bool,
    /// The core sleeps and no host byte is waiting.
    pub sleeping: bool,
    /// New board-to-host bytes were collected.
    pub tx_data: bool,
}

/// Configuration of a [`Soc`] instance.
#[derive(Debug, Clone, Default)]
pub struct SocConfig {
    /// FST file to dump into (the model must be built with `trace_fst`).
    pub trace: Option<PathBuf>,
    /// Dump only cycles in `[from, to)`.
    pub trace_window: Option<(u64, u64)>,
    /// UART bit time used if the shim cannot read ws_uart's divisor.
    pub uart_div_fallback: u32,
}

/// The simulated SoC, in this process.
pub struct Soc {
    api: Api,
    h: NonNull<c_void>,
    model: BuiltModel,
}

impl std::fmt::Debug for Soc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Soc").field("lib", &self.model.lib).field("cycle", &self.cycle()).finish()
    }
}

/// Counters of the shim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocCounters {
    /// Host-to-board bytes the SoC accepted.
    pub link_rx_bytes: u64,
    /// Board-to-host bytes the SoC delivered.
    pub link_tx_bytes: u64,
    /// UART bytes decoded.
    pub log_bytes: u64,
    /// UART frames with a bad stop bit.
    pub uart_framing_errors: u64,
    /// The UART bit time in cycles, as the firmware programmed it.
    pub uart_div: u64,
    /// RAM size in words (0 without backdoor).
    pub ram_words: u64,
    /// Host-to-board bytes the link engine's PHY accepted.
    pub phy_rx_bytes: u64,
    /// Board-to-host bytes the link engine's PHY delivered.
    pub phy_tx_bytes: u64,
}

impl Soc {
    /// Builds (or reuses) the SoC model.
    pub fn build(opts: &SocBuild, progress: &mut dyn FnMut(&BuildEvent)) -> Result<BuiltModel, SocError> {
        Ok(vbuild::build(&soc_spec(opts)?, progress)?)
    }

    /// Creates an SoC instance from a built model, held in reset until [`Soc::reset`].
    pub fn load(model: BuiltModel, cfg: &SocConfig) -> Result<Soc, SocError> {
        let lerr = |source| SocError::Load { lib: model.lib.clone(), dir: model.dir.clone(), source };
        let lib = dl::open(&model.lib).map_err(lerr)?;
        // SAFETY: the types match hdl/sim/ws_soc_shim.cpp, checked by its ABI number.
        let api = unsafe {
            let abi: unsafe extern "C" fn() -> u32 = dl::sym(lib, "ws_soc_abi").map_err(lerr)?;
            let found = abi();
            if found != ABI {
                return Err(SocError::Abi { lib: model.lib.clone(), dir: model.dir.clone(), found });
            }
            Api {
                create: dl::sym(lib, "ws_soc_create").map_err(lerr)?,
                error: dl::sym(lib, "ws_soc_error").map_err(lerr)?,
                destroy: dl::sym(lib, "ws_soc_destroy").map_err(lerr)?,
                trace_window: dl::sym(lib, "ws_soc_trace_window").map_err(lerr)?,
                trace_flush: dl::sym(lib, "ws_soc_trace_flush").map_err(lerr)?,
                reset: dl::sym(lib, "ws_soc_reset").map_err(lerr)?,
                run: dl::sym(lib, "ws_soc_run").map_err(lerr)?,
                cycle: dl::sym(lib, "ws_soc_cycle").map_err(lerr)?,
                push_rx: dl::sym(lib, "ws_soc_push_rx").map_err(lerr)?,
                rx_pending: dl::sym(lib, "ws_soc_rx_pending").map_err(lerr)?,
                take_tx: dl::sym(lib, "ws_soc_take_tx").map_err(lerr)?,
                tx_pending: dl::sym(lib, "ws_soc_tx_pending").map_err(lerr)?,
                set_tx_cap: dl::sym(lib, "ws_soc_set_tx_cap").map_err(lerr)?,
                take_log: dl::sym(lib, "ws_soc_take_log").map_err(lerr)?,
                counter: dl::sym(lib, "ws_soc_counter").map_err(lerr)?,
                gpio_out: dl::sym(lib, "ws_soc_gpio_out").map_err(lerr)?,
                core_sleep: dl::sym(lib, "ws_soc_core_sleep").map_err(lerr)?,
                set_gpio_in: dl::sym(lib, "ws_soc_set_gpio_in").map_err(lerr)?,
                set_jtag: dl::sym(lib, "ws_soc_set_jtag").map_err(lerr)?,
                get_tdo: dl::sym(lib, "ws_soc_get_tdo").map_err(lerr)?,
                ram_write: dl::sym(lib, "ws_soc_ram_write").map_err(lerr)?,
                ram_read: dl::sym(lib, "ws_soc_ram_read").map_err(lerr)?,
                push_phy: dl::sym(lib, "ws_soc_push_phy").map_err(lerr)?,
                phy_rx_pending: dl::sym(lib, "ws_soc_phy_rx_pending").map_err(lerr)?,
                take_phy: dl::sym(lib, "ws_soc_take_phy").map_err(lerr)?,
                phy_busy: dl::sym(lib, "ws_soc_phy_busy").map_err(lerr)?,
            }
        };
        let trace = match &cfg.trace {
            Some(p) => {
                if let Some(dir) = p.parent() {
                    let _ = std::fs::create_dir_all(dir);
                }
                Some(
                    CString::new(p.to_string_lossy().as_bytes())
                        .map_err(|_| SocError::Trace(format!("bad path {}", p.display())))?,
                )
            }
            None => None,
        };
        let tptr = trace.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
        // SAFETY: create copies the path; the returned handle is owned by the new Soc.
        let raw = unsafe { (api.create)(tptr, cfg.uart_div_fallback) };
        let h = NonNull::new(raw).ok_or_else(|| SocError::Trace("ws_soc_create returned null".into()))?;
        let soc = Soc { api, h, model };
        let err = soc.last_error();
        if !err.is_empty() {
            return Err(SocError::Trace(err));
        }
        if let Some((from, to)) = cfg.trace_window {
            // SAFETY: live handle.
            unsafe { (soc.api.trace_window)(soc.h(), from, to) };
        }
        Ok(soc)
    }

    fn h(&self) -> H {
        self.h.as_ptr()
    }

    fn last_error(&self) -> String {
        // SAFETY: live handle; the shim returns a NUL-terminated string it owns.
        unsafe {
            let p = (self.api.error)(self.h());
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        }
    }

    /// The model behind this instance.
    pub fn model(&self) -> &BuiltModel {
        &self.model
    }

    /// Holds reset for `cycles` cycles and releases it. Link bytes in flight are dropped.
    pub fn reset(&mut self, cycles: u64) {
        // SAFETY: live handle (all methods below likewise).
        unsafe { (self.api.reset)(self.h(), cycles) }
    }

    /// Runs up to `max_cycles` cycles, returning early as `stop` allows.
    pub fn run(&mut self, max_cycles: u64, stop: StopOn) -> RunResult {
        let flags = (stop.sleep as u32) | ((stop.tx as u32) << 1);
        let mut why = 0u32;
        let cycles = unsafe { (self.api.run)(self.h(), max_cycles, flags, &mut why) };
        RunResult { cycles, tx_full: why & 1 != 0, sleeping: why & 2 != 0, tx_data: why & 4 != 0 }
    }

    /// Cycles since creation (reset cycles included).
    pub fn cycle(&self) -> u64 {
        unsafe { (self.api.cycle)(self.h()) }
    }

    /// Queues host-to-board bytes for `s_link_*`.
    pub fn push_rx(&mut self, data: &[u8]) {
        unsafe { (self.api.push_rx)(self.h(), data.as_ptr(), data.len() as u64) }
    }

    /// Host-to-board bytes not yet accepted by the SoC.
    pub fn rx_pending(&self) -> u64 {
        unsafe { (self.api.rx_pending)(self.h()) }
    }

    /// Moves up to `max` collected board-to-host bytes into `out`; returns how many.
    pub fn take_tx(&mut self, out: &mut Vec<u8>, max: usize) -> usize {
        let start = out.len();
        out.resize(start + max, 0);
        let n = unsafe { (self.api.take_tx)(self.h(), out[start..].as_mut_ptr(), max as u64) } as usize;
        out.truncate(start + n);
        n
    }

    /// Board-to-host bytes collected and not yet taken.
    pub fn tx_pending(&self) -> u64 {
        unsafe { (self.api.tx_pending)(self.h()) }
    }

    /// How many board-to-host bytes may wait before `m_link_ready` drops.
    pub fn set_tx_cap(&mut self, cap: u64) {
        unsafe { (self.api.set_tx_cap)(self.h(), cap) }
    }

    /// Queues host-to-board bytes for the link engine's PHY (`s_phy_*`, four bytes a word).
    pub fn push_phy(&mut self, data: &[u8]) {
        unsafe { (self.api.push_phy)(self.h(), data.as_ptr(), data.len() as u64) }
    }

    /// Host-to-board PHY bytes not yet accepted (a partial word stays until completed).
    pub fn phy_rx_pending(&self) -> u64 {
        unsafe { (self.api.phy_rx_pending)(self.h()) }
    }

    /// Moves up to `max` board-to-host PHY bytes into `out`; returns how many.
    pub fn take_phy(&mut self, out: &mut Vec<u8>, max: usize) -> usize {
        let start = out.len();
        out.resize(start + max, 0);
        let n = unsafe { (self.api.take_phy)(self.h(), out[start..].as_mut_ptr(), max as u64) } as usize;
        out.truncate(start + n);
        n
    }

    /// The link engine has a whole word to take or a word to give.
    pub fn phy_busy(&self) -> bool {
        unsafe { (self.api.phy_busy)(self.h()) != 0 }
    }

    /// Moves every decoded UART byte into `out`; returns how many.
    pub fn take_log(&mut self, out: &mut Vec<u8>) -> usize {
        let mut total = 0;
        loop {
            let start = out.len();
            out.resize(start + 4096, 0);
            let n = unsafe { (self.api.take_log)(self.h(), out[start..].as_mut_ptr(), 4096) } as usize;
            out.truncate(start + n);
            total += n;
            if n < 4096 {
                return total;
            }
        }
    }

    /// The shim's counters.
    pub fn counters(&self) -> SocCounters {
        let c = |i| unsafe { (self.api.counter)(self.h(), i) };
        SocCounters {
            link_rx_bytes: c(0),
            link_tx_bytes: c(1),
            log_bytes: c(2),
            uart_framing_errors: c(3),
            uart_div: c(4),
            ram_words: c(5),
            phy_rx_bytes: c(6),
            phy_tx_bytes: c(7),
        }
    }

    /// `gpio_out`.
    pub fn gpio_out(&self) -> u8 {
        unsafe { (self.api.gpio_out)(self.h()) as u8 }
    }

    /// `core_sleep` (the core waits in WFI).
    pub fn core_sleep(&self) -> bool {
        unsafe { (self.api.core_sleep)(self.h()) != 0 }
    }

    /// Drives `gpio_in`.
    pub fn set_gpio_in(&mut self, v: u8) {
        unsafe { (self.api.set_gpio_in)(self.h(), u32::from(v)) }
    }

    /// Drives the JTAG pins (and evaluates, so a TCK edge takes effect at once).
    pub fn set_jtag(&mut self, tck: bool, tms: bool, tdi: bool, trst_n: bool) {
        unsafe { (self.api.set_jtag)(self.h(), tck as u32, tms as u32, tdi as u32, trst_n as u32) }
    }

    /// `jtag_tdo`.
    pub fn get_tdo(&self) -> bool {
        unsafe { (self.api.get_tdo)(self.h()) != 0 }
    }

    /// RAM size in 32-bit words, 0 when the backdoor is missing.
    pub fn ram_words(&self) -> u32 {
        self.counters().ram_words as u32
    }

    /// Writes RAM word `word` (index from the RAM base) by backdoor.
    pub fn ram_write(&mut self, word: u32, value: u32) -> Result<(), SocError> {
        let rc = unsafe { (self.api.ram_write)(self.h(), word, value) };
        self.backdoor_rc(rc, word)
    }

    /// Reads RAM word `word` by backdoor.
    pub fn ram_read(&self, word: u32) -> Result<u32, SocError> {
        let mut v = 0;
        let rc = unsafe { (self.api.ram_read)(self.h(), word, &mut v) };
        self.backdoor_rc(rc, word).map(|()| v)
    }

    fn backdoor_rc(&self, rc: i32, word: u32) -> Result<(), SocError> {
        if rc == 0 {
            return Ok(());
        }
        match self.ram_words() {
            0 => Err(SocError::NoBackdoor),
            words => Err(SocError::OutOfRange { word, words }),
        }
    }

    /// Writes `bytes` at byte `offset` from the RAM base (read-modify-write at the edges).
    pub fn ram_write_bytes(&mut self, offset: u32, bytes: &[u8]) -> Result<(), SocError> {
        let mut addr = offset;
        let mut rest = bytes;
        while !rest.is_empty() {
            let word = addr / 4;
            let lane = (addr % 4) as usize;
            let take = (4 - lane).min(rest.len());
            let mut w = if lane == 0 && take == 4 { [0u8; 4] } else { self.ram_read(word)?.to_le_bytes() };
            w[lane..lane + take].copy_from_slice(&rest[..take]);
            self.ram_write(word, u32::from_le_bytes(w))?;
            addr += take as u32;
            rest = &rest[take..];
        }
        Ok(())
    }

    /// Flushes the FST file.
    pub fn trace_flush(&mut self) {
        unsafe { (self.api.trace_flush)(self.h()) }
    }

    /// The model library path.
    pub fn lib(&self) -> &Path {
        &self.model.lib
    }
}

impl Drop for Soc {
    fn drop(&mut self) {
        // SAFETY: live handle, destroyed once; this also closes the FST file.
        unsafe { (self.api.destroy)(self.h()) }
    }
}
