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
}
