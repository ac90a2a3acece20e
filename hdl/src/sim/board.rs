//! The few fields of a `board.toml` that `ws-sim` needs. The full, validating board loader is
//! the host driver's (`host-driver/src/board.rs`); this reader is deliberately lenient so the
//! two never disagree about which fields may exist.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::SimError;
use crate::paths;

#[derive(Debug, Deserialize)]
struct BoardFile {
    name: String,
    kind: String,
    clock_hz: u64,
    #[serde(default)]
    uart: Option<UartFile>,
    link: LinkFile,
    #[serde(default)]
    memory: Vec<MemoryFile>,
}

#[derive(Debug, Deserialize)]
struct UartFile {
    baud: u32,
}

#[derive(Debug, Deserialize)]
struct LinkFile {
    kind: String,
    #[serde(default)]
    port_base: Option<u16>,
}

#[derive(Debug, Deserialize)]
struct MemoryFile {
    name: String,
    base: u64,
    size: u64,
}

/// What the simulator takes from the board description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimBoard {
    /// Board name.
    pub name: String,
    /// Where it was read from.
    pub path: PathBuf,
    /// Core clock.
    pub clock_hz: u64,
    /// UART baud rate, if the board has a UART.
    pub baud: Option<u32>,
    /// Default port base.
    pub port_base: u16,
    /// RAM region base.
    pub ram_base: u32,
    /// RAM region size in bytes.
    pub ram_size: u32,
}

impl SimBoard {
    /// UART bit time in cycles implied by the board, used until the firmware's divisor is
    /// readable.
    pub fn uart_div(&self) -> u32 {
        match self.baud {
            Some(b) if b > 0 => ((self.clock_hz / u64::from(b)).max(4)) as u32,
            _ => 16,
        }
    }
}

/// Resolves a board path: as given if it exists, else relative to the workspace root.
pub fn resolve(path: &Path) -> PathBuf {
    if path.exists() {
        path.to_path_buf()
    } else {
        paths::in_workspace(path)
    }
}

/// Reads and checks the fields the simulator needs.
pub fn load(path: &Path) -> Result<SimBoard, SimError> {
    let path = resolve(path);
    let bad = |msg: String| SimError::Board { path: path.clone(), msg };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        bad(format!(
            "cannot read it ({e}); pass --board with the path of a board.toml, e.g. boards/sim/board.toml"
        ))
    })?;
    let f: BoardFile = toml::from_str(&text).map_err(|e| bad(format!("malformed: {e}")))?;
    if f.kind != "sim" || f.link.kind != "sim" {
        return Err(bad(format!(
            "board `{}` is kind `{}` with a `{}` link; ws-sim serves only sim boards (kind = \"sim\", [link] kind = \"sim\"), e.g. boards/sim/board.toml",
            f.name, f.kind, f.link.kind
        )));
    }
    let ram = f
        .memory
        .iter()
        .find(|m| m.name == "ram")
        .ok_or_else(|| bad("no [[memory]] region named `ram`".into()))?;
    let ram_base = u32::try_from(ram.base).map_err(|_| bad("`ram` base is above 4 GiB".into()))?;
    let ram_size = u32::try_from(ram.size).map_err(|_| bad("`ram` size is 4 GiB or more".into()))?;
    if f.clock_hz == 0 {
        return Err(bad("`clock_hz` must be above 0".into()));
    }
    Ok(SimBoard {
        name: f.name,
        path: path.clone(),
        clock_hz: f.clock_hz,
        baud: f.uart.map(|u| u.baud),
        port_base: f.link.port_base.unwrap_or(7450),
        ram_base,
        ram_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_default_sim_board() {
        let b = load(Path::new("boards/sim/board.toml")).unwrap();
        assert_eq!(b.name, "sim");
        assert_eq!(b.clock_hz, 50_000_000);
        assert_eq!(b.port_base, 7450);
        assert_eq!(b.ram_base, ws_common::regmap::map::RAM_BASE);
        assert_eq!(b.ram_size, ws_common::regmap::map::RAM_SIZE);
        assert_eq!(b.uart_div(), 16);
    }
}
