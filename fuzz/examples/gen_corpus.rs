//! Writes the checked-in seed corpora, deterministically (same bytes on every run):
//! `cargo run --example gen_corpus` in `fuzz/` (it replaces `corpus/<target>/seed-*`).
//! Each seed is also run through its target body, so a seed that crashes is caught here.

use std::fs;
use std::path::Path;

use ws_common::ctrl::{self, cmd, Command, Status};
use ws_common::link::{
    control, encode_frame, flags, frame_len, hello::Hello, Channel, Header, MAX_CTRL_PAYLOAD,
};

fn v2(h: Header, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; frame_len(payload.len())];
    encode_frame(&h, payload, &mut out).unwrap();
    out
}

fn data(ch: Channel, seq: u32, payload: &[u8]) -> Vec<u8> {
    v2(Header { seq, ..Header::new(ch, flags::DATA) }, payload)
}

fn v1(opcode: u8, req_id: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; ctrl::MAX_FRAME];
    let n = ctrl::encode_frame(opcode, req_id, payload, &mut out).unwrap();
    out.truncate(n);
    out
}

fn request<'a, C: Command<'a>>(c: &C, id: u16) -> Vec<u8> {
    let mut out = vec![0u8; ctrl::MAX_FRAME];
    let n = cmd::encode_request(c, id, &mut out).unwrap();
    out.truncate(n);
    out
}

fn response<'a, C: Command<'a>>(id: u16, r: Result<&C::Response, Status>) -> Vec<u8> {
    let mut out = vec![0u8; ctrl::MAX_FRAME];
    let n = cmd::encode_response::<C>(id, r, &mut out).unwrap();
    out.truncate(n);
    out
}

/// A deterministic byte pattern.
fn pattern(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn write(target: &str, seeds: &[Vec<u8>], run: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    fs::create_dir_all(&dir).unwrap();
    for e in fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("seed-")) {
            fs::remove_file(p).unwrap();
        }
    }
    for (i, s) in seeds.iter().enumerate() {
        run(s);
        fs::write(dir.join(format!("seed-{i:03}")), s).unwrap();
    }
    println!("{target}: {} seeds", seeds.len());
}

fn link_seeds() -> Vec<Vec<u8>> {
    let mut s: Vec<Vec<u8>> = Vec::new();
    // Byte 0 is the mode byte (chunking, flags of the roundtrip frame); the rest the stream.
    let with_mode = |mode: u8, stream: Vec<u8>| [vec![mode], stream].concat();
    for (i, len) in [0usize, 1, 3, 4, 5, 17, 64, 255, 256, 1024].into_iter().enumerate() {
        let ch = Channel::ALL[i % 7];
        let ch = if len > MAX_CTRL_PAYLOAD && !ch.is_bulk() { Channel::Weights } else { ch };
        s.push(with_mode(i as u8, data(ch, i as u32, &pattern(len, i as u32))));
    }
    let hello = Hello::new(4096, 16).encode();
    s.push(with_mode(9, v2(Header::new(Channel::Link, flags::HELLO), &hello)));
    s.push(with_mode(9, v2(Header::new(Channel::Link, flags::HELLO | flags::ERROR), &hello)));
    let ack = Header { ack: 7, credit: 65_536, ..Header::new(Channel::Gradients, flags::ACK) };
    s.push(with_mode(2, v2(ack, &[])));
    s.push(with_mode(2, v2(Header { flags: flags::ACK | flags::NAK, ..ack }, &[])));
    s.push(with_mode(
        3,
        v2(Header { seq: 5, ..Header::new(Channel::Data, flags::DATA | flags::RETX) }, &[1; 40]),
    ));
    let mut ctl = vec![0u8; 64];
    let n = control::encode_request(&cmd::Ping { nonce: 0xfeed }, 1, &mut ctl).unwrap();
    s.push(with_mode(4, data(Channel::Control, 0, &ctl[..n])));
    // Streams: back to back, with noise, a corrupted payload, a truncated frame, a false
    // magic, a frame of version 3, a v1 frame.
    let a = data(Channel::Weights, 1, &pattern(100, 1));
    let b = data(Channel::Weights, 2, &pattern(33, 2));
    s.push(with_mode(5, [a.clone(), b.clone()].concat()));
    s.push(with_mode(6, [b"noiseW".to_vec(), a.clone(), b"WSxx".to_vec(), b.clone()].concat()));
    let mut bad = a.clone();
    bad[40] ^= 4;
    s.push(with_mode(7, [bad, b.clone()].concat()));
    s.push(with_mode(8, [a[..70].to_vec(), b.clone()].concat()));
    s.push(with_mode(10, [a[..24].to_vec(), b.clone()].concat()));
    let mut v3 = b.clone();
    v3[2] = 3;
    let c = ws_common::crc32c::crc32c(&v3[..20]);
    v3[20..24].copy_from_slice(&c.to_le_bytes());
    s.push(with_mode(11, [v3, a.clone()].concat()));
    s.push(with_mode(12, v1(ctrl::FRAME_ERROR_OPCODE, 0, &[Status::BadVersion as u8, 1])));
    s.push(with_mode(13, [b"WS\x02\x09".to_vec(), pattern(40, 9)].concat()));
    s.push(with_mode(14, data(Channel::Trace, u32::MAX, &pattern(4000, 14))));
    s.push(with_mode(
        15,
        (0..20).flat_map(|i| data(Channel::Data, i, &pattern(i as usize * 7, i))).collect(),
    ));
    s.push(with_mode(16, pattern(300, 16)));
    s.push(with_mode(17, vec![b'W'; 50]));
    s.push(with_mode(18, b"WSWSWSWSWSWSWSWSWSWSWSWSWSWSWSWS".to_vec()));
    s
}

fn request_seeds() -> Vec<Vec<u8>> {
    let mut s: Vec<Vec<u8>> = Vec::new();
    let scratch = ws_common::boot::SCRATCH_BASE;
    let ram = ws_common::regmap::map::RAM_BASE;
    s.push(request(&cmd::Ping { nonce: 0xdead_beef }, 1));
    s.push(request(&cmd::Identity, 2));
    s.push(request(&cmd::Stats, 3));
    s.push(request(&cmd::LogEcho { value: 7, tag: -3 }, 4));
    s.push(request(&cmd::Peek { addr: ram, len: 64 }, 5));
    s.push(request(&cmd::Peek { addr: 0, len: 16 }, 6));
    s.push(request(&cmd::Peek { addr: ram + 2, len: 4 }, 7));
    s.push(request(&cmd::Peek { addr: 0xffff_fffc, len: 8 }, 8));
    s.push(request(&cmd::Peek { addr: ram, len: cmd::MAX_PEEK as u16 }, 9));
    s.push(request(&cmd::Poke { addr: scratch, data: &[1, 2, 3, 4, 5, 6, 7, 8] }, 10));
    s.push(request(&cmd::Poke { addr: ram, data: &[1, 2, 3, 4] }, 11));
    s.push(request(&cmd::Poke { addr: scratch + 1, data: &[1, 2, 3, 4] }, 12));
    s.push(request(&cmd::Reset, 13));
    s.push(v1(0x55, 14, &[1, 2, 3]));
    s.push(v1(0x7f, 15, &[]));
    s.push(v1(cmd::opcode::PING | ctrl::RESPONSE_BIT, 16, &[0, 1, 2, 3, 4]));
    s.push(v1(cmd::opcode::PEEK, 17, &[0, 0, 0, 0x10]));
    s.push(v1(cmd::opcode::LOADER_INFO, 18, &[]));
    let mut bad = request(&cmd::Ping { nonce: 1 }, 19);
    bad[9] ^= 1;
    s.push(bad);
    let mut ver = request(&cmd::Ping { nonce: 1 }, 20);
    ver[2] = 2;
    s.push(ver);
    s.push(vec![b'W', b'S', 1, 1, 0, 0, 0xff, 0xff]);
    // Several requests back to back, with noise between them.
    s.push(
        [
            request(&cmd::Ping { nonce: 2 }, 21),
            b"xWq".to_vec(),
            request(&cmd::Stats, 22),
            request(&cmd::Identity, 23),
        ]
        .concat(),
    );
    s.push([request(&cmd::Reset, 24), request(&cmd::Ping { nonce: 3 }, 25)].concat());
    s.push(request(&cmd::Poke { addr: scratch, data: &[0xaa; cmd::MAX_POKE] }, 26));
    s.push(pattern(200, 27));
    // Link v2 on the same bytes (the firmware runs both servers): HELLO, control requests,
    // a retry of the same id, a HELLO of another major version.
    let ctl = |c: &dyn Fn(&mut [u8]) -> usize| {
        let mut p = [0u8; MAX_CTRL_PAYLOAD];
        let n = c(&mut p);
        data(Channel::Control, 0, &p[..n])
    };
    let hello = Hello::new(65536, 32).encode();
    let h = |f: u8, p: &[u8]| v2(Header { length: p.len() as u32, ..Header::new(Channel::Link, f) }, p);
    s.push(h(flags::HELLO, &hello));
    let echo = ctl(&|p| control::encode_request(&cmd::LogEcho { value: 9, tag: 1 }, 30, p).unwrap());
    s.push([h(flags::HELLO, &hello), echo.clone(), echo].concat());
    s.push(ctl(&|p| {
        control::encode_request(&cmd::Poke { addr: scratch, data: &[1, 2, 3, 4] }, 31, p).unwrap()
    }));
    s.push(ctl(&|p| control::encode_request(&cmd::Peek { addr: ram, len: 1016 }, 32, p).unwrap()));
    s.push(ctl(&|p| control::encode_request(&cmd::Reset, 33, p).unwrap()));
    let mut major3 = hello;
    major3[0] = 3;
    s.push(h(flags::HELLO, &major3));
    s
}

fn response_seeds() -> Vec<Vec<u8>> {
    // Byte 0 picks the request (0 ping, 1 identity, 2 peek, 3 poke, 4 reset, 5 stats,
    // 6 log echo, 7 read frames), byte 1 the transport's read size; the answer follows.
    let mut s: Vec<Vec<u8>> = Vec::new();
    let mut add = |which: u8, chunk: u8, answer: Vec<u8>| s.push([vec![which, chunk], answer].concat());
    add(0, 255, response::<cmd::Ping>(1, Ok(&0x1234_5678)));
    add(0, 0, response::<cmd::Ping>(1, Ok(&0x1234_5678)));
    add(0, 3, response::<cmd::Ping>(1, Ok(&0x0bad_0bad)));
    add(0, 9, response::<cmd::Ping>(2, Ok(&0x1234_5678)));
    add(
        0,
        9,
        [
            v1(ctrl::FRAME_ERROR_OPCODE, 0, &[Status::BadCrc as u8, 1]),
            response::<cmd::Ping>(1, Ok(&0x1234_5678)),
        ]
        .concat(),
    );
    add(0, 9, response::<cmd::Ping>(1, Err(Status::UnknownOpcode)));
    let info = cmd::IdentityInfo {
        fw_version: [0, 1, 0],
        build_hash: 0x1234_5678,
        clk_hz: 50_000_000,
        rom: cmd::Window { base: 0, len: 8192 },
        ram: cmd::Window { base: 0x1000_0000, len: 256 * 1024 },
        peek: cmd::Window { base: 0x1000_0000, len: 256 * 1024 },
        poke: cmd::Window { base: 0x1003_f000, len: 4096 },
        tick_hz: 1000,
        num_blocks: 1,
        blocks: [cmd::BlockInfo { slot: 0, id: 0x5359, major: 1, minor: 0 }; cmd::MAX_BLOCKS],
    };
    add(1, 255, response::<cmd::Identity>(1, Ok(&info)));
    add(1, 1, response::<cmd::Identity>(1, Ok(&info)));
    let mut short = response::<cmd::Identity>(1, Ok(&info));
    short.truncate(short.len() / 2);
    add(1, 255, short);
    add(1, 255, v1(cmd::opcode::IDENTITY | ctrl::RESPONSE_BIT, 1, &[0, 1, 2]));
    let words = pattern(64, 2);
    add(2, 255, response::<cmd::Peek>(1, Ok(&&words[..])));
    add(2, 255, response::<cmd::Peek>(1, Ok(&&words[..10])));
    add(2, 255, response::<cmd::Peek>(1, Err(Status::OutOfWindow)));
    add(3, 255, response::<cmd::Poke>(1, Ok(&())));
    add(3, 255, response::<cmd::Poke>(1, Err(Status::Misaligned)));
    add(4, 255, response::<cmd::Reset>(1, Ok(&())));
    let stats = cmd::StatsInfo::default();
    add(5, 255, response::<cmd::Stats>(1, Ok(&stats)));
    add(5, 255, v1(cmd::opcode::STATS | ctrl::RESPONSE_BIT, 1, &[0; 5]));
    add(6, 255, response::<cmd::LogEcho>(1, Ok(&())));
    add(6, 255, v1(cmd::opcode::LOG_ECHO | ctrl::RESPONSE_BIT, 1, &[0xee]));
    add(
        7,
        255,
        [response::<cmd::Ping>(1, Ok(&1)), b"junkWS".to_vec(), response::<cmd::Stats>(2, Ok(&stats))]
            .concat(),
    );
    add(0, 255, pattern(100, 3));
    add(0, 255, vec![b'W', b'S', 1, 0x81, 1, 0, 0xff, 0xff]);
    // A v2 frame where a v1 answer is expected.
    add(0, 255, data(Channel::Control, 0, &[0x81, 0, 1, 0, 0]));
    s
}

fn main() {
    write("link_decoder", &link_seeds(), weightstream_fuzz::link_decoder);
    write("ctrl_request", &request_seeds(), weightstream_fuzz::ctrl_request);
    write("ctrl_response", &response_seeds(), weightstream_fuzz::ctrl_response);
}
