//! Scenario: the host process dies in the middle of a bulk transfer, a new one resumes it,
//! and nothing is lost or duplicated.
//!
//! `link-stream` (hil-tests/src/bin) streams on the weights channel into the board's echo
//! window and keeps the echo in a file with its receiving checkpoint. It is killed (SIGKILL)
//! a third of the way through and started again: it says HELLO with RESUME, the receiving
//! stream continues from its checkpoint, the sending one from what the board reports it
//! committed. The echo file must then be exactly the stream, byte for byte.
//!
//! Needs: the simulator (the PHY port).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use std::time::Duration;

use hil_tests::{Needs, Rig};
use host_driver::link::{Config, Link};
use host_driver::transport::SimTransport;
use ws_common::ctrl::cmd::LinkCounters;

const TOTAL: usize = 8 << 20;

fn start(phy: &str, dir: &std::path::Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_link-stream"))
        .args([phy, dir.to_str().unwrap(), &TOTAL.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting link-stream")
}

#[test]
fn a_killed_host_process_resumes_without_losing_or_repeating_a_byte() {
    let Some(rig) = Rig::open("link_resume", Needs { defmt_log: false, sim_control: true }) else {
        return;
    };
    let phy = rig.sim().expect("a simulated board").phy_addr().to_string();
    let dir = std::env::temp_dir().join(format!("ws-link-resume-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    let mut first = start(&phy, &dir);
    let mut killed_at = 0;
    for line in BufReader::new(first.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("echoed ") {
            killed_at = n.parse().unwrap();
            if killed_at >= TOTAL / 3 {
                first.kill().expect("killing the first host process");
                break;
            }
        }
        assert_ne!(line, "done", "the first process finished before it could be killed");
    }
    first.wait().unwrap();
    assert!((TOTAL / 3..TOTAL).contains(&killed_at), "killed at {killed_at}");

    let mut second = start(&phy, &dir);
    let out = BufReader::new(second.stdout.take().unwrap()).lines().map(Result::unwrap).collect::<Vec<_>>();
    assert!(second.wait().unwrap().success(), "the second host process failed: {out:?}");
    let hello = &out[0];
    assert!(hello.starts_with("connected resumed=true"), "{hello}");
    assert_eq!(out.last().map(String::as_str), Some("done"), "{out:?}");

    let echo = std::fs::read(dir.join("echo.bin")).unwrap();
    assert_eq!(echo.len(), TOTAL, "lost or repeated bytes: {hello}");
    // The stream link-stream sends (its SEED).
    let want = host_driver::link::echo::stream_bytes(7, 0, TOTAL);
    let first_bad = echo.iter().zip(&want).position(|(a, b)| a != b);
    assert_eq!(first_bad, None, "the echo differs from the stream ({hello})");

    // The engine accepted every byte of the stream exactly once (duplicates are dropped and
    // not counted). Ask over a third link that resumes too, so no channel is reset.
    let t = SimTransport::connect(phy.parse().unwrap()).unwrap();
    let cfg = Config { resume: true, ..Config::default() };
    let mut link = Link::connect(Box::new(t), cfg, Duration::from_secs(20)).expect("HELLO after the resume");
    let c = link.request(&LinkCounters { first: 0x0a, count: 1 }, Duration::from_secs(5), 3).unwrap();
    let seq_err = link.request(&LinkCounters { first: 0x1a, count: 1 }, Duration::from_secs(5), 3).unwrap();
    eprintln!(
        "link_resume: killed at {killed_at} of {TOTAL} echoed bytes; {hello}; engine: {} bytes accepted on channel 2, {} sequence errors",
        c[0], seq_err[0]
    );
    assert_eq!(c[0] as usize, TOTAL, "the engine accepted another byte count than the stream's");
    let _ = std::fs::remove_dir_all(&dir);
}
