//! Configuration layers, highest trust first: managed
//! (`/etc/sandgate/config.json`), flags, environment, user
//! (`$XDG_CONFIG_HOME/sandgate/config.json`), project (`.sandgate/config.json`).
//!
//! Flags and environment arrive through clap (a flag beats its `SANDGATE_*` variable);
//! this module reads the three files and merges them. The project file may only narrow:
//! a lower mode, `never`, extra protected paths. Anything in it that would widen is
//! ignored with a warning naming the key. The managed file sets a ceiling nothing below it
//! can exceed.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::mode::Mode;
use super::preset::Approval;

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
    /// Keys a project may not set; accepted only to be refused with a warning.
    pub approval_endpoint: Option<serde_json::Value>,
    pub approver: Option<serde_json::Value>,
    pub audit_log: Option<serde_json::Value>,
    pub allow_unix_sockets: Option<serde_json::Value>,
    pub unhidden_paths: Option<serde_json::Value>,
    pub keep_env: Option<serde_json::Value>,
}

/// Why a configuration file cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration file {}: {reason}", path.display())]
pub struct ConfigError {
    pub path: PathBuf,
    pub reason: String,
}

/// Reads a JSON configuration file; a missing file is an empty configuration.
///
/// # Errors
/// A file that exists but cannot be read or parsed: sandgate refuses to guess.
pub fn load<T: Default + for<'de> Deserialize<'de>>(path: &Path) -> Result<T, ConfigError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(ConfigError {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }),
    }
}

/// Where the managed file is (`SANDGATE_MANAGED_CONFIG` moves it for tests).
pub fn managed_path() -> PathBuf {
    std::env::var_os("SANDGATE_MANAGED_CONFIG")
        .map_or_else(|| PathBuf::from("/etc/sandgate/config.json"), PathBuf::from)
}

/// sandgate's user configuration directory: `SANDGATE_CONFIG_DIR`, else
/// `$XDG_CONFIG_HOME/sandgate`, else `~/.config/sandgate`.
pub fn user_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SANDGATE_CONFIG_DIR") {
        return Some(PathBuf::from(dir));
    }
    xdg("XDG_CONFIG_HOME", ".config").map(|d| d.join("sandgate"))
}

/// sandgate's state directory: `$XDG_STATE_HOME/sandgate`, else `~/.local/state/sandgate`.
pub fn state_dir() -> Option<PathBuf> {
    xdg("XDG_STATE_HOME", ".local/state").map(|d| d.join("sandgate"))
}

/// `$VAR`, else `$HOME/FALLBACK` — only under a home that exists: sandgate never creates
/// a home directory (as root it could, and would leave one that the user, once set up,
/// could not use).
fn xdg(var: &str, fallback: &str) -> Option<PathBuf> {
    let from_var = std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    from_var.or_else(|| {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute() && h.is_dir())
            .map(|h| h.join(fallback))
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
    pub warnings: Vec<String>,
}

/// Keeps from `project` only what narrows `standing`.
pub fn narrowing(project: &Project, standing: Mode, approval: Approval) -> Narrowing {
    let mut out = Narrowing {
        protected_paths: project.protected_paths.clone(),
        hidden_paths: project.hidden_paths.clone(),
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
