//! USB transports on libusb (the `rusb` crate): an FTDI FT232H/FT2232H in synchronous 245
//! FIFO mode, an FT600/FT601, or a generic vendor bulk interface. All three are one
//! [`UsbTransport`]: a ring of bulk transfers each way, plus what the chip needs around
//! them ([`ftdi`]: set-up requests and the modem-status bytes of every IN packet;
//! [`ft601`]: a read request on the session pipe before every IN transfer).
//!
//! **Why libusb's asynchronous API, through `rusb::ffi`.** Throughput collapses with one
//! blocking transfer at a time: between the completion of one and the submission of the next
//! the endpoint has nothing queued, the chip's FIFO fills and the board stalls. rusb 0.9
//! wraps only libusb's synchronous calls, which cannot keep several transfers queued on one
//! endpoint *in order* (threads each blocking in `read_bulk` submit in whatever order the
//! scheduler picks). libusb's asynchronous transfers can: the kernel runs the URBs queued on
//! one endpoint in submission order, so they complete in that order too. So each direction keeps
//! `link.transfers` transfers of `link.transfer_size` bytes submitted; `recv` hands out the
//! oldest completed one and resubmits it, `send` fills the next free one and submits it.
//! Events are handled on the caller's thread inside `recv`/`send` (the transfers run on the
//! bus without it; handling events only reaps them), so the transport owns its libusb
//! context, needs no thread, and every raw transfer is touched from one thread at a time.

pub mod ft601;
pub mod ftdi;

use std::ffi::{c_int, c_void, CStr};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use rusb::constants::{
    LIBUSB_ERROR_INTERRUPTED, LIBUSB_TRANSFER_CANCELLED, LIBUSB_TRANSFER_COMPLETED,
    LIBUSB_TRANSFER_NO_DEVICE, LIBUSB_TRANSFER_OVERFLOW, LIBUSB_TRANSFER_STALL, LIBUSB_TRANSFER_TIMED_OUT,
};
use rusb::{ffi, Context, Device, DeviceHandle, UsbContext};

use super::Transport;
use crate::board::{Ft601Link, Ftdi245Link, UsbBulkLink, UsbId};
use crate::error::{Result, TransportError};

/// How long `send` waits for the board to take a transfer before calling the link stalled.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long dropping the transport waits for queued OUT data to leave.
const DRAIN_ON_DROP: Duration = Duration::from_millis(500);

/// What a chip needs around plain bulk transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chip {
    /// FTDI sync-245: strip status bytes from IN packets of this size.
    Ftdi { packet: usize },
    /// FT60x: send a read request before each IN transfer; the request counter.
    Ft601 { next_idx: u32 },
    /// Generic vendor bulk: nothing.
    Bulk,
}

/// One bulk transfer and its buffer. `done` is set by the completion callback.
#[derive(Debug)]
struct Slot {
    raw: NonNull<ffi::libusb_transfer>,
    buf: Box<[u8]>,
    done: Box<AtomicI32>,
    busy: bool,
}

/// A ring of transfers on one endpoint; the in-flight ones are `head .. head + busy`.
#[derive(Debug)]
struct Ring {
    ep: u8,
    slots: Vec<Slot>,
    head: usize,
    busy: usize,
}

extern "system" fn on_complete(t: *mut ffi::libusb_transfer) {
    // SAFETY: libusb passes back the transfer we filled; its user_data points at the slot's
    // boxed flag, which outlives the transfer (slots free their transfer before the flag).
    unsafe {
        let flag = (*t).user_data as *const AtomicI32;
        (*flag).store(1, Ordering::Release);
    }
}

fn libusb_error_name(code: c_int) -> String {
    // SAFETY: libusb_error_name returns a pointer to a static NUL-terminated string.
    unsafe { CStr::from_ptr(ffi::libusb_error_name(code)) }.to_string_lossy().into_owned()
}

fn transfer_status_name(status: c_int) -> &'static str {
    match status {
        LIBUSB_TRANSFER_TIMED_OUT => "timed out",
        LIBUSB_TRANSFER_CANCELLED => "cancelled",
        LIBUSB_TRANSFER_STALL => "endpoint stalled",
        LIBUSB_TRANSFER_NO_DEVICE => "device gone",
        LIBUSB_TRANSFER_OVERFLOW => "overflow: the device sent more than asked",
        _ => "transfer error",
    }
}

impl Ring {
    fn new(ep: u8, count: usize, size: usize) -> Self {
        let slots = (0..count)
            .map(|_| {
                // SAFETY: allocating a transfer with no isochronous packets has no preconditions.
                let raw = NonNull::new(unsafe { ffi::libusb_alloc_transfer(0) })
                    .expect("libusb could not allocate a transfer");
                Slot {
                    raw,
                    buf: vec![0u8; size].into_boxed_slice(),
                    done: Box::new(AtomicI32::new(0)),
                    busy: false,
                }
            })
            .collect();
        Self { ep, slots, head: 0, busy: 0 }
    }

    fn index(&self, k: usize) -> usize {
        (self.head + k) % self.slots.len()
    }

    /// Submits slot `i` for `len` bytes.
    fn submit(&mut self, i: usize, handle: *mut ffi::libusb_device_handle, len: usize) -> Result<(), String> {
        let ep = self.ep;
        let s = &mut self.slots[i];
        debug_assert!(!s.busy && len <= s.buf.len());
        s.done.store(0, Ordering::Relaxed);
        let t = s.raw.as_ptr();
        // SAFETY: the transfer is ours and idle; buffer and flag live in the slot, which keeps
        // them until the transfer is freed, and the device handle outlives every transfer
        // (UsbTransport's Drop cancels and reaps them before the handle closes).
        let rc = unsafe {
            ffi::libusb_fill_bulk_transfer(
                t,
                handle,
                ep,
                s.buf.as_mut_ptr(),
                len as c_int,
                on_complete,
                &*s.done as *const AtomicI32 as *mut c_void,
                0,
            );
            ffi::libusb_submit_transfer(t)
        };
        if rc < 0 {
            return Err(format!("submitting a transfer on endpoint {ep:#04x}: {}", libusb_error_name(rc)));
        }
        s.busy = true;
        Ok(())
    }

    /// `(status, actual_length)` of completed slot `i`, marking it idle.
    fn reap(&mut self, i: usize) -> (c_int, usize) {
        let s = &mut self.slots[i];
        s.busy = false;
        let t = s.raw.as_ptr();
        // SAFETY: the callback ran, so libusb no longer touches the transfer.
        unsafe { ((*t).status, (*t).actual_length.max(0) as usize) }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        for s in &mut self.slots {
            if s.busy {
                // Still owned by libusb (UsbTransport::drop could not reap it): leak the
                // transfer, its buffer and flag rather than free memory libusb may write.
                std::mem::forget(std::mem::take(&mut s.buf));
                std::mem::forget(std::mem::replace(&mut s.done, Box::new(AtomicI32::new(0))));
            } else {
                // SAFETY: idle transfers are ours alone.
                unsafe { ffi::libusb_free_transfer(s.raw.as_ptr()) };
            }
        }
    }
}

/// A USB link: FTDI sync-245, FT60x or vendor bulk, with transfers in flight each way.
#[derive(Debug)]
pub struct UsbTransport {
    rx: Ring,
    tx: Ring,
    chip: Chip,
    /// The completed IN slot being handed out, and how far: `(slot, at, len)`.
    current: Option<(usize, usize, usize)>,
    peer: String,
    interfaces: Vec<u8>,
    gone: bool,
    // Dropped after the rings (fields drop in order): transfers never outlive the handle.
    handle: DeviceHandle<Context>,
    ctx: Context,
}

// SAFETY: the raw transfers are only touched through `&mut self` (one thread at a time);
// libusb allows a context and its transfers to move between threads.
unsafe impl Send for UsbTransport {}

/// The device found for a link, opened, with its interfaces claimed.
struct Opened {
    ctx: Context,
    handle: DeviceHandle<Context>,
    device: Device<Context>,
    peer: String,
}

fn list_ids(ids: &[UsbId]) -> String {
    ids.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
}

fn where_on_bus(d: &Device<Context>) -> String {
    format!("bus {} address {}", d.bus_number(), d.address())
}

/// Finds the first device with one of `ids` (and serial number `serial`), opens it and claims
/// `interfaces`; `kind` names the link for messages.
fn open_device(
    ids: &[UsbId],
    serial: Option<&str>,
    interfaces: &[u8],
    wanted: String,
    kind: &str,
) -> Result<Opened> {
    let serial_note = serial.map(|s| format!(" with serial number `{s}`")).unwrap_or_default();
    let none = |seen: String| TransportError::NoUsbDevice {
        wanted: wanted.clone(),
        ids: list_ids(ids),
        serial: serial_note.clone(),
        seen,
    };
    let ctx = Context::new().map_err(|e| none(format!("libusb could not start: {e}")))?;
    let devices = ctx.devices().map_err(|e| none(format!("libusb could not list the bus: {e}")))?;
    let mut seen = Vec::new();
    let mut refused = None;
    for device in devices.iter() {
        let Ok(desc) = device.device_descriptor() else { continue };
        let id = UsbId { vid: desc.vendor_id(), pid: desc.product_id() };
        if !ids.contains(&id) {
            if ids.iter().any(|w| w.vid == id.vid) {
                seen.push(format!("{id} on {}", where_on_bus(&device)));
            }
            continue;
        }
        let here = format!("{id} on {}", where_on_bus(&device));
        let handle = match device.open() {
            Ok(h) => h,
            Err(source) => {
                refused.get_or_insert((here, source));
                continue;
            }
        };
        let sn = handle.read_serial_number_string_ascii(&desc).ok();
        if let Some(want) = serial {
            if sn.as_deref() != Some(want) {
                seen.push(format!("{here} with serial `{}`", sn.as_deref().unwrap_or("?")));
                continue;
            }
        }
        let sn_note = sn.map(|s| format!(" serial {s}")).unwrap_or_default();
        let peer = format!("{kind} {id}{sn_note} ({})", where_on_bus(&device));
        // Unbind ftdi_sio and the like for as long as we hold the interface.
        let _ = handle.set_auto_detach_kernel_driver(true);
        for &i in interfaces {
            handle.claim_interface(i).map_err(|source| TransportError::UsbAccess {
                device: here.clone(),
                op: "claim its interface",
                interface: i,
                source,
            })?;
        }
        return Ok(Opened { ctx, handle, device, peer });
    }
    if let Some((device, source)) = refused {
        return Err(
            TransportError::UsbAccess { device, op: "open it", interface: interfaces[0], source }.into()
        );
    }
    let seen = if !seen.is_empty() {
        format!("seen instead: {}", seen.join(", "))
    } else if !std::path::Path::new("/dev/bus/usb").exists() {
        "this system shows no USB bus: /dev/bus/usb is missing (in a container, pass it through)".into()
    } else {
        "no device of that vendor is on the bus".into()
    };
    Err(none(seen).into())
}

/// The max packet size of endpoint `ep` in the active configuration.
fn max_packet(device: &Device<Context>, ep: u8) -> Option<usize> {
    let config = device.active_config_descriptor().ok()?;
    for iface in config.interfaces() {
        for alt in iface.descriptors() {
            for e in alt.endpoint_descriptors() {
                if e.address() == ep {
                    return Some(usize::from(e.max_packet_size() & 0x7ff));
                }
            }
        }
    }
    None
}

impl UsbTransport {
    /// Opens an FT232H / FT2232H channel A and switches it to synchronous 245 FIFO mode
    /// (AN_130 §4.1, [`ftdi::sync_fifo_setup`]).
    pub fn open_ftdi245(link: &Ftdi245Link) -> Result<Self> {
        let wanted = format!("an FTDI FT232H/FT2232H sync-245 FIFO (ftdi245, interface {})", link.interface);
        let o = open_device(&link.ids(), link.serial.as_deref(), &[link.interface], wanted, "ftdi245")?;
        let setup =
            |op: &'static str, reason: String| TransportError::Device { op, peer: o.peer.clone(), reason };
        for r in ftdi::sync_fifo_setup(link.interface, link.latency_ms) {
            o.handle
                .write_control(
                    ftdi::REQUEST_TYPE_OUT,
                    r.request,
                    r.value,
                    r.index,
                    &[],
                    Duration::from_secs(1),
                )
                .map_err(|e| setup("configure", format!("{}: {e}", r.what)))?;
            if !r.settle.is_zero() {
                std::thread::sleep(r.settle);
            }
        }
        // Full-speed hosts give 64-byte packets; read the real size, as the status bytes
        // come once per packet.
        let packet = max_packet(&o.device, ftdi::EP_IN).unwrap_or(ftdi::HIGH_SPEED_PACKET);
        if packet <= ftdi::STATUS_BYTES || link.transfer_size % packet != 0 {
            return Err(setup(
                "configure",
                format!("endpoint {:#04x} reports packets of {packet} bytes", ftdi::EP_IN),
            )
            .into());
        }
        Self::start(
            o,
            ftdi::EP_IN,
            ftdi::EP_OUT,
            link.transfer_size,
            link.transfers,
            Chip::Ftdi { packet },
            vec![link.interface],
        )
    }

    /// Opens an FT600/FT601 FIFO channel ([`ft601`]).
    pub fn open_ft601(link: &Ft601Link) -> Result<Self> {
        let wanted =
            format!("an FTDI FT600/FT601 FIFO (ft601, interfaces 0 and 1, channel {})", link.channel);
        let o = open_device(&link.ids(), link.serial.as_deref(), &ft601::INTERFACES, wanted, "ft601")?;
        let (ep_in, ep_out) = ft601::data_endpoints(link.channel);
        Self::start(
            o,
            ep_in,
            ep_out,
            link.transfer_size,
            link.transfers,
            Chip::Ft601 { next_idx: 0 },
            ft601::INTERFACES.to_vec(),
        )
    }

    /// Opens a vendor bulk interface with the board file's endpoints.
    pub fn open_bulk(link: &UsbBulkLink) -> Result<Self> {
        let wanted = format!(
            "a vendor bulk interface (usb-bulk, interface {}, endpoints {:#04x}/{:#04x})",
            link.interface, link.ep_in, link.ep_out
        );
        let o = open_device(&[link.id()], link.serial.as_deref(), &[link.interface], wanted, "usb-bulk")?;
        Self::start(
            o,
            link.ep_in,
            link.ep_out,
            link.transfer_size,
            link.transfers,
            Chip::Bulk,
            vec![link.interface],
        )
    }

    fn start(
        o: Opened,
        ep_in: u8,
        ep_out: u8,
        size: usize,
        count: usize,
        chip: Chip,
        interfaces: Vec<u8>,
    ) -> Result<Self> {
        let mut t = Self {
            rx: Ring::new(ep_in, count, size),
            tx: Ring::new(ep_out, count, size),
            chip,
            current: None,
            peer: o.peer,
            interfaces,
            gone: false,
            handle: o.handle,
            ctx: o.ctx,
        };
        for k in 0..count {
            t.submit_in(k)?;
        }
        t.rx.busy = count;
        Ok(t)
    }

    fn fail(&self, op: &'static str, reason: String) -> TransportError {
        TransportError::Device { op, peer: self.peer.clone(), reason }
    }

    /// Submits IN slot `i`, preceded by the FT60x read request for its length.
    fn submit_in(&mut self, i: usize) -> Result<()> {
        let len = self.rx.slots[i].buf.len();
        if let Chip::Ft601 { next_idx } = &mut self.chip {
            let req = ft601::read_request(*next_idx, self.rx.ep, len as u32);
            *next_idx = next_idx.wrapping_add(1);
            match self.handle.write_bulk(ft601::SESSION_EP, &req, Duration::from_secs(1)) {
                Ok(n) if n == req.len() => {}
                Ok(n) => {
                    return Err(self
                        .fail("receive", format!("the read request went out short ({n} of 20 bytes)"))
                        .into())
                }
                Err(rusb::Error::NoDevice) => return Err(self.gone()),
                Err(e) => return Err(self.fail("receive", format!("sending the read request: {e}")).into()),
            }
        }
        let handle = self.handle.as_raw();
        if let Err(r) = self.rx.submit(i, handle, len) {
            // The ring now has a hole libusb will never fill: this link is done.
            self.gone = true;
            return Err(self.fail("receive", r).into());
        }
        Ok(())
    }

    fn gone(&mut self) -> crate::Error {
        self.gone = true;
        TransportError::DeviceGone { peer: self.peer.clone() }.into()
    }

    /// Handles libusb events until `flag` is set or `deadline` passes; true when set.
    fn wait(&self, flag: &AtomicI32, deadline: Instant) -> Result<bool> {
        loop {
            if flag.load(Ordering::Acquire) != 0 {
                return Ok(true);
            }
            let left = deadline.saturating_duration_since(Instant::now()).min(Duration::from_millis(100));
            let tv = libc::timeval {
                tv_sec: left.as_secs() as libc::time_t,
                tv_usec: left.subsec_micros() as libc::suseconds_t,
            };
            // SAFETY: the context is ours and alive; `flag` is a live c_int-sized atomic that
            // libusb only reads.
            let rc = unsafe {
                ffi::libusb_handle_events_timeout_completed(
                    self.ctx.as_raw(),
                    &tv as *const libc::timeval as *const _,
                    flag.as_ptr(),
                )
            };
            if rc < 0 && rc != LIBUSB_ERROR_INTERRUPTED {
                return Err(self
                    .fail("receive", format!("handling USB events: {}", libusb_error_name(rc)))
                    .into());
            }
            if flag.load(Ordering::Acquire) != 0 {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
        }
    }

    /// Reaps the oldest OUT transfer, waiting until `deadline`; false when it is still busy.
    fn reap_tx(&mut self, deadline: Instant) -> Result<bool> {
        let i = self.tx.head;
        let flag: *const AtomicI32 = &*self.tx.slots[i].done;
        // SAFETY: the flag is boxed in the slot and outlives this call.
        if !self.wait(unsafe { &*flag }, deadline)? {
            return Ok(false);
        }
        let want = {
            // SAFETY: completed, so libusb is done with the transfer.
            unsafe { (*self.tx.slots[i].raw.as_ptr()).length.max(0) as usize }
        };
        let (status, actual) = self.tx.reap(i);
        self.tx.head = (i + 1) % self.tx.slots.len();
        self.tx.busy -= 1;
        match status {
            LIBUSB_TRANSFER_COMPLETED if actual == want => Ok(true),
            LIBUSB_TRANSFER_COMPLETED => {
                Err(self.fail("send", format!("the device took {actual} of {want} bytes")).into())
            }
            LIBUSB_TRANSFER_NO_DEVICE => Err(self.gone()),
            LIBUSB_TRANSFER_STALL => {
                let _ = self.handle.clear_halt(self.tx.ep);
                Err(self
                    .fail("send", format!("endpoint {:#04x} stalled (cleared; resend)", self.tx.ep))
                    .into())
            }
            s => Err(self.fail("send", transfer_status_name(s).into()).into()),
        }
    }

    /// Waits for the OUT queue to drain, up to `timeout`.
    pub fn flush(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while self.tx.busy > 0 {
            if !self.reap_tx(deadline)? {
                return Err(TransportError::Stalled { peer: self.peer.clone(), waited: timeout }.into());
            }
        }
        Ok(())
    }
}

impl Transport for UsbTransport {
    fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.send_parts(&[bytes])
    }

    fn send_parts(&mut self, parts: &[&[u8]]) -> Result<()> {
        if self.gone {
            return Err(TransportError::DeviceGone { peer: self.peer.clone() }.into());
        }
        let (mut part, mut at) = (0, 0);
        let size = self.tx.slots[0].buf.len();
        while part < parts.len() {
            // Reap what finished without waiting, then wait for a slot if all are busy.
            while self.tx.busy > 0 && self.tx.slots[self.tx.head].done.load(Ordering::Acquire) != 0 {
                self.reap_tx(Instant::now())?;
            }
            if self.tx.busy == self.tx.slots.len() && !self.reap_tx(Instant::now() + STALL_TIMEOUT)? {
                return Err(TransportError::Stalled { peer: self.peer.clone(), waited: STALL_TIMEOUT }.into());
            }
            // Gather as many parts as fit into the next free transfer: one transfer per
            // frame, not one per header, payload and CRC.
            let i = self.tx.index(self.tx.busy);
            let mut len = 0;
            while part < parts.len() && len < size {
                let p = &parts[part][at..];
                let n = p.len().min(size - len);
                self.tx.slots[i].buf[len..len + n].copy_from_slice(&p[..n]);
                len += n;
                at += n;
                if at == parts[part].len() {
                    part += 1;
                    at = 0;
                }
            }
            if len == 0 {
                break;
            }
            let handle = self.handle.as_raw();
            self.tx.submit(i, handle, len).map_err(|r| self.fail("send", r))?;
            self.tx.busy += 1;
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.gone {
            return Err(TransportError::DeviceGone { peer: self.peer.clone() }.into());
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some((i, at, len)) = self.current {
                let n = buf.len().min(len - at);
                buf[..n].copy_from_slice(&self.rx.slots[i].buf[at..at + n]);
                if at + n == len {
                    // Handed out in full: back into the queue behind the others.
                    self.current = None;
                    self.submit_in(i)?;
                    self.rx.busy += 1;
                } else {
                    self.current = Some((i, at + n, len));
                }
                return Ok(n);
            }
            let i = self.rx.head;
            let flag: *const AtomicI32 = &*self.rx.slots[i].done;
            // SAFETY: the flag is boxed in the slot and outlives this call.
            if !self.wait(unsafe { &*flag }, deadline)? {
                return Ok(0);
            }
            let (status, actual) = self.rx.reap(i);
            self.rx.busy -= 1;
            self.rx.head = (i + 1) % self.rx.slots.len();
            match status {
                LIBUSB_TRANSFER_COMPLETED => {}
                LIBUSB_TRANSFER_NO_DEVICE => return Err(self.gone()),
                LIBUSB_TRANSFER_STALL => {
                    let _ = self.handle.clear_halt(self.rx.ep);
                    self.submit_in(i)?;
                    self.rx.busy += 1;
                    return Err(self
                        .fail("receive", format!("endpoint {:#04x} stalled (cleared)", self.rx.ep))
                        .into());
                }
                s => return Err(self.fail("receive", transfer_status_name(s).into()).into()),
            }
            let len = match self.chip {
                Chip::Ftdi { packet } => {
                    ftdi::strip_modem_status(&mut self.rx.slots[i].buf[..actual], packet)
                }
                _ => actual,
            };
            if len == 0 {
                // Status-only packets (the latency timer fired with nothing to send).
                self.submit_in(i)?;
                self.rx.busy += 1;
                if Instant::now() >= deadline {
                    return Ok(0);
                }
                continue;
            }
            self.current = Some((i, 0, len));
        }
    }

    fn describe(&self) -> String {
        self.peer.clone()
    }
}

impl Drop for UsbTransport {
    fn drop(&mut self) {
        if !self.gone {
            let _ = self.flush(DRAIN_ON_DROP);
        }
        // Cancel everything still queued and reap the cancellations, so no transfer outlives
        // the handle; Ring::drop leaks any that libusb still holds.
        for ring in [&self.rx, &self.tx] {
            for s in ring.slots.iter().filter(|s| s.busy) {
                // SAFETY: the transfer is submitted; cancelling a finished one is harmless.
                unsafe { ffi::libusb_cancel_transfer(s.raw.as_ptr()) };
            }
        }
        let deadline = Instant::now() + Duration::from_secs(1);
        for r in 0..2 {
            for i in 0..self.rx.slots.len().max(self.tx.slots.len()) {
                let ring = if r == 0 { &self.rx } else { &self.tx };
                let Some(s) = ring.slots.get(i) else { continue };
                if !s.busy {
                    continue;
                }
                let flag: *const AtomicI32 = &*s.done;
                // SAFETY: boxed in the slot, alive for this call.
                if matches!(self.wait(unsafe { &*flag }, deadline), Ok(true)) {
                    let ring = if r == 0 { &mut self.rx } else { &mut self.tx };
                    ring.reap(i);
                }
            }
        }
        for &i in &self.interfaces {
            let _ = self.handle.release_interface(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::{FT60X_IDS, FTDI245_IDS};

    #[test]
    fn no_device_names_the_ids_the_interface_and_the_udev_rule() {
        // A serial number no board has: nothing matches even where an FTDI chip is plugged in.
        let link = Ftdi245Link {
            vid: None,
            pid: None,
            serial: Some("ws-no-such-serial".into()),
            interface: 0,
            latency_ms: 2,
            transfer_size: 65536,
            transfers: 8,
        };
        let e = UsbTransport::open_ftdi245(&link).unwrap_err().to_string();
        for id in FTDI245_IDS {
            assert!(e.contains(&id.to_string()), "{e}");
        }
        assert!(e.contains("interface 0"), "{e}");
        assert!(e.contains("`ws-no-such-serial`"), "{e}");
        assert!(e.contains("boards/udev/60-weightstream.rules"), "{e}");
        assert!(e.contains("lsusb"), "{e}");

        let link = Ft601Link {
            vid: None,
            pid: None,
            serial: Some("ws-no-such-serial".into()),
            channel: 1,
            transfer_size: 1 << 20,
            transfers: 4,
        };
        let e = UsbTransport::open_ft601(&link).unwrap_err().to_string();
        assert!(e.contains("0403:601e") && e.contains("0403:601f"), "{e}");
        assert_eq!(FT60X_IDS.len(), 2);

        let link = UsbBulkLink {
            vid: 0x1209,
            pid: 0x5753,
            serial: Some("ws-no-such-serial".into()),
            interface: 2,
            ep_in: 0x83,
            ep_out: 0x04,
            transfer_size: 65536,
            transfers: 8,
        };
        let e = UsbTransport::open_bulk(&link).unwrap_err().to_string();
        assert!(e.contains("1209:5753") && e.contains("interface 2") && e.contains("0x83/0x04"), "{e}");
    }
}
