//! `ws-firmware`: the weightstream control-plane firmware for the SoC's CV32E40P (RV32IMC).
//!
//! It sits between the host link and the register blocks of the board: it boots the core,
//! keeps a 1 kHz timer tick, logs with defmt over the UART, and answers the control protocol
//! of `ws_common::ctrl` on the host-link byte stream (see `docs/firmware.md`).
//!
//! The crate is split so that the logic is tested on the host:
//! - [`control`], [`link`] (link protocol v2 on the FIFO channels), [`mx`] (MemoryX's layer
//!   table and checks), [`timing`] and [`layout`] are plain Rust with no register access; they
//!   build for any target and have unit tests (`cargo test --lib --target x86_64-unknown-linux-gnu`).
//! - [`dataplane`] sequences the bulk modes and MemoryX's host commands over [`hal`].
//! - [`pac`] (generated) and [`hal`] are the thin layer that touches registers. They compile
//!   on the host too but only run on the board.
//! - `rt`, `tick`, `logger` and `board` need the RISC-V runtime and exist only on `riscv32`
//!   (`logger` and `board`, which log, also need the default `defmt` feature).
//!
//! The binary (`src/main.rs`) wires them together: start-up, trap handlers, the main loop and
//! the panic handler.
#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]

pub mod control;
pub mod dataplane;
pub mod hal;
pub mod layout;
pub mod link;
pub mod logring;
pub mod mx;
pub mod pac;
pub mod swarm;
pub mod timing;

#[cfg(all(target_arch = "riscv32", feature = "defmt"))]
pub mod board;
#[cfg(all(target_arch = "riscv32", feature = "defmt"))]
pub mod logger;
#[cfg(target_arch = "riscv32")]
pub mod rt;
#[cfg(target_arch = "riscv32")]
pub mod tick;

pub use ws_common::ctrl::PANIC_LEDS;

/// Firmware version (major, minor, patch) from `CARGO_PKG_VERSION`, as `Identity` reports it.
pub const FW_VERSION: [u8; 3] = [
    parse_u8(env!("CARGO_PKG_VERSION_MAJOR")),
    parse_u8(env!("CARGO_PKG_VERSION_MINOR")),
    parse_u8(env!("CARGO_PKG_VERSION_PATCH")),
];

/// Parses a decimal version component at compile time; values past 255 saturate.
const fn parse_u8(s: &str) -> u8 {
    let b = s.as_bytes();
    let mut i = 0;
    let mut v: u32 = 0;
    while i < b.len() {
        let d = b[i];
        if d < b'0' || d > b'9' {
            break;
        }
        v = v * 10 + (d - b'0') as u32;
        if v > 255 {
            return 255;
        }
        i += 1;
    }
    v as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_parses() {
        assert_eq!(parse_u8("0"), 0);
        assert_eq!(parse_u8("17"), 17);
        assert_eq!(parse_u8("300"), 255);
        assert_eq!(parse_u8("3-rc1"), 3);
        let v = env!("CARGO_PKG_VERSION");
        let want: [u8; 3] = [
            v.split('.').next().unwrap().parse().unwrap(),
            v.split('.').nth(1).unwrap().parse().unwrap(),
            v.split('.').nth(2).unwrap().split('-').next().unwrap().parse().unwrap(),
        ];
        assert_eq!(FW_VERSION, want);
    }
}
