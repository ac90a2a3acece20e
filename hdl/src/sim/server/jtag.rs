//! The JTAG server of `ws-sim` (docs/jtag.md): one TCP client at a time drives the SoC's TAP
//! pins (`jtag_tck/tms/tdi/trst_n`, read back on `jtag_tdo`), which belong to the riscv-dbg
//! DTM (`dmi_jtag`, RISC-V External Debug Support 0.13.2 §6). Two wire protocols share the
//! port and are told apart by the client's first bytes:
//!
//! - **XVC 1.0** (Xilinx Virtual Cable, UG908 "User XVC 1.0 Commands"; the protocol text in
//!   the Xilinx/XilinxVirtualCable README): `getinfo:` → `xvcServer_v1.0:<max vector bytes>\n`;
//!   `settck:<u32 LE period ns>` → the period applied (u32 LE); `shift:<u32 LE bits><tms
//!   bytes><tdi bytes>` → the TDO bytes, bit 0 of byte 0 first. A whole vector is clocked per
//!   command, so a probe pays one round trip per vector, not per bit.
//! - **OpenOCD remote_bitbang** (OpenOCD `doc/manual/jtag/drivers/remote_bitbang.txt`): one
//!   ASCII byte per request: `'0'..'7'` write tck/tms/tdi (bit 2/1/0), `R` read TDO → `'0'`
//!   or `'1'`, `'r'..'u'` reset (trst = bit 1, srst = bit 0, 1 = asserted), `B`/`b` blink,
//!   `Q` quit. Every byte a socket read returns is executed before the answers go back.
//!
//! Detection: XVC commands begin with `g` (`getinfo:`) or `s` (`shift:`, `settck:`); bitbang
//! requests are digits, `R`, `r`..`u`, `B`, `b` or `Q`. The one overlap, `s` (bitbang "reset
//! trst=0 srst=1"), is settled by the second byte: `h` or `e` make it XVC.
//!
//! Clocking: the DTM runs on TCK and the debug module on the system clock, with `cdc_2phase`
//! synchronisers between them (riscv-dbg `dmi_cdc.sv`). A DMI request crosses only while the
//! system clock runs, so every rising TCK edge (where the DTM's registers change) is followed
//! by [`SYS_CYCLES_PER_TCK`] system cycles, as on a board whose core clock is faster than its
//! TCK. docs/jtag.md records the measurement behind the value.
//!
//! Nothing a client sends can panic the simulator: every length is checked before use, a
//! malformed command ends that client's session (and only it), and the buffers are bounded.

use super::clients::OutBuf;

/// The largest XVC vector accepted, in bytes per vector (TMS and TDI each), advertised by
/// `getinfo:`. 2048 bytes are 16 384 TCK periods, about 0.1 s of simulation: long enough that
/// the round trip is noise, short enough that the other ports are not starved meanwhile.
pub(crate) const XVC_MAX_VECTOR_BYTES: usize = 2048;
/// System clock cycles run after every rising TCK edge: the simulated TCK is the core clock
/// divided by this (25 MHz on the 50 MHz board). Measured (docs/jtag.md, "Clocking"): flash
/// throughput goes as 1/n, but at 1 probe-rs loses byte writes it batches through the program
/// buffer (an abstract command still runs when the next one arrives, and probe-rs does not
/// check `abstractcs.cmderr` between them, RISC-V Debug 0.13.2 §3.6); 2 is the fastest
/// setting at which every access path reads back what it wrote.
pub(crate) const SYS_CYCLES_PER_TCK: u64 = 2;
/// Answers queued for a client before its socket is no longer read: a client that sends
/// `R`s without reading the answers is held back by TCP instead of growing this queue.
pub(crate) const OUT_CAP: usize = 64 << 10;
/// The longest XVC command: `shift:`, the bit count and two full vectors.
const XVC_MAX_COMMAND: usize = 6 + 4 + 2 * XVC_MAX_VECTOR_BYTES;

/// The pins of the TAP, as the protocols drive them. The server implements it on the
/// simulated SoC; the unit tests on a software TAP.
pub(crate) trait Tap {
    /// Drives the four inputs; they take effect at once.
    fn drive(&mut self, tck: bool, tms: bool, tdi: bool, trst_n: bool);
    /// Lets the system clock run [`SYS_CYCLES_PER_TCK`] cycles; called after every rising
    /// TCK edge.
    fn run_system(&mut self);
    /// `jtag_tdo`.
    fn tdo(&self) -> bool;
}

/// Which protocol a session speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// Not known yet: nothing, or only an ambiguous `s`, has arrived.
    Unknown,
    /// Xilinx Virtual Cable 1.0.
    Xvc,
    /// OpenOCD remote_bitbang.
    Bitbang,
}

impl Protocol {
    /// The name used in `stats` and messages.
    pub(crate) fn name(self) -> Option<&'static str> {
        match self {
            Protocol::Unknown => None,
            Protocol::Xvc => Some("xvc"),
            Protocol::Bitbang => Some("remote_bitbang"),
        }
    }
}

/// Why a session ended on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    /// The client sent `Q` (remote_bitbang).
    Quit,
    /// The client sent something neither protocol allows; the text says what.
    Malformed(String),
}

/// What [`Session::feed`] asks the server to do besides sending [`Session::out`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Events {
    /// The client asserted srst (remote_bitbang `s` or `u`): reset the SoC.
    pub(crate) system_reset: bool,
    /// The session is over: send what is queued, then close.
    pub(crate) end: Option<End>,
}

/// One client's protocol state: the bytes of an incomplete command, the pins as last
/// driven, the answers not yet written, and counters.
#[derive(Debug)]
pub(crate) struct Session {
    protocol: Protocol,
    pending: Vec<u8>,
    pub(crate) out: OutBuf,
    tck: bool,
    tms: bool,
    tdi: bool,
    trst_n: bool,
    srst: bool,
    ended: bool,
    /// TCK rising edges driven in this session.
    pub(crate) tck_cycles: u64,
    /// Bytes received.
    pub(crate) rx_bytes: u64,
}

impl Default for Session {
    fn default() -> Self {
        Session {
            protocol: Protocol::Unknown,
            pending: Vec::new(),
            out: OutBuf::default(),
            // The shim's idle levels (hdl/sim/ws_soc_shim.cpp).
            tck: false,
            tms: true,
            tdi: false,
            trst_n: true,
            srst: false,
            ended: false,
            tck_cycles: 0,
            rx_bytes: 0,
        }
    }
}

impl Session {
    /// The protocol detected so far.
    pub(crate) fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Whether the server should read more from this client now: not after the session
    /// ended, and not while its answers pile up unread.
    pub(crate) fn wants_input(&self) -> bool {
        !self.ended && self.out.pending() < OUT_CAP && self.pending.len() < XVC_MAX_COMMAND
    }

    /// Executes every complete request in `data` (after what earlier calls left incomplete)
    /// on `tap`, queuing the answers in [`Session::out`].
    pub(crate) fn feed(&mut self, data: &[u8], tap: &mut impl Tap) -> Events {
        let mut ev = Events::default();
        if self.ended {
            return ev;
        }
        self.rx_bytes += data.len() as u64;
        let mut data = data;
        if self.protocol == Protocol::Unknown {
            match detect(self.pending.first().copied(), data) {
                Detect::Need => {
                    self.pending.extend_from_slice(data);
                    return ev;
                }
                Detect::Is(p) => self.protocol = p,
                Detect::Neither(b) => {
                    return self.end(
                        ev,
                        End::Malformed(format!(
                            "first byte {} starts neither an XVC command (getinfo:, settck:, shift:) nor a remote_bitbang request",
                            show(b)
                        )),
                    )
                }
            }
        }
        match self.protocol {
            Protocol::Xvc => {
                // Parse in place when nothing is pending, the common case of whole commands.
                let owned;
                if !self.pending.is_empty() {
                    let mut v = std::mem::take(&mut self.pending);
                    v.extend_from_slice(data);
                    owned = v;
                    data = &owned;
                }
                let mut at = 0;
                loop {
                    match xvc_command(&data[at..]) {
                        Ok(None) => break,
                        Ok(Some((cmd, used))) => {
                            self.xvc(cmd, tap);
                            at += used;
                        }
                        Err(why) => return self.end(ev, End::Malformed(why)),
                    }
                }
                self.pending.extend_from_slice(&data[at..]);
            }
            Protocol::Bitbang => {
                let owned;
                if !self.pending.is_empty() {
                    let mut v = std::mem::take(&mut self.pending);
                    v.extend_from_slice(data);
                    owned = v;
                    data = &owned;
                }
                for &b in data {
                    match self.bitbang(b, tap) {
                        Ok(Some(reset)) => ev.system_reset |= reset,
                        Ok(None) => {}
                        Err(end) => return self.end(ev, end),
                    }
                }
            }
            // Settled by `detect` above.
            Protocol::Unknown => {}
        }
        ev
    }

    /// Returns the pins to their idle levels (TCK low, TMS high, TRST released), so the next
    /// client finds the TAP as an unplugged cable leaves it.
    pub(crate) fn release(&mut self, tap: &mut impl Tap) {
        self.set(tap, false, true, false, true);
    }

    fn end(&mut self, mut ev: Events, why: End) -> Events {
        self.ended = true;
        self.pending.clear();
        ev.end = Some(why);
        ev
    }

    fn set(&mut self, tap: &mut impl Tap, tck: bool, tms: bool, tdi: bool, trst_n: bool) {
        let rising = tck && !self.tck;
        (self.tck, self.tms, self.tdi, self.trst_n) = (tck, tms, tdi, trst_n);
        tap.drive(tck, tms, tdi, trst_n);
        if rising {
            self.tck_cycles += 1;
            tap.run_system();
        }
    }

    fn xvc(&mut self, cmd: Xvc<'_>, tap: &mut impl Tap) {
        match cmd {
            Xvc::GetInfo => {
                self.out.push(format!("xvcServer_v1.0:{XVC_MAX_VECTOR_BYTES}\n").as_bytes());
            }
            // The simulated TCK runs as fast as the model allows; there is no period to
            // apply, so the one asked for is reported as applied (as the Xilinx reference
            // server does), keeping clients that insist on their setting content.
            Xvc::SetTck(period) => self.out.push(&period.to_le_bytes()),
            Xvc::Shift { bits, tms, tdi } => {
                let mut tdo = vec![0u8; tms.len()];
                let trst_n = self.trst_n;
                for i in 0..bits as usize {
                    let (byte, bit) = (i / 8, i % 8);
                    let m = tms[byte] >> bit & 1 != 0;
                    let d = tdi[byte] >> bit & 1 != 0;
                    // Falling edge first: TDO changes on it (IEEE 1149.1; riscv-dbg
                    // dmi_jtag_tap `p_tdo_regs` clocks td_o on the inverted TCK), then is
                    // sampled before the rising edge, on which the TAP takes TMS and TDI.
                    self.set(tap, false, m, d, trst_n);
                    if tap.tdo() {
                        tdo[byte] |= 1 << bit;
                    }
                    self.set(tap, true, m, d, trst_n);
                }
                self.out.push(&tdo);
            }
        }
    }

    /// One remote_bitbang request; `Ok(Some(true))` when it asserted srst.
    fn bitbang(&mut self, b: u8, tap: &mut impl Tap) -> Result<Option<bool>, End> {
        match b {
            b'0'..=b'7' => {
                let v = b - b'0';
                let trst_n = self.trst_n;
                self.set(tap, v & 4 != 0, v & 2 != 0, v & 1 != 0, trst_n);
            }
            b'R' => self.out.push(if tap.tdo() { b"1" } else { b"0" }),
            b'r'..=b'u' => {
                let v = b - b'r';
                let (trst, srst) = (v & 2 != 0, v & 1 != 0);
                let (tck, tms, tdi) = (self.tck, self.tms, self.tdi);
                self.set(tap, tck, tms, tdi, !trst);
                // srst resets the SoC once, when it is asserted: the simulator has no way to
                // hold the SoC in reset across socket reads, and OpenOCD pulses it anyway.
                let asserted = srst && !self.srst;
                self.srst = srst;
                return Ok(Some(asserted));
            }
            // No LED to blink; `Z`/`z` (sleep, only with `remote_bitbang use_remote_sleep`)
            // need nothing either, because the SoC keeps running between socket reads.
            b'B' | b'b' | b'Z' | b'z' => {}
            // Line ends and spaces, for a person typing at the port with netcat.
            b'\n' | b'\r' | b' ' | b'\t' => {}
            b'Q' => return Err(End::Quit),
            other => {
                return Err(End::Malformed(format!(
                    "remote_bitbang request {} is not one this JTAG-only server knows (0-7, R, r-u, B, b, Q); SWD is not wired",
                    show(other)
                )))
            }
        }
        Ok(None)
    }
}

enum Detect {
    Need,
    Is(Protocol),
    Neither(u8),
}

/// Tells the protocol from the first bytes: `first` was held back by an earlier call.
fn detect(first: Option<u8>, data: &[u8]) -> Detect {
    let mut bytes = first.into_iter().chain(data.iter().copied());
    let Some(b0) = bytes.next() else { return Detect::Need };
    match b0 {
        b'g' => Detect::Is(Protocol::Xvc),
        b's' => match bytes.next() {
            None => Detect::Need,
            Some(b'h' | b'e') => Detect::Is(Protocol::Xvc),
            Some(_) => Detect::Is(Protocol::Bitbang),
        },
        b'0'..=b'7' | b'R' | b'r'..=b'u' | b'B' | b'b' | b'Q' | b'\n' | b'\r' | b' ' | b'\t' => {
            Detect::Is(Protocol::Bitbang)
        }
        other => Detect::Neither(other),
    }
}

/// One parsed XVC command, borrowing its vectors from the input.
#[derive(Debug, PartialEq, Eq)]
enum Xvc<'a> {
    GetInfo,
    SetTck(u32),
    Shift { bits: u32, tms: &'a [u8], tdi: &'a [u8] },
}

/// Parses the command at the start of `data`: `Ok(None)` when it is incomplete (but a valid
/// beginning), else the command and the bytes it used.
fn xvc_command(data: &[u8]) -> Result<Option<(Xvc<'_>, usize)>, String> {
    if data.is_empty() {
        return Ok(None);
    }
    for (name, len) in [(&b"getinfo:"[..], 0usize), (b"settck:", 4), (b"shift:", 4)] {
        let n = name.len().min(data.len());
        if data[..n] != name[..n] {
            continue;
        }
        if data.len() < name.len() + len {
            return Ok(None);
        }
        let arg = |at: usize| u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
        return match name {
            b"getinfo:" => Ok(Some((Xvc::GetInfo, name.len()))),
            b"settck:" => Ok(Some((Xvc::SetTck(arg(7)), 11))),
            _ => {
                let bits = arg(6);
                let bytes = (bits as usize).div_ceil(8);
                if bytes > XVC_MAX_VECTOR_BYTES {
                    return Err(format!(
                        "XVC shift of {bits} bits needs {bytes}-byte vectors; this server takes at most {XVC_MAX_VECTOR_BYTES} (getinfo: says so)"
                    ));
                }
                let end = 10 + 2 * bytes;
                if data.len() < end {
                    return Ok(None);
                }
                Ok(Some((Xvc::Shift { bits, tms: &data[10..10 + bytes], tdi: &data[10 + bytes..end] }, end)))
            }
        };
    }
    let shown: String = data.iter().take(16).map(|&b| show(b)).collect::<Vec<_>>().join(" ");
    Err(format!("{shown} is not an XVC 1.0 command (getinfo:, settck:, shift:)"))
}

/// A byte for a message: printable ASCII quoted, anything else in hex.
fn show(b: u8) -> String {
    if b.is_ascii_graphic() {
        format!("'{}'", b as char)
    } else {
        format!("0x{b:02x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A software TAP after IEEE 1149.1: the 16-state controller, a 5-bit IR that captures
    /// `0b00001` (§7.1.1), IDCODE (`0x01`, selected on reset) and BYPASS (`0x1f`). TDO
    /// changes on the falling edge, as in riscv-dbg's `dmi_jtag_tap`.
    #[derive(Debug)]
    struct SoftTap {
        state: u8,
        ir: u8,
        ir_shift: u8,
        dr: u64,
        dr_len: u32,
        tdo: bool,
        tck: bool,
        trst_n: bool,
        edges: u64,
    }

    const IDCODE: u32 = 0x1000_5a57;
    // States, numbered as in the standard's diagram.
    const TLR: u8 = 0;
    const RTI: u8 = 1;
    const SEL_DR: u8 = 2;
    const CAP_DR: u8 = 3;
    const SH_DR: u8 = 4;
    const EX1_DR: u8 = 5;
    const PAU_DR: u8 = 6;
    const EX2_DR: u8 = 7;
    const UPD_DR: u8 = 8;
    const SEL_IR: u8 = 9;
    const CAP_IR: u8 = 10;
    const SH_IR: u8 = 11;
    const EX1_IR: u8 = 12;
    const PAU_IR: u8 = 13;
    const EX2_IR: u8 = 14;
    const UPD_IR: u8 = 15;

    impl SoftTap {
        fn new() -> Self {
            SoftTap {
                state: TLR,
                ir: 1,
                ir_shift: 0,
                dr: 0,
                dr_len: 1,
                tdo: false,
                tck: false,
                trst_n: true,
                edges: 0,
            }
        }

        fn next(s: u8, tms: bool) -> u8 {
            match (s, tms) {
                (TLR, true) => TLR,
                (TLR, false) => RTI,
                (RTI, true) | (UPD_DR, true) | (UPD_IR, true) => SEL_DR,
                (RTI, false) | (UPD_DR, false) | (UPD_IR, false) => RTI,
                (SEL_DR, true) => SEL_IR,
                (SEL_DR, false) => CAP_DR,
                (CAP_DR, false) | (SH_DR, false) | (EX2_DR, false) => SH_DR,
                (CAP_DR, true) | (SH_DR, true) => EX1_DR,
                (EX1_DR, false) | (PAU_DR, false) => PAU_DR,
                (EX1_DR, true) | (EX2_DR, true) => UPD_DR,
                (PAU_DR, true) => EX2_DR,
                (SEL_IR, true) => TLR,
                (SEL_IR, false) => CAP_IR,
                (CAP_IR, false) | (SH_IR, false) | (EX2_IR, false) => SH_IR,
                (CAP_IR, true) | (SH_IR, true) => EX1_IR,
                (EX1_IR, false) | (PAU_IR, false) => PAU_IR,
                (EX1_IR, true) | (EX2_IR, true) => UPD_IR,
                (PAU_IR, true) => EX2_IR,
                _ => unreachable!(),
            }
        }

        fn rising(&mut self, tms: bool, tdi: bool) {
            self.edges += 1;
            match self.state {
                CAP_DR => {
                    (self.dr, self.dr_len) = if self.ir == 1 { (IDCODE.into(), 32) } else { (0, 1) };
                }
                SH_DR => {
                    self.dr = (self.dr >> 1) | (u64::from(tdi) << (self.dr_len - 1));
                }
                CAP_IR => self.ir_shift = 0b00001,
                SH_IR => self.ir_shift = (self.ir_shift >> 1) | (u8::from(tdi) << 4),
                UPD_IR => self.ir = self.ir_shift,
                _ => {}
            }
            self.state = Self::next(self.state, tms);
            if self.state == TLR {
                self.ir = 1;
            }
        }

        fn falling(&mut self) {
            self.tdo = match self.state {
                SH_DR => self.dr & 1 != 0,
                SH_IR => self.ir_shift & 1 != 0,
                _ => self.tdo,
            };
        }
    }

    impl Tap for SoftTap {
        fn drive(&mut self, tck: bool, tms: bool, tdi: bool, trst_n: bool) {
            if !trst_n {
                self.state = TLR;
                self.ir = 1;
            }
            self.trst_n = trst_n;
            if tck && !self.tck {
                self.rising(tms, tdi);
            } else if !tck && self.tck {
                self.falling();
            }
            self.tck = tck;
        }

        fn tdo(&self) -> bool {
            self.tdo
        }

        fn run_system(&mut self) {}
    }

    fn drain(s: &mut Session) -> Vec<u8> {
        let mut v = Vec::new();
        s.out.write_to(&mut v).unwrap();
        v
    }

    fn shift(bits: u32, tms: &[u8], tdi: &[u8]) -> Vec<u8> {
        let mut v = b"shift:".to_vec();
        v.extend_from_slice(&bits.to_le_bytes());
        v.extend_from_slice(tms);
        v.extend_from_slice(tdi);
        v
    }

    /// TMS for: 5 × 1 (Test-Logic-Reset), 0 (Run-Test/Idle), 1 0 0 (Select-DR, Capture-DR,
    /// Shift-DR), then 32 shifts of which the last leaves with TMS 1, then 1 0 (Update,
    /// Idle): IDCODE is selected by the reset.
    fn read_idcode_vector() -> (u32, Vec<u8>) {
        let mut tms_bits = vec![true, true, true, true, true, false, true, false, false];
        tms_bits.extend(std::iter::repeat_n(false, 31));
        tms_bits.extend([true, true, false]);
        let bits = tms_bits.len() as u32;
        let mut tms = vec![0u8; tms_bits.len().div_ceil(8)];
        for (i, b) in tms_bits.iter().enumerate() {
            tms[i / 8] |= u8::from(*b) << (i % 8);
        }
        (bits, tms)
    }

    fn idcode_from_tdo(tdo: &[u8]) -> u32 {
        // Shift-DR is entered by bit 8 (the ninth TMS bit); bits 9..41 sample the DR.
        (0..32).fold(0u32, |acc, i| acc | (u32::from(tdo[(9 + i) / 8] >> ((9 + i) % 8) & 1) << i))
    }

    #[test]
    fn xvc_getinfo_settck_and_an_idcode_scan() {
        let mut tap = SoftTap::new();
        let mut s = Session::default();
        let mut req = b"getinfo:".to_vec();
        req.extend_from_slice(b"settck:");
        req.extend_from_slice(&100u32.to_le_bytes());
        let ev = s.feed(&req, &mut tap);
        assert_eq!(ev, Events::default());
        assert_eq!(s.protocol(), Protocol::Xvc);
        let mut want = format!("xvcServer_v1.0:{XVC_MAX_VECTOR_BYTES}\n").into_bytes();
        want.extend_from_slice(&100u32.to_le_bytes());
        assert_eq!(drain(&mut s), want);

        let (bits, tms) = read_idcode_vector();
        let tdi = vec![0u8; tms.len()];
        s.feed(&shift(bits, &tms, &tdi), &mut tap);
        let tdo = drain(&mut s);
        assert_eq!(tdo.len(), tms.len());
        assert_eq!(idcode_from_tdo(&tdo), IDCODE);
        assert_eq!(s.tck_cycles, u64::from(bits));
        assert_eq!(tap.state, RTI);
    }

    #[test]
    fn xvc_commands_split_anywhere_give_the_same_answers() {
        let (bits, tms) = read_idcode_vector();
        let mut stream = b"getinfo:".to_vec();
        stream.extend(shift(bits, &tms, &vec![0; tms.len()]));
        stream.extend(shift(0, &[], &[]));
        stream.extend(b"settck:\x0a\0\0\0");
        let whole = {
            let mut s = Session::default();
            s.feed(&stream, &mut SoftTap::new());
            drain(&mut s)
        };
        for cut in 1..stream.len() {
            let mut s = Session::default();
            let mut tap = SoftTap::new();
            let (a, b) = stream.split_at(cut);
            assert_eq!(s.feed(a, &mut tap).end, None, "cut {cut}");
            assert_eq!(s.feed(b, &mut tap).end, None, "cut {cut}");
            assert_eq!(drain(&mut s), whole, "cut at {cut}");
        }
        // Byte by byte.
        let mut s = Session::default();
        let mut tap = SoftTap::new();
        for b in &stream {
            s.feed(std::slice::from_ref(b), &mut tap);
        }
        assert_eq!(drain(&mut s), whole);
    }

    #[test]
    fn xvc_malformed_input_ends_the_session_without_panicking() {
        for bad in
            [&b"getinfo?"[..], b"shift;", b"sett", b"gx", b"shift:\xff\xff\xff\xff", b"settck:1234getinfo;"]
        {
            let mut s = Session::default();
            let mut tap = SoftTap::new();
            let mut ev = s.feed(bad, &mut tap);
            if ev.end.is_none() {
                // A valid prefix waits for more; the next byte settles it.
                ev = s.feed(b"?", &mut tap);
            }
            match &ev.end {
                Some(End::Malformed(why)) => assert!(!why.is_empty()),
                other => panic!("{bad:?}: {other:?}"),
            }
            assert!(!s.wants_input());
            assert_eq!(s.feed(b"getinfo:", &mut tap), Events::default(), "ended sessions ignore input");
        }
        // An oversized vector is refused from its header alone, before the data arrives.
        let mut s = Session::default();
        let big = (XVC_MAX_VECTOR_BYTES as u32 + 1) * 8;
        let ev = s.feed(&shift(big, &[], &[]), &mut SoftTap::new());
        assert!(matches!(ev.end, Some(End::Malformed(ref w)) if w.contains("at most")), "{ev:?}");
        // The largest vector is accepted.
        let mut s = Session::default();
        let n = XVC_MAX_VECTOR_BYTES;
        s.feed(&shift(n as u32 * 8, &vec![0; n], &vec![0; n]), &mut SoftTap::new());
        assert_eq!(drain(&mut s).len(), n);
    }

    #[test]
    fn bitbang_reads_the_idcode_and_handles_reset_blink_and_quit() {
        let mut tap = SoftTap::new();
        let mut s = Session::default();
        // Reset via TRST ('t' asserts it, 'r' releases), then Idle → Shift-DR as in the
        // XVC test, reading TDO before each rising edge like OpenOCD's bitbang driver.
        let mut req = b"Btr".to_vec();
        let mut clock = |tms: bool, read: bool| {
            let v = u8::from(tms) << 1;
            req.push(b'0' + v);
            if read {
                req.push(b'R');
            }
            req.push(b'0' + (v | 4));
        };
        for tms in [false, true, false, false] {
            clock(tms, false);
        }
        for i in 0..32 {
            clock(i == 31, true);
        }
        clock(true, false);
        clock(false, false);
        req.extend_from_slice(b"b\nQ");
        let ev = s.feed(&req, &mut tap);
        assert_eq!(s.protocol(), Protocol::Bitbang);
        assert_eq!(ev.end, Some(End::Quit));
        assert!(!ev.system_reset);
        let out = drain(&mut s);
        assert_eq!(out.len(), 32);
        let id = out.iter().enumerate().fold(0u32, |acc, (i, &c)| acc | (u32::from(c == b'1') << i));
        assert_eq!(id, IDCODE);
        assert_eq!(tap.state, RTI);
    }

    #[test]
    fn bitbang_srst_resets_once_per_assertion_and_trst_drives_the_pin() {
        let mut tap = SoftTap::new();
        let mut s = Session::default();
        assert!(s.feed(b"u", &mut tap).system_reset);
        assert!(!tap.trst_n);
        assert!(!s.feed(b"us", &mut tap).system_reset, "still asserted");
        assert!(tap.trst_n);
        assert!(!s.feed(b"r", &mut tap).system_reset);
        assert!(s.feed(b"s", &mut tap).system_reset);
    }

    #[test]
    fn the_first_bytes_choose_the_protocol() {
        let proto = |bytes: &[u8]| {
            let mut s = Session::default();
            let ev = s.feed(bytes, &mut SoftTap::new());
            (s.protocol(), ev.end.is_some())
        };
        assert_eq!(proto(b"getinfo:"), (Protocol::Xvc, false));
        assert_eq!(proto(b"shift:"), (Protocol::Xvc, false));
        assert_eq!(proto(b"settck:"), (Protocol::Xvc, false));
        assert_eq!(proto(b"s"), (Protocol::Unknown, false));
        assert_eq!(proto(b"sr"), (Protocol::Bitbang, false));
        assert_eq!(proto(b"R"), (Protocol::Bitbang, false));
        assert_eq!(proto(b"0"), (Protocol::Bitbang, false));
        assert_eq!(proto(b"\xff"), (Protocol::Unknown, true));
        assert_eq!(proto(b"X"), (Protocol::Unknown, true));
        // SWD requests are not served.
        assert_eq!(proto(b"0c"), (Protocol::Bitbang, true));
        // `s` held back, then its second byte in the next read.
        let mut s = Session::default();
        let mut tap = SoftTap::new();
        s.feed(b"s", &mut tap);
        s.feed(b"hift:\x08\0\0\0\xff\x00", &mut tap);
        assert_eq!(s.protocol(), Protocol::Xvc);
        assert_eq!(drain(&mut s), [0]);
        assert_eq!(tap.state, TLR);
    }

    #[test]
    fn random_input_never_panics_and_stays_bounded() {
        // A fixed-seed xorshift: reproducible without a dev-dependency.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..2000 {
            let mut s = Session::default();
            let mut tap = SoftTap::new();
            let prefix: &[u8] = match round % 4 {
                0 => b"shift:",
                1 => b"R",
                2 => b"settck:",
                _ => b"",
            };
            s.feed(prefix, &mut tap);
            for _ in 0..(rnd() % 8) {
                let len = (rnd() % 64) as usize;
                let chunk: Vec<u8> = (0..len).map(|_| rnd() as u8).collect();
                s.feed(&chunk, &mut tap);
                assert!(s.pending.len() <= XVC_MAX_COMMAND);
                assert!(s.out.pending() <= XVC_MAX_VECTOR_BYTES + 64);
            }
        }
    }
}
