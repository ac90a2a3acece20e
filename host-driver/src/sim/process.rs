//! Process plumbing for the background simulator: its own process group, liveness, signals.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// `cmd` set to start in a new process group of its own (`setpgid(0, 0)`), so a Ctrl-C in
/// the terminal that ran `wsctl` does not reach the simulator, and a signal to the group
/// also ends whatever the simulator started (a model build).
pub(super) fn detached(mut cmd: Command) -> Command {
    cmd.process_group(0);
    cmd
}

/// A pid we may signal: positive and not ourselves or init. 0 and negative values would
/// address process groups.
fn signalable(pid: u32) -> Option<libc::pid_t> {
    let p = libc::pid_t::try_from(pid).ok()?;
    (p > 1 && pid != std::process::id()).then_some(p)
}

/// True while process `pid` exists and is not a zombie. Reaps it first if it is our own
/// exited child, so a test that started and stopped a simulator sees it gone.
pub fn is_alive(pid: u32) -> bool {
    let Some(p) = signalable(pid) else { return false };
    let mut status = 0;
    // SAFETY: waitpid with WNOHANG only reads process state and writes `status`; for a pid
    // that is not our child it fails with ECHILD and changes nothing.
    unsafe { libc::waitpid(p, &mut status, libc::WNOHANG) };
    // SAFETY: signal 0 performs only the existence and permission check.
    let exists = unsafe { libc::kill(p, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    exists && !is_zombie(pid)
}

fn is_zombie(pid: u32) -> bool {
    // /proc/<pid>/stat: "pid (comm) S ..."; comm may hold spaces and parentheses, so the
    // state is the first field after the last ')'.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

/// True when `pid`'s command line looks like the simulator recorded (it names `ws-sim` or
/// the recorded binary's file name), so a pid reused by another program after the
/// simulator died is never signalled. Without `/proc` it trusts the pid.
pub fn looks_like_sim(pid: u32, bin: &Path) -> bool {
    let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return true };
    let cmdline = String::from_utf8_lossy(&raw);
    let name = bin.file_name().map(|n| n.to_string_lossy().into_owned()).filter(|n| !n.is_empty());
    cmdline.contains("ws-sim") || name.is_some_and(|n| cmdline.contains(&n))
}

/// Sends SIGTERM (or SIGKILL when `hard`) to `pid`'s process group, and to `pid` itself
/// in case it left the group.
pub(super) fn kill_group(pid: u32, hard: bool) {
    let Some(p) = signalable(pid) else { return };
    let sig = if hard { libc::SIGKILL } else { libc::SIGTERM };
    // SAFETY: plain signal delivery to a positive pid and its group (`-p`), which the
    // simulator leads since it was started with `process_group(0)`.
    unsafe {
        libc::kill(-p, sig);
        libc::kill(p, sig);
    }
}

/// Sends SIGTERM to `pid` alone.
pub(super) fn terminate(pid: u32) {
    if let Some(p) = signalable(pid) {
        // SAFETY: plain signal delivery to a positive pid.
        unsafe { libc::kill(p, libc::SIGTERM) };
    }
}

/// Waits up to `grace` for `pid` to be gone.
pub(super) fn wait_gone(pid: u32, grace: Duration) -> bool {
    let deadline = Instant::now() + grace;
    loop {
        if !is_alive(pid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liveness_and_signals() {
        assert!(!is_alive(0), "never group 0");
        assert!(!is_alive(std::process::id()), "never ourselves");
        let child = detached(Command::new("sleep")).arg("30").spawn().unwrap();
        let pid = child.id();
        assert!(is_alive(pid));
        // /proc shows the new command line once the child has exec'd.
        std::thread::sleep(Duration::from_millis(200));
        assert!(looks_like_sim(pid, Path::new("/usr/bin/sleep")));
        assert!(!looks_like_sim(pid, Path::new("/x/ws-other")));
        kill_group(pid, false);
        assert!(wait_gone(pid, Duration::from_secs(5)), "SIGTERM ends it and it is reaped");
        drop(child);
    }
}
