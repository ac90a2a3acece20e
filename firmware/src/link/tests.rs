//! Host tests of the v2 server: HELLO and version refusal, HELLO's channel state and channel
//! reset taken from the engine, control requests, the replay cache (retries never run a
//! command twice), v1 frames ignored, and random garbage.
//!
//! [`TestEngine`] stands in for the link engine's registers only: it records what the server
//! asks of it and encodes the frames the server sends, as the hardware's TX half would. The
//! engine itself is proven by `hdl/tests/link_*.rs` and, with this server, by the hil tests.

use super::*;
use crate::control::tests::{controller, FakeBoard};
use std::vec::Vec;
use ws_common::ctrl::cmd::{opcode, LogEcho, Ping, Poke};
use ws_common::ctrl::Status;
use ws_common::link::control::{decode_response, encode_request};
use ws_common::link::{encode_frame, frame_len, Decoder, Event, MAX_FRAME};

/// The engine's register view: channel state it reports, resets and parameters it was given,
/// and the bytes of every frame sent.
#[derive(Default)]
struct TestEngine {
    state: [ChannelState; CHANNELS],
    resets: Vec<[ChannelState; CHANNELS]>,
    negotiated: Option<(u32, u16)>,
    out: Vec<u8>,
}

impl Engine for TestEngine {
    fn channel_state(&self) -> [ChannelState; CHANNELS] {
        self.state
    }
    fn reset_channels(&mut self, host: &[ChannelState; CHANNELS]) {
        self.resets.push(*host);
        for s in &mut self.state {
            let credit = s.credit.wrapping_sub(s.rx_committed);
            *s = ChannelState { credit, ..ChannelState::default() };
        }
    }
    fn set_negotiated(&mut self, max_payload: u32, window: u16) {
        self.negotiated = Some((max_payload, window));
    }
    fn send(&mut self, h: &Header, payload: &[u8]) {
        let mut f = std::vec![0u8; frame_len(payload.len())];
        let n = encode_frame(&Header { length: payload.len() as u32, ..*h }, payload, &mut f).unwrap();
        self.out.extend_from_slice(&f[..n]);
    }
    fn window(&self) -> u16 {
        16
    }
    fn counter(&mut self, index: u8) -> u32 {
        0x1000 + index as u32
    }
}

fn frame(h: Header, payload: &[u8]) -> Vec<u8> {
    let mut out = std::vec![0u8; frame_len(payload.len())];
    let n = encode_frame(&Header { length: payload.len() as u32, ..h }, payload, &mut out).unwrap();
    out.truncate(n);
    out
}

fn hello(major: u8, resume: bool) -> Vec<u8> {
    let mut h = Hello::new(65536, 32);
    if resume {
        h.flags |= hello_flags::RESUME;
    }
    let mut p = h.encode();
    p[0] = major;
    frame(Header::new(Channel::Link, flags::HELLO), &p)
}

fn request<'a, C: ws_common::ctrl::Command<'a>>(cmd: &C, req_id: u16) -> Vec<u8> {
    let mut p = [0u8; MAX_CTRL_PAYLOAD];
    let n = encode_request(cmd, req_id, &mut p).unwrap();
    frame(Header::new(Channel::Control, flags::DATA), &p[..n])
}

struct Rig {
    server: LinkServer,
    ctrl: Controller,
    board: FakeBoard,
    engine: TestEngine,
}

impl Rig {
    fn new() -> Self {
        Rig {
            server: LinkServer::new(),
            ctrl: controller(),
            board: FakeBoard::new(),
            engine: TestEngine::default(),
        }
    }

    /// Feeds `bytes` in `chunk`-byte pieces; returns every frame sent back, decoded.
    fn feed(&mut self, bytes: &[u8], chunk: usize) -> (Vec<(Header, Vec<u8>)>, Action) {
        let mut action = Action::Continue;
        for c in bytes.chunks(chunk.max(1)) {
            let a =
                self.server.receive(c, &mut self.ctrl, &mut self.board, &mut self.engine, &mut NoDataPlane);
            if a == Action::Reset {
                action = a;
            }
        }
        let out = core::mem::take(&mut self.engine.out);
        let mut dec = std::boxed::Box::new(Decoder::<MAX_FRAME>::new());
        let mut frames = Vec::new();
        let mut rest = &out[..];
        loop {
            let r = dec.feed(rest);
            rest = &rest[r.consumed..];
            match r.event {
                Some(Event::Frame(f)) => frames.push((f.header, f.payload.to_vec())),
                Some(Event::Error(e)) => panic!("the firmware sent a bad frame: {e:?}"),
                None => break,
            }
        }
        (frames, action)
    }
}

#[test]
fn hello_resets_the_engine_and_reports_its_state() {
    let mut rig = Rig::new();
    // The engine has run a stream on channel 3 and offers 16 KiB windows on 2, 3, 4.
    for ch in [Channel::Weights, Channel::Gradients, Channel::Data] {
        rig.engine.state[ch.index()].credit = 16384;
    }
    let g = &mut rig.engine.state[Channel::Gradients.index()];
    (g.rx_expected, g.rx_committed, g.credit, g.tx_next) = (5, 4096, 20480, 7);
    let (out, _) = rig.feed(&hello(2, false), 7);
    assert_eq!(out.len(), 1);
    let (h, p) = &out[0];
    assert_eq!((h.channel, h.flags), (Channel::Link, flags::HELLO));
    let board = Hello::decode(p).unwrap();
    assert_eq!((board.major, board.max_payload, board.window, board.flags), (2, MAX_BULK, 16, 0));
    assert_eq!(rig.engine.negotiated, Some((MAX_BULK, 16)), "min of both offers");
    // A fresh HELLO restarted every stream with the host's credit, and reports the result.
    assert_eq!(rig.engine.resets.len(), 1);
    assert_eq!(rig.engine.resets[0][Channel::Trace.index()].credit, 0, "the host grants what its HELLO says");
    for ch in [Channel::Weights, Channel::Gradients, Channel::Data] {
        let s = board.channel(ch);
        assert_eq!((s.rx_expected, s.rx_committed, s.tx_next, s.credit), (0, 0, 0, 16384), "{ch:?}");
    }
    assert_eq!(board.channel(Channel::Log).credit, 0);
    assert_eq!(rig.server.counters().hellos, 1);

    // A retry of the same HELLO (same session) after streams started does not reset them.
    let mut retry = Hello::new(65536, 32);
    retry.session = 77;
    let retry = frame(Header::new(Channel::Link, flags::HELLO), &retry.encode());
    rig.feed(&retry, 1000);
    assert_eq!(rig.engine.resets.len(), 2, "a new session resets");
    rig.engine.state[Channel::Weights.index()].rx_committed = 4096;
    let (out, _) = rig.feed(&retry, 1000);
    assert_eq!(rig.engine.resets.len(), 2, "the same session's retry does not");
    assert_eq!(Hello::decode(&out[0].1).unwrap().channel(Channel::Weights).rx_committed, 4096);

    // RESUME keeps the engine's state and says so.
    let g = &mut rig.engine.state[Channel::Gradients.index()];
    (g.rx_expected, g.rx_committed, g.credit) = (9, 8192, 24576);
    let (out, _) = rig.feed(&hello(2, true), 1000);
    let board = Hello::decode(&out[0].1).unwrap();
    assert_eq!(board.flags, hello_flags::RESUME);
    assert_eq!(rig.engine.resets.len(), 2, "no reset on RESUME");
    assert_eq!(board.channel(Channel::Gradients).rx_committed, 8192);
}

#[test]
fn another_major_version_is_answered_with_hello_error_and_our_version() {
    let mut rig = Rig::new();
    let (out, _) = rig.feed(&hello(3, false), 1000);
    let (h, p) = &out[0];
    assert_eq!(h.flags, flags::HELLO | flags::ERROR);
    assert_eq!((p[0], p[1]), (2, 1), "the refusal carries the board's own version");
    assert_eq!(rig.server.counters().hello_refused, 1);
}

#[test]
fn control_requests_run_once_and_retries_replay() {
    let mut rig = Rig::new();
    rig.feed(&hello(2, false), 64);
    let (out, _) = rig.feed(&request(&Ping { nonce: 0xdead_beef }, 7), 3);
    let (h, p) = &out[0];
    assert_eq!((h.channel, h.flags), (Channel::Control, flags::DATA));
    let (resp, body) = CtrlHeader::decode(p).unwrap();
    assert_eq!((resp.opcode, resp.req_id), (opcode::PING | 0x80, 7));
    assert_eq!(decode_response::<Ping>(body), Ok(0xdead_beef));

    // A LogEcho retried three times (its answers lost) logs once and answers identically.
    let echo = request(&LogEcho { value: 42, tag: -3 }, 8);
    let first = rig.feed(&echo, 1000).0;
    for _ in 0..3 {
        assert_eq!(rig.feed(&echo, 5).0, first);
    }
    assert_eq!(rig.board.echoes, std::vec![(42, -3)]);
    assert_eq!(rig.server.counters().replays, 3);

    // The same id with another body is a new request.
    rig.feed(&request(&LogEcho { value: 43, tag: -3 }, 8), 1000);
    assert_eq!(rig.board.echoes.len(), 2);

    // A Poke retried after a reconnect with RESUME writes once; a fresh HELLO forgets.
    let addr = crate::layout::SCRATCH_BASE;
    let poke = request(&Poke { addr, data: &[1, 2, 3, 4] }, 9);
    rig.feed(&poke, 1000);
    rig.feed(&hello(2, true), 1000);
    rig.feed(&poke, 1000);
    assert_eq!(rig.board.writes.iter().filter(|w| w.0 == addr).count(), 1);
    rig.feed(&hello(2, false), 1000);
    rig.feed(&poke, 1000);
    assert_eq!(rig.board.writes.iter().filter(|w| w.0 == addr).count(), 2);
}

#[test]
fn link_counters_come_from_the_engine_and_bad_runs_are_refused() {
    let mut rig = Rig::new();
    let (out, _) = rig.feed(&request(&ws_common::ctrl::cmd::LinkCounters { first: 0x10, count: 3 }, 4), 9);
    let (resp, body) = CtrlHeader::decode(&out[0].1).unwrap();
    assert_eq!((resp.opcode, resp.req_id), (opcode::LINK_COUNTERS | 0x80, 4));
    assert_eq!(body[0], Status::Ok as u8);
    let words: Vec<u32> = body[1..].chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(words, std::vec![0x1010, 0x1011, 0x1012]);
    // A run past index 255 is refused with BadLength.
    let bad = frame(Header::new(Channel::Control, flags::DATA), &[opcode::LINK_COUNTERS, 0, 5, 0, 250, 10]);
    let (out, _) = rig.feed(&bad, 100);
    let (_, body) = CtrlHeader::decode(&out[0].1).unwrap();
    assert_eq!(body, &[Status::BadLength as u8]);
}

#[test]
fn refusals_unknown_opcodes_and_responses() {
    let mut rig = Rig::new();
    let (out, _) = rig.feed(&frame(Header::new(Channel::Control, flags::DATA), &[0x55, 0, 1, 0]), 100);
    let (_, body) = CtrlHeader::decode(&out[0].1).unwrap();
    assert_eq!(body, &[Status::UnknownOpcode as u8]);
    // A response is never answered; reserved control flags are ignored.
    let (out, _) = rig.feed(&frame(Header::new(Channel::Control, flags::DATA), &[0x81, 0, 1, 0, 0]), 100);
    assert!(out.is_empty());
    let (out, _) = rig.feed(&frame(Header::new(Channel::Control, flags::DATA), &[0x01, 9, 1, 0]), 100);
    assert!(out.is_empty());
    // Bulk data belongs to the engine's DMA; a bulk frame reaching the server is ignored.
    let (out, _) = rig.feed(&frame(Header::new(Channel::Weights, flags::DATA), &[0; 64]), 100);
    assert!(out.is_empty());
    assert_eq!(rig.server.counters().ignored, 3);
}

#[test]
fn v1_frames_are_left_to_the_v1_server_and_garbage_never_panics() {
    let mut rig = Rig::new();
    let mut v1 = [0u8; 64];
    let n = ws_common::ctrl::encode_frame(opcode::PING, 1, &[1, 2, 3, 4], &mut v1).unwrap();
    let (out, _) = rig.feed(&v1[..n], 100);
    assert!(out.is_empty());
    assert_eq!(rig.server.counters().bad_frames, 0, "a v1 frame is not a bad v2 frame");

    // Random bytes, random frames with random bit flips, all cut at random.
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut stream = Vec::new();
    for _ in 0..3000 {
        match next() % 3 {
            0 => stream.extend((0..next() % 64).map(|_| next() as u8)),
            1 => stream.extend(request(&Ping { nonce: next() as u32 }, next() as u16)),
            _ => {
                let mut f = request(&LogEcho { value: next() as u32, tag: 1 }, next() as u16);
                let bit = (next() as usize) % (f.len() * 8);
                f[bit / 8] ^= 1 << (bit % 8);
                stream.extend(f);
            }
        }
    }
    let mut pos = 0;
    while pos < stream.len() {
        let n = (1 + next() as usize % 300).min(stream.len() - pos);
        rig.server.receive(
            &stream[pos..pos + n],
            &mut rig.ctrl,
            &mut rig.board,
            &mut rig.engine,
            &mut NoDataPlane,
        );
        rig.engine.out.clear();
        pos += n;
    }
    let c = rig.server.counters();
    assert!(c.requests >= 900 && c.bad_frames >= 900, "{c:?}");
}
