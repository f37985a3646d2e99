//! The caller's stdin, stdout and stderr, opened anew for the command.
//!
//! An open file description is shared by every descriptor of it, and the caller keeps
//! its own: a shell its terminal's for the whole session, a script its `exec <input`.
//! Handed that description, a command could leave state on it that outlives the call: a
//! lock (`flock`, an open-file-description record lock) that holds up the caller's next
//! locker — taken by a process the call kept, or by a call running beside this one, long
//! after sandgate returned — or status flags (`O_NONBLOCK`) that break its next read. So a
//! restricted command gets new descriptions of the same objects (the same terminal, pipe,
//! device or file, opened again through `/proc/self/fd` with the same access mode and
//! status flags), and whatever it does to them ends with its own processes.
//!
//! A regular file read as stdin keeps the caller's place in it: the command starts where
//! the caller's offset stands, and the caller's offset moves on by what the command read,
//! as when the two shared the description (`while read …; do sandgate …; done <list`).
//!
//! What cannot be opened again is passed as it is: a socket, or an object the caller may
//! not open (a terminal of another user's, after `su`). A lock the command takes on such a
//! description is dropped when the call ends, if the description held none at its start.
//! (Regular files as stdout or stderr never reach the command: see `relay`.)

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::fcntl::{FcntlArg, OFlag};
use nix::sys::stat::{fstat, FileStat, Mode};
use nix::unistd::{lseek, Whence};

use crate::sys;

/// The status flags a new description takes over from the caller's.
const CARRIED_FLAGS: OFlag = OFlag::O_APPEND
    .union(OFlag::O_NONBLOCK)
    .union(OFlag::O_DIRECT);

/// The command's standard fds, other than those the relay serves.
pub(super) struct FreshStdio {
    /// New descriptions, with the fd of the command each becomes; sandgate lets go of them
    /// once the command has started.
    fresh: Vec<(OwnedFd, RawFd)>,
    /// `(new description, target fd)` as raw numbers, for the child to `dup2`.
    plan: Vec<(RawFd, RawFd)>,
    /// A regular file read as stdin, to carry the command's reading over to the caller.
    reading: Option<Reading>,
    /// Fds passed as they are whose description held no lock when the call started.
    unlocked: Vec<RawFd>,
}

struct Reading {
    callers: OwnedFd,
    commands: OwnedFd,
    start: i64,
}

impl FreshStdio {
    /// New descriptions for each of fds 0, 1 and 2 that is open, not in `relayed`, and can
    /// be opened again.
    pub fn open(relayed: &[RawFd]) -> FreshStdio {
        let mut stdio = FreshStdio {
            fresh: vec![],
            plan: vec![],
            reading: None,
            unlocked: vec![],
        };
        for fd in (0..3).filter(|fd| !relayed.contains(fd) && !sys::closed_at_start(*fd)) {
            let Some(callers) = sys::dup_if_open(fd) else {
                continue;
            };
            match reopen(fd, callers.as_fd()) {
                Some((commands, st)) => {
                    if fd == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG {
                        if let Some(reading) = Reading::new(callers, &commands) {
                            stdio.reading = Some(reading);
                        }
                    }
                    stdio.plan.push((commands.as_raw_fd(), fd));
                    stdio.fresh.push((commands, fd));
                }
                None if holds_no_lock(fd) == Some(true) => stdio.unlocked.push(fd),
                None => {}
            }
        }
        stdio
    }

    /// What the command's process does before `execve`: each pair `(from, onto)` is a
    /// `dup2`.
    pub fn plan(&self) -> &[(RawFd, RawFd)] {
        &self.plan
    }

    /// The command has been started: sandgate lets go of the new descriptions, so that
    /// they end with the command's processes.
    pub fn started(&mut self) {
        self.fresh.clear();
    }

    /// The command has ended: the caller's offset in a regular file read as stdin moves on
    /// by what the command read, and the locks the command took on descriptions it shared
    /// with the caller are dropped.
    pub fn finish(self) {
        if let Some(reading) = self.reading {
            reading.carry_over();
        }
        for fd in self.unlocked {
            if let Some(dup) = sys::dup_if_open(fd) {
                sys::unlock_open_file(dup.as_fd());
            }
        }
    }
}

impl Reading {
    fn new(callers: OwnedFd, commands: &OwnedFd) -> Option<Reading> {
        let start = lseek(callers.as_fd(), 0, Whence::SeekCur).ok()?;
        lseek(commands.as_fd(), start, Whence::SeekSet).ok()?;
        Some(Reading {
            callers,
            commands: sys::dup_if_open(commands.as_raw_fd())?,
            start,
        })
    }

    fn carry_over(&self) {
        let Ok(end) = lseek(self.commands.as_fd(), 0, Whence::SeekCur) else {
            return;
        };
        if end != self.start {
            let _ = lseek(self.callers.as_fd(), end - self.start, Whence::SeekCur);
        }
    }
}

/// `fd` (whose description `callers` is) opened again: the same object with the same
/// access mode and status flags, in a description of its own. `None` for a socket, or
/// when it cannot be opened again as the same object.
fn reopen(fd: RawFd, callers: BorrowedFd<'_>) -> Option<(OwnedFd, FileStat)> {
    let was = fstat(callers).ok()?;
    if !opens_the_same(&was, callers) {
        return None;
    }
    let flags = OFlag::from_bits_truncate(nix::fcntl::fcntl(callers, FcntlArg::F_GETFL).ok()?);
    if flags.contains(OFlag::O_PATH) {
        return None;
    }
    // Not blocking in `open`: a FIFO opened to read waits for a writer otherwise.
    let opening = (flags & (OFlag::O_ACCMODE | OFlag::O_APPEND | OFlag::O_SYNC | OFlag::O_DSYNC))
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC
        | OFlag::O_NONBLOCK;
    let commands = nix::fcntl::open(
        format!("/proc/self/fd/{fd}").as_str(),
        opening,
        Mode::empty(),
    )
    .ok()?;
    let is = fstat(commands.as_fd()).ok()?;
    let same = (is.st_dev, is.st_ino, is.st_rdev, is.st_mode & libc::S_IFMT)
        == (
            was.st_dev,
            was.st_ino,
            was.st_rdev,
            was.st_mode & libc::S_IFMT,
        );
    if !same {
        return None;
    }
    nix::fcntl::fcntl(commands.as_fd(), FcntlArg::F_SETFL(flags & CARRIED_FLAGS)).ok()?;
    // Above the standard fds, which the plan `dup2`s onto.
    let commands = if commands.as_raw_fd() < 3 {
        sys::dup_if_open(commands.as_raw_fd())?
    } else {
        commands
    };
    Some((commands, is))
}

/// Whether opening `st` (the file behind `callers`) again reaches the same object, with no
/// effect of its own: files, directories, pipes, terminals and the memory devices
/// (`/dev/null`, `/dev/zero`, …). Not a socket (it cannot be opened), and not a device
/// whose opening does something: `/dev/ptmx` and `/dev/tty` lead to another terminal
/// than the one the caller holds, a clone device makes a new instance, a tape rewinds.
fn opens_the_same(st: &FileStat, callers: BorrowedFd<'_>) -> bool {
    /// The memory devices' major number.
    const MEM_MAJOR: u32 = 1;
    /// `/dev/tty`, `/dev/console` and `/dev/ptmx`.
    const TTYAUX_MAJOR: u32 = 5;
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG | libc::S_IFDIR | libc::S_IFIFO => true,
        libc::S_IFCHR => {
            let major = libc::major(st.st_rdev);
            major == MEM_MAJOR
                || (major != TTYAUX_MAJOR && nix::unistd::isatty(callers).unwrap_or(false))
        }
        _ => false,
    }
}

/// Whether the open file description behind sandgate's `fd` holds no lock, as the kernel
/// lists its locks in `/proc/self/fdinfo`; `None` when that cannot be read (the fd is
/// closed, `/proc` is missing): such a description is left alone.
fn holds_no_lock(fd: RawFd) -> Option<bool> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    Some(!info.lines().any(|line| line.starts_with("lock:")))
}
