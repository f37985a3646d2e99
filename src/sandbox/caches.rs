//! Copy-on-write toolchain caches: inside a `workspace-write` sandbox each cache chosen by
//! `policy::caches` is writable through a layer of the workspace's own, while the host's
//! cache is never written.
//!
//! - Directories get overlayfs: the host's directory is the lower layer, the upper and
//!   work directories are the workspace's. What a build fetches stays there for the next
//!   call in the same workspace; other workspaces and the host never see it. Making an
//!   overlay costs the kernel a fraction of a millisecond (it tests the upper filesystem
//!   each time), so the caches on one mount share one: its lower layer is their closest
//!   common directory (usually the home), its root is never attached anywhere, and each
//!   cache is a bind of its own subtree of it at the cache's path — nothing else of that
//!   directory is reachable through it.
//! - A single file (cargo's lock files; an overlay cannot be a file) gets a per-workspace
//!   copy, made from the host's file the first time, bound writable over it.
//!
//! The layers live in `/tmp/sandgate-UID/NAME-HASH.caches/KEY/` (`private_temp`), reached
//! with the same distrust of the shared `/tmp` as the private temp, each level created by
//! the caller with mode 0700. They are beside the private temp, never in it, so no
//! sandboxed process can write an upper directory while it is mounted (which overlayfs
//! leaves undefined); the private `/tmp` hides every workspace's layers; `sandgate tmp
//! --clean` removes them with the private temp. A cache is regenerable data, and on hosts
//! where `/tmp` is a tmpfs the layers hold only what sandboxed builds added or changed.
//!
//! Everything is opened here (in sandgate) without following a symlink, its identity
//! recorded, and re-opened and compared in the child, which mounts fd to fd: the layers
//! are named to overlayfs as `/proc/self/fd/N` of those checked fds, so a path swapped
//! since cannot redirect them. Where sandgate is not root, the overlay is made in the
//! sandbox's user namespace (kernel 5.11 or later) with `userxattr`. A kernel that refuses
//! the overlay leaves that cache read-only, as it is without this feature, with a note on
//! stderr: the call still runs and the host's cache is still never written.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fchmod, fstat, mkdirat, FileStat, Mode};
use sha2::{Digest, Sha256};

use super::checked::{cstring, identity, Checked};
use crate::policy::caches::Cache;
use crate::private_temp::{self, TempError};
use crate::sys;

/// One mount of caches, prepared in sandgate.
#[derive(Debug)]
pub struct CacheMount {
    how: How,
}

#[derive(Debug)]
enum How {
    /// One overlay for the directory caches beneath `lower`, all on one mount.
    Overlay {
        lower: Checked,
        upper: Checked,
        work: Checked,
        /// In a user namespace: overlayfs keeps its metadata in `user.overlay.*`.
        userxattr: bool,
        /// Each cache (the host's directory, where its bind goes) and its path beneath
        /// `lower` (empty: `lower` itself).
        caches: Vec<(Checked, PathBuf)>,
    },
    File {
        /// The host's file, where the copy is bound.
        target: Checked,
        copy: Checked,
    },
}

/// A cache mounted in the child: the fd names the mount, for making it writable again
/// after the tree went read-only and for the landlock rule.
pub struct Mounted {
    pub(super) fd: OwnedFd,
    pub(super) dir: bool,
}

/// Creates what is missing (caches in the caller's own directories, the workspace's
/// layers) and records everything the child will mount. Caches that cannot be used are
/// left out (they stay read-only).
///
/// # Errors
/// A layer directory that is a symlink, not a directory, not the caller's or open to
/// others (see `private_temp`).
pub(super) fn build(workspace: &Path, caches: &[Cache]) -> Result<Vec<CacheMount>, TempError> {
    if caches.is_empty() {
        return Ok(vec![]);
    }
    let layers = private_temp::open_layers(workspace, true)?.ok_or_else(|| TempError {
        path: private_temp::layers_path_for(workspace),
        why: "it vanished while being created".into(),
    })?;
    let checked = |fd: &OwnedFd, path: &Path| -> Result<Checked, TempError> {
        let id = identity(fd.as_fd()).map_err(|e| temp_error(path, e))?;
        let c = cstring(path).map_err(|e| temp_error(path, e))?;
        Ok(Checked { path: c, id })
    };
    let mut out = Vec::new();
    // Directory caches by the home and the mount they lie on.
    type Group = (Option<PathBuf>, u64);
    let mut groups: std::collections::BTreeMap<Group, Vec<(PathBuf, OwnedFd)>> = Default::default();
    for cache in caches {
        let Some((target, st)) = host_object(cache) else {
            continue;
        };
        if cache.dir {
            if let Ok(mount) = sys::mount_id(target.as_fd()) {
                let group = (cache.home.clone(), mount);
                groups
                    .entry(group)
                    .or_default()
                    .push((cache.path.clone(), target));
            }
            continue;
        }
        let key = key_for(&cache.path);
        let shown = layers.path.join(&key);
        let dir = owned_dir(layers.fd.as_fd(), OsStr::new(&key), None, &shown)?;
        let copy = file_copy(dir.as_fd(), &target, &st, &shown.join("file"))?;
        out.push(CacheMount {
            how: How::File {
                target: checked(&target, &cache.path)?,
                copy: checked(&copy, &shown.join("file"))?,
            },
        });
    }
    for ((home, mount), members) in groups {
        for (lower, members) in share_lower(home, mount, &layers.path, members) {
            let Ok(lower_fd) = crate::no_symlinks::open(&lower) else {
                continue;
            };
            let key = key_for(&lower);
            let shown = layers.path.join(&key);
            let dir = owned_dir(layers.fd.as_fd(), OsStr::new(&key), None, &shown)?;
            let mode = fstat(lower_fd.as_fd())
                .map_err(|e| temp_error(&lower, e))?
                .st_mode;
            let upper = owned_dir(
                dir.as_fd(),
                OsStr::new("upper"),
                Some(mode & 0o777),
                &shown.join("upper"),
            )?;
            let work = owned_dir(dir.as_fd(), OsStr::new("work"), None, &shown.join("work"))?;
            let mut binds = Vec::new();
            for (path, fd) in &members {
                let beneath = path
                    .strip_prefix(&lower)
                    .unwrap_or(Path::new(""))
                    .to_path_buf();
                binds.push((checked(fd, path)?, beneath));
            }
            out.push(CacheMount {
                how: How::Overlay {
                    lower: checked(&lower_fd, &lower)?,
                    upper: checked(&upper, &shown.join("upper"))?,
                    work: checked(&work, &shown.join("work"))?,
                    userxattr: !nix::unistd::geteuid().is_root(),
                    caches: binds,
                },
            });
        }
    }
    Ok(out)
}

/// Splits the directory caches of one home on one mount into overlays: one, on the home,
/// when the home lies on that mount too (nothing between it and a cache is another
/// filesystem, which an overlay's lower layer would not show) and does not hold the layers
/// themselves; else one each.
fn share_lower(
    home: Option<PathBuf>,
    mount: u64,
    layers: &Path,
    members: Vec<(PathBuf, OwnedFd)>,
) -> Vec<(PathBuf, Vec<(PathBuf, OwnedFd)>)> {
    let shared = home.filter(|home| {
        !layers.starts_with(home)
            && crate::no_symlinks::open(home)
                .and_then(|fd| sys::mount_id(fd.as_fd()))
                .is_ok_and(|m| m == mount)
    });
    match shared {
        Some(home) => vec![(home, members)],
        None => members
            .into_iter()
            .map(|(path, fd)| (path.clone(), vec![(path, fd)]))
            .collect(),
    }
}

fn temp_error(path: &Path, e: impl std::fmt::Display) -> TempError {
    TempError {
        path: path.to_path_buf(),
        why: e.to_string(),
    }
}

/// A layer's name: the cache's base name, readable, and a hash of its whole path.
fn key_for(path: &Path) -> String {
    let digest = Sha256::digest(path.as_os_str().as_bytes());
    let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let stem: String = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(24)
        .collect();
    let stem = if stem.is_empty() { "root".into() } else { stem };
    format!("{stem}-{hash}")
}

/// Opens the host's cache with no symlink anywhere on its way, creating it first (empty)
/// when the policy found it missing in a directory of the caller's own. `None` when it
/// cannot be used (it changed since the policy looked, or cannot be created).
fn host_object(cache: &Cache) -> Option<(OwnedFd, FileStat)> {
    let fd = if cache.exists {
        crate::no_symlinks::open(&cache.path).ok()?
    } else {
        let parent = crate::no_symlinks::open(cache.path.parent()?).ok()?;
        let name = cache.path.file_name()?;
        let st = fstat(parent.as_fd()).ok()?;
        if st.st_uid != nix::unistd::geteuid().as_raw() {
            return None;
        }
        let made = if cache.dir {
            mkdirat(parent.as_fd(), name, Mode::from_bits_truncate(0o755))
        } else {
            let flags = OFlag::O_CREAT
                | OFlag::O_EXCL
                | OFlag::O_WRONLY
                | OFlag::O_NOFOLLOW
                | OFlag::O_CLOEXEC;
            openat(parent.as_fd(), name, flags, Mode::from_bits_truncate(0o644)).map(drop)
        };
        match made {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(_) => return None,
        }
        let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        openat(parent.as_fd(), name, flags, Mode::empty()).ok()?
    };
    let st = fstat(fd.as_fd()).ok()?;
    let kind = st.st_mode & libc::S_IFMT;
    let wanted = if cache.dir {
        libc::S_IFDIR
    } else {
        libc::S_IFREG
    };
    (kind == wanted).then_some((fd, st))
}

/// Opens (creating it when missing) the directory `name` beneath `parent`, which must be
/// the caller's; `mode` is given to a new one (default 0700, and then nobody else may be
/// let in).
fn owned_dir(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    mode: Option<u32>,
    shown: &Path,
) -> Result<OwnedFd, TempError> {
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let fd = match openat(parent, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => {
            match mkdirat(parent, name, Mode::from_bits_truncate(0o700)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(temp_error(shown, format!("cannot create it: {e}"))),
            }
            if let Some(mode) = mode {
                let rw =
                    OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
                let dir =
                    openat(parent, name, rw, Mode::empty()).map_err(|e| temp_error(shown, e))?;
                fchmod(dir.as_fd(), Mode::from_bits_truncate(mode))
                    .map_err(|e| temp_error(shown, e))?;
            }
            openat(parent, name, flags, Mode::empty()).map_err(|e| temp_error(shown, e))?
        }
        Err(Errno::ENOTDIR | Errno::ELOOP) => {
            return Err(temp_error(shown, "it is a symlink or not a directory"))
        }
        Err(e) => return Err(temp_error(shown, e)),
    };
    let st = fstat(fd.as_fd()).map_err(|e| temp_error(shown, e))?;
    let me = nix::unistd::geteuid().as_raw();
    if st.st_uid != me {
        return Err(temp_error(
            shown,
            format!("owned by uid {}, not {me}", st.st_uid),
        ));
    }
    if mode.is_none() && st.st_mode & 0o077 != 0 {
        let mode = st.st_mode & 0o7777;
        return Err(temp_error(
            shown,
            format!("mode {mode:o} lets others in (must be 0700)"),
        ));
    }
    Ok(fd)
}

/// Opens the workspace's copy of a cached file, making it from the host's `source` the
/// first time.
fn file_copy(
    dir: BorrowedFd<'_>,
    source: &OwnedFd,
    st: &FileStat,
    shown: &Path,
) -> Result<OwnedFd, TempError> {
    let name = c"file";
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = match openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => {
            let create = OFlag::O_CREAT
                | OFlag::O_EXCL
                | OFlag::O_WRONLY
                | OFlag::O_NOFOLLOW
                | OFlag::O_CLOEXEC;
            match openat(dir, name, create, Mode::from_bits_truncate(0o600)) {
                Ok(copy) => {
                    let mut copy = std::fs::File::from(copy);
                    // The very inode recorded, read through its own fd.
                    let from = format!("/proc/self/fd/{}", source.as_raw_fd());
                    let mut from = std::fs::File::open(from).map_err(|e| temp_error(shown, e))?;
                    io::copy(&mut from, &mut copy).map_err(|e| temp_error(shown, e))?;
                    fchmod(copy.as_fd(), Mode::from_bits_truncate(st.st_mode & 0o777))
                        .map_err(|e| temp_error(shown, e))?;
                }
                Err(Errno::EEXIST) => {}
                Err(e) => return Err(temp_error(shown, format!("cannot create it: {e}"))),
            }
            openat(dir, name, flags, Mode::empty()).map_err(|e| temp_error(shown, e))?
        }
        Err(e) => return Err(temp_error(shown, e)),
    };
    let st = fstat(fd.as_fd()).map_err(|e| temp_error(shown, e))?;
    let me = nix::unistd::geteuid().as_raw();
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_uid != me {
        return Err(temp_error(shown, "not a regular file of the caller's own"));
    }
    Ok(fd)
}

/// A mount of caches, its layers re-opened and checked in the child while the host's
/// `/tmp` (where they are) is still in view.
pub(super) struct Opened<'a> {
    how: &'a How,
    /// The overlay's lower, upper and work directories, or the file's copy.
    layers: Vec<OwnedFd>,
}

impl CacheMount {
    /// Re-opens the layers in the child; `ESTALE` when something was swapped since.
    pub(super) fn open(&self) -> io::Result<Opened<'_>> {
        let layers = match &self.how {
            How::Overlay {
                lower, upper, work, ..
            } => vec![lower.open()?, upper.open()?, work.open()?],
            How::File { copy, .. } => vec![copy.open()?],
        };
        Ok(Opened {
            how: &self.how,
            layers,
        })
    }
}

impl How {
    /// Re-opens where each bind goes, in the view as it is now: after the writable and
    /// read-only binds of the roots (a cache in a read-only home entry is mounted on top of
    /// that entry's bind, not beneath it, where nothing would see it).
    fn targets(&self) -> io::Result<Vec<OwnedFd>> {
        match self {
            How::Overlay { caches, .. } => caches.iter().map(|(target, _)| target.open()).collect(),
            How::File { target, .. } => Ok(vec![target.open()?]),
        }
    }
}

/// A cache whose overlay the kernel refused: it stays read-only. The child cannot say so
/// itself (a write to a stderr nobody reads would hold it for ever), so sandgate does.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Refused {
    pub path: PathBuf,
    pub errno: i32,
}

impl Opened<'_> {
    /// Mounts each cache at its path. `Ok(Err(_))` when the kernel refuses to make the
    /// overlay: those caches then stay read-only.
    pub(super) fn mount(self) -> io::Result<Result<Vec<Mounted>, Vec<Refused>>> {
        let targets = self.how.targets()?;
        match (self.how, self.layers.as_slice()) {
            (
                How::Overlay {
                    userxattr, caches, ..
                },
                [lower, upper, work],
            ) => {
                let fs = match overlay(lower.as_fd(), upper.as_fd(), work.as_fd(), *userxattr) {
                    Ok(fs) => fs,
                    Err(e) => {
                        let errno = e.raw_os_error().unwrap_or(libc::EIO);
                        return Ok(Err(caches
                            .iter()
                            .map(|(target, _)| Refused {
                                path: PathBuf::from(OsStr::from_bytes(target.path.to_bytes())),
                                errno,
                            })
                            .collect()));
                    }
                };
                let mut mounted = Vec::new();
                for ((_, beneath), target) in caches.iter().zip(&targets) {
                    let tree = sys::clone_tree(
                        crate::no_symlinks::beneath(fs.as_fd(), beneath, OFlag::O_DIRECTORY)?
                            .as_fd(),
                        false,
                    )?;
                    sys::move_mount(tree.as_fd(), target.as_fd())?;
                    mounted.push(Mounted {
                        fd: tree,
                        dir: true,
                    });
                }
                Ok(Ok(mounted))
            }
            (How::File { .. }, [copy]) => {
                let mut mounted = Vec::new();
                for target in &targets {
                    let tree = sys::clone_tree(copy.as_fd(), false)?;
                    sys::move_mount(tree.as_fd(), target.as_fd())?;
                    mounted.push(Mounted {
                        fd: tree,
                        dir: false,
                    });
                }
                Ok(Ok(mounted))
            }
            _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }
}

/// A detached overlay mount of `lower` with `upper` and `work`, each named by its fd.
/// Redirects and metacopy are off, so nothing in an upper layer is followed elsewhere; no
/// set-uid programs or device nodes work from it.
fn overlay(
    lower: BorrowedFd<'_>,
    upper: BorrowedFd<'_>,
    work: BorrowedFd<'_>,
    userxattr: bool,
) -> io::Result<OwnedFd> {
    let by_fd = |fd: BorrowedFd<'_>| {
        CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
    };
    let fs = sys::fsopen(c"overlay")?;
    let set =
        |key: &CStr, value: &CStr| sys::fsconfig(fs.as_fd(), sys::FsConfig::String(key, value));
    set(c"lowerdir", &by_fd(lower)?)?;
    set(c"upperdir", &by_fd(upper)?)?;
    set(c"workdir", &by_fd(work)?)?;
    if userxattr {
        sys::fsconfig(fs.as_fd(), sys::FsConfig::Flag(c"userxattr"))?;
    }
    set(c"redirect_dir", c"nofollow")?;
    set(c"metacopy", c"off")?;
    set(c"index", c"off")?;
    sys::fsconfig(fs.as_fd(), sys::FsConfig::Create)?;
    sys::fsmount(fs.as_fd(), libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_keys_are_readable_and_distinct() {
        let a = key_for(Path::new("/home/a/.cargo/registry"));
        let b = key_for(Path::new("/root/.cargo/registry"));
        assert!(a.starts_with("registry-") && b.starts_with("registry-"));
        assert_ne!(a, b);
        assert!(key_for(Path::new("/h/.package-cache")).starts_with("_package_cache-"));
    }
}
