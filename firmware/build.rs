//! Puts `memory.x` on the linker search path, where riscv-rt's `link.x` includes it (riscv-rt
//! feature `memory`), and links the firmware binary with `-Tlink.x -Tdefmt.x` (riscv-rt's
//! script, then defmt's symbol table sections).

use std::{env, fs, path::PathBuf};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::write(out.join("memory.x"), include_bytes!("memory.x")).expect("write memory.x to OUT_DIR");
    println!("cargo:rustc-link-search={}", out.display());
    // Only for the target binary: host-side unit tests link with the host's defaults.
    if env::var("TARGET").is_ok_and(|t| t.starts_with("riscv32")) {
        println!("cargo:rustc-link-arg-bins=-Tlink.x");
        println!("cargo:rustc-link-arg-bins=-Tdefmt.x");
    }
    println!("cargo:rerun-if-changed=memory.x");
    println!("cargo:rerun-if-changed=build.rs");
}
