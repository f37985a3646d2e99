//! The command's standard streams, opened again in the sandbox's own view.
//!
//! The descriptions sandgate opens anew for the command (`exec::fresh`) lie on the host's
//! mounts, where the caller opened them: read-write, whatever the sandbox's view makes
//! of the same file. A change made through a descriptor needs no write access, only
//! ownership — `fchmod`, `fchown`, `futimens`, `fsetxattr` — so the command could make
//! the user's terminal readable by every local user (`chmod 666` on the pty), or change
//! the mode, times and attributes of a file given as stdin, or of `/dev/null` as root.
//! So the child, as soon as it has its own mount namespace (a copy of the host's mounts)
//! and before anything there is covered or hidden, opens each stream that has a name
//! again by that name, and puts it in place of sandgate's description when it is the
//! same object. The copy then goes read-only with the rest of the tree (`mounts`), so a
//! terminal, a device or a file — in `/tmp` or a writable root too: the writable ones are
//! binds made on top — lies on a read-only mount, where the kernel refuses all of these.
//! What has no name (a pipe) or is not found again as the same object (a name since
//! replaced) keeps the description sandgate opened.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use nix::fcntl::{openat2, FcntlArg, OFlag, OpenHow, ResolveFlag, AT_FDCWD};
use nix::sys::stat::{fstat, Mode};
use nix::unistd::{lseek, Whence};

use crate::sys;

/// One standard stream to open again.
#[derive(Debug)]
pub struct Rehome {
    /// The fd that holds sandgate's description of it in the child (its place in the
    /// command's `dup2` plan), replaced in place.
    pub slot: RawFd,
    /// Its name, as the kernel keeps it for that description.
    pub path: CString,
    /// What it must be found as.
    pub dev: u64,
    pub ino: u64,
    /// The description's access mode and status flags.
    pub flags: libc::c_int,
    /// Where a regular file (stdin) is read from; `None` for anything else.
    pub offset: Option<i64>,
}

/// Opens each of `streams` in this (the child's) view and puts it in its slot. Returns a
/// duplicate of the regular file read as stdin when it was replaced, for sandgate to follow
/// how far the command reads. Async-signal-safe: open, fstat, fcntl, lseek and dup2 only.
pub fn apply(streams: &[Rehome]) -> Option<OwnedFd> {
    let mut stdin = None;
    for stream in streams {
        let Some(fd) = open_again(stream) else {
            continue;
        };
        // Only stdin can be a regular file here: stdout and stderr ones are relayed.
        if stream.offset.is_some() {
            stdin = sys::dup_if_open(fd.as_raw_fd());
        }
        // The slot stays close-on-exec: the plan `dup2`s it where the command wants it.
        if sys::dup_onto(fd.as_raw_fd(), stream.slot).is_ok() {
            let _ = sys::set_cloexec(stream.slot);
        }
    }
    stdin
}

/// `stream` opened by its name, when that is still the same object. Found first as a
/// bare handle (`O_PATH`, no link followed: the kernel's name holds none, and one swapped
/// in since must not lead this open, made with the child's rights still whole, anywhere
/// else) and checked, then opened through that handle, so that no other object is ever
/// opened, not even for a moment (opening a device can have effects of its own).
fn open_again(stream: &Rehome) -> Option<OwnedFd> {
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let handle = openat2(AT_FDCWD, stream.path.as_c_str(), how).ok()?;
    let st = fstat(handle.as_fd()).ok()?;
    if (st.st_dev, st.st_ino) != (stream.dev, stream.ino) {
        return None;
    }
    let status = OFlag::from_bits_truncate(stream.flags);
    // Not waiting in `open` (a FIFO waits for its other end); the flags are set after.
    let opening = (status & (OFlag::O_ACCMODE | OFlag::O_SYNC | OFlag::O_DSYNC))
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC
        | OFlag::O_NONBLOCK;
    let mut name = [0u8; 32];
    let fd = nix::fcntl::open(
        sys::proc_fd_path(handle.as_raw_fd(), &mut name)?,
        opening,
        Mode::empty(),
    )
    .ok()?;
    let carried = status & (OFlag::O_APPEND | OFlag::O_NONBLOCK);
    nix::fcntl::fcntl(fd.as_fd(), FcntlArg::F_SETFL(carried)).ok()?;
    if let Some(offset) = stream.offset {
        lseek(fd.as_fd(), offset, Whence::SeekSet).ok()?;
    }
    Some(fd)
}
