//! The in-memory link and a fake board behind it, for tests without a simulator.
//!
//! [`FakeLink`] hands every byte the host sends to a [`FakeDevice`] (a closure or a
//! [`FakeBoard`]) and queues what the device answers for [`Transport::recv`]. The device
//! answers synchronously, so there is no waiting: `recv` with nothing queued returns 0 at
//! once, as a real link would after its timeout.

use std::collections::{BTreeMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ws_common::ctrl::cmd::{
    encode_error, encode_response, opcode, BlockInfo, Identity, IdentityInfo, LogEcho, Peek, Ping, Poke,
    Reset, Stats, StatsInfo, Window, MAX_BLOCKS,
};
use ws_common::ctrl::{
    encode_frame, Command, Event, Frame, FrameDecoder, Status, FRAME_ERROR_OPCODE, MAX_FRAME, RESPONSE_BIT,
    VERSION,
};
use ws_common::regmap::{map, BLOCKS};

use super::Transport;
use crate::error::{Result, TransportError};

/// The device side of a [`FakeLink`]: receives what the host sent and appends its answer.
pub trait FakeDevice: Send {
    /// Handles `bytes` from the host, appending any bytes for the host to `reply`.
    fn receive(&mut self, bytes: &[u8], reply: &mut Vec<u8>);
}

impl<F: FnMut(&[u8], &mut Vec<u8>) + Send> FakeDevice for F {
    fn receive(&mut self, bytes: &[u8], reply: &mut Vec<u8>) {
        self(bytes, reply)
    }
}

#[derive(Debug, Default)]
struct Wire {
    /// Every byte the host sent.
    sent: Vec<u8>,
    /// Bytes queued for the host.
    to_host: VecDeque<u8>,
    /// The device panicked; the link is dead.
    gone: bool,
}

/// An in-memory [`Transport`] whose device side is test code.
pub struct FakeLink {
    wire: Arc<Mutex<Wire>>,
    device: Box<dyn FakeDevice>,
}

impl std::fmt::Debug for FakeLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeLink").field("wire", &self.wire).finish_non_exhaustive()
    }
}

/// A test's view of a [`FakeLink`] after the link moved into a client: inject bytes, read
/// what was sent.
#[derive(Debug, Clone)]
pub struct FakeHandle {
    wire: Arc<Mutex<Wire>>,
}

fn lock(wire: &Mutex<Wire>) -> MutexGuard<'_, Wire> {
    wire.lock().unwrap_or_else(|p| p.into_inner())
}

impl FakeLink {
    /// A link to `device`.
    pub fn new(device: impl FakeDevice + 'static) -> Self {
        Self { wire: Arc::default(), device: Box::new(device) }
    }

    /// A handle to the wire, usable after the link moved into a client.
    pub fn handle(&self) -> FakeHandle {
        FakeHandle { wire: Arc::clone(&self.wire) }
    }
}

impl FakeHandle {
    /// Queues `bytes` for the host, as if the device had sent them unasked.
    pub fn inject(&self, bytes: &[u8]) {
        lock(&self.wire).to_host.extend(bytes);
    }

    /// Every byte the host has sent so far.
    pub fn sent(&self) -> Vec<u8> {
        lock(&self.wire).sent.clone()
    }

    /// Bytes queued for the host and not read yet.
    pub fn pending(&self) -> usize {
        lock(&self.wire).to_host.len()
    }
}

impl Transport for FakeLink {
    fn send(&mut self, bytes: &[u8]) -> Result<()> {
        let mut wire = lock(&self.wire);
        if wire.gone {
            return Err(TransportError::FakeDeviceGone { peer: self.describe() }.into());
        }
        wire.sent.extend_from_slice(bytes);
        drop(wire);
        let mut reply = Vec::new();
        let device = &mut self.device;
        if catch_unwind(AssertUnwindSafe(|| device.receive(bytes, &mut reply))).is_err() {
            lock(&self.wire).gone = true;
            return Err(TransportError::FakeDeviceGone { peer: self.describe() }.into());
        }
        lock(&self.wire).to_host.extend(reply);
        Ok(())
    }

    fn send_parts(&mut self, parts: &[&[u8]]) -> Result<()> {
        // One device call per frame, as a real link would deliver it in one piece.
        self.send(&parts.concat())
    }

    fn recv(&mut self, buf: &mut [u8], _timeout: Duration) -> Result<usize> {
        let mut wire = lock(&self.wire);
        if wire.gone && wire.to_host.is_empty() {
            return Err(TransportError::FakeDeviceGone { peer: self.describe() }.into());
        }
        let n = buf.len().min(wire.to_host.len());
        for (dst, src) in buf.iter_mut().zip(wire.to_host.drain(..n)) {
            *dst = src;
        }
        Ok(n)
    }

    fn describe(&self) -> String {
        "fake link".into()
    }
}

/// Counters and records a [`FakeBoard`] keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeBoardLog {
    /// Well-formed frames received.
    pub frames_ok: u32,
    /// Frames the decoder dropped.
    pub frames_bad: u32,
    /// Requests refused.
    pub refused: u32,
    /// Resets acknowledged.
    pub resets: u32,
    /// `(value, tag)` of every `LogEcho`.
    pub echoes: Vec<(u32, i16)>,
}

#[derive(Debug)]
struct BoardState {
    decoder: FrameDecoder,
    identity: IdentityInfo,
    /// Word-addressed memory; unwritten words read as a pattern of their address.
    words: BTreeMap<u32, u32>,
    log: FakeBoardLog,
    mcycle: u64,
    mute: bool,
}

/// An in-memory board that answers the control protocol as the firmware does
/// (docs/firmware.md): the same windows, refusals and frame-error reports, over the
/// `ws_common` codec. Clones share one board, so a test keeps a clone to inspect it.
#[derive(Debug, Clone)]
pub struct FakeBoard {
    state: Arc<Mutex<BoardState>>,
}

impl Default for FakeBoard {
    fn default() -> Self {
        Self::new()
    }
}

/// The poke window the firmware opens: the top 4 KiB of RAM.
pub const FAKE_SCRATCH: Window = Window { base: map::RAM_BASE + map::RAM_SIZE - 4096, len: 4096 };

impl FakeBoard {
    /// A board with the SoC map's memories, every block the SoC instantiates at the version
    /// the host was built for, a 50 MHz clock and a 1 kHz tick.
    pub fn new() -> Self {
        let mut blocks = [BlockInfo::default(); MAX_BLOCKS];
        let in_soc = || BLOCKS.iter().filter(|b| b.in_soc);
        for (dst, b) in blocks.iter_mut().zip(in_soc()) {
            *dst = BlockInfo { slot: b.slot as u8, id: b.id, major: b.major, minor: b.minor };
        }
        let identity = IdentityInfo {
            fw_version: [0, 1, 0],
            build_hash: 0x1234_abcd,
            clk_hz: 50_000_000,
            rom: Window { base: map::BOOTROM_BASE, len: map::BOOTROM_SIZE },
            ram: Window { base: map::RAM_BASE, len: map::RAM_SIZE },
            peek: Window { base: map::RAM_BASE, len: map::RAM_SIZE },
            poke: FAKE_SCRATCH,
            tick_hz: 1000,
            num_blocks: in_soc().count().min(MAX_BLOCKS) as u8,
            blocks,
        };
        Self::with_identity(identity)
    }

    /// A board that reports `identity` and allows peek/poke in its windows.
    pub fn with_identity(identity: IdentityInfo) -> Self {
        let state = BoardState {
            decoder: FrameDecoder::new(),
            identity,
            words: BTreeMap::new(),
            log: FakeBoardLog::default(),
            mcycle: 0,
            mute: false,
        };
        Self { state: Arc::new(Mutex::new(state)) }
    }

    fn lock(&self) -> MutexGuard<'_, BoardState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counters and records so far.
    pub fn log(&self) -> FakeBoardLog {
        self.lock().log.clone()
    }

    /// While muted the board still decodes and counts but answers nothing, like hung
    /// firmware behind a live link.
    pub fn set_mute(&self, mute: bool) {
        self.lock().mute = mute;
    }

    /// The identity the board reports.
    pub fn identity(&self) -> IdentityInfo {
        self.lock().identity
    }

    /// Reads a word directly (no window check), as a debugger would.
    pub fn word(&self, addr: u32) -> u32 {
        let s = self.lock();
        s.words.get(&addr).copied().unwrap_or(!addr)
    }
}

impl FakeDevice for FakeBoard {
    fn receive(&mut self, bytes: &[u8], reply: &mut Vec<u8>) {
        let mut guard = self.lock();
        let s = &mut *guard;
        for &b in bytes {
            s.decoder.push(b);
            loop {
                let mut out = [0u8; MAX_FRAME];
                let n = match s.decoder.poll() {
                    Event::Pending => break,
                    Event::Frame(f) => {
                        s.log.frames_ok += 1;
                        answer(&f, &mut s.identity, &mut s.words, &mut s.log, &mut s.mcycle, &mut out)
                    }
                    Event::Error(e) => {
                        s.log.frames_bad += 1;
                        encode_frame(FRAME_ERROR_OPCODE, 0, &[e.status() as u8, VERSION], &mut out)
                            .unwrap_or(0)
                    }
                };
                if !s.mute {
                    reply.extend_from_slice(&out[..n]);
                }
            }
        }
    }
}

/// The firmware's checks for a word access: non-empty, aligned, inside `win`.
fn check(win: &Window, addr: u32, len: usize) -> std::result::Result<(), Status> {
    if len == 0 {
        return Err(Status::BadLength);
    }
    if addr % 4 != 0 || len % 4 != 0 {
        return Err(Status::Misaligned);
    }
    if win.len == 0 || !win.contains(addr, len as u32) {
        return Err(Status::OutOfWindow);
    }
    Ok(())
}

fn answer(
    f: &Frame<'_>,
    identity: &mut IdentityInfo,
    words: &mut BTreeMap<u32, u32>,
    log: &mut FakeBoardLog,
    mcycle: &mut u64,
    out: &mut [u8],
) -> usize {
    fn reply<'a, C: Command<'a>>(
        id: u16,
        r: std::result::Result<&C::Response, Status>,
        log: &mut FakeBoardLog,
        out: &mut [u8],
    ) -> usize {
        if r.is_err() {
            log.refused += 1;
        }
        encode_response::<C>(id, r, out).unwrap_or(0)
    }
    *mcycle += 10_000;
    let (id, p) = (f.req_id, f.payload);
    match f.opcode {
        op if op & RESPONSE_BIT != 0 => 0,
        opcode::PING => {
            reply::<Ping>(id, Ping::decode(p).map(|x| x.nonce).as_ref().map_err(|&s| s), log, out)
        }
        opcode::IDENTITY => reply::<Identity>(id, Identity::decode(p).map(|_| &*identity), log, out),
        opcode::PEEK => {
            let mut data = Vec::new();
            let r = Peek::decode(p).and_then(|pk| {
                let len = pk.len as usize;
                if check(&identity.peek, pk.addr, len).is_err() {
                    check(&identity.rom, pk.addr, len)?;
                }
                for a in (pk.addr..pk.addr + pk.len as u32).step_by(4) {
                    data.extend_from_slice(&words.get(&a).copied().unwrap_or(!a).to_le_bytes());
                }
                Ok(())
            });
            let slice: &[u8] = &data;
            reply::<Peek>(id, r.map(|_| &slice), log, out)
        }
        opcode::POKE => {
            let r = Poke::decode(p).and_then(|pk| {
                check(&identity.poke, pk.addr, pk.data.len())?;
                for (k, w) in pk.data.chunks_exact(4).enumerate() {
                    words.insert(pk.addr + 4 * k as u32, u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
                }
                Ok(())
            });
            reply::<Poke<'_>>(id, r.as_ref().map_err(|&s| s), log, out)
        }
        opcode::RESET => {
            let r = Reset::decode(p).map(|_| log.resets += 1);
            reply::<Reset>(id, r.as_ref().map_err(|&s| s), log, out)
        }
        opcode::STATS => {
            let snapshot = StatsInfo {
                mcycle: *mcycle,
                mtime: *mcycle,
                timer_ticks: (*mcycle / 50_000) as u32,
                tick_period: 50_000,
                frames_ok: log.frames_ok,
                frames_bad: log.frames_bad,
                refused: log.refused,
            };
            let r = Stats::decode(p).map(|_| snapshot);
            reply::<Stats>(id, r.as_ref().map_err(|&s| s), log, out)
        }
        opcode::LOG_ECHO => {
            let r = LogEcho::decode(p).map(|e| log.echoes.push((e.value, e.tag)));
            reply::<LogEcho>(id, r.as_ref().map_err(|&s| s), log, out)
        }
        unknown => {
            log.refused += 1;
            encode_error(unknown, id, Status::UnknownOpcode, out).unwrap_or(0)
        }
    }
}
