//! The bodies of the weightstream fuzz targets, as plain functions so that the corpus
//! generator (`examples/gen_corpus.rs`) and a plain `cargo test` can call them too.
//!
//! - [`link_decoder`]: arbitrary bytes into the v2 stream decoder (`ws_common::link`), with
//!   invariants (chunking does not change what is found, every byte is accounted for, every
//!   delivered frame re-encodes to itself), plus an encode → decode roundtrip of a frame built
//!   from the input.
//! - [`ctrl_request`]: arbitrary bytes into the firmware's control server
//!   (`ws_firmware::control::Server`, built for the host) over an in-memory board; every reply
//!   must be one well-formed response frame.
//! - [`ctrl_response`]: arbitrary bytes as the device's answer to one host request, through
//!   the host's client (`host_driver::client::Client`) over an in-memory transport.
#![warn(missing_docs)]

use std::time::Duration;

use ws_common::ctrl;
use ws_common::link::{
    self, control::CtrlHeader, encode_frame, flags, frame_len, frame_parts, hello::Hello, Channel, Decoder,
    Event, Header, MAX_CTRL_FRAME, MAX_FRAME,
};

/// What a decode produced, owned, for comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Got {
    Frame(Header, Vec<u8>),
    Error(link::DecodeError),
}

/// Decodes `bytes` fed in pieces of `chunk` bytes (0: whole), draining every event.
fn decode_all<const N: usize>(dec: &mut Decoder<N>, bytes: &[u8], chunk: usize) -> Vec<Got> {
    let mut out = Vec::new();
    let pieces: Vec<&[u8]> = if chunk == 0 { vec![bytes] } else { bytes.chunks(chunk).collect() };
    for piece in pieces {
        let mut input = piece;
        loop {
            let r = dec.feed(input);
            assert!(r.consumed <= input.len());
            input = &input[r.consumed..];
            match r.event {
                Some(Event::Frame(f)) => {
                    assert_eq!(f.payload.len(), f.header.length as usize);
                    out.push(Got::Frame(f.header, f.payload.to_vec()));
                }
                Some(Event::Error(e)) => out.push(Got::Error(e)),
                None => {
                    assert!(input.is_empty(), "decoder stopped before the end of its input");
                    break;
                }
            }
        }
    }
    out
}

/// The accounting invariant: every byte fed since `skipped0` was read is in a delivered
/// frame, skipped, or buffered.
fn check_accounting<const N: usize>(dec: &Decoder<N>, skipped0: u64, got: &[Got], fed: usize) {
    let delivered: usize = got
        .iter()
        .map(|g| match g {
            Got::Frame(h, _) => frame_len(h.length as usize),
            Got::Error(_) => 0,
        })
        .sum();
    let skipped = dec.skipped() - skipped0;
    assert_eq!(delivered as u64 + skipped + dec.buffered() as u64, fed as u64, "bytes unaccounted for");
}

/// Decoders reused across inputs: a fresh 64 KiB decoder per input would cost more than the
/// decoding. `reset` between inputs; the counters are compared as differences.
struct Pool {
    whole: Box<Decoder<MAX_FRAME>>,
    pieces: Box<Decoder<MAX_FRAME>>,
    check: Box<Decoder<MAX_FRAME>>,
    small: Box<Decoder<MAX_CTRL_FRAME>>,
}

thread_local! {
    static POOL: std::cell::RefCell<Pool> = std::cell::RefCell::new(Pool {
        whole: Box::default(),
        pieces: Box::default(),
        check: Box::default(),
        small: Box::default(),
    });
}

/// Decodes one whole frame (or frame list) with a clean decoder; returns events and skipped.
fn decode_clean(dec: &mut Decoder<MAX_FRAME>, bytes: &[u8]) -> (Vec<Got>, u64) {
    dec.reset();
    let s0 = dec.skipped();
    let got = decode_all(dec, bytes, 0);
    (got, dec.skipped() - s0)
}

/// Fuzz body: the v2 link decoder.
pub fn link_decoder(data: &[u8]) {
    POOL.with(|p| link_decoder_with(&mut p.borrow_mut(), data));
}

fn link_decoder_with(pool: &mut Pool, data: &[u8]) {
    let Some((&mode, stream)) = data.split_first() else { return };
    // 1. Whole-buffer decode is the reference; a chunked decode must find the same events.
    let whole = &mut pool.whole;
    whole.reset();
    let w0 = whole.skipped();
    let reference = decode_all(whole, stream, 0);
    check_accounting(whole, w0, &reference, stream.len());
    let chunk = 1 + (mode as usize % 37);
    let pieces = &mut pool.pieces;
    pieces.reset();
    let p0 = pieces.skipped();
    let chunked = decode_all(pieces, stream, chunk);
    assert_eq!(chunked, reference, "chunking by {chunk} changed what the decoder found");
    assert_eq!(pieces.skipped() - p0, whole.skipped() - w0);
    assert_eq!(pieces.buffered(), whole.buffered());
    // A firmware-sized decoder keeps the same accounting (it refuses frames too big for it).
    let small = &mut pool.small;
    small.reset();
    let s0 = small.skipped();
    let small_got = decode_all(small, stream, chunk);
    check_accounting(small, s0, &small_got, stream.len());
    // 2. Every delivered frame re-encodes to a frame that decodes to itself.
    for g in &reference {
        if let Got::Frame(h, p) = g {
            let mut buf = vec![0u8; frame_len(p.len())];
            let n = encode_frame(h, p, &mut buf).expect("a delivered frame re-encodes");
            assert_eq!(decode_clean(&mut pool.check, &buf[..n]), (vec![g.clone()], 0));
            let parts = frame_parts(h, p).expect("and has parts");
            assert_eq!([&parts.head[..], p, parts.tail()].concat(), buf[..n]);
        }
    }
    // 3. Encode → decode roundtrip of a frame built from the input.
    if stream.len() >= 13 {
        let word =
            |at: usize| u32::from_le_bytes([stream[at], stream[at + 1], stream[at + 2], stream[at + 3]]);
        let channel = Channel::ALL[stream[0] as usize % 8];
        let h =
            Header { seq: word(1), ack: word(5), credit: word(9), ..Header::new(channel, mode & flags::ALL) };
        let payload = &stream[13..];
        let mut buf = vec![0u8; frame_len(payload.len())];
        match encode_frame(&h, payload, &mut buf) {
            Ok(n) => {
                let want = Header { length: payload.len() as u32, ..h };
                assert_eq!(
                    decode_clean(&mut pool.check, &buf[..n]),
                    (vec![Got::Frame(want, payload.to_vec())], 0)
                );
            }
            Err(link::EncodeError::Invalid(_)) => {}
            Err(e) => panic!("buffer sized by frame_len was refused: {e}"),
        }
    }
    // 4. The other parsers of link payloads never panic.
    let _ = Hello::decode(stream);
    let _ = CtrlHeader::decode(stream);
    let _ = link::hello::detect_v1_reply(stream);
}

/// The in-memory board the control server runs against: reads return a pattern of the
/// address, writes are checked against the poke window and dropped.
struct FuzzBoard {
    windows: ws_firmware::layout::Windows,
}

impl ws_firmware::control::Board for FuzzBoard {
    unsafe fn read_word(&mut self, addr: u32) -> u32 {
        assert!(
            addr.is_multiple_of(4) && self.windows.peek_allowed(addr, 4),
            "read outside the peek window: {addr:#x}"
        );
        addr.rotate_left(7) ^ 0x5a5a_a5a5
    }
    unsafe fn write_word(&mut self, addr: u32, _value: u32) {
        assert!(
            addr.is_multiple_of(4) && self.windows.poke_allowed(addr, 4),
            "write outside the poke window: {addr:#x}"
        );
    }
    fn clocks(&mut self) -> ws_firmware::control::Clocks {
        ws_firmware::control::Clocks { mcycle: 1, mtime: 2, timer_ticks: 3, tick_period: 4 }
    }
    fn log_echo(&mut self, _value: u32, _tag: i16) {}
}

fn new_server() -> (ws_firmware::control::Server, FuzzBoard) {
    use ws_common::regmap::map;
    use ws_firmware::control::{identity, Controller, Server, SysInfo};
    let windows = ws_firmware::layout::Windows::new(map::BOOTROM_SIZE, map::RAM_SIZE);
    let sys = SysInfo {
        build_hash: 1,
        clk_hz: 50_000_000,
        rom_bytes: map::BOOTROM_SIZE,
        ram_bytes: map::RAM_SIZE,
        slots: 0,
    };
    let info = identity(ws_firmware::FW_VERSION, &sys, &windows, 1000, &[]);
    (Server::new(Controller::new(info, windows)), FuzzBoard { windows })
}

/// The link engine's register view for the v2 server: fixed channel state, and every frame
/// the server sends encoded as the engine's TX half would.
#[derive(Default)]
struct FuzzEngine {
    replies: Vec<Vec<u8>>,
}

impl ws_firmware::link::Engine for FuzzEngine {
    fn channel_state(&self) -> [link::hello::ChannelState; link::CHANNELS] {
        [link::hello::ChannelState { credit: 16384, ..Default::default() }; link::CHANNELS]
    }
    fn reset_channels(&mut self, _host: &[link::hello::ChannelState; link::CHANNELS]) {}
    fn set_negotiated(&mut self, max_payload: u32, window: u16) {
        assert!((1..=link::MAX_PAYLOAD as u32).contains(&max_payload) && window >= 1);
    }
    fn send(&mut self, h: &link::Header, payload: &[u8]) {
        let mut f = vec![0u8; link::frame_len(payload.len())];
        let n = link::encode_frame(&link::Header { length: payload.len() as u32, ..*h }, payload, &mut f)
            .expect("the server sends only frames the encoder accepts");
        f.truncate(n);
        self.replies.push(f);
    }
    fn window(&self) -> u16 {
        16
    }
    fn counter(&mut self, index: u8) -> u32 {
        index as u32
    }
}

/// Fuzz body: the firmware's control request parsers and command handler, v1 on every byte
/// and link v2 on the frames the shared decoder finds in the same bytes (what the link
/// engine hands the firmware), side by side.
pub fn ctrl_request(data: &[u8]) {
    use ws_firmware::control::Action;
    let (mut server, mut board) = new_server();
    let mut link = Box::new(ws_firmware::link::LinkServer::new());
    let mut replies: Vec<Vec<u8>> = Vec::new();
    let mut engine = FuzzEngine::default();
    for &b in data {
        let mut action = server.receive(b, &mut board, &mut |r: &[u8]| replies.push(r.to_vec()));
        if action == Action::Continue {
            action = link.receive(
                &[b],
                server.controller_mut(),
                &mut board,
                &mut engine,
                &mut ws_firmware::link::NoDataPlane,
            );
        }
        if action == Action::Reset {
            // The board resets: fresh servers, as after boot.
            (server, board) = new_server();
            link = Box::new(ws_firmware::link::LinkServer::new());
        }
    }
    // Every v2 reply is exactly one good frame: a HELLO on channel 0 or a response on 1.
    for r in engine.replies {
        let mut dec = Box::new(link::Decoder::<{ link::MAX_CTRL_FRAME }>::new());
        let f = dec.feed(&r);
        match f.event {
            Some(link::Event::Frame(f)) => {
                assert!(matches!(f.header.channel, link::Channel::Link | link::Channel::Control));
                if f.header.channel == link::Channel::Control {
                    let (h, body) = CtrlHeader::decode(f.payload).expect("a control payload");
                    assert!(h.is_response() && !body.is_empty(), "reply without the response bit or status");
                }
            }
            other => panic!("the firmware sent a malformed v2 frame: {other:?}"),
        }
        assert_eq!(f.consumed, r.len(), "v2 reply has bytes after its frame");
    }
    // Every v1 reply is exactly one well-formed response frame.
    for r in replies {
        let mut dec = ctrl::FrameDecoder::new();
        let mut frames = 0;
        for (i, &b) in r.iter().enumerate() {
            match dec.feed(b) {
                ctrl::Event::Frame(f) => {
                    assert_eq!(i + 1, r.len(), "reply has bytes after its frame");
                    assert!(f.opcode & ctrl::RESPONSE_BIT != 0, "reply without the response bit");
                    assert!(!f.payload.is_empty(), "reply without a status byte");
                    frames += 1;
                }
                ctrl::Event::Error(e) => panic!("the firmware sent a malformed frame: {e:?}"),
                ctrl::Event::Pending => {}
            }
        }
        assert_eq!(frames, 1);
    }
    data_plane_requests(data);
}

/// The data plane's request decoders (MemoryX, SwarmX, the mesh), which the in-memory board
/// above has no data plane to reach: each takes the raw bytes as a request body without
/// panicking, and a body it accepts re-encodes to the same bytes (every layout is exact).
fn data_plane_requests(data: &[u8]) {
    use ws_common::ctrl::cmd::{
        MeshEval, MeshSetup, MeshStep, MeshTrain, MeshTrainRun, MxCreate, MxLayers, MxRelease, MxStep,
        SwarmConfig,
    };
    use ws_common::ctrl::Command;
    fn roundtrip<'a, C: Command<'a> + core::fmt::Debug>(data: &'a [u8]) {
        if let Ok(q) = C::decode(data) {
            let mut out = [0u8; ctrl::MAX_PAYLOAD];
            let n = q.encode(&mut out).expect("a decoded request encodes");
            assert_eq!(&out[..n], data, "{q:?} does not re-encode to its body");
        }
    }
    roundtrip::<MeshSetup>(data);
    roundtrip::<MeshStep>(data);
    roundtrip::<MeshTrain>(data);
    roundtrip::<MeshEval>(data);
    roundtrip::<MeshTrainRun>(data);
    let _ = MeshTrainRun::decode_response(data);
    roundtrip::<MxStep>(data);
    roundtrip::<MxRelease>(data);
    roundtrip::<MxLayers>(data);
    // The host's side of the new answers: any bytes decode or are refused, never panic.
    let _ = MxLayers::decode_response(data);
    let _ = MxCreate::decode(data);
    let _ = SwarmConfig::decode(data);
}

/// The device side of the host client: answers every request with the fuzz bytes.
struct FuzzTransport {
    answer: Vec<u8>,
    at: usize,
    chunk: usize,
}

impl host_driver::transport::Transport for FuzzTransport {
    fn send(&mut self, _bytes: &[u8]) -> host_driver::Result<()> {
        Ok(())
    }
    fn recv(&mut self, buf: &mut [u8], _timeout: Duration) -> host_driver::Result<usize> {
        let n = self.chunk.min(buf.len()).min(self.answer.len() - self.at);
        buf[..n].copy_from_slice(&self.answer[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
    fn describe(&self) -> String {
        "fuzz".into()
    }
}

/// Fuzz body: the host client's response path. Byte 0 picks the request, byte 1 the read
/// size; the rest is what the device answers (the first request's id is 1).
pub fn ctrl_response(data: &[u8]) {
    let [which, chunk, answer @ ..] = data else { return };
    let link = FuzzTransport { answer: answer.to_vec(), at: 0, chunk: 1 + *chunk as usize * 17 };
    let mut client = host_driver::client::Client::new(Box::new(link));
    client.set_timeout(Duration::from_millis(50));
    match which % 8 {
        0 => _ = client.ping(0x1234_5678),
        1 => _ = client.identity(),
        2 => _ = client.peek(0x1000_0000, 64),
        3 => _ = client.poke(0x1003_f000, &[1, 2, 3, 4]),
        4 => _ = client.reset(),
        5 => _ = client.stats(),
        6 => _ = client.log_echo(7, -3),
        _ => _ = client.read_frames(Duration::ZERO),
    }
}
