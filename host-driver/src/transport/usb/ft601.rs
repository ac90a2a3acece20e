//! FTDI FT600 / FT601 (USB 3 "FT60x") in 245 FIFO mode: pipes and the read request.
//!
//! The chip has two interfaces: 0 carries the session (command) pipe, EP 0x01 OUT, and its
//! notification pipe 0x81; 1 carries the FIFO channels' data pipes, 0x02..0x05 OUT and
//! 0x82..0x85 IN (FTDI AN_412 "FT600/FT601 D3XX Programmer's Guide"; 245 mode has channel 1
//! only). The chip answers a bulk IN on a data pipe only with as many bytes as a *read
//! request* on the session pipe asked for: the 20-byte command below, which D3XX's
//! `FT_ReadPipe` sends before each read. Writes need no request. The layout is that of the
//! open-source libusb FT60x drivers (all fields little endian):
//!
//! ```text
//! 0 idx u32 (increments per request)   4 pipe u8   5 cmd u8 (1 = read)   6..8 zero
//! 8 len u32 (bytes to read)            12..20 zero
//! ```

/// Session (command) pipe, OUT.
pub const SESSION_EP: u8 = 0x01;
/// The interfaces to claim: session and data.
pub const INTERFACES: [u8; 2] = [0, 1];
/// `cmd` of a read request.
pub const CMD_READ: u8 = 1;
/// Length of a session-pipe command.
pub const REQUEST_LEN: usize = 20;

/// The data pipes `(in, out)` of FIFO channel 1..=4.
pub fn data_endpoints(channel: u8) -> (u8, u8) {
    (0x81 + channel, 0x01 + channel)
}

/// The read request asking `pipe` for `len` bytes, the `idx`-th of the session.
pub fn read_request(idx: u32, pipe: u8, len: u32) -> [u8; REQUEST_LEN] {
    let mut r = [0u8; REQUEST_LEN];
    r[0..4].copy_from_slice(&idx.to_le_bytes());
    r[4] = pipe;
    r[5] = CMD_READ;
    r[8..12].copy_from_slice(&len.to_le_bytes());
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_request_layout() {
        let r = read_request(0x0102_0304, 0x82, 0x0010_0000);
        assert_eq!(
            r,
            [0x04, 0x03, 0x02, 0x01, 0x82, 0x01, 0, 0, 0x00, 0x00, 0x10, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(read_request(0, 0x85, 1)[4..9], [0x85, 1, 0, 0, 1]);
    }

    #[test]
    fn channel_pipes() {
        assert_eq!(data_endpoints(1), (0x82, 0x02));
        assert_eq!(data_endpoints(4), (0x85, 0x05));
    }
}
