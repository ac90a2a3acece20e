//! The machine timer (`hdl/regmap/timer.toml`): a 64-bit cycle counter `mtime` and compare
//! register `mtimecmp` that drive the CV32E40P machine timer interrupt (mcause 7) while
//! `mtime >= mtimecmp` (RISC-V privileged spec §3.2.1).

use embedded_hal::delay::DelayNs;

use crate::pac;
use crate::timing::{self, Ticker};

/// Timer configuration.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Frequency `mtime` counts at: the core clock (sysinfo `CLK_HZ`).
    pub clk_hz: u32,
}

/// Timer errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// The clock is unknown (0 Hz) or slower than the requested tick rate.
    ClockTooSlow,
}

/// The timer driver: reads `mtime`, programs `mtimecmp`, runs the periodic tick, and
/// busy-waits for [`DelayNs`].
#[derive(Debug)]
pub struct Timer {
    regs: pac::Timer,
    clk_hz: u32,
}

impl Timer {
    /// Takes the timer block and disarms the compare (`mtimecmp` = max, no interrupt).
    pub fn new(regs: pac::Timer, config: Config) -> Self {
        let mut timer = Self { regs, clk_hz: config.clk_hz };
        timer.set_compare(u64::MAX);
        timer
    }

    /// The clock `mtime` counts.
    pub fn clk_hz(&self) -> u32 {
        self.clk_hz
    }

    /// The current `mtime`.
    pub fn now(&self) -> u64 {
        // Reading MTIME_LO latches MTIME_HI; an interrupt handler reading the pair between our
        // two loads would re-latch it, so the pair is read with interrupts masked.
        critical_section::with(|_| {
            let lo = self.regs.mtime_lo().read();
            let hi = self.regs.mtime_hi().read();
            (hi as u64) << 32 | lo as u64
        })
    }

    /// The programmed `mtimecmp`.
    pub fn compare(&self) -> u64 {
        (self.regs.mtimecmp_hi().read() as u64) << 32 | self.regs.mtimecmp_lo().read() as u64
    }

    /// Programs `mtimecmp`.
    pub fn set_compare(&mut self, value: u64) {
        // RISC-V privileged spec §3.2.1: write the low word to all ones first, so that no
        // intermediate value is smaller than both the old and the new compare (no spurious
        // interrupt while the two halves are written).
        self.regs.mtimecmp_lo().write(u32::MAX);
        self.regs.mtimecmp_hi().write((value >> 32) as u32);
        self.regs.mtimecmp_lo().write(value as u32);
    }

    /// Starts a periodic tick of `tick_hz`: the first compare falls one period from now.
    /// Call [`Timer::on_tick`] from the machine timer interrupt.
    pub fn start_ticker(&mut self, tick_hz: u32) -> Result<Ticker, Error> {
        let period = timing::tick_period(self.clk_hz, tick_hz).ok_or(Error::ClockTooSlow)?;
        let ticker = Ticker::new(period, self.now());
        self.set_compare(ticker.compare());
        Ok(ticker)
    }

    /// Services the timer interrupt: advances `ticker` and re-arms the compare from the
    /// previous compare value (so latency never becomes drift). Returns the ticks elapsed.
    pub fn on_tick(&mut self, ticker: &mut Ticker) -> u32 {
        let n = ticker.on_interrupt(self.now());
        self.set_compare(ticker.compare());
        n
    }
}

impl DelayNs for Timer {
    fn delay_ns(&mut self, ns: u32) {
        let cycles = timing::ns_to_cycles(ns, self.clk_hz);
        let start = self.now();
        while self.now().wrapping_sub(start) < cycles {}
    }
}
