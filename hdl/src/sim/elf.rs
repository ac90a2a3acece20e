//! Firmware images: reading the `PT_LOAD` segments of a RISC-V ELF, checking them against the
//! RAM region, and writing a minimal ELF (for tests that hand-assemble a program).

use std::path::{Path, PathBuf};

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};

use ws_common::boot::{ImageError, ImageHeader};

use super::soc::{Soc, SocError};

/// Why a firmware image was refused.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    /// The file cannot be read.
    #[error("cannot read firmware ELF {path}: {source}; build the firmware (`cargo xtask build`) or pass the right --elf")]
    Read {
        /// The file.
        path: PathBuf,
        /// I/O error.
        source: std::io::Error,
    },
    /// Not a 32-bit little-endian RISC-V ELF.
    #[error(
        "{0}: not a 32-bit little-endian RISC-V ELF; build the firmware for riscv32imc-unknown-none-elf"
    )]
    NotRiscv32(String),
    /// The ELF is malformed.
    #[error("{what}: malformed ELF ({msg})")]
    Malformed {
        /// File or "image".
        what: String,
        /// Parser message.
        msg: String,
    },
    /// A segment is outside RAM.
    #[error("{what}: segment at {addr:#010x}..{end:#010x} lies outside RAM {base:#010x}..{ram_end:#010x}; fix the firmware's memory.x (RAM at {base:#010x}, {size} bytes)")]
    OutsideRam {
        /// File or "image".
        what: String,
        /// Segment start.
        addr: u64,
        /// Segment end.
        end: u64,
        /// RAM base.
        base: u32,
        /// RAM end.
        ram_end: u64,
        /// RAM size.
        size: u32,
    },
    /// The entry point is not the RAM base.
    #[error("{what}: entry point {entry:#010x} is not the RAM base {base:#010x}; the boot ROM jumps to the RAM base, so `_start` must sit there (docs/soc.md)")]
    Entry {
        /// File or "image".
        what: String,
        /// Entry point.
        entry: u64,
        /// RAM base.
        base: u32,
    },
    /// The image breaks a rule of the boot ROM's image format.
    #[error("{what}: the boot ROM would refuse it: {}; keep the firmware's file-backed sections inside {:#010x}..{:#010x} (ws_common::boot, firmware/memory.x)", why.describe(), ws_common::boot::IMAGE_WINDOW.0, ws_common::boot::IMAGE_WINDOW.0 + ws_common::boot::IMAGE_WINDOW.1)]
    BootImage {
        /// File or "image".
        what: String,
        /// The rule broken.
        why: ws_common::boot::ImageError,
    },
    /// Nothing to load.
    #[error("{0}: no PT_LOAD segment with data")]
    Empty(String),
    /// Loading into the model failed.
    #[error(transparent)]
    Soc(#[from] SocError),
}

/// One loadable segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Load (physical) address.
    pub addr: u32,
    /// File contents.
    pub data: Vec<u8>,
    /// Size in memory; bytes past `data` are zero (`.bss`).
    pub mem_size: u32,
}

/// A firmware image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Where it came from, for messages.
    pub what: String,
    /// Entry point.
    pub entry: u32,
    /// Loadable segments.
    pub segments: Vec<Segment>,
}

impl Image {
    /// Reads an ELF file.
    pub fn read(path: &Path) -> Result<Image, ElfError> {
        let data =
            std::fs::read(path).map_err(|source| ElfError::Read { path: path.to_path_buf(), source })?;
        Self::parse(&data, &path.display().to_string())
    }

    /// Parses ELF bytes; `what` names the image in errors.
    pub fn parse(data: &[u8], what: &str) -> Result<Image, ElfError> {
        let malformed =
            |e: object::read::Error| ElfError::Malformed { what: what.to_string(), msg: e.to_string() };
        let hdr = elf::FileHeader32::<object::Endianness>::parse(data)
            .map_err(|_| ElfError::NotRiscv32(what.to_string()))?;
        let endian = hdr.endian().map_err(malformed)?;
        if !hdr.is_little_endian() || hdr.e_machine(endian) != elf::EM_RISCV {
            return Err(ElfError::NotRiscv32(what.to_string()));
        }
        let mut segments = Vec::new();
        for ph in hdr.program_headers(endian, data).map_err(malformed)? {
            if ph.p_type(endian) != elf::PT_LOAD || ph.p_memsz(endian) == 0 {
                continue;
            }
            let bytes = ph.data(endian, data).map_err(|()| ElfError::Malformed {
                what: what.to_string(),
                msg: "segment data outside the file".into(),
            })?;
            segments.push(Segment {
                addr: ph.p_paddr(endian),
                data: bytes.to_vec(),
                mem_size: ph.p_memsz(endian),
            });
        }
        if segments.is_empty() {
            return Err(ElfError::Empty(what.to_string()));
        }
        Ok(Image { what: what.to_string(), entry: hdr.e_entry(endian), segments })
    }

    /// Checks that every segment lies in RAM and the entry point is the RAM base.
    pub fn validate(&self, ram_base: u32, ram_size: u32) -> Result<(), ElfError> {
        let ram_end = u64::from(ram_base) + u64::from(ram_size);
        for s in &self.segments {
            let start = u64::from(s.addr);
            let end = start + u64::from(s.mem_size.max(s.data.len() as u32));
            if start < u64::from(ram_base) || end > ram_end {
                return Err(ElfError::OutsideRam {
                    what: self.what.clone(),
                    addr: start,
                    end,
                    base: ram_base,
                    ram_end,
                    size: ram_size,
                });
            }
        }
        if self.entry != ram_base {
            return Err(ElfError::Entry {
                what: self.what.clone(),
                entry: u64::from(self.entry),
                base: ram_base,
            });
        }
        Ok(())
    }

    /// The boot image of this ELF (`ws_common::boot`): the file-backed bytes of its loadable
    /// segments from the lowest to the highest address, gaps zero-filled, padded to a whole
    /// word, and the header the boot ROM checks before it jumps to the entry point.
    pub fn boot_image(&self) -> Result<(ImageHeader, Vec<u8>), ElfError> {
        let with_data = || self.segments.iter().filter(|s| !s.data.is_empty());
        let start = with_data().map(|s| s.addr).min().ok_or_else(|| ElfError::Empty(self.what.clone()))?;
        let end = with_data().map(|s| u64::from(s.addr) + s.data.len() as u64).max().unwrap_or(0);
        let bad = |why| ElfError::BootImage { what: self.what.clone(), why };
        let len = usize::try_from(end - u64::from(start)).map_err(|_| bad(ImageError::OutOfWindow))?;
        if len > ws_common::boot::IMAGE_WINDOW.1 as usize {
            return Err(bad(ImageError::OutOfWindow));
        }
        let mut bytes = vec![0u8; len.div_ceil(4) * 4];
        for s in with_data() {
            let off = (s.addr - start) as usize;
            bytes[off..off + s.data.len()].copy_from_slice(&s.data);
        }
        let header = ImageHeader::for_image(start, self.entry, &bytes);
        header.validate().map_err(bad)?;
        Ok((header, bytes))
    }

    /// Validates and writes the image into the SoC's RAM by backdoor, `.bss` zeroed, and its
    /// boot header at `ws_common::boot::HEADER_ADDR`, so the boot ROM checks and boots it as
    /// it would an image the link loader received.
    pub fn load(&self, soc: &mut Soc, ram_base: u32) -> Result<(), ElfError> {
        let ram_size = soc.ram_words().saturating_mul(4);
        if ram_size == 0 {
            return Err(SocError::NoBackdoor.into());
        }
        self.validate(ram_base, ram_size)?;
        for s in &self.segments {
            let off = s.addr - ram_base;
            soc.ram_write_bytes(off, &s.data)?;
            let bss = (s.mem_size as usize).saturating_sub(s.data.len());
            if bss > 0 {
                soc.ram_write_bytes(off + s.data.len() as u32, &vec![0u8; bss])?;
            }
        }
        let (header, _) = self.boot_image()?;
        soc.ram_write_bytes(ws_common::boot::HEADER_ADDR - ram_base, &header.encode())?;
        Ok(())
    }
}

/// Writes a minimal little-endian RV32 executable: one `PT_LOAD` segment per `(addr, bytes)`,
/// no sections. Enough for [`Image::parse`], `ws-sim --elf` and objdump-free tests.
pub fn write_elf32(entry: u32, segments: &[(u32, &[u8])]) -> Vec<u8> {
    const EH: usize = 52;
    const PH: usize = 32;
    let mut out = Vec::new();
    let data_start = EH + PH * segments.len();
    // e_ident: magic, ELFCLASS32, ELFDATA2LSB, EV_CURRENT, System V ABI.
    out.extend_from_slice(&[0x7f, b'E', b'L', b'F', 1, 1, 1, 0]);
    out.extend_from_slice(&[0; 8]);
    let push16 = |o: &mut Vec<u8>, v: u16| o.extend_from_slice(&v.to_le_bytes());
    let push32 = |o: &mut Vec<u8>, v: u32| o.extend_from_slice(&v.to_le_bytes());
    push16(&mut out, 2); // ET_EXEC
    push16(&mut out, 243); // EM_RISCV
    push32(&mut out, 1); // EV_CURRENT
    push32(&mut out, entry);
    push32(&mut out, EH as u32); // e_phoff
    push32(&mut out, 0); // e_shoff
    push32(&mut out, 0x0001); // e_flags: RVC
    push16(&mut out, EH as u16);
    push16(&mut out, PH as u16);
    push16(&mut out, segments.len() as u16);
    push16(&mut out, 40); // e_shentsize
    push16(&mut out, 0); // e_shnum
    push16(&mut out, 0); // e_shstrndx
    let mut offset = data_start;
    for (addr, bytes) in segments {
        push32(&mut out, 1); // PT_LOAD
        push32(&mut out, offset as u32);
        push32(&mut out, *addr); // p_vaddr
        push32(&mut out, *addr); // p_paddr
        push32(&mut out, bytes.len() as u32);
        push32(&mut out, bytes.len() as u32);
        push32(&mut out, 0x7); // RWX
        push32(&mut out, 4);
        offset += bytes.len();
    }
    for (_, bytes) in segments {
        out.extend_from_slice(bytes);
    }
    out
}

/// Little-endian bytes of 32-bit instruction words.
pub fn words_to_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAM: u32 = 0x1000_0000;

    #[test]
    fn round_trips_a_minimal_elf() {
        let code = words_to_bytes(&[0x0000_006f]);
        let elf = write_elf32(RAM, &[(RAM, &code), (RAM + 0x100, &[1, 2, 3])]);
        let img = Image::parse(&elf, "test").unwrap();
        assert_eq!(img.entry, RAM);
        assert_eq!(img.segments.len(), 2);
        assert_eq!(img.segments[0].data, code);
        assert_eq!(img.segments[1].addr, RAM + 0x100);
        img.validate(RAM, 0x4_0000).unwrap();
    }

    #[test]
    fn rejects_segments_outside_ram_and_a_wrong_entry() {
        let elf = write_elf32(RAM, &[(RAM + 0x3_fffe, &[0; 4])]);
        let e = Image::parse(&elf, "fw").unwrap().validate(RAM, 0x4_0000).unwrap_err();
        assert!(e.to_string().contains("outside RAM"), "{e}");
        let elf = write_elf32(RAM + 4, &[(RAM, &[0; 4])]);
        let e = Image::parse(&elf, "fw").unwrap().validate(RAM, 0x4_0000).unwrap_err();
        assert!(e.to_string().contains("entry point 0x10000004"), "{e}");
        let e = Image::parse(b"not an elf at all, really not", "junk").unwrap_err();
        assert!(matches!(e, ElfError::NotRiscv32(_)), "{e}");
    }
}
