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
use host_driver::link::echo::{self, ECHOES, SENDS};
use host_driver::link::{Config, Link};
use ws_common::ctrl::cmd::LinkCounters;

fn total_bytes() -> usize {
    let mib: usize = std::env::var("WS_LINK_BULK_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(64);
    mib << 20
}

/// The echo with progress lines every 10 s; panics on a failure.
fn round_trip(link: &mut Link, per_channel: usize, seed: u64, what: &str) -> Duration {
    let mut last = Instant::now();
    let mut progress = |done: usize, all: usize| {
        if last.elapsed() >= Duration::from_secs(10) {
            last = Instant::now();
            eprintln!(
                "link_bulk {what}: {:.1} of {:.1} MiB echoed",
                done as f64 / 1048576.0,
                all as f64 / 1048576.0
            );
        }
    };
    let r = echo::run(link, per_channel, seed, Duration::from_secs(60), &mut progress)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    r.elapsed
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
    let t = hil_tests::connect(sim, sim.phy_addr());
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
    // Turn the injector off and take its totals in one request: a retransmission or ack the
    // host still sends after the echo completed must not be hit between the two.
    let stats = sim.ctrl("fault clear").expect("fault clear");

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
