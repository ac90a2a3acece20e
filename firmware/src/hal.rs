//! Drivers for the SoC's register blocks: the only code besides the generated [`crate::pac`]
//! that touches registers.
//!
//! Each driver owns its block (`Driver::new(block, config)`, with the block taken once from
//! `pac::Peripherals::take`), reports small `Copy` errors that map to embedded-hal's
//! `ErrorKind`, and implements the embedded-hal 1.0 trait that fits:
//!
//! | driver | block | traits |
//! |---|---|---|
//! | [`timer::Timer`] | timer (mtime/mtimecmp) | `DelayNs` |
//! | [`gpio::Pin`] | gpio OUTPUT bits (LEDs) | `OutputPin`, `StatefulOutputPin` |
//! | [`uart::Uart`] | uart | embedded-hal-nb serial `Read<u8>`, `Write<u8>` |
//! | [`hostlink::Hostlink`] | hostlink byte streams | embedded-hal-nb serial `Read<u8>`, `Write<u8>` |
//! | [`link::LinkEngine`] | link (protocol v2 engine) | (firmware frames, DMA windows, HELLO state, counters) |
//! | [`mx::MemoryX`] | mx (streamer layer table, slots) and mxdma (data mover) | (layers, steps, ring ↔ store moves) |
//! | [`sysinfo::Sysinfo`] | sysinfo | (identity, slot discovery, soft reset) |
//! | [`trace::TraceUnit`] | trace (pipeline trace unit) | (start, drain, counts; it writes channel 6 itself) |
//!
//! Field layouts come from `ws_common::regmap`, generated from `hdl/regmap/*.toml`.

pub mod gpio;
pub mod hostlink;
pub mod link;
pub mod mesh;
pub mod mx;
pub mod swarm;
pub mod sysinfo;
pub mod timer;
pub mod trace;
pub mod uart;
