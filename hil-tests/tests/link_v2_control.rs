//! Scenario: link protocol v2 on the control channel, through the simulator's fault injector.
//!
//! The host says HELLO to the board's link engine (the board answers with its version and the
//! credit of its DMA windows on the bulk channels), then runs control requests while the simulator drops and corrupts a fifth of
//! the frames on channels 0 and 1 in both directions. Every request must succeed by
//! retrying under its own request id, and the board must run each exactly once: the replay
//! cache answers the retries. Every board-to-host frame the injector damaged in its payload
//! is exactly one payload CRC error at the host.
//!
//! Needs: the simulator's control port (the fault injector) and the defmt log.

use std::time::Duration;

use hil_tests::{Needs, Rig};
use host_driver::link::{Config, Link, LinkState};
use ws_common::ctrl::cmd::{LogEcho, Ping};
use ws_common::link::Channel;

#[test]
fn control_over_link_v2_survives_faults_and_runs_each_request_once() {
    let Some(rig) = Rig::open("link_v2_control", Needs { defmt_log: true, sim_control: true }) else {
        return;
    };
    let sim = rig.sim().expect("a simulated board");
    // The link engine's PHY, beside the rig's v1 client on the host-link bytes.
    let t = hil_tests::connect(sim, sim.phy_addr());
    let mut link = Link::connect(Box::new(t), Config::default(), Duration::from_secs(20)).expect("HELLO");
    let LinkState::Up { max_payload, window, resumed } = link.endpoint().state().clone() else {
        unreachable!()
    };
    assert_eq!((max_payload, window, resumed), (4096, 16, false));
    // The firmware's echo windows: a quarter of the engine's DMA RAM each.
    let window = link.endpoint().peer_state(Channel::Weights).unwrap().credit;
    assert!(window.is_power_of_two() && window >= 4096, "window of {window} B");
    for ch in [Channel::Gradients, Channel::Data] {
        assert_eq!(link.endpoint().peer_state(ch).unwrap().credit, window, "{ch:?}: the same DMA window");
    }
    let t = Duration::from_secs(5);
    assert_eq!(link.request(&Ping { nonce: 0x1234_5678 }, t, 0).expect("ping over v2"), 0x1234_5678);

    let rules = "both:drop:rate=0.2:ch=0,1 both:flip:rate=0.2:ch=0,1";
    let set = sim.ctrl(&format!("fault {rules}")).expect("fault request");
    assert_eq!(set["ok"], true, "{set}");

    const N: u32 = 40;
    for v in 0..N {
        let r = link.request(&LogEcho { value: 0x7700 + v, tag: 5 }, Duration::from_millis(400), 30);
        r.unwrap_or_else(|e| panic!("log-echo {v} through 20 % faults: {e}"));
    }
    let stats = sim.ctrl("fault").expect("fault stats");
    let b2h_hits = stats["b2h"]["payload_hits"][1].as_u64().unwrap();
    let injected: u64 = ["h2b", "b2h"]
        .iter()
        .map(|d| {
            stats[d]["injected"]["drop"]["total"].as_u64().unwrap()
                + stats[d]["injected"]["flip"]["total"].as_u64().unwrap()
        })
        .sum();
    assert!(injected >= 5, "the injector did little: {stats}");
    assert!(link.retries > 0, "faults at 20 % but no retry");
    assert_eq!(
        link.endpoint().stats().payload_errors[1],
        b2h_hits,
        "every board-to-host payload hit is one CRC error at the host: {stats}"
    );
    let cleared = sim.ctrl("fault clear").expect("fault clear");
    assert_eq!(cleared["rules"].as_array().map(Vec::len), Some(0));
    assert_eq!(link.request(&Ping { nonce: 7 }, t, 0).expect("ping after the faults"), 7);

    // Each request ran exactly once: one log line per value, retries answered from the cache.
    let lines = rig.wait_for_log(&format!("value={}", 0x7700 + N - 1), Duration::from_secs(20));
    for v in 0..N {
        let needle = format!("log-echo value={} tag=5", 0x7700 + v);
        let n = lines.iter().filter(|l| l.message.contains(&needle)).count();
        assert_eq!(n, 1, "`{needle}` logged {n} times ({} retries in all)", link.retries);
    }
    eprintln!(
        "link_v2_control: {N} requests, {} retries, faults: h2b {} | b2h {}",
        link.retries, stats["h2b"]["summary"], stats["b2h"]["summary"]
    );
}
