//! The control-protocol client: requests out, matching answers in.
//!
//! A [`Client`] owns a [`Transport`] and a `ws_common` [`FrameDecoder`] over the bytes it
//! receives. Each request gets the next request id (never 0, which the device uses for its
//! frame-error reports); the answer must carry the request's opcode with bit 7 set and the
//! same id. Answers with other ids are stale (left over from a request that timed out) and
//! are skipped and counted. Frame-error reports (opcode `0xff`, id 0) are counted and named
//! in a timeout's message, since they usually explain it.
//!
//! A command whose repetition is harmless is resent after a timeout, with the *same* id so
//! that a late answer to the first try is accepted, up to [`Client::set_retries`] times
//! (default 0). See docs/protocol.md for the frames.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ws_common::ctrl::cmd::{
    Identity, IdentityInfo, LogEcho, Peek, Ping, Poke, Reset, Stats, StatsInfo, MAX_PEEK, MAX_POKE,
};
use ws_common::ctrl::{
    encode_frame, Command, DecodeError, Event, FrameDecoder, Status, FRAME_ERROR_OPCODE, MAX_FRAME,
    MAX_PAYLOAD, RESPONSE_BIT,
};

use crate::board_time::{BoardClock, Deadline};
use crate::error::{Error, ProtocolError, Result};
use crate::transport::Transport;

#[cfg(test)]
mod tests;

/// How long a request waits for its answer unless [`Client::set_timeout`] says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// A request the client can send: a `ws_common` command with a response the host keeps.
///
/// `ws_common`'s [`Command`] lets responses borrow the receive buffer; this trait gives each
/// an owned form, plus what the client needs for messages and retries.
pub trait Request {
    /// The command's name in messages (`Peek`).
    const NAME: &'static str;
    /// The request opcode.
    const OPCODE: u8;
    /// True when sending the request twice does no harm, so a timeout may be retried.
    const IDEMPOTENT: bool;
    /// What a successful answer carries, owned.
    type Output;
    /// Writes the request payload into `out`, returning its length.
    fn encode(&self, out: &mut [u8]) -> std::result::Result<usize, Status>;
    /// Parses a successful answer's data (after the status byte).
    fn decode_output(data: &[u8]) -> std::result::Result<Self::Output, Status>;
}

macro_rules! request {
    ($ty:ty, $name:literal, idempotent = $idem:literal, $out:ty, |$d:ident| $conv:expr) => {
        impl Request for $ty {
            const NAME: &'static str = $name;
            const OPCODE: u8 = <$ty as Command<'static>>::OPCODE;
            const IDEMPOTENT: bool = $idem;
            type Output = $out;
            fn encode(&self, out: &mut [u8]) -> std::result::Result<usize, Status> {
                Command::encode(self, out)
            }
            fn decode_output($d: &[u8]) -> std::result::Result<$out, Status> {
                $conv
            }
        }
    };
}

request!(Ping, "Ping", idempotent = true, u32, |d| <Ping as Command<'_>>::decode_response(d));
request!(Identity, "Identity", idempotent = true, IdentityInfo, |d| {
    <Identity as Command<'_>>::decode_response(d)
});
request!(Peek, "Peek", idempotent = true, Vec<u8>, |d| {
    <Peek as Command<'_>>::decode_response(d).map(<[u8]>::to_vec)
});
request!(Stats, "Stats", idempotent = true, StatsInfo, |d| <Stats as Command<'_>>::decode_response(d));
request!(LogEcho, "LogEcho", idempotent = true, (), |d| <LogEcho as Command<'_>>::decode_response(d));
// A second reset resets again: harmless, but not what a caller that waited asked for.
request!(Reset, "Reset", idempotent = false, (), |d| <Reset as Command<'_>>::decode_response(d));

// Link v2 only: the bulk mode and MemoryX. Each is answered once per request id (the board's
// replay cache), so a retry under the same id never runs a transfer or a step twice.
request!(
    ws_common::ctrl::cmd::LinkMode,
    "LinkMode",
    idempotent = true,
    ws_common::ctrl::cmd::BulkMode,
    |d| <ws_common::ctrl::cmd::LinkMode as Command<'_>>::decode_response(d)
);
request!(ws_common::ctrl::cmd::MxInfo, "MxInfo", idempotent = true, ws_common::ctrl::cmd::MxInfoData, |d| {
    <ws_common::ctrl::cmd::MxInfo as Command<'_>>::decode_response(d)
});
request!(
    ws_common::ctrl::cmd::MxCreate,
    "MxCreate",
    idempotent = false,
    ws_common::ctrl::cmd::MxLayerInfo,
    |d| <ws_common::ctrl::cmd::MxCreate as Command<'_>>::decode_response(d)
);
request!(ws_common::ctrl::cmd::MxWrite, "MxWrite", idempotent = false, u32, |d| {
    <ws_common::ctrl::cmd::MxWrite as Command<'_>>::decode_response(d)
});
request!(ws_common::ctrl::cmd::MxRead, "MxRead", idempotent = false, u32, |d| {
    <ws_common::ctrl::cmd::MxRead as Command<'_>>::decode_response(d)
});
request!(ws_common::ctrl::cmd::MxStep, "MxStep", idempotent = false, ws_common::ctrl::cmd::MxStepDone, |d| {
    <ws_common::ctrl::cmd::MxStep as Command<'_>>::decode_response(d)
});
request!(
    ws_common::ctrl::cmd::MxCounters,
    "MxCounters",
    idempotent = true,
    ws_common::ctrl::cmd::MxCounterValues,
    |d| <ws_common::ctrl::cmd::MxCounters as Command<'_>>::decode_response(d)
);

// A release of layers that are already gone changes nothing; the list only reads.
request!(
    ws_common::ctrl::cmd::MxRelease,
    "MxRelease",
    idempotent = true,
    ws_common::ctrl::cmd::MxInfoData,
    |d| <ws_common::ctrl::cmd::MxRelease as Command<'_>>::decode_response(d)
);
request!(
    ws_common::ctrl::cmd::MxLayers,
    "MxLayers",
    idempotent = true,
    ws_common::ctrl::cmd::MxLayerList,
    |d| <ws_common::ctrl::cmd::MxLayers as Command<'_>>::decode_response(d)
);

// The wafer mesh (link v2). A setup rewrites the route tables; a step moves words: both are
// answered once per request id.
request!(
    ws_common::ctrl::cmd::MeshSetup,
    "MeshSetup",
    idempotent = false,
    ws_common::ctrl::cmd::MeshPlan,
    |d| <ws_common::ctrl::cmd::MeshSetup as Command<'_>>::decode_response(d)
);
request!(
    ws_common::ctrl::cmd::MeshStep,
    "MeshStep",
    idempotent = false,
    ws_common::ctrl::cmd::MeshStepDone,
    |d| <ws_common::ctrl::cmd::MeshStep as Command<'_>>::decode_response(d)
);

request!(
    ws_common::ctrl::cmd::MeshTrain,
    "MeshTrain",
    idempotent = false,
    ws_common::ctrl::cmd::MeshStepDone,
    |d| <ws_common::ctrl::cmd::MeshTrain as Command<'_>>::decode_response(d)
);

request!(
    ws_common::ctrl::cmd::MeshTrainRun,
    "MeshTrainRun",
    idempotent = false,
    ws_common::ctrl::cmd::MeshRunDone,
    |d| <ws_common::ctrl::cmd::MeshTrainRun as Command<'_>>::decode_response(d)
);

request!(
    ws_common::ctrl::cmd::MeshEval,
    "MeshEval",
    idempotent = false,
    ws_common::ctrl::cmd::MeshStepDone,
    |d| <ws_common::ctrl::cmd::MeshEval as Command<'_>>::decode_response(d)
);

// SwarmX (link v2). A configuration resets the firmware's masking policy, and reading the
// events drains them: both are answered once per request id.
request!(
    ws_common::ctrl::cmd::SwarmStatus,
    "SwarmStatus",
    idempotent = true,
    ws_common::ctrl::cmd::SwarmStatusData,
    |d| <ws_common::ctrl::cmd::SwarmStatus as Command<'_>>::decode_response(d)
);
request!(
    ws_common::ctrl::cmd::SwarmConfig,
    "SwarmConfig",
    idempotent = false,
    ws_common::ctrl::cmd::SwarmStatusData,
    |d| <ws_common::ctrl::cmd::SwarmConfig as Command<'_>>::decode_response(d)
);
request!(
    ws_common::ctrl::cmd::SwarmEvents,
    "SwarmEvents",
    idempotent = false,
    ws_common::ctrl::cmd::SwarmEventList,
    |d| <ws_common::ctrl::cmd::SwarmEvents as Command<'_>>::decode_response(d)
);

// The pipeline trace (link v2). Starting restarts the trace unit's counts, so it is answered
// once per request id; a stop or a status query repeated changes nothing.
request!(
    ws_common::ctrl::cmd::TraceCtl,
    "TraceCtl",
    idempotent = false,
    ws_common::ctrl::cmd::TraceState,
    |d| <ws_common::ctrl::cmd::TraceCtl as Command<'_>>::decode_response(d)
);

impl Request for ws_common::ctrl::cmd::LinkCounters {
    const NAME: &'static str = "LinkCounters";
    const OPCODE: u8 = <Self as Command<'static>>::OPCODE;
    const IDEMPOTENT: bool = true;
    type Output = Vec<u32>;
    fn encode(&self, out: &mut [u8]) -> std::result::Result<usize, Status> {
        Command::encode(self, out)
    }
    fn decode_output(d: &[u8]) -> std::result::Result<Vec<u32>, Status> {
        let w = <Self as Command<'_>>::decode_response(d)?;
        Ok((0..w.len()).filter_map(|i| w.get(i)).collect())
    }
}

impl Request for Poke<'_> {
    const NAME: &'static str = "Poke";
    const OPCODE: u8 = <Poke<'static> as Command<'static>>::OPCODE;
    // The same bytes written again.
    const IDEMPOTENT: bool = true;
    type Output = ();
    fn encode(&self, out: &mut [u8]) -> std::result::Result<usize, Status> {
        Command::encode(self, out)
    }
    fn decode_output(d: &[u8]) -> std::result::Result<(), Status> {
        <Poke<'_> as Command<'_>>::decode_response(d)
    }
}

/// A frame as received, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFrame {
    /// Opcode (bit 7 set on answers).
    pub opcode: u8,
    /// Request id.
    pub req_id: u16,
    /// Payload bytes.
    pub payload: Vec<u8>,
}

impl RawFrame {
    /// The status of a device frame-error report (opcode `0xff`, id 0, `[status, version]`),
    /// or `None` for any other frame.
    pub fn frame_error(&self) -> Option<Status> {
        is_frame_error(self.opcode, self.req_id, &self.payload)
    }
}

/// What the client has seen on the link since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCounters {
    /// Requests sent (retries included).
    pub sent: u64,
    /// Answers matched to their request.
    pub answered: u64,
    /// Answers skipped because their id or opcode matched no waiting request.
    pub stale: u64,
    /// Frame-error reports from the device (it dropped a frame we sent).
    pub device_frame_errors: u64,
    /// Frames the host's own decoder dropped (CRC, length, version).
    pub host_decode_errors: u64,
    /// Requests that timed out and were resent.
    pub retries: u64,
}

/// The control-protocol client over one [`Transport`].
pub struct Client {
    link: Box<dyn Transport>,
    decoder: Box<FrameDecoder>,
    next_id: u16,
    timeout: Duration,
    clock: Option<BoardClock>,
    retries: u32,
    counters: ClientCounters,
    rx: Vec<u8>,
    /// Frames and decode errors received but not consumed yet.
    backlog: VecDeque<Rx>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("link", &self.link.describe())
            .field("next_id", &self.next_id)
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .field("counters", &self.counters)
            .finish()
    }
}

fn is_frame_error(opcode: u8, req_id: u16, payload: &[u8]) -> Option<Status> {
    // An unknown request opcode 0x7f is also answered with 0xff, but with one status byte;
    // a frame-error report carries the device's version too (docs/firmware.md).
    match (opcode, req_id, payload) {
        (FRAME_ERROR_OPCODE, 0, &[status, _version]) => Some(Status::from_u8(status)),
        _ => None,
    }
}

/// One thing pulled off the link.
enum Rx {
    Frame(RawFrame),
    Bad(DecodeError),
}

impl Client {
    /// A client over `link` with [`DEFAULT_TIMEOUT`] and no retries, measuring its waits
    /// with the link's board clock, if it has one.
    pub fn new(link: Box<dyn Transport>) -> Self {
        Self {
            clock: link.board_clock(),
            link,
            decoder: Box::new(FrameDecoder::new()),
            next_id: 1,
            timeout: DEFAULT_TIMEOUT,
            retries: 0,
            counters: ClientCounters::default(),
            rx: vec![0; 4096],
            backlog: VecDeque::new(),
        }
    }

    /// Sets how long each try of a request waits for its answer.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The per-try timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Measures every wait in board time too (the simulated board's cycle counter), so a
    /// slow or loaded machine is waited for ([`crate::board_time`]).
    pub fn set_board_clock(&mut self, clock: Option<BoardClock>) {
        self.clock = clock;
    }

    /// The board clock waits are measured with, if any.
    pub fn board_clock(&self) -> Option<&BoardClock> {
        self.clock.as_ref()
    }

    /// Sets how many times an idempotent request is resent after a timeout (0 = never).
    pub fn set_retries(&mut self, retries: u32) {
        self.retries = retries;
    }

    /// What the client has seen so far.
    pub fn counters(&self) -> ClientCounters {
        self.counters
    }

    /// The link's description.
    pub fn describe(&self) -> String {
        self.link.describe()
    }

    /// The transport, for tests that reach past the protocol.
    pub fn transport(&mut self) -> &mut dyn Transport {
        &mut *self.link
    }

    fn take_id(&mut self) -> u16 {
        let id = self.next_id;
        // Id 0 is the device's frame-error reports; skip it when wrapping.
        self.next_id = self.next_id.checked_add(1).unwrap_or(1);
        id
    }

    /// Sends `req` and waits for its answer: the decoded output, or a typed error
    /// ([`ProtocolError::Refused`] carries the device's status; see [`Error::refusal`]).
    pub fn request<R: Request>(&mut self, req: &R) -> Result<R::Output> {
        let mut payload = [0u8; MAX_PAYLOAD];
        let len =
            req.encode(&mut payload).map_err(|status| ProtocolError::Encode { command: R::NAME, status })?;
        let id = self.take_id();
        let mut frame = [0u8; MAX_FRAME];
        let n = encode_frame(R::OPCODE, id, &payload[..len], &mut frame)
            .map_err(|status| ProtocolError::Encode { command: R::NAME, status })?;
        let tries = if R::IDEMPOTENT { self.retries.saturating_add(1) } else { 1 };
        let mut frame_errors = Vec::new();
        let mut waited = String::new();
        for attempt in 0..tries {
            if attempt > 0 {
                self.counters.retries += 1;
            }
            self.link.send(&frame[..n])?;
            self.counters.sent += 1;
            let deadline = Deadline::new(self.timeout, self.clock.as_ref());
            if let Some(answer) = self.wait_for(R::OPCODE | RESPONSE_BIT, id, &deadline, &mut frame_errors)? {
                self.counters.answered += 1;
                return decode_answer::<R>(&answer);
            }
            waited = deadline.describe();
        }
        if tries > 1 {
            waited = format!("{tries} tries of {waited}");
        }
        Err(ProtocolError::Timeout {
            command: R::NAME,
            req_id: id,
            peer: self.link.describe(),
            waited,
            frame_errors: describe_frame_errors(&frame_errors),
        }
        .into())
    }

    /// Waits until `deadline` for the frame `(opcode, id)`, skipping and counting others.
    fn wait_for(
        &mut self,
        opcode: u8,
        id: u16,
        deadline: &Deadline,
        frame_errors: &mut Vec<Status>,
    ) -> Result<Option<Vec<u8>>> {
        loop {
            while let Some(rx) = self.backlog.pop_front() {
                match rx {
                    Rx::Frame(f) if f.opcode == opcode && f.req_id == id => return Ok(Some(f.payload)),
                    Rx::Frame(f) => {
                        if let Some(status) = f.frame_error() {
                            self.counters.device_frame_errors += 1;
                            frame_errors.push(status);
                        } else {
                            self.counters.stale += 1;
                        }
                    }
                    Rx::Bad(_) => self.counters.host_decode_errors += 1,
                }
            }
            if deadline.expired() {
                return Ok(None);
            }
            // A read that returns nothing has waited its whole slice; without a board clock
            // that was the rest of the wall time (as transports that answer at once for
            // "nothing more" expect), with one the board may still owe cycles.
            if !self.fill(deadline.slice())? && self.clock.is_none() {
                return Ok(None);
            }
        }
    }

    /// Reads once from the link, decoding into the backlog. False when the wait timed out.
    fn fill(&mut self, timeout: Duration) -> Result<bool> {
        let n = self.link.recv(&mut self.rx, timeout)?;
        for &b in &self.rx[..n] {
            // Polled to `Pending` after every byte, the decoder never holds more than one
            // candidate frame, so `push` cannot refuse a byte.
            self.decoder.push(b);
            loop {
                let rx = match self.decoder.poll() {
                    Event::Pending => break,
                    Event::Frame(f) => Rx::Frame(RawFrame {
                        opcode: f.opcode,
                        req_id: f.req_id,
                        payload: f.payload.to_vec(),
                    }),
                    Event::Error(e) => Rx::Bad(e),
                };
                self.backlog.push_back(rx);
            }
        }
        Ok(n > 0)
    }

    /// Sends bytes as they are, for tests that inject malformed frames.
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.link.send(bytes)
    }

    /// Reads and returns whatever arrives until the link has been quiet for `quiet`, and
    /// resets the frame decoder, so the next request starts clean. A failing link ends the
    /// drain early (the next request reports the failure).
    pub fn drain(&mut self, quiet: Duration) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            match self.link.recv(&mut self.rx, quiet) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&self.rx[..n]),
            }
        }
        self.decoder.clear();
        self.backlog.clear();
        out
    }

    /// Reads frames until the link has been quiet for `quiet`: every frame received (the
    /// device's frame-error reports included) and every decode error of the host's decoder.
    pub fn read_frames(
        &mut self,
        quiet: Duration,
    ) -> Result<Vec<std::result::Result<RawFrame, DecodeError>>> {
        let mut out = Vec::new();
        loop {
            while let Some(rx) = self.backlog.pop_front() {
                out.push(match rx {
                    Rx::Frame(f) => Ok(f),
                    Rx::Bad(e) => Err(e),
                });
            }
            if !self.fill(quiet)? {
                return Ok(out);
            }
        }
    }

    /// Pings with `nonce` and returns the round-trip time; the echo must match.
    pub fn ping(&mut self, nonce: u32) -> Result<Duration> {
        let start = Instant::now();
        let got = self.request(&Ping { nonce })?;
        let rtt = start.elapsed();
        if got != nonce {
            return Err(ProtocolError::EchoMismatch { sent: nonce, got }.into());
        }
        Ok(rtt)
    }

    /// The board's identity: firmware version, clock, windows, blocks.
    pub fn identity(&mut self) -> Result<IdentityInfo> {
        self.request(&Identity)
    }

    /// Reads `len` bytes at `addr`, in as many [`MAX_PEEK`] requests as it takes.
    pub fn peek(&mut self, addr: u32, len: usize) -> Result<Vec<u8>> {
        check_range(addr, len)?;
        let mut out = Vec::with_capacity(len);
        for (chunk_addr, chunk_len) in chunks(addr, len, MAX_PEEK) {
            let data = self
                .request(&Peek { addr: chunk_addr, len: chunk_len as u16 })
                .map_err(|e| at(e, chunk_addr, chunk_len))?;
            if data.len() != chunk_len {
                return Err(
                    ProtocolError::ShortPeek { addr: chunk_addr, want: chunk_len, got: data.len() }.into()
                );
            }
            out.extend_from_slice(&data);
        }
        Ok(out)
    }

    /// Writes `data` at `addr`, in as many [`MAX_POKE`] requests as it takes.
    pub fn poke(&mut self, addr: u32, data: &[u8]) -> Result<()> {
        check_range(addr, data.len())?;
        let mut off = 0;
        for (chunk_addr, chunk_len) in chunks(addr, data.len(), MAX_POKE) {
            self.request(&Poke { addr: chunk_addr, data: &data[off..off + chunk_len] })
                .map_err(|e| at(e, chunk_addr, chunk_len))?;
            off += chunk_len;
        }
        Ok(())
    }

    /// Resets the board. The answer comes before the reset; the board then reboots, and
    /// bytes in flight are lost, so the decoder starts clean afterwards.
    pub fn reset(&mut self) -> Result<()> {
        self.request(&Reset)?;
        self.decoder.clear();
        self.backlog.clear();
        Ok(())
    }

    /// The firmware's counters.
    pub fn stats(&mut self) -> Result<StatsInfo> {
        self.request(&Stats)
    }

    /// Asks the firmware to log `log-echo value={value} tag={tag}`.
    pub fn log_echo(&mut self, value: u32, tag: i16) -> Result<()> {
        self.request(&LogEcho { value, tag })
    }
}

fn decode_answer<R: Request>(payload: &[u8]) -> Result<R::Output> {
    let Some((&status, data)) = payload.split_first() else {
        return Err(ProtocolError::BadResponse { command: R::NAME, status: Status::BadLength }.into());
    };
    match Status::from_u8(status) {
        Status::Ok => R::decode_output(data)
            .map_err(|status| ProtocolError::BadResponse { command: R::NAME, status }.into()),
        status => Err(ProtocolError::Refused { command: R::NAME, status, context: String::new() }.into()),
    }
}

fn describe_frame_errors(errors: &[Status]) -> String {
    if errors.is_empty() {
        return String::new();
    }
    let mut kinds: Vec<String> = Vec::new();
    for s in errors {
        let name = format!("{s:?}");
        if !kinds.contains(&name) {
            kinds.push(name);
        }
    }
    format!(
        "; meanwhile the device reported {} frame error{} ({}), so our frames reached it damaged",
        errors.len(),
        if errors.len() == 1 { "" } else { "s" },
        kinds.join(", ")
    )
}

/// Adds the address range to a refusal's message.
fn at(e: Error, addr: u32, len: usize) -> Error {
    match e {
        Error::Protocol(ProtocolError::Refused { command, status, .. }) => {
            ProtocolError::Refused { command, status, context: format!(" at {addr:#010x} ({len} bytes)") }
                .into()
        }
        other => other,
    }
}

fn check_range(addr: u32, len: usize) -> Result<()> {
    if u64::from(addr) + len as u64 > 1 << 32 {
        return Err(ProtocolError::AddressOverflow { addr, len }.into());
    }
    Ok(())
}

/// `(addr, len)` pieces of at most `max` bytes covering `[addr, addr + len)`.
fn chunks(addr: u32, len: usize, max: usize) -> impl Iterator<Item = (u32, usize)> {
    (0..len).step_by(max.max(1)).map(move |off| (addr.wrapping_add(off as u32), max.min(len - off)))
}
