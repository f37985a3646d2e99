//! The pipeline as a straight line: cli → policy → sandbox → exec. (Approval and audit
//! slot in between policy and sandbox; denial markers come out of exec.)

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use serde_json::{json, Map};

use crate::cli::{Cli, RunArgs, Sub};
use crate::denial::marker;
use crate::doctor;
use crate::error::{Error, EXIT_USAGE};
use crate::exec::{self, ExecError, Launch};
use crate::policy::{self, Confinement, Env, MountSource, Parent, Plan, Request};
use crate::sandbox::{self, Features, Guarantee, Step};

/// Parses the command line, runs the call and returns sandgate's exit status.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
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
        Some(Sub::Completions { shell }) => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut command, "sandgate", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        None => run(cli.run),
    }
}

/// Runs one command; every refusal prints a message and a marker.
fn run(args: RunArgs) -> ExitCode {
    let mode_hint = args.sandbox;
    match run_inner(args) {
        Ok(status) => ExitCode::from(u8::try_from(status).unwrap_or(u8::MAX)),
        Err(err) => {
            eprintln!("sandgate: {err}");
            let mut extra = Map::new();
            if let Error::Unenforceable { missing, .. } = &err {
                extra.insert("missing".into(), json!(missing));
            }
            eprintln!("{}", marker(err.kind(), mode_hint, &err.to_string(), extra));
            ExitCode::from(err.exit_code())
        }
    }
}

fn run_inner(args: RunArgs) -> Result<i32, Error> {
    let env = gather_env()?;
    let request = Request {
        mode: args.sandbox,
        workspace: args.workspace,
        writable_roots: args.writable_roots,
        allow_degraded: args.allow_degraded,
        command: args.command,
    };
    let plan = policy::resolve(request, &env)?;
    if let Some(asked) = plan.narrowed_from {
        eprintln!(
            "sandgate: running inside a {} sandbox: {asked} narrowed to {}",
            plan.mode, plan.mode
        );
    }
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
    loop {
        announce_degraded(&plan, &skip);
        let prepared = sandbox::prepare(&plan, &features, &skip)?;
        for fd in prepared.withheld_fds() {
            eprintln!(
                "sandgate: not passing fd {fd} (a datagram or network socket) into the sandbox"
            );
        }
        match exec::run(launch(&plan, prepared, &skip)) {
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
            other => return Ok(other?),
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
fn launch<'a>(plan: &'a Plan, prepared: sandbox::Prepared, skip: &[Guarantee]) -> Launch<'a> {
    let (extra_env, socket_roots) = match &plan.confinement {
        Confinement::None => (vec![], vec![]),
        Confinement::Restricted(r) => {
            let mut roots: Vec<PathBuf> = r.writable_roots.iter().cloned().collect();
            let own_tmp = r.private_tmp
                && r.mounts == MountSource::Own
                && !skip.contains(&Guarantee::MountNamespace);
            if own_tmp {
                roots.push(PathBuf::from("/tmp"));
            }
            let env = vec![
                (policy::PARENT_MODE_ENV, OsString::from(plan.mode.as_str())),
                (
                    policy::PARENT_WORKSPACE_ENV,
                    plan.workspace.clone().into_os_string(),
                ),
            ];
            (env, roots)
        }
    };
    Launch {
        command: &plan.command,
        extra_env,
        sandbox: prepared,
        socket_roots,
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
