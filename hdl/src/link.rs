//! The host-link engine's RTL seen from the host: file lists, parameters and [`BlockSpec`]s
//! of its blocks, and the numbering of the RX half's frame events.
//!
//! The engine is docs/link.md "Board side: the link engine"; its split into CRC, RX and TX
//! blocks is "Engine internals" there, and the RX half is described in
//! docs/link-engine-rx.md. The block tests are `hdl/tests/link_*.rs`; the engine top
//! (`ws_link`, [`link_spec`]) is docs/link-engine.md and its end-to-end test against the
//! host's endpoint `hdl/tests/link_e2e.rs`.

use crate::dut::BlockSpec;

/// RTL of the RX half (`ws_link_rx` and its submodules), leaves first.
pub const RX_FILES: &[&str] = &[
    "hdl/rtl/ws_link_crc32c.v",
    "hdl/rtl/ws_link_rx_hist.v",
    "hdl/rtl/ws_link_rx_align.v",
    "hdl/rtl/ws_link_rx_fwfifo.v",
    "hdl/rtl/ws_link_rx_gbn.v",
    "hdl/rtl/ws_link_rx.v",
];

/// Lint configuration of the link engine (the lint command is in its header).
pub const LINT_FILE: &str = "hdl/lint/link.vlt";

/// Parameters of `ws_link_rx` (see the header of `hdl/rtl/ws_link_rx.v`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RxParams {
    /// `FW_DEPTH`: firmware RX FIFO words, a power of two.
    pub fw_depth: u32,
    /// `HIST_WORDS`: history ring words, a power of two >= 32.
    pub hist_words: u32,
    /// `DMA_BYTES`: size of the DMA RAM, a power of two.
    pub dma_bytes: u32,
    /// `WINDOW`: go-back-N window in frames.
    pub window: u32,
    /// `ACK_DELAY`: cycles from the first unacknowledged frame to its ACK request.
    pub ack_delay: u32,
    /// `REFRESH`: first credit-refresh interval in cycles.
    pub refresh: u32,
    /// `INIT_SEQ`: expected seq after reset and `ch_reset` (0 in the product).
    pub init_seq: u32,
    /// `INIT_POS`: committed byte position after reset and `ch_reset` (0 in the product).
    pub init_pos: u32,
}

impl Default for RxParams {
    fn default() -> Self {
        Self::new()
    }
}

impl RxParams {
    /// The RTL's defaults.
    pub const fn new() -> Self {
        RxParams {
            fw_depth: 512,
            hist_words: 1024,
            dma_bytes: 65_536,
            window: 16,
            ack_delay: 256,
            refresh: 1024,
            init_seq: 0,
            init_pos: 0,
        }
    }

    /// Bytes of a frame in progress the history ring keeps for a rescan: a refused frame up
    /// to this long is rescanned exactly as `ws_common::link::Decoder` does.
    pub const fn keep_limit(&self) -> u32 {
        4 * (self.hist_words - 16)
    }

    /// Frames between ACK requests at the latest (`WINDOW / 2`, at least 1).
    pub const fn ack_every(&self) -> u32 {
        if self.window / 2 > 1 {
            self.window / 2
        } else {
            1
        }
    }

    /// The `-G` parameters, in the RTL's order.
    pub fn verilog_params(&self) -> Vec<(&'static str, String)> {
        vec![
            ("FW_DEPTH", self.fw_depth.to_string()),
            ("HIST_WORDS", self.hist_words.to_string()),
            ("DMA_BYTES", self.dma_bytes.to_string()),
            ("WINDOW", self.window.to_string()),
            ("ACK_DELAY", self.ack_delay.to_string()),
            ("REFRESH", self.refresh.to_string()),
            ("INIT_SEQ", format!("32'h{:08x}", self.init_seq)),
            ("INIT_POS", format!("32'h{:08x}", self.init_pos)),
        ]
    }
}

/// `ws_link_rx` as the top module.
pub fn rx_spec(p: &RxParams) -> BlockSpec {
    let mut spec = BlockSpec::new("ws_link_rx").files(RX_FILES.iter().copied());
    for (k, v) in p.verilog_params() {
        spec = spec.param(k, v);
    }
    spec
}

/// RTL of the TX half (`ws_link_tx` and its submodules), leaves first.
pub const TX_FILES: &[&str] = &[
    "hdl/rtl/ws_link_crc32c.v",
    "hdl/rtl/ws_link_tx_gbn.v",
    "hdl/rtl/ws_link_tx_fw.v",
    "hdl/rtl/ws_link_tx.v",
];

/// RTL of the engine top (`ws_link`) beyond the two halves.
pub const TOP_FILES: &[&str] = &["hdl/rtl/ws_link_dma_ram.v", "hdl/rtl/ws_link.v"];

/// Lint waivers the top's build needs: the TX half's, and the top's own file (which holds
/// the lint command).
pub const TOP_LINT_FILES: &[&str] = &["hdl/lint/link_tx.vlt", "hdl/lint/link_top.vlt"];

/// Parameters of `ws_link` (see the header of `hdl/rtl/ws_link.v`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LinkParams {
    /// `FW_RX_DEPTH`: firmware RX FIFO words, a power of two >= 16.
    pub fw_rx_depth: u32,
    /// `FW_TX_WORDS`: firmware TX FIFO words, a power of two >= 512.
    pub fw_tx_words: u32,
    /// `HIST_WORDS`: RX history ring words; >= (largest frame + 64) / 4 for an exact rescan.
    pub hist_words: u32,
    /// `DMA_BYTES`: size of the DMA RAM shared by both halves, a power of two.
    pub dma_bytes: u32,
    /// `WINDOW`: go-back-N window in frames (TX slot table, RX ACK every `WINDOW / 2`).
    pub window: u32,
    /// `ACK_DELAY`: RX cycles from the first unacknowledged frame to its ACK request.
    pub ack_delay: u32,
    /// `REFRESH`: RX first credit-refresh interval in cycles.
    pub refresh: u32,
}

impl Default for LinkParams {
    fn default() -> Self {
        Self::new()
    }
}

impl LinkParams {
    /// The RTL's defaults.
    pub const fn new() -> Self {
        LinkParams {
            fw_rx_depth: 512,
            fw_tx_words: 512,
            hist_words: 1024,
            dma_bytes: 65_536,
            window: 16,
            ack_delay: 256,
            refresh: 1024,
        }
    }

    /// Word-address width of the DMA RAM (`DMA_AW` of the TX half).
    pub const fn dma_aw(&self) -> u32 {
        self.dma_bytes.trailing_zeros() - 2
    }

    /// The `-G` parameters, in the RTL's order.
    pub fn verilog_params(&self) -> Vec<(&'static str, String)> {
        vec![
            ("FW_RX_DEPTH", self.fw_rx_depth.to_string()),
            ("FW_TX_WORDS", self.fw_tx_words.to_string()),
            ("HIST_WORDS", self.hist_words.to_string()),
            ("DMA_BYTES", self.dma_bytes.to_string()),
            ("WINDOW", self.window.to_string()),
            ("ACK_DELAY", self.ack_delay.to_string()),
            ("REFRESH", self.refresh.to_string()),
        ]
    }
}

/// `ws_link`, the engine top, as the top module.
pub fn link_spec(p: &LinkParams) -> BlockSpec {
    let mut files: Vec<&str> = RX_FILES.to_vec();
    files.extend(TX_FILES.iter().filter(|f| !RX_FILES.contains(f)));
    files.extend(TOP_FILES);
    let mut spec = BlockSpec::new("ws_link").files(files);
    for (k, v) in p.verilog_params() {
        spec = spec.param(k, v);
    }
    spec.vlt_files.extend(TOP_LINT_FILES.iter().map(Into::into));
    spec
}

/// Frame decisions of `ws_link_rx` (its `ev_code` output, the `EV_*` localparams).
pub mod rx_ev {
    /// Committed to the firmware FIFO (channels 0, 1, 7).
    pub const FIFO: u8 = 0;
    /// Dropped: it did not fit in the firmware FIFO's free space.
    pub const FIFO_FULL: u8 = 1;
    /// Bulk DATA accepted and committed.
    pub const ACCEPT: u8 = 2;
    /// Bulk duplicate (seq behind): dropped, ACK requested.
    pub const DUP: u8 = 3;
    /// Bulk seq ahead (a gap): dropped, NAK requested if `ev_nak`.
    pub const GAP: u8 = 4;
    /// Bulk, in order, past the credit: dropped, window violation, NAK if `ev_nak`.
    pub const CREDIT: u8 = 5;
    /// Bulk DATA for a closed window or with a length not a multiple of 4: window violation.
    pub const WINDOW: u8 = 6;
    /// Dropped: channel 5, DATA or payload on channel 6, ERROR on 2..4, cancelled.
    pub const DROP: u8 = 7;
    /// No DATA and no payload on channel 2, 3, 4 or 6: an ACK-only frame.
    pub const CTRL: u8 = 8;
    /// Payload CRC mismatch (a bulk DATA frame is also a gap: NAK if `ev_nak`).
    pub const PCRC: u8 = 9;
    /// Header CRC mismatch.
    pub const HCRC: u8 = 10;
    /// Another protocol version.
    pub const VERSION: u8 = 11;
    /// Bad channel, flags or length.
    pub const HEADER: u8 = 12;

    /// Name of a code, for messages.
    pub fn name(code: u8) -> &'static str {
        const NAMES: [&str; 13] = [
            "FIFO",
            "FIFO_FULL",
            "ACCEPT",
            "DUP",
            "GAP",
            "CREDIT",
            "WINDOW",
            "DROP",
            "CTRL",
            "PCRC",
            "HCRC",
            "VERSION",
            "HEADER",
        ];
        NAMES.get(code as usize).copied().unwrap_or("?")
    }
}
