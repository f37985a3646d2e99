//! sandgate's own failures, a run's and every subcommand's, and the one table that maps
//! them to exit statuses: no other place picks one. (How a command's own end is passed on
//! — its status, its death signal, 124 for its time limit — is `exec::Outcome::pass_on`.)

use crate::audit::AuditError;
use crate::exec::ExecError;
use crate::kept::KeptError;
use crate::limits::Unenforced;
use crate::logfile::LogFileError;
use crate::policy::{InvalidEscalation, Mode, PolicyError};
use crate::private_temp::TempError;
use crate::sandbox::{Backend, Guarantee, SandboxError};
use std::path::PathBuf;

/// Why an escalation request was not granted (exit 77). Each has its own message and
/// marker kind; all of them deny.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The approval policy is `never`: rejected inside sandgate, nobody asked.
    PolicyNever { preset: String },
    /// The call runs inside a sandbox already (the kernel says so): nothing granted here
    /// could hold. `parent` is the enclosing sandgate's mode when it left its hint.
    Nested { parent: Option<Mode> },
    /// The managed ceiling forbids the requested mode.
    Ceiling { max: Mode },
    /// The answerer said no.
    Rejected,
    /// Nobody answered in time, or the person cancelled.
    Cancelled { why: String },
    /// No channel could give an answer.
    Unavailable { why: String },
}

impl Refusal {
    /// Returns the audit outcome for this refusal.
    pub fn outcome(&self) -> &'static str {
        match self {
            Refusal::PolicyNever { .. }
            | Refusal::Nested { .. }
            | Refusal::Ceiling { .. }
            | Refusal::Rejected => "rejected",
            Refusal::Cancelled { .. } => "cancelled",
            Refusal::Unavailable { .. } => "unavailable",
        }
    }

    /// Returns the marker kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::PolicyNever { .. } => "policy_never",
            Refusal::Nested { .. } => "nested_widening",
            Refusal::Ceiling { .. } | Refusal::Rejected => "escalation_rejected",
            Refusal::Cancelled { .. } => "escalation_cancelled",
            Refusal::Unavailable { .. } => "approval_unavailable",
        }
    }

    fn message(&self, to: Mode) -> String {
        match self {
            Refusal::PolicyNever { preset } => format!(
                "the approval policy is never (preset {preset}): escalation requests are rejected without asking anyone"
            ),
            Refusal::Nested { parent: Some(parent) } => format!(
                "this sandgate runs inside a {parent} sandbox: it cannot run wider, so the request for {to} is rejected without asking anyone"
            ),
            Refusal::Nested { parent: None } => format!(
                "this sandgate runs inside a sandbox (no_new_privs and a seccomp filter are set, and nothing inside can clear them): it cannot run wider, so the request for {to} is rejected without asking anyone"
            ),
            Refusal::Ceiling { max } => format!(
                "the managed configuration caps the mode at max_mode={max}: escalating this command to {to} is rejected"
            ),
            Refusal::Rejected => format!("the approver rejected escalating this command to {to}"),
            Refusal::Cancelled { why } => format!("the approval was cancelled: {why}"),
            Refusal::Unavailable { why } => format!("no approval channel is available: {why}"),
        }
    }
}

/// Every way a call can end without the command's own exit status.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("the {mode} profile cannot be enforced here by the {} backend: {}; {}",
        backend.name(), describe(missing), remedy(*backend, missing))]
    Unenforceable {
        mode: crate::policy::Mode,
        backend: Backend,
        missing: Vec<Guarantee>,
    },
    #[error("--keep-background needs a PID namespace, which the {} backend does not make here: nothing could list, stop or time-limit what the call left running; run the command without it (what it starts then ends with the call), or where sandgate can make namespaces", backend.name())]
    KeptWithoutPidNamespace { backend: Backend },
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error("invalid escalation request: {0}")]
    Escalation(#[from] InvalidEscalation),
    #[error("{}", refusal.message(*to))]
    NotGranted {
        /// The standing mode the command would have run at.
        from: Mode,
        to: Mode,
        refusal: Refusal,
    },
    #[error("{0}; the command was not run")]
    Audit(#[from] AuditError),
    #[error(transparent)]
    DenialLog(LogFileError),
    /// Limits asked for explicitly that cannot hold here (`--limit-pids`, …).
    #[error("{}; rerun with --allow-degraded={} to run without {}",
        .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
        .0.iter().map(|u| u.kind.name()).collect::<Vec<_>>().join(","),
        if .0.len() == 1 { "it" } else { "them" })]
    Limits(Vec<Unenforced>),
    /// A subcommand other than a run could not do what it was asked.
    #[error(transparent)]
    Subcommand(#[from] SubcommandError),
}

/// Why a subcommand (`install-links`, `audit verify`, `tmp`, `ps`, `stop`, `explain`,
/// `approvals`) did not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum SubcommandError {
    #[error("cannot install links in {}: {source}", dir.display())]
    Links {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("no audit log configured; pass --log FILE")]
    NoAuditLog,
    #[error("there is no audit log at {}: no escalation has been recorded there yet, or the log was removed", .0.display())]
    NoAuditLogAt(PathBuf),
    /// The audit log cannot be vouched for: unreadable, or its chain broken.
    #[error(transparent)]
    Unverified(AuditError),
    #[error(transparent)]
    Kept(#[from] KeptError),
    #[error("cannot stop the kept processes using it (pid {pid}): {source}; nothing removed")]
    TempInUse { pid: libc::pid_t, source: KeptError },
    #[error(transparent)]
    Temp(#[from] TempError),
    #[error("{stopped} of {of} kept calls stopped; the rest are said above")]
    NotAllStopped { stopped: usize, of: usize },
    #[error("the call to explain is a run's flags and command, not a subcommand")]
    ExplainSubcommand,
    #[error("cannot write the output: {0}")]
    Output(#[from] serde_json::Error),
    /// The approvals server or client (the refusal of an ended or unknown question among
    /// them): said as `sandgate approvals: …`, without a marker (no call was refused).
    #[error("{0}")]
    Approvals(String),
}

/// What a caller can do about guarantees that do not hold: name them, when every one of
/// them may be given up; otherwise, where they would hold.
fn remedy(backend: Backend, missing: &[Guarantee]) -> String {
    let fixed: Vec<&str> = missing
        .iter()
        .filter(|g| !g.nameable())
        .map(|g| g.name())
        .collect();
    if fixed.is_empty() {
        let names: Vec<&str> = missing.iter().map(|g| g.name()).collect();
        return format!(
            "rerun with --allow-degraded={} to run without {}",
            names.join(","),
            if names.len() == 1 { "it" } else { "them" }
        );
    }
    let elsewhere = match backend {
        Backend::Landlock => {
            "; the namespaces backend holds them where the kernel makes namespaces"
        }
        Backend::Namespaces => "",
    };
    format!(
        "no run goes without {}{elsewhere} (sandgate doctor shows what holds here)",
        fixed.join(" or ")
    )
}

fn describe(missing: &[Guarantee]) -> String {
    missing
        .iter()
        .map(|g| g.describe())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Exit status of a subcommand whose answer is no: an audit log that does not verify, an
/// approval that cannot be given.
pub const EXIT_FAILED: u8 = 1;
/// Exit status for a usage error (sysexits EX_USAGE).
pub const EXIT_USAGE: u8 = 64;
/// Exit status when an escalation is not granted (EX_NOPERM).
pub const EXIT_NOT_GRANTED: u8 = 77;
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
            Error::Policy(PolicyError::NoCommand | PolicyError::Directive(_))
            | Error::Escalation(_) => EXIT_USAGE,
            Error::Policy(PolicyError::Preset {
                origin: crate::policy::standing::Origin::Flags,
                ..
            }) => EXIT_USAGE,
            Error::Policy(PolicyError::Hosts {
                origin: crate::policy::hosts::HostsOrigin::Call,
                ..
            }) => EXIT_USAGE,
            Error::NotGranted { .. } => EXIT_NOT_GRANTED,
            Error::Audit(_) => EXIT_INTERNAL,
            // What is at the path is the caller's setup to fix, as a bad config is.
            Error::DenialLog(LogFileError::Refused { .. }) => EXIT_CONFIG,
            Error::DenialLog(LogFileError::Io { .. }) => EXIT_USAGE,
            Error::Policy(PolicyError::Cwd(_)) => EXIT_INTERNAL,
            Error::Policy(
                PolicyError::Workspace { .. }
                | PolicyError::WorkspaceNotDir(_)
                | PolicyError::WorkspaceIsRoot { .. }
                | PolicyError::WorkspaceHoldsHome { .. }
                | PolicyError::WritableRootIsRoot { .. }
                | PolicyError::WritableRoot { .. }
                | PolicyError::RedirectedRoot { .. }
                | PolicyError::WorkspaceChanged { .. }
                | PolicyError::GitPointerMissing(_)
                | PolicyError::SharedTempAsRoot { .. }
                | PolicyError::SandgateStateAsRoot { .. }
                | PolicyError::AllowedSocket { .. }
                | PolicyError::BadProfile { .. }
                | PolicyError::Preset { .. }
                | PolicyError::PresetNotAllowed { .. }
                | PolicyError::AboveCeiling { .. }
                | PolicyError::Hosts { .. }
                | PolicyError::Config(_),
            ) => EXIT_CONFIG,
            Error::Unenforceable { .. }
            | Error::KeptWithoutPidNamespace { .. }
            | Error::Sandbox(_)
            | Error::Limits(_) => EXIT_CONFIG,
            Error::Exec(ExecError::NotFound(_)) => EXIT_NOT_FOUND,
            Error::Exec(ExecError::NotExecutable { .. } | ExecError::ProgramAsScript(..)) => {
                EXIT_NOT_EXECUTABLE
            }
            Error::Exec(ExecError::Nul) => EXIT_USAGE,
            Error::Exec(ExecError::Setup { .. }) => EXIT_CONFIG,
            Error::Exec(ExecError::Io(_)) => EXIT_INTERNAL,
            Error::Subcommand(e) => match e {
                SubcommandError::NoAuditLog | SubcommandError::ExplainSubcommand => EXIT_USAGE,
                SubcommandError::NoAuditLogAt(_)
                | SubcommandError::Unverified(_)
                | SubcommandError::Approvals(_) => EXIT_FAILED,
                SubcommandError::Kept(KeptError::Directory(_)) | SubcommandError::Temp(_) => {
                    EXIT_CONFIG
                }
                SubcommandError::Links { .. }
                | SubcommandError::Kept(_)
                | SubcommandError::TempInUse { .. }
                | SubcommandError::NotAllStopped { .. }
                | SubcommandError::Output(_) => EXIT_INTERNAL,
            },
        }
    }

    /// Returns the marker `kind` for this refusal.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Escalation(_) | Error::Policy(PolicyError::Directive(_)) => {
                return "invalid_escalation"
            }
            Error::NotGranted { refusal, .. } => return refusal.kind(),
            Error::DenialLog(LogFileError::Refused { .. })
            | Error::Audit(AuditError::Open(LogFileError::Refused { .. })) => return "unsafe_log",
            Error::Audit(AuditError::Locked { .. }) => return "audit_locked",
            Error::Subcommand(
                SubcommandError::NoAuditLogAt(_)
                | SubcommandError::Unverified(AuditError::Unreadable { .. }),
            ) => return "audit_unreadable",
            Error::Subcommand(SubcommandError::Unverified(_)) => return "audit_broken",
            _ => {}
        }
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
        assert_eq!(
            Error::Policy(PolicyError::WorkspaceIsRoot { chosen: true }).exit_code(),
            78
        );
        assert_eq!(Error::Policy(PolicyError::NoCommand).exit_code(), 64);
        assert_eq!(
            Error::Exec(ExecError::NotFound("x".into())).exit_code(),
            127
        );
        let e = Error::Unenforceable {
            mode: crate::policy::Mode::ReadOnly,
            backend: Backend::Namespaces,
            missing: vec![Guarantee::ReadOnlyOutside, Guarantee::PrivateTmp],
        };
        assert_eq!(e.exit_code(), 78);
        assert!(e.to_string().contains("private /tmp"), "{e}");
        assert!(
            e.to_string()
                .contains("--allow-degraded=read-only-outside,private-tmp"),
            "{e}"
        );
        let e = Error::Unenforceable {
            mode: crate::policy::Mode::ReadOnly,
            backend: Backend::Landlock,
            missing: vec![Guarantee::Secrets, Guarantee::Ipc],
        };
        assert!(!e.to_string().contains("--allow-degraded="), "{e}");
        assert!(e.to_string().contains("no run goes without secrets"), "{e}");
    }

    #[test]
    fn subcommands_end_with_the_statuses_of_the_table() {
        let of = |e: SubcommandError| {
            let e = Error::from(e);
            (e.exit_code(), e.kind())
        };
        assert_eq!(of(SubcommandError::NoAuditLog), (64, "usage"));
        assert_eq!(of(SubcommandError::ExplainSubcommand), (64, "usage"));
        assert_eq!(
            of(SubcommandError::NoAuditLogAt("/log".into())),
            (1, "audit_unreadable")
        );
        let unreadable = AuditError::Unreadable {
            path: "/log".into(),
            source: std::io::Error::from_raw_os_error(libc::EACCES),
        };
        assert_eq!(
            of(SubcommandError::Unverified(unreadable)),
            (1, "audit_unreadable")
        );
        let broken = AuditError::Broken {
            path: "/log".into(),
            line: 3,
            reason: "edited".into(),
        };
        assert_eq!(of(SubcommandError::Unverified(broken)), (1, "audit_broken"));
        let temp = || TempError {
            path: "/tmp/x".into(),
            why: "a link".into(),
        };
        assert_eq!(of(SubcommandError::Temp(temp())), (78, "unenforceable"));
        assert_eq!(
            of(SubcommandError::Kept(KeptError::Directory(temp()))),
            (78, "unenforceable")
        );
        assert_eq!(
            of(SubcommandError::NotAllStopped { stopped: 1, of: 2 }),
            (125, "internal")
        );
        assert_eq!(of(SubcommandError::Approvals("gone".into())).0, 1);
    }

    #[test]
    fn unsafe_log_paths_refuse_with_their_own_kind() {
        use crate::logfile::{Unsafe, Which};
        let refused = |which| LogFileError::Refused {
            which,
            path: "/ws/log".into(),
            why: Unsafe::Symlink,
        };
        let denial = Error::DenialLog(refused(Which::DenialLog));
        assert_eq!((denial.exit_code(), denial.kind()), (78, "unsafe_log"));
        let audit = Error::Audit(AuditError::Open(refused(Which::AuditLog)));
        assert_eq!((audit.exit_code(), audit.kind()), (125, "unsafe_log"));
        let locked = Error::Audit(AuditError::Locked {
            path: "/log".into(),
            holder: "pid 1 (x)".into(),
        });
        assert_eq!((locked.exit_code(), locked.kind()), (125, "audit_locked"));
        let nested = Error::NotGranted {
            from: Mode::ReadOnly,
            to: Mode::FullAccess,
            refusal: Refusal::Nested { parent: None },
        };
        assert_eq!((nested.exit_code(), nested.kind()), (77, "nested_widening"));
    }
}
