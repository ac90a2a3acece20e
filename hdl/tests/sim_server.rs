//! `ws-sim` end to end (docs/sim.md): each test starts the real binary with a demo program on
//! ephemeral ports through [`SimProcess`] and talks to it over its sockets. Only behaviour is
//! asserted; speed belongs to `cargo xtask bench`, so the one rate check (the idle throttle)
//! is an upper bound with a wide margin.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;
use ws_hdl::sim::elf::{words_to_bytes, write_elf32};
use ws_hdl::sim::{parse_ready_line, programs, Demo, SimError, SimOptions, SimProcess, Soc};
use ws_hdl::vbuild::{self, soc::SocBuild};

const RAM_BASE: u32 = ws_common::regmap::map::RAM_BASE;
const WAIT: Duration = Duration::from_secs(20);

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ws-sim"))
}

/// Builds the model once in this process before any simulator starts, so parallel tests do
/// not each build it on a cold cache.
fn ensure_model() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        Soc::build(&SocBuild::default(), &mut vbuild::stderr_progress)
            .unwrap_or_else(|e| panic!("building the SoC model: {e}"));
    });
}

fn start(opts: SimOptions) -> SimProcess {
    ensure_model();
    SimProcess::start_with(bin(), &opts).unwrap_or_else(|e| panic!("starting ws-sim: {e}"))
}

/// Starts `opts` running the echo program and waits until its boot banner went out (and was
/// discarded, nobody listening), so a link client connected afterwards sees only what follows.
fn start_echo(opts: SimOptions) -> SimProcess {
    let sim = start(opts);
    wait_for("the boot banner", || sim.stats().unwrap()["link_discarded"].as_u64().unwrap() >= 2);
    sim
}

fn echo() -> SimProcess {
    start_echo(SimOptions::with_demo(Demo::Echo))
}

fn read_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    s.set_read_timeout(Some(WAIT)).unwrap();
    let mut got = vec![0; n];
    s.read_exact(&mut got).unwrap_or_else(|e| panic!("reading {n} bytes: {e}"));
    got
}

fn ok(v: &Value) -> &Value {
    assert_eq!(v["ok"], Value::Bool(true), "answer: {v}");
    v
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn link_client(sim: &SimProcess) -> TcpStream {
    let s = TcpStream::connect(sim.link_addr()).unwrap();
    wait_for("the link client to be accepted", || sim.stats().unwrap()["link_client"] == true);
    s
}

fn process_exists(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[test]
fn ready_line_names_loopback_ports_and_the_pid() {
    let sim = echo();
    let r = sim.ready();
    for a in [r.link, r.log, r.ctrl, r.phy] {
        assert!(a.ip().is_loopback() && a.port() != 0, "{a}");
    }
    assert_eq!(r.pid, sim.pid());
    let s = ok(&sim.stats().unwrap()).clone();
    assert_eq!(s["pid"], sim.pid());
    assert!(parse_ready_line(&format!(
        "WS-SIM READY link={} log={} ctrl={} phy={} pid=1",
        r.link, r.log, r.ctrl, r.phy
    ))
    .is_some());
}

#[test]
fn link_echoes_each_byte_plus_one_after_the_banner() {
    let sim = echo();
    let mut link = link_client(&sim);
    ok(&sim.ctrl("reset").unwrap());
    assert_eq!(read_n(&mut link, 2), programs::ECHO_BANNER_LINK);
    let sent: Vec<u8> = (0..=254u8).cycle().take(1000).collect();
    link.write_all(&sent).unwrap();
    let got = read_n(&mut link, sent.len());
    let want: Vec<u8> = sent.iter().map(|b| b + 1).collect();
    assert_eq!(got, want);
    let s = sim.stats().unwrap();
    assert!(s["link_rx_bytes"].as_u64().unwrap() >= 1000, "{s}");
    assert!(s["link_tx_bytes"].as_u64().unwrap() >= 1002, "{s}");
}

#[test]
fn log_clients_each_get_the_history() {
    let sim = echo();
    let want = programs::ECHO_BANNER_LOG;
    // Let the banner finish before anyone connects: both clients get it from the history.
    wait_for("the banner on the UART", || {
        sim.stats().unwrap()["log_bytes"].as_u64().unwrap() >= want.len() as u64
    });
    let mut a = TcpStream::connect(sim.log_addr()).unwrap();
    let mut b = TcpStream::connect(sim.log_addr()).unwrap();
    assert_eq!(read_n(&mut a, want.len()), want);
    assert_eq!(read_n(&mut b, want.len()), want);
    wait_for("two log clients", || sim.stats().unwrap()["log_clients"] == 2);
    // A reset prints the banner again, live, to both.
    ok(&sim.ctrl("reset").unwrap());
    assert_eq!(read_n(&mut a, want.len()), want);
    assert_eq!(read_n(&mut b, want.len()), want);
}

#[test]
fn stats_pause_and_resume() {
    let sim = echo();
    let s = sim.stats().unwrap();
    for k in [
        "cycle",
        "sim_hz",
        "clock_hz",
        "uptime_s",
        "paused",
        "idle",
        "link_rx_bytes",
        "link_tx_bytes",
        "link_discarded",
        "log_bytes",
        "uart_framing_errors",
        "uart_div",
        "link_client",
        "log_clients",
        "core_sleep",
        "gpio_out",
        "resets",
        "pid",
        "board",
        "elf",
        "model",
        "threads",
        "trace",
    ] {
        assert!(s.get(k).is_some(), "stats lacks `{k}`: {s}");
    }
    assert_eq!(s["clock_hz"], 50_000_000);
    assert_eq!(s["board"], "sim");
    assert_eq!(s["threads"], 1);
    assert_eq!(s["paused"], false);
    assert_eq!(s["elf"], Value::Null);
    assert_eq!(s["uart_div"], programs::DEMO_UART_DIV);
    assert_eq!(s["gpio_out"], programs::ECHO_GPIO);
    let c0 = s["cycle"].as_u64().unwrap();
    wait_for("the cycle count to grow", || sim.stats().unwrap()["cycle"].as_u64().unwrap() > c0);

    let p = ok(&sim.ctrl("pause").unwrap())["cycle"].as_u64().unwrap();
    let a = sim.stats().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let b = sim.stats().unwrap();
    assert_eq!(a["paused"], true);
    assert_eq!(a["cycle"], b["cycle"], "paused, yet the clock ran");
    assert_eq!(a["cycle"].as_u64().unwrap(), p);

    ok(&sim.ctrl("resume").unwrap());
    wait_for("the clock to run again", || sim.stats().unwrap()["cycle"].as_u64().unwrap() > p);
    assert_eq!(sim.stats().unwrap()["paused"], false);
}

#[test]
fn reset_replays_the_banner_and_a_new_link_client_replaces_the_old() {
    let sim = echo();
    let mut first = link_client(&sim);
    ok(&sim.ctrl("reset").unwrap());
    assert_eq!(read_n(&mut first, 2), b"OK");

    let mut second = TcpStream::connect(sim.link_addr()).unwrap();
    // The first client is closed by the simulator.
    first.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = [0u8; 16];
    match first.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("the replaced client read {n} more bytes"),
        Err(e) => assert!(matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe), "{e}"),
    }
    let r = ok(&sim.ctrl("reset").unwrap())["cycle"].as_u64().unwrap();
    assert!(r > 0);
    assert_eq!(read_n(&mut second, 2), b"OK");
    second.write_all(b"A").unwrap();
    assert_eq!(read_n(&mut second, 1), b"B");
    assert_eq!(sim.stats().unwrap()["resets"], 2);
}

#[test]
fn unknown_and_malformed_requests_are_refused_and_the_port_keeps_working() {
    let sim = echo();
    let v = sim.ctrl("frobnicate").unwrap();
    assert_eq!(v["ok"], false);
    let msg = v["error"].as_str().unwrap();
    for word in ["stats", "reset", "pause", "resume", "quit"] {
        assert!(msg.contains(word), "{msg}");
    }
    assert!(matches!(sim.ctrl("a\nb"), Err(SimError::Ctrl { .. })));

    // A raw client: blank lines are ignored, an over-long line is refused, garbage is not fatal.
    let mut raw = TcpStream::connect(sim.ctrl_addr()).unwrap();
    raw.write_all(b"\n\r\n").unwrap();
    raw.write_all(&vec![b'x'; 10_000]).unwrap();
    raw.write_all(b"\n\xff\xfe\nstats\n").unwrap();
    raw.set_read_timeout(Some(WAIT)).unwrap();
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    while text.lines().count() < 3 {
        let n = raw.read(&mut buf).unwrap();
        assert!(n > 0, "ctrl closed; got {text:?}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let answers: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(answers[0]["ok"], false, "{}", answers[0]);
    assert!(answers[0]["error"].as_str().unwrap().contains("longer"), "{answers:?}");
    assert_eq!(answers[1]["ok"], false);
    assert_eq!(answers[2]["ok"], true);
    ok(&sim.stats().unwrap());
}

#[test]
fn a_sleeping_core_makes_the_simulator_idle_and_throttled() {
    let sim = start(SimOptions::with_demo(Demo::Sleep));
    wait_for("idle", || sim.stats().unwrap()["idle"] == true);
    // sim_hz covers the last second: wait until that second was all idle.
    std::thread::sleep(Duration::from_millis(1300));
    let s = ok(&sim.stats().unwrap()).clone();
    assert_eq!(s["idle"], true, "{s}");
    assert_eq!(s["core_sleep"], true, "{s}");
    assert_eq!(s["gpio_out"], 0x5a, "{s}");
    let hz = s["sim_hz"].as_f64().unwrap();
    let idle_hz = s["idle_hz"].as_f64().unwrap();
    assert!(hz <= idle_hz * 1.5, "idle, yet {hz} cycles/s (limit {idle_hz})");
    // Still simulating, though slowly.
    let c = s["cycle"].as_u64().unwrap();
    wait_for("idle cycles", || sim.stats().unwrap()["cycle"].as_u64().unwrap() > c);
}

#[test]
fn quit_and_sigterm_exit_zero() {
    let mut sim = echo();
    let status = sim.stop().unwrap();
    assert!(status.success(), "{status}");

    let mut sim = echo();
    // SAFETY: kill(2) on our own, unreaped child.
    unsafe { libc::kill(sim.pid() as libc::pid_t, libc::SIGTERM) };
    let status = sim.wait_timeout(WAIT).unwrap().expect("ws-sim ignored SIGTERM");
    assert!(status.success(), "{status}");
}

#[test]
fn max_cycles_ends_the_run() {
    let mut opts = SimOptions::with_demo(Demo::Spin);
    opts.max_cycles = Some(100_000);
    let mut sim = start(opts);
    let status = sim.wait_timeout(WAIT).unwrap().expect("ws-sim ran past --max-cycles");
    assert!(status.success(), "{status}");
}

#[test]
fn dropping_the_handle_leaves_no_process() {
    let sim = echo();
    let pid = sim.pid();
    assert!(process_exists(pid));
    drop(sim);
    assert!(!process_exists(pid), "ws-sim {pid} survived its SimProcess");
}

#[test]
fn the_simulator_exits_when_its_parent_does() {
    ensure_model();
    let mut parent = Command::new("sleep").arg("60").spawn().unwrap();
    let mut opts = SimOptions::with_demo(Demo::Spin);
    opts.parent_pid = Some(parent.id());
    opts.quiet = true;
    let mut child = Command::new(bin())
        .args(opts.to_args())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert!(parse_ready_line(&line).is_some(), "{line:?}");
    parent.kill().unwrap();
    parent.wait().unwrap();
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ws-sim outlived its parent");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}

/// TMS/TDI for Test-Logic-Reset → Run-Test/Idle → Shift-DR, 32 shifts, Update → Idle: the
/// IDCODE register (selected by the reset) comes out on TDO at bits 9..41.
fn idcode_scan() -> (u32, Vec<u8>) {
    let mut tms = vec![true, true, true, true, true, false, true, false, false];
    tms.extend(std::iter::repeat_n(false, 31));
    tms.extend([true, true, false]);
    let mut bytes = vec![0u8; tms.len().div_ceil(8)];
    for (i, &b) in tms.iter().enumerate() {
        bytes[i / 8] |= u8::from(b) << (i % 8);
    }
    (tms.len() as u32, bytes)
}

fn jtag_addr(sim: &SimProcess) -> std::net::SocketAddr {
    sim.stats().unwrap()["jtag"].as_str().unwrap().parse().unwrap()
}

#[test]
fn the_jtag_port_reads_the_idcode_over_xvc_and_remote_bitbang() {
    let sim = start(SimOptions::with_demo(Demo::Spin));
    let addr = jtag_addr(&sim);
    // ws_soc's JTAG_IDCODE parameter (docs/soc.md).
    let idcode = 0x1000_5a57;

    // XVC 1.0.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"getinfo:").unwrap();
    let mut info = Vec::new();
    while info.last() != Some(&b'\n') {
        info.extend(read_n(&mut s, 1));
    }
    assert!(info.starts_with(b"xvcServer_v1.0:"), "{:?}", String::from_utf8_lossy(&info));
    let (bits, tms) = idcode_scan();
    let mut req = b"shift:".to_vec();
    req.extend_from_slice(&bits.to_le_bytes());
    req.extend_from_slice(&tms);
    req.extend(vec![0u8; tms.len()]);
    s.write_all(&req).unwrap();
    let tdo = read_n(&mut s, tms.len());
    let got = (0..32).fold(0u32, |acc, i| acc | (u32::from(tdo[(9 + i) / 8] >> ((9 + i) % 8) & 1) << i));
    assert_eq!(got, idcode);
    let st = sim.stats().unwrap();
    assert_eq!((st["jtag_client"].as_bool(), st["jtag_protocol"].as_str()), (Some(true), Some("xvc")));

    // A second client is told the port is busy, and closed.
    let mut second = TcpStream::connect(addr).unwrap();
    let mut line = String::new();
    second.set_read_timeout(Some(WAIT)).unwrap();
    second.read_to_string(&mut line).unwrap();
    assert!(line.contains("busy"), "{line}");
    drop(s);

    // OpenOCD remote_bitbang: read TDO before each rising edge, then quit.
    wait_for("the XVC client to be gone", || sim.stats().unwrap()["jtag_client"] == false);
    let mut s = TcpStream::connect(addr).unwrap();
    let mut req = b"Bt r".to_vec();
    for i in 0..bits as usize {
        let tms_bit = tms[i / 8] >> (i % 8) & 1;
        let v = tms_bit << 1;
        req.push(b'0' + v);
        if (9..41).contains(&i) {
            req.push(b'R');
        }
        req.push(b'4' + v);
    }
    req.extend_from_slice(b"bQ");
    s.write_all(&req).unwrap();
    let out = read_n(&mut s, 32);
    let got = out.iter().enumerate().fold(0u32, |acc, (i, &c)| acc | (u32::from(c == b'1') << i));
    assert_eq!(got, idcode);
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "Q closes the session");
    assert!(sim.stats().unwrap()["jtag_tck"].as_u64().unwrap() >= 2 * u64::from(bits));
}

#[test]
fn malformed_jtag_input_drops_that_client_only() {
    let sim = echo();
    let addr = jtag_addr(&sim);
    for bad in [&b"\xff\xfe"[..], b"getinfo?", b"shift:\xff\xff\xff\xff", b"0c", b"R\x80"] {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(bad).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        let mut rest = Vec::new();
        match s.read_to_end(&mut rest) {
            Ok(_) => {}
            Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{bad:?}"),
        }
    }
    // The simulator still serves everything, JTAG included.
    let mut link = link_client(&sim);
    link.write_all(&[0x41]).unwrap();
    assert_eq!(read_n(&mut link, 1), [0x42]);
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"getinfo:").unwrap();
    assert_eq!(&read_n(&mut s, 15), b"xvcServer_v1.0:");
}

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = ws_hdl::paths::workspace_root().join("target").join("ws-sim-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{}-{name}", std::process::id()));
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn an_elf_is_loaded_into_ram() {
    let code = words_to_bytes(&programs::echo_plus_one());
    let elf = temp_file("echo.elf", &write_elf32(RAM_BASE, &[(RAM_BASE, &code)]));
    let sim = start_echo(SimOptions::with_elf(&elf));
    let mut link = link_client(&sim);
    ok(&sim.ctrl("reset").unwrap());
    assert_eq!(read_n(&mut link, 2), b"OK");
    link.write_all(b"x").unwrap();
    assert_eq!(read_n(&mut link, 1), b"y");
    assert_eq!(sim.stats().unwrap()["elf"], elf.display().to_string());
    let _ = std::fs::remove_file(elf);
}

#[test]
fn a_bad_elf_is_refused_with_the_reason() {
    let elf = temp_file("bad-entry.elf", &write_elf32(RAM_BASE + 4, &[(RAM_BASE, &[0; 4])]));
    let e = SimProcess::start_with(bin(), &SimOptions::with_elf(&elf)).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, SimError::Exited { .. }), "{msg}");
    assert!(msg.contains("entry point"), "{msg}");
    let _ = std::fs::remove_file(elf);
}

#[test]
fn the_bench_measures_cycles_per_second() {
    ensure_model();
    let code = words_to_bytes(&programs::echo_plus_one());
    let elf = temp_file("bench-echo.elf", &write_elf32(RAM_BASE, &[(RAM_BASE, &code)]));
    let r = ws_hdl::bench::soc_vs_bare_core(1, &elf, 50_000).unwrap();
    assert_eq!(r.soc.cycles, 50_000);
    assert_eq!(r.soc_spin.program, "demo spin");
    assert!(r.bare.model.starts_with("cv32e40p_bare"), "{r:?}");
    assert!(r.soc.cycles_per_second > 0.0 && r.bare.cycles_per_second > 0.0, "{r:?}");
    eprintln!("{r:#?}");
    assert!(r.ratio > 0.0, "{r:?}");
    let _ = std::fs::remove_file(elf);
}
