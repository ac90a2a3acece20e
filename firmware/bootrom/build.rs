//! Links the boot ROM with its own script, `bootrom.x` (ROM at address 0, stack in RAM).

use std::{env, fs, path::PathBuf};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::write(out.join("bootrom.x"), include_bytes!("bootrom.x")).expect("write bootrom.x to OUT_DIR");
    println!("cargo:rustc-link-search={}", out.display());
    if env::var("TARGET").is_ok_and(|t| t.starts_with("riscv32")) {
        println!("cargo:rustc-link-arg-bins=-Tbootrom.x");
    }
    println!("cargo:rerun-if-changed=bootrom.x");
    println!("cargo:rerun-if-changed=build.rs");
}
