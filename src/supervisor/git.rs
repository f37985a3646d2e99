//! Guarded git directories. The top level of every git directory that existed when the
//! call started is read-only in the sandbox (see `policy::protected`), so the kernel
//! refuses every create, rename and removal there, whatever path a racing thread or a
//! swapped symlink makes it resolve. Git still needs that top level — lock files renamed
//! into place, `ORIG_HEAD`, `COMMIT_EDITMSG`, `rebase-merge/`, `modules/` for a new
//! submodule, its `config` rewritten by `git config`, `git remote add` or `git submodule
//! update` — so the supervisor performs those operations itself (`perform`), on its *own*
//! handle of that directory, opened in sandgate's view where it is writable, with the one
//! name it checked:
//!
//! - the metadata names that point git elsewhere or run something (`commondir`, `gitdir`,
//!   `hooks`, `info/attributes`) are refused with a marker, whatever the call;
//! - `config` and `config.worktree` are replaced only as everywhere else (see `seal`): by
//!   a rename or link from another name, performed as a copy checked against the file it
//!   replaces; never written in place, created directly, moved away or removed;
//! - a directory the supervisor makes there (`rebase-merge/`, `modules/`) is as read-only
//!   to the sandbox as its parent, and joins the regions, so the supervisor answers for
//!   what happens inside it too.
//!
//! A call `perform` does not take here goes to the kernel, which refuses it inside a
//! guarded top level — so a path that reaches one without naming it costs git a write,
//! never the guarantee.

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::sys::stat::fstat;

use super::named::Named;
use super::resolve::{self, Inode};
use super::seal;
use crate::policy::protected::{GIT_INFO, GIT_INFO_METADATA, GIT_METADATA};

/// How many directories of guarded git directories the supervisor keeps handles of.
const MAX_REGIONS: usize = 256;

/// What a directory of a guarded git directory's read-only part is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A git directory's top level, where the metadata names live.
    Top,
    /// Its `info/`.
    Info,
    /// A directory the supervisor made beneath either.
    Plain,
}

impl Kind {
    /// The names no sandboxed command may create, change or remove here.
    fn metadata(self) -> &'static [&'static str] {
        match self {
            Kind::Top => &GIT_METADATA,
            Kind::Info => &GIT_INFO_METADATA,
            Kind::Plain => &[],
        }
    }

    /// What a directory named `name` made in a directory of this kind is.
    fn child(self, name: &[u8]) -> Kind {
        if self == Kind::Top && name == GIT_INFO.as_bytes() {
            Kind::Info
        } else {
            Kind::Plain
        }
    }

    /// Returns true when `name` here is metadata a call may not touch; `replaced`: the
    /// call puts a file at `name` by a rename or link (the one way `config` and
    /// `config.worktree` change, checked by `seal` and `copy`).
    pub fn refuses(self, name: &[u8], replaced: bool) -> bool {
        let config = seal::name(name, false) == Ok(seal::Name::Config);
        self.metadata().iter().any(|m| name == m.as_bytes()) && !(replaced && config)
    }
}

/// A directory of a guarded git directory's read-only part, as the supervisor reaches it.
struct Region {
    /// `O_PATH` in sandgate's own view, where it is writable.
    fd: OwnedFd,
    kind: Kind,
    named: Named,
}

/// The guarded directories, by identity; grows as the supervisor creates directories in
/// them (a `rebase-merge/` the sandbox cannot write to on its own).
#[derive(Default)]
pub struct Regions(RefCell<HashMap<Inode, Region>>);

impl Regions {
    /// Opens each guarded git directory in sandgate's own view. One that cannot be opened
    /// without following a symlink is left out: the kernel still refuses writes there.
    pub fn open(dirs: &[PathBuf]) -> Regions {
        let open = |path: &Path| {
            let fd = crate::no_symlinks::open(path).ok()?;
            let id = resolve::identity(&fstat(fd.as_fd()).ok()?);
            let name = path
                .file_name()
                .map(|n| n.as_encoded_bytes())
                .unwrap_or_default();
            let named = Named::of(fd.as_fd(), name);
            Some((id, fd, named))
        };
        let mut map = HashMap::new();
        for dir in dirs {
            let Some((id, fd, named)) = open(dir) else {
                continue;
            };
            let kind = Kind::Top;
            map.insert(id, Region { fd, kind, named });
            if let Some((id, fd, named)) = open(&dir.join(GIT_INFO)) {
                let kind = Kind::Info;
                map.insert(id, Region { fd, kind, named });
            }
        }
        Regions(RefCell::new(map))
    }

    /// Returns a handle of the region `id` (a duplicate), its kind and what the seal rules
    /// need of it; `None` when `id` is no region.
    pub fn get(&self, id: &Inode) -> Option<(OwnedFd, Kind, Named)> {
        let regions = self.0.borrow();
        let region = regions.get(id)?;
        let fd = region.fd.try_clone().ok()?;
        Some((fd, region.kind, region.named))
    }

    /// Returns true for a directory with metadata names of its own.
    pub fn guards(&self, id: &Inode) -> bool {
        self.0
            .borrow()
            .get(id)
            .is_some_and(|r| r.kind != Kind::Plain)
    }

    /// Adds the directory `fd`, just made as `name` in a region of kind `parent`. Past the
    /// cap it stays the kernel's (read-only): git never makes that many there, and each
    /// one tracked holds an fd of the supervisor's.
    pub fn add(&self, parent: Kind, fd: OwnedFd, name: &[u8]) {
        if self.0.borrow().len() >= MAX_REGIONS {
            return;
        }
        let Ok(st) = fstat(fd.as_fd()) else {
            return;
        };
        let named = Named::of(fd.as_fd(), name);
        let kind = parent.child(name);
        self.0
            .borrow_mut()
            .insert(resolve::identity(&st), Region { fd, kind, named });
    }

    /// Forgets the region `id` (removed).
    pub fn remove(&self, id: &Inode) {
        self.0.borrow_mut().remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_config_may_be_replaced_at_a_top_level() {
        assert!(Kind::Top.refuses(b"config", false));
        assert!(!Kind::Top.refuses(b"config", true));
        assert!(!Kind::Top.refuses(b"config.worktree", true));
        assert!(Kind::Top.refuses(b"commondir", true));
        assert!(Kind::Top.refuses(b"hooks", true));
        assert!(!Kind::Top.refuses(b"config.lock", false));
        assert!(Kind::Info.refuses(b"attributes", true));
        assert!(!Kind::Plain.refuses(b"config", false));
    }
}
