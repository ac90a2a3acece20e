//! The defmt global logger: rzcobs-encoded frames (defmt's default encoding), written to the
//! UART with interrupts masked, timestamped in microseconds from `mtime`.
//!
//! A log line is written whole, blocking on the UART FIFO, inside a critical section taken in
//! `acquire` and given back in `release`, so lines from the main loop and from interrupt
//! handlers never interleave. At 3 Mbaud a byte takes 3.3 µs; a typical line of 10–20 bytes
//! masks interrupts for well under the 1 ms tick.
//!
//! The host decodes the stream with `defmt-decoder` against this ELF (frames end with a zero
//! byte; see docs/firmware.md). Every byte also goes into a [`LogRing`] that the main loop
//! sends on the link's log channel (channel 5) once a host has said HELLO.

use core::cell::UnsafeCell;

use critical_section::RestoreState;
use portable_atomic::{AtomicU32, Ordering};

use crate::hal::uart::Uart;
use crate::logring::LogRing;
use crate::pac;
use crate::timing;

struct State {
    uart: Option<Uart>,
    /// The copy for the link's log channel (see [`take_link`]).
    ring: LogRing,
    encoder: defmt::Encoder,
    taken: bool,
    restore: RestoreState,
}

struct Shared(UnsafeCell<State>);

// SAFETY: `State` is only touched inside a critical section (single hart, interrupts masked):
// in `init` through `critical_section::with`, in the logger between `acquire` and `release`.
unsafe impl Sync for Shared {}

static STATE: Shared = Shared(UnsafeCell::new(State {
    uart: None,
    ring: LogRing::new(),
    encoder: defmt::Encoder::new(),
    taken: false,
    restore: RestoreState::invalid(),
}));

/// Core clock for timestamps (0 until [`init`]).
static CLK_HZ: AtomicU32 = AtomicU32::new(0);

/// Gives the UART to the logger. Logs before this are encoded and dropped.
pub fn init(uart: Uart, clk_hz: u32) {
    CLK_HZ.store(clk_hz, Ordering::Relaxed);
    critical_section::with(|_| {
        // SAFETY: inside a critical section, and not between acquire and release (a log
        // statement cannot call `init`).
        unsafe { (*STATE.0.get()).uart = Some(uart) };
    });
}

/// Waits until every logged byte has left the UART (before a reset, say).
pub fn drain() {
    critical_section::with(|_| {
        // SAFETY: inside a critical section, outside acquire/release.
        let s = unsafe { &*STATE.0.get() };
        if let Some(uart) = &s.uart {
            while !uart.tx_idle() {}
        }
    });
}

/// For the panic and exception handlers (interrupts already masked): if the fault hit in the
/// middle of a log line, ends that frame so the panic message can be logged after it. The
/// decoder drops the cut frame (a zero byte ends every rzcobs frame).
pub fn force_release() {
    // SAFETY: called with interrupts masked, from the one context that still runs.
    let s = unsafe { &mut *STATE.0.get() };
    if s.taken {
        s.taken = false;
        s.encoder = defmt::Encoder::new();
        if let Some(uart) = s.uart.as_mut() {
            uart.write_all(&[0]);
        }
        s.ring.put(&[0]);
        s.ring.end();
    }
}

fn write_uart(uart: &mut Option<Uart>, bytes: &[u8]) {
    if let Some(uart) = uart.as_mut() {
        uart.write_all(bytes);
    }
}

/// Moves logged bytes (whole defmt frames, oldest first) for the link's log channel into
/// `out`; returns how many, and the frames dropped so far for want of room.
pub fn take_link(out: &mut [u8]) -> (usize, u32) {
    critical_section::with(|_| {
        // SAFETY: inside a critical section, outside acquire/release.
        let s = unsafe { &mut *STATE.0.get() };
        (s.ring.take(out), s.ring.dropped)
    })
}

/// Bytes waiting for the link's log channel.
pub fn link_pending() -> usize {
    critical_section::with(|_| {
        // SAFETY: inside a critical section, outside acquire/release.
        unsafe { (*STATE.0.get()).ring.len() }
    })
}

#[defmt::global_logger]
struct Logger;

// SAFETY: acquire/release bracket every frame with a critical section, and re-entry panics.
unsafe impl defmt::Logger for Logger {
    fn acquire() {
        // SAFETY: paired with the `release` in `Logger::release`.
        let restore = unsafe { critical_section::acquire() };
        // SAFETY: inside the critical section just taken.
        let s = unsafe { &mut *STATE.0.get() };
        if s.taken {
            // Only a log statement inside a log statement gets here (interrupts are masked).
            panic!("defmt logger re-entered");
        }
        s.taken = true;
        s.restore = restore;
        let State { uart, ring, encoder, .. } = s;
        ring.begin();
        encoder.start_frame(|b| {
            write_uart(uart, b);
            ring.put(b);
        });
    }

    unsafe fn flush() {
        // SAFETY: between acquire and release, as defmt guarantees.
        let s = unsafe { &*STATE.0.get() };
        if let Some(uart) = &s.uart {
            while !uart.tx_idle() {}
        }
    }

    unsafe fn release() {
        // SAFETY: between acquire and release, as defmt guarantees.
        let s = unsafe { &mut *STATE.0.get() };
        let State { uart, ring, encoder, .. } = s;
        encoder.end_frame(|b| {
            write_uart(uart, b);
            ring.put(b);
        });
        ring.end();
        s.taken = false;
        let restore = s.restore;
        // SAFETY: `restore` came from the matching `critical_section::acquire`.
        unsafe { critical_section::release(restore) };
    }

    unsafe fn write(bytes: &[u8]) {
        // SAFETY: between acquire and release, as defmt guarantees.
        let s = unsafe { &mut *STATE.0.get() };
        let State { uart, ring, encoder, .. } = s;
        encoder.write(bytes, |b| {
            write_uart(uart, b);
            ring.put(b);
        });
    }
}

/// Microseconds since reset, from `mtime`.
fn timestamp_us() -> u64 {
    // SAFETY: defmt calls this between acquire and release, so interrupts are masked and no
    // one else can re-latch MTIME_HI between the two reads; the reads change nothing else.
    let timer = unsafe { pac::Peripherals::steal() }.timer;
    let lo = timer.mtime_lo().read();
    let hi = timer.mtime_hi().read();
    timing::cycles_to_us((hi as u64) << 32 | lo as u64, CLK_HZ.load(Ordering::Relaxed))
}

defmt::timestamp!("{=u64:us}", timestamp_us());
