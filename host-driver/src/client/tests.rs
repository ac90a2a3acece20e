//! Client tests against the in-memory link, with the real `ws_common` codec on both sides.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use ws_common::ctrl::cmd::{encode_response, opcode};
use ws_common::ctrl::{encode_frame, Status, MAX_FRAME, VERSION};

use super::*;
use crate::transport::{FakeBoard, FakeDevice, FakeLink};

fn client_on(board: &FakeBoard) -> Client {
    Client::new(Box::new(FakeLink::new(board.clone())))
}

/// Encodes an answer frame for command `C`.
fn answer<'a, C: Command<'a>>(id: u16, r: std::result::Result<&C::Response, Status>) -> Vec<u8> {
    let mut out = [0u8; MAX_FRAME];
    let n = encode_response::<C>(id, r, &mut out).unwrap();
    out[..n].to_vec()
}

/// The request id of the first frame in `bytes` (offset 4, little endian).
fn req_id(bytes: &[u8]) -> u16 {
    u16::from_le_bytes([bytes[4], bytes[5]])
}

#[test]
fn ping_identity_stats_and_log_echo() {
    let board = FakeBoard::new();
    let mut c = client_on(&board);
    c.ping(0xdead_beef).unwrap();
    assert_eq!(c.identity().unwrap(), board.identity());
    let s = c.stats().unwrap();
    assert_eq!(s.frames_ok, 3, "the stats request counts itself");
    c.log_echo(7, -3).unwrap();
    assert_eq!(board.log().echoes, [(7, -3)]);
    c.reset().unwrap();
    assert_eq!(board.log().resets, 1);
    let k = c.counters();
    assert_eq!((k.sent, k.answered, k.stale, k.retries), (5, 5, 0, 0));
}

#[test]
fn request_ids_increment_and_skip_zero() {
    let board = FakeBoard::new();
    let link = FakeLink::new(board.clone());
    let wire = link.handle();
    let mut c = Client::new(Box::new(link));
    c.ping(1).unwrap();
    c.ping(2).unwrap();
    let sent = wire.sent();
    assert_eq!(req_id(&sent), 1);
    assert_eq!(req_id(&sent[sent.len() / 2..]), 2);
    c.next_id = u16::MAX;
    assert_eq!(c.take_id(), u16::MAX);
    assert_eq!(c.take_id(), 1, "0 is the device's frame-error id");
}

#[test]
fn peek_and_poke_split_into_protocol_sized_chunks() {
    let board = FakeBoard::new();
    let link = FakeLink::new(board.clone());
    let wire = link.handle();
    let mut c = Client::new(Box::new(link));
    let w = board.identity().poke;
    let data: Vec<u8> = (0..w.len).map(|i| (i * 7 + 3) as u8).collect();
    c.poke(w.base, &data).unwrap();
    let pokes = data.len().div_ceil(MAX_POKE);
    assert_eq!(c.counters().sent as usize, pokes);
    assert_eq!(c.peek(w.base, data.len()).unwrap(), data);
    assert_eq!(c.counters().sent as usize, pokes + data.len().div_ceil(MAX_PEEK));
    assert_eq!(board.word(w.base), u32::from_le_bytes([3, 10, 17, 24]));
    assert!(wire.sent().len() > data.len(), "the pokes carried the data");
    assert_eq!(c.peek(w.base, 0).unwrap(), Vec::<u8>::new(), "an empty peek sends nothing");
}

#[test]
fn refusals_surface_their_status_and_where() {
    let board = FakeBoard::new();
    let mut c = client_on(&board);
    let w = board.identity().poke;
    let e = c.poke(w.base + w.len, &[0; 4]).unwrap_err();
    assert_eq!(e.refusal(), Some(Status::OutOfWindow));
    let msg = e.to_string();
    assert!(msg.contains("refused Poke") && msg.contains(&format!("{:#010x}", w.base + w.len)), "{msg}");
    assert_eq!(c.poke(w.base + 2, &[0; 4]).unwrap_err().refusal(), Some(Status::Misaligned));
    assert_eq!(c.peek(0x2000_0000, 4).unwrap_err().refusal(), Some(Status::OutOfWindow));
    assert!(!c.peek(0x2000_0000, 4).unwrap_err().is_timeout());
    assert_eq!(board.log().refused, 4);
}

#[test]
fn ranges_that_wrap_the_address_space_are_refused_before_sending() {
    let board = FakeBoard::new();
    let mut c = client_on(&board);
    let e = c.peek(0xffff_fffc, 8).unwrap_err();
    assert!(
        matches!(e, Error::Protocol(ProtocolError::AddressOverflow { addr: 0xffff_fffc, len: 8 })),
        "{e}"
    );
    assert!(c.poke(0xffff_fffc, &[0; 8]).is_err());
    assert_eq!(c.counters().sent, 0);
    // The very top word itself is a valid range (the device decides whether to allow it).
    assert_eq!(c.peek(0xffff_fffc, 4).unwrap_err().refusal(), Some(Status::OutOfWindow));
}

#[test]
fn stale_answers_are_skipped() {
    let mut board = FakeBoard::new();
    let device = move |bytes: &[u8], reply: &mut Vec<u8>| {
        let id = req_id(bytes);
        // An answer to an earlier request, an answer with the wrong opcode, then the real one.
        reply.extend(answer::<Ping>(id.wrapping_sub(1), Ok(&0x5ca1e)));
        reply.extend(answer::<Stats>(id, Err(Status::BadLength)));
        board.receive(bytes, reply);
    };
    let mut c = Client::new(Box::new(FakeLink::new(device)));
    c.ping(0x1234).unwrap();
    c.ping(0x5678).unwrap();
    assert_eq!(c.counters().stale, 4);
    assert_eq!(c.counters().answered, 2);
}

#[test]
fn a_silent_device_times_out_with_a_clear_message() {
    let board = FakeBoard::new();
    board.set_mute(true);
    let mut c = client_on(&board);
    c.set_timeout(Duration::from_millis(20));
    let e = c.identity().unwrap_err();
    assert!(e.is_timeout(), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("no answer to Identity (request 1) from fake link after 2"), "{msg}");
    assert!(msg.contains(" ms"), "without a board clock the wait is wall time: {msg}");
    assert!(msg.contains("--timeout-ms"), "{msg}");
    assert_eq!(board.log().frames_ok, 1, "the device got the request");
}

#[test]
fn timeouts_name_the_frame_errors_the_device_reported() {
    // A link that corrupts every request: the device reports a CRC error and never answers.
    let mut board = FakeBoard::new();
    let device = move |bytes: &[u8], reply: &mut Vec<u8>| {
        let mut damaged = bytes.to_vec();
        let last = damaged.len() - 1;
        damaged[last] ^= 0x01;
        board.receive(&damaged, reply);
    };
    let mut c = Client::new(Box::new(FakeLink::new(device)));
    c.set_timeout(Duration::from_millis(10));
    c.set_retries(2);
    let e = c.ping(9).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("reported 3 frame errors (BadCrc)"), "{msg}");
    assert_eq!(c.counters().device_frame_errors, 3);
    assert_eq!(c.counters().retries, 2);
}

/// A device that ignores the first `drop` requests it receives, then answers as a board.
fn lossy(drop: u32) -> (impl FakeDevice, Arc<AtomicU32>) {
    let seen = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&seen);
    let mut board = FakeBoard::new();
    let device = move |bytes: &[u8], reply: &mut Vec<u8>| {
        if counter.fetch_add(1, Ordering::SeqCst) >= drop {
            board.receive(bytes, reply);
        }
    };
    (device, seen)
}

#[test]
fn idempotent_requests_are_retried_with_the_same_id() {
    let (device, seen) = lossy(2);
    let link = FakeLink::new(device);
    let wire = link.handle();
    let mut c = Client::new(Box::new(link));
    c.set_timeout(Duration::from_millis(5));
    assert!(c.ping(1).unwrap_err().is_timeout(), "no retries by default");
    c.set_retries(3);
    c.ping(2).unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 3);
    let sent = wire.sent();
    let frame_len = sent.len() / 3;
    assert_eq!(req_id(&sent[frame_len..]), 2);
    assert_eq!(req_id(&sent[2 * frame_len..]), 2, "the retry reuses the id");
}

#[test]
fn reset_is_not_retried() {
    let (device, seen) = lossy(1);
    let mut c = Client::new(Box::new(FakeLink::new(device)));
    c.set_timeout(Duration::from_millis(5));
    c.set_retries(3);
    assert!(c.reset().unwrap_err().is_timeout());
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

#[test]
fn a_wrong_echo_is_an_error() {
    let device = |bytes: &[u8], reply: &mut Vec<u8>| reply.extend(answer::<Ping>(req_id(bytes), Ok(&1)));
    let mut c = Client::new(Box::new(FakeLink::new(device)));
    let e = c.ping(2).unwrap_err();
    assert!(matches!(e, Error::Protocol(ProtocolError::EchoMismatch { sent: 2, got: 1 })), "{e}");
}

#[test]
fn short_or_garbled_answers_are_bad_responses() {
    let device = |bytes: &[u8], reply: &mut Vec<u8>| {
        let mut out = [0u8; MAX_FRAME];
        let n = encode_frame(opcode::STATS | RESPONSE_BIT, req_id(bytes), &[0, 1, 2], &mut out).unwrap();
        reply.extend_from_slice(&out[..n]);
    };
    let mut c = Client::new(Box::new(FakeLink::new(device)));
    let e = c.stats().unwrap_err();
    assert!(e.to_string().contains("could not parse the device's answer to Stats"), "{e}");
}

#[test]
fn host_side_decode_errors_are_counted_and_survived() {
    let mut board = FakeBoard::new();
    let device = move |bytes: &[u8], reply: &mut Vec<u8>| {
        let mut good = Vec::new();
        board.receive(bytes, &mut good);
        let mut bad = good.clone();
        bad[9] ^= 0x80;
        reply.extend(b"noise");
        reply.extend(bad);
        reply.extend(good);
    };
    let mut c = Client::new(Box::new(FakeLink::new(device)));
    c.ping(77).unwrap();
    assert_eq!(c.counters().host_decode_errors, 1);
}

#[test]
fn raw_bytes_and_frame_error_reports() {
    let board = FakeBoard::new();
    let mut c = client_on(&board);
    let mut frame = [0u8; MAX_FRAME];
    let n = encode_frame(opcode::PING, 5, &[1, 2, 3, 4], &mut frame).unwrap();
    frame[n - 1] ^= 0xff;
    c.send_raw(&frame[..n]).unwrap();
    let frames = c.read_frames(Duration::from_millis(1)).unwrap();
    assert_eq!(frames.len(), 1, "{frames:?}");
    let report = frames[0].as_ref().unwrap();
    assert_eq!(report.frame_error(), Some(Status::BadCrc));
    assert_eq!(report.payload, [Status::BadCrc as u8, VERSION]);
    // An unknown opcode 0x7f is answered with opcode 0xff too, but it is not a frame error.
    let n = encode_frame(0x7f, 6, &[], &mut frame).unwrap();
    c.send_raw(&frame[..n]).unwrap();
    let raw = c.drain(Duration::from_millis(1));
    assert_eq!(raw[3], 0xff);
    assert_eq!(board.log().frames_bad, 1);
    c.ping(1).unwrap();
}

#[test]
fn a_panicking_device_is_reported() {
    let device = |_: &[u8], _: &mut Vec<u8>| panic!("model bug");
    let mut c = Client::new(Box::new(FakeLink::new(device)));
    let e = c.ping(1).unwrap_err().to_string();
    assert!(e.contains("fake device behind fake link is gone"), "{e}");
    assert!(c.ping(1).is_err());
}

#[test]
fn chunking_covers_the_range_exactly() {
    let v: Vec<_> = chunks(0x100, 10, 4).collect();
    assert_eq!(v, [(0x100, 4), (0x104, 4), (0x108, 2)]);
    assert_eq!(chunks(0, 0, 4).count(), 0);
    assert!(check_range(0xffff_fff0, 16).is_ok());
    assert!(check_range(0xffff_fff0, 17).is_err());
}
