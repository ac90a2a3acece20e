//! The few operating-system services the server needs beyond `std`: `poll(2)` over its
//! sockets, a signal handler that wakes that `poll`, and checking that the launcher still
//! lives.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use super::super::SimError;

/// `poll(2)`. An interrupted call (a signal arrived) reports no events rather than an error,
/// so the caller's loop sees the signal flag next.
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: `fds` is a valid, exclusively borrowed slice of `pollfd` of the length passed.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(n as usize)
}

/// A `pollfd` asking for `events` on `fd`.
pub(crate) fn pollfd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd { fd, events, revents: 0 }
}

static STOP: AtomicBool = AtomicBool::new(false);
static WAKE: OnceLock<Result<UnixStream, String>> = OnceLock::new();

/// SIGINT / SIGTERM (and SIGHUP, which the `ctrlc` termination feature includes): the handler
/// sets a flag and writes a byte into a socket pair whose other end the main loop polls, so a
/// signal ends even an idle or paused simulator at once.
#[derive(Debug)]
pub(crate) struct Signals {
    wake: &'static UnixStream,
}

impl Signals {
    /// Installs the handler, once per process; later calls share it.
    pub(crate) fn install() -> Result<Signals, SimError> {
        let r = WAKE.get_or_init(|| {
            let (rx, tx) = UnixStream::pair().map_err(|e| format!("creating a socket pair: {e}"))?;
            rx.set_nonblocking(true).map_err(|e| e.to_string())?;
            tx.set_nonblocking(true).map_err(|e| e.to_string())?;
            ctrlc::set_handler(move || {
                STOP.store(true, Ordering::SeqCst);
                let _ = (&tx).write(&[1]);
            })
            .map_err(|e| format!("installing the SIGINT/SIGTERM handler: {e}"))?;
            Ok(rx)
        });
        match r {
            Ok(wake) => Ok(Signals { wake }),
            Err(msg) => Err(SimError::Io {
                what: format!("{msg}; ws-sim cannot shut down cleanly without it"),
                source: io::Error::other("signal setup failed"),
            }),
        }
    }

    /// The descriptor to poll for readability.
    pub(crate) fn fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// Empties the wake socket.
    pub(crate) fn drain(&self) {
        let mut buf = [0u8; 64];
        while matches!((&*self.wake).read(&mut buf), Ok(n) if n > 0) {}
    }

    /// A signal asked the process to end.
    pub(crate) fn stopped(&self) -> bool {
        STOP.load(Ordering::SeqCst)
    }
}

/// Whether process `pid` still exists. `kill(pid, 0)` checks without signalling; EPERM means
/// it exists but belongs to someone else.
pub(crate) fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only performs the existence and permission checks.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}
