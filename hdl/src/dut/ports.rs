//! Port discovery: the top-level ports of a Verilated model, read from `V<top>.h`.
//!
//! Verilator declares each port of the top module as one macro line in the model class:
//!
//! ```text
//! VL_IN8(&clk,0,0);         // 1..8 bits   -> CData
//! VL_OUT16(&level,15,0);    // 9..16 bits  -> SData
//! VL_IN(&addr,31,0);        // 17..32 bits -> IData
//! VL_OUT64(&q,63,0);        // 33..64 bits -> QData
//! VL_INW(&x,95,0,3);        // wider       -> VlWide<words>
//! ```

/// Direction of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Driven by the testbench.
    Input,
    /// Driven by the design.
    Output,
    /// Bidirectional.
    Inout,
}

/// Storage class Verilator chose for a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// `CData`, up to 8 bits.
    C,
    /// `SData`, up to 16 bits.
    S,
    /// `IData`, up to 32 bits.
    I,
    /// `QData`, up to 64 bits.
    Q,
    /// `VlWide<words>`, more than 64 bits.
    W(u32),
}

/// One top-level port as declared in `V<top>.h`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderPort {
    /// Name (the C++ member name, which is the Verilog name for plain identifiers).
    pub name: String,
    /// Direction.
    pub dir: Direction,
    /// Most significant bit index.
    pub msb: u32,
    /// Least significant bit index.
    pub lsb: u32,
    /// C++ storage.
    pub storage: Storage,
}

impl HeaderPort {
    /// Width in bits.
    pub fn width(&self) -> u32 {
        self.msb.abs_diff(self.lsb) + 1
    }
}

/// Parses the port declarations out of a Verilator model header.
pub fn parse_header(text: &str) -> Result<Vec<HeaderPort>, String> {
    let mut ports = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("VL_") else {
            continue;
        };
        let Some(open) = rest.find('(') else {
            continue;
        };
        let (mac, args) = rest.split_at(open);
        let (dir, kind) = if let Some(k) = mac.strip_prefix("INOUT") {
            (Direction::Inout, k)
        } else if let Some(k) = mac.strip_prefix("IN") {
            (Direction::Input, k)
        } else if let Some(k) = mac.strip_prefix("OUT") {
            (Direction::Output, k)
        } else {
            continue;
        };
        let args =
            args.trim_start_matches('(').split(')').next().ok_or_else(|| format!("cannot parse `{line}`"))?;
        let parts: Vec<&str> = args.split(',').map(str::trim).collect();
        let bad = || format!("cannot parse port declaration `{line}`");
        if parts.len() < 3 {
            return Err(bad());
        }
        let name = parts[0].trim_start_matches('&').to_string();
        let msb: u32 = parts[1].parse().map_err(|_| bad())?;
        let lsb: u32 = parts[2].parse().map_err(|_| bad())?;
        let storage = match kind {
            "8" => Storage::C,
            "16" => Storage::S,
            "" => Storage::I,
            "64" => Storage::Q,
            "W" => Storage::W(parts.get(3).and_then(|w| w.parse().ok()).ok_or_else(bad)?),
            _ => continue,
        };
        ports.push(HeaderPort { name, dir, msb, lsb, storage });
    }
    if ports.is_empty() {
        return Err("no VL_IN/VL_OUT port declarations found".into());
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_storage_class() {
        let h = "class X {\n    VL_IN8(&clk,0,0);\n    VL_OUT16(&level,15,0);\n  VL_IN(&a,31,0);\n VL_OUT64(&q,63,0);\n    VL_INW(&w,95,0,3);\n VL_INOUT8(&io,3,0);\n VL_UNCOPYABLE(X);\n";
        let p = parse_header(h).unwrap();
        assert_eq!(p.len(), 6);
        assert_eq!(p[0].name, "clk");
        assert_eq!(p[0].dir, Direction::Input);
        assert_eq!(p[1].storage, Storage::S);
        assert_eq!(p[1].width(), 16);
        assert_eq!(p[2].storage, Storage::I);
        assert_eq!(p[3].storage, Storage::Q);
        assert_eq!(p[4].storage, Storage::W(3));
        assert_eq!(p[4].width(), 96);
        assert_eq!(p[5].dir, Direction::Inout);
    }

    #[test]
    fn rejects_headers_without_ports() {
        assert!(parse_header("class X {};").is_err());
    }
}
