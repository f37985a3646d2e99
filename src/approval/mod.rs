//! The approval stage: puts one escalation request to exactly one answerer and
//! returns a closed `Outcome`. Only `AllowedOnce` lets the call run wider, and only this
//! call: nothing is persisted.
//!
//! The answerer is chosen by configuration, in this order: the approval endpoint, else the
//! approver program, else a `sandgate approvals serve` of the caller's at the default
//! socket (asked as an endpoint), else the terminal, else none (`Unavailable`). A failing answerer never
//! falls through to the next one. The policy tier (`never`, nesting, the managed ceiling) is
//! decided before this stage and never reaches an answerer.

mod endpoint;
mod name_lookup;
mod program;
pub mod request;
mod strict_json;
pub mod transport;
mod tty;

use std::path::PathBuf;
use std::time::Duration;

use std::os::fd::{AsFd, BorrowedFd};

use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use serde_json::Value;

pub use transport::Endpoint;
pub(crate) use tty::{fresh_code, judge};
pub use tty::{neutralise, shell_quote, TtyAnswerer, TtySetting};

/// The largest reply accepted from an endpoint or approver program.
pub const MAX_REPLY: usize = 64 * 1024;

/// What the answerer said. Closed: every match on it is exhaustive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Run this one call at the requested mode.
    AllowedOnce,
    /// The answerer said no (any decision other than exactly `allowed-once`).
    Rejected,
    /// Nobody answered in time, or the person cancelled (Ctrl-C, EOF).
    Cancelled { why: String },
    /// No usable answer could be had: no channel, or the channel failed.
    Unavailable { why: String },
}

impl Outcome {
    /// Returns the audit spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::AllowedOnce => request::Decision::AllowedOnce.as_str(),
            Outcome::Rejected => request::Decision::Rejected.as_str(),
            Outcome::Cancelled { .. } => "cancelled",
            Outcome::Unavailable { .. } => "unavailable",
        }
    }
}

/// Who is asked.
#[derive(Debug, Clone)]
pub enum Answerer {
    Endpoint {
        endpoint: Endpoint,
        token_file: Option<PathBuf>,
    },
    Program {
        command: String,
    },
    Tty,
    /// No channel; the reason says what to configure.
    None {
        why: String,
    },
}

/// One question, as sent to every kind of answerer.
#[derive(Debug, Clone)]
pub struct Question {
    /// What the endpoint and the approver program receive, and the terminal shows.
    pub request: request::Request,
    pub timeout: Duration,
}

/// Returns a fresh, unguessable request id (128 random bits, hex).
pub fn fresh_id() -> String {
    let mut bytes = [0u8; 16];
    if random_bytes(&mut bytes).is_err() {
        // Still unique per call even without randomness: time and pid.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        bytes[..8].copy_from_slice(&(nanos.as_nanos() as u64).to_ne_bytes());
        bytes[8..12].copy_from_slice(&std::process::id().to_ne_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Returns a fresh secret (128 random bits, hex), or why the kernel's randomness cannot be
/// read. Unlike [`fresh_id`], it never falls back to time and pid: a secret that can be
/// guessed from a process's start time is no secret.
pub fn fresh_secret() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    random_bytes(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Fills `buf` from the kernel's CSPRNG. Only the character device counts: a regular file
/// at `/dev/urandom` (a broken container image) would give the same bytes every time.
fn random_bytes(buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;
    let mut urandom = std::fs::File::open("/dev/urandom")?;
    if !urandom.metadata()?.file_type().is_char_device() {
        return Err(std::io::Error::other(
            "/dev/urandom is not a character device",
        ));
    }
    urandom.read_exact(buf)
}

/// Blocks SIGINT, SIGTERM and SIGHUP while a question is open, so that an interrupt
/// becomes a `Cancelled` outcome — audited like any other — instead of killing sandgate
/// between the `asked` and `decided` records. Dropping it unblocks them.
pub struct Interruptible {
    old: SigSet,
    signals: SignalFd,
}

impl Drop for Interruptible {
    fn drop(&mut self) {
        let _ = self.old.thread_set_mask();
    }
}

const INTERRUPTS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// An fd that becomes readable when an interrupt arrives while the question is open. Every
/// wait of every answerer watches it next to its own fds, so an answerer returns as soon
/// as the question is withdrawn and nothing of it outlives [`ask`].
#[derive(Clone, Copy)]
pub struct Interrupt<'a>(BorrowedFd<'a>);

impl<'a> Interrupt<'a> {
    /// The fd to poll for `POLLIN`.
    pub fn fd(&self) -> BorrowedFd<'a> {
        self.0
    }
}

/// Asks `answerer` on the calling thread while watching for interrupts. Returns the outcome
/// and a guard that keeps interrupts blocked until the caller has recorded it.
///
/// No thread is started: sandgate forks the command right after a grant and must be
/// single-threaded then. Instead, every answerer waits with `poll` on its own fds and the
/// interrupt fd (a signalfd), and under a deadline, so both a timeout and an interrupt end
/// the question promptly.
pub fn ask(answerer: &Answerer, question: &Question) -> (Outcome, Option<Interruptible>) {
    let mut set = SigSet::empty();
    INTERRUPTS.iter().for_each(|s| set.add(*s));
    let guard = set
        .thread_swap_mask(SigmaskHow::SIG_BLOCK)
        .ok()
        .and_then(|old| {
            SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
                .ok()
                .map(|signals| Interruptible { old, signals })
        });
    let Some(guard) = guard else {
        return (
            Outcome::Unavailable {
                why: "cannot watch for interrupts while asking".into(),
            },
            None,
        );
    };
    let outcome = ask_now(answerer, question, Interrupt(guard.signals.as_fd()));
    // An interrupt that came while the answerer was busy withdraws the question, whatever
    // the answerer said: the person or the runner that sent it wants no command to start.
    let outcome = match guard.signals.read_signal() {
        Ok(Some(info)) => Outcome::Cancelled {
            why: match Signal::try_from(info.ssi_signo as i32) {
                Ok(Signal::SIGINT) => "interrupted (Ctrl-C) while waiting for the answer".into(),
                Ok(sig) => format!("{sig} while waiting for the answer"),
                Err(_) => "interrupted while waiting for the answer".into(),
            },
        },
        Ok(None) => outcome,
        Err(e) => Outcome::Unavailable {
            why: format!("cannot tell whether the question was interrupted: {e}"),
        },
    };
    (outcome, Some(guard))
}

/// Asks `answerer` on the calling thread.
fn ask_now(answerer: &Answerer, question: &Question, interrupt: Interrupt<'_>) -> Outcome {
    match answerer {
        Answerer::Endpoint {
            endpoint,
            token_file,
        } => endpoint::ask(endpoint, token_file.as_deref(), question, interrupt),
        Answerer::Program { command } => program::ask(command, question, interrupt),
        Answerer::Tty => tty::ask(question, interrupt),
        Answerer::None { why } => Outcome::Unavailable { why: why.clone() },
    }
}

/// The outcome an answerer returns when it saw the interrupt fd fire; [`ask`] replaces it
/// with one that names the signal.
fn interrupted() -> Outcome {
    Outcome::Cancelled {
        why: "interrupted while waiting for the answer".into(),
    }
}

/// Maps a reply body (endpoint or program) to an outcome: `allowed-once` with the right id
/// grants; any other decision rejects; anything malformed is `Unavailable`.
pub fn parse_reply(body: &[u8], id: &str) -> Outcome {
    let unavailable = |why: &str| Outcome::Unavailable {
        why: why.to_owned(),
    };
    if body.len() > MAX_REPLY {
        return unavailable("the reply is larger than 64 KiB");
    }
    // Strict: a repeated key (at any depth) makes the reply mean two things.
    let value = match strict_json::from_slice(body) {
        Ok(value) => value,
        Err(strict_json::StrictError::RepeatedKey(why)) => {
            return unavailable(&format!("the reply can be read two ways: {why}"))
        }
        Err(strict_json::StrictError::Malformed(_)) => return unavailable("the reply is not JSON"),
    };
    let Some(reply) = value.as_object() else {
        return unavailable("the reply is not a JSON object");
    };
    match reply.get("id").and_then(Value::as_str) {
        Some(got) if got == id => {}
        Some(_) => return unavailable("the reply answers another request (id mismatch)"),
        None => return unavailable("the reply has no id"),
    }
    match reply.get("decision") {
        Some(Value::String(d)) if d == request::Decision::AllowedOnce.as_str() => {
            Outcome::AllowedOnce
        }
        Some(_) => Outcome::Rejected,
        None => unavailable("the reply has no decision"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exactly_allowed_once_with_the_right_id_grants() {
        let id = "abc";
        let table: &[(&str, &str)] = &[
            (r#"{"id":"abc","decision":"allowed-once"}"#, "allowed-once"),
            (r#"{"id":"abc","decision":"approve"}"#, "rejected"),
            (r#"{"id":"abc","decision":"ALLOWED-ONCE"}"#, "rejected"),
            (r#"{"id":"abc","decision":"allow_always"}"#, "rejected"),
            (r#"{"id":"abc","decision":true}"#, "rejected"),
            (r#"{"id":"abd","decision":"allowed-once"}"#, "unavailable"),
            (r#"{"decision":"allowed-once"}"#, "unavailable"),
            (r#"{"id":"abc"}"#, "unavailable"),
            (r#"["allowed-once"]"#, "unavailable"),
            ("", "unavailable"),
            ("allowed-once", "unavailable"),
            // A repeated key, at any depth, whichever value comes last.
            (
                r#"{"id":"abc","decision":"rejected","decision":"allowed-once"}"#,
                "unavailable",
            ),
            (
                r#"{"id":"abc","decision":"allowed-once","decision":"allowed-once"}"#,
                "unavailable",
            ),
            (
                r#"{"id":"abd","id":"abc","decision":"allowed-once"}"#,
                "unavailable",
            ),
            (
                r#"{"id":"abc","decision":"allowed-once","meta":{"by":"a","by":"b"}}"#,
                "unavailable",
            ),
            (
                r#"{"id":"abc","decision":"allowed-once","log":[{"k":1,"k":1}]}"#,
                "unavailable",
            ),
            (
                r#"{"id":"abc","decision":"allowed-once","meta":{"by":"a"}}"#,
                "allowed-once",
            ),
        ];
        for (body, want) in table {
            assert_eq!(parse_reply(body.as_bytes(), id).as_str(), *want, "{body}");
        }
    }

    #[test]
    fn ids_are_fresh() {
        assert_ne!(fresh_id(), fresh_id());
        assert_eq!(fresh_id().len(), 32);
    }
}
