//! The probe-rs target description of a board: the ChipFamily YAML beside its `board.toml`
//! (`boards/sim/weightstream.yaml`), loaded at run time into a probe-rs [`Registry`] and
//! checked against the board's memory map, so that the board file and the target description
//! cannot drift apart unnoticed.

use std::ops::Range;
use std::path::{Path, PathBuf};

use probe_rs::config::{ChipFamily, MemoryRegion, Registry};

use crate::board::Board;
use crate::error::JtagError;

/// A board's target description, registered and ready for `Probe::attach_with_registry`.
#[derive(Debug)]
pub struct TargetDescription {
    /// The YAML file.
    pub path: PathBuf,
    /// The chip name to attach with (the family's only variant).
    pub chip: String,
    /// The RAM regions, from the YAML.
    pub ram: Vec<Range<u64>>,
    family: ChipFamily,
}

impl TargetDescription {
    /// The target description of `board`: the one `*.yaml` file in the board's folder.
    pub fn for_board(board: &Board) -> Result<TargetDescription, JtagError> {
        let dir = board.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| JtagError::Target {
                path: dir.clone(),
                reason: format!("cannot list the folder: {e}"),
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        found.sort();
        match found.len() {
            0 => Err(JtagError::NoTarget { dir }),
            1 => {
                let t = TargetDescription::load(&found[0])?;
                t.check_against(board)?;
                Ok(t)
            }
            _ => Err(JtagError::Target {
                path: dir,
                reason: format!(
                    "{} target descriptions ({}); keep exactly one ChipFamily YAML per board folder",
                    found.len(),
                    found
                        .iter()
                        .filter_map(|p| p.file_name())
                        .map(|n| n.to_string_lossy())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }

    /// Reads and validates one ChipFamily YAML (probe-rs' own validation included).
    pub fn load(path: &Path) -> Result<TargetDescription, JtagError> {
        let bad = |reason: String| JtagError::Target { path: path.to_path_buf(), reason };
        let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
        let mut registry = Registry::new();
        registry.add_target_family_from_yaml(&text).map_err(|e| bad(crate::jtag::error_chain(&e)))?;
        let family =
            registry.families().first().cloned().ok_or_else(|| bad("it holds no chip family".into()))?;
        let chip = match family.variants.as_slice() {
            [one] => one.name.clone(),
            other => {
                return Err(bad(format!("it has {} variants; a board's chip is exactly one", other.len())))
            }
        };
        let ram = family.variants[0]
            .memory_map
            .iter()
            .filter_map(|r| match r {
                MemoryRegion::Ram(r) => Some(r.range.clone()),
                _ => None,
            })
            .collect::<Vec<_>>();
        if ram.is_empty() {
            return Err(bad("it has no !Ram region: nothing could be loaded into the target".into()));
        }
        Ok(TargetDescription { path: path.to_path_buf(), chip, ram, family })
    }

    /// Every RAM region of the description must be a `[[memory]]` region of the board, with the
    /// same base and size.
    pub fn check_against(&self, board: &Board) -> Result<(), JtagError> {
        for r in &self.ram {
            let same = board.memory.iter().any(|m| m.base == r.start && m.end() == r.end);
            if !same {
                return Err(JtagError::Target {
                    path: self.path.clone(),
                    reason: format!(
                        "its RAM region {:#010x}..{:#010x} is not a [[memory]] region of {}; make the two agree (hdl/regmap/soc.toml is the source)",
                        r.start,
                        r.end,
                        board.path.display()
                    ),
                });
            }
        }
        Ok(())
    }

    /// A registry holding only this description.
    pub fn registry(&self) -> Registry {
        let mut r = Registry::new();
        // Validated in `load`; adding the same family again cannot fail.
        let _ = r.add_target_family(self.family.clone());
        r
    }

    /// Whether `range` lies inside one RAM region.
    pub fn in_ram(&self, range: &Range<u64>) -> bool {
        self.ram.iter().any(|r| r.start <= range.start && range.end <= r.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim_board() -> Board {
        Board::load(crate::workspace::root().join("boards/sim").to_str().unwrap()).unwrap()
    }

    #[test]
    fn the_sim_board_target_loads_and_matches_its_memory_map() {
        let t = TargetDescription::for_board(&sim_board()).unwrap();
        assert_eq!(t.chip, "weightstream-soc");
        assert_eq!(t.ram, vec![0x1000_0000..0x1004_0000]);
        assert!(t.in_ram(&(0x1000_0000..0x1000_0100)));
        assert!(!t.in_ram(&(0x1003_ff00..0x1004_0001)));
        let target = t.registry().get_target_by_name(&t.chip).unwrap();
        assert_eq!(target.jtag.unwrap().scan_chain.unwrap()[0].ir_len, Some(5));
    }

    #[test]
    fn a_mismatched_or_broken_description_is_refused_with_the_file_named() {
        let dir = std::env::temp_dir().join(format!("ws-jtag-target-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good =
            std::fs::read_to_string(crate::workspace::root().join("boards/sim/weightstream.yaml")).unwrap();
        let p = dir.join("t.yaml");
        std::fs::write(&p, good.replace("0x10040000", "0x10080000")).unwrap();
        let t = TargetDescription::load(&p).unwrap();
        let e = t.check_against(&sim_board()).unwrap_err().to_string();
        assert!(e.contains("0x10080000") && e.contains("t.yaml"), "{e}");
        std::fs::write(&p, "name: x\nvariants: [").unwrap();
        let e = TargetDescription::load(&p).unwrap_err().to_string();
        assert!(e.contains("t.yaml"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
