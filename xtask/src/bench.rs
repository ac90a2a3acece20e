//! `cargo xtask bench`: the performance table, printed and written to
//! `target/bench/bench.json`.
//!
//! Every figure is measured in this run, and every ratio is against a baseline measured in
//! the same run on the same machine:
//!
//! - SoC simulated cycles per second with the firmware running, with 1 and 2 Verilator
//!   threads (ratio: 2 threads against 1);
//! - the same SoC model running only `j .` (the core alone busy), and a bare CV32E40P
//!   (`cv32e40p_top` with a minimal C++ memory) running `j .` in the same kind of harness
//!   (ratio: SoC against bare core, the figure docs/architecture.md budgets with);
//! - the time to build the simulator model from cold (an empty cache, the Verilator runtime
//!   objects included) and from the cache (ratio: cached against cold);
//! - the data-plane blocks (`dataplane`): SwarmX flits per cycle per port and reduce latency
//!   against the goal, the tree model's calibration against the RTL and its predictions up to
//!   192 wafers against the ring all-reduce bound; MemoryX cycles per parameter per lane and
//!   first-output latency; open-synthesis figures on an ECP5-85F;
//! - training (`train`): `wsctl train`'s loop on the digits, its held-out accuracy beside
//!   scikit-learn's `MLPClassifier` trained in the same run, and simulated cycles per step
//!   against the ideal at W = 1 and 2.
//!
//! Tests never look at these numbers; they are for people and for tracking regressions.

use anyhow::{Context, Result};
use serde::Serialize;
use ws_hdl::bench;
use ws_hdl::vbuild::BuildEvent;

use crate::util::{spinner, step, Ctx};

mod dataplane;
mod train;

/// A group of bench rows, for `cargo xtask bench --only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Group {
    /// Simulated cycles per second of the SoC and the bare core.
    Soc,
    /// The boot ROM's link loader.
    Loader,
    /// JTAG flash over XVC and remote_bitbang.
    Jtag,
    /// Cold and cached simulator builds.
    Build,
    /// SwarmX node, cascades and tree model.
    Swarm,
    /// MemoryX optimizer lanes.
    Optim,
    /// The wafer mesh: FMA utilisation, ingress balance, reduction links, synthesis.
    Mesh,
    /// Host link protocol: encode/decode + CRC against memcpy, framing overhead.
    Link,
    /// `wsctl train` on the digits: accuracy beside scikit-learn, cycles per step ÷ ideal.
    Train,
    /// The weight-streaming pipeline from the hardware trace: bubble, hidden updates, scaling.
    Pipeline,
}

/// What `cargo xtask bench` measures.
#[derive(Debug, Clone)]
pub struct Selection {
    only: Vec<Group>,
    /// Run open synthesis (minutes per design).
    pub synth: bool,
}

impl Selection {
    /// `only` empty: every group.
    pub fn new(only: Vec<Group>, synth: bool) -> Self {
        Selection { only, synth }
    }

    fn has(&self, g: Group) -> bool {
        self.only.is_empty() || self.only.contains(&g)
    }
}

/// Cycles per measurement: long enough that the rate settles (a few seconds at ~1 MHz).
const CYCLES: u64 = 3_000_000;

#[derive(Debug, Serialize)]
pub(crate) struct Row {
    /// What was measured.
    name: String,
    /// The figure.
    value: f64,
    /// Its unit.
    unit: &'static str,
    /// Against what baseline the ratio is taken (empty: no ratio).
    baseline: String,
    /// `value / baseline value`, when there is a baseline.
    ratio: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Report {
    host: String,
    cycles_per_measurement: u64,
    rows: Vec<Row>,
}

pub(crate) fn row(name: &str, value: f64, unit: &'static str) -> Row {
    Row { name: name.into(), value, unit, baseline: String::new(), ratio: None }
}

/// `r` with a ratio computed elsewhere (against an ideal or a goal, not another row).
pub(crate) fn ratio(mut r: Row, value: f64, baseline: &str) -> Row {
    r.ratio = Some(value);
    r.baseline = baseline.into();
    r
}

pub(crate) fn vs(mut r: Row, baseline: &Row) -> Row {
    r.ratio = Some(r.value / baseline.value);
    r.baseline = baseline.name.clone();
    r
}

pub fn bench(ctx: &Ctx, sel: &Selection) -> Result<()> {
    let mut rows = Vec::new();
    if sel.has(Group::Soc) {
        soc_rows(ctx, &mut rows)?;
    }
    if sel.has(Group::Loader) {
        loader_rows(ctx, &mut rows)?;
    }
    if sel.has(Group::Jtag) {
        jtag_rows(ctx, &mut rows)?;
    }
    if sel.has(Group::Build) {
        build_rows(&mut rows)?;
    }
    if sel.has(Group::Swarm) {
        dataplane::swarm_rows(sel, &mut rows)?;
    }
    if sel.has(Group::Optim) {
        dataplane::optim_rows(sel, &mut rows)?;
    }
    if sel.has(Group::Mesh) {
        dataplane::mesh_rows(sel, &mut rows)?;
    }
    if sel.has(Group::Link) {
        link_rows(&mut rows);
        link_engine_rows(&mut rows)?;
        soc_echo_rows(ctx, &mut rows)?;
    }
    if sel.has(Group::Train) {
        train::train_rows(ctx, &mut rows)?;
    }
    if sel.has(Group::Pipeline) {
        train::pipeline_rows(ctx, &mut rows)?;
    }

    print_table(&rows);
    let report = Report {
        host: format!("{} cores", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)),
        cycles_per_measurement: CYCLES,
        rows,
    };
    let dir = ctx.root.join("target/bench");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("bench.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn soc_rows(ctx: &Ctx, rows: &mut Vec<Row>) -> Result<()> {
    let elf = ctx.firmware_elf();
    step("simulated cycles per second");
    let measure = |label: &str, f: &dyn Fn() -> Result<bench::CyclesPerSecond, ws_hdl::sim::SimError>| {
        let pb = spinner(label);
        let r = f().with_context(|| format!("measuring {label}"));
        pb.finish_and_clear();
        r
    };
    let soc1 = measure("SoC, firmware, 1 thread", &|| bench::soc_cycles_per_second(1, Some(&elf), CYCLES))?;
    let soc2 = measure("SoC, firmware, 2 threads (builds that model once)", &|| {
        bench::soc_cycles_per_second(2, Some(&elf), CYCLES)
    })?;
    let spin = measure("SoC, `j .` only, 1 thread", &|| bench::soc_spin_cycles_per_second(1, CYCLES))?;
    let bare = measure("bare CV32E40P, `j .`, 1 thread (builds that model once)", &|| {
        bench::bare_core_cycles_per_second(1, CYCLES)
    })?;
    let r_bare = row("bare CV32E40P, j ., 1 Verilator thread", bare.cycles_per_second, "cycles/s");
    let r_soc1 = row("SoC, firmware, 1 Verilator thread", soc1.cycles_per_second, "cycles/s");
    let r_soc2 = vs(row("SoC, firmware, 2 Verilator threads", soc2.cycles_per_second, "cycles/s"), &r_soc1);
    let r_spin = vs(row("SoC, core spinning (j .), 1 thread", spin.cycles_per_second, "cycles/s"), &r_bare);
    let r_soc1 = vs(r_soc1, &r_bare);
    rows.extend([r_bare, r_soc1, r_soc2, r_spin]);
    Ok(())
}

fn loader_rows(ctx: &Ctx, rows: &mut Vec<Row>) -> Result<()> {
    step("boot-ROM link loader throughput");
    let pb = spinner("flashing the firmware through the boot ROM's loader");
    let ll = link_loader(ctx).context("measuring the link loader")?;
    pb.finish_and_clear();
    let ideal = row("simulated host link, ideal: 1 byte per cycle", ll.sim_hz, "bytes/s");
    let r_ll = vs(
        row("link loader (wsctl flash --via link), image bytes/s", ll.bytes_per_second, "bytes/s"),
        &ideal,
    );
    let r_cyc = row(
        "link loader, simulated cycles per image byte (incl. CRC check, boot)",
        ll.cycles_per_byte,
        "cycles/byte",
    );
    rows.extend([ideal, r_ll, r_cyc]);
    Ok(())
}

fn jtag_rows(ctx: &Ctx, rows: &mut Vec<Row>) -> Result<()> {
    step("JTAG flash throughput (probe-rs over the simulator's JTAG server)");
    for wire in [host_driver::jtag::Wire::Xvc, host_driver::jtag::Wire::Bitbang] {
        let pb = spinner(&format!("flashing the firmware over JTAG ({wire:?})"));
        let b = jtag_flash(ctx, wire).with_context(|| format!("measuring JTAG flash over {wire:?}"))?;
        pb.finish_and_clear();
        let tck =
            row(&format!("JTAG {wire:?}: TCK periods/s, ideal payload = TCK/8 bytes/s"), b.tck_per_s, "Hz");
        let mut w = row(&format!("JTAG {wire:?}: flash write, bytes/s"), b.write_bytes_per_s, "bytes/s");
        w.ratio = Some(b.fraction_of_tck);
        w.baseline = "TCK/8 (one payload bit per TCK)".into();
        let f = row(
            &format!("JTAG {wire:?}: whole flash (halt, write, verify, start), bytes/s"),
            b.flash_bytes_per_s,
            "bytes/s",
        );
        rows.extend([tck, w, f]);
    }
    Ok(())
}

fn build_rows(rows: &mut Vec<Row>) -> Result<()> {
    step("simulator build time (cold cache, then cached)");
    let pb = spinner("building the SoC model into an empty cache");
    let times = bench::build_times(1, &mut |e| {
        if let BuildEvent::Compiled { done, total, unit } = e {
            pb.set_message(format!("building the SoC model into an empty cache: {done}/{total} {unit}"));
        }
    })
    .context("measuring build times")?;
    pb.finish_and_clear();
    let cold = row("SoC model build, cold cache", times.cold.as_secs_f64(), "s");
    let cached = vs(row("SoC model build, cached", times.cached.as_secs_f64(), "s"), &cold);
    rows.extend([cold, cached]);
    Ok(())
}

struct LinkLoader {
    bytes_per_second: f64,
    cycles_per_byte: f64,
    /// Simulated cycles per wall second during the transfer.
    sim_hz: f64,
}

/// Flashes the firmware through the boot ROM's loader on a fresh simulator (empty RAM) and
/// relates the transfer to the simulated cycles it took: the link moves at most one byte per
/// cycle each way, so cycles per byte is the figure against the ideal, independent of the
/// host's speed.
fn link_loader(ctx: &Ctx) -> Result<LinkLoader> {
    use host_driver::client::Client;
    use host_driver::loader::{flash_via_link, FirmwareImage};
    use host_driver::transport::SimTransport;
    use ws_hdl::sim::{SimOptions, SimProcess};

    let image = FirmwareImage::read(&ctx.firmware_elf())?;
    let opts =
        SimOptions { loader: true, elf: None, quiet: true, ..SimOptions::with_elf(ctx.firmware_elf()) };
    std::env::set_var("WS_SIM_BIN", ctx.bin("ws-sim"));
    let sim = SimProcess::start(&opts)?;
    let clock = host_driver::board_time::BoardClock::follow(sim.ctrl_addr()).ok();
    let mut client = Client::new(Box::new(SimTransport::connect(sim.link_addr())?.with_clock(clock)));
    client.set_timeout(std::time::Duration::from_secs(10));
    client.ping(1)?;
    let cycle = |sim: &SimProcess| -> Result<f64> {
        Ok(sim.stats()?["cycle"].as_u64().context("ws-sim stats without `cycle`")? as f64)
    };
    let c0 = cycle(&sim)?;
    let t0 = std::time::Instant::now();
    let report = flash_via_link(&mut client, &image, &mut |_| {})?;
    let wall = t0.elapsed().as_secs_f64();
    let cycles = cycle(&sim)? - c0;
    Ok(LinkLoader {
        bytes_per_second: report.bytes_per_second(),
        cycles_per_byte: cycles / report.bytes as f64,
        sim_hz: cycles / wall,
    })
}

/// Flashes the firmware over JTAG into a fresh simulator, over `wire`.
fn jtag_flash(ctx: &Ctx, wire: host_driver::jtag::Wire) -> Result<host_driver::jtag::bench::JtagFlashBench> {
    use ws_hdl::sim::{SimOptions, SimProcess};
    let opts = SimOptions { quiet: true, ..SimOptions::with_elf(ctx.firmware_elf()) };
    std::env::set_var("WS_SIM_BIN", ctx.bin("ws-sim"));
    let sim = SimProcess::start(&opts)?;
    let jtag: std::net::SocketAddr =
        sim.stats()?["jtag"].as_str().context("ws-sim stats without `jtag`")?.parse()?;
    let board = host_driver::board::Board::load("sim")?;
    Ok(host_driver::jtag::bench::flash_throughput(jtag, wire, &board, &ctx.firmware_elf())?)
}

/// The RX half of the link engine at full rate: payload bytes per cycle against the PHY's 4.
fn link_engine_rows(rows: &mut Vec<Row>) -> Result<()> {
    for (payload, frames) in [(256usize, 2048usize), (4096, 256), (65536, 16)] {
        let pb = spinner(&format!("link engine: RX line rate at {payload} B frames"));
        let r = ws_hdl::bench::link::rx_line_rate(payload, frames)?;
        pb.finish_and_clear();
        let ideal = row(
            &format!("link engine: framing bound at {payload} B (payload / frame bytes)"),
            r.framing_bound,
            "ratio",
        );
        rows.push(vs(
            row(
                &format!("link engine: RX payload at {payload} B frames, × line rate"),
                r.of_line_rate,
                "ratio",
            ),
            &ideal,
        ));
        rows.push(ideal);
    }
    Ok(())
}

/// The link engine inside the simulated SoC: the host streams 24 MiB each way through the
/// firmware's echo windows on every bulk channel at once (`wsctl link echo`). Payload bytes
/// per simulated cycle each way against the PHY's 4, next to the framing bound at the
/// negotiated 4 KiB frames.
fn soc_echo_rows(ctx: &Ctx, rows: &mut Vec<Row>) -> Result<()> {
    use host_driver::link::{echo, Config, Link};
    use host_driver::transport::SimTransport;
    use std::time::{Duration, Instant};
    use ws_hdl::sim::{SimOptions, SimProcess};

    let pb = spinner("link engine in the SoC: bulk echo, 24 MiB each way");
    std::env::set_var("WS_SIM_BIN", ctx.bin("ws-sim"));
    let sim = SimProcess::start(&SimOptions { quiet: true, ..SimOptions::with_elf(ctx.firmware_elf()) })?;
    let cfg = Config { max_payload: 4096, ..Config::default() };
    let clock = host_driver::board_time::BoardClock::follow(sim.ctrl_addr()).ok();
    let mut link = Link::connect(
        Box::new(SimTransport::connect(sim.phy_addr())?.with_clock(clock)),
        cfg,
        Duration::from_secs(20),
    )?;
    let cycle = |sim: &SimProcess| -> Result<f64> {
        Ok(sim.stats()?["cycle"].as_u64().context("ws-sim stats without `cycle`")? as f64)
    };
    let (c0, t0) = (cycle(&sim)?, Instant::now());
    let r = echo::run(&mut link, (24 << 20) / 3, 1, Duration::from_secs(60), &mut |_, _| {})?;
    let (cycles, wall) = (cycle(&sim)? - c0, t0.elapsed().as_secs_f64());
    pb.finish_and_clear();
    let per_cycle = r.bytes_each_way() as f64 / cycles;
    let bound =
        row("link engine in the SoC: framing bound at 4 KiB frames", 4096.0 / (4096.0 + 28.0), "ratio");
    rows.push(vs(
        row("link engine in the SoC: bulk echo payload each way, × line rate", per_cycle / 4.0, "ratio"),
        &bound,
    ));
    rows.push(bound);
    rows.push(row("link engine in the SoC: bulk echo, wall", r.bytes_each_way() as f64 / wall, "bytes/s"));
    rows.push(row(
        "link engine in the SoC: simulated cycles per second during the echo",
        cycles / wall,
        "Hz",
    ));
    Ok(())
}

/// Host-side link protocol v2 on one core: 64 MiB in 4 KiB frames, best of 5 passes, every
/// ratio against a memcpy of the same buffer in the same run (goal ≥ 0.5×).
fn link_rows(rows: &mut Vec<Row>) {
    let pb = spinner("link: encode/decode + CRC-32C over 64 MiB");
    let b = ws_common::link::bench::run(64 << 20, 4096, 5);
    pb.finish_and_clear();
    let crc = if b.crc_accelerated { "SSE4.2" } else { "slicing-by-8" };
    let memcpy = row("link: memcpy 64 MiB", b.memcpy_gbps * 1e9, "bytes/s");
    rows.push(vs(row(&format!("link: CRC-32C ({crc})"), b.crc_gbps * 1e9, "bytes/s"), &memcpy));
    rows.push(vs(row("link: encode + CRC, 4 KiB frames", b.encode_gbps * 1e9, "bytes/s"), &memcpy));
    rows.push(vs(row("link: decode + CRC check, in place", b.decode_gbps * 1e9, "bytes/s"), &memcpy));
    rows.push(vs(row("link: decode + CRC check + copy out", b.decode_copy_gbps * 1e9, "bytes/s"), &memcpy));
    rows.push(memcpy);
    for (payload, overhead) in b.overhead {
        rows.push(row(&format!("link: wire overhead, {payload} B payload"), overhead * 100.0, "%"));
    }
    match sim_transport_cpu(256 << 20) {
        Ok(ns_per_gb) => {
            rows.push(row("link: host CPU per GB through the sim transport", ns_per_gb / 1e9, "s"))
        }
        Err(e) => eprintln!("bench: sim transport CPU time not measured: {e:#}"),
    }
}

/// Host CPU seconds per GB (1e9 payload bytes) to frame 4 KiB payloads and send them
/// through `SimTransport` to a loopback TCP reader: the sending thread's CPU time (from
/// /proc/thread-self/schedstat), so the reader's cost is not counted.
fn sim_transport_cpu(bytes: usize) -> Result<f64> {
    use host_driver::transport::{SimTransport, Transport};
    use std::io::Read;
    use ws_common::link::{encode_frame, flags, frame_len, Channel, Header};
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let reader = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0u64;
        loop {
            match s.read(&mut buf)? {
                0 => return Ok(n),
                k => n += k as u64,
            }
        }
    });
    let cpu_ns = || -> Result<u64> {
        let t = std::fs::read_to_string("/proc/thread-self/schedstat")?;
        Ok(t.split_whitespace().next().context("empty schedstat")?.parse()?)
    };
    let mut t = SimTransport::connect(addr)?;
    let payload = vec![0x5au8; 4096];
    let mut wire = vec![0u8; 64 * frame_len(4096)];
    let before = cpu_ns()?;
    let mut sent = 0usize;
    let mut seq = 0u32;
    while sent < bytes {
        // 64 frames per send, as the link pump batches them.
        let mut at = 0;
        for _ in 0..64 {
            let h = Header { seq, length: 4096, ..Header::new(Channel::Weights, flags::DATA) };
            at += encode_frame(&h, &payload, &mut wire[at..])?;
            seq = seq.wrapping_add(1);
        }
        t.send(&wire[..at])?;
        sent += 64 * 4096;
    }
    let cpu = cpu_ns()? - before;
    drop(t);
    let got = reader.join().map_err(|_| anyhow::anyhow!("reader thread panicked"))??;
    anyhow::ensure!(got as usize >= sent, "the reader got {got} bytes of {sent}");
    Ok(cpu as f64 / (sent as f64 / 1e9))
}

fn fmt_value(r: &Row) -> String {
    match r.unit {
        "bytes/s" if r.value >= 1e9 => format!("{:.2} GB/s", r.value / 1e9),
        "bytes/s" => format!("{:.1} kB/s", r.value / 1e3),
        "%" => format!("{:.3} %", r.value),
        "ratio" => format!("{:.4}", r.value),
        "Hz" => format!("{:.3} MHz", r.value / 1e6),
        "cycles/byte" => format!("{:.1} cycles/byte", r.value),
        "cycles/s" => format!("{:.3} M cycles/s", r.value / 1e6),
        "cycles" | "LUT4" | "FF" | "DSP" | "BRAM" | "bytes" | "copies" | "PEs" => {
            format!("{:.0} {}", r.value, r.unit)
        }
        "flits/cycle" | "cycles/param" | "params/cycle" | "words/cycle" => {
            format!("{:.4} {}", r.value, r.unit)
        }
        "MHz" => format!("{:.1} MHz", r.value),
        "params/s" => format!("{:.1} M params/s", r.value / 1e6),
        "s" if r.value < 1.0 => format!("{:.1} ms", r.value * 1e3),
        "s" => format!("{:.1} s", r.value),
        u => format!("{} {u}", r.value),
    }
}

fn print_table(rows: &[Row]) {
    let w0 = rows.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let vals: Vec<String> = rows.iter().map(fmt_value).collect();
    let w1 = vals.iter().map(String::len).max().unwrap_or(0);
    println!("{:<w0$}  {:>w1$}  ratio", "measurement", "value");
    println!("{}", "-".repeat(w0 + w1 + 30));
    for (r, v) in rows.iter().zip(&vals) {
        let ratio = match r.ratio {
            Some(x) if x >= 0.01 => format!("{x:.3} × {}", r.baseline),
            Some(x) if x <= 0.0 => format!("none of {}", r.baseline),
            Some(x) => format!("1/{:.0} of {}", 1.0 / x, r.baseline),
            None => String::new(),
        };
        println!("{:<w0$}  {v:>w1$}  {ratio}", r.name);
    }
}
