//! The approval endpoint: POSTs the request JSON and maps the reply. A failing
//! endpoint is `Unavailable` (never a fall-through to another answerer); no reply before
//! the timeout is `Cancelled`.

use std::path::Path;

use super::transport::{post_json, Endpoint, TransportError};
use super::{parse_reply, Outcome, Question, MAX_REPLY};

/// Puts `question` to `endpoint`.
pub fn ask(endpoint: &Endpoint, token_file: Option<&Path>, question: &Question) -> Outcome {
    let token = match token_file.map(std::fs::read_to_string) {
        None => None,
        Some(Ok(token)) => Some(token.trim().to_owned()),
        Some(Err(e)) => {
            return Outcome::Unavailable {
                why: format!("cannot read the approval token file: {e}"),
            };
        }
    };
    let body = question.body.to_string().into_bytes();
    match post_json(
        endpoint,
        &body,
        token.as_deref(),
        question.timeout,
        MAX_REPLY,
    ) {
        Ok((status, reply)) if (200..300).contains(&status) => parse_reply(&reply, &question.id),
        Ok((status, _)) => Outcome::Unavailable {
            why: format!("the approval endpoint answered HTTP {status}"),
        },
        Err(TransportError::Timeout) => Outcome::Cancelled {
            why: format!(
                "the approval endpoint did not answer within {} s",
                question.timeout.as_secs()
            ),
        },
        Err(TransportError::TooLarge) => Outcome::Unavailable {
            why: "the approval endpoint's reply is larger than 64 KiB".into(),
        },
        Err(TransportError::Io(e)) => Outcome::Unavailable {
            why: format!("the approval endpoint failed: {e}"),
        },
    }
}
