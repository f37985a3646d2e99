//! The escalation request: one call asks for a strictly wider mode, with a
//! justification. Validation happens before anything else — before any prompt, endpoint
//! contact or exec — and an `EscalationRequest` value exists only once it has passed.

use super::mode::Mode;

/// The longest justification accepted, in characters.
pub const MAX_JUSTIFICATION: usize = 1000;

/// A request for a wider mode that passed validation. Its fields are private: the only
/// way to get one is [`validate`], so an unpaired, blank or non-widening request cannot
/// exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EscalationRequest {
    from: Mode,
    to: Mode,
    justification: String,
}

impl EscalationRequest {
    /// The standing mode the call would otherwise run at.
    pub fn from(&self) -> Mode {
        self.from
    }
    /// The wider mode requested.
    pub fn to(&self) -> Mode {
        self.to
    }
    /// The caller's justification, trimmed.
    pub fn justification(&self) -> &str {
        &self.justification
    }
}

/// Why a request is not a valid escalation (exit 64).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidEscalation {
    #[error("--sandbox-permissions needs --justification: an escalation request is a pair")]
    MissingJustification,
    #[error("--justification needs --sandbox-permissions: an escalation request is a pair")]
    MissingMode,
    #[error("the justification is blank: say why this command needs a wider sandbox")]
    Blank,
    #[error("the justification is {0} characters long; at most {MAX_JUSTIFICATION} are accepted")]
    TooLong(usize),
    #[error("the justification contains control characters; use plain text on one line")]
    ControlCharacters,
    #[error(
        "unknown sandbox mode {0:?} requested: expected read-only, workspace-write or full-access"
    )]
    UnknownMode(String),
    #[error(
        "requested {0} is the standing mode already: only a strictly wider mode can be requested"
    )]
    SameMode(Mode),
    #[error("requested {requested} is narrower than the standing {standing}: only a strictly wider mode can be requested")]
    Narrower { requested: Mode, standing: Mode },
}

/// Validates the raw request against the standing mode; `Ok(None)` when none was made.
///
/// # Errors
/// See [`InvalidEscalation`].
pub fn validate(
    mode: Option<&str>,
    justification: Option<&str>,
    standing: Mode,
) -> Result<Option<EscalationRequest>, InvalidEscalation> {
    let (mode, justification) = match (mode, justification) {
        (None, None) => return Ok(None),
        (Some(_), None) => return Err(InvalidEscalation::MissingJustification),
        (None, Some(_)) => return Err(InvalidEscalation::MissingMode),
        (Some(m), Some(j)) => (m, j),
    };
    let trimmed = justification.trim();
    if trimmed.is_empty() {
        return Err(InvalidEscalation::Blank);
    }
    let length = trimmed.chars().count();
    if length > MAX_JUSTIFICATION {
        return Err(InvalidEscalation::TooLong(length));
    }
    if trimmed.chars().any(char::is_control) {
        return Err(InvalidEscalation::ControlCharacters);
    }
    let to: Mode = mode
        .parse()
        .map_err(|_| InvalidEscalation::UnknownMode(mode.to_owned()))?;
    match to.cmp(&standing) {
        std::cmp::Ordering::Equal => Err(InvalidEscalation::SameMode(to)),
        std::cmp::Ordering::Less => Err(InvalidEscalation::Narrower {
            requested: to,
            standing,
        }),
        std::cmp::Ordering::Greater => Ok(Some(EscalationRequest {
            from: standing,
            to,
            justification: trimmed.to_owned(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WS: Mode = Mode::WorkspaceWrite;

    #[test]
    fn each_invalid_request_has_its_own_error() {
        let long = "x".repeat(MAX_JUSTIFICATION + 1);
        let cases: [(Option<&str>, Option<&str>, InvalidEscalation); 8] = [
            (
                Some("full-access"),
                None,
                InvalidEscalation::MissingJustification,
            ),
            (None, Some("why"), InvalidEscalation::MissingMode),
            (Some("full-access"), Some("  \t "), InvalidEscalation::Blank),
            (
                Some("full-access"),
                Some(&long),
                InvalidEscalation::TooLong(MAX_JUSTIFICATION + 1),
            ),
            (
                Some("full-access"),
                Some("a\u{1b}[2Jb"),
                InvalidEscalation::ControlCharacters,
            ),
            (
                Some("root"),
                Some("why"),
                InvalidEscalation::UnknownMode("root".into()),
            ),
            (
                Some("workspace-write"),
                Some("why"),
                InvalidEscalation::SameMode(WS),
            ),
            (
                Some("read-only"),
                Some("why"),
                InvalidEscalation::Narrower {
                    requested: Mode::ReadOnly,
                    standing: WS,
                },
            ),
        ];
        for (mode, just, want) in cases {
            assert_eq!(validate(mode, just, WS), Err(want));
        }
    }

    #[test]
    fn a_wider_paired_request_passes_trimmed() {
        let req = validate(Some("danger-full-access"), Some("  install deps "), WS);
        let req = req.ok().flatten();
        assert_eq!(
            req.as_ref().map(|r| (r.from(), r.to(), r.justification())),
            Some((WS, Mode::FullAccess, "install deps"))
        );
        assert_eq!(validate(None, None, WS), Ok(None));
    }
}
