use std::collections::HashMap;

use ws_common::golden::optim::{step_consts, update, Hyper, Kind, Param};
use ws_common::golden::schedule::{Schedule, ScheduleKind};

use super::files::{self, encode, example, metadata_of, result_bytes, Tensor, EXAMPLE_STEPS};
use super::*;
use crate::Error;

fn cfg(hyper: Hyper, schedule: Schedule) -> LayerConfig {
    LayerConfig { len: 0, hyper, schedule, workers: 2, batch: 4, start: 0 }
}

fn example_files() -> (Model, Grads) {
    let (m, g) = example(7).unwrap();
    let model = Model::parse(&m, "model").unwrap();
    let grads = Grads::parse(&g, "grads", &model, EXAMPLE_STEPS).unwrap();
    (model, grads)
}

fn optim_err(e: Error) -> OptimError {
    match e {
        Error::Optim(o) => o,
        e => panic!("not an optim error: {e}"),
    }
}

/// The reference: each parameter through `update` for every step, in a plain loop.
fn direct(c: &LayerConfig, w: &[u32], grads: &Grads, layer: usize, steps: u32) -> Vec<Param> {
    let mut p: Vec<Param> = w.iter().map(|&w| Param { w, ..Param::default() }).collect();
    for t in 1..=steps {
        let k = step_consts(&c.hyper, t, c.schedule.lr_at(t), c.workers, c.batch);
        for (i, q) in p.iter_mut().enumerate() {
            *q = update(&k, *q, grads.get(t, layer)[i]);
        }
    }
    p
}

#[test]
fn golden_is_the_golden_model() {
    let (model, grads) = example_files();
    let sched = Schedule { lr: 0.05, kind: ScheduleKind::Cosine { t_max: 10, eta_min: 1e-3 }, warmup: 3 };
    let hypers = [
        Hyper { amsgrad: true, weight_decay: 0.01, ..Hyper::ADAM },
        Hyper::ADAMW,
        Hyper { momentum: 0.9, nesterov: true, weight_decay: 1e-4, ..Hyper::SGD },
        Hyper::SGD,
    ];
    for h in hypers {
        let c = cfg(h, sched);
        let mut dev = Golden::new();
        let r = run(&mut dev, &model, &grads, EXAMPLE_STEPS, &|_| c, &mut |_| {}).unwrap();
        assert_eq!(r.layers.len(), 3);
        assert_eq!(r.params(), 16 * 24 + 8 * 16 + 10);
        for (i, l) in r.layers.iter().enumerate() {
            let want = direct(&c, &model.tensors[i].data, &grads, i, EXAMPLE_STEPS);
            assert_eq!(l.arrays.iter().map(|(a, _)| *a).collect::<Vec<_>>(), arrays_for(&h));
            let w: Vec<u32> = want.iter().map(|p| p.w).collect();
            assert_eq!(l.array(Array::W).unwrap(), w.as_slice(), "{h:?} layer {i} w");
            assert_ne!(w, model.tensors[i].data, "the weights moved");
            if h.kind != Kind::Sgd || h.momentum != 0.0 {
                let m: Vec<u32> = want.iter().map(|p| p.m).collect();
                assert_eq!(l.array(Array::M).unwrap(), m.as_slice());
            }
            if h.amsgrad {
                let vmax: Vec<u32> = want.iter().map(|p| p.vmax).collect();
                assert_eq!(l.array(Array::Vmax).unwrap(), vmax.as_slice());
            }
        }
    }
}

#[test]
fn golden_refuses_bad_requests_and_changes_nothing() {
    let mut dev = Golden::new();
    let c = LayerConfig { len: 3, ..cfg(Hyper::ADAM, Schedule::constant(0.1)) };
    dev.create_layer(0, &c).unwrap();
    dev.create_layer(1, &c).unwrap();
    dev.write_array(0, Array::W, &[1, 2, 3]).unwrap();
    assert!(matches!(
        optim_err(dev.create_layer(0, &c).unwrap_err()),
        OptimError::LayerExists { layer: 0, .. }
    ));
    assert!(matches!(
        optim_err(dev.create_layer(2, &LayerConfig { len: 0, ..c }).unwrap_err()),
        OptimError::ZeroLength { .. }
    ));
    assert!(matches!(
        optim_err(dev.write_array(0, Array::M, &[1]).unwrap_err()),
        OptimError::Length { got: 1, .. }
    ));
    assert!(matches!(
        optim_err(dev.read_array(5, Array::W, 3).unwrap_err()),
        OptimError::NoLayer { layer: 5, .. }
    ));
    let g = [0x3f80_0000u32; 3];
    // A gradient for a missing layer refuses the whole step: layer 0 is untouched.
    let e = dev.step(1, &[(0, &g), (9, &g)]).unwrap_err();
    assert!(matches!(optim_err(e), OptimError::NoLayer { layer: 9, .. }));
    assert_eq!(dev.read_array(0, Array::W, 3).unwrap(), [1, 2, 3]);
    let e = dev.step(1, &[(0, &g), (1, &g[..2])]).unwrap_err();
    assert!(matches!(optim_err(e), OptimError::Length { layer: 1, got: 2, .. }));
    assert!(matches!(optim_err(dev.step(2, &[(0, &g)]).unwrap_err()), OptimError::StepOrder { at: 0, .. }));
    assert_eq!(dev.read_array(0, Array::W, 3).unwrap(), [1, 2, 3]);
    dev.step(1, &[(0, &g)]).unwrap();
    assert_ne!(dev.read_array(0, Array::W, 3).unwrap(), [1, 2, 3]);
    assert_eq!(dev.read_array(1, Array::W, 3).unwrap(), [0, 0, 0]);
}

#[test]
fn result_file_round_trips() {
    let (model, grads) = example_files();
    let h = Hyper { momentum: 0.9, dampening: 0.25, nesterov: false, ..Hyper::SGD };
    let s = Schedule { lr: 0.1, kind: ScheduleKind::Step { step_size: 5, gamma: 0.5 }, warmup: 0 };
    let r = run(&mut Golden::new(), &model, &grads, 4, &|_| cfg(h, s), &mut |_| {}).unwrap();
    let bytes = result_bytes(&r).unwrap();
    let back = Model::parse(&bytes, "result").unwrap();
    let names: Vec<&str> = back.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "fc1.weight",
            "fc1.weight.momentum_buffer",
            "fc2.weight",
            "fc2.weight.momentum_buffer",
            "fc3.bias",
            "fc3.bias.momentum_buffer"
        ]
    );
    for l in &r.layers {
        let w = back.tensors.iter().find(|t| t.name == l.name).unwrap();
        assert_eq!(w.shape, l.shape);
        assert_eq!(w.data, l.array(Array::W).unwrap());
        let m = back.tensors.iter().find(|t| t.name == format!("{}.momentum_buffer", l.name)).unwrap();
        assert_eq!(m.data, l.array(Array::M).unwrap());
    }
    let meta = metadata_of(&bytes, "result").unwrap();
    for (k, v) in [
        ("step", "4"),
        ("optimizer", "sgd"),
        ("lr", "0.1"),
        ("schedule", "step:5:0.5"),
        ("momentum", "0.9"),
        ("dampening", "0.25"),
        ("nesterov", "false"),
        ("workers", "2"),
        ("batch", "4"),
    ] {
        assert_eq!(meta.get(k).map(String::as_str), Some(v), "{k}");
    }
    assert_eq!(files::parse_schedule(&meta["schedule"]), Ok(s.kind));
    // Adam with amsgrad names all three states; layers with different configurations get
    // per-layer keys.
    let ha = Hyper { amsgrad: true, ..Hyper::ADAM };
    let r = run(
        &mut Golden::new(),
        &model,
        &grads,
        2,
        &|t| cfg(ha, Schedule::constant(if t.name == "fc3.bias" { 0.5 } else { 0.25 })),
        &mut |_| {},
    )
    .unwrap();
    let bytes = result_bytes(&r).unwrap();
    let back = Model::parse(&bytes, "result").unwrap();
    assert_eq!(back.tensors.len(), 12);
    assert!(back.tensors.iter().any(|t| t.name == "fc3.bias.max_exp_avg_sq" && t.shape == [10]));
    assert!(back.tensors.iter().any(|t| t.name == "fc1.weight.exp_avg_sq" && t.shape == [16, 24]));
    let meta = metadata_of(&bytes, "result").unwrap();
    assert_eq!(meta["optimizer"], "adam");
    assert_eq!(meta["amsgrad"], "true");
    assert!(!meta.contains_key("lr"));
    assert_eq!(meta["fc3.bias.lr"], "0.5");
    assert_eq!(meta["fc1.weight.lr"], "0.25");
}

#[test]
fn model_sorted_and_refusals_name_the_tensor() {
    let t = |name: &str, shape: &[usize]| Tensor {
        name: name.into(),
        shape: shape.to_vec(),
        data: vec![0x3f80_0000; shape.iter().product()],
    };
    let bytes = encode(&[t("b", &[2]), t("a", &[1, 3])], None, "x").unwrap();
    let m = Model::parse(&bytes, "m").unwrap();
    assert_eq!(m.tensors.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(m.tensors[0].shape, [1, 3]);

    let e = optim_err(
        Model::parse(&encode(&[t("a", &[2]), t("empty", &[0, 4])], None, "x").unwrap(), "m").unwrap_err(),
    );
    assert!(matches!(&e, OptimError::Empty { tensor, .. } if tensor == "empty"), "{e}");
    assert!(e.to_string().contains("`empty`"));

    // A half-precision tensor, written with the safetensors crate directly.
    let half = [0u8; 4];
    let v = safetensors::tensor::TensorView::new(safetensors::Dtype::F16, vec![2], &half).unwrap();
    let f16 = safetensors::serialize([("h.weight", v)], None).unwrap();
    let e = optim_err(Model::parse(&f16, "m.safetensors").unwrap_err());
    assert!(matches!(&e, OptimError::Dtype { tensor, .. } if tensor == "h.weight"), "{e}");
    assert!(e.to_string().contains("F16"), "{e}");

    let e = optim_err(Model::parse(b"not a file", "junk").unwrap_err());
    assert!(matches!(e, OptimError::Parse { .. }));
    let e = optim_err(Model::parse(&encode(&[], None, "x").unwrap(), "none").unwrap_err());
    assert!(matches!(e, OptimError::NoTensors { .. }));

    // Gradients: missing, mis-shaped, not F32, too few steps for a run.
    let g = encode(
        &[t("step1/a", &[1, 3]), t("step1/b", &[2]), t("step2/a", &[3]), t("step2/b", &[2])],
        None,
        "x",
    )
    .unwrap();
    assert!(Grads::parse(&g, "g", &m, 1).is_ok());
    let e = optim_err(Grads::parse(&g, "g", &m, 2).unwrap_err());
    assert!(matches!(&e, OptimError::GradShape { name, got, .. } if name == "step2/a" && got == &[3]), "{e}");
    let e = optim_err(Grads::parse(&g, "g", &m, 3).unwrap_err());
    assert!(matches!(&e, OptimError::GradShape { .. }), "step 2 is checked before step 3: {e}");
    let g2 = encode(&[t("step1/a", &[1, 3])], None, "x").unwrap();
    let e = optim_err(Grads::parse(&g2, "g", &m, 1).unwrap_err());
    assert!(matches!(&e, OptimError::MissingGrad { name, .. } if name == "step1/b"), "{e}");
    let hb = [0u8; 4];
    let v = safetensors::tensor::TensorView::new(safetensors::Dtype::BF16, vec![2], &hb).unwrap();
    let a = vec![0u8; 12];
    let va = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![1, 3], &a).unwrap();
    let g3 = safetensors::serialize([("step1/a", va), ("step1/b", v)], None).unwrap();
    let e = optim_err(Grads::parse(&g3, "g", &m, 1).unwrap_err());
    assert!(matches!(&e, OptimError::Dtype { tensor, .. } if tensor == "step1/b"), "{e}");
    let grads = Grads::parse(&g, "g", &m, 1).unwrap();
    let c = cfg(Hyper::SGD, Schedule::constant(0.1));
    let e = optim_err(run(&mut Golden::new(), &m, &grads, 2, &|_| c, &mut |_| {}).unwrap_err());
    assert!(matches!(e, OptimError::TooFewSteps { steps: 2, have: 1 }));
}

#[test]
fn example_is_reproducible_and_complete() {
    // (Compared as tensors: safetensors writes the metadata map in hash order.)
    let (m1, g1) = example(3).unwrap();
    let (m2, g2) = example(3).unwrap();
    let model = Model::parse(&m1, "m").unwrap();
    assert_eq!(model, Model::parse(&m2, "m").unwrap());
    assert_eq!(Model::parse(&g1, "g").unwrap(), Model::parse(&g2, "g").unwrap());
    assert_ne!(Model::parse(&example(4).unwrap().0, "m").unwrap(), model);
    let shapes: Vec<(&str, &[usize])> =
        model.tensors.iter().map(|t| (t.name.as_str(), t.shape.as_slice())).collect();
    assert_eq!(shapes, files::EXAMPLE_TENSORS);
    let grads = Grads::parse(&g1, "g", &model, EXAMPLE_STEPS).unwrap();
    assert_eq!(grads.steps(), EXAMPLE_STEPS);
    assert!(Grads::parse(&g1, "g", &model, EXAMPLE_STEPS + 1).is_err());
    for t in &model.tensors {
        assert!(t.data.iter().all(|&w| f32::from_bits(w).abs() <= 0.5));
        assert!(t.data.iter().any(|&w| w != t.data[0]));
    }
    assert_eq!(
        metadata_of(&g1, "g").unwrap(),
        HashMap::from([("content".into(), "gradients".into()), ("seed".into(), "3".into())])
    );
}

#[test]
fn schedules_parse_and_print() {
    for s in ["constant", "step:3:0.1", "cosine:100:1e-6", "cosine:5:0.0"] {
        let k = files::parse_schedule(s).unwrap();
        assert_eq!(files::parse_schedule(&files::schedule_spec(&k)), Ok(k));
    }
    assert_eq!(files::parse_schedule("step:3:0.5"), Ok(ScheduleKind::Step { step_size: 3, gamma: 0.5 }));
    for bad in ["", "linear", "step:0:0.5", "step:3", "cosine:10:nan", "cosine:x:1", "constant:1"] {
        assert!(files::parse_schedule(bad).is_err(), "{bad}");
    }
}

#[test]
fn arrays_per_optimizer() {
    assert_eq!(arrays_for(&Hyper::SGD), [Array::W]);
    assert_eq!(arrays_for(&Hyper { momentum: 0.5, ..Hyper::SGD }), [Array::W, Array::M]);
    assert_eq!(arrays_for(&Hyper::ADAMW), [Array::W, Array::M, Array::V]);
    assert_eq!(arrays_for(&Hyper { amsgrad: true, ..Hyper::ADAM }), Array::ALL);
    for a in Array::ALL {
        assert_eq!(Array::from_code(a.code()), Some(a));
    }
    assert_eq!(Array::from_code(4), None);
}

#[test]
fn multi_wafer_runs_reduce_in_the_nodes_order_then_step() {
    let (m, g) = files::example_wafers(5, 3).unwrap();
    let model = Model::parse(&m, "m").unwrap();
    let grads = Grads::parse_wafers(&g, "g", &model, EXAMPLE_STEPS, 3).unwrap();
    assert_eq!(grads.wafers(), 3);
    assert_eq!(grads.get(1, 0).len(), 3 * model.tensors[0].data.len());
    // A reduced-gradient reader finds no `step1/{N}`, and a fourth wafer is missing.
    assert!(Grads::parse(&g, "g", &model, 1).is_err());
    let e = Grads::parse_wafers(&g, "g", &model, 1, 4).unwrap_err().to_string();
    assert!(e.contains("step1/wafer3/"), "{e}");

    let c = cfg(Hyper::ADAM, Schedule::constant(1e-2));
    let r = run(&mut Golden::new(), &model, &grads, 4, &|_| c, &mut |_| {}).unwrap();
    assert_eq!(r.wafers, 3);
    assert!(r.summary().contains("gradients of 3 wafers summed by SwarmX"), "{}", r.summary());
    assert_eq!(files::result_metadata(&r)["wafers"], "3");
    // The same steps by hand: the node's fixed order on a 4-port node is ((g0 + g1) + (g2 + −0)).
    for (i, t) in model.tensors.iter().enumerate() {
        let n = t.data.len();
        let mut params: Vec<Param> = t.data.iter().map(|&w| Param { w, ..Param::default() }).collect();
        for s in 1..=4 {
            let k = step_consts(&c.hyper, s, c.schedule.lr_at(s), c.workers, c.batch);
            let g = grads.get(s, i);
            for (j, p) in params.iter_mut().enumerate() {
                let add = ws_common::golden::fp::add;
                let sum = add(add(g[j], g[n + j]), add(g[2 * n + j], 0x8000_0000));
                *p = update(&k, *p, sum);
            }
        }
        let w: Vec<u32> = params.iter().map(|p| p.w).collect();
        assert_eq!(r.layers[i].array(Array::W).unwrap(), w.as_slice(), "{}", t.name);
    }
    // A node of 4 ports cannot take 5 wafers.
    let mut dev = Golden::new();
    dev.create_layer(0, &LayerConfig { len: 2, ..c }).unwrap();
    let e = dev.step_wafers(1, 5, &[(0, &[0; 10])]).unwrap_err().to_string();
    assert!(e.contains("at most 4 wafers"), "{e}");
}
