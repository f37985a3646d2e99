//! Confining a process: landlock and seccomp availability, installing a filter,
//! no_new_privs, capabilities, the parent-death signal and core dumps.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use super::check;

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
