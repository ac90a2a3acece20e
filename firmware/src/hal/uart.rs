//! The 8N1 UART (`hdl/regmap/uart.toml`) with transmit and receive FIFOs. It carries the
//! defmt log stream (see `crate::logger`).

use embedded_hal_nb::serial::{self, ErrorKind, ErrorType, Read, Write};
use ws_common::regmap::uart;

use crate::pac;
use crate::timing;

/// UART configuration.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Core clock (sysinfo `CLK_HZ`).
    pub clk_hz: u32,
    /// Wanted baud rate; the divisor is `clk_hz / baud`, clamped to what the hardware takes.
    pub baud: u32,
}

/// Receive errors, reported once per sticky flag (the driver clears the flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// The receive FIFO overflowed and bytes were lost.
    Overrun,
    /// A byte arrived without a valid stop bit.
    Framing,
}

impl serial::Error for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Overrun => ErrorKind::Overrun,
            Error::Framing => ErrorKind::FrameFormat,
        }
    }
}

/// The UART driver.
#[derive(Debug)]
pub struct Uart {
    regs: pac::Uart,
    div: u32,
}

impl Uart {
    /// Takes the UART block, programs the divisor, masks its receive interrupt and clears
    /// stale error flags.
    pub fn new(regs: pac::Uart, config: Config) -> Self {
        let div = timing::uart_divisor(config.clk_hz, config.baud);
        regs.div().write(uart::div::CYCLES.val(div));
        regs.irq_en().write(0);
        regs.errors().write(
            uart::errors::TX_OVERFLOW.val(1)
                | uart::errors::RX_OVERFLOW.val(1)
                | uart::errors::FRAMING.val(1),
        );
        Self { regs, div }
    }

    /// The divisor programmed (clock cycles per bit).
    pub fn divisor(&self) -> u32 {
        self.div
    }

    /// True once the transmit FIFO is empty and the last stop bit has left.
    pub fn tx_idle(&self) -> bool {
        uart::status::TX_IDLE.get(self.regs.status().read()) != 0
    }

    /// Writes all of `bytes`, waiting for FIFO space (never drops a byte).
    pub fn write_all(&mut self, bytes: &[u8]) {
        for &b in bytes {
            // `write` only returns WouldBlock.
            let _ = nb::block!(self.write(b));
        }
    }
}

impl ErrorType for Uart {
    type Error = Error;
}

impl Read<u8> for Uart {
    fn read(&mut self) -> nb::Result<u8, Error> {
        let errors = self.regs.errors().read();
        if uart::errors::RX_OVERFLOW.get(errors) != 0 {
            self.regs.errors().write(uart::errors::RX_OVERFLOW.val(1));
            return Err(nb::Error::Other(Error::Overrun));
        }
        if uart::errors::FRAMING.get(errors) != 0 {
            self.regs.errors().write(uart::errors::FRAMING.val(1));
            return Err(nb::Error::Other(Error::Framing));
        }
        let v = self.regs.rxdata().read();
        if uart::rxdata::VALID.get(v) != 0 {
            Ok(uart::rxdata::BYTE.get(v) as u8)
        } else {
            Err(nb::Error::WouldBlock)
        }
    }
}

impl Write<u8> for Uart {
    fn write(&mut self, word: u8) -> nb::Result<(), Error> {
        // The hardware drops (and counts) writes to a full FIFO; never make one.
        if uart::status::TX_FULL.get(self.regs.status().read()) != 0 {
            return Err(nb::Error::WouldBlock);
        }
        self.regs.txdata().write(uart::txdata::BYTE.val(word as u32));
        Ok(())
    }

    fn flush(&mut self) -> nb::Result<(), Error> {
        if self.tx_idle() {
            Ok(())
        } else {
            Err(nb::Error::WouldBlock)
        }
    }
}
