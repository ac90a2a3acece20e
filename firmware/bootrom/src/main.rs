//! The boot ROM binary: sets up a stack, decides (`loader::decide`), and either jumps to the
//! checked image or serves the loader on the host link until an image checks out.
//!
//! No runtime crate: the ROM has no `.data`/`.bss` (bootrom.x asserts it), no interrupts and
//! no traps beyond the core's reset state, so a few instructions of start-up are all it needs.
#![no_std]
#![no_main]

use core::panic::PanicInfo;
use core::ptr::{read_volatile, write_volatile};

use ws_bootrom::loader::{decide, Action, Decision, Loader, Ram};
use ws_common::boot::{LOADER_FAULT_LEDS, LOADER_LEDS};
use ws_common::regmap::{gpio, hostlink};

// Start-up: the stack below the scratch window (bootrom.x), then Rust. `gp` is unused (the
// ROM has no small data). Nothing returns here.
core::arch::global_asm!(
    ".section .text.start, \"ax\"",
    ".global _start",
    "_start:",
    "    la sp, _stack_top",
    "    j {main}",
    main = sym rom_main,
);

/// RAM through plain volatile word accesses.
struct BusRam;

impl Ram for BusRam {
    unsafe fn read_word(&mut self, addr: u32) -> u32 {
        // SAFETY: the caller passes an aligned RAM address (Ram's contract).
        unsafe { read_volatile(addr as *const u32) }
    }
    unsafe fn write_word(&mut self, addr: u32, value: u32) {
        // SAFETY: as above; the loader never writes its own stack (IMAGE_WINDOW excludes it).
        unsafe { write_volatile(addr as *mut u32, value) }
    }
}

fn reg(block: u32, offset: u32) -> *mut u32 {
    (block + offset) as *mut u32
}

fn set_leds(v: u8) {
    // SAFETY: GPIO.OUTPUT is a writable register of the SoC map.
    unsafe { write_volatile(reg(gpio::BASE, gpio::OUTPUT), u32::from(v)) };
}

fn send(bytes: &[u8]) {
    for &b in bytes {
        // SAFETY: STATUS and TXDATA are registers of the host-link block; waiting for room
        // keeps every byte (TXDATA drops writes while tx_full, docs/registers.md).
        unsafe {
            while read_volatile(reg(hostlink::BASE, hostlink::STATUS)) & (1 << 16) != 0 {}
            write_volatile(reg(hostlink::BASE, hostlink::TXDATA), u32::from(b));
        }
    }
}

fn drain_tx() {
    // SAFETY: reading STATUS has no side effect; tx_empty is bit 17.
    unsafe { while read_volatile(reg(hostlink::BASE, hostlink::STATUS)) & (1 << 17) == 0 {} }
}

/// Jumps to a checked entry point; the firmware's own start-up sets up everything else.
fn jump(entry: u32) -> ! {
    // SAFETY: `entry` was checked to lie inside an image whose CRC matched its header.
    unsafe { core::arch::asm!("jr {0}", in(reg) entry, options(noreturn)) }
}

extern "C" fn rom_main() -> ! {
    let mut ram = BusRam;
    let why = match decide(&mut ram) {
        Decision::Boot(entry) => jump(entry),
        Decision::StayRequested => None,
        Decision::NoImage(e) => Some(e),
    };
    set_leds(LOADER_LEDS);
    let mut loader = Loader::new(why);
    loop {
        // SAFETY: reading RXDATA pops one byte; bit 31 says it was valid.
        let rx = unsafe { read_volatile(reg(hostlink::BASE, hostlink::RXDATA)) };
        if rx & (1 << 31) == 0 {
            continue;
        }
        if let Action::Boot(entry) = loader.receive(rx as u8, &mut ram, &mut send) {
            drain_tx();
            set_leds(0);
            jump(entry);
        }
    }
}

#[panic_handler]
fn panic(_: &PanicInfo<'_>) -> ! {
    // Unreachable by construction (every index is checked); if it ever happens, show it and
    // stop where a debugger can look.
    set_leds(LOADER_FAULT_LEDS);
    loop {
        // SAFETY: wfi only waits.
        unsafe { core::arch::asm!("wfi") };
    }
}
