//! A UART link: a tty at any baud rate, 8N1, raw.
//!
//! **Why termios2 through `libc`, not the serialport crate.** Boards run their UART at
//! whatever their clock divides down to (3 Mbaud on the ULX3S's FT231X, 12 Mbaud on an
//! FT232H), so the rate must be arbitrary. Linux takes arbitrary rates only through the
//! `termios2` ioctls with `BOTHER` (`TCGETS2`/`TCSETS2`); POSIX `cfsetspeed` knows the `Bxxx`
//! constants alone. `libc` is already a dependency and exposes exactly these, so the whole
//! link is about a hundred lines with no libudev and no second serial abstraction.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Transport;
use crate::error::{Result, TransportError};

/// How long `send` waits for the UART to take more bytes before calling the link stalled.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(5);
/// A rate the driver reports back may differ from the one asked for by this fraction
/// (UARTs tolerate about 2 % between the ends).
const BAUD_TOLERANCE: f64 = 0.02;

/// A tty in raw 8N1 mode.
#[derive(Debug)]
pub struct SerialTransport {
    file: File,
    path: PathBuf,
    baud: u32,
}

/// Sets `fd` to raw 8N1 at `baud` (termios2 + `BOTHER`); returns the rate the driver took.
fn configure(fd: libc::c_int, baud: u32, rtscts: bool) -> std::io::Result<u32> {
    // SAFETY: termios2 is plain data; the ioctls fill or read it and nothing else.
    unsafe {
        let mut t: libc::termios2 = std::mem::zeroed();
        if libc::ioctl(fd, libc::TCGETS2, &mut t) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // cfmakeraw(3), spelled out for termios2.
        t.c_iflag &= !(libc::IGNBRK
            | libc::BRKINT
            | libc::PARMRK
            | libc::ISTRIP
            | libc::INLCR
            | libc::IGNCR
            | libc::ICRNL
            | libc::IXON
            | libc::IXOFF
            | libc::IXANY
            | libc::INPCK);
        t.c_oflag &= !libc::OPOST;
        t.c_lflag &= !(libc::ECHO | libc::ECHONL | libc::ICANON | libc::ISIG | libc::IEXTEN);
        t.c_cflag &= !(libc::CSIZE | libc::PARENB | libc::CSTOPB | libc::CBAUD | libc::CRTSCTS);
        // Input rate = output rate: clear the CIBAUD field (the CBAUD bits << IBSHIFT).
        t.c_cflag &= !(libc::CBAUD << libc::IBSHIFT);
        t.c_cflag |= libc::CS8 | libc::CREAD | libc::CLOCAL | libc::BOTHER;
        if rtscts {
            t.c_cflag |= libc::CRTSCTS;
        }
        t.c_ispeed = baud;
        t.c_ospeed = baud;
        // Non-canonical, return what is there: poll(2) does the waiting.
        t.c_cc[libc::VMIN] = 0;
        t.c_cc[libc::VTIME] = 0;
        if libc::ioctl(fd, libc::TCSETS2, &t) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut back: libc::termios2 = std::mem::zeroed();
        if libc::ioctl(fd, libc::TCGETS2, &mut back) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(back.c_ospeed)
    }
}

/// Waits up to `timeout` for `events` on `fd`; true when ready.
fn poll_fd(fd: libc::c_int, events: libc::c_short, timeout: Duration) -> std::io::Result<bool> {
    let mut p = libc::pollfd { fd, events, revents: 0 };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // A sub-millisecond wait rounds up so it still waits, except a poll (zero).
    let ms = if ms == 0 && !timeout.is_zero() { 1 } else { ms };
    loop {
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut p, 1, ms) };
        if rc >= 0 {
            return Ok(rc > 0);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

impl SerialTransport {
    /// Opens `path` exclusively, raw 8N1 at `baud`, optionally with RTS/CTS, and drops any
    /// bytes that arrived before.
    pub fn open(path: &Path, baud: u32, rtscts: bool) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            // Not our controlling terminal; don't block waiting for carrier.
            .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
            .open(path)
            .map_err(|source| TransportError::NoSerial { path: path.into(), source })?;
        let fd = file.as_raw_fd();
        let cfg = |reason: String| TransportError::SerialConfig { path: path.into(), baud, reason };
        // SAFETY: plain ioctls on our fd.
        if unsafe { libc::isatty(fd) } != 1 {
            return Err(cfg("it is not a tty".into()).into());
        }
        // SAFETY: as above. A second opener gets EBUSY: one link client at a time.
        unsafe { libc::ioctl(fd, libc::TIOCEXCL) };
        let got = configure(fd, baud, rtscts).map_err(|e| cfg(e.to_string()))?;
        if (f64::from(got) - f64::from(baud)).abs() > f64::from(baud) * BAUD_TOLERANCE {
            return Err(cfg(format!("the driver made {got} baud")).into());
        }
        // SAFETY: as above.
        unsafe { libc::tcflush(fd, libc::TCIFLUSH) };
        Ok(Self { file, path: path.into(), baud })
    }

    fn fail(&self, op: &'static str, e: std::io::Error) -> crate::Error {
        TransportError::Device { op, peer: self.describe(), reason: e.to_string() }.into()
    }
}

impl Transport for SerialTransport {
    fn send(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            match self.file.write(bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    // The UART's buffer is full: wait for room (RTS/CTS may hold us here).
                    let start = Instant::now();
                    if !poll_fd(self.file.as_raw_fd(), libc::POLLOUT, STALL_TIMEOUT)
                        .map_err(|e| self.fail("send", e))?
                    {
                        return Err(TransportError::Stalled {
                            peer: self.describe(),
                            waited: start.elapsed(),
                        }
                        .into());
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.fail("send", e)),
            }
        }
        Ok(())
    }

    fn send_parts(&mut self, parts: &[&[u8]]) -> Result<()> {
        // A UART is slower than any copy: gather so the frame leaves in one write.
        self.send(&parts.concat())
    }

    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let deadline = Instant::now() + timeout;
        loop {
            match self.file.read(buf) {
                Ok(n) if n > 0 => return Ok(n),
                // With VMIN = VTIME = 0 a tty reads 0 when empty, as does a hung-up one.
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.fail("receive", e)),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(0);
            }
            let mut p = libc::pollfd { fd: self.file.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut p, 1, ms) };
            if rc > 0 && p.revents & (libc::POLLHUP | libc::POLLERR) != 0 && p.revents & libc::POLLIN == 0 {
                return Err(TransportError::DeviceGone { peer: self.describe() }.into());
            }
        }
    }

    fn describe(&self) -> String {
        format!("serial {} at {} baud", self.path.display(), self.baud)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{FromRawFd, OwnedFd};

    /// A pseudo-terminal pair: the master (our "board") and the slave's path.
    fn pty() -> (File, PathBuf) {
        // SAFETY: the standard posix_openpt / grantpt / unlockpt / ptsname_r sequence.
        unsafe {
            let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
            assert!(m >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
            assert_eq!(libc::grantpt(m), 0);
            assert_eq!(libc::unlockpt(m), 0);
            let mut name = [0 as libc::c_char; 128];
            assert_eq!(libc::ptsname_r(m, name.as_mut_ptr(), name.len()), 0);
            let path = std::ffi::CStr::from_ptr(name.as_ptr()).to_str().unwrap().to_owned();
            (File::from(OwnedFd::from_raw_fd(m)), path.into())
        }
    }

    #[test]
    fn raw_bytes_round_trip_over_a_pty_at_an_odd_baud() {
        let (mut board, path) = pty();
        let mut t = SerialTransport::open(&path, 3_000_000, false).unwrap();
        assert_eq!(t.describe(), format!("serial {} at 3000000 baud", path.display()));
        // Every byte value, including the ones a cooked tty would eat or rewrite
        // (CR, LF, ^C, ^S/^Q, 0xff).
        let all: Vec<u8> = (0..=255u8).collect();
        t.send_parts(&[&all[..100], &all[100..]]).unwrap();
        let mut got = vec![0u8; 256];
        board.read_exact(&mut got).unwrap();
        assert_eq!(got, all);

        board.write_all(&all).unwrap();
        let mut back = Vec::new();
        let mut buf = [0u8; 64];
        let deadline = Instant::now() + Duration::from_secs(5);
        while back.len() < 256 && Instant::now() < deadline {
            let n = t.recv(&mut buf, Duration::from_millis(100)).unwrap();
            back.extend_from_slice(&buf[..n]);
        }
        assert_eq!(back, all);
        let start = Instant::now();
        assert_eq!(t.recv(&mut buf, Duration::from_millis(30)).unwrap(), 0);
        assert!(start.elapsed() >= Duration::from_millis(25));
        assert_eq!(t.recv(&mut buf, Duration::ZERO).unwrap(), 0);
    }

    #[test]
    fn arbitrary_rates_are_set_exactly() {
        let (_board, path) = pty();
        let t = SerialTransport::open(&path, 1_234_567, true).unwrap();
        // SAFETY: reading the termios2 back.
        let mut back: libc::termios2 = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::ioctl(t.file.as_raw_fd(), libc::TCGETS2, &mut back) }, 0);
        assert_eq!(back.c_ospeed, 1_234_567);
        assert_eq!(back.c_cflag & libc::CBAUD, libc::BOTHER);
        assert_eq!(back.c_lflag & libc::ICANON, 0);
    }

    #[test]
    fn no_port_and_not_a_tty_are_explained() {
        let e = SerialTransport::open(Path::new("/dev/ttyUSB-ws-missing"), 115_200, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/dev/ttyUSB-ws-missing"), "{e}");
        assert!(e.contains("dialout") && e.contains("boards/udev/60-weightstream.rules"), "{e}");
        let e = SerialTransport::open(Path::new("/dev/null"), 115_200, false).unwrap_err().to_string();
        assert!(e.contains("not a tty"), "{e}");
    }
}
