//! The firmware's side of link protocol v2 on the FIFO channels (docs/link.md): HELLO on
//! channel 0 and control requests on channel 1, with the replay cache that makes every
//! retried request safe.
//!
//! Until the hardware link engine is in the SoC the frames arrive in the host-link byte FIFO,
//! next to protocol v1, and this server finds them with the shared resynchronising decoder;
//! the v1 server ignores them and this one ignores v1 frames. Without the engine there are no
//! DMA windows, so the HELLO answer grants no credit on any bulk channel: a host cannot send
//! bulk data to a board that has nowhere to put it.
//!
//! Nothing here touches a register: [`LinkServer`] builds and runs on the host, in tests.

use ws_common::ctrl::Frame;
use ws_common::link::control::{CtrlHeader, ReplayCache, MAX_CTRL_BODY};
use ws_common::link::hello::{hello_flags, Hello, HelloError, HELLO_LEN};
use ws_common::link::{
    encode_frame, flags, Channel, DecodeError, Decoder, Event, Header, MAX_CTRL_FRAME, MAX_CTRL_PAYLOAD,
};

use crate::control::{Action, Board, Controller};

#[cfg(test)]
mod tests;

/// Responses the replay cache keeps: more than a host keeps in flight.
pub const REPLAY_SLOTS: usize = 8;
/// Largest response the replay cache keeps. Every command that is not idempotent (`Poke`,
/// `Reset`, `LogEcho`) has a response far shorter; a longer one (a big `Peek`) is simply run
/// again on a retry, which is harmless.
pub const REPLAY_CAP: usize = 64;
/// The window this side offers in HELLO (it has no bulk channels yet, so any value works).
pub const WINDOW: u16 = 16;
/// The largest bulk payload offered in HELLO.
pub const MAX_BULK: u32 = 4096;

/// Counters of the v2 server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LinkCounters {
    /// Good v2 frames.
    pub frames: u32,
    /// Frames refused by the decoder (CRC, header fields), v1 frames excluded.
    pub bad_frames: u32,
    /// HELLOs answered.
    pub hellos: u32,
    /// HELLOs refused (version or layout).
    pub hello_refused: u32,
    /// Control requests run.
    pub requests: u32,
    /// Control requests answered from the replay cache.
    pub replays: u32,
    /// Frames this side does not accept here (bulk DATA without an engine, responses,
    /// malformed control payloads).
    pub ignored: u32,
}

/// HELLO and control on the FIFO channels; see the module docs.
pub struct LinkServer {
    decoder: Decoder<MAX_CTRL_FRAME>,
    cache: ReplayCache<REPLAY_SLOTS, REPLAY_CAP>,
    counters: LinkCounters,
    payload: [u8; MAX_CTRL_PAYLOAD],
    frame: [u8; MAX_CTRL_FRAME],
}

impl core::fmt::Debug for LinkServer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LinkServer").field("counters", &self.counters).finish_non_exhaustive()
    }
}

impl Default for LinkServer {
    fn default() -> Self {
        Self::new()
    }
}

impl LinkServer {
    /// A server with an empty replay cache.
    pub const fn new() -> Self {
        Self {
            decoder: Decoder::new(),
            cache: ReplayCache::new(),
            counters: LinkCounters {
                frames: 0,
                bad_frames: 0,
                hellos: 0,
                hello_refused: 0,
                requests: 0,
                replays: 0,
                ignored: 0,
            },
            payload: [0; MAX_CTRL_PAYLOAD],
            frame: [0; MAX_CTRL_FRAME],
        }
    }

    /// The counters so far.
    pub fn counters(&self) -> LinkCounters {
        self.counters
    }

    /// Takes bytes from the host link; every reply goes out through `tx` as one whole frame.
    /// Returns [`Action::Reset`] right after acknowledging a `Reset`.
    pub fn receive<B: Board>(
        &mut self,
        bytes: &[u8],
        ctrl: &mut Controller,
        board: &mut B,
        tx: &mut impl FnMut(&[u8]),
    ) -> Action {
        let mut rest = bytes;
        loop {
            let r = self.decoder.feed(rest);
            let consumed = r.consumed;
            let got = match r.event {
                None => None,
                Some(Event::Error(e)) => Some(Err(e)),
                Some(Event::Frame(f)) => {
                    let n = f.payload.len().min(MAX_CTRL_PAYLOAD);
                    self.payload[..n].copy_from_slice(&f.payload[..n]);
                    Some(Ok((f.header, n)))
                }
            };
            rest = &rest[consumed..];
            match got {
                None => return Action::Continue,
                // v1 frames belong to the v1 server.
                Some(Err(DecodeError::BadVersion(1))) => {}
                Some(Err(_)) => self.counters.bad_frames = self.counters.bad_frames.wrapping_add(1),
                Some(Ok((h, n))) => {
                    self.counters.frames = self.counters.frames.wrapping_add(1);
                    if self.frame_in(h, n, ctrl, board, tx) == Action::Reset {
                        return Action::Reset;
                    }
                }
            }
        }
    }

    fn frame_in<B: Board>(
        &mut self,
        h: Header,
        len: usize,
        ctrl: &mut Controller,
        board: &mut B,
        tx: &mut impl FnMut(&[u8]),
    ) -> Action {
        match h.channel {
            Channel::Link if h.has(flags::HELLO) && !h.has(flags::ERROR) => {
                self.hello(len, tx);
                Action::Continue
            }
            Channel::Control if h.has(flags::DATA) => self.control(len, ctrl, board, tx),
            _ => {
                self.counters.ignored = self.counters.ignored.wrapping_add(1);
                Action::Continue
            }
        }
    }

    fn hello(&mut self, len: usize, tx: &mut impl FnMut(&[u8])) {
        let ours = Hello::new(MAX_BULK, WINDOW);
        let peer = Hello::decode(&self.payload[..len]);
        let mut flags_out = flags::HELLO;
        match peer.and_then(|p| ours.negotiate(&p).map(|n| (p, n))) {
            Ok((p, _)) => {
                // A new host process numbers its requests from scratch.
                if p.flags & hello_flags::RESUME == 0 {
                    self.cache.clear();
                }
                self.counters.hellos = self.counters.hellos.wrapping_add(1);
            }
            Err(e) => {
                self.counters.hello_refused = self.counters.hello_refused.wrapping_add(1);
                if let HelloError::VersionMismatch { .. } = e {
                    flags_out |= flags::ERROR;
                } else {
                    // Not a version problem: a garbled HELLO gets no answer; the host retries.
                    return;
                }
            }
        }
        // No engine: every channel's state is zero, including the credit.
        let body = ours.encode();
        let h = Header { length: HELLO_LEN as u32, ..Header::new(Channel::Link, flags_out) };
        if let Ok(n) = encode_frame(&h, &body, &mut self.frame) {
            tx(&self.frame[..n]);
        }
    }

    fn control<B: Board>(
        &mut self,
        len: usize,
        ctrl: &mut Controller,
        board: &mut B,
        tx: &mut impl FnMut(&[u8]),
    ) -> Action {
        let Ok((req, body)) = CtrlHeader::decode(&self.payload[..len]) else {
            self.counters.ignored = self.counters.ignored.wrapping_add(1);
            return Action::Continue;
        };
        if req.is_response() || body.len() > MAX_CTRL_BODY {
            self.counters.ignored = self.counters.ignored.wrapping_add(1);
            return Action::Continue;
        }
        let h = |n: usize| Header { length: n as u32, ..Header::new(Channel::Control, flags::DATA) };
        if let Some(cached) = self.cache.lookup(&req, body) {
            self.counters.replays = self.counters.replays.wrapping_add(1);
            if let Ok(n) = encode_frame(&h(cached.len()), cached, &mut self.frame) {
                tx(&self.frame[..n]);
            }
            return Action::Continue;
        }
        self.counters.requests = self.counters.requests.wrapping_add(1);
        let frame = Frame { opcode: req.opcode, req_id: req.req_id, payload: body };
        let reply = ctrl.handle_v2(&frame, board);
        let action = reply.action;
        if !reply.bytes.is_empty() {
            // The response is cached before it leaves, so a retry that overtakes a lost answer
            // finds it.
            self.cache.insert(&req, body, reply.bytes);
            if let Ok(n) = encode_frame(&h(reply.bytes.len()), reply.bytes, &mut self.frame) {
                tx(&self.frame[..n]);
            }
        }
        action
    }
}
