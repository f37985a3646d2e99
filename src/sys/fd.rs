//! File descriptors: passing them over a socket, the standard ones as sandgate found them,
//! closing all but some, duplicating, comparing, terminals.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use super::check;

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

/// Marks `fd` close-on-exec. Async-signal-safe.
pub fn set_cloexec(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_SETFD on an fd number; a stale number only yields EBADF.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) }.into()).map(drop)
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

/// Whether a process that lets go of its fds ([`holding_only`]) keeps its standard ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standard {
    /// 0, 1 and 2 stay as they are (pointed at `/dev/null` by a helper that writes nothing
    /// anyone reads): a file opened later can never take their numbers.
    Kept,
    /// Closed with the rest: a process that outlives sandgate's caller holds none of its
    /// pipes or terminals.
    Closed,
}

/// Lets this forked process go of every fd but those in `keep` (and the standard ones when
/// `standard` keeps them), then runs `rest` and ends the process with its status; never
/// returns. A helper forked to outlive sandgate holds only what it uses: never the seccomp
/// listener (whose closing is what fails the sandbox's notified calls once nobody answers
/// them), never the caller's pipes.
///
/// The fds are closed under whatever owns them, which is sound because nothing that owns
/// one gets to act on it again: every frame of the caller stays as it is until the
/// process ends (this function does not return, and a panic in `rest` is caught here
/// and ends the process), so no owner outside `rest` drops a number that may by then name
/// another file. What `rest` captures must own nothing but fds in `keep`.
pub fn holding_only(keep: &[RawFd], standard: Standard, rest: impl FnOnce() -> i32) -> ! {
    let from = match standard {
        Standard::Kept => 3,
        Standard::Closed => 0,
    };
    close_range_except(from, keep);
    let status = std::panic::catch_unwind(std::panic::AssertUnwindSafe(rest)).unwrap_or(125);
    crate::sys::exit_immediately(status)
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

/// A `poll` timeout for `left`, rounded up to the next millisecond so that a wait never
/// turns into a busy loop of zero-length polls just before its deadline.
pub fn poll_timeout(left: std::time::Duration) -> nix::poll::PollTimeout {
    let ms = left.as_micros().div_ceil(1000);
    nix::poll::PollTimeout::try_from(i32::try_from(ms).unwrap_or(i32::MAX))
        .unwrap_or(nix::poll::PollTimeout::MAX)
}
