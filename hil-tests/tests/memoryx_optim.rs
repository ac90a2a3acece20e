//! Scenario: MemoryX as a hardware optimizer on the simulated board (issue 5, system level).
//!
//! `wsctl optim` as a user runs it: the example model (three tensors, 384 + 128 + 10
//! parameters, the last not a multiple of a store beat) and 20 steps of gradients go through
//! the board's MemoryX with Adam and with SGD with Nesterov momentum, and every weight and
//! every optimizer state word the board writes back is bit-identical with `wsctl optim
//! --golden`, the golden model run on the host. The result files open in the Python
//! `safetensors` library (the project venv's, host-driver/requirements.txt).
//!
//! Then bad input over the link itself: requests in the wrong bulk mode, out-of-range and
//! misaligned transfers, layers that do not fit, steps out of order, unknown layers: each is
//! refused with its status, keeps the streams in step, and leaves the data intact.
//!
//! The simulators listen on fixed port blocks (7660..7665, 7670..7675) for `wsctl --addr`. Needs: the
//! simulator and `wsctl` beside `ws-sim` (both built by `cargo xtask build`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use hil_tests::{Needs, Rig};
use host_driver::link::{Config, Link};
use host_driver::optim::files::Model;
use host_driver::optim::{open_board, Array, LayerConfig, MxDevice};
use ws_common::ctrl::cmd::{BulkMode, LinkMode, MxArray, MxCreate, MxRange, MxRead, MxStep, MxWrite};
use ws_common::ctrl::Status;
use ws_common::golden::optim::Hyper;
use ws_common::golden::schedule::Schedule;
use ws_common::link::Channel;
use ws_hdl::sim::{SimOptions, SimProcess};

const BASE: u16 = 7660;

fn wsctl_bin() -> PathBuf {
    let sim = SimProcess::binary().expect("ws-sim (run `cargo xtask build`)");
    let bin = sim.with_file_name("wsctl");
    assert!(bin.is_file(), "{} does not exist: run `cargo xtask build`", bin.display());
    bin
}

fn wsctl(base: u16, args: &[&str]) -> String {
    let addr = format!("127.0.0.1:{base}");
    let out = Command::new(wsctl_bin())
        .args(["--addr", &addr, "--timeout-ms", "20000"])
        .args(args)
        .output()
        .expect("running wsctl");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "wsctl {args:?} failed:\n{stdout}\n{stderr}");
    stdout.into_owned()
}

/// Every tensor of a result file: (name, shape, bits).
fn tensors(path: &Path) -> Vec<(String, Vec<usize>, Vec<u32>)> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let m = Model::parse(&bytes, &path.display().to_string()).expect("a result file");
    m.tensors.into_iter().map(|t| (t.name, t.shape, t.data)).collect()
}

/// Opens `path` with Python's safetensors, if the project venv has it; returns whether it ran.
fn python_reads(path: &Path, names: &[String]) -> bool {
    let py = hil_tests::workspace_root().join(".venv/bin/python");
    if !py.is_file() {
        return false;
    }
    let probe = Command::new(&py).args(["-c", "import safetensors.numpy"]).output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "the project venv has no safetensors/numpy (host-driver/requirements.txt): run `cargo xtask setup`"
    );
    let script = "import sys, safetensors.numpy as s\n\
                  d = s.load_file(sys.argv[1])\n\
                  print(' '.join(sorted(d)))\n";
    let out = Command::new(&py).args(["-c", script]).arg(path).output().expect("running python");
    assert!(out.status.success(), "python safetensors: {}", String::from_utf8_lossy(&out.stderr));
    let got = String::from_utf8_lossy(&out.stdout);
    let mut want = names.to_vec();
    want.sort();
    assert_eq!(got.split_whitespace().collect::<Vec<_>>(), want, "tensors Python sees");
    true
}

#[test]
fn wsctl_optim_on_the_board_is_bit_exact_with_the_golden_model() {
    if std::env::var("WS_BOARD").is_ok_and(|b| b != "sim") {
        eprintln!("memoryx_optim: skipped: it starts its own simulator on fixed ports");
        return;
    }
    let dir = std::env::temp_dir().join(format!("ws-memoryx-optim-{}", std::process::id()));
    let d = |f: &str| dir.join(f).display().to_string();
    wsctl(BASE, &["optim", "example", "--out-dir", &d("")]);
    let (model, grads) = (d("model.safetensors"), d("grads.safetensors"));

    let runs: [(&str, &[&str]); 2] = [
        ("adam", &["--optimizer", "adam", "--lr", "0.01", "--weight-decay", "0.001"]),
        (
            "nesterov",
            &[
                "--optimizer",
                "sgd",
                "--lr",
                "0.05",
                "--momentum",
                "0.9",
                "--nesterov",
                "--schedule",
                "cosine:20:0.001",
            ],
        ),
    ];
    let mut python = false;
    for (i, (name, extra)) in runs.iter().enumerate() {
        let (board_out, golden_out) =
            (d(&format!("{name}-board.safetensors")), d(&format!("{name}-golden.safetensors")));
        let common = ["optim", "--model", &model, "--grads", &grads, "--steps", "20"];
        let mut a: Vec<&str> = common.to_vec();
        a.extend_from_slice(extra);
        let mut g = a.clone();
        g.extend_from_slice(&["--golden", "--out", &golden_out]);
        a.extend_from_slice(&["--out", &board_out]);
        // A fresh board for each run (layers 0..2 are created anew), on its own port block.
        let base = BASE + 10 * i as u16;
        let opts = SimOptions {
            port_base: Some(base),
            quiet: true,
            ..SimOptions::with_elf(hil_tests::firmware_elf())
        };
        let sim =
            SimProcess::start(&opts).unwrap_or_else(|e| panic!("starting the simulator on port {base}: {e}"));
        // Booted before wsctl's own request timeouts start.
        hil_tests::booted_client("memoryx_optim", &sim);
        let summary = wsctl(base, &a);
        drop(sim);
        eprintln!("memoryx_optim {name} on the board:\n{summary}");
        wsctl(base, &g);
        let (b, gold) = (tensors(Path::new(&board_out)), tensors(Path::new(&golden_out)));
        assert_eq!(b.len(), gold.len(), "{name}: tensor count");
        assert!(
            b.len() > 3,
            "{name}: weights and optimizer state: {:?}",
            b.iter().map(|t| &t.0).collect::<Vec<_>>()
        );
        for (x, y) in b.iter().zip(&gold) {
            assert_eq!((&x.0, &x.1), (&y.0, &y.1), "{name}: tensor names and shapes");
            let diff = x.2.iter().zip(&y.2).filter(|(p, q)| p != q).count();
            assert_eq!(
                diff,
                0,
                "{name}: {} differs from the golden model in {diff} of {} words",
                x.0,
                x.2.len()
            );
        }
        let names: Vec<String> = b.iter().map(|t| t.0.clone()).collect();
        python |= python_reads(Path::new(&board_out), &names);
    }
    eprintln!("memoryx_optim: Python safetensors check {}", if python { "ran" } else { "not available" });
    let _ = std::fs::remove_dir_all(&dir);
}

/// One request that must be refused with `want`.
fn refused<R: host_driver::client::Request>(link: &mut Link, req: &R, want: Status, what: &str)
where
    R::Output: std::fmt::Debug,
{
    match link.request(req, Duration::from_secs(120), 0) {
        Err(e) => assert_eq!(e.refusal(), Some(want), "{what}: {e}"),
        Ok(v) => panic!("{what}: accepted ({v:?}), expected {want:?}"),
    }
}

/// Sends `words` on `ch` while `req` runs, and expects the refusal `want`.
fn refused_with_words<R: host_driver::client::Request>(
    link: &mut Link,
    req: &R,
    ch: Channel,
    words: usize,
    want: Status,
    what: &str,
) where
    R::Output: std::fmt::Debug,
{
    let bytes = vec![0xa5u8; 4 * words];
    let mut sent = 0;
    let r = link.request_with(req, Duration::from_secs(120), 0, &mut |ep| {
        if sent == bytes.len() {
            return Ok(false);
        }
        let n = ep.write(ch, &bytes[sent..]).expect("bulk write");
        sent += n;
        Ok(n > 0)
    });
    match r {
        Err(e) => assert_eq!(e.refusal(), Some(want), "{what}: {e}"),
        Ok(v) => panic!("{what}: accepted ({v:?}), expected {want:?}"),
    }
}

#[test]
fn bad_memoryx_requests_are_refused_and_lose_nothing() {
    let Some(rig) = Rig::open("memoryx_bad_input", Needs::default()) else {
        return;
    };
    let sim = rig.sim().expect("a simulated board");
    let connect = || {
        let t = hil_tests::connect(sim, sim.phy_addr());
        Link::connect(Box::new(t), Config::default(), Duration::from_secs(30)).expect("HELLO")
    };
    let mut link = connect();
    let range = |layer, array, offset, count| MxRange { layer, array, offset, count };
    // Transfers need MemoryX's bulk mode; the board boots in echo mode.
    refused(&mut link, &MxRead(range(0, MxArray::W, 0, 8)), Status::WrongMode, "MxRead in echo mode");

    let mut dev = open_board(link, "sim").expect("MemoryX");
    let info = *dev.info();
    assert_eq!((info.lanes, info.beat_words, info.mode), (1, 8, BulkMode::MemoryX as u8), "{info:?}");
    let cfg = LayerConfig {
        len: 100,
        hyper: Hyper::ADAM,
        schedule: Schedule::constant(1e-3),
        workers: 1,
        batch: 1,
        start: 0,
    };
    dev.create_layer(0, &cfg).expect("layer 0");
    let w: Vec<u32> = (0..100u32).map(|i| (i as f32 * 0.25 - 3.0).to_bits()).collect();
    dev.write_array(0, Array::W, &w).expect("write w");
    let link = dev.link();

    let create = |layer, len| MxCreate {
        layer,
        len,
        workers: 1,
        batch: 1,
        hyper: Hyper::ADAM,
        schedule: Schedule::constant(1e-3),
        start: 0,
    };
    refused(link, &create(0, 8), Status::BadArgument, "a layer that exists");
    refused(link, &create(info.max_layers as u16, 8), Status::NoLayer, "a layer past the table");
    refused(link, &create(1, info.store_bytes / 8), Status::StoreFull, "a layer past the store");
    refused(link, &create(1, 0), Status::BadArgument, "a layer of no parameters");
    refused_with_words(
        link,
        &MxWrite(range(0, MxArray::W, 96, 8)),
        Channel::Weights,
        8,
        Status::OutOfWindow,
        "a write past the layer",
    );
    refused_with_words(
        link,
        &MxWrite(range(0, MxArray::W, 4, 8)),
        Channel::Weights,
        8,
        Status::Misaligned,
        "a write off a store beat",
    );
    refused_with_words(
        link,
        &MxWrite(range(0, MxArray::Vmax, 0, 8)),
        Channel::Weights,
        8,
        Status::BadArgument,
        "an array Adam does not keep",
    );
    refused(link, &MxRead(range(0, MxArray::W, 0, 101)), Status::OutOfWindow, "a read past the layer");
    refused(link, &MxRead(range(5, MxArray::W, 0, 8)), Status::NoLayer, "a read of no layer");
    refused_with_words(
        link,
        &MxStep { layer: 0, t: 2, wafers: 0 },
        Channel::Gradients,
        100,
        Status::BadStep,
        "step 2 before step 1",
    );
    refused(link, &MxStep { layer: 7, t: 1, wafers: 0 }, Status::NoLayer, "a step of no layer");
    refused(link, &LinkMode { mode: BulkMode::Echo }, Status::WrongMode, "echo after the streams moved");

    // Nothing was lost and the streams are in step: w reads back, and a real step runs.
    assert_eq!(dev.read_array(0, Array::W, 100).expect("read w"), w, "w after the refusals");
    let g: Vec<u32> = (0..100u32).map(|i| (i as f32 * 0.01).to_bits()).collect();
    dev.step(1, &[(0, &g)]).expect("step 1");
    let mut gold = host_driver::optim::Golden::new();
    gold.create_layer(0, &cfg).unwrap();
    gold.write_array(0, Array::W, &w).unwrap();
    gold.step(1, &[(0, &g)]).unwrap();
    for a in [Array::W, Array::M, Array::V] {
        assert_eq!(
            dev.read_array(0, a, 100).unwrap(),
            gold.read_array(0, a, 100).unwrap(),
            "{} after step 1",
            a.name()
        );
    }
    let c = dev.counters().expect("MxCounters");
    eprintln!("memoryx_bad_input: counters {:?}", c.0);
    assert!(c.0[20] >= 12, "host refusals counted: {:?}", c.0);
    assert_eq!(c.0[21], 1, "one step ran");
    assert_eq!(c.0[12], 0, "the streamer saw no bad gradient chunk");
}
