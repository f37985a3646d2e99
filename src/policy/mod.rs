//! The policy stage: turns raw arguments and the environment into a `Plan` — the mode for
//! this call and, for restricted modes, exactly which paths each enforcement layer covers.
//!
//! Pure apart from reading the filesystem to canonicalise paths: it never touches the
//! kernel's sandboxing facilities (that is `sandbox`'s job), so it runs the same anywhere.

pub mod caches;
pub mod config;
pub mod escalation;
pub mod gitconfig;
pub mod guarantee;
pub mod home;
pub mod host_rules;
pub mod hosts;
pub mod lifetime;
mod mode;
pub mod preset;
pub mod profile;
pub mod protected;
pub mod roots;
pub mod secrets;
pub mod standing;
mod workspace;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::policy::host_rules::HostRules;
pub use escalation::{EscalationRequest, InvalidEscalation};
pub use mode::Mode;
pub use preset::Approval;
pub use profile::{Network, Temp};
use profile::{Placeholders, ProfileSpec};
pub use secrets::{SecretEnv, Why};
pub use standing::Standing;
pub use workspace::{inherited as inherited_workspace, resolve as resolve_workspace};

/// Environment variable a restricted sandgate sets for its command, naming its mode, so a
/// nested sandgate knows it cannot run wider. It is only a hint: the parent's kernel-enforced
/// layers bind the nested call whether or not the variable is honest.
pub const PARENT_MODE_ENV: &str = "SANDGATE_PARENT_MODE";
/// Companion of [`PARENT_MODE_ENV`]: the parent's workspace.
pub const PARENT_WORKSPACE_ENV: &str = "SANDGATE_PARENT_WORKSPACE";
/// Companion of [`PARENT_MODE_ENV`]: what the parent's confinement is made of
/// ([`Restrictions::fingerprint`]), so that a nested call confined exactly alike adds no
/// layer of its own ([`MountSource::Inherited`]).
pub const PARENT_CONFINEMENT_ENV: &str = "SANDGATE_PARENT_CONFINEMENT";

/// Why a call cannot be planned.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("no command given: usage: sandgate [OPTIONS] -- CMD [ARGS...]")]
    NoCommand,
    #[error("cannot use workspace {}: {source}", path.display())]
    Workspace {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("workspace {} is not a directory", .0.display())]
    WorkspaceNotDir(PathBuf),
    #[error("refusing / as the workspace{}: a writable / is full access under another name; {}", if *.chosen { "" } else { " (the current directory)" }, if *.chosen { "name the project's directory instead (under --sandbox full-access the whole filesystem is writable whatever the workspace)" } else { "run from the project's directory, or pass --workspace DIR" })]
    WorkspaceIsRoot {
        /// Named by `--workspace` or `SANDGATE_WORKSPACE` rather than derived.
        chosen: bool,
    },
    #[error("refusing {} as the workspace: it holds your home directory {}, where a command could plant shell startup files; pass --workspace DIR (or set SANDGATE_WORKSPACE) to choose it anyway", workspace.display(), home.display())]
    WorkspaceHoldsHome { workspace: PathBuf, home: PathBuf },
    #[error("refusing writable root / (from {origin}): that is full access; use --sandbox full-access if you mean it")]
    WritableRootIsRoot { origin: &'static str },
    #[error("cannot use writable root {}: {source}", path.display())]
    WritableRoot {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("refusing {what} {}: it passes through the symlink {}, which lies inside a writable root, where an earlier sandboxed call could have planted it; name the real directory instead", path.display(), link.display())]
    RedirectedRoot {
        what: &'static str,
        path: PathBuf,
        link: PathBuf,
    },
    #[error("refusing {} as {what}: inside the sandbox it is private, and making the host's writable would hand over its sockets and shared memory; use a directory beneath it", path.display())]
    SharedTempAsRoot { what: &'static str, path: PathBuf },
    #[error("refusing {} as {what}: it holds sandgate's own state (every workspace's private temp and cache layers, the hidden-files scan's cache), which no sandbox may write; use a directory elsewhere", path.display())]
    SandgateStateAsRoot { what: &'static str, path: PathBuf },
    #[error("the workspace changed while sandgate looked at it ({} became {}); refusing to guess", before.display(), after.display())]
    WorkspaceChanged { before: PathBuf, after: PathBuf },
    #[error("git is configured to read {} (core.hooksPath or include.path), which lies in a writable root but does not exist, so sandgate cannot keep it read-only; create it or change that setting", .0.display())]
    GitPointerMissing(PathBuf),
    #[error("cannot allow unix socket {}: {why}", path.display())]
    AllowedSocket { path: PathBuf, why: String },
    #[error("cannot read the current directory: {0}")]
    Cwd(std::io::Error),
    #[error("the shipped {mode} profile is invalid: {reason}")]
    BadProfile { mode: Mode, reason: String },
    #[error("{message}")]
    Preset {
        origin: standing::Origin,
        message: String,
    },
    #[error("preset {key:?} is not allowed by the managed configuration (allowed: {})", allowed.join(", "))]
    PresetNotAllowed { key: String, allowed: Vec<String> },
    #[error("the managed configuration caps the mode at max_mode={max}: {mode} is not allowed")]
    AboveCeiling { mode: Mode, max: Mode },
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error("invalid escalation request: {0}")]
    Directive(String),
    #[error("invalid host pattern in {origin}: {reason}")]
    Hosts {
        origin: hosts::HostsOrigin,
        reason: String,
    },
}

/// What the environment contributes to a plan, read once by the caller.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub cwd: PathBuf,
    /// The host's `$TMPDIR`, when set and absolute.
    pub tmpdir: Option<PathBuf>,
    /// `$HOME`, when set and absolute (for the user's git configuration).
    pub home: Option<PathBuf>,
    /// Terminal devices behind stdin/stdout/stderr.
    pub ptys: Vec<PathBuf>,
    /// Set when this sandgate runs inside another sandgate's sandbox.
    pub parent: Option<Parent>,
    /// The caller's home directories, canonical ([`home::caller_homes`]).
    pub homes: Vec<PathBuf>,
    /// `$SANDGATE_APPROVAL_TOKEN_FILE`: hidden like a credential.
    pub approval_token_file: Option<PathBuf>,
    /// The directories on `$PATH` (absolute, as written): a later shell runs what lies in
    /// them, so those inside a writable home stay read-only, and none is hidden whole.
    pub path: Vec<PathBuf>,
    /// The XDG base directories the caller's variables name (`$XDG_CONFIG_HOME`,
    /// `$XDG_CACHE_HOME`, `$XDG_DATA_HOME`, `$XDG_STATE_HOME`; absolute ones): what every
    /// tool reads, whatever their mode.
    pub xdg: Vec<PathBuf>,
}

/// The enclosing sandgate sandbox, as its environment hint describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parent {
    pub mode: Mode,
    pub workspace: PathBuf,
    /// Its [`Restrictions::fingerprint`], when it said.
    pub confinement: Option<String>,
}

/// The request the command line makes, after clap.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub mode: Option<Mode>,
    pub workspace: Option<PathBuf>,
    pub writable_roots: Vec<PathBuf>,
    /// Unix sockets outside the workspace and private temp that connects may reach.
    pub allowed_sockets: Vec<PathBuf>,
    /// What the call may run without, as it named it.
    pub degradable: guarantee::Degradable,
    pub backend: guarantee::BackendChoice,
    /// Report refusals as markers (off: `--no-observe`).
    pub observe: bool,
    pub command: Vec<OsString>,
    /// Extra protected subpaths of the workspace (from the project file).
    pub protected_subpaths: Vec<String>,
    /// sandgate's own paths (its configuration, state and approvals directories, the audit
    /// log): inside a writable root each is guarded whether or not it exists
    /// ([`home::guard`]), so that no command creates what a later call reads or trusts.
    pub protected_paths: Vec<PathBuf>,
    /// sandgate's own files (audit log, denial log, configuration): hidden in every
    /// restricted profile, whether or not they exist yet, and never unhidden.
    pub own_files: Vec<PathBuf>,
    /// Paths to hide besides the profile's (user and project configuration).
    pub hidden_paths: Vec<String>,
    /// Paths the profile hides that the user's configuration shows.
    pub unhidden_paths: Vec<String>,
    /// Paths shown again with `--unhide` (absolute).
    pub unhide: Vec<PathBuf>,
    /// What the hidden-files rule's scans found (`secret_scan`, for `secrets::rule_roots`).
    pub scans: Vec<crate::secret_scan::Snapshot>,
    /// Variables passed even though their names look like secrets.
    pub keep_env: Vec<String>,
    /// The hosts the sandbox may reach through the proxy.
    pub hosts: HostRules,
    /// The bound of each private tmpfs.
    pub tmpfs: crate::limits::TmpfsBound,
}

/// Everything the later stages need to run one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub mode: Mode,
    pub workspace: PathBuf,
    /// The working directory the command starts in.
    pub cwd: PathBuf,
    /// Never empty: `resolve` refuses an empty command.
    pub command: Vec<OsString>,
    /// `$TMPDIR` for the command: `/tmp` (the private one) unless the host's lies beneath
    /// the writable workspace. `None` for full access, which keeps the host's.
    pub tmpdir: Option<PathBuf>,
    pub confinement: Confinement,
    /// What the call may run without, as it named it (`--allow-degraded=NAME,…`).
    pub degradable: guarantee::Degradable,
    pub backend: guarantee::BackendChoice,
    pub observe: bool,
    /// Set when the requested mode was wider than an enclosing sandgate's and was narrowed.
    pub narrowed_from: Option<Mode>,
}

/// Whether and how the command is confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// `full-access`: no layer applies.
    None,
    /// `read-only` or `workspace-write`: every layer applies.
    Restricted(Box<Restrictions>),
}

/// The paths and switches of a restricted profile for one call, all canonical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restrictions {
    pub writable_roots: BTreeSet<PathBuf>,
    /// What `workspace-write` would make writable for this call: a denial beneath one of
    /// these under `read-only` needs `workspace-write`, anywhere else `full-access`.
    pub workspace_write_roots: BTreeSet<PathBuf>,
    /// Bound read-only inside the writable roots.
    pub protected: BTreeSet<PathBuf>,
    /// Guarded git directories: top level read-only (the supervisor performs what git
    /// needs there), see `protected`.
    pub git_dirs: BTreeSet<PathBuf>,
    /// Their subdirectories that stay writable (`objects`, `refs`, `logs`, …).
    pub git_writable: BTreeSet<PathBuf>,
    /// Directory names that count as `hooks` for the seal rules besides it
    /// ([`protected::Protected::hook_dir_names`]).
    pub hook_dir_names: BTreeSet<Vec<u8>>,
    /// Bound onto themselves so they cannot be renamed or replaced (the directories on the
    /// way to a persistence path).
    pub pinned: BTreeSet<PathBuf>,
    /// Directories in which nothing may be created, removed or renamed, while their existing
    /// entries stay as writable as before (see [`home`]).
    pub frozen: BTreeSet<PathBuf>,
    /// A writable home's dot-entries and the top-level entries that hold a `$PATH`
    /// directory or a path its startup files name ([`home::seal`]): bound
    /// read-only among the writable roots' binds, so that a writable root named beneath one,
    /// and a cache's layer, stay writable on top.
    pub sealed: BTreeSet<PathBuf>,
    /// Read as empty: a directory as an empty one, anything else as an empty file, each
    /// with why. Absolute; the mount layer canonicalises the named ones again right before
    /// the sandbox starts (sandgate's own logs may only be created by then) and skips those
    /// that do not exist.
    pub hidden: BTreeMap<PathBuf, Why>,
    /// Which environment variables the command does not get.
    pub secret_env: SecretEnv,
    /// Device nodes the command may write (and ioctl).
    pub devices: BTreeSet<PathBuf>,
    pub temp: Temp,
    /// Paths beneath `/tmp` or `/dev/shm` that stay visible at their own path on top of
    /// the private temp (the workspace, writable roots, allowed sockets, the cwd).
    pub kept_visible: BTreeSet<PathBuf>,
    /// A unix connect reaches a socket beneath these (the workspace) or the private temp.
    pub socket_roots: BTreeSet<PathBuf>,
    /// ...or one of these sockets, named by the user.
    pub allowed_sockets: BTreeSet<PathBuf>,
    pub network: Network,
    /// The hosts the sandbox reaches through sandgate's proxy: `None` when none are
    /// allowed, or when the call runs in an enclosing sandbox's namespaces (which has no
    /// room for a proxy of its own), and then the sandbox has no network at all.
    pub proxy: Option<HostRules>,
    pub mounts: MountSource,
    /// Toolchain caches writable copy-on-write (a per-workspace layer; `caches`).
    pub caches: Vec<caches::Cache>,
    /// The size and inode bound of each private tmpfs (`/tmp` per call, `/dev/shm`).
    pub tmpfs: crate::limits::TmpfsBound,
}

/// Who provides the mount namespace of a restricted call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountSource {
    /// sandgate makes a private one for this call.
    Own,
    /// A nested call in the same mode and workspace as its parent: the parent's namespace
    /// already holds every read-only mount this call would make, and a sandboxed process
    /// cannot make new ones.
    Parent,
    /// A nested call whose whole confinement is its parent's ([`Restrictions::fingerprint`]
    /// alike): the parent's namespace, landlock domain and seccomp filter already confine
    /// it exactly as its own would, so it adds none. Stacking them again would add
    /// nothing but a filter the parent's supervisor must not act through: it performs the
    /// sandbox's writes only for callers under no sandbox of their own.
    Inherited,
}

impl Restrictions {
    /// What decides a confinement's layers besides its mode and workspace: the writable
    /// roots, the sockets allowed by name, and whether a proxy serves allowed hosts.
    /// Compared, as text, between a restricted call and a sandgate nested in it.
    pub fn fingerprint(&self, mode: Mode, workspace: &Path, proxy: bool) -> String {
        serde_json::json!({
            "mode": mode.as_str(),
            "workspace": workspace,
            "writable_roots": self.writable_roots,
            "allowed_sockets": self.allowed_sockets,
            "proxy": proxy,
        })
        .to_string()
    }
}

/// Resolves a request into a plan.
///
/// # Errors
/// See [`PolicyError`]: no command, an unusable workspace or writable root.
pub fn resolve(request: Request, env: &Env) -> Result<Plan, PolicyError> {
    if request.command.is_empty() {
        return Err(PolicyError::NoCommand);
    }
    let workspace_resolved =
        workspace::resolve_with_links(request.workspace.as_deref(), &env.cwd, &env.homes)?;
    let workspace = workspace_resolved.path.clone();
    let asked = request.mode.unwrap_or(Mode::WorkspaceWrite);
    let (mode, narrowed_from) = match &env.parent {
        Some(parent) if asked > parent.mode => (parent.mode, Some(asked)),
        _ => (asked, None),
    };
    let confinement = match profile::shipped(mode)? {
        ProfileSpec::None { .. } => Confinement::None,
        ProfileSpec::Restricted(spec) => {
            let placeholders = Placeholders {
                workspace: &workspace,
                ptys: env.ptys.clone(),
                homes: &env.homes,
                approval_token_file: env.approval_token_file.clone(),
            };
            let mut workspace_write_roots = match profile::shipped(Mode::WorkspaceWrite)? {
                ProfileSpec::Restricted(ww) => placeholders.existing(&ww.writable_roots),
                ProfileSpec::None { .. } => BTreeSet::new(),
            };
            // Each root as given, resolved once: the links it passed are checked below.
            let mut given = vec![("the workspace", workspace_resolved)];
            for extra in &request.writable_roots {
                let path = env.cwd.join(extra);
                let resolved = roots::resolve(&path)
                    .map_err(|source| PolicyError::WritableRoot { path, source })?;
                workspace_write_roots.insert(resolved.path.clone());
                given.push(("writable root", resolved));
            }
            let tmpdir = env.tmpdir.as_deref().and_then(|t| roots::resolve(t).ok());
            given.extend(tmpdir.map(|t| ("$TMPDIR", t)));
            for root in &workspace_write_roots {
                if root == Path::new("/") {
                    return Err(PolicyError::WritableRootIsRoot {
                        origin: "--writable-root",
                    });
                }
                if roots::is_shared_temp(root) {
                    return Err(PolicyError::SharedTempAsRoot {
                        what: "a writable root",
                        path: root.clone(),
                    });
                }
                if roots::is_sandgate_state(root) {
                    return Err(PolicyError::SandgateStateAsRoot {
                        what: "a writable root",
                        path: root.clone(),
                    });
                }
            }
            let writable_roots = match mode {
                Mode::WorkspaceWrite => workspace_write_roots.clone(),
                Mode::ReadOnly | Mode::FullAccess => placeholders.existing(&spec.writable_roots),
            };
            for (what, resolved) in &given {
                if let Some(link) = resolved.planted_in(&writable_roots) {
                    return Err(PolicyError::RedirectedRoot {
                        what,
                        path: resolved.path.clone(),
                        link: link.clone(),
                    });
                }
            }
            let subpaths: Vec<String> = spec
                .protected_subpaths
                .iter()
                .chain(&request.protected_subpaths)
                .cloned()
                .collect();
            let mut protected = protected::resolve(&workspace, &subpaths, env.home.as_deref());
            let under_roots = |p: &PathBuf| writable_roots.iter().any(|r| p.starts_with(r));
            for pointer in protected.git_pointers.iter().filter(|p| under_roots(p)) {
                match std::fs::canonicalize(pointer) {
                    Ok(canonical) => protected.read_only.insert(canonical),
                    Err(_) => return Err(PolicyError::GitPointerMissing(pointer.clone())),
                };
            }
            let programs: Vec<PathBuf> = protected
                .program_files
                .iter()
                .filter(|p| under_roots(p))
                .cloned()
                .collect();
            protected.read_only.extend(programs);
            let beneath_roots =
                |p: &PathBuf| writable_roots.iter().any(|r| p.starts_with(r) && p != r);
            let named: BTreeSet<PathBuf> = given
                .iter()
                .filter(|(what, _)| *what == "writable root")
                .map(|(_, r)| r.path.clone())
                .collect();
            let persistent_paths: Vec<PathBuf> = spec
                .persistent_paths
                .iter()
                .flat_map(|e| placeholders.expand(e))
                .collect();
            let sealed = home::seal(&home::SealInputs {
                homes: &env.homes,
                writable_roots: &writable_roots,
                named: &named,
                path: &env.path,
                exempt: &protected.git_dirs,
                startup: &persistent_paths,
            });
            // Beneath a sealed entry everything is read-only already, and a writable bind
            // there (a pinned or frozen directory, a guarded git directory's `objects/`)
            // would open a hole in it.
            let outside_sealed = |p: &PathBuf| !sealed.read_only.iter().any(|s| p.starts_with(s));
            // sandgate's own paths are guarded like persistence paths, existing or not: a
            // missing configuration directory that a command could create would be read
            // by every later call.
            let persistent = home::guard(
                persistent_paths
                    .into_iter()
                    .chain(sealed.guarded.iter().cloned())
                    .chain(request.protected_paths.iter().map(|p| env.cwd.join(p))),
            );
            protected
                .read_only
                .extend(persistent.read_only.into_iter().filter(under_roots));
            let mut pinned: BTreeSet<PathBuf> = persistent
                .pinned
                .into_iter()
                .chain(protected.git_checkouts.iter().cloned())
                .filter(beneath_roots)
                .filter(outside_sealed)
                .collect();
            let frozen = persistent
                .frozen
                .into_iter()
                .chain(sealed.frozen.iter().cloned())
                .filter(under_roots)
                .filter(outside_sealed)
                .collect();
            let mounts = match &env.parent {
                Some(parent) if parent.mode == mode && parent.workspace == workspace => {
                    MountSource::Parent
                }
                _ => MountSource::Own,
            };
            // What an earlier call may have written: the workspace-write roots, and this
            // call's. A link there must not redirect what the user allows or shows.
            let sandbox_written: BTreeSet<PathBuf> = workspace_write_roots
                .union(&writable_roots)
                .cloned()
                .collect();
            let allowed_sockets = request
                .allowed_sockets
                .iter()
                .map(|p| allowed_socket(&env.cwd.join(p), &sandbox_written))
                .collect::<Result<BTreeSet<_>, _>>()?;
            let devices = placeholders.existing(&spec.devices);
            // Character devices only: a host whose `/dev/ptmx` is a link into `/dev/pts`
            // has nothing there to keep.
            let standard: Vec<PathBuf> = roots::DEVICES
                .iter()
                .map(PathBuf::from)
                .filter(|p| {
                    use std::os::unix::fs::FileTypeExt;
                    p.symlink_metadata()
                        .is_ok_and(|m| m.file_type().is_char_device())
                })
                .collect();
            let kept_visible = roots::outermost(
                std::iter::once(&workspace)
                    .chain(&writable_roots)
                    .chain(&allowed_sockets)
                    .chain(&devices)
                    .chain(&standard)
                    .chain(std::iter::once(&env.cwd))
                    .filter(|p| roots::hidden_by_temp(p)),
            );
            let read_only: BTreeSet<PathBuf> = protected
                .read_only
                .iter()
                .filter(|p| under_roots(p))
                .cloned()
                .collect();
            let caches = caches::resolve(
                &spec.caches,
                &placeholders,
                &caches::Around {
                    writable_roots: &writable_roots,
                    protected: &read_only,
                    sealed: &sealed.read_only,
                },
            );
            let hidden = hidden_paths(
                &spec,
                &placeholders,
                &request,
                env,
                &writable_roots,
                &caches,
                &sandbox_written,
            )?;
            // A listed path in a writable root (a project's `config/secrets.json` hidden,
            // or its protected `deploy/prod.env`) is masked or bound read-only; the
            // directories on its way are pinned, so that no call moves the file out from
            // under its mount for the next call to read or change.
            let listed_hidden = hidden
                .iter()
                .filter(|(_, why)| matches!(why, Why::Listed { .. }))
                .map(|(path, _)| path);
            for path in listed_hidden.chain(&protected.listed) {
                pinned.extend(
                    path.ancestors()
                        .skip(1)
                        .filter(|a| beneath_roots(&a.to_path_buf()))
                        .filter(|a| outside_sealed(&a.to_path_buf()))
                        .map(Path::to_path_buf),
                );
            }
            let mut r = Box::new(Restrictions {
                protected: read_only,
                caches,
                git_dirs: protected
                    .git_dirs
                    .iter()
                    .filter(|p| under_roots(p) && outside_sealed(p))
                    .cloned()
                    .collect(),
                git_writable: protected
                    .git_writable
                    .iter()
                    .filter(|p| under_roots(p) && outside_sealed(p))
                    .cloned()
                    .collect(),
                hook_dir_names: protected.hook_dir_names.clone(),
                pinned,
                frozen,
                sealed: sealed.read_only,
                hidden,
                secret_env: SecretEnv::new(&spec.secret_env, &request.keep_env),
                writable_roots,
                workspace_write_roots,
                devices,
                temp: spec.temp,
                kept_visible,
                socket_roots: BTreeSet::from([workspace.clone()]),
                allowed_sockets,
                network: spec.network,
                proxy: (mounts == MountSource::Own
                    && env.parent.is_none()
                    && !request.hosts.is_empty())
                .then(|| request.hosts.clone()),
                mounts,
                tmpfs: request.tmpfs,
            });
            let alike = env
                .parent
                .as_ref()
                .and_then(|p| p.confinement.as_deref())
                .is_some_and(|parent| parent == r.fingerprint(mode, &workspace, false));
            if r.mounts == MountSource::Parent && alike {
                r.mounts = MountSource::Inherited;
            }
            Confinement::Restricted(r)
        }
    };
    let tmpdir = match &confinement {
        Confinement::None => None,
        Confinement::Restricted(r) => Some(
            env.tmpdir
                .as_deref()
                .and_then(|t| roots::resolve(t).ok())
                .map(|t| t.path)
                .filter(|t| mode == Mode::WorkspaceWrite && t.starts_with(&workspace))
                .filter(|_| matches!(r.temp, Temp::PerWorkspace))
                .unwrap_or_else(|| PathBuf::from("/tmp")),
        ),
    };
    Ok(Plan {
        mode,
        workspace,
        cwd: env.cwd.clone(),
        command: request.command,
        tmpdir,
        confinement,
        degradable: request.degradable,
        backend: request.backend,
        observe: request.observe,
        narrowed_from,
    })
}

/// What a restricted call hides: what the rule found (no directory the call needs visible
/// hidden whole), what the lists name (a named path keeps its entry as its reason), minus
/// what the user shows again, plus sandgate's own files.
fn hidden_paths(
    spec: &profile::RestrictedSpec,
    placeholders: &Placeholders<'_>,
    request: &Request,
    env: &Env,
    writable_roots: &BTreeSet<PathBuf>,
    caches: &[caches::Cache],
    sandbox_written: &BTreeSet<PathBuf>,
) -> Result<BTreeMap<PathBuf, Why>, PolicyError> {
    let workspace = placeholders.workspace;
    let shown = secrets::shown(
        &request.unhidden_paths,
        &request.unhide,
        &env.homes,
        workspace,
    );
    // A path shown again through a link an earlier call planted would show the link's
    // target instead (`--unhide ws/config/secrets.json` → `~/.ssh`).
    for path in &shown.links {
        if let Some(link) = path.planted_in(sandbox_written) {
            return Err(PolicyError::RedirectedRoot {
                what: "a path shown with --unhide or unhidden_paths",
                path: path.path.clone(),
                link: link.clone(),
            });
        }
    }
    let shown = shown.paths;
    let keep_whole: Vec<PathBuf> = std::iter::once(workspace.to_path_buf())
        .chain(writable_roots.iter().cloned())
        .chain(caches.iter().map(|c| c.path.clone()))
        // Canonical, as the rule's scans name what they found: a `$PATH` entry written
        // through a link (a symlinked home) or with `..` must count all the same.
        .chain(
            env.path
                .iter()
                .map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone())),
        )
        .collect();
    let listed = secrets::listed(
        secrets::profile_entries(&spec.hidden_paths, placeholders),
        &request.hidden_paths,
        &env.homes,
        workspace,
    );
    // The workspace or a writable root inside a home (a project kept in `~/.config/nvim`, a
    // named `~/.local/lib/python3.11/site-packages`) is where the user works: the rule leaves
    // its files alone. One that is or holds the home is not: there the rule is the point.
    let worked_in: Vec<PathBuf> = std::iter::once(workspace.to_path_buf())
        .chain(writable_roots.iter().cloned())
        .filter(|r| env.homes.iter().any(|h| r.starts_with(h) && r != h))
        .collect();
    let mut hidden = secrets::hidden(&request.scans, &keep_whole, &worked_in, listed, &shown);
    hidden.extend(
        request
            .own_files
            .iter()
            .map(|p| (env.cwd.join(p), Why::Own)),
    );
    Ok(hidden)
}

/// Canonicalises a socket named by `--allow-unix-socket`, which must exist and be one.
fn allowed_socket(
    path: &Path,
    sandbox_written: &BTreeSet<PathBuf>,
) -> Result<PathBuf, PolicyError> {
    use std::os::unix::fs::FileTypeExt;
    let refuse = |why: String| PolicyError::AllowedSocket {
        path: path.to_path_buf(),
        why,
    };
    let resolved = roots::resolve(path).map_err(|e| refuse(e.to_string()))?;
    if let Some(link) = resolved.planted_in(sandbox_written) {
        // An earlier call may have pointed it at the host's docker or D-Bus socket.
        return Err(PolicyError::RedirectedRoot {
            what: "an allowed socket",
            path: resolved.path.clone(),
            link: link.clone(),
        });
    }
    let canonical = resolved.path;
    let meta = std::fs::metadata(&canonical).map_err(|e| refuse(e.to_string()))?;
    if !meta.file_type().is_socket() {
        return Err(refuse("not a unix socket".into()));
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_in(dir: &Path) -> Env {
        Env {
            cwd: dir.to_path_buf(),
            tmpdir: None,
            home: None,
            ptys: vec![],
            parent: None,
            homes: vec![],
            approval_token_file: None,
            path: vec![],
            xdg: vec![],
        }
    }

    /// A request for `true` in `workspace`, named explicitly: a workspace derived from the
    /// cwd would depend on where the test's temp directory is (a `.git` above it).
    fn request(mode: Mode, workspace: &Path) -> Request {
        Request {
            mode: Some(mode),
            workspace: Some(workspace.to_path_buf()),
            command: vec!["true".into()],
            ..Request::default()
        }
    }

    #[test]
    fn workspace_write_makes_only_the_workspace_writable() -> Result<(), Box<dyn std::error::Error>>
    {
        let ws = tempfile::tempdir()?;
        let canonical = std::fs::canonicalize(ws.path())?;
        let mut env = env_in(ws.path());
        env.tmpdir = Some("/var/tmp".into());
        let plan = resolve(request(Mode::WorkspaceWrite, ws.path()), &env)?;
        let Confinement::Restricted(r) = plan.confinement else {
            panic!("restricted")
        };
        assert_eq!(r.writable_roots, BTreeSet::from([canonical.clone()]));
        assert_eq!(r.temp, Temp::PerWorkspace);
        assert_eq!(r.socket_roots, BTreeSet::from([canonical]));
        assert_eq!(plan.tmpdir, Some(PathBuf::from("/tmp")));
        Ok(())
    }

    #[test]
    fn a_tmpdir_inside_the_workspace_is_kept() -> Result<(), Box<dyn std::error::Error>> {
        let ws = tempfile::tempdir()?;
        let inside = std::fs::canonicalize(ws.path())?.join("tmp");
        std::fs::create_dir(&inside)?;
        let mut env = env_in(ws.path());
        env.tmpdir = Some(inside.clone());
        let plan = resolve(request(Mode::WorkspaceWrite, ws.path()), &env)?;
        assert_eq!(plan.tmpdir, Some(inside));
        let plan = resolve(request(Mode::ReadOnly, ws.path()), &env)?;
        assert_eq!(plan.tmpdir, Some(PathBuf::from("/tmp")));
        Ok(())
    }

    #[test]
    fn read_only_writes_nowhere_and_ignores_extra_roots() -> Result<(), Box<dyn std::error::Error>>
    {
        let ws = tempfile::tempdir()?;
        let mut req = request(Mode::ReadOnly, ws.path());
        req.writable_roots = vec![ws.path().to_path_buf()];
        let plan = resolve(req, &env_in(ws.path()))?;
        let Confinement::Restricted(r) = plan.confinement else {
            panic!("restricted")
        };
        assert!(r.writable_roots.is_empty());
        assert_eq!(r.temp, Temp::PerCall);
        Ok(())
    }

    #[test]
    fn shared_temps_are_refused_as_writable_roots() -> Result<(), Box<dyn std::error::Error>> {
        let ws = tempfile::tempdir()?;
        for root in ["/", "/tmp", "/dev/shm"] {
            let mut req = request(Mode::WorkspaceWrite, ws.path());
            req.writable_roots = vec![root.into()];
            assert!(matches!(
                resolve(req, &env_in(ws.path())),
                Err(PolicyError::WritableRootIsRoot { .. } | PolicyError::SharedTempAsRoot { .. })
            ));
        }
        Ok(())
    }

    #[test]
    fn a_root_through_a_symlink_inside_the_workspace_is_refused(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(dir.path().join("target"))?;
        std::fs::create_dir_all(&ws)?;
        std::os::unix::fs::symlink(dir.path().join("target"), ws.join("planted"))?;
        let mut req = request(Mode::WorkspaceWrite, &ws);
        req.writable_roots = vec![ws.join("planted")];
        assert!(matches!(
            resolve(req, &env_in(&ws)),
            Err(PolicyError::RedirectedRoot { .. })
        ));
        let mut env = env_in(&ws);
        env.tmpdir = Some(ws.join("planted"));
        assert!(matches!(
            resolve(request(Mode::WorkspaceWrite, &ws), &env),
            Err(PolicyError::RedirectedRoot { .. })
        ));
        Ok(())
    }

    #[test]
    fn a_nested_call_never_runs_wider_than_its_parent() -> Result<(), Box<dyn std::error::Error>> {
        let ws = tempfile::tempdir()?;
        let mut env = env_in(ws.path());
        let workspace = std::fs::canonicalize(ws.path())?;
        env.parent = Some(Parent {
            mode: Mode::ReadOnly,
            workspace: workspace.clone(),
            confinement: None,
        });
        let plan = resolve(request(Mode::FullAccess, ws.path()), &env)?;
        assert_eq!(plan.mode, Mode::ReadOnly);
        assert_eq!(plan.narrowed_from, Some(Mode::FullAccess));
        let Confinement::Restricted(r) = plan.confinement else {
            panic!("restricted")
        };
        assert_eq!(r.mounts, MountSource::Parent);
        // Confined exactly like its parent: it adds no layer. Any difference, and it does.
        let alike = r.fingerprint(Mode::ReadOnly, &workspace, false);
        for (confinement, mounts) in [
            (alike.clone(), MountSource::Inherited),
            (alike.replace("false", "true"), MountSource::Parent),
        ] {
            env.parent = Some(Parent {
                mode: Mode::ReadOnly,
                workspace: workspace.clone(),
                confinement: Some(confinement),
            });
            let plan = resolve(request(Mode::ReadOnly, ws.path()), &env)?;
            let Confinement::Restricted(r) = plan.confinement else {
                panic!("restricted")
            };
            assert_eq!(r.mounts, mounts);
        }
        Ok(())
    }

    #[test]
    fn sandgates_own_paths_are_guarded_existing_or_not() -> Result<(), Box<dyn std::error::Error>> {
        let ws = tempfile::tempdir()?;
        let ws_path = std::fs::canonicalize(ws.path())?;
        std::fs::create_dir_all(ws_path.join("state/sandgate"))?;
        let mut req = request(Mode::WorkspaceWrite, &ws_path);
        req.protected_paths = vec![
            ws_path.join("sandgate"),
            ws_path.join("state/sandgate"),
            ws_path.join("logs/denials.jsonl"),
        ];
        let plan = resolve(req, &env_in(&ws_path))?;
        let Confinement::Restricted(r) = plan.confinement else {
            panic!("restricted")
        };
        // The existing one is read-only; where a missing one would be, nothing is created.
        assert!(r.protected.contains(&ws_path.join("state/sandgate")));
        assert!(r.frozen.contains(&ws_path));
        assert!(!r.protected.contains(&ws_path.join("sandgate")));
        Ok(())
    }

    #[test]
    fn no_command_is_refused() {
        assert!(matches!(
            resolve(Request::default(), &Env::default()),
            Err(PolicyError::NoCommand)
        ));
    }
}
