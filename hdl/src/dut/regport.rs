//! A bus-functional model of the house register port (docs/soc.md "Bus"):
//! `reg_req, reg_we, reg_addr[11:0], reg_wdata, reg_be` in, `reg_rdata` out one cycle after
//! the request.

use super::{Dut, Port};

/// Drives the `reg_*` register port of a CSR block.
#[derive(Debug, Clone, Copy)]
pub struct RegPort {
    req: Port,
    we: Port,
    addr: Port,
    wdata: Port,
    be: Port,
    rdata: Port,
}

impl RegPort {
    /// Finds the `reg_*` ports of `dut` and parks the port idle.
    ///
    /// # Panics
    /// If a `reg_*` port is missing.
    pub fn new(dut: &mut Dut) -> Self {
        let r = RegPort {
            req: dut.port("reg_req"),
            we: dut.port("reg_we"),
            addr: dut.port("reg_addr"),
            wdata: dut.port("reg_wdata"),
            be: dut.port("reg_be"),
            rdata: dut.port("reg_rdata"),
        };
        r.idle(dut);
        r
    }

    fn idle(&self, dut: &mut Dut) {
        dut.set(self.req, 0);
        dut.set(self.we, 0);
        dut.set(self.be, 0);
    }

    /// Writes a whole word (one cycle).
    pub fn write(&self, dut: &mut Dut, addr: u32, value: u32) {
        self.write_be(dut, addr, value, 0xf);
    }

    /// Writes with byte enables (one cycle).
    pub fn write_be(&self, dut: &mut Dut, addr: u32, value: u32, be: u8) {
        self.start_write(dut, addr, value, be);
        dut.tick();
        self.idle(dut);
        dut.eval();
    }

    /// Drives a write request for the coming edge without ticking, so a test can check what
    /// the block does in that same cycle. Follow with [`Dut::tick`] and [`RegPort::release`].
    pub fn start_write(&self, dut: &mut Dut, addr: u32, value: u32, be: u8) {
        dut.set(self.req, 1);
        dut.set(self.we, 1);
        dut.set(self.addr, u64::from(addr & 0xfff));
        dut.set(self.wdata, u64::from(value));
        dut.set(self.be, u64::from(be & 0xf));
    }

    /// Drives the port idle again after [`RegPort::start_write`] or [`RegPort::start_read`].
    pub fn release(&self, dut: &mut Dut) {
        self.idle(dut);
        dut.eval();
    }

    /// Drives a read request for the coming edge without ticking, for a test that steps the
    /// clock itself; after the edge, [`RegPort::release`] and [`RegPort::data`].
    pub fn start_read(&self, dut: &mut Dut, addr: u32) {
        dut.set(self.req, 1);
        dut.set(self.we, 0);
        dut.set(self.addr, u64::from(addr & 0xfff));
        dut.set(self.be, 0xf);
    }

    /// The read data of the request taken at the last edge.
    pub fn data(&self, dut: &Dut) -> u32 {
        dut.get(self.rdata) as u32
    }

    /// Reads a word: the request takes one cycle, the data is valid in the next.
    pub fn read(&self, dut: &mut Dut, addr: u32) -> u32 {
        self.start_read(dut, addr);
        dut.tick();
        self.release(dut);
        self.data(dut)
    }
}
