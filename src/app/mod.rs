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
use crate::denial::{marker, Escalation, Reporter};
use crate::doctor;
use crate::error::{Error, EXIT_USAGE};
use crate::exec::{self, ExecError, Launch, Outcome};
use crate::logfile::{self, LogFileError};
use crate::policy::host_rules::HostRules;
use crate::policy::{
    self, config, standing, Approval, Confinement, Env, Mode, MountSource, Parent, Plan,
    PolicyError, Request, Standing,
};
use crate::sandbox::{self, Features, Guarantee, Step};
use crate::secret_scan;
use crate::shell::{self, Caller, Invocation, ShellCall};
use crate::supervisor;
use std::io::IsTerminal;

mod escalate;
mod explain;
pub(crate) use escalate::answerers;
mod limits;
pub(crate) use limits::doctor as limits_report;
mod kept;
mod script_head;
mod shell_mode;
mod subcommands;

use escalate::decide;
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
        }) => presets(json, &knobs, workspace.as_deref()),
        Some(Sub::Explain {
            json,
            command_string,
            run,
        }) => explain::explain(*run, command_string, json, caller),
        Some(Sub::Audit {
            action: AuditAction::Verify { log },
        }) => verify(log),
        Some(Sub::Completions { shell }) => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "sandgate", &mut script);
            crate::output::stdout_bytes(&script);
            ExitCode::SUCCESS
        }
        Some(Sub::Approvals { action }) => crate::approvals::run(action),
        Some(Sub::InstallLinks { dir }) => install_links(&dir),
        Some(Sub::Tmp { workspace, clean }) => tmp(workspace.as_deref(), clean),
        Some(Sub::Ps { which, json }) => kept::ps(&which, json),
        Some(Sub::Stop { which, json }) => kept::stop(&which, json),
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

/// Everything a call depends on besides its flags, read once: the environment, the
/// configuration files, the workspace, the standing policy, the limits and lifetime, and
/// the escalation it requests.
struct Gathered {
    started: std::time::SystemTime,
    env: Env,
    layers: Layers,
    workspace: PathBuf,
    standing: Standing,
    limits: crate::limits::Limits,
    lifetime: policy::lifetime::Lifetime,
    escalation: Option<policy::escalation::EscalationRequest>,
    /// Where a sandboxed command of this or an earlier call in this workspace could have
    /// planted a link: sandgate's own files are never opened through one there.
    untrusted_roots: Vec<PathBuf>,
    audit: Option<AuditLog>,
}

/// Reads what the call depends on (see [`Gathered`]), saying the standing policy's
/// warnings; `args.workspace` becomes the enclosing sandbox's when none is given inside one.
fn gather(args: &mut RunArgs) -> Result<Gathered, Error> {
    let started = std::time::SystemTime::now();
    let env = gather_env()?;
    if args.command.is_empty() {
        return Err(PolicyError::NoCommand.into());
    }
    if args.workspace.is_none() {
        let parent = env.parent.as_ref().map(|p| p.workspace.as_path());
        args.workspace = policy::inherited_workspace(parent, &env.cwd);
    }
    let layers = Layers::load()?;
    let workspace = policy::resolve_workspace(args.workspace.as_deref(), &env.cwd, &env.homes)?;
    let standing = layers.standing(&args.knobs, &workspace, &env)?;
    for warning in &standing.warnings {
        crate::say!("sandgate: warning: {warning}");
    }
    if let Some(asked) = standing.narrowed_from {
        crate::say!(
            "sandgate: running inside a {} sandbox: {asked} narrowed to {}",
            standing.mode,
            standing.mode
        );
    }
    let limits = limits::resolve(&args.limits, &layers, &standing);
    let lifetime = policy::lifetime::resolve(
        args.timeout,
        args.keep_background,
        &layers.user,
        &layers.managed,
        standing.project_timeout,
    );
    let escalation = policy::escalation::validate(
        args.sandbox_permissions.as_deref(),
        args.justification.as_deref(),
        standing.mode,
    )?;
    let untrusted_roots = logfile::canonical_roots(
        std::iter::once(workspace.as_path())
            .chain(args.writable_roots.iter().map(|r| r.as_path()))
            .chain(env.tmpdir.as_deref()),
    );
    let audit = layers
        .audit_log(args.audit_log.clone())
        .map(|a| a.with_untrusted_roots(untrusted_roots.clone()));
    Ok(Gathered {
        started,
        env,
        layers,
        workspace,
        standing,
        limits,
        lifetime,
        escalation,
        untrusted_roots,
        audit,
    })
}

/// sandgate's own configuration, state and records: kept out of the sandbox's reach,
/// existing or not (the policy guards each like a persistence path), and out of its sight
/// (masked, so they can be neither read nor locked). A denial log the caller names is only
/// hidden: where it is missing, guarding it would freeze the directory it goes in, often
/// the workspace, and a link planted at it refuses the next call.
fn own_paths(g: &Gathered, args: &RunArgs, mode: Mode) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let layers = &g.layers;
    let mut protected: Vec<PathBuf> = layers
        .user_dir
        .iter()
        .cloned()
        .chain(config::state_dir())
        .chain(config::default_dirs())
        .chain(crate::approvals::default_socket().and_then(|s| s.parent().map(Path::to_path_buf)))
        .collect();
    // An unconfined command has no sandbox to keep them out of: nothing to look up.
    if let Some(audit) = g.audit.as_ref().filter(|_| mode != Mode::FullAccess) {
        protected.push(audit.path().to_path_buf());
    }
    let mut own: Vec<PathBuf> = layers.user_dir.iter().cloned().collect();
    own.extend(g.audit.iter().map(|a| a.path().to_path_buf()));
    own.extend(args.denial_log.iter().cloned());
    (protected, own)
}

/// The hidden-files rule's scans: not for full access, and not inside a sandbox, whose own
/// masks already cover this view (a nested call can make none).
fn scans_for(
    g: &Gathered,
    args: &RunArgs,
    mode: Mode,
) -> Result<Vec<secret_scan::Snapshot>, Error> {
    let env = &g.env;
    if mode == Mode::FullAccess || env.parent.is_some() {
        return Ok(vec![]);
    }
    let needed: Vec<PathBuf> = [&g.workspace, &env.cwd]
        .into_iter()
        .cloned()
        .chain(
            args.writable_roots
                .iter()
                .chain(&args.unhide)
                .map(|p| env.cwd.join(p)),
        )
        .collect();
    secret_scans(mode, env, &needed)
}

/// The call's plan under `mode`: every root, hidden and protected path, the private temp,
/// caches, hosts and limits, as the policy resolves them from what was gathered and the
/// flags. Decides only; creates nothing but the hidden-files scan's cache.
fn plan(g: &Gathered, args: &RunArgs, mode: Mode) -> Result<Plan, Error> {
    let (env, layers, standing) = (&g.env, &g.layers, &g.standing);
    let (protected_paths, own_files) = own_paths(g, args, mode);
    let keep_env = [
        &args.keep_env,
        &layers.user.keep_env,
        &layers.managed.keep_env,
    ]
    .into_iter()
    .flatten()
    .cloned()
    .collect();
    let mut hidden_paths = layers.user.hidden_paths.clone();
    hidden_paths.extend(standing.hidden_paths.iter().cloned());
    let scans = scans_for(g, args, mode)?;
    let hosts = policy::hosts::effective(
        &args.allow_hosts,
        args.allow_private_hosts,
        &layers.user,
        &layers.managed,
        &standing.denied_hosts,
    )?;
    let request = Request {
        mode: Some(mode),
        // As given: the policy resolves it once more, following and checking its links.
        workspace: args.workspace.clone(),
        writable_roots: args.writable_roots.clone(),
        allowed_sockets: args
            .allow_unix_sockets
            .iter()
            .chain(&layers.managed.allow_unix_sockets)
            .chain(&layers.user.allow_unix_sockets)
            .cloned()
            .collect(),
        allow_degraded: args.allow_degraded,
        observe: !args.no_observe,
        command: args.command.clone(),
        protected_subpaths: standing.protected_subpaths.clone(),
        protected_paths,
        own_files,
        hidden_paths,
        unhidden_paths: layers.user.unhidden_paths.clone(),
        unhide: args.unhide.iter().map(|p| env.cwd.join(p)).collect(),
        scans,
        keep_env,
        hosts,
        tmpfs: g.limits.tmpfs,
    };
    let plan = policy::resolve(request, env)?;
    if plan.workspace != g.workspace {
        // Swapped between the two looks: the configuration and the question were about
        // another directory than the one the sandbox would open.
        return Err(PolicyError::WorkspaceChanged {
            before: g.workspace.clone(),
            after: plan.workspace,
        }
        .into());
    }
    Ok(plan)
}

/// The mode the call runs in: its standing mode, or the one it requests when the answer is
/// "allowed once"; then the audit log is made where it will be needed (not inside a
/// sandbox, where it is read-only by design: creating it would fail, and the enclosing
/// sandgate would report the attempt as a denial).
fn granted_mode(g: &Gathered, args: &RunArgs, caller: Caller) -> Result<Mode, Error> {
    let mode = match &g.escalation {
        None => g.standing.mode,
        Some(request) => decide(
            request,
            &g.standing,
            args,
            caller,
            &g.layers,
            &g.env,
            &g.workspace,
            g.audit.as_ref(),
        )?,
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

/// What this kernel offers for `plan`, and the guarantees it cannot hold: refused unless
/// the call allows running degraded.
fn enforceable(plan: &Plan) -> Result<(Features, Vec<Guarantee>), Error> {
    let features = Features::detect();
    let skip = match &plan.confinement {
        Confinement::None => vec![],
        Confinement::Restricted(_) => features.missing(),
    };
    if !skip.is_empty() && !plan.allow_degraded {
        return Err(Error::Unenforceable {
            mode: plan.mode,
            missing: skip,
        });
    }
    Ok((features, skip))
}

fn run_inner(mut args: RunArgs, shellish: Shellish, caller: Caller) -> Result<Outcome, Error> {
    let g = gather(&mut args)?;
    let mode = granted_mode(&g, &args, caller)?;
    let plan = plan(&g, &args, mode)?;
    let Gathered {
        started,
        standing,
        limits,
        lifetime,
        untrusted_roots,
        ..
    } = g;
    let (features, mut skip) = enforceable(&plan)?;
    let mut limits = limits::CallLimits::make(&plan, limits)?;
    let escalation = match standing.approval {
        Approval::Never => Escalation::Impossible {
            preset: standing.preset,
        },
        Approval::OnRequest => Escalation::Possible {
            ceiling: standing.max_mode,
        },
    };
    let reporter = observer(
        &plan,
        args.denial_log.as_deref(),
        &untrusted_roots,
        &shellish,
        escalation,
    )?;
    // Put back when the command has ended, however it ended (full access runs in
    // sandgate's own process: nothing remains to restore it).
    let mut terminal = match plan.confinement {
        Confinement::Restricted(_) => Some(crate::terminal::Saved::take()),
        Confinement::None => None,
    };
    let call = Call {
        plan: &plan,
        features: &features,
        reporter: reporter.as_ref(),
        argv0: shellish.argv0.clone(),
        timeout: lifetime.timeout,
        kept: lifetime.keep_background.then(|| crate::kept::Call {
            workspace: plan.workspace.clone(),
            mode: plan.mode,
            command: plan
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            started,
        }),
    };
    let outcome = call.run(&mut skip, &mut limits)?;
    if let Some(terminal) = &mut terminal {
        terminal.restore();
    }
    limits.report(plan.mode);
    // Held until now: only a command that failed gets markers on stderr.
    if let Some(Ok(reporter)) = reporter.as_ref().map(|r| r.lock()) {
        for line in reporter.closing_lines(matches!(outcome, Outcome::Exited(0))) {
            crate::say!("{line}");
        }
    }
    if let Outcome::TimedOut(limit) = outcome {
        timed_out(&plan, limit);
    }
    Ok(outcome)
}

/// One call ready to start: its plan and how it is launched.
struct Call<'a> {
    plan: &'a Plan,
    features: &'a Features,
    reporter: Option<&'a Arc<Mutex<Reporter>>>,
    argv0: Option<OsString>,
    timeout: Option<std::time::Duration>,
    kept: Option<crate::kept::Call>,
}

impl Call<'_> {
    /// Prepares the sandbox without the guarantees in `skip` and runs the command; when a
    /// namespace the kernel refused may be done without (`--allow-degraded`), it is added
    /// to `skip` and the call prepared again.
    fn run(
        &self,
        skip: &mut Vec<Guarantee>,
        limits: &mut limits::CallLimits,
    ) -> Result<Outcome, Error> {
        loop {
            announce_degraded(self.plan, skip, &limits.degraded);
            let mut prepared = sandbox::prepare(self.plan, self.features, skip)?;
            if let Some(join) = limits.join()? {
                prepared = prepared.joining(join);
            }
            for fd in prepared.withheld_fds() {
                crate::say!(
                    "sandgate: not passing fd {fd} (a datagram or network socket) into the sandbox"
                );
            }
            let mut launch = launch(self.plan, prepared, skip, self.reporter);
            launch.argv0 = self.argv0.clone();
            launch.timeout = self.timeout;
            launch.keep_background = self.kept.clone();
            match exec::run(launch) {
                Ok(outcome) => return Ok(outcome),
                Err(e) => self.degrade(e, skip, limits)?,
            }
        }
    }

    /// Whether the call may be prepared again after `e`, without more guarantees (added to
    /// `skip`) or limits; the error to stop at otherwise.
    fn degrade(
        &self,
        e: ExecError,
        skip: &mut Vec<Guarantee>,
        limits: &mut limits::CallLimits,
    ) -> Result<(), Error> {
        let degradable = |g| self.plan.allow_degraded && !skip.contains(&g);
        match e {
            ExecError::Setup {
                step: Step::MountNamespace,
                ..
            } if degradable(Guarantee::MountNamespace) => {
                // The process boundary is built in the mount namespace: it falls with it.
                skip.retain(|g| *g != Guarantee::ProcessBoundary);
                skip.extend([Guarantee::MountNamespace, Guarantee::ProcessBoundary]);
                Ok(())
            }
            ExecError::Setup {
                step: Step::ProcessBoundary,
                ..
            } if degradable(Guarantee::ProcessBoundary) => {
                skip.push(Guarantee::ProcessBoundary);
                Ok(())
            }
            ExecError::Setup {
                step: Step::ProcessBoundary,
                source,
            } => {
                crate::say!("sandgate: cannot give the sandbox a PID namespace and a /proc of its own: {source}{}", if source.raw_os_error() == Some(libc::EPERM) { " (the kernel refuses a new /proc in a user namespace while parts of the existing one are covered, as container runtimes do)" } else { "" });
                Err(Error::Unenforceable {
                    mode: self.plan.mode,
                    missing: vec![Guarantee::ProcessBoundary],
                })
            }
            ExecError::Setup {
                step: Step::MountNamespace,
                source,
            } => {
                crate::say!("sandgate: cannot create the private mount namespace: {source}");
                Err(Error::Unenforceable {
                    mode: self.plan.mode,
                    missing: vec![Guarantee::MountNamespace],
                })
            }
            ExecError::Setup {
                step: Step::Cgroup,
                source,
            } => limits.moving_refused(&source),
            other => Err(other.into()),
        }
    }
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

/// The denial reporter of a restricted, observed call; with observation off, one
/// `source: "none"` note says that no filesystem markers will come.
fn observer(
    plan: &Plan,
    log: Option<&Path>,
    untrusted_roots: &[PathBuf],
    shellish: &Shellish,
    escalation: Escalation,
) -> Result<Option<Arc<Mutex<Reporter>>>, Error> {
    let Confinement::Restricted(r) = &plan.confinement else {
        return Ok(None);
    };
    let mut log = match log {
        Some(path) => {
            let mut roots = untrusted_roots.to_vec();
            roots.extend(r.writable_roots.iter().cloned());
            roots.extend(r.workspace_write_roots.iter().cloned());
            let file = logfile::open(
                logfile::Which::DenialLog,
                path,
                &roots,
                logfile::Access::Append,
                logfile::Dirs::MustExist,
            )
            .map_err(Error::DenialLog)?;
            Some((file, path.to_path_buf()))
        }
        None => None,
    };
    if !plan.observe {
        let note = json!({"v": 1, "kind": "observation_off", "mode": plan.mode, "source": "none",
            "message": "--no-observe: refused operations are not reported (the sandbox is unchanged)"});
        crate::say!("{}", crate::denial::line("sandgate: note", note.clone()));
        if let Some((log, _)) = &mut log {
            use std::io::Write;
            let _ = log.write_all(format!("{note}\n").as_bytes());
        }
        return Ok(None);
    }
    // A retry repeats the call as it came, with the request added; shell mode says how.
    // It names sandgate by its own path: argv[0] is whatever the caller made it — a link,
    // a relative path that depends on the cwd, any name at all.
    let mut base = match &shellish.retry {
        Some(base) => base.clone(),
        None => std::env::args_os().collect(),
    };
    if let (Some(argv0), Ok(me)) = (base.first_mut(), std::env::current_exe()) {
        *argv0 = me.into_os_string();
    }
    let argv = without_request(base)
        .into_iter()
        .map(|a| a.into_string().ok())
        .collect();
    let reporter = Reporter::new(plan.mode, argv, shellish.form.clone(), escalation, log);
    Ok(Some(Arc::new(Mutex::new(reporter))))
}

/// Says on stderr, as a marker, which guarantees and limits a degraded run lacks.
fn announce_degraded(plan: &Plan, skip: &[Guarantee], limits: &[crate::limits::Unenforced]) {
    if skip.is_empty() && limits.is_empty() {
        return;
    }
    let what: Vec<String> = skip
        .iter()
        .map(|g| g.describe().to_owned())
        .chain(limits.iter().map(ToString::to_string))
        .collect();
    let message = format!(
        "running degraded (--allow-degraded); not enforced: {}",
        what.join("; ")
    );
    crate::say!("sandgate: {message}");
    let mut missing = json!(skip);
    if let Some(list) = missing.as_array_mut() {
        list.extend(limits.iter().map(|u| json!(u.kind)));
    }
    let mut extra = Map::new();
    extra.insert("missing".into(), missing);
    crate::say!(
        "{}",
        marker("degraded_enforcement", Some(plan.mode), &message, extra)
    );
}

/// Builds the exec stage's input for `plan`.
fn launch<'a>(
    plan: &'a Plan,
    prepared: sandbox::Prepared,
    skip: &[Guarantee],
    reporter: Option<&Arc<Mutex<Reporter>>>,
) -> Launch<'a> {
    let (extra_env, supervision, withheld_env) = match &plan.confinement {
        Confinement::None => (vec![], None, vec![]),
        Confinement::Restricted(r) => (
            sandbox_env(plan, r, prepared.has_proxy()),
            Some(supervision(plan, r, skip, reporter, prepared.has_proxy())),
            withheld(r),
        ),
    };
    // The caller's marker tag tells sandgate's markers from the command's look-alikes
    // only while the command cannot read it.
    let mut withheld_env = withheld_env;
    withheld_env.push(OsString::from(crate::denial::TAG_ENV));
    Launch {
        command: &plan.command,
        argv0: None,
        extra_env,
        withheld_env,
        proxy: match &plan.confinement {
            Confinement::Restricted(r) if prepared.has_proxy() => r.proxy.clone(),
            _ => None,
        },
        sandbox: prepared,
        supervision,
        timeout: None,
        keep_background: None,
    }
}

/// The caller's environment variables a restricted command does not get.
pub(super) fn withheld(r: &policy::Restrictions) -> Vec<OsString> {
    std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| r.secret_env.withholds(name))
        .collect()
}

/// What the supervisor of a restricted call needs to know of its plan.
fn supervision(
    plan: &Plan,
    r: &policy::Restrictions,
    skip: &[Guarantee],
    reporter: Option<&Arc<Mutex<Reporter>>>,
    proxy: bool,
) -> supervisor::Setup {
    let mut writable_roots: Vec<PathBuf> = r.writable_roots.iter().cloned().collect();
    let mut socket_roots: Vec<PathBuf> = r.socket_roots.iter().cloned().collect();
    let private_temp = matches!(r.mounts, MountSource::Parent | MountSource::Inherited)
        || !skip.contains(&Guarantee::MountNamespace);
    if private_temp {
        let temps = policy::roots::SHARED_TEMPS.map(PathBuf::from);
        writable_roots.extend(temps.clone());
        socket_roots.extend(temps);
        // The copy-on-write caches: writable in the sandbox's view, so no marker.
        writable_roots.extend(r.caches.iter().map(|c| c.path.clone()));
    }
    supervisor::Setup {
        mode: plan.mode,
        read_only_islands: r
            .kept_visible
            .iter()
            .filter(|p| !r.writable_roots.iter().any(|w| p.starts_with(w)))
            .cloned()
            .collect(),
        writable_roots,
        socket_roots,
        allowed_sockets: r.allowed_sockets.iter().cloned().collect(),
        git_dirs: r.git_dirs.iter().cloned().collect(),
        git_writable: r.git_writable.iter().cloned().collect(),
        hook_dir_names: r.hook_dir_names.iter().cloned().collect(),
        workspace_write_roots: r.workspace_write_roots.iter().cloned().collect(),
        protected: r.protected.iter().chain(&r.sealed).cloned().collect(),
        frozen: r.frozen.iter().cloned().collect(),
        devices: r.devices.iter().cloned().collect(),
        reporter: reporter.cloned(),
        proxy,
    }
}

/// The variables sandgate gives a restricted command: who its enclosing sandbox is, its
/// `TMPDIR`, and the proxy's address when it has one.
fn sandbox_env(
    plan: &Plan,
    r: &policy::Restrictions,
    proxy: bool,
) -> Vec<(&'static str, OsString)> {
    let mut env = vec![
        (policy::PARENT_MODE_ENV, OsString::from(plan.mode.as_str())),
        (
            policy::PARENT_WORKSPACE_ENV,
            plan.workspace.clone().into_os_string(),
        ),
        (
            policy::PARENT_CONFINEMENT_ENV,
            OsString::from(r.fingerprint(plan.mode, &plan.workspace, proxy)),
        ),
    ];
    if let Some(tmpdir) = &plan.tmpdir {
        env.push(("TMPDIR", tmpdir.clone().into_os_string()));
    }
    if proxy {
        env.extend(proxy_env());
    }
    env
}

/// What the hidden-files rule's scans find for a call under `mode` (see `secret_scan`);
/// `needed` are paths the call must see besides `$PATH` and the XDG base directories,
/// whose way the scans read whatever their bounds.
pub(crate) fn secret_scans(
    mode: Mode,
    env: &Env,
    needed: &[PathBuf],
) -> Result<Vec<secret_scan::Snapshot>, Error> {
    let roots =
        policy::secrets::rule_roots(mode, &env.homes, &env.xdg, nix::unistd::geteuid().is_root())?;
    let caller = secret_scan::Caller::current();
    // Canonical, as the scans name what they find.
    let anchors: Vec<PathBuf> = needed
        .iter()
        .chain(&env.path)
        .chain(&env.xdg)
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    Ok(roots
        .iter()
        .filter_map(|root| secret_scan::snapshot(root, &caller, &anchors))
        .collect())
}

/// What a call under `mode` outside any workspace hides and why, and what the rule's scans
/// were, for `doctor`.
pub(crate) fn hidden_report(mode: Mode) -> serde_json::Value {
    let report = || -> Result<serde_json::Value, Error> {
        let env = gather_env()?;
        let layers = Layers::load()?;
        let scans = secret_scans(mode, &env, &[])?;
        let caller = secret_scan::Caller::current();
        let scanned: Vec<serde_json::Value> = scans
            .iter()
            .map(|s| {
                json!({ "root": s.root.path, "scope": s.root.scope.as_str(), "source": s.source,
                    "truncated": s.truncated, "cache": secret_scan::store::path(&s.root, &caller) })
            })
            .collect();
        let hidden = policy::secrets::report(
            mode,
            &env.homes,
            &scans,
            &layers.user.hidden_paths,
            &layers.user.unhidden_paths,
        )?;
        Ok(json!({ "paths": hidden, "scanned": scanned }))
    };
    report().unwrap_or_else(|e| json!({ "error": e.to_string() }))
}

/// The effective host lists outside any workspace, for `doctor --json`.
pub(crate) fn host_rules() -> serde_json::Value {
    match Layers::load().and_then(|layers| layers.standing_hosts(&[])) {
        Ok(rules) => serde_json::to_value(rules).unwrap_or_default(),
        Err(e) => serde_json::json!({ "error": e.to_string() }),
    }
}

/// The variables that point HTTP clients, package managers and SOCKS-aware tools at the
/// proxy inside the sandbox; no host bypasses it.
fn proxy_env() -> Vec<(&'static str, OsString)> {
    let http = format!("http://127.0.0.1:{}", crate::network::PROXY_PORT);
    let socks = format!("socks5h://127.0.0.1:{}", crate::network::PROXY_PORT);
    [
        ("HTTP_PROXY", &http),
        ("http_proxy", &http),
        ("HTTPS_PROXY", &http),
        ("https_proxy", &http),
        ("ALL_PROXY", &socks),
        ("all_proxy", &socks),
    ]
    .into_iter()
    .map(|(name, value)| (name, OsString::from(value)))
    .chain([("NO_PROXY", OsString::new()), ("no_proxy", OsString::new())])
    .collect()
}

/// Reads what the environment contributes to the plan.
fn gather_env() -> Result<Env, Error> {
    let cwd = std::env::current_dir().map_err(policy::PolicyError::Cwd)?;
    let tmpdir = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let mut ptys: Vec<PathBuf> = (0..3).filter_map(crate::sys::terminal_name).collect();
    ptys.dedup();
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    Ok(Env {
        tmpdir,
        home,
        ptys,
        parent: parent_sandbox(),
        homes: policy::home::caller_homes(),
        approval_token_file: std::env::var_os("SANDGATE_APPROVAL_TOKEN_FILE").map(|p| cwd.join(p)),
        path: std::env::var_os("PATH")
            .map(|p| {
                std::env::split_paths(&p)
                    .filter(|d| d.is_absolute())
                    .collect()
            })
            .unwrap_or_default(),
        xdg: [
            "XDG_CONFIG_HOME",
            "XDG_CACHE_HOME",
            "XDG_DATA_HOME",
            "XDG_STATE_HOME",
        ]
        .into_iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .collect(),
        cwd,
    })
}

/// Returns the enclosing sandgate sandbox, if the environment says there is one *and* the
/// kernel agrees (this process is under no_new_privs and a seccomp filter). A stale or
/// forged hint outside any sandbox must not make sandgate skip its own mount namespace.
fn parent_sandbox() -> Option<Parent> {
    let mode = std::env::var(policy::PARENT_MODE_ENV).ok()?.parse().ok()?;
    let workspace = PathBuf::from(std::env::var_os(policy::PARENT_WORKSPACE_ENV)?);
    let confinement = std::env::var(policy::PARENT_CONFINEMENT_ENV).ok();
    (crate::confinement::this_process() == Some(true)).then_some(Parent {
        mode,
        workspace,
        confinement,
    })
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
