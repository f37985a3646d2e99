//! Frozen directories: nothing can be created, removed or renamed in them, while each of
//! their existing entries stays as writable as it was.
//!
//! This is how a missing persistence path (`~/.zshrc` when there is none) stays missing in a
//! writable tree without sandgate creating anything on the host: the directory that would
//! hold it is bound read-only onto itself, then every entry already in it except the
//! read-only ones is bound onto itself again, writable. The entries are mount points, so
//! they cannot be renamed or removed either; a program that writes a file in the frozen
//! directory itself by renaming a temporary one over it fails there (and only there).
//!
//! Runs in the forked child after the writable roots, pinned and protected paths are bound
//! (each bind here is recursive, so those already beneath a frozen directory survive with
//! their own flags), shallow directories first, so a deeper frozen directory inside an entry
//! that was made writable again is frozen in turn.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};

use nix::mount::{mount, MsFlags};

use super::mask::cstring;
use crate::sys;

/// One mount of the freezing steps.
#[derive(Debug)]
enum Step {
    /// Bind the directory read-only onto itself.
    Freeze(CString),
    /// Bind an entry of a frozen directory onto itself, writable again when `writable`
    /// (its host mount is writable).
    Reopen { path: CString, writable: bool },
}

/// The freezing steps of one call, prepared before forking.
#[derive(Debug, Default)]
pub struct Freeze {
    steps: Vec<Step>,
}

impl Freeze {
    /// Prepares the steps for `frozen`, leaving the entries in `read_only` read-only.
    ///
    /// # Errors
    /// A frozen directory that cannot be listed (its entries would stay read-only, which is
    /// safe, but the call would fail in surprising ways: better to say so), or a path with
    /// an interior NUL byte.
    pub fn build(frozen: &BTreeSet<PathBuf>, read_only: &BTreeSet<PathBuf>) -> io::Result<Freeze> {
        let mut dirs: Vec<&PathBuf> = frozen.iter().collect();
        dirs.sort_by_key(|p| p.components().count());
        let mut steps = Vec::new();
        for dir in dirs {
            steps.push(Step::Freeze(cstring(dir)?));
            let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            entries.sort();
            for path in entries {
                if read_only.contains(&path) || frozen.contains(&path) || !reopenable(&path) {
                    continue;
                }
                let writable = nix::sys::statvfs::statvfs(&path)
                    .is_ok_and(|s| !s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY));
                steps.push(Step::Reopen {
                    path: cstring(&path)?,
                    writable,
                });
            }
        }
        Ok(Freeze { steps })
    }

    /// Mounts the steps in the calling (forked, single-threaded) child.
    pub fn apply(&self) -> io::Result<()> {
        let none = None::<&std::ffi::CStr>;
        for step in &self.steps {
            let path = match step {
                Step::Freeze(path) | Step::Reopen { path, .. } => path.as_c_str(),
            };
            mount(
                Some(path),
                path,
                none,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                none,
            )?;
            match step {
                Step::Freeze(_) => sys::mount_setattr(path, false, libc::MOUNT_ATTR_RDONLY, 0)?,
                Step::Reopen { writable: true, .. } => {
                    sys::mount_setattr(path, false, 0, libc::MOUNT_ATTR_RDONLY)?
                }
                Step::Reopen {
                    writable: false, ..
                } => {}
            }
        }
        Ok(())
    }
}

/// Directories and regular files can be bound onto themselves. A symbolic link cannot (the
/// mount would land on its target), and other kinds are left as they are: read-only.
fn reopenable(path: &Path) -> bool {
    path.symlink_metadata()
        .is_ok_and(|m| m.file_type().is_dir() || m.file_type().is_file())
}
