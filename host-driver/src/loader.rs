//! Flashing over the host link, through the boot ROM's loader (`ws_common::boot`).
//!
//! This is the path for boards without a JTAG probe and the fast path in simulation:
//!
//! 1. Ask the board for `LoaderInfo`. The firmware does not know the command; if it answers
//!    `UnknownOpcode`, the firmware is running, so poke the stay-in-loader key into the
//!    boot-mode word and `Reset`: the boot ROM then serves the loader instead of rebooting
//!    the old image.
//! 2. `LoadBegin` with the image header. The boot ROM checks it before it takes any data.
//! 3. `LoadData` chunks, with progress.
//! 4. `LoadBoot`: the boot ROM checks the CRC of the whole image in RAM and only then jumps.
//! 5. Wait until the new firmware answers a ping.
//!
//! Every refusal is reported with the boot ROM's reason; a refused image leaves the board in
//! the loader, ready for another try.

use std::path::Path;
use std::time::{Duration, Instant};

use object::read::elf::{ElfFile32, ProgramHeader};
use object::{elf, Endianness};
use ws_common::boot::{ImageError, ImageHeader, BOOT_MODE_ADDR, IMAGE_WINDOW, STAY_IN_LOADER};
use ws_common::ctrl::cmd::{LoadBegin, LoadBoot, LoadData, LoaderInfo, LoaderState, MAX_LOAD_CHUNK};
use ws_common::ctrl::{Command, Status};

use crate::client::{Client, Request};
use crate::error::{Error, LoaderError, Result};

impl Request for LoaderInfo {
    const NAME: &'static str = "LoaderInfo";
    const OPCODE: u8 = <LoaderInfo as Command<'static>>::OPCODE;
    const IDEMPOTENT: bool = true;
    type Output = LoaderState;
    fn encode(&self, out: &mut [u8]) -> std::result::Result<usize, Status> {
        Command::encode(self, out)
    }
    fn decode_output(d: &[u8]) -> std::result::Result<LoaderState, Status> {
        <LoaderInfo as Command<'_>>::decode_response(d)
    }
}

impl Request for LoadBegin<'_> {
    const NAME: &'static str = "LoadBegin";
    const OPCODE: u8 = <LoadBegin<'static> as Command<'static>>::OPCODE;
    // Accepting the same header again restarts the same load.
    const IDEMPOTENT: bool = true;
    type Output = ();
    fn encode(&self, out: &mut [u8]) -> std::result::Result<usize, Status> {
        Command::encode(self, out)
    }
    fn decode_output(d: &[u8]) -> std::result::Result<(), Status> {
        <LoadBegin<'_> as Command<'_>>::decode_response(d)
    }
}

impl Request for LoadData<'_> {
    const NAME: &'static str = "LoadData";
    const OPCODE: u8 = <LoadData<'static> as Command<'static>>::OPCODE;
    // The same bytes written again.
    const IDEMPOTENT: bool = true;
    type Output = ();
    fn encode(&self, out: &mut [u8]) -> std::result::Result<usize, Status> {
        Command::encode(self, out)
    }
    fn decode_output(d: &[u8]) -> std::result::Result<(), Status> {
        <LoadData<'_> as Command<'_>>::decode_response(d)
    }
}

impl Request for LoadBoot {
    const NAME: &'static str = "LoadBoot";
    const OPCODE: u8 = <LoadBoot as Command<'static>>::OPCODE;
    // Once it answers, the loader is gone: a resend would reach the new firmware.
    const IDEMPOTENT: bool = false;
    type Output = ();
    fn encode(&self, out: &mut [u8]) -> std::result::Result<usize, Status> {
        Command::encode(self, out)
    }
    fn decode_output(d: &[u8]) -> std::result::Result<(), Status> {
        <LoadBoot as Command<'_>>::decode_response(d)
    }
}

/// A loadable segment of an ELF: its physical (load) address and file bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Load address.
    pub addr: u32,
    /// File-backed bytes.
    pub data: Vec<u8>,
    /// Bytes in memory (past `data`: zeroed by the firmware's start-up).
    pub mem_size: u32,
}

/// A firmware ELF as the boot ROM sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirmwareImage {
    /// Entry point.
    pub entry: u32,
    /// The `PT_LOAD` segments.
    pub segments: Vec<Segment>,
    /// The boot image: file-backed bytes from the lowest to the highest segment address,
    /// gaps zero-filled, padded to a whole word.
    pub bytes: Vec<u8>,
    /// Its header.
    pub header: ImageHeader,
}

impl FirmwareImage {
    /// Reads an ELF file.
    pub fn read(path: &Path) -> Result<Self> {
        let data = std::fs::read(path)
            .map_err(|source| LoaderError::ReadElf { path: path.to_path_buf(), source })?;
        Self::from_elf(&data, &path.display().to_string())
    }

    /// Parses a 32-bit RISC-V ELF and builds its boot image; `what` names it in errors.
    /// An image the boot ROM would refuse (outside its window, misaligned, entry outside) is
    /// refused here, before anything is sent.
    pub fn from_elf(data: &[u8], what: &str) -> Result<Self> {
        let bad = |why: String| Error::from(LoaderError::BadElf { what: what.into(), why });
        let file =
            ElfFile32::<Endianness>::parse(data).map_err(|e| bad(format!("not a 32-bit ELF ({e})")))?;
        let endian = file.endian();
        let hdr = file.elf_header();
        if hdr.e_machine.get(endian) != elf::EM_RISCV {
            return Err(bad("not a RISC-V ELF: build the firmware for riscv32imc-unknown-none-elf".into()));
        }
        let entry = hdr.e_entry.get(endian);
        let mut segments = Vec::new();
        for ph in file.elf_program_headers() {
            if ph.p_type(endian) != elf::PT_LOAD || ph.p_memsz(endian) == 0 {
                continue;
            }
            let bytes = ph.data(endian, data).map_err(|_| bad("a segment lies outside the file".into()))?;
            segments.push(Segment {
                addr: ph.p_paddr(endian),
                data: bytes.to_vec(),
                mem_size: ph.p_memsz(endian),
            });
        }
        let with_data = || segments.iter().filter(|s| !s.data.is_empty());
        let start =
            with_data().map(|s| s.addr).min().ok_or_else(|| bad("no loadable segment with data".into()))?;
        let end = with_data().map(|s| u64::from(s.addr) + s.data.len() as u64).max().unwrap_or(0);
        let (wbase, wlen) = IMAGE_WINDOW;
        let refuse = |why: ImageError| {
            Error::from(LoaderError::Refused {
                what: what.into(),
                why: format!(
                    "{} (image {start:#010x}..{end:#010x}, entry {entry:#010x}; the loader takes {wbase:#010x}..{:#010x})",
                    why.describe(),
                    u64::from(wbase) + u64::from(wlen)
                ),
            })
        };
        if end - u64::from(start) > u64::from(wlen) {
            return Err(refuse(ImageError::OutOfWindow));
        }
        let mut bytes = vec![0u8; ((end - u64::from(start)) as usize).div_ceil(4) * 4];
        for s in with_data() {
            let off = (s.addr - start) as usize;
            bytes[off..off + s.data.len()].copy_from_slice(&s.data);
        }
        let header = ImageHeader::for_image(start, entry, &bytes);
        header.validate().map_err(refuse)?;
        // Every segment, .bss included, must land in RAM the firmware may use.
        for s in &segments {
            let s_end = u64::from(s.addr) + u64::from(s.mem_size);
            let ram_end = u64::from(ws_common::boot::SCRATCH_BASE);
            if s.addr < wbase || s_end > ram_end {
                return Err(refuse(ImageError::OutOfWindow));
            }
        }
        Ok(FirmwareImage { entry, segments, bytes, header })
    }
}

/// What a link flash did.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadReport {
    /// Image bytes sent.
    pub bytes: usize,
    /// `LoadData` frames sent.
    pub chunks: usize,
    /// True when a running firmware was sent back to the loader first.
    pub reset_into_loader: bool,
    /// Time from the first `LoadData` to the `LoadBoot` answer.
    pub transfer: Duration,
    /// Time until the new firmware answered its first ping.
    pub total: Duration,
}

impl LoadReport {
    /// Image bytes per second of the transfer.
    pub fn bytes_per_second(&self) -> f64 {
        self.bytes as f64 / self.transfer.as_secs_f64().max(1e-9)
    }
}

/// Progress of a link flash, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The firmware was running; it was asked to reset into the loader.
    ResettingIntoLoader,
    /// The loader accepted the header of an image this long.
    Started {
        /// Image bytes.
        total: usize,
    },
    /// This many image bytes have been accepted.
    Sent {
        /// Bytes so far.
        done: usize,
    },
    /// The image checked out and the board jumped to it; waiting for the firmware.
    Booting,
}

/// How long the boot ROM may take to come up after a reset, and the new firmware after a
/// boot. Both are bounded by cycles of CRC and start-up, far below these in any simulator.
pub const LOADER_WAIT: Duration = Duration::from_secs(30);

/// Flashes `image` through the boot ROM's loader and waits until the new firmware answers.
pub fn flash_via_link(
    client: &mut Client,
    image: &FirmwareImage,
    progress: &mut dyn FnMut(Progress),
) -> Result<LoadReport> {
    let t0 = Instant::now();
    let reset_into_loader = enter_loader(client, progress)?;

    let header = image.header.encode();
    if let Err(e) = client.request(&LoadBegin { header: &header }) {
        return Err(explain(client, "LoadBegin", e));
    }
    progress(Progress::Started { total: image.bytes.len() });
    let t1 = Instant::now();
    let mut chunks = 0;
    for (i, chunk) in image.bytes.chunks(MAX_LOAD_CHUNK).enumerate() {
        let offset = (i * MAX_LOAD_CHUNK) as u32;
        client.request(&LoadData { offset, data: chunk }).map_err(|e| explain(client, "LoadData", e))?;
        chunks += 1;
        progress(Progress::Sent { done: (i * MAX_LOAD_CHUNK + chunk.len()).min(image.bytes.len()) });
    }
    if let Err(e) = client.request(&LoadBoot) {
        return Err(explain(client, "LoadBoot", e));
    }
    let transfer = t1.elapsed();
    progress(Progress::Booting);
    wait_for(client, LOADER_WAIT, "the new firmware to answer a ping", |c| c.ping(0x0b00_7ed0).map(|_| ()))?;
    Ok(LoadReport { bytes: image.bytes.len(), chunks, reset_into_loader, transfer, total: t0.elapsed() })
}

/// Makes sure the boot ROM's loader is what answers; returns true if the firmware had to be
/// reset into it.
pub fn enter_loader(client: &mut Client, progress: &mut dyn FnMut(Progress)) -> Result<bool> {
    match client.request(&LoaderInfo) {
        Ok(_) => return Ok(false),
        Err(e) if e.refusal() == Some(Status::UnknownOpcode) => {}
        Err(e) => return Err(e),
    }
    progress(Progress::ResettingIntoLoader);
    client.poke(BOOT_MODE_ADDR, &STAY_IN_LOADER.to_le_bytes())?;
    client.reset()?;
    wait_for(client, LOADER_WAIT, "the boot ROM's loader to answer after the reset", |c| {
        c.request(&LoaderInfo).map(|_| ())
    })?;
    Ok(true)
}

/// The loader's state, or `None` when the firmware (not the loader) answers.
pub fn loader_state(client: &mut Client) -> Result<Option<LoaderState>> {
    match client.request(&LoaderInfo) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.refusal() == Some(Status::UnknownOpcode) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Retries `f` (each try bounded by the client's timeout) until it succeeds or `limit` passes.
fn wait_for(
    client: &mut Client,
    limit: Duration,
    what: &'static str,
    mut f: impl FnMut(&mut Client) -> Result<()>,
) -> Result<()> {
    // In board time on the simulator (`crate::board_time`): the loader's CRC and the
    // firmware's start-up are cycles of work.
    let deadline = crate::board_time::Deadline::new(limit, client.board_clock());
    let saved = client.timeout();
    client.set_timeout(saved.min(Duration::from_millis(500)));
    let result = loop {
        match f(client) {
            Ok(()) => break Ok(()),
            Err(e) if !deadline.expired() && (e.is_timeout() || e.refusal().is_some()) => {
                // A stale answer of the old side, or nothing yet: drop what is queued, retry.
                let _ = client.drain(Duration::from_millis(20));
            }
            Err(e) if e.is_timeout() => break Err(LoaderError::NoAnswer { what, waited: limit }.into()),
            Err(e) => break Err(e),
        }
    };
    client.set_timeout(saved);
    result
}

/// Turns a `BadImage` refusal into the loader's reason.
fn explain(client: &mut Client, step: &'static str, e: Error) -> Error {
    if e.refusal() != Some(Status::BadImage) {
        return e;
    }
    let why = match client.request(&LoaderInfo) {
        Ok(s) => ImageError::from_code(s.last_error)
            .map_or_else(|| format!("reason code {}", s.last_error), |r| r.describe().to_string()),
        Err(_) => "the loader did not say why".to_string(),
    };
    LoaderError::Refused { what: format!("{step} of the image"), why }.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal RV32 ELF with one PT_LOAD segment per `(paddr, bytes, memsz)`.
    fn elf(entry: u32, segs: &[(u32, &[u8], u32)]) -> Vec<u8> {
        let mut out = vec![0x7f, b'E', b'L', b'F', 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let phoff = 52u32;
        let data_start = 52 + 32 * segs.len() as u32;
        let half = |v: u16, o: &mut Vec<u8>| o.extend_from_slice(&v.to_le_bytes());
        let word = |v: u32, o: &mut Vec<u8>| o.extend_from_slice(&v.to_le_bytes());
        half(2, &mut out); // ET_EXEC
        half(243, &mut out); // EM_RISCV
        word(1, &mut out);
        word(entry, &mut out);
        word(phoff, &mut out);
        word(0, &mut out); // shoff
        word(0, &mut out); // flags
        half(52, &mut out);
        half(32, &mut out);
        half(segs.len() as u16, &mut out);
        half(40, &mut out);
        half(0, &mut out);
        half(0, &mut out);
        let mut off = data_start;
        for (addr, bytes, memsz) in segs {
            word(1, &mut out); // PT_LOAD
            word(off, &mut out);
            word(*addr, &mut out);
            word(*addr, &mut out);
            word(bytes.len() as u32, &mut out);
            word(*memsz, &mut out);
            word(5, &mut out);
            word(4, &mut out);
            off += bytes.len() as u32;
        }
        for (_, bytes, _) in segs {
            out.extend_from_slice(bytes);
        }
        out
    }

    #[test]
    fn image_spans_the_file_backed_segments() {
        let base = ws_common::regmap::map::RAM_BASE;
        let e =
            elf(base, &[(base, &[1, 2, 3, 4, 5, 6], 6), (base + 16, &[9; 4], 4), (base + 0x2_0000, &[], 64)]);
        let img = FirmwareImage::from_elf(&e, "test").unwrap();
        assert_eq!(img.bytes, [1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9]);
        assert_eq!((img.header.load, img.header.length, img.header.entry), (base, 20, base));
        assert_eq!(img.header.check_image(&img.bytes), Ok(()));
    }

    #[test]
    fn images_the_boot_rom_would_refuse_are_refused_first() {
        let base = ws_common::regmap::map::RAM_BASE;
        let err = |e: Vec<u8>| FirmwareImage::from_elf(&e, "test").unwrap_err().to_string();
        assert!(err(elf(base, &[(0x2000_0000, &[0; 8], 8)])).contains("does not fit"));
        assert!(err(elf(base + 64, &[(base, &[0; 8], 8)])).contains("entry point"));
        assert!(err(elf(base, &[(base, &[0; 8], 8), (ws_common::boot::SCRATCH_BASE, &[], 4)]))
            .contains("does not fit"));
        assert!(err(vec![0; 10]).contains("not a 32-bit ELF"));
        assert!(err(elf(base, &[(base, &[], 8)])).contains("no loadable segment"));
    }
}
