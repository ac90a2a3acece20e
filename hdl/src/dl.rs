//! Loading model libraries. Each `.so` is opened once per process and stays loaded: model
//! instances and their function pointers may live as long as the process, and unloading a
//! library that started Verilator threads is not safe.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use libloading::Library;

static LIBS: Mutex<Option<HashMap<PathBuf, &'static Library>>> = Mutex::new(None);

/// Opens `path` (once per process) and returns the library for the rest of the process.
pub(crate) fn open(path: &Path) -> Result<&'static Library, libloading::Error> {
    let mut guard = LIBS.lock().unwrap_or_else(|p| p.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    if let Some(lib) = map.get(path) {
        return Ok(lib);
    }
    // SAFETY: the library is one of our Verilated models; its initialisers only set up the
    // Verilator runtime. It is never unloaded (leaked below), so symbols stay valid.
    let lib = unsafe { Library::new(path)? };
    let lib: &'static Library = Box::leak(Box::new(lib));
    map.insert(path.to_path_buf(), lib);
    Ok(lib)
}

/// Looks up `name` and copies out the function pointer of type `T`.
///
/// # Safety
/// `T` must be the exact `extern "C"` function type the library exports under `name`.
pub(crate) unsafe fn sym<T: Copy>(lib: &'static Library, name: &str) -> Result<T, libloading::Error> {
    // SAFETY: forwarded to the caller.
    let s = unsafe { lib.get::<T>(name)? };
    Ok(*s)
}
