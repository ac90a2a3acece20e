//! `Identity`: who the board is. The firmware reads the system-info block and the ID word of
//! every populated register slot, and reports them with its own version and access windows.

use crate::ctrl::{get_u16, get_u32, Command, Status, Writer};

/// Most register blocks one identity response lists.
pub const MAX_BLOCKS: usize = 32;

/// Asks for [`IdentityInfo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity;

/// An address range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Window {
    /// First address.
    pub base: u32,
    /// Length in bytes.
    pub len: u32,
}

impl Window {
    /// True when `[addr, addr+len)` lies inside the window (overflow-safe).
    pub fn contains(&self, addr: u32, len: u32) -> bool {
        let Some(off) = addr.checked_sub(self.base) else { return false };
        off <= self.len && len <= self.len - off
    }
}

/// One register block found on the board.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockInfo {
    /// Register slot (base = periph base + slot × slot size).
    pub slot: u8,
    /// Block ID from its ID word.
    pub id: u16,
    /// Major version.
    pub major: u8,
    /// Minor version.
    pub minor: u8,
}

/// The board's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdentityInfo {
    /// Firmware version (major, minor, patch).
    pub fw_version: [u8; 3],
    /// Hardware build hash from the system-info block.
    pub build_hash: u32,
    /// Core clock in Hz.
    pub clk_hz: u32,
    /// Boot ROM.
    pub rom: Window,
    /// Main RAM.
    pub ram: Window,
    /// Where `Peek` may read.
    pub peek: Window,
    /// Where `Poke` may write.
    pub poke: Window,
    /// Timer interrupt rate the firmware programmed.
    pub tick_hz: u32,
    /// How many entries of `blocks` are valid.
    pub num_blocks: u8,
    /// Blocks found, in slot order.
    pub blocks: [BlockInfo; MAX_BLOCKS],
}

impl IdentityInfo {
    /// The valid block entries.
    pub fn blocks(&self) -> &[BlockInfo] {
        &self.blocks[..(self.num_blocks as usize).min(MAX_BLOCKS)]
    }
}

fn put_window(w: &mut Writer<'_>, win: &Window) -> Result<(), Status> {
    w.u32(win.base)?;
    w.u32(win.len)
}

fn get_window(d: &[u8], at: usize) -> Result<Window, Status> {
    Ok(Window { base: get_u32(d, at)?, len: get_u32(d, at + 4)? })
}

impl Command<'_> for Identity {
    const OPCODE: u8 = super::opcode::IDENTITY;
    type Response = IdentityInfo;

    fn encode(&self, _out: &mut [u8]) -> Result<usize, Status> {
        Ok(0)
    }
    fn decode(p: &[u8]) -> Result<Self, Status> {
        if p.is_empty() {
            Ok(Self)
        } else {
            Err(Status::BadLength)
        }
    }
    fn encode_response(i: &IdentityInfo, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.bytes(&i.fw_version)?;
        w.u32(i.build_hash)?;
        w.u32(i.clk_hz)?;
        put_window(&mut w, &i.rom)?;
        put_window(&mut w, &i.ram)?;
        put_window(&mut w, &i.peek)?;
        put_window(&mut w, &i.poke)?;
        w.u32(i.tick_hz)?;
        w.u8(i.num_blocks)?;
        for b in i.blocks() {
            w.u8(b.slot)?;
            w.u16(b.id)?;
            w.u8(b.major)?;
            w.u8(b.minor)?;
        }
        Ok(w.len())
    }
    fn decode_response(d: &[u8]) -> Result<IdentityInfo, Status> {
        let fw_version = [
            *d.first().ok_or(Status::BadLength)?,
            *d.get(1).ok_or(Status::BadLength)?,
            *d.get(2).ok_or(Status::BadLength)?,
        ];
        let num_blocks = *d.get(47).ok_or(Status::BadLength)?;
        if num_blocks as usize > MAX_BLOCKS || d.len() != 48 + 5 * num_blocks as usize {
            return Err(Status::BadLength);
        }
        let mut blocks = [BlockInfo::default(); MAX_BLOCKS];
        for (k, b) in blocks.iter_mut().take(num_blocks as usize).enumerate() {
            let at = 48 + 5 * k;
            *b = BlockInfo { slot: d[at], id: get_u16(d, at + 1)?, major: d[at + 3], minor: d[at + 4] };
        }
        Ok(IdentityInfo {
            fw_version,
            build_hash: get_u32(d, 3)?,
            clk_hz: get_u32(d, 7)?,
            rom: get_window(d, 11)?,
            ram: get_window(d, 19)?,
            peek: get_window(d, 27)?,
            poke: get_window(d, 35)?,
            tick_hz: get_u32(d, 43)?,
            num_blocks,
            blocks,
        })
    }
}
