//! Signals: dispositions, masks, waiting for one, and the signal that interrupts a blocked
//! thread.

use std::io;

use super::check;

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

/// Ignores signal `signo` (a stop signal, for a helper no terminal may stop).
pub fn ignore(signo: libc::c_int) {
    // SAFETY: installing SIG_IGN involves no handler code.
    unsafe { libc::signal(signo, libc::SIG_IGN) };
}

/// Ignores SIGXFSZ: a write past the caller's file size limit (`ulimit -f`) then fails with
/// `EFBIG` instead of killing sandgate, which writes the command's output files itself.
pub fn ignore_file_size_signal() {
    ignore(libc::SIGXFSZ);
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
