//! General-purpose I/O (`hdl/regmap/gpio.toml`): eight output bits that drive the board LEDs
//! and eight synchronised inputs.

use core::convert::Infallible;

use embedded_hal::digital::{ErrorType, OutputPin, StatefulOutputPin};
use ws_common::regmap::gpio;

use crate::pac;

/// Number of output pins (LEDs).
pub const NUM_PINS: usize = 8;

/// The GPIO block as a whole: all LEDs at once, and the inputs.
#[derive(Debug)]
pub struct Gpio {
    regs: pac::Gpio,
}

impl Gpio {
    /// Takes the GPIO block. Outputs keep their state.
    pub fn new(regs: pac::Gpio) -> Self {
        Self { regs }
    }

    /// Sets all eight LEDs (bit n = LED n).
    pub fn set_leds(&mut self, pattern: u8) {
        self.regs.output().write(gpio::output::VALUE.val(pattern as u32));
    }

    /// The LED pattern being driven.
    pub fn leds(&self) -> u8 {
        gpio::output::VALUE.get(self.regs.output().read()) as u8
    }

    /// The input pins.
    pub fn inputs(&self) -> u8 {
        gpio::input::VALUE.get(self.regs.input().read()) as u8
    }

    /// Splits the outputs into one [`Pin`] per LED, so each can be handed to its own user
    /// (the timer interrupt owns LED0).
    pub fn split(self) -> [Pin; NUM_PINS] {
        core::array::from_fn(|n| Pin { mask: 1 << n })
    }
}

/// One output bit of the GPIO block.
#[derive(Debug)]
pub struct Pin {
    mask: u32,
}

impl Pin {
    /// Read-modify-write of the shared OUTPUT register, masked against interrupts so that
    /// pins owned by the main loop and by an interrupt handler cannot lose each other's
    /// updates.
    fn update(&mut self, on: bool) {
        critical_section::with(|_| {
            // SAFETY: `Gpio::split` consumed the block; every `Pin` changes only its own bit
            // of OUTPUT, inside a critical section.
            let regs = unsafe { pac::Peripherals::steal() }.gpio;
            regs.output().modify(|v| if on { v | self.mask } else { v & !self.mask });
        });
    }

    fn is_on(&self) -> bool {
        // SAFETY: reading OUTPUT has no side effect.
        let regs = unsafe { pac::Peripherals::steal() }.gpio;
        regs.output().read() & self.mask != 0
    }
}

impl ErrorType for Pin {
    type Error = Infallible;
}

impl OutputPin for Pin {
    fn set_low(&mut self) -> Result<(), Infallible> {
        self.update(false);
        Ok(())
    }
    fn set_high(&mut self) -> Result<(), Infallible> {
        self.update(true);
        Ok(())
    }
}

impl StatefulOutputPin for Pin {
    fn is_set_high(&mut self) -> Result<bool, Infallible> {
        Ok(self.is_on())
    }
    fn is_set_low(&mut self) -> Result<bool, Infallible> {
        Ok(!self.is_on())
    }
}
