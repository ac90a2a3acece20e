//! Golden models: the exact results the data-plane hardware must produce, written once and
//! used by the RTL testbenches, the host and the firmware (STYLE.md "One golden model, three
//! users").
//!
//! - [`fp`]: binary32 arithmetic as FPnew does it (RNE, subnormals kept, canonical NaN) and the
//!   bf16 wire format.
//! - [`swarm`]: SwarmX's fixed-order reduction, its wire formats and scale, for one node and
//!   for a cascade of nodes.
//!
//! Everything works on raw bit patterns (`u32`, `u16`): the hardware is specified in bits, and
//! a NaN's payload or a zero's sign must never be lost to a conversion on the way.

pub mod fp;
pub mod hyper_wire;
pub mod mesh;
pub mod optim;
pub mod schedule;
pub mod swarm;
