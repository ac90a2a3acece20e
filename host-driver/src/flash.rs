//! Flashing a firmware ELF into the board's RAM over JTAG (docs/jtag.md, "Flashing").
//!
//! The sequence, each step failing with its name:
//! 1. parse the ELF and check every PT_LOAD segment against the target description's RAM,
//!    **before** anything touches the board;
//! 2. reset the SoC through the debug module and halt the hart at the reset vector
//!    (`dmcontrol.ndmreset` + `haltreq`, RISC-V Debug 0.13.2 §3.2), so no old firmware runs
//!    while its RAM is rewritten;
//! 3. write each segment's file bytes at its physical (load) address, in chunks, through the
//!    DM: probe-rs uses system-bus access (§3.10) on riscv-dbg, or the program buffer where a
//!    DM has no SBA. The bytes are sent as whole aligned words: riscv-dbg's SBA does 32-bit
//!    accesses only (`sbcs.sbaccess8/16` = 0), so probe-rs would write a segment's unaligned
//!    edge bytes one by one through the program buffer, far slower and (when TCK is fast
//!    against the core clock) not checked between batched commands. An edge word's bytes
//!    that no segment loads are read from the board first and written back unchanged;
//! 4. read everything back and compare;
//! 5. set `dpc` to the entry point and resume.
//!
//! A firmware image the boot ROM accepts (`ws_common::boot`, as [`crate::loader`] builds it)
//! is written as the boot ROM sees it, one contiguous run with the gaps between segments
//! zeroed, followed by its boot header at `HEADER_ADDR`: the boot ROM then reboots the
//! flashed firmware after any later reset, exactly as if the link loader had loaded it.
//! Other ELFs (test programs) are written segment by segment and run until the next reset.
//!
//! Zero-filling `.bss` is left to the firmware's start-up code, which does it anyway; only
//! file-backed bytes cross the wire.

use std::ops::Range;
use std::path::Path;
use std::time::{Duration, Instant};

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, Sym};

use crate::error::{FlashError, Result};
use crate::jtag::{Debugger, TargetDescription};

/// Bytes per write or read-back request: small enough for a smooth progress bar and a prompt
/// failure, large enough that probe-rs batches each into a few exchanges.
pub const CHUNK: usize = 4096;

/// One PT_LOAD segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadSegment {
    /// Physical (load) address: where the bytes are written.
    pub paddr: u32,
    /// Virtual (run-time) address.
    pub vaddr: u32,
    /// Size at run time (`p_memsz`, `.bss` included).
    pub mem_size: u32,
    /// The file bytes (`p_filesz`).
    pub data: Vec<u8>,
}

/// The loadable part of an ELF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfImage {
    /// The file, for messages.
    pub what: String,
    /// Entry point.
    pub entry: u32,
    /// PT_LOAD segments with a non-zero run-time size.
    pub segments: Vec<LoadSegment>,
    /// The boot ROM's view of it, or why the boot ROM would refuse it.
    pub boot: Result<BootImage, String>,
}

/// A firmware image in the boot ROM's format (`ws_common::boot`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootImage {
    /// Where its first byte goes.
    pub load: u32,
    /// The image: file-backed bytes, gaps zeroed, whole words.
    pub bytes: Vec<u8>,
    /// Its header, as it sits at [`ws_common::boot::HEADER_ADDR`].
    pub header: [u8; ws_common::boot::HEADER_LEN],
}

/// A symbol of the ELF's symbol table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Its (mangled) name.
    pub name: String,
    /// Address.
    pub addr: u32,
    /// Size in bytes.
    pub size: u32,
}

impl ElfImage {
    /// Reads an ELF file.
    pub fn read(path: &Path) -> Result<ElfImage> {
        let data =
            std::fs::read(path).map_err(|source| FlashError::ReadElf { path: path.to_path_buf(), source })?;
        Self::parse(&data, &path.display().to_string())
    }

    /// Parses ELF bytes; `what` names them in errors.
    pub fn parse(data: &[u8], what: &str) -> Result<ElfImage> {
        let bad = |reason: String| FlashError::BadElf { what: what.to_string(), reason };
        let hdr = elf::FileHeader32::<object::Endianness>::parse(data)
            .map_err(|e| bad(format!("no 32-bit ELF header: {e}")))?;
        let endian = hdr.endian().map_err(|e| bad(e.to_string()))?;
        if hdr.e_machine(endian) != elf::EM_RISCV || !hdr.is_little_endian() {
            return Err(bad(format!("machine {} is not little-endian RISC-V", hdr.e_machine(endian))).into());
        }
        let mut segments = Vec::new();
        for ph in hdr.program_headers(endian, data).map_err(|e| bad(e.to_string()))? {
            if ph.p_type(endian) != elf::PT_LOAD || ph.p_memsz(endian) == 0 {
                continue;
            }
            let bytes =
                ph.data(endian, data).map_err(|()| bad("a segment's data lies outside the file".into()))?;
            segments.push(LoadSegment {
                paddr: ph.p_paddr(endian),
                vaddr: ph.p_vaddr(endian),
                mem_size: ph.p_memsz(endian),
                data: bytes.to_vec(),
            });
        }
        if segments.iter().all(|s| s.data.is_empty()) {
            return Err(FlashError::Empty { what: what.to_string() }.into());
        }
        let boot = crate::loader::FirmwareImage::from_elf(data, what)
            .map(|f| BootImage { load: f.header.load, bytes: f.bytes, header: f.header.encode() })
            .map_err(|e| e.to_string());
        Ok(ElfImage { what: what.to_string(), entry: hdr.e_entry(endian), segments, boot })
    }

    /// File bytes to write.
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.data.len() as u64).sum()
    }

    /// Checks that every segment's load range (written) and run-time range (with `.bss`) lie
    /// inside one RAM region of `target`.
    pub fn check_ram(&self, target: &TargetDescription) -> Result<()> {
        let ram = || {
            target
                .ram
                .iter()
                .map(|r| format!("{:#010x}..{:#010x}", r.start, r.end))
                .collect::<Vec<_>>()
                .join(", ")
        };
        for s in &self.segments {
            let load = u64::from(s.paddr)..u64::from(s.paddr) + s.data.len() as u64;
            let run = u64::from(s.vaddr)..u64::from(s.vaddr) + u64::from(s.mem_size);
            for (kind, range) in [("load range", load), ("run-time range", run)] {
                if range.is_empty() {
                    continue;
                }
                if !target.in_ram(&range) {
                    return Err(FlashError::OutsideRam {
                        what: self.what.clone(),
                        kind,
                        start: range.start,
                        end: range.end,
                        ram: ram(),
                    }
                    .into());
                }
            }
        }
        Ok(())
    }
}

/// The symbols of an ELF whose name contains `needle`.
pub fn find_symbols(data: &[u8], needle: &str) -> Result<Vec<Symbol>> {
    let bad = |reason: String| FlashError::BadElf { what: "ELF".into(), reason };
    let hdr = elf::FileHeader32::<object::Endianness>::parse(data).map_err(|e| bad(e.to_string()))?;
    let endian = hdr.endian().map_err(|e| bad(e.to_string()))?;
    let sections = hdr.sections(endian, data).map_err(|e| bad(e.to_string()))?;
    let symbols = sections.symbols(endian, data, elf::SHT_SYMTAB).map_err(|e| bad(e.to_string()))?;
    let mut out = Vec::new();
    for sym in symbols.iter() {
        let Ok(name) = sym.name(endian, symbols.strings()) else { continue };
        let name = String::from_utf8_lossy(name);
        if name.contains(needle) {
            out.push(Symbol {
                name: name.into_owned(),
                addr: sym.st_value(endian),
                size: sym.st_size(endian),
            });
        }
    }
    Ok(out)
}

/// A run of whole words to write: the image's bytes merged, in address order.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    /// Word-aligned start.
    addr: u64,
    /// A multiple of 4 bytes.
    data: Vec<u8>,
    /// Which bytes the image loads; the others are the board's, read before writing.
    known: Vec<bool>,
}

/// What to write: a boot image and then its header, or else the segments' bytes as runs of
/// consecutive aligned words.
fn runs(image: &ElfImage) -> Vec<Run> {
    if let Ok(b) = &image.boot {
        let run = |addr: u32, data: &[u8]| Run {
            addr: u64::from(addr),
            data: data.to_vec(),
            known: vec![true; data.len()],
        };
        return vec![run(b.load, &b.bytes), run(ws_common::boot::HEADER_ADDR, &b.header)];
    }
    segment_runs(image)
}

/// The segments' file bytes as runs of consecutive aligned words.
fn segment_runs(image: &ElfImage) -> Vec<Run> {
    let mut words: std::collections::BTreeMap<u64, ([u8; 4], [bool; 4])> = Default::default();
    for seg in &image.segments {
        for (i, &b) in seg.data.iter().enumerate() {
            let a = u64::from(seg.paddr) + i as u64;
            let w = words.entry(a & !3).or_default();
            w.0[(a & 3) as usize] = b;
            w.1[(a & 3) as usize] = true;
        }
    }
    let mut out: Vec<Run> = Vec::new();
    for (addr, (bytes, known)) in words {
        match out.last_mut() {
            Some(r) if r.addr + r.data.len() as u64 == addr => {
                r.data.extend_from_slice(&bytes);
                r.known.extend_from_slice(&known);
            }
            _ => out.push(Run { addr, data: bytes.to_vec(), known: known.to_vec() }),
        }
    }
    out
}

/// Fills the bytes of `run` the image does not load with what the board holds there.
fn fill_unknown(dbg: &mut Debugger, run: &mut Run) -> Result<()> {
    for w in 0..run.data.len() / 4 {
        let at = w * 4;
        if run.known[at..at + 4].iter().all(|&k| k) {
            continue;
        }
        let have = dbg.read(run.addr + at as u64, 4)?;
        for (i, b) in have.into_iter().enumerate() {
            if !run.known[at + i] {
                run.data[at + i] = b;
            }
        }
    }
    Ok(())
}

/// Where a flash is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlashStep {
    /// Resetting and halting the hart.
    Halting,
    /// `done` of `total` bytes written.
    Writing {
        /// Bytes written.
        done: u64,
        /// Bytes to write.
        total: u64,
    },
    /// `done` of `total` bytes read back and compared.
    Verifying {
        /// Bytes compared.
        done: u64,
        /// Bytes to compare.
        total: u64,
    },
    /// Setting the PC and resuming.
    Starting,
}

/// What a flash did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlashReport {
    /// File bytes written (and verified).
    pub bytes: u64,
    /// Bytes sent: the file bytes rounded out to whole words (the boot image and its header
    /// for a boot-ROM image).
    pub written: u64,
    /// The boot header was written: the boot ROM reboots this image after a reset.
    pub boot_header: bool,
    /// The entry point the hart was started at.
    pub entry: u32,
    /// Time spent writing.
    pub write: Duration,
    /// Time spent reading back.
    pub verify: Duration,
    /// The whole flash, reset to resume.
    pub total: Duration,
}

impl FlashReport {
    /// Write throughput in bytes per second (bytes sent over write time).
    pub fn write_bytes_per_s(&self) -> f64 {
        self.written as f64 / self.write.as_secs_f64().max(1e-9)
    }
}

/// Flashes `image` through `dbg` and starts it; `progress` sees each step. The RAM check
/// comes first, so an image that does not fit changes nothing on the board.
pub fn flash_elf(
    dbg: &mut Debugger,
    image: &ElfImage,
    progress: &mut dyn FnMut(FlashStep),
) -> Result<FlashReport> {
    image.check_ram(dbg.target())?;
    let start = Instant::now();
    progress(FlashStep::Halting);
    dbg.reset_and_halt()?;

    let mut runs = runs(image);
    for r in &mut runs {
        fill_unknown(dbg, r)?;
    }
    let total: u64 = runs.iter().map(|r| r.data.len() as u64).sum();
    let t0 = Instant::now();
    let mut done = 0;
    progress(FlashStep::Writing { done, total });
    for (addr, chunk, _) in chunks(&runs) {
        dbg.write(addr, chunk)?;
        done += chunk.len() as u64;
        progress(FlashStep::Writing { done, total });
    }
    let write = t0.elapsed();

    let t1 = Instant::now();
    done = 0;
    progress(FlashStep::Verifying { done, total });
    for (addr, chunk, known) in chunks(&runs) {
        let got = dbg.read(addr, chunk.len())?;
        if let Some(i) = (0..chunk.len()).find(|&i| known[i] && got[i] != chunk[i]) {
            return Err(FlashError::Verify { addr: addr + i as u64, want: chunk[i], got: got[i] }.into());
        }
        done += chunk.len() as u64;
        progress(FlashStep::Verifying { done, total });
    }
    let verify = t1.elapsed();

    progress(FlashStep::Starting);
    dbg.set_pc(image.entry)?;
    dbg.resume()?;
    Ok(FlashReport {
        bytes: image.bytes(),
        written: total,
        boot_header: image.boot.is_ok(),
        entry: image.entry,
        write,
        verify,
        total: start.elapsed(),
    })
}

/// Every run in [`CHUNK`]-sized pieces (whole words), with their address and known-byte mask.
fn chunks(runs: &[Run]) -> impl Iterator<Item = (u64, &[u8], &[bool])> {
    runs.iter().flat_map(|r| {
        r.data
            .chunks(CHUNK)
            .zip(r.known.chunks(CHUNK))
            .enumerate()
            .map(move |(i, (c, k))| (r.addr + (i * CHUNK) as u64, c, k))
    })
}

/// The RAM ranges an image writes, for messages and tests.
pub fn load_ranges(image: &ElfImage) -> Vec<Range<u64>> {
    image
        .segments
        .iter()
        .filter(|s| !s.data.is_empty())
        .map(|s| u64::from(s.paddr)..u64::from(s.paddr) + s.data.len() as u64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::Board;

    /// A minimal RV32 ELF with the given PT_LOAD segments (paddr, vaddr, data, memsz).
    fn elf(entry: u32, segs: &[(u32, u32, &[u8], u32)]) -> Vec<u8> {
        let ph_off = 52u32;
        let data_off = ph_off + 32 * segs.len() as u32;
        let mut out = Vec::new();
        out.extend_from_slice(&[0x7f, b'E', b'L', b'F', 1, 1, 1, 0]);
        out.extend_from_slice(&[0; 8]);
        let p16 = |o: &mut Vec<u8>, v: u16| o.extend_from_slice(&v.to_le_bytes());
        let p32 = |o: &mut Vec<u8>, v: u32| o.extend_from_slice(&v.to_le_bytes());
        p16(&mut out, 2); // ET_EXEC
        p16(&mut out, 243); // EM_RISCV
        p32(&mut out, 1);
        p32(&mut out, entry);
        p32(&mut out, ph_off);
        p32(&mut out, 0); // e_shoff
        p32(&mut out, 0); // e_flags
        p16(&mut out, 52);
        p16(&mut out, 32);
        p16(&mut out, segs.len() as u16);
        p16(&mut out, 40);
        p16(&mut out, 0);
        p16(&mut out, 0);
        let mut off = data_off;
        for (paddr, vaddr, data, memsz) in segs {
            p32(&mut out, 1); // PT_LOAD
            p32(&mut out, off);
            p32(&mut out, *vaddr);
            p32(&mut out, *paddr);
            p32(&mut out, data.len() as u32);
            p32(&mut out, *memsz);
            p32(&mut out, 7);
            p32(&mut out, 4);
            off += data.len() as u32;
        }
        for (_, _, data, _) in segs {
            out.extend_from_slice(data);
        }
        out
    }

    fn target() -> TargetDescription {
        let b = Board::load(crate::workspace::root().join("boards/sim").to_str().unwrap()).unwrap();
        TargetDescription::for_board(&b).unwrap()
    }

    #[test]
    fn segments_load_at_their_physical_address_and_fit_the_ram() {
        let img = ElfImage::parse(
            &elf(
                0x1000_0000,
                &[(0x1000_0000, 0x1000_0000, &[1, 2, 3, 4], 4), (0x1000_0004, 0x1002_0000, &[5], 8)],
            ),
            "t",
        )
        .unwrap();
        assert_eq!(img.bytes(), 5);
        assert_eq!(img.segments[1].paddr, 0x1000_0004);
        assert_eq!(load_ranges(&img), vec![0x1000_0000..0x1000_0004, 0x1000_0004..0x1000_0005]);
        img.check_ram(&target()).unwrap();
        // Merged into whole words; the three bytes after the last are the board's.
        let r = segment_runs(&img);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].addr, r[0].data.len()), (0x1000_0000, 8));
        assert_eq!(&r[0].data[..5], &[1, 2, 3, 4, 5]);
        assert_eq!(r[0].known, [true, true, true, true, true, false, false, false]);
    }

    #[test]
    fn unaligned_segments_become_word_runs_split_at_gaps_and_chunks() {
        let big = vec![7u8; CHUNK + 6];
        let img = ElfImage::parse(
            &elf(
                0x1000_0000,
                &[(0x1000_0002, 0x1000_0002, &big, big.len() as u32), (0x1000_8001, 0x1000_8001, &[9], 1)],
            ),
            "t",
        )
        .unwrap();
        let r = segment_runs(&img);
        assert_eq!(r.len(), 2, "a gap splits runs");
        assert_eq!(r[0].addr, 0x1000_0000);
        assert_eq!(r[0].data.len(), (CHUNK + 8).div_ceil(4) * 4);
        assert!(!r[0].known[0] && !r[0].known[1] && r[0].known[2]);
        assert_eq!((r[1].addr, r[1].known.as_slice()), (0x1000_8000, &[false, true, false, false][..]));
        let pieces: Vec<_> = chunks(&r).map(|(a, c, _)| (a, c.len())).collect();
        assert_eq!(pieces, vec![(0x1000_0000, CHUNK), (0x1000_0000 + CHUNK as u64, 8), (0x1000_8000, 4)]);
        assert!(pieces.iter().all(|&(a, n)| a % 4 == 0 && n % 4 == 0));
    }

    #[test]
    fn segments_outside_ram_are_refused_with_the_range() {
        let t = target();
        for (seg, kind) in [
            ((0x0000_0000, 0x0000_0000, &[0u8; 4][..], 4), "load range"),
            ((0x1003_fffe, 0x1003_fffe, &[0u8; 4][..], 4), "load range"),
            ((0x1000_0000, 0x1003_fff0, &[0u8; 4][..], 0x100), "run-time range"),
        ] {
            let img = ElfImage::parse(&elf(0x1000_0000, &[seg]), "fw.elf").unwrap();
            let e = img.check_ram(&t).unwrap_err().to_string();
            assert!(e.contains(kind) && e.contains("nothing was written") && e.contains("fw.elf"), "{e}");
        }
    }

    #[test]
    fn a_boot_rom_image_is_written_whole_with_its_header_last() {
        let img = ElfImage::parse(
            &elf(
                0x1000_0000,
                &[(0x1000_0000, 0x1000_0000, &[1, 2, 3, 4, 5, 6], 6), (0x1000_0008, 0x1002_0000, &[7], 4)],
            ),
            "t",
        )
        .unwrap();
        let boot = img.boot.as_ref().unwrap_or_else(|e| panic!("{e}"));
        let r = runs(&img);
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].addr, r[0].data.as_slice()),
            (0x1000_0000, &[1, 2, 3, 4, 5, 6, 0, 0, 7, 0, 0, 0][..])
        );
        assert_eq!(
            (r[1].addr, r[1].data.as_slice()),
            (u64::from(ws_common::boot::HEADER_ADDR), &boot.header[..])
        );
        assert!(r.iter().all(|r| r.known.iter().all(|&k| k)));
        // Outside the boot ROM's window: written by segments, no header.
        let other =
            ElfImage::parse(&elf(0x1003_e000, &[(0x1003_e000, 0x1003_e000, &[1, 2, 3, 4], 4)]), "t").unwrap();
        assert!(other.boot.is_err());
        assert_eq!(runs(&other).len(), 1);
    }

    #[test]
    fn malformed_elves_are_refused() {
        assert!(ElfImage::parse(b"not an elf", "x").unwrap_err().to_string().contains("not a usable"));
        let mut arm = elf(0, &[(0x1000_0000, 0x1000_0000, &[1], 1)]);
        arm[18] = 40; // EM_ARM
        assert!(ElfImage::parse(&arm, "x").unwrap_err().to_string().contains("RISC-V"));
        let empty = elf(0, &[(0x1000_0000, 0x1000_0000, &[], 16)]);
        assert!(ElfImage::parse(&empty, "x").unwrap_err().to_string().contains("no PT_LOAD"));
        // A segment pointing past the end of the file.
        let mut cut = elf(0, &[(0x1000_0000, 0x1000_0000, &[1, 2, 3, 4], 4)]);
        cut.truncate(cut.len() - 2);
        assert!(ElfImage::parse(&cut, "x").is_err());
    }
}
