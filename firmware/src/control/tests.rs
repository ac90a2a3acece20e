//! Host tests of the control server: every command, every refusal, decoder errors, and a
//! randomized stream of 100k valid and mutated frames.

use super::*;
use std::vec::Vec as StdVec;
use ws_common::ctrl::cmd::{decode_response, encode_request, Window, MAX_POKE};
use ws_common::ctrl::MAX_PAYLOAD;
use ws_common::regmap::{map, BLOCKS};

use crate::layout::{SCRATCH_BASE, SCRATCH_LEN};

/// An in-memory board: ROM and RAM as word arrays, plus a record of what was asked of it.
pub(crate) struct FakeBoard {
    windows: Windows,
    rom: StdVec<u32>,
    ram: StdVec<u32>,
    reads: usize,
    pub(crate) writes: StdVec<(u32, u32)>,
    record_writes: bool,
    pub(crate) echoes: StdVec<(u32, i16)>,
    clocks: Clocks,
}

impl FakeBoard {
    pub(crate) fn new() -> Self {
        let rom = (0..map::BOOTROM_SIZE / 4).map(|i| 0xb007_0000 | i).collect();
        let ram = (0..map::RAM_SIZE / 4).map(|i| 0x5a5a_0000 ^ i.wrapping_mul(0x9e37_79b9)).collect();
        Self {
            windows: full_windows(),
            rom,
            ram,
            reads: 0,
            writes: StdVec::new(),
            record_writes: true,
            echoes: StdVec::new(),
            clocks: Clocks {
                mcycle: 0x1_0000_0002,
                mtime: 0x3_0000_0004,
                timer_ticks: 1234,
                tick_period: 50_000,
            },
        }
    }

    fn word(&mut self, addr: u32) -> &mut u32 {
        assert_eq!(addr % 4, 0, "unaligned access at {addr:#x}");
        if let Some(off) = addr.checked_sub(map::RAM_BASE).filter(|o| *o < map::RAM_SIZE) {
            &mut self.ram[(off / 4) as usize]
        } else if addr < map::BOOTROM_SIZE {
            &mut self.rom[(addr / 4) as usize]
        } else {
            panic!("access outside ROM and RAM at {addr:#x}")
        }
    }
}

impl Board for FakeBoard {
    unsafe fn read_word(&mut self, addr: u32) -> u32 {
        assert!(self.windows.peek_allowed(addr, 4), "read outside the peek window at {addr:#x}");
        self.reads += 1;
        *self.word(addr)
    }
    unsafe fn write_word(&mut self, addr: u32, value: u32) {
        assert!(self.windows.poke_allowed(addr, 4), "write outside the poke window at {addr:#x}");
        if self.record_writes {
            self.writes.push((addr, value));
        }
        *self.word(addr) = value;
    }
    fn clocks(&mut self) -> Clocks {
        self.clocks
    }
    fn log_echo(&mut self, value: u32, tag: i16) {
        self.echoes.push((value, tag));
    }
}

fn full_windows() -> Windows {
    Windows::new(map::BOOTROM_SIZE, map::RAM_SIZE)
}

fn sysinfo() -> SysInfo {
    SysInfo {
        build_hash: 0xfeed_beef,
        clk_hz: 50_000_000,
        rom_bytes: map::BOOTROM_SIZE,
        ram_bytes: map::RAM_SIZE,
        slots: BLOCKS.iter().fold(0, |m, b| m | 1 << b.slot),
    }
}

fn id_word(slot: u8) -> u32 {
    let b = BLOCKS.iter().find(|b| b.slot == slot as u32).expect("populated slot");
    (b.id as u32) << 16 | (b.major as u32) << 8 | b.minor as u32
}

pub(crate) fn controller() -> Controller {
    let sys = sysinfo();
    let blocks = discover_blocks(sys.slots, id_word);
    let info = identity([1, 2, 3], &sys, &full_windows(), 1000, &blocks);
    Controller::new(info, full_windows())
}

fn server() -> Server {
    Server::new(controller())
}

/// Feeds `bytes` and returns every reply frame sent, plus the last action.
fn feed(s: &mut Server, b: &mut FakeBoard, bytes: &[u8]) -> (StdVec<StdVec<u8>>, Action) {
    let mut out = StdVec::new();
    let mut action = Action::Continue;
    for &byte in bytes {
        action = s.receive(byte, b, &mut |r: &[u8]| out.push(r.to_vec()));
        if action == Action::Reset {
            break;
        }
    }
    (out, action)
}

/// A parsed reply frame.
#[derive(Debug)]
struct Parsed {
    opcode: u8,
    req_id: u16,
    payload: StdVec<u8>,
}

/// Decodes one reply; it must be exactly one valid frame.
fn parse(bytes: &[u8]) -> Parsed {
    let mut d = FrameDecoder::new();
    let mut got = None;
    for (i, &byte) in bytes.iter().enumerate() {
        match d.feed(byte) {
            Event::Pending => {}
            Event::Frame(f) => {
                assert_eq!(i + 1, bytes.len(), "reply has bytes after its frame");
                assert!(got.is_none());
                got = Some(Parsed { opcode: f.opcode, req_id: f.req_id, payload: f.payload.to_vec() });
            }
            Event::Error(e) => panic!("reply does not decode: {e:?}"),
        }
    }
    got.expect("reply is a complete frame")
}

fn frame<'a, C: Command<'a>>(cmd: &C, id: u16) -> StdVec<u8> {
    let mut buf = [0u8; MAX_FRAME];
    let n = encode_request(cmd, id, &mut buf).unwrap();
    buf[..n].to_vec()
}

fn raw(op: u8, id: u16, payload: &[u8]) -> StdVec<u8> {
    let mut buf = [0u8; MAX_FRAME];
    let n = encode_frame(op, id, payload, &mut buf).unwrap();
    buf[..n].to_vec()
}

/// Sends one request and returns its single reply, checking opcode and id.
fn ask(s: &mut Server, b: &mut FakeBoard, req: &[u8]) -> Parsed {
    let (replies, _) = feed(s, b, req);
    assert_eq!(replies.len(), 1, "one request, one reply");
    let p = parse(&replies[0]);
    assert_eq!(p.opcode, req[3] | RESPONSE_BIT);
    assert_eq!(p.req_id, u16::from_le_bytes([req[4], req[5]]));
    p
}

fn status(p: &Parsed) -> Status {
    Status::from_u8(p.payload[0])
}

#[test]
fn ping_echoes_the_nonce() {
    let (mut s, mut b) = (server(), FakeBoard::new());
    let p = ask(&mut s, &mut b, &frame(&Ping { nonce: 0xdead_beef }, 7));
    assert_eq!(decode_response::<Ping>(&p.payload), Ok(0xdead_beef));
    assert_eq!(s.controller().counters(), Counters { frames_ok: 1, frames_bad: 0, refused: 0 });
}

#[test]
fn wrong_payload_lengths_are_refused() {
    let (mut s, mut b) = (server(), FakeBoard::new());
    let cases: &[(u8, &[u8])] = &[
        (opcode::PING, &[1, 2, 3]),
        (opcode::PING, &[1, 2, 3, 4, 5]),
        (opcode::IDENTITY, &[0]),
        (opcode::PEEK, &[0, 0, 0, 0x10, 4]),
        (opcode::PEEK, &[0, 0, 0, 0x10, 4, 0, 0]),
        (opcode::POKE, &[0, 0xf0, 3]),
        (opcode::RESET, &[1]),
        (opcode::STATS, &[0, 0]),
        (opcode::LOG_ECHO, &[1, 2, 3, 4, 5]),
    ];
    for (k, (op, payload)) in cases.iter().enumerate() {
        let p = ask(&mut s, &mut b, &raw(*op, k as u16, payload));
        assert_eq!(p.payload, [Status::BadLength as u8], "opcode {op:#x} payload {payload:?}");
    }
    let c = s.controller().counters();
    assert_eq!((c.frames_ok, c.refused), (cases.len() as u32, cases.len() as u32));
    assert_eq!((b.reads, b.writes.len(), b.echoes.len()), (0, 0, 0), "nothing executed");
}

#[test]
fn identity_reports_board_and_windows() {
    let (mut s, mut b) = (server(), FakeBoard::new());
    let p = ask(&mut s, &mut b, &frame(&Identity, 1));
    let info = decode_response::<Identity>(&p.payload).unwrap();
    assert_eq!(info.fw_version, [1, 2, 3]);
    assert_eq!((info.build_hash, info.clk_hz, info.tick_hz), (0xfeed_beef, 50_000_000, 1000));
    assert_eq!(info.rom, Window { base: 0, len: 8192 });
    assert_eq!(info.ram, Window { base: 0x1000_0000, len: 0x4_0000 });
    assert_eq!(info.peek, Window { base: 0x1000_0000, len: 0x4_0000 });
    assert_eq!(info.poke, Window { base: SCRATCH_BASE, len: SCRATCH_LEN });
    assert_eq!(info.blocks().len(), BLOCKS.len());
    for (got, want) in info.blocks().iter().zip(BLOCKS) {
        assert_eq!(
            (got.slot as u32, got.id, got.major, got.minor),
            (want.slot, want.id, want.major, want.minor)
        );
    }
}

#[test]
fn blocks_are_discovered_in_slot_order() {
    let blocks = discover_blocks(1 << 31 | 1 << 4 | 1, |slot| 0x1234_0000 | (slot as u32) << 8 | 7);
    let got: StdVec<_> = blocks.iter().map(|b| (b.slot, b.id, b.major, b.minor)).collect();
    assert_eq!(got, [(0, 0x1234, 0, 7), (4, 0x1234, 4, 7), (31, 0x1234, 31, 7)]);
    assert_eq!(discover_blocks(u32::MAX, |_| 0).len(), MAX_BLOCKS);
    assert!(discover_blocks(0, |_| panic!("no slot to read")).is_empty());
    // An identity with every slot populated still encodes.
    let all = discover_blocks(u32::MAX, |s| s as u32);
    let info = identity([0; 3], &sysinfo(), &full_windows(), 0, &all);
    let mut s = Server::new(Controller::new(info, full_windows()));
    let p = ask(&mut s, &mut FakeBoard::new(), &frame(&Identity, 2));
    assert_eq!(decode_response::<Identity>(&p.payload).unwrap().num_blocks, 32);
}

#[test]
fn peek_reads_ram_and_rom() {
    let (mut s, mut b) = (server(), FakeBoard::new());
    for (addr, len) in [(0x1000_0000, 4), (0x1000_0100, 64), (0x1003_fffc, 4), (0, 512), (0x1ffc, 4)] {
        let p = ask(&mut s, &mut b, &frame(&Peek { addr, len }, 3));
        let data = decode_response::<Peek>(&p.payload).unwrap();
        let want: StdVec<u8> = (0..len as u32 / 4).flat_map(|i| b.word(addr + 4 * i).to_le_bytes()).collect();
        assert_eq!(data, &want[..], "peek {addr:#x}+{len}");
    }
    // The largest peek fits one reply.
    let p = ask(&mut s, &mut b, &frame(&Peek { addr: 0x1000_0000, len: MAX_PEEK as u16 }, 4));
    assert_eq!(decode_response::<Peek>(&p.payload).unwrap().len(), MAX_PEEK);
    assert_eq!(s.controller().counters().refused, 0);
}

#[test]
fn peek_refusals() {
    let (mut s, mut b) = (server(), FakeBoard::new());
    let cases: &[(u32, u16, Status)] = &[
        (0x1000_0000, 0, Status::BadLength),
        (0x1000_0000, MAX_PEEK as u16 + 4, Status::BadLength),
        (0x1000_0000, u16::MAX, Status::BadLength),
        (0x1000_0001, 4, Status::Misaligned),
        (0x1000_0002, 8, Status::Misaligned),
        (0x1000_0000, 6, Status::Misaligned),
        (0x1000_0000, 1, Status::Misaligned),
        (0x1003_fffc, 8, Status::OutOfWindow),
        (0x1004_0000, 4, Status::OutOfWindow),
        (0x0fff_fffc, 8, Status::OutOfWindow),
        (0x1ffc, 8, Status::OutOfWindow),
        (0x2000, 4, Status::OutOfWindow),
        (map::DEBUG_BASE, 4, Status::OutOfWindow),
        (map::PERIPH_BASE, 4, Status::OutOfWindow),
        (map::PERIPH_BASE + 0x4008, 4, Status::OutOfWindow),
        (map::WEIGHTS_BASE, 4, Status::OutOfWindow),
        (0xffff_fffc, 8, Status::OutOfWindow),
        (0xffff_fffc, 4, Status::OutOfWindow),
    ];
    for &(addr, len, want) in cases {
        let p = ask(&mut s, &mut b, &frame(&Peek { addr, len }, 9));
        assert_eq!(p.payload, [want as u8], "peek {addr:#x}+{len}");
        assert_eq!(decode_response::<Peek>(&p.payload), Err(want));
    }
    assert_eq!(b.reads, 0, "no refused peek touched the bus");
    assert_eq!(s.controller().counters().refused, cases.len() as u32);
}

#[test]
fn poke_writes_scratch_only() {
    let (mut s, mut b) = (server(), FakeBoard::new());
    let data: StdVec<u8> = (0..16u8).collect();
    let p = ask(&mut s, &mut b, &frame(&Poke { addr: SCRATCH_BASE + 0x10, data: &data }, 5));
    assert_eq!(decode_response::<Poke<'_>>(&p.payload), Ok(()));
    assert_eq!(
        b.writes,
        [
            (SCRATCH_BASE + 0x10, 0x0302_0100),
            (SCRATCH_BASE + 0x14, 0x0706_0504),
            (SCRATCH_BASE + 0x18, 0x0b0a_0908),
            (SCRATCH_BASE + 0x1c, 0x0f0e_0d0c)
        ]
    );
    // Peek sees it.
    let p = ask(&mut s, &mut b, &frame(&Peek { addr: SCRATCH_BASE + 0x10, len: 16 }, 6));
    assert_eq!(decode_response::<Peek>(&p.payload).unwrap(), &data[..]);
    // The largest poke fills the window from its start.
    let big = vec![0xa5u8; MAX_POKE];
    let p = ask(&mut s, &mut b, &frame(&Poke { addr: SCRATCH_BASE, data: &big }, 7));
    assert_eq!(status(&p), Status::Ok);
    assert_eq!(b.writes.len(), 4 + MAX_POKE / 4);
}

#[test]
fn poke_refusals() {
    let (mut s, mut b) = (server(), FakeBoard::new());
    let w = [0u8; 8];
    let cases: &[(u32, &[u8], Status)] = &[
        (SCRATCH_BASE, &[], Status::BadLength),
        (SCRATCH_BASE + 1, &w[..4], Status::Misaligned),
        (SCRATCH_BASE, &w[..3], Status::Misaligned),
        (SCRATCH_BASE, &w[..5], Status::Misaligned),
        (SCRATCH_BASE - 4, &w[..8], Status::OutOfWindow),
        (SCRATCH_BASE + SCRATCH_LEN - 4, &w[..8], Status::OutOfWindow),
        (SCRATCH_BASE + SCRATCH_LEN, &w[..4], Status::OutOfWindow),
        (map::RAM_BASE, &w[..4], Status::OutOfWindow),
        (0, &w[..4], Status::OutOfWindow),
        (map::PERIPH_BASE + 0x1c, &w[..4], Status::OutOfWindow),
        (0xffff_fffc, &w[..8], Status::OutOfWindow),
    ];
    for &(addr, data, want) in cases {
        let p = ask(&mut s, &mut b, &frame(&Poke { addr, data }, 11));
        assert_eq!(p.payload, [want as u8], "poke {addr:#x}+{}", data.len());
    }
    assert!(b.writes.is_empty(), "no refused poke touched the bus");
    // A board whose RAM does not reach the scratch window has no poke window at all.
    let small = Windows::new(map::BOOTROM_SIZE, 64 * 1024);
    let mut s = Server::new(Controller::new(identity([0; 3], &sysinfo(), &small, 0, &[]), small));
    let p = ask(&mut s, &mut b, &frame(&Poke { addr: SCRATCH_BASE, data: &w[..4] }, 12));
    assert_eq!(status(&p), Status::OutOfWindow);
}

#[test]
fn reset_is_acknowledged_before_acting() {
    let (mut s, mut b) = (server(), FakeBoard::new());
    let mut stream = frame(&Reset, 21);
    stream.extend(frame(&Ping { nonce: 1 }, 22));
    let (replies, action) = feed(&mut s, &mut b, &stream);
    assert_eq!(action, Action::Reset);
    assert_eq!(replies.len(), 1, "nothing after the reset acknowledgement");
    let p = parse(&replies[0]);
    assert_eq!((p.opcode, p.req_id, p.payload.as_slice()), (opcode::RESET | RESPONSE_BIT, 21, &[0u8][..]));
    // A malformed reset is refused and does not reset.
    let (mut s, mut b) = (server(), FakeBoard::new());
    let (replies, action) = feed(&mut s, &mut b, &raw(opcode::RESET, 23, &[0]));
    assert_eq!(action, Action::Continue);
    assert_eq!(status(&parse(&replies[0])), Status::BadLength);
}

#[test]
fn stats_combine_board_clocks_and_counters() {
    let (mut s, mut b) = (server(), FakeBoard::new());
    feed(&mut s, &mut b, &raw(0x55, 1, &[]));
    feed(&mut s, &mut b, b"WS\x01\x01\x00\x00\x00\x00junk");
    let p = ask(&mut s, &mut b, &frame(&Stats, 2));
    let st = decode_response::<Stats>(&p.payload).unwrap();
    assert_eq!(
        st,
        StatsInfo {
            mcycle: 0x1_0000_0002,
            mtime: 0x3_0000_0004,
            timer_ticks: 1234,
            tick_period: 50_000,
            frames_ok: 2,
            frames_bad: 1,
            refused: 1,
        }
    );
}

#[test]
fn log_echo_reaches_the_board() {
    let (mut s, mut b) = (server(), FakeBoard::new());
    let p = ask(&mut s, &mut b, &frame(&LogEcho { value: 0xcafe_f00d, tag: -12345 }, 3));
    assert_eq!(decode_response::<LogEcho>(&p.payload), Ok(()));
    assert_eq!(b.echoes, [(0xcafe_f00d, -12345)]);
}

#[test]
fn unknown_opcodes_are_refused() {
    let (mut s, mut b) = (server(), FakeBoard::new());
    for op in [0x00, 0x08, 0x42, 0x7f] {
        let p = ask(&mut s, &mut b, &raw(op, 0xbeef, b"whatever"));
        assert_eq!(p.payload, [Status::UnknownOpcode as u8], "opcode {op:#x}");
    }
    assert_eq!(s.controller().counters().refused, 4);
}

#[test]
fn responses_are_never_answered() {
    let (mut s, mut b) = (server(), FakeBoard::new());
    for op in [0x80, 0x81, 0xfe, FRAME_ERROR_OPCODE] {
        let (replies, _) = feed(&mut s, &mut b, &raw(op, 1, &[0]));
        assert!(replies.is_empty(), "opcode {op:#x} answered");
    }
    assert_eq!(s.controller().counters(), Counters { frames_ok: 4, frames_bad: 0, refused: 0 });
}

#[test]
fn decoder_errors_are_reported_and_the_stream_resyncs() {
    let (mut s, mut b) = (server(), FakeBoard::new());
    let mut bad_crc = frame(&Ping { nonce: 5 }, 1);
    bad_crc[9] ^= 1;
    let bad_version = [b'W', b'S', 9, 1, 0, 0, 0, 0];
    let too_long = [b'W', b'S', VERSION, 1, 0, 0, 0x01, 0x04];
    let mut stream = b"noise".to_vec();
    stream.extend(&bad_crc);
    stream.extend(bad_version);
    stream.extend(too_long);
    stream.extend(frame(&Ping { nonce: 6 }, 2));
    let (replies, _) = feed(&mut s, &mut b, &stream);
    let parsed: StdVec<_> = replies.iter().map(|r| parse(r)).collect();
    let summary: StdVec<_> = parsed.iter().map(|p| (p.opcode, p.req_id, p.payload.clone())).collect();
    assert_eq!(
        summary,
        [
            (FRAME_ERROR_OPCODE, 0, vec![Status::BadCrc as u8, VERSION]),
            (FRAME_ERROR_OPCODE, 0, vec![Status::BadVersion as u8, VERSION]),
            (FRAME_ERROR_OPCODE, 0, vec![Status::FrameTooLong as u8, VERSION]),
            (opcode::PING | RESPONSE_BIT, 2, vec![0, 6, 0, 0, 0]),
        ]
    );
    assert_eq!(s.controller().counters(), Counters { frames_ok: 1, frames_bad: 3, refused: 0 });
}

/// xorshift64*: a small deterministic generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn u32(&mut self) -> u32 {
        self.next() as u32
    }
}

/// An address that is often interesting: window edges, neighbours, or anything at all.
fn addr(r: &mut Rng) -> u32 {
    let edges = [
        0,
        map::BOOTROM_SIZE,
        map::RAM_BASE,
        SCRATCH_BASE,
        map::RAM_BASE + map::RAM_SIZE,
        map::PERIPH_BASE,
        map::DEBUG_BASE,
        0xffff_fffc,
    ];
    match r.below(4) {
        0 => r.u32(),
        _ => {
            let edge = edges[r.below(edges.len() as u64) as usize];
            let words = (r.below(64) as u32).wrapping_sub(32).wrapping_mul(4);
            let misalign = if r.chance(10) { r.below(4) as u32 } else { 0 };
            edge.wrapping_add(words).wrapping_add(misalign)
        }
    }
}

/// One request frame: mostly valid commands with random arguments, sometimes random payloads
/// and opcodes.
fn random_request(r: &mut Rng, id: u16) -> StdVec<u8> {
    match r.below(10) {
        0 => frame(&Ping { nonce: r.u32() }, id),
        1 => frame(&Identity, id),
        2 | 3 => {
            let len = if r.chance(50) { (r.below(64) * 4) as u16 } else { r.next() as u16 };
            frame(&Peek { addr: addr(r), len }, id)
        }
        4 | 5 => {
            let n =
                if r.chance(70) { r.below(65) as usize * 4 } else { r.below(MAX_POKE as u64 + 1) as usize };
            let data: StdVec<u8> = (0..n).map(|_| r.next() as u8).collect();
            frame(&Poke { addr: addr(r), data: &data }, id)
        }
        6 => frame(&Stats, id),
        7 => frame(&LogEcho { value: r.u32(), tag: r.next() as i16 }, id),
        8 => {
            let n = r.below(40) as usize;
            let p: StdVec<u8> = (0..n).map(|_| r.next() as u8).collect();
            raw(r.below(0x80) as u8, id, &p)
        }
        _ => {
            let n =
                if r.chance(90) { r.below(16) as usize } else { r.below(MAX_PAYLOAD as u64 + 1) as usize };
            let p: StdVec<u8> = (0..n).map(|_| r.next() as u8).collect();
            // Reset frames would end the stream; keep them out of the random mix.
            let op =
                [opcode::PING, opcode::IDENTITY, opcode::PEEK, opcode::POKE, opcode::STATS, opcode::LOG_ECHO]
                    [r.below(6) as usize];
            raw(op, id, &p)
        }
    }
}

/// Damages a frame the way a bad link would.
fn mutate(r: &mut Rng, f: &mut StdVec<u8>) {
    for _ in 0..=r.below(3) {
        match r.below(6) {
            0 => {
                let i = r.below(f.len() as u64) as usize;
                f[i] ^= 1 << r.below(8);
            }
            1 => {
                let keep = r.below(f.len() as u64) as usize;
                f.truncate(keep);
            }
            2 => {
                let i = r.below(f.len() as u64 + 1) as usize;
                let junk: StdVec<u8> = (0..r.below(12)).map(|_| r.next() as u8).collect();
                f.splice(i..i, junk);
            }
            3 if f.len() >= 8 => {
                // A plausible header with a hostile length (possibly past MAX_PAYLOAD).
                let len = r.next() as u16;
                f[6..8].copy_from_slice(&len.to_le_bytes());
            }
            4 if f.len() >= 4 => f[3] = r.next() as u8,
            _ => {
                f.splice(0..0, *b"WS");
            }
        }
        if f.is_empty() {
            return;
        }
    }
}

/// Checks that a reply is sane: one valid frame, a known status, and (when OK) a payload that
/// decodes as the command's response.
fn check_reply(bytes: &[u8]) -> Parsed {
    let p = parse(bytes);
    assert!(bytes.len() <= MAX_FRAME);
    let (&st, _) = p.payload.split_first().expect("every reply carries a status");
    let st = Status::from_u8(st);
    assert_ne!(st, Status::Unknown, "reply with an undefined status");
    // Request opcode 0x7f is answered with 0x7f | RESPONSE_BIT == FRAME_ERROR_OPCODE; the two
    // differ in payload length (one status byte vs. status + version).
    if p.opcode == FRAME_ERROR_OPCODE && p.payload.len() != 1 {
        assert_eq!(p.req_id, 0);
        assert_eq!(p.payload.len(), 2);
        assert_eq!(p.payload[1], VERSION);
        assert!(matches!(st, Status::BadCrc | Status::BadVersion | Status::FrameTooLong));
        return p;
    }
    assert!(p.opcode & RESPONSE_BIT != 0);
    if st != Status::Ok {
        assert_eq!(p.payload.len(), 1);
        return p;
    }
    match p.opcode & !RESPONSE_BIT {
        opcode::PING => assert!(decode_response::<Ping>(&p.payload).is_ok()),
        opcode::IDENTITY => assert!(decode_response::<Identity>(&p.payload).is_ok()),
        opcode::PEEK => {
            let data = decode_response::<Peek>(&p.payload).unwrap();
            assert!(!data.is_empty() && data.len() % 4 == 0 && data.len() <= MAX_PEEK);
        }
        opcode::POKE | opcode::LOG_ECHO => assert_eq!(p.payload.len(), 1),
        opcode::STATS => assert!(decode_response::<Stats>(&p.payload).is_ok()),
        other => panic!("OK reply to opcode {other:#x}"),
    }
    p
}

#[test]
fn random_valid_frames_get_exactly_one_sane_reply_each() {
    let (mut s, mut b) = (server(), FakeBoard::new());
    b.record_writes = false;
    let mut r = Rng(0x0123_4567_89ab_cdef);
    let mut ok = [0usize; 8];
    for n in 0..20_000u32 {
        let id = n as u16;
        let req = random_request(&mut r, id);
        let (replies, action) = feed(&mut s, &mut b, &req);
        assert_eq!(action, Action::Continue);
        assert_eq!(replies.len(), 1, "request {n} ({:#x})", req[3]);
        let p = check_reply(&replies[0]);
        assert_eq!((p.opcode, p.req_id), (req[3] | RESPONSE_BIT, id));
        if p.payload[0] == 0 {
            ok[(req[3] & 7) as usize] += 1;
        }
    }
    // The mix really exercised the successful paths, not only refusals.
    for op in [opcode::PING, opcode::IDENTITY, opcode::PEEK, opcode::POKE, opcode::STATS, opcode::LOG_ECHO] {
        assert!(ok[op as usize] > 100, "only {} successful {op:#x}", ok[op as usize]);
    }
    assert_eq!(s.controller().counters().frames_ok, 20_000);
}

#[test]
fn fuzz_100k_random_and_mutated_frames() {
    let (mut s, mut b) = (server(), FakeBoard::new());
    b.record_writes = false;
    let mut r = Rng(0x5eed_f00d_dead_beef);
    let mut stream_replies = 0usize;
    let mut frame_errors = 0usize;
    for n in 0..100_000u32 {
        let mut f = random_request(&mut r, n as u16);
        if r.chance(50) {
            mutate(&mut r, &mut f);
        }
        if r.chance(3) {
            // Pure noise between frames.
            let noise: StdVec<u8> = (0..r.below(40)).map(|_| r.next() as u8).collect();
            f.extend(noise);
        }
        for &byte in &f {
            let action = s.receive(byte, &mut b, &mut |reply: &[u8]| {
                let p = check_reply(reply);
                stream_replies += 1;
                if p.opcode == FRAME_ERROR_OPCODE && p.payload.len() == 2 {
                    frame_errors += 1;
                }
            });
            // A mutated opcode byte can turn any frame into a Reset; acknowledge and go on as
            // a freshly reset board would, with a new server.
            if action == Action::Reset {
                s = server();
            }
        }
    }
    assert!(stream_replies > 50_000, "only {stream_replies} replies");
    assert!(frame_errors > 1_000, "only {frame_errors} frame errors");
    // Trailing bytes of a partial frame are harmless; the counters are self-consistent.
    let c = s.controller().counters();
    assert!(c.refused <= c.frames_ok);
    eprintln!("fuzz: {stream_replies} replies, {frame_errors} frame errors, last server {c:?}");
}
