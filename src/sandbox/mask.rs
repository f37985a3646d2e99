//! Masking: hidden paths (credentials, sandgate's own logs and configuration) read as empty
//! inside the sandbox — a directory as an empty directory, anything else as an empty
//! regular file (not `/dev/null`: tools `stat` what they read) — and cannot be written,
//! renamed, removed or locked in a way that reaches the real file.
//!
//! The empty objects come from a small tmpfs made inside the new mount namespace, so
//! nothing is ever created on the host: it is mounted for a moment on a directory the
//! masks do not touch (`/proc` normally), one empty directory or file per masked path is
//! made in it and bound read-only over that path, and the tmpfs is detached again — the
//! binds keep it alive, nothing else can reach it. A masked file is another inode, so a
//! `flock` on it never contends with sandgate's lock on the real one; and no two masks
//! share an inode, so locking one never blocks on another.
//!
//! Runs last in the child, after every writable, pinned, protected and frozen bind, so no
//! later bind can uncover what a mask covers.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sys::stat::Mode;

use crate::policy::Why;
use crate::sys;

/// Directories one of which hosts the source tmpfs for a moment; the first that exists and
/// holds no masked path is used.
const STAGING: [&str; 5] = ["/proc", "/dev", "/sys", "/run", "/mnt"];

/// Converts a path for a syscall.
pub(super) fn cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// One path to cover.
#[derive(Debug)]
struct Mask {
    path: CString,
    dir: bool,
    /// Its own empty object on the staging tmpfs.
    source: CString,
}

/// Where the source tmpfs goes for a moment.
#[derive(Debug)]
struct Staging {
    mount_point: CString,
    /// Its mount options: no data, and an inode for its root and each empty object.
    options: CString,
}

/// The masks of one call, prepared before forking.
#[derive(Debug, Default)]
pub struct Masks {
    /// Shallow paths first (none beneath a masked directory, which hides it already).
    masks: Vec<Mask>,
    staging: Option<Staging>,
    /// The masked directory holding the working directory: the command starts there, as
    /// the real directory beneath the mask cannot be entered by path.
    refuge: Option<PathBuf>,
}

impl Masks {
    /// Prepares masks for the paths in `hidden` that exist now. A named path is
    /// canonicalised here, right before the fork, so sandgate's own logs created since
    /// planning are covered; one the rule found is canonical already, and its kind known.
    ///
    /// # Errors
    /// A path with an interior NUL byte, or no directory to stage the empty objects on.
    pub fn build(hidden: &BTreeMap<PathBuf, Why>, cwd: &Path) -> io::Result<Masks> {
        let mut targets: Vec<(PathBuf, bool)> = hidden
            .iter()
            .filter_map(|(path, why)| {
                if why.by_rule() {
                    return Some((path.clone(), why.is_dir()));
                }
                let canonical = std::fs::canonicalize(path).ok()?;
                let dir = canonical.is_dir();
                Some((canonical, dir))
            })
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .filter(|(p, _)| p != Path::new("/"))
            .collect();
        // What lies beneath a hidden directory is hidden with it: no mount of its own (the
        // list and the rule often both name a directory and the files in it).
        let dirs: Vec<PathBuf> = targets
            .iter()
            .filter(|(_, dir)| *dir)
            .map(|(p, _)| p.clone())
            .collect();
        targets.retain(|(p, _)| !dirs.iter().any(|d| p != d && p.starts_with(d)));
        if targets.is_empty() {
            return Ok(Masks::default());
        }
        targets.sort_by_key(|(p, _)| p.components().count());
        let mount_point = STAGING
            .iter()
            .map(Path::new)
            .find(|s| s.is_dir() && !targets.iter().any(|(t, _)| t.starts_with(s)))
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        let refuge = targets
            .iter()
            .find(|(t, dir)| *dir && cwd.starts_with(t))
            .map(|(t, _)| t.clone());
        Ok(Masks {
            masks: targets
                .iter()
                .enumerate()
                .map(|(i, (p, dir))| {
                    Ok(Mask {
                        path: cstring(p)?,
                        dir: *dir,
                        source: cstring(&mount_point.join(i.to_string()))?,
                    })
                })
                .collect::<io::Result<_>>()?,
            staging: Some(Staging {
                mount_point: cstring(mount_point)?,
                options: CString::new(format!("mode=0755,size=4k,nr_inodes={}", targets.len() + 1))
                    .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?,
            }),
            refuge,
        })
    }

    /// Covers every hidden path in the calling (forked, single-threaded) child.
    pub fn apply(&self) -> io::Result<()> {
        let Some(staging) = &self.staging else {
            return Ok(());
        };
        mount(
            Some(c"tmpfs"),
            staging.mount_point.as_c_str(),
            Some(c"tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some(staging.options.as_c_str()),
        )?;
        let covered = self.cover();
        // Detached whatever happened: the binds keep the tmpfs alive, nothing else can
        // reach it, and the directory it sat on is itself again.
        umount2(staging.mount_point.as_c_str(), MntFlags::MNT_DETACH)?;
        covered
    }

    /// Returns the directory the command starts in for a call from `cwd`: `cwd` itself,
    /// or the masked directory holding it.
    pub fn working_dir<'a>(&'a self, cwd: &'a Path) -> &'a Path {
        self.refuge.as_deref().unwrap_or(cwd)
    }

    fn cover(&self) -> io::Result<()> {
        let none = None::<&std::ffi::CStr>;
        for mask in &self.masks {
            let source = mask.source.as_c_str();
            if mask.dir {
                nix::unistd::mkdir(source, Mode::from_bits_truncate(0o555))?;
            } else {
                drop(nix::fcntl::open(
                    source,
                    OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY | OFlag::O_CLOEXEC,
                    Mode::from_bits_truncate(0o444),
                )?);
            }
            match mount(
                Some(source),
                mask.path.as_c_str(),
                none,
                MsFlags::MS_BIND,
                none,
            ) {
                Ok(()) => {}
                // Not in this view (inside a masked directory, or under the private /tmp):
                // nothing here to hide.
                Err(nix::errno::Errno::ENOENT) => continue,
                Err(e) => return Err(e.into()),
            }
            sys::mount_setattr(&mask.path, false, libc::MOUNT_ATTR_RDONLY, 0)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_beneath_a_masked_directory_are_dropped_and_the_cwd_finds_refuge() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let base = std::fs::canonicalize(dir.path())?;
        std::fs::create_dir_all(base.join("a/b"))?;
        std::fs::write(base.join("a/b/key"), "secret")?;
        let listed = || Why::Listed {
            entry: "test".into(),
        };
        let hidden = BTreeMap::from([
            (base.join("a/b/key"), listed()),
            (base.join("a"), listed()),
            (base.join("gone"), listed()),
        ]);
        let masks = Masks::build(&hidden, &base.join("a/b"))?;
        let shown: Vec<(String, bool)> = masks
            .masks
            .iter()
            .map(|m| (m.path.to_string_lossy().into_owned(), m.dir))
            .collect();
        assert_eq!(
            shown,
            vec![(base.join("a").display().to_string(), true)],
            "a/b/key lies in the hidden a"
        );
        assert_eq!(masks.working_dir(&base.join("a/b")), base.join("a"));
        assert!(masks.staging.is_some());
        assert!(Masks::build(&BTreeMap::new(), &base)?.staging.is_none());
        Ok(())
    }
}
