//! Opening sandgate's own log files (the audit log, the denial log) for appending.
//!
//! sandgate writes these files unconfined, and their paths often lie where a sandboxed
//! command of an earlier call could write — a denial log in the workspace is the common
//! case. A symbolic link planted there would turn sandgate into a confused deputy that
//! appends to `~/.bashrc`. So, when opening one of these files:
//!
//! - the last component is never followed (`O_NOFOLLOW`), and a missing file is created
//!   with `O_CREAT | O_EXCL`, mode 0600 — which cannot follow a link either;
//! - a symbolic link in the directories leading there is followed only when it lies
//!   outside every writable root of the call: only inside one could a sandboxed command
//!   have planted it. Refusing every link on the way (`RESOLVE_NO_SYMLINKS` for the whole
//!   path) would refuse ordinary systems too — `/home` is a link on some distributions, and
//!   people keep their projects behind links — while links outside the roots were made by
//!   someone the sandbox cannot be. The walk is done here, one directory fd at a time, so
//!   the check and the use cannot be raced apart;
//! - the file must be a regular file, owned by the user sandgate runs as, with one link (a
//!   hard link to another file is a link too).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{self, AtFlags, FcntlArg, OFlag};
use nix::sys::stat::{self, FileStat, Mode, SFlag};

/// Which of sandgate's files is being opened, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    AuditLog,
    DenialLog,
}

impl std::fmt::Display for Which {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Which::AuditLog => "the audit log",
            Which::DenialLog => "the denial log",
        })
    }
}

/// What the caller does with the file besides appending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Append,
    /// Also reads it (the audit log reads its last line to chain the next).
    ReadAppend,
}

/// Whether missing directories on the way are created (mode 0700).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dirs {
    MustExist,
    Create,
}

/// Why sandgate did not open one of its own files.
#[derive(Debug, thiserror::Error)]
pub enum LogFileError {
    /// Something is there that sandgate will not write through.
    #[error("will not write to {which} {}: {why}", path.display())]
    Refused {
        which: Which,
        path: PathBuf,
        why: Unsafe,
    },
    #[error("cannot open {which} {}: {source}", path.display())]
    Io {
        which: Which,
        path: PathBuf,
        source: io::Error,
    },
}

/// What is wrong with the path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsafe {
    #[error("it is a symbolic link, and sandgate never follows one to its own files (a sandboxed command may have planted it); remove the link or choose another path")]
    Symlink,
    #[error("{} is a symbolic link inside the writable root {}, where a sandboxed command may have planted it; remove the link or choose another path", link.display(), root.display())]
    SymlinkInRoot { link: PathBuf, root: PathBuf },
    #[error("it is {0}, not a regular file")]
    NotRegular(&'static str),
    #[error("it belongs to uid {owner}, not to uid {me} that runs sandgate")]
    NotOwned { owner: u32, me: u32 },
    #[error("it has {0} hard links, so appending to it would change another file too")]
    HardLinks(u64),
    #[error("reaching it takes more than {MAX_LINKS} symbolic links")]
    TooManyLinks,
}

/// The kernel's own limit on links followed in one lookup.
const MAX_LINKS: usize = 40;

/// Opens `path` for appending (see the module comment for what is refused).
/// `untrusted_roots` are the canonical directories a sandboxed command could have written
/// in: a symbolic link beneath one of them is never followed.
///
/// # Errors
/// [`LogFileError::Refused`] when something unsafe is in the way, else the I/O error.
pub fn open(
    which: Which,
    path: &Path,
    untrusted_roots: &[PathBuf],
    access: Access,
    dirs: Dirs,
) -> Result<File, LogFileError> {
    let refused = |why| LogFileError::Refused {
        which,
        path: path.to_path_buf(),
        why,
    };
    let io_err = |source: io::Error| LogFileError::Io {
        which,
        path: path.to_path_buf(),
        source,
    };
    let absolute = std::path::absolute(path).map_err(io_err)?;
    let name = match absolute.components().next_back() {
        Some(Component::Normal(name)) => name.to_os_string(),
        _ => {
            return Err(io_err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the path does not end in a file name",
            )))
        }
    };
    let parent = absolute.parent().unwrap_or(Path::new("/"));
    let dir = match walk(parent, untrusted_roots, dirs) {
        Ok(dir) => dir,
        Err(Walk::Refused(why)) => return Err(refused(why)),
        Err(Walk::Io(e)) => return Err(io_err(e.into())),
    };
    let base = match access {
        Access::Append => OFlag::O_WRONLY,
        Access::ReadAppend => OFlag::O_RDWR,
    } | OFlag::O_APPEND
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC;
    // A FIFO or device must not even be opened (that can block or have side effects):
    // look first, then check again on the opened file, which is what counts.
    if let Ok(st) = stat::fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
        check(&st).map_err(refused)?;
    }
    // Bounded: each round loses only to another process creating or removing the file.
    for _ in 0..3 {
        let fd = match fcntl::openat(&dir, name.as_os_str(), base, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::ELOOP) => return Err(refused(Unsafe::Symlink)),
            Err(Errno::ENOENT) => match fcntl::openat(
                &dir,
                name.as_os_str(),
                base | OFlag::O_CREAT | OFlag::O_EXCL,
                Mode::from_bits_truncate(0o600),
            ) {
                Ok(fd) => fd,
                Err(Errno::EEXIST) => continue,
                Err(e) => return Err(io_err(e.into())),
            },
            Err(e) => {
                if let Ok(st) = stat::fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
                {
                    check(&st).map_err(refused)?;
                }
                return Err(io_err(e.into()));
            }
        };
        let st = stat::fstat(&fd).map_err(|e| io_err(e.into()))?;
        check(&st).map_err(refused)?;
        // O_NONBLOCK only guarded the open; appends to a regular file never block anyway.
        let flags = fcntl::fcntl(&fd, FcntlArg::F_GETFL).map_err(|e| io_err(e.into()))?;
        let flags = OFlag::from_bits_truncate(flags) - OFlag::O_NONBLOCK;
        fcntl::fcntl(&fd, FcntlArg::F_SETFL(flags)).map_err(|e| io_err(e.into()))?;
        return Ok(File::from(fd));
    }
    Err(io_err(io::Error::other(
        "the file kept appearing and disappearing while sandgate opened it",
    )))
}

/// Refuses anything but the caller's own regular file with a single link.
fn check(st: &FileStat) -> Result<(), Unsafe> {
    let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
    let what = match kind {
        SFlag::S_IFREG => None,
        SFlag::S_IFLNK => return Err(Unsafe::Symlink),
        SFlag::S_IFDIR => Some("a directory"),
        SFlag::S_IFIFO => Some("a FIFO"),
        SFlag::S_IFSOCK => Some("a socket"),
        SFlag::S_IFCHR => Some("a character device"),
        SFlag::S_IFBLK => Some("a block device"),
        _ => Some("something other than a file"),
    };
    if let Some(what) = what {
        return Err(Unsafe::NotRegular(what));
    }
    let me = nix::unistd::geteuid().as_raw();
    if st.st_uid != me {
        return Err(Unsafe::NotOwned {
            owner: st.st_uid,
            me,
        });
    }
    if st.st_nlink > 1 {
        return Err(Unsafe::HardLinks(st.st_nlink));
    }
    Ok(())
}

/// Why the walk to the directory stopped.
enum Walk {
    Refused(Unsafe),
    Io(Errno),
}

impl From<Errno> for Walk {
    fn from(e: Errno) -> Walk {
        Walk::Io(e)
    }
}

/// One step of the walk.
enum Step {
    Root,
    Up,
    Name(OsString),
}

fn steps(path: &Path) -> impl DoubleEndedIterator<Item = Step> + '_ {
    path.components().filter_map(|c| match c {
        Component::RootDir => Some(Step::Root),
        Component::ParentDir => Some(Step::Up),
        Component::Normal(n) => Some(Step::Name(n.to_os_string())),
        Component::CurDir | Component::Prefix(_) => None,
    })
}

/// Opens the directory `dir` (absolute) one component at a time, following a symbolic link
/// only where it lies outside every root in `untrusted`. `here` tracks the canonical path
/// of the directory reached: every link is resolved here, and `..` is taken from the
/// directory actually reached, so `here` never goes through a link.
fn walk(dir: &Path, untrusted: &[PathBuf], dirs: Dirs) -> Result<OwnedFd, Walk> {
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let root = || fcntl::open("/", flags, Mode::empty());
    let mut fd = root()?;
    let mut here = PathBuf::from("/");
    let mut pending: VecDeque<Step> = steps(dir).collect();
    let mut links = 0;
    while let Some(step) = pending.pop_front() {
        let name = match step {
            Step::Root => {
                fd = root()?;
                here = PathBuf::from("/");
                continue;
            }
            Step::Up => {
                fd = fcntl::openat(&fd, "..", flags, Mode::empty())?;
                here.pop();
                continue;
            }
            Step::Name(name) => name,
        };
        match fcntl::openat(
            &fd,
            name.as_os_str(),
            flags | OFlag::O_NOFOLLOW,
            Mode::empty(),
        ) {
            Ok(next) => {
                fd = next;
                here.push(&name);
            }
            Err(Errno::ENOENT) if dirs == Dirs::Create => {
                match stat::mkdirat(&fd, name.as_os_str(), Mode::from_bits_truncate(0o700)) {
                    Ok(()) | Err(Errno::EEXIST) => pending.push_front(Step::Name(name)),
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e @ (Errno::ENOTDIR | Errno::ELOOP)) => {
                let st = stat::fstatat(&fd, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
                if SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) != SFlag::S_IFLNK {
                    return Err(e.into());
                }
                let link = here.join(&name);
                if let Some(root) = untrusted.iter().find(|r| link.starts_with(r)) {
                    return Err(Walk::Refused(Unsafe::SymlinkInRoot {
                        link,
                        root: root.clone(),
                    }));
                }
                links += 1;
                if links > MAX_LINKS {
                    return Err(Walk::Refused(Unsafe::TooManyLinks));
                }
                let target = PathBuf::from(fcntl::readlinkat(&fd, name.as_os_str())?);
                for step in steps(&target).rev() {
                    pending.push_front(step);
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(fd)
}

/// Canonical forms of the directories a sandboxed command could write in, for
/// [`open`]'s `untrusted_roots` (a root that does not exist holds no planted link).
pub fn canonical_roots<'a>(roots: impl IntoIterator<Item = &'a Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = roots
        .into_iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn open_in(path: &Path, roots: &[PathBuf]) -> Result<File, LogFileError> {
        open(
            Which::DenialLog,
            path,
            roots,
            Access::Append,
            Dirs::MustExist,
        )
    }

    fn why(result: Result<File, LogFileError>) -> Unsafe {
        match result {
            Err(LogFileError::Refused { why, .. }) => why,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn creates_a_private_file_and_appends_to_it() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("log");
        open_in(&path, &[])?.write_all(b"a\n")?;
        open_in(&path, &[])?.write_all(b"b\n")?;
        assert_eq!(std::fs::read(&path)?, b"a\nb\n");
        assert_eq!(std::fs::metadata(&path)?.permissions().mode() & 0o077, 0);
        Ok(())
    }

    #[test]
    fn a_symlink_at_the_path_is_never_followed() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let target = dir.path().join("bashrc");
        std::fs::write(&target, "keep\n")?;
        let path = dir.path().join("log");
        symlink(&target, &path)?;
        assert_eq!(why(open_in(&path, &[])), Unsafe::Symlink);
        // Dangling: O_EXCL does not create the target either.
        let dangling = dir.path().join("dangling");
        symlink(dir.path().join("new"), &dangling)?;
        assert_eq!(why(open_in(&dangling, &[])), Unsafe::Symlink);
        assert!(!dir.path().join("new").exists());
        assert_eq!(std::fs::read(&target)?, b"keep\n");
        Ok(())
    }

    #[test]
    fn a_directory_link_is_followed_only_outside_the_roots(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let base = std::fs::canonicalize(dir.path())?;
        let (ws, elsewhere) = (base.join("ws"), base.join("elsewhere"));
        std::fs::create_dir_all(&ws)?;
        std::fs::create_dir_all(&elsewhere)?;
        std::fs::write(elsewhere.join("log"), "keep\n")?;
        symlink(&elsewhere, ws.join("logs"))?;
        let roots = vec![ws.clone()];
        match why(open_in(&ws.join("logs/log"), &roots)) {
            Unsafe::SymlinkInRoot { link, root } => {
                assert_eq!(link, ws.join("logs"));
                assert_eq!(root, ws);
            }
            other => panic!("{other:?}"),
        }
        // Through `..` and a relative link, still caught.
        std::fs::create_dir(ws.join("x"))?;
        symlink("../elsewhere", ws.join("rel"))?;
        assert!(matches!(
            why(open_in(&ws.join("x/../rel/log"), &roots)),
            Unsafe::SymlinkInRoot { .. }
        ));
        // A link outside the roots (the user's own) is followed.
        symlink(&elsewhere, base.join("mine"))?;
        open_in(&base.join("mine/log"), &roots)?.write_all(b"more\n")?;
        assert_eq!(std::fs::read(elsewhere.join("log"))?, b"keep\nmore\n");
        Ok(())
    }

    #[test]
    fn only_a_regular_file_with_one_link_is_written() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600))?;
        assert_eq!(why(open_in(&fifo, &[])), Unsafe::NotRegular("a FIFO"));
        assert_eq!(
            why(open_in(dir.path(), &[])),
            Unsafe::NotRegular("a directory")
        );
        let original = dir.path().join("original");
        std::fs::write(&original, "keep\n")?;
        std::fs::hard_link(&original, dir.path().join("log"))?;
        assert_eq!(
            why(open_in(&dir.path().join("log"), &[])),
            Unsafe::HardLinks(2)
        );
        Ok(())
    }

    #[test]
    fn missing_directories_are_created_only_when_asked() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("a/b/log");
        assert!(matches!(open_in(&path, &[]), Err(LogFileError::Io { .. })));
        open(
            Which::AuditLog,
            &path,
            &[],
            Access::ReadAppend,
            Dirs::Create,
        )?;
        assert!(path.is_file());
        Ok(())
    }
}
