//! Scenario: runs of training steps in one request (`MeshTrainRun`, issue 21, docs/mesh-array.md
//! "Runs of steps") on the simulated board's two wafers, jobs back to back on one board.
//!
//! - The same 8 steps of the digits, sent one request per step, then in runs of up to 16
//!   (a run of 7 ends at the evaluation after step 7, and the last step is a run of its own),
//!   then in runs of 5 (5, 2, 1), then in runs of up to 16 with the pipeline's debug switch
//!   (the first layer read back from the store instead of forwarded, docs/mesh-array.md
//!   "Forwarding"): each job ends bit-identical to the golden models, every weight and
//!   optimizer-state word, and every step's loss and correct count are the same bits. A run
//!   of more than one step chains on the wafers (docs/mesh-array.md "Chained steps").
//! - A run refused at its first step (the layers stand at another step) consumes every
//!   step's samples, more than channel 4's ring holds: the run in order that follows it, on
//!   the same session, trains, and a single step after it.
//!
//! Needs: `ws-sim` and the firmware (`cargo xtask build`).

use std::time::Duration;

use hil_tests::{Needs, Rig};
use host_driver::link::{Config, Link};
use host_driver::mesh::{open_board, BoardMesh};
use host_driver::train::data::Dataset;
use host_driver::train::{self, Board, Event, GoldenBoard, Options, StepOut, Summary, TrainConfig};
use ws_common::golden::optim::Hyper;
use ws_common::golden::schedule::Schedule;
use ws_hdl::sim::SimProcess;

const STEPS: u32 = 8;

fn config() -> TrainConfig {
    TrainConfig { steps: Some(STEPS), wafers: 2, seed: 11, eval_every: 7, ..TrainConfig::default() }
}

fn mesh(sim: &SimProcess) -> BoardMesh {
    let t = hil_tests::connect(sim, sim.phy_addr());
    let link = Link::connect(Box::new(t), Config::default(), Duration::from_secs(30)).expect("HELLO");
    open_board(link, "sim").expect("the mesh")
}

/// The run and every step's answer.
fn run(dev: &mut dyn train::Backend, opts: &Options) -> (Summary, Vec<StepOut>) {
    let mut outs = Vec::new();
    let s = train::train(dev, &config(), &Dataset::digits(), opts, &mut |e| {
        if let Event::Step { out, .. } = e {
            outs.push(*out);
        }
    })
    .expect("training");
    (s, outs)
}

#[test]
fn runs_of_steps_equal_single_steps_and_the_golden_models() {
    let Some(rig) = Rig::open("train_run", Needs::default()) else { return };
    let Some(sim) = rig.sim() else { return };
    let (want, golden_steps) = run(&mut GoldenBoard::new(), &Options::default());
    for (per_request, read_back) in [(1, false), (16, false), (5, false), (16, true)] {
        let opts = Options { steps_per_request: per_request, read_back, ..Options::default() };
        let (s, steps) = run(&mut Board::new(mesh(sim), "sim"), &opts);
        for (l, (a, b)) in s.arrays.iter().zip(&want.arrays).enumerate() {
            assert_eq!(a, b, "{per_request} steps per request: layer {l} differs from the golden models");
        }
        assert_eq!(steps.len(), golden_steps.len(), "{per_request} steps per request: steps run");
        for (t, (a, b)) in steps.iter().zip(&golden_steps).enumerate() {
            assert_eq!(
                (a.loss, a.correct),
                (b.loss, b.correct),
                "{per_request} steps per request: step {} metrics",
                t + 1
            );
        }
        assert_eq!(s.test.map(|p| p.test_accuracy), want.test.map(|p| p.test_accuracy));
        println!(
            "{per_request} steps per request{}: {} board cycles per step",
            if read_back { ", read back" } else { "" },
            s.step_cycles.unwrap_or(0) / u64::from(STEPS)
        );
    }
}

#[test]
fn a_refused_run_consumes_its_samples_and_the_next_run_trains() {
    use host_driver::optim::{Array, LayerConfig, MxDevice};

    let Some(rig) = Rig::open("train_run_refused", Needs::default()) else { return };
    let Some(sim) = rig.sim() else { return };
    let mut dev = mesh(sim);
    let dims = [64usize, 12, 5];
    let plan = dev.setup(&dims, 4, 1).expect("MeshSetup");
    let cap = plan.capacity as usize;
    for l in 0..2 {
        let len = ((dims[l] + 1) * dims[l + 1]) as u32;
        let lc = LayerConfig {
            len,
            hyper: Hyper::ADAM,
            schedule: Schedule::constant(0.01),
            workers: 2,
            batch: cap as u32,
            start: 0,
        };
        dev.mx().create_layer(l as u16, &lc).expect("MxCreate");
        dev.mx().write_array(l as u16, Array::W, &vec![0x3c00_0000; len as usize]).expect("weights");
        for a in [Array::M, Array::V] {
            dev.mx().write_array(l as u16, a, &vec![0; len as usize]).expect("Adam state");
        }
    }
    // Six steps of two full wafers each: 50 KiB of samples, more than channel 4's ring
    // (32 KiB) holds at once, so the credit holds the host back while the board consumes them.
    let batches: Vec<(Vec<u32>, Vec<u32>)> = (0..6u32)
        .map(|s| {
            let n = 2 * cap;
            let x =
                (0..n * dims[0]).map(|i| ((i as u32 * 7 + s) % 13) as f32 / 13.0).map(f32::to_bits).collect();
            let y = (0..n).map(|i| (i as u32 + s) % 5).collect();
            (x, y)
        })
        .collect();
    let refs: Vec<(&[u32], &[u32])> = batches.iter().map(|(x, y)| (x.as_slice(), y.as_slice())).collect();

    // The layers stand at step 0: a run from step 4 is refused, with what to do.
    let e = dev.train_run(4, 2, &refs).expect_err("a run out of order");
    assert!(e.to_string().contains("steps 4..=9"), "{e}");
    assert!(e.to_string().contains("in order"), "{e}");
    // Every sample of the refused run was consumed: the run in order trains on its own.
    let run = dev.train_run(1, 2, &refs).expect("the run in order");
    assert_eq!(run.steps().len(), 6);
    for (i, d) in run.steps().iter().enumerate() {
        assert_eq!(d.step, i as u16 + 1, "the answers come in step order");
        assert!(f32::from_bits(d.loss) > 0.0, "step {}: a loss", i + 1);
    }
    assert!(run.cycles > 0, "the board counted the run's cycles");
    // And a single step after it, at step 7.
    dev.train_on(7, 2, &batches[0].0, &batches[0].1).expect("step 7");
    dev.mx().release().expect("release");
}
