//! The host-link byte streams (`hdl/regmap/hostlink.toml`): a receive FIFO of bytes from the
//! host and a transmit FIFO toward it. The control protocol (`crate::control`) rides on them.

use embedded_hal_nb::serial::{self, ErrorKind, ErrorType, Read, Write};
use ws_common::regmap::hostlink;

use crate::pac;

/// Host-link errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// A byte was written while the transmit FIFO was full and the hardware dropped it.
    TxOverflow,
}

impl serial::Error for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::TxOverflow => ErrorKind::Overrun,
        }
    }
}

/// The host-link driver.
#[derive(Debug)]
pub struct Hostlink {
    regs: pac::Hostlink,
}

impl Hostlink {
    /// Takes the host-link block, with its receive interrupt off and error flags cleared.
    pub fn new(regs: pac::Hostlink) -> Self {
        regs.irq_en().write(0);
        regs.errors().write(hostlink::errors::TX_OVERFLOW.val(1));
        Self { regs }
    }

    /// Enables or disables the block's receive interrupt output (CV32E40P line 17, raised
    /// while the receive FIFO holds bytes). The core still needs `mie` bit 17 to take it.
    pub fn set_rx_interrupt(&mut self, on: bool) {
        self.regs.irq_en().write(hostlink::irq_en::RX.val(on as u32));
    }

    /// Bytes waiting in the receive FIFO.
    pub fn rx_level(&self) -> u32 {
        hostlink::status::RX_LEVEL.get(self.regs.status().read())
    }

    /// True when the transmit FIFO has drained.
    pub fn tx_empty(&self) -> bool {
        hostlink::status::TX_EMPTY.get(self.regs.status().read()) != 0
    }

    /// Depth of each FIFO in bytes.
    pub fn fifo_depth(&self) -> u32 {
        hostlink::fifo_depth::BYTES.get(self.regs.fifo_depth().read())
    }

    /// Bytes accepted from and delivered to the host since reset (both wrap).
    pub fn byte_counts(&self) -> (u32, u32) {
        (self.regs.rx_bytes().read(), self.regs.tx_bytes().read())
    }

    /// Writes all of `bytes`, waiting for FIFO space (never drops a byte).
    pub fn write_all(&mut self, bytes: &[u8]) {
        for &b in bytes {
            // `write` only returns WouldBlock.
            let _ = nb::block!(self.write(b));
        }
    }
}

impl ErrorType for Hostlink {
    type Error = Error;
}

impl Read<u8> for Hostlink {
    fn read(&mut self) -> nb::Result<u8, Error> {
        // One read pops one byte; `valid` tells whether the FIFO had one.
        let v = self.regs.rxdata().read();
        if hostlink::rxdata::VALID.get(v) != 0 {
            Ok(hostlink::rxdata::BYTE.get(v) as u8)
        } else {
            Err(nb::Error::WouldBlock)
        }
    }
}

impl Write<u8> for Hostlink {
    fn write(&mut self, word: u8) -> nb::Result<(), Error> {
        if hostlink::status::TX_FULL.get(self.regs.status().read()) != 0 {
            return Err(nb::Error::WouldBlock);
        }
        self.regs.txdata().write(hostlink::txdata::BYTE.val(word as u32));
        Ok(())
    }

    /// Completes when the transmit FIFO is empty; reports (and clears) a dropped byte.
    fn flush(&mut self) -> nb::Result<(), Error> {
        if hostlink::errors::TX_OVERFLOW.get(self.regs.errors().read()) != 0 {
            self.regs.errors().write(hostlink::errors::TX_OVERFLOW.val(1));
            return Err(nb::Error::Other(Error::TxOverflow));
        }
        if self.tx_empty() {
            Ok(())
        } else {
            Err(nb::Error::WouldBlock)
        }
    }
}
