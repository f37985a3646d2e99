//! Guarded git directories at work. The top level of every git directory that existed when
//! the call started is read-only in the sandbox (see `policy::protected`), so the kernel
//! refuses every create, rename and removal there, whatever path a racing thread or a
//! swapped symlink makes it resolve. Git still needs that top level — lock files renamed
//! into place, `ORIG_HEAD`, `COMMIT_EDITMSG`, `rebase-merge/`, `modules/` for a new
//! submodule — so the supervisor performs those operations itself:
//!
//! 1. it copies the path out of the caller, resolves its parent in the caller's own view
//!    (`O_PATH|O_NOFOLLOW`, symlinks followed by hand) and looks the parent up by identity
//!    among the guarded directories;
//! 2. it refuses the metadata names (`config`, `hooks`, `commondir`, …) at a guarded top
//!    level with a marker;
//! 3. otherwise it performs the call on its *own* handle of that directory — opened in
//!    sandgate's view, where the directory is writable — with the one name it checked,
//!    resolved beneath that handle with no symlink followed, and hands an opened file
//!    back to the caller with `SECCOMP_IOCTL_NOTIF_ADDFD`.
//!
//! An open performed here never waits on the sandbox: what it opens must be a regular file
//! (git writes nothing else there), and it is opened with `O_NONBLOCK` added, so that a
//! FIFO put in its place cannot hold the supervisor up waiting for a reader. A FIFO or
//! device already there is refused with a marker.
//!
//! Nothing here answers CONTINUE on a decision: what was checked is what is done. A call
//! this module does not take (its path does not name `.git`, or its parent is elsewhere)
//! goes to the kernel, which refuses it inside a guarded top level — so a path that reaches
//! one without naming it costs git a write, never the guarantee.

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use nix::errno::Errno;
use nix::fcntl::{openat, openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fstat, mkdirat, Mode as FileMode};
use nix::unistd::{unlinkat, UnlinkatFlags};

use super::resolve::{self, Inode, Root, Target};
use super::{creds_of, observe, Call, Context};
use crate::denial::Denial;
use crate::policy::protected::{GIT_INFO, GIT_INFO_METADATA, GIT_METADATA};
use crate::policy::Mode;
use crate::sys::Answer;

/// The marker `op` of a refused write to git metadata.
pub const OP: &str = "git_metadata";

/// How many directories of guarded git directories the supervisor keeps handles of.
const MAX_REGIONS: usize = 256;

/// What a directory of a guarded git directory's read-only part is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
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
}

/// A directory of a guarded git directory's read-only part, as the supervisor reaches it.
struct Region {
    /// `O_PATH` in sandgate's own view, where it is writable.
    fd: OwnedFd,
    kind: Kind,
}

/// The guarded directories, by identity; grows as the supervisor creates directories in
/// them (a `rebase-merge/` the sandbox cannot write to on its own).
#[derive(Default)]
pub struct Regions(RefCell<HashMap<Inode, Region>>);

impl Regions {
    /// Opens each guarded git directory in sandgate's own view. One that cannot be opened
    /// without following a symlink is left out: the kernel still refuses writes there.
    pub fn open(dirs: &[PathBuf]) -> Regions {
        let open = |path: &std::path::Path| {
            let fd = crate::sandbox::open_exact(path).ok()?;
            let id = resolve::identity(&fstat(fd.as_fd()).ok()?);
            Some((id, fd))
        };
        let mut map = HashMap::new();
        for dir in dirs {
            let Some((id, fd)) = open(dir) else {
                continue;
            };
            map.insert(
                id,
                Region {
                    fd,
                    kind: Kind::Top,
                },
            );
            if let Some((id, fd)) = open(&dir.join(GIT_INFO)) {
                map.insert(
                    id,
                    Region {
                        fd,
                        kind: Kind::Info,
                    },
                );
            }
        }
        Regions(RefCell::new(map))
    }

    /// Returns true for a directory with metadata names of its own.
    fn guards(&self, id: &Inode) -> bool {
        self.0
            .borrow()
            .get(id)
            .is_some_and(|r| r.kind != Kind::Plain)
    }

    pub fn is_empty(&self) -> bool {
        self.0.borrow().is_empty()
    }
}

/// One path argument, resolved: its parent's region (if any) and final name.
struct Place {
    shown: String,
    /// The parent's identity and kind.
    region: Option<(Inode, Kind)>,
    name: Option<Vec<u8>>,
    /// The existing object's identity and whether it is a directory.
    object: Option<(Inode, bool)>,
    /// Whether the existing object is neither a regular file, a directory nor a symlink
    /// (a FIFO, a socket, a device).
    special: bool,
}

impl Place {
    fn sensitive(&self) -> bool {
        let (Some((_, kind)), Some(name)) = (self.region, self.name.as_deref()) else {
            return false;
        };
        kind.metadata().iter().any(|m| name == m.as_bytes())
    }
}

/// Takes the call if it creates, removes, renames or writes at a guarded git directory's
/// top level (or beneath a directory created there); `None` leaves it to the kernel.
pub fn handle(call: &Call<'_>, context: &Context) -> Option<(Answer, Option<Denial>)> {
    if context.git.is_empty() {
        return None;
    }
    let op = Op::decode(call)?;
    let root = context.root.as_ref()?;
    let places: Vec<Place> = op
        .paths()
        .iter()
        .map(|(dirfd, ptr)| locate(call, context, root, *dirfd, *ptr))
        .collect::<Option<_>>()?;
    if places.iter().all(|p| p.region.is_none()) {
        return None;
    }
    // What was read from the caller must still be its call's.
    if !call.still_pending() {
        return Some((Answer::Error(libc::EINTR), None));
    }
    if let Some(place) = places.iter().find(|p| p.sensitive()) {
        let denial = call.denial(OP, Some(place.shown.clone()), None, Mode::FullAccess);
        return Some((Answer::Error(libc::EPERM), Some(denial)));
    }
    // Opening a FIFO or a device can wait for a peer or act on hardware: not on the
    // supervisor's thread, and not for git, which opens regular files here.
    if let (Op::Open { .. }, Some(place)) = (&op, places.iter().find(|p| p.special)) {
        let denial = call.denial(OP, Some(place.shown.clone()), None, Mode::FullAccess);
        return Some((Answer::Error(libc::EPERM), Some(denial)));
    }
    if places
        .iter()
        .any(|p| p.region.is_none() || p.name.is_none())
    {
        // Between a guarded directory and elsewhere: as between two mounts (`mv` copies).
        return Some((Answer::Error(libc::EXDEV), None));
    }
    // A mount point in the sandbox's view (a writable `objects/`, a guarded submodule git
    // directory) is a plain directory in sandgate's: refuse what the kernel would.
    // So is a directory with metadata of its own (`info/`): moved aside, it would take the
    // guard with it.
    let on_a_mount = places
        .iter()
        .filter_map(|p| p.object)
        .any(|(id, _)| context.is_mount_point(&id) || context.git.guards(&id));
    if op.moves_or_removes() && on_a_mount {
        return Some((Answer::Error(libc::EBUSY), None));
    }
    // The interrupting signal of a hand-over must not cut a performed call short: the
    // file handed back with ADDFD would reach the caller as fd 0, and a filesystem that
    // lets a signal interrupt it (FUSE, NFS) would fail a rename half-way with EINTR.
    let answer = crate::sys::with_signal_blocked(crate::sys::interrupt_signal(), || {
        perform(call, context, &op, &places)
    });
    Some((answer, None))
}

/// Resolves one path argument; `None` when it cannot be told (the kernel then decides).
fn locate(call: &Call<'_>, context: &Context, root: &Root, dirfd: i32, ptr: u64) -> Option<Place> {
    let path = call.read_cstr(ptr).ok()?;
    if !path.windows(4).any(|w| w == b".git") {
        return Some(Place {
            shown: String::new(),
            region: None,
            name: None,
            object: None,
            special: false,
        });
    }
    let start = match (path.starts_with(b"/"), dirfd) {
        (true, _) => None,
        (false, libc::AT_FDCWD) => Some(call.open_proc("cwd").ok()?),
        (false, fd) => Some(call.open_proc(&format!("fd/{fd}")).ok()?),
    };
    let start_fd = start.as_ref().map_or(root.fd.as_fd(), |s| s.as_fd());
    let target: Target<'_> =
        resolve::resolve(root, start_fd, &path, false, None, context.proc_dev).ok()?;
    let dir_id = match target.dir_id {
        Some(id) => id,
        None => resolve::identity(&fstat(target.dir.as_fd()).ok()?),
    };
    let region = context
        .git
        .0
        .borrow()
        .get(&dir_id)
        .map(|r| (dir_id, r.kind));
    Some(Place {
        shown: observe::shown_path(call, dirfd, &path),
        region,
        object: target.object.as_ref().map(|(_, st)| {
            (
                resolve::identity(st),
                st.st_mode & libc::S_IFMT == libc::S_IFDIR,
            )
        }),
        special: target.object.as_ref().is_some_and(|(_, st)| {
            !matches!(
                st.st_mode & libc::S_IFMT,
                libc::S_IFREG | libc::S_IFDIR | libc::S_IFLNK
            )
        }),
        name: target.name,
    })
}

/// The calls this module performs, with their own arguments.
enum Op {
    Open {
        dirfd: i32,
        path: u64,
        flags: i32,
        mode: u32,
    },
    Mkdir {
        dirfd: i32,
        path: u64,
        mode: u32,
    },
    Unlink {
        dirfd: i32,
        path: u64,
        dir: bool,
    },
    Rename {
        from: (i32, u64),
        to: (i32, u64),
        flags: u32,
    },
    Link {
        from: (i32, u64),
        to: (i32, u64),
    },
    Symlink {
        target: u64,
        at: (i32, u64),
    },
    Mknod {
        dirfd: i32,
        path: u64,
    },
}

impl Op {
    fn decode(call: &Call<'_>) -> Option<Op> {
        let a = |n| call.arg(n);
        let fd = |n| a(n) as i32;
        let cwd = libc::AT_FDCWD;
        let writes = |flags: i32| {
            flags & (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) != 0
                || flags & libc::O_TMPFILE == libc::O_TMPFILE
        };
        let open = |dirfd, path, flags: i32, mode: u64| {
            writes(flags).then_some(Op::Open {
                dirfd,
                path,
                flags,
                mode: mode as u32,
            })
        };
        let nr = i64::from(call.notif.data.nr);
        #[cfg(target_arch = "x86_64")]
        {
            let legacy = match nr {
                libc::SYS_open => open(cwd, a(0), a(1) as i32, a(2)),
                libc::SYS_creat => open(
                    cwd,
                    a(0),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
                    a(1),
                ),
                libc::SYS_mkdir => Some(Op::Mkdir {
                    dirfd: cwd,
                    path: a(0),
                    mode: a(1) as u32,
                }),
                libc::SYS_unlink => Some(Op::Unlink {
                    dirfd: cwd,
                    path: a(0),
                    dir: false,
                }),
                libc::SYS_rmdir => Some(Op::Unlink {
                    dirfd: cwd,
                    path: a(0),
                    dir: true,
                }),
                libc::SYS_rename => Some(Op::Rename {
                    from: (cwd, a(0)),
                    to: (cwd, a(1)),
                    flags: 0,
                }),
                libc::SYS_link => Some(Op::Link {
                    from: (cwd, a(0)),
                    to: (cwd, a(1)),
                }),
                libc::SYS_symlink => Some(Op::Symlink {
                    target: a(0),
                    at: (cwd, a(1)),
                }),
                libc::SYS_mknod => Some(Op::Mknod {
                    dirfd: cwd,
                    path: a(0),
                }),
                _ => None,
            };
            if legacy.is_some() {
                return legacy;
            }
        }
        match nr {
            libc::SYS_openat => open(fd(0), a(1), a(2) as i32, a(3)),
            libc::SYS_mkdirat => Some(Op::Mkdir {
                dirfd: fd(0),
                path: a(1),
                mode: a(2) as u32,
            }),
            libc::SYS_unlinkat => Some(Op::Unlink {
                dirfd: fd(0),
                path: a(1),
                dir: a(2) & libc::AT_REMOVEDIR as u64 != 0,
            }),
            libc::SYS_renameat => Some(Op::Rename {
                from: (fd(0), a(1)),
                to: (fd(2), a(3)),
                flags: 0,
            }),
            libc::SYS_renameat2 => Some(Op::Rename {
                from: (fd(0), a(1)),
                to: (fd(2), a(3)),
                flags: a(4) as u32,
            }),
            // AT_EMPTY_PATH links an fd, not a path: the kernel decides those.
            libc::SYS_linkat if a(4) & libc::AT_EMPTY_PATH as u64 == 0 => Some(Op::Link {
                from: (fd(0), a(1)),
                to: (fd(2), a(3)),
            }),
            libc::SYS_symlinkat => Some(Op::Symlink {
                target: a(0),
                at: (fd(1), a(2)),
            }),
            libc::SYS_mknodat => Some(Op::Mknod {
                dirfd: fd(0),
                path: a(1),
            }),
            _ => None,
        }
    }

    /// Returns true for calls that remove or replace what their paths name.
    fn moves_or_removes(&self) -> bool {
        matches!(
            self,
            Op::Unlink { .. } | Op::Rename { .. } | Op::Link { .. }
        )
    }

    /// The (dirfd, path) pairs whose parents decide where the call acts.
    fn paths(&self) -> Vec<(i32, u64)> {
        match *self {
            Op::Open { dirfd, path, .. }
            | Op::Mkdir { dirfd, path, .. }
            | Op::Unlink { dirfd, path, .. }
            | Op::Mknod { dirfd, path } => vec![(dirfd, path)],
            Op::Rename { from, to, .. } | Op::Link { from, to } => vec![from, to],
            Op::Symlink { at, .. } => vec![at],
        }
    }
}

/// Performs `op` on sandgate's own handles of the places' directories.
fn perform(call: &Call<'_>, context: &Context, op: &Op, places: &[Place]) -> Answer {
    let regions = context.git.0.borrow();
    let handle = |p| handle_of(&regions, p);
    let Some((dir, name)) = places.first().and_then(handle) else {
        return Answer::Error(libc::EXDEV);
    };
    // sandgate may have rights the caller lacks (root's, with capabilities): check the
    // caller's own, as the kernel would have, on every directory the call changes.
    let Ok(creds) = creds_of(call.tid()) else {
        return Answer::Error(libc::ESRCH);
    };
    for place in places {
        let Some((parent, _)) = handle(place) else {
            return Answer::Error(libc::EXDEV);
        };
        if !fstat(parent).is_ok_and(|st| creds.may(&st, 3)) {
            return Answer::Error(libc::EACCES);
        }
    }
    let umask = umask_of(call);
    let created = match *op {
        Op::Open { flags, mode, .. } => {
            let existing =
                nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW);
            let writes = flags & (libc::O_WRONLY | libc::O_RDWR | libc::O_TRUNC) != 0;
            if existing.is_ok_and(|st| writes && !creds.may(&st, 2)) {
                return Answer::Error(libc::EACCES);
            }
            return open(call, dir, name, flags, mode & !umask);
        }
        Op::Mkdir { mode, .. } => {
            mkdirat(dir, name, FileMode::from_bits_truncate(mode & !umask)).map(|()| Some(name))
        }
        Op::Unlink { dir: is_dir, .. } => {
            let how = if is_dir {
                UnlinkatFlags::RemoveDir
            } else {
                UnlinkatFlags::NoRemoveDir
            };
            let done = unlinkat(dir, name, how);
            if done.is_ok() && is_dir {
                if let Some((id, _)) = places[0].object {
                    drop(regions);
                    context.git.0.borrow_mut().remove(&id);
                    return Answer::Return(0);
                }
            }
            done.map(|()| None)
        }
        Op::Rename { flags, .. } => {
            let Some((to_dir, to_name)) = places.get(1).and_then(handle) else {
                return Answer::Error(libc::EXDEV);
            };
            // RENAME_WHITEOUT and unknown flags are not git's.
            if flags & !(libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE) != 0 {
                return Answer::Error(libc::EINVAL);
            }
            let flags = nix::fcntl::RenameFlags::from_bits_truncate(flags);
            nix::fcntl::renameat2(dir, name, to_dir, to_name, flags).map(|()| None)
        }
        Op::Link { .. } => {
            let Some((to_dir, to_name)) = places.get(1).and_then(handle) else {
                return Answer::Error(libc::EXDEV);
            };
            let no_follow = nix::fcntl::AtFlags::empty();
            nix::unistd::linkat(dir, name, to_dir, to_name, no_follow).map(|()| None)
        }
        Op::Symlink { target, .. } => match call.read_cstr(target) {
            Ok(target) => nix::unistd::symlinkat(std::ffi::OsStr::from_bytes(&target), dir, name)
                .map(|()| None),
            Err(e) => Err(e),
        },
        Op::Mknod { .. } => Err(Errno::EPERM),
    };
    let parent_kind = places[0].region.map_or(Kind::Plain, |(_, kind)| kind);
    match created {
        Ok(Some(made)) => {
            // A directory made here is as read-only to the sandbox as its parent: the
            // supervisor answers for what happens inside it too.
            let fd = openat(
                dir,
                made,
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                FileMode::empty(),
            );
            let made = made.as_bytes().to_vec();
            drop(regions);
            // Past the cap a new directory stays the kernel's (read-only): git never makes
            // that many there, and each one tracked holds an fd of the supervisor's.
            let room = context.git.0.borrow().len() < MAX_REGIONS;
            if let (Ok(fd), true) = (fd, room) {
                if let Ok(st) = fstat(fd.as_fd()) {
                    context.git.0.borrow_mut().insert(
                        resolve::identity(&st),
                        Region {
                            fd,
                            kind: parent_kind.child(&made),
                        },
                    );
                }
            }
            Answer::Return(0)
        }
        Ok(None) => Answer::Return(0),
        Err(e) => Answer::Error(e as i32),
    }
}

/// sandgate's handle of a place's directory and the place's final name.
fn handle_of<'r>(
    regions: &'r HashMap<Inode, Region>,
    place: &'r Place,
) -> Option<(BorrowedFd<'r>, &'r std::ffi::OsStr)> {
    let (id, _) = place.region?;
    let name = std::ffi::OsStr::from_bytes(place.name.as_deref()?);
    Some((regions.get(&id)?.fd.as_fd(), name))
}

/// Opens `name` beneath `dir` as the caller asked (never through a symlink, never out of
/// `dir`, never waiting: see the module comment) and installs the file in the caller, which
/// gets its number as the result. Anything but a regular file is refused with EPERM (one
/// that was there already got its marker in `handle`; this catches a swap since).
fn open(
    call: &Call<'_>,
    dir: BorrowedFd<'_>,
    name: &std::ffi::OsStr,
    flags: i32,
    mode: u32,
) -> Answer {
    let cloexec = flags & libc::O_CLOEXEC != 0;
    let how = OpenHow::new()
        .flags(OFlag::from_bits_truncate(
            flags | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK,
        ))
        .mode(FileMode::from_bits_truncate(mode))
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS
                | ResolveFlag::RESOLVE_NO_XDEV,
        );
    let file = match openat2(dir, name, how) {
        Ok(file) => file,
        Err(e) => return Answer::Error(e as i32),
    };
    match fstat(file.as_fd()) {
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFREG => {}
        Ok(_) => return Answer::Error(libc::EPERM),
        Err(e) => return Answer::Error(e as i32),
    }
    // The flag only kept the open from waiting; the caller gets the file as it asked.
    if flags & libc::O_NONBLOCK == 0 {
        let cleared = nix::fcntl::fcntl(file.as_fd(), nix::fcntl::FcntlArg::F_GETFL)
            .map(|fl| OFlag::from_bits_truncate(fl) - OFlag::O_NONBLOCK)
            .and_then(|fl| nix::fcntl::fcntl(file.as_fd(), nix::fcntl::FcntlArg::F_SETFL(fl)));
        if let Err(e) = cleared {
            return Answer::Error(e as i32);
        }
    }
    match crate::sys::notif_addfd_send(call.listener.as_fd(), call.notif.id, file.as_fd(), cloexec)
    {
        Ok(_) => Answer::Sent,
        // The caller went away; there is nobody to answer.
        Err(_) => Answer::Sent,
    }
}

/// The caller's umask (`Umask:` in its status), 022 when it cannot be read.
fn umask_of(call: &Call<'_>) -> u32 {
    std::fs::read_to_string(format!("/proc/{}/status", call.tid()))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}
