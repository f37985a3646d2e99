//! Finds the workspace for a call: the explicit one, else the git top-level of the current
//! directory, else the current directory. A derived workspace that is, or holds, the
//! caller's home is refused: running from `~` must not make `~/.bashrc` writable by
//! accident. An explicit one is the caller's choice (persistence paths in it stay
//! read-only all the same).
//!
//! The git top-level is found by walking up for a `.git` entry rather than by running
//! `git rev-parse`: sandgate starts before every command an agent runs, and a child process
//! here would cost more than the rest of the policy stage together.

use std::path::{Path, PathBuf};

use super::roots::{self, Resolved};
use super::PolicyError;

/// Returns the canonical workspace, refusing `/`.
///
/// # Errors
/// See [`resolve_with_links`].
pub fn resolve(
    explicit: Option<&Path>,
    cwd: &Path,
    homes: &[PathBuf],
) -> Result<PathBuf, PolicyError> {
    resolve_with_links(explicit, cwd, homes).map(|r| r.path)
}

/// Returns the canonical workspace and the symlinks followed to reach it.
///
/// # Errors
/// The workspace must exist, be a directory, and not be `/` (a writable `/` is full access
/// under another name) nor `/tmp` or `/dev/shm`; a derived one must not be or hold one of
/// `homes` (canonical).
pub fn resolve_with_links(
    explicit: Option<&Path>,
    cwd: &Path,
    homes: &[PathBuf],
) -> Result<Resolved, PolicyError> {
    let candidate = match explicit {
        Some(dir) => cwd.join(dir),
        None => git_toplevel(cwd).unwrap_or_else(|| cwd.to_path_buf()),
    };
    let resolved = roots::resolve(&candidate).map_err(|source| PolicyError::Workspace {
        path: candidate.clone(),
        source,
    })?;
    let canonical = resolved.path.clone();
    if !canonical.is_dir() {
        return Err(PolicyError::WorkspaceNotDir(canonical));
    }
    if canonical == Path::new("/") {
        return Err(PolicyError::WorkspaceIsRoot);
    }
    if roots::is_shared_temp(&canonical) {
        return Err(PolicyError::SharedTempAsRoot {
            what: "the workspace",
            path: canonical,
        });
    }
    if explicit.is_none() {
        if let Some(home) = super::home::held_by(&canonical, homes) {
            return Err(PolicyError::WorkspaceHoldsHome {
                workspace: canonical,
                home: home.clone(),
            });
        }
    }
    Ok(resolved)
}

/// Returns the nearest ancestor of `cwd` (itself included) that holds a `.git` entry.
fn git_toplevel(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .find(|dir| dir.join(".git").symlink_metadata().is_ok())
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_refused_as_a_workspace() {
        assert!(matches!(
            resolve(Some(Path::new("/")), Path::new("/"), &[]),
            Err(PolicyError::WorkspaceIsRoot)
        ));
    }

    #[test]
    fn git_toplevel_is_found_from_a_subdirectory() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir_all(dir.path().join(".git"))?;
        std::fs::create_dir_all(dir.path().join("a/b"))?;
        let found = resolve(None, &dir.path().join("a/b"), &[]).map_err(std::io::Error::other)?;
        assert_eq!(found, std::fs::canonicalize(dir.path())?);
        Ok(())
    }

    #[test]
    fn a_derived_workspace_holding_home_is_refused_an_explicit_one_is_not() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let home = std::fs::canonicalize(dir.path())?.join("home");
        std::fs::create_dir_all(home.join("src"))?;
        let homes = [home.clone()];
        for cwd in [home.clone(), dir.path().to_path_buf()] {
            assert!(matches!(
                resolve(None, &cwd, &homes),
                Err(PolicyError::WorkspaceHoldsHome { .. })
            ));
            assert!(resolve(Some(&home), &cwd, &homes).is_ok());
        }
        assert!(resolve(None, &home.join("src"), &homes).is_ok());
        Ok(())
    }
}
