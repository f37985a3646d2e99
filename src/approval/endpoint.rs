//! The approval endpoint: POSTs the request JSON and maps the reply. A failing
//! endpoint is `Unavailable` (never a fall-through to another answerer); no reply before
//! the timeout is `Cancelled`.

use std::path::Path;

use super::transport::{post_json, Endpoint, TransportError};
use super::{interrupted, parse_reply, Interrupt, Outcome, Question, MAX_REPLY};

/// Puts `question` to `endpoint`, on the calling thread; `interrupt` ends the exchange.
pub fn ask(
    endpoint: &Endpoint,
    token_file: Option<&Path>,
    question: &Question,
    interrupt: Interrupt<'_>,
) -> Outcome {
    let token = match token_file.map(read_token) {
        None => None,
        Some(Ok(token)) => Some(token.trim().to_owned()),
        Some(Err(e)) => {
            return Outcome::Unavailable {
                why: format!("cannot read the approval token file: {e}"),
            };
        }
    };
    let body = serde_json::to_vec(&question.request).unwrap_or_default();
    match post_json(
        endpoint,
        &body,
        token.as_deref(),
        question.timeout,
        MAX_REPLY,
        Some(interrupt.fd()),
    ) {
        Ok((status, reply)) if (200..300).contains(&status) => {
            parse_reply(&reply, &question.request.id)
        }
        Ok((status, _)) => Outcome::Unavailable {
            why: format!("the approval endpoint answered HTTP {status}"),
        },
        Err(TransportError::Timeout) => Outcome::Cancelled {
            why: format!(
                "the approval endpoint did not answer within {} s",
                question.timeout.as_secs()
            ),
        },
        Err(TransportError::Interrupted) => interrupted(),
        Err(TransportError::TooLarge) => Outcome::Unavailable {
            why: "the approval endpoint's reply is larger than 64 KiB".into(),
        },
        Err(TransportError::Io(e)) => Outcome::Unavailable {
            why: format!("the approval endpoint failed: {e}"),
        },
    }
}

/// Reads the token file. Opened without blocking and accepted only as a regular file: a
/// FIFO planted at the path would otherwise stall the question in `open` or `read`, where
/// neither the deadline nor an interrupt could end it.
fn read_token(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut token = String::new();
    file.by_ref().take(64 * 1024).read_to_string(&mut token)?;
    Ok(token)
}
