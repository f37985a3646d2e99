//! What ends a call's processes where there is no PID namespace to end them with: a
//! process of sandgate's in a landlock domain of its own that scopes signals and nothing
//! else, from which the command is started (`CLONE_PARENT`: still sandgate's child) in the
//! sandbox's domain, nested beneath it.
//!
//! Its one `kill(-1, SIGKILL)` then reaches exactly the command and everything descended
//! from it, and nothing else: landlock refuses a signal from a domain to any process
//! outside it and its nested domains, even root's. And it reaches all of them at once,
//! however fast they fork: the kernel signals every process under the task list lock, and
//! a fork whose parent has a fatal signal pending fails. Walking the process table instead
//! loses to a chain of processes that each fork and exit.
//!
//! The command cannot end it or trace it (its domain lies beneath the ender's). It ends
//! the call's processes when sandgate says so, or when sandgate is gone: its end of the
//! pipe closing is the same word.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use landlock::{CompatLevel, Compatible, Ruleset, RulesetAttr, Scope};
use nix::fcntl::OFlag;

use crate::sys;

/// The ender of one call, from sandgate's side. Dropped, it ends every process of the
/// call and is reaped.
pub(super) struct Ender {
    pid: libc::pid_t,
    /// Written (or closed) to have the ender end the call's processes.
    go: OwnedFd,
}

/// Where [`fork`] returns.
pub(super) enum Forked {
    /// In the process that becomes the command (sandgate's child, in the ender's domain).
    Command,
    /// In sandgate: the ender, and the command's pid.
    Sandgate(Ender, libc::pid_t),
}

/// Forks the ender, which starts the command's process (as `fork` would, but cloned as
/// sandgate's own child); returns in that process and in sandgate, never in the ender.
///
/// # Errors
/// The fork, the ender's domain (a kernel without landlock's signal scope, ABI 6), or the
/// clone failed: nothing was started.
pub(super) fn fork() -> io::Result<Forked> {
    let (go_r, go_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let (pid_r, pid_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let ender = sys::fork()?;
    if ender == 0 {
        drop((go_w, pid_r));
        let word = match own_domain().and_then(|()| sys::fork_into(libc::CLONE_PARENT)) {
            Ok(0) => return Ok(Forked::Command),
            Ok(pid) => {
                out_of_reach();
                pid
            }
            Err(e) => -e.raw_os_error().unwrap_or(libc::EIO),
        };
        let _ = nix::unistd::write(&pid_w, &word.to_ne_bytes());
        drop(pid_w);
        if word < 0 {
            sys::exit_immediately(125);
        }
        sys::holding_only(&[go_r.as_raw_fd()], sys::Standard::Closed, move || {
            end_when_told(go_r)
        })
    }
    drop((go_r, pid_w));
    let mut word = [0u8; 4];
    let got = read_full(pid_r.as_fd(), &mut word);
    let pid = libc::pid_t::from_ne_bytes(word);
    if got != word.len() || pid <= 0 {
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(ender), None);
        return Err(io::Error::from_raw_os_error(match pid {
            p if p < 0 => -p,
            _ => libc::EIO,
        }));
    }
    Ok(Forked::Sandgate(
        Ender {
            pid: ender,
            go: go_w,
        },
        pid,
    ))
}

impl Drop for Ender {
    fn drop(&mut self) {
        let _ = nix::unistd::write(&self.go, b"k");
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(self.pid), None);
    }
}

/// Takes the ender out of what the kernel signals as a whole, once the command (which
/// stays in the caller's session and process group, on its terminal) is started: a
/// session of its own, so that a signal to the caller's process group (`timeout -s
/// KILL`, `kill -9 %1`) ends sandgate but not the ender, which then ends the call; and
/// the terminal's stop signals ignored, so that no read of the terminal by the call's
/// processes can stop it.
fn out_of_reach() {
    let _ = nix::unistd::setsid();
    for signo in [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU] {
        sys::ignore(signo);
    }
}

/// Returns true when the kernel scopes signals by landlock domain (ABI 6), which the ender
/// needs; without it sandgate ends what it adopted one process at a time.
pub(super) fn available() -> bool {
    sys::landlock_abi() >= 6
}

/// Puts the calling process in a landlock domain of its own that scopes its signals and
/// restricts nothing else: every process it starts and restricts further lies beneath it.
fn own_domain() -> io::Result<()> {
    let to_io = |e: landlock::RulesetError| io::Error::other(e.to_string());
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .scope(Scope::Signal)
        .map_err(to_io)?
        .create()
        .map_err(to_io)?
        .restrict_self()
        .map_err(to_io)
        .map(drop)
}

/// The ender's life: waits for sandgate's word (or its end), then signals every process
/// its domain reaches — the call's, and only those.
fn end_when_told(go: OwnedFd) -> i32 {
    let mut byte = [0u8; 1];
    let _ = read_full(go.as_fd(), &mut byte);
    // One is enough (see the module docs); the second costs nothing.
    let _ = sys::kill(-1, libc::SIGKILL);
    let _ = sys::kill(-1, libc::SIGKILL);
    0
}

/// Reads until `buf` is full or the pipe ends; returns how much was read.
fn read_full(fd: std::os::fd::BorrowedFd<'_>, buf: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buf.len() {
        match nix::unistd::read(fd, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => break,
        }
    }
    got
}
