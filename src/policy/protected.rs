//! Works out what inside the writable roots must stay out of reach of writes for one call:
//! git's metadata, and the paths the profile and project name.
//!
//! **Git.** Whatever git on the host reads or runs later must not be the sandbox's to
//! write: `config`, `config.worktree`, `commondir` (it moves where config and hooks are
//! read from), `hooks`, `info/attributes` and a worktree's `gitdir` — whether or not they
//! exist when the call starts. Every git directory that exists at the start is *guarded*: the
//! workspace's own (a `.git` directory, or the `gitdir:` target of a `.git` file and its
//! common dir), each submodule's under `modules/`, and each linked worktree's under
//! `worktrees/`. A guarded directory's top level is mounted read-only, so the kernel
//! refuses every create, rename and removal there whatever a racing path says; its other
//! subdirectories (`objects`, `refs`, `logs`, …) stay writable, and the supervisor
//! performs the top-level operations git needs (lock files, `rebase-merge/`, …) itself,
//! refusing the metadata names. See `supervisor/git.rs`.
//!
//! A guarded directory is also a mount point, which the kernel refuses to rename, remove
//! or replace: `.git` cannot be moved aside for a fresh one. A `.git` *file* (of the
//! workspace, or of a submodule checkout listed in `.gitmodules`) is bound read-only, so it
//! cannot be pointed elsewhere, and a submodule checkout cannot be moved aside.
//!
//! The configuration git reads (the repository's and the user's) may already point git at
//! a place in the workspace — `core.hooksPath`, `include.path`; those places are protected
//! too.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::gitconfig;

/// The entries of a git directory's top level that no sandboxed command may create,
/// change or remove.
pub const GIT_METADATA: [&str; 5] = ["config", "config.worktree", "commondir", "hooks", "gitdir"];

/// The same in its `info/` directory: `attributes` can route files through a filter or
/// diff driver, which runs a command. (`info/refs`, `exclude`, `sparse-checkout` run
/// nothing, and `git gc` writes `refs`.)
pub const GIT_INFO_METADATA: [&str; 1] = ["attributes"];

/// The directory of [`GIT_INFO_METADATA`].
pub const GIT_INFO: &str = "info";

/// How deep submodule git directories are looked for under `modules/` (names may hold
/// slashes, and submodules nest).
const MAX_MODULE_DEPTH: usize = 8;

/// The paths a call keeps out of reach of writes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Protected {
    /// Bound read-only (their content and their names are frozen).
    pub read_only: BTreeSet<PathBuf>,
    /// Guarded git directories: top level read-only, see the module docs.
    pub git_dirs: BTreeSet<PathBuf>,
    /// Their existing subdirectories other than metadata, which stay writable.
    pub git_writable: BTreeSet<PathBuf>,
    /// Places the configuration points git at (`core.hooksPath`, includes), as resolved
    /// from the configuration; they may not exist.
    pub git_pointers: BTreeSet<PathBuf>,
    /// Files the configuration names as programs git runs (`core.fsmonitor =
    /// tools/fsmon.sh`, `diff.x.textconv = python3 tools/conv.py`, an alias `!./x`), that
    /// exist: kept read-only like the places in `git_pointers`, so that the user's own
    /// setting cannot be made to run the command's code. One that does not exist (or a
    /// word that was no path) protects nothing.
    pub program_files: BTreeSet<PathBuf>,
    /// The names of the directories a relative `core.hooksPath` in any configuration read
    /// names (`.githooks` for `.githooks`, `_` for `.husky/_`): git finds such a path from
    /// the top of whichever working tree it runs in, a repository made inside included, so
    /// a directory of that name anywhere obeys the seal rules of a `hooks` directory.
    pub hook_dir_names: BTreeSet<Vec<u8>>,
    /// The project's own protected paths (from `subpaths`), also in `read_only`: the
    /// directories on their way are pinned, so that none is moved from under them.
    pub listed: BTreeSet<PathBuf>,
    /// Submodule checkouts in the workspace: bound onto themselves so they cannot be moved
    /// aside for a directory whose `.git` points elsewhere (their `.git` file is in
    /// `read_only`).
    pub git_checkouts: BTreeSet<PathBuf>,
}

/// Returns what to protect for `workspace`: `subpaths` are relative to it (a `.git/…`
/// one applies to every guarded git directory); `home` is for the user's git
/// configuration and `~` in values.
pub fn resolve(workspace: &Path, subpaths: &[String], home: Option<&Path>) -> Protected {
    let mut out = Protected::default();
    let dot_git = workspace.join(".git");
    let main = git_dirs(&dot_git);
    if dot_git.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
        out.read_only.insert(dot_git.clone());
    }
    for dir in main.iter().filter_map(|d| std::fs::canonicalize(d).ok()) {
        guard(&dir, &mut out, 0);
    }
    // Submodule checkouts: host git enters them (and reads their `.git`) on `status`.
    for path in gitconfig::read(&workspace.join(".gitmodules")).submodule_paths {
        let Ok(checkout) = std::fs::canonicalize(workspace.join(path)) else {
            continue;
        };
        if !checkout.starts_with(workspace) || checkout == workspace {
            continue;
        }
        let dot_git = checkout.join(".git");
        if dot_git.symlink_metadata().is_ok_and(|m| m.is_file()) {
            out.read_only.insert(dot_git);
        }
        out.git_checkouts.insert(checkout);
    }
    for sub in subpaths {
        let sub = Path::new(sub);
        let targets: Vec<PathBuf> = match sub.strip_prefix(".git") {
            Ok(rest) if !rest.as_os_str().is_empty() => {
                out.git_dirs.iter().map(|dir| dir.join(rest)).collect()
            }
            _ => vec![workspace.join(sub)],
        };
        let existing: Vec<PathBuf> = targets
            .iter()
            .filter_map(|t| std::fs::canonicalize(t).ok())
            .collect();
        out.listed.extend(existing.iter().cloned());
        out.read_only.extend(existing);
    }
    // What the configuration git reads points at: the repository's, then the user's.
    let mut configs: Vec<PathBuf> = out
        .git_dirs
        .iter()
        .flat_map(|d| [d.join("config"), d.join("config.worktree")])
        .collect();
    if let Some(home) = home {
        configs.push(home.join(".gitconfig"));
        let xdg = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| home.join(".config"));
        configs.push(xdg.join("git/config"));
    }
    let mut seen = BTreeSet::new();
    while let Some(config) = configs.pop() {
        if !seen.insert(config.clone()) || seen.len() > 32 {
            continue;
        }
        let pointers = gitconfig::read(&config);
        let base = config.parent().unwrap_or(Path::new("/"));
        if let Some(hooks) = pointers.hooks_path {
            if !hooks.starts_with('/') && !hooks.starts_with('~') {
                let last = Path::new(&hooks).components().rev().find_map(|c| match c {
                    std::path::Component::Normal(name) => Some(name.as_encoded_bytes().to_vec()),
                    _ => None,
                });
                out.hook_dir_names.extend(last);
            }
            // Relative to where hooks run: the top of the working tree.
            out.git_pointers
                .extend(gitconfig::resolve_value(&hooks, workspace, home));
        }
        // Relative to where git runs them: the top of the working tree.
        out.program_files.extend(
            pointers
                .program_paths
                .iter()
                .filter_map(|word| gitconfig::resolve_value(word, workspace, home))
                .filter_map(|path| std::fs::canonicalize(path).ok())
                .filter(|path| path.is_file()),
        );
        for include in pointers.includes {
            if let Some(target) = gitconfig::resolve_value(&include, base, home) {
                out.git_pointers.insert(target.clone());
                configs.push(target);
            }
        }
    }
    out
}

/// Guards the git directory `dir` and, beneath it, every existing submodule and linked
/// worktree git directory.
fn guard(dir: &Path, out: &mut Protected, depth: usize) {
    if !dir.is_dir() || !out.git_dirs.insert(dir.to_path_buf()) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && name != GIT_INFO && !GIT_METADATA.iter().any(|m| name == *m) {
            out.git_writable.insert(entry.path());
        }
    }
    if let Ok(worktrees) = std::fs::read_dir(dir.join("worktrees")) {
        for wt in worktrees.flatten() {
            if wt.file_type().is_ok_and(|t| t.is_dir()) {
                guard(&wt.path(), out, depth + 1);
            }
        }
    }
    modules(&dir.join("modules"), out, depth);
}

/// Finds submodule git directories (those holding `HEAD`) under `modules/`.
fn modules(dir: &Path, out: &mut Protected, depth: usize) {
    if depth >= MAX_MODULE_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        if path.join("HEAD").is_file() {
            guard(&path, out, depth + 1);
        } else {
            modules(&path, out, depth + 1);
        }
    }
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

    #[test]
    fn a_repository_guards_its_git_dir_submodules_and_worktrees() -> std::io::Result<()> {
        let ws = tempfile::tempdir()?;
        let ws = std::fs::canonicalize(ws.path())?;
        let git = ws.join(".git");
        for dir in [
            "hooks",
            "info",
            "objects",
            "refs",
            "modules/a/b/objects",
            "worktrees/w",
        ] {
            std::fs::create_dir_all(git.join(dir))?;
        }
        std::fs::write(git.join("config"), "[core]\n\thooksPath = .githooks\n")?;
        std::fs::write(git.join("modules/a/b/HEAD"), "ref: refs/heads/main\n")?;
        let p = resolve(&ws, &[".sandgate".into()], None);
        assert_eq!(
            p.git_dirs,
            BTreeSet::from([
                git.clone(),
                git.join("modules/a/b"),
                git.join("worktrees/w")
            ])
        );
        assert_eq!(
            p.git_writable,
            BTreeSet::from([
                git.join("objects"),
                git.join("refs"),
                git.join("modules"),
                git.join("worktrees"),
                git.join("modules/a/b/objects"),
            ])
        );
        assert_eq!(p.git_pointers, BTreeSet::from([ws.join(".githooks")]));
        assert!(p.read_only.is_empty(), "{:?}", p.read_only);
        Ok(())
    }

    #[test]
    fn a_relative_hooks_path_names_hook_directories_everywhere() -> std::io::Result<()> {
        let ws = tempfile::tempdir()?;
        let ws = std::fs::canonicalize(ws.path())?;
        let home = ws.join("home");
        std::fs::create_dir_all(ws.join(".git"))?;
        std::fs::create_dir_all(&home)?;
        std::fs::write(ws.join(".git/config"), "[core]\n\thooksPath = .husky/_\n")?;
        std::fs::write(home.join(".gitconfig"), "[core]\n\thooksPath = .githooks\n")?;
        let p = resolve(&ws, &[], Some(&home));
        let names: BTreeSet<Vec<u8>> = [b"_".to_vec(), b".githooks".to_vec()].into();
        assert_eq!(p.hook_dir_names, names);
        // An absolute one names a place, protected as such, not a name.
        std::fs::write(
            home.join(".gitconfig"),
            "[core]\n\thooksPath = /srv/hooks\n",
        )?;
        std::fs::write(ws.join(".git/config"), "")?;
        assert!(resolve(&ws, &[], Some(&home)).hook_dir_names.is_empty());
        Ok(())
    }

    #[test]
    fn scripts_the_configuration_runs_are_protected_when_they_exist() -> std::io::Result<()> {
        let ws = tempfile::tempdir()?;
        let ws = std::fs::canonicalize(ws.path())?;
        std::fs::create_dir_all(ws.join(".git"))?;
        std::fs::create_dir_all(ws.join("tools"))?;
        std::fs::write(ws.join("tools/fsmon.sh"), "")?;
        std::fs::write(
            ws.join(".git/config"),
            "[core]\n\tfsmonitor = tools/fsmon.sh\n[alias]\n\tx = !./missing/x\n",
        )?;
        let p = resolve(&ws, &[], None);
        assert_eq!(p.program_files, BTreeSet::from([ws.join("tools/fsmon.sh")]));
        Ok(())
    }

    #[test]
    fn a_worktree_guards_the_real_and_the_common_git_dir() -> std::io::Result<()> {
        let root = tempfile::tempdir()?;
        let root = std::fs::canonicalize(root.path())?;
        let common = root.join("main/.git");
        let wt = common.join("worktrees/wt");
        std::fs::create_dir_all(common.join("hooks"))?;
        std::fs::create_dir_all(&wt)?;
        std::fs::write(wt.join("commondir"), "../..\n")?;
        let ws = root.join("wt");
        std::fs::create_dir_all(&ws)?;
        std::fs::write(ws.join(".git"), format!("gitdir: {}\n", wt.display()))?;
        let p = resolve(&ws, &[], None);
        assert!(p.git_dirs.contains(&wt) && p.git_dirs.contains(&common));
        assert_eq!(p.read_only, BTreeSet::from([ws.join(".git")]));
        Ok(())
    }
}
