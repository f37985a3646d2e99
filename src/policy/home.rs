//! The caller's home directories, and what keeps the files a later login runs out of a
//! sandbox's reach.
//!
//! A home has two names that matter: `$HOME` and the passwd entry's directory. They differ
//! under `sudo -E`, in containers and in tests; a shell started later may use either, so
//! both are guarded.
//!
//! A persistence path (`~/.bashrc`, `~/.local/bin`, …) inside a writable root is guarded
//! whether or not it exists when the call starts:
//! - an existing one is bound read-only (and so cannot be replaced, renamed or removed);
//! - a missing one cannot be created because the deepest directory that does exist on its
//!   way is *frozen*: bound read-only, with its other entries bound writable again, so
//!   nothing can be added to it, removed from it or renamed in it;
//! - a symbolic link on the way is treated like a missing name (its directory is frozen,
//!   so the link cannot be swapped) and its target is guarded in turn;
//! - every directory on the way is *pinned* (bound onto itself), so no ancestor can be
//!   renamed aside and replaced by a fresh tree with startup files of the sandbox's own.
//!
//! A home that a writable root holds (the workspace is the home, or holds it, or a
//! `--writable-root` does) is *sealed* besides, by rule rather than by list ([`seal`]):
//! every dot-entry directly in it (`~/.local`, `~/.config`, `~/.cargo`, `~/.pyenv`,
//! `~/.profile`, …) and every directory on `$PATH` inside it stays read-only, and the home
//! is frozen, so no new entry (a new `~/.pythonrc`) appears in it. What a host program runs
//! later — a `.pth` in `~/.local/lib/python3.*/site-packages`, `~/.cargo/bin`, pyenv's
//! shims, a shell's rc file — lies in one of those. What stays writable: the home's other
//! entries (projects), a path named with `--writable-root` (at or beneath a sealed entry),
//! the guarded git directory of a home that is a repository (`policy::protected` guards it
//! already), and the copy-on-write toolchain caches, which get their layers as anywhere.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// How many symbolic links are followed from one persistence path before giving up and
/// freezing the directory that holds the last one.
const MAX_LINKS: usize = 8;

/// Returns the caller's home directories, canonical and existing: `$HOME` (when absolute)
/// and the passwd entry's home of the effective uid, without duplicates.
pub fn caller_homes() -> Vec<PathBuf> {
    let from_env = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let from_passwd = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map(|u| u.dir);
    let mut homes: Vec<PathBuf> = Vec::new();
    for home in from_env.into_iter().chain(from_passwd) {
        let Ok(canonical) = std::fs::canonicalize(&home) else {
            continue;
        };
        if canonical.is_dir() && canonical != Path::new("/") && !homes.contains(&canonical) {
            homes.push(canonical);
        }
    }
    homes
}

/// Returns the first home that `workspace` (canonical) equals or contains.
pub fn held_by<'a>(workspace: &Path, homes: &'a [PathBuf]) -> Option<&'a PathBuf> {
    homes.iter().find(|home| home.starts_with(workspace))
}

/// The mounts that keep persistence paths unchanged, before they are narrowed to those
/// beneath a writable root.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Guarded {
    /// Existing persistence paths (canonical): bound read-only.
    pub read_only: BTreeSet<PathBuf>,
    /// Directories in which a persistence name is missing or a link: bound read-only, with
    /// their other entries writable again.
    pub frozen: BTreeSet<PathBuf>,
    /// Every directory on the way to a persistence path: bound onto itself.
    pub pinned: BTreeSet<PathBuf>,
}

/// The mounts that seal the homes a writable root holds (see the module docs).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// Existing dot-entries and directories on `$PATH`: bound read-only onto themselves
    /// among the writable binds, so what is mounted beneath them later (a writable root
    /// the user named, a cache's layer) keeps its own flags.
    pub read_only: BTreeSet<PathBuf>,
    /// Dot-entries that are links, and `$PATH` directories that are missing or reached
    /// through a link: guarded like persistence paths ([`guard`]).
    pub guarded: Vec<PathBuf>,
    /// The homes themselves: frozen.
    pub frozen: BTreeSet<PathBuf>,
}

/// What a home sealing needs to know about the call.
pub struct SealInputs<'a> {
    /// Canonical.
    pub homes: &'a [PathBuf],
    pub writable_roots: &'a BTreeSet<PathBuf>,
    /// Roots the user named with `--writable-root` (canonical): never sealed themselves.
    pub named: &'a BTreeSet<PathBuf>,
    /// `$PATH`, as written (absolute).
    pub path: &'a [PathBuf],
    /// Entries left as they are (a guarded git directory).
    pub exempt: &'a BTreeSet<PathBuf>,
}

/// Seals every home of `inputs.homes` that a writable root holds.
pub fn seal(inputs: &SealInputs<'_>) -> Sealed {
    let mut out = Sealed::default();
    for home in inputs.homes {
        if !inputs.writable_roots.iter().any(|r| home.starts_with(r)) {
            continue;
        }
        out.frozen.insert(home.clone());
        let Ok(entries) = std::fs::read_dir(home) else {
            continue;
        };
        for entry in entries.flatten() {
            if !entry.file_name().as_encoded_bytes().starts_with(b".") {
                continue;
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() {
                out.guarded.push(path);
            } else if (kind.is_dir() || kind.is_file())
                && !inputs.named.contains(&path)
                && !inputs.exempt.contains(&path)
            {
                out.read_only.insert(path);
            }
        }
        for dir in inputs.path {
            let canonical = std::fs::canonicalize(dir).ok();
            let inside =
                dir.starts_with(home) || canonical.as_ref().is_some_and(|c| c.starts_with(home));
            // Nothing can be made or changed in a sealed entry: a directory there is covered.
            let covered = |p: &Path| out.read_only.iter().any(|s| p.starts_with(s));
            if !inside || covered(dir) {
                continue;
            }
            match canonical.filter(|c| c.is_dir()) {
                Some(c) if c == *dir || !dir.starts_with(home) => {
                    if !covered(&c) && c != *home && !inputs.named.contains(&c) {
                        out.read_only.insert(c);
                    }
                }
                // Missing, or reached through a link inside the home: the link cannot be
                // changed and a missing directory cannot be made.
                _ => out.guarded.push(dir.clone()),
            }
        }
    }
    out
}

/// Works out the mounts that guard `paths` (absolute, not necessarily canonical).
pub fn guard(paths: impl IntoIterator<Item = PathBuf>) -> Guarded {
    let mut out = Guarded::default();
    for path in paths {
        walk(&path, &mut out, 0);
    }
    out
}

/// Walks `path` from `/`, one component at a time, resolving links by hand so that each
/// link and each missing name is seen where it is.
fn walk(path: &Path, out: &mut Guarded, links: usize) {
    let mut dir = PathBuf::from("/");
    let mut rest = path.components().peekable();
    while let Some(component) = rest.next() {
        match component {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => continue,
            Component::ParentDir => {
                dir.pop();
                continue;
            }
            Component::Normal(name) => {
                let next = dir.join(name);
                match next.symlink_metadata() {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        out.frozen.insert(dir.clone());
                        let Ok(target) = std::fs::read_link(&next) else {
                            return;
                        };
                        if links < MAX_LINKS {
                            let mut resolved = dir.join(target);
                            resolved.extend(rest);
                            walk(&resolved, out, links + 1);
                        }
                        return;
                    }
                    Ok(meta) => {
                        if rest.peek().is_none() {
                            out.read_only.insert(next);
                            return;
                        }
                        if !meta.is_dir() {
                            // A file where a directory is expected: nothing can be created
                            // beneath it while it stays; its directory keeps it there.
                            out.frozen.insert(dir.clone());
                            return;
                        }
                        out.pinned.insert(next.clone());
                        dir = next;
                    }
                    Err(_) => {
                        out.frozen.insert(dir.clone());
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn existing_missing_and_linked_paths() -> std::io::Result<()> {
        let root = tempfile::tempdir()?;
        let home = std::fs::canonicalize(root.path())?.join("home");
        std::fs::create_dir_all(home.join(".config"))?;
        std::fs::create_dir_all(home.join("dotfiles"))?;
        std::fs::write(home.join(".bashrc"), "")?;
        std::fs::write(home.join("dotfiles/profile"), "")?;
        std::os::unix::fs::symlink("dotfiles/profile", home.join(".profile"))?;
        let g = guard([
            home.join(".bashrc"),
            home.join(".zshrc"),
            home.join(".config/autostart"),
            home.join(".profile"),
            home.join(".local/bin"),
        ]);
        assert_eq!(
            g.read_only,
            BTreeSet::from([home.join(".bashrc"), home.join("dotfiles/profile")])
        );
        assert_eq!(
            g.frozen,
            BTreeSet::from([home.clone(), home.join(".config")])
        );
        assert!(g.pinned.contains(&home));
        assert!(g.pinned.contains(&home.join(".config")));
        assert!(g.pinned.contains(&home.join("dotfiles")));
        Ok(())
    }

    #[test]
    fn a_workspace_holding_a_home_is_found() {
        let homes = [PathBuf::from("/home/u")];
        assert!(held_by(Path::new("/home/u"), &homes).is_some());
        assert!(held_by(Path::new("/home"), &homes).is_some());
        assert!(held_by(Path::new("/home/u/src"), &homes).is_none());
        assert!(held_by(Path::new("/home/uu"), &homes).is_none());
    }

    #[test]
    fn a_writable_home_is_sealed_by_rule() -> std::io::Result<()> {
        let root = tempfile::tempdir()?;
        let base = std::fs::canonicalize(root.path())?;
        let home = base.join("home");
        for dir in [".local/lib", ".git", "proj", "tools/bin", "dotfiles"] {
            std::fs::create_dir_all(home.join(dir))?;
        }
        std::fs::write(home.join(".profile"), "")?;
        std::fs::write(home.join("dotfiles/vimrc"), "")?;
        std::os::unix::fs::symlink("dotfiles/vimrc", home.join(".vimrc"))?;
        let homes = [home.clone()];
        let named = BTreeSet::from([home.join(".local/lib")]);
        let exempt = BTreeSet::from([home.join(".git")]);
        let path = [
            home.join("tools/bin"),
            home.join("go/bin"),
            home.join(".local/bin"),
            PathBuf::from("/usr/bin"),
        ];
        let inputs = |roots| SealInputs {
            homes: &homes,
            writable_roots: roots,
            named: &named,
            path: &path,
            exempt: &exempt,
        };
        let elsewhere = BTreeSet::from([base.join("ws")]);
        assert_eq!(seal(&inputs(&elsewhere)), Sealed::default());
        let sealed = seal(&inputs(&BTreeSet::from([base.clone()])));
        assert_eq!(
            sealed.read_only,
            BTreeSet::from([
                home.join(".local"),
                home.join(".profile"),
                home.join("tools/bin")
            ])
        );
        assert_eq!(sealed.guarded, [home.join(".vimrc"), home.join("go/bin")]);
        assert_eq!(sealed.frozen, BTreeSet::from([home.clone()]));
        // The guard then keeps the link's target read-only and its directory frozen.
        let guarded = guard(sealed.guarded);
        assert!(guarded.read_only.contains(&home.join("dotfiles/vimrc")));
        assert!(guarded.frozen.contains(&home));
        Ok(())
    }
}
