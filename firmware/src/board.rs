//! The real [`Board`]: volatile memory access, the core's and the
//! timer's counters, and the defmt log line of `LogEcho`.

use crate::control::{Board, Clocks};
use crate::{rt, tick};

/// The board the firmware runs on.
#[derive(Debug, Default)]
pub struct HwBoard;

impl Board for HwBoard {
    unsafe fn read_word(&mut self, addr: u32) -> u32 {
        // SAFETY: the controller passes only aligned addresses inside the peek window (RAM
        // or boot ROM), which are plain memory without read side effects.
        unsafe { core::ptr::read_volatile(addr as usize as *const u32) }
    }

    unsafe fn write_word(&mut self, addr: u32, value: u32) {
        // SAFETY: the controller passes only aligned addresses inside the poke window, the
        // top of RAM that memory.x keeps free of code, data and stack.
        unsafe { core::ptr::write_volatile(addr as usize as *mut u32, value) }
    }

    fn clocks(&mut self) -> Clocks {
        let t = tick::snapshot();
        Clocks { mcycle: rt::mcycle(), mtime: t.mtime, timer_ticks: t.ticks, tick_period: t.period }
    }

    fn log_echo(&mut self, value: u32, tag: i16) {
        defmt::info!("log-echo value={=u32} tag={=i16}", value, tag);
    }
}
