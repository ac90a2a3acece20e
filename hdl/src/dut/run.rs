//! `run_test`: run a block test; when it fails, run it again with FST waves on.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use super::{BlockSpec, Dut};
use crate::paths;

/// True when `WS_WAVES=1` (or any value but `0`/empty) asks for waves of every test.
pub fn waves_requested() -> bool {
    std::env::var("WS_WAVES").is_ok_and(|v| !v.is_empty() && v != "0")
}

fn seed_override() -> Option<u64> {
    let v = std::env::var("WS_SEED").ok()?;
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}

fn fresh_dut(name: &str, spec: &BlockSpec, seed: u64, waves: Option<&PathBuf>) -> Dut {
    let traced;
    let spec = if waves.is_some() && !spec.waves {
        traced = spec.clone().with_waves(true);
        &traced
    } else {
        spec
    };
    let mut dut = match Dut::build(spec) {
        Ok(d) => d,
        Err(e) => panic!("{name}: cannot build the `{}` model: {e}", spec.top),
    };
    dut.set_seed(seed);
    if let Some(path) = waves {
        if let Err(e) = dut.trace_to(path) {
            panic!("{name}: {e}");
        }
    }
    dut
}

/// Runs a block test: builds (or reuses) the model of `spec`, creates a DUT with `seed` (see
/// [`Dut::seed`] and [`Dut::rng`]) and runs `body` on it.
///
/// - With `WS_WAVES=1` every run writes `target/waves/<name>.fst`.
/// - If `body` panics, it runs again on a fresh DUT with the same seed and FST tracing on
///   (a traced build of the model, made then, or reused from the cache), and the test fails
///   with the original message plus the path of the waves, which open in GTKWave or Surfer.
/// - `WS_SEED=<n>` overrides `seed`, to replay a failure seen with another seed.
///
/// # Panics
/// When the model does not build, or when `body` panics.
pub fn run_test(name: &str, spec: &BlockSpec, seed: u64, body: impl Fn(&mut Dut)) {
    let seed = seed_override().unwrap_or(seed);
    let wave_path = paths::waves_dir().join(format!("{}.fst", crate::vbuild::sanitize(name)));
    let always = waves_requested();

    let first = {
        let mut dut = fresh_dut(name, spec, seed, always.then_some(&wave_path));
        catch_unwind(AssertUnwindSafe(|| body(&mut dut)))
        // The DUT drops here, closing the FST file even after a panic.
    };
    let payload = match first {
        Ok(()) => {
            if always {
                eprintln!("{name}: waves in {}", wave_path.display());
            }
            return;
        }
        Err(p) => p,
    };
    let msg = panic_message(payload.as_ref());
    if always {
        panic!(
            "{name} failed (seed {seed}): {msg}\nwaves: {} (open with gtkwave or surfer); replay with WS_SEED={seed}",
            wave_path.display()
        );
    }
    eprintln!("{name}: failed, rerunning with seed {seed} and FST tracing into {}", wave_path.display());
    let second = {
        let mut dut = fresh_dut(name, spec, seed, Some(&wave_path));
        catch_unwind(AssertUnwindSafe(|| body(&mut dut)))
    };
    let note = match second {
        Err(_) => format!(
            "waves of the failing run: {} (open with gtkwave or surfer)",
            wave_path.display()
        ),
        Ok(()) => format!(
            "the traced rerun with the same seed PASSED, so the failure depends on something outside the seed; waves of the rerun: {}",
            wave_path.display()
        ),
    };
    panic!("{name} failed (seed {seed}): {msg}\n{note}; replay with WS_SEED={seed}");
}
