//! `hil-tests`: hardware-in-the-loop scenarios for weightstream boards.
//!
//! Each scenario is one file under `tests/` and talks to the board only through the host
//! driver, exactly as `wsctl` does, so the same code runs against the simulated board (the
//! default) and a real one chosen with `WS_BOARD=<name or path to board.toml>`.
//!
//! [`Rig::open`] is the one way in. A scenario states what it [`Needs`]; when the chosen board
//! cannot provide it, the rig prints why the scenario is skipped and returns `None`:
//!
//! ```no_run
//! use hil_tests::{Needs, Rig};
//! let Some(mut rig) = Rig::open("boot_identity", Needs::default()) else { return };
//! let id = rig.client.identity().unwrap();
//! assert!(id.clk_hz > 0);
//! ```
//!
//! On the simulated board every scenario gets its own simulator on ephemeral loopback ports
//! (so scenarios run in parallel), running the firmware ELF named by `WS_FIRMWARE_ELF`
//! (default `target/riscv32imc-unknown-none-elf/release/ws-firmware`), and the simulator is
//! ended when the rig is dropped, even when the scenario fails. On a real board the rig opens
//! the transport its `[link]` names (USB, PCIe, serial; the board already runs the firmware
//! under test) and skips scenarios that need the simulator's log port, control port or loader.
#![warn(missing_docs)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use host_driver::board::{Board, BoardKind};
use host_driver::board_time::{BoardClock, Deadline};
use host_driver::client::Client;
use host_driver::logs::{DefmtLog, LogLine, LogStream};
use host_driver::sim::{boot_cycles, wait_for_boot, BootPorts};
use host_driver::transport::SimTransport;
use ws_hdl::sim::{SimOptions, SimProcess};

/// What a scenario needs from the board and its wiring.
#[derive(Debug, Clone, Copy, Default)]
pub struct Needs {
    /// The defmt log stream must be readable by the host (the simulator's log port, or a
    /// log UART wired to the host on a real board).
    pub defmt_log: bool,
    /// The scenario measures time in simulated cycles through the simulator's control port.
    pub sim_control: bool,
}

/// What the board's RAM holds when the scenario starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boot {
    /// The firmware under test, preloaded (on the simulator, by backdoor, with its boot
    /// header), so the boot ROM checks it and jumps to it.
    Firmware,
    /// Nothing: the boot ROM finds no image and serves its link loader.
    Loader,
}

/// A connected board, ready for a scenario.
pub struct Rig {
    /// The control-protocol client on the board's host link.
    pub client: Client,
    /// The board description.
    pub board: Board,
    /// The firmware ELF the board runs (for decoding its defmt log).
    pub elf: PathBuf,
    sim: Option<SimProcess>,
    log_addr: Option<SocketAddr>,
}

impl std::fmt::Debug for Rig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rig").field("board", &self.board.name).field("elf", &self.elf).finish()
    }
}

/// The workspace root (hil-tests lives one level below it).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// The firmware ELF under test: `WS_FIRMWARE_ELF`, else the release build of `cargo xtask build`.
pub fn firmware_elf() -> PathBuf {
    match std::env::var_os("WS_FIRMWARE_ELF") {
        Some(p) => PathBuf::from(p),
        None => workspace_root().join("target/riscv32imc-unknown-none-elf/release/ws-firmware"),
    }
}

/// How long a board that runs in wall time (a real one) may take from reset to its first
/// answer. The simulated board is waited for in simulated cycles instead
/// (`host_driver::sim::BOOT_CYCLES`), whatever the machine's speed.
const BOOT_TIMEOUT: Duration = Duration::from_secs(60);

impl Rig {
    /// Opens the board chosen by `WS_BOARD` (default: the simulated board) for `scenario`.
    ///
    /// Returns `None`, after printing the reason, when the board cannot run the scenario.
    /// Panics with the driver's message when the board should work but does not: that is a
    /// failure, not a skip.
    pub fn open(scenario: &str, needs: Needs) -> Option<Rig> {
        Self::open_with(scenario, needs, Boot::Firmware)
    }

    /// Opens the board with its RAM holding `boot`.
    pub fn open_with(scenario: &str, needs: Needs, boot: Boot) -> Option<Rig> {
        let name = std::env::var("WS_BOARD").unwrap_or_else(|_| "sim".into());
        let board = match Board::load(&name) {
            Ok(b) => b,
            Err(e) => panic!("{scenario}: cannot load board `{name}`: {e}"),
        };
        if needs.sim_control && board.kind != BoardKind::Sim {
            return skip(scenario, "it measures simulated cycles, which only the simulator reports");
        }
        if board.kind != BoardKind::Sim {
            // A real board: its `[link]` transport (USB, PCIe, serial), already flashed with
            // the firmware under test. Its log UART is not wired to the host here.
            if needs.defmt_log {
                return skip(scenario, "it reads the defmt log, which only the simulator serves to the host");
            }
            if boot == Boot::Loader {
                return skip(scenario, "it needs the boot ROM's loader, which a flashed board does not run");
            }
            let transport = host_driver::transport::open_transport(&board)
                .unwrap_or_else(|e| panic!("{scenario}: opening board `{}`'s link: {e}", board.name));
            let mut client = Client::new(transport);
            wait_for_wall_clock_boot(scenario, &mut client);
            return Some(Rig { client, board, elf: firmware_elf(), log_addr: None, sim: None });
        }
        let elf = firmware_elf();
        if !elf.exists() {
            panic!(
                "{scenario}: firmware ELF {} does not exist: run `cargo xtask build` first",
                elf.display()
            );
        }
        let mut opts = match boot {
            Boot::Firmware => SimOptions::with_elf(&elf),
            Boot::Loader => SimOptions { loader: true, elf: None, ..SimOptions::with_elf(&elf) },
        };
        opts.board = board.path.clone();
        opts.quiet = true;
        let sim =
            SimProcess::start(&opts).unwrap_or_else(|e| panic!("{scenario}: starting the simulator: {e}"));
        let client = booted_client(scenario, &sim);
        Some(Rig { client, board, elf, log_addr: Some(sim.log_addr()), sim: Some(sim) })
    }

    /// The simulator behind the rig, on the simulated board.
    pub fn sim(&self) -> Option<&SimProcess> {
        self.sim.as_ref()
    }

    /// The simulator's JTAG server (XVC / remote_bitbang, docs/jtag.md), on the simulated
    /// board: the control port's `stats` says where it listens.
    pub fn jtag_addr(&self) -> Option<SocketAddr> {
        let stats =
            self.sim.as_ref()?.stats().unwrap_or_else(|e| panic!("asking the simulator for stats: {e}"));
        let addr = stats["jtag"].as_str().unwrap_or_else(|| panic!("stats has no `jtag` address: {stats}"));
        Some(addr.parse().unwrap_or_else(|e| panic!("stats' jtag address `{addr}`: {e}")))
    }

    /// Every defmt log line the board has printed so far, decoded against [`Rig::elf`]. Waits
    /// until the stream has been quiet for `quiet`.
    pub fn log_lines(&self, quiet: Duration) -> Vec<LogLine> {
        let addr = self.log_addr.expect("log stream: the scenario should have asked for Needs::defmt_log");
        let log = DefmtLog::from_elf(&self.elf).unwrap_or_else(|e| panic!("{e}"));
        let mut stream = LogStream::connect(addr, log).unwrap_or_else(|e| panic!("{e}"));
        stream.read_available(quiet).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits until a log line containing `needle` appears, or `timeout` passes; returns every
    /// line read.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> Vec<LogLine> {
        let deadline = self.deadline(timeout);
        loop {
            let lines = self.log_lines(Duration::from_millis(200));
            if lines.iter().any(|l| l.message.contains(needle)) || deadline.expired() {
                return lines;
            }
        }
    }

    /// A wait of `wall` that, on the simulated board, also lasts `wall` ×
    /// [`host_driver::board_time::REFERENCE_HZ`] simulated cycles, so a slow machine passes.
    pub fn deadline(&self, wall: Duration) -> Deadline {
        Deadline::new(wall, self.client.board_clock())
    }
}

/// The simulator's cycle counter, followed for the waits of the clients on `sim`
/// (`host_driver::board_time`): a wait on the simulated board is bounded in its cycles, so a
/// slow or loaded machine passes.
pub fn board_clock(sim: &SimProcess) -> BoardClock {
    BoardClock::follow(sim.ctrl_addr())
        .unwrap_or_else(|e| panic!("following the simulator's cycle counter: {e}"))
}

/// A transport to `addr`, one of `sim`'s ports (its link or its PHY), whose clients measure
/// their waits in `sim`'s cycles.
pub fn connect(sim: &SimProcess, addr: SocketAddr) -> SimTransport {
    SimTransport::connect(addr)
        .unwrap_or_else(|e| panic!("connecting to the simulator at {addr}: {e}"))
        .with_clock(Some(board_clock(sim)))
}

/// A control client on `sim`'s host link, once the board answers a ping (see
/// [`Rig::open`]). The boot ROM checks the image first and the firmware then sets up its
/// blocks: the wait is bounded in simulated cycles ([`host_driver::sim::boot_cycles`]). A v1
/// ping does not say HELLO, so the board still keeps its boot log for the first link host.
pub fn booted_client(scenario: &str, sim: &SimProcess) -> Client {
    let ports = BootPorts { link: sim.link_addr(), ctrl: sim.ctrl_addr(), log: sim.log_addr() };
    if let Err(e) = wait_for_boot(ports, &firmware_elf(), boot_cycles(), &mut |_| {}) {
        panic!("{scenario}: the board did not boot: {e}");
    }
    let mut client = Client::new(Box::new(connect(sim, sim.link_addr())));
    client.set_timeout(Duration::from_secs(10));
    client
}

/// Pings a board that runs in wall time until it answers (the firmware may still be
/// starting), failing the scenario after [`BOOT_TIMEOUT`].
fn wait_for_wall_clock_boot(scenario: &str, client: &mut Client) {
    let start = Instant::now();
    client.set_timeout(Duration::from_millis(500));
    loop {
        match client.ping(0x0b00_7000) {
            Ok(_) => break,
            Err(e) if start.elapsed() < BOOT_TIMEOUT && e.is_timeout() => continue,
            Err(e) => {
                panic!("{scenario}: the firmware did not answer a ping after {:?}: {e}", start.elapsed())
            }
        }
    }
    client.set_timeout(Duration::from_secs(10));
}

/// A booted simulator of the firmware under test on the fixed port block from `base`, so the
/// real `wsctl --addr` finds its ports as it does a board's own simulator. `None`, after
/// printing why, when `WS_BOARD` names a real board.
pub fn sim_at(scenario: &str, base: u16) -> Option<SimProcess> {
    if std::env::var("WS_BOARD").is_ok_and(|b| b != "sim") {
        eprintln!("SKIPPED {scenario}: it starts its own simulator on fixed ports");
        return None;
    }
    let opts = SimOptions { port_base: Some(base), quiet: true, ..SimOptions::with_elf(firmware_elf()) };
    let sim = SimProcess::start(&opts)
        .unwrap_or_else(|e| panic!("{scenario}: starting the simulator on ports {base}..{}: {e}", base + 5));
    // Booted before the commands' own timeouts start.
    booted_client(scenario, &sim);
    Some(sim)
}

/// The real `wsctl` (beside `ws-sim`, both built by `cargo xtask build`) pointed at a
/// simulator on a fixed port block, as a user's commands find a board's own simulator:
/// `--addr` names the link port, and the log, control and PHY ports follow it.
#[derive(Debug, Clone)]
pub struct Wsctl {
    bin: PathBuf,
    addr: String,
}

impl Wsctl {
    /// `wsctl` for the simulator whose ports start at `base`.
    pub fn at(base: u16) -> Self {
        let sim = SimProcess::binary().expect("ws-sim (run `cargo xtask build`)");
        let bin = sim.with_file_name("wsctl");
        assert!(bin.is_file(), "{} does not exist: run `cargo xtask build`", bin.display());
        Self { bin, addr: format!("127.0.0.1:{base}") }
    }

    /// The `wsctl` binary, for a test that starts it itself (to kill its board under it).
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// Runs `wsctl ARGS` with a 5 s request timeout (in board time: `host_driver::board_time`).
    pub fn output<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> std::process::Output {
        std::process::Command::new(&self.bin)
            .args(["--addr", &self.addr, "--timeout-ms", "5000"])
            .args(args)
            .output()
            .expect("running wsctl")
    }

    /// Runs it, which must succeed; returns its stdout.
    pub fn ok<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(&self, args: &[S]) -> String {
        let out = self.output(args);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "wsctl {args:?} failed:\n{stdout}\n{stderr}");
        stdout.into_owned()
    }

    /// Runs it, which must fail; returns its stderr.
    pub fn fails<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(&self, args: &[S]) -> String {
        let out = self.output(args);
        assert!(!out.status.success(), "wsctl {args:?} succeeded:\n{}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

fn skip(scenario: &str, why: &str) -> Option<Rig> {
    eprintln!("SKIPPED {scenario}: {why}");
    None
}
