//! [`SimProbe`]: a probe-rs probe driver for the simulator's JTAG server (docs/jtag.md).
//!
//! It implements probe-rs' public bit-banging traits ([`RawJtagIo`] and the marker
//! [`AutoImplementJtagAccess`], which gives it probe-rs' own `JtagAccess` and so its RISC-V
//! JTAG DTM, RISC-V External Debug Support 0.13.2 §6) and [`DebugProbe`], so that
//! `Probe::from_specific_probe(Box::new(probe))` is an ordinary probe-rs probe. Bits are
//! queued by [`RawJtagIo::shift_bit`] and sent in one exchange when probe-rs asks for the
//! captured TDO bits, or when a vector is full: one round trip per DR/IR batch, never per bit.
//!
//! Two wire protocols, both served on the simulator's JTAG port ([`Wire`]):
//! - XVC 1.0: `shift:<bits u32 LE><TMS bytes><TDI bytes>` → TDO bytes, bit 0 of byte 0 first
//!   (UG908 "User XVC 1.0 Commands"); the fast path.
//! - OpenOCD remote_bitbang: per bit `'0'+(TMS<<1|TDI)` (TCK low), `R` where TDO is wanted
//!   (sampled before the rising edge, as OpenOCD's bitbang driver does), `'4'+(TMS<<1|TDI)`
//!   (TCK high); the answers are one `'0'`/`'1'` per `R`.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bitvec::prelude::*;
use probe_rs::architecture::riscv::communication_interface::{RiscvError, RiscvInterfaceBuilder};
use probe_rs::architecture::riscv::JtagDtmBuilder;
use probe_rs::probe::{
    AutoImplementJtagAccess, DebugProbe, DebugProbeError, JtagAccess, JtagDriverState, ProbeError, RawJtagIo,
    WireProtocol,
};

use crate::error::JtagError;

/// How long one exchange with the JTAG server may take before the probe gives up. A whole
/// XVC vector (at most 16 384 TCK periods) takes about 0.1 s of simulation; 10 s leaves room
/// for a loaded machine and never waits for ever.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest vector this driver sends, in bytes per vector; the server's `getinfo:` may lower it.
const MAX_XVC_VECTOR_BYTES: usize = 2048;
/// Bits per remote_bitbang exchange (up to three request bytes each).
const BITBANG_BATCH_BITS: usize = 8192;
/// What ws-sim sends before closing a second client (hdl/src/sim/server.rs).
const BUSY_PREFIX: &[u8] = b"ws-sim: JTAG port busy";

/// The wire protocol spoken to the JTAG server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wire {
    /// Xilinx Virtual Cable 1.0: whole vectors per exchange.
    #[default]
    Xvc,
    /// OpenOCD remote_bitbang: one ASCII byte per pin change.
    Bitbang,
}

impl Wire {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Wire::Xvc => "xvc",
            Wire::Bitbang => "remote_bitbang",
        }
    }
}

impl std::str::FromStr for Wire {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "xvc" => Ok(Wire::Xvc),
            "bitbang" | "remote_bitbang" => Ok(Wire::Bitbang),
            other => Err(format!("`{other}` is not a JTAG wire protocol: use `xvc` or `bitbang`")),
        }
    }
}

/// Why an exchange with the JTAG server failed, as probe-rs carries it
/// ([`DebugProbeError::ProbeSpecific`]).
#[derive(Debug, thiserror::Error)]
pub enum SimProbeError {
    /// the JTAG server at {addr} closed the connection (during {what}): the simulator exited or dropped this client; check `wsctl sim status`
    #[error("the JTAG server at {addr} closed the connection (during {what}): the simulator exited or dropped this client; check `wsctl sim status`")]
    Closed {
        /// The server.
        addr: SocketAddr,
        /// What was under way.
        what: &'static str,
    },
    /// the JTAG server at {addr} reset the connection (during {what}): the simulator exited or dropped this client; check `wsctl sim status`
    #[error("the JTAG server at {addr} reset the connection (during {what}): the simulator exited or dropped this client; check `wsctl sim status`")]
    Reset {
        /// The server.
        addr: SocketAddr,
        /// What was under way.
        what: &'static str,
    },
    /// no answer from the JTAG server at {addr} within {timeout:?} (during {what}): the simulator may be paused, overloaded or hung; check `wsctl sim status`
    #[error("no answer from the JTAG server at {addr} within {timeout:?} (during {what}): the simulator may be paused, overloaded or hung; check `wsctl sim status`")]
    Timeout {
        /// The server.
        addr: SocketAddr,
        /// What was under way.
        what: &'static str,
        /// How long we waited.
        timeout: Duration,
    },
    /// the connection to the JTAG server at {addr} failed (during {what}): {source}; check `wsctl sim status` and reconnect
    #[error("the connection to the JTAG server at {addr} failed (during {what}): {source}; check `wsctl sim status` and reconnect")]
    Io {
        /// The server.
        addr: SocketAddr,
        /// What was under way.
        what: &'static str,
        /// The OS error (a TCP reset shows here).
        source: std::io::Error,
    },
    /// the JTAG server at {addr} answered a remote_bitbang read with byte {byte:#04x}, not '0' or '1': it does not speak remote_bitbang
    #[error("the JTAG server at {addr} answered a remote_bitbang read with byte {byte:#04x}, not '0' or '1': it does not speak remote_bitbang")]
    BadBit {
        /// The server.
        addr: SocketAddr,
        /// What came back.
        byte: u8,
    },
}

impl ProbeError for SimProbeError {}

/// A probe-rs probe on the simulator's JTAG server (or any XVC 1.0 / remote_bitbang server).
#[derive(Debug)]
pub struct SimProbe {
    sock: TcpStream,
    addr: SocketAddr,
    wire: Wire,
    /// Bits per exchange.
    batch_bits: usize,
    state: JtagDriverState,
    tms: BitVec<u8, Lsb0>,
    tdi: BitVec<u8, Lsb0>,
    capture: BitVec<u8, Lsb0>,
    captured: BitVec,
    counters: ProbeCounters,
    /// Reused request buffer.
    buf: Vec<u8>,
}

/// What a [`SimProbe`] has sent, for the bench and for messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeCounters {
    /// TCK periods clocked.
    pub tck: u64,
    /// Exchanges with the server (round trips).
    pub exchanges: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
}

impl SimProbe {
    /// Connects to the JTAG server at `addr` and checks that it speaks `wire` (XVC:
    /// `getinfo:`; remote_bitbang: one `R`).
    pub fn connect(addr: SocketAddr, wire: Wire) -> Result<SimProbe, JtagError> {
        let sock = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
            .map_err(|source| JtagError::Connect { addr, source })?;
        let setup = |source| JtagError::Connect { addr, source };
        sock.set_nodelay(true).map_err(setup)?;
        sock.set_read_timeout(Some(IO_TIMEOUT)).map_err(setup)?;
        sock.set_write_timeout(Some(IO_TIMEOUT)).map_err(setup)?;
        let mut p = SimProbe {
            sock,
            addr,
            wire,
            batch_bits: match wire {
                Wire::Xvc => MAX_XVC_VECTOR_BYTES * 8,
                Wire::Bitbang => BITBANG_BATCH_BITS,
            },
            state: JtagDriverState::default(),
            tms: BitVec::new(),
            tdi: BitVec::new(),
            capture: BitVec::new(),
            captured: BitVec::new(),
            counters: ProbeCounters::default(),
            buf: Vec::new(),
        };
        p.hello()?;
        Ok(p)
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The wire protocol in use.
    pub fn wire(&self) -> Wire {
        self.wire
    }

    /// What this probe has sent so far.
    pub fn counters(&self) -> ProbeCounters {
        self.counters
    }

    fn hello(&mut self) -> Result<(), JtagError> {
        let addr = self.addr;
        let mut reply = Vec::new();
        let what = "the greeting";
        let io = |e: SimProbeError| JtagError::Hello { addr, reason: e.to_string() };
        match self.wire {
            Wire::Xvc => {
                self.send(b"getinfo:", what).map_err(io)?;
                // `xvcServer_v1.0:<n>\n`: read up to the newline, bounded.
                let mut byte = [0u8; 1];
                while reply.len() < 64 && reply.last() != Some(&b'\n') {
                    self.recv_exact(&mut byte, what).map_err(|e| self.busy_or(&reply, e))?;
                    reply.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&reply).trim_end().to_string();
                if reply.starts_with(BUSY_PREFIX) {
                    return Err(JtagError::Busy { addr, reply: text });
                }
                let n = text
                    .strip_prefix("xvcServer_v1.0:")
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(|| JtagError::Hello {
                        addr,
                        reason: format!("it answered `getinfo:` with {text:?}, not `xvcServer_v1.0:<bytes>`"),
                    })?;
                self.batch_bits = n.min(MAX_XVC_VECTOR_BYTES) * 8;
            }
            Wire::Bitbang => {
                self.send(b"R", what).map_err(io)?;
                let mut byte = [0u8; 1];
                self.recv_exact(&mut byte, what).map_err(io)?;
                if byte[0] == BUSY_PREFIX[0] {
                    reply.push(byte[0]);
                    let mut rest = [0u8; 63];
                    let n = self.sock.read(&mut rest).unwrap_or(0);
                    reply.extend_from_slice(&rest[..n]);
                    return Err(JtagError::Busy {
                        addr,
                        reply: String::from_utf8_lossy(&reply).trim_end().to_string(),
                    });
                }
                if !matches!(byte[0], b'0' | b'1') {
                    return Err(io(SimProbeError::BadBit { addr, byte: byte[0] }));
                }
            }
        }
        Ok(())
    }

    /// A busy line can be cut short by the close that follows it.
    fn busy_or(&self, so_far: &[u8], e: SimProbeError) -> JtagError {
        if !so_far.is_empty() && BUSY_PREFIX.starts_with(&so_far[..so_far.len().min(BUSY_PREFIX.len())]) {
            return JtagError::Busy { addr: self.addr, reply: String::from_utf8_lossy(so_far).into_owned() };
        }
        JtagError::Hello { addr: self.addr, reason: e.to_string() }
    }

    fn send(&mut self, bytes: &[u8], what: &'static str) -> Result<(), SimProbeError> {
        self.counters.tx_bytes += bytes.len() as u64;
        self.sock.write_all(bytes).map_err(|e| self.io_error(e, what))
    }

    fn recv_exact(&mut self, buf: &mut [u8], what: &'static str) -> Result<(), SimProbeError> {
        self.sock.read_exact(buf).map_err(|e| self.io_error(e, what))
    }

    fn io_error(&self, e: std::io::Error, what: &'static str) -> SimProbeError {
        match e.kind() {
            ErrorKind::UnexpectedEof => SimProbeError::Closed { addr: self.addr, what },
            ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => {
                SimProbeError::Reset { addr: self.addr, what }
            }
            ErrorKind::WouldBlock | ErrorKind::TimedOut => {
                SimProbeError::Timeout { addr: self.addr, what, timeout: IO_TIMEOUT }
            }
            _ => SimProbeError::Io { addr: self.addr, what, source: e },
        }
    }

    /// Sends the queued bits and appends the captured TDO bits to `captured`.
    fn flush(&mut self) -> Result<(), SimProbeError> {
        let bits = self.tms.len();
        if bits == 0 {
            return Ok(());
        }
        self.counters.tck += bits as u64;
        self.counters.exchanges += 1;
        let what = "a JTAG shift";
        match self.wire {
            Wire::Xvc => {
                let bytes = bits.div_ceil(8);
                let mut req = std::mem::take(&mut self.buf);
                req.clear();
                req.extend_from_slice(b"shift:");
                req.extend_from_slice(&(bits as u32).to_le_bytes());
                req.extend_from_slice(self.tms.as_raw_slice());
                req.extend_from_slice(self.tdi.as_raw_slice());
                debug_assert_eq!(req.len(), 10 + 2 * bytes);
                let sent = self.send(&req, what);
                self.buf = req;
                sent?;
                let mut tdo = vec![0u8; bytes];
                self.recv_exact(&mut tdo, what)?;
                let tdo = tdo.view_bits::<Lsb0>();
                for i in self.capture.iter_ones() {
                    self.captured.push(tdo[i]);
                }
            }
            Wire::Bitbang => {
                let mut req = std::mem::take(&mut self.buf);
                req.clear();
                let mut reads = 0;
                for i in 0..bits {
                    let v = (u8::from(self.tms[i]) << 1) | u8::from(self.tdi[i]);
                    req.push(b'0' + v);
                    if self.capture[i] {
                        req.push(b'R');
                        reads += 1;
                    }
                    req.push(b'4' + v);
                }
                let sent = self.send(&req, what);
                self.buf = req;
                sent?;
                let mut answers = vec![0u8; reads];
                self.recv_exact(&mut answers, what)?;
                for b in answers {
                    match b {
                        b'0' => self.captured.push(false),
                        b'1' => self.captured.push(true),
                        byte => return Err(SimProbeError::BadBit { addr: self.addr, byte }),
                    }
                }
            }
        }
        self.tms.clear();
        self.tdi.clear();
        self.capture.clear();
        Ok(())
    }
}

impl DebugProbe for SimProbe {
    fn get_name(&self) -> &str {
        match self.wire {
            Wire::Xvc => "ws-sim JTAG (XVC)",
            Wire::Bitbang => "ws-sim JTAG (remote_bitbang)",
        }
    }

    /// The simulated TCK has no fixed rate; a nominal 1 MHz keeps probe-rs' arithmetic sane.
    fn speed_khz(&self) -> u32 {
        1000
    }

    fn set_speed(&mut self, speed_khz: u32) -> Result<u32, DebugProbeError> {
        Ok(speed_khz)
    }

    fn attach(&mut self) -> Result<(), DebugProbeError> {
        self.select_target(0)
    }

    fn detach(&mut self) -> Result<(), probe_rs::Error> {
        self.flush().map_err(DebugProbeError::from)?;
        Ok(())
    }

    /// There is no reset line to the simulated SoC: reset goes through the debug module
    /// (`dmcontrol.ndmreset`, RISC-V Debug 0.13.2 §3.2), which probe-rs falls back to.
    fn target_reset(&mut self) -> Result<(), DebugProbeError> {
        Err(DebugProbeError::NotImplemented { function_name: "target_reset" })
    }

    fn target_reset_assert(&mut self) -> Result<(), DebugProbeError> {
        Err(DebugProbeError::NotImplemented { function_name: "target_reset_assert" })
    }

    fn target_reset_deassert(&mut self) -> Result<(), DebugProbeError> {
        Err(DebugProbeError::NotImplemented { function_name: "target_reset_deassert" })
    }

    fn select_protocol(&mut self, protocol: WireProtocol) -> Result<(), DebugProbeError> {
        match protocol {
            WireProtocol::Jtag => Ok(()),
            other => Err(DebugProbeError::UnsupportedProtocol(other)),
        }
    }

    fn active_protocol(&self) -> Option<WireProtocol> {
        Some(WireProtocol::Jtag)
    }

    fn try_as_jtag_probe(&mut self) -> Option<&mut dyn JtagAccess> {
        Some(self)
    }

    fn try_get_riscv_interface_builder<'probe>(
        &'probe mut self,
    ) -> Result<Box<dyn RiscvInterfaceBuilder<'probe> + 'probe>, RiscvError> {
        Ok(Box::new(JtagDtmBuilder::new(self)))
    }

    fn has_riscv_interface(&self) -> bool {
        true
    }

    fn into_probe(self: Box<Self>) -> Box<dyn DebugProbe> {
        self
    }
}

impl RawJtagIo for SimProbe {
    fn state_mut(&mut self) -> &mut JtagDriverState {
        &mut self.state
    }

    fn state(&self) -> &JtagDriverState {
        &self.state
    }

    fn shift_bit(&mut self, tms: bool, tdi: bool, capture: bool) -> Result<(), DebugProbeError> {
        // probe-rs' TAP state tracking (as every RawJtagIo driver does it).
        self.state.state.update(tms);
        self.tms.push(tms);
        self.tdi.push(tdi);
        self.capture.push(capture);
        if self.tms.len() >= self.batch_bits {
            self.flush()?;
        }
        Ok(())
    }

    fn read_captured_bits(&mut self) -> Result<BitVec, DebugProbeError> {
        self.flush()?;
        Ok(std::mem::take(&mut self.captured))
    }
}

impl AutoImplementJtagAccess for SimProbe {}

#[cfg(test)]
mod tests;
