//! `ws-bootrom`: the weightstream boot ROM.
//!
//! It sits at address 0, where CV32E40P starts after every reset, between the reset and the
//! firmware: it integrity-checks the firmware image in RAM before jumping to it, and when
//! there is none (or the host asked), it loads one over the host link. The image format and
//! the memory contract are `ws_common::boot`; the design notes are in `docs/firmware.md`.
//!
//! The decision and the loader protocol ([`loader`]) are plain Rust and unit-tested on the
//! host; `src/main.rs` is the thin ROM binary around them (start-up, registers, the jump).
#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]

pub mod loader;
