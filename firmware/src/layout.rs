//! Where things live in the address space, and which ranges the host may touch.
//!
//! The numbers come from the generated register map (`ws_common::regmap::map`); the linker's
//! view of the same layout is `memory.x`, and a unit test below keeps the two in step.

use ws_common::ctrl::cmd::Window;
use ws_common::regmap::map;

/// Bytes at the top of RAM reserved as the scratch window (the `SCRATCH` region of
/// `memory.x`): the boot header and boot-mode word (`ws_common::boot`), and the host's poke
/// window. No code, data or stack is placed there.
pub const SCRATCH_LEN: u32 = map::RAM_BASE + map::RAM_SIZE - SCRATCH_BASE;
/// First byte of the scratch (poke) window.
pub const SCRATCH_BASE: u32 = ws_common::boot::SCRATCH_BASE;
/// Bytes of the `IMAGE` region of `memory.x`: code, constants and the load copy of `.data`.
pub const IMAGE_LEN: u32 = 128 * 1024;
/// Bytes of RAM the linker may use for the firmware image and its stack.
pub const FIRMWARE_RAM_LEN: u32 = map::RAM_SIZE - SCRATCH_LEN;

/// The address ranges the control protocol exposes to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    /// The boot ROM as present on this board. Peek may read it.
    pub rom: Window,
    /// Main RAM as present on this board (including the scratch window). Peek may read it.
    pub ram: Window,
    /// Where Poke may write: the scratch window, if the board's RAM reaches it.
    pub poke: Window,
}

impl Windows {
    /// The windows for a board whose system-info block reports `rom_bytes` of boot ROM and
    /// `ram_bytes` of RAM. Sizes are clamped to the SoC map, so a wrong register can shrink a
    /// window but never open one onto something else; a poke window the RAM does not cover
    /// is empty.
    pub fn new(rom_bytes: u32, ram_bytes: u32) -> Self {
        let rom = Window { base: map::BOOTROM_BASE, len: rom_bytes.min(map::BOOTROM_SIZE) };
        let ram = Window { base: map::RAM_BASE, len: ram_bytes.min(map::RAM_SIZE) };
        let scratch = Window { base: SCRATCH_BASE, len: SCRATCH_LEN };
        let poke = if ram.contains(scratch.base, scratch.len) { scratch } else { Window { base: 0, len: 0 } };
        Self { rom, ram, poke }
    }

    /// True when Peek may read `[addr, addr + len)`: wholly inside the ROM or the RAM.
    pub fn peek_allowed(&self, addr: u32, len: u32) -> bool {
        self.ram.contains(addr, len) || self.rom.contains(addr, len)
    }

    /// True when Poke may write `[addr, addr + len)`: wholly inside the scratch window.
    pub fn poke_allowed(&self, addr: u32, len: u32) -> bool {
        self.poke.len != 0 && self.poke.contains(addr, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Finds `NAME : ORIGIN = x, LENGTH = y` in memory.x and returns (origin, length).
    fn region(name: &str) -> (u32, u32) {
        let text = include_str!("../memory.x");
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(name) && l.contains("ORIGIN"))
            .unwrap_or_else(|| panic!("memory.x has no {name} region"));
        let num = |key: &str| -> u32 {
            let rest = &line[line.find(key).unwrap() + key.len()..];
            let tok = rest.trim_start_matches([' ', '=']).split([',', ' ']).next().unwrap();
            if let Some(k) = tok.strip_suffix('K') {
                k.parse::<u32>().unwrap() * 1024
            } else {
                u32::from_str_radix(tok.trim_start_matches("0x"), 16).unwrap()
            }
        };
        (num("ORIGIN"), num("LENGTH"))
    }

    #[test]
    fn memory_x_matches_the_register_map() {
        assert_eq!(region("IMAGE"), (map::RAM_BASE, IMAGE_LEN));
        assert_eq!(region("RAM"), (map::RAM_BASE + IMAGE_LEN, FIRMWARE_RAM_LEN - IMAGE_LEN));
        assert_eq!(region("SCRATCH"), (SCRATCH_BASE, SCRATCH_LEN));
        assert_eq!(SCRATCH_LEN, 4096);
        // The image region lies where the boot ROM accepts images.
        let (base, len) = ws_common::boot::IMAGE_WINDOW;
        assert!(map::RAM_BASE >= base && map::RAM_BASE + IMAGE_LEN <= base + len);
        assert_eq!(SCRATCH_BASE + SCRATCH_LEN, map::RAM_BASE + map::RAM_SIZE);
    }

    #[test]
    fn full_board_windows() {
        let w = Windows::new(map::BOOTROM_SIZE, map::RAM_SIZE);
        assert_eq!(w.rom, Window { base: 0, len: 8192 });
        assert_eq!(w.ram, Window { base: 0x1000_0000, len: 256 * 1024 });
        assert_eq!(w.poke, Window { base: 0x1003_f000, len: 4096 });
        assert!(w.peek_allowed(0, 8192));
        assert!(w.peek_allowed(0x1000_0000, 4));
        assert!(w.peek_allowed(0x1003_fffc, 4));
        assert!(!w.peek_allowed(0x1003_fffc, 8));
        assert!(!w.peek_allowed(0x1fff, 4));
        assert!(!w.peek_allowed(map::PERIPH_BASE, 4));
        assert!(!w.peek_allowed(map::DEBUG_BASE, 4));
        assert!(!w.peek_allowed(0xffff_fffc, 8));
        assert!(w.poke_allowed(0x1003_f000, 4096));
        assert!(!w.poke_allowed(0x1003_effc, 8));
        assert!(!w.poke_allowed(0x1000_0000, 4));
    }

    #[test]
    fn windows_clamp_to_the_map() {
        let w = Windows::new(u32::MAX, u32::MAX);
        assert_eq!(w.rom.len, map::BOOTROM_SIZE);
        assert_eq!(w.ram.len, map::RAM_SIZE);
        // A board with less RAM than the map has no scratch window at the map's top.
        let small = Windows::new(0, 64 * 1024);
        assert_eq!(small.poke.len, 0);
        assert!(!small.poke_allowed(0, 0));
        assert!(!small.peek_allowed(0, 4));
        assert!(!small.peek_allowed(SCRATCH_BASE, 4));
    }
}
