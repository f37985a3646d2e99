//! Safe, one-syscall wrappers for what nix and the landlock crate do not cover. Every
//! `unsafe` block of the crate lives here, each with the invariant it relies on.
//!
//! Functions marked *async-signal-safe* may run in the forked child before `execve`: they
//! do not allocate and take only pre-built arguments.

#![allow(unsafe_code)]

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Turns a `-1`-on-error return into `io::Result`.
fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Returns the highest landlock ABI the running kernel supports (0 when landlock is absent
/// or disabled at boot).
pub fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a NULL attr and size 0 this call only queries the version; it reads no
    // user memory and creates no fd.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(ret).unwrap_or(0).max(0)
}

/// Returns true when the kernel supports seccomp filter mode.
pub fn seccomp_filter_available() -> bool {
    // SAFETY: PR_GET_SECCOMP takes no pointer arguments.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    // 0 = not sandboxed yet, 2 = already under a filter (stacking is allowed); EINVAL means
    // CONFIG_SECCOMP is off, and mode 1 (strict) would have killed us already.
    mode == 0 || mode == 2
}

/// Returns true when the kernel knows the seccomp return action `action`.
pub fn seccomp_action_available(action: u32) -> bool {
    const SECCOMP_GET_ACTION_AVAIL: libc::c_uint = 2;
    // SAFETY: the kernel reads one u32 from the pointer, which points at a live local.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0,
            &action as *const u32,
        )
    };
    ret == 0
}

/// Installs a seccomp filter on the calling thread and returns the listener fd when
/// `flags` asks for one. Async-signal-safe.
pub fn seccomp_install(
    program: &[libc::sock_filter],
    flags: libc::c_ulong,
) -> io::Result<Option<OwnedFd>> {
    let len = libc::c_ushort::try_from(program.len())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let fprog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `program`, which outlives the call; the kernel copies it.
    let ret = check(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &fprog as *const _,
        )
    })?;
    if flags & libc::SECCOMP_FILTER_FLAG_NEW_LISTENER == 0 {
        return Ok(None);
    }
    let fd = RawFd::try_from(ret).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: with NEW_LISTENER the kernel returned a fresh fd that nothing else owns.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Sets PR_SET_NO_NEW_PRIVS. Async-signal-safe.
pub fn set_no_new_privs() -> io::Result<()> {
    // SAFETY: integer-only prctl.
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }.into()).map(drop)
}

/// Drops every capability up to `last_cap` from the bounding set and clears the ambient
/// set. Async-signal-safe. (Effective/permitted/inheritable are cleared by `caps`.)
pub fn drop_bounding_and_ambient(last_cap: u32) -> io::Result<()> {
    for cap in 0..=last_cap {
        // SAFETY: integer-only prctl.
        let ret = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0) };
        // EINVAL: the kernel does not know this capability; nothing to drop.
        if ret < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: integer-only prctl.
    check(
        unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            )
        }
        .into(),
    )
    .map(drop)
}

/// Asks for `signal` when the parent thread dies. Async-signal-safe.
pub fn set_parent_death_signal(signal: libc::c_int) -> io::Result<()> {
    // SAFETY: integer-only prctl.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal, 0, 0, 0) }.into()).map(drop)
}

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

/// Sends `fd` over the unix socket `sock` as SCM_RIGHTS with a one-byte payload.
/// Async-signal-safe (the control buffer lives on the stack).
pub fn send_fd(sock: BorrowedFd<'_>, fd: BorrowedFd<'_>) -> io::Result<()> {
    #[repr(C)]
    union Cmsg {
        buf: [u8; 64],
        _align: libc::cmsghdr,
    }
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut cmsg = Cmsg { buf: [0; 64] };
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    // SAFETY: msghdr is plain old data; every pointer field is set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    // SAFETY: writing through the union's byte view of a 64-byte, cmsghdr-aligned buffer.
    msg.msg_control = unsafe { cmsg.buf.as_mut_ptr() }.cast();
    msg.msg_controllen = space;
    // SAFETY: msg_control points at `space` <= 64 valid bytes, so CMSG_FIRSTHDR is non-null
    // and the header and one fd fit.
    unsafe {
        let hdr = libc::CMSG_FIRSTHDR(&msg);
        (*hdr).cmsg_level = libc::SOL_SOCKET;
        (*hdr).cmsg_type = libc::SCM_RIGHTS;
        (*hdr).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(hdr).cast::<RawFd>(), fd.as_raw_fd());
    }
    // SAFETY: `msg` and everything it points to are live for the call.
    check(unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) } as libc::c_long)
        .map(drop)
}

/// Receives one fd sent by [`send_fd`]; `Ok(None)` when the peer closed without sending.
pub fn recv_fd(sock: BorrowedFd<'_>) -> io::Result<Option<OwnedFd>> {
    #[repr(C)]
    union Cmsg {
        buf: [u8; 64],
        _align: libc::cmsghdr,
    }
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut cmsg = Cmsg { buf: [0; 64] };
    // SAFETY: msghdr is plain old data; every pointer field is set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    // SAFETY: a byte view of the 64-byte control buffer.
    msg.msg_control = unsafe { cmsg.buf.as_mut_ptr() }.cast();
    msg.msg_controllen = 64;
    loop {
        // SAFETY: `msg` points at live buffers of the sizes it declares.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            return Ok(None);
        }
        break;
    }
    // SAFETY: the kernel filled msg_control/msg_controllen; CMSG_FIRSTHDR checks the length.
    let hdr = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    if hdr.is_null() {
        return Ok(None);
    }
    // SAFETY: `hdr` is non-null and inside the control buffer.
    let (level, kind) = unsafe { ((*hdr).cmsg_level, (*hdr).cmsg_type) };
    if level != libc::SOL_SOCKET || kind != libc::SCM_RIGHTS {
        return Ok(None);
    }
    // SAFETY: an SCM_RIGHTS message carries at least one fd right after the header.
    let fd = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(hdr).cast::<RawFd>()) };
    // SAFETY: the kernel installed this fd for us; nothing else owns it.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Which of fds 0, 1 and 2 were closed when sandgate started (bit N for fd N). The Rust
/// runtime opens `/dev/null` on a closed standard fd before `main`; recorded earlier, from
/// `.init_array`, the command can get its standard fds exactly as sandgate got them.
static CLOSED_AT_START: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

extern "C" fn record_closed_std_fds() {
    let mut closed = 0;
    for fd in 0..3 {
        // SAFETY: F_GETFD on an fd number only reads this process's fd table.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            closed |= 1 << fd;
        }
    }
    CLOSED_AT_START.store(closed, std::sync::atomic::Ordering::Relaxed);
}

/// Runs before the Rust runtime's own start-up (see [`CLOSED_AT_START`]).
#[used]
#[link_section = ".init_array"]
static RECORD_CLOSED_STD_FDS: extern "C" fn() = record_closed_std_fds;

/// `/proc/self/fd/FD`, written into `buf` without allocating (for a forked child);
/// `None` when it does not fit.
pub fn proc_fd_path(fd: RawFd, buf: &mut [u8; 32]) -> Option<&CStr> {
    use std::io::Write;
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    write!(cursor, "/proc/self/fd/{fd}\0").ok()?;
    let len = usize::try_from(cursor.position()).ok()?;
    CStr::from_bytes_with_nul(&buf[..len]).ok()
}

/// This process's open fds that `execve` passes on (no `FD_CLOEXEC`): what it inherited
/// and keeps for the command. Empty when `/proc` cannot be read.
pub fn inherited_fds() -> Vec<RawFd> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return vec![];
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<RawFd>().ok())
        // SAFETY: F_GETFD on an fd number only reads this process's fd table.
        .filter(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } == 0)
        .collect()
}

/// Whether standard fd `fd` was closed when sandgate started (it holds the runtime's
/// `/dev/null` now).
pub fn closed_at_start(fd: RawFd) -> bool {
    let closed = CLOSED_AT_START.load(std::sync::atomic::Ordering::Relaxed);
    (0..3).contains(&fd) && closed & (1 << fd) != 0
}

/// Closes again the standard fds that were closed when sandgate started (the runtime put
/// `/dev/null` there). Async-signal-safe.
pub fn close_std_fds_closed_at_start() {
    let closed = CLOSED_AT_START.load(std::sync::atomic::Ordering::Relaxed);
    for fd in 0..3 {
        if closed & (1 << fd) != 0 {
            // SAFETY: close on an fd number; the fd is the runtime's `/dev/null`, which
            // nothing in this (forked) process uses.
            unsafe { libc::close(fd) };
        }
    }
}

/// `fork(2)`, refused unless this process has exactly one thread.
///
/// A child forked from a multi-threaded process inherits every lock another thread held
/// (the allocator's among them) and runs Rust code before `execve`, where such a lock could
/// deadlock it or leave memory corrupt. sandgate joins every thread it starts before it
/// forks; this check makes that a verified fact in every build rather than an assumption,
/// and fails closed (an error, never a fork) when it does not hold.
pub fn fork() -> io::Result<libc::pid_t> {
    ensure_single_threaded()?;
    // SAFETY: the process has exactly one thread (checked just above), which is fork's
    // precondition for a child that goes on running Rust code.
    let pid = unsafe { libc::fork() };
    check(pid.into()).map(|p| p as libc::pid_t)
}

/// [`fork`] for a process that stays behind after sandgate returns: the child is in a
/// session of its own (`setsid`) before the parent goes on, so nothing sandgate leaves
/// running is ever in the caller's session or process group, not even for a moment (a
/// `kill` of the caller's group, a terminal hang-up), and whoever sees sandgate return
/// sees it so. Returns 0 in the child, as `fork` does.
pub fn fork_detached() -> io::Result<libc::pid_t> {
    let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let pid = fork()?;
    if pid == 0 {
        drop(read_end);
        // Cannot fail: a forked child leads no process group.
        let _ = nix::unistd::setsid();
        drop(write_end);
        return Ok(0);
    }
    drop(write_end);
    // End of file once the child has its session (or is gone); never data.
    let mut byte = [0u8; 1];
    while let Err(nix::errno::Errno::EINTR) = nix::unistd::read(&read_end, &mut byte) {}
    Ok(pid)
}

/// `clone(2)` as a fork into new namespaces (`CLONE_NEW*` in `namespaces`): the child
/// continues on a copy of this stack, as after `fork`, with `CLONE_NEWPID` as pid 1 of its
/// own PID namespace. Refused, like [`fork`], unless this process has exactly one thread.
///
/// `unshare` cannot do this: a new PID namespace holds only the children of the process
/// that asks for it, never that process itself.
pub fn fork_into(namespaces: libc::c_int) -> io::Result<libc::pid_t> {
    ensure_single_threaded()?;
    let flags = libc::c_ulong::try_from(namespaces | libc::SIGCHLD)
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: no new stack, no TLS and no tid pointers (every architecture's argument
    // order agrees on zeros), so the child runs on a copy of this process's memory exactly
    // as after `fork`; the process has exactly one thread (checked above), so no lock is
    // held in the copy. glibc's fork handlers do not run: sandgate registers none.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    check(pid).map(|p| p as libc::pid_t)
}

/// Returns `Ok` once the kernel counts one thread in this process. A thread that was just
/// joined stays in the kernel's count for a moment after `join` returns, so a count above
/// one is re-read for up to a second before it is taken as a thread that is still alive.
fn ensure_single_threaded() -> io::Result<()> {
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_micros(50);
    loop {
        let threads = thread_count()?;
        if threads == 1 {
            return Ok(());
        }
        if started.elapsed() >= std::time::Duration::from_secs(1) {
            return Err(io::Error::other(format!(
                "refusing to fork: sandgate has {threads} threads, and a child forked from a \
                 multi-threaded process may deadlock before it runs its program"
            )));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(20));
    }
}

/// The number of threads of this process, as the kernel counts them
/// (`Threads:` in `/proc/self/status`). Without `/proc` the count is unknown: an error.
pub fn thread_count() -> io::Result<usize> {
    use std::io::Read;
    let cannot = |e: io::Error| {
        io::Error::new(
            e.kind(),
            format!("cannot count sandgate's threads before forking (/proc/self/status: {e})"),
        )
    };
    // One read of a buffer larger than the file: procfs hands over the whole text at once,
    // where growing a string from an unknown size costs eight reads.
    let mut buf = [0u8; 8192];
    let n = std::fs::File::open("/proc/self/status")
        .and_then(|mut f| f.read(&mut buf))
        .map_err(cannot)?;
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| io::Error::other("/proc/self/status has no thread count"))
}

/// `execve(2)` with pre-built, NULL-terminated argv and envp. Returns only on failure.
/// Async-signal-safe.
pub fn execve(
    path: &CStr,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
) -> io::Error {
    if argv.last().is_some_and(|p| !p.is_null()) || envp.last().is_some_and(|p| !p.is_null()) {
        return io::Error::from_raw_os_error(libc::EINVAL);
    }
    // SAFETY: both arrays are NULL-terminated (checked above) and point at CStrings the
    // caller keeps alive.
    unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    io::Error::last_os_error()
}

/// `_exit(2)`: leaves the forked child without running atexit handlers or destructors.
pub fn exit_immediately(code: i32) -> ! {
    // SAFETY: _exit is async-signal-safe and never returns.
    unsafe { libc::_exit(code) }
}

/// Marks `fd` close-on-exec. Async-signal-safe.
pub fn set_cloexec(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_SETFD on an fd number; a stale number only yields EBADF.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) }.into()).map(drop)
}

/// `pidfd_open(2)`, for a thread when `thread` is set (PIDFD_THREAD, Linux ≥ 6.9).
pub fn pidfd_open(pid: libc::pid_t, thread: bool) -> io::Result<OwnedFd> {
    let flags: libc::c_uint = if thread {
        libc::O_EXCL as libc::c_uint
    } else {
        0
    };
    // SAFETY: integer-only syscall returning a fresh fd.
    let fd = check(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) })?;
    // SAFETY: a fresh fd owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `pidfd_getfd(2)`: a duplicate of `target_fd` from the process behind `pidfd`.
pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, target_fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: integer-only syscall returning a fresh fd.
    let fd =
        check(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target_fd, 0) })?;
    // SAFETY: a fresh fd owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Receives one seccomp user notification (blocks).
pub fn notif_recv(listener: BorrowedFd<'_>) -> io::Result<libc::seccomp_notif> {
    // SAFETY: seccomp_notif is plain old data and the kernel requires it zeroed.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    let fd = listener.as_raw_fd();
    // SAFETY: the ioctl writes one seccomp_notif into the live local.
    let ret = unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut notif) };
    check(ret.into())?;
    Ok(notif)
}

/// How a notification is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The call returns this value (the supervisor performed it).
    Return(i64),
    /// The call fails with this errno.
    Error(i32),
    /// The kernel runs the call as if never notified (landlock and mounts decide).
    Continue,
    /// Already answered (by [`notif_addfd_send`]): nothing more to send.
    Sent,
}

/// Answers a notification.
pub fn notif_respond(listener: BorrowedFd<'_>, id: u64, answer: Answer) -> io::Result<()> {
    let (val, error, flags) = match answer {
        Answer::Sent => return Ok(()),
        Answer::Return(val) => (val, 0, 0),
        Answer::Error(errno) => (0, -errno, 0),
        Answer::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
    };
    let mut resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags,
    };
    let fd = listener.as_raw_fd();
    // EINTR: the kernel takes the listener's lock interruptibly and gave up before it
    // answered anything; the interrupting signal sandgate sends at a hand-over must not
    // leave the caller waiting forever, so the answer is sent again.
    loop {
        // SAFETY: the ioctl reads one seccomp_notif_resp from the live local.
        let ret = unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp) };
        match check(ret.into()) {
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            done => return done.map(drop),
        }
    }
}

/// Installs `fd` in the notifying process and answers the notification with its number,
/// in one step (`SECCOMP_IOCTL_NOTIF_ADDFD` with `SECCOMP_ADDFD_FLAG_SEND`): the open the
/// supervisor performed for the caller returns the new fd, as the caller's own would
/// have. `cloexec` marks it close-on-exec there.
pub fn notif_addfd_send(
    listener: BorrowedFd<'_>,
    id: u64,
    fd: BorrowedFd<'_>,
    cloexec: bool,
) -> io::Result<RawFd> {
    let mut addfd = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: fd.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: the ioctl reads one seccomp_notif_addfd from the live local; `srcfd` is a
    // valid fd for the duration of the call.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD,
            &mut addfd,
        )
    };
    check(ret.into()).map(|n| n as RawFd)
}

/// Asks the kernel to wake the supervisor on the CPU of the notifying task
/// (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, Linux >= 6.6); older kernels just stay slower.
pub fn notif_sync_wake_up(listener: BorrowedFd<'_>) {
    const SECCOMP_IOCTL_NOTIF_SET_FLAGS: libc::c_ulong = 0x4008_2104;
    const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;
    let fd = listener.as_raw_fd();
    // SAFETY: the ioctl takes its flags by value; an unknown ioctl only yields EINVAL.
    unsafe {
        libc::ioctl(
            fd,
            SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        )
    };
}

/// Returns true while notification `id` is still pending (its task has not died or been
/// interrupted), so data read from the task's memory still belongs to that call.
pub fn notif_id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    // EINTR (an interrupted lock, nothing looked at) says nothing about the id: ask again.
    loop {
        // SAFETY: the ioctl reads one u64 from the live local.
        let ret = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                &id,
            )
        };
        if ret == 0 {
            return true;
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

/// Returns `(domain, type)` of a socket fd, or `None` when `fd` is not an open socket.
pub fn socket_kind(fd: RawFd) -> Option<(libc::c_int, libc::c_int)> {
    let get = |opt| {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes into the live local; a stale or
        // non-socket fd only yields EBADF/ENOTSOCK.
        let ret = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        (ret == 0).then_some(value)
    };
    Some((get(libc::SO_DOMAIN)?, get(libc::SO_TYPE)?))
}

/// Restores the default disposition of SIGPIPE, which the Rust runtime ignores in
/// sandgate; an ignored signal would stay ignored across `execve` and change how
/// `yes | head` ends. Async-signal-safe.
pub fn default_sigpipe() {
    // SAFETY: installing SIG_DFL involves no handler code.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Ignores SIGPIPE again, as the Rust runtime set it up: sandgate's own writes to a closed
/// pipe fail with EPIPE instead of killing it.
pub fn ignore_sigpipe() {
    // SAFETY: installing SIG_IGN involves no handler code.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

/// A signal taken from the pending set by [`sigwaitinfo`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    pub signo: libc::c_int,
    /// `si_code`: `SI_USER` (0) or below when a process sent it (`kill`, `sigqueue`,
    /// `tgkill`), `SI_KERNEL` when the kernel did (a terminal's Ctrl-C, a parent's death).
    pub code: libc::c_int,
    /// `si_pid`, as the receiver's PID namespace numbers the sender: 0 for a sender outside
    /// that namespace (and meaningful for `SI_USER` and `SIGCHLD` only).
    pub sender: libc::pid_t,
}

/// Waits for one of the (blocked) signals in `set`. Async-signal-safe.
pub fn sigwaitinfo(set: &nix::sys::signal::SigSet) -> io::Result<Received> {
    // SAFETY: siginfo_t is plain old data, filled by the kernel.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `set` is a valid sigset and `info` a live local.
        let sig = unsafe { libc::sigwaitinfo(set.as_ref(), &mut info) };
        if sig >= 0 {
            return Ok(Received {
                signo: sig,
                code: info.si_code,
                // SAFETY: the kernel filled `info`; `si_pid` reads the union member that
                // `kill`-style signals and SIGCHLD carry (0 for others, which never look).
                sender: unsafe { info.si_pid() },
            });
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Waits at most `timeout` for one of the (blocked) signals in `set`; `None` when none came
/// (or the wait was interrupted by a handled signal).
pub fn sigtimedwait(
    set: &nix::sys::signal::SigSet,
    timeout: std::time::Duration,
) -> io::Result<Option<libc::c_int>> {
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `set` is a valid sigset, `ts` a live local; a NULL siginfo is allowed.
    let sig = unsafe { libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), &ts) };
    if sig >= 0 {
        return Ok(Some(sig));
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN | libc::EINTR) => Ok(None),
        _ => Err(err),
    }
}

/// The signal that interrupts a supervisor worker blocked in a call it performs for the
/// sandbox: a real-time signal that sandgate neither sends for anything else, nor waits
/// for, nor forwards.
pub fn interrupt_signal() -> libc::c_int {
    libc::SIGRTMIN() + 2
}

/// Installs a handler that does nothing for `signo`, without `SA_RESTART`: a thread that
/// has `signo` unblocked and receives it returns from a blocking call with EINTR, and
/// nothing else happens.
pub fn install_interrupt_handler(signo: libc::c_int) -> io::Result<()> {
    extern "C" fn nothing(_: libc::c_int) {}
    // SAFETY: sigaction is plain old data; every field the kernel reads is set below.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
    action.sa_flags = 0;
    // SAFETY: the mask is a live field of the local; sigemptyset only writes it.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    // SAFETY: `action` is live and the handler is an `extern "C"` function that touches
    // nothing, so it is async-signal-safe.
    check(unsafe { libc::sigaction(signo, &action, std::ptr::null_mut()) }.into()).map(drop)
}

/// Changes the calling thread's signal mask for `signo` alone, or with `only` makes
/// `signo` the one signal the thread does not block.
pub fn set_signal_blocked(signo: libc::c_int, blocked: bool, only: bool) -> io::Result<()> {
    // SAFETY: sigset_t is plain old data, initialised by sigemptyset/sigfillset below.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: the set is a live local; these only write it.
    unsafe {
        if only {
            libc::sigfillset(&mut set);
            libc::sigdelset(&mut set, signo);
        } else {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signo);
        }
    }
    let how = match (only, blocked) {
        (true, _) => libc::SIG_SETMASK,
        (false, true) => libc::SIG_BLOCK,
        (false, false) => libc::SIG_UNBLOCK,
    };
    // SAFETY: a live, initialised set; a NULL old set is allowed.
    let ret = unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(ret))
    }
}

/// Runs `f` with `signo` blocked in the calling thread, then restores the thread's mask.
///
/// For a call that must not be cut short half-way: an interrupted
/// `SECCOMP_IOCTL_NOTIF_ADDFD` with `SECCOMP_ADDFD_FLAG_SEND` has already marked the
/// notification answered, and the caller then returns 0 — a wrong file descriptor.
pub fn with_signal_blocked<T>(signo: libc::c_int, f: impl FnOnce() -> T) -> T {
    // SAFETY: sigset_t is plain old data, initialised by sigemptyset below.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `old` is only read after pthread_sigmask filled it.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: live locals; sigemptyset and sigaddset only write the set.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signo);
    }
    // SAFETY: live, initialised sets.
    let blocked = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) } == 0;
    let out = f();
    if blocked {
        // SAFETY: `old` was filled by the successful call above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    }
    out
}

/// Sends `signo` to the thread behind `handle`, which may have finished but is not joined.
pub fn signal_thread<T>(handle: &std::thread::JoinHandle<T>, signo: libc::c_int) -> io::Result<()> {
    use std::os::unix::thread::JoinHandleExt;
    let thread = handle.as_pthread_t();
    // SAFETY: the handle is borrowed, so the thread is not joined yet: its descriptor stays
    // valid until then, also after it finished (glibc then reports nothing to signal).
    let ret = unsafe { libc::pthread_kill(thread, signo) };
    if ret == 0 || ret == libc::ESRCH {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(ret))
    }
}

/// Makes sure this process leaves no core file: `RLIMIT_CORE` 0, and not dumpable (which
/// also keeps a `core_pattern` pipe helper from being started).
pub fn no_core_dumps() -> io::Result<()> {
    no_core_files()?;
    nix::sys::prctl::set_dumpable(false).map_err(io::Error::from)
}

/// `RLIMIT_CORE` 0 for this process (and what it forks later): should it crash, its memory
/// (the environment with the variables it withholds from the command) is not written to a
/// core file in its working directory — a workspace the sandbox can read.
pub fn no_core_files() -> io::Result<()> {
    let zero = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: the kernel reads one rlimit from the live local.
    check(unsafe { libc::setrlimit(libc::RLIMIT_CORE, &zero) }.into()).map(drop)
}

/// Ignores SIGXFSZ: a write past the caller's file size limit (`ulimit -f`) then fails with
/// `EFBIG` instead of killing sandgate, which writes the command's output files itself.
pub fn ignore_file_size_signal() {
    // SAFETY: installing SIG_IGN involves no handler code.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
}

/// Restores the default action of signal `signo` (not possible for SIGKILL and SIGSTOP,
/// whose action is always the default). A raw number, so that real-time signals count too.
pub fn default_disposition(signo: libc::c_int) -> io::Result<()> {
    if signo == libc::SIGKILL || signo == libc::SIGSTOP {
        return Ok(());
    }
    // SAFETY: installing SIG_DFL involves no handler code.
    if unsafe { libc::signal(signo, libc::SIG_DFL) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends signal `signo` to the calling thread.
pub fn raise(signo: libc::c_int) -> io::Result<()> {
    // SAFETY: integer-only call.
    check(unsafe { libc::raise(signo) }.into()).map(drop)
}

/// How a child ended, as `waitpid(2)` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this status.
    Exited(i32),
    /// It died of this signal (any number, real-time signals included).
    Signaled(libc::c_int),
}

/// `waitpid(pid, WNOHANG)`: how `pid` ended, or `None` while it runs (or only stopped or
/// continued). Raw, unlike nix's `WaitStatus`, which cannot hold a real-time signal and
/// reports a child that died of one as an error.
pub fn wait_nohang(pid: libc::pid_t) -> io::Result<Option<Ended>> {
    let mut status: libc::c_int = 0;
    // SAFETY: the kernel writes one int into the live local.
    let ret = check(unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) }.into())?;
    if ret == 0 {
        return Ok(None);
    }
    Ok(if libc::WIFEXITED(status) {
        Some(Ended::Exited(libc::WEXITSTATUS(status)))
    } else if libc::WIFSIGNALED(status) {
        Some(Ended::Signaled(libc::WTERMSIG(status)))
    } else {
        None
    })
}

/// What [`reap_any`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reaped {
    /// This child ended (and is gone now).
    Child(libc::pid_t, Ended),
    /// Children remain, none of them ended.
    NoneEnded,
    /// No child is left.
    NoChildren,
}

/// `waitpid(-1, WNOHANG | __WALL)`: reaps one child that ended, whatever signal it was
/// to send its parent. Async-signal-safe.
pub fn reap_any() -> io::Result<Reaped> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: the kernel writes one int into the live local.
        let ret = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::__WALL) };
        if ret == 0 {
            return Ok(Reaped::NoneEnded);
        }
        if ret < 0 {
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::ECHILD) => return Ok(Reaped::NoChildren),
                Some(libc::EINTR) => continue,
                _ => return Err(err),
            }
        }
        let ended = if libc::WIFSIGNALED(status) {
            Ended::Signaled(libc::WTERMSIG(status))
        } else {
            Ended::Exited(libc::WEXITSTATUS(status))
        };
        return Ok(Reaped::Child(ret, ended));
    }
}

/// `pidfd_send_signal(2)`: signals exactly the process behind `pidfd`, never one that
/// took its number since.
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, signo: libc::c_int) -> io::Result<()> {
    // SAFETY: integer-only syscall (a NULL siginfo is allowed).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signo,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    check(ret).map(drop)
}

/// `kill(2)` with a raw signal number (real-time signals are not in nix's `Signal`).
/// Async-signal-safe.
pub fn kill(pid: libc::pid_t, signo: libc::c_int) -> io::Result<()> {
    // SAFETY: integer-only call.
    check(unsafe { libc::kill(pid, signo) }.into()).map(drop)
}

/// Where this process's argument and environment strings lie: fields 48 to 51 of
/// `/proc/self/stat` (`arg_start`, `arg_end`, `env_start`, `env_end`).
pub fn argument_area() -> io::Result<[usize; 4]> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The name (field 2) may hold spaces and parentheses: count from after its last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let mut area = [0usize; 4];
    for (i, at) in area.iter_mut().enumerate() {
        *at = fields
            .get(48 + i - 3)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| io::Error::other("/proc/self/stat has no argument area"))?;
    }
    let [arg_start, arg_end, env_start, env_end] = area;
    if arg_start >= arg_end || env_start > env_end {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok(area)
}

/// Overwrites the argument and environment strings `area` (from [`argument_area`]) with
/// zeros, the first argument with `title`: what `/proc/PID/cmdline` and
/// `/proc/PID/environ` show of this process from then on. The argument area's last byte is
/// left non-zero, the kernel's sign of a retitled process, so `cmdline` ends at the
/// title's own NUL (without it, the kernel hands over the whole area, NULs and all).
pub fn overwrite_arguments(area: [usize; 4], title: &[u8]) {
    let [arg_start, arg_end, env_start, env_end] = area;
    let len = arg_end - arg_start;
    // Room for the title, its NUL and the last byte; otherwise no title at all.
    let title = if title.len() + 2 <= len { title } else { &[] };
    // SAFETY: both ranges are the strings the kernel copied onto this process's stack at
    // its execve (it reports them itself; `argument_area` checked that they are ordered
    // and not empty): mapped and writable for the life of the process. No Rust reference
    // into them exists (the standard library keeps raw pointers only).
    unsafe {
        std::ptr::write_bytes(arg_start as *mut u8, 0, len);
        std::ptr::write_bytes(env_start as *mut u8, 0, env_end - env_start);
        if !title.is_empty() {
            std::ptr::copy_nonoverlapping(title.as_ptr(), arg_start as *mut u8, title.len());
            *((arg_end - 1) as *mut u8) = b' ';
        }
    }
}

/// Borrows a raw fd number that the caller itself created and keeps open for the borrow's
/// use. Never for an inherited number such as 0, 1 or 2, which may be closed: use
/// [`is_terminal`] and [`terminal_name`] there.
pub fn borrow_raw(fd: RawFd) -> BorrowedFd<'static> {
    // SAFETY: callers pass fds they created and own for the rest of the (child) process.
    unsafe { BorrowedFd::borrow_raw(fd) }
}

/// Duplicates `fd` (close-on-exec) if it is open; `None` for a closed fd number, so a
/// standard stream that sandgate's caller closed is never borrowed.
pub fn dup_if_open(fd: RawFd) -> Option<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on a bare fd number: the kernel reports EBADF for a closed
    // one, and a new descriptor it returns is ours alone.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    // SAFETY: `new` was just returned by the kernel and is owned by nobody else.
    (new >= 0).then(|| unsafe { OwnedFd::from_raw_fd(new) })
}

/// Drops every lock the open file description behind `file` holds: a `flock` lock and
/// open-file-description record locks, which both belong to the description (whoever took
/// them) and last until its last descriptor is closed. Failures are ignored: a file that
/// takes no lock holds none.
pub fn unlock_open_file(file: BorrowedFd<'_>) {
    // SAFETY: flock and fcntl on a borrowed, open descriptor; the struct lives across the
    // call and the kernel only reads it for F_OFD_SETLK.
    unsafe {
        libc::flock(file.as_raw_fd(), libc::LOCK_UN);
        let mut whole: libc::flock = std::mem::zeroed();
        whole.l_type = libc::F_UNLCK as libc::c_short;
        whole.l_whence = libc::SEEK_SET as libc::c_short;
        libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &whole);
    }
}

/// Whether this process's fds `a` and `b` share one open file description (`kcmp`); false
/// when the kernel cannot say.
pub fn same_open_file(a: RawFd, b: RawFd) -> bool {
    const KCMP_FILE: libc::c_long = 0;
    let pid = libc::c_long::from(std::process::id() as libc::pid_t);
    // SAFETY: integers only; kcmp compares two of this process's fds and writes nothing.
    let order = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            pid,
            pid,
            KCMP_FILE,
            libc::c_long::from(a),
            libc::c_long::from(b),
        )
    };
    order == 0
}

/// Writes all of `data` to `fd`, again after `EINTR` and short writes.
pub fn write_all(fd: BorrowedFd<'_>, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        match nix::unistd::write(fd, data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// `inotify_add_watch(2)` on the inotify instance `inotify`; the watch descriptor.
pub fn inotify_add_watch(inotify: BorrowedFd<'_>, path: &CStr, mask: u32) -> io::Result<i32> {
    // SAFETY: an fd, a NUL-terminated path that lives across the call and an integer; the
    // kernel writes nothing back.
    let wd = unsafe { libc::inotify_add_watch(inotify.as_raw_fd(), path.as_ptr(), mask) };
    check(wd.into()).map(|_| wd)
}

/// How many bytes a pipe holds unread (`FIONREAD`); 0 when the kernel cannot say.
pub fn bytes_to_read(pipe: BorrowedFd<'_>) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which lives across the call.
    let ret = unsafe { libc::ioctl(pipe.as_raw_fd(), libc::FIONREAD, &mut n) };
    if ret < 0 {
        0
    } else {
        usize::try_from(n).unwrap_or(0)
    }
}

/// `dup2(from, onto)`, for a child between `fork` and `execve`: async-signal-safe.
pub fn dup_onto(from: RawFd, onto: RawFd) -> io::Result<()> {
    // SAFETY: two fd numbers; `onto` is replaced in this process, which is what the child
    // means to do with it, and nothing else holds it as an `OwnedFd` there.
    check(unsafe { libc::dup2(from, onto) }.into()).map(drop)
}

/// Whether `fd` is open on a terminal. A closed fd number is simply not one.
pub fn is_terminal(fd: RawFd) -> bool {
    // SAFETY: isatty takes an fd number only; a closed number yields 0 (EBADF).
    unsafe { libc::isatty(fd) == 1 }
}

/// The path of the terminal `fd` is open on; `None` when it is closed or not a terminal.
pub fn terminal_name(fd: RawFd) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut buf = [0u8; libc::PATH_MAX as usize];
    // SAFETY: ttyname_r writes at most `buf.len()` bytes, NUL included, into the live
    // local; a closed or non-terminal fd number only yields an error code.
    let ret = unsafe { libc::ttyname_r(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if ret != 0 {
        return None;
    }
    let name = CStr::from_bytes_until_nul(&buf).ok()?;
    Some(std::ffi::OsStr::from_bytes(name.to_bytes()).into())
}

/// Points stdin, stdout and stderr at /dev/null (a detached helper must not hold the
/// caller's pipes open).
pub fn stdio_to_dev_null() {
    // SAFETY: open/dup2/close on fd numbers only; failures leave the fds as they were.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
    }
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

/// Closes every fd above 2 but those in `keep`: a helper forked to outlive sandgate holds
/// only what it uses (never the seccomp listener, whose closing is what fails the sandbox's
/// notified calls once nobody answers them).
pub fn close_fds_except(keep: &[RawFd]) {
    close_range_except(3, keep);
}

/// Closes every fd, standard ones included, but those in `keep`: a process that outlives
/// sandgate's caller holds none of its pipes or terminals.
pub fn close_all_fds_except(keep: &[RawFd]) {
    close_range_except(0, keep);
}

fn close_range_except(from: libc::c_uint, keep: &[RawFd]) {
    let mut keep: Vec<libc::c_uint> = keep
        .iter()
        .filter_map(|fd| libc::c_uint::try_from(*fd).ok())
        .filter(|fd| *fd >= from)
        .collect();
    keep.sort_unstable();
    keep.dedup();
    let mut first: libc::c_uint = from;
    for fd in keep.into_iter().chain(std::iter::once(libc::c_uint::MAX)) {
        if fd > first {
            // SAFETY: integer-only syscall; it closes fd numbers, owned or not, which is
            // the point: nothing in this process uses them afterwards.
            unsafe { libc::syscall(libc::SYS_close_range, first, fd - 1, 0) };
        }
        first = fd.saturating_add(1);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proc_fd_path_is_written_in_place() {
        let mut buf = [0u8; 32];
        assert_eq!(proc_fd_path(7, &mut buf), Some(c"/proc/self/fd/7"));
        assert_eq!(
            proc_fd_path(i32::MAX, &mut buf),
            Some(c"/proc/self/fd/2147483647")
        );
    }

    #[test]
    fn fork_is_refused_while_another_thread_runs() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        match fork() {
            Ok(0) => exit_immediately(0),
            Ok(pid) => {
                let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
                panic!("forked while {} threads ran", thread_count().unwrap_or(0));
            }
            Err(e) => assert!(e.to_string().contains("threads"), "{e}"),
        }
        drop(tx);
        let _ = other.join();
    }

    #[test]
    fn the_thread_count_sees_a_running_thread() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        let during = thread_count().unwrap_or_else(|e| panic!("{e}"));
        drop(tx);
        let _ = other.join();
        assert!(during >= 2, "{during}");
    }

    #[test]
    fn closed_fds_are_not_terminals() {
        let (read_end, _write_end) = nix::unistd::pipe().unwrap_or_else(|e| panic!("{e}"));
        assert!(!is_terminal(read_end.as_raw_fd()));
        assert_eq!(terminal_name(read_end.as_raw_fd()), None);
        // A number nothing has open.
        let closed = 1 << 20;
        assert!(!is_terminal(closed));
        assert_eq!(terminal_name(closed), None);
        assert!(!is_terminal(-1));
        assert_eq!(terminal_name(-1), None);
    }
}
