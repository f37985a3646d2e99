//! Whether a process runs confined by a sandgate sandbox: this one ([`this_process`]), or
//! the one at the other end of a unix connection ([`check_peer`]).
//!
//! The approvals server and whoever asks it use the second: only the caller's own
//! processes outside any sandbox may ask or answer, and a sandboxed command that reached
//! the socket (one placed beneath a workspace, say) must not answer its own question.
//!
//! A sandboxed command's unix connects are performed by its supervisor, an unconfined
//! sandgate, so the kernel names the supervisor as the peer. The supervisor is recognised
//! by the seccomp listener it holds (sandgate keeps it open until it exits, and the
//! detached supervisor holds it for life); nothing else of the caller's holds one.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{getsockopt, sockopt};

/// Whether this process runs under no_new_privs and a seccomp filter, as every restricted
/// sandgate sandbox leaves its command — facts no process can undo for itself, unlike an
/// environment hint. `None` when the kernel cannot be asked (no `/proc`), so each caller
/// decides which way is closed.
pub fn this_process() -> Option<bool> {
    if nix::sys::prctl::get_no_new_privs() == Ok(false) {
        return Some(false);
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    Some(sandboxed(&status))
}

/// Whether a `/proc/PID/status` says its process runs as a sandboxed one does.
fn sandboxed(status: &str) -> bool {
    let has = |line: &str| {
        status
            .lines()
            .any(|l| l.split_whitespace().eq(line.split_whitespace()))
    };
    has("NoNewPrivs: 1") && has("Seccomp: 2")
}

/// Refuses a peer of another uid, one under a seccomp filter with no_new_privs (how every
/// sandboxed process runs), or one that supervises a sandbox.
pub fn check_peer(stream: &impl AsFd) -> Result<(), String> {
    let creds = getsockopt(stream, sockopt::PeerCredentials)
        .map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
    if creds.uid() != nix::unistd::geteuid().as_raw() {
        return Err(format!(
            "the peer is uid {}, not this server's user",
            creds.uid()
        ));
    }
    // A pidfd pins the process, so its pid cannot be reused while it is looked at. Kernels
    // before 6.5 have none; there the pid from the credentials is the best there is.
    let pidfd = match getsockopt(stream, sockopt::PeerPidfd) {
        Ok(fd) => Some(fd),
        Err(Errno::ENOPROTOOPT | Errno::EINVAL) => None,
        Err(e) => return Err(format!("cannot identify the peer: {e}")),
    };
    let pid = match &pidfd {
        Some(fd) => pid_of(fd).ok_or("the peer has exited")?,
        None => creds.pid(),
    };
    if sandboxed(&status_of(pid)?) {
        return Err(format!("the peer (pid {pid}) runs in a sandbox"));
    }
    if holds_a_seccomp_listener(pid)? {
        return Err(format!(
            "the peer (pid {pid}) supervises a sandbox: its connects are made for a \
             sandboxed command"
        ));
    }
    // An exiting process has closed every fd, its listener too, and an exited one that is
    // not reaped yet still has its pid: a supervisor whose connect waited in the backlog
    // until then would list no listener. The kernel releases a process's memory before its
    // files, so memory still there after the look means the fds were looked at whole.
    if !status_of(pid)?.lines().any(|l| l.starts_with("VmSize:")) {
        return Err(format!(
            "the peer (pid {pid}) is exiting: what it held can no longer be seen"
        ));
    }
    if let Some(fd) = &pidfd {
        if pid_of(fd) != Some(pid) {
            return Err("the peer exited while it was looked at".into());
        }
    }
    Ok(())
}

fn status_of(pid: i32) -> Result<String, String> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("cannot read the status of the peer (pid {pid}): {e}"))
}

/// Whether `pid` holds a seccomp user-notification listener. Unreadable counts as yes.
fn holds_a_seccomp_listener(pid: i32) -> Result<bool, String> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map_err(|e| format!("cannot list the fds of the peer (pid {pid}): {e}"))?;
    Ok(fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|target| target.as_os_str() == "anon_inode:seccomp notify")
    }))
}

/// The pid behind a pidfd, or None once the process has exited.
fn pid_of(pidfd: &OwnedFd) -> Option<i32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd())).ok()?;
    let pid: i32 = info
        .lines()
        .find_map(|l| l.strip_prefix("Pid:"))?
        .trim()
        .parse()
        .ok()?;
    (pid > 0).then_some(pid)
}
