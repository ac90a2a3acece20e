//! `ws-sim` itself (docs/sim.md): loads the board, builds or finds the Verilated SoC, writes
//! the program into RAM by backdoor, binds the five loopback ports, prints the READY line and
//! then runs one single-threaded loop:
//!
//! 1. `poll(2)` on every socket: timeout 0 while the SoC runs, a throttle interval while the
//!    core sleeps, up to a second while paused;
//! 2. accept and serve clients (host-link bytes in, control requests, JTAG: see `server/jtag.rs`);
//! 3. run the model for a batch of at most [`BATCH`] cycles (per-cycle work stays in the C++
//!    shim);
//! 4. move board-to-host and log bytes out to the clients, never blocking on any of them.
//!
//! Every buffer is bounded. A link client that stops reading fills its queue and then the
//! shim's, whose full buffer drops `m_link_ready`: the SoC sees backpressure, as from a real
//! host. A host that writes faster than the SoC reads is held back by TCP, because the link
//! socket is only read while the shim's queue has room.

mod clients;
mod faults;
mod jtag;
mod os;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use self::clients::{Line, LineReader, LogHistory, OutBuf};
use self::jtag::{Events as JtagEvents, Session as JtagSession, Tap};
use self::os::{poll, pollfd, process_alive, Signals};
use super::board::{self, SimBoard};
use super::elf::{words_to_bytes, Image, Segment};
use super::options::{Demo, SimOptions};
use super::soc::{Soc, SocConfig, StopOn};
use super::{programs, SimError};
use crate::vbuild::soc::SocBuild;
use crate::vbuild::{self, BuildEvent, BuiltModel};

/// Most cycles run between two looks at the sockets (docs/sim.md).
pub const BATCH: u64 = 4096;
/// Cycles the SoC is held in reset, at start and on a `reset` request.
pub const RESET_CYCLES: u64 = 16;
/// Log history kept for new log clients (docs/sim.md).
pub const LOG_HISTORY_BYTES: usize = 16 << 20;
/// Board-to-host bytes the shim collects before `m_link_ready` drops. Larger than a batch can
/// produce, so a reading client never causes backpressure.
const SOC_TX_CAP: u64 = 64 << 10;
/// Board-to-host bytes queued here for a link client that is slow to read.
const LINK_OUT_CAP: usize = 256 << 10;
/// Host-to-board bytes queued in the shim before the link socket is no longer read.
const SOC_RX_CAP: u64 = 64 << 10;
/// Answers queued for a control client that does not read them before it is dropped.
const CTRL_OUT_CAP: usize = 1 << 20;
/// How often `--parent-pid` is checked.
const PARENT_CHECK: Duration = Duration::from_secs(1);
/// How often the status line is printed.
const STATUS_EVERY: Duration = Duration::from_secs(5);
/// Wall-time slices of the idle throttle: each slice runs up to `idle_hz / IDLE_SLICES_PER_S`
/// cycles, then sleeps in `poll`.
const IDLE_SLICES_PER_S: u64 = 50;

/// How long after the last JTAG byte the simulator still counts as driven by a debugger: it
/// does not idle-throttle, and it looks at the sockets every [`JTAG_BATCH`] cycles. A probe's
/// next request usually follows its last answer within a millisecond.
const JTAG_ACTIVE_HOLD: Duration = Duration::from_millis(200);
/// Cycles between two looks at the sockets while a debugger is active: about 0.2 ms of wall
/// time, so a probe's round trip is not stretched by a whole [`BATCH`] (about 3 ms).
const JTAG_BATCH: u64 = 256;
/// Sent to a JTAG client that connects while another one is attached, before it is closed.
const JTAG_BUSY: &[u8] = b"ws-sim: JTAG port busy: another debugger is attached; detach it first\n";

/// The requests of the control port, for the answer to an unknown one.
const REQUESTS: &str = "stats, reset, pause, resume, quit, fault [RULES | clear | stats]";

/// Runs `ws-sim` with `opts` until a `quit` request, a signal, the end of the parent process
/// or `--max-cycles`; all of these return `Ok`.
pub fn serve(opts: &SimOptions) -> Result<(), SimError> {
    let board = board::load(&opts.board)?;
    let program = if opts.build_only { None } else { Some(Program::new(opts, &board)?) };
    if let (Some(from), Some(to)) = (opts.trace_from, opts.trace_to) {
        if to <= from {
            return Err(SimError::Options(format!(
                "--trace-to {to} is not after --trace-from {from}: the window [from, to) would be empty"
            )));
        }
    }
    // Every check that needs no model comes first: a mistake must not cost a minute of build.
    let base = opts.port_base.unwrap_or(board.port_base);
    if base > u16::MAX - (PORTS as u16 - 1) {
        return Err(SimError::Options(format!(
            "--port-base {base} leaves no room for its {PORTS} ports; pick one at most {}, or 0 for ephemeral ports",
            u16::MAX - (PORTS as u16 - 1)
        )));
    }
    if let Some(pid) = opts.parent_pid {
        if pid == 0 || libc::pid_t::try_from(pid).is_err() {
            return Err(SimError::Options(format!(
                "--parent-pid {pid} is not a process id; pass the launcher's pid"
            )));
        }
    }
    let build = SocBuild {
        threads: opts.threads.max(1),
        trace_fst: opts.trace.is_some(),
        wafers: opts.wafers,
        ..SocBuild::default()
    };
    let model = build_model(&build, opts.quiet)?;
    let Some(program) = program else {
        return Ok(());
    };
    let signals = Signals::install()?;

    let cfg = SocConfig {
        trace: opts.trace.clone(),
        trace_window: match (opts.trace_from, opts.trace_to) {
            (None, None) => None,
            (from, to) => Some((from.unwrap_or(0), to.unwrap_or(u64::MAX))),
        },
        uart_div_fallback: board.uart_div(),
    };
    let mut soc = Soc::load(model, &cfg)?;
    if !program.image.segments.is_empty() {
        program.image.load(&mut soc, board.ram_base)?;
    }
    soc.set_tx_cap(SOC_TX_CAP);
    soc.reset(RESET_CYCLES);

    let ports = Ports::bind(base)?;
    let line = format!(
        "WS-SIM READY link={} log={} ctrl={} phy={} pid={}",
        ports.addr[0],
        ports.addr[1],
        ports.addr[2],
        ports.addr[PHY_PORT],
        std::process::id()
    );
    let mut out = io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(SimError::io("printing the READY line on stdout"))?;
    drop(out);
    if !opts.quiet {
        note(&format!("serving {} on {} (jtag {})", program.what(), board.name, ports.addr[JTAG_PORT]));
    }

    let mut server = Server::new(opts, board, program, soc, ports, signals);
    let why = server.run()?;
    server.finish();
    if !opts.quiet {
        note(&format!("{why} at cycle {}; exiting", server.soc.cycle()));
    }
    Ok(())
}

/// Builds the model, or finds it in the cache, reporting on stderr unless `quiet`.
fn build_model(build: &SocBuild, quiet: bool) -> Result<BuiltModel, SimError> {
    let mut progress = |e: &BuildEvent| {
        if quiet {
            return;
        }
        match e {
            BuildEvent::CacheHit { name, dir } => {
                note(&format!("model `{name}` from the cache ({})", dir.display()))
            }
            other => vbuild::stderr_progress(other),
        }
    };
    Ok(Soc::build(build, &mut progress)?)
}

/// A status line on stderr. Write errors are ignored: stderr may be a closed terminal, and the
/// simulator must not die (or panic, as `eprintln!` would) because nobody reads it.
fn note(msg: &str) {
    let _ = writeln!(io::stderr(), "ws-sim: {msg}");
}

/// What runs on the core.
struct Program {
    image: Image,
    elf: Option<PathBuf>,
    demo: Option<Demo>,
}

impl Program {
    fn new(opts: &SimOptions, board: &SimBoard) -> Result<Program, SimError> {
        let (image, elf, demo) = match (&opts.elf, opts.demo) {
            (Some(path), _) => (Image::read(path)?, Some(path.clone()), None),
            (None, Some(demo)) => {
                let words = match demo {
                    Demo::Echo => programs::echo_plus_one(),
                    Demo::Sleep => programs::sleep_forever(0x5a),
                    Demo::Spin => programs::spin(),
                };
                (demo_image(demo, &words, board.ram_base), None, Some(demo))
            }
            // Nothing in RAM: the boot ROM finds no valid image and serves its link loader.
            (None, None) if opts.loader => (
                Image {
                    what: "nothing (the boot ROM waits for an image)".into(),
                    entry: board.ram_base,
                    segments: vec![],
                },
                None,
                None,
            ),
            (None, None) => {
                return Err(SimError::Options(
                    "nothing to run: pass --elf FILE (the firmware), --demo echo|sleep|spin, or --loader"
                        .into(),
                ))
            }
        };
        // Refuse a bad image before spending a minute building the model.
        image.validate(board.ram_base, board.ram_size)?;
        Ok(Program { image, elf, demo })
    }

    fn what(&self) -> String {
        match (&self.elf, self.demo) {
            (Some(p), _) => p.display().to_string(),
            (None, Some(d)) => format!("demo `{}`", demo_name(d)),
            (None, None) => "the boot ROM's link loader (no image)".into(),
        }
    }
}

/// A demo program as an image at the RAM base, so it loads through the same path as an ELF.
pub(crate) fn demo_image(demo: Demo, words: &[u32], ram_base: u32) -> Image {
    let data = words_to_bytes(words);
    Image {
        what: format!("demo `{}`", demo_name(demo)),
        entry: ram_base,
        segments: vec![Segment { addr: ram_base, mem_size: data.len() as u32, data }],
    }
}

pub(crate) fn demo_name(d: Demo) -> &'static str {
    match d {
        Demo::Echo => "echo",
        Demo::Sleep => "sleep",
        Demo::Spin => "spin",
    }
}

/// The five listeners: link, log, ctrl, jtag, phy.
/// Ports from the base: link (v1 bytes), log, control, JTAG, and the link engine's PHY (v2).
const PORTS: usize = 5;
/// Index of the JTAG port.
const JTAG_PORT: usize = 3;
/// Index of the link engine's PHY port.
const PHY_PORT: usize = 4;

struct Ports {
    listeners: [TcpListener; PORTS],
    addr: [SocketAddr; PORTS],
}

impl Ports {
    /// Binds `base..base + PORTS`, each on an ephemeral port when `base` is 0. `serve` checked
    /// that the last one fits.
    fn bind(base: u16) -> Result<Ports, SimError> {
        let bind = |i: u16| -> Result<(TcpListener, SocketAddr), SimError> {
            let port = if base == 0 { 0 } else { base + i };
            let want = format!("127.0.0.1:{port}");
            let l = TcpListener::bind(("127.0.0.1", port))
                .map_err(|source| SimError::Bind { addr: want.clone(), source })?;
            l.set_nonblocking(true).map_err(SimError::io(format!("making {want} non-blocking")))?;
            let addr = l.local_addr().map_err(SimError::io(format!("reading the address of {want}")))?;
            Ok((l, addr))
        };
        let (l0, a0) = bind(0)?;
        let (l1, a1) = bind(1)?;
        let (l2, a2) = bind(2)?;
        let (l3, a3) = bind(3)?;
        let (l4, a4) = bind(4)?;
        Ok(Ports { listeners: [l0, l1, l2, l3, l4], addr: [a0, a1, a2, a3, a4] })
    }
}

/// Why the main loop ended.
#[derive(Debug, Clone, Copy)]
enum Exit {
    Quit,
    Signal,
    ParentGone(u32),
    MaxCycles(u64),
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Quit => write!(f, "quit requested"),
            Exit::Signal => write!(f, "signal received"),
            Exit::ParentGone(pid) => write!(f, "parent process {pid} is gone"),
            Exit::MaxCycles(n) => write!(f, "--max-cycles {n} reached"),
        }
    }
}

struct LogClient {
    sock: TcpStream,
    pos: u64,
    dead: bool,
}

/// The one JTAG client (docs/jtag.md).
struct JtagClient {
    sock: TcpStream,
    session: JtagSession,
    /// Close once the queued answers are written (`Q`, or a malformed request).
    closing: bool,
    dead: bool,
}

struct CtrlClient {
    sock: TcpStream,
    lines: LineReader,
    out: OutBuf,
    dead: bool,
}

/// What a `pollfd` belongs to.
#[derive(Clone, Copy)]
enum Slot {
    Listener(usize),
    Wake,
    Link,
    Phy,
    Log(usize),
    Ctrl(usize),
    Jtag,
}

/// Simulated cycles per wall second over the last second, from samples taken as the loop
/// turns.
struct RateMeter {
    samples: std::collections::VecDeque<(Instant, u64)>,
}

impl RateMeter {
    fn new(now: Instant, cycle: u64) -> Self {
        RateMeter { samples: [(now, cycle)].into() }
    }

    fn sample(&mut self, now: Instant, cycle: u64) {
        let last = self.samples.back().map(|s| s.0);
        if last.is_none_or(|t| now.duration_since(t) >= Duration::from_millis(50)) {
            self.samples.push_back((now, cycle));
        }
        // Keep exactly one sample at least a second old: the start of the window.
        while self.samples.len() > 2 && now.duration_since(self.samples[1].0) >= Duration::from_secs(1) {
            self.samples.pop_front();
        }
    }

    fn hz(&self, now: Instant, cycle: u64) -> f64 {
        match self.samples.front() {
            Some(&(t, c)) if now.duration_since(t) > Duration::from_millis(10) => {
                cycle.saturating_sub(c) as f64 / now.duration_since(t).as_secs_f64()
            }
            _ => 0.0,
        }
    }
}

struct Server<'a> {
    opts: &'a SimOptions,
    board: SimBoard,
    program: Program,
    soc: Soc,
    ports: Ports,
    signals: Signals,

    link: Option<TcpStream>,
    link_out: OutBuf,
    link_discarded: u64,
    /// The link engine's PHY client (protocol v2) and what waits for it.
    phy: Option<TcpStream>,
    phy_out: OutBuf,
    phy_discarded: u64,
    /// Fault injection on the PHY port (`--fault`, the `fault` request).
    faults: faults::LinkFaults,
    logs: Vec<LogClient>,
    history: LogHistory,
    ctrls: Vec<CtrlClient>,
    jtag: Option<JtagClient>,
    /// When the last JTAG byte arrived.
    jtag_seen: Option<Instant>,
    /// TCK rising edges and sessions since the start, over all JTAG clients.
    jtag_tck: u64,
    jtag_sessions: u64,

    paused: bool,
    idle: bool,
    /// Cycles the idle throttle allows now.
    idle_budget: f64,
    idle_refill: Instant,
    resets: u64,
    exit: Option<Exit>,

    started: Instant,
    rate: RateMeter,
    next_parent_check: Instant,
    next_status: Instant,
    /// Output taken from the shim; emptied by every use.
    scratch: Vec<u8>,
    /// Socket reads land here; its length never changes.
    rbuf: Box<[u8]>,
}

impl<'a> Server<'a> {
    fn new(
        opts: &'a SimOptions,
        board: SimBoard,
        program: Program,
        soc: Soc,
        ports: Ports,
        signals: Signals,
    ) -> Self {
        let now = Instant::now();
        let cycle = soc.cycle();
        Server {
            opts,
            board,
            program,
            soc,
            ports,
            signals,
            link: None,
            link_out: OutBuf::default(),
            link_discarded: 0,
            phy: None,
            phy_out: OutBuf::default(),
            phy_discarded: 0,
            faults: faults::LinkFaults::new(opts.fault.clone(), opts.fault_seed),
            logs: Vec::new(),
            history: LogHistory::new(LOG_HISTORY_BYTES),
            ctrls: Vec::new(),
            jtag: None,
            jtag_seen: None,
            jtag_tck: 0,
            jtag_sessions: 0,
            paused: false,
            idle: false,
            idle_budget: 0.0,
            idle_refill: now,
            resets: 0,
            exit: None,
            started: now,
            rate: RateMeter::new(now, cycle),
            next_parent_check: now,
            next_status: now + STATUS_EVERY,
            scratch: Vec::with_capacity(64 << 10),
            rbuf: vec![0; 64 << 10].into_boxed_slice(),
        }
    }

    fn run(&mut self) -> Result<Exit, SimError> {
        loop {
            if self.signals.stopped() {
                return Ok(Exit::Signal);
            }
            let now = Instant::now();
            self.housekeeping(now);
            if let Some(why) = self.exit {
                return Ok(why);
            }
            let timeout = self.poll_timeout(now);
            self.serve_sockets(timeout)?;
            if let Some(why) = self.exit {
                return Ok(why);
            }
            if !self.paused {
                self.step();
            }
            self.collect();
            self.flush();
        }
    }

    fn housekeeping(&mut self, now: Instant) {
        let cycle = self.soc.cycle();
        self.rate.sample(now, cycle);
        if let Some(max) = self.opts.max_cycles {
            if cycle >= max {
                self.exit = Some(Exit::MaxCycles(max));
            }
        }
        if now >= self.next_parent_check {
            self.next_parent_check = now + PARENT_CHECK;
            if let Some(pid) = self.opts.parent_pid {
                if !process_alive(pid) {
                    self.exit = Some(Exit::ParentGone(pid));
                }
            }
        }
        if now >= self.next_status {
            self.next_status = now + STATUS_EVERY;
            if !self.opts.quiet {
                let c = self.soc.counters();
                let state = if self.paused {
                    ", paused"
                } else if self.idle {
                    ", idle"
                } else {
                    ""
                };
                note(&format!(
                    "cycle {cycle}, {:.2} MHz simulated, link {} B in / {} B out, phy {} B in / {} B out{state}",
                    self.rate.hz(now, cycle) / 1e6,
                    c.link_rx_bytes,
                    c.link_tx_bytes,
                    c.phy_rx_bytes,
                    c.phy_tx_bytes,
                ));
            }
        }
    }

    /// How long `poll` may sleep: not at all while the SoC runs, until the idle throttle allows
    /// the next slice while the core sleeps, and until the next housekeeping while paused.
    fn poll_timeout(&self, now: Instant) -> i32 {
        let until = |t: Instant| t.saturating_duration_since(now);
        let housekeeping = until(self.next_parent_check).min(until(self.next_status));
        let wait = if self.paused {
            housekeeping
        } else if self.idle && self.still_sleeping() {
            let missing = (self.idle_slice() as f64 - self.idle_budget).max(0.0);
            Duration::from_secs_f64(missing / self.opts.idle_hz as f64).min(housekeeping)
        } else {
            Duration::ZERO
        };
        // Round up so a wait never ends just before the budget is there, then spins.
        let ms = wait.as_micros().div_ceil(1000);
        ms.min(1000) as i32
    }

    fn idle_slice(&self) -> u64 {
        (self.opts.idle_hz / IDLE_SLICES_PER_S).clamp(1, BATCH)
    }

    /// The core sleeps and nobody asks anything of it: neither a host byte, nor link engine
    /// traffic (the engine moves bulk data while the core sleeps), nor a debugger (JTAG
    /// traffic counts as host activity, docs/sim.md "Idle and wall time").
    fn still_sleeping(&self) -> bool {
        self.soc.core_sleep()
            && self.soc.rx_pending() == 0
            && !self.soc.phy_busy()
            && self.phy_out.pending() == 0
            && !self.faults.holding()
            && !self.jtag_active(Instant::now())
    }

    /// A JTAG client sent something within [`JTAG_ACTIVE_HOLD`].
    fn jtag_active(&self, now: Instant) -> bool {
        self.jtag.is_some() && self.jtag_seen.is_some_and(|t| now.duration_since(t) < JTAG_ACTIVE_HOLD)
    }

    fn cycles_left(&self) -> u64 {
        match self.opts.max_cycles {
            Some(max) => max.saturating_sub(self.soc.cycle()),
            None => u64::MAX,
        }
    }

    /// Runs one batch: a full one while the core works, a throttled slice while it sleeps.
    fn step(&mut self) {
        let now = Instant::now();
        if self.still_sleeping() {
            if !self.idle {
                self.idle = true;
                self.idle_budget = 0.0;
                self.idle_refill = now;
            }
            let dt = now.duration_since(self.idle_refill).as_secs_f64();
            self.idle_refill = now;
            self.idle_budget =
                (self.idle_budget + dt * self.opts.idle_hz as f64).min(self.idle_slice() as f64);
            let n = (self.idle_budget as u64).min(self.cycles_left());
            if n > 0 {
                let ran = self.run_cycles(n, StopOn::default());
                self.idle_budget -= ran as f64;
            }
        } else {
            self.idle = false;
            let batch = if self.jtag_active(now) { JTAG_BATCH } else { BATCH };
            let n = batch.min(self.cycles_left());
            // While a debugger is active the core's sleeping does not end the batch: the
            // throttle is off anyway, and the batch is short.
            let sleep = !self.jtag_active(now);
            self.run_cycles(n, StopOn { sleep, tx: false });
        }
    }

    /// Runs `n` cycles, or fewer when the core falls asleep and `stop.sleep` is set. A full
    /// board-to-host buffer makes the shim return after every cycle; that is backpressure, and
    /// the cycles go on.
    fn run_cycles(&mut self, n: u64, stop: StopOn) -> u64 {
        run_cycles(&mut self.soc, n, stop)
    }

    /// Moves the shim's output into the client queues.
    fn collect(&mut self) {
        self.scratch.clear();
        if self.soc.take_log(&mut self.scratch) > 0 {
            self.history.push(&self.scratch);
        }
        if self.link.is_some() {
            let room = LINK_OUT_CAP.saturating_sub(self.link_out.pending());
            if room > 0 {
                self.soc.take_tx(self.link_out.vec_for_append(), room);
            }
        } else {
            self.discard_tx();
        }
        if self.phy.is_some() {
            let room = LINK_OUT_CAP.saturating_sub(self.phy_out.pending());
            if self.faults.active() || self.faults.holding() {
                let cycle = self.soc.cycle();
                let mut board = self.faults.scratch();
                self.faults.poll(cycle, &mut board, self.phy_out.vec_for_append());
                self.soc.push_phy(&board);
                if room > 0 {
                    board.clear();
                    self.soc.take_phy(&mut board, room);
                    self.faults.toward_host(&board, cycle, self.phy_out.vec_for_append());
                }
                self.faults.give_back(board);
            } else if room > 0 {
                self.soc.take_phy(self.phy_out.vec_for_append(), room);
            }
        } else {
            self.discard_phy();
        }
    }

    /// Drops every board-to-host PHY byte not yet delivered, counting it.
    fn discard_phy(&mut self) {
        self.phy_discarded += self.phy_out.clear() as u64;
        loop {
            self.scratch.clear();
            let n = self.soc.take_phy(&mut self.scratch, 64 << 10);
            self.phy_discarded += n as u64;
            if n == 0 {
                break;
            }
        }
    }

    /// Drops every board-to-host byte not yet delivered, counting it.
    fn discard_tx(&mut self) {
        self.link_discarded += self.link_out.clear() as u64;
        loop {
            self.scratch.clear();
            let n = self.soc.take_tx(&mut self.scratch, 64 << 10);
            self.link_discarded += n as u64;
            if n == 0 {
                break;
            }
        }
    }

    /// Writes what each client can take without blocking; forgets the clients that are gone.
    fn flush(&mut self) {
        if let Some(sock) = self.link.as_mut() {
            if self.link_out.write_to(sock).is_err() {
                self.drop_link();
            }
        }
        if let Some(sock) = self.phy.as_mut() {
            if self.phy_out.write_to(sock).is_err() {
                self.drop_phy();
            }
        }
        let end = self.history.end();
        for c in &mut self.logs {
            while !c.dead && c.pos < end {
                let (bytes, pos) = self.history.from(c.pos);
                match c.sock.write(bytes) {
                    Ok(0) => c.dead = true,
                    Ok(n) => c.pos = pos + n as u64,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => c.dead = true,
                }
            }
        }
        self.logs.retain(|c| !c.dead);
        for c in &mut self.ctrls {
            if !c.dead && c.out.write_to(&mut c.sock).is_err() {
                c.dead = true;
            }
        }
        self.ctrls.retain(|c| !c.dead);
        self.flush_jtag();
    }

    /// Writes the JTAG client's answers; ends the session once a closing one has none left.
    fn flush_jtag(&mut self) {
        let Some(c) = self.jtag.as_mut() else { return };
        if c.session.out.write_to(&mut c.sock).is_err() {
            c.dead = true;
        }
        if c.closing && c.session.out.pending() == 0 {
            let _ = c.sock.shutdown(std::net::Shutdown::Both);
            c.dead = true;
        }
        if c.dead {
            self.drop_jtag();
        }
    }

    fn drop_jtag(&mut self) {
        if let Some(mut c) = self.jtag.take() {
            c.session.release(&mut SocTap { soc: &mut self.soc, cycles: 0 });
            self.jtag_tck += c.session.tck_cycles;
        }
    }

    fn drop_link(&mut self) {
        self.link = None;
        self.discard_tx();
    }

    fn drop_phy(&mut self) {
        self.phy = None;
        self.faults.reconnect();
        self.discard_phy();
    }

    fn serve_sockets(&mut self, timeout_ms: i32) -> Result<(), SimError> {
        let mut fds = Vec::with_capacity(6 + self.logs.len() + self.ctrls.len());
        let mut slots = Vec::with_capacity(fds.capacity());
        for (i, l) in self.ports.listeners.iter().enumerate() {
            fds.push(pollfd(l.as_raw_fd(), libc::POLLIN));
            slots.push(Slot::Listener(i));
        }
        fds.push(pollfd(self.signals.fd(), libc::POLLIN));
        slots.push(Slot::Wake);
        if let Some(s) = &self.link {
            let mut ev = 0;
            if self.soc.rx_pending() < SOC_RX_CAP {
                ev |= libc::POLLIN;
            }
            if self.link_out.pending() > 0 {
                ev |= libc::POLLOUT;
            }
            fds.push(pollfd(s.as_raw_fd(), ev));
            slots.push(Slot::Link);
        }
        if let Some(s) = &self.phy {
            let mut ev = 0;
            if self.soc.phy_rx_pending() < SOC_RX_CAP {
                ev |= libc::POLLIN;
            }
            if self.phy_out.pending() > 0 {
                ev |= libc::POLLOUT;
            }
            fds.push(pollfd(s.as_raw_fd(), ev));
            slots.push(Slot::Phy);
        }
        let end = self.history.end();
        for (i, c) in self.logs.iter().enumerate() {
            let ev = if c.pos < end { libc::POLLIN | libc::POLLOUT } else { libc::POLLIN };
            fds.push(pollfd(c.sock.as_raw_fd(), ev));
            slots.push(Slot::Log(i));
        }
        for (i, c) in self.ctrls.iter().enumerate() {
            let ev = if c.out.pending() > 0 { libc::POLLIN | libc::POLLOUT } else { libc::POLLIN };
            fds.push(pollfd(c.sock.as_raw_fd(), ev));
            slots.push(Slot::Ctrl(i));
        }
        if let Some(c) = &self.jtag {
            let mut ev = 0;
            if c.session.wants_input() && !c.closing {
                ev |= libc::POLLIN;
            }
            if c.session.out.pending() > 0 {
                ev |= libc::POLLOUT;
            }
            fds.push(pollfd(c.sock.as_raw_fd(), ev));
            slots.push(Slot::Jtag);
        }
        if poll(&mut fds, timeout_ms).map_err(SimError::io("waiting on the sockets (poll)"))? == 0 {
            return Ok(());
        }
        let ready = |f: &libc::pollfd| f.revents != 0;
        // Accept before reading requests, so a `reset` sent right after a link client
        // connected resets with that client already attached (its banner is not discarded).
        let mut requests = Vec::new();
        let mut link_ready = false;
        let mut phy_ready = false;
        let mut jtag_ready = false;
        for (f, slot) in fds.iter().zip(&slots) {
            if !ready(f) {
                continue;
            }
            match *slot {
                Slot::Listener(i) => self.accept(i),
                Slot::Wake => self.signals.drain(),
                Slot::Link => link_ready = true,
                Slot::Phy => phy_ready = true,
                Slot::Log(i) => self.read_log_client(i),
                Slot::Ctrl(i) => self.read_ctrl_client(i, &mut requests),
                Slot::Jtag => jtag_ready = true,
            }
        }
        if link_ready {
            self.read_link();
        }
        if phy_ready {
            self.read_phy();
        }
        if jtag_ready {
            self.read_jtag();
        }
        for (i, line) in requests {
            let answer = match line {
                Line::Request(word) => self.request(&word),
                Line::TooLong => refuse(format!(
                    "request longer than {} bytes: send one word per line ({REQUESTS})",
                    LineReader::MAX
                )),
            };
            let c = &mut self.ctrls[i];
            let mut text = answer.to_string();
            text.push('\n');
            c.out.push(text.as_bytes());
            if c.out.pending() > CTRL_OUT_CAP {
                c.dead = true;
            }
        }
        Ok(())
    }

    fn accept(&mut self, which: usize) {
        loop {
            let sock = match self.ports.listeners[which].accept() {
                Ok((s, _)) => s,
                // WouldBlock ends the backlog; other errors (a client that reset before we
                // accepted it, fd exhaustion) affect one connection, not the simulator.
                Err(_) => return,
            };
            if which == JTAG_PORT && self.jtag.is_some() {
                // The old client may have closed just before this one connected, its end of
                // stream not read yet: read it now (running what it still sent) before
                // calling the port busy.
                self.read_jtag();
            }
            if which == JTAG_PORT && self.jtag.is_some() {
                // One debugger at a time: a second would corrupt the first one's TAP state.
                // The line lets a person (or our probe driver) see why the port closed.
                let mut sock = sock;
                let _ = sock.write(JTAG_BUSY);
                continue;
            }
            if sock.set_nonblocking(true).is_err() {
                continue;
            }
            let _ = sock.set_nodelay(true);
            match which {
                0 => {
                    // A new client replaces the old and never reads an answer meant for it.
                    self.drop_link();
                    self.link = Some(sock);
                }
                1 => self.logs.push(LogClient { sock, pos: self.history.start(), dead: false }),
                PHY_PORT => {
                    // As on the link port: the newest client owns the PHY.
                    self.drop_phy();
                    self.phy = Some(sock);
                }
                JTAG_PORT => {
                    self.jtag_sessions += 1;
                    self.jtag = Some(JtagClient {
                        sock,
                        session: JtagSession::default(),
                        closing: false,
                        dead: false,
                    });
                }
                _ => self.ctrls.push(CtrlClient {
                    sock,
                    lines: LineReader::default(),
                    out: OutBuf::default(),
                    dead: false,
                }),
            }
        }
    }

    fn read_link(&mut self) {
        let Some(sock) = self.link.as_mut() else {
            return;
        };
        // Reads past SOC_RX_CAP only by what one read returns; polled again only once the SoC
        // took most of it.
        let mut gone = false;
        loop {
            match sock.read(&mut self.rbuf[..]) {
                // End of stream is the client leaving, even if it only shut down its sending
                // side: a half-open link would otherwise swallow answers nobody reads.
                Ok(0) => {
                    gone = true;
                    break;
                }
                Ok(n) => {
                    self.soc.push_rx(&self.rbuf[..n]);
                    if self.soc.rx_pending() >= SOC_RX_CAP {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    gone = true;
                    break;
                }
            }
        }
        if gone {
            self.drop_link();
        }
    }

    /// As [`Self::read_link`], for the link engine's PHY, through the fault injector.
    fn read_phy(&mut self) {
        let Some(sock) = self.phy.as_mut() else {
            return;
        };
        let mut gone = false;
        loop {
            match sock.read(&mut self.rbuf[..]) {
                Ok(0) => {
                    gone = true;
                    break;
                }
                Ok(n) if self.faults.active() || self.faults.holding() => {
                    let mut board = self.faults.scratch();
                    self.faults.toward_board(&self.rbuf[..n], self.soc.cycle(), &mut board);
                    self.soc.push_phy(&board);
                    self.faults.give_back(board);
                    if self.soc.phy_rx_pending() >= SOC_RX_CAP {
                        break;
                    }
                }
                Ok(n) => {
                    self.soc.push_phy(&self.rbuf[..n]);
                    if self.soc.phy_rx_pending() >= SOC_RX_CAP {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    gone = true;
                    break;
                }
            }
        }
        if gone {
            self.drop_phy();
        }
    }

    /// Reads what the JTAG client sent and executes it at once (a whole XVC vector, or every
    /// bitbang request of the read), then writes the answers without waiting for the next
    /// turn of the loop: a probe waits for them before it sends anything else.
    fn read_jtag(&mut self) {
        let cycles = if self.paused { 0 } else { jtag::SYS_CYCLES_PER_TCK };
        let mut system_reset = false;
        {
            let Some(c) = self.jtag.as_mut() else { return };
            let mut tap = SocTap { soc: &mut self.soc, cycles };
            while c.session.wants_input() && !c.closing {
                match c.sock.read(&mut self.rbuf[..]) {
                    Ok(0) => {
                        c.dead = true;
                        break;
                    }
                    Ok(n) => {
                        self.jtag_seen = Some(Instant::now());
                        let JtagEvents { system_reset: reset, end } =
                            c.session.feed(&self.rbuf[..n], &mut tap);
                        system_reset |= reset;
                        if let Some(end) = end {
                            if let jtag::End::Malformed(why) = &end {
                                if !self.opts.quiet {
                                    note(&format!("JTAG client dropped: {why}"));
                                }
                            }
                            c.closing = true;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        c.dead = true;
                        break;
                    }
                }
            }
        }
        if system_reset {
            // remote_bitbang srst: the same reset as the control port's `reset`.
            self.request("reset");
        }
        self.idle = false;
        self.flush_jtag();
    }

    fn read_log_client(&mut self, i: usize) {
        // Log clients have nothing to say; reading only notices that they left.
        let c = &mut self.logs[i];
        loop {
            match c.sock.read(&mut self.rbuf[..]) {
                Ok(0) => {
                    c.dead = true;
                    return;
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    c.dead = true;
                    return;
                }
            }
        }
    }

    fn read_ctrl_client(&mut self, i: usize, requests: &mut Vec<(usize, Line)>) {
        let c = &mut self.ctrls[i];
        let mut lines = Vec::new();
        loop {
            match c.sock.read(&mut self.rbuf[..]) {
                Ok(0) => {
                    c.dead = true;
                    break;
                }
                Ok(n) => c.lines.feed(&self.rbuf[..n], &mut lines),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    c.dead = true;
                    break;
                }
            }
        }
        // A client that sent `stats\n` and closed still gets its answer attempted: the write
        // fails harmlessly if it is really gone.
        requests.extend(lines.into_iter().map(|l| (i, l)));
    }

    fn request(&mut self, word: &str) -> Value {
        match word {
            "stats" => self.stats(),
            "reset" => {
                self.soc.reset(RESET_CYCLES);
                self.resets += 1;
                // The shim dropped its queues; ours go too, so no pre-reset answer leaks out.
                self.link_discarded += self.link_out.clear() as u64;
                self.idle = false;
                json!({ "ok": true, "cycle": self.soc.cycle() })
            }
            "pause" => {
                self.paused = true;
                json!({ "ok": true, "cycle": self.soc.cycle() })
            }
            "resume" => {
                self.paused = false;
                self.idle = false;
                json!({ "ok": true, "cycle": self.soc.cycle() })
            }
            w if w == "fault" || w.starts_with("fault ") => self.faults.request(&w[5..]),
            "quit" => {
                self.exit = Some(Exit::Quit);
                json!({ "ok": true, "cycle": self.soc.cycle() })
            }
            other => {
                let shown: String = other.chars().take(64).collect();
                refuse(format!("unknown request `{shown}`: send one of {REQUESTS}, one per line"))
            }
        }
    }

    fn stats(&mut self) -> Value {
        let now = Instant::now();
        let cycle = self.soc.cycle();
        self.rate.sample(now, cycle);
        let c = self.soc.counters();
        let path = |p: &Option<PathBuf>| p.as_deref().map(|p| p.display().to_string());
        json!({
            "ok": true,
            "cycle": cycle,
            "sim_hz": self.rate.hz(now, cycle).round(),
            "clock_hz": self.board.clock_hz,
            "uptime_s": now.duration_since(self.started).as_secs_f64(),
            "paused": self.paused,
            "idle": self.idle && !self.paused,
            "idle_hz": self.opts.idle_hz,
            "link_rx_bytes": c.link_rx_bytes,
            "link_tx_bytes": c.link_tx_bytes,
            "link_discarded": self.link_discarded,
            "log_bytes": c.log_bytes,
            "uart_framing_errors": c.uart_framing_errors,
            "uart_div": c.uart_div,
            "link_client": self.link.is_some(),
            "phy": self.ports.addr[PHY_PORT].to_string(),
            "phy_rx_bytes": c.phy_rx_bytes,
            "phy_tx_bytes": c.phy_tx_bytes,
            "phy_discarded": self.phy_discarded,
            "phy_client": self.phy.is_some(),
            "log_clients": self.logs.len(),
            "core_sleep": self.soc.core_sleep(),
            "gpio_out": self.soc.gpio_out(),
            "resets": self.resets,
            "pid": std::process::id(),
            "board": self.board.name,
            "elf": path(&self.program.elf),
            "demo": self.program.demo.map(demo_name),
            "model": self.soc.model().name,
            "threads": self.opts.threads.max(1),
            "wafers": self.opts.wafers,
            "trace": path(&self.opts.trace),
            "jtag": self.ports.addr[JTAG_PORT].to_string(),
            "jtag_client": self.jtag.is_some(),
            "jtag_protocol": self.jtag.as_ref().and_then(|c| c.session.protocol().name()),
            "jtag_sessions": self.jtag_sessions,
            "jtag_tck": self.jtag_tck + self.jtag.as_ref().map_or(0, |c| c.session.tck_cycles),
            "fault": self.faults.report(),
        })
    }

    /// Delivers pending control answers (a `quit` answer above all) for up to a second, then
    /// flushes the waves.
    fn finish(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            self.flush();
            if self.ctrls.iter().all(|c| c.out.pending() == 0) || Instant::now() >= deadline {
                break;
            }
            let mut fds: Vec<_> = self
                .ctrls
                .iter()
                .filter(|c| c.out.pending() > 0)
                .map(|c| pollfd(c.sock.as_raw_fd(), libc::POLLOUT))
                .collect();
            let _ = poll(&mut fds, 50);
        }
        for c in &self.ctrls {
            let _ = c.sock.shutdown(std::net::Shutdown::Both);
        }
        self.soc.trace_flush();
    }
}

/// Runs `n` cycles, or fewer when the core falls asleep and `stop.sleep` is set. A full
/// board-to-host buffer makes the shim return after every cycle; that is backpressure, and
/// the cycles go on.
fn run_cycles(soc: &mut Soc, n: u64, stop: StopOn) -> u64 {
    let mut ran = 0;
    while ran < n {
        let r = soc.run(n - ran, stop);
        ran += r.cycles;
        if r.sleeping || r.cycles == 0 {
            break;
        }
    }
    ran
}

/// The SoC's TAP pins for the JTAG server: each change is evaluated at once by the shim, then
/// the system clock runs `cycles` cycles so the DTM-to-DM clock crossing can move (0 while
/// the simulator is paused: the TAP answers, the debug module does not).
struct SocTap<'a> {
    soc: &'a mut Soc,
    cycles: u64,
}

impl Tap for SocTap<'_> {
    fn drive(&mut self, tck: bool, tms: bool, tdi: bool, trst_n: bool) {
        self.soc.set_jtag(tck, tms, tdi, trst_n);
    }

    fn run_system(&mut self) {
        if self.cycles > 0 {
            run_cycles(self.soc, self.cycles, StopOn::default());
        }
    }

    fn tdo(&self) -> bool {
        self.soc.get_tdo()
    }
}

fn refuse(error: String) -> Value {
    json!({ "ok": false, "error": error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_meter_measures_over_the_last_second() {
        let t0 = Instant::now();
        let mut m = RateMeter::new(t0, 0);
        for i in 1..=30u64 {
            m.sample(t0 + Duration::from_millis(100 * i), i * 100_000);
        }
        let now = t0 + Duration::from_millis(3000);
        let hz = m.hz(now, 3_000_000);
        assert!((hz - 1e6).abs() < 1e5, "{hz}");
        // Paused: the count stops, the rate falls to 0 once the window has passed.
        for i in 31..=45u64 {
            m.sample(t0 + Duration::from_millis(100 * i), 3_000_000);
        }
        assert_eq!(m.hz(t0 + Duration::from_millis(4500), 3_000_000), 0.0);
    }

    #[test]
    fn demo_images_sit_at_the_ram_base() {
        let img = demo_image(Demo::Spin, &programs::spin(), 0x1000_0000);
        img.validate(0x1000_0000, 0x4_0000).unwrap();
        assert_eq!(img.segments[0].data.len(), 4);
    }
}
