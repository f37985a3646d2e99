//! sandgate's own failures and the one table that maps them to exit statuses (DESIGN §7).
//! Exit codes are decided here and nowhere else.

use crate::exec::ExecError;
use crate::policy::PolicyError;
use crate::sandbox::{Guarantee, SandboxError};

/// Every way a call can end without the command's own exit status.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("the {mode} profile cannot be enforced here: {}; rerun with --allow-degraded to run without {}",
        describe(missing), if missing.len() == 1 { "it" } else { "them" })]
    Unenforceable {
        mode: crate::policy::Mode,
        missing: Vec<Guarantee>,
    },
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Exec(#[from] ExecError),
}

fn describe(missing: &[Guarantee]) -> String {
    missing
        .iter()
        .map(|g| g.describe())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Exit status for a usage error (sysexits EX_USAGE).
pub const EXIT_USAGE: u8 = 64;
/// Exit status when the profile cannot be enforced or configuration is bad (EX_CONFIG).
pub const EXIT_CONFIG: u8 = 78;
/// Exit status for sandgate's own internal or I/O failures (as `env(1)`).
pub const EXIT_INTERNAL: u8 = 125;
/// The command exists but cannot be executed.
pub const EXIT_NOT_EXECUTABLE: u8 = 126;
/// The command was not found.
pub const EXIT_NOT_FOUND: u8 = 127;

impl Error {
    /// Returns the exit status for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Policy(PolicyError::NoCommand) => EXIT_USAGE,
            Error::Policy(PolicyError::Cwd(_)) => EXIT_INTERNAL,
            Error::Policy(
                PolicyError::Workspace { .. }
                | PolicyError::WorkspaceNotDir(_)
                | PolicyError::WorkspaceIsRoot
                | PolicyError::WritableRootIsRoot { .. }
                | PolicyError::WritableRoot { .. }
                | PolicyError::BadProfile { .. },
            ) => EXIT_CONFIG,
            Error::Unenforceable { .. } | Error::Sandbox(_) => EXIT_CONFIG,
            Error::Exec(ExecError::NotFound(_)) => EXIT_NOT_FOUND,
            Error::Exec(ExecError::NotExecutable { .. }) => EXIT_NOT_EXECUTABLE,
            Error::Exec(ExecError::Nul) => EXIT_USAGE,
            Error::Exec(ExecError::Setup { .. }) => EXIT_CONFIG,
            Error::Exec(ExecError::Io(_)) => EXIT_INTERNAL,
        }
    }

    /// Returns the marker `kind` for this refusal.
    pub fn kind(&self) -> &'static str {
        match self.exit_code() {
            EXIT_USAGE => "usage",
            EXIT_CONFIG => "unenforceable",
            EXIT_NOT_EXECUTABLE => "not_executable",
            EXIT_NOT_FOUND => "not_found",
            _ => "internal",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_table() {
        assert_eq!(Error::Policy(PolicyError::WorkspaceIsRoot).exit_code(), 78);
        assert_eq!(Error::Policy(PolicyError::NoCommand).exit_code(), 64);
        assert_eq!(
            Error::Exec(ExecError::NotFound("x".into())).exit_code(),
            127
        );
        let missing = vec![Guarantee::LandlockFilesystem];
        let e = Error::Unenforceable {
            mode: crate::policy::Mode::ReadOnly,
            missing,
        };
        assert_eq!(e.exit_code(), 78);
        assert!(e.to_string().contains("landlock filesystem rules"));
    }
}
