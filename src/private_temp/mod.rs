//! The per-workspace private temp directory: what `/tmp` is inside a `workspace-write`
//! sandbox. It lives on the host at `/tmp/sandgate-UID/NAME-HASH`, one per workspace, so a
//! script written to `/tmp` in one call is there in the next call in the same workspace,
//! and no other workspace (nor anything of the host's `/tmp`) is visible beside it.
//!
//! Beside it, `/tmp/sandgate-UID/NAME-HASH.caches` holds the workspace's copy-on-write
//! layers of the toolchain caches (`caches`): outside the private temp, so the sandbox can
//! never reach a layer it has mounted (and `/tmp` hides every other workspace's). So does
//! `/tmp/sandgate-UID/kept`, the records of kept PID namespaces (`kept`).
//!
//! The host's `/tmp` is shared with every other user and process, so the directory is
//! reached without trusting it: every component is opened with `O_NOFOLLOW` relative to
//! the one before, `/` and `/tmp` must belong to root (or the caller) and be sticky if
//! others can write them, and the two levels sandgate creates must be directories owned by
//! the caller, the first of them with mode 0700. Anything else refuses the call instead of
//! guessing. The mode of the second level does not count: the first keeps everyone else
//! out, and a sandboxed command may `chmod` its own `/tmp` (the next call puts 0700 back).

mod remove_tree;

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstat, mkdirat, Mode, SFlag};
use sha2::{Digest, Sha256};

/// Where the per-workspace directories live: `/tmp/sandgate-UID`.
pub fn base() -> PathBuf {
    PathBuf::from(format!("/tmp/sandgate-{}", nix::unistd::geteuid()))
}

/// The private temp of `workspace` on the host (whether or not it exists yet).
pub fn path_for(workspace: &Path) -> PathBuf {
    base().join(leaf_name(workspace))
}

/// Where the copy-on-write cache layers of `workspace` live on the host.
pub fn layers_path_for(workspace: &Path) -> PathBuf {
    base().join(format!("{}.caches", leaf_name(workspace)))
}

/// A readable, collision-free name: the workspace's base name (sanitised, shortened) and
/// a hash of its whole canonical path.
fn leaf_name(workspace: &Path) -> String {
    let digest = Sha256::digest(workspace.as_os_str().as_bytes());
    let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let stem: String = workspace
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let stem = stem.trim_start_matches('.');
    if stem.is_empty() {
        hash
    } else {
        format!("{stem}-{hash}")
    }
}

/// Why the private temp cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("cannot use the private temp directory {}: {why}; remove it (or fix its owner and mode 0700) and retry", path.display())]
pub struct TempError {
    pub path: PathBuf,
    pub why: String,
}

fn error(path: &Path, why: impl Into<String>) -> TempError {
    TempError {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

/// An opened private temp directory.
pub struct PrivateTemp {
    pub path: PathBuf,
    /// `O_PATH` on the directory itself.
    pub fd: OwnedFd,
}

/// Opens the private temp of `workspace`, creating it (and `/tmp/sandgate-UID`) when
/// `create`; `Ok(None)` when it does not exist and `create` is false.
///
/// # Errors
/// A component that is a symlink, not a directory, owned by someone else, or open to
/// others (see the module docs).
pub fn open(workspace: &Path, create: bool) -> Result<Option<PrivateTemp>, TempError> {
    open_owned(path_for(workspace), 2, create)
}

/// Opens `/tmp/sandgate-UID` itself like [`open`]: the place for sandgate's own per-user
/// state that no sandbox may reach (the hidden-files scan's cache).
///
/// # Errors
/// As [`open`].
pub fn open_base(create: bool) -> Result<Option<PrivateTemp>, TempError> {
    open_owned(base(), 1, create)
}

/// Opens the directory of `workspace`'s cache layers like [`open`].
///
/// # Errors
/// As [`open`].
pub fn open_layers(workspace: &Path, create: bool) -> Result<Option<PrivateTemp>, TempError> {
    open_owned(layers_path_for(workspace), 2, create)
}

/// Opens the directory of the records of kept PID namespaces (`kept`) like [`open`]:
/// `/tmp/sandgate-UID/kept`, a name no workspace's directory can have (theirs end in a
/// hash).
///
/// # Errors
/// As [`open`].
pub fn open_kept(create: bool) -> Result<Option<PrivateTemp>, TempError> {
    open_owned(base().join("kept"), 2, create)
}

/// Opens `path`, whose last `owned_levels` components sandgate creates for the caller,
/// beneath `/tmp` (see the module docs for the checks).
fn open_owned(
    path: PathBuf,
    owned_levels: usize,
    create: bool,
) -> Result<Option<PrivateTemp>, TempError> {
    let me = nix::unistd::geteuid().as_raw();
    let open_dir = |dir: &OwnedFd, name: &OsStr| -> Result<OwnedFd, Errno> {
        openat(
            dir.as_fd(),
            name,
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
    };
    let root = crate::sys::open_path(c"/", libc::O_DIRECTORY)
        .map_err(|e| error(Path::new("/"), e.to_string()))?;
    let mut cur = root;
    let mut shown = PathBuf::from("/");
    let components: Vec<&OsStr> = path.iter().skip(1).collect();
    let system_levels = components.len().saturating_sub(owned_levels);
    for (depth, name) in components.into_iter().enumerate() {
        shown.push(name);
        let owned_by_caller = depth >= system_levels;
        let next = match open_dir(&cur, name) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) if owned_by_caller && create => {
                match mkdirat(cur.as_fd(), name, Mode::from_bits_truncate(0o700)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(error(&shown, format!("cannot create it: {e}"))),
                }
                open_dir(&cur, name).map_err(|e| error(&shown, e.to_string()))?
            }
            Err(Errno::ENOENT) if owned_by_caller => return Ok(None),
            Err(Errno::ENOTDIR | Errno::ELOOP) => {
                return Err(error(&shown, "it is a symlink or not a directory"))
            }
            Err(e) => return Err(error(&shown, e.to_string())),
        };
        let st = fstat(next.as_fd()).map_err(|e| error(&shown, e.to_string()))?;
        let level = match depth.checked_sub(system_levels) {
            None => Level::System,
            Some(0) => Level::Owned,
            Some(_) => Level::Enclosed,
        };
        check(st.st_mode, st.st_uid, level, me).map_err(|why| error(&shown, why))?;
        if level == Level::Enclosed && st.st_mode & 0o7777 != 0o700 {
            // A mode a sandboxed command gave its `/tmp` (this directory) is put back. Best
            // effort: a process it kept may change it again at any moment, and nothing
            // depends on it (see `Level::Enclosed`).
            let _ = set_mode_0700(&next);
        }
        cur = next;
    }
    Ok(Some(PrivateTemp { path, fd: cur }))
}

/// Sets the mode of the directory `dir` (an `O_PATH` descriptor) to 0700, whatever its
/// mode now (0 included).
fn set_mode_0700(dir: &OwnedFd) -> std::io::Result<()> {
    match crate::sys::fchmodat2(dir.as_fd(), c"", 0o700, libc::AT_EMPTY_PATH) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            // Before Linux 6.6: through the descriptor's magic link, the same inode.
            use std::os::fd::AsRawFd;
            use std::os::unix::fs::PermissionsExt;
            let link = format!("/proc/self/fd/{}", dir.as_raw_fd());
            std::fs::set_permissions(link, std::fs::Permissions::from_mode(0o700))
        }
        done => done,
    }
}

/// Where a component lies, for [`check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    /// Above what sandgate creates (`/`, `/tmp`): shared with everyone.
    System,
    /// The first level sandgate creates (`/tmp/sandgate-UID`): what keeps everyone else
    /// out of everything beneath it.
    Owned,
    /// Beneath that: nobody else can reach it whatever its own mode, which a sandboxed
    /// command may change (its `/tmp` is such a directory), so only its owner counts.
    Enclosed,
}

/// Checks one component: a directory; the caller's own, with mode 0700 where it is what
/// keeps others out; root's or the caller's, and sticky when others may write, above.
fn check(st_mode: u32, uid: u32, level: Level, me: u32) -> Result<(), String> {
    if SFlag::from_bits_truncate(st_mode) & SFlag::S_IFMT != SFlag::S_IFDIR {
        return Err("not a directory".into());
    }
    let mode = st_mode & 0o7777;
    if level != Level::System {
        if uid != me {
            return Err(format!("owned by uid {uid}, not {me}"));
        }
        if level == Level::Owned && mode & 0o077 != 0 {
            return Err(format!("mode {mode:o} lets others in (must be 0700)"));
        }
    } else {
        if uid != 0 && uid != me {
            return Err(format!("owned by uid {uid}"));
        }
        if mode & 0o022 != 0 && mode & 0o1000 == 0 {
            return Err(format!("mode {mode:o}: writable by others and not sticky"));
        }
    }
    Ok(())
}

/// Removes the private temp of `workspace` and its cache layers; returns whether there was
/// either. Nothing a sandboxed process planted there, or swaps in while this runs, is
/// followed (see [`remove_tree`]).
///
/// # Errors
/// As [`open`], or a removal that failed.
pub fn clean(workspace: &Path) -> Result<bool, TempError> {
    let mut found = false;
    for path in [path_for(workspace), layers_path_for(workspace)] {
        let Some(dir) = open_owned(path, 2, false)? else {
            continue;
        };
        let removed = openat(
            dir.fd.as_fd(),
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(std::io::Error::from)
        .and_then(|readable| remove_tree::empty(readable.as_fd()))
        .and_then(|()| std::fs::remove_dir(&dir.path));
        removed.map_err(|e| error(&dir.path, e.to_string()))?;
        found = true;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_readable_and_distinct() {
        let a = leaf_name(Path::new("/home/u/proj"));
        let b = leaf_name(Path::new("/srv/proj"));
        assert!(a.starts_with("proj-") && b.starts_with("proj-"));
        assert_ne!(a, b);
        assert!(!leaf_name(Path::new("/a/.hidden dir")).contains(' '));
        assert!(!leaf_name(Path::new("/a/..")).starts_with('.'));
    }

    #[test]
    fn components_open_to_others_are_refused() {
        let dir = |mode| libc::S_IFDIR | mode;
        use Level::*;
        assert!(check(dir(0o700), 7, Owned, 7).is_ok());
        assert!(check(dir(0o755), 7, Owned, 7).is_err());
        assert!(check(dir(0o700), 8, Owned, 7).is_err());
        assert!(check(libc::S_IFLNK | 0o700, 7, Owned, 7).is_err());
        assert!(check(dir(0o1777), 7, Enclosed, 7).is_ok());
        assert!(check(dir(0o700), 8, Enclosed, 7).is_err());
        assert!(check(libc::S_IFREG | 0o700, 7, Enclosed, 7).is_err());
        assert!(check(dir(0o1777), 0, System, 7).is_ok());
        assert!(check(dir(0o777), 0, System, 7).is_err());
        assert!(check(dir(0o755), 8, System, 7).is_err());
    }
}
