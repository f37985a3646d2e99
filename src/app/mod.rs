//! The pipeline as a straight line: cli → policy (configuration layers, standing mode,
//! escalation request) → approval and audit (only for an escalation) → sandbox → exec.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::Parser;
use serde_json::{json, Map};

use crate::audit::{AuditError, AuditLog};
use crate::cli::{self, AuditAction, Cli, RunArgs, Sub};
use crate::denial::{marker, Escalation, Form, Reporter};
use crate::doctor;
use crate::error::{Error, SubcommandError, EXIT_USAGE};
use crate::exec::{self, ExecError, Launch, Outcome};
use crate::logfile::{self, LogFileError};
use crate::policy::guarantee::{BackendChoice, Degradable};
use crate::policy::host_rules::HostRules;
use crate::policy::{
    self, config, standing, Approval, Confinement, Env, Mode, Parent, Plan, PolicyError, Request,
    Standing,
};
use crate::sandbox::{self, Backend, Features, Guarantee, Layout, Step};
use crate::secret_scan;
use crate::shell::{self, Caller, Invocation, ShellCall};
use crate::supervisor;
use std::io::IsTerminal;

mod escalate;
mod explain;
pub(crate) use escalate::answerers;
mod limits;
mod plan;
pub(crate) use limits::doctor as limits_report;
mod kept;
mod launch;
mod script_head;
mod shell_mode;
mod subcommands;

use escalate::decide;
use launch::{observer, Call};
use plan::{gather, gather_env, Gathered, Planned, Reporting};
pub(crate) use plan::{hidden_report, host_rules};
use shell_mode::{prefix_call, run_shell, Shellish};
use subcommands::{install_links, presets, tmp, verify};

/// Parses the command line, runs the call and returns sandgate's exit status.
pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let argv0 = args.first().cloned().unwrap_or_default();
    let caller = Caller::of_argv0(&argv0);
    let invocation = if shell::is_prefix_name(&argv0) {
        // The prefix link receives the command string as one word (or, tolerantly, several).
        let words: Vec<String> = args[1..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        prefix_call(argv0, words.join(" "))
    } else {
        let command = <Cli as clap::CommandFactory>::command();
        let subcommands: Vec<String> = command
            .get_subcommands()
            .map(|s| s.get_name().to_owned())
            .collect();
        shell::classify(
            args,
            LONG_FLAGS.get_or_init(|| long_flags(&command)),
            &subcommands,
            shell::is_shell_name(&argv0),
        )
    };
    match invocation {
        Invocation::Plain(args) => plain(args, caller),
        Invocation::Shell {
            sandgate_args,
            shell,
        } => match Cli::try_parse_from(&sandgate_args) {
            Ok(cli) => run_shell(cli.run, &sandgate_args, shell, caller),
            Err(e) => usage(&e),
        },
    }
}

/// sandgate's long flags, each with whether it takes a value: read from the clap
/// definitions once per call (building them is not free, and sandgate runs before every
/// command), by the first that needs them.
static LONG_FLAGS: std::sync::OnceLock<Vec<(String, bool)>> = std::sync::OnceLock::new();

fn long_flags(command: &clap::Command) -> Vec<(String, bool)> {
    command
        .get_arguments()
        .filter_map(|a| Some((a.get_long()?.to_owned(), a.get_action().takes_values())))
        .collect()
}

/// sandgate's long flags that take a value, without their `--`.
fn flags_taking_values() -> Vec<&'static str> {
    LONG_FLAGS
        .get_or_init(|| long_flags(&<Cli as clap::CommandFactory>::command()))
        .iter()
        .filter(|(_, value)| *value)
        .map(|(name, _)| name.as_str())
        .collect()
}

/// `argv` without the escalation request it carried (`--sandbox-permissions` and
/// `--justification`, each with its value): a retry adds the wider request, and clap takes
/// each flag once. Only sandgate's flags are looked at: the first `--` or operand ends them.
fn without_request(argv: Vec<OsString>) -> Vec<OsString> {
    let flags = LONG_FLAGS.get_or_init(|| long_flags(&<Cli as clap::CommandFactory>::command()));
    let mut args = argv.into_iter();
    let mut kept: Vec<OsString> = args.next().into_iter().collect();
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy().into_owned();
        let Some(flag) = text.strip_prefix("--").filter(|f| !f.is_empty()) else {
            kept.push(arg);
            break;
        };
        let (name, inline_value) = flag
            .split_once('=')
            .map_or((flag, false), |(n, _)| (n, true));
        let takes_value = flags.iter().any(|(f, value)| f == name && *value);
        let value = if takes_value && !inline_value {
            args.next()
        } else {
            None
        };
        if !matches!(name, "sandbox-permissions" | "justification") {
            kept.push(arg);
            kept.extend(value);
        }
    }
    kept.extend(args);
    kept
}

/// A command line clap refused (or `--help`/`--version`, which clap prints on stdout):
/// a refusal prints its marker like every other, its message clap's first line.
fn usage(e: &clap::Error) -> ExitCode {
    let _ = e.print();
    if !e.use_stderr() {
        return ExitCode::SUCCESS;
    }
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or_default();
    let message = first.strip_prefix("error: ").unwrap_or(first);
    crate::say!("{}", marker("usage", None, message, Map::new()));
    ExitCode::from(EXIT_USAGE)
}

/// sandgate's own command line: subcommands, or `[FLAGS] -- CMD ARGS`.
fn plain(args: Vec<OsString>, caller: Caller) -> ExitCode {
    let argv0 = args.first().cloned().unwrap_or_default();
    // `--` asks for direct execution: with nothing after it, that is a usage error, not a
    // script on stdin.
    let explicit = args.iter().any(|a| a == "--");
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return usage(&e),
    };
    match cli.subcommand {
        Some(Sub::Doctor { json }) => doctor(json),
        Some(Sub::Presets {
            json,
            knobs,
            workspace,
        }) => done(presets(json, &knobs, workspace.as_deref())),
        Some(Sub::Explain { json, call }) => explain::explain(call, json, caller),
        Some(Sub::Audit {
            action: AuditAction::Verify { log },
        }) => done(verify(log)),
        Some(Sub::Completions { shell }) => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "sandgate", &mut script);
            crate::output::stdout_bytes(&script);
            ExitCode::SUCCESS
        }
        Some(Sub::Approvals { action }) => match crate::approvals::run(action) {
            Ok(()) => ExitCode::SUCCESS,
            Err(why) => {
                crate::say!("sandgate approvals: {why}");
                let err = Error::from(SubcommandError::Approvals(why));
                ExitCode::from(err.exit_code())
            }
        },
        Some(Sub::InstallLinks { dir }) => done(install_links(&dir)),
        Some(Sub::Tmp { workspace, clean }) => done(tmp(workspace.as_deref(), clean)),
        Some(Sub::Ps { which, json }) => done(kept::ps(&which, json)),
        Some(Sub::Stop { which, json }) => done(kept::stop(&which, json)),
        // The subcommand is the prefix link's other spelling: an agent's call too.
        Some(Sub::Prefix { command }) => match prefix_call(argv0.clone(), command) {
            Invocation::Shell {
                shell,
                sandgate_args,
            } => match Cli::try_parse_from(&sandgate_args) {
                Ok(cli) => run_shell(cli.run, &sandgate_args, shell, Caller::AgentLink),
                Err(e) => usage(&e),
            },
            Invocation::Plain(_) => ExitCode::from(EXIT_USAGE),
        },
        // No command and a script on stdin (a pipe, GitLab's form): the shell reads it.
        None if cli.run.command.is_empty() && !explicit && !std::io::stdin().is_terminal() => {
            run_shell(cli.run, &args, ShellCall::default(), caller)
        }
        None => finish(run_inner(cli.run, Shellish::default(), caller), None),
    }
}

/// `sandgate doctor`: the kernel's report with what this caller's configuration makes of a
/// call.
fn doctor(json: bool) -> ExitCode {
    let report = doctor::report(doctor::Configured {
        hidden: hidden_report,
        answerer: answerers(),
        hosts: host_rules(),
        limits: limits_report(),
    });
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => crate::out!("{text}"),
            Err(e) => crate::say!("sandgate: {e}"),
        }
    } else {
        crate::output::stdout_bytes(doctor::render_text(&report).as_bytes());
    }
    ExitCode::SUCCESS
}

/// Turns a subcommand's result into sandgate's exit status, saying why it failed as a
/// run's refusal is said.
fn done(result: Result<(), Error>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => finish(Err(err), None),
    }
}

/// Turns a call's result into sandgate's exit status (or its death by the command's
/// signal); every refusal prints a message and a marker.
fn finish(result: Result<Outcome, Error>, mode_hint: Option<Mode>) -> ExitCode {
    match result {
        Ok(outcome) => outcome.pass_on(),
        Err(err) => {
            crate::say!("sandgate: {err}");
            let mut extra = Map::new();
            match &err {
                Error::Unenforceable { missing, .. } => {
                    extra.insert("missing".into(), json!(missing));
                }
                Error::Limits(unheld) => {
                    let missing: Vec<_> = unheld.iter().map(|u| u.kind).collect();
                    extra.insert("missing".into(), json!(missing));
                }
                Error::NotGranted { to, .. } => {
                    extra.insert("requested".into(), json!(to));
                }
                _ => {}
            }
            // A refused escalation knows the standing mode the command would have had.
            let mode = match &err {
                Error::NotGranted { from, .. } => Some(*from),
                _ => mode_hint,
            };
            crate::say!("{}", marker(err.kind(), mode, &err.to_string(), extra));
            ExitCode::from(err.exit_code())
        }
    }
}

/// The configuration files, read once per call.
struct Layers {
    managed: config::Managed,
    user: config::User,
    user_dir: Option<PathBuf>,
}

impl Layers {
    fn load() -> Result<Layers, Error> {
        let managed = config::load(&config::managed_path()).map_err(PolicyError::from)?;
        let user_dir = config::user_dir();
        let user = config::load_user().map_err(PolicyError::from)?;
        Ok(Layers {
            managed,
            user,
            user_dir,
        })
    }

    /// The audit log: flag or SANDGATE_AUDIT_LOG, else the user file, else the XDG default.
    fn audit_log(&self, flag: Option<PathBuf>) -> Option<AuditLog> {
        flag.or_else(|| self.user.audit_log.clone())
            .or_else(|| config::state_dir().map(|d| d.join("audit.jsonl")))
            .map(AuditLog::new)
    }

    /// The hosts a call without `--allow-host` may reach through the proxy (the
    /// environment's and the configuration's), with the project's denials.
    fn standing_hosts(&self, project_denied: &[String]) -> Result<HostRules, Error> {
        Ok(policy::hosts::effective(
            &policy::hosts::from_environment(),
            false,
            &self.user,
            &self.managed,
            project_denied,
        )?)
    }

    fn standing(&self, knobs: &cli::Knobs, workspace: &Path, env: &Env) -> Result<Standing, Error> {
        let project =
            config::load(&workspace.join(".sandgate/config.json")).map_err(PolicyError::from)?;
        let flags = standing::Knobs {
            preset: knobs.preset.clone(),
            mode: knobs.sandbox,
            approval: knobs.approval,
        };
        Ok(standing::resolve(
            &flags,
            &self.user,
            &self.managed,
            &project,
            env.parent.as_ref(),
        )?)
    }
}

/// The mode the call runs in: its standing mode, or the one it requests when the answer is
/// "allowed once"; then the audit log is made where it will be needed (not inside a
/// sandbox, where it is read-only by design: creating it would fail, and the enclosing
/// sandgate would report the attempt as a denial).
fn granted_mode(g: &Gathered, args: &RunArgs, caller: Caller) -> Result<Mode, Error> {
    let mode = match &g.escalation {
        None => g.standing.mode,
        Some(request) => decide(request, g, args, caller)?,
    };
    ensure_audit_log(g, mode);
    Ok(mode)
}

/// Makes the audit log where a call under `mode` needs it before it is planned: the plan
/// protects it, and a missing file would be guarded by freezing its directory instead.
fn ensure_audit_log(g: &Gathered, mode: Mode) {
    if let Some(audit) = g.audit.as_ref().filter(|_| mode != Mode::FullAccess) {
        if crate::confinement::this_process() == Some(false) {
            if let Err(e @ AuditError::Open(LogFileError::Refused { .. })) = audit.ensure_exists() {
                crate::say!("sandgate: warning: {e}");
            }
        }
    }
}

/// The pipeline of one call: gather, decide the mode (asking when the call requests a
/// wider one), plan, then prepare, run and report from the plan alone.
fn run_inner(mut args: RunArgs, shellish: Shellish, caller: Caller) -> Result<Outcome, Error> {
    let g = gather(&mut args)?;
    let mode = granted_mode(&g, &args, caller)?;
    let planned = plan::call(g, args, mode, shellish)?;
    run_planned(planned)
}

/// Prepares, runs and reports a planned call.
fn run_planned(p: Planned) -> Result<Outcome, Error> {
    let mut limits = limits::CallLimits::make(&p.plan, p.limits.clone())?;
    let reporter = observer(&p.plan, &p.report)?;
    // Put back when the command has ended, however it ended (full access runs in
    // sandgate's own process: nothing remains to restore it).
    let mut terminal = match p.plan.confinement {
        Confinement::Restricted(_) => Some(crate::terminal::Saved::take()),
        Confinement::None => None,
    };
    let call = Call {
        planned: &p,
        reporter: reporter.as_ref(),
    };
    let outcome = call.run(p.layout, &mut p.unenforced.clone(), &mut limits)?;
    if let Some(terminal) = &mut terminal {
        terminal.restore();
    }
    limits.report(p.plan.mode);
    // Held until now: only a command that failed gets markers on stderr.
    if let Some(Ok(reporter)) = reporter.as_ref().map(|r| r.lock()) {
        for line in reporter.closing_lines(matches!(outcome, Outcome::Exited(0))) {
            crate::say!("{line}");
        }
    }
    if let Outcome::TimedOut(limit) = outcome {
        timed_out(&p.plan, limit);
    }
    Ok(outcome)
}

/// Says on stderr, with a `timeout` marker, that the command ran out of time and what
/// sandgate ended.
fn timed_out(plan: &Plan, limit: std::time::Duration) {
    let shown = humantime::format_duration(limit);
    let message = format!(
        "the command ran out of time ({shown}, --timeout): sandgate sent it SIGTERM, then SIGKILL to everything it started that still ran {} s later",
        exec::GRACE.as_secs()
    );
    crate::say!("sandgate: {message}");
    let mut extra = Map::new();
    extra.insert("timeout".into(), json!(shown.to_string()));
    extra.insert("timeout_secs".into(), json!(limit.as_secs_f64()));
    crate::say!("{}", marker("timeout", Some(plan.mode), &message, extra));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_retry_drops_the_request_it_replaces_and_nothing_else() {
        assert_eq!(
            without_request(strings(&[
                "sandgate",
                "--sandbox",
                "read-only",
                "--sandbox-permissions",
                "workspace-write",
                "--justification=build it",
                "--approver",
                "--justification",
                "--",
                "sh",
                "--justification",
                "x",
            ])),
            strings(&[
                "sandgate",
                "--sandbox",
                "read-only",
                "--approver",
                "--justification",
                "--",
                "sh",
                "--justification",
                "x",
            ])
        );
        // A command's own arguments are never touched, with or without `--`.
        assert_eq!(
            without_request(strings(&["sandgate", "./job.sh", "--justification", "x"])),
            strings(&["sandgate", "./job.sh", "--justification", "x"])
        );
    }
}
