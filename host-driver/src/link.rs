//! Link protocol v2 on the host: the bulk streams (weights, gradients, samples, trace) with
//! go-back-N and credits, and the HELLO handshake (docs/link.md).
//!
//! [`Endpoint`] is the protocol engine of one side, without I/O: bytes in
//! ([`Endpoint::input`]), bytes out ([`Endpoint::output`]), a tick for the timers, and
//! per-channel byte streams for the application ([`Endpoint::write`], [`Endpoint::read`]).
//! The host runs it as the [`Role::Initiator`]; tests run a second one as the
//! [`Role::Responder`] to stand for the board's engine, with a fault injector between them.
//! [`Link`] drives an endpoint over any [`Transport`](crate::transport::Transport): HELLO,
//! control requests retried under one request id, and the pump for the streams.
//!
//! The state machines are the shared `ws_common::link::gbn` ones, so the host and the board
//! cannot disagree about the protocol.

pub mod echo;
mod endpoint;
mod session;

pub use endpoint::{Config, Endpoint, EndpointStats, LinkState, Role, RxCheckpoint, StreamError, MAX_WINDOW};
pub use session::Link;

#[cfg(test)]
mod tests;
