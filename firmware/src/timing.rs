//! Clock arithmetic shared by the timer tick, the delay driver, the log timestamps and the UART
//! divisor. Plain integer maths, overflow-checked, unit-tested on the host.

/// Timer interrupt rate the firmware programs.
pub const TICK_HZ: u32 = 1000;
/// LED0 toggles once every this many ticks (so it blinks at 1 Hz with a 1 kHz tick).
pub const LED_TOGGLE_TICKS: u32 = 500;
/// Baud rate of the log UART: the simulated board's UART sink decodes 3 Mbaud.
pub const LOG_BAUD: u32 = 3_000_000;
/// Smallest UART divisor the hardware accepts (`UART.DIV`, hdl/regmap/uart.toml).
pub const UART_DIV_MIN: u32 = 4;
/// Largest UART divisor: the `cycles` field is 16 bits wide.
pub const UART_DIV_MAX: u32 = 0xffff;

/// Clock cycles between ticks of `tick_hz` on a `clk_hz` clock, or `None` when the clock is
/// unknown (0) or too slow for the rate.
pub const fn tick_period(clk_hz: u32, tick_hz: u32) -> Option<u32> {
    if tick_hz == 0 || clk_hz < tick_hz {
        None
    } else {
        Some(clk_hz / tick_hz)
    }
}

/// `UART.DIV` for `baud` on a `clk_hz` clock (baud = clk / div), clamped to what the
/// hardware accepts. A clock too slow for the rate gets the minimum divisor (fastest rate).
pub const fn uart_divisor(clk_hz: u32, baud: u32) -> u32 {
    let div = match clk_hz.checked_div(baud) {
        Some(div) => div,
        None => UART_DIV_MAX,
    };
    if div < UART_DIV_MIN {
        UART_DIV_MIN
    } else if div > UART_DIV_MAX {
        UART_DIV_MAX
    } else {
        div
    }
}

/// Converts `cycles` of a `clk_hz` clock to microseconds without overflow (0 if the clock is
/// unknown).
pub const fn cycles_to_us(cycles: u64, clk_hz: u32) -> u64 {
    if clk_hz == 0 {
        return 0;
    }
    let hz = clk_hz as u64;
    // Split so that neither product can overflow: the remainder is < 2^32, times 10^6 < 2^52.
    // Saturates only past 584 000 years of microseconds.
    (cycles / hz).saturating_mul(1_000_000).saturating_add((cycles % hz) * 1_000_000 / hz)
}

/// Clock cycles covering at least `ns` nanoseconds on a `clk_hz` clock (rounded up).
pub const fn ns_to_cycles(ns: u32, clk_hz: u32) -> u64 {
    // ns < 2^32 and clk < 2^32, so the product fits in u64.
    (ns as u64 * clk_hz as u64).div_ceil(1_000_000_000)
}

/// The periodic tick's state: the compare value in force and the ticks counted so far.
///
/// The next compare is the previous compare plus one period, never "now plus one period", so
/// interrupt latency does not accumulate into drift. If the core fell more than a period
/// behind (a debugger halt, a long masked section), the missed periods are counted at once and
/// the compare jumps ahead, instead of raising one interrupt per missed period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Ticker {
    period: u32,
    compare: u64,
    ticks: u32,
}

impl Ticker {
    /// A ticker of `period` cycles (at least 1) whose first tick falls one period after `now`.
    pub fn new(period: u32, now: u64) -> Self {
        let period = period.max(1);
        Self { period, compare: now.saturating_add(period as u64), ticks: 0 }
    }

    /// Cycles per tick.
    pub fn period(&self) -> u32 {
        self.period
    }

    /// The compare value to program.
    pub fn compare(&self) -> u64 {
        self.compare
    }

    /// Ticks counted since start (wraps).
    pub fn ticks(&self) -> u32 {
        self.ticks
    }

    /// Handles a timer interrupt taken at time `now`: advances the compare past `now` and
    /// returns how many ticks elapsed (1 unless the core fell behind; 0 for a spurious call
    /// before the compare was reached).
    pub fn on_interrupt(&mut self, now: u64) -> u32 {
        if now < self.compare {
            return 0;
        }
        let period = self.period as u64;
        let elapsed = (now - self.compare) / period + 1;
        self.compare = self.compare.saturating_add(elapsed.saturating_mul(period));
        // A u32 tick counter wraps after 49 days at 1 kHz; the host reads differences.
        let n = elapsed as u32;
        self.ticks = self.ticks.wrapping_add(n);
        n
    }

    /// Whether LED0 is lit after `ticks` ticks: it toggles every [`LED_TOGGLE_TICKS`].
    pub fn led0_on(ticks: u32) -> bool {
        (ticks / LED_TOGGLE_TICKS) % 2 == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods() {
        assert_eq!(tick_period(50_000_000, 1000), Some(50_000));
        assert_eq!(tick_period(999, 1000), None);
        assert_eq!(tick_period(0, 1000), None);
        assert_eq!(tick_period(1000, 0), None);
        assert_eq!(tick_period(u32::MAX, 1), Some(u32::MAX));
    }

    #[test]
    fn uart_divisors() {
        assert_eq!(uart_divisor(48_000_000, LOG_BAUD), 16);
        assert_eq!(uart_divisor(100_000_000, LOG_BAUD), 33);
        assert_eq!(uart_divisor(12_000_000, LOG_BAUD), 4);
        assert_eq!(uart_divisor(1_000_000, LOG_BAUD), UART_DIV_MIN);
        assert_eq!(uart_divisor(0, LOG_BAUD), UART_DIV_MIN);
        assert_eq!(uart_divisor(u32::MAX, 9600), UART_DIV_MAX);
        assert_eq!(uart_divisor(50_000_000, 0), UART_DIV_MAX);
    }

    #[test]
    fn microseconds() {
        assert_eq!(cycles_to_us(50_000_000, 50_000_000), 1_000_000);
        assert_eq!(cycles_to_us(49, 50_000_000), 0);
        assert_eq!(cycles_to_us(50, 50_000_000), 1);
        let exact = |c: u64, hz: u32| (c as u128 * 1_000_000 / hz as u128).min(u64::MAX as u128) as u64;
        for &(c, hz) in
            &[(u64::MAX, 50_000_000), (u64::MAX, u32::MAX), (u64::MAX, 1), (12_345_678_901, 33_333_333)]
        {
            assert_eq!(cycles_to_us(c, hz), exact(c, hz), "{c} cycles at {hz} Hz");
        }
        assert_eq!(cycles_to_us(123, 0), 0);
    }

    #[test]
    fn nanoseconds_round_up() {
        assert_eq!(ns_to_cycles(0, 50_000_000), 0);
        assert_eq!(ns_to_cycles(1, 50_000_000), 1);
        assert_eq!(ns_to_cycles(20, 50_000_000), 1);
        assert_eq!(ns_to_cycles(21, 50_000_000), 2);
        assert_eq!(ns_to_cycles(1_000_000, 50_000_000), 50_000);
        assert_eq!(
            ns_to_cycles(u32::MAX, u32::MAX),
            (u32::MAX as u64 * u32::MAX as u64).div_ceil(1_000_000_000)
        );
    }

    #[test]
    fn ticker_rearms_from_the_previous_compare() {
        let mut t = Ticker::new(1000, 5);
        assert_eq!(t.compare(), 1005);
        assert_eq!(t.on_interrupt(1004), 0, "spurious: not yet due");
        assert_eq!(t.on_interrupt(1030), 1);
        // Latency (30 cycles late) does not shift the next deadline.
        assert_eq!(t.compare(), 2005);
        assert_eq!(t.on_interrupt(2005), 1);
        assert_eq!(t.compare(), 3005);
        assert_eq!(t.ticks(), 2);
    }

    #[test]
    fn ticker_catches_up_without_drift() {
        let mut t = Ticker::new(100, 0);
        // 3.5 periods late: ticks 100, 200, 300, 400 have all passed.
        assert_eq!(t.on_interrupt(450), 4);
        assert_eq!(t.compare(), 500);
        assert_eq!(t.ticks(), 4);
        // Over a long run, ticks == elapsed periods whatever the interrupt latency.
        let mut now = 500;
        for k in 0..10_000u64 {
            now = t.compare() + (k * 7919) % 50;
            t.on_interrupt(now);
        }
        assert_eq!(t.ticks() as u64, now / 100);
    }

    #[test]
    fn ticker_edge_cases() {
        let mut t = Ticker::new(0, u64::MAX - 1);
        assert_eq!(t.period(), 1);
        assert_eq!(t.compare(), u64::MAX);
        assert_eq!(t.on_interrupt(u64::MAX), 1);
        assert_eq!(t.compare(), u64::MAX, "saturates instead of wrapping to the past");
        let mut t = Ticker::new(u32::MAX, 0);
        assert_eq!(t.on_interrupt(u64::MAX), (u64::MAX / u32::MAX as u64) as u32);
    }

    #[test]
    fn led_blinks_every_500_ticks() {
        assert!(!Ticker::led0_on(0));
        assert!(!Ticker::led0_on(499));
        assert!(Ticker::led0_on(500));
        assert!(Ticker::led0_on(999));
        assert!(!Ticker::led0_on(1000));
    }
}
