//! The approval and audit stages of one call: the policy tier, the one answerer, and the
//! audit pair written around the decision.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Map};

use super::Layers;
use crate::approval::{self, Answerer, Outcome, TtyAnswerer, TtySetting};
use crate::audit::AuditLog;
use crate::cli::RunArgs;
use crate::error::{Error, Refusal};
use crate::policy::{Approval, Env, EscalationRequest, Mode, Standing};
use crate::shell::Caller;

/// The policy tier and the one answerer: returns the mode to run at, or the refusal. The
/// audit pair is written around the decision whatever it is; if the `asked` record cannot
/// be written, nobody is asked and the command does not run. `caller` decides whether the
/// terminal may answer.
#[allow(clippy::too_many_arguments)]
pub(super) fn decide(
    request: &EscalationRequest,
    standing: &Standing,
    args: &RunArgs,
    caller: Caller,
    layers: &Layers,
    env: &Env,
    workspace: &Path,
    audit: &AuditLog,
) -> Result<Mode, Error> {
    let id = approval::fresh_id();
    let argv: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let cwd = env.cwd.to_string_lossy().into_owned();
    let mut asked = Map::new();
    asked.insert("id".into(), json!(id));
    asked.insert("argv".into(), json!(argv));
    asked.insert("cwd".into(), json!(cwd));
    asked.insert(
        "standing".into(),
        json!({"mode": standing.mode, "approval": standing.approval, "preset": standing.preset}),
    );
    asked.insert("requested".into(), json!({"mode": request.to()}));
    asked.insert("justification".into(), json!(request.justification()));
    audit.append("approval/asked", asked)?;

    let timeout = Duration::from_secs(args.approval_timeout);
    let refusal_before_asking = match (&env.parent, standing.approval, standing.max_mode) {
        (Some(parent), _, _) => Some(Refusal::Nested {
            parent: parent.mode,
        }),
        (None, Approval::Never, _) => Some(Refusal::PolicyNever {
            preset: standing.preset.clone(),
        }),
        (None, Approval::OnRequest, Some(max)) if request.to() > max => {
            Some(Refusal::Ceiling { max })
        }
        (None, Approval::OnRequest, _) => None,
    };
    let (refusal, _interrupts_blocked) = match refusal_before_asking {
        Some(refusal) => (Some(refusal), None),
        None => {
            let question = approval::Question {
                body: approval::request_body(
                    &id,
                    &argv,
                    &cwd,
                    &workspace.to_string_lossy(),
                    (
                        standing.mode.as_str(),
                        standing.approval.as_str(),
                        &standing.preset,
                    ),
                    (request.to().as_str(), request.justification()),
                    timeout,
                ),
                display: approval::Display {
                    argv: argv.clone(),
                    cwd: cwd.clone(),
                    workspace: workspace.to_string_lossy().into_owned(),
                    standing: standing.mode.to_string(),
                    requested: request.to().to_string(),
                    justification: request.justification().to_owned(),
                },
                id: id.clone(),
                timeout,
            };
            let (outcome, guard) = approval::ask(&answerer(args, caller, layers), &question);
            let refusal = match outcome {
                Outcome::AllowedOnce => None,
                Outcome::Rejected => Some(Refusal::Rejected),
                Outcome::Cancelled { why } => Some(Refusal::Cancelled { why }),
                Outcome::Unavailable { why } => Some(Refusal::Unavailable { why }),
            };
            (refusal, guard)
        }
    };
    let mut decided = Map::new();
    decided.insert("id".into(), json!(id));
    decided.insert(
        "outcome".into(),
        json!(refusal.as_ref().map_or("allowed-once", Refusal::outcome)),
    );
    if let Some(r) = &refusal {
        decided.insert("reason".into(), json!(r.kind()));
    }
    audit.append("approval/decided", decided)?;
    match refusal {
        None => Ok(request.to()),
        Some(refusal) => Err(Error::NotGranted {
            to: request.to(),
            refusal,
        }),
    }
}

/// Chooses the one answerer: the endpoint (the managed one first), else the
/// approver program, else the terminal if `TtyAnswerer::decide` lets it answer this caller.
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
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    TtyAnswerer::decide(caller, &TtySetting::from_env(), args.no_tty, in_ci).into()
}
