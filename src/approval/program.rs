//! The approver program: the request JSON on its stdin, the reply JSON on its stdout.
//! A nonzero exit is `Unavailable`; no answer in time is `Cancelled`, and the
//! program — with everything it started — is killed.
//!
//! The program is fed and read on the calling thread: its pipes are non-blocking and every
//! wait is one `poll` over them, the program's pidfd, and the interrupt fd, under the
//! deadline. So sandgate starts no thread here, and a program that neither reads nor
//! writes nor exits cannot hold the question past its timeout or an interrupt.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use super::{interrupted, parse_reply, Interrupt, Outcome, Question, MAX_REPLY};
use crate::sys;

/// How often the program's state is looked at when the kernel offers no pidfd for it.
const TICK: Duration = Duration::from_millis(10);

/// Runs `command` (through `/bin/sh -c`, in its own process group) and maps its reply.
pub fn ask(command: &str, question: &Question, interrupt: Interrupt<'_>) -> Outcome {
    let unavailable = |why: String| Outcome::Unavailable { why };
    let mut child = match Command::new("/bin/sh")
        .args(["-c", command])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => return unavailable(format!("cannot start the approver program: {e}")),
    };
    let group = Pid::from_raw(child.id() as i32);
    let deadline = Instant::now() + question.timeout;
    let talked = talk(&mut child, question, interrupt, deadline);
    // Whatever happened, nothing the program started may outlive the question.
    let _ = killpg(group, Signal::SIGKILL);
    let _ = child.wait();
    let (status, reply) = match talked {
        Talk::Exited(status, reply) => (status, reply),
        Talk::Interrupted => return interrupted(),
        Talk::TimedOut => {
            return Outcome::Cancelled {
                why: format!(
                    "the approver program did not answer within {} s and was killed",
                    question.timeout.as_secs()
                ),
            }
        }
        Talk::Failed(why) => return unavailable(why),
    };
    if !status.success() {
        return unavailable(format!("the approver program failed ({status})"));
    }
    parse_reply(&reply, &question.request.id)
}

/// How the exchange with the program ended.
enum Talk {
    /// The program exited; what it wrote to stdout (at most one byte past the limit).
    Exited(ExitStatus, Vec<u8>),
    TimedOut,
    Interrupted,
    Failed(String),
}

/// Writes the request to the program's stdin and collects its stdout until it exits.
fn talk(
    child: &mut Child,
    question: &Question,
    interrupt: Interrupt<'_>,
    deadline: Instant,
) -> Talk {
    let failed = |what: &str, e: &dyn std::fmt::Display| Talk::Failed(format!("{what}: {e}"));
    let mut stdin = child.stdin.take();
    let mut stdout = child.stdout.take();
    for fd in [
        stdin.as_ref().map(AsFd::as_fd),
        stdout.as_ref().map(AsFd::as_fd),
    ]
    .into_iter()
    .flatten()
    {
        if let Err(e) = set_nonblocking(fd) {
            return failed("cannot talk to the approver program", &e);
        }
    }
    // Without a pidfd (kernels before 5.3) the program's exit is looked at every tick.
    let pidfd: Option<OwnedFd> = sys::pidfd_open(child.id() as i32, false).ok();
    let body = serde_json::to_vec(&question.request).unwrap_or_default();
    let mut sent = 0;
    let mut reply = Vec::new();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                // Everything it wrote before exiting is in the pipe now; what is read is
                // what is there, without waiting on anything it left behind holding the
                // pipe open.
                if let Some(out) = stdout.as_mut() {
                    let _ = read_some(out, &mut reply);
                }
                return Talk::Exited(status, reply);
            }
            Ok(None) => {}
            Err(e) => return failed("cannot wait for the approver program", &e),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Talk::TimedOut;
        }
        let wait = if pidfd.is_some() {
            left
        } else {
            left.min(TICK)
        };
        let mut fds = vec![PollFd::new(interrupt.fd(), PollFlags::POLLIN)];
        let mut slots = [None; 3];
        if let Some(fd) = &pidfd {
            slots[0] = Some(fds.len());
            fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
        }
        if let Some(out) = &stdout {
            slots[1] = Some(fds.len());
            fds.push(PollFd::new(out.as_fd(), PollFlags::POLLIN));
        }
        if let Some(inp) = &stdin {
            slots[2] = Some(fds.len());
            fds.push(PollFd::new(inp.as_fd(), PollFlags::POLLOUT));
        }
        match poll(&mut fds, crate::sys::poll_timeout(wait)) {
            Err(nix::errno::Errno::EINTR) | Ok(0) => continue,
            Err(e) => return failed("cannot wait for the approver program", &e),
            Ok(_) => {}
        }
        let ready = |slot: Option<usize>| {
            slot.and_then(|i| fds.get(i))
                .and_then(PollFd::revents)
                .is_some_and(|r| !r.is_empty())
        };
        if ready(Some(0)) {
            return Talk::Interrupted;
        }
        let (out_ready, in_ready) = (ready(slots[1]), ready(slots[2]));
        drop(fds);
        if out_ready {
            if let Some(out) = stdout.as_mut() {
                if read_some(out, &mut reply) {
                    stdout = None;
                }
            }
        }
        if in_ready {
            if let Some(inp) = stdin.as_mut() {
                // A program that does not read its stdin is its own business: a closed
                // pipe just ends the writing.
                match inp.write(&body[sent..]) {
                    Ok(n) => sent += n,
                    Err(e) if retry(&e) => {}
                    Err(_) => sent = body.len(),
                }
            }
            if sent >= body.len() {
                // Closing stdin is the end of the request.
                stdin = None;
            }
        }
    }
}

/// Reads what is available; returns true at end of file or past the limit (nothing more
/// will be read, and a reply past the limit is refused by `parse_reply`).
fn read_some(out: &mut ChildStdout, reply: &mut Vec<u8>) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match out.read(&mut buf) {
            Ok(0) => return true,
            Ok(n) => {
                let room = (MAX_REPLY + 1).saturating_sub(reply.len());
                reply.extend_from_slice(&buf[..n.min(room)]);
                if reply.len() > MAX_REPLY {
                    return true;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

fn retry(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted)
}

fn set_nonblocking(fd: std::os::fd::BorrowedFd<'_>) -> nix::Result<()> {
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).map(drop)
}
