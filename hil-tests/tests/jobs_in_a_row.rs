//! Scenario: the jobs `cargo xtask run` runs, in the same order, on one simulated board, twice
//! in a row, with the real `wsctl` (issue 19). Each job is checked bit-exact against the
//! golden models by the command itself (`--verify`, and `mesh step`'s own check).
//!
//! A board in a rig runs job after job. Before the fix this scenario failed in its first pass:
//! a fresh HELLO reset the link's streams while TX0's window still held the previous job's
//! ready position, the engine sent a frame of the old ring's words as the new stream's first
//! bytes, and `mesh step`'s second step got 251 words of the `optim` job's read-back in place
//! of its gradients; `mesh train` then found the `optim` job's layers still in MemoryX and was
//! refused. The second pass runs the same seeds as the first, which hid the first bug (the
//! stale words equalled the expected ones), so the firmware also refuses a job outright when
//! TX0 has sent past its ready position; the third job list uses other seeds.
//!
//! The simulator listens on a fixed port block (7670..7675), so `wsctl --addr` finds its ports
//! as it does for a board's own simulator. Needs: `ws-sim` and `wsctl` (`cargo xtask build`).

use std::path::PathBuf;
use std::process::Command;

use ws_hdl::sim::{SimOptions, SimProcess};

const BASE: u16 = 7670;

fn wsctl_bin() -> PathBuf {
    let sim = SimProcess::binary().expect("ws-sim (run `cargo xtask build`)");
    let bin = sim.with_file_name("wsctl");
    assert!(bin.is_file(), "{} does not exist: run `cargo xtask build`", bin.display());
    bin
}

/// Runs wsctl against the simulator's port block; returns its stdout and stderr.
fn wsctl(args: &[String]) -> String {
    let addr = format!("127.0.0.1:{BASE}");
    let out = Command::new(wsctl_bin())
        .args(["--addr", &addr, "--timeout-ms", "5000"])
        .args(args)
        .output()
        .expect("running wsctl");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "wsctl {} failed:\n{stdout}\n{stderr}", args.join(" "));
    format!("{stdout}{stderr}")
}

/// The jobs of `cargo xtask run` (xtask/src/run.rs), in its order, with `seed` for the
/// mesh's random data (xtask run uses the default, 1).
fn xtask_run_jobs(dir: &std::path::Path, seed: u64) -> Vec<Vec<String>> {
    let d = |f: &str| dir.join(f).display().to_string();
    let s = seed.to_string();
    let (out_dir, model, grads, result, ckpt) = (
        d(""),
        d("model.safetensors"),
        d("grads.safetensors"),
        d("result.safetensors"),
        d("mesh.safetensors"),
    );
    let jobs: Vec<Vec<&str>> = vec![
        vec!["ping", "--count", "3"],
        vec!["info"],
        vec!["optim", "example", "--wafers", "3", "--seed", &s, "--out-dir", &out_dir],
        vec![
            "optim",
            "--model",
            &model,
            "--grads",
            &grads,
            "--steps",
            "20",
            "--optimizer",
            "adam",
            "--lr",
            "0.01",
            "--workers",
            "3",
            "--wafers",
            "3",
            "--out",
            &result,
            "--verify",
        ],
        vec!["swarm", "status"],
        vec!["mesh", "step", "--dims", "16,24,12,5", "--batch-per-pe", "4", "--steps", "2", "--seed", &s],
        vec![
            "mesh",
            "train",
            "--dims",
            "16,24,12,5",
            "--steps",
            "20",
            "--verify",
            "--seed",
            &s,
            "--checkpoint",
            &ckpt,
        ],
    ];
    jobs.into_iter().map(|j| j.into_iter().map(String::from).collect()).collect()
}

#[test]
fn the_main_run_twice_on_one_board_is_bit_exact_every_time() {
    if std::env::var("WS_BOARD").is_ok_and(|b| b != "sim") {
        eprintln!("jobs_in_a_row: skipped: it starts its own simulator on fixed ports");
        return;
    }
    let opts =
        SimOptions { port_base: Some(BASE), quiet: true, ..SimOptions::with_elf(hil_tests::firmware_elf()) };
    let sim = SimProcess::start(&opts).expect("starting the simulator on ports 7670..7675");
    hil_tests::booted_client("jobs_in_a_row", &sim);
    let dir = std::env::temp_dir().join(format!("ws-jobs-in-a-row-{}", std::process::id()));

    for (pass, seed) in [(1, 1u64), (2, 1), (3, 0x5eed)] {
        for job in xtask_run_jobs(&dir, seed) {
            let out = wsctl(&job);
            let what = format!("pass {pass}, wsctl {}", job.join(" "));
            match (job[0].as_str(), job.get(1).map(String::as_str)) {
                ("optim", Some("--model")) => {
                    assert!(out.contains("bit-exact with the golden model"), "{what}:\n{out}")
                }
                ("mesh", Some("step")) => {
                    let rows = out.lines().filter(|l| l.starts_with(|c: char| c.is_ascii_digit())).count();
                    assert_eq!(
                        out.lines().filter(|l| l.ends_with("bit-exact")).count(),
                        2,
                        "{what}: every step bit-exact ({rows} rows):\n{out}"
                    );
                }
                ("mesh", Some("train")) => {
                    assert_eq!(
                        out.lines().filter(|l| l.ends_with("bit-exact")).count(),
                        20,
                        "{what}: every step bit-exact:\n{out}"
                    );
                    // A job after the first replaces nothing: the one before released its layers.
                    assert!(!out.contains("left on the board by an earlier job"), "{what}:\n{out}");
                }
                _ => {}
            }
        }
        // Every job released its layers: the store is empty between passes.
        let status = wsctl(&["mx".into(), "status".into()]);
        assert!(status.contains("layer table  0 of"), "pass {pass}: layers left behind:\n{status}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
