//! Files by path or descriptor where nix has no call: `statx` with mount ids, `O_PATH`
//! opens, mode, time and attribute changes without following a link, inotify watches,
//! casefolding.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use super::check;

/// Writes `data` to the file at `path` in one `write`. Async-signal-safe.
pub fn write_file(path: &CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: `path` is NUL-terminated; the returned fd is owned below.
    let fd = check(unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) }.into())?;
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    // SAFETY: `data` is a live slice of `data.len()` bytes.
    let n = check(
        unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) } as libc::c_long,
    )?;
    if n as usize == data.len() {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(libc::EIO))
    }
}

/// Opens `path` with `O_PATH | O_CLOEXEC` (plus `extra` flags). Async-signal-safe.
pub fn open_path(path: &CStr, extra: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `path` is NUL-terminated; the returned fd is owned below.
    let fd =
        check(unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC | extra) }.into())?;
    // SAFETY: a fresh fd owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// What the supervisor needs to know of a file: its type, identity, and when this inode
/// was born. The birth time tells a directory from a later one that got its recycled
/// inode number (ext4 hands a removed directory's number to the next one at once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub mode: u32,
    pub dev: u64,
    pub ino: u64,
    /// `None` when the filesystem does not record birth times.
    pub born: Option<(i64, u32)>,
}

/// The id of the mount `fd` lies on (`statx`'s `STATX_MNT_ID`): two objects with the same
/// id are reached without crossing a mount point between them and that mount's root.
pub fn mount_id(fd: BorrowedFd<'_>) -> io::Result<u64> {
    mount_id_at(fd, c"")
}

/// The id of the mount the name `path` beneath `dir` lies on (`""`: `dir` itself), a
/// symlink at the end not followed. Mount points are crossed as `dir`'s mount namespace
/// has them: a name that is a mount point there has another id than `dir`.
pub fn mount_id_at(dir: BorrowedFd<'_>, path: &CStr) -> io::Result<u64> {
    // SAFETY: statx is plain old data that the kernel fills.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let empty = if path.is_empty() {
        libc::AT_EMPTY_PATH
    } else {
        0
    };
    // SAFETY: an fd, a NUL-terminated path, a live local for the result.
    let ret = unsafe {
        libc::statx(
            dir.as_raw_fd(),
            path.as_ptr(),
            empty | libc::AT_SYMLINK_NOFOLLOW | libc::AT_STATX_SYNC_AS_STAT,
            libc::STATX_MNT_ID,
            &mut st,
        )
    };
    check(ret.into())?;
    if st.stx_mask & libc::STATX_MNT_ID == 0 {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    }
    Ok(st.stx_mnt_id)
}

/// `statx` of `path` beneath `dir` (`""`: `dir` itself), not following a symlink in the
/// last place when `nofollow`.
pub fn statx(dir: BorrowedFd<'_>, path: &[u8], nofollow: bool) -> io::Result<Stat> {
    let path =
        std::ffi::CString::new(path).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut flags = libc::AT_STATX_SYNC_AS_STAT;
    if path.as_bytes().is_empty() {
        flags |= libc::AT_EMPTY_PATH;
    }
    if nofollow {
        flags |= libc::AT_SYMLINK_NOFOLLOW;
    }
    // SAFETY: statx is plain old data that the kernel fills.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path, a live local for the result.
    let ret = unsafe {
        libc::statx(
            dir.as_raw_fd(),
            path.as_ptr(),
            flags,
            libc::STATX_TYPE | libc::STATX_INO | libc::STATX_BTIME,
            &mut st,
        )
    };
    check(ret.into())?;
    Ok(Stat {
        mode: u32::from(st.stx_mode),
        dev: libc::makedev(st.stx_dev_major, st.stx_dev_minor),
        ino: st.stx_ino,
        born: (st.stx_mask & libc::STATX_BTIME != 0)
            .then_some((st.stx_btime.tv_sec, st.stx_btime.tv_nsec)),
    })
}

/// `inotify_add_watch(2)` on the inotify instance `inotify`; the watch descriptor.
pub fn inotify_add_watch(inotify: BorrowedFd<'_>, path: &CStr, mask: u32) -> io::Result<i32> {
    // SAFETY: an fd, a NUL-terminated path that lives across the call and an integer; the
    // kernel writes nothing back.
    let wd = unsafe { libc::inotify_add_watch(inotify.as_raw_fd(), path.as_ptr(), mask) };
    check(wd.into()).map(|_| wd)
}

/// `fchmodat2(2)` (Linux 6.6): with `AT_EMPTY_PATH` it changes the mode of the file `dir`
/// itself names, an `O_PATH` descriptor included, without any path to swap.
pub fn fchmodat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    mode: u32,
    flags: libc::c_int,
) -> io::Result<()> {
    // SAFETY: an fd, a NUL-terminated path and integers; nothing is written back.
    check(unsafe {
        libc::syscall(
            libc::SYS_fchmodat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            mode,
            flags,
        )
    })
    .map(drop)
}

/// `utimensat(2)` with `AT_EMPTY_PATH` on `file` itself (an `O_PATH` descriptor
/// included), without any path to swap: `times` as access and modification times, `None`
/// for now.
pub fn utimens_empty_path(
    file: BorrowedFd<'_>,
    times: Option<&[libc::timespec; 2]>,
) -> io::Result<()> {
    let times = times.map_or(std::ptr::null(), |t| t.as_ptr());
    // SAFETY: an fd, an empty NUL-terminated path and NULL or two live timespecs, read
    // only.
    check(i64::from(unsafe {
        libc::utimensat(file.as_raw_fd(), c"".as_ptr(), times, libc::AT_EMPTY_PATH)
    }))
    .map(drop)
}

/// `setxattr(2)` on `path` (which is followed), with `value` as the attribute's value.
pub fn set_xattr(path: &CStr, name: &CStr, value: &[u8], flags: libc::c_int) -> io::Result<()> {
    // SAFETY: NUL-terminated path and name, a live buffer of `value.len()` bytes.
    check(
        unsafe {
            libc::setxattr(
                path.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                flags,
            )
        }
        .into(),
    )
    .map(drop)
}

/// `removexattr(2)` of `name` on what `path` leads to (a `/proc/self/fd` magic link to an
/// `O_PATH` descriptor reaches the very inode).
pub fn remove_xattr(path: &CStr, name: &CStr) -> io::Result<()> {
    // SAFETY: NUL-terminated path and name, read only.
    check(unsafe { libc::removexattr(path.as_ptr(), name.as_ptr()) }.into()).map(drop)
}

/// `fchownat(file, "", owner, group, AT_EMPTY_PATH)`: the owner of the file `file` refers
/// to (an `O_PATH` descriptor will do); `-1` (`u32::MAX`) leaves one unchanged.
pub fn fchown_empty_path(file: BorrowedFd<'_>, owner: u32, group: u32) -> io::Result<()> {
    // SAFETY: an fd, an empty NUL-terminated path and integers; nothing is written back.
    check(
        unsafe {
            libc::fchownat(
                file.as_raw_fd(),
                c"".as_ptr(),
                owner,
                group,
                libc::AT_EMPTY_PATH,
            )
        }
        .into(),
    )
    .map(drop)
}

/// `fsetxattr(2)` on the file `fd` refers to.
pub fn fset_xattr(
    fd: BorrowedFd<'_>,
    name: &CStr,
    value: &[u8],
    flags: libc::c_int,
) -> io::Result<()> {
    // SAFETY: a NUL-terminated name, a live buffer of `value.len()` bytes.
    check(
        unsafe {
            libc::fsetxattr(
                fd.as_raw_fd(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                flags,
            )
        }
        .into(),
    )
    .map(drop)
}

/// Returns true when the directory `dir` (opened for reading) looks names up without
/// regard to case (`FS_CASEFOLD_FL`, ext4 and tmpfs with a casefold encoding). A
/// filesystem that keeps no such flags answers false.
pub fn is_casefolded(dir: BorrowedFd<'_>) -> bool {
    const FS_IOC_GETFLAGS: libc::c_ulong = 0x8008_6601;
    const FS_CASEFOLD_FL: libc::c_long = 0x4000_0000;
    let mut flags: libc::c_long = 0;
    // SAFETY: the ioctl writes one long into the live local (the kernel writes an int,
    // which fits in it).
    let ret = unsafe { libc::ioctl(dir.as_raw_fd(), FS_IOC_GETFLAGS, &mut flags) };
    ret == 0 && flags & FS_CASEFOLD_FL != 0
}
