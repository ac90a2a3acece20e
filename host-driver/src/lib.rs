//! `host_driver`: the host side of a weightstream board.
//!
//! The library sits between `wsctl` (and the hil-tests) and a board: the simulated one that
//! `ws-sim` serves on loopback TCP ports, or, once the link transports exist, a real FPGA
//! board. Everything a test would want to call lives here; `wsctl` only parses arguments and
//! prints.
//!
//! - [`board`]: `boards/<name>/board.toml`, loaded and validated.
//! - [`board_time`]: waits bounded in the board's own cycles as well as wall time, so a
//!   slow simulator is waited for and a stopped one is not.
//! - [`transport`]: the [`Transport`](transport::Transport) trait, the simulator's TCP link
//!   and an in-memory [`FakeLink`](transport::FakeLink) with a [`FakeBoard`](transport::FakeBoard)
//!   behind it, so protocol logic is tested without a simulator.
//! - [`link`]: link protocol v2: the [`Endpoint`](link::Endpoint) that runs HELLO and the
//!   go-back-N bulk streams over any byte link.
//! - [`client`]: the control-protocol [`Client`](client::Client): request ids, timeouts,
//!   stale answers, retries, and one typed helper per command.
//! - [`endpoints`]: which addresses to talk to (command line, running simulator, board file).
//! - [`sim`]: starting, querying and stopping a background `ws-sim`, and its control port.
//! - [`loader`]: flashing through the boot ROM's link loader, and the firmware image format.
//! - [`main_run`]: the `wsctl` commands of the main job, run by `cargo xtask run` and the
//!   regression test that runs it job after job on one board.
//! - [`logs`]: defmt log decoding against the firmware ELF, with source locations.
//! - [`jtag`]: probe-rs over JTAG: our probe driver for the simulator's JTAG server (XVC,
//!   remote_bitbang), the board's target description, and a [`Debugger`](jtag::Debugger).
//! - [`flash`]: loading an ELF into RAM over JTAG, checked and verified.
//! - [`trace`]: the hardware pipeline trace of link channel 6: decoding, the Perfetto
//!   timeline, the validator behind `wsctl trace --check`, and a summary.
//! - [`report`]: the tables and dumps `wsctl` prints, as plain functions with tests.
//! - [`parse`]: number and byte-string parsing for command-line arguments.
//! - [`workspace`]: where the workspace, its `target/` folder and the default ELF are.
//! - [`error`]: one [`Error`] wrapping one typed enum per area.
//!
//! docs/host.md describes the modules, the files `wsctl sim` keeps, and every command.
#![warn(missing_docs)]

pub mod board;
pub mod board_time;
pub mod client;
pub mod endpoints;
pub mod error;
pub mod flash;
pub mod jtag;
pub mod link;
pub mod loader;
pub mod logs;
pub mod main_run;
pub mod mesh;
pub mod optim;
pub mod parse;
pub mod report;
pub mod sim;
pub mod trace;
pub mod train;
pub mod transport;
pub mod workspace;

pub use error::{Error, Result};
