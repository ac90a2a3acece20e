//! Scenario: whole MLP training steps on the simulated board's wafer mesh (issue 7, system
//! level), driven the way `wsctl mesh step` drives them.
//!
//! The host names an MLP (`MeshSetup`); the firmware checks it against the 2×2 array, writes
//! the route tables and keeps the shape. Each step (`MeshStep`) streams the samples on
//! channel 4, the weights on channel 2 (forward, then the backward pass), and reads the
//! gradients back on channel 2; the firmware places the samples, loads the programs, starts
//! the PEs and moves the rings. Every gradient word and both metrics words equal the golden
//! model (`golden::mesh::step`), for a full batch and for a partial one (empty PEs), two
//! steps in a row so the streams are seen to stay in step.
//!
//! Then bad input: a shape the PEs cannot hold, a batch larger than the mesh, a step before
//! any setup; each is refused with a message that says what to change, and a good step
//! still runs after them.

use std::time::Duration;

use hil_tests::{Needs, Rig};
use host_driver::link::{Config, Link};
use host_driver::mesh::{golden_step, open_board, Gen};
use ws_common::ctrl::cmd::MxCounters;

#[test]
fn mlp_steps_on_the_board_mesh_are_bit_exact_and_bad_shapes_are_refused() {
    let Some(rig) = Rig::open("mesh_step", Needs::default()) else {
        return;
    };
    let sim = rig.sim().expect("a simulated board");
    let t = hil_tests::connect(sim, sim.phy_addr());
    let link = Link::connect(Box::new(t), Config::default(), Duration::from_secs(30)).expect("HELLO");
    let mut dev = open_board(link, "sim").expect("the mesh");

    // A step before any setup is refused by the host, and nothing is sent.
    let e = dev.step(1, &[0; 16], &[0], &[]).expect_err("a step without setup");
    assert!(e.to_string().contains("setup"), "{e}");

    // More than the PEs hold: refused by the board, with what to change.
    let e = dev.setup(&[16, 600, 5], 8, 2).expect_err("a shape past the SRAM");
    let msg = e.to_string();
    assert!(msg.contains("refused") && msg.contains("smaller batch"), "{msg}");
    // Eight layers: refused on the host (the egress table holds seven).
    let e = dev.setup(&[4; 9], 1, 1).expect_err("eight layers");
    assert!(e.to_string().contains("1 to 7"), "{e}");

    let (dims, b, rpc) = ([16usize, 24, 12, 5], 4usize, 3usize);
    let plan = dev.setup(&dims, b, rpc).expect("MeshSetup");
    assert_eq!((plan.rows, plan.cols, plan.b), (2, 2, 4), "{plan:?}");
    let layer_words = [17 * 24, 25 * 12, 13 * 5];
    assert_eq!(plan.grad_words, layer_words.iter().sum::<u32>(), "{plan:?}");
    assert_eq!(plan.weight_words, plan.grad_words + layer_words[1] + layer_words[2], "{plan:?}");
    assert_eq!(plan.capacity, 16);

    let mut gen = Gen(0x6d65_7368);
    let params: Vec<u32> = (0..plan.grad_words).map(|_| gen.f32(0.4)).collect();
    // A full batch, then a partial one (the last PE empty, the third half full).
    for (step, n) in [(11u16, 16usize), (12, 10)] {
        let x: Vec<u32> = (0..n * dims[0]).map(|_| gen.f32(1.0)).collect();
        let labels: Vec<u32> = (0..n).map(|_| (gen.bits() % 5) as u32).collect();
        let got = dev.step(step, &x, &labels, &params).unwrap_or_else(|e| panic!("step {step}: {e}"));
        let (metrics, want) = golden_step(&plan, &dims, rpc, step, &params, &x, &labels).expect("golden");
        assert_eq!(got.done.step, step);
        assert_eq!(got.done.loss, metrics.loss, "step {step}: loss sum");
        assert_eq!(got.done.correct, (metrics.correct as f32).to_bits(), "step {step}: correct count");
        assert_eq!(got.gradients.len(), want.len(), "step {step}: gradient words");
        let diff: Vec<usize> = (0..want.len()).filter(|&i| got.gradients[i] != want[i]).collect();
        assert!(
            diff.is_empty(),
            "step {step}: {} gradient words differ, first at {:?}",
            diff.len(),
            diff.first()
        );
        assert_eq!(got.done.grad_words, plan.grad_words);
        assert!(got.done.cycles > 0 && got.done.fmas > 0, "{:?}", got.done);
    }

    // A batch larger than the mesh: refused on the host, nothing sent, the next step runs.
    let e = dev.step(13, &vec![0; 17 * 16], &[0; 17], &params).expect_err("17 samples");
    assert!(e.to_string().contains("1 to 16"), "{e}");
    let x: Vec<u32> = (0..3 * dims[0]).map(|_| gen.f32(1.0)).collect();
    let labels = [4u32, 0, 2];
    let got = dev.step(14, &x, &labels, &params).expect("a step after the refusals");
    let (metrics, want) = golden_step(&plan, &dims, rpc, 14, &params, &x, &labels).expect("golden");
    assert_eq!((got.done.loss, got.gradients), (metrics.loss, want), "step 14");

    // The data mover counted no refusal of its own: every op the firmware issued was good.
    let c = dev.link().request(&MxCounters, Duration::from_secs(30), 0).expect("MxCounters");
    assert_eq!(c.0[15], 0, "data-mover refusals: {c:?}");
}

/// A training run with MemoryX in the loop (`MeshTrain`, as `wsctl mesh train` runs it): the
/// weights stream from MemoryX's store down SwarmX's broadcast to the mesh on its last port,
/// the gradients go back up through SwarmX into MemoryX's Adam; eight steps on one batch of a
/// synthetic task. After every step the loss equals the golden mesh step's, and every weight
/// and Adam state word of every layer equals the golden optimizer fed the golden gradients
/// through the golden node; the loss falls. Before the layers exist, and out of order, a
/// step is refused, nothing moves, and the run goes on.
#[test]
fn a_training_run_with_memoryx_and_swarmx_in_the_loop_is_bit_exact() {
    use host_driver::mesh::TrainRun;
    use ws_common::golden::optim::Hyper;

    let Some(rig) = Rig::open("mesh_train", Needs::default()) else {
        return;
    };
    let sim = rig.sim().expect("a simulated board");
    let t = hil_tests::connect(sim, sim.phy_addr());
    let link = Link::connect(Box::new(t), Config::default(), Duration::from_secs(30)).expect("HELLO");
    let mut dev = open_board(link, "sim").expect("the mesh");

    // Training before the layers exist: refused, the samples consumed.
    let dims = vec![16usize, 24, 12, 5];
    dev.setup(&dims, 4, 1).expect("MeshSetup");
    let (x, labels) = (vec![0u32; 16 * 16], vec![0u32; 16]);
    let e = dev.train(1, &x, &labels).expect_err("no MemoryX layers yet");
    assert!(e.to_string().contains("create MemoryX layers"), "{e}");

    let ckpt = std::env::temp_dir().join(format!("ws-mesh-train-{}.safetensors", std::process::id()));
    let run = TrainRun {
        dims: dims.clone(),
        batch_per_pe: 4,
        steps: 8,
        hyper: Hyper::ADAM,
        lr: 0.02,
        seed: 7,
        verify: true,
        checkpoint: Some(ckpt.clone()),
    };
    let rows = run.run(&mut dev, &mut |_| {}).expect("the training run");
    for (t, r) in rows.iter().enumerate() {
        assert!(r.loss_exact, "step {}: loss or correct count differs from the golden model: {r:?}", t + 1);
        assert_eq!(r.diff, Some(0), "step {}: layer words differ from the golden model", t + 1);
        assert_eq!(r.done.grad_words, (17 * 24 + 25 * 12 + 13 * 5) as u32);
    }
    let loss = |r: &host_driver::mesh::TrainRow| f32::from_bits(r.done.loss) / r.samples as f32;
    assert!(loss(&rows[7]) < 0.8 * loss(&rows[0]), "the loss did not fall: {rows:#?}");

    // The checkpoint holds step 8 exactly as the board does: every layer's weights and Adam
    // state, under the documented names and shapes, and the run's metadata.
    {
        use host_driver::mesh::CHECKPOINT_FORMAT;
        use host_driver::optim::files::{metadata_of, Model};
        use host_driver::optim::{Array, MxDevice};
        let bytes = std::fs::read(&ckpt).expect("the checkpoint file");
        let meta = metadata_of(&bytes, "checkpoint").expect("metadata");
        assert_eq!(meta.get("format").map(String::as_str), Some(CHECKPOINT_FORMAT));
        assert_eq!(meta.get("step").map(String::as_str), Some("8"));
        assert_eq!(meta.get("dims").map(String::as_str), Some("16,24,12,5"));
        assert_eq!(meta.get("optimizer").map(String::as_str), Some("adam"));
        let model = Model::parse(&bytes, "checkpoint").expect("safetensors");
        assert_eq!(model.tensors.len(), 9, "w, exp_avg, exp_avg_sq of three layers");
        for l in 0..3 {
            let words = ((dims[l] + 1) * dims[l + 1]) as u32;
            for (a, suffix) in [(Array::W, ""), (Array::M, ".exp_avg"), (Array::V, ".exp_avg_sq")] {
                let name = format!("layer{l}{suffix}");
                let t = model.tensors.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("{name}"));
                assert_eq!(t.shape, vec![dims[l + 1], dims[l] + 1], "{name}");
                let board = dev.mx().read_array(l as u16, a, words).expect("read back");
                assert!(t.data == board, "{name}: the checkpoint differs from the board at step 8");
            }
        }
        let mut partial = ckpt.clone().into_os_string();
        partial.push(".partial");
        assert!(!std::path::Path::new(&partial).exists(), "the temporary file was renamed");
        std::fs::remove_file(&ckpt).ok();
    }

    // Out of order: refused, nothing applied; the next step in order runs.
    let e = dev.train(10, &x, &labels).expect_err("step 10 after step 8");
    assert!(e.to_string().contains("in order"), "{e}");
    dev.train(9, &x, &labels).expect("step 9 after the refusal");
}
