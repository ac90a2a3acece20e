//! The firmware's side of link protocol v2 on the FIFO channels (docs/link.md): HELLO on
//! channel 0 and control requests on channel 1, with the replay cache that makes every
//! retried request safe.
//!
//! On the board the hardware link engine (`hal::link::LinkEngine`, slot 8) checks every frame
//! and hands the firmware channels over whole ([`LinkServer::frame`]); the bulk channels never
//! reach the CPU. HELLO reports the engine's real channel state (its RX windows' credit), and
//! a HELLO without RESUME restarts every bulk channel of the engine with the credit the host
//! granted. [`LinkServer::receive`] takes the same frames as a byte stream, through the
//! shared resynchronising decoder, for tests and for a board without the engine.
//!
//! Nothing here touches a register: [`LinkServer`] builds and runs on the host, in tests,
//! against any [`Engine`].

use ws_common::ctrl::cmd::{self, opcode, CounterWords, MAX_LINK_COUNTERS};
use ws_common::ctrl::{Command, Frame};
use ws_common::link::control::{encode_error, encode_response, CtrlHeader, ReplayCache, MAX_CTRL_BODY};
use ws_common::link::hello::{hello_flags, ChannelState, Hello, HelloError, HELLO_LEN};
use ws_common::link::{
    flags, Channel, DecodeError, Decoder, Event, Header, CHANNELS, MAX_CTRL_FRAME, MAX_CTRL_PAYLOAD,
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
/// The largest bulk payload offered in HELLO.
pub const MAX_BULK: u32 = 4096;

/// What the server needs of the link engine; `hal::link::LinkEngine` is the real one.
pub trait Engine {
    /// Every channel's state as HELLO reports it (receive side: expected seq, committed
    /// bytes, credit; send side: next seq).
    fn channel_state(&self) -> [ChannelState; CHANNELS];
    /// HELLO without RESUME: every bulk channel starts again at seq 0, byte 0, the senders
    /// with the credit the host's HELLO grants on each channel.
    fn reset_channels(&mut self, host: &[ChannelState; CHANNELS]);
    /// The negotiated largest bulk payload and go-back-N window.
    fn set_negotiated(&mut self, max_payload: u32, window: u16);
    /// Sends one frame on a firmware channel; the engine fills seq, hcrc and pcrc as its
    /// halves define (the header's fields are sent as given, CRCs excepted).
    fn send(&mut self, h: &Header, payload: &[u8]);
    /// The go-back-N window this side offers in HELLO.
    fn window(&self) -> u16;
    /// One of the engine's counters by its index (docs/link-engine.md "Counter index").
    fn counter(&mut self, index: u8) -> u32;
}

/// The data-plane blocks behind the bulk channels (MemoryX: `crate::dataplane`). The link
/// server hands them the control requests it does not answer itself; their answers are cached
/// by request id like every other, so a retried request is never applied twice.
pub trait DataPlane<E> {
    /// Answers request `opcode` (its `body`) with a v2 control payload in `out`, using the
    /// engine's bulk windows as it needs; `None` when the opcode is not a data-plane one.
    fn request(&mut self, opcode: u8, req_id: u16, body: &[u8], out: &mut [u8], eng: &mut E)
        -> Option<usize>;
}

/// No data plane: every request goes to the controller (host tests, a board without one).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoDataPlane;

impl<E> DataPlane<E> for NoDataPlane {
    fn request(&mut self, _: u8, _: u16, _: &[u8], _: &mut [u8], _: &mut E) -> Option<usize> {
        None
    }
}

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
    /// The session of the last fresh HELLO that reset the engine's streams (0: none yet).
    session: u32,
    /// The next seq on the log channel (5): sequenced, never retransmitted.
    log_seq: u32,
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
            session: 0,
            log_seq: 0,
        }
    }

    /// The counters so far.
    pub fn counters(&self) -> LinkCounters {
        self.counters
    }

    /// Takes v2 frames as a byte stream (tests; a board without the engine); every reply goes
    /// to `eng`. Returns [`Action::Reset`] right after acknowledging a `Reset`.
    pub fn receive<B: Board, E: Engine>(
        &mut self,
        bytes: &[u8],
        ctrl: &mut Controller,
        board: &mut B,
        eng: &mut E,
        dp: &mut impl DataPlane<E>,
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
                    if self.frame_in(h, n, ctrl, board, eng, dp) == Action::Reset {
                        return Action::Reset;
                    }
                }
            }
        }
    }

    /// One whole frame of a firmware channel, as the engine hands it over: `payload` holds
    /// its first `len` bytes. Returns [`Action::Reset`] right after acknowledging a `Reset`.
    pub fn frame<B: Board, E: Engine>(
        &mut self,
        h: Header,
        payload: &[u8],
        ctrl: &mut Controller,
        board: &mut B,
        eng: &mut E,
        dp: &mut impl DataPlane<E>,
    ) -> Action {
        let n = payload.len().min(MAX_CTRL_PAYLOAD);
        self.payload[..n].copy_from_slice(&payload[..n]);
        self.frame_in(h, n, ctrl, board, eng, dp)
    }

    /// Whether a host has said HELLO since boot (the log channel then has a reader).
    pub fn host_seen(&self) -> bool {
        self.counters.hellos != 0
    }

    /// Sends defmt log bytes (whole frames, at most [`MAX_CTRL_PAYLOAD`]) on the log channel,
    /// numbered so the host sees any gap.
    pub fn send_log(&mut self, bytes: &[u8], eng: &mut impl Engine) {
        let n = bytes.len().min(MAX_CTRL_PAYLOAD);
        let h = Header { length: n as u32, seq: self.log_seq, ..Header::new(Channel::Log, flags::DATA) };
        eng.send(&h, &bytes[..n]);
        self.log_seq = self.log_seq.wrapping_add(1);
    }

    /// Counts a frame the engine passed and the shared decoder refused.
    pub fn refused(&mut self) {
        self.counters.bad_frames = self.counters.bad_frames.wrapping_add(1);
    }

    fn frame_in<B: Board, E: Engine>(
        &mut self,
        h: Header,
        len: usize,
        ctrl: &mut Controller,
        board: &mut B,
        eng: &mut E,
        dp: &mut impl DataPlane<E>,
    ) -> Action {
        self.counters.frames = self.counters.frames.wrapping_add(1);
        match h.channel {
            Channel::Link if h.has(flags::HELLO) && !h.has(flags::ERROR) => {
                self.hello(len, eng);
                Action::Continue
            }
            Channel::Control if h.has(flags::DATA) => self.control(len, ctrl, board, eng, dp),
            _ => {
                self.counters.ignored = self.counters.ignored.wrapping_add(1);
                Action::Continue
            }
        }
    }

    fn hello(&mut self, len: usize, eng: &mut impl Engine) {
        let mut ours = Hello::new(MAX_BULK, eng.window());
        let peer = Hello::decode(&self.payload[..len]);
        // The engine keeps its channel state across a host reconnect, so a host that asks to
        // resume always may.
        if let Ok(p) = &peer {
            ours.flags |= p.flags & hello_flags::RESUME;
        }
        let mut flags_out = flags::HELLO;
        match peer.and_then(|p| ours.negotiate(&p).map(|n| (p, n))) {
            Ok((p, n)) => {
                eng.set_negotiated(n.max_payload, n.window);
                // A retry of the HELLO that already reset the streams (same session) must not
                // reset them again: the host may have started streaming on the first answer,
                // and the engine accepts bulk frames while this firmware is still reading the
                // retry. A 2.0 host (session 0) is reset every time, as before.
                let retry = p.session != 0 && p.session == self.session;
                if !n.resume && !retry {
                    // A new host start: every bulk stream and the request ids start afresh.
                    eng.reset_channels(&p.state);
                    self.cache.clear();
                    self.session = p.session;
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
        ours.state = eng.channel_state();
        let body = ours.encode();
        let h = Header { length: HELLO_LEN as u32, ..Header::new(Channel::Link, flags_out) };
        eng.send(&h, &body);
    }

    fn control<B: Board, E: Engine>(
        &mut self,
        len: usize,
        ctrl: &mut Controller,
        board: &mut B,
        eng: &mut E,
        dp: &mut impl DataPlane<E>,
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
            eng.send(&h(cached.len()), cached);
            return Action::Continue;
        }
        self.counters.requests = self.counters.requests.wrapping_add(1);
        if req.opcode == opcode::LINK_COUNTERS {
            // The engine's counters are the link's own business: answered here, never cached
            // (reading them twice is harmless and the second answer is the newer one).
            let mut words = [0u8; MAX_LINK_COUNTERS * 4];
            let r = cmd::LinkCounters::decode(body).map(|q| {
                for i in 0..q.count as usize {
                    let v = eng.counter(q.first.wrapping_add(i as u8));
                    words[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
                }
                CounterWords(&words[..4 * q.count as usize])
            });
            let mut out = [0u8; MAX_CTRL_PAYLOAD];
            let n = match &r {
                Ok(w) => encode_response::<cmd::LinkCounters>(req.req_id, Ok(w), &mut out),
                Err(s) => encode_error(opcode::LINK_COUNTERS, req.req_id, *s, &mut out),
            };
            if let Ok(n) = n {
                eng.send(&h(n), &out[..n]);
            }
            return Action::Continue;
        }
        let mut out = [0u8; MAX_CTRL_PAYLOAD];
        if let Some(n) = dp.request(req.opcode, req.req_id, body, &mut out, eng) {
            let n = n.min(out.len());
            self.cache.insert(&req, body, &out[..n]);
            eng.send(&h(n), &out[..n]);
            return Action::Continue;
        }
        let frame = Frame { opcode: req.opcode, req_id: req.req_id, payload: body };
        let reply = ctrl.handle_v2(&frame, board);
        let action = reply.action;
        if !reply.bytes.is_empty() {
            // The response is cached before it leaves, so a retry that overtakes a lost answer
            // finds it.
            self.cache.insert(&req, body, reply.bytes);
            eng.send(&h(reply.bytes.len()), reply.bytes);
        }
        action
    }
}
