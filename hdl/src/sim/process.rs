//! [`SimProcess`]: `ws-sim` as a child process, for the tests, the hil-tests and the bench.
//!
//! The child always gets `--parent-pid <this process>`, so a test that dies (even by SIGKILL)
//! never leaves a simulator behind; dropping a [`SimProcess`] ends and reaps it. Its stderr
//! (build progress, status, errors) goes to a log file of its own under `target/ws-sim/`,
//! which is deleted after a clean run and kept, with its path printed, when the owner is
//! panicking or the child did not exit cleanly.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::{SimError, SimOptions};
use crate::paths;

/// What the READY line tells: where the simulator listens, and its pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadyInfo {
    /// Host-link port.
    pub link: SocketAddr,
    /// Log port.
    pub log: SocketAddr,
    /// Control port.
    pub ctrl: SocketAddr,
    /// The link engine's PHY port (link protocol v2).
    pub phy: SocketAddr,
    /// Process id of `ws-sim`.
    pub pid: u32,
}

/// Parses `WS-SIM READY link=… log=… ctrl=… phy=… pid=…` (docs/sim.md). Unknown `key=value` pairs
/// are ignored, so a later simulator may add some.
pub fn parse_ready_line(line: &str) -> Option<ReadyInfo> {
    let mut words = line.split_whitespace();
    if words.next()? != "WS-SIM" || words.next()? != "READY" {
        return None;
    }
    let (mut link, mut log, mut ctrl, mut phy, mut pid) = (None, None, None, None, None);
    for w in words {
        let (k, v) = w.split_once('=')?;
        match k {
            "link" => link = Some(v.parse().ok()?),
            "log" => log = Some(v.parse().ok()?),
            "ctrl" => ctrl = Some(v.parse().ok()?),
            "phy" => phy = Some(v.parse().ok()?),
            "pid" => pid = Some(v.parse().ok()?),
            _ => {}
        }
    }
    Some(ReadyInfo { link: link?, log: log?, ctrl: ctrl?, phy: phy?, pid: pid? })
}

/// How long to wait for READY by default: the first start may build the model.
const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(600);
/// How long `stop` waits after `quit` before killing.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long `Drop` waits after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(3);
/// Read timeout of a control request.
const CTRL_TIMEOUT: Duration = Duration::from_secs(10);

/// A running `ws-sim`.
#[derive(Debug)]
pub struct SimProcess {
    child: Child,
    ready: ReadyInfo,
    log_file: PathBuf,
    ctrl: Mutex<Option<BufReader<TcpStream>>>,
    status: Option<ExitStatus>,
}

impl SimProcess {
    /// Starts `ws-sim` (see [`SimProcess::binary`]) with `opts` and waits for its READY line.
    pub fn start(opts: &SimOptions) -> Result<SimProcess, SimError> {
        Self::start_with(&Self::binary()?, opts)
    }

    /// Starts the `ws-sim` binary at `bin` with `opts` (`--parent-pid` is always this
    /// process) and waits for its READY line: `WS_SIM_READY_TIMEOUT` seconds, default 600.
    pub fn start_with(bin: &Path, opts: &SimOptions) -> Result<SimProcess, SimError> {
        let mut opts = opts.clone();
        opts.parent_pid = Some(std::process::id());
        let log_file = new_log_file()?;
        let stderr = std::fs::File::create(&log_file)
            .map_err(SimError::io(format!("creating the simulator log {}", log_file.display())))?;
        let mut child = Command::new(bin)
            .args(opts.to_args())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(SimError::io(format!(
                "starting {}; rebuild it with `cargo build --release -p ws-hdl --bin ws-sim`",
                bin.display()
            )))?;
        let (tx, rx) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            // Reads stdout to its end, so the child never blocks on a full pipe.
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if let Some(info) = parse_ready_line(&line) {
                        let _ = tx.send(info);
                    }
                }
            });
        }
        let waited = ready_timeout();
        let deadline = Instant::now() + waited;
        let mut sim = SimProcess {
            child,
            ready: ReadyInfo {
                link: ([127, 0, 0, 1], 0).into(),
                log: ([127, 0, 0, 1], 0).into(),
                ctrl: ([127, 0, 0, 1], 0).into(),
                phy: ([127, 0, 0, 1], 0).into(),
                pid: 0,
            },
            log_file,
            ctrl: Mutex::new(None),
            status: None,
        };
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(info) => {
                    sim.ready = info;
                    return Ok(sim);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // Stdout closed without READY: the child is exiting.
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = sim.wait_timeout(Duration::from_secs(5))?;
                    return Err(sim.exited_error(status));
                }
            }
            if let Some(status) = sim.child.try_wait().map_err(SimError::io("waiting for ws-sim"))? {
                sim.status = Some(status);
                return Err(sim.exited_error(Some(status)));
            }
            if Instant::now() >= deadline {
                sim.kill();
                return Err(SimError::NotReady {
                    waited,
                    tail: log_tail(&sim.log_file),
                    log: sim.log_file.clone(),
                });
            }
        }
    }

    /// The `ws-sim` binary: `$WS_SIM_BIN`, else `<workspace>/target/release/ws-sim`, else
    /// `<workspace>/target/debug/ws-sim` (under `$CARGO_TARGET_DIR` first, when set).
    pub fn binary() -> Result<PathBuf, SimError> {
        if let Some(p) = std::env::var_os("WS_SIM_BIN") {
            let p = PathBuf::from(p);
            return if p.is_file() { Ok(p) } else { Err(SimError::BinaryMissing { looked: vec![p] }) };
        }
        let mut roots = Vec::new();
        if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
            roots.push(paths::in_workspace(PathBuf::from(t)));
        }
        roots.push(paths::workspace_root().join("target"));
        let looked: Vec<PathBuf> = roots
            .iter()
            .flat_map(|r| [r.join("release").join("ws-sim"), r.join("debug").join("ws-sim")])
            .collect();
        match looked.iter().find(|p| p.is_file()) {
            Some(p) => Ok(p.clone()),
            None => Err(SimError::BinaryMissing { looked }),
        }
    }

    /// Everything the READY line said.
    pub fn ready(&self) -> &ReadyInfo {
        &self.ready
    }

    /// Host-link port.
    pub fn link_addr(&self) -> SocketAddr {
        self.ready.link
    }

    /// The link engine's PHY port (link protocol v2).
    pub fn phy_addr(&self) -> SocketAddr {
        self.ready.phy
    }

    /// Log port.
    pub fn log_addr(&self) -> SocketAddr {
        self.ready.log
    }

    /// Control port.
    pub fn ctrl_addr(&self) -> SocketAddr {
        self.ready.ctrl
    }

    /// Process id of `ws-sim`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The file that receives the simulator's stderr.
    pub fn log_file(&self) -> &Path {
        &self.log_file
    }

    /// Sends one control request (`stats`, `reset`, `pause`, `resume`, `quit`) and returns the
    /// answer as is, `ok: false` included. `Err` means no answer could be had.
    pub fn ctrl(&self, cmd: &str) -> Result<Value, SimError> {
        let err = |msg: String| SimError::Ctrl {
            cmd: cmd.to_string(),
            addr: self.ready.ctrl,
            msg,
            log: self.log_file.clone(),
        };
        if cmd.contains('\n') {
            return Err(err("a request is one line".into()));
        }
        let mut guard = self.ctrl.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            let s = TcpStream::connect_timeout(&self.ready.ctrl, CTRL_TIMEOUT)
                .map_err(|e| err(format!("cannot connect ({e})")))?;
            s.set_read_timeout(Some(CTRL_TIMEOUT)).map_err(|e| err(e.to_string()))?;
            let _ = s.set_nodelay(true);
            *guard = Some(BufReader::new(s));
        }
        let Some(conn) = guard.as_mut() else {
            return Err(err("no connection".into()));
        };
        let result = (|| {
            conn.get_mut().write_all(format!("{cmd}\n").as_bytes()).map_err(|e| format!("sending ({e})"))?;
            let mut line = String::new();
            match conn.read_line(&mut line) {
                Ok(0) => Err("the connection closed before the answer".to_string()),
                Ok(_) => serde_json::from_str::<Value>(&line)
                    .map_err(|e| format!("unreadable answer {line:?} ({e})")),
                Err(e) => Err(format!("reading the answer ({e})")),
            }
        })();
        if result.is_err() {
            // Do not reuse a connection in an unknown state.
            *guard = None;
        }
        result.map_err(err)
    }

    /// The `stats` answer (docs/sim.md lists its fields).
    pub fn stats(&self) -> Result<Value, SimError> {
        let v = self.ctrl("stats")?;
        if v["ok"] == Value::Bool(true) {
            Ok(v)
        } else {
            Err(SimError::Refused {
                cmd: "stats".into(),
                error: v["error"].as_str().unwrap_or("no error message").to_string(),
            })
        }
    }

    /// Asks the simulator to quit and waits for it; kills it if it is still running after
    /// 5 s. Returns its exit status.
    pub fn stop(&mut self) -> Result<ExitStatus, SimError> {
        if let Some(s) = self.status {
            return Ok(s);
        }
        let _ = self.ctrl("quit");
        if let Some(s) = self.wait_timeout(STOP_GRACE)? {
            return Ok(s);
        }
        self.kill();
        self.status.ok_or_else(|| SimError::Io {
            what: format!("ws-sim (pid {}) did not end after SIGKILL", self.child.id()),
            source: std::io::Error::other("still running"),
        })
    }

    /// Waits up to `timeout` for the simulator to exit on its own (`--max-cycles`, a signal);
    /// `None` if it still runs.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<ExitStatus>, SimError> {
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().map_err(SimError::io("waiting for ws-sim"))? {
                self.status = Some(s);
                return Ok(Some(s));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, sig: libc::c_int) {
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: plain kill(2) on our own child, which is not reaped yet (so the pid is
            // still ours).
            unsafe { libc::kill(pid, sig) };
        }
    }

    /// SIGTERM, a grace period, SIGKILL; always reaps.
    fn kill(&mut self) {
        if self.status.is_some() {
            return;
        }
        self.signal(libc::SIGTERM);
        if let Ok(Some(_)) = self.wait_timeout(TERM_GRACE) {
            return;
        }
        let _ = self.child.kill();
        if let Ok(s) = self.child.wait() {
            self.status = Some(s);
        }
    }

    fn exited_error(&self, status: Option<ExitStatus>) -> SimError {
        SimError::Exited {
            status: status.map_or_else(|| "still running".to_string(), |s| s.to_string()),
            log: self.log_file.clone(),
            tail: log_tail(&self.log_file),
        }
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        self.kill();
        let clean = self.status.is_some_and(|s| s.success());
        if std::thread::panicking() || !clean {
            let _ = writeln!(std::io::stderr(), "ws-sim log kept: {}", self.log_file.display());
        } else {
            let _ = std::fs::remove_file(&self.log_file);
        }
    }
}

fn ready_timeout() -> Duration {
    std::env::var("WS_SIM_READY_TIMEOUT")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(DEFAULT_READY_TIMEOUT, Duration::from_secs_f64)
}

/// A log file name no other simulator of any process uses: pid, sequence, time.
fn new_log_file() -> Result<PathBuf, SimError> {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let dir = paths::workspace_root().join("target").join("ws-sim");
    std::fs::create_dir_all(&dir).map_err(SimError::io(format!("creating {}", dir.display())))?;
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    Ok(dir.join(format!("ws-sim-{}-{n}-{ms}.log", std::process::id())))
}

/// The last lines of a log, for error messages.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(30)..].join("\n");
    if tail.is_empty() {
        "(the log is empty)".into()
    } else {
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_ready_line() {
        let r = parse_ready_line(
            "WS-SIM READY link=127.0.0.1:7450 log=127.0.0.1:7451 ctrl=127.0.0.1:7452 phy=127.0.0.1:7454 pid=12345\n",
        )
        .unwrap();
        assert_eq!(r.phy.port(), 7454);
        assert_eq!(r.link, "127.0.0.1:7450".parse().unwrap());
        assert_eq!(r.log.port(), 7451);
        assert_eq!(r.ctrl.port(), 7452);
        assert_eq!(r.pid, 12345);
        // Extra keys are fine; missing or malformed ones are not.
        assert!(parse_ready_line(
            "WS-SIM READY link=127.0.0.1:1 log=127.0.0.1:2 ctrl=127.0.0.1:3 phy=127.0.0.1:6 pid=4 jtag=127.0.0.1:5"
        )
        .is_some());
        assert!(parse_ready_line("WS-SIM READY link=127.0.0.1:1 log=127.0.0.1:2 pid=4").is_none());
        assert!(
            parse_ready_line("WS-SIM READY link=nowhere log=127.0.0.1:2 ctrl=127.0.0.1:3 pid=4").is_none()
        );
        assert!(parse_ready_line("ws-hdl: building Verilated model").is_none());
        assert!(parse_ready_line("").is_none());
    }
}
