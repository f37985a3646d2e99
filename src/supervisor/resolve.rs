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
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
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

fn open_at(dir: BorrowedFd<'_>, name: &[u8]) -> Result<OwnedFd, Errno> {
    openat(
        dir.as_fd(),
        std::ffi::OsStr::from_bytes(name),
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// A directory fd during a walk: borrowed (the caller's root or start) or opened here.
pub enum Dir<'a> {
    Borrowed(BorrowedFd<'a>),
    Owned(OwnedFd),
}

impl AsFd for Dir<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Dir::Borrowed(fd) => *fd,
            Dir::Owned(fd) => fd.as_fd(),
        }
    }
}

/// Where a path leads in the caller's view.
pub struct Target<'a> {
    /// The directory holding the last component.
    pub dir: Dir<'a>,
    /// The object the path names (`O_PATH`), `None` when the last component does not exist.
    pub object: Option<(OwnedFd, FileStat)>,
    /// The last component looked up in `dir`; `None` when the path names a directory
    /// itself (`/`, `.`, `..`).
    pub name: Option<Vec<u8>>,
}

/// The caller's root directory and its identity (`..` stops there).
pub struct Root {
    pub fd: OwnedFd,
    pub id: Inode,
}

impl Root {
    /// Wraps an open root directory.
    ///
    /// # Errors
    /// The fd cannot be stat'ed.
    pub fn new(fd: OwnedFd) -> Result<Root, Errno> {
        let id = inode(&fstat(fd.as_fd())?);
        Ok(Root { fd, id })
    }
}

/// Resolves `path` from the caller's `root` and `start` (its cwd or a dirfd) the way the
/// kernel would, following a symlink in the last component only when `follow`. With
/// `creds`, a directory the caller may not search stops the walk with EACCES. A walk
/// that enters the filesystem with device `stop` (procfs, whose magic links name no path)
/// gives up with EXDEV. It runs for every observed call, so it makes as few syscalls as it
/// can: one `openat` and one `fstat` per component.
///
/// # Errors
/// ENOENT (a missing directory on the way), ENOTDIR, ELOOP, EACCES, EXDEV.
pub fn resolve<'a>(
    root: &'a Root,
    start: BorrowedFd<'a>,
    path: &[u8],
    follow: bool,
    creds: Option<&Creds>,
    stop: Option<u64>,
) -> Result<Target<'a>, Errno> {
    match walk(root, start, path, follow, creds, stop)? {
        Walked::Target(target) => Ok(target),
        Walked::Stopped(_) => Err(Errno::EXDEV),
    }
}

/// What a walk came to.
pub enum Walked<'a> {
    Target(Target<'a>),
    /// It entered the filesystem it was told to stop at (procfs); the components still to
    /// go beneath that filesystem's root, in order (`["self", "fd", "1"]` for
    /// `/dev/stdout`).
    Stopped(Vec<Vec<u8>>),
}

/// As [`resolve`], but a walk that enters the filesystem with device `stop` says where it
/// was going there instead of failing.
///
/// # Errors
/// As [`resolve`], but for EXDEV.
pub fn walk<'a>(
    root: &'a Root,
    start: BorrowedFd<'a>,
    path: &[u8],
    follow: bool,
    creds: Option<&Creds>,
    stop: Option<u64>,
) -> Result<Walked<'a>, Errno> {
    let mut cur = Dir::Borrowed(if path.starts_with(b"/") {
        root.fd.as_fd()
    } else {
        start
    });
    // The current directory's stat, once known (the walk stats every step anyway).
    let mut cur_st: Option<FileStat> = None;
    let mut pending: Vec<Vec<u8>> = split(path);
    let mut links = 0;
    if pending.is_empty() {
        // "/" or "": the start directory itself.
        return itself(cur).map(Walked::Target);
    }
    while let Some(name) = pending.pop() {
        let last = pending.is_empty();
        let needs_stat = creds.is_some() || name.as_slice() == b"..";
        if needs_stat && cur_st.is_none() {
            cur_st = Some(fstat(cur.as_fd())?);
        }
        if let (Some(c), Some(st)) = (creds, &cur_st) {
            if !c.may(st, 1) {
                return Err(Errno::EACCES);
            }
        }
        let stays = name.as_slice() == b"."
            || (name.as_slice() == b".." && cur_st.as_ref().map(inode) == Some(root.id));
        if stays {
            if !last {
                continue;
            }
            // A path ending in `.`: it names the directory itself.
            return itself(cur).map(Walked::Target);
        }
        let next = match name.as_slice() {
            b".." => open_at(cur.as_fd(), b"..")?,
            _ => match open_at(cur.as_fd(), &name) {
                Ok(fd) => fd,
                Err(Errno::ENOENT) if last => {
                    return Ok(Walked::Target(Target {
                        dir: cur,
                        object: None,
                        name: Some(name),
                    }))
                }
                Err(e) => return Err(e),
            },
        };
        let st = fstat(next.as_fd())?;
        if stop == Some(st.st_dev) {
            return Ok(Walked::Stopped(pending.into_iter().rev().collect()));
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
                cur = Dir::Borrowed(root.fd.as_fd());
                cur_st = None;
            }
            pending.extend(split(target));
            continue;
        }
        if last {
            let name = (name.as_slice() != b"..").then_some(name);
            return Ok(Walked::Target(Target {
                dir: cur,
                object: Some((next, st)),
                name,
            }));
        }
        if kind != SFlag::S_IFDIR {
            return Err(Errno::ENOTDIR);
        }
        cur = Dir::Owned(next);
        cur_st = Some(st);
    }
    // Only reached when a symlink's target was empty.
    Err(Errno::ENOENT)
}

/// The target a path naming a directory itself (`/`, `.`) has: that directory.
fn itself(dir: Dir<'_>) -> Result<Target<'_>, Errno> {
    let st = fstat(dir.as_fd())?;
    let own = dir
        .as_fd()
        .try_clone_to_owned()
        .map_err(|_| Errno::EMFILE)?;
    Ok(Target {
        dir,
        object: Some((own, st)),
        name: None,
    })
}

/// Resolves a unix socket path for `connect` and checks what the kernel would: the path
/// names a socket the caller may write to.
///
/// # Errors
/// As [`resolve`], plus ENOENT (no such socket), ECONNREFUSED (not a socket), EACCES.
pub fn resolve_socket<'a>(
    root: &'a Root,
    cwd: BorrowedFd<'a>,
    path: &[u8],
    creds: &Creds,
) -> Result<(Dir<'a>, OwnedFd), Errno> {
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
pub fn ancestry(dir: BorrowedFd<'_>, root: &Root) -> Result<Vec<Inode>, Errno> {
    let mut cur = Dir::Borrowed(dir);
    let mut chain = Vec::new();
    for _ in 0..MAX_DEPTH {
        let id = inode(&fstat(cur.as_fd())?);
        chain.push(id);
        if id == root.id {
            break;
        }
        cur = Dir::Owned(open_at(cur.as_fd(), b"..")?);
    }
    Ok(chain)
}

/// Walks up from `dir` (itself first) to the caller's `root` and returns the index of the
/// set in `sets` that holds the nearest directory on the way, `None` when none does. The
/// nearest wins: a read-only directory kept visible inside a writable private temp is
/// read-only, however writable what lies above it is.
///
/// # Errors
/// A failure to open `..` on the way up.
pub fn nearest(
    dir: BorrowedFd<'_>,
    root: &Root,
    sets: &[&HashSet<Inode>],
) -> Result<Option<usize>, Errno> {
    Ok(ancestry(dir, root)?
        .iter()
        .find_map(|id| sets.iter().position(|set| set.contains(id))))
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
        let root = Root::new(dir_fd(std::path::Path::new("/"))).map_err(std::io::Error::from)?;
        let cwd = dir_fd(&base.join("a"));
        let roots = HashSet::from([inode(&fstat(dir_fd(&base).as_fd())?)]);
        for path in [b"s".as_slice(), b"../a/./s", b"../link"] {
            let (dir, _) =
                resolve_socket(&root, cwd.as_fd(), path, &creds()).map_err(std::io::Error::from)?;
            assert_eq!(
                nearest(dir.as_fd(), &root, &[&roots]).map_err(std::io::Error::from)?,
                Some(0)
            );
        }
        assert_eq!(
            resolve_socket(&root, cwd.as_fd(), b"missing", &creds()).err(),
            Some(Errno::ENOENT)
        );
        assert_eq!(
            resolve_socket(&root, cwd.as_fd(), b"..", &creds()).err(),
            Some(Errno::ECONNREFUSED)
        );
        // Without following, a symlink is the object itself; a missing name is no object.
        let base_fd = dir_fd(&base);
        let t = resolve(&root, base_fd.as_fd(), b"link", false, None, None)
            .map_err(std::io::Error::from)?;
        assert!(t
            .object
            .is_some_and(|(_, st)| st.st_mode & libc::S_IFMT == libc::S_IFLNK));
        assert!(resolve(&root, cwd.as_fd(), b"new-file", true, None, None)
            .is_ok_and(|t| t.object.is_none()));
        // A walk into a filesystem it must not interpret stops.
        let dev = fstat(cwd.as_fd())?.st_dev;
        assert_eq!(
            resolve(&root, cwd.as_fd(), b"s", true, None, Some(dev)).err(),
            Some(Errno::EXDEV)
        );
        Ok(())
    }

    #[test]
    fn a_symlink_loop_is_eloop() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        std::os::unix::fs::symlink("loop", dir.path().join("loop"))?;
        let root = Root::new(dir_fd(std::path::Path::new("/"))).map_err(std::io::Error::from)?;
        let cwd = dir_fd(dir.path());
        assert_eq!(
            resolve_socket(&root, cwd.as_fd(), b"loop", &creds()).err(),
            Some(Errno::ELOOP)
        );
        Ok(())
    }
}
