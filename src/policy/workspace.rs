//! Finds the workspace for a call: the explicit one, else the git top-level of the current
//! directory, else the current directory. A derived workspace that is, or holds, the
//! caller's home is refused: running from `~` must not make `~/.bashrc` writable by
//! accident. An explicit one is the caller's choice (persistence paths in it stay
//! read-only all the same).
//!
//! The git top-level is found by walking up for a `.git` that may belong to a repository
//! rather than by running `git rev-parse`: sandgate starts before every command an agent
//! runs, and a child process here would cost more than the rest of the policy stage
//! together.

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
        return Err(PolicyError::WorkspaceIsRoot {
            chosen: explicit.is_some(),
        });
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

/// The workspace of a call that names none and runs inside another sandgate's sandbox,
/// from a directory beneath that sandbox's workspace: the parent's. The nested call can
/// never write more than its parent lets it, and it can reuse the parent's mount namespace
/// (it may not make its own) only for the same workspace; deriving one from git instead
/// could land on a repository around the parent's workspace and refuse the call.
pub fn inherited(parent_workspace: Option<&Path>, cwd: &Path) -> Option<PathBuf> {
    parent_workspace
        .filter(|parent| cwd.starts_with(parent))
        .map(Path::to_path_buf)
}

/// Returns the nearest ancestor of `cwd` (itself included) whose `.git` may belong to a
/// repository: a file (the `gitdir:` link of a linked worktree or submodule), or a directory
/// holding any of what makes one. A `.git` directory holding none of it — an empty one left
/// behind, or made by anyone in a shared directory such as `/var/tmp` — is passed over, as
/// git passes over it: taking it would make everything beside the project writable.
fn git_toplevel(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .find(|dir| {
            let dot_git = dir.join(".git");
            match std::fs::metadata(&dot_git) {
                Ok(meta) if meta.is_dir() => !holds_no_repository(&dot_git),
                Ok(_) => true,
                Err(_) => false,
            }
        })
        .map(Path::to_path_buf)
}

/// Whether the directory `dot_git` lacks every entry a git directory has: `HEAD`,
/// `objects`, `refs`. Git itself wants all three, but a sandboxed command can remove
/// `HEAD` from a guarded repository (the supervisor performs git's top-level removals), and
/// the next call from there would then get the repository around it; `objects` and `refs`
/// are mount points it cannot remove, so a repository never turns into one passed over.
fn holds_no_repository(dot_git: &Path) -> bool {
    ["HEAD", "objects", "refs"]
        .iter()
        .all(|name| dot_git.join(name).symlink_metadata().is_err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_refused_as_a_workspace() {
        assert!(matches!(
            resolve(Some(Path::new("/")), Path::new("/"), &[]),
            Err(PolicyError::WorkspaceIsRoot { chosen: true })
        ));
    }

    /// Makes `dir/.git` a repository as git sees one.
    fn init_repository(dir: &Path) -> std::io::Result<()> {
        for sub in ["objects", "refs/heads"] {
            std::fs::create_dir_all(dir.join(".git").join(sub))?;
        }
        std::fs::write(dir.join(".git/HEAD"), "ref: refs/heads/main\n")
    }

    #[test]
    fn git_toplevel_is_found_from_a_subdirectory() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        init_repository(dir.path())?;
        std::fs::create_dir_all(dir.path().join("a/b"))?;
        let found = resolve(None, &dir.path().join("a/b"), &[]).map_err(std::io::Error::other)?;
        assert_eq!(found, std::fs::canonicalize(dir.path())?);
        Ok(())
    }

    #[test]
    fn a_dot_git_that_holds_no_repository_is_passed_over() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let top = std::fs::canonicalize(dir.path())?;
        init_repository(&top)?;
        // An empty `.git`, and one holding something else: git passes over both.
        std::fs::create_dir_all(top.join("stray/.git"))?;
        std::fs::create_dir_all(top.join("stray/other/.git"))?;
        std::fs::write(top.join("stray/other/.git/description"), "x\n")?;
        std::fs::create_dir_all(top.join("stray/other/a"))?;
        for cwd in [top.join("stray"), top.join("stray/other/a")] {
            let found = resolve(None, &cwd, &[]).map_err(std::io::Error::other)?;
            assert_eq!(found, top, "from {}", cwd.display());
        }
        // A linked worktree's `.git` file, a repository in a subdirectory, and one whose
        // `HEAD` a sandboxed command removed are taken: the walk never goes wider for them.
        std::fs::create_dir_all(top.join("linked/a"))?;
        std::fs::write(
            top.join("linked/.git"),
            "gitdir: ../.git/worktrees/linked\n",
        )?;
        let nested = top.join("stray/other/a");
        init_repository(&nested)?;
        let headless = top.join("headless");
        init_repository(&headless)?;
        std::fs::remove_file(headless.join(".git/HEAD"))?;
        std::fs::create_dir_all(headless.join("src"))?;
        for (cwd, want) in [
            (top.join("linked/a"), top.join("linked")),
            (nested.clone(), nested),
            (headless.join("src"), headless),
        ] {
            let found = resolve(None, &cwd, &[]).map_err(std::io::Error::other)?;
            assert_eq!(found, want, "from {}", cwd.display());
        }
        Ok(())
    }

    #[test]
    fn a_derived_workspace_holding_home_is_refused_an_explicit_one_is_not() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let home = std::fs::canonicalize(dir.path())?.join("home");
        std::fs::create_dir_all(home.join("src"))?;
        let homes = [home.clone()];
        // Whether the temp directory lies in a repository or not, a workspace derived from
        // these holds home.
        for cwd in [home.clone(), dir.path().to_path_buf()] {
            assert!(matches!(
                resolve(None, &cwd, &homes),
                Err(PolicyError::WorkspaceHoldsHome { .. })
            ));
            assert!(resolve(Some(&home), &cwd, &homes).is_ok());
        }
        // A project beneath home is not home: its own repository stops the walk up.
        init_repository(&home.join("src"))?;
        assert_eq!(
            resolve(None, &home.join("src"), &homes).map_err(std::io::Error::other)?,
            home.join("src")
        );
        Ok(())
    }
}
