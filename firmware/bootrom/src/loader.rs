//! The boot-ROM loader's logic: the boot decision at reset and the loader protocol
//! (`ws_common::boot` describes the image format and the memory contract).
//!
//! Plain Rust over a [`Ram`] trait, so it is unit-tested on the host; the boot ROM binary
//! (`src/bin/ws-bootrom.rs`) supplies the real memory, the host-link bytes and the jump.
//! Every header, offset and length from the host is checked before any store: a refused
//! request writes nothing and leaves the loader ready for the next try.

use ws_common::boot::{
    ImageError, ImageHeader, BOOT_MODE_ADDR, HEADER_ADDR, HEADER_LEN, IMAGE_WINDOW, STAY_IN_LOADER,
};
use ws_common::crc32c::Crc32c;
use ws_common::ctrl::cmd::{
    encode_error, encode_response, opcode, LoadBegin, LoadBoot, LoadData, LoaderInfo, LoaderState, Ping,
    MAX_LOAD_CHUNK,
};
use ws_common::ctrl::{
    encode_frame, Command, Event, Frame, FrameDecoder, Status, FRAME_ERROR_OPCODE, MAX_FRAME, RESPONSE_BIT,
    VERSION,
};

/// Version of the loader protocol `LoaderInfo` reports.
pub const LOADER_VERSION: u8 = 1;

/// Word access to RAM.
pub trait Ram {
    /// Reads the aligned word at `addr`.
    ///
    /// # Safety
    /// `addr` must be a readable, 4-byte aligned RAM address.
    unsafe fn read_word(&mut self, addr: u32) -> u32;
    /// Writes the aligned word at `addr`.
    ///
    /// # Safety
    /// `addr` must be a writable, 4-byte aligned RAM address that no live Rust object uses.
    unsafe fn write_word(&mut self, addr: u32, value: u32);
}

/// What the boot ROM does after reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The image in RAM checks out: jump here.
    Boot(u32),
    /// The host asked to stay in the loader (the boot-mode key was set; it is now cleared).
    StayRequested,
    /// No valid image in RAM: serve the loader. The reason is kept for `LoaderInfo`.
    NoImage(ImageError),
}

/// Reads the header at [`HEADER_ADDR`].
fn resident_header(ram: &mut impl Ram) -> Result<ImageHeader, ImageError> {
    let mut b = [0u8; HEADER_LEN];
    for (i, chunk) in b.chunks_mut(4).enumerate() {
        // SAFETY: HEADER_ADDR.. is the scratch window, inside RAM and aligned.
        let w = unsafe { ram.read_word(HEADER_ADDR + 4 * i as u32) };
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    ImageHeader::decode(&b)
}

/// CRC-32C of the RAM bytes `[addr, addr + len)`, `len` a multiple of 4.
fn ram_crc(ram: &mut impl Ram, addr: u32, len: u32) -> u32 {
    let mut crc = Crc32c::new();
    let mut a = addr;
    while a < addr + len {
        // SAFETY: callers pass a range validated against IMAGE_WINDOW.
        crc.update(&unsafe { ram.read_word(a) }.to_le_bytes());
        a += 4;
    }
    crc.finish()
}

/// Checks `header` against the image bytes in RAM.
fn check_in_ram(ram: &mut impl Ram, header: &ImageHeader) -> Result<(), ImageError> {
    header.validate()?;
    if ram_crc(ram, header.load, header.length) != header.image_crc {
        return Err(ImageError::BadImageCrc);
    }
    Ok(())
}

/// The decision at reset: stay if asked, else boot a resident image that checks out.
pub fn decide(ram: &mut impl Ram) -> Decision {
    // SAFETY: BOOT_MODE_ADDR is an aligned word of the scratch window.
    if unsafe { ram.read_word(BOOT_MODE_ADDR) } == STAY_IN_LOADER {
        // SAFETY: as above.
        unsafe { ram.write_word(BOOT_MODE_ADDR, 0) };
        return Decision::StayRequested;
    }
    match resident_header(ram).and_then(|h| check_in_ram(ram, &h).map(|()| h)) {
        Ok(h) => Decision::Boot(h.entry),
        Err(e) => Decision::NoImage(e),
    }
}

/// What the caller must do after a byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Keep feeding bytes.
    Continue,
    /// The image checked out and its acknowledgement was sent: drain the link, then jump.
    Boot(u32),
}

/// The loader: frame decoder, the accepted header, and the reply buffer.
#[derive(Debug)]
pub struct Loader {
    decoder: FrameDecoder,
    header: Option<ImageHeader>,
    last_error: u8,
    bytes_written: u32,
    out: [u8; MAX_FRAME],
}

impl Default for Loader {
    fn default() -> Self {
        Self::new(None)
    }
}

impl Loader {
    /// A loader with nothing accepted; `why` (from [`decide`]) is reported as the last error.
    pub fn new(why: Option<ImageError>) -> Self {
        Loader {
            decoder: FrameDecoder::new(),
            header: None,
            last_error: why.map_or(0, ImageError::code),
            bytes_written: 0,
            out: [0; MAX_FRAME],
        }
    }

    /// The state `LoaderInfo` reports.
    pub fn state(&self) -> LoaderState {
        state_of(self.header, self.last_error, self.bytes_written)
    }

    /// Takes one host-link byte; sends every reply it completes through `tx`.
    pub fn receive(&mut self, byte: u8, ram: &mut impl Ram, tx: &mut impl FnMut(&[u8])) -> Action {
        self.decoder.push(byte);
        loop {
            let (len, action) = match self.decoder.poll() {
                Event::Pending => return Action::Continue,
                Event::Frame(frame) => {
                    let (header, state) =
                        (self.header, state_of(self.header, self.last_error, self.bytes_written));
                    let r = handle(&frame, header, state, ram, &mut self.out);
                    self.apply(&r);
                    (r.len, r.action)
                }
                Event::Error(err) => {
                    let len =
                        encode_frame(FRAME_ERROR_OPCODE, 0, &[err.status() as u8, VERSION], &mut self.out)
                            .unwrap_or(0);
                    (len, Action::Continue)
                }
            };
            if len > 0 {
                tx(&self.out[..len]);
            }
            if let Action::Boot(_) = action {
                return action;
            }
        }
    }

    fn apply(&mut self, r: &Handled) {
        match r.effect {
            Effect::None => {}
            Effect::Accept(h) => {
                self.header = Some(h);
                self.bytes_written = 0;
                self.last_error = 0;
            }
            Effect::Wrote(n) => self.bytes_written = self.bytes_written.wrapping_add(n),
            Effect::Refuse(e) => self.last_error = e.code(),
            Effect::RefuseHeader(e) => {
                // A new header, even a refused one, abandons the load in progress.
                self.header = None;
                self.bytes_written = 0;
                self.last_error = e.code();
            }
            Effect::Booting => self.last_error = 0,
        }
    }
}

fn state_of(header: Option<ImageHeader>, last_error: u8, bytes_written: u32) -> LoaderState {
    LoaderState {
        version: LOADER_VERSION,
        phase: u8::from(header.is_some()),
        last_error,
        window_base: IMAGE_WINDOW.0,
        window_len: IMAGE_WINDOW.1,
        max_chunk: MAX_LOAD_CHUNK as u16,
        bytes_written,
    }
}

enum Effect {
    None,
    Accept(ImageHeader),
    Wrote(u32),
    Refuse(ImageError),
    RefuseHeader(ImageError),
    Booting,
}

struct Handled {
    len: usize,
    action: Action,
    effect: Effect,
}

/// Answers one frame. Kept apart from [`Loader`] so the borrow of the decoder's frame and
/// the reply buffer never overlap.
fn handle(
    frame: &Frame<'_>,
    header: Option<ImageHeader>,
    state: LoaderState,
    ram: &mut impl Ram,
    out: &mut [u8],
) -> Handled {
    let (id, p) = (frame.req_id, frame.payload);
    let done = |len, effect| Handled { len, action: Action::Continue, effect };
    match frame.opcode {
        op if op & RESPONSE_BIT != 0 => done(0, Effect::None),
        opcode::PING => {
            let r = Ping::decode(p).map(|ping| ping.nonce);
            done(reply::<Ping>(id, r.as_ref().map_err(|&s| s), out), Effect::None)
        }
        opcode::LOADER_INFO => {
            let r = LoaderInfo::decode(p).map(|_| state);
            done(reply::<LoaderInfo>(id, r.as_ref().map_err(|&s| s), out), Effect::None)
        }
        opcode::LOAD_BEGIN => match LoadBegin::decode(p) {
            Err(s) => done(reply::<LoadBegin<'_>>(id, Err(s), out), Effect::None),
            Ok(b) => match ImageHeader::decode(b.header) {
                Ok(h) => done(reply::<LoadBegin<'_>>(id, Ok(&()), out), Effect::Accept(h)),
                Err(e) => {
                    done(reply::<LoadBegin<'_>>(id, Err(Status::BadImage), out), Effect::RefuseHeader(e))
                }
            },
        },
        opcode::LOAD_DATA => {
            let r = LoadData::decode(p).and_then(|d| write_chunk(header, d, ram));
            match r {
                Ok(n) => done(reply::<LoadData<'_>>(id, Ok(&()), out), Effect::Wrote(n)),
                Err(s) => done(reply::<LoadData<'_>>(id, Err(s), out), Effect::None),
            }
        }
        opcode::LOAD_BOOT => {
            let r = LoadBoot::decode(p).and_then(|_| header.ok_or(Status::NoImage));
            match r {
                Err(s) => done(reply::<LoadBoot>(id, Err(s), out), Effect::None),
                Ok(h) => match check_in_ram(ram, &h) {
                    Ok(()) => {
                        store_header(ram, &h);
                        let len = reply::<LoadBoot>(id, Ok(&()), out);
                        Handled { len, action: Action::Boot(h.entry), effect: Effect::Booting }
                    }
                    Err(e) => done(reply::<LoadBoot>(id, Err(Status::BadImage), out), Effect::Refuse(e)),
                },
            }
        }
        unknown => done(encode_error(unknown, id, Status::UnknownOpcode, out).unwrap_or(0), Effect::None),
    }
}

/// Stores one chunk inside the accepted image; returns the bytes written.
fn write_chunk(header: Option<ImageHeader>, d: LoadData<'_>, ram: &mut impl Ram) -> Result<u32, Status> {
    let h = header.ok_or(Status::NoImage)?;
    if d.data.is_empty() {
        return Err(Status::BadLength);
    }
    if d.offset % 4 != 0 || d.data.len() % 4 != 0 {
        return Err(Status::Misaligned);
    }
    let end = u64::from(d.offset) + d.data.len() as u64;
    if end > u64::from(h.length) {
        return Err(Status::OutOfWindow);
    }
    for (i, w) in d.data.chunks_exact(4).enumerate() {
        let addr = h.load + d.offset + 4 * i as u32;
        // SAFETY: [load, load + length) was validated against IMAGE_WINDOW when the header was
        // accepted, and the chunk lies inside it; the loader's own stack is outside the window.
        unsafe { ram.write_word(addr, u32::from_le_bytes([w[0], w[1], w[2], w[3]])) };
    }
    Ok(d.data.len() as u32)
}

/// Writes the header to [`HEADER_ADDR`], so a later reset can check and boot the image again.
fn store_header(ram: &mut impl Ram, h: &ImageHeader) {
    for (i, w) in h.encode().chunks_exact(4).enumerate() {
        // SAFETY: the header slot is an aligned part of the scratch window.
        unsafe { ram.write_word(HEADER_ADDR + 4 * i as u32, u32::from_le_bytes([w[0], w[1], w[2], w[3]])) };
    }
}

fn reply<'a, C: Command<'a>>(req_id: u16, result: Result<&C::Response, Status>, out: &mut [u8]) -> usize {
    encode_response::<C>(req_id, result, out)
        .or_else(|status| encode_error(C::OPCODE, req_id, status, out))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
