//! sandgate's own stdout and stderr.
//!
//! Nothing sandgate says may decide the command's fate: `eprintln!` panics on a closed
//! pipe (`sandgate … 2>&1 | head -1`), and a panic in a release build aborts sandgate and
//! with it the command. A write here never panics; on stderr it never waits longer than
//! [`PATIENCE`] in all for a full pipe or a stopped terminal, and once a write failed,
//! sandgate stops writing there. What it had to say is not lost: every marker also goes
//! to the denial log, every decision to the audit log.
//!
//! stderr is shared with the command and whatever it left running, so a line sandgate
//! writes to a pipe goes in one piece when it fits in [`PIPE_BUF`]: no other writer's bytes
//! can land inside it (markers are kept that short, see `denial`).

use std::fmt;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{splice, OFlag, SpliceFFlags};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{send, MsgFlags};
use nix::sys::stat::{fstat, SFlag};

use crate::sys;

/// How long, in all, sandgate waits for a stderr nobody drains before giving it up.
pub const PATIENCE: Duration = Duration::from_secs(2);

/// The most a single write puts into a pipe whole (POSIX `PIPE_BUF` on Linux).
pub const PIPE_BUF: usize = 4096;

/// Writes one line to stderr.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => { $crate::output::stderr_line(format_args!($($arg)*)) };
}

/// Writes one line to stdout (a subcommand's report).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::stdout_line(format_args!($($arg)*)) };
}

/// Writes `text` and a newline to stdout, ignoring a reader that went away.
pub fn stdout_line(text: fmt::Arguments<'_>) {
    stdout_bytes(format!("{text}\n").as_bytes());
}

/// Writes `bytes` to stdout, ignoring a reader that went away.
pub fn stdout_bytes(bytes: &[u8]) {
    let mut stdout = io::stdout().lock();
    let _ = stdout.write_all(bytes).and_then(|()| stdout.flush());
}

/// Writes `text` and a newline to stderr: whole, or not at all once stderr failed.
pub fn stderr_line(text: fmt::Arguments<'_>) {
    let line = format!("{text}\n");
    let Ok(mut sink) = STDERR.lock() else {
        return;
    };
    let sink = sink.get_or_insert_with(Sink::open);
    if sink.write(line.as_bytes()).is_err() {
        sink.target = Target::Gone;
    }
}

/// Drops sandgate's own handles on its stderr, and writes nothing more there. A process
/// that outlives sandgate (the detached supervisor) must not hold the caller's pipe open:
/// its reader would wait for an end that never comes.
pub fn let_go_of_stderr() {
    if let Ok(mut sink) = STDERR.try_lock() {
        *sink = Some(Sink {
            target: Target::Gone,
            patience: Duration::ZERO,
        });
    }
}

static STDERR: Mutex<Option<Sink>> = Mutex::new(None);

/// sandgate's handle on its stderr.
struct Sink {
    target: Target,
    /// What is left of [`PATIENCE`].
    patience: Duration,
}

enum Target {
    /// A pipe: each piece is written into a private pipe of ours, then spliced across
    /// with `SPLICE_F_NONBLOCK`, which never waits whatever flags the shared stderr has
    /// (its file description is the command's too, and may be another user's).
    Pipe {
        out: OwnedFd,
        relay: (OwnedFd, OwnedFd),
    },
    /// A terminal or other device, opened anew without blocking: its own file
    /// description, so the command's stderr keeps its flags.
    NonBlocking(OwnedFd),
    /// A socket: sent to with `MSG_DONTWAIT`.
    Socket(OwnedFd),
    /// A device that could not be reopened (another user's terminal): a write to it can
    /// block in the kernel however writable it polled, and nothing short of a signal ends
    /// that wait. Each line is written by a short-lived child, killed when patience runs
    /// out; the file description the caller and the command share stays untouched.
    Delegated(OwnedFd),
    /// A regular file (it never waits on a reader), or what could not be examined.
    Plain(OwnedFd),
    /// Closed, failed, or given up on.
    Gone,
}

impl Sink {
    fn open() -> Sink {
        let target = match sys::dup_if_open(2) {
            None => Target::Gone,
            Some(fd) => match fstat(fd.as_fd()).map(|st| SFlag::from_bits_truncate(st.st_mode)) {
                Ok(kind) if kind.contains(SFlag::S_IFSOCK) => Target::Socket(fd),
                Ok(kind) if kind.contains(SFlag::S_IFIFO) => {
                    match nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK) {
                        Ok(relay) => Target::Pipe { out: fd, relay },
                        Err(_) => Target::Plain(fd),
                    }
                }
                Ok(kind) if kind.contains(SFlag::S_IFCHR) => {
                    reopen_nonblocking(&fd).map_or(Target::Delegated(fd), Target::NonBlocking)
                }
                _ => Target::Plain(fd),
            },
        };
        Sink {
            target,
            patience: PATIENCE,
        }
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), Errno> {
        match self.target {
            Target::Pipe { .. } => {
                return bytes
                    .chunks(PIPE_BUF)
                    .try_for_each(|piece| self.relay(piece))
            }
            Target::Delegated(_) => return self.write_in_child(bytes),
            _ => {}
        }
        let mut bytes = bytes;
        while !bytes.is_empty() {
            let written = match &self.target {
                Target::Gone | Target::Pipe { .. } | Target::Delegated(_) => {
                    return Err(Errno::EPIPE)
                }
                Target::NonBlocking(fd) | Target::Plain(fd) => nix::unistd::write(fd, bytes),
                Target::Socket(fd) => send(
                    fd.as_raw_fd(),
                    bytes,
                    MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
                ),
            };
            match written {
                Ok(0) => return Err(Errno::EPIPE),
                Ok(n) => bytes = &bytes[n..],
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => self.wait_writable()?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Moves one piece of at most [`PIPE_BUF`] bytes into the pipe: written into the
    /// (empty) relay as one buffer, spliced across as that one buffer.
    fn relay(&mut self, piece: &[u8]) -> Result<(), Errno> {
        let Target::Pipe { relay, .. } = &self.target else {
            return Err(Errno::EPIPE);
        };
        if nix::unistd::write(&relay.1, piece)? != piece.len() {
            return Err(Errno::EIO);
        }
        let mut left = piece.len();
        while left > 0 {
            let Target::Pipe { out, relay } = &self.target else {
                return Err(Errno::EPIPE);
            };
            match splice(
                &relay.0,
                None,
                out,
                None,
                left,
                SpliceFFlags::SPLICE_F_NONBLOCK,
            ) {
                Ok(0) => return Err(Errno::EPIPE),
                Ok(n) => left = left.saturating_sub(n),
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => self.wait_writable()?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Has a child write `bytes` and waits for it at most for the patience left. Only
    /// ever called while sandgate is single-threaded (before the command starts, or after
    /// it ended and every thread was joined); `sys::fork` refuses otherwise, and the line
    /// is then not written.
    fn write_in_child(&mut self, bytes: &[u8]) -> Result<(), Errno> {
        let Target::Delegated(fd) = &self.target else {
            return Err(Errno::EPIPE);
        };
        let started = Instant::now();
        let pid = sys::fork().map_err(|_| Errno::EAGAIN)?;
        if pid == 0 {
            let mut rest = bytes;
            while !rest.is_empty() {
                match nix::unistd::write(fd, rest) {
                    Ok(n) if n > 0 => rest = &rest[n..],
                    Err(Errno::EINTR) => {}
                    _ => sys::exit_immediately(1),
                }
            }
            sys::exit_immediately(0);
        }
        let child = nix::unistd::Pid::from_raw(pid);
        let done = sys::pidfd_open(pid, false).ok().is_some_and(|pidfd| {
            let timeout = PollTimeout::try_from(self.patience).unwrap_or(PollTimeout::ZERO);
            let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
            matches!(poll(&mut fds, timeout), Ok(n) if n > 0)
        });
        self.patience = self.patience.saturating_sub(started.elapsed());
        if !done {
            let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
        }
        match nix::sys::wait::waitpid(child, None) {
            Ok(nix::sys::wait::WaitStatus::Exited(_, 0)) if done => Ok(()),
            _ if done => Err(Errno::EPIPE),
            _ => Err(Errno::ETIMEDOUT),
        }
    }

    /// Waits until stderr takes more, spending patience.
    fn wait_writable(&mut self) -> Result<(), Errno> {
        let fd = match &self.target {
            Target::Pipe { out: fd, .. }
            | Target::NonBlocking(fd)
            | Target::Socket(fd)
            | Target::Delegated(fd)
            | Target::Plain(fd) => fd,
            Target::Gone => return Err(Errno::EPIPE),
        };
        let started = Instant::now();
        let timeout = PollTimeout::try_from(self.patience).unwrap_or(PollTimeout::ZERO);
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
        let ready = poll(&mut fds, timeout);
        self.patience = self.patience.saturating_sub(started.elapsed());
        let writable = fds[0]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLOUT));
        match ready {
            Ok(_) if writable => Ok(()),
            Ok(0) => Err(Errno::ETIMEDOUT),
            // POLLERR or POLLHUP: the reader is gone.
            Ok(_) => Err(Errno::EPIPE),
            Err(Errno::EINTR) if !self.patience.is_zero() => Ok(()),
            Err(Errno::EINTR) => Err(Errno::ETIMEDOUT),
            Err(e) => Err(e),
        }
    }
}

/// Opens what `fd` refers to once more, non-blocking; `None` where that is not possible
/// (no `/proc`, another user's terminal).
fn reopen_nonblocking(fd: &OwnedFd) -> Option<OwnedFd> {
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    nix::fcntl::open(
        path.as_str(),
        OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok()
}
