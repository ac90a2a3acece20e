//! The link protocol v2 engine (`hdl/regmap/link.toml`, docs/link-engine.md): whole frames of
//! the firmware channels through its FIFOs, the DMA windows of the bulk channels, the HELLO
//! state and the counters. The engine checks every CRC, sequence number and window in
//! hardware; firmware only programs it and handles HELLO and control.

use ws_common::link::hello::ChannelState;
use ws_common::link::{Channel, DecodeError, Header, CHANNELS, HEADER_LEN, MAX_CTRL_PAYLOAD};
use ws_common::regmap::link;

use crate::link::Engine;
use crate::pac;

/// Bulk channels the RX windows serve, by RX slot.
pub const RX_CHANNELS: [Channel; 3] = [Channel::Weights, Channel::Gradients, Channel::Data];
/// Bulk channels the TX windows serve, by TX slot.
pub const TX_CHANNELS: [Channel; 3] = [Channel::Weights, Channel::Gradients, Channel::Trace];
/// TX slot of channel 6, the trace.
pub const TX_TRACE: usize = 2;

/// One DMA window: a power-of-two ring in the engine's DMA RAM, aligned to its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Byte address in the DMA RAM.
    pub base: u32,
    /// Bytes, a power of two of at least 64.
    pub len: u32,
}

/// Counter indices of `CNT_SEL`.
pub use ws_common::link::counters as cnt;

/// The engine driver.
#[derive(Debug)]
pub struct LinkEngine {
    regs: pac::Link,
}

impl LinkEngine {
    /// Takes the engine: interrupt off, every window off, counters zero.
    pub fn new(regs: pac::Link) -> Self {
        regs.ctrl().write(0);
        for i in 0..3 {
            regs.rx_en(i).write(0);
            regs.tx_en(i).write(0);
        }
        regs.cnt_clear().write(link::cnt_clear::GO.val(1));
        regs.events().write(u32::MAX);
        Self { regs }
    }

    /// Bytes of the DMA RAM.
    pub fn dma_bytes(&self) -> u32 {
        1 << link::params::DMA_LOG2.get(self.regs.params().read())
    }

    /// The largest go-back-N window the engine holds.
    pub fn max_window(&self) -> u16 {
        1 << link::params::WINDOW_LOG2.get(self.regs.params().read())
    }

    /// Opens the RX window of `slot` (channel 2 + slot) with the consumer's released position
    /// at `released` (the stream position up to which the ring may be overwritten). Returns
    /// whether the engine took it: a misaligned window, or one that leaves the DMA RAM, stays
    /// off and is counted.
    pub fn open_rx(&mut self, slot: usize, w: Window, released: u32) -> bool {
        self.regs.rx_en(slot).write(0);
        self.regs.rx_base(slot).write(w.base);
        self.regs.rx_len(slot).write(w.len);
        self.regs.rx_released(slot).write(released);
        self.regs.rx_en(slot).write(link::rx_en0::EN.val(1));
        // The engine checks the window on the rising enable and raises ACTIVE a few cycles on.
        (0..64).any(|_| link::rx_en0::ACTIVE.get(self.regs.rx_en(slot).read()) != 0)
    }

    /// Opens the TX window of `slot` (channels 2, 3, 6) with the producer's ready position at
    /// `ready` (bytes before it may be sent).
    pub fn open_tx(&mut self, slot: usize, w: Window, ready: u32) -> bool {
        self.regs.tx_en(slot).write(0);
        self.regs.tx_base(slot).write(w.base);
        self.regs.tx_len(slot).write(w.len);
        self.regs.tx_ready(slot).write(ready);
        self.regs.tx_en(slot).write(link::tx_en0::EN.val(1));
        (0..64).any(|_| link::tx_en0::ACTIVE.get(self.regs.tx_en(slot).read()) != 0)
    }

    /// Closes every window of both halves.
    pub fn close_all(&mut self) {
        for i in 0..3 {
            self.regs.rx_en(i).write(0);
            self.regs.tx_en(i).write(0);
        }
    }

    /// The loopback mask (bit `i`: RX slot `i` echoes into TX slot `i`).
    pub fn loopback(&self) -> u8 {
        link::ctrl::LOOPBACK.get(self.regs.ctrl().read()) as u8
    }

    /// Payload bytes RX slot `slot` has committed to its ring (wrapping stream position).
    pub fn rx_committed(&self, slot: usize) -> u32 {
        self.regs.rx_committed(slot).read()
    }

    /// The released position of RX slot `slot`, as last written.
    pub fn rx_released(&self, slot: usize) -> u32 {
        self.regs.rx_released(slot).read()
    }

    /// Gives the bytes before stream position `pos` of RX slot `slot` back to the engine.
    pub fn release_rx(&mut self, slot: usize, pos: u32) {
        self.regs.rx_released(slot).write(pos);
    }

    /// The ready position of TX slot `slot`, as last written.
    pub fn tx_ready(&self, slot: usize) -> u32 {
        self.regs.tx_ready(slot).read()
    }

    /// Lets TX slot `slot` send the bytes before stream position `pos`.
    pub fn set_tx_ready(&mut self, slot: usize, pos: u32) {
        self.regs.tx_ready(slot).write(pos);
    }

    /// The stream position of TX slot `slot` the host has acknowledged; bytes before it may
    /// be overwritten.
    pub fn tx_acked(&self, slot: usize) -> u32 {
        self.regs.tx_acked_bytes(slot).read()
    }

    /// Whether TX slot `slot`'s window is open.
    pub fn tx_open(&self, slot: usize) -> bool {
        link::tx_en0::ACTIVE.get(self.regs.tx_en(slot).read()) != 0
    }

    /// The stream position TX slot `slot` has sent.
    pub fn tx_sent(&self, slot: usize) -> u32 {
        self.regs.tx_sent_bytes(slot).read()
    }

    /// Loops RX slot `slot` back into TX slot `slot` (2 → 2, 3 → 3, 4 → 6) through the RX
    /// window, which must be open; the CPU copies nothing. Closes the TX window first.
    pub fn set_loopback(&mut self, mask: u8) {
        for i in 0..3 {
            if mask & (1 << i) != 0 {
                self.regs.tx_en(i).write(0);
            }
        }
        self.regs.ctrl().modify(|v| link::ctrl::LOOPBACK.set(v, mask as u32));
    }

    /// Enables or disables the interrupt raised while a firmware frame waits (line 18).
    pub fn set_rx_interrupt(&mut self, on: bool) {
        self.regs.ctrl().modify(|v| link::ctrl::IRQ_RX.set(v, on as u32));
    }

    /// Words waiting in the firmware RX FIFO.
    pub fn rx_level(&self) -> u32 {
        link::fw_status::RX_LEVEL.get(self.regs.fw_status().read())
    }

    fn pop(&mut self) -> u32 {
        while self.rx_level() == 0 {}
        self.regs.fw_rxdata().read()
    }

    /// Pops one whole frame of a firmware channel: its header, and its payload into
    /// `payload` (the engine passed hcrc and pcrc before it committed the frame). A payload
    /// longer than `payload` is read and dropped past its end. `None` when no frame waits;
    /// `Some(Err)` for a header the engine passed and the shared decoder refuses (the frame
    /// is drained all the same, by its length field, so the next one stays aligned).
    pub fn read_frame(&mut self, payload: &mut [u8]) -> Option<Result<(Header, usize), DecodeError>> {
        if self.rx_level() == 0 {
            return None;
        }
        let mut hb = [0u8; HEADER_LEN];
        for c in hb.chunks_exact_mut(4) {
            c.copy_from_slice(&self.pop().to_le_bytes());
        }
        let len = u32::from_le_bytes([hb[5], hb[6], hb[7], 0]) as usize;
        for i in 0..len.div_ceil(4) {
            let w = self.pop().to_le_bytes();
            for (j, b) in w.iter().enumerate() {
                let at = 4 * i + j;
                if at < len && at < payload.len() {
                    payload[at] = *b;
                }
            }
        }
        Some(Header::decode(&hb, MAX_CTRL_PAYLOAD).map(|h| (h, len.min(payload.len()))))
    }

    /// Reads one counter by its `CNT_SEL` index.
    pub fn counter(&mut self, index: u8) -> u32 {
        self.regs.cnt_sel().write(index as u32);
        self.regs.cnt_val().read()
    }
}

impl Engine for LinkEngine {
    fn channel_state(&self) -> [ChannelState; CHANNELS] {
        let mut s = [ChannelState::default(); CHANNELS];
        for (i, ch) in RX_CHANNELS.iter().enumerate() {
            let st = &mut s[ch.index()];
            st.rx_expected = self.regs.rx_expected(i).read();
            st.rx_committed = self.regs.rx_committed(i).read();
            st.credit = self.regs.rx_credit(i).read();
        }
        for (i, ch) in TX_CHANNELS.iter().enumerate() {
            s[ch.index()].tx_next = self.regs.tx_next_seq(i).read();
        }
        s
    }

    fn reset_channels(&mut self, host: &[ChannelState; CHANNELS]) {
        for (i, ch) in TX_CHANNELS.iter().enumerate() {
            self.regs.tx_init_credit(i).write(host[ch.index()].credit);
        }
        // The consumer positions restart with the streams: released before the reset (a
        // smaller credit for a cycle is harmless), ready after it (a ready position behind the
        // old stream's sent one must never be seen).
        //
        // The TX windows are closed across the reset. Between the reset (sent bytes back to 0,
        // credit from the new HELLO) and the write of ready = 0, an open window still holds
        // the old session's ready position, and the engine cut a frame of whatever the ring
        // held there as the new stream's first bytes: a later job's answers then arrived with
        // the previous job's words in them (docs/firmware.md "Every job starts from a known
        // state"). Closed, the window grants nothing until ready is 0.
        for i in 0..3 {
            self.regs.rx_released(i).write(0);
        }
        let open: [bool; 3] = core::array::from_fn(|i| link::tx_en0::EN.get(self.regs.tx_en(i).read()) != 0);
        for (i, _) in open.iter().enumerate().filter(|(_, o)| **o) {
            self.regs.tx_en(i).write(0);
        }
        self.regs.ch_reset().write(link::ch_reset::GO.val(1));
        for i in 0..3 {
            self.regs.tx_ready(i).write(0);
        }
        // TX2 (channel 6) stays closed: its ready position belongs to the trace unit while a
        // trace runs, and the new session's stream starts again at 0 under it. The next
        // `TraceCtl` start opens it at the new stream's position (docs/trace.md).
        for (i, _) in open.iter().enumerate().filter(|(i, o)| **o && *i != TX_TRACE) {
            self.regs.tx_en(i).write(link::tx_en0::EN.val(1));
            // The engine re-checks the unchanged window on the rising enable.
            let _ = (0..64).any(|_| link::tx_en0::ACTIVE.get(self.regs.tx_en(i).read()) != 0);
        }
    }

    fn set_negotiated(&mut self, max_payload: u32, window: u16) {
        self.regs.max_payload().write(max_payload);
        self.regs.window().write(window as u32);
    }

    fn window(&self) -> u16 {
        self.max_window()
    }

    fn counter(&mut self, index: u8) -> u32 {
        LinkEngine::counter(self, index)
    }

    fn send(&mut self, h: &Header, payload: &[u8]) {
        let words = 5 + payload.len().div_ceil(4);
        while (link::fw_status::TX_FREE.get(self.regs.fw_status().read()) as usize) < words {}
        let hb = h.encode();
        for c in hb[..20].chunks_exact(4) {
            self.regs.fw_txdata().write(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        }
        for c in payload.chunks(4) {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            self.regs.fw_txdata().write(u32::from_le_bytes(w));
        }
        self.regs.fw_txcommit().write(link::fw_txcommit::GO.val(1));
    }
}
