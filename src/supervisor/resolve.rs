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

/// The result of a successful resolution.
pub struct Resolved {
    /// The directory holding the socket.
    pub dir: OwnedFd,
    /// An `O_PATH` fd of the socket inode.
    pub socket: OwnedFd,
}

/// Resolves `path` from the caller's `root` and `cwd` and returns the socket it names.
///
/// # Errors
/// The errno the kernel's own `connect` would give: ENOENT, ENOTDIR, ELOOP, EACCES (a
/// directory the caller may not search or a socket it may not write), ECONNREFUSED (not a
/// socket).
pub fn resolve(
    root: &OwnedFd,
    cwd: &OwnedFd,
    path: &[u8],
    creds: &Creds,
) -> Result<Resolved, Errno> {
    let root_id = inode(&fstat(root.as_fd())?);
    let mut cur = if path.starts_with(b"/") {
        root.try_clone()
    } else {
        cwd.try_clone()
    }
    .map_err(|_| Errno::EMFILE)?;
    let mut pending: Vec<Vec<u8>> = split(path);
    let mut links = 0;
    while let Some(name) = pending.pop() {
        let last = pending.is_empty();
        let cur_st = fstat(cur.as_fd())?;
        if !creds.may(&cur_st, 1) {
            return Err(Errno::EACCES);
        }
        match name.as_slice() {
            b"." => {}
            b".." => {
                if inode(&cur_st) != root_id {
                    cur = open_at(&cur, b"..")?;
                }
            }
            _ => {
                let next = open_at(&cur, &name)?;
                let st = fstat(next.as_fd())?;
                let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
                if kind == SFlag::S_IFLNK {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(Errno::ELOOP);
                    }
                    let target = readlinkat(next.as_fd(), "")?;
                    let target = target.as_bytes();
                    if target.starts_with(b"/") {
                        cur = root.try_clone().map_err(|_| Errno::EMFILE)?;
                    }
                    pending.extend(split(target));
                    continue;
                }
                if last {
                    if kind != SFlag::S_IFSOCK {
                        return Err(Errno::ECONNREFUSED);
                    }
                    if !creds.may(&st, 2) {
                        return Err(Errno::EACCES);
                    }
                    return Ok(Resolved {
                        dir: cur,
                        socket: next,
                    });
                }
                if kind != SFlag::S_IFDIR {
                    return Err(Errno::ENOTDIR);
                }
                cur = next;
            }
        }
    }
    // The path ended in a directory (or was empty).
    Err(if path.is_empty() {
        Errno::ENOENT
    } else {
        Errno::ECONNREFUSED
    })
}

/// Splits a path into components, reversed, so that `pop` yields them in order.
fn split(path: &[u8]) -> Vec<Vec<u8>> {
    path.split(|b| *b == b'/')
        .filter(|c| !c.is_empty())
        .rev()
        .map(<[u8]>::to_vec)
        .collect()
}

/// Returns true when `dir` or one of its ancestors (up to the caller's `root`) is one of
/// `roots`.
///
/// # Errors
/// A failure to open `..` on the way up.
pub fn is_beneath(dir: &OwnedFd, root: &OwnedFd, roots: &HashSet<Inode>) -> Result<bool, Errno> {
    let root_id = inode(&fstat(root.as_fd())?);
    let mut cur = dir.try_clone().map_err(|_| Errno::EMFILE)?;
    for _ in 0..MAX_DEPTH {
        let id = inode(&fstat(cur.as_fd())?);
        if roots.contains(&id) {
            return Ok(true);
        }
        if id == root_id {
            return Ok(false);
        }
        cur = open_at(&cur, b"..")?;
    }
    Ok(false)
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
        for path in [b"s".as_slice(), b"../a/./s", b"../link"] {
            let r = resolve(&root, &cwd, path, &creds()).map_err(std::io::Error::from)?;
            let roots = HashSet::from([inode(&fstat(dir_fd(&base).as_fd())?)]);
            assert!(is_beneath(&r.dir, &root, &roots).map_err(std::io::Error::from)?);
        }
        assert_eq!(
            resolve(&root, &cwd, b"missing", &creds()).err(),
            Some(Errno::ENOENT)
        );
        assert_eq!(
            resolve(&root, &cwd, b"..", &creds()).err(),
            Some(Errno::ECONNREFUSED)
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
            resolve(&root, &cwd, b"loop", &creds()).err(),
            Some(Errno::ELOOP)
        );
        Ok(())
    }
}
