//! `ws-sim` options: the command line, also built programmatically by [`super::SimProcess`].

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use ws_common::link::fault::{rule_text, Rule};

fn parse_fault(s: &str) -> Result<Rule, String> {
    Rule::parse(s)
}

/// A built-in hand-assembled RAM program ([`super::programs`]), instead of a firmware ELF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Demo {
    /// Banner on UART and link, then echoes every host-link byte back plus one.
    Echo,
    /// Sets the GPIOs to 0x5a and sleeps in WFI for good.
    Sleep,
    /// `j .` forever.
    Spin,
}

/// Options of `ws-sim`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "ws-sim",
    version,
    about = "The Verilated weightstream SoC, served on loopback TCP ports",
    long_about = "The Verilated weightstream SoC (docs/soc.md), served on 127.0.0.1:\n  \
        link = port base      raw host-link byte stream (one client at a time; a new client replaces the old)\n  \
        log  = port base + 1  UART log: the history since boot, then live bytes, to every client\n  \
        ctrl = port base + 2  JSON lines: stats | reset | pause | resume | quit | fault [RULES|clear|stats]\n  \
        jtag = port base + 3  JTAG server: XVC 1.0 or OpenOCD remote_bitbang, one client at a time (docs/jtag.md)\n  \
        phy  = port base + 4  the link engine's PHY: link protocol v2 bytes (docs/link.md), through the fault injector\n\
        Once listening it prints one line to stdout:\n  \
        WS-SIM READY link=127.0.0.1:P log=127.0.0.1:P ctrl=127.0.0.1:P phy=127.0.0.1:P pid=N"
)]
pub struct SimOptions {
    /// Firmware ELF: its PT_LOAD segments are written into RAM by backdoor before reset.
    #[arg(long, value_name = "FILE", required_unless_present_any = ["demo", "build_only", "loader"])]
    pub elf: Option<PathBuf>,

    /// Run a built-in RAM program instead of an ELF.
    #[arg(long, value_enum, conflicts_with = "elf")]
    pub demo: Option<Demo>,

    /// Load nothing: the boot ROM finds no valid image in RAM and waits for one on the host
    /// link (`wsctl flash --via link`).
    #[arg(long, conflicts_with_all = ["elf", "demo"])]
    pub loader: bool,

    /// Board description (clock, UART baud, RAM region, default port base).
    #[arg(long, value_name = "FILE", default_value = "boards/sim/board.toml")]
    pub board: PathBuf,

    /// First of the five TCP ports; 0 binds each of the five on an ephemeral port. Default: the
    /// board's `link.port_base`.
    #[arg(long, value_name = "PORT")]
    pub port_base: Option<u16>,

    /// Verilator threads of the model (each count is its own cached build).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub threads: u32,

    /// Wafer meshes on SwarmX, 1..=4 (the SoC's WAFERS build parameter; each count is its own
    /// cached build; docs/mesh-array.md "Several wafers").
    #[arg(long, value_name = "W", default_value_t = crate::vbuild::soc::DEFAULT_WAFERS,
          value_parser = clap::value_parser!(u32).range(1..=crate::vbuild::soc::MAX_WAFERS as i64))]
    pub wafers: u32,

    /// Dump FST waves into this file (uses a separately cached model with trace support).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,

    /// First cycle to dump.
    #[arg(long, value_name = "CYCLE", requires = "trace")]
    pub trace_from: Option<u64>,

    /// Cycle to stop dumping at (exclusive).
    #[arg(long, value_name = "CYCLE", requires = "trace")]
    pub trace_to: Option<u64>,

    /// Exit after this many cycles.
    #[arg(long, value_name = "N")]
    pub max_cycles: Option<u64>,

    /// Print nothing on stderr but errors.
    #[arg(long)]
    pub quiet: bool,

    /// Exit when this process disappears (launchers pass their own pid).
    #[arg(long, value_name = "PID")]
    pub parent_pid: Option<u32>,

    /// While the core sleeps in WFI with no host byte waiting, simulate at most this many
    /// cycles per wall second, so an idle board does not spin a host core.
    #[arg(long, value_name = "HZ", default_value_t = DEFAULT_IDLE_HZ, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_hz: u64,

    /// Fault injection on the link port (repeatable): `DIR:KIND:WHEN[:ch=LIST][:delay=CYCLES]`,
    /// e.g. `both:flip:rate=0.01`, `h2b:drop:every=100:ch=2,3`, `b2h:delay:rate=0.001:delay=50000`
    /// (docs/link.md "Fault injection"). Needs link protocol v2 on both ends.
    #[arg(long, value_name = "RULE", value_parser = parse_fault)]
    pub fault: Vec<Rule>,

    /// Seed of the fault injector's random choices.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub fault_seed: u64,

    /// Build (or find in the cache) the model for these options and exit; needs no ELF.
    #[arg(long, conflicts_with_all = ["elf", "demo"])]
    pub build_only: bool,
}

/// Default of `--idle-hz`.
pub const DEFAULT_IDLE_HZ: u64 = 200_000;

impl SimOptions {
    /// Options for `elf` on ephemeral ports.
    pub fn with_elf(elf: impl Into<PathBuf>) -> Self {
        Self::base(Some(elf.into()), None)
    }

    /// Options for a built-in program on ephemeral ports.
    pub fn with_demo(demo: Demo) -> Self {
        Self::base(None, Some(demo))
    }

    fn base(elf: Option<PathBuf>, demo: Option<Demo>) -> Self {
        SimOptions {
            elf,
            demo,
            loader: false,
            board: PathBuf::from("boards/sim/board.toml"),
            port_base: Some(0),
            threads: 1,
            wafers: crate::vbuild::soc::DEFAULT_WAFERS,
            trace: None,
            trace_from: None,
            trace_to: None,
            max_cycles: None,
            quiet: false,
            parent_pid: None,
            idle_hz: DEFAULT_IDLE_HZ,
            fault: Vec::new(),
            fault_seed: 1,
            build_only: false,
        }
    }

    /// The command-line arguments that express these options.
    pub fn to_args(&self) -> Vec<String> {
        let mut a = Vec::new();
        let mut push = |k: &str, v: String| {
            a.push(k.to_string());
            a.push(v);
        };
        if let Some(e) = &self.elf {
            push("--elf", e.display().to_string());
        }
        if let Some(d) = self.demo {
            let name = d.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default();
            push("--demo", name);
        }
        push("--board", self.board.display().to_string());
        if let Some(p) = self.port_base {
            push("--port-base", p.to_string());
        }
        push("--threads", self.threads.to_string());
        push("--wafers", self.wafers.to_string());
        if let Some(t) = &self.trace {
            push("--trace", t.display().to_string());
        }
        if let Some(c) = self.trace_from {
            push("--trace-from", c.to_string());
        }
        if let Some(c) = self.trace_to {
            push("--trace-to", c.to_string());
        }
        if let Some(c) = self.max_cycles {
            push("--max-cycles", c.to_string());
        }
        if let Some(p) = self.parent_pid {
            push("--parent-pid", p.to_string());
        }
        push("--idle-hz", self.idle_hz.to_string());
        for r in &self.fault {
            a.push("--fault".into());
            a.push(rule_text(r));
        }
        if self.fault_seed != 1 {
            a.push("--fault-seed".into());
            a.push(self.fault_seed.to_string());
        }
        if self.loader {
            a.push("--loader".into());
        }
        if self.quiet {
            a.push("--quiet".into());
        }
        if self.build_only {
            a.push("--build-only".into());
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_round_trip() {
        let mut o = SimOptions::with_demo(Demo::Echo);
        o.trace = Some("w.fst".into());
        o.trace_from = Some(10);
        o.max_cycles = Some(99);
        o.quiet = true;
        o.idle_hz = 1234;
        o.fault = vec![Rule::parse("h2b:drop:every=3:ch=2").unwrap()];
        o.fault_seed = 9;
        let mut argv = vec!["ws-sim".to_string()];
        argv.extend(o.to_args());
        let p = SimOptions::try_parse_from(argv).unwrap();
        assert_eq!(p.demo, Some(Demo::Echo));
        assert_eq!(p.port_base, Some(0));
        assert_eq!(p.trace_from, Some(10));
        assert_eq!(p.max_cycles, Some(99));
        assert!(p.quiet);
        assert_eq!(p.idle_hz, 1234);
        assert!(!p.build_only);
        assert_eq!(p.fault, o.fault);
        assert_eq!(p.fault_seed, 9);
        assert!(
            SimOptions::try_parse_from(["ws-sim", "--demo", "spin", "--fault", "h2b:melt:rate=1"]).is_err()
        );
    }

    #[test]
    fn idle_hz_defaults_and_build_only_needs_no_program() {
        let p = SimOptions::try_parse_from(["ws-sim", "--demo", "sleep"]).unwrap();
        assert_eq!(p.idle_hz, DEFAULT_IDLE_HZ);
        assert!(SimOptions::try_parse_from(["ws-sim", "--demo", "sleep", "--idle-hz", "0"]).is_err());
        let p = SimOptions::try_parse_from(["ws-sim", "--build-only", "--threads", "2"]).unwrap();
        assert!(p.build_only);
        assert_eq!(p.threads, 2);
        assert!(SimOptions::try_parse_from(["ws-sim", "--build-only", "--demo", "spin"]).is_err());
    }

    #[test]
    fn needs_an_elf_or_a_demo() {
        assert!(SimOptions::try_parse_from(["ws-sim"]).is_err());
        assert!(SimOptions::try_parse_from(["ws-sim", "--elf", "a", "--demo", "spin"]).is_err());
    }
}
