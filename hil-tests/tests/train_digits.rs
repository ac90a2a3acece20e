//! Scenario: `wsctl train` on the digits, on the simulated board's two wafers, with the real
//! `wsctl` (issue 20, docs/train.md).
//!
//! - 30 steps on the board, W = 2, end bit-identical to `wsctl train --golden` of the same
//!   configuration: every weight and optimizer-state word, the step and the generator state
//!   of the final checkpoint.
//! - The same run, with the simulator killed (SIGKILL) after its first checkpoint: `wsctl`
//!   fails and says so; on a new simulator `--resume` finishes the run, bit-identical to the
//!   uninterrupted one.
//! - The refusals a board makes before anything streams: more wafers than it carries, a batch
//!   per PE beyond its slots, more layers than the mesh program holds, a model beyond the
//!   weight store, a checkpoint of another configuration. After each, MemoryX holds no layer.
//!
//! The simulators listen on fixed port blocks (7680.., 7690..) so `wsctl --addr` finds them.
//! Needs: `ws-sim` and `wsctl` (`cargo xtask build`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hil_tests::Wsctl;
use host_driver::train::Checkpoint;

const BASE: u16 = 7680;
const BASE2: u16 = 7690;

/// The run every part compares: 30 steps, checkpoints every 5.
const RUN: &[&str] = &["train", "--steps", "30", "--wafers", "2", "--seed", "3", "--checkpoint-every", "5"];

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ws-train-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn with_out(args: &[&str], out: &Path) -> Vec<String> {
    let mut v: Vec<String> = args.iter().map(|s| (*s).to_string()).collect();
    v.extend(["--out-dir".to_string(), out.display().to_string()]);
    v
}

fn checkpoint(out: &Path) -> Checkpoint {
    let p = out.join("checkpoint.safetensors");
    Checkpoint::load(&p).unwrap_or_else(|e| panic!("loading {}: {e}", p.display()))
}

/// Words of `a` and `b` that differ, with the first, for the message.
fn diff(a: &Checkpoint, b: &Checkpoint) -> (usize, String) {
    let mut n = 0;
    let mut first = String::new();
    for (l, (x, y)) in a.arrays.iter().zip(&b.arrays).enumerate() {
        for ((arr, p), (_, q)) in x.iter().zip(y) {
            for (i, (u, v)) in p.iter().zip(q).enumerate() {
                if u != v {
                    if n == 0 {
                        first = format!("layer {l} {arr:?} word {i}: {u:#010x} vs {v:#010x}");
                    }
                    n += 1;
                }
            }
        }
    }
    (n, first)
}

fn assert_same(what: &str, a: &Checkpoint, b: &Checkpoint) {
    assert_eq!(
        (a.step, a.epoch, a.rng_state),
        (b.step, b.epoch, b.rng_state),
        "{what}: step, epoch, generator"
    );
    assert_eq!(a.arrays.len(), b.arrays.len(), "{what}: layers");
    let (n, first) = diff(a, b);
    assert_eq!(n, 0, "{what}: {n} words differ, first {first}");
}

#[test]
fn board_equals_golden_and_a_killed_run_resumes_bit_identical() {
    let golden = dir("golden");
    let w = Wsctl::at(BASE);
    let mut args = RUN.to_vec();
    args.push("--golden");
    let out = w.ok(&with_out(&args, &golden));
    assert!(out.contains("test accuracy"), "{out}");
    let gold = checkpoint(&golden);
    assert_eq!(gold.step, 30);
    // Twice the same.
    let again = dir("golden-again");
    w.ok(&with_out(&args, &again));
    assert_same("golden twice", &gold, &checkpoint(&again));

    let Some(sim) = hil_tests::sim_at("train_digits", BASE) else { return };
    // Killed after its first checkpoint.
    let killed = dir("killed");
    let mut child = Command::new(w.bin())
        .args(["--addr", &format!("127.0.0.1:{BASE}"), "--timeout-ms", "5000"])
        .args(with_out(RUN, &killed))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting wsctl train");
    let ck = killed.join("checkpoint.safetensors");
    // However fast the machine, the first checkpoint comes before the run ends (at step 5
    // of 30); no wall-clock bound beyond a generous one for a stuck run.
    let t0 = Instant::now();
    while !ck.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            let o = child.wait_with_output().unwrap();
            panic!(
                "wsctl train ended ({status}) before its first checkpoint:\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        assert!(t0.elapsed() < Duration::from_secs(1800), "no checkpoint after 30 minutes");
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = Command::new("kill").args(["-9", &sim.pid().to_string()]).status().unwrap();
    assert!(st.success(), "kill -9 the simulator");
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "wsctl train went on without its board:\n{stderr}");
    drop(sim);
    let at = checkpoint(&killed);
    assert!(at.step >= 5 && at.step < 30, "the checkpoint is at step {}", at.step);
    assert_eq!(at.step % 5, 0);

    // A new simulator: resume, and the uninterrupted run on the same board after it.
    let Some(_sim2) = hil_tests::sim_at("train_digits (after kill -9)", BASE2) else { return };
    let w2 = Wsctl::at(BASE2);
    let resumed = dir("resumed");
    let ck_arg = ck.display().to_string();
    let out = w2.ok(&with_out(&["train", "--resume", &ck_arg], &resumed));
    assert!(out.contains("test accuracy"), "{out}");
    assert_same("resumed on the board vs golden", &checkpoint(&resumed), &gold);

    let board = dir("board");
    let out = w2.ok(&with_out(RUN, &board));
    assert!(out.contains("simulated cycles/step"), "{out}");
    for f in ["steps.csv", "epochs.csv", "curves.png", "curves.svg", "split.json"] {
        assert!(board.join(f).is_file(), "{f} written");
    }
    assert_same("board vs golden", &checkpoint(&board), &gold);

    // Refusals, each before a layer is created.
    let refusals: [(&[&str], &str); 5] = [
        (&["train", "--steps", "2", "--wafers", "3"], "the board carries 2"),
        (&["train", "--steps", "2", "--batch-per-pe", "5"], "per PE"),
        (&["train", "--steps", "2", "--hidden", "8,8,8,8,8,8,8,8"], "layers"),
        (&["train", "--steps", "2", "--batch-per-pe", "1", "--hidden", "300,300"], "weight store"),
        (&["train", "--steps", "40", "--resume", &ck_arg, "--hidden", "16"], "different configuration"),
    ];
    let refused = dir("refused");
    for (args, needle) in refusals {
        let e = w2.fails(&with_out(args, &refused));
        assert!(e.contains(needle), "wsctl {args:?}: wanted `{needle}` in:\n{e}");
        let status = w2.ok(&["mx", "status"]);
        assert!(status.contains("layer table  0 of"), "wsctl {args:?} left layers:\n{status}");
    }
    for d in [golden, again, killed, resumed, board, refused] {
        let _ = std::fs::remove_dir_all(d);
    }
}
