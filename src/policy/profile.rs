//! Profiles are data (`profiles/*.json`), embedded at build time so the binary works from
//! any directory. This module parses them and expands their placeholders into concrete,
//! canonical paths for one call.
//!
//! Placeholders: `$WORKSPACE` (the resolved workspace) and `$PTY` (every terminal device
//! behind stdin, stdout and stderr).

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
    Restricted(RestrictedSpec),
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
    pub network: Network,
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

/// The values placeholders expand to for one call.
pub struct Placeholders<'a> {
    pub workspace: &'a Path,
    pub ptys: Vec<PathBuf>,
}

impl Placeholders<'_> {
    /// Expands one profile entry into zero or more paths.
    fn expand(&self, entry: &str) -> Vec<PathBuf> {
        match entry {
            "$WORKSPACE" => vec![self.workspace.to_path_buf()],
            "$PTY" => self.ptys.clone(),
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
    }

    #[test]
    fn placeholders_expand() {
        let p = Placeholders {
            workspace: Path::new("/ws"),
            ptys: vec![],
        };
        assert_eq!(p.expand("$PTY"), Vec::<PathBuf>::new());
        assert_eq!(p.expand("$WORKSPACE"), vec![PathBuf::from("/ws")]);
        assert_eq!(p.expand("/dev/null"), vec![PathBuf::from("/dev/null")]);
    }
}
