//! Scenario: bulk streams through the board's link engine, every bulk channel at once in both
//! directions, clean and through the simulator's fault injector.
//!
//! The firmware opens one DMA window per bulk receive channel and loops it back into its
//! transmit slot (weights 2 → 2, gradients 3 → 3, data 4 → trace 6), so every byte the host
//! sends comes back from the engine's RAM without the CPU touching it. The host streams
//! random payload on channels 2, 3, 4 and reads channels 2, 3, 6, and compares SHA-256 of
//! what it sent and what came back, per channel.
//!
//! With faults (1 % bit flips, 1 % drops, 0.1 % duplicates on the bulk channels, both
//! directions) the result must be byte-identical. Every flip the injector put into a
//! board-to-host payload is exactly one payload CRC error at the host, every one it put into
//! a host-to-board payload is one payload CRC error in the engine's counters, and the engine
//! retransmitted frames; the run prints what was injected and what was detected.
//!
//! Size: `WS_LINK_BULK_MIB` MiB each way in all (default 64, split over the three channels),
//! for the clean run and again for the faults. Needs: the simulator's control port.

use std::time::{Duration, Instant};

use hil_tests::{Needs, Rig};
use host_driver::link::{Config, Link};
use host_driver::transport::SimTransport;
use rand::{RngExt, SeedableRng};
use sha2::{Digest, Sha256};
use ws_common::ctrl::cmd::LinkCounters;
use ws_common::link::Channel;

const SENDS: [Channel; 3] = [Channel::Weights, Channel::Gradients, Channel::Data];
const ECHOES: [Channel; 3] = [Channel::Weights, Channel::Gradients, Channel::Trace];

fn total_bytes() -> usize {
    let mib: usize = std::env::var("WS_LINK_BULK_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(64);
    mib << 20
}

/// One channel pair's stream: a seeded generator, and SHA-256 of both ends.
struct Stream {
    rng: rand::rngs::StdRng,
    pending: Vec<u8>,
    sent: usize,
    got: usize,
    sent_sha: Sha256,
    got_sha: Sha256,
}

/// Streams `per_channel` bytes on every pair and returns the bytes each pair moved, after
/// checking the digests. Prints progress every few seconds.
fn round_trip(link: &mut Link, per_channel: usize, seed: u64, what: &str) -> Duration {
    let mut s: Vec<Stream> = (0..3)
        .map(|i| Stream {
            rng: rand::rngs::StdRng::seed_from_u64(seed + i),
            pending: Vec::new(),
            sent: 0,
            got: 0,
            sent_sha: Sha256::new(),
            got_sha: Sha256::new(),
        })
        .collect();
    let start = Instant::now();
    let mut last_print = start;
    let mut last_progress = (start, 0usize);
    let mut buf = vec![0u8; 256 << 10];
    loop {
        for (i, st) in s.iter_mut().enumerate() {
            if st.pending.is_empty() && st.sent < per_channel {
                let n = (per_channel - st.sent).min(64 << 10);
                st.pending = vec![0; n];
                st.rng.fill(&mut st.pending[..]);
            }
            if !st.pending.is_empty() {
                let n = link.endpoint().write(SENDS[i], &st.pending).expect("bulk write");
                st.sent_sha.update(&st.pending[..n]);
                st.sent += n;
                st.pending.drain(..n);
            }
        }
        link.pump(Duration::from_millis(1)).expect("link pump");
        for (i, st) in s.iter_mut().enumerate() {
            loop {
                let n = link.endpoint().read(ECHOES[i], &mut buf).expect("bulk read");
                if n == 0 {
                    break;
                }
                st.got_sha.update(&buf[..n]);
                st.got += n;
                assert!(st.got <= per_channel, "{what}: channel {:?} echoed more than was sent", ECHOES[i]);
            }
        }
        let done: usize = s.iter().map(|st| st.got).sum();
        if done == 3 * per_channel {
            break;
        }
        let now = Instant::now();
        if done > last_progress.1 {
            last_progress = (now, done);
        }
        assert!(
            now.duration_since(last_progress.0) < Duration::from_secs(60),
            "{what}: no echoed byte for 60 s at {done} of {} bytes: {:?}",
            3 * per_channel,
            link.endpoint().stats()
        );
        if now.duration_since(last_print) >= Duration::from_secs(10) {
            last_print = now;
            let secs = now.duration_since(start).as_secs_f64();
            eprintln!(
                "link_bulk {what}: {:.1} of {:.1} MiB echoed, {:.2} MiB/s",
                done as f64 / 1048576.0,
                3.0 * per_channel as f64 / 1048576.0,
                done as f64 / 1048576.0 / secs
            );
        }
    }
    for (i, st) in s.into_iter().enumerate() {
        let (a, b) = (st.sent_sha.finalize(), st.got_sha.finalize());
        assert_eq!(a, b, "{what}: channel {:?} -> {:?}: SHA-256 differs", SENDS[i], ECHOES[i]);
    }
    start.elapsed()
}

/// A run of the engine's counters (docs/link-engine.md "Counter index"), over the link.
fn engine_counters(link: &mut Link, first: u8, count: u8) -> Vec<u32> {
    link.request(&LinkCounters { first, count }, Duration::from_secs(5), 3).expect("LinkCounters")
}

#[test]
fn every_bulk_channel_round_trips_byte_identical_clean_and_through_faults() {
    let Some(rig) = Rig::open("link_bulk", Needs { defmt_log: false, sim_control: true }) else {
        return;
    };
    let sim = rig.sim().expect("a simulated board");
    let t = SimTransport::connect(sim.phy_addr()).expect("PHY port");
    let cfg = Config { max_payload: 4096, ..Config::default() };
    let mut link = Link::connect(Box::new(t), cfg, Duration::from_secs(20)).expect("HELLO");

    let total = total_bytes();
    let per = (total / 3) & !3;
    let took = round_trip(&mut link, per, 1, "clean");
    let stats0 = sim.stats().expect("stats");
    eprintln!(
        "link_bulk clean: {:.1} MiB each way over 3 channels in {:.1} s ({:.2} MiB/s each way), {} cycles simulated",
        3.0 * per as f64 / 1048576.0,
        took.as_secs_f64(),
        3.0 * per as f64 / 1048576.0 / took.as_secs_f64(),
        stats0["cycle"]
    );
    assert_eq!(link.endpoint().stats().payload_errors.iter().sum::<u64>(), 0, "a clean run saw CRC errors");
    let pcrc_before: u32 = engine_counters(&mut link, 0x12, 3).iter().sum();
    assert_eq!(pcrc_before, 0, "the engine saw payload CRC errors on a clean run");

    let rules =
        "both:flip:rate=0.01:ch=2,3,4,6 both:drop:rate=0.01:ch=2,3,4,6 both:dup:rate=0.001:ch=2,3,4,6";
    let set = sim.ctrl(&format!("fault {rules}")).expect("fault request");
    assert_eq!(set["ok"], true, "{set}");
    let host_pcrc0 = link.endpoint().stats().payload_errors;
    let per_faults = per;
    let took = round_trip(&mut link, per_faults, 100, "faults");
    let stats = sim.ctrl("fault").expect("fault stats");
    sim.ctrl("fault clear").expect("fault clear");

    let host_pcrc = link.endpoint().stats().payload_errors;
    let b2h_detected: u64 = ECHOES.iter().map(|c| host_pcrc[c.index()] - host_pcrc0[c.index()]).sum();
    let b2h_injected: u64 =
        ECHOES.iter().map(|c| stats["b2h"]["payload_hits"][c.index()].as_u64().unwrap()).sum();
    let h2b_detected: u32 = engine_counters(&mut link, 0x12, 3).iter().sum();
    let h2b_injected: u64 =
        SENDS.iter().map(|c| stats["h2b"]["payload_hits"][c.index()].as_u64().unwrap()).sum();
    let retx: u32 = engine_counters(&mut link, 0x50, 3).iter().sum();
    let injected = |d: &str, k: &str| stats[d]["injected"][k]["total"].as_u64().unwrap();
    eprintln!(
        "link_bulk faults: {:.1} MiB each way in {:.1} s; injected h2b flip {} drop {} dup {}, b2h flip {} drop {} dup {}; \
         payload hits h2b {h2b_injected} (engine pcrc errors {h2b_detected}), b2h {b2h_injected} (host pcrc errors {b2h_detected}); \
         engine retransmits {retx}",
        3.0 * per_faults as f64 / 1048576.0,
        took.as_secs_f64(),
        injected("h2b", "flip"),
        injected("h2b", "drop"),
        injected("h2b", "dup"),
        injected("b2h", "flip"),
        injected("b2h", "drop"),
        injected("b2h", "dup"),
    );
    assert!(injected("h2b", "flip") > 0 && injected("b2h", "drop") > 0, "the injector did little: {stats}");
    assert_eq!(b2h_detected, b2h_injected, "every board-to-host payload hit is one CRC error at the host");
    assert_eq!(
        h2b_detected as u64, h2b_injected,
        "every host-to-board payload hit is one CRC error in the engine"
    );
    assert!(retx > 0, "drops on the board's sending side but no retransmission");
}
