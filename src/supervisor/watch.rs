//! `inotify_add_watch`, performed by the supervisor where the sandbox may write and
//! refused elsewhere.
//!
//! A watch on a directory the sandbox may only read reports what host processes do there
//! — which files the user's editor, shell or build opens, writes and removes, and when —
//! and no landlock right governs it. Watching is what the sandbox's own files need (a test
//! runner's watch mode, a dev server), so a watch goes through where the sandbox may write
//! (the writable areas, its private `/tmp`), and nowhere else: `tail -f` of a host log
//! falls back to polling, as it does wherever inotify is unavailable.
//!
//! A caller in a sandbox nested in this one is refused: its own, perhaps narrower, policy
//! is not known here.
//!
//! The path is resolved once in the caller's view (`place`), and the watch is added by
//! the supervisor to the caller's inotify instance (taken with `pidfd_getfd`) through the
//! resolved object itself (`/proc/self/fd/N`): no path rewritten after the check is
//! watched. The watch descriptor is the caller's answer, as the kernel would have given it.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{FileStat, Mode};

use super::observe::{Acts, Verdict};
use super::ops::PathArg;
use super::place::{self, Located};
use super::resolve::Root;
use super::Handled;
use super::{Call, Context};
use crate::policy::Mode as SandboxMode;
use crate::sys::{self, Answer};

/// Performs or refuses `inotify_add_watch(inotify, path at at, mask)`.
pub fn handle(
    call: &Call<'_>,
    context: &Context,
    root: &Root,
    inotify: i32,
    at: PathArg,
    mask: u32,
) -> Handled {
    match watch(call, context, root, inotify, at, mask) {
        Ok(wd) => Handled::Answer(Answer::Return(i64::from(wd)), None),
        Err(Failed::Errno(e)) => Handled::Answer(Answer::Error(e as i32), None),
        Err(Failed::Refused(needed)) => {
            let shown = call
                .read_cstr(at.ptr)
                .map(|p| super::observe::shown_path(call, at.dirfd, &p))
                .ok();
            let denial = call.denial("watch", shown, None, needed);
            Handled::Answer(Answer::Error(libc::EACCES), Some(denial))
        }
    }
}

/// Why no watch was added.
enum Failed {
    /// What the kernel would have said (the path does not resolve, …).
    Errno(Errno),
    /// Not where the sandbox may write; the narrowest mode that would allow it.
    Refused(SandboxMode),
}

impl From<Errno> for Failed {
    fn from(e: Errno) -> Self {
        Failed::Errno(e)
    }
}

/// Whether the object `st` (`object`, in `dir`) is the sandbox's to watch: a file the
/// sandbox may write, or a directory whose entries it may write (a frozen directory's
/// included: its entries' data is writable). Never a device, a protected path, or a file
/// bound on its own over a writable directory (a read-only island, an allowed socket):
/// that one is judged by its own mount, not by the directory it sits in.
fn judge(
    context: &Context,
    root: &Root,
    dir: BorrowedFd<'_>,
    object: BorrowedFd<'_>,
    st: &FileStat,
) -> Result<(), Failed> {
    let id = (st.st_dev, st.st_ino);
    let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
    let special = matches!(st.st_mode & libc::S_IFMT, libc::S_IFCHR | libc::S_IFBLK);
    if special || context.devices.contains(&id) || context.protected.contains(&id) {
        return Err(Failed::Refused(SandboxMode::FullAccess));
    }
    // (An entry of a frozen directory is bound on its own too, writable again.)
    let in_frozen =
        sys::statx(dir, b"", false).is_ok_and(|d| context.frozen.contains(&(d.dev, d.ino)));
    let bound_alone = !is_dir
        && !in_frozen
        && !context.writable.contains(&id)
        && sys::mount_id(object).ok() != sys::mount_id(dir).ok();
    if bound_alone || context.islands.contains(&id) {
        return Err(Failed::Refused(SandboxMode::FullAccess));
    }
    let judged = if is_dir { object } else { dir };
    let judged_st = sys::statx(judged, b"", false).map_err(|_| Errno::EACCES)?;
    match context.dir_verdict(judged, &judged_st, root, false) {
        Some(Verdict::Allowed) => Ok(()),
        Some(Verdict::Refused(needed)) => Err(Failed::Refused(needed)),
        _ => Err(Failed::Refused(SandboxMode::FullAccess)),
    }
}

fn watch(
    call: &Call<'_>,
    context: &Context,
    root: &Root,
    inotify: i32,
    at: PathArg,
    mask: u32,
) -> Result<i32, Failed> {
    let path = call.read_cstr(at.ptr)?;
    if path.is_empty() {
        return Err(Errno::ENOENT.into());
    }
    let follow = mask & libc::IN_DONT_FOLLOW == 0;
    let place = match place::locate(call, context, root, at, &path, follow, Acts::OnName)? {
        Located::Place(place) => place,
        // The caller's own descriptors and the rest of /proc: nothing of the sandbox's.
        Located::CallerFd(_) | Located::OtherFd | Located::Proc => {
            return Err(Failed::Refused(SandboxMode::FullAccess))
        }
    };
    let Some(st) = place.object else {
        return Err(Errno::ENOENT.into());
    };
    let object: OwnedFd = match &place.name {
        Some(name) => openat(
            place.dir.as_fd(),
            OsStr::from_bytes(name),
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?,
        None => place.dir.try_clone().map_err(|_| Errno::EMFILE)?,
    };
    judge(context, root, place.dir.as_fd(), object.as_fd(), &st)?;
    // A caller in a sandbox nested in this one (under more filters): its own policy, which
    // may be narrower, is not known here.
    let facts = context
        .procs
        .facts(call.tid().as_raw(), call.proc_alive.get())
        .map_err(|_| Errno::ESRCH)?;
    if facts.filters > context.filters {
        return Err(Failed::Refused(SandboxMode::FullAccess));
    }
    let pidfd = super::pidfd_for(call.tid())?;
    let instance = sys::pidfd_getfd(pidfd.as_fd(), inotify).map_err(|_| Errno::EBADF)?;
    let link =
        CString::new(format!("/proc/self/fd/{}", object.as_raw_fd())).map_err(|_| Errno::EINVAL)?;
    if !call.still_pending() {
        return Err(Errno::EINTR.into());
    }
    // The object is reached through its descriptor: following the magic link is the point.
    let mask = mask & !libc::IN_DONT_FOLLOW;
    sys::inotify_add_watch(instance.as_fd(), &link, mask)
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EINVAL)).into())
}
