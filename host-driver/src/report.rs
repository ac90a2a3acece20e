//! What `wsctl` prints, as plain functions: identity, block and statistics tables, the
//! simulator's status, hex dumps and ping summaries. Kept here so they have tests.

use std::fmt::Write as _;
use std::time::Duration;

use ws_common::ctrl::cmd::{IdentityInfo, StatsInfo, Window};
use ws_common::regmap::{block_name, BLOCKS};

use crate::sim::{SimStats, SimStatus};

/// Column-aligned text: a header and rows, two spaces between columns, no trailing blanks.
#[derive(Debug, Clone, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Self {
        Self { rows: vec![header.into_iter().map(Into::into).collect()] }
    }

    /// Adds a row.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Self {
        self.rows.push(cells.into_iter().map(Into::into).collect());
        self
    }

    /// The rendered table, one line per row, each ending in a newline.
    pub fn render(&self) -> String {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..cols)
            .map(|c| self.rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for r in &self.rows {
            let mut line = String::new();
            for (c, cell) in r.iter().enumerate() {
                if c > 0 {
                    line.push_str("  ");
                }
                line.push_str(cell);
                if c + 1 < r.len() {
                    line.extend(std::iter::repeat_n(' ', widths[c] - cell.chars().count()));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `name  value` lines with the names aligned.
fn fields(pairs: &[(&str, String)]) -> String {
    let w = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    pairs.iter().map(|(k, v)| format!("{k:<w$}  {v}\n")).collect()
}

/// A byte count for people: `256 KiB`, `4 KiB`, `1.5 MiB`, `100 B`.
pub fn size(bytes: u64) -> String {
    const K: u64 = 1024;
    match bytes {
        b if b >= K * K * K && b % (K * K * K) == 0 => format!("{} GiB", b / (K * K * K)),
        b if b >= K * K && b % (K * K) == 0 => format!("{} MiB", b / (K * K)),
        b if b >= K * K => format!("{:.1} MiB", b as f64 / (K * K) as f64),
        b if b >= K && b % K == 0 => format!("{} KiB", b / K),
        b if b >= K => format!("{:.1} KiB", b as f64 / K as f64),
        b => format!("{b} B"),
    }
}

/// A frequency for people: `50 MHz`, `1.43 MHz`, `1000 Hz`.
pub fn hz(v: f64) -> String {
    if v >= 1e6 {
        let m = v / 1e6;
        if (m - m.round()).abs() < 1e-9 {
            format!("{m:.0} MHz")
        } else {
            format!("{m:.2} MHz")
        }
    } else if v >= 1e4 {
        format!("{:.1} kHz", v / 1e3)
    } else {
        format!("{v:.0} Hz")
    }
}

fn window(w: &Window) -> String {
    if w.len == 0 {
        return "none".into();
    }
    format!("{:#010x}..{:#010x}  {}", w.base, u64::from(w.base) + u64::from(w.len), size(u64::from(w.len)))
}

/// How a block found on the board compares with the register map the host was built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockStatus {
    /// Same major version (minor versions add registers compatibly).
    Ok,
    /// A different major version: the host's register constants do not fit the hardware.
    Mismatch,
    /// An ID the host's register map does not know.
    Unknown,
    /// In the host's map but not found on the board.
    Missing,
}

impl BlockStatus {
    /// The table cell.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockStatus::Ok => "ok",
            BlockStatus::Mismatch => "MISMATCH",
            BlockStatus::Unknown => "unknown",
            BlockStatus::Missing => "MISSING",
        }
    }
}

/// One row of the block table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRow {
    /// Register slot.
    pub slot: u32,
    /// Name from the register map, or `?`.
    pub name: String,
    /// Block ID (from hardware, or the map for a missing block).
    pub id: u16,
    /// `major.minor` on the hardware, if found.
    pub hardware: Option<(u8, u8)>,
    /// `major.minor` the host was built for, if the map knows the block.
    pub host: Option<(u8, u8)>,
    /// The comparison.
    pub status: BlockStatus,
}

/// Compares the blocks an identity lists with `ws_common::regmap::BLOCKS`.
pub fn block_rows(info: &IdentityInfo) -> Vec<BlockRow> {
    let mut rows: Vec<BlockRow> = info
        .blocks()
        .iter()
        .map(|b| {
            let known = BLOCKS.iter().find(|k| k.id == b.id);
            let status = match known {
                None => BlockStatus::Unknown,
                Some(k) if k.major != b.major => BlockStatus::Mismatch,
                Some(_) => BlockStatus::Ok,
            };
            BlockRow {
                slot: u32::from(b.slot),
                name: block_name(b.id).unwrap_or("?").into(),
                id: b.id,
                hardware: Some((b.major, b.minor)),
                host: known.map(|k| (k.major, k.minor)),
                status,
            }
        })
        .collect();
    for k in BLOCKS.iter().filter(|k| k.in_soc) {
        if !info.blocks().iter().any(|b| b.id == k.id) {
            rows.push(BlockRow {
                slot: k.slot,
                name: k.name.into(),
                id: k.id,
                hardware: None,
                host: Some((k.major, k.minor)),
                status: BlockStatus::Missing,
            });
        }
    }
    rows.sort_by_key(|r| (r.slot, r.id));
    rows
}

fn version(v: Option<(u8, u8)>) -> String {
    v.map(|(a, b)| format!("{a}.{b}")).unwrap_or_else(|| "-".into())
}

/// The `wsctl info` report: identity fields, then the block table. `sim` adds the simulated
/// clock rate when the board is the simulator and its control port answered.
pub fn identity_report(info: &IdentityInfo, sim: Option<&SimStats>) -> String {
    let [ma, mi, pa] = info.fw_version;
    let mut f = vec![
        ("firmware", format!("{ma}.{mi}.{pa}")),
        ("build hash", format!("{:#010x}", info.build_hash)),
        ("clock", hz(f64::from(info.clk_hz))),
    ];
    if let Some(s) = sim {
        let mut v = format!("{} simulated", hz(s.sim_hz));
        if s.sim_hz > 0.0 && info.clk_hz > 0 {
            let _ = write!(v, " ({:.1}x slower than the board)", f64::from(info.clk_hz) / s.sim_hz);
        }
        if s.idle {
            v.push_str(", idle (throttled)");
        }
        f.push(("sim rate", v));
    }
    f.extend([
        ("tick", if info.tick_hz == 0 { "not running".into() } else { hz(f64::from(info.tick_hz)) }),
        ("ROM", window(&info.rom)),
        ("RAM", window(&info.ram)),
        ("peek window", window(&info.peek)),
        ("poke window", window(&info.poke)),
    ]);
    let mut out = fields(&f);
    out.push('\n');
    let mut t = Table::new(["slot", "block", "id", "hardware", "host", "status"]);
    for r in block_rows(info) {
        t.row([
            r.slot.to_string(),
            r.name,
            format!("{:#06x}", r.id),
            version(r.hardware),
            version(r.host),
            r.status.as_str().into(),
        ]);
    }
    out.push_str(&t.render());
    out
}

/// The `wsctl stats` report. With the clock, cycle counts are also shown as board time.
pub fn stats_report(s: &StatsInfo, clk_hz: Option<u32>) -> String {
    let time = |cycles: u64| match clk_hz {
        Some(c) if c > 0 => format!("{cycles}  ({:.3} s of board time)", cycles as f64 / f64::from(c)),
        _ => cycles.to_string(),
    };
    let mut f = vec![
        ("mcycle", time(s.mcycle)),
        ("mtime", time(s.mtime)),
        ("timer ticks", s.timer_ticks.to_string()),
        ("tick period", format!("{} cycles", s.tick_period)),
    ];
    if let Some(c) = clk_hz.filter(|&c| c > 0 && s.tick_period > 0) {
        f.push(("tick rate", hz(f64::from(c) / f64::from(s.tick_period))));
    }
    f.extend([
        ("frames ok", s.frames_ok.to_string()),
        ("frames bad", s.frames_bad.to_string()),
        ("refused", s.refused.to_string()),
    ]);
    fields(&f)
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// The `wsctl sim status` report.
pub fn sim_status_report(status: &SimStatus) -> String {
    let st = &status.state;
    let mut f = vec![
        ("pid", st.pid.to_string()),
        ("link", st.link.to_string()),
        ("log", st.log.to_string()),
        ("ctrl", st.ctrl.to_string()),
        ("elf", st.elf.display().to_string()),
        ("board", st.board.display().to_string()),
    ];
    match &status.stats {
        Ok(s) => {
            let mut cycle = s.cycle.to_string();
            if s.clock_hz > 0 {
                let _ = write!(cycle, "  ({:.3} s of board time)", s.cycle as f64 / s.clock_hz as f64);
            }
            f.extend([
                ("cycle", cycle),
                ("sim rate", if s.paused { "paused".into() } else { hz(s.sim_hz) }),
                ("board clock", hz(s.clock_hz as f64)),
                ("uptime", format!("{:.1} s", s.uptime_s)),
                (
                    "link bytes",
                    format!(
                        "{} in, {} out, {} discarded ({})",
                        s.link_rx_bytes,
                        s.link_tx_bytes,
                        s.link_discarded,
                        if s.link_client { "a client is connected" } else { "no client" }
                    ),
                ),
                ("log bytes", format!("{} ({} clients)", s.log_bytes, s.log_clients)),
                ("core sleeping", yes_no(s.core_sleep)),
                ("idle", yes_no(s.idle)),
                ("gpio", format!("{:#04x}", s.gpio_out)),
                ("resets", s.resets.to_string()),
            ]);
            if s.uart_framing_errors > 0 {
                f.push(("uart errors", s.uart_framing_errors.to_string()));
            }
            if let Some(t) = &s.trace {
                f.push(("trace", t.clone()));
            }
        }
        Err(e) => f.push(("stats", format!("unavailable: {e}"))),
    }
    f.push(("sim log", st.sim_log.display().to_string()));
    fields(&f)
}

/// A hex dump: 16 bytes a line, address, hex, ASCII.
pub fn hexdump(addr: u32, bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let a = u64::from(addr) + 16 * i as u64;
        let _ = write!(out, "{a:08x}  ");
        for k in 0..16 {
            match chunk.get(k) {
                Some(b) => {
                    let _ = write!(out, "{b:02x} ");
                }
                None => out.push_str("   "),
            }
            if k == 7 {
                out.push(' ');
            }
        }
        out.push(' ');
        out.extend(chunk.iter().map(|&b| if b.is_ascii_graphic() || b == b' ' { b as char } else { '.' }));
        let line = out.trim_end().len();
        out.truncate(line);
        out.push('\n');
    }
    out
}

/// A round-trip time for people, in milliseconds.
pub fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// `N pings, N answered: min/avg/max = a/b/c ms`.
pub fn ping_summary(rtts: &[Duration], sent: usize) -> String {
    if rtts.is_empty() {
        return format!("{sent} pings, none answered");
    }
    let min = rtts.iter().min().copied().unwrap_or_default();
    let max = rtts.iter().max().copied().unwrap_or_default();
    let avg = rtts.iter().sum::<Duration>() / rtts.len() as u32;
    let f = |d: Duration| format!("{:.3}", d.as_secs_f64() * 1e3);
    format!("{sent} pings, {} answered: min/avg/max = {}/{}/{} ms", rtts.len(), f(min), f(avg), f(max))
}

/// The board's per-channel state from its link v2 HELLO: `wsctl link hello`.
pub fn link_channels(rows: &[(ws_common::link::Channel, ws_common::link::hello::ChannelState)]) -> String {
    let mut out = format!(
        "{:<12} {:>12} {:>14} {:>10} {:>12}\n",
        "channel", "rx expected", "rx committed", "tx next", "credit"
    );
    for (ch, s) in rows {
        let name = format!("{} {:?}", *ch as u8, ch).to_lowercase();
        out.push_str(&format!(
            "{:<12} {:>12} {:>14} {:>10} {:>12}\n",
            name, s.rx_expected, s.rx_committed, s.tx_next, s.credit
        ));
    }
    out
}

/// The link engine's counters (`LinkCounters` from index 0, [`ws_common::link::counters`]):
/// one row per channel, then the per-TX-slot counters of the bulk channels, then the totals.
/// Channels with nothing counted are left out.
pub fn link_counters(c: &[u32]) -> String {
    use ws_common::link::counters as k;
    let at = |i: u8| c.get(i as usize).copied().unwrap_or(0);
    let mut out = format!(
        "{:<12} {:>10} {:>12} {:>8} {:>8} {:>8} {:>8} {:>10} {:>12} {:>8} {:>8} {:>12}\n",
        "channel",
        "rx frames",
        "rx bytes",
        "pcrc err",
        "seq err",
        "win viol",
        "dropped",
        "tx frames",
        "tx bytes",
        "retx",
        "naks",
        "credit stall"
    );
    for ch in ws_common::link::Channel::ALL {
        let n = ch as u8;
        let per = [
            k::RX_FRAMES,
            k::RX_BYTES,
            k::RX_PCRC_ERR,
            k::RX_SEQ_ERR,
            k::RX_WIN_VIOL,
            k::RX_DROPPED,
            k::TX_FRAMES,
            k::TX_BYTES,
        ]
        .map(|b| at(b + n));
        let slot =
            k::tx_slot(n).map(|s| [at(k::TX_RETX + s), at(k::TX_NAKS + s), at(k::TX_CREDIT_STALL + s)]);
        if per.iter().all(|&v| v == 0) && slot.is_none_or(|s| s.iter().all(|&v| v == 0)) {
            continue;
        }
        let slot =
            slot.map_or(["-".to_string(), "-".to_string(), "-".to_string()], |s| s.map(|v| v.to_string()));
        out.push_str(&format!(
            "{:<12} {:>10} {:>12} {:>8} {:>8} {:>8} {:>8} {:>10} {:>12} {:>8} {:>8} {:>12}\n",
            format!("{n} {ch:?}").to_lowercase(),
            per[0],
            per[1],
            per[2],
            per[3],
            per[4],
            per[5],
            per[6],
            per[7],
            slot[0],
            slot[1],
            slot[2]
        ));
    }
    out.push_str(&format!(
        "skipped bytes {}, header CRC errors {}, other versions {}, bad headers {}, firmware TX frames dropped {}\n",
        at(k::RX_SKIPPED),
        at(k::RX_HCRC_ERR),
        at(k::RX_BAD_VERSION),
        at(k::RX_BAD_HEADER),
        at(k::TX_FW_DROPPED)
    ));
    out
}

/// `wsctl swarm status`: the node's configuration, its counters and a table of its ports.
pub fn swarm_status(s: &ws_common::ctrl::cmd::SwarmStatusData) -> String {
    let dtype = match s.dtype {
        0 => "fp32",
        1 => "bf16 in, fp32 sums",
        2 => "bf16 in and out",
        _ => "?",
    };
    let scale = if s.scale_en { format!("× {}", f32::from_bits(s.scale)) } else { "off".into() };
    let mut out = fields(&[
        (
            "node",
            format!(
                "{} ports, {} adder levels{}{}",
                s.ports,
                s.levels,
                if s.bf16 { ", bf16 built" } else { "" },
                if s.scale_built { ", scale built" } else { "" }
            ),
        ),
        ("format", dtype.into()),
        ("scale", scale),
        ("timeout", if s.timeout == 0 { "never".into() } else { format!("{} cycles", s.timeout) }),
        (
            "masks",
            format!(
                "host {:#06x}, written {:#06x}, in effect up {:#06x} / down {:#06x}",
                s.host_mask, s.port_mask, s.up_mask, s.dn_mask
            ),
        ),
        (
            "flits",
            format!(
                "{} broadcast, {} reduced, {} dropped; {} chunks aborted",
                s.bcast, s.reduced, s.dropped, s.errors
            ),
        ),
        ("reduce latency", format!("last {} cycles, max {}", s.lat_last, s.lat_max)),
        ("events lost", s.events_lost.to_string()),
    ]);
    out.push_str(&format!(
        "\n{:>4}  {:<17} {:>7}  {:>12} {:>12} {:>12} {:>12}\n",
        "port", "state", "strikes", "up flits", "down flits", "up wait", "down stall"
    ));
    for (i, p) in s.port[..usize::from(s.ports)].iter().enumerate() {
        let state = match p.state {
            0 => "off",
            1 => "active",
            2 => "masked: timeout",
            3 => "masked: mismatch",
            _ => "?",
        };
        out.push_str(&format!(
            "{i:>4}  {state:<17} {:>7}  {:>12} {:>12} {:>12} {:>12}\n",
            p.strikes, p.up_flits, p.dn_flits, p.up_wait, p.dn_stall
        ));
    }
    out
}

/// `wsctl swarm events`: one line per policy event.
pub fn swarm_events(list: &ws_common::ctrl::cmd::SwarmEventList) -> String {
    let mut out = String::new();
    for e in &list.events[..usize::from(list.count)] {
        let code = match ws_common::flit::ErrorCode::from_code(e.code) {
            Some(ws_common::flit::ErrorCode::Timeout) => "timeout",
            Some(ws_common::flit::ErrorCode::Mismatch) => "mismatch",
            Some(ws_common::flit::ErrorCode::Kind) => "wrong kind",
            None => "",
        };
        let what = match e.kind {
            1 => format!("chunk aborted ({code}), port {} blamed", e.port),
            2 => format!("port {} masked after {code}", e.port),
            3 => format!(
                "port {} is the last active one: kept (the step cannot finish; check the wafers)",
                e.port
            ),
            4 => "host set the port mask".into(),
            _ => format!("event kind {}", e.kind),
        };
        out.push_str(&format!(
            "#{:<5} layer {:>4} step {:>5} chunk {:>5}  {what}; ports now {:#06x}\n",
            e.seq, e.layer, e.step, e.chunk, e.mask
        ));
    }
    if out.is_empty() {
        out.push_str("no events\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimState;
    use crate::transport::FakeBoard;
    use ws_common::ctrl::cmd::BlockInfo;

    fn identity() -> IdentityInfo {
        FakeBoard::new().identity()
    }

    #[test]
    fn identity_with_matching_blocks() {
        let info = identity();
        assert!(block_rows(&info).iter().all(|r| r.status == BlockStatus::Ok));
        let sim = SimStats { sim_hz: 1_430_000.0, idle: true, ..SimStats::default() };
        insta::assert_snapshot!("identity", identity_report(&info, Some(&sim)));
    }

    #[test]
    fn identity_with_a_mismatch_an_unknown_and_a_missing_block() {
        let mut info = identity();
        info.blocks[1].major += 1; // timer
        info.blocks[3] = BlockInfo { slot: 9, id: 0x4242, major: 3, minor: 1 }; // replaces gpio
        info.tick_hz = 0;
        info.poke = Window::default();
        let rows = block_rows(&info);
        let status = |name: &str| rows.iter().find(|r| r.name == name).map(|r| r.status);
        assert_eq!(status("timer"), Some(BlockStatus::Mismatch));
        assert_eq!(status("?"), Some(BlockStatus::Unknown));
        assert_eq!(status("gpio"), Some(BlockStatus::Missing));
        insta::assert_snapshot!("identity_mismatch", identity_report(&info, None));
    }

    #[test]
    fn stats() {
        let s = StatsInfo {
            mcycle: 75_000_000,
            mtime: 74_999_000,
            timer_ticks: 1499,
            tick_period: 50_000,
            frames_ok: 12,
            frames_bad: 1,
            refused: 2,
        };
        insta::assert_snapshot!("stats", stats_report(&s, Some(50_000_000)));
        assert!(!stats_report(&s, None).contains("board time"));
    }

    #[test]
    fn sim_status() {
        let state = SimState {
            pid: 4242,
            link: "127.0.0.1:7450".parse().unwrap(),
            log: "127.0.0.1:7451".parse().unwrap(),
            ctrl: "127.0.0.1:7452".parse().unwrap(),
            phy: None,
            elf: "/ws/target/riscv32imc-unknown-none-elf/release/ws-firmware".into(),
            board: "/ws/boards/sim/board.toml".into(),
            started: 0,
            sim_log: "/ws/target/ws-sim/sim.log".into(),
            bin: "/ws/target/release/ws-sim".into(),
            args: vec![],
        };
        let stats = SimStats {
            cycle: 100_000_000,
            sim_hz: 1_400_000.0,
            clock_hz: 50_000_000,
            uptime_s: 71.4,
            link_rx_bytes: 120,
            link_tx_bytes: 300,
            log_bytes: 2048,
            log_clients: 1,
            core_sleep: true,
            idle: true,
            gpio_out: 1,
            ..SimStats::default()
        };
        let s = SimStatus { state: state.clone(), stats: Ok(stats) };
        insta::assert_snapshot!("sim_status", sim_status_report(&s));
        let s = SimStatus { state, stats: Err("connection refused".into()) };
        assert!(sim_status_report(&s).contains("unavailable: connection refused"));
    }

    #[test]
    fn hexdump_and_sizes() {
        let bytes: Vec<u8> = (0..20u8).map(|b| b.wrapping_mul(13).wrapping_add(b'A' - 10)).collect();
        insta::assert_snapshot!("hexdump", hexdump(0x1003_f000, &bytes));
        assert_eq!(size(256 * 1024), "256 KiB");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(1 << 30), "1 GiB");
        assert_eq!(size(12), "12 B");
        assert_eq!(hz(50e6), "50 MHz");
        assert_eq!(hz(1.434e6), "1.43 MHz");
        assert_eq!(hz(200_000.0), "200.0 kHz");
        assert_eq!(hz(1000.0), "1000 Hz");
    }

    #[test]
    fn ping_summaries() {
        let r = [Duration::from_micros(400), Duration::from_micros(600)];
        assert_eq!(ping_summary(&r, 3), "3 pings, 2 answered: min/avg/max = 0.400/0.500/0.600 ms");
        assert_eq!(ping_summary(&[], 2), "2 pings, none answered");
        assert_eq!(ms(Duration::from_micros(1500)), "1.500 ms");
    }

    #[test]
    fn tables_align() {
        let mut t = Table::new(["a", "long header", "c"]);
        t.row(["wide cell", "x", ""]);
        assert_eq!(t.render(), "a          long header  c\nwide cell  x\n");
    }

    #[test]
    fn swarm_status_table() {
        use ws_common::ctrl::cmd::{SwarmPort, SwarmStatusData};
        let mut s = SwarmStatusData {
            ports: 4,
            levels: 2,
            bf16: true,
            scale_built: true,
            scale_en: true,
            dtype: 0,
            host_mask: 0xf,
            port_mask: 0xb,
            up_mask: 0xb,
            dn_mask: 0xb,
            scale: (1.0f32 / 3.0).to_bits(),
            timeout: 800,
            bcast: 12,
            reduced: 10,
            errors: 1,
            ..Default::default()
        };
        for (i, p) in s.port[..4].iter_mut().enumerate() {
            *p = SwarmPort {
                state: if i == 2 { 2 } else { 1 },
                up_flits: 10 + i as u32,
                ..Default::default()
            };
        }
        let t = swarm_status(&s);
        eprintln!("{t}");
        assert!(t.contains("masked: timeout"), "{t}");
        assert!(t.contains("4 ports, 2 adder levels"), "{t}");
        assert!(t.contains("× 0.33333334"), "{t}");
        assert_eq!(t.lines().filter(|l| l.contains("active")).count(), 3, "{t}");
    }
}
