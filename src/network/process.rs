//! The proxy's process. It is forked from sandgate (still single-threaded) once the child
//! has handed over the listener it made in the sandbox's network namespace, and lives,
//! detached, for as long as anything is sandboxed — like the detached supervisor, since a
//! build's background processes need the network too.
//!
//! Its lifetime is a pipe, the *lifeline*: sandgate holds the write end, and so does the
//! detached supervisor forked from it at the hand-over, which serves until the last
//! sandboxed process is gone. When the last holder exits the proxy sees the pipe hang up
//! and ends.
//!
//! Each refusal goes to the denial log at once (the proxy has the reporter's log open) and,
//! for stderr, to sandgate through a second pipe, written before the client gets its 403,
//! so sandgate has it when the command that was refused ends.

use std::io::{self, BufRead, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use crate::denial::Reporter;
use crate::sys;

use super::proxy::{self, Refusal};
use crate::policy::host_rules::HostRules;

/// sandgate's side of a running proxy.
pub struct Proxy {
    /// Held until sandgate exits (and by a detached supervisor forked meanwhile).
    _lifeline: OwnedFd,
    /// Refusals for stderr (non-blocking).
    refusals: OwnedFd,
    /// Where the proxy says it started, or why it could not.
    ready: OwnedFd,
}

/// Forks the proxy for `listener`. sandgate must be single-threaded.
///
/// # Errors
/// The pipes or the fork failed; the caller drops the listener then, so the sandbox's
/// connects to the proxy are refused rather than left waiting.
pub fn start(
    listener: OwnedFd,
    rules: HostRules,
    reporter: Option<Arc<Mutex<Reporter>>>,
) -> io::Result<Proxy> {
    let (lifeline_r, lifeline_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let (refusals_r, refusals_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
    let (ready_r, ready_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let pid = sys::fork()?;
    if pid == 0 {
        // Forked again so that the proxy is nobody's child to reap: its parent exits now.
        if !matches!(sys::fork(), Ok(0)) {
            sys::exit_immediately(0);
        }
        let log = reporter
            .as_ref()
            .and_then(|r| r.lock().ok().and_then(|r| r.log_fd()));
        // First what owns an fd (sandgate's stderr sink), then every fd but these.
        crate::output::let_go_of_stderr();
        sys::stdio_to_dev_null();
        let keep = [
            listener.as_raw_fd(),
            lifeline_r.as_raw_fd(),
            refusals_w.as_raw_fd(),
            ready_w.as_raw_fd(),
        ];
        let keep: Vec<_> = keep.into_iter().chain(log).collect();
        sys::holding_only(&keep, sys::Standard::Kept, move || {
            let _ = nix::unistd::setsid();
            let _ = nix::sys::signal::SigSet::all().thread_unblock();
            // Names are resolved as the client wrote them: no search domain of the
            // resolver may turn a listed `missing.example.com` into
            // `missing.example.com.corp`.
            std::env::set_var("LOCALDOMAIN", "");
            let mut ready_w = std::fs::File::from(ready_w);
            let ready = proxy::ready(std::net::TcpListener::from(listener), lifeline_r);
            let ready = match ready {
                Ok(ready) => ready,
                Err(e) => {
                    let _ = write!(ready_w, "{e}");
                    return 1;
                }
            };
            let _ = ready_w.write_all(READY);
            drop(ready_w);
            serve(ready, rules, refusals_w, reporter);
            0
        })
    }
    // The intermediate child exits at once.
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
    drop((lifeline_r, refusals_w, ready_w));
    Ok(Proxy {
        _lifeline: lifeline_w,
        refusals: refusals_r,
        ready: ready_r,
    })
}

/// What the proxy writes on its ready pipe once it serves; anything else it writes is why
/// it could not start.
const READY: &[u8] = b"ready";

/// What the proxy said on `ready` by now, without waiting: `None` while it says nothing
/// (still starting) or once it serves; else why it could not start.
fn failed_to_start(ready: &OwnedFd) -> Option<String> {
    let mut said = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        let mut fds = [nix::poll::PollFd::new(
            ready.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO) {
            Ok(0) if said.is_empty() => return None,
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Some(format!("cannot tell: {e}")),
        }
        match nix::unistd::read(ready, &mut buf) {
            Ok(0) => break,
            Ok(n) if said.len() < 4096 => said.extend_from_slice(&buf[..n]),
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Some(format!("cannot tell: {e}")),
        }
    }
    match said.as_slice() {
        READY => None,
        [] => Some("it ended before it started".to_owned()),
        why => Some(String::from_utf8_lossy(why).into_owned()),
    }
}

/// The proxy process's work: serve until the lifeline hangs up.
fn serve(
    ready: proxy::Ready,
    rules: HostRules,
    refusals: OwnedFd,
    reporter: Option<Arc<Mutex<Reporter>>>,
) {
    let refusals = Mutex::new(std::fs::File::from(refusals));
    let refused = move |refusal: &Refusal| {
        if let Some(Ok(mut r)) = reporter.as_ref().map(|r| r.lock()) {
            r.record(&refusal.denial());
        }
        if let (Ok(mut pipe), Ok(line)) = (refusals.lock(), serde_json::to_string(refusal)) {
            // Non-blocking: with nobody reading (sandgate gone, or the pipe full) the line
            // is dropped; the denial log has it.
            let _ = pipe.write_all(format!("{line}\n").as_bytes());
        }
    };
    let _ = ready.serve(rules, Box::new(refused));
}

impl Proxy {
    /// Why the proxy could not start, once it said so: looked at when the command has
    /// ended, without waiting (a proxy that cannot start says so within a millisecond of
    /// its fork, before any command could have used it).
    pub fn failed_to_start(&self) -> Option<String> {
        failed_to_start(&self.ready)
    }

    /// Hands the refusals the proxy reported so far to `reporter`, for stderr.
    pub fn collect_refusals(&self, reporter: &Mutex<Reporter>) {
        let Ok(pipe) = self.refusals.as_fd().try_clone_to_owned() else {
            return;
        };
        let reader = io::BufReader::new(std::fs::File::from(pipe));
        let Ok(mut reporter) = reporter.lock() else {
            return;
        };
        // Stops at the first read that would block: the pipe is non-blocking.
        for line in reader.lines().map_while(Result::ok) {
            if let Ok(refusal) = serde_json::from_str::<Refusal>(&line) {
                reporter.record_logged_elsewhere(&refusal.denial());
            }
        }
    }
}
