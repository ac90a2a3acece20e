//! `wsctl` end to end, without a Verilator model: the board is a [`FakeBoard`] behind real
//! loopback TCP ports, and `ws-sim` is this test binary re-run as a fake simulator (see
//! [`fake_ws_sim_entry`]) that speaks the READY line, the control port and the link the way
//! docs/sim.md says.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use host_driver::transport::{FakeBoard, FakeDevice};

const WSCTL: &str = env!("CARGO_BIN_EXE_wsctl");

/// Serves `board` on every connection to `link`, one client at a time.
fn serve_link(link: TcpListener, board: FakeBoard) {
    std::thread::spawn(move || {
        for conn in link.incoming() {
            let Ok(mut s) = conn else { continue };
            let mut board = board.clone();
            let mut buf = [0u8; 4096];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut reply = Vec::new();
                board.receive(&buf[..n], &mut reply);
                if s.write_all(&reply).is_err() {
                    break;
                }
            }
        }
    });
}

/// Serves the log port: `bytes`, then the connection stays open and silent.
fn serve_log(log: TcpListener, bytes: Vec<u8>) {
    std::thread::spawn(move || {
        let mut keep = Vec::new();
        for conn in log.incoming() {
            let Ok(mut s) = conn else { continue };
            let _ = s.write_all(&bytes);
            keep.push(s);
        }
    });
}

/// Serves the control port; `quit` calls `on_quit` after answering.
/// The control port; with `advancing` its cycle counter runs at 1 M cycles/s from 123456,
/// else it stands at 123456.
fn serve_ctrl(ctrl: TcpListener, ignore_quit: bool, advancing: bool, on_quit: fn()) {
    let t0 = std::time::Instant::now();
    std::thread::spawn(move || {
        for conn in ctrl.incoming() {
            let Ok(s) = conn else { continue };
            std::thread::spawn(move || {
                let mut w = s.try_clone().unwrap();
                for line in BufReader::new(s).lines() {
                    let Ok(line) = line else { break };
                    let cycle = 123_456 + if advancing { t0.elapsed().as_micros() as u64 } else { 0 };
                    let reply = match line.trim() {
                        "stats" => format!(
                            r#"{{"ok":true,"cycle":{cycle},"sim_hz":1400000.0,"clock_hz":50000000,"idle":true,"core_sleep":true,"link_rx_bytes":10,"link_tx_bytes":20,"log_bytes":30,"pid":{}}}"#,
                            std::process::id()
                        ),
                        "quit" if !ignore_quit => r#"{"ok":true,"cycle":123999}"#.into(),
                        other => format!(r#"{{"ok":false,"error":"unknown request `{other}`"}}"#),
                    };
                    let _ = w.write_all(format!("{reply}\n").as_bytes());
                    if line.trim() == "quit" && !ignore_quit {
                        on_quit();
                    }
                }
            });
        }
    });
}

/// Three consecutive free loopback ports (link, log, ctrl), as `--addr` expects them.
fn consecutive_ports() -> (TcpListener, TcpListener, TcpListener) {
    let mut seed = std::process::id() as u16;
    for _ in 0..200 {
        seed = seed.wrapping_mul(31).wrapping_add(7);
        let base = 20_000 + seed % 30_000;
        let bind = |p: u16| TcpListener::bind(("127.0.0.1", p));
        if let (Ok(a), Ok(b), Ok(c)) = (bind(base), bind(base + 1), bind(base + 2)) {
            return (a, b, c);
        }
    }
    panic!("no three consecutive free ports");
}

/// A FakeBoard on three consecutive ports; returns the link address.
fn fake_board(log: Vec<u8>) -> (SocketAddr, FakeBoard) {
    let (link, logp, ctrl) = consecutive_ports();
    let addr = link.local_addr().unwrap();
    let board = FakeBoard::new();
    serve_link(link, board.clone());
    serve_log(logp, log);
    serve_ctrl(ctrl, false, false, || {});
    (addr, board)
}

fn wsctl(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(WSCTL);
    c.args(args).env_remove("WS_BOARD").env_remove("WS_SIM_BIN").env_remove("WS_SIM_DIR");
    // Never touch a real simulator's state in target/ws-sim.
    c.env("WS_SIM_DIR", std::env::temp_dir().join(format!("wsctl-test-nosim-{}", std::process::id())));
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "wsctl failed: {}\nstdout:\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn fails(out: &Output) -> String {
    assert!(!out.status.success(), "wsctl should fail; stdout:\n{}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn help_is_stable() {
    insta::assert_snapshot!("help", ok(&wsctl(&["--help"], &[])));
    insta::assert_snapshot!("sim_start_help", ok(&wsctl(&["sim", "start", "--help"], &[])));
    for sub in ["ping", "info", "logs", "peek", "poke", "reset", "stats", "log-echo", "completions", "sim"] {
        ok(&wsctl(&[sub, "--help"], &[]));
    }
    assert!(ok(&wsctl(&["completions", "bash"], &[])).contains("wsctl"));
}

#[test]
fn no_simulator_says_where_and_what_to_do() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let err = fails(&wsctl(&["ping", "--addr", &port.to_string()], &[]));
    assert!(err.contains(&format!("no simulator answered at {port}")), "{err}");
    assert!(err.contains("wsctl sim start"), "{err}");
    assert_eq!(err.matches("os error").count(), 1, "the OS error once: {err}");
}

#[test]
fn commands_against_a_fake_board() {
    let (addr, board) = fake_board(vec![0, 0x13, 0x37, 0]);
    let a = addr.to_string();
    let run = |args: &[&str]| {
        let mut v = args.to_vec();
        v.extend(["--addr", a.as_str()]);
        wsctl(&v, &[])
    };
    let out = ok(&run(&["ping", "--count", "3"]));
    assert_eq!(out.matches("answer from sim link").count(), 3, "{out}");
    assert!(out.contains("3 pings, 3 answered"), "{out}");

    let info = ok(&run(&["info"])).replace(&a, "ADDR");
    insta::assert_snapshot!("info_fake_board", info);

    let w = board.identity().poke;
    let at = format!("{:#x}", w.base);
    assert!(ok(&run(&["poke", &at, "de:ad:be:ef"])).contains("wrote 4 bytes"));
    let at4 = format!("{:#x}", w.base + 4);
    ok(&run(&["poke", &at4, "--u32", "0x11223344"]));
    let dump = ok(&run(&["peek", &at, "8"]));
    assert!(dump.starts_with(&format!("{:08x}  de ad be ef 44 33 22 11", w.base)), "{dump}");

    let err = fails(&run(&["poke", "0x10000000", "00000000"]));
    assert!(err.contains("OutOfWindow") && err.contains("0x10000000"), "{err}");

    ok(&run(&["log-echo", "42", "-7"]));
    assert_eq!(board.log().echoes, [(42, -7)]);
    let stats = ok(&run(&["stats"]));
    assert!(stats.contains("refused      1") && stats.contains("board time"), "{stats}");
    ok(&run(&["reset"]));
    assert_eq!(board.log().resets, 1);

    let elf = workspace_root().join(host_driver::workspace::DEFAULT_ELF);
    let logs = run(&["logs", "--elf", elf.to_str().unwrap(), "--quiet-ms", "100"]);
    if elf.exists() {
        ok(&logs);
        // The one frame served is garbage: reported, not fatal.
        assert!(String::from_utf8_lossy(&logs.stderr).contains("2 bytes"), "{logs:?}");
    } else {
        assert!(fails(&logs).contains("could not read firmware ELF"));
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

// ---------------------------------------------------------------------------------------
// The fake `ws-sim`.

/// Env var carrying the fake simulator's arguments; its presence makes this test the fake.
const FAKE_ARGS: &str = "FAKE_WS_SIM_ARGS";

/// Not a test: when run by the fake `ws-sim` script, this is the simulator. It binds three
/// ephemeral ports, prints READY on stdout, serves a FakeBoard on the link, and exits on
/// `quit` (unless FAKE_WS_SIM_IGNORE_QUIT is set, to exercise SIGTERM). With
/// FAKE_WS_SIM_FAIL set it complains on stderr and exits 3 before READY.
#[test]
fn fake_ws_sim_entry() {
    let Ok(args) = std::env::var(FAKE_ARGS) else { return };
    eprintln!("fake ws-sim: args {args}");
    if std::env::var_os("FAKE_WS_SIM_FAIL").is_some() {
        eprintln!("error: the Verilated model failed to build (fake)");
        std::process::exit(3);
    }
    assert!(args.contains("--elf") && args.contains("--board"), "{args}");
    let bind = || TcpListener::bind("127.0.0.1:0").unwrap();
    let (link, log, ctrl) = (bind(), bind(), bind());
    let addr = |l: &TcpListener| l.local_addr().unwrap();
    println!(
        "WS-SIM READY link={} log={} ctrl={} pid={}",
        addr(&link),
        addr(&log),
        addr(&ctrl),
        std::process::id()
    );
    std::io::stdout().flush().unwrap();
    // FAKE_WS_SIM_MUTE: a board whose firmware never answers, while its clock runs.
    let mute = std::env::var_os("FAKE_WS_SIM_MUTE").is_some();
    let board = FakeBoard::new();
    board.set_mute(mute);
    serve_link(link, board);
    serve_log(log, Vec::new());
    serve_ctrl(ctrl, std::env::var_os("FAKE_WS_SIM_IGNORE_QUIT").is_some(), mute, || {
        std::thread::sleep(Duration::from_millis(50));
        std::process::exit(0)
    });
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A `ws-sim` script that runs this test binary as the fake simulator. Its command line
/// names `ws-sim`, so `wsctl sim stop` recognises the process as a simulator.
fn fake_sim_script(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let exe = std::env::current_exe().unwrap();
    let script = dir.join("ws-sim");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexport {FAKE_ARGS}=\"$*\"\nexec '{}' --exact fake_ws_sim_entry --nocapture --test-threads=1 ws-sim-fake\n",
            exe.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

struct SimDir {
    dir: PathBuf,
    env: Vec<(String, String)>,
}

impl SimDir {
    fn new(name: &str, extra: &[(&str, &str)]) -> Self {
        let dir = std::env::temp_dir().join(format!("wsctl-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let script = fake_sim_script(&dir);
        let mut env = vec![
            ("WS_SIM_BIN".to_string(), script.display().to_string()),
            ("WS_SIM_READY_TIMEOUT".to_string(), "60".to_string()),
        ];
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Self { dir, env }
    }

    fn run(&self, args: &[&str]) -> Output {
        let state = self.dir.join("state");
        let mut env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let state = state.display().to_string();
        env.push(("WS_SIM_DIR", &state));
        wsctl(args, &env)
    }

    fn state(&self) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(self.dir.join("state/state.json")).unwrap()).unwrap()
    }

    fn elf(&self) -> String {
        // Any existing file passes the ELF check; the fake loads nothing.
        self.dir.join("ws-sim").display().to_string()
    }
}

impl Drop for SimDir {
    fn drop(&mut self) {
        // Never leave a fake simulator behind, even when an assertion failed.
        let _ = self.run(&["sim", "stop"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn sim_start_waits_for_the_firmware_in_simulated_cycles() {
    // The firmware never answers; the clock runs at 1 M cycles/s. The wait ends after the
    // cycles asked for, not a wall time, and says what it saw.
    let sim = SimDir::new("noboot", &[("FAKE_WS_SIM_MUTE", "1")]);
    let err = fails(&sim.run(&[
        "sim",
        "start",
        "--elf",
        &sim.elf(),
        "--port-base",
        "0",
        "--boot-cycles",
        "400000",
    ]));
    assert!(err.contains("the firmware did not answer a ping within"), "{err}");
    assert!(err.contains("limit 400000") && err.contains("WS_SIM_BOOT_CYCLES"), "{err}");
    assert!(err.contains("the board's log ended with"), "{err}");
    // The simulator that never booted was stopped, and no state was left.
    assert!(!sim.dir.join("state/state.json").exists(), "a state file was left");
    // Without the wait, it starts (a board left in its loader is reached this way).
    let out = ok(&sim.run(&["sim", "start", "--elf", &sim.elf(), "--port-base", "0", "--no-boot-wait"]));
    assert!(out.contains("ws-sim running (not waited for boot)"), "{out}");
}

#[test]
fn sim_start_status_use_stop() {
    let sim = SimDir::new("lifecycle", &[]);
    let out = ok(&sim.run(&["sim", "start", "--elf", &sim.elf(), "--port-base", "0"]));
    assert!(out.contains("ws-sim running (firmware answering at cycle 0.12 M"), "{out}");
    let state = sim.state();
    let pid = state["pid"].as_u64().unwrap();
    assert!(state["link"].as_str().unwrap().starts_with("127.0.0.1:"));
    assert!(state["args"].as_array().unwrap().iter().any(|a| a == "--port-base"));

    let err = fails(&sim.run(&["sim", "start", "--elf", &sim.elf()]));
    assert!(err.contains(&format!("already running (pid {pid}")), "{err}");

    let status = ok(&sim.run(&["sim", "status"]));
    assert!(status.contains(&format!("pid            {pid}")) && status.contains("123456"), "{status}");
    assert!(status.contains("1.40 MHz") && status.contains("core sleeping  yes"), "{status}");

    // Without --addr, commands find the running simulator's ports through its state file.
    let ping = ok(&sim.run(&["ping"]));
    assert!(ping.contains(state["link"].as_str().unwrap()), "{ping}");
    let info = ok(&sim.run(&["info"]));
    assert!(info.contains("sim rate     1.40 MHz simulated"), "{info}");

    let out = ok(&sim.run(&["sim", "stop"]));
    assert!(out.contains("quit at cycle 123999"), "{out}");
    assert!(!sim.dir.join("state/state.json").exists());
    let err = fails(&sim.run(&["sim", "status"]));
    assert!(err.contains("no simulator is running"), "{err}");
    let log = std::fs::read_to_string(sim.dir.join("state/sim.log")).unwrap();
    assert!(log.contains("==== wsctl sim start") && log.contains("WS-SIM READY"), "{log}");
}

#[test]
fn sim_stop_escalates_to_sigterm() {
    let sim = SimDir::new("sigterm", &[("FAKE_WS_SIM_IGNORE_QUIT", "1")]);
    ok(&sim.run(&["sim", "start", "--elf", &sim.elf(), "--port-base", "0"]));
    let out = ok(&sim.run(&["sim", "stop"]));
    assert!(out.contains("SIGTERM"), "{out}");
}

#[test]
fn sim_that_dies_before_ready_shows_its_output() {
    let sim = SimDir::new("dies", &[("FAKE_WS_SIM_FAIL", "1")]);
    let err = fails(&sim.run(&["sim", "start", "--elf", &sim.elf()]));
    assert!(err.contains("exited (exit status: 3) before it was ready"), "{err}");
    assert!(err.contains("the Verilated model failed to build (fake)"), "{err}");
    assert!(!sim.dir.join("state/state.json").exists());
}

#[test]
fn sim_start_checks_its_inputs() {
    let sim = SimDir::new("inputs", &[]);
    let err = fails(&sim.run(&["sim", "start", "--elf", "/nonexistent/fw.elf"]));
    assert!(err.contains("firmware ELF /nonexistent/fw.elf does not exist"), "{err}");
    let missing = [("WS_SIM_BIN", "/nonexistent/ws-sim")];
    let mut env: Vec<(&str, &str)> = missing.to_vec();
    let state = sim.dir.join("state").display().to_string();
    env.push(("WS_SIM_DIR", &state));
    let err = fails(&wsctl(&["sim", "start", "--elf", &sim.elf()], &env));
    assert!(err.contains("could not find the `ws-sim` binary (looked at /nonexistent/ws-sim)"), "{err}");
}

#[test]
fn stale_state_is_cleaned_up() {
    let sim = SimDir::new("stale", &[]);
    std::fs::create_dir_all(sim.dir.join("state")).unwrap();
    std::fs::write(
        sim.dir.join("state/state.json"),
        r#"{"pid":2147483000,"link":"127.0.0.1:1","log":"127.0.0.1:2","ctrl":"127.0.0.1:3","elf":"/f","board":"/b","started":0}"#,
    )
    .unwrap();
    let err = fails(&sim.run(&["sim", "status"]));
    assert!(err.contains("removed the stale state file"), "{err}");
    assert!(!sim.dir.join("state/state.json").exists());
}

#[test]
fn ctrl_client_talks_to_the_fake() {
    let (link, _, ctrl) = consecutive_ports();
    drop(link);
    let addr = ctrl.local_addr().unwrap();
    serve_ctrl(ctrl, false, false, || {});
    let mut c = host_driver::sim::SimCtrl::connect(addr).unwrap();
    assert_eq!(c.stats().unwrap().cycle, 123456);
    let e = c.request("frob").unwrap_err().to_string();
    assert!(e.contains("refused `frob`"), "{e}");
    let _ = TcpStream::connect(addr).unwrap();
}
