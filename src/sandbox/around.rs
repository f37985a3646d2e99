//! Read rules built around what the sandbox must not read, for the backend without a mount
//! namespace: landlock only ever grants, so a hidden path cannot be carved out of a rule on
//! `/`. Instead every directory on the way to a kept-out path is granted its listing only,
//! and every other entry of it is granted whole, by a rule of its own: what lies beneath a
//! kept-out path is reached by no rule at all.
//!
//! The entries are the ones that exist when the call starts. One made later beside a
//! kept-out path (in `$HOME`, in `/`) is unreadable to the sandbox, so no kept-out path may
//! lie in a writable root, where the command makes new entries itself: [`plan`] refuses.

use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// What one read rule grants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// The directory's listing, and nothing beneath it that has no rule of its own.
    Listing,
    /// Everything beneath a directory, or a file's data.
    Whole { dir: bool },
}

/// One read rule: an `O_PATH` descriptor of its object (a symlink never: its target is
/// reached by its own rule) and what it grants.
pub struct Rule {
    pub fd: OwnedFd,
    pub grant: Grant,
}

/// Why the rules cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum AroundError {
    #[error("the landlock backend cannot keep {kept} from the sandbox: it lies in the writable root {root}, where the command makes new entries that no rule made before it could let it read (move it out, or --unhide it)")]
    InWritableRoot { kept: PathBuf, root: PathBuf },
    #[error("cannot read {0} to build the read rules around it: {1}")]
    Read(PathBuf, std::io::Error),
}

/// The rules that let the sandbox read everything but `kept_out` (absolute paths; those
/// that do not exist are skipped) and what lies beneath them.
///
/// # Errors
/// A kept-out path inside one of `writable` ([`AroundError::InWritableRoot`]), or a
/// directory on the way that cannot be listed.
pub fn plan(kept_out: &[PathBuf], writable: &[PathBuf]) -> Result<Vec<Rule>, AroundError> {
    let kept: BTreeSet<PathBuf> = kept_out
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    for k in &kept {
        if let Some(root) = writable.iter().find(|w| k.starts_with(w)) {
            return Err(AroundError::InWritableRoot {
                kept: k.clone(),
                root: root.clone(),
            });
        }
    }
    let mut on_the_way: BTreeSet<PathBuf> = BTreeSet::new();
    for k in &kept {
        on_the_way.extend(k.ancestors().skip(1).map(Path::to_path_buf));
    }
    if on_the_way.is_empty() {
        on_the_way.insert(PathBuf::from("/"));
    }
    let mut rules = Vec::new();
    for dir in &on_the_way {
        if kept.iter().any(|k| dir.starts_with(k)) {
            continue;
        }
        if let Some(fd) = open(dir) {
            rules.push(Rule {
                fd,
                grant: Grant::Listing,
            });
        }
        let entries = std::fs::read_dir(dir).map_err(|e| AroundError::Read(dir.clone(), e))?;
        for entry in entries.flatten() {
            let path = dir.join(entry.file_name());
            if kept.contains(&path) || on_the_way.contains(&path) {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                continue;
            }
            if let Some(fd) = open(&path) {
                rules.push(Rule {
                    fd,
                    grant: Grant::Whole { dir: meta.is_dir() },
                });
            }
        }
    }
    Ok(rules)
}

/// A rule granting all of `path` (followed: a device the sandbox keeps may be a link),
/// when it exists.
pub fn rule_for(path: &Path) -> Option<Rule> {
    let meta = std::fs::metadata(path).ok()?;
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    let fd = crate::sys::open_path(&c, 0).ok()?;
    Some(Rule {
        fd,
        grant: Grant::Whole { dir: meta.is_dir() },
    })
}

/// Opens `path` for a rule, not following a symlink; `None` when it is gone (it may be
/// removed meanwhile: it then needs no rule).
fn open(path: &Path) -> Option<OwnedFd> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    crate::sys::open_path(&c, libc::O_NOFOLLOW).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        for dir in ["home/.ssh", "home/src", "etc"] {
            std::fs::create_dir_all(t.path().join(dir)).unwrap();
        }
        for file in ["home/.ssh/id", "home/notes", "etc/shadow", "etc/hosts"] {
            std::fs::write(t.path().join(file), "x").unwrap();
        }
        std::os::unix::fs::symlink(t.path().join("home/.ssh"), t.path().join("home/link")).unwrap();
        t
    }

    /// The paths the rules were made for, each with its grant.
    fn granted(rules: &[Rule]) -> Vec<(PathBuf, Grant)> {
        let mut out: Vec<(PathBuf, Grant)> = rules
            .iter()
            .map(|r| {
                let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&r.fd));
                (std::fs::read_link(link).unwrap(), r.grant)
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    #[test]
    fn everything_but_the_kept_out_paths_is_granted_and_no_symlink_is() {
        let t = tree();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let kept = [root.join("home/.ssh"), root.join("etc/shadow")];
        let got = granted(&plan(&kept, &[]).unwrap());
        let has = |p: &str, g: Grant| got.contains(&(root.join(p), g));
        assert!(
            has("home", Grant::Listing) && has("etc", Grant::Listing),
            "{got:?}"
        );
        assert!(has("home/src", Grant::Whole { dir: true }), "{got:?}");
        assert!(has("home/notes", Grant::Whole { dir: false }), "{got:?}");
        assert!(has("etc/hosts", Grant::Whole { dir: false }), "{got:?}");
        for p in ["home/.ssh", "home/.ssh/id", "etc/shadow", "home/link"] {
            assert!(!got.iter().any(|(g, _)| g == &root.join(p)), "{p}: {got:?}");
        }
        // Every directory above is listed, never granted whole.
        assert!(
            got.contains(&(PathBuf::from("/"), Grant::Listing)),
            "{got:?}"
        );
        assert!(!got
            .iter()
            .any(|(p, g)| root.starts_with(p) && *g != Grant::Listing));
    }

    #[test]
    fn a_kept_out_path_in_a_writable_root_is_refused() {
        let t = tree();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let e = plan(&[root.join("home/.ssh")], &[root.join("home")]).err();
        assert!(
            matches!(e, Some(AroundError::InWritableRoot { .. })),
            "{e:?}"
        );
    }
}
