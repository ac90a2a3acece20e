//! [`Debugger`]: a probe-rs session on the board's one RISC-V hart, with one method per
//! debug step. Every method names its step in its error and waits at most a stated time.

use std::time::Duration;

use probe_rs::probe::list::Lister;
use probe_rs::probe::{DebugProbeSelector, Probe, WireProtocol};
use probe_rs::{CoreStatus, HaltReason, MemoryInterface, Permissions, RegisterId, Session};

use super::{error_chain, ProbeSpec, SimProbe, TargetDescription};
use crate::error::{JtagError, Result};

/// How long a halt (and a reset-and-halt) may take. The core answers a halt request within a
/// few hundred cycles (RISC-V Debug 0.13.2 §3.5: the hart enters Debug Mode at the next
/// instruction boundary); 2 s of wall time covers a loaded simulator by far.
pub const HALT_TIMEOUT: Duration = Duration::from_secs(2);

/// The debug CSRs and machine CSRs `wsctl regs` shows, by number (RISC-V Debug 0.13.2 §4.8,
/// privileged spec §2.2). probe-rs reads them with the abstract command "access register"
/// (§3.6.1.1), whose `regno` for a CSR is the CSR number; GPRs are `0x1000 + n`.
const DPC: u16 = 0x7b1;
const DCSR: u16 = 0x7b0;
const MCAUSE: u16 = 0x342;
const MEPC: u16 = 0x341;
const MSTATUS: u16 = 0x300;

/// What the hart is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreState {
    /// Executing.
    Running,
    /// In Debug Mode; the reason as probe-rs reads it from `dcsr.cause` (§4.8.1).
    Halted(String),
    /// Asleep (WFI).
    Sleeping,
    /// Anything else probe-rs reports.
    Other(String),
}

impl CoreState {
    fn from_status(s: CoreStatus) -> Self {
        match s {
            CoreStatus::Running => CoreState::Running,
            CoreStatus::Halted(r) => CoreState::Halted(halt_reason(r)),
            CoreStatus::Sleeping => CoreState::Sleeping,
            other => CoreState::Other(format!("{other:?}")),
        }
    }

    /// Whether the hart is in Debug Mode.
    pub fn is_halted(&self) -> bool {
        matches!(self, CoreState::Halted(_))
    }
}

impl std::fmt::Display for CoreState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CoreState::Running => f.write_str("running"),
            CoreState::Halted(why) => write!(f, "halted ({why})"),
            CoreState::Sleeping => f.write_str("sleeping (WFI)"),
            CoreState::Other(s) => f.write_str(s),
        }
    }
}

fn halt_reason(r: HaltReason) -> String {
    match r {
        HaltReason::Request => "debugger request".into(),
        HaltReason::Step => "single step".into(),
        HaltReason::Breakpoint(c) => format!("breakpoint, {c:?}"),
        other => format!("{other:?}"),
    }
}

/// The registers `wsctl regs` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registers {
    /// x0..x31.
    pub gpr: [u32; 32],
    /// The PC the hart resumes at (`dpc`).
    pub pc: u32,
    /// `dcsr`.
    pub dcsr: u32,
    /// `mstatus`.
    pub mstatus: u32,
    /// `mcause`.
    pub mcause: u32,
    /// `mepc`.
    pub mepc: u32,
    /// The hart was running and was halted to read them (and resumed afterwards).
    pub was_running: bool,
}

/// ABI names of x0..x31 (RISC-V psABI).
const ABI_NAMES: [&str; 32] = [
    "zero", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "s0", "s1", "a0", "a1", "a2", "a3", "a4", "a5", "a6",
    "a7", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "t3", "t4", "t5", "t6",
];

/// The `dcsr.cause` values (RISC-V Debug 0.13.2 §4.8.1, Table 4.2).
fn dcsr_cause(dcsr: u32) -> &'static str {
    match (dcsr >> 6) & 7 {
        1 => "ebreak",
        2 => "trigger",
        3 => "haltreq",
        4 => "step",
        5 => "resethaltreq",
        _ => "none",
    }
}

impl std::fmt::Display for Registers {
    /// The table `wsctl regs` prints: four GPRs per line, then pc and the CSRs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for row in 0..8 {
            for col in 0..4 {
                let n = row * 4 + col;
                let name = format!("x{n}/{}", ABI_NAMES[n]);
                write!(f, "{name:>8} {:#010x}{}", self.gpr[n], if col == 3 { "\n" } else { "  " })?;
            }
        }
        writeln!(f, "{:>8} {:#010x}  (dpc)", "pc", self.pc)?;
        writeln!(f, "{:>8} {:#010x}  (cause: {})", "dcsr", self.dcsr, dcsr_cause(self.dcsr))?;
        writeln!(f, "{:>8} {:#010x}", "mstatus", self.mstatus)?;
        writeln!(f, "{:>8} {:#010x}  ({})", "mcause", self.mcause, mcause_text(self.mcause))?;
        writeln!(f, "{:>8} {:#010x}", "mepc", self.mepc)?;
        if self.was_running {
            writeln!(f, "(the core was running: halted for this read and resumed)")?;
        }
        Ok(())
    }
}

/// `mcause` in words (privileged spec §3.1.15; CV32E40P's interrupt lines, docs/soc.md).
fn mcause_text(mcause: u32) -> String {
    let code = mcause & 0x7fff_ffff;
    if mcause >> 31 == 1 {
        return match code {
            7 => "interrupt: machine timer".into(),
            16 => "interrupt: UART rx".into(),
            17 => "interrupt: host-link rx".into(),
            n => format!("interrupt {n}"),
        };
    }
    match code {
        0 => "instruction address misaligned",
        1 => "instruction access fault",
        2 => "illegal instruction",
        3 => "breakpoint",
        4 => "load address misaligned",
        5 => "load access fault",
        6 => "store address misaligned",
        7 => "store access fault",
        11 => "ecall from M-mode",
        _ => "exception",
    }
    .to_string()
}

/// An attached debug session.
pub struct Debugger {
    session: Session,
    probe: String,
    target: TargetDescription,
}

impl std::fmt::Debug for Debugger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Debugger").field("probe", &self.probe).field("chip", &self.target.chip).finish()
    }
}

/// A step's failure, with a hint chosen from what probe-rs reported.
pub(crate) fn step_error(step: impl Into<String>, e: probe_rs::Error) -> crate::Error {
    let reason = error_chain(&e);
    let hint = match &e {
        probe_rs::Error::Probe(probe_rs::probe::DebugProbeError::ProbeSpecific(_)) => {
            "the probe connection is gone: reconnect once the simulator (or probe) is back"
        }
        probe_rs::Error::Timeout | probe_rs::Error::Riscv(_) => {
            "the debug module or the hart did not answer in time: a paused simulator answers no DMI access (`wsctl sim status`); otherwise run `wsctl reset --via jtag`, then retry"
        }
        _ => "retry; if it persists, reset the board (`wsctl reset --via jtag`)",
    };
    JtagError::Step { step: step.into(), reason, hint }.into()
}

impl Debugger {
    /// Opens the probe and attaches probe-rs to the board's hart with `target`. Attaching
    /// leaves the hart as it was (running or halted).
    pub fn attach(spec: &ProbeSpec, target: TargetDescription) -> Result<Debugger> {
        let probe = match spec {
            ProbeSpec::Sim { addr, wire } => {
                Probe::from_specific_probe(Box::new(SimProbe::connect(*addr, *wire)?))
            }
            ProbeSpec::Usb { selector, speed_khz } => {
                let bad = |reason: String| JtagError::Probe { selector: selector.clone(), reason };
                let sel: DebugProbeSelector = selector.parse().map_err(|e| bad(error_chain(&e)))?;
                let mut p = Lister::new().open(sel).map_err(|e| bad(error_chain(&e)))?;
                p.select_protocol(WireProtocol::Jtag).map_err(|e| bad(error_chain(&e)))?;
                if let Some(khz) = speed_khz {
                    p.set_speed(*khz).map_err(|e| bad(error_chain(&e)))?;
                }
                p
            }
        };
        let registry = target.registry();
        let session = probe
            .attach_with_registry(target.chip.as_str(), Permissions::default(), &registry)
            .map_err(|e| step_error(format!("attaching to the debug module through {spec}"), e))?;
        Ok(Debugger { session, probe: spec.to_string(), target })
    }

    /// The probe, for messages.
    pub fn probe(&self) -> &str {
        &self.probe
    }

    /// The target description attached with.
    pub fn target(&self) -> &TargetDescription {
        &self.target
    }

    fn core(&mut self, step: &str) -> Result<probe_rs::Core<'_>> {
        self.session.core(0).map_err(|e| step_error(step, e))
    }

    /// What the hart is doing.
    pub fn state(&mut self) -> Result<CoreState> {
        let step = "reading the hart's state (dmstatus)";
        let s = self.core(step)?.status().map_err(|e| step_error(step, e))?;
        Ok(CoreState::from_status(s))
    }

    /// Halts the hart (a no-op when halted); returns the PC it stopped at.
    pub fn halt(&mut self) -> Result<u32> {
        let step = "halting the hart";
        let info = self.core(step)?.halt(HALT_TIMEOUT).map_err(|e| timeout_or(step, "halt", e))?;
        Ok(info.pc as u32)
    }

    /// Resumes a halted hart (a no-op when it runs).
    pub fn resume(&mut self) -> Result<()> {
        let step = "resuming the hart";
        let mut core = self.core(step)?;
        if core.core_halted().map_err(|e| step_error(step, e))? {
            core.run().map_err(|e| step_error(step, e))?;
        }
        Ok(())
    }

    /// Resets the SoC through the debug module (`dmcontrol.ndmreset` with `haltreq` held,
    /// §3.2: RAM is kept) and leaves the hart halted at the reset vector; returns that PC.
    pub fn reset_and_halt(&mut self) -> Result<u32> {
        let step = "resetting the SoC and halting at the reset vector (ndmreset)";
        let info = self.core(step)?.reset_and_halt(HALT_TIMEOUT).map_err(|e| timeout_or(step, "halt", e))?;
        Ok(info.pc as u32)
    }

    /// Resets the SoC through the debug module and lets it run.
    pub fn reset(&mut self) -> Result<()> {
        self.reset_and_halt()?;
        let step = "running after the reset";
        self.core(step)?.run().map_err(|e| step_error(step, e))
    }

    /// Sets the PC the halted hart resumes at (`dpc`).
    pub fn set_pc(&mut self, pc: u32) -> Result<()> {
        let step = format!("setting the PC to {pc:#010x} (dpc)");
        self.core(&step)?.write_core_reg(RegisterId(DPC), pc).map_err(|e| step_error(&step, e))
    }

    /// The GPRs, PC and the CSRs `wsctl regs` shows. A running hart is halted for the read
    /// and resumed afterwards.
    pub fn registers(&mut self) -> Result<Registers> {
        let was_running = !self.state()?.is_halted();
        if was_running {
            self.halt()?;
        }
        let read = |core: &mut probe_rs::Core<'_>, id: u16, what: &str| -> Result<u32> {
            core.read_core_reg::<u32>(RegisterId(id))
                .map_err(|e| step_error(format!("reading {what} (abstract command, regno {id:#06x})"), e))
        };
        let mut core = self.core("reading registers")?;
        let mut gpr = [0u32; 32];
        for (n, r) in gpr.iter_mut().enumerate().skip(1) {
            *r = read(&mut core, 0x1000 + n as u16, &format!("x{n}"))?;
        }
        let regs = Registers {
            gpr,
            pc: read(&mut core, DPC, "dpc")?,
            dcsr: read(&mut core, DCSR, "dcsr")?,
            mstatus: read(&mut core, MSTATUS, "mstatus")?,
            mcause: read(&mut core, MCAUSE, "mcause")?,
            mepc: read(&mut core, MEPC, "mepc")?,
            was_running,
        };
        drop(core);
        if was_running {
            self.resume()?;
        }
        Ok(regs)
    }

    /// Reads `len` bytes at `addr` (system-bus access where the DM has it, §3.10; probe-rs
    /// falls back to the program buffer). Works while the hart runs.
    pub fn read(&mut self, addr: u64, len: usize) -> Result<Vec<u8>> {
        let step = format!("reading {len} bytes at {addr:#010x}");
        let mut buf = vec![0u8; len];
        self.core(&step)?.read(addr, &mut buf).map_err(|e| step_error(&step, e))?;
        Ok(buf)
    }

    /// Writes `data` at `addr`.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        let step = format!("writing {} bytes at {addr:#010x}", data.len());
        let mut core = self.core(&step)?;
        core.write(addr, data).map_err(|e| step_error(&step, e))?;
        core.flush().map_err(|e| step_error(&step, e))
    }

    /// The 32-bit word at `addr` (aligned).
    pub fn read_u32(&mut self, addr: u64) -> Result<u32> {
        let step = format!("reading the word at {addr:#010x}");
        self.core(&step)?.read_word_32(addr).map_err(|e| step_error(&step, e))
    }
}

fn timeout_or(step: &str, what: &'static str, e: probe_rs::Error) -> crate::Error {
    let timed_out = matches!(
        e,
        probe_rs::Error::Timeout
            | probe_rs::Error::Riscv(
                probe_rs::architecture::riscv::communication_interface::RiscvError::Timeout
                    | probe_rs::architecture::riscv::communication_interface::RiscvError::RequestNotAcknowledged
            )
    );
    if timed_out {
        JtagError::Timeout { step: step.into(), what, waited: HALT_TIMEOUT }.into()
    } else {
        step_error(step, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_print_as_a_table_with_causes_in_words() {
        let mut gpr = [0u32; 32];
        gpr[2] = 0x1003_f000;
        let r = Registers {
            gpr,
            pc: 0x1000_0042,
            dcsr: 0x4000_00c3,
            mstatus: 0x1880,
            mcause: 0x8000_0007,
            mepc: 0x1000_0100,
            was_running: true,
        };
        let text = r.to_string();
        assert!(text.contains("x2/sp 0x1003f000"), "{text}");
        assert!(text.contains("pc 0x10000042"), "{text}");
        assert!(text.contains("cause: haltreq"), "{text}");
        assert!(text.contains("machine timer"), "{text}");
        assert!(text.contains("resumed"), "{text}");
        assert_eq!(text.lines().count(), 8 + 5 + 1);
    }
}
