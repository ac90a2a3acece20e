//! PCIe through the Xilinx XDMA driver (dma_ip_drivers, `XDMA/linux-kernel`): the
//! host-to-card and card-to-host stream devices `/dev/xdmaN_h2c_K` and `/dev/xdmaN_c2h_K`
//! carry the link's byte stream, and `/dev/xdmaN_user` maps the user BAR (the IP's AXI-Lite
//! master, PG195 "PCIe to AXI Lite Master Interface") for registers.
//!
//! Each `write`/`read` on a stream device is one DMA transfer: the driver pins the caller's
//! pages and builds its descriptor list over them (PG195 "Descriptors"), so the data is not
//! copied by the kernel. Buffers here are page aligned ([`AlignedBuf`]), as the driver's own
//! test tools allocate them: every descriptor then covers whole pages, and an IP built
//! without unaligned-transfer support still accepts them. Reads block until the card ends a
//! packet (AXI-Stream `tlast`; `c2h` is opened with `O_TRUNC`, the driver's EOP-flush mode)
//! or the buffer is full, so a reader thread keeps one read
//! posted at all times and hands filled buffers over a channel: `recv` gets a timeout and
//! the card is never left without a posted read while the host decodes.

use std::alloc::{self, Layout};
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::Duration;

use super::Transport;
use crate::board::XdmaLink;
use crate::error::{Result, TransportError};

/// The alignment of DMA buffers: one page.
pub const DMA_ALIGN: usize = 4096;

/// A zeroed, page-aligned byte buffer for DMA.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: it owns its allocation exclusively, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf").field("ptr", &self.ptr).field("len", &self.len).finish()
    }
}

impl AlignedBuf {
    /// `len` zero bytes at a [`DMA_ALIGN`]-aligned address; `len` is rounded up to a page.
    pub fn new(len: usize) -> Self {
        let len = len.max(1).next_multiple_of(DMA_ALIGN);
        let layout = Layout::from_size_align(len, DMA_ALIGN).expect("DMA buffer size overflows");
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc::alloc_zeroed(layout) })
            .unwrap_or_else(|| alloc::handle_alloc_error(layout));
        Self { ptr, len }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: a buffer holds at least one page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised bytes, owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Layout::from_size_align_unchecked(self.len, DMA_ALIGN)) }
    }
}

/// What the reader thread hands over: a filled buffer and its length, or the read's error.
type Filled = std::io::Result<(AlignedBuf, usize)>;

/// An XDMA stream pair: `h2c_K` for sending, `c2h_K` for receiving.
#[derive(Debug)]
pub struct XdmaTransport {
    h2c: File,
    staging: AlignedBuf,
    filled: Receiver<Filled>,
    pool: SyncSender<AlignedBuf>,
    current: Option<(AlignedBuf, usize, usize)>,
    stop: Arc<AtomicBool>,
    peer: String,
}

fn open_node(path: &Path, write: bool) -> Result<File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut o = OpenOptions::new();
    o.read(!write).write(write);
    // The driver ends a c2h read at the card's tlast only in its "EOP flush" mode, which
    // opening with O_TRUNC selects (dma_ip_drivers, cdev_sgdma.c, char_sgdma_open); without
    // it a read returns only once every descriptor of the buffer has closed. Only on the
    // real character device: a regular file standing in for it in tests would be emptied.
    let is_device = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device());
    if !write && is_device {
        o.custom_flags(libc::O_TRUNC);
    }
    o.open(path).map_err(|source| TransportError::NoXdma { path: path.into(), source }.into())
}

/// Reads from `c2h` into pooled buffers until told to stop or the device fails.
fn reader(mut c2h: File, pool: Receiver<AlignedBuf>, filled: SyncSender<Filled>, stop: Arc<AtomicBool>) {
    let mut spare: Option<AlignedBuf> = None;
    while !stop.load(Ordering::Relaxed) {
        let mut buf = match spare.take() {
            Some(b) => b,
            // The consumer holds every buffer: wait for one (backpressure, not growth).
            None => match pool.recv() {
                Ok(b) => b,
                Err(_) => return,
            },
        };
        match c2h.read(buf.as_mut_slice()) {
            Ok(0) => {
                // Nothing (a file standing in for the device is at its end); the real c2h
                // device blocks instead. Don't spin.
                spare = Some(buf);
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(n) => {
                if filled.send(Ok((buf, n))).is_err() {
                    return;
                }
            }
            // The driver's c2h timeout with no packet from the card: post the read again.
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::Interrupted | ErrorKind::TimedOut | ErrorKind::WouldBlock
                ) =>
            {
                spare = Some(buf)
            }
            Err(e) => {
                let _ = filled.send(Err(e));
                return;
            }
        }
    }
}

impl XdmaTransport {
    /// Opens `link`'s `h2c`/`c2h` pair and starts the reader with `link.transfers` buffers
    /// of `link.transfer_size` bytes.
    pub fn open(link: &XdmaLink) -> Result<Self> {
        let (h2c_path, c2h_path) = (link.h2c_path(), link.c2h_path());
        let h2c = open_node(&h2c_path, true)?;
        let c2h = open_node(&c2h_path, false)?;
        let count = link.transfers.max(1);
        let (pool_tx, pool_rx) = mpsc::sync_channel(count);
        for _ in 0..count {
            pool_tx.send(AlignedBuf::new(link.transfer_size)).expect("the pool has room");
        }
        let (filled_tx, filled_rx) = mpsc::sync_channel(count);
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let peer = format!("xdma {} / {}", h2c_path.display(), c2h_path.display());
        std::thread::Builder::new()
            .name(format!("xdma{}-c2h{}", link.device, link.channel))
            .spawn(move || reader(c2h, pool_rx, filled_tx, s))
            .map_err(|e| TransportError::Device {
                op: "configure",
                peer: peer.clone(),
                reason: format!("starting the reader: {e}"),
            })?;
        Ok(Self {
            h2c,
            staging: AlignedBuf::new(link.transfer_size),
            filled: filled_rx,
            pool: pool_tx,
            current: None,
            stop,
            peer,
        })
    }

    fn fail(&self, op: &'static str, e: std::io::Error) -> crate::Error {
        TransportError::Device { op, peer: self.peer.clone(), reason: e.to_string() }.into()
    }

    /// One DMA write of the first `len` staged bytes.
    fn write_staged(&mut self, len: usize) -> Result<()> {
        let mut at = 0;
        while at < len {
            match self.h2c.write(&self.staging.as_slice()[at..len]) {
                Ok(0) => return Err(TransportError::DeviceGone { peer: self.peer.clone() }.into()),
                Ok(n) => at += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.fail("send", e)),
            }
        }
        Ok(())
    }
}

impl Transport for XdmaTransport {
    fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.send_parts(&[bytes])
    }

    fn send_parts(&mut self, parts: &[&[u8]]) -> Result<()> {
        // Gather into the aligned staging buffer (the one copy alignment costs) and write it
        // whenever it fills: one DMA transfer per `transfer_size`, not per part.
        let size = self.staging.len();
        let mut len = 0;
        for p in parts {
            let mut p = *p;
            while !p.is_empty() {
                let n = p.len().min(size - len);
                self.staging.as_mut_slice()[len..len + n].copy_from_slice(&p[..n]);
                len += n;
                p = &p[n..];
                if len == size {
                    self.write_staged(len)?;
                    len = 0;
                }
            }
        }
        if len > 0 {
            self.write_staged(len)?;
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.current.is_none() {
            let got = if timeout.is_zero() {
                self.filled.try_recv().map_err(|e| match e {
                    mpsc::TryRecvError::Empty => RecvTimeoutError::Timeout,
                    mpsc::TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
                })
            } else {
                self.filled.recv_timeout(timeout)
            };
            match got {
                Ok(Ok((b, n))) => self.current = Some((b, 0, n)),
                Ok(Err(e)) => return Err(self.fail("receive", e)),
                Err(RecvTimeoutError::Timeout) => return Ok(0),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(TransportError::DeviceGone { peer: self.peer.clone() }.into())
                }
            }
        }
        let (b, at, len) = self.current.take().expect("a buffer is current");
        let n = buf.len().min(len - at);
        buf[..n].copy_from_slice(&b.as_slice()[at..at + n]);
        if at + n < len {
            self.current = Some((b, at + n, len));
        } else {
            // Back to the reader; it cannot be full, as every buffer came from it.
            let _ = self.pool.try_send(b);
        }
        Ok(n)
    }

    fn describe(&self) -> String {
        self.peer.clone()
    }
}

impl Drop for XdmaTransport {
    fn drop(&mut self) {
        // The reader may sit in a blocking read until the driver's c2h timeout; it stops
        // after that read (or as soon as it asks the pool, whose sender goes with us). It is
        // not joined, so dropping the transport never hangs.
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The XDMA user BAR, mapped: bounds-checked 32-bit register access.
pub struct UserBar {
    ptr: NonNull<u32>,
    len: usize,
    path: PathBuf,
    _file: File,
}

// SAFETY: the mapping is owned by the value; access goes through &self / &mut self.
unsafe impl Send for UserBar {}

impl std::fmt::Debug for UserBar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserBar").field("path", &self.path).field("len", &self.len).finish()
    }
}

impl UserBar {
    /// Maps the first `len` bytes (a non-zero multiple of 4 KiB) of `path`, shared.
    pub fn open(path: &Path, len: usize) -> Result<Self> {
        let map_err = |source| TransportError::BarMap { path: path.into(), len, source };
        if len == 0 || len % DMA_ALIGN != 0 {
            return Err(map_err(std::io::Error::new(
                ErrorKind::InvalidInput,
                "the length must be a non-zero multiple of 4096",
            ))
            .into());
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|source| TransportError::NoXdma { path: path.into(), source })?;
        // A regular file (a test's stand-in) must be long enough: touching a mapped page
        // past its end raises SIGBUS. Device nodes report no size.
        let meta = file.metadata().map_err(map_err)?;
        if meta.is_file() && (meta.len() as usize) < len {
            return Err(map_err(std::io::Error::new(
                ErrorKind::InvalidInput,
                format!("the file holds only {} bytes", meta.len()),
            ))
            .into());
        }
        // SAFETY: a fresh shared mapping of our fd; checked for MAP_FAILED below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(map_err(std::io::Error::last_os_error()).into());
        }
        let ptr = NonNull::new(p as *mut u32)
            .ok_or_else(|| map_err(std::io::Error::other("mmap returned null")))?;
        Ok(Self { ptr, len, path: path.into(), _file: file })
    }

    /// Opens `link`'s `/dev/xdmaN_user`, `link.user_bar_size` bytes.
    pub fn for_link(link: &XdmaLink) -> Result<Self> {
        Self::open(&link.user_path(), link.user_bar_size)
    }

    /// The mapped length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: a mapping holds at least one page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn word(&self, offset: usize) -> Result<*mut u32> {
        if offset % 4 != 0 || offset.checked_add(4).is_none_or(|end| end > self.len) {
            return Err(TransportError::BarOffset { path: self.path.clone(), offset, len: self.len }.into());
        }
        // SAFETY: in bounds and aligned (the mapping is page aligned), checked above.
        Ok(unsafe { self.ptr.as_ptr().add(offset / 4) })
    }

    /// Reads the 32-bit register at byte `offset` (one PCIe read, volatile).
    pub fn read32(&self, offset: usize) -> Result<u32> {
        let p = self.word(offset)?;
        // SAFETY: a valid, aligned word of our mapping; volatile, as a device register.
        Ok(u32::from_le(unsafe { p.read_volatile() }))
    }

    /// Writes the 32-bit register at byte `offset` (one PCIe write, volatile).
    pub fn write32(&mut self, offset: usize, value: u32) -> Result<()> {
        let p = self.word(offset)?;
        // SAFETY: as in read32; &mut self makes the write exclusive.
        unsafe { p.write_volatile(value.to_le()) };
        Ok(())
    }
}

impl Drop for UserBar {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `open` mapped.
        unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ws-xdma-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn link(dir: &Path) -> XdmaLink {
        XdmaLink {
            device: 0,
            channel: 1,
            dev_dir: dir.into(),
            user_bar_size: 8192,
            transfer_size: 8192,
            transfers: 2,
        }
    }

    #[test]
    fn buffers_are_page_aligned_and_rounded_up() {
        for len in [1, 4095, 4096, 4097, 1 << 20] {
            let mut b = AlignedBuf::new(len);
            assert_eq!(b.as_slice().as_ptr() as usize % DMA_ALIGN, 0);
            assert_eq!(b.len() % DMA_ALIGN, 0);
            assert!(b.len() >= len);
            assert!(b.as_slice().iter().all(|&x| x == 0));
            b.as_mut_slice()[len - 1] = 7;
        }
    }

    #[test]
    fn paths_follow_the_driver_naming() {
        let l = XdmaLink {
            device: 2,
            channel: 3,
            dev_dir: "/dev".into(),
            user_bar_size: 4096,
            transfer_size: 4096,
            transfers: 1,
        };
        assert_eq!(l.h2c_path(), Path::new("/dev/xdma2_h2c_3"));
        assert_eq!(l.c2h_path(), Path::new("/dev/xdma2_c2h_3"));
        assert_eq!(l.user_path(), Path::new("/dev/xdma2_user"));
    }

    #[test]
    fn no_device_names_the_node_and_the_checks() {
        let dir = temp_dir("none");
        let e = XdmaTransport::open(&link(&dir)).unwrap_err().to_string();
        assert!(e.contains(&dir.join("xdma0_h2c_1").display().to_string()), "{e}");
        assert!(e.contains("lspci -d 10ee:") && e.contains("lsmod | grep xdma"), "{e}");
        assert!(e.contains("boards/udev/60-weightstream.rules"), "{e}");
        let e = UserBar::for_link(&link(&dir)).unwrap_err().to_string();
        assert!(e.contains("xdma0_user"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stream_pair_through_files_standing_in_for_the_devices() {
        let dir = temp_dir("stream");
        let l = link(&dir);
        // What the "card" will send: more than one buffer's worth.
        let from_card: Vec<u8> = (0..20_000u32).map(|i| (i * 31 + 7) as u8).collect();
        std::fs::write(l.c2h_path(), &from_card).unwrap();
        std::fs::write(l.h2c_path(), b"").unwrap();
        let mut t = XdmaTransport::open(&l).unwrap();
        let to_card: Vec<u8> = (0..10_000u32).map(|i| (i ^ 0x5a) as u8).collect();
        t.send_parts(&[&to_card[..3], &to_card[3..9000], &to_card[9000..]]).unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 3000];
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < from_card.len() && Instant::now() < deadline {
            let n = t.recv(&mut buf, Duration::from_millis(100)).unwrap();
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, from_card);
        assert_eq!(t.recv(&mut buf, Duration::from_millis(20)).unwrap(), 0, "timed out");
        assert_eq!(t.recv(&mut buf, Duration::ZERO).unwrap(), 0, "a poll");
        drop(t);
        assert_eq!(std::fs::read(l.h2c_path()).unwrap(), to_card);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn user_bar_maps_checks_bounds_and_writes_through() {
        let dir = temp_dir("bar");
        let l = link(&dir);
        std::fs::write(l.user_path(), vec![0u8; 4096]).unwrap();
        let e = UserBar::for_link(&l).unwrap_err().to_string();
        assert!(e.contains("only 4096 bytes"), "{e}");
        std::fs::write(l.user_path(), vec![0u8; 8192]).unwrap();
        let mut bar = UserBar::for_link(&l).unwrap();
        assert_eq!(bar.len(), 8192);
        bar.write32(0, 0x5753_0002).unwrap();
        bar.write32(8188, 0xdead_beef).unwrap();
        assert_eq!(bar.read32(0).unwrap(), 0x5753_0002);
        assert_eq!(bar.read32(8188).unwrap(), 0xdead_beef);
        for bad in [8190, 8192, 2, usize::MAX - 1] {
            let e = bar.read32(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:#x}")) && e.contains("0x2000"), "{e}");
            assert!(bar.write32(bad, 0).is_err());
        }
        drop(bar);
        let file = std::fs::read(l.user_path()).unwrap();
        assert_eq!(&file[0..4], &0x5753_0002u32.to_le_bytes());
        assert_eq!(&file[8188..8192], &0xdead_beefu32.to_le_bytes());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
