//! Simulator management: a background `ws-sim` for `wsctl sim start | status | stop`.
//!
//! `wsctl` exits after `sim start`, so the simulator runs in its own process group (a Ctrl-C
//! in the terminal does not reach it) and what `wsctl` learns about it is kept in a state
//! file, `target/ws-sim/state.json`. Its stdout and stderr are appended to
//! `target/ws-sim/sim.log`; `start` reads the `WS-SIM READY …` line (docs/sim.md) from there.
//! Both streams go to the file rather than to a pipe because `wsctl` exits while the
//! simulator lives on: a pipe would break under it.
//!
//! Set `WS_SIM_DIR` to keep the files elsewhere (tests do), `WS_SIM_BIN` to choose the
//! binary, and `WS_SIM_READY_TIMEOUT` (seconds) to bound the wait for READY.

mod boot;
mod ctrl;
mod process;

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use boot::{boot_cycles, wait_for_boot, BootPorts, BOOT_CYCLES, BOOT_CYCLES_ENV};
pub use ctrl::{parse_reply, SimCtrl, SimStats, CTRL_TIMEOUT};
pub use process::{is_alive, looks_like_sim};

use crate::error::{Result, SimError};
use crate::workspace;

/// Environment variable naming the `ws-sim` binary.
pub const SIM_BIN_ENV: &str = "WS_SIM_BIN";
/// Environment variable bounding the wait for READY, in seconds.
pub const READY_TIMEOUT_ENV: &str = "WS_SIM_READY_TIMEOUT";
/// Environment variable choosing the folder of the state and log files.
pub const SIM_DIR_ENV: &str = "WS_SIM_DIR";
/// The READY wait when [`READY_TIMEOUT_ENV`] is unset: the first start builds the model.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(900);
/// How long `stop` waits after `quit`, and again after SIGTERM.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// What `ws-sim` prints once its ports listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyLine {
    /// Host-link port.
    pub link: SocketAddr,
    /// defmt log port.
    pub log: SocketAddr,
    /// Control port.
    pub ctrl: SocketAddr,
    /// The link engine's PHY port (link protocol v2); absent from simulators built before it.
    pub phy: Option<SocketAddr>,
    /// The simulator's pid, when it says.
    pub pid: Option<u32>,
}

impl ReadyLine {
    /// The prefix of the line.
    pub const PREFIX: &'static str = "WS-SIM READY";

    /// Parses `WS-SIM READY link=… log=… ctrl=… phy=… pid=…`; unknown keys are ignored.
    pub fn parse(line: &str) -> Option<Self> {
        let rest = line.trim().strip_prefix(Self::PREFIX)?;
        let (mut link, mut log, mut ctrl, mut phy, mut pid) = (None, None, None, None, None);
        for word in rest.split_whitespace() {
            let Some((k, v)) = word.split_once('=') else { continue };
            match k {
                "link" => link = v.parse().ok(),
                "log" => log = v.parse().ok(),
                "ctrl" => ctrl = v.parse().ok(),
                "phy" => phy = v.parse().ok(),
                "pid" => pid = v.parse().ok(),
                _ => {}
            }
        }
        Some(Self { link: link?, log: log?, ctrl: ctrl?, phy, pid })
    }
}

/// `target/ws-sim/state.json`: the running simulator, as `wsctl sim start` left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimState {
    /// The simulator's pid (and process group).
    pub pid: u32,
    /// Host-link address.
    pub link: SocketAddr,
    /// defmt log address.
    pub log: SocketAddr,
    /// Control address.
    pub ctrl: SocketAddr,
    /// The link engine's PHY address (link protocol v2).
    #[serde(default)]
    pub phy: Option<SocketAddr>,
    /// Firmware ELF it runs.
    pub elf: PathBuf,
    /// Board file it models.
    pub board: PathBuf,
    /// Start time, seconds since the Unix epoch.
    pub started: u64,
    /// Where its stdout and stderr go.
    #[serde(default)]
    pub sim_log: PathBuf,
    /// The binary started.
    #[serde(default)]
    pub bin: PathBuf,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
}

/// Options of [`SimHome::start`].
#[derive(Debug, Clone)]
pub struct StartOptions {
    /// Firmware ELF to load.
    pub elf: PathBuf,
    /// Board file (`boards/sim/board.toml`).
    pub board: PathBuf,
    /// First of the four ports; `None` = the board's `link.port_base`, 0 = ephemeral.
    pub port_base: Option<u16>,
    /// Verilator threads.
    pub threads: Option<u32>,
    /// FST waves file.
    pub trace: Option<PathBuf>,
    /// More `ws-sim` arguments, passed as they are.
    pub extra_args: Vec<String>,
    /// READY wait; `None` = [`READY_TIMEOUT_ENV`] or [`DEFAULT_READY_TIMEOUT`].
    pub ready_timeout: Option<Duration>,
    /// Show a spinner on stderr while waiting (hidden when stderr is not a terminal).
    pub progress: bool,
    /// Return only once the firmware answers a ping, within this many simulated cycles
    /// ([`boot_cycles`] by default); `None` returns at READY (a board left in its loader).
    pub boot_cycles: Option<u64>,
    /// Set to give up waiting: the simulator is stopped and [`SimError::Cancelled`] returned.
    pub cancel: Option<Arc<AtomicBool>>,
}

impl StartOptions {
    /// Options for `elf` on `board` with everything else defaulted.
    pub fn new(elf: impl Into<PathBuf>, board: impl Into<PathBuf>) -> Self {
        Self {
            elf: elf.into(),
            board: board.into(),
            port_base: None,
            threads: None,
            trace: None,
            extra_args: Vec::new(),
            ready_timeout: None,
            progress: false,
            boot_cycles: Some(boot_cycles()),
            cancel: None,
        }
    }

    /// The `ws-sim` command line these options make (paths made absolute).
    pub fn to_args(&self) -> Vec<String> {
        let mut a = vec![
            "--elf".into(),
            workspace::absolute(&self.elf).display().to_string(),
            "--board".into(),
            workspace::absolute(&self.board).display().to_string(),
        ];
        if let Some(p) = self.port_base {
            a.extend(["--port-base".into(), p.to_string()]);
        }
        if let Some(t) = self.threads {
            a.extend(["--threads".into(), t.to_string()]);
        }
        if let Some(t) = &self.trace {
            a.extend(["--trace".into(), workspace::absolute(t).display().to_string()]);
        }
        a.extend(self.extra_args.iter().cloned());
        a
    }
}

/// A started simulator.
#[derive(Debug, Clone)]
pub struct Started {
    /// What was recorded.
    pub state: SimState,
    /// When the firmware first answered: the simulator's cycle count and the wall time since
    /// READY (`None` when the start did not wait for it).
    pub booted: Option<(u64, Duration)>,
    /// Things worth telling a person (a stale state file cleaned up, say).
    pub notes: Vec<String>,
}

/// How [`SimHome::stop`] ended the simulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopHow {
    /// It answered `quit` and exited.
    Quit,
    /// It needed SIGTERM.
    Terminated,
    /// It needed SIGKILL.
    Killed,
    /// It had already exited; only the state file was removed.
    AlreadyGone,
    /// The recorded pid now belongs to another program, which was left alone.
    PidReused,
}

/// The outcome of [`SimHome::stop`].
#[derive(Debug, Clone)]
pub struct Stopped {
    /// The state that was recorded.
    pub state: SimState,
    /// How it ended.
    pub how: StopHow,
    /// The cycle it stopped at, when it answered `quit`.
    pub cycle: Option<u64>,
}

/// The answer of [`SimHome::status`].
#[derive(Debug, Clone)]
pub struct SimStatus {
    /// What was recorded at start.
    pub state: SimState,
    /// The control port's `stats`, or why it could not be had.
    pub stats: std::result::Result<SimStats, String>,
}

/// The folder of the state and log files, and the operations on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimHome {
    dir: PathBuf,
}

impl Default for SimHome {
    /// `WS_SIM_DIR`, else `<target>/ws-sim`.
    fn default() -> Self {
        match std::env::var_os(SIM_DIR_ENV) {
            Some(d) if !d.is_empty() => Self::at(workspace::absolute(Path::new(&d))),
            _ => Self::at(workspace::target_dir().join("ws-sim")),
        }
    }
}

/// Seconds since the Unix epoch.
fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

impl SimHome {
    /// Files in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `state.json`.
    pub fn state_path(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    /// `sim.log`.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("sim.log")
    }

    /// The recorded state, if there is a state file.
    pub fn read_state(&self) -> Result<Option<SimState>> {
        let path = self.state_path();
        match fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|source| SimError::StateParse { path, source }.into()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(SimError::StateIo { op: "read", path, source }.into()),
        }
    }

    fn write_state(&self, state: &SimState) -> Result<()> {
        let path = self.state_path();
        let tmp = self.dir.join("state.json.tmp");
        let text = serde_json::to_string_pretty(state)
            .map_err(|source| SimError::StateParse { path: path.clone(), source })?;
        fs::write(&tmp, text + "\n")
            .and_then(|()| fs::rename(&tmp, &path))
            .map_err(|source| SimError::StateIo { op: "write", path, source }.into())
    }

    fn remove_state(&self) -> Result<()> {
        let path = self.state_path();
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(SimError::StateIo { op: "remove", path, source }.into()),
        }
    }

    /// The recorded simulator if it is still alive. A state file whose process is gone is
    /// removed, with a note saying so in `notes`.
    pub fn running(&self, notes: &mut Vec<String>) -> Result<Option<SimState>> {
        let Some(state) = self.read_state()? else { return Ok(None) };
        if is_alive(state.pid) && looks_like_sim(state.pid, &state.bin) {
            return Ok(Some(state));
        }
        self.remove_state()?;
        notes.push(format!(
            "removed the stale state file {}: simulator pid {} is gone (its output is in {})",
            self.state_path().display(),
            state.pid,
            self.log_path().display()
        ));
        Ok(None)
    }

    /// Starts `ws-sim` in the background and waits for its READY line.
    pub fn start(&self, opts: &StartOptions) -> Result<Started> {
        let mut notes = Vec::new();
        if let Some(s) = self.running(&mut notes)? {
            return Err(SimError::AlreadyRunning { pid: s.pid, ctrl: s.ctrl }.into());
        }
        if !opts.elf.is_file() {
            return Err(SimError::ElfNotFound { path: opts.elf.clone() }.into());
        }
        let bin = find_binary()?;
        let log_path = self.log_path();
        let log_err = |source| SimError::LogFile { path: log_path.clone(), source };
        fs::create_dir_all(&self.dir).map_err(log_err)?;
        let mut log = OpenOptions::new().create(true).append(true).open(&log_path).map_err(log_err)?;
        let args = opts.to_args();
        writeln!(log, "==== wsctl sim start at {} (unix): {} {}", now_secs(), bin.display(), args.join(" "))
            .map_err(log_err)?;
        let offset = log.metadata().map_err(log_err)?.len();
        let stdout = log.try_clone().map_err(log_err)?;

        let mut child = process::detached(Command::new(&bin))
            .args(&args)
            .current_dir(workspace::root())
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(log)
            .spawn()
            .map_err(|source| SimError::Spawn { bin: bin.clone(), source })?;

        let timeout = opts.ready_timeout.unwrap_or_else(ready_timeout_from_env);
        let spinner = opts.progress.then(|| spinner(&bin));
        let started = Instant::now();
        let outcome = loop {
            let (ready, last) = scan_log(&log_path, offset);
            if let Some(r) = ready {
                break Ok(r);
            }
            if let Some(pb) = &spinner {
                pb.set_message(last.unwrap_or_else(|| "starting".into()));
            }
            if let Ok(Some(status)) = child.try_wait() {
                // It may have printed READY just before exiting; look once more.
                if let (Some(r), _) = scan_log(&log_path, offset) {
                    break Ok(r);
                }
                break Err(SimError::ExitedEarly {
                    status: status.to_string(),
                    log: log_path.clone(),
                    tail: tail(&log_path, offset, 20),
                });
            }
            if opts.cancel.as_ref().is_some_and(|c| c.load(Ordering::SeqCst)) {
                process::kill_group(child.id(), true);
                let _ = child.wait();
                break Err(SimError::Cancelled { log: log_path.clone() });
            }
            if started.elapsed() >= timeout {
                process::kill_group(child.id(), true);
                let _ = child.wait();
                break Err(SimError::NotReady {
                    waited: timeout,
                    log: log_path.clone(),
                    tail: tail(&log_path, offset, 20),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let ready_at = Instant::now();
        let booted = match (&outcome, opts.boot_cycles) {
            (Ok(r), Some(limit)) => {
                let ports = BootPorts { link: r.link, ctrl: r.ctrl, log: r.log };
                let mut show = |ran: u64| {
                    if let Some(pb) = &spinner {
                        pb.set_message(format!(
                            "firmware booting: {:.1} M of {:.0} M cycles",
                            ran as f64 / 1e6,
                            limit as f64 / 1e6
                        ));
                    }
                };
                wait_for_boot(ports, &opts.elf, limit, &mut show).map(|c| Some((c, ready_at.elapsed())))
            }
            _ => Ok(None),
        };
        if let Some(pb) = spinner {
            pb.finish_and_clear();
        }
        let booted = match booted {
            Ok(b) => b,
            Err(e) => {
                process::kill_group(child.id(), true);
                let _ = child.wait();
                return Err(e);
            }
        };
        let ready = outcome?;
        let pid = child.id();
        if ready.pid.is_some_and(|p| p != pid) {
            notes
                .push(format!("ws-sim reported pid {} but was started as pid {pid}", ready.pid.unwrap_or(0)));
        }
        let state = SimState {
            pid,
            link: ready.link,
            log: ready.log,
            ctrl: ready.ctrl,
            phy: ready.phy,
            elf: workspace::absolute(&opts.elf),
            board: workspace::absolute(&opts.board),
            started: now_secs(),
            sim_log: log_path,
            bin,
            args,
        };
        self.write_state(&state)?;
        Ok(Started { state, notes, booted })
    }

    /// The recorded simulator, alive, with its control port's statistics.
    pub fn status(&self) -> Result<SimStatus> {
        let mut notes = Vec::new();
        let Some(state) = self.running(&mut notes)? else {
            let reason =
                notes.pop().unwrap_or_else(|| format!("no state file at {}", self.state_path().display()));
            return Err(SimError::NotRunning { reason }.into());
        };
        let stats = SimCtrl::connect(state.ctrl).and_then(|mut c| c.stats()).map_err(|e| e.to_string());
        Ok(SimStatus { state, stats })
    }

    /// Stops the recorded simulator: `quit` on its control port, then SIGTERM, then SIGKILL
    /// to its process group, and removes the state file.
    pub fn stop(&self) -> Result<Stopped> {
        let Some(state) = self.read_state()? else {
            return Err(SimError::NotRunning {
                reason: format!("no state file at {}", self.state_path().display()),
            }
            .into());
        };
        let pid = state.pid;
        let finish = |how, cycle| -> Result<Stopped> {
            self.remove_state()?;
            Ok(Stopped { state: state.clone(), how, cycle })
        };
        if !is_alive(pid) {
            return finish(StopHow::AlreadyGone, None);
        }
        if !looks_like_sim(pid, &state.bin) {
            return finish(StopHow::PidReused, None);
        }
        let cycle =
            SimCtrl::connect_timeout(state.ctrl, Duration::from_secs(2)).and_then(|mut c| c.quit()).ok();
        if cycle.is_some() && process::wait_gone(pid, STOP_GRACE) {
            return finish(StopHow::Quit, cycle);
        }
        process::kill_group(pid, false);
        if process::wait_gone(pid, STOP_GRACE) {
            return finish(StopHow::Terminated, cycle);
        }
        process::kill_group(pid, true);
        if process::wait_gone(pid, Duration::from_secs(2)) {
            return finish(StopHow::Killed, cycle);
        }
        Err(SimError::Unkillable { pid }.into())
    }
}

/// Starts a simulator with the default [`SimHome`].
pub fn start(opts: &StartOptions) -> Result<Started> {
    SimHome::default().start(opts)
}

/// The default [`SimHome`]'s simulator status.
pub fn status() -> Result<SimStatus> {
    SimHome::default().status()
}

/// Stops the default [`SimHome`]'s simulator.
pub fn stop() -> Result<Stopped> {
    SimHome::default().stop()
}

/// Runs `ws-sim` in the foreground with this terminal's stdio and waits for it to exit. No
/// state file is written: this is `cargo xtask sim`'s way of running, not a background board.
/// When `opts.cancel` is set, the simulator gets SIGTERM (it then exits cleanly, closing any
/// FST file), so a caller that catches Ctrl-C still waits for it.
pub fn run_foreground(opts: &StartOptions) -> Result<std::process::ExitStatus> {
    if !opts.elf.is_file() {
        return Err(SimError::ElfNotFound { path: opts.elf.clone() }.into());
    }
    let bin = find_binary()?;
    let mut child = Command::new(&bin)
        .args(opts.to_args())
        .current_dir(workspace::root())
        .spawn()
        .map_err(|source| SimError::Spawn { bin: bin.clone(), source })?;
    let mut signalled = false;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) => {}
            Err(source) => return Err(SimError::Spawn { bin, source }.into()),
        }
        if !signalled && opts.cancel.as_ref().is_some_and(|c| c.load(Ordering::SeqCst)) {
            process::terminate(child.id());
            signalled = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ready_timeout_from_env() -> Duration {
    std::env::var(READY_TIMEOUT_ENV)
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(DEFAULT_READY_TIMEOUT)
}

/// Where `ws-sim` may be, in the order tried: `WS_SIM_BIN`; next to the running executable
/// (and one folder up, for test binaries in `target/<profile>/deps`);
/// `<target>/release/ws-sim`.
pub fn binary_candidates() -> Vec<PathBuf> {
    if let Some(p) = std::env::var_os(SIM_BIN_ENV).filter(|p| !p.is_empty()) {
        return vec![PathBuf::from(p)];
    }
    let mut c = Vec::new();
    if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)) {
        c.push(dir.join("ws-sim"));
        if dir.ends_with("deps") {
            if let Some(up) = dir.parent() {
                c.push(up.join("ws-sim"));
            }
        }
    }
    let release = workspace::target_dir().join("release").join("ws-sim");
    if !c.contains(&release) {
        c.push(release);
    }
    c
}

/// The first existing [`binary_candidates`] entry, or [`SimError::BinaryNotFound`].
pub fn find_binary() -> Result<PathBuf> {
    let looked = binary_candidates();
    looked.iter().find(|p| p.is_file()).cloned().ok_or_else(|| SimError::BinaryNotFound { looked }.into())
}

/// Reads `path` from `offset`: the READY line if present, and the last non-empty line.
fn scan_log(path: &Path, offset: u64) -> (Option<ReadyLine>, Option<String>) {
    let text = read_from(path, offset);
    let ready = text.lines().find_map(ReadyLine::parse);
    let last = text.lines().rev().map(str::trim).find(|l| !l.is_empty()).map(|l| {
        let l: String = l.chars().filter(|c| !c.is_control()).take(100).collect();
        l
    });
    (ready, last)
}

fn read_from(path: &Path, offset: u64) -> String {
    let mut s = Vec::new();
    if let Ok(mut f) = File::open(path) {
        if f.seek(SeekFrom::Start(offset)).is_ok() {
            let _ = f.read_to_end(&mut s);
        }
    }
    String::from_utf8_lossy(&s).into_owned()
}

/// The last `n` lines of `path` after `offset`, indented for an error message.
fn tail(path: &Path, offset: u64, n: usize) -> String {
    let text = read_from(path, offset);
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(n);
    if lines.is_empty() {
        return "  (no output)".into();
    }
    lines[from..].iter().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

fn spinner(bin: &Path) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new_spinner();
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {prefix} [{elapsed}] {wide_msg}") {
        pb.set_style(style);
    }
    pb.set_prefix(format!("{} (the first start builds the Verilated model)", bin.display()));
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_line() {
        let r = ReadyLine::parse(
            "WS-SIM READY link=127.0.0.1:7450 log=127.0.0.1:7451 ctrl=127.0.0.1:7452 pid=12345\n",
        )
        .unwrap();
        assert_eq!(r.link.port(), 7450);
        assert_eq!(r.log.port(), 7451);
        assert_eq!(r.ctrl.port(), 7452);
        assert_eq!(r.pid, Some(12345));
        assert!(ReadyLine::parse("WS-SIM READY link=127.0.0.1:7450").is_none(), "log and ctrl are required");
        assert!(ReadyLine::parse("building model...").is_none());
        let r = ReadyLine::parse(
            "WS-SIM READY ctrl=127.0.0.1:3 link=127.0.0.1:1 log=127.0.0.1:2 jtag=127.0.0.1:4",
        )
        .unwrap();
        assert_eq!((r.link.port(), r.pid), (1, None));
    }

    #[test]
    fn args_are_absolute() {
        let mut o = StartOptions::new("fw.elf", "boards/sim/board.toml");
        o.port_base = Some(0);
        o.threads = Some(2);
        o.trace = Some("w.fst".into());
        let a = o.to_args();
        assert_eq!(a[0], "--elf");
        assert!(Path::new(&a[1]).is_absolute() && a[1].ends_with("fw.elf"));
        assert!(Path::new(&a[3]).is_absolute());
        assert_eq!(&a[4..8], ["--port-base", "0", "--threads", "2"]);
        assert!(a[9].ends_with("w.fst"));
    }

    #[test]
    fn state_roundtrip_and_stale_cleanup() {
        let dir = std::env::temp_dir().join(format!("ws-sim-state-{}", std::process::id()));
        let home = SimHome::at(&dir);
        fs::create_dir_all(&dir).unwrap();
        assert_eq!(home.read_state().unwrap(), None);
        let state = SimState {
            pid: u32::MAX / 2, // no such process
            link: "127.0.0.1:1".parse().unwrap(),
            log: "127.0.0.1:2".parse().unwrap(),
            ctrl: "127.0.0.1:3".parse().unwrap(),
            phy: None,
            elf: "/fw".into(),
            board: "/b".into(),
            started: 1,
            sim_log: home.log_path(),
            bin: "/ws-sim".into(),
            args: vec![],
        };
        home.write_state(&state).unwrap();
        assert_eq!(home.read_state().unwrap(), Some(state.clone()));
        let mut notes = Vec::new();
        assert_eq!(home.running(&mut notes).unwrap(), None);
        assert!(notes[0].contains("stale state file"), "{notes:?}");
        assert_eq!(home.read_state().unwrap(), None, "removed");
        let e = home.status().unwrap_err().to_string();
        assert!(e.contains("no simulator is running") && e.contains("wsctl sim start"), "{e}");
        home.write_state(&state).unwrap();
        assert_eq!(home.stop().unwrap().how, StopHow::AlreadyGone);
        // An older state file without the optional fields still reads.
        fs::write(
            home.state_path(),
            r#"{"pid":1,"link":"127.0.0.1:1","log":"127.0.0.1:2","ctrl":"127.0.0.1:3","elf":"/f","board":"/b","started":0}"#,
        )
        .unwrap();
        assert_eq!(home.read_state().unwrap().unwrap().pid, 1);
        fs::write(home.state_path(), "{").unwrap();
        assert!(home.read_state().unwrap_err().to_string().contains("is corrupt"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_binary_lists_where_it_looked() {
        let e = SimError::BinaryNotFound { looked: binary_candidates() }.to_string();
        assert!(e.contains("ws-sim"), "{e}");
        assert!(
            binary_candidates().iter().any(|p| p.ends_with("release/ws-sim"))
                || std::env::var_os(SIM_BIN_ENV).is_some()
        );
    }
}
