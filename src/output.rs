//! sandgate's own stdout and stderr.
//!
//! Nothing sandgate says may decide the command's fate: `eprintln!` panics on a closed
//! pipe (`sandgate … 2>&1 | head -1`), and a panic in a release build aborts sandgate and
//! with it the command. A write here never panics; on stderr it never waits longer than
//! [`PATIENCE`] in all for a full pipe or a stopped terminal, and once a write failed,
//! sandgate stops writing there. What it had to say is not lost: every marker also goes
//! to the denial log, every decision to the audit log.

use std::fmt;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{send, MsgFlags};
use nix::sys::stat::{fstat, SFlag};

use crate::sys;

/// How long, in all, sandgate waits for a stderr nobody drains before giving it up.
pub const PATIENCE: Duration = Duration::from_secs(2);

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

static STDERR: Mutex<Option<Sink>> = Mutex::new(None);

/// sandgate's handle on its stderr.
struct Sink {
    target: Target,
    /// What is left of [`PATIENCE`].
    patience: Duration,
}

enum Target {
    /// A pipe or terminal, opened anew without blocking (its own file description, so the
    /// command's stderr keeps its flags).
    NonBlocking(OwnedFd),
    /// A socket: sent to with `MSG_DONTWAIT`.
    Socket(OwnedFd),
    /// A file, or what could not be reopened: written plainly (a regular file never waits
    /// on a reader).
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
                Ok(kind) if kind.contains(SFlag::S_IFIFO) || kind.contains(SFlag::S_IFCHR) => {
                    reopen_nonblocking(&fd).map_or(Target::Plain(fd), Target::NonBlocking)
                }
                _ => Target::Plain(fd),
            },
        };
        Sink {
            target,
            patience: PATIENCE,
        }
    }

    fn write(&mut self, mut bytes: &[u8]) -> Result<(), Errno> {
        while !bytes.is_empty() {
            let written = match &self.target {
                Target::Gone => return Err(Errno::EPIPE),
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

    /// Waits until stderr takes more, spending patience.
    fn wait_writable(&mut self) -> Result<(), Errno> {
        let fd = match &self.target {
            Target::NonBlocking(fd) | Target::Socket(fd) | Target::Plain(fd) => fd,
            Target::Gone => return Err(Errno::EPIPE),
        };
        let started = Instant::now();
        let timeout = PollTimeout::try_from(self.patience).unwrap_or(PollTimeout::ZERO);
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
        let ready = poll(&mut fds, timeout);
        self.patience = self.patience.saturating_sub(started.elapsed());
        match ready {
            Ok(0) => Err(Errno::ETIMEDOUT),
            Ok(_) | Err(Errno::EINTR) if !self.patience.is_zero() => Ok(()),
            Ok(_) | Err(Errno::EINTR) => Err(Errno::ETIMEDOUT),
            Err(e) => Err(e),
        }
    }
}

/// Opens what `fd` refers to once more, non-blocking; `None` where that is not possible
/// (no `/proc`, a pipe with no reader left).
fn reopen_nonblocking(fd: &OwnedFd) -> Option<OwnedFd> {
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    nix::fcntl::open(
        path.as_str(),
        nix::fcntl::OFlag::O_WRONLY
            | nix::fcntl::OFlag::O_NONBLOCK
            | nix::fcntl::OFlag::O_NOCTTY
            | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok()
}
