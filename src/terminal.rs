//! The terminal, and the caller's standard streams, come back as the call found them.
//!
//! The command gets new open file descriptions of the objects behind stdin, stdout and
//! stderr (`exec::fresh`), but one that cannot be opened again — a socket, another user's
//! terminal — it shares with whoever started sandgate (the user's shell, a CI runner, an
//! agent's harness), so a status flag it sets there — `O_NONBLOCK`, or `O_APPEND` cleared
//! — would stay set for them: their next read gets `EAGAIN`. Those flags are saved before
//! and put back after, terminal or not.
//!
//! A restricted command shares the user's terminal, and may change its modes: `stty -echo
//! -isig` or raw mode left behind means a shell prompt that shows nothing typed and
//! ignores Ctrl-C once sandgate has returned. So sandgate saves the modes (termios) of its
//! controlling terminal — found behind stdin, stdout or stderr, else as `/dev/tty` — before
//! the command runs, and puts them back when it has ended, however it ended (exit, or death
//! by a signal: sandgate waits for the command and passes the signal on afterwards). It
//! also resumes output, in case it was left suspended (`tcflow(TCOOFF)`; the sandbox's
//! seccomp filter refuses that request, so this only undoes what nothing inside can do).
//!
//! Only while sandgate is in the terminal's foreground process group, at the start and at
//! the end: a background sandgate (`sandgate … &`) leaves the terminal to whoever owns it,
//! and never provokes `SIGTTOU`. (The command stays in sandgate's group and cannot move
//! the foreground: `tcsetpgrp` is refused inside.)
//!
//! The window size is not saved: the terminal emulator sets it whenever the user resizes
//! the window, and a resize during the call cannot be told from a change made inside, so
//! the seccomp filter refuses setting it instead.
//!
//! What is not restored, deliberately:
//! - what the command wrote to the screen (colours, the alternate screen, mouse reporting):
//!   that is the terminal emulator's state, which the kernel does not hold (`reset`
//!   restores it);
//! - a process the call left in the background still holds the terminal after sandgate
//!   returns and can change its modes again — from the background only with `SIGTTOU`
//!   ignored or blocked, which job control cannot prevent.
//!
//! `full-access` gets none of this: sandgate executes the command in its own process, so
//! nothing remains to restore anything afterwards — it is the command's terminal, as
//! without sandgate.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};

use nix::fcntl::{FcntlArg, OFlag};
use nix::sys::termios::{self, FlowArg, SetArg, Termios};

use crate::sys;

/// Where the terminal was found, to reach it again at the end. No descriptor of it is
/// held across the call, so no process sandgate forks meanwhile inherits one.
#[derive(Debug, Clone, Copy)]
enum Where {
    /// One of sandgate's standard fds (duplicated for each use: the number may be closed).
    Stdio(RawFd),
    /// `/dev/tty`, opened for each use.
    DevTty,
}

impl Where {
    fn open(self) -> Option<OwnedFd> {
        match self {
            Where::Stdio(fd) => sys::dup_if_open(fd),
            Where::DevTty => open_dev_tty(),
        }
    }
}

/// The standard streams' flags and the terminal's modes as the call found them; put back
/// by [`Saved::restore`] or when dropped.
#[derive(Debug)]
pub struct Saved {
    terminal: Option<(Where, Termios)>,
    /// The status flags of the open file descriptions behind fds 0, 1 and 2.
    stdio: [Option<OFlag>; 3],
}

impl Saved {
    /// Saves the status flags of sandgate's standard streams, and the modes of its
    /// controlling terminal when sandgate is in its foreground process group.
    pub fn take() -> Saved {
        let stdio = [0, 1, 2].map(|fd| {
            let dup = sys::dup_if_open(fd)?;
            nix::fcntl::fcntl(dup.as_fd(), FcntlArg::F_GETFL)
                .ok()
                .map(OFlag::from_bits_truncate)
        });
        Saved {
            terminal: Self::terminal(),
            stdio,
        }
    }

    fn terminal() -> Option<(Where, Termios)> {
        let (at, tty) = [
            Where::Stdio(0),
            Where::Stdio(1),
            Where::Stdio(2),
            Where::DevTty,
        ]
        .into_iter()
        .filter_map(|at| Some((at, at.open()?)))
        .find(|(_, fd)| is_foreground(fd.as_fd()).is_some())?;
        if is_foreground(tty.as_fd()) != Some(true) {
            return None;
        }
        Some((at, termios::tcgetattr(tty.as_fd()).ok()?))
    }

    /// Puts the saved status flags back, then the terminal's modes and output, if
    /// sandgate is still in the terminal's foreground process group. Once: later calls do
    /// nothing.
    pub fn restore(&mut self) {
        for (fd, saved) in (0..).zip(std::mem::take(&mut self.stdio)) {
            let (Some(saved), Some(dup)) = (saved, sys::dup_if_open(fd)) else {
                continue;
            };
            let now =
                nix::fcntl::fcntl(dup.as_fd(), FcntlArg::F_GETFL).map(OFlag::from_bits_truncate);
            if now.is_ok_and(|now| now != saved) {
                let _ = nix::fcntl::fcntl(dup.as_fd(), FcntlArg::F_SETFL(saved));
            }
        }
        let Some((at, modes)) = self.terminal.take() else {
            return;
        };
        let Some(tty) = at.open() else {
            return;
        };
        let tty = tty.as_fd();
        // SIGTTOU blocked: should the foreground move between the check and the change,
        // the change lands or fails, but sandgate is never stopped for it.
        sys::with_signal_blocked(libc::SIGTTOU, || {
            if is_foreground(tty) != Some(true) {
                return;
            }
            let _ = termios::tcflow(tty, FlowArg::TCOON);
            if termios::tcgetattr(tty).ok().as_ref() != Some(&modes) {
                let _ = termios::tcsetattr(tty, SetArg::TCSANOW, &modes);
            }
        });
    }
}

impl Drop for Saved {
    fn drop(&mut self) {
        self.restore();
    }
}

/// Whether sandgate is in the foreground process group of `fd`'s terminal; `None` when
/// `fd` is not sandgate's controlling terminal (the kernel answers `ENOTTY` then).
fn is_foreground(fd: BorrowedFd<'_>) -> Option<bool> {
    let group = nix::unistd::tcgetpgrp(fd).ok()?;
    Some(group == nix::unistd::getpgrp())
}

/// Opens sandgate's controlling terminal; `None` when it has none.
fn open_dev_tty() -> Option<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
        .open("/dev/tty")
        .ok()
        .map(OwnedFd::from)
}
