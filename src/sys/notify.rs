//! The seccomp user-notification listener: receiving a notification, answering it, handing
//! a file back.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

use super::check;

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
    addfd(listener, id, fd, None, cloexec)
}

/// Installs `fd` in the notifying process as its fd `target`, closing what was there
/// (`SECCOMP_IOCTL_NOTIF_ADDFD` with `SECCOMP_ADDFD_FLAG_SETFD`), without answering the
/// notification. `cloexec` marks it close-on-exec there.
pub fn notif_addfd_at(
    listener: BorrowedFd<'_>,
    id: u64,
    fd: BorrowedFd<'_>,
    target: RawFd,
    cloexec: bool,
) -> io::Result<()> {
    addfd(listener, id, fd, Some(target), cloexec).map(drop)
}

/// `SECCOMP_IOCTL_NOTIF_ADDFD`: at `target`, or answering with the new number.
fn addfd(
    listener: BorrowedFd<'_>,
    id: u64,
    fd: BorrowedFd<'_>,
    target: Option<RawFd>,
    cloexec: bool,
) -> io::Result<RawFd> {
    let (flags, newfd) = match target {
        Some(target) => (libc::SECCOMP_ADDFD_FLAG_SETFD, target as u32),
        None => (libc::SECCOMP_ADDFD_FLAG_SEND, 0),
    };
    let mut addfd = libc::seccomp_notif_addfd {
        id,
        flags: flags as u32,
        srcfd: fd.as_raw_fd() as u32,
        newfd,
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
