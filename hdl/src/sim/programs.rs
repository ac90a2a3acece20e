//! Hand-assembled RAM programs for tests, the bench and `ws-sim --demo`, so the simulator can
//! be exercised before (and independently of) the firmware.

use super::asm::{self, reg::*};
use ws_common::regmap;

/// UART bit time the demo programs set: 50 MHz / 16 = 3.125 Mbaud, the closest divisor to
/// the sim board's 3 Mbaud.
pub const DEMO_UART_DIV: u32 = 16;

/// Text the echo demo prints on the UART at start.
pub const ECHO_BANNER_LOG: &[u8] = b"ws-sim demo\n";
/// Bytes the echo demo sends on the host link at start.
pub const ECHO_BANNER_LINK: &[u8] = b"OK";
/// GPIO value the echo demo sets.
pub const ECHO_GPIO: u8 = 0xa5;

fn store_bytes(p: &mut Vec<u32>, base_reg: u32, offset: i32, bytes: &[u8]) {
    for &b in bytes {
        p.push(asm::addi(T0, ZERO, i32::from(b)));
        p.push(asm::sw(T0, base_reg, offset));
    }
}

/// The echo demo, to be loaded at the RAM base:
///
/// 1. sets UART.DIV to [`DEMO_UART_DIV`] and GPIO.OUT to [`ECHO_GPIO`];
/// 2. prints [`ECHO_BANNER_LOG`] on the UART and sends [`ECHO_BANNER_LINK`] on the host link;
/// 3. forever: pops a byte from HOSTLINK.RXDATA and sends it back plus one (so the answer
///    proves the core handled it).
pub fn echo_plus_one() -> Vec<u32> {
    let mut p = Vec::new();
    p.extend(asm::li(S0, regmap::hostlink::BASE));
    p.extend(asm::li(S1, regmap::uart::BASE));
    p.extend(asm::li(S2, regmap::gpio::BASE));
    p.push(asm::addi(T0, ZERO, DEMO_UART_DIV as i32));
    p.push(asm::sw(T0, S1, regmap::uart::DIV as i32));
    p.push(asm::addi(T0, ZERO, i32::from(ECHO_GPIO)));
    p.push(asm::sw(T0, S2, regmap::gpio::OUTPUT as i32));
    store_bytes(&mut p, S1, regmap::uart::TXDATA as i32, ECHO_BANNER_LOG);
    store_bytes(&mut p, S0, regmap::hostlink::TXDATA as i32, ECHO_BANNER_LINK);
    // loop: t0 = RXDATA; valid is bit 31, so "not valid" is t0 >= 0.
    p.push(asm::lw(T0, S0, regmap::hostlink::RXDATA as i32));
    p.push(asm::bge(T0, ZERO, -4));
    p.push(asm::addi(T0, T0, 1));
    p.push(asm::sw(T0, S0, regmap::hostlink::TXDATA as i32));
    p.push(asm::j(-16));
    p
}

/// Sets GPIO.OUT to `gpio`, then sleeps in `wfi` with no interrupt enabled: the core stays
/// asleep (`core_sleep` high) for good.
pub fn sleep_forever(gpio: u8) -> Vec<u32> {
    let mut p = Vec::new();
    p.extend(asm::li(S2, regmap::gpio::BASE));
    p.push(asm::addi(T0, ZERO, i32::from(gpio)));
    p.push(asm::sw(T0, S2, regmap::gpio::OUTPUT as i32));
    p.push(asm::wfi());
    p.push(asm::j(-4));
    p
}

/// `j .`: the tightest loop, for cycles-per-second figures.
pub fn spin() -> Vec<u32> {
    vec![asm::j(0)]
}
