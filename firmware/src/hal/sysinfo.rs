//! The system-information block (`hdl/regmap/sysinfo.toml`): build hash, clock, memory sizes,
//! the populated register slots, and the soft-reset key.

use ws_common::regmap::{map, sysinfo};

use crate::control::SysInfo;
use crate::pac;

/// The key that `RESET` must be written with ("RST!").
pub const RESET_KEY: u32 = 0x5253_5421;

/// The system-information driver.
#[derive(Debug)]
pub struct Sysinfo {
    regs: pac::Sysinfo,
}

impl Sysinfo {
    /// Takes the system-information block.
    pub fn new(regs: pac::Sysinfo) -> Self {
        Self { regs }
    }

    /// What the block reports.
    pub fn info(&self) -> SysInfo {
        SysInfo {
            build_hash: sysinfo::build_hash::HASH.get(self.regs.build_hash().read()),
            clk_hz: sysinfo::clk_hz::HZ.get(self.regs.clk_hz().read()),
            rom_bytes: sysinfo::rom_bytes::BYTES.get(self.regs.rom_bytes().read()),
            ram_bytes: sysinfo::ram_bytes::BYTES.get(self.regs.ram_bytes().read()),
            slots: sysinfo::slots::MASK.get(self.regs.slots().read()),
        }
    }

    /// The ID word (offset 0) of register slot `slot` (0..=31; larger values wrap into that
    /// range). Call only for slots that `SLOTS` marks as populated.
    pub fn id_word(&self, slot: u8) -> u32 {
        let addr = map::PERIPH_BASE + (slot as u32 % 32) * map::SLOT_BYTES;
        // SAFETY: the address is offset 0 of a populated slot inside the peripheral region;
        // every block's ID word is a read-only constant with no read side effect.
        unsafe { core::ptr::read_volatile(addr as usize as *const u32) }
    }

    /// Resets the core and the peripherals (not the debug module). Callers drain whatever
    /// must survive (replies, logs) first.
    pub fn reset(&mut self) -> ! {
        self.regs.reset().write(RESET_KEY);
        // The reset takes effect within a few cycles; nothing after the write may run.
        #[allow(clippy::empty_loop)]
        loop {}
    }
}
