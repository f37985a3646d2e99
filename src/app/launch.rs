//! Launching a planned call: what a restricted command's supervisor and environment carry,
//! the observer that reports its refusals, and the loop that prepares the sandbox and falls
//! back to fewer guarantees where `--allow-degraded` allows.

use super::*;

/// One call ready to start: its plan and the reporter of its refusals.
pub(super) struct Call<'a> {
    pub(super) planned: &'a Planned,
    pub(super) reporter: Option<&'a Arc<Mutex<Reporter>>>,
}

impl Call<'_> {
    /// Prepares the sandbox under `layout` and runs the command; when the kernel refuses a
    /// namespace and the call may do without it (`auto` falls back to the landlock backend;
    /// without a PID namespace landlock's ptrace rule holds the process boundary), the layout and the
    /// guarantees given up (`unenforced`) change and the call is prepared again.
    pub(super) fn run(
        &self,
        mut layout: Layout,
        unenforced: &mut Vec<Guarantee>,
        limits: &mut limits::CallLimits,
    ) -> Result<Outcome, Error> {
        let p = self.planned;
        // A run that says what it lacks says it once, for the backend it runs: where `auto`
        // would only learn from a failed attempt that namespaces are refused, it asks a
        // throwaway child first.
        let degraded = !unenforced.is_empty() || !limits.degraded.is_empty();
        if degraded
            && p.plan.backend == BackendChoice::Auto
            && matches!(layout, Layout::Namespaces { .. })
            && !sandbox::probe_namespace(false, true)
        {
            let refused = std::io::Error::from_raw_os_error(libc::EPERM);
            (layout, *unenforced) = self.without_namespaces(&refused)?;
        }
        loop {
            plan::keepable(p.kept.is_some(), layout)?;
            announce_degraded(&p.plan, layout.backend(), unenforced, &limits.degraded);
            let mut prepared = sandbox::prepare(&p.plan, &p.features, layout)?;
            if let (Some(reporter), Some(tmpdir)) = (self.reporter, prepared.temp_dir()) {
                if let Ok(mut reporter) = reporter.lock() {
                    reporter.temp_is_elsewhere(tmpdir);
                }
            }
            if let Some(join) = limits.join()? {
                prepared = prepared.joining(join);
            }
            if matches!(&p.plan.confinement, Confinement::Restricted(r) if r.proxy.is_some())
                && !prepared.has_proxy()
            {
                crate::say!(
                    "sandgate: note: the {} backend runs no proxy here: the allowed hosts are unreachable",
                    layout.backend().name()
                );
            }
            for fd in prepared.withheld_fds() {
                crate::say!(
                    "sandgate: not passing fd {fd} (a datagram or network socket) into the sandbox"
                );
            }
            match exec::run(of(p, prepared, self.reporter)) {
                Ok(outcome) => return Ok(outcome),
                Err(e) => (layout, *unenforced) = self.fall_back(e, layout, unenforced, limits)?,
            }
        }
    }

    /// The layout to prepare the call again with after `e`, and what it runs without;
    /// the error to stop at otherwise.
    fn fall_back(
        &self,
        e: ExecError,
        layout: Layout,
        unenforced: &[Guarantee],
        limits: &mut limits::CallLimits,
    ) -> Result<(Layout, Vec<Guarantee>), Error> {
        let plan = &self.planned.plan;
        let features = &self.planned.features;
        match e {
            ExecError::Setup {
                step: Step::MountNamespace,
                source,
            } if refused_namespaces(&source) => self.without_namespaces(&source),
            ExecError::Setup {
                step: Step::ProcessBoundary,
                source,
            } => {
                crate::say!("sandgate: cannot give the sandbox a PID namespace and a /proc of its own: {source}{}", if source.raw_os_error() == Some(libc::EPERM) { " (the kernel refuses a new /proc in a user namespace while parts of the existing one are covered, as container runtimes do)" } else { "" });
                let without = Features {
                    pid_namespace_allowed: false,
                    ..*features
                };
                let missing = without.missing(Backend::Namespaces);
                let missing = plan::named_or_refused(plan, Backend::Namespaces, missing)?;
                Ok((Layout::Namespaces { pid: false }, missing))
            }
            ExecError::Setup {
                step: Step::Cgroup,
                source,
            } => {
                limits.moving_refused(&source)?;
                Ok((layout, unenforced.to_vec()))
            }
            other => Err(other.into()),
        }
    }
}

impl Call<'_> {
    /// The layout for a call whose kernel refused it namespaces: the landlock backend under
    /// `auto` (or, nested, the enclosing sandbox's boundary); the refusal otherwise.
    fn without_namespaces(
        &self,
        source: &std::io::Error,
    ) -> Result<(Layout, Vec<Guarantee>), Error> {
        let plan = &self.planned.plan;
        let features = &self.planned.features;
        if plan.backend != BackendChoice::Auto {
            crate::say!("sandgate: the kernel refuses the sandbox's namespaces: {source}");
            let mut missing = features.missing(Backend::Namespaces);
            missing.extend(NAMESPACED);
            missing.sort();
            missing.dedup();
            return Err(Error::Unenforceable {
                mode: plan.mode,
                backend: Backend::Namespaces,
                missing,
            });
        }
        // Inside another sandgate's sandbox, its boundary holds for everything in it, this
        // call included (an enclosed call counts as its namespaces).
        // Said by `doctor` and `explain`, not by every call: where one is refused, all are.
        let layout = match self.planned.nested {
            true => Layout::Enclosed,
            false => Layout::Landlock,
        };
        let missing = features.missing(layout.backend());
        Ok((
            layout,
            plan::named_or_refused(plan, layout.backend(), missing)?,
        ))
    }
}

/// Returns true when `e`, from making the sandbox's namespaces, is the kernel (or a
/// container's seccomp profile, or a user namespace limit) refusing them. Anything else
/// the child met there (a path swapped since sandgate checked it: `ESTALE`) fails the
/// call, as it would under either backend: a race lost is never a reason to change how
/// the call is confined.
fn refused_namespaces(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::EPERM | libc::EACCES | libc::ENOSPC | libc::EUSERS | libc::EINVAL | libc::ENOSYS
        )
    )
}

/// What the namespaces backend holds by its namespaces alone, lost when the kernel
/// refuses them.
const NAMESPACED: [Guarantee; 5] = [
    Guarantee::ProtectedPaths,
    Guarantee::Secrets,
    Guarantee::PrivateTmp,
    Guarantee::ProcessBoundary,
    Guarantee::Ipc,
];

/// The denial reporter of a restricted, observed call; with observation off, one
/// `source: "none"` note says that no filesystem markers will come.
pub(super) fn observer(
    plan: &Plan,
    report: &Reporting,
) -> Result<Option<Arc<Mutex<Reporter>>>, Error> {
    let Confinement::Restricted(r) = &plan.confinement else {
        return Ok(None);
    };
    let mut log = match &report.denial_log {
        Some(path) => {
            let mut roots = report.untrusted_roots.clone();
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
            Some((file, path.clone()))
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
    let reporter = Reporter::new(
        plan.mode,
        report.retry.clone(),
        report.form.clone(),
        report.escalation.clone(),
        log,
    );
    Ok(Some(Arc::new(Mutex::new(reporter))))
}

/// Says on stderr, as a marker, which guarantees and limits a degraded run lacks.
pub(super) fn announce_degraded(
    plan: &Plan,
    backend: Backend,
    skip: &[Guarantee],
    limits: &[crate::limits::Unenforced],
) {
    if skip.is_empty() && limits.is_empty() {
        return;
    }
    let what: Vec<String> = skip
        .iter()
        .map(|g| g.describe().to_owned())
        .chain(limits.iter().map(ToString::to_string))
        .collect();
    let message = format!(
        "running degraded by the {} backend (--allow-degraded); not enforced: {}",
        backend.name(),
        what.join("; ")
    );
    crate::say!("sandgate: {message}");
    let mut missing = json!(skip);
    if let Some(list) = missing.as_array_mut() {
        list.extend(limits.iter().map(|u| json!(u.kind)));
    }
    let mut extra = Map::new();
    extra.insert("missing".into(), missing);
    extra.insert("backend".into(), json!(backend));
    crate::say!(
        "{}",
        marker("degraded_enforcement", Some(plan.mode), &message, extra)
    );
}

/// Builds the exec stage's input for the planned call `p`, as `prepared`.
pub(super) fn of<'a>(
    p: &'a Planned,
    prepared: sandbox::Prepared,
    reporter: Option<&Arc<Mutex<Reporter>>>,
) -> Launch<'a> {
    let plan = &p.plan;
    let (extra_env, supervision) = match &plan.confinement {
        Confinement::None => (vec![], None),
        Confinement::Restricted(r) => (
            sandbox_env(plan, r, &prepared),
            Some(supervision(plan, r, &prepared, reporter)),
        ),
    };
    // The caller's marker tag tells sandgate's markers from the command's look-alikes
    // only while the command cannot read it.
    let mut withheld_env = p.withheld_env.clone();
    withheld_env.push(OsString::from(crate::denial::TAG_ENV));
    Launch {
        command: &plan.command,
        extra_env,
        withheld_env,
        proxy: match &plan.confinement {
            Confinement::Restricted(r) if prepared.has_proxy() => r.proxy.clone(),
            _ => None,
        },
        sandbox: prepared,
        supervision,
        argv0: p.argv0.clone(),
        timeout: p.timeout,
        keep_background: p.kept.clone(),
    }
}

/// What the supervisor of a restricted call needs to know of its plan.
pub(super) fn supervision(
    plan: &Plan,
    r: &policy::Restrictions,
    prepared: &sandbox::Prepared,
    reporter: Option<&Arc<Mutex<Reporter>>>,
) -> supervisor::Setup {
    let mut writable_roots: Vec<PathBuf> = r.writable_roots.iter().cloned().collect();
    let mut socket_roots: Vec<PathBuf> = r.socket_roots.iter().cloned().collect();
    if prepared.has_private_temp() {
        let temps = policy::roots::SHARED_TEMPS.map(PathBuf::from);
        writable_roots.extend(temps.clone());
        socket_roots.extend(temps);
        // The copy-on-write caches: writable in the sandbox's view, so no marker.
        writable_roots.extend(r.caches.iter().map(|c| c.path.clone()));
    }
    if let Some(temp) = prepared.temp_dir() {
        writable_roots.push(temp.to_path_buf());
        socket_roots.push(temp.to_path_buf());
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
        pinned: r.pinned.iter().cloned().collect(),
        decides: prepared.supervisor_decides(),
        frozen: r.frozen.iter().cloned().collect(),
        devices: r.devices.iter().cloned().collect(),
        reporter: reporter.cloned(),
        proxy: prepared.has_proxy(),
    }
}

/// The variables sandgate gives a restricted command: who its enclosing sandbox is, its
/// `TMPDIR`, and the proxy's address when it has one.
pub(super) fn sandbox_env(
    plan: &Plan,
    r: &policy::Restrictions,
    prepared: &sandbox::Prepared,
) -> Vec<(&'static str, OsString)> {
    let proxy = prepared.has_proxy();
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
    if let Some(tmpdir) = prepared.temp_dir().or(plan.tmpdir.as_deref()) {
        env.push(("TMPDIR", tmpdir.as_os_str().to_owned()));
    }
    if proxy {
        env.extend(proxy_env());
    }
    env
}

/// The variables that point HTTP clients, package managers and SOCKS-aware tools at the
/// proxy inside the sandbox; no host bypasses it.
pub(super) fn proxy_env() -> Vec<(&'static str, OsString)> {
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
