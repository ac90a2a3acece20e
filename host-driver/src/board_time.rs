//! Waits measured in board time (docs/host.md "Waiting for the board").
//!
//! Everything the board does takes clock cycles: booting, checking an image, a training
//! step. On a real board a cycle is a fixed slice of wall time, but the simulated board runs
//! as fast as the machine lets it: 1.4 M cycles/s for a bare core on an idle machine, ten
//! times less for the whole SoC on a loaded one. A wait written in wall seconds is therefore
//! a guess about the machine, and fails on a slow one. So a wait on the simulated board is
//! bounded in simulated cycles as well:
//!
//! - A [`BoardClock`] follows the simulator's cycle counter (its control port's `stats`),
//!   sampled by a background thread so a wait costs an atomic load, not a round trip.
//! - A [`Deadline`] of `t` expires when `t` of wall time has passed **and** the board has run
//!   `t` × [`REFERENCE_HZ`] cycles since the wait began: a wait means the same amount of
//!   board work whatever the machine's speed. Without a clock (a real board) it is the wall
//!   time alone.
//! - A simulator whose clock stops (paused, hung, killed) is not waited for forever: when the
//!   counter has not moved for [`STALL`] the deadline expires, and [`Deadline::describe`]
//!   says so.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::sim::SimCtrl;

/// Simulated cycles that one second of a wait stands for: the rate the project's wall-clock
/// timeouts were written for (a machine of the project's kind simulating the SoC with some
/// headroom). On a slower machine a wait lasts proportionally longer in wall time.
pub const REFERENCE_HZ: u64 = 1_000_000;

/// How long the simulator's cycle counter may stand still before a wait gives up on it.
pub const STALL: Duration = Duration::from_secs(60);

/// How often the background thread reads the cycle counter.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);

#[derive(Debug)]
struct Shared {
    /// The last cycle count read.
    cycles: AtomicU64,
    /// When the count last moved.
    moved_at: Mutex<Instant>,
    /// The control port stopped answering.
    lost: AtomicBool,
}

/// The simulated board's cycle counter, followed in the background. Cheap to clone; the
/// sampling thread ends when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct BoardClock {
    shared: Arc<Shared>,
    ctrl: SocketAddr,
}

impl BoardClock {
    /// Follows the cycle counter of the simulator whose control port is `ctrl`. Fails when
    /// the port does not answer now.
    pub fn follow(ctrl: SocketAddr) -> crate::Result<Self> {
        let mut c = SimCtrl::connect(ctrl)?;
        let first = c.stats()?.cycle;
        let shared = Arc::new(Shared {
            cycles: AtomicU64::new(first),
            moved_at: Mutex::new(Instant::now()),
            lost: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("board-clock".into())
            .spawn(move || sample(c, weak))
            .map_err(|e| crate::error::SimError::Ctrl { addr: ctrl, command: "stats".into(), source: e })?;
        Ok(Self { shared, ctrl })
    }

    /// The control port followed.
    pub fn ctrl(&self) -> SocketAddr {
        self.ctrl
    }

    /// The last cycle count read (at most 50 ms old).
    pub fn cycles(&self) -> u64 {
        self.shared.cycles.load(Ordering::Relaxed)
    }

    /// True when the counter has not moved for [`STALL`], or the control port went away.
    pub fn stalled(&self) -> bool {
        self.shared.lost.load(Ordering::Relaxed)
            || self.shared.moved_at.lock().map(|t| t.elapsed() >= STALL).unwrap_or(true)
    }
}

fn sample(mut c: SimCtrl, shared: Weak<Shared>) {
    loop {
        std::thread::sleep(SAMPLE_EVERY);
        let Some(s) = shared.upgrade() else { return };
        match c.stats() {
            Ok(st) => {
                if st.cycle != s.cycles.swap(st.cycle, Ordering::Relaxed) {
                    if let Ok(mut t) = s.moved_at.lock() {
                        *t = Instant::now();
                    }
                }
            }
            Err(_) => {
                s.lost.store(true, Ordering::Relaxed);
                return;
            }
        }
    }
}

/// The end of one wait: `wall` of wall time and, with a clock, `wall` × [`REFERENCE_HZ`]
/// cycles of board time.
#[derive(Debug, Clone)]
pub struct Deadline {
    start: Instant,
    wall: Duration,
    clock: Option<(BoardClock, u64)>,
}

impl Deadline {
    /// A wait of `wall` starting now, in board time when `clock` is given.
    pub fn new(wall: Duration, clock: Option<&BoardClock>) -> Self {
        Self { start: Instant::now(), wall, clock: clock.map(|c| (c.clone(), c.cycles())) }
    }

    /// Cycles the wait stands for (0 without a clock).
    pub fn budget_cycles(&self) -> u64 {
        match self.clock {
            Some(_) => (self.wall.as_secs_f64() * REFERENCE_HZ as f64) as u64,
            None => 0,
        }
    }

    /// Cycles the board has run since the wait began (0 without a clock).
    pub fn cycles_run(&self) -> u64 {
        self.clock.as_ref().map_or(0, |(c, at)| c.cycles().saturating_sub(*at))
    }

    /// True once the wait is over: its wall time has passed and the board has run its cycles
    /// (or its clock has stalled).
    pub fn expired(&self) -> bool {
        if self.start.elapsed() < self.wall {
            return false;
        }
        match &self.clock {
            None => true,
            Some((c, _)) => self.cycles_run() >= self.budget_cycles() || c.stalled(),
        }
    }

    /// How long to block in one read before looking again: the wall time left, or a short
    /// slice once only board time is left.
    pub fn slice(&self) -> Duration {
        let left = self.wall.saturating_sub(self.start.elapsed());
        if left.is_zero() {
            SAMPLE_EVERY
        } else {
            left
        }
    }

    /// The wall time waited so far.
    pub fn waited(&self) -> Duration {
        self.start.elapsed()
    }

    /// What the wait amounted to, for messages: wall time (at least the wait's own, which a
    /// transport that answers "nothing" at once stands for), and the board's cycles.
    pub fn describe(&self) -> String {
        let t = self.start.elapsed().max(self.wall);
        let wall = if t < Duration::from_secs(10) {
            format!("{} ms", t.as_millis())
        } else {
            format!("{:.1} s", t.as_secs_f64())
        };
        match &self.clock {
            None => wall,
            Some((c, _)) if c.stalled() => format!(
                "{wall} ({} simulated cycles, then the simulator's clock stood still for {} s: is it paused or hung? see `wsctl sim status`)",
                self.cycles_run(),
                STALL.as_secs()
            ),
            Some(_) => format!("{wall} and {} simulated cycles", self.cycles_run()),
        }
    }

    /// Pushes the end out again by the same amount from now (a wait that bounds a stall).
    pub fn restart(&mut self) {
        *self = Self::new(self.wall, self.clock.as_ref().map(|(c, _)| c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    /// A control port whose cycle counter is whatever the test sets.
    fn fake_sim(cycles: Arc<AtomicU64>) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                let cycles = cycles.clone();
                std::thread::spawn(move || {
                    let mut w = s.try_clone().unwrap();
                    for line in BufReader::new(s).lines() {
                        let Ok(_) = line else { return };
                        let c = cycles.load(Ordering::Relaxed);
                        if writeln!(w, "{{\"ok\":true,\"cycle\":{c}}}").is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    #[test]
    fn without_a_clock_the_wall_time_decides() {
        let d = Deadline::new(Duration::from_millis(30), None);
        assert!(!d.expired());
        std::thread::sleep(Duration::from_millis(40));
        assert!(d.expired());
        assert_eq!(d.budget_cycles(), 0);
    }

    #[test]
    fn a_slow_board_is_waited_for_until_it_has_run_the_cycles() {
        let cycles = Arc::new(AtomicU64::new(1000));
        let clock = BoardClock::follow(fake_sim(cycles.clone())).unwrap();
        let d = Deadline::new(Duration::from_millis(20), Some(&clock));
        assert_eq!(d.budget_cycles(), REFERENCE_HZ / 50);
        std::thread::sleep(Duration::from_millis(120));
        // The wall time is over, but the board has not moved: still waiting.
        assert!(!d.expired(), "{}", d.describe());
        cycles.store(1000 + REFERENCE_HZ / 50 - 1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(150));
        assert!(!d.expired(), "one cycle short: {}", d.describe());
        cycles.store(1000 + REFERENCE_HZ / 50, Ordering::Relaxed);
        let t = Instant::now();
        while !d.expired() {
            assert!(t.elapsed() < Duration::from_secs(10), "the deadline never expired");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(d.describe().contains("20000 simulated cycles"), "{}", d.describe());
    }

    #[test]
    fn a_clock_whose_port_goes_away_counts_as_stalled() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            writeln!(w, "{{\"ok\":true,\"cycle\":5}}").unwrap();
            // Then the simulator is gone.
        });
        let clock = BoardClock::follow(addr).unwrap();
        let t = Instant::now();
        while !clock.stalled() {
            assert!(t.elapsed() < Duration::from_secs(10), "a lost port must read as stalled");
            std::thread::sleep(Duration::from_millis(10));
        }
        let d = Deadline::new(Duration::ZERO, Some(&clock));
        assert!(d.expired());
        assert!(d.describe().contains("stood still"), "{}", d.describe());
    }
}
