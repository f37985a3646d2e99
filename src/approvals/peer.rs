//! Who is on the other end of a connection to the server's socket. Only the caller's own
//! processes outside any sandbox may ask or answer: a sandboxed command that reached the
//! socket (one placed beneath a workspace, say) must not answer its own question.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{getsockopt, sockopt};

/// Refuses a peer of another uid, or one under a seccomp filter with no_new_privs (how
/// every sandboxed process runs, as `app::kernel_confined` tells for sandgate itself).
pub fn check(stream: &impl AsFd) -> Result<(), String> {
    let creds = getsockopt(stream, sockopt::PeerCredentials)
        .map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
    if creds.uid() != nix::unistd::geteuid().as_raw() {
        return Err(format!("the peer is uid {}, not this server's user", creds.uid()));
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
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("cannot read the status of the peer (pid {pid}): {e}"))?;
    let has = |line: &str| {
        status
            .lines()
            .any(|l| l.split_whitespace().eq(line.split_whitespace()))
    };
    if has("NoNewPrivs: 1") && has("Seccomp: 2") {
        return Err(format!("the peer (pid {pid}) runs in a sandbox"));
    }
    if let Some(fd) = &pidfd {
        if pid_of(fd) != Some(pid) {
            return Err("the peer exited while it was looked at".into());
        }
    }
    Ok(())
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
