//! The pipeline as a straight line: cli → policy (configuration layers, standing mode,
//! escalation request) → approval and audit (only for an escalation) → sandbox → exec.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use serde_json::{json, Map};

use crate::approval::{self, Answerer, Outcome};
use crate::audit::{AuditError, AuditLog};
use crate::cli::{self, AuditAction, Cli, RunArgs, Sub};
use crate::denial::{marker, Reporter};
use crate::doctor;
use crate::error::{Error, Refusal, EXIT_INTERNAL, EXIT_USAGE};
use crate::exec::{self, ExecError, Launch};
use crate::policy::{
    self, config, standing, Approval, Confinement, Env, EscalationRequest, Mode, MountSource,
    Parent, Plan, PolicyError, Request, Standing,
};
use crate::sandbox::{self, Features, Guarantee, Step};
use crate::shell::{self, Invocation, ShellCall};
use crate::supervisor;
use std::io::IsTerminal;

/// Parses the command line, runs the call and returns sandgate's exit status.
pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let argv0 = args.first().cloned().unwrap_or_default();
    let invocation = if shell::is_prefix_name(&argv0) {
        // The prefix link receives the command string as one word (or, tolerantly, several).
        let words: Vec<String> = args[1..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        prefix_call(argv0, words.join(" "))
    } else {
        let command = <Cli as clap::CommandFactory>::command();
        let long_flags: Vec<(String, bool)> = command
            .get_arguments()
            .filter_map(|a| Some((a.get_long()?.to_owned(), a.get_action().takes_values())))
            .collect();
        let subcommands: Vec<String> = command
            .get_subcommands()
            .map(|s| s.get_name().to_owned())
            .collect();
        shell::classify(
            args,
            &long_flags,
            &subcommands,
            shell::is_shell_name(&argv0),
        )
    };
    match invocation {
        Invocation::Plain(args) => plain(args),
        Invocation::Shell {
            sandgate_args,
            shell,
        } => match Cli::try_parse_from(sandgate_args) {
            Ok(cli) => run_shell(cli.run, shell),
            Err(e) => usage(&e),
        },
    }
}

fn usage(e: &clap::Error) -> ExitCode {
    let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
    let _ = e.print();
    ExitCode::from(code)
}

fn prefix_call(argv0: OsString, command: String) -> Invocation {
    let shell = ShellCall {
        args: vec!["-c".into(), command.into()],
        command_at: Some(1),
        version: false,
    };
    Invocation::Shell {
        sandgate_args: vec![argv0],
        shell,
    }
}

/// sandgate's own command line: subcommands, or `[FLAGS] -- CMD ARGS`.
fn plain(args: Vec<OsString>) -> ExitCode {
    let argv0 = args.first().cloned().unwrap_or_default();
    // `--` asks for direct execution: with nothing after it, that is a usage error, not a
    // script on stdin.
    let explicit = args.iter().any(|a| a == "--");
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return usage(&e),
    };
    match cli.subcommand {
        Some(Sub::Doctor { json }) => {
            let report = doctor::report();
            if json {
                match serde_json::to_string_pretty(&report) {
                    Ok(text) => println!("{text}"),
                    Err(e) => eprintln!("sandgate: {e}"),
                }
            } else {
                print!("{}", doctor::render_text(&report));
            }
            ExitCode::SUCCESS
        }
        Some(Sub::Presets { json, knobs }) => presets(json, &knobs),
        Some(Sub::Audit {
            action: AuditAction::Verify { log },
        }) => verify(log),
        Some(Sub::Completions { shell }) => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut command, "sandgate", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Some(Sub::InstallLinks { dir }) => install_links(&dir),
        Some(Sub::Prefix { command }) => match prefix_call(argv0.clone(), command) {
            Invocation::Shell { shell, .. } => match Cli::try_parse_from([argv0]) {
                Ok(cli) => run_shell(cli.run, shell),
                Err(e) => usage(&e),
            },
            Invocation::Plain(_) => ExitCode::from(EXIT_USAGE),
        },
        // No command and a script on stdin (a pipe, GitLab's form): the shell reads it.
        None if cli.run.command.is_empty() && !explicit && !std::io::stdin().is_terminal() => {
            run_shell(cli.run, ShellCall::default())
        }
        None => finish(run_inner(cli.run, Shellish::default()), None),
    }
}

/// `sandgate install-links DIR`.
fn install_links(dir: &Path) -> ExitCode {
    let result = std::env::current_exe().and_then(|exe| {
        std::fs::create_dir_all(dir)?;
        for name in ["sandgate-sh", "sandgate-prefix"] {
            let link = dir.join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&exe, &link)?;
            println!("{} -> {}", link.display(), exe.display());
        }
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sandgate: cannot install links in {}: {e}", dir.display());
            ExitCode::from(EXIT_INTERNAL)
        }
    }
}

/// What shell mode adds to a call.
#[derive(Debug, Default)]
struct Shellish {
    /// argv[0] for the real shell (`bash`, as `bash -c` would show it in messages).
    argv0: Option<OsString>,
    /// The command string as the caller wrote it, for `retry.directive`.
    command: Option<String>,
}

/// Runs the real shell with `shell`'s arguments, turning a directive into the request.
fn run_shell(mut args: RunArgs, mut shell: ShellCall) -> ExitCode {
    let mode_hint = args.knobs.sandbox;
    let Some(real) = shell::real_shell() else {
        let err = Error::Exec(ExecError::NotFound(
            "/bin/bash or /bin/sh (set SANDGATE_REAL_SHELL)".into(),
        ));
        return finish(Err(err), mode_hint);
    };
    let original = shell.command().map(|c| c.to_string_lossy().into_owned());
    if let (Some(command), Some(at)) = (&original, shell.command_at) {
        match shell::directive(command) {
            Ok(None) => {}
            Ok(Some((directive, rest))) => {
                if args.sandbox_permissions.is_some() || args.justification.is_some() {
                    let err = PolicyError::Directive(
                        "a directive and --sandbox-permissions/--justification both ask: use one"
                            .into(),
                    );
                    return finish(Err(err.into()), mode_hint);
                }
                args.sandbox_permissions = Some(directive.mode);
                args.justification = Some(directive.justification);
                shell.args[at] = rest.into();
            }
            Err(message) => return finish(Err(PolicyError::Directive(message).into()), mode_hint),
        }
    }
    args.command = std::iter::once(real.clone().into_os_string())
        .chain(shell.args)
        .collect();
    let shellish = Shellish {
        argv0: real.file_name().map(OsString::from),
        command: original,
    };
    finish(run_inner(args, shellish), mode_hint)
}

/// Turns a call's result into sandgate's exit status; every refusal prints a message and
/// a marker.
fn finish(result: Result<i32, Error>, mode_hint: Option<Mode>) -> ExitCode {
    match result {
        Ok(status) => ExitCode::from(u8::try_from(status).unwrap_or(u8::MAX)),
        Err(err) => {
            eprintln!("sandgate: {err}");
            let mut extra = Map::new();
            match &err {
                Error::Unenforceable { missing, .. } => {
                    extra.insert("missing".into(), json!(missing));
                }
                Error::NotGranted { to, .. } => {
                    extra.insert("requested".into(), json!(to));
                }
                _ => {}
            }
            eprintln!("{}", marker(err.kind(), mode_hint, &err.to_string(), extra));
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
        let user = match &user_dir {
            Some(dir) => config::load(&dir.join("config.json")).map_err(PolicyError::from)?,
            None => config::User::default(),
        };
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

fn run_inner(args: RunArgs, shellish: Shellish) -> Result<i32, Error> {
    let env = gather_env()?;
    if args.command.is_empty() {
        return Err(PolicyError::NoCommand.into());
    }
    let layers = Layers::load()?;
    let workspace = policy::resolve_workspace(args.workspace.as_deref(), &env.cwd)?;
    let standing = layers.standing(&args.knobs, &workspace, &env)?;
    for warning in &standing.warnings {
        eprintln!("sandgate: warning: {warning}");
    }
    if let Some(asked) = standing.narrowed_from {
        eprintln!(
            "sandgate: running inside a {} sandbox: {asked} narrowed to {}",
            standing.mode, standing.mode
        );
    }
    let escalation = policy::escalation::validate(
        args.sandbox_permissions.as_deref(),
        args.justification.as_deref(),
        standing.mode,
    )?;
    let audit = layers.audit_log(args.audit_log.clone());
    let mode = match &escalation {
        None => standing.mode,
        Some(request) => {
            let audit = audit.as_ref().ok_or_else(|| {
                Error::Audit(AuditError::Io {
                    path: PathBuf::from("$XDG_STATE_HOME/sandgate/audit.jsonl"),
                    source: std::io::Error::other(
                        "no HOME or XDG_STATE_HOME to put the audit log in; pass --audit-log",
                    ),
                })
            })?;
            decide(request, &standing, &args, &layers, &env, &workspace, audit)?
        }
    };
    // sandgate's own records and configuration stay out of the sandbox's reach.
    let mut protected_paths: Vec<PathBuf> = layers.user_dir.iter().cloned().collect();
    if let Some(audit) = &audit {
        if audit.ensure_exists().is_ok() {
            protected_paths.push(audit.path().to_path_buf());
        }
    }
    let request = Request {
        mode: Some(mode),
        workspace: Some(workspace),
        writable_roots: args.writable_roots,
        allow_degraded: args.allow_degraded,
        observe: !args.no_observe,
        command: args.command,
        protected_subpaths: standing.protected_subpaths.clone(),
        protected_paths,
    };
    let plan = policy::resolve(request, &env)?;
    let features = Features::detect();
    let mut skip = match &plan.confinement {
        Confinement::None => vec![],
        Confinement::Restricted(_) => features.missing(),
    };
    if !skip.is_empty() && !plan.allow_degraded {
        return Err(Error::Unenforceable {
            mode: plan.mode,
            missing: skip,
        });
    }
    let reporter = observer(&plan, args.denial_log.as_deref(), shellish.command)?;
    let status = loop {
        announce_degraded(&plan, &skip);
        let prepared = sandbox::prepare(&plan, &features, &skip)?;
        for fd in prepared.withheld_fds() {
            eprintln!(
                "sandgate: not passing fd {fd} (a datagram or network socket) into the sandbox"
            );
        }
        let mut launch = launch(&plan, prepared, &skip, reporter.as_ref());
        launch.argv0 = shellish.argv0.clone();
        match exec::run(launch) {
            Err(ExecError::Setup {
                step: Step::MountNamespace,
                ..
            }) if plan.allow_degraded && !skip.contains(&Guarantee::MountNamespace) => {
                skip.push(Guarantee::MountNamespace);
            }
            Err(ExecError::Setup {
                step: Step::MountNamespace,
                source,
            }) => {
                eprintln!("sandgate: cannot create the private mount namespace: {source}");
                return Err(Error::Unenforceable {
                    mode: plan.mode,
                    missing: vec![Guarantee::MountNamespace],
                });
            }
            other => break other?,
        }
    };
    if let Some(summary) = reporter.as_ref().and_then(|r| r.lock().ok()?.summary()) {
        eprintln!("{summary}");
    }
    Ok(status)
}

/// The denial reporter of a restricted, observed call; with observation off, one
/// `source: "none"` note says that no filesystem markers will come.
fn observer(
    plan: &Plan,
    log: Option<&Path>,
    shell_command: Option<String>,
) -> Result<Option<Arc<Mutex<Reporter>>>, Error> {
    let Confinement::Restricted(_) = plan.confinement else {
        return Ok(None);
    };
    let mut log = match log {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|source| Error::DenialLog {
                    path: path.to_path_buf(),
                    source,
                })?,
        ),
        None => None,
    };
    if !plan.observe {
        let note = json!({"v": 1, "kind": "observation_off", "mode": plan.mode, "source": "none",
            "message": "--no-observe: refused operations are not reported (the sandbox is unchanged)"});
        eprintln!("sandgate: note {note}");
        if let Some(log) = &mut log {
            use std::io::Write;
            let _ = log.write_all(format!("{note}\n").as_bytes());
        }
        return Ok(None);
    }
    let argv = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut reporter = Reporter::new(plan.mode, argv, log);
    reporter.shell_command = shell_command;
    Ok(Some(Arc::new(Mutex::new(reporter))))
}

/// The policy tier and the one answerer: returns the mode to run at, or the refusal. The
/// audit pair is written around the decision whatever it is; if the `asked` record cannot
/// be written, nobody is asked and the command does not run.
fn decide(
    request: &EscalationRequest,
    standing: &Standing,
    args: &RunArgs,
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
            let (outcome, guard) = approval::ask(&answerer(args, layers), &question);
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

/// Chooses the one answerer (DESIGN §4): the endpoint (the managed one first), else the
/// approver program, else the terminal — never when CI is set or the terminal is disabled.
fn answerer(args: &RunArgs, layers: &Layers) -> Answerer {
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
    let tty_off = args.no_tty || std::env::var("SANDGATE_TTY").is_ok_and(|v| v == "never");
    if in_ci || tty_off {
        let why = if in_ci {
            "CI is set, so nobody can answer a prompt"
        } else {
            "the terminal prompt is disabled"
        };
        return Answerer::None {
            why: format!("{why}: configure --approval-endpoint or --approver"),
        };
    }
    Answerer::Tty
}

/// `sandgate presets`: the table and the current preset for the effective knobs.
fn presets(json: bool, knobs: &cli::Knobs) -> ExitCode {
    let current = gather_env().and_then(|env| {
        let layers = Layers::load()?;
        let workspace = policy::resolve_workspace(None, &env.cwd)?;
        layers.standing(knobs, &workspace, &env)
    });
    let current = match current {
        Ok(standing) => standing,
        Err(err) => {
            eprintln!("sandgate: {err}");
            return ExitCode::from(err.exit_code());
        }
    };
    let table = policy::preset::table();
    if json {
        let body = json!({
            "presets": table,
            "current": { "preset": current.preset, "mode": current.mode, "approval": current.approval },
        });
        println!("{body}");
    } else {
        for row in &table {
            let mark = if row.key == current.preset { "*" } else { " " };
            let aliases = if row.aliases.is_empty() {
                String::new()
            } else {
                format!(" (alias {})", row.aliases.join(", "))
            };
            println!(
                "{mark} {:<16}{:<16}{:<11}{}{aliases}",
                row.key, row.mode, row.approval, row.description
            );
        }
        if current.preset == policy::preset::CUSTOM {
            println!(
                "* custom          {:<16}{:<11}(no preset matches)",
                current.mode, current.approval
            );
        }
    }
    ExitCode::SUCCESS
}

/// `sandgate audit verify`: checks the hash chain.
fn verify(log: Option<PathBuf>) -> ExitCode {
    let path = log.or_else(|| {
        let layers = Layers::load().ok()?;
        let flag = std::env::var_os("SANDGATE_AUDIT_LOG").map(PathBuf::from);
        layers.audit_log(flag).map(|l| l.path().to_path_buf())
    });
    let Some(path) = path else {
        eprintln!("sandgate: no audit log configured; pass --log FILE");
        return ExitCode::from(EXIT_USAGE);
    };
    match crate::audit::verify(&path) {
        Ok(lines) => {
            println!(
                "sandgate: audit log {} verifies: {lines} lines",
                path.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sandgate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Says on stderr, as a marker, which guarantees a degraded run lacks.
fn announce_degraded(plan: &Plan, skip: &[Guarantee]) {
    if skip.is_empty() {
        return;
    }
    let what: Vec<&str> = skip.iter().map(|g| g.describe()).collect();
    let message = format!(
        "running degraded (--allow-degraded); not enforced: {}",
        what.join("; ")
    );
    eprintln!("sandgate: {message}");
    let mut extra = Map::new();
    extra.insert("missing".into(), json!(skip));
    eprintln!(
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
    let (extra_env, supervision) = match &plan.confinement {
        Confinement::None => (vec![], None),
        Confinement::Restricted(r) => {
            let mut writable_roots: Vec<PathBuf> = r.writable_roots.iter().cloned().collect();
            let own_tmp = r.private_tmp
                && r.mounts == MountSource::Own
                && !skip.contains(&Guarantee::MountNamespace);
            if own_tmp {
                writable_roots.push(PathBuf::from("/tmp"));
            }
            let setup = supervisor::Setup {
                mode: plan.mode,
                writable_roots,
                workspace_write_roots: r.workspace_write_roots.iter().cloned().collect(),
                protected: r.protected.iter().cloned().collect(),
                devices: r.devices.iter().cloned().collect(),
                reporter: reporter.cloned(),
            };
            let env = vec![
                (policy::PARENT_MODE_ENV, OsString::from(plan.mode.as_str())),
                (
                    policy::PARENT_WORKSPACE_ENV,
                    plan.workspace.clone().into_os_string(),
                ),
            ];
            (env, Some(setup))
        }
    };
    Launch {
        command: &plan.command,
        argv0: None,
        extra_env,
        sandbox: prepared,
        supervision,
    }
}

/// Reads what the environment contributes to the plan.
fn gather_env() -> Result<Env, Error> {
    let cwd = std::env::current_dir().map_err(policy::PolicyError::Cwd)?;
    let tmpdir = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let mut ptys: Vec<PathBuf> = (0..3)
        .filter_map(|fd| nix::unistd::ttyname(crate::sys::borrow_raw(fd)).ok())
        .collect();
    ptys.dedup();
    Ok(Env {
        cwd,
        tmpdir,
        ptys,
        parent: parent_sandbox(),
    })
}

/// Returns the enclosing sandgate sandbox, if the environment says there is one *and* the
/// kernel agrees (this process is under no_new_privs and a seccomp filter). A stale or
/// forged hint outside any sandbox must not make sandgate skip its own mount namespace.
fn parent_sandbox() -> Option<Parent> {
    let mode = std::env::var(policy::PARENT_MODE_ENV).ok()?.parse().ok()?;
    let workspace = PathBuf::from(std::env::var_os(policy::PARENT_WORKSPACE_ENV)?);
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let has = |line: &str| {
        status
            .lines()
            .any(|l| l.split_whitespace().eq(line.split_whitespace()))
    };
    (has("NoNewPrivs: 1") && has("Seccomp: 2")).then_some(Parent { mode, workspace })
}
