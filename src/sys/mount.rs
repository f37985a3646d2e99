//! The new mount API (`open_tree`, `move_mount`, `mount_setattr`,
//! `fsopen`/`fsconfig`/`fsmount`) and bringing up the loopback of a new network namespace.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use super::check;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(2)` on `path`: sets and clears mount attributes (`MOUNT_ATTR_*`),
/// recursively when asked. Async-signal-safe.
pub fn mount_setattr(path: &CStr, recursive: bool, set: u64, clear: u64) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: `path` is NUL-terminated and `attr` is a live, correctly sized struct.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// Clones the mount tree at `source` (an open fd; `O_PATH` is enough) into a detached
/// mount, the whole tree beneath it when `recursive` (`open_tree(OPEN_TREE_CLONE)`). The
/// returned fd keeps naming that mount after [`move_mount`] attached it, so its attributes
/// can still be changed through it. Async-signal-safe.
pub fn clone_tree(source: BorrowedFd<'_>, recursive: bool) -> io::Result<OwnedFd> {
    let mut flags = libc::OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint;
    flags |= libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: an fd, a NUL-terminated empty path and integer flags; the returned fd is
    // owned below.
    let fd = check(unsafe {
        libc::syscall(libc::SYS_open_tree, source.as_raw_fd(), c"".as_ptr(), flags)
    })?;
    // SAFETY: a fresh fd owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Attaches the detached mount `tree` on top of the file or directory `target` is open on.
/// Both ends are fds, so neither can be swapped for a symlink between the check that
/// opened them and the mount. Async-signal-safe.
pub fn move_mount(tree: BorrowedFd<'_>, target: BorrowedFd<'_>) -> io::Result<()> {
    let flags = libc::MOVE_MOUNT_F_EMPTY_PATH | libc::MOVE_MOUNT_T_EMPTY_PATH;
    // SAFETY: two fds, two NUL-terminated empty paths and integer flags.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            target.as_raw_fd(),
            c"".as_ptr(),
            flags,
        )
    })
    .map(drop)
}

/// `mount_setattr(2)` on the mount `fd` is open on (and every mount beneath it when
/// `recursive`). Async-signal-safe.
pub fn mount_setattr_fd(
    fd: BorrowedFd<'_>,
    recursive: bool,
    set: u64,
    clear: u64,
) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: an fd, a NUL-terminated empty path, and a live, correctly sized struct.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | if recursive { libc::AT_RECURSIVE } else { 0 },
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// `FSOPEN_CLOEXEC`, `FSCONFIG_*` and `FSMOUNT_CLOEXEC` of `<linux/mount.h>` (stable uapi
/// values; not every libc release exports them).
const FSOPEN_CLOEXEC: libc::c_uint = 1;

const FSCONFIG_SET_FLAG: libc::c_uint = 0;

const FSCONFIG_SET_STRING: libc::c_uint = 1;

const FSCONFIG_CMD_CREATE: libc::c_uint = 6;

const FSMOUNT_CLOEXEC: libc::c_uint = 1;

/// `fsopen(2)`: a filesystem context for `fstype`, to be configured with [`fsconfig`] and
/// turned into a detached mount by [`fsmount`].
pub fn fsopen(fstype: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name and integer flags; the returned fd is owned below.
    let fd = check(unsafe { libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), FSOPEN_CLOEXEC) })?;
    // SAFETY: a fresh fd owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// One `fsconfig(2)` step on a context from [`fsopen`].
pub enum FsConfig<'a> {
    /// `key=value`.
    String(&'a CStr, &'a CStr),
    /// A bare `key`.
    Flag(&'a CStr),
    /// Creates the superblock from what was set.
    Create,
}

/// `fsconfig(2)`: sets a parameter of, or creates, the filesystem context `fs`.
pub fn fsconfig(fs: BorrowedFd<'_>, step: FsConfig<'_>) -> io::Result<()> {
    let null = std::ptr::null::<libc::c_char>();
    let (cmd, key, value) = match step {
        FsConfig::String(key, value) => (FSCONFIG_SET_STRING, key.as_ptr(), value.as_ptr()),
        FsConfig::Flag(key) => (FSCONFIG_SET_FLAG, key.as_ptr(), null),
        FsConfig::Create => (FSCONFIG_CMD_CREATE, null, null),
    };
    // SAFETY: an fd, NUL-terminated strings (or NULL where the command takes none) that
    // outlive the call, and an integer.
    check(unsafe { libc::syscall(libc::SYS_fsconfig, fs.as_raw_fd(), cmd, key, value, 0) })
        .map(drop)
}

/// `fsmount(2)`: a detached mount of the superblock created in `fs`, with the
/// `MOUNT_ATTR_*` flags `attrs`; attach it with [`move_mount`].
pub fn fsmount(fs: BorrowedFd<'_>, attrs: u64) -> io::Result<OwnedFd> {
    let attrs =
        libc::c_uint::try_from(attrs).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: an fd and integer flags; the returned fd is owned below.
    let fd =
        check(unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, attrs) })?;
    // SAFETY: a fresh fd owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Sets the loopback interface of this process's network namespace up (a new namespace
/// has it down, and then nothing can reach 127.0.0.1 in it). Needs `CAP_NET_ADMIN` there.
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: integer-only syscall returning a fresh fd.
    let fd = check(
        unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) }.into(),
    )?;
    // SAFETY: a fresh fd owned by nothing else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    // SAFETY: ifreq is plain old data; the name is set below, the rest is read back.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (to, from) in request.ifr_name.iter_mut().zip(b"lo") {
        *to = *from as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS fills the flags of the named interface in `request`, which
    // lives for the call.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request) }.into())?;
    // SAFETY: SIOCGIFFLAGS just wrote this member of the union.
    unsafe {
        request.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    // SAFETY: SIOCSIFFLAGS reads `request`, which lives for the call.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &request) }.into()).map(drop)
}
