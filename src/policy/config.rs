//! Configuration layers, highest trust first: managed
//! (`/etc/sandgate/config.json`), flags, environment, user
//! (`$XDG_CONFIG_HOME/sandgate/config.json`), project (`.sandgate/config.json`).
//!
//! Flags and environment arrive through clap (a flag beats its `SANDGATE_*` variable);
//! this module reads the three files and merges them. The project file may only narrow:
//! a lower mode, `never`, extra protected paths. Anything in it that would widen is
//! ignored with a warning naming the key. The managed file sets a ceiling nothing below it
//! can exceed.

use std::num::NonZeroU64;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::mode::Mode;
use super::preset::Approval;
use crate::limits::{Asked, Size};

/// The managed (administrator) file: limits and the endpoint everyone must use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Managed {
    pub max_mode: Option<Mode>,
    pub allowed_presets: Option<Vec<String>>,
    pub approval_endpoint: Option<String>,
    /// Unix sockets every sandbox may connect to (as `--allow-unix-socket`).
    #[serde(default)]
    pub allow_unix_sockets: Vec<PathBuf>,
    /// Variables passed to every command although their names look like secrets.
    #[serde(default)]
    pub keep_env: Vec<String>,
    /// Hosts every sandbox may reach through the proxy (as `--allow-host`).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Hosts no sandbox may reach, whatever allows them.
    #[serde(default)]
    pub denied_hosts: Vec<String>,
    /// Caps on each limit, and its value when nothing lower is asked (see `limits`).
    pub tmpfs_size: Option<Size>,
    pub limit_pids: Option<NonZeroU64>,
    pub limit_memory: Option<Size>,
    /// The longest any call may run (`"30m"`): nothing below may set a longer limit.
    #[serde(default, deserialize_with = "time_limit")]
    pub timeout: Option<std::time::Duration>,
}

/// The user's file: defaults for every call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    pub preset: Option<String>,
    pub sandbox: Option<Mode>,
    pub approval: Option<Approval>,
    pub approval_endpoint: Option<String>,
    pub approver: Option<String>,
    pub audit_log: Option<PathBuf>,
    /// Unix sockets this user's sandboxes may connect to (as `--allow-unix-socket`).
    #[serde(default)]
    pub allow_unix_sockets: Vec<PathBuf>,
    /// Paths to hide besides the profile's (absolute, `~/…`, or relative to the workspace).
    #[serde(default)]
    pub hidden_paths: Vec<String>,
    /// Paths the profile hides that this user wants visible.
    #[serde(default)]
    pub unhidden_paths: Vec<String>,
    /// Variables passed although their names look like secrets.
    #[serde(default)]
    pub keep_env: Vec<String>,
    /// Hosts this user's sandboxes may reach through the proxy (as `--allow-host`).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Limits of every call (as `--tmpfs-size`, `--limit-pids`, `--limit-memory`).
    pub tmpfs_size: Option<Size>,
    pub limit_pids: Option<NonZeroU64>,
    pub limit_memory: Option<Size>,
    /// Every call keeps what its command leaves running (as `--keep-background`).
    #[serde(default)]
    pub keep_background: bool,
    /// Every call's time limit unless it sets one (as `--timeout`, `"10m"`).
    #[serde(default, deserialize_with = "time_limit")]
    pub timeout: Option<std::time::Duration>,
}

/// The project's file (`.sandgate/config.json` in the workspace): may only narrow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Project {
    pub preset: Option<String>,
    pub sandbox: Option<Mode>,
    pub approval: Option<Approval>,
    pub max_mode: Option<Mode>,
    #[serde(default)]
    pub protected_paths: Vec<String>,
    /// Extra paths to hide (a project may hide more, never less).
    #[serde(default)]
    pub hidden_paths: Vec<String>,
    /// Hosts this project's sandboxes may not reach, whatever allows them.
    #[serde(default)]
    pub denied_hosts: Vec<String>,
    /// Limits: a project may only lower them (see `limits`).
    pub tmpfs_size: Option<Size>,
    pub limit_pids: Option<NonZeroU64>,
    pub limit_memory: Option<Size>,
    /// A time limit for this project's calls: it may only shorten the call's own.
    #[serde(default, deserialize_with = "time_limit")]
    pub timeout: Option<std::time::Duration>,
    /// Keys a project may not set; accepted only to be refused with a warning.
    pub approval_endpoint: Option<serde_json::Value>,
    pub approver: Option<serde_json::Value>,
    pub audit_log: Option<serde_json::Value>,
    pub allow_unix_sockets: Option<serde_json::Value>,
    pub unhidden_paths: Option<serde_json::Value>,
    pub keep_env: Option<serde_json::Value>,
    pub allowed_hosts: Option<serde_json::Value>,
    pub keep_background: Option<serde_json::Value>,
}

/// Parses a time limit as `--timeout` takes it: a duration such as `90s`, `10m` or
/// `1h 30m`, more than zero.
///
/// # Errors
/// Text that is not such a duration, or zero.
pub fn parse_time_limit(text: &str) -> Result<std::time::Duration, String> {
    let limit = humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is not a duration such as 30s, 10m or 1h 30m: {e}"))?;
    if limit.is_zero() {
        return Err("a time limit of 0 would end every command before it starts".into());
    }
    Ok(limit)
}

/// A configuration file's time limit (see [`parse_time_limit`]).
fn time_limit<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<std::time::Duration>, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse_time_limit(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// The limits each file asks for.
macro_rules! asked_limits {
    ($($file:ty),*) => {$(
        impl $file {
            pub fn limits(&self) -> Asked {
                Asked {
                    tmpfs_size: self.tmpfs_size,
                    pids: self.limit_pids,
                    memory: self.limit_memory,
                }
            }
        }
    )*};
}
asked_limits!(Managed, User, Project);

/// Why a configuration file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file is there but is not a valid configuration.
    #[error("invalid configuration file {}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
    /// The file, or a directory on its way, cannot be read: whether it exists is unknown.
    #[error("cannot read the configuration file {}: {reason}{hint}", path.display())]
    Unreadable {
        path: PathBuf,
        reason: std::io::Error,
        /// How to point sandgate elsewhere, when the path came from the environment.
        hint: String,
    },
}

/// Reads a JSON configuration file; a missing file is an empty configuration.
///
/// # Errors
/// A file that exists but cannot be parsed, or that cannot be read (it may exist and
/// narrow the policy): sandgate refuses to guess.
pub fn load<T: Default + for<'de> Deserialize<'de>>(path: &Path) -> Result<T, ConfigError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| ConfigError::Invalid {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(ConfigError::Unreadable {
            path: path.to_path_buf(),
            reason: e,
            hint: String::new(),
        }),
    }
}

/// Reads the user file `config.json` in [`user_dir`]. When it cannot be read, the error
/// names the variable the directory came from and how to choose another, since the usual
/// cause is a `HOME` that belongs to somebody else (a tool run as another uid with the
/// caller's environment).
///
/// # Errors
/// As [`load`].
pub fn load_user() -> Result<User, ConfigError> {
    let Some((dir, origin)) = user_dir_and_origin() else {
        return Ok(User::default());
    };
    load(&dir.join("config.json")).map_err(|e| match e {
        ConfigError::Unreadable { path, reason, .. } => {
            let named = match origin {
                "SANDGATE_CONFIG_DIR" => format!("SANDGATE_CONFIG_DIR={}", dir.display()),
                var => {
                    let value = std::env::var_os(var).unwrap_or_default();
                    format!("{var}={}", Path::new(&value).display())
                }
            };
            ConfigError::Unreadable {
                path,
                reason,
                hint: format!(
                    ". The directory comes from {named}, which this user (uid {}) cannot read: set HOME to this user's own home, or SANDGATE_CONFIG_DIR to a directory it can read",
                    nix::unistd::getuid()
                ),
            }
        }
        other => other,
    })
}

/// Where the managed file is (`SANDGATE_MANAGED_CONFIG` moves it for tests).
pub fn managed_path() -> PathBuf {
    std::env::var_os("SANDGATE_MANAGED_CONFIG")
        .map_or_else(|| PathBuf::from("/etc/sandgate/config.json"), PathBuf::from)
}

/// sandgate's user configuration directory: `SANDGATE_CONFIG_DIR`, else
/// `$XDG_CONFIG_HOME/sandgate`, else `~/.config/sandgate`.
pub fn user_dir() -> Option<PathBuf> {
    user_dir_and_origin().map(|(dir, _)| dir)
}

/// [`user_dir`] and the variable that named it.
fn user_dir_and_origin() -> Option<(PathBuf, &'static str)> {
    if let Some(dir) = std::env::var_os("SANDGATE_CONFIG_DIR") {
        return Some((PathBuf::from(dir), "SANDGATE_CONFIG_DIR"));
    }
    let (dir, var) = xdg("XDG_CONFIG_HOME", ".config")?;
    Some((dir.join("sandgate"), var))
}

/// The configuration and state directories a later call of this user reads when it runs
/// without the variables that moved this call's: `~/.config/sandgate` and
/// `~/.local/state/sandgate` under each of the caller's homes.
pub fn default_dirs() -> Vec<PathBuf> {
    super::home::caller_homes()
        .iter()
        .flat_map(|home| {
            [
                home.join(".config/sandgate"),
                home.join(".local/state/sandgate"),
            ]
        })
        .collect()
}

/// sandgate's state directory: `$XDG_STATE_HOME/sandgate`, else `~/.local/state/sandgate`.
pub fn state_dir() -> Option<PathBuf> {
    xdg("XDG_STATE_HOME", ".local/state").map(|(d, _)| d.join("sandgate"))
}

/// `$VAR`, else `$HOME/FALLBACK` — only under a home that exists: sandgate never creates
/// a home directory (as root it could, and would leave one that the user, once set up,
/// could not use). A home that cannot be looked at (beneath a directory this user cannot
/// search) is not taken for an absent one: its files are unreadable, and a configuration
/// there refuses the call instead of being skipped.
fn xdg(var: &'static str, fallback: &str) -> Option<(PathBuf, &'static str)> {
    let from_var = std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .map(|p| (p, var));
    from_var.or_else(|| {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| {
                h.is_absolute()
                    && std::fs::metadata(h).map_or_else(
                        |e| {
                            !matches!(
                                e.kind(),
                                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                            )
                        },
                        |m| m.is_dir(),
                    )
            })
            .map(|h| (h.join(fallback), "HOME"))
    })
}

/// The project layer after dropping what would widen, with a warning for each drop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Narrowing {
    /// The project's mode, when it is no wider than the standing one.
    pub mode: Option<Mode>,
    pub never: bool,
    pub protected_paths: Vec<String>,
    pub hidden_paths: Vec<String>,
    /// Hosts the project denies (denying only narrows).
    pub denied_hosts: Vec<String>,
    /// The project's time limit (it only ever shortens the call's).
    pub timeout: Option<std::time::Duration>,
    pub warnings: Vec<String>,
}

/// Keeps from `project` only what narrows `standing`.
pub fn narrowing(project: &Project, standing: Mode, approval: Approval) -> Narrowing {
    let mut out = Narrowing {
        protected_paths: project.protected_paths.clone(),
        hidden_paths: project.hidden_paths.clone(),
        denied_hosts: project.denied_hosts.clone(),
        timeout: project.timeout,
        ..Narrowing::default()
    };
    let mut ignore = |key: &str, why: &str| {
        out.warnings.push(format!(
            "project config: ignoring `{key}`: {why} (a project file may only narrow)"
        ))
    };
    let preset = project.preset.as_deref().map(super::preset::find);
    let mode_sources = [
        ("sandbox", project.sandbox),
        ("max_mode", project.max_mode),
        (
            "preset",
            preset
                .as_ref()
                .and_then(|p| p.as_ref().ok())
                .map(|p| p.mode),
        ),
    ];
    for (key, mode) in mode_sources {
        match mode {
            Some(m) if m > standing => ignore(key, &format!("{m} is wider than {standing}")),
            Some(m) => out.mode = Some(out.mode.map_or(m, |cur| cur.min(m))),
            None => {}
        }
    }
    if let Some(Err(e)) = &preset {
        ignore("preset", e);
    }
    let approvals = [
        ("approval", project.approval),
        ("preset", preset.and_then(Result::ok).map(|p| p.approval)),
    ];
    for (key, wanted) in approvals {
        match wanted {
            Some(Approval::Never) => out.never = true,
            Some(Approval::OnRequest) if approval == Approval::Never => {
                ignore(key, "on-request is wider than never")
            }
            _ => {}
        }
    }
    for (key, set) in [
        ("approval_endpoint", project.approval_endpoint.is_some()),
        ("approver", project.approver.is_some()),
        ("audit_log", project.audit_log.is_some()),
        ("allow_unix_sockets", project.allow_unix_sockets.is_some()),
        ("unhidden_paths", project.unhidden_paths.is_some()),
        ("keep_env", project.keep_env.is_some()),
        ("allowed_hosts", project.allowed_hosts.is_some()),
        ("keep_background", project.keep_background.is_some()),
    ] {
        if set {
            ignore(key, "only the user or managed configuration may set it");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_cannot_widen_but_can_narrow() {
        let wide = Project {
            sandbox: Some(Mode::FullAccess),
            max_mode: Some(Mode::FullAccess),
            approval: Some(Approval::OnRequest),
            approval_endpoint: Some(serde_json::json!("http://evil")),
            allow_unix_sockets: Some(serde_json::json!(["/run/docker.sock"])),
            unhidden_paths: Some(serde_json::json!(["~/.ssh"])),
            keep_env: Some(serde_json::json!(["AWS_SECRET_ACCESS_KEY"])),
            hidden_paths: vec!["secrets.env".into()],
            ..Project::default()
        };
        let n = narrowing(&wide, Mode::ReadOnly, Approval::Never);
        assert_eq!(n.mode, None);
        assert!(!n.never);
        assert_eq!(n.warnings.len(), 7, "{:?}", n.warnings);
        assert!(n
            .warnings
            .iter()
            .any(|w| w.contains("`allow_unix_sockets`")));
        assert!(n.warnings.iter().any(|w| w.contains("`unhidden_paths`")));
        assert!(n.warnings.iter().any(|w| w.contains("`keep_env`")));
        assert_eq!(n.hidden_paths, vec!["secrets.env".to_owned()]);
        assert!(n.warnings.iter().any(|w| w.contains("`sandbox`")));

        let narrow = Project {
            sandbox: Some(Mode::ReadOnly),
            approval: Some(Approval::Never),
            ..Project::default()
        };
        let n = narrowing(&narrow, Mode::WorkspaceWrite, Approval::OnRequest);
        assert_eq!(n.mode, Some(Mode::ReadOnly));
        assert!(n.never);
        assert!(n.warnings.is_empty());
    }

    #[test]
    fn a_project_preset_narrows_through_its_pair() {
        let p = Project {
            preset: Some("locked".into()),
            ..Project::default()
        };
        let n = narrowing(&p, Mode::WorkspaceWrite, Approval::OnRequest);
        assert_eq!((n.mode, n.never), (Some(Mode::ReadOnly), true));
    }

    #[test]
    fn missing_files_are_empty_and_broken_ones_are_errors() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        assert_eq!(
            load::<User>(&dir.path().join("none.json")).ok(),
            Some(User::default())
        );
        std::fs::write(dir.path().join("bad.json"), "{\"sandbox\": \"everything\"}")?;
        assert!(load::<User>(&dir.path().join("bad.json")).is_err());
        Ok(())
    }
}
