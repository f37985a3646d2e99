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
//! These descriptions lie on the host's mounts: the child opens each that has a name again
//! in the sandbox's view once its mounts are in place (`sandbox::rehome`), where a file
//! outside the writable roots, a device or the terminal is on a read-only mount.
//!
//! What cannot be opened again is passed as it is: a socket, or an object the caller may
//! not open (a terminal of another user's, after `su`). A lock the command takes on such a
//! description is dropped when the call ends, if the description held none at its start.
//! (Regular files as stdout or stderr never reach the command: see `relay`.)

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::fcntl::{FcntlArg, OFlag};
use nix::sys::stat::{fstat, FileStat, Mode};
use nix::unistd::{lseek, Whence};

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

use super::relay::Relay;
use crate::sandbox::rehome::Rehome;
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
    /// New descriptions for each of fds 0, 1 and 2 that is open, not relayed, and can be
    /// opened again; and for each other inherited fd of one of their descriptions
    /// (`exec 3>&1`). Stdin that is a file the relay writes to (`<>log >&0`) is opened
    /// for reading only: the command may not write that file but through the relay.
    /// `inherited`: the fds sandgate passes on (`sys::inherited_fds`).
    pub fn open(relay: &Relay, inherited: &[RawFd]) -> FreshStdio {
        let relayed = relay.relayed();
        let mut stdio = FreshStdio {
            fresh: vec![],
            plan: vec![],
            reading: None,
            unlocked: vec![],
        };
        let others: Vec<RawFd> = inherited
            .iter()
            .copied()
            .filter(|fd| *fd > 2 && !relayed.contains(fd))
            .collect();
        for fd in (0..3).filter(|fd| !relayed.contains(fd) && !sys::closed_at_start(*fd)) {
            let Some(callers) = sys::dup_if_open(fd) else {
                continue;
            };
            let read_only = fd == 0 && relay.writes_to(callers.as_fd());
            match reopen(fd, callers.as_fd(), read_only) {
                Some((commands, st)) => {
                    if fd == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG {
                        if let Some(reading) = Reading::new(callers, &commands) {
                            stdio.reading = Some(reading);
                        }
                    }
                    stdio.plan.push((commands.as_raw_fd(), fd));
                    for other in others.iter().filter(|o| sys::same_open_file(fd, **o)) {
                        stdio.plan.push((commands.as_raw_fd(), *other));
                    }
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

    /// What the child opens again in its own view, in place of these descriptions (see
    /// `sandbox::rehome`): each that has a name.
    pub fn rehoming(&self) -> Vec<Rehome> {
        self.fresh
            .iter()
            .filter_map(|(commands, _)| {
                let fd = commands.as_raw_fd();
                let name = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
                let name = name.as_os_str().as_bytes();
                if !name.starts_with(b"/") || name.ends_with(b" (deleted)") {
                    return None;
                }
                let st = fstat(commands.as_fd()).ok()?;
                let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
                let flags = nix::fcntl::fcntl(commands.as_fd(), FcntlArg::F_GETFL).ok()?;
                // A file open for writing holds its mount writable: the view could not be
                // made read-only with it open (`EBUSY`). The caller gave it to be written.
                if regular && flags & libc::O_ACCMODE != libc::O_RDONLY {
                    return None;
                }
                Some(Rehome {
                    slot: fd,
                    path: CString::new(name).ok()?,
                    dev: st.st_dev,
                    ino: st.st_ino,
                    flags,
                    offset: match regular {
                        true => Some(lseek(commands.as_fd(), 0, Whence::SeekCur).ok()?),
                        false => None,
                    },
                })
            })
            .collect()
    }

    /// The command reads stdin through `commands`, the child's description of the file
    /// (see `sandbox::rehome`), not sandgate's.
    pub fn command_reads(&mut self, commands: OwnedFd) {
        if let Some(reading) = &mut self.reading {
            reading.commands = commands;
        }
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
/// access mode (`read_only`: for reading only) and status flags, in a description of its
/// own. `None` for a socket, or when it cannot be opened again as the same object.
fn reopen(fd: RawFd, callers: BorrowedFd<'_>, read_only: bool) -> Option<(OwnedFd, FileStat)> {
    let was = fstat(callers).ok()?;
    if !opens_the_same(&was, callers) {
        return None;
    }
    let mut flags = OFlag::from_bits_truncate(nix::fcntl::fcntl(callers, FcntlArg::F_GETFL).ok()?);
    if read_only {
        // Read-write becomes read-only; write-only never becomes readable (the relay
        // gives stdin the pipe then).
        if flags & OFlag::O_ACCMODE != OFlag::O_RDWR {
            return None;
        }
        flags.remove(OFlag::O_ACCMODE | OFlag::O_APPEND);
    }
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
/// whose opening does something: `/dev/ptmx`, `/dev/tty`, `/dev/console` and `/dev/tty0`
/// lead to another terminal than the one the caller holds, a clone device makes a new
/// instance, a tape rewinds.
fn opens_the_same(st: &FileStat, callers: BorrowedFd<'_>) -> bool {
    /// The memory devices' major number.
    const MEM_MAJOR: u32 = 1;
    /// The virtual consoles' (minor 0: whichever is in front).
    const TTY_MAJOR: u32 = 4;
    /// `/dev/tty`, `/dev/console` and `/dev/ptmx`.
    const TTYAUX_MAJOR: u32 = 5;
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG | libc::S_IFDIR | libc::S_IFIFO => true,
        libc::S_IFCHR => {
            let (major, minor) = (libc::major(st.st_rdev), libc::minor(st.st_rdev));
            let redirects = major == TTYAUX_MAJOR || (major == TTY_MAJOR && minor == 0);
            major == MEM_MAJOR || (!redirects && nix::unistd::isatty(callers).unwrap_or(false))
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
