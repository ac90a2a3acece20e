//! Scenario: the jobs `cargo xtask run` runs, in the same order, on one simulated board, twice
//! in a row, with the real `wsctl` (issue 19). Each job is checked bit-exact against the
//! golden models by the command itself (`--verify`, and `mesh step`'s own check).
//!
//! A board in a rig runs job after job. Before issue 19's fixes this scenario failed in its
//! first pass: `mesh train` found the `optim` job's layers still in MemoryX and was refused.
//! The other bug of the issue (a fresh HELLO let the link send a frame of the previous job's
//! ring as the new stream's first bytes, so `mesh step` got 251 words of `optim`'s read-back)
//! needs `mesh step` straight after `optim`; in this order `swarm status`'s session comes
//! between them and hides it, so `jobs_random.rs` (whose first jobs are `optim` then `mesh
//! step`) is the test that catches it. Passes 1 and 2 use the same seeds; pass 3 others, so
//! stale words could not pass for fresh ones.
//!
//! The simulator listens on a fixed port block (7670..7675), so `wsctl --addr` finds its ports
//! as it does for a board's own simulator. Needs: `ws-sim` and `wsctl` (`cargo xtask build`).

use hil_tests::Wsctl;
use host_driver::main_run::{jobs, Check, TrainLength};

const BASE: u16 = 7670;

#[test]
fn the_main_run_twice_on_one_board_is_bit_exact_every_time() {
    let Some(_sim) = hil_tests::sim_at("jobs_in_a_row", BASE) else { return };
    let wsctl = Wsctl::at(BASE);
    let dir = std::env::temp_dir().join(format!("ws-jobs-in-a-row-{}", std::process::id()));

    for (pass, seed) in [(1, 1u64), (2, 1), (3, 0x5eed)] {
        // The training run is cut to 6 steps (the run's 132 would take minutes a pass); its
        // last step still evaluates the test split on the board.
        for job in jobs(&dir, seed, TrainLength::Steps(6)) {
            let out = wsctl.output(&job.args);
            let (stdout, stderr) =
                (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            let what = format!("pass {pass}, wsctl {}", job.args.join(" "));
            assert!(out.status.success(), "{what} failed:\n{stdout}\n{stderr}");
            match job.check() {
                Check::None => {}
                Check::OptimVerified => {
                    assert!(stdout.contains("bit-exact with the golden model"), "{what}:\n{stdout}")
                }
                Check::Trained => {
                    assert!(
                        stdout.contains("test accuracy"),
                        "{what}: the summary table:\n{stdout}\n{stderr}"
                    );
                    // Its pipeline trace arrived whole and passed every check.
                    assert!(
                        stdout.contains("pipeline trace:") && stdout.contains(" (0 lost)"),
                        "{what}: the trace's summary:\n{stdout}\n{stderr}"
                    );
                    assert!(!stderr.contains("the trace check found"), "{what}:\n{stdout}\n{stderr}");
                }
                Check::BitExactRows(n) => {
                    let exact = stdout.lines().filter(|l| l.trim_end().ends_with("bit-exact")).count();
                    assert_eq!(exact, n, "{what}: every step bit-exact:\n{stdout}\n{stderr}");
                }
            }
            // Every job released its layers, so none is ever replaced.
            assert!(!stderr.contains("left on the board by an earlier job"), "{what}:\n{stderr}");
        }
        let status = wsctl.ok(&["mx", "status"]);
        assert!(status.contains("layer table  0 of"), "pass {pass}: layers left behind:\n{status}");
    }
    // Nothing left to free by hand.
    let out = wsctl.ok(&["mx", "clear"]);
    assert!(out.contains("no layers to release") && out.contains("layer table  0 of"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
