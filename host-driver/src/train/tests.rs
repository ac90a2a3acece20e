//! The training loop on the golden models: the same seed twice is bit-identical, a run
//! resumed from a checkpoint ends where an uninterrupted one does, and it learns.

use super::*;
use crate::train::data::Dataset;

fn small() -> TrainConfig {
    TrainConfig { hidden: vec![16], steps: Some(12), checkpoint_every: 5, lr: 0.01, ..Default::default() }
}

fn golden(cfg: &TrainConfig, opts: &Options) -> Summary {
    train(&mut GoldenBoard::new(), cfg, &Dataset::digits(), opts, &mut |_| {}).unwrap()
}

#[test]
fn the_same_seed_trains_the_same_words() {
    let (a, b) = (golden(&small(), &Options::default()), golden(&small(), &Options::default()));
    assert_eq!(a.arrays, b.arrays);
    assert_eq!(a.curves, b.curves);
    let c = golden(&TrainConfig { seed: 2, ..small() }, &Options::default());
    assert_ne!(a.arrays, c.arrays);
}

#[test]
fn a_resumed_run_ends_bit_identical_to_an_uninterrupted_one() {
    let dir = std::env::temp_dir().join(format!("ws-train-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ck.safetensors");
    // 44 steps an epoch at the defaults: stop at step 50 (mid-epoch 2), then run to 60.
    let cfg = TrainConfig { steps: Some(60), checkpoint_every: 0, ..small() };
    let whole = golden(&cfg, &Options::default());
    let first = TrainConfig { steps: Some(50), ..cfg.clone() };
    golden(&first, &Options { checkpoint: Some(path.clone()), ..Options::default() });
    let ck = Checkpoint::load(&path).unwrap();
    assert_eq!((ck.step, ck.epoch), (50, 1));
    let rest = golden(&cfg, &Options { resume: Some(ck), ..Options::default() });
    assert_eq!(rest.steps, (51, 60));
    assert!(rest.arrays == whole.arrays, "the resumed run's weights and state differ");
    assert_eq!(rest.curves.steps[..], whole.curves.steps[50..]);
    // A checkpoint of another configuration is refused before anything runs.
    let ck = Checkpoint::load(&path).unwrap();
    let e = train(
        &mut GoldenBoard::new(),
        &TrainConfig { lr: 0.5, ..cfg },
        &Dataset::digits(),
        &Options { resume: Some(ck), ..Options::default() },
        &mut |_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("different configuration"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn it_learns_the_digits() {
    let s = golden(&TrainConfig { steps: Some(132), ..small() }, &Options::default());
    let t = s.test.expect("evaluated");
    assert!(t.test_accuracy > 0.8, "test accuracy {} after 3 epochs", t.test_accuracy);
    assert!(s.curves.steps[0].loss > s.train_loss as f32);
}

#[test]
fn refusals_come_before_anything_runs() {
    let mut dev = GoldenBoard::new();
    let e = train(
        &mut dev,
        &TrainConfig { wafers: 3, ..small() },
        &Dataset::digits(),
        &Options::default(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("--wafers 2"), "{e}");
    // Nothing was created: the same device runs the next job.
    assert!(train(&mut dev, &small(), &Dataset::digits(), &Options::default(), &mut |_| {}).is_ok());
}
