//! Scenario: the link engine's DMA windows hold against a host that breaks the rules, and a
//! slow reader makes the sender wait instead of overflowing anything.
//!
//! Violations, sent as raw frames a well-behaved endpoint never builds:
//! - a bulk DATA frame whose length is not a whole number of words (channel 2);
//! - bulk DATA frames past the credit of the board's window (channel 3: the host grants no
//!   credit back, so the echo never drains the window, and the 4 KiB frame after a window's
//!   worth is past it).
//!
//! Each is refused and counted under the channel's window violations, the bytes before the
//! violation arrive intact, and the firmware keeps answering on both protocols.
//!
//! Credit stall: the host streams on channel 4 but reads the echo on channel 6 only later, with
//! a 4 KiB receive buffer. The board's transmit side stalls on the host's credit, its receive
//! window fills, and the host's sender waits for credit: the engine never takes more than the
//! window plus the host's credit and counts no violation. Once the host reads, everything
//! arrives, byte-identical.

use std::time::{Duration, Instant};

use hil_tests::{Needs, Rig};
use host_driver::link::{Config, Link};
use host_driver::transport::{SimTransport, Transport};
use ws_common::ctrl::cmd::{LinkCounters, Ping};
use ws_common::link::hello::Hello;
use ws_common::link::{encode_frame, flags, frame_len, Channel, Header};

fn link(phy: &str, cfg: Config) -> Link {
    let t = SimTransport::connect(phy.parse().unwrap()).expect("PHY port");
    Link::connect(Box::new(t), cfg, Duration::from_secs(20)).expect("HELLO")
}

fn counters(l: &mut Link, first: u8, count: u8) -> Vec<u32> {
    l.request(&LinkCounters { first, count }, Duration::from_secs(5), 3).expect("LinkCounters")
}

fn raw_frame(h: Header, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; frame_len(payload.len())];
    let n = encode_frame(&Header { length: payload.len() as u32, ..h }, payload, &mut out).unwrap();
    out.truncate(n);
    out
}

/// Window violations per channel (counter index 0x20 + channel).
const WIN_VIOL: u8 = 0x20;
/// Accepted payload bytes per channel (0x08 + channel).
const RX_BYTES: u8 = 0x08;

#[test]
fn window_violations_are_refused_and_counted_and_a_slow_reader_stalls_the_sender() {
    let Some(mut rig) = Rig::open("link_windows", Needs { defmt_log: false, sim_control: true }) else {
        return;
    };
    let phy = rig.sim().expect("a simulated board").phy_addr().to_string();
    let mut first = link(&phy, Config::default());
    let before = counters(&mut first, WIN_VIOL, 8);
    // A fresh HELLO reports each window's length as its credit.
    let window = first.endpoint().peer_state(Channel::Gradients).unwrap().credit;
    drop(first);

    // Raw HELLO (no RESUME: every channel restarts at seq 0), granting the board no credit.
    let mut t = SimTransport::connect(phy.parse().unwrap()).unwrap();
    let hello = Hello::new(4096, 16).encode();
    t.send(&raw_frame(Header::new(Channel::Link, flags::HELLO), &hello)).unwrap();
    let mut buf = vec![0u8; 64 << 10];
    let deadline = Instant::now() + Duration::from_secs(10);
    while t.recv(&mut buf, Duration::from_millis(50)).unwrap() == 0 {
        assert!(Instant::now() < deadline, "no HELLO answer");
    }
    let data = |ch, seq, len: usize| {
        let payload: Vec<u8> = (0..len).map(|i| (i * 7 + seq as usize) as u8).collect();
        raw_frame(Header { seq, ..Header::new(ch, flags::DATA) }, &payload)
    };
    // A length that is not a whole number of words, then a window and one more of 4 KiB
    // frames into a window that nothing drains.
    t.send(&data(Channel::Weights, 0, 6)).unwrap();
    for seq in 0..window / 4096 + 1 {
        t.send(&data(Channel::Gradients, seq, 4096)).unwrap();
    }
    let settle = Instant::now() + Duration::from_millis(500);
    while Instant::now() < settle {
        t.recv(&mut buf, Duration::from_millis(20)).unwrap();
    }
    drop(t);

    let mut l = link(&phy, Config { resume: true, ..Config::default() });
    let after = counters(&mut l, WIN_VIOL, 8);
    let accepted = counters(&mut l, RX_BYTES + 3, 1)[0];
    eprintln!("link_windows: window violations per channel before {before:?}, after {after:?}");
    assert_eq!(after[2] - before[2], 1, "the odd-length frame on channel 2");
    assert!(after[3] > before[3], "the frame past the credit on channel 3");
    assert_eq!(accepted, window, "channel 3 took exactly its window before refusing");
    assert_eq!(l.request(&Ping { nonce: 0x5a5a }, Duration::from_secs(5), 2).unwrap(), 0x5a5a, "v2 alive");
    rig.client.ping(0xa5a5).expect("v1 alive");
    drop(l);

    // Credit stall: four windows' worth on channel 4 into a window whose echo the host does
    // not read.
    let cfg = Config { rx_buffer: 4096, ..Config::default() };
    let mut l = link(&phy, cfg);
    let v0 = counters(&mut l, WIN_VIOL + 4, 1)[0];
    let b0 = counters(&mut l, RX_BYTES + 4, 1)[0];
    let payload: Vec<u8> = (0..4 * window).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    assert_eq!(l.endpoint().write(Channel::Data, &payload).unwrap(), payload.len());
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        l.pump(Duration::from_millis(2)).unwrap();
    }
    let taken = counters(&mut l, RX_BYTES + 4, 1)[0] - b0;
    let stalls = l.endpoint().sender(Channel::Data).unwrap().stats().credit_stalls;
    let board_stalls = counters(&mut l, 0x54 + 2, 1)[0];
    eprintln!("link_windows: stalled with {taken} B taken by the board, host credit stalls {stalls}, board credit stalls {board_stalls}");
    assert!(taken <= window + 4096, "the board took {taken} B: more than its window and the host's credit");
    assert!(taken >= window, "the board took only {taken} B of its {window} B window");
    assert!(stalls > 0, "the host's sender never waited for credit");
    assert!(board_stalls > 0, "the board's sender never waited for the host's credit");
    let mut echo = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while echo.len() < payload.len() {
        l.pump(Duration::from_millis(2)).unwrap();
        let n = l.endpoint().read(Channel::Trace, &mut buf).unwrap();
        echo.extend_from_slice(&buf[..n]);
        assert!(Instant::now() < deadline, "the stalled stream did not resume: {} B", echo.len());
    }
    assert!(echo == payload, "the stalled stream arrived changed");
    assert_eq!(counters(&mut l, WIN_VIOL + 4, 1)[0], v0, "a well-behaved sender caused a window violation");
}
