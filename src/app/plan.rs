//! Gather, then plan: what a call depends on, read once (`gather`), and the call's plan
//! for a mode (`plan`), decided from that alone. A run and `sandgate explain` both go
//! through these two steps.

use super::*;

/// Everything a call depends on besides its flags, read once: the environment, the
/// configuration files, the workspace, the standing policy, the limits and lifetime, and
/// the escalation it requests.
pub(super) struct Gathered {
    pub(super) started: std::time::SystemTime,
    pub(super) env: Env,
    pub(super) layers: Layers,
    pub(super) workspace: PathBuf,
    pub(super) standing: Standing,
    pub(super) limits: crate::limits::Limits,
    pub(super) lifetime: policy::lifetime::Lifetime,
    pub(super) escalation: Option<policy::escalation::EscalationRequest>,
    /// Where a sandboxed command of this or an earlier call in this workspace could have
    /// planted a link: sandgate's own files are never opened through one there.
    pub(super) untrusted_roots: Vec<PathBuf>,
    pub(super) audit: Option<AuditLog>,
    /// What this kernel offers.
    pub(super) features: Features,
    /// The names of the caller's environment variables.
    pub(super) env_names: Vec<OsString>,
    /// sandgate's own command line, as it came.
    pub(super) invocation: Vec<OsString>,
    /// sandgate's own path, which a retry names it by: `argv[0]` is whatever the caller
    /// made it (a link, a relative path that depends on the cwd, any name at all).
    pub(super) own_path: Option<OsString>,
}

/// A call, planned: all that the stages after planning receive. Preparing, running and
/// reporting act on it and decide nothing of their own.
pub(super) struct Planned {
    pub(super) plan: Plan,
    pub(super) features: Features,
    /// How the call is laid out first (`launch` may fall back from namespaces to landlock).
    pub(super) layout: Layout,
    /// The call runs inside another sandgate's sandbox (the kernel agrees), whose boundary
    /// holds for everything in it.
    pub(super) nested: bool,
    /// The guarantees this kernel cannot hold for the plan under that layout, which the
    /// call runs without (only when it named them: otherwise planning refuses the call).
    pub(super) unenforced: Vec<Guarantee>,
    pub(super) limits: crate::limits::Limits,
    pub(super) timeout: Option<std::time::Duration>,
    /// Set when the call's background processes outlive it, for `sandgate ps`.
    pub(super) kept: Option<crate::kept::Call>,
    /// The caller's environment variables the command does not get.
    pub(super) withheld_env: Vec<OsString>,
    /// `argv[0]` of the command (the real shell's name in shell mode).
    pub(super) argv0: Option<OsString>,
    pub(super) report: Reporting,
}

/// How a call's refused operations are reported.
pub(super) struct Reporting {
    pub(super) denial_log: Option<PathBuf>,
    /// Where a sandboxed command could have planted a link (see [`Gathered`]).
    pub(super) untrusted_roots: Vec<PathBuf>,
    /// Whether a retry with a wider request can be granted, for the markers' hints.
    pub(super) escalation: Escalation,
    /// The call a retry repeats, without its request (`None`: a word is not UTF-8).
    pub(super) retry: Option<Vec<String>>,
    pub(super) form: Form,
}

/// Reads what the call depends on (see [`Gathered`]), saying the standing policy's
/// warnings; `args.workspace` becomes the enclosing sandbox's when none is given inside one.
pub(super) fn gather(args: &mut RunArgs) -> Result<Gathered, Error> {
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
    say_warnings(&standing);
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
        features: Features::detect(),
        env_names: std::env::vars_os().map(|(name, _)| name).collect(),
        invocation: std::env::args_os().collect(),
        own_path: std::env::current_exe().ok().map(PathBuf::into_os_string),
    })
}

/// The call under `mode`, planned from what was gathered, its flags and what shell mode
/// adds; refused when the kernel cannot hold the plan and degrading is not allowed.
pub(super) fn call(
    g: Gathered,
    args: RunArgs,
    mode: Mode,
    shellish: Shellish,
) -> Result<Planned, Error> {
    let plan = for_mode(&g, &args, mode)?;
    let (layout, unenforced) = layout(&plan, &g.features)?;
    let withheld_env = match &plan.confinement {
        Confinement::Restricted(r) => withheld(r, &g.env_names),
        Confinement::None => vec![],
    };
    let escalation = match g.standing.approval {
        Approval::Never => Escalation::Impossible {
            preset: g.standing.preset,
        },
        Approval::OnRequest => Escalation::Possible {
            ceiling: g.standing.max_mode,
        },
    };
    // A retry repeats the call as it came, with the request added; shell mode says how.
    let mut base = shellish.retry.unwrap_or(g.invocation);
    if let (Some(argv0), Some(me)) = (base.first_mut(), g.own_path) {
        *argv0 = me;
    }
    let retry = without_request(base)
        .into_iter()
        .map(|a| a.into_string().ok())
        .collect();
    let kept = g.lifetime.keep_background.then(|| crate::kept::Call {
        workspace: plan.workspace.clone(),
        mode: plan.mode,
        command: plan
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        started: g.started,
    });
    Ok(Planned {
        features: g.features,
        layout,
        nested: g.env.parent.is_some(),
        unenforced,
        limits: g.limits,
        timeout: g.lifetime.timeout,
        kept,
        withheld_env,
        argv0: shellish.argv0,
        report: Reporting {
            denial_log: args.denial_log,
            untrusted_roots: g.untrusted_roots,
            escalation,
            retry,
            form: shellish.form,
        },
        plan,
    })
}

/// The layout a call starts with and the guarantees it runs without; refused (78) when
/// one it did not name cannot hold. `auto` picks the landlock backend up front only where
/// the kernel is known to refuse namespaces; elsewhere a refusal shows when the child tries
/// (`launch`).
pub(super) fn layout(plan: &Plan, features: &Features) -> Result<(Layout, Vec<Guarantee>), Error> {
    if plan.confinement == Confinement::None {
        return Ok((Layout::Namespaces { pid: true }, vec![]));
    }
    let backend = match plan.backend {
        BackendChoice::Auto if !features.mount_namespace_allowed => Backend::Landlock,
        choice => choice.first(),
    };
    let missing = named_or_refused(plan, backend, features.missing(backend))?;
    let layout = match backend {
        Backend::Namespaces => Layout::Namespaces {
            pid: features.pid_namespace_allowed,
        },
        Backend::Landlock => Layout::Landlock,
    };
    Ok((layout, missing))
}

/// Refuses `--keep-background` under a layout that leaves nothing to find and end what the
/// call keeps (no PID namespace): kept there, it would outlive every `sandgate stop`,
/// `tmp --clean` and time limit.
pub(super) fn keepable(keep: bool, layout: Layout) -> Result<(), Error> {
    match keep && !layout.bounds_what_is_kept() {
        true => Err(Error::KeptWithoutPidNamespace {
            backend: layout.backend(),
        }),
        false => Ok(()),
    }
}

/// `missing`, when the call named every one of them; the refusal otherwise.
pub(super) fn named_or_refused(
    plan: &Plan,
    backend: Backend,
    missing: Vec<Guarantee>,
) -> Result<Vec<Guarantee>, Error> {
    if missing.iter().all(|g| plan.degradable.guarantee(*g)) {
        return Ok(missing);
    }
    Err(Error::Unenforceable {
        mode: plan.mode,
        backend,
        missing,
    })
}

/// Of the caller's variables `names`, those a restricted command does not get.
pub(super) fn withheld(r: &policy::Restrictions, names: &[OsString]) -> Vec<OsString> {
    names
        .iter()
        .filter(|name| r.secret_env.withholds(name))
        .cloned()
        .collect()
}

/// Says what the standing policy warns of, and a mode narrowed by an enclosing sandbox.
fn say_warnings(standing: &Standing) {
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
}

/// sandgate's own configuration, state and records: kept out of the sandbox's reach,
/// existing or not (the policy guards each like a persistence path), and out of its sight
/// (masked, so they can be neither read nor locked). A denial log the caller names is only
/// hidden: where it is missing, guarding it would freeze the directory it goes in, often
/// the workspace, and a link planted at it refuses the next call.
pub(super) fn own_paths(g: &Gathered, args: &RunArgs, mode: Mode) -> (Vec<PathBuf>, Vec<PathBuf>) {
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
pub(super) fn scans_for(
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
pub(super) fn for_mode(g: &Gathered, args: &RunArgs, mode: Mode) -> Result<Plan, Error> {
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
    let hidden_paths = [&layers.user.hidden_paths, &standing.hidden_paths];
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
        degradable: Degradable::union(&args.allow_degraded),
        backend: args.backend,
        observe: !args.no_observe,
        command: args.command.clone(),
        protected_subpaths: standing.protected_subpaths.clone(),
        protected_paths,
        own_files,
        hidden_paths: hidden_paths.into_iter().flatten().cloned().collect(),
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

/// What the hidden-files rule's scans find for a call under `mode` (see `secret_scan`);
/// `needed` are paths the call must see besides `$PATH` and the XDG base directories,
/// whose way the scans read whatever their bounds.
pub(super) fn secret_scans(
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

/// Reads what the environment contributes to the plan.
pub(super) fn gather_env() -> Result<Env, Error> {
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
pub(super) fn parent_sandbox() -> Option<Parent> {
    let mode = std::env::var(policy::PARENT_MODE_ENV).ok()?.parse().ok()?;
    let workspace = PathBuf::from(std::env::var_os(policy::PARENT_WORKSPACE_ENV)?);
    let confinement = std::env::var(policy::PARENT_CONFINEMENT_ENV).ok();
    (crate::confinement::this_process() == Some(true)).then_some(Parent {
        mode,
        workspace,
        confinement,
    })
}
