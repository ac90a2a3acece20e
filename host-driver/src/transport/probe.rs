//! What link devices this host can see: USB chips with the VID:PIDs the transports know (and
//! those the board files name), XDMA device nodes, and serial ports. `wsctl devices` prints
//! it; nothing here opens a link.

use std::path::{Path, PathBuf};

use rusb::UsbContext;

use crate::board::{self, Board, Link, UsbId, FT60X_IDS, FTDI245_IDS, FTDI_VID};

/// One device found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// "usb", "xdma", "serial".
    pub bus: &'static str,
    /// The device: "0403:6010 on bus 1 address 7, serial FT1", "/dev/xdma0_h2c_0".
    pub device: String,
    /// What it is and which link kinds can use it: "FT2232H: ftdi245 (channel A)".
    pub what: String,
    /// A problem worth saying, such as no permission to open it.
    pub note: Option<String>,
}

/// The USB ids the transports know, with a name for each.
fn known_usb(boards: &[Board]) -> Vec<(UsbId, String)> {
    let mut v: Vec<(UsbId, String)> = vec![
        (FTDI245_IDS[0], "FT2232H: ftdi245 on channel A, or a JTAG probe".into()),
        (FTDI245_IDS[1], "FT232H: ftdi245, or a JTAG probe".into()),
        (UsbId { vid: FTDI_VID, pid: 0x6015 }, "FT231X UART: serial".into()),
        (FT60X_IDS[0], "FT600: ft601".into()),
        (FT60X_IDS[1], "FT601: ft601".into()),
    ];
    for b in boards {
        let id = match &b.link {
            Link::UsbBulk(l) => l.id(),
            _ => continue,
        };
        if !v.iter().any(|(k, _)| *k == id) {
            v.push((id, format!("usb-bulk of board `{}`", b.name)));
        }
    }
    v
}

/// Every board in the boards folder that loads (the others are skipped).
fn all_boards() -> Vec<Board> {
    let dir = board::boards_dir();
    let mut v: Vec<Board> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Board::load(e.path().to_str()?).ok())
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// USB devices with known ids; a note when the bus cannot be read.
fn scan_usb(known: &[(UsbId, String)]) -> (Vec<Seen>, Option<String>) {
    let ctx = match rusb::Context::new() {
        Ok(c) => c,
        Err(e) => return (Vec::new(), Some(format!("libusb could not start: {e}"))),
    };
    let devices = match ctx.devices() {
        Ok(d) => d,
        Err(e) => return (Vec::new(), Some(format!("libusb could not list the bus: {e}"))),
    };
    let mut seen = Vec::new();
    for d in devices.iter() {
        let Ok(desc) = d.device_descriptor() else { continue };
        let id = UsbId { vid: desc.vendor_id(), pid: desc.product_id() };
        let Some((_, what)) = known.iter().find(|(k, _)| *k == id) else { continue };
        let mut device = format!("{id} on bus {} address {}", d.bus_number(), d.address());
        let mut note = None;
        match d.open() {
            Ok(h) => {
                if let Ok(sn) = h.read_serial_number_string_ascii(&desc) {
                    device.push_str(&format!(", serial {sn}"));
                }
            }
            Err(e) => {
                note = Some(format!(
                    "cannot open it ({e}): install boards/udev/60-weightstream.rules and re-plug"
                ))
            }
        }
        seen.push(Seen { bus: "usb", device, what: what.clone(), note });
    }
    let note = (seen.is_empty() && !Path::new("/dev/bus/usb").exists())
        .then(|| "no USB bus visible: /dev/bus/usb is missing".to_string());
    (seen, note)
}

/// XDMA nodes and serial ports under `dev` (`/dev` normally).
pub fn scan_dev(dev: &Path) -> Vec<Seen> {
    let mut names: Vec<String> = std::fs::read_dir(dev)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut seen = Vec::new();
    for n in &names {
        let path = dev.join(n);
        let access = |path: &PathBuf| {
            std::fs::OpenOptions::new().read(true).write(true).open(path).err().map(|e| {
                format!("cannot open it ({e}): install boards/udev/60-weightstream.rules (and join `dialout` for ttys)")
            })
        };
        if n.starts_with("xdma") {
            let what = if n.contains("_h2c_") {
                "XDMA host-to-card stream: xdma"
            } else if n.contains("_c2h_") {
                "XDMA card-to-host stream: xdma"
            } else if n.ends_with("_user") {
                "XDMA user BAR (registers)"
            } else {
                "XDMA driver node"
            };
            seen.push(Seen {
                bus: "xdma",
                device: path.display().to_string(),
                what: what.into(),
                note: None,
            });
        } else if n.starts_with("ttyUSB") || n.starts_with("ttyACM") {
            let note = access(&path);
            seen.push(Seen {
                bus: "serial",
                device: path.display().to_string(),
                what: "USB serial port: serial".into(),
                note,
            });
        }
    }
    seen
}

/// Everything visible, and notes on what could not be looked at.
pub fn scan() -> (Vec<Seen>, Vec<String>) {
    let known = known_usb(&all_boards());
    let (mut seen, note) = scan_usb(&known);
    seen.extend(scan_dev(Path::new("/dev")));
    (seen, note.into_iter().collect())
}

/// The table `wsctl devices` prints.
pub fn report(seen: &[Seen], notes: &[String]) -> String {
    let mut out = String::new();
    if seen.is_empty() {
        out.push_str(
            "no link devices found (USB FTDI/FT60x/vendor bulk, /dev/xdma*, /dev/ttyUSB*, /dev/ttyACM*)\n",
        );
    }
    let w = seen.iter().map(|s| s.device.len()).max().unwrap_or(0);
    for s in seen {
        out.push_str(&format!("{:<6} {:<w$}  {}\n", s.bus, s.device, s.what));
        if let Some(n) = &s.note {
            out.push_str(&format!("{:<6} {:<w$}  ! {n}\n", "", ""));
        }
    }
    for n in notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_scan_finds_xdma_nodes_and_ttys() {
        let dir = std::env::temp_dir().join(format!("ws-probe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for n in ["xdma0_h2c_0", "xdma0_c2h_0", "xdma0_user", "ttyUSB3", "tty1", "null"] {
            std::fs::write(dir.join(n), b"").unwrap();
        }
        let seen = scan_dev(&dir);
        let devs: Vec<_> =
            seen.iter().map(|s| (s.bus, s.device.rsplit('/').next().unwrap().to_string())).collect();
        assert_eq!(
            devs,
            [
                ("serial", "ttyUSB3".to_string()),
                ("xdma", "xdma0_c2h_0".into()),
                ("xdma", "xdma0_h2c_0".into()),
                ("xdma", "xdma0_user".into())
            ]
        );
        let r = report(&seen, &["no USB bus visible".into()]);
        assert!(r.contains("XDMA user BAR") && r.contains("note: no USB bus visible"), "{r}");
        assert!(report(&[], &[]).starts_with("no link devices found"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn known_ids_include_board_files() {
        let known = known_usb(&all_boards());
        for id in FTDI245_IDS.iter().chain(&FT60X_IDS) {
            assert!(known.iter().any(|(k, _)| k == id), "{id}");
        }
        // Runs on any machine: just must not panic.
        let _ = scan();
    }
}
