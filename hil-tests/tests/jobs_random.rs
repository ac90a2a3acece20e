//! Scenario: a random sequence of jobs on one simulated board, each a new host session as a
//! `wsctl` invocation is, each checked against the golden models (issue 19).
//!
//! The jobs: an optimizer run (a random optimizer, straight or from 1 to 3 wafers through
//! SwarmX), whole mesh steps (a random MLP, batch and sample count), a training run with
//! MemoryX and SwarmX in the loop, a SwarmX configuration change and back (a rig injecting a
//! fault, then recovering), and a job whose host dies after creating its layers. Whatever a
//! job leaves, the next must compute exactly what the golden model does: every job starts
//! from the firmware's known state (docs/firmware.md "Every job starts from a known state"),
//! and a job replaces the layers a dead one left. The seed is printed, and `WS_JOBS_SEED`
//! replays a sequence.

use std::time::Duration;

use hil_tests::{Needs, Rig};
use host_driver::link::{Config, Link};
use host_driver::mesh::{golden_step, Gen, TrainRun};
use host_driver::optim::files::{example_wafers, Grads, Model};
use host_driver::optim::{self, Golden, LayerConfig, MxDevice, RunReport};
use ws_common::ctrl::cmd::{MxLayers, MxRelease, SwarmConfig, SwarmStatus};
use ws_common::golden::optim::Hyper;
use ws_common::golden::schedule::Schedule;
use ws_hdl::sim::SimProcess;

/// Jobs per sequence.
const JOBS: usize = 10;

fn link(sim: &SimProcess) -> Link {
    let t = hil_tests::connect(sim, sim.phy_addr());
    Link::connect(Box::new(t), Config::default(), Duration::from_secs(30)).expect("HELLO")
}

/// Every word of every array of two runs of the same files, compared.
fn differing_words(a: &RunReport, b: &RunReport) -> usize {
    a.layers
        .iter()
        .zip(&b.layers)
        .flat_map(|(x, y)| x.arrays.iter().zip(&y.arrays))
        .map(|((_, p), (_, q))| p.iter().zip(q).filter(|(u, v)| u != v).count() + p.len().abs_diff(q.len()))
        .sum()
}

fn optim_job(sim: &SimProcess, g: &mut Gen, what: &str) {
    let wafers = (g.bits() % 4) as u32;
    let hyper = match g.bits() % 4 {
        0 => Hyper::SGD,
        1 => Hyper { momentum: 0.9, nesterov: g.bits().is_multiple_of(2), ..Hyper::SGD },
        2 => Hyper::ADAM,
        _ => Hyper { amsgrad: g.bits().is_multiple_of(2), ..Hyper::ADAMW },
    };
    let steps = 1 + (g.bits() % 3) as u32;
    let (m, gr) = example_wafers(g.bits(), wafers).expect("example files");
    let model = Model::parse(&m, "model").expect("model");
    let grads = Grads::parse_wafers(&gr, "grads", &model, steps, wafers).expect("grads");
    let cfg = LayerConfig {
        len: 0,
        hyper,
        schedule: Schedule::constant(0.01),
        workers: wafers.max(1),
        batch: 1,
        start: 0,
    };
    let mut dev = optim::open_board(link(sim), "sim").expect("MemoryX");
    let board = optim::run(&mut dev, &model, &grads, steps, &|_| cfg, &mut |_| {})
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let gold = optim::run(&mut Golden::new(), &model, &grads, steps, &|_| cfg, &mut |_| {}).expect("golden");
    let diff = differing_words(&board, &gold);
    assert_eq!(
        diff, 0,
        "{what} ({wafers} wafers, {hyper:?}, {steps} steps): words differ from the golden model"
    );
}

fn mesh_step_job(sim: &SimProcess, g: &mut Gen, what: &str) {
    let shapes: [&[usize]; 3] = [&[16, 24, 12, 5], &[8, 16, 4], &[20, 10, 10, 3]];
    let dims = shapes[(g.bits() % 3) as usize];
    let b = 1 + (g.bits() % 4) as usize;
    let mut dev = host_driver::mesh::open_board(link(sim), "sim").expect("the mesh");
    let plan = dev.setup(dims, b, 3).unwrap_or_else(|e| panic!("{what}: setup {dims:?} B {b}: {e}"));
    let params: Vec<u32> = (0..plan.grad_words).map(|_| g.f32(0.4)).collect();
    for step in 1..=2u16 {
        let n = 1 + (g.bits() % u64::from(plan.capacity)) as usize;
        let x: Vec<u32> = (0..n * dims[0]).map(|_| g.f32(1.0)).collect();
        let classes = *dims.last().expect("dims") as u64;
        let labels: Vec<u32> = (0..n).map(|_| (g.bits() % classes) as u32).collect();
        let got = dev.step(step, &x, &labels, &params).unwrap_or_else(|e| panic!("{what}: step {step}: {e}"));
        let (metrics, want) = golden_step(&plan, dims, 3, step, &params, &x, &labels).expect("golden");
        let diff = got.gradients.iter().zip(&want).filter(|(a, b)| a != b).count();
        assert_eq!(
            (diff, got.gradients.len()),
            (0, want.len()),
            "{what}: step {step} of {dims:?}, B {b}, {n} samples: gradient words differ"
        );
        assert_eq!(got.done.loss, metrics.loss, "{what}: step {step}: loss");
    }
}

fn train_job(sim: &SimProcess, g: &mut Gen, what: &str) {
    let mut dev = host_driver::mesh::open_board(link(sim), "sim").expect("the mesh");
    let run = TrainRun {
        dims: vec![16, 24, 12, 5],
        batch_per_pe: 1 + (g.bits() % 4) as usize,
        steps: 2,
        hyper: if g.bits().is_multiple_of(2) { Hyper::ADAM } else { Hyper { momentum: 0.9, ..Hyper::SGD } },
        lr: 0.02,
        seed: g.bits(),
        verify: true,
        checkpoint: None,
    };
    let rows = run.run(&mut dev, &mut |_| {}).unwrap_or_else(|e| panic!("{what}: {e}"));
    for (t, r) in rows.iter().enumerate() {
        assert!(
            r.loss_exact && r.diff == Some(0),
            "{what}: step {} differs from the golden models: {r:?}",
            t + 1
        );
    }
}

/// A rig injects a fault (a random mask, bf16 on the wire, the scale, a dead wafer), then
/// puts the node back as the board boots: every port, fp32, no scale.
fn swarm_job(sim: &SimProcess, g: &mut Gen, what: &str) {
    let mut l = link(sim);
    let ports = l.request(&SwarmStatus, Duration::from_secs(5), 1).expect("SwarmStatus").ports;
    let all = (1u16 << ports) - 1;
    let mask = (g.bits() as u16 & all).max(1);
    let q = SwarmConfig {
        mask,
        dtype: (g.bits() % 2) as u8,
        scale: g.bits().is_multiple_of(2),
        timeout: 5_000,
        dead: 0b10,
    };
    let s = l.request(&q, Duration::from_secs(5), 0).unwrap_or_else(|e| panic!("{what}: {q:?}: {e}"));
    assert_eq!(s.host_mask, mask, "{what}");
    let back = SwarmConfig { mask: all, dtype: 0, scale: false, timeout: 100_000, dead: 0 };
    let s = l.request(&back, Duration::from_secs(5), 0).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(s.host_mask, all, "{what}");
}

/// A host that dies after creating its layers: they stay on the board until the next job
/// replaces them.
fn dead_host_job(sim: &SimProcess, g: &mut Gen, what: &str) {
    let mut dev = optim::open_board(link(sim), "sim").expect("MemoryX");
    let cfg = LayerConfig {
        len: 100 + (g.bits() % 1000) as u32,
        hyper: Hyper::ADAM,
        schedule: Schedule::constant(0.01),
        workers: 1,
        batch: 1,
        start: 0,
    };
    dev.create_layer(0, &cfg).unwrap_or_else(|e| panic!("{what}: {e}"));
    dev.create_layer(1, &cfg).unwrap_or_else(|e| panic!("{what}: {e}"));
    // The process dies: no release.
    std::mem::forget(dev);
    // What `wsctl mx status` shows: both layers, Adam's three arrays of whole store beats.
    let mut l = link(sim);
    let list = l.request(&MxLayers, Duration::from_secs(5), 1).expect("MxLayers");
    let beats = cfg.len.div_ceil(8) * 32;
    let got: Vec<(u16, u8, u8, u32, u32, u32)> =
        list.as_slice().iter().map(|x| (x.layer, x.opt, x.arrays, x.len, x.at, x.bytes)).collect();
    assert_eq!(got, [(0, 2, 0b111, cfg.len, 0, 3 * beats), (1, 2, 0b111, cfg.len, 0, 3 * beats)], "{what}");
    // `wsctl mx clear --layers 0x1`: layer 0 goes, layer 1 stays; a layer that is not there is
    // skipped.
    let info = l.request(&MxRelease { layers: 0b101 }, Duration::from_secs(5), 1).expect("MxRelease");
    assert_eq!(info.layers, 0b10, "{what}");
    assert_eq!(info.free_bytes, info.store_bytes - 3 * beats, "{what}: layer 0's store is free");
    drop(l);
    let dev = optim::open_board(link(sim), "sim").expect("MemoryX");
    assert_eq!(dev.released_at_open(), 0b10, "{what}: the next job replaces the dead job's layers");
    assert_eq!(
        (dev.info().layers, dev.info().free_bytes),
        (0, dev.info().store_bytes),
        "{what}: and finds all free"
    );
}

#[test]
fn a_random_sequence_of_jobs_on_one_board_is_bit_exact() {
    let Some(rig) = Rig::open("jobs_random", Needs::default()) else {
        return;
    };
    let sim = rig.sim().expect("a simulated board");
    let seed = std::env::var("WS_JOBS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    eprintln!("jobs_random: seed {seed} (WS_JOBS_SEED={seed} replays it)");
    let mut g = Gen(seed.max(1));
    let mut kinds = Vec::new();
    for j in 0..JOBS {
        // Every kind at least once, in a random order after the first five.
        let kind = if j < 5 { j } else { (g.bits() % 5) as usize };
        let what = format!("job {} of seed {seed}", j + 1);
        match kind {
            0 => optim_job(sim, &mut g, &format!("{what} (optim)")),
            1 => mesh_step_job(sim, &mut g, &format!("{what} (mesh step)")),
            2 => swarm_job(sim, &mut g, &format!("{what} (swarm config)")),
            3 => train_job(sim, &mut g, &format!("{what} (mesh train)")),
            _ => dead_host_job(sim, &mut g, &format!("{what} (a host that dies)")),
        }
        kinds.push(kind);
    }
    eprintln!("jobs_random: kinds {kinds:?}, every one bit-exact");
}
