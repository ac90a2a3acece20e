//! Scenario: SwarmX in the simulated board's data plane (issue 6 with issue 5's MemoryX).
//!
//! Several wafers' gradients go through the board's SwarmX node into MemoryX's optimizer:
//! the host sends each step as K interleaved gradient streams (`MxStep::wafers`), the node
//! sums them in its fixed order, and the lanes update the layer. Every word read back is
//! bit-identical with the host's golden model of the same node (`golden::swarm`) followed by
//! the golden optimizer.
//!
//! Then a wafer stops answering (the rig's fault injection, `SwarmConfig::dead`): the node
//! times its port out and aborts the chunk with an error flit, the firmware's policy masks
//! the port, feeds the chunk again over the other wafers, and reports the events; the step
//! still completes and is bit-exact with the golden model of the surviving wafers. A fan-out
//! wider than the node is refused and loses nothing.

use std::time::Duration;

use hil_tests::{Needs, Rig};
use host_driver::link::{Config, Link};
use host_driver::optim::{open_board, Array, BoardMx, Golden, LayerConfig, MxDevice};
use ws_common::ctrl::cmd::{SwarmConfig, SwarmEvents, SwarmStatus};
use ws_common::ctrl::Status;
use ws_common::golden::optim::Hyper;
use ws_common::golden::schedule::Schedule;
use ws_common::golden::swarm::{node_lane, NodeConfig};

/// The simulated SoC's node.
const PORTS: usize = 4;
/// Parameters of the layer: two whole chunks of 256 and a short one.
const LEN: u32 = 600;

/// A small deterministic generator (xorshift), so the scenario needs no extra crate.
struct Gen(u64);

impl Gen {
    fn f32(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let unit = (self.0 >> 40) as f32 / (1u64 << 24) as f32;
        (unit * 2.0 - 1.0).to_bits()
    }

    fn words(&mut self, n: u32) -> Vec<u32> {
        (0..n).map(|_| self.f32()).collect()
    }
}

/// The node's sum of the wafers' gradients, ports of `mask` active, no scale.
fn reduce(per_wafer: &[Vec<u32>], mask: u16) -> Vec<u32> {
    let cfg = NodeConfig::new(PORTS).mask(mask);
    (0..per_wafer[0].len())
        .map(|i| {
            let mut v = [0u32; PORTS];
            for (k, g) in per_wafer.iter().enumerate() {
                v[k] = g[i];
            }
            node_lane(&cfg, &v).expect("node configuration")
        })
        .collect()
}

fn config(dev: &mut BoardMx, mask: u16, dead: u16) {
    let q = SwarmConfig { mask, dtype: 0, scale: false, timeout: 2_000, dead };
    dev.link().request(&q, Duration::from_secs(30), 0).expect("SwarmConfig");
}

fn same_state(dev: &mut BoardMx, gold: &mut Golden, what: &str) {
    for a in [Array::W, Array::M, Array::V] {
        let (b, g) = (dev.read_array(0, a, LEN).expect("read"), gold.read_array(0, a, LEN).unwrap());
        let diff = b.iter().zip(&g).filter(|(x, y)| x != y).count();
        assert_eq!(diff, 0, "{what}: {} differs from the golden model in {diff} of {LEN} words", a.name());
    }
}

#[test]
fn wafers_gradients_are_reduced_by_swarmx_and_a_dead_wafer_is_masked() {
    let Some(rig) = Rig::open("swarm_wafers", Needs::default()) else {
        return;
    };
    let sim = rig.sim().expect("a simulated board");
    let t = hil_tests::connect(sim, sim.phy_addr());
    let link = Link::connect(Box::new(t), Config::default(), Duration::from_secs(30)).expect("HELLO");
    let mut dev = open_board(link, "sim").expect("MemoryX");
    let cfg = LayerConfig {
        len: LEN,
        hyper: Hyper { weight_decay: 0.01, ..Hyper::ADAM },
        schedule: Schedule::constant(1e-2),
        workers: 3,
        batch: 2,
        start: 0,
    };
    let mut gen = Gen(0x5eed_5a4d);
    let w = gen.words(LEN);
    let mut gold = Golden::new();
    for d in [&mut dev as &mut dyn MxDevice, &mut gold] {
        d.create_layer(0, &cfg).expect("layer 0");
        d.write_array(0, Array::W, &w).expect("w");
        for a in [Array::M, Array::V] {
            d.write_array(0, a, &vec![0; LEN as usize]).expect("state");
        }
    }

    // Three wafers on ports 0..2, three steps.
    config(&mut dev, 0x7, 0);
    for t in 1..=3 {
        let per_wafer: Vec<Vec<u32>> = (0..3).map(|_| gen.words(LEN)).collect();
        let refs: Vec<&[u32]> = per_wafer.iter().map(Vec::as_slice).collect();
        let done = dev.step_layer_wafers(0, t, &refs).expect("a three-wafer step");
        assert_eq!((done.chunks, done.refed), (3, 0), "step {t}: {done:?}");
        gold.step(t, &[(0, &reduce(&per_wafer, 0x7))]).unwrap();
    }
    same_state(&mut dev, &mut gold, "after three three-wafer steps");
    let s = dev.link().request(&SwarmStatus, Duration::from_secs(30), 0).expect("SwarmStatus");
    assert_eq!(s.reduced, 3 * LEN, "reduced flits: {s:?}");
    assert_eq!(s.errors, 0, "aborted chunks: {s:?}");
    for (k, p) in s.port[..PORTS].iter().enumerate() {
        let want = if k < 3 { 3 * LEN } else { 0 };
        assert_eq!(p.up_flits, want, "port {k}'s gradient flits: {s:?}");
        // The weights go down the broadcast to every active port.
        assert_eq!(p.dn_flits, want, "port {k}'s weight flits: {s:?}");
    }

    // A fan-out wider than the node is refused, and its words are consumed.
    let wide: Vec<Vec<u32>> = (0..PORTS + 1).map(|_| gen.words(LEN)).collect();
    let refs: Vec<&[u32]> = wide.iter().map(Vec::as_slice).collect();
    let e = dev.step_layer_wafers(0, 4, &refs).expect_err("five wafers on a four-port node");
    assert_eq!(e.refusal(), Some(Status::BadArgument), "{e}");

    // Wafer 3 stops answering: four wafers configured, its words never sent.
    config(&mut dev, 0xf, 1 << 3);
    let per_wafer: Vec<Vec<u32>> = (0..4).map(|_| gen.words(LEN)).collect();
    let refs: Vec<&[u32]> = per_wafer.iter().map(Vec::as_slice).collect();
    let done = dev.step_layer_wafers(0, 4, &refs).expect("the step survives the dead wafer");
    assert_eq!(done.refed, 1, "the aborted chunk was fed once more: {done:?}");
    gold.step(4, &[(0, &reduce(&per_wafer, 0x7))]).unwrap();
    same_state(&mut dev, &mut gold, "after the step with a dead wafer");

    let ev = dev.link().request(&SwarmEvents, Duration::from_secs(30), 0).expect("SwarmEvents");
    let evs = &ev.events[..usize::from(ev.count)];
    eprintln!("swarm_wafers: events\n{}", host_driver::report::swarm_events(&ev));
    let abort = evs.iter().find(|e| e.kind == 1).expect("an abort event");
    assert_eq!((abort.code, abort.port, abort.layer, abort.step, abort.chunk), (1, 3, 0, 4, 0), "{abort:?}");
    let masked = evs.iter().find(|e| e.kind == 2).expect("a port-masked event");
    assert_eq!((masked.port, masked.mask), (3, 0x7), "{masked:?}");
    let s = dev.link().request(&SwarmStatus, Duration::from_secs(30), 0).expect("SwarmStatus");
    eprintln!("swarm_wafers: status\n{}", host_driver::report::swarm_status(&s));
    assert_eq!(s.errors, 1, "one chunk aborted: {s:?}");
    assert_eq!(s.up_mask & 0xf, 0x7, "port 3 masked in the node: {s:?}");
    assert_ne!(s.port[3].state, 0, "port 3's state: {s:?}");

    // The next step runs on the three wafers left, with nothing fed again.
    config(&mut dev, 0x7, 0);
    let per_wafer: Vec<Vec<u32>> = (0..3).map(|_| gen.words(LEN)).collect();
    let refs: Vec<&[u32]> = per_wafer.iter().map(Vec::as_slice).collect();
    let done = dev.step_layer_wafers(0, 5, &refs).expect("step 5");
    assert_eq!(done.refed, 0, "{done:?}");
    gold.step(5, &[(0, &reduce(&per_wafer, 0x7))]).unwrap();
    same_state(&mut dev, &mut gold, "after step 5");

    // Every port a three-wafer step would use is masked (only port 3 active): refused before
    // a word moves, and the layer is untouched.
    config(&mut dev, 0x8, 0);
    let per_wafer: Vec<Vec<u32>> = (0..3).map(|_| gen.words(LEN)).collect();
    let refs: Vec<&[u32]> = per_wafer.iter().map(Vec::as_slice).collect();
    let e = dev.step_layer_wafers(0, 6, &refs).expect_err("three wafers on ports that are all masked");
    assert_eq!(e.refusal(), Some(Status::BadArgument), "{e}");
    eprintln!("swarm_wafers: a step on masked ports: {e}");
    assert!(e.to_string().contains("port mask 0x8"), "the refusal names the mask: {e}");
    same_state(&mut dev, &mut gold, "after the refused step");
    config(&mut dev, 0x7, 0);
    let done = dev.step_layer_wafers(0, 6, &refs).expect("step 6 once the ports are back");
    assert_eq!(done.refed, 0, "{done:?}");
    gold.step(6, &[(0, &reduce(&per_wafer, 0x7))]).unwrap();
    same_state(&mut dev, &mut gold, "after step 6");
}
