//! Scenario: a GDB session through OpenOCD, the way a developer debugs the board: OpenOCD
//! (remote_bitbang on the simulator's JTAG port, `boards/sim/openocd.cfg`), then
//! `gdb-multiarch -batch` sets a breakpoint on a firmware function on the control path, a
//! ping from this test hits it, GDB reads registers and detaches, and the firmware goes on.
//!
//! Needs: the simulated board (OpenOCD speaks to its remote_bitbang server), `openocd` and
//! `gdb-multiarch` (installed by `cargo xtask setup`); skipped with the reason when either is
//! missing.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hil_tests::{workspace_root, Needs, Rig};
use host_driver::flash::find_symbols;

/// The breakpoint: called for every frame the firmware's decoder takes in, so a ping hits it.
const FUNCTION: &str = "ws_common::ctrl::frame::FrameDecoder::release";
/// The same, as it appears in the (legacy-mangled) symbol table.
const MANGLED: &str = "12FrameDecoder7release";
/// How long OpenOCD may take to examine the target, and GDB to finish the session.
const OPENOCD_READY: Duration = Duration::from_secs(30);
const GDB_SESSION: Duration = Duration::from_secs(60);

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// Kills the child when dropped, so a failing assertion leaves no OpenOCD behind.
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn gdb_through_openocd_breaks_on_a_firmware_function() {
    for tool in ["openocd", "gdb-multiarch"] {
        if !have(tool) {
            eprintln!("SKIPPED jtag_gdb_openocd: `{tool}` is not installed (cargo xtask setup installs it)");
            return;
        }
    }
    let Some(mut rig) = Rig::open("jtag_gdb_openocd", Needs::default()) else {
        return;
    };
    let Some(jtag) = rig.jtag_addr() else {
        eprintln!(
            "SKIPPED jtag_gdb_openocd: OpenOCD reaches only the simulator's remote_bitbang server here"
        );
        return;
    };
    let elf_bytes = std::fs::read(&rig.elf).unwrap();
    let sym = find_symbols(&elf_bytes, MANGLED).unwrap().into_iter().find(|s| s.size > 0).unwrap_or_else(|| {
        panic!("the firmware has no out-of-line {FUNCTION}; pick another control-path function for this scenario")
    });

    let gdb_port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cfg = workspace_root().join("boards/sim/openocd.cfg");
    let mut openocd = Reap(
        Command::new("openocd")
            .arg("-c")
            .arg(format!("set WS_JTAG_PORT {}; set WS_GDB_PORT {gdb_port}", jtag.port()))
            .arg("-f")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting openocd"),
    );
    // OpenOCD logs on stderr; wait for its GDB server.
    let (tx, rx) = mpsc::channel::<String>();
    let stderr = openocd.0.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + OPENOCD_READY;
    let mut log = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let ready = line.contains(&format!("Listening on port {gdb_port} for gdb"));
                log.push(line);
                if ready {
                    break;
                }
            }
            Err(_) => {
                panic!("OpenOCD did not start its GDB server within {OPENOCD_READY:?}:\n{}", log.join("\n"))
            }
        }
    }
    assert!(log.iter().any(|l| l.contains("tap/device found: 0x10005a57")), "{}", log.join("\n"));

    let mut gdb = Reap(
        Command::new("gdb-multiarch")
            .args(["-batch", "-nx"])
            .args(["-ex", "set pagination off", "-ex", "set confirm off", "-ex", "set remotetimeout 30"])
            .args(["-ex", &format!("target extended-remote 127.0.0.1:{gdb_port}")])
            .args(["-ex", &format!("break {FUNCTION}")])
            .args(["-ex", "continue", "-ex", "info registers pc sp ra", "-ex", "p/x $mcause"])
            .args(["-ex", "delete", "-ex", "detach"])
            .arg(&rig.elf)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting gdb-multiarch"),
    );
    // Ping until GDB reports the breakpoint: the first pings may arrive before it is set.
    let mut out = String::new();
    let mut gdb_out = gdb.0.stdout.take().unwrap();
    let (otx, orx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = gdb_out.read(&mut buf) {
            if n == 0 || otx.send(String::from_utf8_lossy(&buf[..n]).into_owned()).is_err() {
                break;
            }
        }
    });
    rig.client.set_timeout(Duration::from_millis(300));
    let deadline = Instant::now() + GDB_SESSION;
    let mut exited = None;
    while exited.is_none() {
        assert!(
            Instant::now() < deadline,
            "the GDB session did not end within {GDB_SESSION:?}; it printed:\n{out}"
        );
        while let Ok(chunk) = orx.try_recv() {
            out.push_str(&chunk);
        }
        if !out.contains("Breakpoint 1, ") {
            let _ = rig.client.ping(0x9db);
        } else {
            std::thread::sleep(Duration::from_millis(50));
        }
        exited = gdb.0.try_wait().unwrap();
    }
    while let Ok(chunk) = orx.recv_timeout(Duration::from_millis(200)) {
        out.push_str(&chunk);
    }
    let mut err = String::new();
    let _ = gdb.0.stderr.take().unwrap().read_to_string(&mut err);
    assert!(exited.unwrap().success(), "gdb failed:\n{out}\n{err}");
    eprintln!("{out}");

    assert!(out.contains(&format!("Breakpoint 1, {FUNCTION}")), "breakpoint not hit:\n{out}\n{err}");
    // `info registers pc`: the PC is inside the function.
    let pc_line = out.lines().find(|l| l.starts_with("pc ")).unwrap_or_else(|| panic!("no pc line:\n{out}"));
    let pc =
        u32::from_str_radix(pc_line.split_whitespace().nth(1).unwrap().trim_start_matches("0x"), 16).unwrap();
    assert!(sym.addr <= pc && pc < sym.addr + sym.size, "pc {pc:#x} outside {FUNCTION} at {:#x}", sym.addr);
    assert!(out.lines().any(|l| l.starts_with("sp ")), "{out}");
    assert!(out.contains("detached"), "{out}");

    // Detached, the firmware runs on (boards/sim/openocd.cfg resumes on gdb-detach).
    rig.client.set_timeout(Duration::from_secs(10));
    rig.client
        .ping(0x9dc)
        .unwrap_or_else(|e| panic!("the firmware does not answer after the GDB session: {e}"));
    drop(openocd);
}
