//! The firmware image format and the boot-ROM loader's memory contract.
//!
//! Every firmware image is integrity-checked before the boot ROM jumps to it, whichever way
//! it reached RAM (the simulator's backdoor preload, the link loader, or a debugger):
//!
//! ```text
//!  offset 0        4        6        8          12         16        20          24
//!        +--------+--------+--------+----------+----------+---------+-----------+------------+
//!        | "WSFW" | version| flags  | load addr| length   | entry   | image CRC | header CRC |
//!        +--------+--------+--------+----------+----------+---------+-----------+------------+
//!         u32 LE   u16      u16      u32        u32        u32       CRC-32C of   CRC-32C of
//!                                                                   the image    bytes 0..24
//! ```
//!
//! - The image is the contiguous bytes `[load, load + length)`: the file-backed contents of
//!   the ELF's loadable segments, gaps zero-filled. `.bss` is not part of it (the firmware's
//!   start-up code zeroes it).
//! - `load`, `length` and `entry` are multiples of 4; the image lies inside [`IMAGE_WINDOW`];
//!   the entry lies inside the image.
//! - The header lives at [`HEADER_ADDR`] in the scratch window at the top of RAM, which no
//!   firmware section occupies (`firmware/memory.x`), so it survives while the firmware runs
//!   and a reset can re-check and reboot the same image.
//!
//! At reset the boot ROM (`firmware/src/bin/ws-bootrom.rs`) does this:
//!
//! 1. If the word at [`BOOT_MODE_ADDR`] is [`STAY_IN_LOADER`], it clears the word and serves
//!    the loader. A host that wants to reflash a running firmware pokes the key there, then
//!    sends `Reset`.
//! 2. Otherwise it checks the header at [`HEADER_ADDR`] and the CRC of the image it
//!    describes. If both hold it jumps to the entry point.
//! 3. Otherwise it serves the loader on the host link: `LoaderInfo`, `LoadBegin` (the header),
//!    `LoadData` (chunks), `LoadBoot` (check the image CRC, then jump), and `Ping`
//!    (`ctrl::cmd`). A refused image leaves it in the loader, ready for another try.

use crate::crc32c::crc32c;
use crate::regmap::map;

/// `"WSFW"` read as a little-endian `u32`.
pub const MAGIC: u32 = u32::from_le_bytes(*b"WSFW");
/// Version of this header layout.
pub const VERSION: u16 = 1;
/// Bytes of an encoded header.
pub const HEADER_LEN: usize = 28;

/// First byte of the scratch window (the top 4 KiB of RAM, the host's poke window).
pub const SCRATCH_BASE: u32 = map::RAM_BASE + map::RAM_SIZE - 4096;
/// Where the header of the image in RAM is kept.
pub const HEADER_ADDR: u32 = SCRATCH_BASE;
/// The boot-mode word: [`STAY_IN_LOADER`] here makes the next reset serve the loader.
pub const BOOT_MODE_ADDR: u32 = SCRATCH_BASE + 0x20;
/// `"STAY"` as a little-endian `u32`.
pub const STAY_IN_LOADER: u32 = u32::from_le_bytes(*b"STAY");

/// Bytes below the scratch window that the boot ROM keeps for its own stack while it loads;
/// an image may not reach into them.
pub const LOADER_STACK_BYTES: u32 = 8 * 1024;

/// The GPIO/LED pattern while the boot ROM serves the loader (0b0011_1100).
pub const LOADER_LEDS: u8 = 0x3c;
/// The GPIO/LED pattern of a boot ROM that stopped on an internal fault (0b1100_0011).
pub const LOADER_FAULT_LEDS: u8 = 0xc3;

/// Where an image may be loaded: the RAM below the loader's stack and the scratch window.
pub const IMAGE_WINDOW: (u32, u32) = (map::RAM_BASE, SCRATCH_BASE - LOADER_STACK_BYTES - map::RAM_BASE);

/// Why a header or an image was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageError {
    /// Fewer than [`HEADER_LEN`] bytes.
    Short,
    /// The magic is not `"WSFW"`.
    BadMagic,
    /// A header version this loader does not know.
    BadVersion,
    /// The header's own CRC does not match: it is corrupt.
    BadHeaderCrc,
    /// Load address, length or entry not a multiple of 4.
    Misaligned,
    /// The image is empty or does not fit in [`IMAGE_WINDOW`].
    OutOfWindow,
    /// The entry point is outside the image.
    BadEntry,
    /// The image's bytes do not match the header's CRC.
    BadImageCrc,
}

impl ImageError {
    /// A one-line explanation that says what to do.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Short => "the image header is truncated: resend all 28 bytes",
            Self::BadMagic => "not a weightstream image (magic is not \"WSFW\"): build it with `wsctl flash`",
            Self::BadVersion => {
                "image header version unknown to this boot ROM: update the host tools or the ROM"
            }
            Self::BadHeaderCrc => "the image header is corrupt (header CRC mismatch): resend it",
            Self::Misaligned => "load address, length and entry must be multiples of 4",
            Self::OutOfWindow => "the image is empty or does not fit in the RAM the loader allows",
            Self::BadEntry => "the entry point lies outside the image",
            Self::BadImageCrc => {
                "the image in RAM does not match its CRC: it was corrupted or truncated, load it again"
            }
        }
    }

    /// The code the loader reports for this error (the `LoaderInfo` `last_error` field).
    pub fn code(self) -> u8 {
        self as u8 + 1
    }

    /// The error for a `last_error` code; `None` for 0 (no error) and unknown codes.
    pub fn from_code(code: u8) -> Option<Self> {
        const ALL: [ImageError; 8] = [
            ImageError::Short,
            ImageError::BadMagic,
            ImageError::BadVersion,
            ImageError::BadHeaderCrc,
            ImageError::Misaligned,
            ImageError::OutOfWindow,
            ImageError::BadEntry,
            ImageError::BadImageCrc,
        ];
        ALL.get(usize::from(code).checked_sub(1)?).copied()
    }
}

/// The header of a firmware image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageHeader {
    /// Header flags; none are defined, so 0.
    pub flags: u16,
    /// Where the image's first byte goes.
    pub load: u32,
    /// Image bytes.
    pub length: u32,
    /// Where execution starts.
    pub entry: u32,
    /// CRC-32C of the image bytes.
    pub image_crc: u32,
}

impl ImageHeader {
    /// The header for `image` loaded at `load`, starting at `entry`.
    pub fn for_image(load: u32, entry: u32, image: &[u8]) -> Self {
        ImageHeader { flags: 0, load, length: image.len() as u32, entry, image_crc: crc32c(image) }
    }

    /// The wire and in-RAM encoding.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[6..8].copy_from_slice(&self.flags.to_le_bytes());
        b[8..12].copy_from_slice(&self.load.to_le_bytes());
        b[12..16].copy_from_slice(&self.length.to_le_bytes());
        b[16..20].copy_from_slice(&self.entry.to_le_bytes());
        b[20..24].copy_from_slice(&self.image_crc.to_le_bytes());
        let crc = crc32c(&b[..24]);
        b[24..28].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and checks a header: magic, version, header CRC, alignment, window, entry.
    /// The image CRC can only be checked against the bytes, by [`ImageHeader::check_image`].
    pub fn decode(b: &[u8]) -> Result<Self, ImageError> {
        let b = b.get(..HEADER_LEN).ok_or(ImageError::Short)?;
        let u32_at = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        if u32_at(0) != MAGIC {
            return Err(ImageError::BadMagic);
        }
        if crc32c(&b[..24]) != u32_at(24) {
            return Err(ImageError::BadHeaderCrc);
        }
        if u16::from_le_bytes([b[4], b[5]]) != VERSION {
            return Err(ImageError::BadVersion);
        }
        let h = ImageHeader {
            flags: u16::from_le_bytes([b[6], b[7]]),
            load: u32_at(8),
            length: u32_at(12),
            entry: u32_at(16),
            image_crc: u32_at(20),
        };
        h.validate()?;
        Ok(h)
    }

    /// Checks alignment, the load window and the entry point.
    pub fn validate(&self) -> Result<(), ImageError> {
        if !(self.load | self.length | self.entry).is_multiple_of(4) {
            return Err(ImageError::Misaligned);
        }
        let (base, len) = IMAGE_WINDOW;
        let end = u64::from(self.load) + u64::from(self.length);
        if self.length == 0 || self.load < base || end > u64::from(base) + u64::from(len) {
            return Err(ImageError::OutOfWindow);
        }
        if self.entry < self.load || u64::from(self.entry) >= end {
            return Err(ImageError::BadEntry);
        }
        Ok(())
    }

    /// Checks `image` (the bytes at `[load, load + length)`) against the header's CRC.
    pub fn check_image(&self, image: &[u8]) -> Result<(), ImageError> {
        if image.len() != self.length as usize || crc32c(image) != self.image_crc {
            return Err(ImageError::BadImageCrc);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> ([u8; 64], ImageHeader) {
        let mut img = [0u8; 64];
        for (i, b) in img.iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        let h = ImageHeader::for_image(map::RAM_BASE, map::RAM_BASE, &img);
        (img, h)
    }

    #[test]
    fn header_round_trips_and_checks_the_image() {
        let (img, h) = image();
        let enc = h.encode();
        assert_eq!(&enc[..4], b"WSFW");
        assert_eq!(ImageHeader::decode(&enc), Ok(h));
        assert_eq!(h.check_image(&img), Ok(()));
        let mut bad = img;
        bad[10] ^= 1;
        assert_eq!(h.check_image(&bad), Err(ImageError::BadImageCrc));
        assert_eq!(h.check_image(&img[..60]), Err(ImageError::BadImageCrc));
    }

    #[test]
    fn every_corrupt_header_byte_is_caught() {
        let (_, h) = image();
        let enc = h.encode();
        for i in 0..HEADER_LEN {
            for bit in 0..8 {
                let mut b = enc;
                b[i] ^= 1 << bit;
                assert!(ImageHeader::decode(&b).is_err(), "flip of byte {i} bit {bit} accepted");
            }
        }
        assert_eq!(ImageHeader::decode(&enc[..27]), Err(ImageError::Short));
    }

    #[test]
    fn window_alignment_and_entry_rules() {
        let ok =
            ImageHeader { flags: 0, load: map::RAM_BASE, length: 1024, entry: map::RAM_BASE, image_crc: 0 };
        assert_eq!(ok.validate(), Ok(()));
        let check = |f: &dyn Fn(&mut ImageHeader)| {
            let mut h = ok;
            f(&mut h);
            ImageHeader::decode(&h.encode())
        };
        assert_eq!(check(&|h| h.load += 2), Err(ImageError::Misaligned));
        assert_eq!(check(&|h| h.length = 0), Err(ImageError::OutOfWindow));
        assert_eq!(check(&|h| h.load = map::RAM_BASE - 4), Err(ImageError::OutOfWindow));
        assert_eq!(
            check(&|h| h.load = SCRATCH_BASE - LOADER_STACK_BYTES - 1020),
            Err(ImageError::OutOfWindow)
        );
        assert_eq!(check(&|h| h.load = HEADER_ADDR), Err(ImageError::OutOfWindow));
        assert_eq!(check(&|h| h.load = 0xffff_fc00), Err(ImageError::OutOfWindow));
        assert_eq!(check(&|h| h.entry = map::RAM_BASE + 1024), Err(ImageError::BadEntry));
        assert_eq!(check(&|h| h.entry = map::RAM_BASE - 4), Err(ImageError::BadEntry));
        // The largest image fits exactly.
        assert_eq!(check(&|h| h.length = IMAGE_WINDOW.1), Ok(ImageHeader { length: IMAGE_WINDOW.1, ..ok }));
    }

    #[test]
    fn error_codes_round_trip() {
        for code in 1..=8 {
            assert_eq!(ImageError::from_code(code).map(ImageError::code), Some(code));
        }
        assert_eq!(ImageError::from_code(0), None);
        assert_eq!(ImageError::from_code(9), None);
    }
}
