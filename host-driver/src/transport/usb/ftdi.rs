//! FTDI FT232H / FT2232H in synchronous 245 FIFO mode: the vendor requests that set it up,
//! and the modem-status bytes that lead every IN packet. Pure functions, tested here.
//!
//! References: FTDI AN_130 "FT2232H Used in an FT245 Style Synchronous FIFO Mode" (§3.1 the
//! EEPROM must set channel A to 245 FIFO, §4.1 the set-up sequence, §4.2 performance);
//! AN232B-04 "Data Throughput, Latency and Handshaking" (§3 the latency timer, §1 the status
//! bytes); AN232B-03 "Optimising D2XX Data Throughput" (64 KiB is the largest and best
//! transfer size; every packet carries 2 status bytes). Request numbers are those of the
//! FTDI SIO protocol as Linux's `ftdi_sio.h` documents them.

use std::time::Duration;

/// `bmRequestType` of every FTDI vendor request: host to device, vendor, device.
pub const REQUEST_TYPE_OUT: u8 = 0x40;
/// `SIO_RESET`: wValue 0 resets the port, 1 purges the RX buffer, 2 the TX buffer.
pub const SIO_RESET: u8 = 0x00;
/// `SIO_SET_FLOW_CTRL`: the flow-control mode is the high byte of wIndex.
pub const SIO_SET_FLOW_CTRL: u8 = 0x02;
/// `SIO_SET_LATENCY_TIMER`: wValue is the timer in ms (AN232B-04 §3).
pub const SIO_SET_LATENCY_TIMER: u8 = 0x09;
/// `SIO_SET_BITMODE`: wValue is `mode << 8 | pin mask`.
pub const SIO_SET_BITMODE: u8 = 0x0b;
/// Bit mode 0x00: reset to the EEPROM's mode.
pub const BITMODE_RESET: u8 = 0x00;
/// Bit mode 0x40: single-channel synchronous 245 FIFO (AN_130 §4.1).
pub const BITMODE_SYNC_FIFO: u8 = 0x40;
/// Flow control RTS/CTS, in the high byte of wIndex. In FIFO mode the chip's RXF#/TXE#
/// handshake is what throttles; AN_130's example selects RTS/CTS so the driver honours it.
pub const FLOW_RTS_CTS: u16 = 0x0100;
/// Bytes of modem status at the start of every IN packet (AN232B-04 §1, AN232B-03 §4).
pub const STATUS_BYTES: usize = 2;
/// Bulk packet size at high speed (FT232H/FT2232H), in bytes.
pub const HIGH_SPEED_PACKET: usize = 512;
/// The FT232H's and FT2232H channel A's bulk IN endpoint.
pub const EP_IN: u8 = 0x81;
/// The FT232H's and FT2232H channel A's bulk OUT endpoint.
pub const EP_OUT: u8 = 0x02;

/// One vendor control request of the set-up sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlRequest {
    /// `bRequest`.
    pub request: u8,
    /// `wValue`.
    pub value: u16,
    /// `wIndex`: the port (1 = A) and, for flow control, the mode.
    pub index: u16,
    /// How long to wait after it before the next request.
    pub settle: Duration,
    /// For messages: "set bit mode 0x40 (sync FIFO)".
    pub what: &'static str,
}

/// The FTDI port number of a USB interface: wIndex counts ports from 1 (A = 1, B = 2).
pub fn port_index(interface: u8) -> u16 {
    u16::from(interface) + 1
}

/// The set-up sequence of AN_130 §4.1 for `interface` with a `latency_ms` latency timer:
/// reset the port, bit mode 0x00 (reset) and a 10 ms pause, bit mode 0x40 (sync FIFO, all
/// pins), the latency timer, RTS/CTS flow control, then purge both buffers so no byte from
/// before the switch reaches the link decoder.
pub fn sync_fifo_setup(interface: u8, latency_ms: u8) -> [ControlRequest; 7] {
    let port = port_index(interface);
    let req = |request, value, index, settle_ms, what| ControlRequest {
        request,
        value,
        index,
        settle: Duration::from_millis(settle_ms),
        what,
    };
    [
        req(SIO_RESET, 0, port, 0, "reset the port"),
        req(SIO_SET_BITMODE, u16::from(BITMODE_RESET) << 8 | 0xff, port, 10, "set bit mode 0x00 (reset)"),
        req(
            SIO_SET_BITMODE,
            u16::from(BITMODE_SYNC_FIFO) << 8 | 0xff,
            port,
            0,
            "set bit mode 0x40 (sync FIFO)",
        ),
        req(SIO_SET_LATENCY_TIMER, u16::from(latency_ms), port, 0, "set the latency timer"),
        req(SIO_SET_FLOW_CTRL, 0, FLOW_RTS_CTS | port, 0, "set RTS/CTS flow control"),
        req(SIO_RESET, 1, port, 0, "purge the RX buffer"),
        req(SIO_RESET, 2, port, 0, "purge the TX buffer"),
    ]
}

/// Strips the modem-status bytes from one bulk IN transfer in place.
///
/// `buf` holds the transfer as received: a run of `packet`-byte packets, the last one
/// possibly short (a short packet ends a transfer), each starting with [`STATUS_BYTES`]
/// status bytes (AN232B-04 §1). The payload is moved to the front of `buf` and its length
/// returned. A packet holding only status (the chip reports every latency period even with
/// nothing to send) contributes nothing; a runt shorter than the status is dropped.
pub fn strip_modem_status(buf: &mut [u8], packet: usize) -> usize {
    assert!(packet > STATUS_BYTES, "packet size {packet} leaves no payload");
    let mut out = 0;
    let mut at = 0;
    while at < buf.len() {
        let end = (at + packet).min(buf.len());
        let from = at + STATUS_BYTES;
        if from < end {
            buf.copy_within(from..end, out);
            out += end - from;
        }
        at = end;
    }
    out
}

/// The payload bytes a transfer of `len` bytes carries at most (AN232B-03 §4:
/// `x - (x / packet) * 2`, rounded for a short last packet).
pub fn payload_capacity(len: usize, packet: usize) -> usize {
    len - len.div_ceil(packet) * STATUS_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a transfer of packets from payload chunks, each behind 2 status bytes.
    fn transfer(chunks: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        for c in chunks {
            v.extend_from_slice(&[0x31, 0x60]);
            v.extend_from_slice(c);
        }
        v
    }

    #[test]
    fn strips_every_packet_of_a_multi_packet_transfer() {
        let a: Vec<u8> = (0..510u32).map(|i| i as u8).collect();
        let b: Vec<u8> = (0..510u32).map(|i| (i * 7) as u8).collect();
        let c = [1u8, 2, 3];
        let mut t = transfer(&[&a, &b, &c]);
        assert_eq!(t.len(), 512 + 512 + 5);
        let n = strip_modem_status(&mut t, 512);
        assert_eq!(&t[..n], [a.as_slice(), b.as_slice(), c.as_slice()].concat());
    }

    #[test]
    fn status_only_and_runt_packets_carry_nothing() {
        let mut t = vec![0x31, 0x60];
        assert_eq!(strip_modem_status(&mut t, 512), 0);
        let mut t = vec![0x31];
        assert_eq!(strip_modem_status(&mut t, 512), 0);
        let mut t: Vec<u8> = Vec::new();
        assert_eq!(strip_modem_status(&mut t, 512), 0);
        // A full packet, then a status-only short packet.
        let a = [9u8; 510];
        let mut t = transfer(&[&a, &[]]);
        assert_eq!(strip_modem_status(&mut t, 512), 510);
        assert!(t[..510].iter().all(|&b| b == 9));
    }

    #[test]
    fn full_speed_packets_and_capacity() {
        // 64-byte packets (full speed): 62 payload bytes each.
        let payload: Vec<u8> = (0..200u32).map(|i| i as u8).collect();
        let chunks: Vec<&[u8]> = payload.chunks(62).collect();
        let mut t = transfer(&chunks);
        let n = strip_modem_status(&mut t, 64);
        assert_eq!(&t[..n], payload.as_slice());
        assert_eq!(payload_capacity(64 * 1024, 512), 65536 - 256);
        assert_eq!(payload_capacity(4096, 64), 3968, "AN232B-03's own figure");
    }

    #[test]
    fn setup_sequence_follows_an130() {
        let s = sync_fifo_setup(0, 2);
        let pairs: Vec<(u8, u16, u16)> = s.iter().map(|r| (r.request, r.value, r.index)).collect();
        assert_eq!(
            pairs,
            [
                (0x00, 0, 1),
                (0x0b, 0x00ff, 1),
                (0x0b, 0x40ff, 1),
                (0x09, 2, 1),
                (0x02, 0, 0x0101),
                (0x00, 1, 1),
                (0x00, 2, 1)
            ]
        );
        assert_eq!(s[1].settle, Duration::from_millis(10));
        assert_eq!(port_index(1), 2);
    }
}
