//! Scenario: the timer interrupt fires at its configured rate, measured in board cycles.
//!
//! Needs: nothing but the host link. The firmware reports the machine timer's `mtime` (one
//! count per clock cycle, sysinfo `CLK_HZ`) and its tick count; the rate is ticks per cycle
//! times the clock, so wall time (and the speed of the simulator) does not enter the
//! measurement.
//!
//! The core's own `mcycle` is no clock: CV32E40P gates its clock while it sleeps in WFI, so
//! `mcycle` counts only awake cycles. The scenario checks that too, since it shows the
//! firmware really sleeps between host requests instead of spinning.

use std::time::Duration;

use hil_tests::{Needs, Rig};

#[test]
fn timer_interrupt_rate_in_cycles() {
    let Some(mut rig) = Rig::open("timer_rate", Needs::default()) else {
        return;
    };
    let id = rig.client.identity().expect("identity");
    let a = rig.client.stats().expect("stats");
    // Let at least 20 ticks pass in board time.
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = rig.client.stats().expect("stats");
        if now.timer_ticks >= a.timer_ticks + 20 {
            break;
        }
    }
    let b = rig.client.stats().expect("stats");

    let period = u64::from(id.clk_hz / id.tick_hz);
    assert_eq!(u64::from(b.tick_period), period, "programmed tick period");
    let cycles = b.mtime - a.mtime;
    let ticks = u64::from(b.timer_ticks - a.timer_ticks);
    // Each sample may sit anywhere inside a tick period: the count can be one off either way.
    let expected = cycles / period;
    assert!(ticks.abs_diff(expected) <= 1, "{ticks} ticks in {cycles} cycles, expected {expected} ± 1");
    let rate_hz = ticks as f64 * f64::from(id.clk_hz) / cycles as f64;
    let awake = b.mcycle - a.mcycle;
    eprintln!(
        "timer: {ticks} ticks in {cycles} cycles = {rate_hz:.1} Hz (configured {} Hz); core awake {:.1}% of them",
        id.tick_hz,
        100.0 * awake as f64 / cycles as f64
    );
    assert!(awake <= cycles, "mcycle ({awake}) cannot outrun mtime ({cycles})");
    assert!(awake * 2 < cycles, "an idle firmware should sleep most cycles: awake {awake} of {cycles}");
}
