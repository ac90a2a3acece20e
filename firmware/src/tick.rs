//! The 1 kHz system tick: the machine timer interrupt's state, owned by the interrupt handler
//! and read by the main loop under a critical section.

use core::cell::RefCell;

use critical_section::Mutex;
use embedded_hal::digital::OutputPin;

use crate::hal::gpio::Pin;
use crate::hal::timer::{Error, Timer};
use crate::rt::{self, Irq};
use crate::timing::Ticker;

struct Tick {
    timer: Timer,
    ticker: Option<Ticker>,
    led: Pin,
}

static TICK: Mutex<RefCell<Option<Tick>>> = Mutex::new(RefCell::new(None));

/// What the tick reports to `Stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// The timer's `mtime`.
    pub mtime: u64,
    /// Ticks since start.
    pub ticks: u32,
    /// Cycles per tick (0 when the tick is not running).
    pub period: u32,
}

/// Hands the timer and LED0 to the tick and starts it at `tick_hz` (machine timer interrupt
/// enabled in `mie`; global interrupts are the caller's business). On error the timer stays
/// installed for [`snapshot`], without interrupts.
pub fn start(mut timer: Timer, led: Pin, tick_hz: u32) -> Result<u32, Error> {
    let ticker = timer.start_ticker(tick_hz);
    let period = ticker.as_ref().map(|t| t.period()).unwrap_or(0);
    critical_section::with(|cs| {
        TICK.borrow(cs).replace(Some(Tick { timer, ticker: ticker.ok(), led }));
    });
    ticker?;
    rt::enable(Irq::MachineTimer);
    Ok(period)
}

/// The machine timer interrupt's work: count the elapsed ticks, re-arm the compare, and keep
/// LED0 blinking (toggling every `LED_TOGGLE_TICKS` ticks).
pub fn on_interrupt() {
    critical_section::with(|cs| {
        let mut tick = TICK.borrow_ref_mut(cs);
        let Some(Tick { timer, ticker: Some(ticker), led }) = tick.as_mut() else {
            // No tick running: silence the line instead of trapping forever.
            rt::disable(Irq::MachineTimer);
            return;
        };
        if timer.on_tick(ticker) > 0 {
            let _ = led.set_state(Ticker::led0_on(ticker.ticks()).into());
        }
    });
}

/// `mtime`, ticks and period, read consistently.
pub fn snapshot() -> Snapshot {
    critical_section::with(|cs| match TICK.borrow_ref(cs).as_ref() {
        Some(t) => Snapshot {
            mtime: t.timer.now(),
            ticks: t.ticker.map(|k| k.ticks()).unwrap_or(0),
            period: t.ticker.map(|k| k.period()).unwrap_or(0),
        },
        None => Snapshot::default(),
    })
}
