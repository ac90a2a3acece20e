//! [`SimProbe`] against a loopback server with a software TAP: an IEEE 1149.1 controller with
//! a 5-bit IR, IDCODE and a DTMCS register (RISC-V Debug 0.13.2 §6.1.4), so probe-rs' own
//! scan-chain detection and register access run over both wire protocols. The real DTM is
//! exercised by the hil-tests.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

use probe_rs::probe::JtagAccess;

use super::*;

const IDCODE: u32 = 0x1000_5a57;
/// version 1, abits 7, idle 1 (what riscv-dbg reports).
const DTMCS: u32 = 0x0000_1071;

#[derive(Default)]
struct SoftTap {
    state: u8,
    ir: u8,
    ir_shift: u8,
    dr: u64,
    dr_len: u32,
    tdo: bool,
    tck: bool,
}

impl SoftTap {
    fn next(s: u8, tms: bool) -> u8 {
        // 0 TLR 1 RTI 2 SelDR 3 CapDR 4 ShDR 5 Ex1DR 6 PauDR 7 Ex2DR 8 UpdDR
        // 9 SelIR 10 CapIR 11 ShIR 12 Ex1IR 13 PauIR 14 Ex2IR 15 UpdIR
        const T: [[u8; 2]; 16] = [
            [1, 0],
            [1, 2],
            [3, 9],
            [4, 5],
            [4, 5],
            [6, 8],
            [6, 7],
            [4, 8],
            [1, 2],
            [10, 0],
            [11, 12],
            [11, 12],
            [13, 15],
            [13, 14],
            [11, 15],
            [1, 2],
        ];
        T[s as usize][usize::from(tms)]
    }

    fn clock(&mut self, tck: bool, tms: bool, tdi: bool) {
        if tck && !self.tck {
            match self.state {
                3 => {
                    (self.dr, self.dr_len) = match self.ir {
                        0x01 => (IDCODE.into(), 32),
                        0x10 => (DTMCS.into(), 32),
                        _ => (0, 1),
                    }
                }
                4 => self.dr = (self.dr >> 1) | (u64::from(tdi) << (self.dr_len - 1)),
                10 => self.ir_shift = 1,
                11 => self.ir_shift = (self.ir_shift >> 1) | (u8::from(tdi) << 4),
                15 => self.ir = self.ir_shift,
                _ => {}
            }
            self.state = Self::next(self.state, tms);
            if self.state == 0 {
                self.ir = 1;
            }
        } else if !tck && self.tck {
            self.tdo = match self.state {
                4 => self.dr & 1 != 0,
                11 => self.ir_shift & 1 != 0,
                _ => self.tdo,
            };
        }
        self.tck = tck;
    }
}

/// Serves one client: XVC when it starts with `g`/`s`, remote_bitbang otherwise.
fn serve(mut s: TcpStream) {
    let mut tap = SoftTap { ir: 1, ..SoftTap::default() };
    let mut first = [0u8; 1];
    if s.read_exact(&mut first).is_err() {
        return;
    }
    if first[0] == b'g' {
        let mut rest = [0u8; 7];
        if s.read_exact(&mut rest).is_err() {
            return;
        }
        let _ = s.write_all(b"xvcServer_v1.0:64\n");
        loop {
            let mut cmd = [0u8; 10];
            if s.read_exact(&mut cmd).is_err() {
                return;
            }
            assert_eq!(&cmd[..6], b"shift:");
            let bits = u32::from_le_bytes(cmd[6..10].try_into().unwrap()) as usize;
            assert!(bits.div_ceil(8) <= 64, "the probe honours getinfo's vector length");
            let mut v = vec![0u8; 2 * bits.div_ceil(8)];
            s.read_exact(&mut v).unwrap();
            let (tms, tdi) = v.split_at(bits.div_ceil(8));
            let mut tdo = vec![0u8; tms.len()];
            for i in 0..bits {
                let (m, d) = (tms[i / 8] >> (i % 8) & 1 != 0, tdi[i / 8] >> (i % 8) & 1 != 0);
                tap.clock(false, m, d);
                tdo[i / 8] |= u8::from(tap.tdo) << (i % 8);
                tap.clock(true, m, d);
            }
            s.write_all(&tdo).unwrap();
        }
    } else {
        let mut buf = vec![first[0]];
        loop {
            let mut out = Vec::new();
            for &b in &buf {
                match b {
                    b'0'..=b'7' => {
                        let v = b - b'0';
                        tap.clock(v & 4 != 0, v & 2 != 0, v & 1 != 0);
                    }
                    b'R' => out.push(if tap.tdo { b'1' } else { b'0' }),
                    _ => {}
                }
            }
            if s.write_all(&out).is_err() {
                return;
            }
            buf.resize(4096, 0);
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.truncate(n),
            }
        }
    }
}

fn server(handler: fn(TcpStream)) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        if let Ok((s, _)) = l.accept() {
            handler(s);
        }
    });
    addr
}

#[test]
fn probe_rs_finds_the_tap_and_reads_dtmcs_over_both_wires() {
    for wire in [Wire::Xvc, Wire::Bitbang] {
        let addr = server(serve);
        let mut p = SimProbe::connect(addr, wire).unwrap();
        let chain = p.scan_chain().unwrap().to_vec();
        assert_eq!(chain.len(), 1, "{wire:?}: {chain:?}");
        assert_eq!(chain[0].ir_len, Some(5), "{wire:?}");
        p.select_target(0).unwrap();
        let dtmcs = p.read_register(0x10, 32).unwrap();
        assert_eq!(dtmcs.load_le::<u32>(), DTMCS, "{wire:?}");
        let id = p.read_register(0x01, 32).unwrap();
        assert_eq!(id.load_le::<u32>(), IDCODE, "{wire:?}");
        let c = p.counters();
        assert!(c.tck > 100 && c.exchanges >= 4, "{wire:?}: {c:?}");
        // Batched: far fewer exchanges than bits.
        assert!(c.exchanges * 20 < c.tck, "{wire:?}: {c:?}");
    }
}

#[test]
fn a_server_that_closes_mid_shift_is_a_named_error() {
    fn hang_up_after_greeting(mut s: TcpStream) {
        let mut g = [0u8; 8];
        let _ = s.read_exact(&mut g);
        let _ = s.write_all(b"xvcServer_v1.0:2048\n");
        let mut cmd = [0u8; 10];
        let _ = s.read_exact(&mut cmd);
        // Gone without an answer.
    }
    let addr = server(hang_up_after_greeting);
    let mut p = SimProbe::connect(addr, Wire::Xvc).unwrap();
    p.shift_bit(true, false, true).unwrap();
    let e = p.read_captured_bits().unwrap_err();
    let text = crate::jtag::error_chain(&e);
    let named = text.contains("closed the connection") || text.contains("reset the connection");
    assert!(named && text.contains(&addr.to_string()) && text.contains("during a JTAG shift"), "{text}");
}

#[test]
fn a_busy_port_and_a_stranger_are_told_apart() {
    fn busy(mut s: TcpStream) {
        let _ = s.write_all(b"ws-sim: JTAG port busy: another debugger is attached; detach it first\n");
    }
    fn stranger(mut s: TcpStream) {
        let mut g = [0u8; 8];
        let _ = s.read_exact(&mut g);
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
    }
    let e = SimProbe::connect(server(busy), Wire::Xvc).unwrap_err().to_string();
    assert!(e.contains("busy") && e.contains("detach"), "{e}");
    let e = SimProbe::connect(server(busy), Wire::Bitbang).unwrap_err().to_string();
    assert!(e.contains("busy"), "{e}");
    let e = SimProbe::connect(server(stranger), Wire::Xvc).unwrap_err().to_string();
    assert!(e.contains("did not greet"), "{e}");
    // Nothing listening.
    let free = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let e = SimProbe::connect(free, Wire::Xvc).unwrap_err().to_string();
    assert!(e.contains("no JTAG server answered") && e.contains("wsctl sim start"), "{e}");
}
