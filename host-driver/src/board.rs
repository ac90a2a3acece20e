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

/// `[link]`: how the host reaches the board. Link kinds without a transport in this driver
/// still load, so `wsctl` can describe such a board; opening them fails with a clear error.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "toml::Table")]
pub enum Link {
    /// The simulator's TCP loopback ports.
    Sim(SimLink),
    /// A kind this driver has no transport for yet (`usb`, `pcie`), kept verbatim.
    Other {
        /// The `kind` value.
        kind: String,
        /// The remaining fields.
        fields: toml::Table,
    },
}

impl Link {
    /// The `kind` string.
    pub fn kind(&self) -> &str {
        match self {
            Link::Sim(_) => "sim",
            Link::Other { kind, .. } => kind,
        }
    }
}

impl TryFrom<toml::Table> for Link {
    type Error = String;

    fn try_from(mut t: toml::Table) -> Result<Self, String> {
        let kind = match t.remove("kind") {
            Some(toml::Value::String(k)) => k,
            Some(other) => return Err(format!("`link.kind` must be a string, not {}", other.type_str())),
            None => return Err("`link.kind` is missing (one of: sim, usb, pcie)".into()),
        };
        match kind.as_str() {
            "sim" => t.try_into().map(Link::Sim).map_err(|e| format!("in [link]: {}", e.message())),
            _ => Ok(Link::Other { kind, fields: t }),
        }
    }
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
}

impl SimPorts {
    /// Ports for a base: link, log, control and JTAG in that order.
    pub fn from_base(base: u16) -> Self {
        Self {
            link: base,
            log: base.saturating_add(1),
            ctrl: base.saturating_add(2),
            jtag: base.saturating_add(3),
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
                if l.port_base > u16::MAX - 3 {
                    return bad(format!("`link.port_base` {} leaves no room for its 4 ports", l.port_base));
                }
                if let Err(e) = l.addr(l.port_base) {
                    return bad(format!("`link.host` does not resolve: {e}"));
                }
                if self.kind != BoardKind::Sim {
                    return bad("a `sim` link needs `kind = \"sim\"`".into());
                }
            }
            Link::Other { kind, .. } => {
                if self.kind == BoardKind::Sim {
                    return bad(format!("a sim board needs `link.kind = \"sim\"`, not `{kind}`"));
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
            Link::Other { kind, .. } => {
                Err(BoardError::NoTransport { board: self.name.clone(), kind: kind.clone() }.into())
            }
        }
    }

    /// The memory region called `name`.
    pub fn memory(&self, name: &str) -> Option<&MemoryRegion> {
        self.memory.iter().find(|m| m.name == name)
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
        assert_eq!(l.ports(), SimPorts { link: 7450, log: 7451, ctrl: 7452, jtag: 7453 });
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

    #[test]
    fn unsupported_link_loads_but_has_no_transport() {
        let fpga = SIM.replace("kind = \"sim\"\nclock", "kind = \"fpga\"\nclock").replace(
            "kind = \"sim\"\nhost = \"127.0.0.1\"\nport_base = 7450",
            "kind = \"usb\"\nvid = 0x0403",
        );
        let b = parse(&fpga).unwrap();
        assert_eq!(b.link.kind(), "usb");
        let e = b.sim_link().unwrap_err().to_string();
        assert!(e.contains("no transport"), "{e}");
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
