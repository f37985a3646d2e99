//! A regular file or a pipe given as stdout or stderr, written by sandgate rather than by
//! the command.
//!
//! `sandgate … >> build.log` hands the command sandgate's own open file description of
//! `build.log`, which the caller opened and keeps. Shared, it lets the command do more than
//! write output: clear `O_APPEND` and write over what the file held, `ftruncate` it, lock
//! it for as long as the caller keeps it open — on a file outside every writable root,
//! given only to be written to. A pipe (a CI runner's log, an agent's harness, `| tee`)
//! is no better: opened again through `/proc/self/fd/1`, for reading, it gives up what
//! others wrote to it and its reader has not read yet, and later, to a process the call
//! kept, what they write after the call. So a restricted command gets a pipe of sandgate's
//! in their place, and sandgate copies what comes through it on: all the command can do is
//! add output. Another inherited fd of the same file or pipe gets the same pipe.
//! Terminals hold nothing written before: the command gets new descriptions of them
//! (`fresh`). Other inherited descriptors are passed as they are: `9>lock` is how a
//! script hands a lock file over on purpose.
//!
//! The copying runs in sandgate's wait loop (`wait`), so output keeps its order and the
//! file holds everything once sandgate returns. Into a pipe it moves with `splice`, never
//! waiting for room during the call (a slow reader must not keep sandgate from its
//! signals and its time limit): a full pipe is waited on with `poll` like everything
//! else. Processes that outlive the command (a call that keeps them, or one without a PID
//! namespace) may still hold the pipe: a detached process of sandgate's then copies on
//! until the last of them is gone.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::sys;

/// The command's standard fds that are relayed when they are regular files.
const RELAYED: [RawFd; 2] = [1, 2];

/// What is read from a pipe at once.
const CHUNK: usize = 64 * 1024;

/// At most this much per stream and wake-up, so that a command writing without pause
/// cannot keep sandgate from its signals and its time limit.
const PER_ROUND: usize = 16 * CHUNK;

/// The pipes in place of the command's regular-file stdout and stderr.
pub(super) struct Relay {
    streams: Vec<Stream>,
    /// The write ends and the fds of the command each goes to, until the command is
    /// started: then the child has its copies and sandgate must hold none.
    ends: Vec<(OwnedFd, Vec<RawFd>)>,
    /// `(write end, target fd)` as raw numbers, for the child to `dup2` before `execve`.
    plan: Vec<(RawFd, RawFd)>,
    /// What a read lands in (empty without streams).
    buf: Vec<u8>,
}

struct Stream {
    /// The pipe's read end, non-blocking; closed at the pipe's end or once the file
    /// refused a write (the command's next write then fails with `EPIPE`, as it would
    /// have failed on the file).
    from: Option<OwnedFd>,
    /// The caller's file or pipe (a duplicate of sandgate's fd).
    to: OwnedFd,
    /// `to` is a pipe (or FIFO).
    to_pipe: bool,
    /// `to` was full at the last copy: it is waited on until it has room.
    stalled: bool,
}

impl Relay {
    /// A pipe for each of sandgate's standard output fds that is a regular file or a pipe
    /// (one for both when they are one, as with `>log 2>&1`).
    ///
    /// `inherited`: the fds sandgate passes on (`sys::inherited_fds`).
    ///
    /// # Errors
    /// A pipe cannot be made.
    pub fn for_outputs(inherited: &[RawFd]) -> io::Result<Relay> {
        let mut relay = Relay::none();
        for fd in RELAYED {
            let Some(file) = sys::dup_if_open(fd) else {
                continue;
            };
            let kind = nix::sys::stat::fstat(file.as_fd()).map(|st| st.st_mode & libc::S_IFMT);
            let to_pipe = match kind {
                Ok(libc::S_IFREG) => false,
                Ok(libc::S_IFIFO) => true,
                _ => continue,
            };
            // One pipe for both when they are one file: the order the command wrote in
            // stays (written through the first's description, which `>>log 2>>log`
            // opens the same way).
            if let Some(i) = relay.stream_to(file.as_fd()) {
                relay.ends[i].1.push(fd);
                continue;
            }
            let (from, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
            // The read end only: the command's end stays blocking, as a file was.
            nix::fcntl::fcntl(from.as_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
            relay.streams.push(Stream {
                from: Some(from),
                to: file,
                to_pipe,
                stalled: false,
            });
            relay.ends.push((write, vec![fd]));
        }
        // Another inherited fd of the same file (`exec 3>>log; sandgate cmd >&3`), or stdin
        // open on it for writing only (`0>&1`), would hand the command the file after all:
        // it gets the pipe too.
        for &fd in inherited.iter().filter(|fd| **fd != 1 && **fd != 2) {
            let Some(file) = sys::dup_if_open(fd) else {
                continue;
            };
            let write_only = nix::fcntl::fcntl(file.as_fd(), FcntlArg::F_GETFL)
                .is_ok_and(|f| f & libc::O_ACCMODE == libc::O_WRONLY);
            if fd == 0 && !write_only {
                continue;
            }
            if let Some(i) = relay.stream_to(file.as_fd()) {
                relay.ends[i].1.push(fd);
            }
        }
        relay.plan = relay
            .ends
            .iter()
            .flat_map(|(write, fds)| fds.iter().map(|fd| (write.as_raw_fd(), *fd)))
            .collect();
        if !relay.streams.is_empty() {
            relay.buf = vec![0u8; CHUNK];
        }
        Ok(relay)
    }

    /// No relay: the command writes to sandgate's own files (an unconfined command).
    pub fn none() -> Relay {
        Relay {
            streams: vec![],
            ends: vec![],
            plan: vec![],
            buf: vec![],
        }
    }

    /// What the command's process does before `execve`: each pair `(from, onto)` is a
    /// `dup2`.
    pub fn plan(&self) -> &[(RawFd, RawFd)] {
        &self.plan
    }

    /// Whether `file` is one of the files the relay writes to.
    pub fn writes_to(&self, file: BorrowedFd<'_>) -> bool {
        self.stream_to(file).is_some()
    }

    /// The stream that writes to `file`, if any.
    fn stream_to(&self, file: BorrowedFd<'_>) -> Option<usize> {
        self.streams
            .iter()
            .position(|s| same_file(s.to.as_fd(), file))
    }

    /// The command's fds that get a pipe.
    pub fn relayed(&self) -> Vec<RawFd> {
        self.plan.iter().map(|&(_, onto)| onto).collect()
    }

    /// The command has been started: sandgate lets go of the write ends, so that the pipes
    /// end when the command's processes are gone.
    pub fn started(&mut self) {
        self.ends.clear();
    }

    /// Every fd the relay holds: a process forked to serve the call after sandgate
    /// returns must not keep the caller's file or the pipes open.
    pub fn held(&self) -> Vec<RawFd> {
        self.streams
            .iter()
            .flat_map(|s| {
                s.from
                    .iter()
                    .map(AsRawFd::as_raw_fd)
                    .chain([s.to.as_raw_fd()])
            })
            .collect()
    }

    /// What to wait on: the read end of each stream still open, or the pipe it goes to
    /// while that is full.
    pub fn waiting(&self) -> impl Iterator<Item = PollFd<'_>> {
        self.streams.iter().filter_map(|s| {
            let from = s.from.as_ref()?;
            Some(match s.stalled {
                true => PollFd::new(s.to.as_fd(), PollFlags::POLLOUT),
                false => PollFd::new(from.as_fd(), PollFlags::POLLIN),
            })
        })
    }

    /// Copies what the pipes hold now, a bounded amount per stream, without waiting.
    pub fn pump(&mut self) {
        for stream in &mut self.streams {
            stream.copy(&mut self.buf, Some(PER_ROUND));
        }
    }

    /// Once the command has ended: copies what the pipes hold by then — into a pipe that
    /// is full, once its reader makes room, as the command would have waited to write
    /// there; unless `waited` is `None` (the call ran out of time: what the command had
    /// not got out by then is lost, as its own blocked write would have been), or one of
    /// the `waited` signals comes meanwhile (the user gives up on a reader that does not
    /// read). When processes of the call may still hold a pipe (`outlived`: it kept them,
    /// or nothing of sandgate's ended them), a detached process of sandgate's copies on
    /// until the last of them is gone; sandgate must be single-threaded by then (see
    /// [`sys::fork`]). Otherwise, and should the fork fail, whoever still holds a pipe (a
    /// process of another call it was passed to) finds it closed (`EPIPE`).
    pub fn finish(mut self, outlived: bool, waited: Option<&SigSet>) {
        let mut buf = std::mem::take(&mut self.buf);
        // What each pipe holds now, and no more: whoever still holds it (a kept process,
        // or one of another call it was passed to) may write without pause.
        let mut owed: Vec<usize> = self
            .streams
            .iter()
            .map(|s| s.from.as_ref().map_or(0, |f| sys::bytes_to_read(f.as_fd())))
            .collect();
        // Only a signal that asks sandgate to stop ends the wait (a resize, a child's end
        // do not): those sandgate waits for are blocked, so they are read here.
        let signals = waited.and_then(|set| {
            let mut give_up = SigSet::empty();
            for signal in [
                Signal::SIGINT,
                Signal::SIGTERM,
                Signal::SIGHUP,
                Signal::SIGQUIT,
            ] {
                if set.contains(signal) {
                    give_up.add(signal);
                }
            }
            SignalFd::with_flags(&give_up, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).ok()
        });
        loop {
            for (stream, owed) in self.streams.iter_mut().zip(&mut owed) {
                *owed -= stream.copy(&mut buf, Some(*owed)).min(*owed);
            }
            let Some(signals) = &signals else {
                break;
            };
            let mut ready: Vec<PollFd> = self
                .streams
                .iter()
                .zip(&owed)
                .filter(|(s, owed)| **owed > 0 && s.stalled && s.from.is_some())
                .map(|(s, _)| PollFd::new(s.to.as_fd(), PollFlags::POLLOUT))
                .collect();
            if ready.is_empty() {
                break;
            }
            ready.push(PollFd::new(signals.as_fd(), PollFlags::POLLIN));
            if let Err(e) = poll(&mut ready, PollTimeout::NONE) {
                if e != nix::errno::Errno::EINTR {
                    break;
                }
            }
            if ready
                .last()
                .and_then(PollFd::revents)
                .is_some_and(|r| !r.is_empty())
            {
                break;
            }
        }
        // One read more, without waiting: at the pipe's end it says so.
        for stream in &mut self.streams {
            stream.copy(&mut buf, Some(1));
        }
        self.streams.retain(|s| s.from.is_some());
        if self.streams.is_empty() || !outlived {
            return;
        }
        // The command has its copies of the write ends: nobody of sandgate's holds one.
        self.ends.clear();
        if let Ok(0) = sys::fork_detached() {
            let held = self.held();
            sys::holding_only(&held, sys::Standard::Closed, move || {
                // Like the processes it serves: its own session, and ended by any signal.
                let _ = SigSet::all().thread_unblock();
                loop {
                    let mut ready: Vec<PollFd> = self.waiting().collect();
                    if ready.is_empty() {
                        break;
                    }
                    match poll(&mut ready, PollTimeout::NONE) {
                        Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                        Err(_) => break,
                    }
                    drop(ready);
                    for stream in &mut self.streams {
                        stream.copy(&mut buf, None);
                    }
                }
                0
            })
        }
    }
}

/// Whether `a` and `b` are the same file (or the same open file description of it).
fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    if sys::same_open_file(a.as_raw_fd(), b.as_raw_fd()) {
        return true;
    }
    match (nix::sys::stat::fstat(a), nix::sys::stat::fstat(b)) {
        (Ok(a), Ok(b)) => (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino),
        _ => false,
    }
}

impl Stream {
    /// Copies from the pipe to where it goes until the pipe is empty (or, with `limit`,
    /// that many bytes were copied), without waiting; returns how much it copied. Closes
    /// the pipe at its end or when the file refuses a write; a pipe it goes to that is
    /// full leaves the stream `stalled`.
    fn copy(&mut self, buf: &mut [u8], limit: Option<usize>) -> usize {
        if self.to_pipe {
            return self.splice(limit);
        }
        let limit = limit.unwrap_or(usize::MAX);
        let mut left = limit;
        while let Some(from) = self.from.as_ref().filter(|_| left > 0) {
            let want = left.min(buf.len());
            let copied = match nix::unistd::read(from.as_fd(), &mut buf[..want]) {
                Ok(0) => false,
                Ok(n) => {
                    left -= n;
                    sys::write_all(self.to.as_fd(), &buf[..n]).is_ok()
                }
                Err(nix::errno::Errno::EINTR) => true,
                Err(nix::errno::Errno::EAGAIN) => break,
                Err(_) => false,
            };
            if !copied {
                self.from = None;
            }
        }
        limit - left
    }

    /// [`Stream::copy`] into a pipe, with `splice`. (Never waiting in it: with a
    /// non-blocking pipe at either end the kernel would not wait anyway.)
    fn splice(&mut self, limit: Option<usize>) -> usize {
        self.stalled = false;
        let limit = limit.unwrap_or(usize::MAX);
        let mut left = limit;
        while let Some(from) = self.from.as_ref().filter(|_| left > 0) {
            let flags = SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK;
            let want = left.min(CHUNK);
            match nix::fcntl::splice(from.as_fd(), None, self.to.as_fd(), None, want, flags) {
                Ok(0) => self.from = None,
                Ok(n) => left -= n,
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::EAGAIN) => {
                    // The pipe is empty, or the one it goes to is full.
                    self.stalled = sys::bytes_to_read(from.as_fd()) > 0;
                    break;
                }
                Err(_) => self.from = None,
            }
        }
        limit - left
    }
}
