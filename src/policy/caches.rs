//! Which toolchain caches (`~/.cargo/registry`, `~/.npm`, …, profile data) a call makes
//! writable copy-on-write: each gets a per-workspace layer on top of the host's content
//! inside the sandbox (`sandbox::caches`), so builds see the host's warm caches and write
//! freely without changing a byte of them.
//!
//! A cache is left as it is (read-only, like the rest of the home) when:
//! - it is itself a symbolic link, or is reached through one that lies inside a writable
//!   root (an earlier sandboxed call could have planted it to point the layer elsewhere);
//! - it already is writable (beneath a writable root, and not in a writable home's sealed
//!   entries: `home::seal`), or holds one, or holds a protected path (each is its own mount,
//!   which a layer on top would hide);
//! - the private `/tmp` would hide it anyway;
//! - it lies inside another cache of the list (that one's layer covers it);
//! - it is missing and its parent directory is missing, a link, or not the caller's own.
//!
//! A missing cache whose parent is the caller's own directory is created, empty, on the
//! host before the sandbox starts (by `sandbox::caches`): a first `npm install` or
//! `cargo build` on a fresh machine then works too, and the host's tools find the same
//! empty cache they would have made themselves.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::profile::{CacheSpec, Placeholders};
use super::roots;

/// A cache made writable copy-on-write in this call.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cache {
    /// Canonical (when missing: its canonical parent and its name).
    pub path: PathBuf,
    /// A directory (an overlay) rather than a single file (a per-workspace copy).
    pub dir: bool,
    /// False when sandgate creates it, empty, right before the sandbox starts.
    pub exists: bool,
    /// The caller's home it lies in (the caches of one home share one overlay).
    pub home: Option<PathBuf>,
}

/// What a cache must stay clear of.
pub struct Around<'a> {
    /// The call's writable roots: already writable, and where a planted link may lie.
    pub writable_roots: &'a BTreeSet<PathBuf>,
    /// Protected paths, bound read-only at their own path.
    pub protected: &'a BTreeSet<PathBuf>,
    /// A writable home's sealed entries (`home::seal`): read-only although a writable root
    /// holds them, so a cache in one needs its layer after all.
    pub sealed: &'a BTreeSet<PathBuf>,
}

/// Returns the caches of `specs` this call makes writable copy-on-write (see the module
/// docs for those left out), outermost first.
pub fn resolve(
    specs: &[CacheSpec],
    placeholders: &Placeholders<'_>,
    around: &Around<'_>,
) -> Vec<Cache> {
    let me = nix::unistd::geteuid().as_raw();
    let found: BTreeSet<Cache> = specs
        .iter()
        .flat_map(|spec| {
            let (entry, dir) = match spec {
                CacheSpec::Dir(p) => (p, true),
                CacheSpec::File(p) => (p, false),
            };
            placeholders
                .expand(entry)
                .into_iter()
                .map(move |path| (path, dir))
        })
        .filter_map(|(path, dir)| locate(&path, dir, around.writable_roots, me))
        .filter(|c| usable(&c.path, around))
        .map(|c| Cache {
            home: placeholders
                .homes
                .iter()
                .filter(|h| c.path.starts_with(h))
                .max_by_key(|h| h.as_os_str().len())
                .cloned(),
            ..c
        })
        .collect();
    let paths: Vec<&PathBuf> = found.iter().map(|c| &c.path).collect();
    found
        .iter()
        .filter(|c| {
            !paths
                .iter()
                .any(|other| *other != &c.path && c.path.starts_with(other))
        })
        .cloned()
        .collect()
}

/// Resolves one cache path, or says why not (`None`).
fn locate(path: &Path, dir: bool, writable_roots: &BTreeSet<PathBuf>, me: u32) -> Option<Cache> {
    match path.symlink_metadata() {
        Ok(meta) if meta.file_type().is_symlink() => return None,
        Ok(meta) if meta.is_dir() != dir => return None,
        Ok(meta) if !dir && !meta.is_file() => return None,
        Ok(_) => {
            let resolved = roots::resolve(path).ok()?;
            if resolved.planted_in(writable_roots).is_some() {
                return None;
            }
            return Some(Cache {
                path: resolved.path,
                dir,
                exists: true,
                home: None,
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => return None,
    }
    let name = path.file_name()?;
    let parent = roots::resolve(path.parent()?).ok()?;
    if parent.planted_in(writable_roots).is_some() {
        return None;
    }
    let meta = parent.path.symlink_metadata().ok()?;
    (meta.is_dir() && meta.uid() == me).then(|| Cache {
        path: parent.path.join(name),
        dir,
        exists: false,
        home: None,
    })
}

/// Returns true when a layer at `path` hides nothing that must stay as it is.
fn usable(path: &Path, around: &Around<'_>) -> bool {
    let writable = around.writable_roots.iter().any(|r| path.starts_with(r))
        && !around.sealed.iter().any(|s| path.starts_with(s));
    !roots::hidden_by_temp(path)
        && !roots::is_shared_temp(path)
        && !writable
        && !around.writable_roots.iter().any(|r| r.starts_with(path))
        && !around.protected.iter().any(|p| p.starts_with(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs() -> Vec<CacheSpec> {
        vec![
            CacheSpec::Dir("$HOME/.npm".into()),
            CacheSpec::Dir("$HOME/.npm/_cacache".into()),
            CacheSpec::File("$HOME/.cargo/.package-cache".into()),
            CacheSpec::Dir("$HOME/.cache/pip".into()),
            CacheSpec::Dir("$HOME/go/pkg/mod".into()),
            CacheSpec::Dir("$HOME/ws/cache".into()),
            CacheSpec::Dir("$HOME/link".into()),
            CacheSpec::Dir("$HOME/file".into()),
        ]
    }

    #[test]
    fn caches_are_chosen_and_the_unsafe_left_alone() -> std::io::Result<()> {
        // Not under /tmp, which the private temp would hide.
        let dir = tempfile::tempdir_in("/var/tmp")?;
        let home = std::fs::canonicalize(dir.path())?;
        std::fs::create_dir_all(home.join(".npm/_cacache"))?;
        std::fs::create_dir_all(home.join(".cargo"))?;
        std::fs::write(home.join(".cargo/.package-cache"), "")?;
        std::fs::create_dir_all(home.join("ws/cache"))?;
        std::fs::create_dir_all(home.join("elsewhere"))?;
        std::os::unix::fs::symlink(home.join("elsewhere"), home.join("link"))?;
        std::fs::write(home.join("file"), "")?;
        let homes = [home.clone()];
        let placeholders = Placeholders {
            workspace: &home.join("ws"),
            ptys: vec![],
            homes: &homes,
            approval_token_file: None,
        };
        let writable_roots = BTreeSet::from([home.join("ws")]);
        let protected = BTreeSet::new();
        let sealed = BTreeSet::new();
        let around = Around {
            writable_roots: &writable_roots,
            protected: &protected,
            sealed: &sealed,
        };
        let caches = resolve(&specs(), &placeholders, &around);
        let cache = |path: &str, dir, exists| Cache {
            path: home.join(path),
            dir,
            exists,
            home: Some(home.clone()),
        };
        // ~/.cache and ~/go/pkg are missing, so pip's and go's caches are not created;
        // the one inside the workspace, the link, the file and the nested one are left.
        assert_eq!(
            caches,
            vec![
                cache(".cargo/.package-cache", false, true),
                cache(".npm", true, true)
            ]
        );
        std::fs::create_dir_all(home.join(".cache"))?;
        let caches = resolve(&specs(), &placeholders, &around);
        assert!(caches.contains(&cache(".cache/pip", true, false)));
        // A protected path inside a cache keeps it as it is.
        let protected = BTreeSet::from([home.join(".npm/_cacache/x")]);
        let around = Around {
            writable_roots: &writable_roots,
            protected: &protected,
            sealed: &sealed,
        };
        let caches = resolve(&specs(), &placeholders, &around);
        assert!(!caches.iter().any(|c| c.path.starts_with(home.join(".npm"))));
        Ok(())
    }
}
