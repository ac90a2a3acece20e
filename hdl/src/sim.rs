//! The SoC simulator.
pub mod asm;
pub mod elf;
pub mod programs;
pub mod soc;
pub use soc::{Soc, SocConfig, SocError, StopOn};
