//! The board link engine's counter index (`LINK.CNT_SEL`, the `LinkCounters` control
//! command; docs/link-engine.md "Counter index"). Per-channel counters take 8 consecutive
//! indices (channel c at base + c), per-TX-slot counters 4 (slot k at base + k; slots 0, 1, 2
//! are channels 2, 3, 6). Every counter is a wrapping u32.

/// RX frames accepted, per channel.
pub const RX_FRAMES: u8 = 0x00;
/// RX payload bytes accepted, per channel.
pub const RX_BYTES: u8 = 0x08;
/// RX payload CRC errors, per channel.
pub const RX_PCRC_ERR: u8 = 0x10;
/// RX sequence errors (gaps, duplicates), per channel.
pub const RX_SEQ_ERR: u8 = 0x18;
/// RX window violations (past the credit, not whole words, closed or refused window), per channel.
pub const RX_WIN_VIOL: u8 = 0x20;
/// RX frames dropped, per channel.
pub const RX_DROPPED: u8 = 0x28;
/// Bytes skipped while hunting for a header.
pub const RX_SKIPPED: u8 = 0x30;
/// Header CRC errors.
pub const RX_HCRC_ERR: u8 = 0x31;
/// Frames of another protocol version.
pub const RX_BAD_VERSION: u8 = 0x32;
/// Headers with a bad channel, flags or length.
pub const RX_BAD_HEADER: u8 = 0x33;
/// TX frames, per channel.
pub const TX_FRAMES: u8 = 0x40;
/// TX payload bytes, per channel.
pub const TX_BYTES: u8 = 0x48;
/// TX retransmissions, per TX slot.
pub const TX_RETX: u8 = 0x50;
/// Cycles the TX sender waited for the host's credit, per TX slot.
pub const TX_CREDIT_STALL: u8 = 0x54;
/// Cycles the TX sender waited for its go-back-N window, per TX slot.
pub const TX_WINDOW_STALL: u8 = 0x58;
/// Retransmission timeouts, per TX slot.
pub const TX_TIMEOUTS: u8 = 0x5c;
/// NAKs received, per TX slot.
pub const TX_NAKS: u8 = 0x60;
/// TX windows refused (misaligned or outside the DMA RAM), per TX slot.
pub const TX_WIN_REFUSED: u8 = 0x64;
/// ACKs received, per TX slot.
pub const TX_ACKS: u8 = 0x68;
/// ACK|NAK frames received, per TX slot.
pub const TX_ACK_NAKS: u8 = 0x6c;
/// Firmware TX frames dropped.
pub const TX_FW_DROPPED: u8 = 0x70;
/// Indices `0 .. COUNT` cover every counter.
pub const COUNT: u8 = 0x71;

/// The TX slot of a channel: 2, 3, 6 → 0, 1, 2.
pub const fn tx_slot(channel: u8) -> Option<u8> {
    match channel {
        2 => Some(0),
        3 => Some(1),
        6 => Some(2),
        _ => None,
    }
}
