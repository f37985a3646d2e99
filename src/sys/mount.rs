//! The new mount API (`open_tree`, `move_mount`, `mount_setattr`,
//! `fsopen`/`fsconfig`/`fsmount`) and bringing up the loopback of a new network namespace.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags, MoveMountFlags, OpenTreeFlags};

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
    let mut flags = OpenTreeFlags::OPEN_TREE_CLONE
        | OpenTreeFlags::OPEN_TREE_CLOEXEC
        | OpenTreeFlags::AT_EMPTY_PATH;
    if recursive {
        flags |= OpenTreeFlags::AT_RECURSIVE;
    }
    Ok(rustix::mount::open_tree(source, c"", flags)?)
}

/// Attaches the detached mount `tree` on top of the file or directory `target` is open on.
/// Both ends are fds, so neither can be swapped for a symlink between the check that
/// opened them and the mount. Async-signal-safe.
pub fn move_mount(tree: BorrowedFd<'_>, target: BorrowedFd<'_>) -> io::Result<()> {
    let flags = MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH;
    Ok(rustix::mount::move_mount(tree, c"", target, c"", flags)?)
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

/// `fsopen(2)`: a filesystem context for `fstype`, to be configured with [`fsconfig`] and
/// turned into a detached mount by [`fsmount`].
pub fn fsopen(fstype: &CStr) -> io::Result<OwnedFd> {
    Ok(rustix::mount::fsopen(fstype, FsOpenFlags::FSOPEN_CLOEXEC)?)
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
    Ok(match step {
        FsConfig::String(key, value) => rustix::mount::fsconfig_set_string(fs, key, value),
        FsConfig::Flag(key) => rustix::mount::fsconfig_set_flag(fs, key),
        FsConfig::Create => rustix::mount::fsconfig_create(fs),
    }?)
}

/// `fsmount(2)`: a detached mount of the superblock created in `fs`, with the
/// `MOUNT_ATTR_*` flags `attrs`; attach it with [`move_mount`].
pub fn fsmount(fs: BorrowedFd<'_>, attrs: u64) -> io::Result<OwnedFd> {
    let attrs =
        libc::c_uint::try_from(attrs).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let attrs = MountAttrFlags::from_bits_retain(attrs);
    Ok(rustix::mount::fsmount(
        fs,
        FsMountFlags::FSMOUNT_CLOEXEC,
        attrs,
    )?)
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
