//! The approver program: the request JSON on its stdin, the reply JSON on its stdout.
//! A nonzero exit is `Unavailable`; no answer in time is `Cancelled`, and the
//! program — with everything it started — is killed.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Instant;

use super::{parse_reply, Outcome, Question, MAX_REPLY};

/// The process group of the approver program now running, 0 when none.
static RUNNING: AtomicI32 = AtomicI32::new(0);

/// Kills the approver program now running (an interrupt cancelled the question).
pub fn kill_running() {
    let pgid = RUNNING.swap(0, Ordering::SeqCst);
    if pgid > 0 {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Runs `command` (through `/bin/sh -c`, in its own process group) and maps its reply.
pub fn ask(command: &str, question: &Question) -> Outcome {
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
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    RUNNING.store(pgid.as_raw(), Ordering::SeqCst);
    let body = question.body.to_string();
    let writer = child.stdin.take().map(|mut stdin| {
        std::thread::spawn(move || {
            // A program that does not read its stdin is its own business.
            let _ = stdin.write_all(body.as_bytes());
        })
    });
    let reader = child.stdout.take().map(|stdout| {
        std::thread::spawn(move || {
            let mut reply = Vec::new();
            let _ = stdout.take(MAX_REPLY as u64 + 1).read_to_end(&mut reply);
            reply
        })
    });
    let deadline = Instant::now() + question.timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => break None,
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(10)),
            Err(e) => return unavailable(format!("cannot wait for the approver program: {e}")),
        }
    };
    let Some(status) = status else {
        kill_running();
        let _ = child.wait();
        return Outcome::Cancelled {
            why: format!(
                "the approver program did not answer within {} s and was killed",
                question.timeout.as_secs()
            ),
        };
    };
    // The program is gone; anything it left in its group must not outlive the question.
    kill_running();
    if let Some(w) = writer {
        let _ = w.join();
    }
    let reply = reader.and_then(|r| r.join().ok()).unwrap_or_default();
    if !status.success() {
        return unavailable(format!("the approver program failed ({status})"));
    }
    parse_reply(&reply, &question.id)
}
