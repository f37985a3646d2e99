//! Processes: forking only while single-threaded, `execve`, pidfds, reaping, and retitling
//! a process.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

use super::check;

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

/// `pidfd_open(2)`, for a thread when `thread` is set (PIDFD_THREAD, Linux ≥ 6.9).
pub fn pidfd_open(pid: libc::pid_t, thread: bool) -> io::Result<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(pid)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    // PIDFD_THREAD is O_EXCL; rustix does not name it.
    let flags = match thread {
        true => rustix::process::PidfdFlags::from_bits_retain(libc::O_EXCL as libc::c_uint),
        false => rustix::process::PidfdFlags::empty(),
    };
    Ok(rustix::process::pidfd_open(pid, flags)?)
}

/// `pidfd_getfd(2)`: a duplicate of `target_fd` from the process behind `pidfd`.
pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, target_fd: RawFd) -> io::Result<OwnedFd> {
    let flags = rustix::process::PidfdGetfdFlags::empty();
    Ok(rustix::process::pidfd_getfd(pidfd, target_fd, flags)?)
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
