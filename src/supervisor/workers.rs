//! Calls that may block, performed off the supervisor thread: connects, and opens of a
//! FIFO (which wait for a peer) or of a file another process holds a lease on (which
//! waits for the lease to be given up).
//!
//! The rest of this comment speaks of connects; an open is handled the same way (it is
//! interrupted the same way, and an open that fails with EINTR has opened nothing).
//!
//! A unix stream or seqpacket `connect` waits while the listener's backlog is full — for as
//! long as the sandboxed listener chooses not to accept. Whether the caller's socket is
//! non-blocking is no help: that flag lives in the file description the caller shares with
//! the supervisor's duplicate, and another thread of the caller can clear it between a look
//! and the call. Setting it for the supervisor's connect would change the caller's socket
//! under its feet. So the supervisor thread performs no connect that can wait: each goes to
//! a worker thread of its own, which performs it on the duplicate and answers the
//! notification itself (`SECCOMP_IOCTL_NOTIF_SEND` names the notification by id, from any
//! thread). Datagram connects only record a peer and never wait; they stay inline.
//!
//! At most [`MAX_WORKERS`] connects wait at once. Past that the call fails with EAGAIN —
//! what a non-blocking connect to a full backlog gets — rather than queueing threads
//! without bound.
//!
//! Workers can be interrupted. Each unblocks one signal ([`sys::interrupt_signal`]) whose
//! handler does nothing and is installed without `SA_RESTART`, so a connect it interrupts
//! returns EINTR without having connected (a unix connect that fails that way leaves the
//! socket as it was and can be retried). The signal is sent:
//!
//! - when the caller stopped waiting (it was killed, or a signal interrupted its call and
//!   the kernel dropped the notification): the worker gives up, answering nothing;
//! - when sandgate hands the listener to the detached supervisor (see
//!   `Running::hand_over`): that is a `fork`, which is only sound in a single-threaded
//!   process, so every worker must be joined first. A worker stopped this way answers
//!   nothing and hands its notification back; the caller is still blocked in its call,
//!   and the detached process mediates it again from the start, as a fresh notification.
//!
//! A signal can arrive just before the worker enters `connect` (and be spent on nothing),
//! so it is sent again every few milliseconds until the worker is done; the worker checks
//! why it should stop before each attempt.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use nix::errno::Errno;
use nix::sys::socket::{connect, SockaddrStorage, UnixAddr};

use crate::sys::{self, Answer};

/// How many calls may wait at once.
pub const MAX_WORKERS: usize = 64;

/// A call a worker performs.
pub enum Job {
    Connect(Connect),
    Open(Open),
}

/// An open the supervisor checked: `name` in `dir` (its own handle), with the caller's
/// flags and mode, as `perform::open_checked` does it; the file goes to the caller with
/// `SECCOMP_IOCTL_NOTIF_ADDFD`.
pub struct Open {
    pub dir: OwnedFd,
    pub name: std::ffi::CString,
    pub flags: i32,
    pub mode: u32,
    /// Where an existing file opened to write is, to the seal rules.
    pub existing: Option<super::seal::Here>,
    pub cloexec: bool,
}

impl Job {
    /// Returns true when the call can wait (stream connects; every open given here).
    fn may_wait(&self) -> bool {
        match self {
            Job::Connect(connect) => connect.may_wait,
            Job::Open(_) => true,
        }
    }

    /// Performs the call and, unless it was interrupted, says how to answer it.
    fn perform(&self, listener: &OwnedFd, id: u64) -> Result<Answer, Errno> {
        match self {
            Job::Connect(connect) => match connect.perform() {
                Err(Errno::EINTR) => Err(Errno::EINTR),
                Ok(()) => match connect.replaces {
                    None => Ok(answer(Ok(()))),
                    Some((target, cloexec)) => {
                        let put = sys::notif_addfd_at(
                            listener.as_fd(),
                            id,
                            connect.socket.as_fd(),
                            target,
                            cloexec,
                        );
                        Ok(answer(put.map_err(|_| Errno::EBADF)))
                    }
                },
                done => Ok(answer(done)),
            },
            Job::Open(open) => {
                use std::os::unix::ffi::OsStrExt;
                let file = match super::open::open_checked(
                    open.dir.as_fd(),
                    std::ffi::OsStr::from_bytes(open.name.as_bytes()),
                    open.flags,
                    open.mode,
                    open.existing,
                ) {
                    Ok(super::open::Checked::Opened(file)) => file,
                    // A file the rules refuse took the name: refused as the rules refuse.
                    Ok(super::open::Checked::Sealed(_)) => return Ok(Answer::Error(libc::EPERM)),
                    Err(Errno::EINTR) => return Err(Errno::EINTR),
                    Err(e) => return Ok(Answer::Error(e as i32)),
                };
                // An error: the caller went away; there is nobody to answer.
                let _ = sys::notif_addfd_send(listener.as_fd(), id, file.as_fd(), open.cloexec);
                Ok(Answer::Sent)
            }
        }
    }
}

/// A connect whose address the supervisor has checked.
pub struct Connect {
    /// A duplicate of the caller's socket, or a fresh one to put in its place.
    pub socket: OwnedFd,
    pub target: Target,
    /// Whether the connect can wait (stream and seqpacket sockets).
    pub may_wait: bool,
    /// Where the kernel refuses `pidfd_getfd` (a default container), `socket` is a fresh
    /// socket of the same kind, which replaces the caller's fd `.0` once connected
    /// (close-on-exec when `.1`).
    pub replaces: Option<(RawFd, bool)>,
}

/// Where a checked connect goes: sandgate's own copy of what it checked, never the
/// caller's memory.
pub enum Target {
    /// The socket inode the address resolved to (`O_PATH`), connected through by its
    /// `/proc/self/fd` name so that the path cannot be swapped.
    Unix(OwnedFd),
    /// The proxy's address in the sandbox's network namespace (the caller's socket
    /// belongs to that namespace, so that is where the connect goes).
    Proxy(SockaddrStorage),
}

impl Connect {
    fn perform(&self) -> Result<(), Errno> {
        match &self.target {
            Target::Unix(inode) => {
                let via = format!("/proc/self/fd/{}", inode.as_raw_fd());
                connect(self.socket.as_raw_fd(), &UnixAddr::new(via.as_str())?)
            }
            Target::Proxy(address) => connect(self.socket.as_raw_fd(), address),
        }
    }
}

/// How a worker ended.
enum Ended {
    /// It answered the notification, or its caller no longer waits for an answer.
    Done,
    /// It was stopped for a hand-over before it could answer.
    HandedBack(libc::seccomp_notif),
}

struct Worker {
    handle: JoinHandle<Ended>,
    id: u64,
    /// Set when the caller stopped waiting.
    cancel: Arc<AtomicBool>,
}

/// The connects in flight.
pub struct Workers {
    live: Vec<Worker>,
    /// Set when every worker is to stop and hand its notification back.
    stopping: Arc<AtomicBool>,
    signo: libc::c_int,
}

impl Workers {
    /// Installs the interrupting signal's handler and blocks that signal in the calling
    /// thread (and so in the threads it starts; workers unblock it for themselves).
    ///
    /// # Errors
    /// The handler or the mask could not be set.
    pub fn new() -> io::Result<Workers> {
        let signo = sys::interrupt_signal();
        sys::install_interrupt_handler(signo)?;
        sys::set_signal_blocked(signo, true, false)?;
        Ok(Workers {
            live: Vec::new(),
            stopping: Arc::new(AtomicBool::new(false)),
            signo,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Performs `job` for notification `notif`: inline when it cannot wait, else on a
    /// worker. Returns the answer to send, or `None` when a worker answers.
    pub fn perform(
        &mut self,
        listener: &OwnedFd,
        notif: &libc::seccomp_notif,
        job: Job,
    ) -> Option<Answer> {
        if !job.may_wait() {
            return Some(
                job.perform(listener, notif.id)
                    .unwrap_or(Answer::Error(libc::EINTR)),
            );
        }
        self.sweep(listener);
        if self.live.len() >= MAX_WORKERS {
            return Some(Answer::Error(libc::EAGAIN));
        }
        let Ok(listener) = listener.try_clone() else {
            return Some(Answer::Error(libc::EAGAIN));
        };
        let cancel = Arc::new(AtomicBool::new(false));
        let (stopping, signo, notif_copy) = (self.stopping.clone(), self.signo, *notif);
        let cancelled = cancel.clone();
        let spawned = std::thread::Builder::new()
            .name("sandgate-connect".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                if sys::set_signal_blocked(signo, false, true).is_err() {
                    // Uninterruptible, it could hold up a hand-over: refuse instead.
                    let busy = Answer::Error(libc::EAGAIN);
                    let _ = sys::notif_respond(listener.as_fd(), notif_copy.id, busy);
                    return Ended::Done;
                }
                loop {
                    if cancelled.load(Ordering::SeqCst) {
                        return Ended::Done;
                    }
                    if stopping.load(Ordering::SeqCst) {
                        return Ended::HandedBack(notif_copy);
                    }
                    match job.perform(&listener, notif_copy.id) {
                        Err(_) => continue,
                        Ok(answer) => {
                            // ENOENT: the caller went away meanwhile; nobody to answer.
                            let _ = sys::notif_respond(listener.as_fd(), notif_copy.id, answer);
                            return Ended::Done;
                        }
                    }
                }
            });
        match spawned {
            Ok(handle) => {
                self.live.push(Worker {
                    handle,
                    id: notif.id,
                    cancel,
                });
                None
            }
            Err(_) => Some(Answer::Error(libc::EAGAIN)),
        }
    }

    /// Joins the workers that are done and interrupts those whose caller stopped waiting
    /// (again on every sweep, until they are done).
    pub fn sweep(&mut self, listener: &OwnedFd) {
        let (done, live): (Vec<Worker>, Vec<Worker>) = std::mem::take(&mut self.live)
            .into_iter()
            .partition(|w| w.handle.is_finished());
        self.live = live;
        for worker in done {
            let _ = worker.handle.join();
        }
        for worker in &self.live {
            if worker.cancel.load(Ordering::SeqCst)
                || !sys::notif_id_valid(listener.as_fd(), worker.id)
            {
                worker.cancel.store(true, Ordering::SeqCst);
                let _ = sys::signal_thread(&worker.handle, self.signo);
            }
        }
    }

    /// Stops every worker and joins it; returns the notifications they handed back
    /// unanswered. `pause` runs between rounds of interrupting and returns false to give
    /// up waiting: then `None`, and the workers are left running.
    pub fn stop(mut self, mut pause: impl FnMut() -> bool) -> Option<Vec<libc::seccomp_notif>> {
        self.stopping.store(true, Ordering::SeqCst);
        let mut handed_back = Vec::new();
        loop {
            let (done, live): (Vec<Worker>, Vec<Worker>) = std::mem::take(&mut self.live)
                .into_iter()
                .partition(|w| w.handle.is_finished());
            self.live = live;
            for worker in done {
                if let Ok(Ended::HandedBack(notif)) = worker.handle.join() {
                    handed_back.push(notif);
                }
            }
            if self.live.is_empty() {
                return Some(handed_back);
            }
            for worker in &self.live {
                let _ = sys::signal_thread(&worker.handle, self.signo);
            }
            if !pause() {
                return None;
            }
        }
    }
}

fn answer(result: Result<(), Errno>) -> Answer {
    match result {
        Ok(()) => Answer::Return(0),
        Err(e) => Answer::Error(e as i32),
    }
}
