//! Finds the workspace for a call: the explicit one, else the git top-level of the current
//! directory that git itself would use, else the current directory. A derived workspace
//! that is, or holds, the caller's home is refused: running from `~` must not make
//! `~/.bashrc` writable by accident. An explicit one is the caller's choice (persistence
//! paths in it stay read-only all the same).
//!
//! The git top-level is found by walking up for a `.git` that may belong to a repository
//! rather than by running `git rev-parse`: sandgate starts before every command an agent
//! runs, and a child process here would cost more than the rest of the policy stage
//! together.
//!
//! A repository is someone else's when git says so (`safe.directory`): its top directory,
//! its `.git` and, for a `.git` file, the git directory that file names must all belong to
//! the caller — as root, to root or to the user `SUDO_UID` names, git's own rule for
//! `sudo make install`. git refuses to use anyone else's repository ("dubious ownership")
//! unless its configuration lists it in `safe.directory`; a workspace derived from one
//! would hand the command another user's tree. So a repository that is the caller's is
//! taken at once, and only for one that is not is git asked (its own matching of
//! `safe.directory`, includes and `*` included); anything but a yes leaves the workspace
//! at the current directory.

use std::os::unix::fs::MetadataExt;
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
        None => git_toplevel(cwd)
            .filter(|top| git_would_use(top))
            .unwrap_or_else(|| cwd.to_path_buf()),
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
    if roots::is_sandgate_state(&canonical) {
        return Err(PolicyError::SandgateStateAsRoot {
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

/// Whether git would use the repository at `top` (see the module docs): the caller's own,
/// or listed in `safe.directory` as git reads it.
fn git_would_use(top: &Path) -> bool {
    let caller = Caller::current();
    let owned = ownership_paths(top).is_some_and(|paths| {
        paths
            .iter()
            .all(|p| caller.owns(p.symlink_metadata().ok().map(|m| m.uid())))
    });
    owned || git_trusts(top)
}

/// The paths git checks the owner of for the repository at `top`: the top directory, the
/// `.git` and, when `.git` is a file, the git directory it names (relative to `top` when
/// relative). `None` for a `.git` file that names nothing readable.
fn ownership_paths(top: &Path) -> Option<Vec<PathBuf>> {
    let dot_git = top.join(".git");
    let mut paths = vec![top.to_path_buf(), dot_git.clone()];
    if dot_git.symlink_metadata().is_ok_and(|m| m.is_file()) {
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let named = text.lines().next()?.strip_prefix("gitdir:")?.trim();
        paths.push(top.join(named));
    }
    Some(paths)
}

/// Who counts as the owner git accepts: the effective uid, and as root also the uid in
/// `SUDO_UID`, as git reads it.
struct Caller {
    euid: u32,
    sudo_uid: Option<u32>,
}

impl Caller {
    fn current() -> Caller {
        let euid = nix::unistd::geteuid().as_raw();
        Caller {
            euid,
            sudo_uid: (euid == 0)
                .then(|| std::env::var("SUDO_UID").ok()?.trim().parse().ok())
                .flatten(),
        }
    }

    /// Whether a path owned by `uid` (`None`: it cannot be looked at) is the caller's.
    fn owns(&self, uid: Option<u32>) -> bool {
        match uid {
            Some(uid) if uid == self.euid => true,
            Some(uid) => self.euid == 0 && self.sudo_uid == Some(uid),
            None => false,
        }
    }
}

/// Asks the caller's git whether it would use the repository at `top`: `git rev-parse`
/// there, with git's own environment for finding a repository removed and the search
/// stopped at `top`, succeeds only for a repository git trusts. git stops at the ownership
/// check before it reads anything of an untrusted repository; a trusted one is what the
/// caller's own `git status` there reads anyway. No git, or any failure, is a no.
fn git_trusts(top: &Path) -> bool {
    let mut git = std::process::Command::new("git");
    git.arg("-C")
        .arg(top)
        .args(["rev-parse", "--git-dir"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_COMMON_DIR",
        "GIT_DISCOVERY_ACROSS_FILESYSTEM",
        "GIT_TEST_ASSUME_DIFFERENT_OWNER",
    ] {
        git.env_remove(var);
    }
    if let Some(parent) = top.parent() {
        git.env("GIT_CEILING_DIRECTORIES", parent);
    }
    git.status().is_ok_and(|status| status.success())
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
        std::fs::create_dir_all(top.join(".git/worktrees/linked"))?;
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

    #[test]
    fn git_s_owner_rule_for_root_and_sudo() {
        let user = Caller {
            euid: 1000,
            sudo_uid: None,
        };
        assert!(user.owns(Some(1000)));
        assert!(!user.owns(Some(0)));
        assert!(!user.owns(None));
        let root = Caller {
            euid: 0,
            sudo_uid: None,
        };
        assert!(root.owns(Some(0)));
        assert!(!root.owns(Some(1000)));
        let sudo = Caller {
            euid: 0,
            sudo_uid: Some(1000),
        };
        assert!(sudo.owns(Some(0)) && sudo.owns(Some(1000)));
        assert!(!sudo.owns(Some(1001)));
    }

    #[test]
    fn a_dot_git_file_adds_the_directory_it_names() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let top = std::fs::canonicalize(dir.path())?;
        assert_eq!(
            ownership_paths(&top),
            Some(vec![top.clone(), top.join(".git")])
        );
        std::fs::write(top.join(".git"), "gitdir: ../main/.git/worktrees/w\n")?;
        assert_eq!(
            ownership_paths(&top),
            Some(vec![
                top.clone(),
                top.join(".git"),
                top.join("../main/.git/worktrees/w")
            ])
        );
        std::fs::write(top.join(".git"), "not a link\n")?;
        assert_eq!(ownership_paths(&top), None);
        Ok(())
    }
}
