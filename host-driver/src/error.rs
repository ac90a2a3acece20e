//! Typed errors: one top-level [`Error`] wrapping one enum per area.
//!
//! Every message says what failed and what to do next, so `wsctl` can print the chain as is.
//! Each variant's doc comment is its message.

use std::{io, net::SocketAddr, path::PathBuf, time::Duration};

use ws_common::ctrl::Status;

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Any failure of the host driver.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Moving bytes over a link failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The device answered wrongly, refused, or did not answer.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// Starting, stopping or querying the simulator failed.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// A board description could not be found, read or validated.
    #[error(transparent)]
    Board(#[from] BoardError),
    /// Reading or decoding defmt logs failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// Flashing through the boot ROM's link loader failed.
    #[error(transparent)]
    Loader(#[from] LoaderError),
    /// A JTAG probe, the target description or a debug step failed.
    #[error(transparent)]
    Jtag(#[from] JtagError),
    /// An ELF could not be flashed.
    #[error(transparent)]
    Flash(#[from] FlashError),
    /// A `wsctl optim` file, tensor or layer was unusable.
    #[error(transparent)]
    Optim(#[from] OptimError),
    /// A wafer-mesh shape or step was refused or went wrong.
    #[error(transparent)]
    Mesh(#[from] MeshError),
    /// A `wsctl train` configuration, data set or checkpoint was refused.
    #[error(transparent)]
    Train(#[from] crate::train::TrainError),
    /// A pipeline trace capture (docs/trace.md).
    #[error(transparent)]
    Trace(#[from] crate::trace::TraceError),
}

impl Error {
    /// The device's status when the error is a refusal, for tests that expect one.
    pub fn refusal(&self) -> Option<Status> {
        match self {
            Error::Protocol(ProtocolError::Refused { status, .. }) => Some(*status),
            _ => None,
        }
    }

    /// True when the error is a request timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Protocol(ProtocolError::Timeout { .. }))
    }
}

/// Failures of a [`crate::transport::Transport`].
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// no simulator answered at {addr} ({source}): start one with `wsctl sim start` or `cargo xtask run`
    #[error(
        "no simulator answered at {addr} ({source}): start one with `wsctl sim start` or `cargo xtask run`"
    )]
    NoSimulator {
        /// Where we tried.
        addr: SocketAddr,
        /// Why the connection failed.
        source: io::Error,
    },
    /// `{addr}` is not a usable host:port address ({reason}): pass one like `--addr 127.0.0.1:7450`
    #[error("`{addr}` is not a usable host:port address ({reason}): pass one like `--addr 127.0.0.1:7450`")]
    BadAddress {
        /// What was given.
        addr: String,
        /// What is wrong with it.
        reason: String,
    },
    /// {op} on {peer} failed ({source}): check the simulator is still running (`wsctl sim status`) and retry
    #[error("{op} on {peer} failed ({source}): check the simulator is still running (`wsctl sim status`) and retry")]
    Io {
        /// What we were doing: "send", "receive", "configure".
        op: &'static str,
        /// The link's description.
        peer: String,
        /// The OS error.
        source: io::Error,
    },
    /// {peer} closed the connection: the simulator exited or dropped the link; see `wsctl sim status` and target/ws-sim/sim.log, then reconnect
    #[error(
        "{peer} closed the connection: the simulator exited or dropped the link; see `wsctl sim status` and target/ws-sim/sim.log, then reconnect"
    )]
    Closed {
        /// The link's description.
        peer: String,
    },
    /// no USB device for {wanted} is attached (looked for {ids}{serial}; {seen}): check the cable and that the board is powered (`lsusb`); if it is listed, this user may not open it: install boards/udev/60-weightstream.rules (instructions in its header), then re-plug the board
    #[error(
        "no USB device for {wanted} is attached (looked for {ids}{serial}; {seen}): check the cable and that the board is powered (`lsusb`); if it is listed, this user may not open it: install boards/udev/60-weightstream.rules (instructions in its header), then re-plug the board"
    )]
    NoUsbDevice {
        /// The link kind and interface, e.g. "an FTDI sync-245 FIFO (ftdi245, interface 0)".
        wanted: String,
        /// The VID:PID list, comma separated.
        ids: String,
        /// Empty, or " with serial number `X`".
        serial: String,
        /// What was seen instead: other devices of those vendors, or why the bus could not be read.
        seen: String,
    },
    /// found {device} but cannot {op} ({source}): check that this user may open it (`ls -l /dev/bus/usb/BUS/DEV`; install boards/udev/60-weightstream.rules and re-plug), and that no other program (ftdi_sio, a vendor tool, another wsctl) holds interface {interface}
    #[error(
        "found {device} but cannot {op} ({source}): check that this user may open it (`ls -l /dev/bus/usb/BUS/DEV`; install boards/udev/60-weightstream.rules and re-plug), and that no other program (ftdi_sio, a vendor tool, another wsctl) holds interface {interface}"
    )]
    UsbAccess {
        /// The device, e.g. "0403:6010 on bus 1 address 7".
        device: String,
        /// What failed: "open it", "claim its interface".
        op: &'static str,
        /// The interface number.
        interface: u8,
        /// libusb's error.
        source: rusb::Error,
    },
    /// {op} on {peer} failed ({reason}): check the cable, the board's power and its bitstream (the PHY must be running), then reconnect
    #[error(
        "{op} on {peer} failed ({reason}): check the cable, the board's power and its bitstream (the PHY must be running), then reconnect"
    )]
    Device {
        /// What we were doing: "send", "receive", "configure".
        op: &'static str,
        /// The link's description.
        peer: String,
        /// What the OS or libusb reported.
        reason: String,
    },
    /// {peer} took no data for {waited:?}: the board is not draining its FIFO; check that the bitstream with the link PHY is loaded and running
    #[error(
        "{peer} took no data for {waited:?}: the board is not draining its FIFO; check that the bitstream with the link PHY is loaded and running"
    )]
    Stalled {
        /// The link's description.
        peer: String,
        /// How long the oldest transfer waited.
        waited: Duration,
    },
    /// {peer} is gone (the device was unplugged or reset): plug it back in, check `lsusb` / `lspci`, and reconnect
    #[error("{peer} is gone (the device was unplugged or reset): plug it back in, check `lsusb` / `lspci`, and reconnect")]
    DeviceGone {
        /// The link's description.
        peer: String,
    },
    /// cannot open XDMA device {} ({source}): check that the card enumerates (`lspci -d 10ee:`), that the Xilinx xdma driver is loaded (`lsmod | grep xdma`; dma_ip_drivers/XDMA/linux-kernel), that `link.device` / `link.channel` match `ls /dev/xdma*`, and that this user may open it (boards/udev/60-weightstream.rules)
    #[error(
        "cannot open XDMA device {} ({source}): check that the card enumerates (`lspci -d 10ee:`), that the Xilinx xdma driver is loaded (`lsmod | grep xdma`; dma_ip_drivers/XDMA/linux-kernel), that `link.device` / `link.channel` match `ls /dev/xdma*`, and that this user may open it (boards/udev/60-weightstream.rules)",
        path.display()
    )]
    NoXdma {
        /// The device node tried.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// cannot map {} ({len} bytes) for register access ({source}): check that the XDMA user BAR exists and is at least `link.user_bar_size` bytes (`lspci -vv -d 10ee:`)
    #[error(
        "cannot map {} ({len} bytes) for register access ({source}): check that the XDMA user BAR exists and is at least `link.user_bar_size` bytes (`lspci -vv -d 10ee:`)",
        path.display()
    )]
    BarMap {
        /// The device node.
        path: PathBuf,
        /// Bytes asked for.
        len: usize,
        /// The OS error.
        source: io::Error,
    },
    /// register offset {offset:#x} is outside {} ({len:#x} bytes) or not 4-byte aligned: registers are 32-bit words at offsets 0, 4, .. {len:#x} - 4
    #[error(
        "register offset {offset:#x} is outside {} ({len:#x} bytes) or not 4-byte aligned: registers are 32-bit words at offsets 0, 4, .. {len:#x} - 4",
        path.display()
    )]
    BarOffset {
        /// The BAR's device node.
        path: PathBuf,
        /// The offset asked for.
        offset: usize,
        /// The mapped length.
        len: usize,
    },
    /// cannot open serial port {} ({source}): check that it exists (`ls /dev/ttyUSB* /dev/ttyACM* /dev/serial/by-id/`) and that this user may open it (group `dialout`, or boards/udev/60-weightstream.rules)
    #[error(
        "cannot open serial port {} ({source}): check that it exists (`ls /dev/ttyUSB* /dev/ttyACM* /dev/serial/by-id/`) and that this user may open it (group `dialout`, or boards/udev/60-weightstream.rules)",
        path.display()
    )]
    NoSerial {
        /// The tty path.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// cannot set {} to {baud} baud 8N1 ({reason}): pick a rate the adapter can make (FT231X: up to 3 Mbaud) and the same as the firmware's UART divisor
    #[error(
        "cannot set {} to {baud} baud 8N1 ({reason}): pick a rate the adapter can make (FT231X: up to 3 Mbaud) and the same as the firmware's UART divisor",
        path.display()
    )]
    SerialConfig {
        /// The tty path.
        path: PathBuf,
        /// The rate asked for.
        baud: u32,
        /// What went wrong.
        reason: String,
    },
    /// the fake device behind {peer} is gone: a test's device closure panicked earlier; fix that test's device model
    #[error("the fake device behind {peer} is gone: a test's device closure panicked earlier; fix that test's device model")]
    FakeDeviceGone {
        /// The link's description.
        peer: String,
    },
}

/// Failures of the control protocol.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// {0}
    #[error("{0}")]
    Hello(ws_common::link::hello::HelloError),
    /// a stream call was refused: {0}
    #[error("{0}")]
    Stream(crate::link::StreamError),
    /// bulk echo failed: {0}
    #[error("bulk echo failed: {0}; the board's echo windows are the firmware's default (docs/link-engine.md \"Echo mode\"): check `wsctl link stats`")]
    Echo(String),
    /// no link v2 HELLO answer from {peer} after {waited}: the firmware may predate link protocol v2 (flash one built from this checkout with `wsctl flash`), be hung or still booting; check `wsctl logs`
    #[error(
        "no link v2 HELLO answer from {peer} after {waited}: the firmware may predate link protocol v2 (flash one built from this checkout with `wsctl flash`), be hung or still booting; check `wsctl logs`"
    )]
    NoHello {
        /// The link's description.
        peer: String,
        /// How long we waited (`board_time::Deadline::describe`).
        waited: String,
    },
    /// no answer to {command} (request {req_id}) from {peer} after {waited}{frame_errors}: the firmware may be hung, still booting or not running; check `wsctl logs` and `wsctl sim status`, or raise the timeout (`--timeout-ms`)
    #[error(
        "no answer to {command} (request {req_id}) from {peer} after {waited}{frame_errors}: the firmware may be hung, still booting or not running; check `wsctl logs` and `wsctl sim status`, or raise the timeout (`--timeout-ms`)"
    )]
    Timeout {
        /// Command name.
        command: &'static str,
        /// Request id that went unanswered.
        req_id: u16,
        /// The link's description.
        peer: String,
        /// How long we waited: wall time, and board time on the simulator
        /// (`board_time::Deadline::describe`).
        waited: String,
        /// Empty, or a note about frame errors the device reported meanwhile.
        frame_errors: String,
    },
    /// the device refused {command}: {} ({status:?}){context}
    #[error("the device refused {command}: {} ({status:?}){context}", status.describe())]
    Refused {
        /// Command name.
        command: &'static str,
        /// The device's status byte.
        status: Status,
        /// Empty, or " at 0x…" style detail added by the typed helper.
        context: String,
    },
    /// could not parse the device's answer to {command} ({}): host and firmware disagree on the protocol; rebuild both from the same commit
    #[error(
        "could not parse the device's answer to {command} ({}): host and firmware disagree on the protocol; rebuild both from the same commit",
        status.describe()
    )]
    BadResponse {
        /// Command name.
        command: &'static str,
        /// Why decoding failed.
        status: Status,
    },
    /// could not encode {command} ({}): the request is larger than a frame or malformed; split it or fix its arguments
    #[error(
        "could not encode {command} ({}): the request is larger than a frame or malformed; split it or fix its arguments",
        status.describe()
    )]
    Encode {
        /// Command name.
        command: &'static str,
        /// Why encoding failed.
        status: Status,
    },
    /// ping echo mismatch: sent nonce {sent:#010x}, got {got:#010x}; the link delivered a stale or corrupted answer, retry and check `wsctl stats` for bad frames
    #[error(
        "ping echo mismatch: sent nonce {sent:#010x}, got {got:#010x}; the link delivered a stale or corrupted answer, retry and check `wsctl stats` for bad frames"
    )]
    EchoMismatch {
        /// Nonce sent.
        sent: u32,
        /// Nonce echoed.
        got: u32,
    },
    /// peek at {addr:#010x} asked for {want} bytes but the device returned {got}: host and firmware disagree on the protocol; rebuild both from the same commit
    #[error(
        "peek at {addr:#010x} asked for {want} bytes but the device returned {got}: host and firmware disagree on the protocol; rebuild both from the same commit"
    )]
    ShortPeek {
        /// Chunk start address.
        addr: u32,
        /// Bytes requested.
        want: usize,
        /// Bytes returned.
        got: usize,
    },
    /// the range at {addr:#010x} + {len} bytes wraps past the end of the 32-bit address space: use a smaller length
    #[error("the range at {addr:#010x} + {len} bytes wraps past the end of the 32-bit address space: use a smaller length")]
    AddressOverflow {
        /// Start address.
        addr: u32,
        /// Length asked for.
        len: usize,
    },
    /// the board's trace ends at byte {end} of channel 6 but only {got} of its {want} bytes arrived after {waited}: {why}
    #[error(
        "the board's trace ends at byte {end} of channel 6 but only {got} of its {want} bytes arrived after {waited}: {why}; check `wsctl link stats` (channel 6) and `wsctl logs`"
    )]
    TraceIncomplete {
        /// The trace's end on the channel's stream.
        end: u32,
        /// Bytes it holds.
        want: u32,
        /// Bytes that arrived.
        got: u32,
        /// How long we waited.
        waited: String,
        /// What the host knows of the cause.
        why: &'static str,
    },
}

/// Failures of simulator process management.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// could not find the `ws-sim` binary (looked at {}): build it with `cargo build -p ws-hdl --bin ws-sim`, or point WS_SIM_BIN at it
    #[error(
        "could not find the `ws-sim` binary (looked at {}): build it with `cargo build -p ws-hdl --bin ws-sim`, or point WS_SIM_BIN at it",
        list_paths(looked)
    )]
    BinaryNotFound {
        /// Every place we looked.
        looked: Vec<PathBuf>,
    },
    /// firmware ELF {} does not exist: build it with `cd firmware && cargo build --release`, or pass `--elf PATH`
    #[error(
        "firmware ELF {} does not exist: build it with `cd firmware && cargo build --release`, or pass `--elf PATH`",
        path.display()
    )]
    ElfNotFound {
        /// The path given or defaulted.
        path: PathBuf,
    },
    /// could not start {} ({source}): check that the file is an executable ws-sim build, or rebuild it with `cargo build -p ws-hdl --bin ws-sim`
    #[error(
        "could not start {} ({source}): check that the file is an executable ws-sim build, or rebuild it with `cargo build -p ws-hdl --bin ws-sim`",
        bin.display()
    )]
    Spawn {
        /// The binary.
        bin: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// the simulator did not report READY within {waited:?}; the last lines of {}:\n{tail}\nfix the problem shown above, or wait longer (WS_SIM_READY_TIMEOUT=seconds; the first start builds the Verilated model)
    #[error(
        "the simulator did not report READY within {waited:?}; the last lines of {}:\n{tail}\nfix the problem shown above, or wait longer (WS_SIM_READY_TIMEOUT=seconds; the first start builds the Verilated model)",
        log.display()
    )]
    NotReady {
        /// How long we waited.
        waited: Duration,
        /// Where its output went.
        log: PathBuf,
        /// The end of that output.
        tail: String,
    },
    /// the simulator exited ({status}) before it was ready; the last lines of {}:\n{tail}\nfix the problem shown above and start it again
    #[error(
        "the simulator exited ({status}) before it was ready; the last lines of {}:\n{tail}\nfix the problem shown above and start it again",
        log.display()
    )]
    ExitedEarly {
        /// Exit status as text.
        status: String,
        /// Where its output went.
        log: PathBuf,
        /// The end of that output.
        tail: String,
    },
    /// the firmware did not answer a ping within {cycles} simulated cycles (limit {limit}{}; LEDs {leds:#04x}); the board's log ended with:\n{last_log}\ncheck the firmware ELF (`cargo xtask build`), or allow more cycles (WS_SIM_BOOT_CYCLES)
    #[error(
        "the firmware did not answer a ping within {cycles} simulated cycles (limit {limit}{}; LEDs {leds:#04x}); the board's log ended with:\n{last_log}\ncheck the firmware ELF (`cargo xtask build`), or allow more cycles (WS_SIM_BOOT_CYCLES)",
        if *stalled { ", and the simulator's clock stopped" } else { "" }
    )]
    NoBoot {
        /// Cycles simulated while waiting.
        cycles: u64,
        /// The limit.
        limit: u64,
        /// The simulator's clock stood still (paused or hung).
        stalled: bool,
        /// The GPIO outputs: 0x3c is the boot ROM's loader, 0xa5 the firmware's stop.
        leds: u64,
        /// The last lines of the decoded defmt log.
        last_log: String,
    },
    /// a simulator is already running (pid {pid}, control {ctrl}): stop it with `wsctl sim stop`, or use it as it is
    #[error("a simulator is already running (pid {pid}, control {ctrl}): stop it with `wsctl sim stop`, or use it as it is")]
    AlreadyRunning {
        /// Its pid.
        pid: u32,
        /// Its control address.
        ctrl: SocketAddr,
    },
    /// no simulator is running ({reason}): start one with `wsctl sim start`
    #[error("no simulator is running ({reason}): start one with `wsctl sim start`")]
    NotRunning {
        /// Why we think so.
        reason: String,
    },
    /// the simulator's control port {addr} failed during `{command}` ({source}): check `wsctl sim status`; if it is wedged, `wsctl sim stop` kills it
    #[error(
        "the simulator's control port {addr} failed during `{command}` ({source}): check `wsctl sim status`; if it is wedged, `wsctl sim stop` kills it"
    )]
    Ctrl {
        /// Control address.
        addr: SocketAddr,
        /// The line we sent.
        command: String,
        /// The I/O error.
        source: io::Error,
    },
    /// the simulator answered `{command}` with `{reply}`, which is not the JSON expected: ws-sim and wsctl are out of step; rebuild both from the same commit
    #[error(
        "the simulator answered `{command}` with `{reply}`, which is not the JSON expected: ws-sim and wsctl are out of step; rebuild both from the same commit"
    )]
    CtrlReply {
        /// The line we sent.
        command: String,
        /// What came back.
        reply: String,
    },
    /// could not {op} the simulator state file {} ({source}): check the permissions of its folder, or delete the file
    #[error(
        "could not {op} the simulator state file {} ({source}): check the permissions of its folder, or delete the file",
        path.display()
    )]
    StateIo {
        /// "read", "write" or "remove".
        op: &'static str,
        /// The state file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// the simulator state file {} is corrupt ({source}): delete it; if a simulator is still running, stop it by its pid
    #[error(
        "the simulator state file {} is corrupt ({source}): delete it; if a simulator is still running, stop it by its pid",
        path.display()
    )]
    StateParse {
        /// The state file.
        path: PathBuf,
        /// The parse error.
        source: serde_json::Error,
    },
    /// could not open the simulator log {} ({source}): check the permissions of target/ws-sim
    #[error("could not open the simulator log {} ({source}): check the permissions of target/ws-sim", path.display())]
    LogFile {
        /// The log file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// simulator pid {pid} is still alive after SIGKILL: it may be stuck in the kernel; check it with `ps -p {pid}`
    #[error("simulator pid {pid} is still alive after SIGKILL: it may be stuck in the kernel; check it with `ps -p {pid}`")]
    Unkillable {
        /// Its pid.
        pid: u32,
    },
    /// the simulator refused `{command}`: {reason}
    #[error("the simulator refused `{command}`: {reason}")]
    CtrlRefused {
        /// The line we sent.
        command: String,
        /// The simulator's `error` field, which says what to do.
        reason: String,
    },
    /// interrupted while waiting for the simulator to become ready; it was stopped (its output is in {}): run `wsctl sim start` again
    #[error(
        "interrupted while waiting for the simulator to become ready; it was stopped (its output is in {}): run `wsctl sim start` again",
        log.display()
    )]
    Cancelled {
        /// Where its output went.
        log: PathBuf,
    },
}

/// Failures to find, read or validate a board description.
#[derive(Debug, thiserror::Error)]
pub enum BoardError {
    /// no board `{name}` (looked for {}); boards available: {available}: pass `--board` with one of them or a path to a board.toml, or set WS_BOARD
    #[error(
        "no board `{name}` (looked for {}); boards available: {available}: pass `--board` with one of them or a path to a board.toml, or set WS_BOARD",
        looked.display()
    )]
    NotFound {
        /// The name asked for.
        name: String,
        /// The file we expected.
        looked: PathBuf,
        /// Boards found in the boards folder, comma separated.
        available: String,
    },
    /// could not read board file {} ({source}): check that it exists and is readable
    #[error("could not read board file {} ({source}): check that it exists and is readable", path.display())]
    Read {
        /// The board file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// {} is not a valid board file: {source}fix it (docs/host.md lists the fields)
    #[error("{} is not a valid board file: {source}fix it (docs/host.md lists the fields)", path.display())]
    Parse {
        /// The board file.
        path: PathBuf,
        /// The TOML error, which quotes the offending line.
        source: toml::de::Error,
    },
    /// {}: {problem}; fix the board file (docs/host.md lists the fields)
    #[error("{}: {problem}; fix the board file (docs/host.md lists the fields)", path.display())]
    Invalid {
        /// The board file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// board `{board}` uses link kind `{kind}`, which this host driver has no transport for yet: use the sim board, pass `--addr` to reach a simulator, or add a transport (docs/host.md)
    #[error(
        "board `{board}` uses link kind `{kind}`, which this host driver has no transport for yet: use the sim board, pass `--addr` to reach a simulator, or add a transport (docs/host.md)"
    )]
    NoTransport {
        /// Board name.
        board: String,
        /// The link kind.
        kind: String,
    },
}

/// Failures reading or decoding defmt logs.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// could not read firmware ELF {} ({source}): build it with `cd firmware && cargo build --release`, or pass `--elf PATH`
    #[error(
        "could not read firmware ELF {} ({source}): build it with `cd firmware && cargo build --release`, or pass `--elf PATH`",
        path.display()
    )]
    ReadElf {
        /// The ELF path.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// {} has no `.defmt` section, so it cannot decode logs: pass the defmt firmware ELF the simulator runs
    #[error("{} has no `.defmt` section, so it cannot decode logs: pass the defmt firmware ELF the simulator runs", path.display())]
    NoDefmt {
        /// The ELF path.
        path: PathBuf,
    },
    /// could not read the defmt table of {} ({reason}): rebuild the firmware with a defmt version this host decodes (wire format 3 or 4)
    #[error(
        "could not read the defmt table of {} ({reason}): rebuild the firmware with a defmt version this host decodes (wire format 3 or 4)",
        path.display()
    )]
    Table {
        /// The ELF path.
        path: PathBuf,
        /// What defmt-decoder reported.
        reason: String,
    },
    /// no log stream answered at {addr} ({source}): start a simulator with `wsctl sim start`, or check its log port with `wsctl sim status`
    #[error(
        "no log stream answered at {addr} ({source}): start a simulator with `wsctl sim start`, or check its log port with `wsctl sim status`"
    )]
    Connect {
        /// The log address.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
    /// reading the log stream from {addr} failed ({source}): the simulator may have exited; check `wsctl sim status`
    #[error("reading the log stream from {addr} failed ({source}): the simulator may have exited; check `wsctl sim status`")]
    Io {
        /// The log address.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
}

fn list_paths(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// Failures of the JTAG debug path: probes, the target description, and each debug step.
#[derive(Debug, thiserror::Error)]
pub enum JtagError {
    /// no JTAG server answered at {addr} ({source}): start the simulator with `wsctl sim start`, or pass `--jtag HOST:PORT` (ws-sim's JTAG port is its link port + 3)
    #[error(
        "no JTAG server answered at {addr} ({source}): start the simulator with `wsctl sim start`, or pass `--jtag HOST:PORT` (ws-sim's JTAG port is its link port + 3)"
    )]
    Connect {
        /// Where we tried.
        addr: SocketAddr,
        /// Why the connection failed.
        source: io::Error,
    },
    /// the JTAG server at {addr} did not greet as expected ({reason}): check that this is ws-sim's JTAG port (`wsctl sim status` shows it) and that the protocol (`--wire`) is right
    #[error(
        "the JTAG server at {addr} did not greet as expected ({reason}): check that this is ws-sim's JTAG port (`wsctl sim status` shows it) and that the protocol (`--wire`) is right"
    )]
    Hello {
        /// The server.
        addr: SocketAddr,
        /// What went wrong.
        reason: String,
    },
    /// the JTAG server at {addr} is busy ({reply}): another debugger (OpenOCD, probe-rs, a second wsctl) is attached; detach it and retry
    #[error(
        "the JTAG server at {addr} is busy ({reply}): another debugger (OpenOCD, probe-rs, a second wsctl) is attached; detach it and retry"
    )]
    Busy {
        /// The server.
        addr: SocketAddr,
        /// What it said.
        reply: String,
    },
    /// no probe-rs target description (*.yaml) in {}: add the board's ChipFamily YAML beside its board.toml (boards/sim/weightstream.yaml is the reference)
    #[error(
        "no probe-rs target description (*.yaml) in {}: add the board's ChipFamily YAML beside its board.toml (boards/sim/weightstream.yaml is the reference)",
        dir.display()
    )]
    NoTarget {
        /// The board folder.
        dir: PathBuf,
    },
    /// the target description {} is unusable: {reason}
    #[error("the target description {} is unusable: {reason}", path.display())]
    Target {
        /// The YAML file (or its folder).
        path: PathBuf,
        /// What is wrong, and what to change.
        reason: String,
    },
    /// board `{board}` names no JTAG probe: pass `--probe VID:PID[:SERIAL]`, or set `[jtag] probe` in its board.toml
    #[error("board `{board}` names no JTAG probe: pass `--probe VID:PID[:SERIAL]`, or set `[jtag] probe` in its board.toml")]
    NoProbe {
        /// The board.
        board: String,
    },
    /// cannot open the JTAG probe `{selector}` ({reason}): check that it is plugged in and that this user may open it (udev rules), and that the selector is `VID:PID[:SERIAL]` in hex
    #[error(
        "cannot open the JTAG probe `{selector}` ({reason}): check that it is plugged in and that this user may open it (udev rules), and that the selector is `VID:PID[:SERIAL]` in hex"
    )]
    Probe {
        /// The selector given.
        selector: String,
        /// What probe-rs reported.
        reason: String,
    },
    /// {step} failed over JTAG: {reason}; {hint}
    #[error("{step} failed over JTAG: {reason}; {hint}")]
    Step {
        /// The step, e.g. "halting the core", "writing RAM at 0x10000400".
        step: String,
        /// What probe-rs or the probe reported, with its causes.
        reason: String,
        /// What to do next.
        hint: &'static str,
    },
    /// {step}: the core did not {what} within {waited:?}: it may be held in reset or the debug module may be wedged; run `wsctl reset --via jtag`, then retry
    #[error(
        "{step}: the core did not {what} within {waited:?}: it may be held in reset or the debug module may be wedged; run `wsctl reset --via jtag`, then retry"
    )]
    Timeout {
        /// The step.
        step: String,
        /// What it did not do: "halt", "resume".
        what: &'static str,
        /// How long we waited.
        waited: Duration,
    },
}

/// Failures to flash an ELF image.
#[derive(Debug, thiserror::Error)]
pub enum FlashError {
    /// could not read the ELF {} ({source}): build the firmware with `cd firmware && cargo build --release`, or pass the right path
    #[error(
        "could not read the ELF {} ({source}): build the firmware with `cd firmware && cargo build --release`, or pass the right path",
        path.display()
    )]
    ReadElf {
        /// The path given.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// {what} is not a usable 32-bit RISC-V ELF ({reason}): pass the firmware ELF (target/riscv32imc-unknown-none-elf/release/ws-firmware)
    #[error(
        "{what} is not a usable 32-bit RISC-V ELF ({reason}): pass the firmware ELF (target/riscv32imc-unknown-none-elf/release/ws-firmware)"
    )]
    BadElf {
        /// The file.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// {what} has no PT_LOAD segment with data: nothing to flash; pass a linked firmware ELF
    #[error("{what} has no PT_LOAD segment with data: nothing to flash; pass a linked firmware ELF")]
    Empty {
        /// The file.
        what: String,
    },
    /// {what}: its segment {kind} {start:#010x}..{end:#010x} lies outside the target's RAM ({ram}); nothing was written: link the firmware for this board's memory map (firmware/memory.x)
    #[error(
        "{what}: its segment {kind} {start:#010x}..{end:#010x} lies outside the target's RAM ({ram}); nothing was written: link the firmware for this board's memory map (firmware/memory.x)"
    )]
    OutsideRam {
        /// The file.
        what: String,
        /// "load range" (physical, written) or "run-time range" (virtual, with .bss).
        kind: &'static str,
        /// First address.
        start: u64,
        /// One past the last.
        end: u64,
        /// The RAM regions, for the message.
        ram: String,
    },
    /// verifying RAM after the write failed at {addr:#010x}: wrote {want:#04x}, read back {got:#04x}; the write did not take: flash again, and check the board (`wsctl sim status`)
    #[error(
        "verifying RAM after the write failed at {addr:#010x}: wrote {want:#04x}, read back {got:#04x}; the write did not take: flash again, and check the board (`wsctl sim status`)"
    )]
    Verify {
        /// First differing address.
        addr: u64,
        /// Byte written.
        want: u8,
        /// Byte read.
        got: u8,
    },
}

/// Failures of flashing through the boot ROM's link loader (`host_driver::loader`).
#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    /// could not read firmware ELF {} ({source}): build it with `cargo xtask build`, or pass the right path
    #[error("could not read firmware ELF {} ({source}): build it with `cargo xtask build`, or pass the right path", path.display())]
    ReadElf {
        /// The ELF path.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// {what} is not a usable firmware ELF: {why}
    #[error("{what} is not a usable firmware ELF: {why}")]
    BadElf {
        /// The file.
        what: String,
        /// What is wrong.
        why: String,
    },
    /// the boot ROM refuses {what}: {why}; nothing was booted and the board waits in its loader for another try
    #[error("the boot ROM refuses {what}: {why}; nothing was booted and the board waits in its loader for another try")]
    Refused {
        /// What was refused.
        what: String,
        /// The boot ROM's reason.
        why: String,
    },
    /// no answer while waiting for {what} within {waited:?}: check `wsctl logs` and `wsctl sim status`; the board may be stuck in its boot ROM (LEDs 0x3c) or have faulted
    #[error("no answer while waiting for {what} within {waited:?}: check `wsctl logs` and `wsctl sim status`; the board may be stuck in its boot ROM (LEDs 0x3c) or have faulted")]
    NoAnswer {
        /// What we waited for.
        what: &'static str,
        /// How long.
        waited: Duration,
    },
}

/// Failures of the wafer mesh (`host_driver::mesh`).
#[derive(Debug, thiserror::Error)]
pub enum MeshError {
    /// The shape cannot run on any mesh.
    #[error("MLP {dims:?} with {b} samples per PE: {source}")]
    Shape {
        /// Layer widths.
        dims: Vec<usize>,
        /// Samples per PE.
        b: usize,
        /// Why.
        source: ws_common::mesh::StepError,
    },
    /// A step was asked before a setup, or with data that does not match it.
    #[error("{0}")]
    Usage(String),
    /// {board} {what}
    #[error("{board} {what}")]
    Board {
        /// The board.
        board: String,
        /// What went wrong, and what to do.
        what: String,
    },
}

/// Failures of the MemoryX optimizer runs (`host_driver::optim`): the safetensors files, their
/// tensors' names and shapes, and layers a device does not have.
#[derive(Debug, thiserror::Error)]
pub enum OptimError {
    /// could not read {} ({source}): check the path (`wsctl optim example --out-dir DIR` writes a model and gradients to try)
    #[error(
        "could not read {} ({source}): check the path (`wsctl optim example --out-dir DIR` writes a model and gradients to try)",
        path.display()
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// could not write {} ({source}): check that its folder exists and is writable
    #[error("could not write {} ({source}): check that its folder exists and is writable", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// {what} is not a safetensors file ({reason}): save it with `safetensors.torch.save_file` (or `save_file` of safetensors.numpy)
    #[error(
        "{what} is not a safetensors file ({reason}): save it with `safetensors.torch.save_file` (or `save_file` of safetensors.numpy)"
    )]
    Parse {
        /// The file.
        what: String,
        /// What the safetensors crate reported.
        reason: String,
    },
    /// {what} holds no tensors: pass a model with at least one F32 tensor
    #[error("{what} holds no tensors: pass a model with at least one F32 tensor")]
    NoTensors {
        /// The file.
        what: String,
    },
    /// tensor `{tensor}` in {what} is {dtype}, not F32: MemoryX keeps binary32; convert it (`t.float()`) and save the file again
    #[error(
        "tensor `{tensor}` in {what} is {dtype}, not F32: MemoryX keeps binary32; convert it (`t.float()`) and save the file again"
    )]
    Dtype {
        /// The file.
        what: String,
        /// The tensor.
        tensor: String,
        /// Its dtype.
        dtype: String,
    },
    /// tensor `{tensor}` in {what} has no elements (shape {shape:?}): a MemoryX layer needs at least one parameter; drop the tensor from the file
    #[error(
        "tensor `{tensor}` in {what} has no elements (shape {shape:?}): a MemoryX layer needs at least one parameter; drop the tensor from the file"
    )]
    Empty {
        /// The file.
        what: String,
        /// The tensor.
        tensor: String,
        /// Its shape.
        shape: Vec<usize>,
    },
    /// tensor `{tensor}` in {what} has {len} elements, more than a layer holds (2^32 - 1): split it
    #[error("tensor `{tensor}` in {what} has {len} elements, more than a layer holds (2^32 - 1): split it")]
    TooLarge {
        /// The file.
        what: String,
        /// The tensor.
        tensor: String,
        /// Its element count.
        len: usize,
    },
    /// {what} has {count} tensors, more than the 65536 layers MemoryX numbers: merge or drop some
    #[error("{what} has {count} tensors, more than the 65536 layers MemoryX numbers: merge or drop some")]
    TooManyLayers {
        /// The file.
        what: String,
        /// How many.
        count: usize,
    },
    /// {what} has no gradient `{name}`: the gradients file needs `step{{t}}/{{N}}` for every step t = 1..K and every model tensor N (docs/host.md "wsctl optim"); add it or pass fewer `--steps`
    #[error(
        "{what} has no gradient `{name}`: the gradients file needs `step{{t}}/{{N}}` (or, with `--wafers W`, `step{{t}}/wafer{{k}}/{{N}}` for k = 0..W-1) for every step t = 1..K and every model tensor N (docs/host.md \"wsctl optim\"); add it or pass fewer `--steps`"
    )]
    MissingGrad {
        /// The file.
        what: String,
        /// The tensor name looked for.
        name: String,
    },
    /// gradient `{name}` in {what} has shape {got:?} but its tensor has {want:?}: save the gradient with the parameter's shape
    #[error("gradient `{name}` in {what} has shape {got:?} but its tensor has {want:?}: save the gradient with the parameter's shape")]
    GradShape {
        /// The gradient tensor.
        name: String,
        /// The file.
        what: String,
        /// Its shape.
        got: Vec<usize>,
        /// The model tensor's shape.
        want: Vec<usize>,
    },
    /// the run asks for {steps} steps but the gradients hold {have}: pass `--steps {have}` or fewer
    #[error("the run asks for {steps} steps but the gradients hold {have}: pass `--steps {have}` or fewer")]
    TooFewSteps {
        /// Steps asked for.
        steps: u32,
        /// Steps loaded.
        have: u32,
    },
    /// {board} {what}
    #[error("{board} {what}")]
    Board {
        /// The board, as the device describes itself.
        board: String,
        /// What went wrong, and what to do.
        what: String,
    },
    /// layer {layer} does not exist on {device}: create it first (`create_layer`)
    #[error("layer {layer} does not exist on {device}: create it first (`create_layer`)")]
    NoLayer {
        /// The layer.
        layer: u16,
        /// The device.
        device: String,
    },
    /// layer {layer} already exists on {device}: use another layer number or a fresh device
    #[error("layer {layer} already exists on {device}: use another layer number or a fresh device")]
    LayerExists {
        /// The layer.
        layer: u16,
        /// The device.
        device: String,
    },
    /// layer {layer} is {want} parameters long, but {what} has {got}: pass exactly one word per parameter
    #[error(
        "layer {layer} is {want} parameters long, but {what} has {got}: pass exactly one word per parameter"
    )]
    Length {
        /// The layer.
        layer: u16,
        /// What was passed: "the gradient", "the w array".
        what: String,
        /// Its length.
        got: usize,
        /// The layer's length.
        want: u32,
    },
    /// a layer of 0 parameters was asked for (layer {layer}): give it at least one
    #[error("a layer of 0 parameters was asked for (layer {layer}): give it at least one")]
    ZeroLength {
        /// The layer.
        layer: u16,
    },
    /// step {t} is not the next step of layer {layer} (it is at step {at}): run steps 1, 2, .. in order
    #[error(
        "step {t} is not the next step of layer {layer} (it is at step {at}): run steps 1, 2, .. in order"
    )]
    StepOrder {
        /// The step asked for.
        t: u32,
        /// The layer.
        layer: u16,
        /// The layer's last step.
        at: u32,
    },
    /// {wafers} wafers' gradients cannot be reduced by {device}, whose SwarmX node has {ports} ports: use at most {ports} wafers
    #[error(
        "{wafers} wafers' gradients cannot be reduced by {device}, whose SwarmX node has {ports} ports: use at most {ports} wafers"
    )]
    Wafers {
        /// Wafers asked for.
        wafers: u32,
        /// The node's downstream ports.
        ports: usize,
        /// The device.
        device: String,
    },
    /// could not encode {what} as safetensors ({reason}): this is a bug; report it with the command line
    #[error(
        "could not encode {what} as safetensors ({reason}): this is a bug; report it with the command line"
    )]
    Encode {
        /// The file.
        what: String,
        /// What the safetensors crate reported.
        reason: String,
    },
}
