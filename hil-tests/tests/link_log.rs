//! Scenario: the firmware's defmt log over the link's log channel (channel 5), for boards
//! whose UART does not reach the host.
//!
//! The board keeps its log since boot in a ring until a host says HELLO, then sends it in
//! sequenced channel 5 frames through the link engine's firmware TX FIFO. The host decodes it
//! against the ELF: the boot lines come first, then the lines that three `LogEcho` requests
//! made, in order, with no gap in the channel's sequence numbers and nothing malformed.
//!
//! Needs: the simulator's PHY port (a real board serves the same channel on its link).

use std::time::Duration;

use hil_tests::{Needs, Rig};
use host_driver::link::{Config, Link};
use host_driver::logs::{DefmtLog, LogDecoder, LogRecord};
use ws_common::ctrl::cmd::LogEcho;

#[test]
fn the_defmt_log_arrives_on_the_log_channel_from_boot_on() {
    let Some(rig) = Rig::open("link_log", Needs { defmt_log: false, sim_control: true }) else {
        return;
    };
    let sim = rig.sim().expect("a simulated board");
    let t = hil_tests::connect(sim, sim.phy_addr());
    let mut link = Link::connect(Box::new(t), Config::default(), Duration::from_secs(20)).expect("HELLO");
    for v in 0..3u32 {
        link.request(&LogEcho { value: 0x10c0 + v, tag: -7 }, Duration::from_secs(5), 2).expect("log-echo");
    }
    let mut dec = LogDecoder::new(DefmtLog::from_elf(&rig.elf).expect("the firmware ELF"));
    let mut lines = Vec::new();
    let mut bytes = Vec::new();
    let deadline = rig.deadline(Duration::from_secs(20));
    while !lines.iter().any(|m: &String| m.contains(&format!("value={}", 0x10c2))) {
        assert!(!deadline.expired(), "the log-echo lines never came: {lines:#?}");
        link.pump(Duration::from_millis(5)).unwrap();
        bytes.clear();
        link.endpoint().take_log(&mut bytes);
        for r in dec.push(&bytes) {
            match r {
                LogRecord::Line(l) => lines.push(l.message),
                LogRecord::Malformed(m) => panic!("a malformed log frame on the link: {m:?}"),
            }
        }
    }
    assert!(lines[0].contains("weightstream firmware"), "the boot line comes first: {lines:#?}");
    let echoes: Vec<_> = lines.iter().filter(|m| m.contains("log-echo")).collect();
    assert_eq!(echoes.len(), 3, "{lines:#?}");
    for (v, m) in echoes.iter().enumerate() {
        assert!(m.contains(&format!("value={} tag=-7", 0x10c0 + v)), "{m}");
    }
    assert_eq!(link.endpoint().stats().log_gaps, 0);
    eprintln!("link_log: {} lines over channel 5, the first: {}", lines.len(), lines[0]);
}
