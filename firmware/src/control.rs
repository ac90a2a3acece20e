//! The control-command server: turns host-link bytes into replies.
//!
//! This is the firmware's half of `ws_common::ctrl`: a [`FrameDecoder`] feeds frames to a
//! [`Controller`], which checks every field the host controls, performs the command through a
//! [`Board`], and encodes the reply. Nothing here touches a register, so all of it runs in
//! host unit tests against a fake board; `crate::board` is the real one.
//!
//! Rules the host can rely on (docs/firmware.md has the table):
//! - every request frame (`0x00..=0x7f`) gets exactly one reply with the request's id;
//! - a frame the decoder rejects gets a [`FRAME_ERROR_OPCODE`] frame, id 0, payload
//!   `[status, VERSION]`;
//! - frames with the response bit set are not requests and get no reply (so a looped-back
//!   link cannot make the device answer its own answers forever);
//! - Peek/Poke are 4-byte aligned word accesses inside [`Windows`]; anything else is refused
//!   with `BadLength`, `Misaligned` or `OutOfWindow` before a single access is made.

use heapless::Vec;
use ws_common::ctrl::cmd::{
    encode_error, encode_response, opcode, BlockInfo, Identity, IdentityInfo, LogEcho, Peek, Ping, Poke,
    Reset, Stats, StatsInfo, MAX_BLOCKS, MAX_PEEK,
};
use ws_common::ctrl::{
    encode_frame, Command, DecodeError, Event, Frame, FrameDecoder, Status, FRAME_ERROR_OPCODE, MAX_FRAME,
    RESPONSE_BIT, VERSION,
};
use ws_common::link::control as v2;
use ws_common::regmap::split_id_word;

use crate::layout::Windows;

#[cfg(test)]
pub(crate) mod tests;

/// Bytes of one Peek reply buffer (the largest peek the protocol allows).
pub const PEEK_BUF_LEN: usize = MAX_PEEK;
/// Bytes of the reply frame buffer (the largest frame the protocol allows).
pub const REPLY_BUF_LEN: usize = MAX_FRAME;

/// What the controller needs from the board. The real implementation does volatile accesses
/// and reads CSRs; the tests use an in-memory fake.
pub trait Board {
    /// Loads the 32-bit word at `addr`.
    ///
    /// # Safety
    /// `addr` is 4-byte aligned and the word lies inside the peek window of the [`Windows`]
    /// the controller was built with; the controller checks both before calling.
    unsafe fn read_word(&mut self, addr: u32) -> u32;
    /// Stores the 32-bit word `value` at `addr`.
    ///
    /// # Safety
    /// `addr` is 4-byte aligned and the word lies inside the poke window; the controller
    /// checks both before calling.
    unsafe fn write_word(&mut self, addr: u32, value: u32);
    /// The core's and the timer's counters, for `Stats`.
    fn clocks(&mut self) -> Clocks;
    /// Emits the `LogEcho` log line with these values.
    fn log_echo(&mut self, value: u32, tag: i16);
}

/// Counters the board reads for `Stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Clocks {
    /// The core's `mcycle` CSR.
    pub mcycle: u64,
    /// The timer block's `mtime`.
    pub mtime: u64,
    /// Timer ticks since boot.
    pub timer_ticks: u32,
    /// Cycles per tick as programmed (0 if the tick is not running).
    pub tick_period: u32,
}

/// What the system-info block reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SysInfo {
    /// First 32 bits of the HDL build's SHA-256.
    pub build_hash: u32,
    /// Core clock in Hz.
    pub clk_hz: u32,
    /// Boot ROM size in bytes.
    pub rom_bytes: u32,
    /// RAM size in bytes.
    pub ram_bytes: u32,
    /// Bit n set: register slot n holds a block.
    pub slots: u32,
}

/// The blocks of the populated slots in `slots` (bit n = slot n), in slot order, identified by
/// the ID word that `id_word(slot)` reads at the slot's offset 0.
pub fn discover_blocks(slots: u32, mut id_word: impl FnMut(u8) -> u32) -> Vec<BlockInfo, MAX_BLOCKS> {
    let mut blocks = Vec::new();
    for slot in 0..32u8 {
        if slots & (1 << slot) != 0 {
            let (id, major, minor) = split_id_word(id_word(slot));
            // At most 32 slots, and MAX_BLOCKS is 32: the push cannot fail, but never panic.
            let _ = blocks.push(BlockInfo { slot, id, major, minor });
        }
    }
    blocks
}

/// Builds the `Identity` answer: firmware version, what the system-info block reports, the
/// access windows, the tick rate and the blocks found.
pub fn identity(
    fw_version: [u8; 3],
    sys: &SysInfo,
    windows: &Windows,
    tick_hz: u32,
    blocks: &[BlockInfo],
) -> IdentityInfo {
    let mut info = IdentityInfo {
        fw_version,
        build_hash: sys.build_hash,
        clk_hz: sys.clk_hz,
        rom: ws_common::ctrl::cmd::Window { base: windows.rom.base, len: sys.rom_bytes },
        ram: ws_common::ctrl::cmd::Window { base: windows.ram.base, len: sys.ram_bytes },
        peek: windows.ram,
        poke: windows.poke,
        tick_hz,
        num_blocks: 0,
        blocks: [BlockInfo::default(); MAX_BLOCKS],
    };
    for (dst, src) in info.blocks.iter_mut().zip(blocks) {
        *dst = *src;
        info.num_blocks += 1;
    }
    info
}

/// What the caller must do after sending a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Action {
    /// Keep serving.
    Continue,
    /// The reply acknowledged a `Reset`: drain the host link, then reset the board.
    Reset,
}

/// Control-plane counters reported by `Stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Counters {
    /// Well-formed frames received (requests and ignored responses).
    pub frames_ok: u32,
    /// Frames the decoder dropped (CRC, length, version).
    pub frames_bad: u32,
    /// Requests answered with a non-OK status.
    pub refused: u32,
}

/// One reply: the frame to send (possibly empty) and what to do afterwards.
#[derive(Debug, PartialEq, Eq)]
pub struct Reply<'a> {
    /// Encoded frame; empty when nothing is to be sent.
    pub bytes: &'a [u8],
    /// What the caller does once the bytes are sent.
    pub action: Action,
}

/// Executes control requests. Holds the identity found at boot, the access windows, the
/// counters and fixed reply buffers (no heap).
#[derive(Debug)]
pub struct Controller {
    identity: IdentityInfo,
    windows: Windows,
    counters: Counters,
    peek: [u8; PEEK_BUF_LEN],
    out: [u8; REPLY_BUF_LEN],
}

impl Controller {
    /// A controller that answers `Identity` with `identity` and allows Peek/Poke in `windows`.
    pub fn new(identity: IdentityInfo, windows: Windows) -> Self {
        Self {
            identity,
            windows,
            counters: Counters::default(),
            peek: [0; PEEK_BUF_LEN],
            out: [0; REPLY_BUF_LEN],
        }
    }

    /// The counters so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The identity this controller reports.
    pub fn identity(&self) -> &IdentityInfo {
        &self.identity
    }

    /// Answers one well-formed v1 frame with a v1 frame.
    pub fn handle_frame<B: Board>(&mut self, frame: &Frame<'_>, board: &mut B) -> Reply<'_> {
        self.handle(Wire::V1, frame, board)
    }

    /// Answers one link v2 control request (`opcode`, `req_id` and body from its control
    /// payload) with the response's control payload; the caller frames it on channel 1.
    pub fn handle_v2<B: Board>(&mut self, frame: &Frame<'_>, board: &mut B) -> Reply<'_> {
        self.handle(Wire::V2, frame, board)
    }

    fn handle<B: Board>(&mut self, wire: Wire, frame: &Frame<'_>, board: &mut B) -> Reply<'_> {
        self.counters.frames_ok = self.counters.frames_ok.wrapping_add(1);
        let (id, p) = (frame.req_id, frame.payload);
        let snapshot = self.counters;
        let out = &mut self.out[..];
        let refused = &mut self.counters.refused;
        let mut action = Action::Continue;
        let len = match frame.opcode {
            // Not a request: never answer an answer.
            op if op & RESPONSE_BIT != 0 => 0,
            opcode::PING => {
                let r = Ping::decode(p).map(|ping| ping.nonce);
                reply::<Ping>(wire, id, r.as_ref().map_err(|&s| s), out, refused)
            }
            opcode::IDENTITY => {
                let r = Identity::decode(p).map(|_| &self.identity);
                reply::<Identity>(wire, id, r, out, refused)
            }
            opcode::PEEK => {
                let r = Peek::decode(p).and_then(|peek| read(&self.windows, &mut self.peek, peek, board));
                reply::<Peek>(wire, id, r.as_ref().map_err(|&s| s), out, refused)
            }
            opcode::POKE => {
                let r = Poke::decode(p).and_then(|poke| write(&self.windows, poke, board));
                reply::<Poke<'_>>(wire, id, r.as_ref().map_err(|&s| s), out, refused)
            }
            opcode::RESET => {
                let r = Reset::decode(p).map(|_| ());
                if r.is_ok() {
                    action = Action::Reset;
                }
                reply::<Reset>(wire, id, r.as_ref().map_err(|&s| s), out, refused)
            }
            opcode::STATS => {
                let c = snapshot;
                let r = Stats::decode(p).map(|_| {
                    let clocks = board.clocks();
                    StatsInfo {
                        mcycle: clocks.mcycle,
                        mtime: clocks.mtime,
                        timer_ticks: clocks.timer_ticks,
                        tick_period: clocks.tick_period,
                        frames_ok: c.frames_ok,
                        frames_bad: c.frames_bad,
                        refused: c.refused,
                    }
                });
                reply::<Stats>(wire, id, r.as_ref().map_err(|&s| s), out, refused)
            }
            opcode::LOG_ECHO => {
                let r = LogEcho::decode(p).map(|echo| board.log_echo(echo.value, echo.tag));
                reply::<LogEcho>(wire, id, r.as_ref().map_err(|&s| s), out, refused)
            }
            unknown => {
                *refused = refused.wrapping_add(1);
                error(wire, unknown, id, Status::UnknownOpcode, out)
            }
        };
        Reply { bytes: self.out.get(..len).unwrap_or(&[]), action }
    }

    /// Reports a frame the decoder dropped: opcode [`FRAME_ERROR_OPCODE`], request id 0,
    /// payload `[status, VERSION]`.
    pub fn handle_decode_error(&mut self, err: DecodeError) -> Reply<'_> {
        self.counters.frames_bad = self.counters.frames_bad.wrapping_add(1);
        let len =
            encode_frame(FRAME_ERROR_OPCODE, 0, &[err.status() as u8, VERSION], &mut self.out).unwrap_or(0);
        Reply { bytes: self.out.get(..len).unwrap_or(&[]), action: Action::Continue }
    }
}

/// How a reply is encoded: a whole v1 frame, or a link v2 control payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    V1,
    V2,
}

/// Encodes the reply of command `C` into `out`, counting refusals. A reply that cannot be
/// encoded (which the buffer sizes rule out) degrades to an error reply, never a panic.
fn reply<'a, C: Command<'a>>(
    wire: Wire,
    req_id: u16,
    result: Result<&C::Response, Status>,
    out: &mut [u8],
    refused: &mut u32,
) -> usize {
    if result.is_err() {
        *refused = refused.wrapping_add(1);
    }
    let encoded = match wire {
        Wire::V1 => encode_response::<C>(req_id, result, out),
        Wire::V2 => v2::encode_response::<C>(req_id, result, out).map_err(|_| Status::BadLength),
    };
    encoded
        .or_else(|status| {
            if result.is_ok() {
                *refused = refused.wrapping_add(1);
            }
            Ok::<usize, Status>(error(wire, C::OPCODE, req_id, status, out))
        })
        .unwrap_or(0)
}

/// Encodes an error reply to `opcode`.
fn error(wire: Wire, opcode: u8, req_id: u16, status: Status, out: &mut [u8]) -> usize {
    match wire {
        Wire::V1 => encode_error(opcode, req_id, status, out).unwrap_or(0),
        Wire::V2 => v2::encode_error(opcode, req_id, status, out).unwrap_or(0),
    }
}

/// Checks a word access of `len` bytes at `addr`: non-empty, 4-byte aligned address and
/// length. Window checks come after, so a misaligned request never reaches the bus.
fn check_words(addr: u32, len: usize) -> Result<u32, Status> {
    if len == 0 {
        return Err(Status::BadLength);
    }
    let len = u32::try_from(len).map_err(|_| Status::BadLength)?;
    if addr % 4 != 0 || len % 4 != 0 {
        return Err(Status::Misaligned);
    }
    Ok(len)
}

/// Executes a checked Peek into `buf`, returning the bytes read.
fn read<'b, B: Board>(
    windows: &Windows,
    buf: &'b mut [u8],
    peek: Peek,
    board: &mut B,
) -> Result<&'b [u8], Status> {
    let len = check_words(peek.addr, peek.len as usize)?;
    if !windows.peek_allowed(peek.addr, len) {
        return Err(Status::OutOfWindow);
    }
    let data = buf.get_mut(..len as usize).ok_or(Status::BadLength)?;
    for (word, off) in data.chunks_exact_mut(4).zip((0u32..).step_by(4)) {
        // SAFETY: the whole range is aligned and inside the peek window (checked above).
        let v = unsafe { board.read_word(peek.addr.wrapping_add(off)) };
        word.copy_from_slice(&v.to_le_bytes());
    }
    Ok(data)
}

/// Executes a checked Poke.
fn write<B: Board>(windows: &Windows, poke: Poke<'_>, board: &mut B) -> Result<(), Status> {
    let len = check_words(poke.addr, poke.data.len())?;
    if !windows.poke_allowed(poke.addr, len) {
        return Err(Status::OutOfWindow);
    }
    for (word, off) in poke.data.chunks_exact(4).zip((0u32..).step_by(4)) {
        let v = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        // SAFETY: the whole range is aligned and inside the poke window (checked above).
        unsafe { board.write_word(poke.addr.wrapping_add(off), v) };
    }
    Ok(())
}

/// The whole receive path: bytes in, replies out.
#[derive(Debug)]
pub struct Server {
    decoder: FrameDecoder,
    ctrl: Controller,
}

impl Server {
    /// A server around `ctrl`.
    pub fn new(ctrl: Controller) -> Self {
        Self { decoder: FrameDecoder::new(), ctrl }
    }

    /// The controller (for its counters and identity).
    pub fn controller(&self) -> &Controller {
        &self.ctrl
    }

    /// The controller, to run link v2 requests with (crate::link).
    pub fn controller_mut(&mut self) -> &mut Controller {
        &mut self.ctrl
    }

    /// Takes one byte from the host link and sends, through `tx`, every reply it completes.
    /// Returns [`Action::Reset`] right after sending a `Reset` acknowledgement; the caller
    /// then resets the board and the rest of the stream is dropped with it.
    pub fn receive<B: Board>(&mut self, byte: u8, board: &mut B, tx: &mut impl FnMut(&[u8])) -> Action {
        // `push` only refuses a byte if `poll` was skipped for a whole frame; we poll below.
        self.decoder.push(byte);
        loop {
            let reply = match self.decoder.poll() {
                Event::Pending => return Action::Continue,
                Event::Frame(frame) => self.ctrl.handle_frame(&frame, board),
                // A link v2 frame: the v2 server (crate::link) answers it.
                Event::Error(DecodeError::BadVersion(v)) if v == ws_common::link::VERSION => continue,
                Event::Error(err) => self.ctrl.handle_decode_error(err),
            };
            if !reply.bytes.is_empty() {
                tx(reply.bytes);
            }
            if reply.action == Action::Reset {
                return Action::Reset;
            }
        }
    }
}
