//! Resolves a unix socket path the way the kernel would for the sandboxed caller — from
//! its root and cwd, inside its mount namespace, through every symlink — and checks that
//! the socket lies beneath a writable root.
//!
//! Every step opens the next component relative to the previous *fd* with `O_NOFOLLOW`,
//! and symlinks are read from the fd that was opened, so the path can't be swapped under
//! the walk; the result is an `O_PATH` fd of the socket inode itself, through which the
//! supervisor connects. Symlinks are followed by hand (not `RESOLVE_IN_ROOT`) so that `..`
//! and absolute targets resolve against the *caller's* root.

use std::collections::HashSet;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use nix::errno::Errno;
use nix::fcntl::{openat, readlinkat, OFlag};
use nix::sys::stat::{fstat, FileStat, Mode, SFlag};

/// A file's identity, independent of the mount it was reached through.
pub type Inode = (u64, u64);

/// Links followed before giving up with ELOOP, as the kernel does.
const MAX_LINKS: usize = 40;
/// Depth bound for the walk up to the root.
const MAX_DEPTH: usize = 4096;

/// The caller's credentials as the kernel's permission checks see them (no capabilities:
/// the sandbox dropped them all).
#[derive(Debug, Clone)]
pub struct Creds {
    pub fsuid: u32,
    pub fsgid: u32,
    pub groups: Vec<u32>,
}

impl Creds {
    /// Returns true when these credentials get `bit` (4 read, 2 write, 1 search) on `st`.
    pub fn may(&self, st: &FileStat, bit: u32) -> bool {
        let mode = st.st_mode;
        let shift = if self.fsuid == st.st_uid {
            6
        } else if self.fsgid == st.st_gid || self.groups.contains(&st.st_gid) {
            3
        } else {
            0
        };
        (mode >> shift) & bit != 0
    }
}

fn inode(st: &FileStat) -> Inode {
    (st.st_dev, st.st_ino)
}

fn open_at(dir: &OwnedFd, name: &[u8]) -> Result<OwnedFd, Errno> {
    openat(
        dir.as_fd(),
        std::ffi::OsStr::from_bytes(name),
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Where a path leads in the caller's view.
pub struct Target {
    /// The directory holding the last component.
    pub dir: OwnedFd,
    /// The object the path names (`O_PATH`), `None` when the last component does not exist.
    pub object: Option<(OwnedFd, FileStat)>,
}

/// Resolves `path` from the caller's `root` and `start` (its cwd or a dirfd) the way the
/// kernel would, following a symlink in the last component only when `follow`. With
/// `creds`, a directory the caller may not search stops the walk with EACCES. A walk
/// that enters the filesystem with device `stop` (procfs, whose magic links name no path)
/// gives up with EXDEV.
///
/// # Errors
/// ENOENT (a missing directory on the way), ENOTDIR, ELOOP, EACCES, EXDEV.
pub fn resolve(
    root: &OwnedFd,
    start: &OwnedFd,
    path: &[u8],
    follow: bool,
    creds: Option<&Creds>,
    stop: Option<u64>,
) -> Result<Target, Errno> {
    let root_id = inode(&fstat(root.as_fd())?);
    let dup = |fd: &OwnedFd| fd.try_clone().map_err(|_| Errno::EMFILE);
    let mut cur = if path.starts_with(b"/") {
        dup(root)?
    } else {
        dup(start)?
    };
    let mut pending: Vec<Vec<u8>> = split(path);
    let mut links = 0;
    if pending.is_empty() {
        // "/" or "": the start directory itself.
        let st = fstat(cur.as_fd())?;
        return Ok(Target {
            dir: dup(&cur)?,
            object: Some((cur, st)),
        });
    }
    while let Some(name) = pending.pop() {
        let last = pending.is_empty();
        let cur_st = fstat(cur.as_fd())?;
        if creds.is_some_and(|c| !c.may(&cur_st, 1)) {
            return Err(Errno::EACCES);
        }
        let next = match name.as_slice() {
            b"." => dup(&cur)?,
            b".." if inode(&cur_st) == root_id => dup(&cur)?,
            b".." => open_at(&cur, b"..")?,
            _ => match open_at(&cur, &name) {
                Ok(fd) => fd,
                Err(Errno::ENOENT) if last => {
                    return Ok(Target {
                        dir: cur,
                        object: None,
                    })
                }
                Err(e) => return Err(e),
            },
        };
        let st = fstat(next.as_fd())?;
        if stop == Some(st.st_dev) {
            return Err(Errno::EXDEV);
        }
        let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        if kind == SFlag::S_IFLNK && (follow || !last) {
            links += 1;
            if links > MAX_LINKS {
                return Err(Errno::ELOOP);
            }
            let target = readlinkat(next.as_fd(), "")?;
            let target = target.as_bytes();
            if target.starts_with(b"/") {
                cur = dup(root)?;
            }
            pending.extend(split(target));
            continue;
        }
        if last {
            return Ok(Target {
                dir: cur,
                object: Some((next, st)),
            });
        }
        if kind != SFlag::S_IFDIR {
            return Err(Errno::ENOTDIR);
        }
        cur = next;
    }
    // Only reached when a symlink's target was empty.
    Err(Errno::ENOENT)
}

/// Resolves a unix socket path for `connect` and checks what the kernel would: the path
/// names a socket the caller may write to.
///
/// # Errors
/// As [`resolve`], plus ENOENT (no such socket), ECONNREFUSED (not a socket), EACCES.
pub fn resolve_socket(
    root: &OwnedFd,
    cwd: &OwnedFd,
    path: &[u8],
    creds: &Creds,
) -> Result<(OwnedFd, OwnedFd), Errno> {
    let target = resolve(root, cwd, path, true, Some(creds), None)?;
    let Some((socket, st)) = target.object else {
        return Err(Errno::ENOENT);
    };
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFSOCK {
        return Err(Errno::ECONNREFUSED);
    }
    if !creds.may(&st, 2) {
        return Err(Errno::EACCES);
    }
    Ok((target.dir, socket))
}

/// Splits a path into components, reversed, so that `pop` yields them in order.
fn split(path: &[u8]) -> Vec<Vec<u8>> {
    path.split(|b| *b == b'/')
        .filter(|c| !c.is_empty())
        .rev()
        .map(<[u8]>::to_vec)
        .collect()
}

/// Returns the identities of `dir` and each of its ancestors up to the caller's `root`.
///
/// # Errors
/// A failure to open `..` on the way up.
pub fn ancestry(dir: &OwnedFd, root: &OwnedFd) -> Result<Vec<Inode>, Errno> {
    let root_id = inode(&fstat(root.as_fd())?);
    let mut cur = dir.try_clone().map_err(|_| Errno::EMFILE)?;
    let mut chain = Vec::new();
    for _ in 0..MAX_DEPTH {
        let id = inode(&fstat(cur.as_fd())?);
        chain.push(id);
        if id == root_id {
            break;
        }
        cur = open_at(&cur, b"..")?;
    }
    Ok(chain)
}

/// Returns true when `dir` or one of its ancestors (up to the caller's `root`) is one of
/// `roots`.
///
/// # Errors
/// A failure to open `..` on the way up.
pub fn is_beneath(dir: &OwnedFd, root: &OwnedFd, roots: &HashSet<Inode>) -> Result<bool, Errno> {
    Ok(ancestry(dir, root)?.iter().any(|id| roots.contains(id)))
}

/// Returns a file's identity.
pub fn identity(st: &FileStat) -> Inode {
    inode(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn creds() -> Creds {
        Creds {
            fsuid: nix::unistd::geteuid().as_raw(),
            fsgid: nix::unistd::getegid().as_raw(),
            groups: vec![],
        }
    }

    fn dir_fd(path: &std::path::Path) -> OwnedFd {
        match std::fs::File::open(path) {
            Ok(f) => f.into(),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn follows_symlinks_and_dotdot_and_finds_the_socket() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let base = std::fs::canonicalize(dir.path())?;
        std::fs::create_dir(base.join("a"))?;
        let _l = UnixListener::bind(base.join("a/s"))?;
        std::os::unix::fs::symlink(base.join("a/s"), base.join("link"))?;
        let root = dir_fd(std::path::Path::new("/"));
        let cwd = dir_fd(&base.join("a"));
        let roots = HashSet::from([inode(&fstat(dir_fd(&base).as_fd())?)]);
        for path in [b"s".as_slice(), b"../a/./s", b"../link"] {
            let (dir, _) =
                resolve_socket(&root, &cwd, path, &creds()).map_err(std::io::Error::from)?;
            assert!(is_beneath(&dir, &root, &roots).map_err(std::io::Error::from)?);
        }
        assert_eq!(
            resolve_socket(&root, &cwd, b"missing", &creds()).err(),
            Some(Errno::ENOENT)
        );
        assert_eq!(
            resolve_socket(&root, &cwd, b"..", &creds()).err(),
            Some(Errno::ECONNREFUSED)
        );
        // Without following, a symlink is the object itself; a missing name is no object.
        let t = resolve(&root, &dir_fd(&base), b"link", false, None, None)
            .map_err(std::io::Error::from)?;
        assert!(t
            .object
            .is_some_and(|(_, st)| st.st_mode & libc::S_IFMT == libc::S_IFLNK));
        assert!(
            resolve(&root, &cwd, b"new-file", true, None, None).is_ok_and(|t| t.object.is_none())
        );
        // A walk into a filesystem it must not interpret stops.
        let dev = fstat(cwd.as_fd())?.st_dev;
        assert_eq!(
            resolve(&root, &cwd, b"s", true, None, Some(dev)).err(),
            Some(Errno::EXDEV)
        );
        Ok(())
    }

    #[test]
    fn a_symlink_loop_is_eloop() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        std::os::unix::fs::symlink("loop", dir.path().join("loop"))?;
        let root = dir_fd(std::path::Path::new("/"));
        let cwd = dir_fd(dir.path());
        assert_eq!(
            resolve_socket(&root, &cwd, b"loop", &creds()).err(),
            Some(Errno::ELOOP)
        );
        Ok(())
    }
}
