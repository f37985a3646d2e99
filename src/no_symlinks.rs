//! Opening a canonical path only as the object it named when it was resolved: no
//! component may be a symlink, so nothing a process swapped in since (one an earlier call
//! left running) is followed. The one walk of that kind; the walks that also create what
//! is missing or check each level's owner (`private_temp`, `logfile`, the mount points of
//! `sandbox::mounts`) and the supervisor's, which resolves a sandboxed caller's path as the
//! kernel would for it (`supervisor::resolve`), do more at each step and keep their own.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};

use nix::errno::Errno;
use nix::fcntl::{openat, openat2, OFlag, OpenHow, ResolveFlag, AT_FDCWD};
use nix::sys::stat::{fstat, Mode};

/// Opens a canonical `path` (`O_PATH`) only if no component of it is a symlink: it then
/// opens as the object it named when it was resolved, not whatever a link swapped in since
/// (by a process an earlier call left running) points to.
///
/// # Errors
/// `ELOOP` when a component is a symlink now; `EINVAL` for a relative path; any other
/// open failure.
pub fn open(path: &Path) -> io::Result<OwnedFd> {
    if !path.is_absolute() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    match openat2(AT_FDCWD, path, how) {
        Err(Errno::ENOSYS) => {
            let root = nix::fcntl::open("/", OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())?;
            let below = path.strip_prefix("/").unwrap_or(path);
            by_hand(root.as_fd(), below, OFlag::empty())
        }
        other => Ok(other?),
    }
}

/// Opens `path` beneath the directory `dir` (`O_PATH`, and `O_DIRECTORY` when `flags`
/// has it), none of its components a symlink and none leaving `dir`. One `openat2`
/// where the kernel offers it; inside a sandgate sandbox (a nested call), where `openat2`
/// is refused, the same by hand, one component at a time, none of them followed.
///
/// # Errors
/// `ELOOP` when a component is a symlink; `EXDEV` when the path would leave `dir` (by
/// hand: when it has any `..`); any other open failure.
pub fn beneath(dir: BorrowedFd<'_>, path: &Path, flags: OFlag) -> io::Result<OwnedFd> {
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC | flags)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_BENEATH);
    let path = match path.as_os_str().is_empty() {
        true => Path::new("."),
        false => path,
    };
    match openat2(dir, path, how) {
        Err(Errno::ENOSYS) => by_hand(dir, path, flags),
        other => Ok(other?),
    }
}

/// [`beneath`] one component at a time, each opened without following it and refused
/// when it is a symlink (as the kernel's walk would, `ELOOP`).
fn by_hand(dir: BorrowedFd<'_>, path: &Path, flags: OFlag) -> io::Result<OwnedFd> {
    let step = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut cur = openat(dir, ".", step | OFlag::O_DIRECTORY, Mode::empty())?;
    let mut kind = libc::S_IFDIR;
    for part in path.components() {
        let name = match part {
            Component::Normal(name) => name,
            Component::CurDir => continue,
            // Neither may appear in a path that stays beneath `dir`.
            Component::RootDir | Component::Prefix(_) | Component::ParentDir => {
                return Err(io::Error::from_raw_os_error(libc::EXDEV))
            }
        };
        if kind != libc::S_IFDIR {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        cur = openat(cur.as_fd(), name, step, Mode::empty())?;
        kind = fstat(cur.as_fd())?.st_mode & libc::S_IFMT;
        if kind == libc::S_IFLNK {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
    }
    if flags.contains(OFlag::O_DIRECTORY) && kind != libc::S_IFDIR {
        return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    Ok(cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Result = std::result::Result<(), Box<dyn std::error::Error>>;

    /// `base/a/b/file`, and `base/link` → `a`.
    fn tree() -> std::result::Result<tempfile::TempDir, Box<dyn std::error::Error>> {
        let base = tempfile::tempdir()?;
        std::fs::create_dir_all(base.path().join("a/b"))?;
        std::fs::write(base.path().join("a/b/file"), "x")?;
        std::os::unix::fs::symlink("a", base.path().join("link"))?;
        Ok(base)
    }

    fn errno(r: io::Result<OwnedFd>) -> Option<i32> {
        r.err().and_then(|e| e.raw_os_error())
    }

    #[test]
    fn the_kernel_walk_and_the_hand_walk_agree() -> Result {
        let base = tree()?;
        let dir = nix::fcntl::open(base.path(), OFlag::O_PATH, Mode::empty())?;
        for walk in [beneath, by_hand] {
            assert!(walk(dir.as_fd(), Path::new("a/b/file"), OFlag::empty()).is_ok());
            assert!(walk(dir.as_fd(), Path::new("a/./b"), OFlag::O_DIRECTORY).is_ok());
            assert!(walk(dir.as_fd(), Path::new(""), OFlag::O_DIRECTORY).is_ok());
            let through_link = walk(dir.as_fd(), Path::new("link/b"), OFlag::empty());
            assert_eq!(errno(through_link), Some(libc::ELOOP));
            let at_link = walk(dir.as_fd(), Path::new("link"), OFlag::empty());
            assert_eq!(errno(at_link), Some(libc::ELOOP));
            let up = walk(dir.as_fd(), Path::new("a/../../x"), OFlag::empty());
            assert_eq!(errno(up), Some(libc::EXDEV));
            let file_as_dir = walk(dir.as_fd(), Path::new("a/b/file"), OFlag::O_DIRECTORY);
            assert_eq!(errno(file_as_dir), Some(libc::ENOTDIR));
        }
        Ok(())
    }

    #[test]
    fn a_canonical_path_opens_and_a_link_on_it_is_refused() -> Result {
        let base = tree()?;
        let base = std::fs::canonicalize(base.path())?;
        assert!(open(&base.join("a/b/file")).is_ok());
        assert_eq!(errno(open(&base.join("link/b/file"))), Some(libc::ELOOP));
        assert_eq!(errno(open(Path::new("a/b/file"))), Some(libc::EINVAL));
        Ok(())
    }
}
