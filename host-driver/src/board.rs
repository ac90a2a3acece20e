//! Boards are data: `boards/<name>/board.toml`, loaded into typed structs and validated.
//!
//! A board names its clock, memory regions, link and debug port. The host driver picks the
//! transport from `[link] kind`; a new board of a known link kind needs no Rust change.
//!
//! ```toml
//! name = "sim"
//! kind = "sim"
//! clock_hz = 50_000_000
//! [uart]
//! baud = 115200
//! [link]
//! kind = "sim"
//! host = "127.0.0.1"
//! port_base = 7450
//! [[memory]]
//! name = "ram"
//! base = 0x1000_0000
//! size = 0x4_0000
//! [jtag]
//! port = 7453
//! ```

use std::{
    collections::BTreeMap,
    fmt,
    net::{SocketAddr, ToSocketAddrs},
    path::{Path, PathBuf},
};

use serde::Deserialize;

use crate::error::{BoardError, Result};

/// Environment variable that selects the board when `--board` is not given.
pub const BOARD_ENV: &str = "WS_BOARD";
/// Environment variable that overrides where board folders are looked up.
pub const BOARDS_DIR_ENV: &str = "WS_BOARDS_DIR";
/// The board used when nothing selects another.
pub const DEFAULT_BOARD: &str = "sim";

/// What kind of hardware a board is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BoardKind {
    /// The Verilator simulation of the SoC.
    Sim,
    /// A real FPGA board.
    Fpga,
}

impl fmt::Display for BoardKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BoardKind::Sim => "sim",
            BoardKind::Fpga => "fpga",
        })
    }
}

/// A loaded, validated board description.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Board {
    /// Board name; equals its folder name.
    pub name: String,
    /// Simulation or hardware.
    pub kind: BoardKind,
    /// One line for people.
    #[serde(default)]
    pub description: Option<String>,
    /// Core clock in Hz.
    pub clock_hz: u64,
    /// The console UART, if the board has one.
    #[serde(default)]
    pub uart: Option<Uart>,
    /// How the host reaches the board.
    pub link: Link,
    /// Memory regions, in address order or not.
    #[serde(default)]
    pub memory: Vec<MemoryRegion>,
    /// The debug port.
    #[serde(default)]
    pub jtag: Option<Jtag>,
    /// The FPGA part (hardware boards).
    #[serde(default)]
    pub fpga: Option<Fpga>,
    /// Where the board was loaded from.
    #[serde(skip)]
    pub path: PathBuf,
}

/// `[uart]`: the console UART.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Uart {
    /// Baud rate, 8N1.
    pub baud: u32,
}

/// `[link]`: how the host reaches the board, one variant per link kind. Each kind has its
/// transport in [`crate::transport`]; [`crate::transport::open_transport`] picks it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "toml::Table")]
pub enum Link {
    /// `sim`: the simulator's TCP loopback ports.
    Sim(SimLink),
    /// `ftdi245`: an FTDI FT232H / FT2232H in synchronous 245 FIFO mode.
    Ftdi245(Ftdi245Link),
    /// `ft601`: an FTDI FT600 / FT601 (USB 3) in 245 FIFO mode.
    Ft601(Ft601Link),
    /// `usb-bulk`: a vendor-specific interface with one bulk IN and one bulk OUT endpoint.
    UsbBulk(UsbBulkLink),
    /// `xdma`: the Xilinx XDMA driver's character devices.
    Xdma(XdmaLink),
    /// `serial`: a UART.
    Serial(SerialLink),
}

/// The link kinds a board file may name, for messages.
pub const LINK_KINDS: &str = "sim, ftdi245, ft601, usb-bulk, xdma, serial";

impl Link {
    /// The `kind` string.
    pub fn kind(&self) -> &str {
        match self {
            Link::Sim(_) => "sim",
            Link::Ftdi245(_) => "ftdi245",
            Link::Ft601(_) => "ft601",
            Link::UsbBulk(_) => "usb-bulk",
            Link::Xdma(_) => "xdma",
            Link::Serial(_) => "serial",
        }
    }
}

impl TryFrom<toml::Table> for Link {
    type Error = String;

    fn try_from(mut t: toml::Table) -> Result<Self, String> {
        let kind = match t.remove("kind") {
            Some(toml::Value::String(k)) => k,
            Some(other) => return Err(format!("`link.kind` must be a string, not {}", other.type_str())),
            None => return Err(format!("`link.kind` is missing (one of: {LINK_KINDS})")),
        };
        fn typed<T: serde::de::DeserializeOwned>(kind: &str, t: toml::Table) -> Result<T, String> {
            t.try_into()
                .map_err(|e: toml::de::Error| format!("in [link] (kind = \"{kind}\"): {}", e.message()))
        }
        Ok(match kind.as_str() {
            "sim" => Link::Sim(typed(&kind, t)?),
            "ftdi245" => Link::Ftdi245(typed(&kind, t)?),
            "ft601" => Link::Ft601(typed(&kind, t)?),
            "usb-bulk" => Link::UsbBulk(typed(&kind, t)?),
            "xdma" => Link::Xdma(typed(&kind, t)?),
            "serial" => Link::Serial(typed(&kind, t)?),
            other => {
                return Err(format!("`link.kind = \"{other}\"` is not a link kind (one of: {LINK_KINDS})"))
            }
        })
    }
}

/// A USB vendor and product id, printed `0403:6010`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UsbId {
    /// Vendor id.
    pub vid: u16,
    /// Product id.
    pub pid: u16,
}

impl fmt::Display for UsbId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:04x}", self.vid, self.pid)
    }
}

/// FTDI's vendor id.
pub const FTDI_VID: u16 = 0x0403;
/// FT2232H, FT232H and FT4232H-family product ids that can run synchronous 245 FIFO mode
/// (the FT2232H on channel A, the FT232H on its only channel).
pub const FTDI245_IDS: [UsbId; 2] =
    [UsbId { vid: FTDI_VID, pid: 0x6010 }, UsbId { vid: FTDI_VID, pid: 0x6014 }];
/// FT600 / FT601 product ids (the D3XX driver's defaults).
pub const FT60X_IDS: [UsbId; 2] =
    [UsbId { vid: FTDI_VID, pid: 0x601e }, UsbId { vid: FTDI_VID, pid: 0x601f }];

/// Which USB device a link means: explicit ids, or a kind's defaults, plus a serial number.
fn usb_ids(vid: Option<u16>, pid: Option<u16>, defaults: &[UsbId]) -> Vec<UsbId> {
    match (vid, pid) {
        (Some(vid), Some(pid)) => vec![UsbId { vid, pid }],
        (Some(vid), None) => defaults.iter().filter(|d| d.vid == vid).copied().collect(),
        (None, Some(pid)) => vec![UsbId { vid: FTDI_VID, pid }],
        (None, None) => defaults.to_vec(),
    }
}

/// `[link] kind = "ftdi245"`: an FT232H or FT2232H (channel A) in synchronous 245 FIFO mode
/// (FTDI AN_130). The EEPROM must configure the channel as a 245 FIFO.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ftdi245Link {
    /// Vendor id; default FTDI (0x0403).
    #[serde(default)]
    pub vid: Option<u16>,
    /// Product id; default any of [`FTDI245_IDS`].
    #[serde(default)]
    pub pid: Option<u16>,
    /// USB serial number string, to pick one of several boards.
    #[serde(default)]
    pub serial: Option<String>,
    /// USB interface (0 = channel A, the only one with synchronous FIFO mode).
    #[serde(default)]
    pub interface: u8,
    /// Latency timer in ms (AN232B-04 §3): how long the chip holds a part-filled packet.
    #[serde(default = "default_latency_ms")]
    pub latency_ms: u8,
    /// Bytes per bulk transfer, a multiple of 512 (AN232B-03: 64 KiB is the best).
    #[serde(default = "default_usb2_transfer")]
    pub transfer_size: usize,
    /// Transfers kept in flight per direction.
    #[serde(default = "default_transfers")]
    pub transfers: usize,
}

impl Ftdi245Link {
    /// The VID:PID pairs this link accepts.
    pub fn ids(&self) -> Vec<UsbId> {
        usb_ids(self.vid, self.pid, &FTDI245_IDS)
    }
}

/// `[link] kind = "ft601"`: an FT600/FT601 in 245 FIFO mode, through the chip's session pipe
/// (EP 0x01) and the data pipes of one FIFO channel.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ft601Link {
    /// Vendor id; default FTDI.
    #[serde(default)]
    pub vid: Option<u16>,
    /// Product id; default any of [`FT60X_IDS`].
    #[serde(default)]
    pub pid: Option<u16>,
    /// USB serial number string.
    #[serde(default)]
    pub serial: Option<String>,
    /// FIFO channel 1..=4 (245 mode has only channel 1): OUT pipe 0x01 + channel, IN pipe
    /// 0x81 + channel.
    #[serde(default = "default_ft601_channel")]
    pub channel: u8,
    /// Bytes per bulk transfer, a multiple of 1024 (USB 3 packets).
    #[serde(default = "default_usb3_transfer")]
    pub transfer_size: usize,
    /// Transfers kept in flight per direction.
    #[serde(default = "default_transfers")]
    pub transfers: usize,
}

impl Ft601Link {
    /// The VID:PID pairs this link accepts.
    pub fn ids(&self) -> Vec<UsbId> {
        usb_ids(self.vid, self.pid, &FT60X_IDS)
    }
}

/// `[link] kind = "usb-bulk"`: a vendor interface with one bulk endpoint each way.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsbBulkLink {
    /// Vendor id.
    pub vid: u16,
    /// Product id.
    pub pid: u16,
    /// USB serial number string.
    #[serde(default)]
    pub serial: Option<String>,
    /// Interface number to claim.
    #[serde(default)]
    pub interface: u8,
    /// Bulk IN endpoint address (bit 7 set), e.g. 0x81.
    pub ep_in: u8,
    /// Bulk OUT endpoint address (bit 7 clear), e.g. 0x01.
    pub ep_out: u8,
    /// Bytes per bulk transfer, a multiple of 512.
    #[serde(default = "default_usb2_transfer")]
    pub transfer_size: usize,
    /// Transfers kept in flight per direction.
    #[serde(default = "default_transfers")]
    pub transfers: usize,
}

impl UsbBulkLink {
    /// The VID:PID pair.
    pub fn id(&self) -> UsbId {
        UsbId { vid: self.vid, pid: self.pid }
    }
}

/// `[link] kind = "xdma"`: `/dev/xdma{device}_h2c_{channel}`, `_c2h_{channel}` and `_user`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XdmaLink {
    /// Driver instance N of `/dev/xdmaN_*` (one per card).
    #[serde(default)]
    pub device: u32,
    /// DMA channel K of `_h2c_K` / `_c2h_K` (0..=3).
    #[serde(default)]
    pub channel: u32,
    /// Where the device nodes are; `/dev` unless a test points elsewhere.
    #[serde(default = "default_dev_dir")]
    pub dev_dir: PathBuf,
    /// Bytes of the user BAR to map (the AXI-Lite master's window), a multiple of 4 KiB.
    #[serde(default = "default_user_bar_size")]
    pub user_bar_size: usize,
    /// Bytes per DMA read or write, a multiple of 4 KiB.
    #[serde(default = "default_xdma_transfer")]
    pub transfer_size: usize,
    /// Receive buffers kept in the reader's pool.
    #[serde(default = "default_transfers")]
    pub transfers: usize,
}

impl XdmaLink {
    fn node(&self, what: &str) -> PathBuf {
        self.dev_dir.join(format!("xdma{}_{what}", self.device))
    }
    /// The host-to-card stream device.
    pub fn h2c_path(&self) -> PathBuf {
        self.node(&format!("h2c_{}", self.channel))
    }
    /// The card-to-host stream device.
    pub fn c2h_path(&self) -> PathBuf {
        self.node(&format!("c2h_{}", self.channel))
    }
    /// The user BAR device.
    pub fn user_path(&self) -> PathBuf {
        self.node("user")
    }
}

/// `[link] kind = "serial"`: a UART, 8N1, at any baud rate the adapter can make.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SerialLink {
    /// The tty, e.g. `/dev/ttyUSB0` (prefer a stable `/dev/serial/by-id/...` path).
    pub path: PathBuf,
    /// Baud rate; any value (termios2 `BOTHER`), e.g. 3_000_000.
    pub baud: u32,
    /// RTS/CTS hardware flow control.
    #[serde(default)]
    pub rtscts: bool,
}

fn default_latency_ms() -> u8 {
    2
}
fn default_usb2_transfer() -> usize {
    64 * 1024
}
fn default_usb3_transfer() -> usize {
    1024 * 1024
}
fn default_xdma_transfer() -> usize {
    1024 * 1024
}
fn default_transfers() -> usize {
    8
}
fn default_ft601_channel() -> u8 {
    1
}
fn default_dev_dir() -> PathBuf {
    "/dev".into()
}
fn default_user_bar_size() -> usize {
    64 * 1024
}

/// `[fpga]`: the part the bitstream is built for, for people and the vendor flow.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fpga {
    /// Vendor part number, e.g. `LFE5U-85F-6BG381C`.
    pub part: String,
    /// The synthesis flow: `yosys-nextpnr-ecp5`, `vivado`.
    #[serde(default)]
    pub flow: Option<String>,
}

/// `[link] kind = "sim"`: the simulator listens on consecutive loopback ports from
/// `port_base`; see [`SimPorts`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimLink {
    /// Host to connect to; loopback.
    #[serde(default = "default_host")]
    pub host: String,
    /// First port of the simulator's port block.
    pub port_base: u16,
}

fn default_host() -> String {
    "127.0.0.1".into()
}

/// The simulator's ports relative to its `port_base`, as `ws-sim` allocates them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimPorts {
    /// Host-link byte stream (control frames).
    pub link: u16,
    /// defmt log stream.
    pub log: u16,
    /// Simulator control (JSON lines).
    pub ctrl: u16,
    /// JTAG server (XVC / remote_bitbang).
    pub jtag: u16,
    /// The link engine's PHY: link protocol v2 bytes.
    pub phy: u16,
}

impl SimPorts {
    /// Ports for a base: link, log, control, JTAG and PHY in that order.
    pub fn from_base(base: u16) -> Self {
        Self {
            link: base,
            log: base.saturating_add(1),
            ctrl: base.saturating_add(2),
            jtag: base.saturating_add(3),
            phy: base.saturating_add(4),
        }
    }
}

impl SimLink {
    /// The port block this link describes.
    pub fn ports(&self) -> SimPorts {
        SimPorts::from_base(self.port_base)
    }

    /// Resolves `host:port`.
    pub fn addr(&self, port: u16) -> Result<SocketAddr> {
        resolve(&format!("{}:{}", self.host, port))
    }
}

/// One `[[memory]]` region.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryRegion {
    /// Region name (`rom`, `ram`, ...).
    pub name: String,
    /// First address.
    pub base: u64,
    /// Size in bytes.
    pub size: u64,
    /// One line for people.
    #[serde(default)]
    pub desc: Option<String>,
}

impl MemoryRegion {
    /// One past the last address.
    pub fn end(&self) -> u64 {
        self.base.saturating_add(self.size)
    }
}

/// `[jtag]`: the debug transport.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Jtag {
    /// TCP port of the simulator's JTAG server (sim boards).
    #[serde(default)]
    pub port: Option<u16>,
    /// probe-rs probe selector `VID:PID[:serial]` (hardware boards).
    #[serde(default)]
    pub probe: Option<String>,
    /// TCK frequency in kHz (hardware boards).
    #[serde(default)]
    pub speed_khz: Option<u32>,
}

impl Board {
    /// Loads a board by name (`boards/<name>/board.toml`) or by path (a `board.toml` file or
    /// a folder holding one), then validates it.
    pub fn load(name_or_path: &str) -> Result<Board> {
        let as_path = Path::new(name_or_path);
        let looks_like_path = name_or_path.contains(std::path::MAIN_SEPARATOR)
            || name_or_path.ends_with(".toml")
            || as_path.is_file();
        let (path, expect_name) = if looks_like_path {
            let file = if as_path.is_dir() { as_path.join("board.toml") } else { as_path.to_path_buf() };
            (file, None)
        } else {
            let dir = boards_dir();
            let file = dir.join(name_or_path).join("board.toml");
            if !file.is_file() {
                return Err(BoardError::NotFound {
                    name: name_or_path.into(),
                    looked: file,
                    available: available(&dir),
                }
                .into());
            }
            (file, Some(name_or_path))
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|source| BoardError::Read { path: path.clone(), source })?;
        let mut board = Board::parse(&text, &path)?;
        if let Some(want) = expect_name {
            if board.name != want {
                return Err(BoardError::Invalid {
                    path,
                    problem: format!("`name = \"{}\"` differs from its folder name `{want}`", board.name),
                }
                .into());
            }
        }
        board.path = path;
        Ok(board)
    }

    /// Loads the board named by `WS_BOARD`, or [`DEFAULT_BOARD`].
    pub fn load_default() -> Result<Board> {
        Board::load(&default_name())
    }

    /// Parses and validates board TOML; `path` is used in messages and kept in the result.
    pub fn parse(text: &str, path: &Path) -> Result<Board> {
        let mut board: Board =
            toml::from_str(text).map_err(|source| BoardError::Parse { path: path.into(), source })?;
        board.path = path.into();
        board.validate()?;
        Ok(board)
    }

    /// Checks what the types cannot: ranges, overlaps, names.
    pub fn validate(&self) -> Result<()> {
        let bad = |problem: String| Err(BoardError::Invalid { path: self.path.clone(), problem }.into());
        if self.name.is_empty()
            || !self.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return bad(format!(
                "board name `{}` must be non-empty ASCII letters, digits, `-` or `_`",
                self.name
            ));
        }
        if self.clock_hz == 0 {
            return bad("`clock_hz` must be above 0".into());
        }
        if let Some(u) = &self.uart {
            if u.baud == 0 {
                return bad("`uart.baud` must be above 0".into());
            }
        }
        match &self.link {
            Link::Sim(l) => {
                if l.port_base == 0 {
                    return bad("`link.port_base` is 0, which only private simulators use; pick a fixed port such as 7450".into());
                }
                if l.port_base > u16::MAX - 4 {
                    return bad(format!("`link.port_base` {} leaves no room for its 5 ports", l.port_base));
                }
                if let Err(e) = l.addr(l.port_base) {
                    return bad(format!("`link.host` does not resolve: {e}"));
                }
                if self.kind != BoardKind::Sim {
                    return bad("a `sim` link needs `kind = \"sim\"`".into());
                }
            }
            other => {
                if self.kind == BoardKind::Sim {
                    return bad(format!("a sim board needs `link.kind = \"sim\"`, not `{}`", other.kind()));
                }
                if let Err(problem) = validate_link(other) {
                    return bad(problem);
                }
            }
        }
        let mut names = BTreeMap::new();
        for m in &self.memory {
            if m.size == 0 {
                return bad(format!("memory region `{}` has size 0", m.name));
            }
            if m.base.checked_add(m.size).is_none_or(|end| end > 1 << 32) {
                return bad(format!("memory region `{}` runs past the 32-bit address space", m.name));
            }
            if names.insert(m.name.as_str(), m).is_some() {
                return bad(format!("memory region `{}` is listed twice", m.name));
            }
        }
        let mut sorted: Vec<_> = self.memory.iter().collect();
        sorted.sort_by_key(|m| m.base);
        for w in sorted.windows(2) {
            if w[0].end() > w[1].base {
                return bad(format!("memory regions `{}` and `{}` overlap", w[0].name, w[1].name));
            }
        }
        if let Some(j) = &self.jtag {
            if self.kind == BoardKind::Sim && j.port.is_none() {
                return bad("a sim board's `[jtag]` needs `port`".into());
            }
        }
        Ok(())
    }

    /// The sim link, or [`BoardError::NoTransport`].
    pub fn sim_link(&self) -> Result<&SimLink> {
        match &self.link {
            Link::Sim(l) => Ok(l),
            other => {
                Err(BoardError::NoTransport { board: self.name.clone(), kind: other.kind().into() }.into())
            }
        }
    }

    /// The memory region called `name`.
    pub fn memory(&self, name: &str) -> Option<&MemoryRegion> {
        self.memory.iter().find(|m| m.name == name)
    }
}

/// Checks the fields of a hardware link; the message names the field.
fn validate_link(link: &Link) -> Result<(), String> {
    fn transfers(size: usize, unit: usize, count: usize, what: &str) -> Result<(), String> {
        if size == 0 || size % unit != 0 || size > 16 << 20 {
            return Err(format!(
                "`link.transfer_size` {size} must be a non-zero multiple of {unit} bytes ({what}), at most 16 MiB"
            ));
        }
        if !(1..=64).contains(&count) {
            return Err(format!("`link.transfers` {count} must be 1..=64"));
        }
        Ok(())
    }
    fn serial(s: &Option<String>) -> Result<(), String> {
        match s {
            Some(s) if s.is_empty() => {
                Err("`link.serial` is empty: drop it, or give the USB serial number".into())
            }
            _ => Ok(()),
        }
    }
    match link {
        Link::Sim(_) => Ok(()),
        Link::Ftdi245(l) => {
            serial(&l.serial)?;
            if l.ids().is_empty() {
                return Err(format!(
                    "`link.vid` {:#06x} has no default FTDI product: give `link.pid` too",
                    l.vid.unwrap_or(0)
                ));
            }
            if l.interface != 0 {
                return Err(format!(
                    "`link.interface` {} cannot run synchronous FIFO mode: only channel A (interface 0) can (FTDI AN_130 §1)",
                    l.interface
                ));
            }
            if l.latency_ms == 0 {
                return Err("`link.latency_ms` must be 1..=255 ms (FTDI AN232B-04 §3)".into());
            }
            transfers(l.transfer_size, 512, l.transfers, "high-speed bulk packets")
        }
        Link::Ft601(l) => {
            serial(&l.serial)?;
            if l.ids().is_empty() {
                return Err(format!(
                    "`link.vid` {:#06x} has no default FT60x product: give `link.pid` too",
                    l.vid.unwrap_or(0)
                ));
            }
            if !(1..=4).contains(&l.channel) {
                return Err(format!("`link.channel` {} must be 1..=4 (FT60x FIFO channels)", l.channel));
            }
            transfers(l.transfer_size, 1024, l.transfers, "SuperSpeed bulk packets")
        }
        Link::UsbBulk(l) => {
            serial(&l.serial)?;
            if l.ep_in & 0x80 == 0 || l.ep_in & 0x0f == 0 || l.ep_in & 0x70 != 0 {
                return Err(format!(
                    "`link.ep_in` {:#04x} is not an IN endpoint address (0x81..=0x8f)",
                    l.ep_in
                ));
            }
            if l.ep_out & 0x80 != 0 || l.ep_out & 0x0f == 0 || l.ep_out & 0x70 != 0 {
                return Err(format!(
                    "`link.ep_out` {:#04x} is not an OUT endpoint address (0x01..=0x0f)",
                    l.ep_out
                ));
            }
            transfers(l.transfer_size, 512, l.transfers, "high-speed bulk packets")
        }
        Link::Xdma(l) => {
            if l.channel > 3 {
                return Err(format!(
                    "`link.channel` {} must be 0..=3 (XDMA has up to 4 channels each way)",
                    l.channel
                ));
            }
            if l.user_bar_size == 0 || l.user_bar_size % 4096 != 0 {
                return Err(format!(
                    "`link.user_bar_size` {} must be a non-zero multiple of 4096",
                    l.user_bar_size
                ));
            }
            transfers(l.transfer_size, 4096, l.transfers, "pages, as the XDMA driver maps user buffers")
        }
        Link::Serial(l) => {
            if l.path.as_os_str().is_empty() {
                return Err("`link.path` is empty: give the tty, e.g. /dev/ttyUSB0".into());
            }
            if l.baud == 0 {
                return Err("`link.baud` must be above 0".into());
            }
            Ok(())
        }
    }
}

/// The board name from `WS_BOARD`, or [`DEFAULT_BOARD`].
pub fn default_name() -> String {
    std::env::var(BOARD_ENV).ok().filter(|s| !s.is_empty()).unwrap_or_else(|| DEFAULT_BOARD.into())
}

/// Where board folders live: `WS_BOARDS_DIR`, else the nearest `boards/` folder above the
/// current directory, else the one in the source tree this driver was built from.
pub fn boards_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(BOARDS_DIR_ENV) {
        return d.into();
    }
    if let Ok(cwd) = std::env::current_dir() {
        for dir in cwd.ancestors() {
            let b = dir.join("boards");
            if b.join(DEFAULT_BOARD).join("board.toml").is_file() {
                return b;
            }
        }
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("boards")
}

/// Comma-separated names of the boards in `dir`, or a note that there are none.
fn available(dir: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("board.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    if names.is_empty() {
        format!("none in {}", dir.display())
    } else {
        names.join(", ")
    }
}

/// Resolves `host:port` to one socket address.
pub fn resolve(addr: &str) -> Result<SocketAddr> {
    let bad = |reason: String| crate::error::TransportError::BadAddress { addr: addr.into(), reason };
    let mut it = addr.to_socket_addrs().map_err(|e| bad(e.to_string()))?;
    Ok(it.next().ok_or_else(|| bad("it resolves to no address".into()))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIM: &str = r#"
name = "sim"
kind = "sim"
clock_hz = 50_000_000
[uart]
baud = 115200
[link]
kind = "sim"
host = "127.0.0.1"
port_base = 7450
[[memory]]
name = "bootrom"
base = 0x0
size = 0x2000
[[memory]]
name = "ram"
base = 0x1000_0000
size = 0x4_0000
[jtag]
port = 7453
"#;

    fn parse(text: &str) -> Result<Board> {
        Board::parse(text, Path::new("boards/test/board.toml"))
    }

    fn problem(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn sim_board_parses() {
        let b = parse(SIM).unwrap();
        assert_eq!(b.kind, BoardKind::Sim);
        let l = b.sim_link().unwrap();
        assert_eq!(l.ports(), SimPorts { link: 7450, log: 7451, ctrl: 7452, jtag: 7453, phy: 7454 });
        assert_eq!(l.addr(7450).unwrap().to_string(), "127.0.0.1:7450");
        assert_eq!(b.memory("ram").unwrap().end(), 0x1004_0000);
    }

    #[test]
    fn unknown_fields_are_refused() {
        let e = problem(&SIM.replace("clock_hz", "colck_hz = 1\nclock_hz"));
        assert!(e.contains("colck_hz"), "{e}");
        let e = problem(&SIM.replace("port_base = 7450", "port_base = 7450\nprot = 1"));
        assert!(e.contains("prot"), "{e}");
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(problem(&SIM.replace("clock_hz = 50_000_000", "clock_hz = 0")).contains("clock_hz"));
        assert!(problem(&SIM.replace("port_base = 7450", "port_base = 0")).contains("port_base"));
        let overlap = SIM.replace("size = 0x2000", "size = 0x1000_0001");
        assert!(problem(&overlap).contains("overlap"));
        let twice = SIM.replace("name = \"ram\"", "name = \"bootrom\"");
        assert!(problem(&twice).contains("twice"));
        let e = problem(&SIM.replace("kind = \"sim\"\nhost", "host"));
        assert!(e.contains("link.kind"), "{e}");
    }

    /// The sim board turned into a hardware board with `link` as its `[link]` body.
    fn fpga(link: &str) -> String {
        SIM.replace("kind = \"sim\"\nclock", "kind = \"fpga\"\nclock")
            .replace("kind = \"sim\"\nhost = \"127.0.0.1\"\nport_base = 7450", link)
            .replace(
                "[jtag]\nport = 7453",
                "[jtag]\nprobe = \"0403:6010\"\n[fpga]\npart = \"LFE5U-85F-6BG381C\"",
            )
    }

    #[test]
    fn hardware_links_parse_with_defaults() {
        let b = parse(&fpga("kind = \"ftdi245\"\nserial = \"FT1\"")).unwrap();
        let Link::Ftdi245(l) = &b.link else { panic!("{:?}", b.link) };
        assert_eq!(l.ids(), FTDI245_IDS);
        assert_eq!((l.interface, l.latency_ms, l.transfer_size, l.transfers), (0, 2, 65536, 8));
        assert_eq!(l.serial.as_deref(), Some("FT1"));
        assert_eq!(b.fpga.as_ref().unwrap().part, "LFE5U-85F-6BG381C");
        assert!(b.sim_link().unwrap_err().to_string().contains("ftdi245"));

        let b = parse(&fpga("kind = \"ftdi245\"\npid = 0x6014")).unwrap();
        let Link::Ftdi245(l) = &b.link else { panic!() };
        assert_eq!(l.ids(), [UsbId { vid: 0x0403, pid: 0x6014 }]);

        let b = parse(&fpga("kind = \"ft601\"")).unwrap();
        let Link::Ft601(l) = &b.link else { panic!() };
        assert_eq!((l.ids(), l.channel, l.transfer_size), (FT60X_IDS.to_vec(), 1, 1 << 20));

        let b = parse(&fpga(
            "kind = \"usb-bulk\"\nvid = 0x1209\npid = 0x5753\ninterface = 1\nep_in = 0x82\nep_out = 0x02",
        ))
        .unwrap();
        let Link::UsbBulk(l) = &b.link else { panic!() };
        assert_eq!((l.id().to_string(), l.interface, l.ep_in, l.ep_out), ("1209:5753".into(), 1, 0x82, 0x02));

        let b = parse(&fpga("kind = \"xdma\"\ndevice = 1\nchannel = 2")).unwrap();
        let Link::Xdma(l) = &b.link else { panic!() };
        assert_eq!(l.c2h_path(), Path::new("/dev/xdma1_c2h_2"));

        let b = parse(&fpga("kind = \"serial\"\npath = \"/dev/ttyUSB0\"\nbaud = 3_000_000")).unwrap();
        let Link::Serial(l) = &b.link else { panic!() };
        assert_eq!((l.path.as_path(), l.baud, l.rtscts), (Path::new("/dev/ttyUSB0"), 3_000_000, false));
        assert_eq!(b.link.kind(), "serial");
    }

    #[test]
    fn bad_links_name_the_file_and_the_field() {
        let cases = [
            ("kind = \"usb\"\nvid = 0x0403", "link.kind = \"usb\""),
            ("kind = \"ftdi245\"\nvdi = 1", "vdi"),
            ("kind = \"ftdi245\"\ninterface = 1", "link.interface"),
            ("kind = \"ftdi245\"\nlatency_ms = 0", "link.latency_ms"),
            ("kind = \"ftdi245\"\ntransfer_size = 1000", "link.transfer_size"),
            ("kind = \"ftdi245\"\ntransfers = 0", "link.transfers"),
            ("kind = \"ftdi245\"\nvid = 0x1234", "link.vid"),
            ("kind = \"ftdi245\"\nserial = \"\"", "link.serial"),
            ("kind = \"ft601\"\nchannel = 5", "link.channel"),
            ("kind = \"ft601\"\ntransfer_size = 512", "link.transfer_size"),
            ("kind = \"usb-bulk\"\nvid = 1\npid = 2\nep_in = 0x01\nep_out = 0x02", "link.ep_in"),
            ("kind = \"usb-bulk\"\nvid = 1\npid = 2\nep_in = 0x81\nep_out = 0x82", "link.ep_out"),
            ("kind = \"usb-bulk\"\nvid = 1\nep_in = 0x81\nep_out = 0x01", "pid"),
            ("kind = \"xdma\"\nchannel = 4", "link.channel"),
            ("kind = \"xdma\"\nuser_bar_size = 100", "link.user_bar_size"),
            ("kind = \"serial\"\npath = \"/dev/ttyUSB0\"\nbaud = 0", "link.baud"),
            ("kind = \"serial\"\nbaud = 115200", "path"),
        ];
        for (link, field) in cases {
            let e = problem(&fpga(link));
            assert!(e.contains("boards/test/board.toml"), "{link}: {e}");
            assert!(e.contains(field), "{link}: want `{field}` in: {e}");
        }
        let e = problem(
            &SIM.replace("kind = \"sim\"\nhost = \"127.0.0.1\"\nport_base = 7450", "kind = \"xdma\""),
        );
        assert!(e.contains("sim board needs"), "{e}");
    }

    #[test]
    fn shipped_boards_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../boards");
        for (name, kind) in
            [("sim", "sim"), ("ecp5-ft2232h", "ftdi245"), ("nitefury-xdma", "xdma"), ("ulx3s", "serial")]
        {
            let b = Board::load(dir.join(name).to_str().unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!((b.name.as_str(), b.link.kind()), (name, kind));
            if name != "sim" {
                assert!(b.fpga.is_some(), "{name} names its FPGA part");
                assert!(b.memory("ram").is_some());
            }
        }
    }

    #[test]
    fn missing_board_lists_what_exists() {
        let dir = std::env::temp_dir().join(format!("ws-boards-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("alpha")).unwrap();
        std::fs::write(dir.join("alpha/board.toml"), SIM.replace("\"sim\"\nkind", "\"alpha\"\nkind"))
            .unwrap();
        assert_eq!(available(&dir), "alpha");
        let b = Board::load(dir.join("alpha").to_str().unwrap()).unwrap();
        assert_eq!(b.name, "alpha");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
