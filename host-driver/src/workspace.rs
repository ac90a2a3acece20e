//! Where things live: the workspace root, its `target/` folder, and the default firmware ELF.
//!
//! `wsctl` may run from anywhere inside the checkout (or from an installed copy), so the root
//! is found by walking up from the current directory, with the source tree this crate was
//! built from as the fallback.

use std::path::{Path, PathBuf};

/// The firmware ELF that `cargo xtask build` produces, relative to the workspace root.
pub const DEFAULT_ELF: &str = "target/riscv32imc-unknown-none-elf/release/ws-firmware";

/// The workspace root: the nearest folder at or above the current directory whose
/// `Cargo.toml` has a `[workspace]` table, else the parent of this crate's source folder.
pub fn root() -> PathBuf {
    if let Ok(cwd) = std::env::current_dir() {
        if let Some(found) = find_root(&cwd) {
            return found;
        }
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(Path::to_path_buf).unwrap_or_else(|| manifest.to_path_buf())
}

/// The nearest folder at or above `start` holding a workspace `Cargo.toml`.
pub fn find_root(start: &Path) -> Option<PathBuf> {
    start.ancestors().find(|dir| is_workspace_manifest(&dir.join("Cargo.toml"))).map(Path::to_path_buf)
}

fn is_workspace_manifest(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| text.lines().any(|l| l.trim() == "[workspace]"))
}

/// `<root>/target`, or `CARGO_TARGET_DIR` when it is set.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                root().join(dir)
            }
        }
        _ => root().join("target"),
    }
}

/// The default firmware ELF: `<root>/target/riscv32imc-unknown-none-elf/release/ws-firmware`.
pub fn default_elf() -> PathBuf {
    root().join(DEFAULT_ELF)
}

/// `path` made absolute against the current directory (without touching the file system
/// otherwise), so it stays valid for a child process started elsewhere.
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_this_workspace() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = find_root(here).expect("host-driver sits in a workspace");
        assert_eq!(root, here.parent().unwrap());
        assert!(root.join("ws-common").is_dir());
    }

    #[test]
    fn no_workspace_above_the_file_system_root() {
        assert_eq!(find_root(Path::new("/")), None);
    }
}
