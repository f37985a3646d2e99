//! Host-name lookup for the approval endpoint, done in a short-lived child process.
//!
//! `getaddrinfo` cannot be given a deadline or be interrupted, and running it on a thread
//! (as HTTP clients do to bound it) would leave sandgate multi-threaded when it forks the
//! command. A child process can be waited for with `poll` — against the deadline and the
//! interrupt fd together — and killed when either fires, so the lookup honours both
//! exactly and no thread is ever started.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Instant;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::waitpid;
use nix::unistd::Pid;

use crate::sys;

/// The most the child may report: far more than any list of addresses.
const MAX_ANSWER: usize = 64 * 1024;

/// Why no addresses came back.
#[derive(Debug, PartialEq, Eq)]
pub enum LookupError {
    /// The deadline passed first.
    Timeout,
    /// The interrupt fd became readable first.
    Interrupted,
    /// The name does not resolve, or the lookup could not be run.
    Failed(String),
}

/// Resolves `host` (a name, not an IP literal) and `port` to socket addresses, giving up at
/// `deadline` or as soon as `interrupt` is readable.
pub fn resolve(
    host: &str,
    port: u16,
    deadline: Option<Instant>,
    interrupt: Option<BorrowedFd<'_>>,
) -> Result<Vec<SocketAddr>, LookupError> {
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        LookupError::Failed(format!("cannot look up {host:?}: {what}: {e}"))
    };
    let (answer_r, answer_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| failed("no pipe for the lookup", &e))?;
    let pid = sys::fork().map_err(|e| failed("cannot start the lookup", &e))?;
    if pid == 0 {
        drop(answer_r);
        lookup_child(host, port, answer_w);
    }
    drop(answer_w);
    let child = Pid::from_raw(pid);
    let answer = read_answer(answer_r, deadline, interrupt);
    if answer.is_err() {
        let _ = kill(child, Signal::SIGKILL);
    }
    while let Err(Errno::EINTR) = waitpid(child, None) {}
    parse_answer(host, &answer?)
}

/// The child: looks the name up and writes one line per address (`+ADDR`) or one error
/// line (`!MESSAGE`), then exits without running any destructor.
fn lookup_child(host: &str, port: u16, answer_w: OwnedFd) -> ! {
    // A lookup must not outlive the sandgate that wants its answer.
    let _ = sys::set_parent_death_signal(libc::SIGKILL);
    let text: String = match (host, port).to_socket_addrs() {
        Ok(addrs) => addrs.map(|a| format!("+{a}\n")).collect(),
        Err(e) => format!("!{e}\n"),
    };
    let mut out = std::fs::File::from(answer_w);
    let code = if out.write_all(text.as_bytes()).is_ok() {
        0
    } else {
        1
    };
    sys::exit_immediately(code)
}

/// Reads the child's answer to its end, watching `deadline` and `interrupt`.
fn read_answer(
    answer_r: OwnedFd,
    deadline: Option<Instant>,
    interrupt: Option<BorrowedFd<'_>>,
) -> Result<Vec<u8>, LookupError> {
    let mut answer = Vec::new();
    loop {
        let timeout = match deadline {
            None => nix::poll::PollTimeout::NONE,
            Some(at) => {
                let left = at.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(LookupError::Timeout);
                }
                crate::sys::poll_timeout(left)
            }
        };
        let mut fds = vec![PollFd::new(answer_r.as_fd(), PollFlags::POLLIN)];
        if let Some(fd) = interrupt {
            fds.push(PollFd::new(fd, PollFlags::POLLIN));
        }
        match poll(&mut fds, timeout) {
            Err(Errno::EINTR) | Ok(0) => continue,
            Err(e) => {
                return Err(LookupError::Failed(format!(
                    "cannot wait for the lookup: {e}"
                )))
            }
            Ok(_) => {}
        }
        if fds
            .get(1)
            .and_then(PollFd::revents)
            .is_some_and(|r| !r.is_empty())
        {
            return Err(LookupError::Interrupted);
        }
        let mut buf = [0u8; 4096];
        match nix::unistd::read(answer_r.as_fd(), &mut buf) {
            Ok(0) => return Ok(answer),
            Ok(n) if answer.len() + n <= MAX_ANSWER => answer.extend_from_slice(&buf[..n]),
            Ok(_) => return Err(LookupError::Failed("the lookup answered too much".into())),
            Err(Errno::EINTR | Errno::EAGAIN) => {}
            Err(e) => return Err(LookupError::Failed(format!("cannot read the lookup: {e}"))),
        }
    }
}

/// Turns the child's lines into addresses; an error line or no line at all is a failure.
fn parse_answer(host: &str, answer: &[u8]) -> Result<Vec<SocketAddr>, LookupError> {
    let text = String::from_utf8_lossy(answer);
    let mut addrs = Vec::new();
    for line in text.lines() {
        if let Some(addr) = line.strip_prefix('+') {
            addrs.push(addr.parse().map_err(|e| {
                LookupError::Failed(format!("the lookup of {host:?} answered {addr:?}: {e}"))
            })?);
        } else if let Some(why) = line.strip_prefix('!') {
            return Err(LookupError::Failed(format!(
                "cannot resolve {host:?}: {why}"
            )));
        }
    }
    if addrs.is_empty() {
        return Err(LookupError::Failed(format!(
            "{host:?} resolves to no address"
        )));
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_strictly() {
        assert_eq!(
            parse_answer("h", b"+127.0.0.1:80\n+[::1]:80\n"),
            Ok(vec![
                "127.0.0.1:80".parse().unwrap(),
                "[::1]:80".parse().unwrap(),
            ])
        );
        for bad in [
            &b""[..],
            b"!Name or service not known\n",
            b"+not-an-address\n",
        ] {
            assert!(
                matches!(parse_answer("h", bad), Err(LookupError::Failed(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_lookup_is_never_forked_from_a_multi_threaded_process() {
        // The fork is refused rather than made while another thread runs.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        let got = resolve("localhost", 80, None, None);
        drop(tx);
        let _ = other.join();
        assert!(
            matches!(&got, Err(LookupError::Failed(why)) if why.contains("threads")),
            "{got:?}"
        );
    }
}
