//! Where a path leads for the caller, as the supervisor acts on it: the directory that
//! holds the last name (a handle to act through), that name, what exists there, and which
//! area the directory lies in — resolved once, from the caller's root and its cwd or
//! dirfd, with a last-component symlink followed by hand where the call would follow it,
//! so that the name the supervisor checks is the name it acts on.
//!
//! The walk is one `openat2` for the directories on the way when it can be
//! (`RESOLVE_BENEATH` from the start directory, `RESOLVE_IN_ROOT` from the caller's root
//! for an absolute path, never through a magic link), and the hand walk of `resolve`
//! otherwise (`..` above the start, a symlink to follow, procfs).
//!
//! What is found here can still change before the supervisor acts on it: landlock lets
//! the sandbox remove, and another sandgate call in the workspace has a supervisor of its
//! own, which renames and creates for its sandbox. So whatever the seal rules decide by
//! what a name holds is decided again on what the supervisor acts on (`perform`).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{openat2, AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fstatat, FileStat};

use super::git::Kind;
use super::named::Named;
use super::observe::{Acts, Verdict};
use super::ops::PathArg;
use super::resolve::{self, Root, Walked};
use super::{seal, Call, Context};
use crate::sys;

/// Which area a directory lies in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Area {
    /// A writable area: the supervisor performs there, through the sandbox's own view.
    Writable(Named),
    /// A guarded git directory's read-only part: the supervisor performs there through
    /// sandgate's own handle (see `git`).
    Guarded(Kind, Named),
    /// Anywhere else (read-only, protected, a device, unknown): the kernel decides.
    Elsewhere,
}

/// A path, resolved.
pub struct Place {
    /// The directory holding `name`, `O_PATH`: in the sandbox's view, or sandgate's own
    /// handle of a guarded region.
    pub dir: OwnedFd,
    /// The last component, without trailing slashes; `None` when the path names a
    /// directory itself (`/`, `.`, `..`).
    pub name: Option<Vec<u8>>,
    /// The path ended in a slash.
    pub slash: bool,
    /// What exists at `name` (not followed).
    pub object: Option<FileStat>,
    pub area: Area,
}

impl Place {
    /// The name, for the calls that need one.
    pub fn name(&self) -> &[u8] {
        self.name.as_deref().unwrap_or(b".")
    }

    /// What the seal rules see at this place; `None` when it is in no area they cover.
    pub fn named(&self) -> Option<Named> {
        match self.area {
            Area::Writable(named) | Area::Guarded(_, named) => Some(named),
            Area::Elsewhere => None,
        }
    }

    /// The existing object's kind for the seal rules.
    pub fn kind(&self) -> Option<seal::Kind> {
        self.object.as_ref().map(kind_of)
    }
}

/// The kind of a file for the seal rules.
pub fn kind_of(st: &FileStat) -> seal::Kind {
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => seal::Kind::Regular {
            exec: st.st_mode & 0o111 != 0,
        },
        libc::S_IFDIR => seal::Kind::Dir,
        libc::S_IFLNK => seal::Kind::Symlink,
        _ => seal::Kind::Special,
    }
}

/// Where a path leads.
pub enum Located {
    Place(Place),
    /// A magic link to the caller's file descriptor N (`/dev/stdout`, `/proc/self/fd/N`,
    /// `/proc/self/task/TID/fd/N`).
    CallerFd(i32),
    /// A descriptor named through `/proc` by a process number (`/proc/$$/fd/0`): the
    /// supervisor cannot tie it to the caller, and the kernel would open a pipe's read
    /// end for writing through it (the caller's stdin pipe, which a shell reads its script
    /// from after the call), which landlock does not look at. Refused.
    OtherFd,
    /// Somewhere else in `/proc`: no name the supervisor can act on.
    Proc,
}

/// Resolves `path` (read from `at`) for the caller, following a symlink in the last place
/// when `follow`. `acts` says whether the call changes the name or, when a regular file
/// is there ([`Acts::OnObject`]), that file's data — which decides the area of a file
/// bound writable on its own, and of an entry of a frozen directory.
///
/// # Errors
/// What the caller's own walk would have met: ENOENT, ENOTDIR, ELOOP, EACCES, …
pub fn locate(
    call: &Call<'_>,
    context: &Context,
    root: &Root,
    at: PathArg,
    path: &[u8],
    follow: bool,
    acts: Acts,
) -> Result<Located, Errno> {
    let walked = match quick(call, root, at, path, follow) {
        Some(found) => found,
        None => match walk(call, root, at, path, follow, context.proc_dev)? {
            Walk::Found(found) => found,
            Walk::Stopped(rest) => return Ok(magic(&rest)),
        },
    };
    let slash = path.len() > 1 && path.ends_with(b"/");
    let st = sys::statx(walked.dir.as_fd(), b"", false).map_err(|_| Errno::ENOENT)?;
    if context.proc_dev == Some(st.dev) {
        return Ok(Located::Proc);
    }
    let dir_id = (st.dev, st.ino);
    let object_id = walked.object.as_ref().map(resolve::identity);
    let regular = walked
        .object
        .as_ref()
        .is_some_and(|o| o.st_mode & libc::S_IFMT == libc::S_IFREG);
    let acts = if regular { acts } else { Acts::OnName };
    let special = walked
        .object
        .as_ref()
        .is_some_and(|o| matches!(o.st_mode & libc::S_IFMT, libc::S_IFCHR | libc::S_IFBLK));
    let elsewhere = special
        || object_id
            .is_some_and(|id| context.protected.contains(&id) || context.devices.contains(&id))
        || (acts == Acts::OnObject && object_id.is_some_and(|id| context.writable.contains(&id)));
    let (dir, area) = if elsewhere {
        (walked.dir, Area::Elsewhere)
    } else if let Some((own, kind, named)) = context.git.get(&dir_id) {
        (own, Area::Guarded(kind, named))
    } else {
        let area = match context.dir_verdict(walked.dir.as_fd(), &st, root, acts == Acts::OnName) {
            Some(Verdict::Allowed) => match context.named(walked.dir.as_fd(), &st) {
                Some(named) => Area::Writable(named),
                None => Area::Elsewhere,
            },
            _ => Area::Elsewhere,
        };
        (walked.dir, area)
    };
    Ok(Located::Place(Place {
        dir,
        name: walked.name,
        slash,
        object: walked.object,
        area,
    }))
}

/// What a walk found: the directory, the last name, and what is there.
struct Found {
    dir: OwnedFd,
    name: Option<Vec<u8>>,
    object: Option<FileStat>,
}

/// What a full walk came to.
enum Walk {
    Found(Found),
    /// Into procfs: the components still to go there.
    Stopped(Vec<Vec<u8>>),
}

/// The hand walk of `resolve`, from the caller's root or its cwd or dirfd.
fn walk(
    call: &Call<'_>,
    root: &Root,
    at: PathArg,
    path: &[u8],
    follow: bool,
    proc_dev: Option<u64>,
) -> Result<Walk, Errno> {
    let start = match (path.starts_with(b"/"), at.dirfd) {
        (true, _) => None,
        (false, libc::AT_FDCWD) => Some(call.open_proc("cwd")?),
        (false, fd) => Some(call.open_proc(&format!("fd/{fd}"))?),
    };
    let base = start.as_ref().map_or(root.fd.as_fd(), |s| s.as_fd());
    match resolve::walk(root, base, path, follow, None, proc_dev)? {
        Walked::Stopped(rest) => Ok(Walk::Stopped(rest)),
        Walked::Target(target) => {
            let dir = match target.dir {
                resolve::Dir::Owned(fd) => fd,
                resolve::Dir::Borrowed(fd) => fd.try_clone_to_owned().map_err(|_| Errno::EMFILE)?,
            };
            Ok(Walk::Found(Found {
                dir,
                name: target.name,
                object: target.object.map(|(_, st)| st),
            }))
        }
    }
}

/// The quick walk, for a path with no `..` that ends in a name: the directory on the way
/// in one call — `cwd`, or `cwd/NAME`, opened through the caller's `/proc` directory (a
/// name not followed if a symlink), or an `openat2` that may neither leave the start
/// directory nor follow a magic link (`RESOLVE_BENEATH`; from the caller's root
/// `RESOLVE_IN_ROOT`, which resolves absolute symlinks as the caller's walk does) — and
/// one `fstatat` for the name. `None` when the hand walk must decide (a symlink to follow
/// at the end, a `..`, a magic link, an escape, any error).
fn quick(call: &Call<'_>, root: &Root, at: PathArg, path: &[u8], follow: bool) -> Option<Found> {
    let components = || path.split(|b| *b == b'/').filter(|c| !c.is_empty());
    if components().any(|c| c == b"..") || components().next_back().is_none_or(|c| c == b".") {
        return None;
    }
    let mut parents: Vec<&[u8]> = components().filter(|c| *c != b".").collect();
    let name = parents.pop()?.to_vec();
    let directory = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW;
    let dir = if path.starts_with(b"/") {
        if parents.is_empty() {
            root.fd.try_clone().ok()?
        } else {
            let how = OpenHow::new()
                .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
                .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
            openat2(root.fd.as_fd(), parents.join(&b'/').as_slice(), how).ok()?
        }
    } else {
        let mut start = match at.dirfd {
            libc::AT_FDCWD => b"cwd".to_vec(),
            fd => format!("fd/{fd}").into_bytes(),
        };
        match parents.as_slice() {
            [] => call.open_proc_once(&start, OFlag::empty())?,
            [one] => {
                start.push(b'/');
                start.extend_from_slice(one);
                call.open_proc_once(&start, directory)?
            }
            more => {
                let base = call.open_proc_once(&start, OFlag::empty())?;
                let how = OpenHow::new()
                    .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
                    .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
                openat2(base.as_fd(), more.join(&b'/').as_slice(), how).ok()?
            }
        }
    };
    let object = match fstatat(
        dir.as_fd(),
        std::ffi::OsStr::from_bytes(&name),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    ) {
        Ok(st) if follow && st.st_mode & libc::S_IFMT == libc::S_IFLNK => return None,
        Ok(st) => Some(st),
        Err(Errno::ENOENT) => None,
        Err(_) => return None,
    };
    Some(Found {
        dir,
        name: Some(name),
        object,
    })
}

use std::os::unix::ffi::OsStrExt;

/// The caller's file descriptor a procfs path beneath `/proc` names, if it is one.
fn magic(rest: &[Vec<u8>]) -> Located {
    let own = |who: &[u8]| who == b"self" || who == b"thread-self";
    let number = |n: &[u8]| std::str::from_utf8(n).ok().and_then(|n| n.parse().ok());
    match rest {
        [who, fd, n] if own(who) && fd == b"fd" => {
            number(n).map_or(Located::Proc, Located::CallerFd)
        }
        [who, task, _, fd, n] if who == b"self" && task == b"task" && fd == b"fd" => {
            number(n).map_or(Located::Proc, Located::CallerFd)
        }
        _ if rest.iter().any(|c| c == b"fd") => Located::OtherFd,
        _ => Located::Proc,
    }
}

impl Context {
    /// What the seal rules need of the writable directory `dir`, cached with its verdict.
    fn named(&self, dir: BorrowedFd<'_>, st: &sys::Stat) -> Option<Named> {
        let id = (st.dev, st.ino);
        if let Some(named) = self.cache.borrow().named(id, st.born) {
            return Some(named);
        }
        // The directory's own name, as the kernel keeps it for the fd (a mount's root
        // reads as its mount point's name).
        let link = std::fs::read_link(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&dir)
        ))
        .ok()?;
        let name = link
            .file_name()
            .map(|n| n.as_bytes().to_vec())
            .unwrap_or_default();
        let named = Named::of(dir, &name);
        self.cache.borrow_mut().remember_named(id, st.born, named);
        Some(named)
    }
}
