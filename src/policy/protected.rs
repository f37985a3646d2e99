//! Works out which paths inside the writable roots must stay read-only for one call
//! (DESIGN §3.4), following git's own indirections.
//!
//! A profile names protected subpaths relative to the workspace (`.git/hooks`,
//! `.git/config`, `.sandgate`). When `.git` is a file (worktrees, submodules) its `gitdir:`
//! line names the real git directory, and a worktree's `commondir` names the shared one; the
//! hooks and config there are protected too. Every git directory is *pinned*: bound onto
//! itself so it is a mount point, which the kernel refuses to rename, remove or replace —
//! otherwise a command could move `.git` aside and plant a fresh one with hooks of its own.
//! A `.git` file is bound read-only, so it cannot be pointed elsewhere.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The paths a call keeps out of reach of writes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Protected {
    /// Bound read-only (their content and their names are frozen).
    pub read_only: BTreeSet<PathBuf>,
    /// Bound read-write onto themselves, only so that they cannot be renamed or replaced.
    /// (git directories: git must still write objects, refs and the index there)
    pub pinned: BTreeSet<PathBuf>,
}

/// Returns the protected and pinned paths for `workspace` that exist now.
pub fn resolve(workspace: &Path, subpaths: &[String]) -> Protected {
    let mut out = Protected::default();
    let dot_git = workspace.join(".git");
    let git_dirs = git_dirs(&dot_git);
    if dot_git.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
        out.read_only.insert(dot_git.clone());
    }
    out.pinned.extend(
        git_dirs
            .iter()
            .filter_map(|d| std::fs::canonicalize(d).ok())
            .filter(|d| d.is_dir()),
    );
    for sub in subpaths {
        let sub = Path::new(sub);
        let targets: Vec<PathBuf> = match sub.strip_prefix(".git") {
            Ok(rest) if !rest.as_os_str().is_empty() => {
                git_dirs.iter().map(|dir| dir.join(rest)).collect()
            }
            _ => vec![workspace.join(sub)],
        };
        for target in targets {
            if let Ok(canonical) = std::fs::canonicalize(&target) {
                out.read_only.insert(canonical);
            }
        }
    }
    out
}

/// Returns the git directories behind a workspace's `.git`: the directory itself, or the
/// `gitdir:` target of a `.git` file plus its `commondir`.
fn git_dirs(dot_git: &Path) -> Vec<PathBuf> {
    let Ok(meta) = dot_git.symlink_metadata() else {
        return vec![];
    };
    if meta.is_dir() {
        return vec![dot_git.to_path_buf()];
    }
    let Some(base) = dot_git.parent() else {
        return vec![];
    };
    let Ok(text) = std::fs::read_to_string(dot_git) else {
        return vec![];
    };
    let Some(target) = text.lines().find_map(|l| l.strip_prefix("gitdir:")) else {
        return vec![];
    };
    let gitdir = base.join(target.trim());
    let mut dirs = vec![gitdir.clone()];
    if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir")) {
        dirs.push(gitdir.join(common.trim()));
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subpaths() -> Vec<String> {
        vec![
            ".git/hooks".into(),
            ".git/config".into(),
            ".sandgate".into(),
        ]
    }

    #[test]
    fn a_plain_repository_pins_dot_git_and_protects_hooks_and_config() -> std::io::Result<()> {
        let ws = tempfile::tempdir()?;
        let ws = std::fs::canonicalize(ws.path())?;
        std::fs::create_dir_all(ws.join(".git/hooks"))?;
        std::fs::write(ws.join(".git/config"), "")?;
        let p = resolve(&ws, &subpaths());
        assert_eq!(p.pinned, BTreeSet::from([ws.join(".git")]));
        assert_eq!(
            p.read_only,
            BTreeSet::from([ws.join(".git/hooks"), ws.join(".git/config")])
        );
        Ok(())
    }

    #[test]
    fn a_worktree_protects_the_real_and_the_common_git_dir() -> std::io::Result<()> {
        let root = tempfile::tempdir()?;
        let root = std::fs::canonicalize(root.path())?;
        let common = root.join("main/.git");
        let wt = common.join("worktrees/wt");
        std::fs::create_dir_all(common.join("hooks"))?;
        std::fs::create_dir_all(&wt)?;
        std::fs::write(common.join("config"), "")?;
        std::fs::write(wt.join("commondir"), "../..\n")?;
        std::fs::write(wt.join("config"), "")?;
        let ws = root.join("wt");
        std::fs::create_dir_all(&ws)?;
        std::fs::write(ws.join(".git"), format!("gitdir: {}\n", wt.display()))?;
        let p = resolve(&ws, &subpaths());
        assert_eq!(p.pinned, BTreeSet::from([wt.clone(), common.clone()]));
        assert_eq!(
            p.read_only,
            BTreeSet::from([
                ws.join(".git"),
                wt.join("config"),
                common.join("hooks"),
                common.join("config")
            ])
        );
        Ok(())
    }
}
