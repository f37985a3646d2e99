//! The escalation question as it travels: the JSON the approval endpoint, the approver
//! program and `sandgate approvals serve` receive. One type for the asking side and the
//! serving side, so the format is written down once and checked by the compiler.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// The version of the format below.
pub const VERSION: u32 = 1;
/// The one kind of question there is.
pub const KIND: &str = "sandbox_escalation";

/// The two answers a question can get: `allowed-once` grants the one call, anything else
/// (`rejected` the only other the format names) does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    AllowedOnce,
    Rejected,
}

impl Decision {
    /// Both, as a question offers them.
    pub const ALL: [Decision; 2] = [Decision::AllowedOnce, Decision::Rejected];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::AllowedOnce => "allowed-once",
            Decision::Rejected => "rejected",
        }
    }
}

/// One escalation question.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Request {
    pub version: u32,
    pub id: String,
    pub kind: String,
    pub command: CommandLine,
    pub workspace: String,
    pub standing: Standing,
    pub requested: Requested,
    /// One sentence for people: what is asked instead of what.
    pub reason: String,
    /// The only answers there are: `allowed-once` and `rejected`.
    pub options: Vec<String>,
    /// RFC 3339; the asker stops waiting then.
    pub expires_at: String,
}

/// What would run, and where.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CommandLine {
    pub argv: Vec<String>,
    pub cwd: String,
}

/// The mode the call runs at unless the question is allowed, and where that came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Standing {
    pub mode: String,
    pub approval: String,
    pub preset: String,
}

/// The mode asked for, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Requested {
    pub mode: String,
    pub justification: String,
}

impl Request {
    /// A question that expires `timeout` from now.
    pub fn new(
        id: &str,
        command: CommandLine,
        workspace: &str,
        standing: Standing,
        requested: Requested,
        timeout: Duration,
    ) -> Request {
        let expires = SystemTime::now() + timeout;
        Request {
            version: VERSION,
            id: id.to_owned(),
            kind: KIND.to_owned(),
            reason: format!(
                "the command asks to run under {} instead of {}",
                requested.mode, standing.mode
            ),
            command,
            workspace: workspace.to_owned(),
            standing,
            requested,
            options: Decision::ALL.map(|d| d.as_str().to_owned()).to_vec(),
            expires_at: humantime::format_rfc3339_seconds(expires).to_string(),
        }
    }
}
