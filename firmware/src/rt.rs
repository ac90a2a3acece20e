//! CV32E40P-specific trap plumbing on top of riscv-rt.
//!
//! - **Interrupt lines.** CV32E40P in CLINT mode raises mcause 7 (machine timer) and the
//!   platform's fast interrupts 16..=31 (CV32E40P user manual, "Interrupts"). riscv-rt only
//!   knows the standard lines, so the firmware enables riscv-rt's `custom-interrupts` feature
//!   and declares [`Irq`] instead; riscv-rt's direct-mode trap entry then dispatches mcause 7,
//!   16 and 17 to the handlers named after the variants (`MachineTimer`, `UartRx`,
//!   `HostlinkRx`, defined in `main.rs`), and anything else to `DefaultHandler`.
//! - **Trap vector alignment.** CV32E40P keeps only `mtvec[31:8]`
//!   (`cv32e40p_cs_registers.sv`: `mtvec_n = csr_wdata_int[31:8]`), so the trap entry must be
//!   256-byte aligned or every trap would land at the start of RAM, i.e. at `_start`.
//!   riscv-rt aligns its `_default_start_trap` to 4 only; `_start_trap` below is a
//!   256-byte-aligned jump to it (likewise `_pre_init_trap`), and `memory.x` asserts the
//!   alignment at link time.
//! - **Cycle counter.** CV32E40P resets with `mcountinhibit` set (counters off to save
//!   power); [`enable_counters`] turns `mcycle`/`minstret` on.

use core::sync::atomic::{compiler_fence, Ordering};

use riscv::register::{mcountinhibit, mcycle};
use ws_common::regmap::irq;

use crate::hal::hostlink::Hostlink;
use crate::hal::link::LinkEngine;

/// The interrupt lines of the weightstream SoC (docs/soc.md), as core interrupts.
#[riscv::pac_enum(unsafe CoreInterruptNumber)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Irq {
    /// Machine timer: `mtime >= mtimecmp`.
    MachineTimer = 7,
    /// UART receive FIFO not empty.
    UartRx = 16,
    /// Host-link receive FIFO not empty.
    HostlinkRx = 17,
    /// Link engine: a firmware frame waits.
    LinkRx = 18,
    /// SwarmX: a chunk was aborted (ERR.pending with CTRL.irq_err).
    Swarm = 19,
}

// The enum above must spell the same numbers as the generated register map.
const _: () = assert!(
    Irq::MachineTimer as u32 == irq::TIMER
        && Irq::UartRx as u32 == irq::UART_RX
        && Irq::HostlinkRx as u32 == irq::HOSTLINK_RX
        && Irq::LinkRx as u32 == irq::LINK_RX
        && Irq::Swarm as u32 == irq::SWARM
);

// The trap entries riscv-rt writes to mtvec, 256-byte aligned for CV32E40P. `_pre_init_trap`
// is in force until `_setup_interrupts` runs: a trap there is a start-up bug, and it spins
// (riscv-rt's default `_default_abort`, which would otherwise be truncated onto whatever
// starts its 256-byte block).
core::arch::global_asm!(
    r#"
    .section .trap.start.ws_align, "ax"
    .balign 256
    .global _pre_init_trap
_pre_init_trap:
    j _pre_init_trap
    .balign 256
    .global _start_trap
_start_trap:
    j _default_start_trap
"#
);

/// Starts the `mcycle` and `minstret` counters, which CV32E40P resets inhibited.
pub fn enable_counters() {
    // SAFETY: only clears inhibit bits of counters nothing else relies on being stopped.
    unsafe {
        mcountinhibit::clear_cy();
        mcountinhibit::clear_ir();
    }
}

/// The core's cycle counter.
pub fn mcycle() -> u64 {
    mcycle::read64()
}

/// Enables interrupt line `irq` in `mie`.
pub fn enable(irq: Irq) {
    // SAFETY: the handlers of every line exist (main.rs); enabling a line cannot break a
    // critical section because `mstatus.MIE` is what critical sections clear.
    unsafe { riscv::interrupt::enable_interrupt(irq) }
}

/// Disables interrupt line `irq` in `mie`.
pub fn disable(irq: Irq) {
    riscv::interrupt::disable_interrupt(irq);
}

/// Sleeps (WFI) until the host sends a byte or another enabled interrupt (the timer tick)
/// fires, unless a byte is already waiting.
///
/// The check and the WFI happen with `mstatus.MIE` clear, so a byte arriving in between
/// still wakes the core: WFI wakes on any interrupt pending in `mie`, whatever `MIE` says
/// (RISC-V privileged spec §3.3.3; CV32E40P `irq_wu_ctrl = |(irq_i & mie)`). The host-link
/// line is enabled in `mie` only around the WFI, so it never traps; the timer interrupt that
/// woke us is taken when `MIE` is restored. The simulator sees `core_sleep` and can throttle.
///
/// The link engine's line (18) works the same way: its frames wake the core too.
pub fn wait_for_host(hostlink: &Hostlink, link: &LinkEngine) {
    riscv::interrupt::free(|| {
        if hostlink.rx_level() == 0 && link.rx_level() == 0 {
            enable(Irq::HostlinkRx);
            enable(Irq::LinkRx);
            // A latched SwarmX abort holds its line high: WFI returns at once and the main
            // loop's poll acts on it. A SoC without SwarmX keeps the line low.
            enable(Irq::Swarm);
            compiler_fence(Ordering::SeqCst);
            riscv::asm::wfi();
            compiler_fence(Ordering::SeqCst);
            disable(Irq::HostlinkRx);
            disable(Irq::LinkRx);
            disable(Irq::Swarm);
        }
    });
}
