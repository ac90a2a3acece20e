//! The main job on the simulated board: the `wsctl` commands `cargo xtask run` runs after
//! `wsctl sim start`, in order. One list, so the regression test that runs them job after job
//! on one board (`hil-tests/tests/jobs_in_a_row.rs`) runs exactly what a newcomer runs.

use std::path::Path;

/// One `wsctl` command of the main run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The heading printed before it, when it starts a part of the run.
    pub title: Option<&'static str>,
    /// Its arguments, after `wsctl`.
    pub args: Vec<String>,
}

/// What the caller checks a job's output for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Nothing beyond its success.
    None,
    /// The optimizer run's result is bit-exact with the golden model.
    OptimVerified,
    /// This many table rows end in `bit-exact`.
    BitExactRows(usize),
    /// A `wsctl train` run: its summary table shows a test accuracy.
    Trained,
}

impl Job {
    /// What this job's output must show.
    pub fn check(&self) -> Check {
        let arg = |i: usize| self.args.get(i).map(String::as_str);
        let steps =
            || self.args.iter().position(|a| a == "--steps").and_then(|i| self.args.get(i + 1)?.parse().ok());
        match (arg(0), arg(1)) {
            (Some("optim"), Some("--model")) => Check::OptimVerified,
            (Some("mesh"), Some("step" | "train")) => Check::BitExactRows(steps().unwrap_or(0)),
            (Some("train"), _) => Check::Trained,
            _ => Check::None,
        }
    }
}

/// How long the last job, `wsctl train` on the digits, runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrainLength {
    /// Whole epochs (`cargo xtask run`: 3, 132 steps of the default configuration).
    Epochs(u32),
    /// Steps, for tests that run the list many times.
    Steps(u32),
}

/// The jobs, writing their files under `dir`; `seed` seeds the example files, the mesh's
/// data and the training run (`cargo xtask run` uses 1).
pub fn jobs(dir: &Path, seed: u64, train: TrainLength) -> Vec<Job> {
    let d = |f: &str| dir.join(f).display().to_string();
    let s = seed.to_string();
    let job = |title: Option<&'static str>, args: &[&str]| Job {
        title,
        args: args.iter().map(|a| (*a).to_string()).collect(),
    };
    vec![
        job(None, &["ping", "--count", "3"]),
        job(Some("board identity"), &["info"]),
        job(
            Some("training run: 3 wafers' gradients summed by SwarmX, Adam applied by MemoryX, 20 steps"),
            &["optim", "example", "--wafers", "3", "--seed", &s, "--out-dir", &d("")],
        ),
        job(
            None,
            &[
                "optim",
                "--model",
                &d("model.safetensors"),
                "--grads",
                &d("grads.safetensors"),
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
                &d("result.safetensors"),
                "--verify",
            ],
        ),
        job(None, &["swarm", "status"]),
        job(
            Some("wafer mesh: whole MLP training steps (forward, loss, backward) on the SoC's 2x2 mesh"),
            &["mesh", "step", "--dims", "16,24,12,5", "--batch-per-pe", "4", "--steps", "2", "--seed", &s],
        ),
        job(
            Some(
                "training run on the wafer: MemoryX streams the weights through SwarmX to the mesh, the mesh's \
                 gradients go back through SwarmX into Adam, 20 steps",
            ),
            &[
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
                &d("mesh.safetensors"),
            ],
        ),
        job(Some("MemoryX after the run: every job released its layers"), &["mx", "status"]),
        {
            let (flag, n) = match train {
                TrainLength::Epochs(n) => ("--epochs", n),
                TrainLength::Steps(n) => ("--steps", n),
            };
            let n = n.to_string();
            job(
                Some(
                    "training on the digits: an MLP 64→32→10 on two wafers behind SwarmX, Adam in MemoryX, \
                     the samples streamed every step, the test split evaluated on the board (docs/train.md), \
                     with the hardware pipeline trace of the run (docs/trace.md)",
                ),
                &["train", flag, &n, "--seed", &s, "--out-dir", &d("train"), "--trace", &d("train/trace.json")],
            )
        },
        job(
            Some(
                "the pipeline of that run from its hardware trace: updates hidden under compute, the \
                 iteration-boundary bubble and the stage that stretches it (docs/trace.md \"check-pipeline\")",
            ),
            &["check-pipeline", &d("train/trace.wstrace")],
        ),
        job(None, &["mx", "status"]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_verifying_job_says_what_to_check() {
        let j = jobs(Path::new("/tmp/x"), 7, TrainLength::Steps(4));
        let checks: Vec<Check> = j.iter().map(Job::check).collect();
        assert!(checks.contains(&Check::OptimVerified));
        assert!(checks.contains(&Check::BitExactRows(2)), "mesh step's two steps");
        assert!(checks.contains(&Check::BitExactRows(20)), "mesh train's twenty");
        assert_eq!(checks.last(), Some(&Check::None), "MemoryX's status after the training run");
        assert!(checks.contains(&Check::Trained));
        assert!(j.iter().any(|j| j.args[0] == "train" && j.args.contains(&"--steps".to_string())));
        assert!(j
            .iter()
            .filter(|j| j.args.contains(&"--seed".to_string()))
            .all(|j| j.args.contains(&"7".into())));
        assert!(j.iter().any(|j| j.args.contains(&"/tmp/x/model.safetensors".to_string())));
    }
}
