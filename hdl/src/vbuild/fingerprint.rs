//! The cache key: a SHA-256 over everything that can change the built library.

use std::path::Path;

use sha2::{Digest, Sha256};

use super::make::Tools;
use super::{BuildError, ModelSpec, RECIPE_VERSION};
use crate::paths;

/// File extensions inside include directories that count as inputs.
const INCLUDE_EXTS: &[&str] = &["v", "vh", "sv", "svh", "h", "inc"];

/// Hex SHA-256 of the spec, its input files, the toolchain and the recipe.
pub(super) fn model_hash(spec: &ModelSpec, tools: &Tools) -> Result<String, BuildError> {
    let mut h = Sha256::new();
    let field = |h: &mut Sha256, tag: &str, value: &[u8]| {
        h.update(tag.as_bytes());
        h.update((value.len() as u64).to_le_bytes());
        h.update(value);
    };
    field(&mut h, "recipe", RECIPE_VERSION.as_bytes());
    field(&mut h, "tools", tools.identity.as_bytes());
    field(&mut h, "top", spec.top.as_bytes());
    for (k, v) in &spec.defines {
        field(&mut h, "define", format!("{k}={v:?}").as_bytes());
    }
    for (k, v) in &spec.params {
        field(&mut h, "param", format!("{k}={v}").as_bytes());
    }
    field(&mut h, "threads", spec.threads.to_string().as_bytes());
    field(&mut h, "trace", &[spec.trace_fst as u8]);
    field(&mut h, "opt", format!("{:?}", spec.opt).as_bytes());
    for a in &spec.extra_args {
        field(&mut h, "arg", a.as_bytes());
    }
    if let Some(g) = &spec.shim_generator {
        field(&mut h, "shimgen", g.id.as_bytes());
    }
    for (tag, files) in [("source", &spec.sources), ("vlt", &spec.vlt_files), ("shim", &spec.shim_files)] {
        for f in files {
            let path = paths::in_workspace(f);
            hash_file(&mut h, tag, &path)?;
        }
    }
    for dir in &spec.include_dirs {
        let dir = paths::in_workspace(dir);
        let entries =
            std::fs::read_dir(&dir).map_err(|source| BuildError::Input { path: dir.clone(), source })?;
        let mut files: Vec<_> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.is_file()
                    && p.extension().and_then(|e| e.to_str()).is_some_and(|e| INCLUDE_EXTS.contains(&e))
            })
            .collect();
        files.sort();
        field(&mut h, "incdir", dir.to_string_lossy().as_bytes());
        for f in files {
            hash_file(&mut h, "include", &f)?;
        }
    }
    Ok(hex(&h.finalize()))
}

fn hash_file(h: &mut Sha256, tag: &str, path: &Path) -> Result<(), BuildError> {
    let data =
        std::fs::read(path).map_err(|source| BuildError::Input { path: path.to_path_buf(), source })?;
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    h.update(tag.as_bytes());
    h.update((name.len() as u64).to_le_bytes());
    h.update(name.as_bytes());
    h.update((data.len() as u64).to_le_bytes());
    h.update(&data);
    Ok(())
}

/// SHA-256 over the contents of `files`, in order (the SoC's BUILD_HASH).
pub(crate) fn sources_hash(files: &[std::path::PathBuf]) -> Result<[u8; 32], BuildError> {
    let mut h = Sha256::new();
    for f in files {
        hash_file(&mut h, "src", &paths::in_workspace(f))?;
    }
    Ok(h.finalize().into())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
