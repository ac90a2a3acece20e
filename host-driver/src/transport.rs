//! Byte transports between the host and a board's link.
//!
//! A [`Transport`] moves raw bytes; framing, ids and retries belong to
//! [`crate::client::Client`]. Each link kind of `board.toml` gets one implementation:
//! [`SimTransport`] speaks to `ws-sim`'s link port over loopback TCP, and [`FakeLink`] keeps
//! the device side in memory (a closure, or a [`FakeBoard`]) for tests without a simulator.
//! The hardware links (docs/link.md carries the same frames over all of them):
//!
//! - [`usb::UsbTransport`] on libusb (rusb): an FTDI FT232H/FT2232H in synchronous 245 FIFO
//!   mode, an FT600/FT601, or a generic vendor bulk interface, with several transfers in
//!   flight each way;
//! - [`xdma::XdmaTransport`]: the Xilinx XDMA driver's `h2c`/`c2h` stream devices with
//!   page-aligned buffers, and [`xdma::UserBar`] for the register BAR;
//! - [`serial::SerialTransport`]: a UART at any baud rate (termios2).
//!
//! [`open_transport`] picks the one a board's `[link] kind` names. Without the device each
//! fails with a message naming what it looked for and the udev rule in
//! `boards/udev/60-weightstream.rules`.

mod fake;
pub mod probe;
pub mod serial;
pub mod usb;
pub mod xdma;

use std::io::{ErrorKind, IoSlice, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

pub use fake::{FakeBoard, FakeDevice, FakeHandle, FakeLink};

use crate::board::{Board, Link};
use crate::board_time::BoardClock;
use crate::error::{Result, TransportError};

/// Opens the transport `board`'s `[link]` names.
///
/// A sim link connects to the board file's port; `crate::endpoints::Endpoints` also knows a
/// simulator started on other ports by `wsctl sim start`, so prefer it for sim boards.
pub fn open_transport(board: &Board) -> Result<Box<dyn Transport>> {
    Ok(match &board.link {
        // The simulator's link engine PHY: what a real board's USB or PCIe link carries.
        Link::Sim(l) => Box::new(SimTransport::connect(l.addr(l.ports().phy)?)?),
        Link::Ftdi245(l) => Box::new(usb::UsbTransport::open_ftdi245(l)?),
        Link::Ft601(l) => Box::new(usb::UsbTransport::open_ft601(l)?),
        Link::UsbBulk(l) => Box::new(usb::UsbTransport::open_bulk(l)?),
        Link::Xdma(l) => Box::new(xdma::XdmaTransport::open(l)?),
        Link::Serial(l) => Box::new(serial::SerialTransport::open(&l.path, l.baud, l.rtscts)?),
    })
}

/// How long [`SimTransport::connect`] waits for the simulator to accept.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// A bidirectional byte link to a board. Object safe: clients hold a `Box<dyn Transport>`.
pub trait Transport: Send {
    /// Sends all of `bytes`.
    fn send(&mut self, bytes: &[u8]) -> Result<()>;

    /// Sends the concatenation of `parts` (a frame's header, payload and CRC) without the
    /// caller joining them first. The default sends each part in turn; transports with
    /// buffers of their own gather the parts straight into them, and the sim link hands them
    /// to one vectored write.
    fn send_parts(&mut self, parts: &[&[u8]]) -> Result<()> {
        for p in parts {
            self.send(p)?;
        }
        Ok(())
    }

    /// Waits up to `timeout` for bytes and copies what arrived into `buf`. Returns the count,
    /// or 0 when `timeout` passed with nothing to read. A zero `timeout` only polls.
    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> Result<usize>;

    /// The peer, for messages: `sim link 127.0.0.1:7450`.
    fn describe(&self) -> String;

    /// The board clock waits on this link are measured with: the simulator's cycle counter
    /// for a simulated board that has one attached ([`SimTransport::with_clock`]), else none
    /// (wall time; `crate::board_time`).
    fn board_clock(&self) -> Option<BoardClock> {
        None
    }
}

impl<T: Transport + ?Sized> Transport for Box<T> {
    fn send(&mut self, bytes: &[u8]) -> Result<()> {
        (**self).send(bytes)
    }
    fn send_parts(&mut self, parts: &[&[u8]]) -> Result<()> {
        (**self).send_parts(parts)
    }
    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> Result<usize> {
        (**self).recv(buf, timeout)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn board_clock(&self) -> Option<BoardClock> {
        (**self).board_clock()
    }
}

/// The simulator's host-link port: the raw link byte stream over loopback TCP.
///
/// `ws-sim` keeps one link client at a time and discards board-to-host bytes produced before
/// a client connected (docs/sim.md), so a fresh connection never reads a stale answer.
#[derive(Debug)]
pub struct SimTransport {
    stream: TcpStream,
    addr: SocketAddr,
    /// The read timeout currently set on the socket, to skip redundant system calls.
    read_timeout: Option<Duration>,
    clock: Option<BoardClock>,
}

impl SimTransport {
    /// Connects to the link port at `addr` with `TCP_NODELAY` (control frames are small and
    /// latency bound). Fails with [`TransportError::NoSimulator`] naming the address and how
    /// to start a simulator.
    pub fn connect(addr: SocketAddr) -> Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
            .map_err(|source| TransportError::NoSimulator { addr, source })?;
        let peer = format!("sim link {addr}");
        stream.set_nodelay(true).map_err(|source| TransportError::Io { op: "configure", peer, source })?;
        Ok(Self { stream, addr, read_timeout: None, clock: None })
    }

    /// Measures the waits of clients on this link in the simulator's cycles
    /// ([`BoardClock::follow`] on its control port).
    pub fn with_clock(mut self, clock: Option<BoardClock>) -> Self {
        self.clock = clock;
        self
    }

    /// The address connected to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn io(&self, op: &'static str, source: std::io::Error) -> TransportError {
        TransportError::Io { op, peer: self.describe(), source }
    }

    fn set_read_timeout(&mut self, timeout: Duration) -> Result<()> {
        // The socket API takes no zero timeout; a poll becomes a 1 µs wait.
        let t = Some(timeout.max(Duration::from_micros(1)));
        if self.read_timeout != t {
            self.stream.set_read_timeout(t).map_err(|e| self.io("configure", e))?;
            self.read_timeout = t;
        }
        Ok(())
    }
}

impl Transport for SimTransport {
    fn send(&mut self, bytes: &[u8]) -> Result<()> {
        match self.stream.write_all(bytes) {
            Ok(()) => Ok(()),
            Err(e) if is_closed(&e) => Err(TransportError::Closed { peer: self.describe() }.into()),
            Err(e) => Err(self.io("send", e).into()),
        }
    }

    fn send_parts(&mut self, parts: &[&[u8]]) -> Result<()> {
        let mut slices: Vec<IoSlice<'_>> =
            parts.iter().filter(|p| !p.is_empty()).map(|p| IoSlice::new(p)).collect();
        let mut rest = &mut slices[..];
        while !rest.is_empty() {
            match self.stream.write_vectored(rest) {
                Ok(0) => return Err(TransportError::Closed { peer: self.describe() }.into()),
                Ok(n) => IoSlice::advance_slices(&mut rest, n),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_closed(&e) => {
                    return Err(TransportError::Closed { peer: self.describe() }.into())
                }
                Err(e) => return Err(self.io("send", e).into()),
            }
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.set_read_timeout(timeout)?;
        loop {
            return match self.stream.read(buf) {
                Ok(0) => Err(TransportError::Closed { peer: self.describe() }.into()),
                Ok(n) => Ok(n),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(0),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if is_closed(&e) => Err(TransportError::Closed { peer: self.describe() }.into()),
                Err(e) => Err(self.io("receive", e).into()),
            };
        }
    }

    fn describe(&self) -> String {
        format!("sim link {}", self.addr)
    }

    fn board_clock(&self) -> Option<BoardClock> {
        self.clock.clone()
    }
}

impl Drop for SimTransport {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

fn is_closed(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe
            | ErrorKind::UnexpectedEof
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::Instant;

    #[test]
    fn no_simulator_names_the_address_and_the_fix() {
        // Bind then drop: the port is (almost certainly) closed afterwards.
        let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let e = SimTransport::connect(addr).unwrap_err().to_string();
        assert!(e.contains(&addr.to_string()), "{e}");
        assert!(e.contains("wsctl sim start"), "{e}");
    }

    #[test]
    fn tcp_roundtrip_timeout_and_close() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut b = [0u8; 3];
            s.read_exact(&mut b).unwrap();
            s.write_all(&[b[0] + 1, b[1] + 1, b[2] + 1]).unwrap();
            // Wait for the client's "done" byte, then close.
            let mut one = [0u8; 1];
            s.read_exact(&mut one).unwrap();
        });
        let mut t = SimTransport::connect(addr).unwrap();
        assert_eq!(t.describe(), format!("sim link {addr}"));
        t.send_parts(&[&[1], &[], &[2, 3]]).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 16];
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < 3 && Instant::now() < deadline {
            let n = t.recv(&mut buf, Duration::from_millis(100)).unwrap();
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, [2, 3, 4]);
        let start = Instant::now();
        assert_eq!(t.recv(&mut buf, Duration::from_millis(30)).unwrap(), 0, "timed out");
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert_eq!(t.recv(&mut buf, Duration::ZERO).unwrap(), 0, "a poll");
        t.send(&[0]).unwrap();
        server.join().unwrap();
        let e = t.recv(&mut buf, Duration::from_secs(5)).unwrap_err().to_string();
        assert!(e.contains("closed the connection"), "{e}");
    }

    /// A shipped board file with `edit` applied, so the test cannot meet real hardware.
    fn shipped(name: &str, edit: impl Fn(String) -> String) -> Board {
        let path = crate::workspace::root().join("boards").join(name).join("board.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        Board::parse(&edit(text), &path).unwrap()
    }

    #[test]
    fn open_transport_picks_the_link_and_explains_a_missing_device() {
        let e = |b: &Board| open_transport(b).map(|t| t.describe()).unwrap_err().to_string();
        let b = shipped("ulx3s", |t| t.replace("/dev/ttyUSB0", "/dev/ttyUSB-ws-test-missing"));
        let m = e(&b);
        assert!(m.contains("cannot open serial port /dev/ttyUSB-ws-test-missing"), "{m}");
        let b = shipped("nitefury-xdma", |t| {
            t.replace("device = 0", "device = 0\ndev_dir = \"/nonexistent-ws\"")
        });
        let m = e(&b);
        assert!(m.contains("/nonexistent-ws/xdma0_h2c_0"), "{m}");
        let b = shipped("ecp5-ft2232h", |t| {
            t.replace("# serial = \"FT2232H-SERIAL\"", "serial = \"ws-test-none\"")
        });
        let m = e(&b);
        assert!(m.contains("0403:6010 with serial number `ws-test-none`"), "{m}");
        assert!(m.contains("interface 0") && m.contains("60-weightstream.rules"), "{m}");
        // A sim board's link is the simulator's PHY port, port_base + 4.
        let b = shipped("sim", |t| t.replace("port_base = 7450", "port_base = 1"));
        let m = e(&b);
        assert!(m.contains("127.0.0.1:5") && m.contains("wsctl sim start"), "{m}");
    }
}
