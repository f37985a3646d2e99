//! The approval and audit stages of one call: the policy tier, the one answerer, and the
//! audit pair written around the decision.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Map};

use super::{Gathered, Layers};
use crate::approval::request::{CommandLine, Request, Requested};
use crate::approval::{self, Answerer, Outcome, TtyAnswerer, TtySetting};
use crate::audit::{AuditError, AuditLog};
use crate::cli::RunArgs;
use crate::error::{Error, Refusal};
use crate::policy::{Approval, Env, EscalationRequest, Mode, Standing};
use crate::shell::Caller;

/// The policy tier and the one answerer: returns the mode to run at, or the refusal.
/// `caller` decides whether the terminal may answer.
///
/// Order matters. A call already inside a sandbox is refused first, before the audit log is
/// even opened: that log is read-only there by design, and the attempt would only show up
/// as a denial of the enclosing sandgate. Otherwise the audit pair is written around the
/// decision; if the `asked` record cannot be written, nobody is asked. How an audit failure
/// meets the answer is decided in one place, [`conclude`].
pub(super) fn decide(
    request: &EscalationRequest,
    g: &Gathered,
    args: &RunArgs,
    caller: Caller,
) -> Result<Mode, Error> {
    let (standing, env) = (&g.standing, &g.env);
    let audit = may_ask(request, env, g.audit.as_ref())?;
    let id = approval::fresh_id();
    let argv: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let cwd = env.cwd.to_string_lossy().into_owned();
    let refusal_before_asking = refused_unasked(request, standing);
    let asked = asked_record(&id, &argv, &cwd, standing, request);
    if let Err(e) = audit.append("approval/asked", asked) {
        // Nobody is asked without a record of the question: with no answer, nothing can be
        // granted (125), while a refusal already known stays that refusal (77).
        return match refusal_before_asking {
            Some(refusal) => conclude(request, Verdict::Refuse(refusal), Err(e)),
            None => Err(Error::Audit(e)),
        };
    }

    let (verdict, _interrupts_blocked) = match refusal_before_asking {
        Some(refusal) => (Verdict::Refuse(refusal), None),
        None => {
            let question = Question {
                id: &id,
                argv,
                cwd,
                workspace: &g.workspace,
                standing,
                request,
                timeout: Duration::from_secs(args.approval_timeout),
            };
            question.ask(&answerer(args, caller, &g.layers))
        }
    };
    let decided = match &verdict {
        Verdict::Grant => json!({"id": id, "outcome": Outcome::AllowedOnce.as_str()}),
        Verdict::Refuse(refusal) => {
            json!({"id": id, "outcome": refusal.outcome(), "reason": refusal.kind()})
        }
    };
    conclude(
        request,
        verdict,
        audit.append("approval/decided", record(decided)),
    )
}

/// Nobody is asked without a record of the question: there must be an audit log.
fn no_audit_log() -> Error {
    Error::Audit(AuditError::Io {
        path: PathBuf::from("$XDG_STATE_HOME/sandgate/audit.jsonl"),
        source: std::io::Error::other(
            "no XDG_STATE_HOME, and HOME is unset or does not exist, to put the audit log in; pass --audit-log",
        ),
    })
}

/// The `approval/asked` record: the question as it is put, before anyone answers.
fn asked_record(
    id: &str,
    argv: &[String],
    cwd: &str,
    standing: &Standing,
    request: &EscalationRequest,
) -> Map<String, serde_json::Value> {
    record(json!({
        "id": id,
        "argv": argv,
        "cwd": cwd,
        "standing": {"mode": standing.mode, "approval": standing.approval, "preset": standing.preset},
        "requested": {"mode": request.to()},
        "justification": request.justification(),
    }))
}

/// An audit record's fields, from the object `fields`.
fn record(fields: serde_json::Value) -> Map<String, serde_json::Value> {
    match fields {
        serde_json::Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The refusal the standing policy gives `request` before anyone is asked: an approval
/// policy of `never`, or a mode above the managed ceiling.
fn refused_unasked(request: &EscalationRequest, standing: &Standing) -> Option<Refusal> {
    match (standing.approval, standing.max_mode) {
        (Approval::Never, _) => Some(Refusal::PolicyNever {
            preset: standing.preset.clone(),
        }),
        (Approval::OnRequest, Some(max)) if request.to() > max => Some(Refusal::Ceiling { max }),
        (Approval::OnRequest, _) => None,
    }
}

/// Who decides `request` for this call, as a person reads it: the answerer that would be
/// asked, or (`Err`) why nobody is asked — in the order [`decide`] finds it.
pub(super) fn who_decides(
    request: &EscalationRequest,
    g: &Gathered,
    args: &RunArgs,
    caller: Caller,
) -> Result<String, String> {
    may_ask(request, &g.env, g.audit.as_ref()).map_err(|e| e.to_string())?;
    match refused_unasked(request, &g.standing) {
        Some(refusal) => Err(not_granted(request, refusal).to_string()),
        None => Ok(describe(&answerer(args, caller, &g.layers))),
    }
}

/// What must hold before anything of `request` is even recorded: not inside a sandbox (no
/// answer could widen it), and an audit log to record the question in.
fn may_ask<'a>(
    request: &EscalationRequest,
    env: &Env,
    audit: Option<&'a AuditLog>,
) -> Result<&'a AuditLog, Error> {
    if let Some(refusal) = nested(env) {
        return Err(not_granted(request, refusal));
    }
    audit.ok_or_else(no_audit_log)
}

fn not_granted(request: &EscalationRequest, refusal: Refusal) -> Error {
    Error::NotGranted {
        from: request.from(),
        to: request.to(),
        refusal,
    }
}

/// An answerer as `doctor` and `explain` name it.
fn describe(answerer: &Answerer) -> String {
    match answerer {
        Answerer::Endpoint {
            endpoint: approval::Endpoint::Server { socket },
            ..
        } => format!("the approvals server at {}", socket.display()),
        Answerer::Endpoint {
            endpoint: approval::Endpoint::Unix { socket },
            ..
        } => format!("the approval endpoint unix:{}", socket.display()),
        Answerer::Endpoint {
            endpoint: approval::Endpoint::Http { url },
            ..
        } => format!("the approval endpoint {url}"),
        Answerer::Program { command } => format!("the approver program {command:?}"),
        Answerer::Tty => "the terminal prompt".to_owned(),
        Answerer::None { why } => format!("none: {why}"),
    }
}

/// One question to an answerer, with what it is asked about.
struct Question<'a> {
    id: &'a str,
    argv: Vec<String>,
    cwd: String,
    workspace: &'a Path,
    standing: &'a Standing,
    request: &'a EscalationRequest,
    timeout: Duration,
}

impl Question<'_> {
    /// Asks `answerer`; the verdict, with whatever keeps interrupts blocked until the
    /// call is decided (a terminal prompt's).
    fn ask(self, answerer: &Answerer) -> (Verdict, Option<approval::Interruptible>) {
        let (standing, request) = (self.standing, self.request);
        let question = approval::Question {
            request: Request::new(
                self.id,
                CommandLine {
                    argv: self.argv,
                    cwd: self.cwd,
                },
                &self.workspace.to_string_lossy(),
                approval::request::Standing {
                    mode: standing.mode.to_string(),
                    approval: standing.approval.to_string(),
                    preset: standing.preset.clone(),
                },
                Requested {
                    mode: request.to().to_string(),
                    justification: request.justification().to_owned(),
                },
                self.timeout,
            ),
            timeout: self.timeout,
        };
        let (outcome, guard) = approval::ask(answerer, &question);
        let verdict = match outcome {
            Outcome::AllowedOnce => Verdict::Grant,
            Outcome::Rejected => Verdict::Refuse(Refusal::Rejected),
            Outcome::Cancelled { why } => Verdict::Refuse(Refusal::Cancelled { why }),
            Outcome::Unavailable { why } => Verdict::Refuse(Refusal::Unavailable { why }),
        };
        (verdict, guard)
    }
}

/// What the policy tier or the answerer said.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Grant,
    Refuse(Refusal),
}

/// The one place where a failed audit write meets the answer. It blocks a grant (the
/// command does not run, exit 125), but never turns a refusal into anything else: the
/// refusal stands (exit 77), with a warning that its record is missing.
fn conclude(
    request: &EscalationRequest,
    verdict: Verdict,
    audited: Result<(), AuditError>,
) -> Result<Mode, Error> {
    let (from, to) = (request.from(), request.to());
    match (verdict, audited) {
        (Verdict::Grant, Ok(())) => Ok(to),
        (Verdict::Grant, Err(e)) => Err(Error::Audit(e)),
        (Verdict::Refuse(refusal), audited) => {
            if let Err(e) = audited {
                crate::say!("sandgate: warning: {e}; the request is refused all the same");
            }
            Err(Error::NotGranted { from, to, refusal })
        }
    }
}

/// Refuses a widening inside a sandbox. The kernel decides, not the environment: the
/// command of a sandbox can remove or forge `SANDGATE_PARENT_MODE`, but not its own
/// no_new_privs or seccomp filter. Those are set by other sandboxes too (a container run
/// with no-new-privileges, a systemd unit); there as well nothing granted here could reach
/// beyond the enclosing sandbox, so a question would promise what no answer can deliver.
/// When the kernel cannot be asked, the request is refused (closed).
fn nested(env: &Env) -> Option<Refusal> {
    match crate::confinement::this_process() {
        Some(false) => None,
        Some(true) | None => Some(Refusal::Nested {
            parent: env.parent.as_ref().map(|p| p.mode),
        }),
    }
}

/// Chooses the one answerer: the endpoint (the managed one first), else the approver
/// program, else a `sandgate approvals serve` of the caller's listening at the default
/// socket, else the terminal if `TtyAnswerer::decide` lets it answer this caller.
fn answerer(args: &RunArgs, caller: Caller, layers: &Layers) -> Answerer {
    let endpoint = layers
        .managed
        .approval_endpoint
        .clone()
        .or_else(|| args.approval_endpoint.clone())
        .or_else(|| layers.user.approval_endpoint.clone());
    if let Some(url) = endpoint {
        return match url.parse::<approval::Endpoint>() {
            Ok(endpoint) => Answerer::Endpoint {
                endpoint,
                token_file: std::env::var_os("SANDGATE_APPROVAL_TOKEN_FILE").map(PathBuf::from),
            },
            Err(e) => Answerer::None {
                why: format!("the approval endpoint is unusable: {e}"),
            },
        };
    }
    if let Some(command) = args
        .approver
        .clone()
        .or_else(|| layers.user.approver.clone())
    {
        return Answerer::Program { command };
    }
    if let Some(socket) = crate::approvals::listening_default() {
        return Answerer::Endpoint {
            endpoint: approval::Endpoint::Server { socket },
            token_file: None,
        };
    }
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    TtyAnswerer::decide(caller, &TtySetting::from_env(), args.no_tty, in_ci).into()
}

/// Which answerer a call without approval flags would ask, through each kind of caller:
/// what `sandgate doctor` reports.
pub(crate) fn answerers() -> serde_json::Value {
    use clap::Parser;
    let (args, layers) = match (
        crate::cli::Cli::try_parse_from(["sandgate"]),
        Layers::load(),
    ) {
        (Ok(cli), Ok(layers)) => (cli.run, layers),
        (Err(e), _) => return serde_json::json!({ "error": e.to_string() }),
        (_, Err(e)) => return serde_json::json!({ "error": e.to_string() }),
    };
    let say = |caller| describe(&answerer(&args, caller, &layers));
    serde_json::json!({ "person": say(Caller::Person), "agent_link": say(Caller::AgentLink) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{EXIT_INTERNAL, EXIT_NOT_GRANTED};

    fn failed() -> Result<(), AuditError> {
        Err(AuditError::Io {
            path: PathBuf::from("/x"),
            source: std::io::Error::other("read-only"),
        })
    }

    #[test]
    fn a_failed_audit_write_blocks_a_grant_but_never_changes_a_refusal() {
        let request = crate::policy::escalation::validate(
            Some("full-access"),
            Some("t"),
            Mode::WorkspaceWrite,
        );
        let Ok(Some(to)) = request else {
            panic!("{request:?}");
        };
        assert!(matches!(
            conclude(&to, Verdict::Grant, Ok(())),
            Ok(Mode::FullAccess)
        ));
        let code = |r: Result<Mode, Error>| r.err().map(|e| e.exit_code());
        assert_eq!(
            code(conclude(&to, Verdict::Grant, failed())),
            Some(EXIT_INTERNAL)
        );
        for refusal in [
            Refusal::Rejected,
            Refusal::Cancelled { why: "t".into() },
            Refusal::Unavailable { why: "u".into() },
            Refusal::PolicyNever {
                preset: "ci".into(),
            },
        ] {
            for audited in [Ok(()), failed()] {
                assert_eq!(
                    code(conclude(&to, Verdict::Refuse(refusal.clone()), audited)),
                    Some(EXIT_NOT_GRANTED)
                );
            }
        }
    }
}
