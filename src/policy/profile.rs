//! Profiles are data (`profiles/*.json`), embedded at build time so the binary works from
//! any directory. This module parses them and expands their placeholders into concrete,
//! canonical paths for one call.
//!
//! Placeholders: `$WORKSPACE` (the resolved workspace), `$PTY` (every terminal device
//! behind stdin, stdout and stderr), `$HOME/…` (beneath every home of the caller: `$HOME`
//! and the passwd entry's, when they differ) and `$SANDGATE_APPROVAL_TOKEN_FILE` (the
//! endpoint's bearer token file, skipped when unset).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::mode::Mode;
use super::PolicyError;

const READ_ONLY: &str = include_str!("../../profiles/read-only.json");
const WORKSPACE_WRITE: &str = include_str!("../../profiles/workspace-write.json");
const FULL_ACCESS: &str = include_str!("../../profiles/full-access.json");

/// A profile as written in `profiles/<mode>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "confinement", rename_all = "kebab-case")]
pub enum ProfileSpec {
    /// The command runs under every enforcement layer.
    Restricted(Box<RestrictedSpec>),
    /// The command runs with sandgate's own rights.
    None { mode: String, description: String },
}

/// The restricted part of a profile, before placeholders are expanded.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestrictedSpec {
    pub mode: String,
    pub description: String,
    pub writable_roots: Vec<String>,
    pub protected_subpaths: Vec<String>,
    pub devices: Vec<String>,
    pub temp: Temp,
    /// Paths that stay read-only whenever a writable root contains them, whether or not
    /// they exist (files a later login or tool runs: shell startup files, `~/.local/bin`).
    pub persistent_paths: Vec<String>,
    /// Toolchain caches that are writable copy-on-write: the sandbox sees the host's
    /// content and writes to a layer of its workspace's own (see `sandbox::caches`).
    pub caches: Vec<CacheSpec>,
    /// Paths that read as empty (credentials).
    pub hidden_paths: Vec<String>,
    /// What the hidden-files rule scans besides the homes' dot-entries, and what not.
    pub secret_rule: SecretRuleSpec,
    /// Environment variables that are not passed to the command.
    pub secret_env: SecretEnvSpec,
    pub network: Network,
}

/// The hidden-files rule's reach (see `policy::secrets::rule`): trees of the homes it does
/// not look into, besides the toolchain caches — installed software, readable by design,
/// thousands of files each — and the system directories it scans when the caller is root.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SecretRuleSpec {
    pub skip: Vec<String>,
    pub system: Vec<String>,
}

/// Which environment variables look like secrets.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SecretEnvSpec {
    /// A name containing one of these (ASCII case-insensitively) is withheld.
    pub name_contains: Vec<String>,
    /// A name with one of these as a word between underscores (`GITHUB_PAT`, `MYSQL_PWD`)
    /// is withheld: too short to look for inside words (`PATH`).
    #[serde(default)]
    pub name_words: Vec<String>,
    /// Names that contain a pattern without being secrets (`GIT_AUTHOR_NAME`).
    pub except: Vec<String>,
}

/// One copy-on-write cache of a profile: a directory (`{"dir": PATH}`, an overlay), or a
/// single file (`{"file": PATH}`, a per-workspace copy: cargo's lock files).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum CacheSpec {
    Dir(String),
    File(String),
}

/// What `/tmp` and `/dev/shm` are inside the sandbox. Never the host's: its `/tmp` holds
/// the user's tmux, X11, ssh-agent and editor sockets, FIFOs and shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Temp {
    /// Empty ones, gone after the call.
    PerCall,
    /// `/tmp` is the workspace's own directory, kept between calls in that workspace;
    /// `/dev/shm` is empty per call.
    PerWorkspace,
}

/// What the profile allows on the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// No IP sockets; unix sockets only beneath the writable roots.
    None,
}

/// Returns the shipped profile for `mode`.
///
/// # Errors
/// A shipped profile that does not parse, or that names another mode, is a build defect;
/// it is reported as a configuration error rather than a panic.
pub fn shipped(mode: Mode) -> Result<ProfileSpec, PolicyError> {
    let text = match mode {
        Mode::ReadOnly => READ_ONLY,
        Mode::WorkspaceWrite => WORKSPACE_WRITE,
        Mode::FullAccess => FULL_ACCESS,
    };
    let spec: ProfileSpec = serde_json::from_str(text).map_err(|e| PolicyError::BadProfile {
        mode,
        reason: e.to_string(),
    })?;
    let named = match &spec {
        ProfileSpec::Restricted(r) => &r.mode,
        ProfileSpec::None { mode, .. } => mode,
    };
    if named.parse::<Mode>().ok() != Some(mode) {
        return Err(PolicyError::BadProfile {
            mode,
            reason: format!("it names mode {named:?}"),
        });
    }
    Ok(spec)
}

/// The session's runtime directories: `$XDG_RUNTIME_DIR` (when absolute) and
/// `/run/user/UID` of the effective uid — where a login session keeps its agents' sockets
/// and tools their short-lived credentials (a container registry's `auth.json`).
pub fn runtime_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .into_iter()
        .collect();
    let by_uid = PathBuf::from(format!("/run/user/{}", nix::unistd::geteuid()));
    if !dirs.contains(&by_uid) {
        dirs.push(by_uid);
    }
    dirs
}

/// The values placeholders expand to for one call.
pub struct Placeholders<'a> {
    pub workspace: &'a Path,
    pub ptys: Vec<PathBuf>,
    /// The caller's home directories (see [`super::Env::homes`]).
    pub homes: &'a [PathBuf],
    pub approval_token_file: Option<PathBuf>,
}

impl Placeholders<'_> {
    /// Expands one profile entry into zero or more paths.
    pub fn expand(&self, entry: &str) -> Vec<PathBuf> {
        if let Some(rest) = entry.strip_prefix("$HOME/") {
            return self.homes.iter().map(|h| h.join(rest)).collect();
        }
        match entry {
            "$WORKSPACE" => vec![self.workspace.to_path_buf()],
            "$PTY" => self.ptys.clone(),
            "$SANDGATE_APPROVAL_TOKEN_FILE" => self.approval_token_file.iter().cloned().collect(),
            "$RUNTIME_DIR" => runtime_dirs(),
            literal => vec![PathBuf::from(literal)],
        }
    }

    /// Expands and canonicalises entries, dropping those that do not exist on this machine
    /// (a profile may name a device a host lacks).
    pub fn existing(&self, entries: &[String]) -> BTreeSet<PathBuf> {
        entries
            .iter()
            .flat_map(|e| self.expand(e))
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_profile_parses_and_names_its_mode() {
        for mode in Mode::ALL {
            assert!(shipped(mode).is_ok(), "{mode}");
        }
        assert!(matches!(
            shipped(Mode::FullAccess),
            Ok(ProfileSpec::None { .. })
        ));
    }

    #[test]
    fn read_only_writes_nowhere_and_workspace_write_only_in_the_workspace() {
        let (Ok(ProfileSpec::Restricted(ro)), Ok(ProfileSpec::Restricted(ww))) =
            (shipped(Mode::ReadOnly), shipped(Mode::WorkspaceWrite))
        else {
            panic!("both must be restricted");
        };
        assert!(ro.writable_roots.is_empty());
        assert_eq!(ro.temp, Temp::PerCall);
        assert_eq!(ww.writable_roots, ["$WORKSPACE"]);
        assert_eq!(ww.temp, Temp::PerWorkspace);
        assert!(ro.caches.is_empty());
        assert!(ww
            .caches
            .contains(&CacheSpec::Dir("$HOME/.cargo/registry".into())));
        assert!(ww
            .caches
            .contains(&CacheSpec::File("$HOME/.cargo/.package-cache".into())));
    }

    #[test]
    fn both_restricted_profiles_hide_credentials_and_guard_startup_files() {
        for mode in [Mode::ReadOnly, Mode::WorkspaceWrite] {
            let Ok(ProfileSpec::Restricted(spec)) = shipped(mode) else {
                panic!("{mode} must be restricted");
            };
            for hidden in ["$HOME/.ssh", "$HOME/.aws", "$SANDGATE_APPROVAL_TOKEN_FILE"] {
                assert!(spec.hidden_paths.iter().any(|p| p == hidden), "{mode}");
            }
            for persistent in ["$HOME/.bashrc", "$HOME/.zshrc", "$HOME/.local/bin"] {
                assert!(
                    spec.persistent_paths.iter().any(|p| p == persistent),
                    "{mode}"
                );
            }
            assert!(spec.secret_env.name_contains.iter().any(|p| p == "KEY"));
        }
    }

    #[test]
    fn placeholders_expand() {
        let homes = [PathBuf::from("/home/a"), PathBuf::from("/root")];
        let p = Placeholders {
            workspace: Path::new("/ws"),
            ptys: vec![],
            homes: &homes,
            approval_token_file: None,
        };
        assert_eq!(p.expand("$PTY"), Vec::<PathBuf>::new());
        assert_eq!(
            p.expand("$HOME/.ssh"),
            vec![PathBuf::from("/home/a/.ssh"), PathBuf::from("/root/.ssh")]
        );
        assert_eq!(
            p.expand("$SANDGATE_APPROVAL_TOKEN_FILE"),
            Vec::<PathBuf>::new()
        );
        assert_eq!(p.expand("$WORKSPACE"), vec![PathBuf::from("/ws")]);
        assert_eq!(p.expand("/dev/null"), vec![PathBuf::from("/dev/null")]);
    }
}
