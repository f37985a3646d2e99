//! Mode changes that add an execute bit, and extended attributes, performed by the
//! supervisor wherever they land — and, where it decides (no mount namespace behind it),
//! every change of a mode, owner, times or attribute, and truncation by path.
//!
//! Landlock does not govern modes, owners, times or attributes, so the kernel would decide
//! them on a path (and an attribute name) read again after any check: a thread rewriting
//! them in between could make a file in a `hooks` directory executable (`chmod +x`, or a
//! POSIX ACL that grants execute), or — without a read-only view — change a file outside
//! the writable roots. The supervisor resolves the object once, checks it (`seal::chmod`,
//! `seal::set_xattr`, and where it decides, the area it lies in), and changes that very
//! object through a descriptor of its own — through the caller's view, with the caller's
//! rights, so a read-only mount or a file the caller does not own refuses it exactly as
//! the kernel would have.
//!
//! A call on a file descriptor acts on the caller's file, taken with `pidfd_getfd` (or,
//! where that is refused, as in a default container, opened again through the caller's
//! `/proc/PID/fd`); which directory it lies in is read from the name the kernel keeps for
//! it (a hook has one name: no link into or out of `hooks` is ever made), and where the
//! supervisor decides, that name must still lead to the very same file.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstat, FileStat, Mode};

use super::named::Named;
use super::observe::Acts;
use super::ops::{Op, Target, Value};
use super::place::{self, Located};
use super::resolve::Root;
use super::seal::{self, Seal};
use super::Handled;
use super::{Call, Context};
use crate::policy::Mode as SandboxMode;
use crate::sys::{self, Answer};

/// The longest attribute name and value the kernel takes.
const NAME_MAX: usize = 255;
const VALUE_MAX: usize = 64 * 1024;

/// The object a mode or attribute change acts on.
struct Object {
    /// A descriptor of it: `O_PATH` for a path, the caller's own for a descriptor.
    fd: OwnedFd,
    st: FileStat,
    /// Where it lies, for the seal rules.
    here: seal::Here,
    /// The path, for a marker.
    shown: Option<(i32, Vec<u8>)>,
    /// Reached by a path, `fd` perhaps `O_PATH` (a magic link to a caller's `O_PATH`
    /// descriptor among them: glibc changes a symlink-free path's mode that way).
    by_path: bool,
    /// In a guarded git directory's read-only part, reached through sandgate's own handle.
    guarded: bool,
    /// In a writable area (or no file of the tree: a pipe, a socket).
    writable: bool,
}

impl Object {
    /// Refuses, where the supervisor decides, a change outside the writable areas and the
    /// guarded git directories, and of what a mount namespace binds read-only on itself
    /// inside them (a guarded git directory, a pinned or frozen directory): a read-only
    /// view would have refused it.
    fn changeable(&self, context: &Context) -> Result<(), Failed> {
        let id = (self.st.st_dev, self.st.st_ino);
        let bound = context.is_mount_point(&id) && !context.writable.contains(&id);
        match context.decides && (bound || (!self.writable && !self.guarded)) {
            true => Err(Errno::EROFS.into()),
            false => Ok(()),
        }
    }
}

/// Performs `op`, a [`Op::Chmod`] or [`Op::SetXattr`].
pub fn handle(call: &Call<'_>, context: &Context, root: &Root, op: Op) -> Handled {
    let (target, done) = match op {
        Op::Chmod { target, mode } => (target, chmod(call, context, root, target, mode)),
        Op::SetXattr {
            target,
            name,
            value,
            flags,
        } => (
            target,
            set_xattr(call, context, root, target, name, value, flags),
        ),
        Op::Utimes { target, times } => (target, utimes(call, context, root, target, times)),
        Op::Chown {
            target,
            owner,
            group,
        } if context.decides => (target, chown(call, context, root, target, owner, group)),
        Op::Truncate { target, length } if context.decides => {
            (target, truncate(call, context, root, target, length))
        }
        Op::RemoveXattr { target, name } if context.decides => {
            (target, remove_xattr(call, context, root, target, name))
        }
        _ => return Handled::Kernel,
    };
    match done {
        Ok(()) => Handled::Answer(Answer::Return(0), None),
        Err(Failed::Kernel) => Handled::Kernel,
        Err(Failed::Errno(e)) => Handled::Answer(Answer::Error(e as i32), None),
        Err(Failed::Sealed(seal, shown)) => {
            let shown = match (shown, target) {
                (Some((dirfd, path)), _) => super::observe::shown_path(call, dirfd, &path),
                (None, Target::Fd(fd)) => call
                    .proc_link(&format!("fd/{fd}"))
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                (None, Target::Path { .. }) => String::new(),
            };
            let mut denial = call.denial(seal.op(), Some(shown), None, SandboxMode::FullAccess);
            denial.reason = Some(seal.message().to_owned());
            Handled::Answer(Answer::Error(libc::EPERM), Some(denial))
        }
    }
}

/// Why a change was not made as asked.
enum Failed {
    Kernel,
    Errno(Errno),
    Sealed(Seal, Option<(i32, Vec<u8>)>),
}

impl From<Errno> for Failed {
    fn from(e: Errno) -> Self {
        Failed::Errno(e)
    }
}

fn chmod(
    call: &Call<'_>,
    context: &Context,
    root: &Root,
    target: Target,
    mode: u32,
) -> Result<(), Failed> {
    let object = find(call, context, root, target)?;
    object.changeable(context)?;
    let adds_exec = mode & 0o111 & !object.st.st_mode != 0;
    seal::chmod(object.here, place::kind_of(&object.st), adds_exec)
        .map_err(|s| Failed::Sealed(s, object.shown.clone()))?;
    if !call.still_pending() {
        return Err(Errno::EINTR.into());
    }
    if object.by_path {
        sys::fchmodat2(object.fd.as_fd(), c"", mode, libc::AT_EMPTY_PATH).map_err(errno)?;
    } else {
        nix::sys::stat::fchmod(object.fd.as_fd(), Mode::from_bits_truncate(mode))?;
    }
    Ok(())
}

/// Sets times in a guarded git directory's read-only part, where the sandbox's own view
/// refuses them, and wherever the supervisor decides; anywhere else the kernel decides
/// (times are no seal's concern).
fn utimes(
    call: &Call<'_>,
    context: &Context,
    root: &Root,
    target: Target,
    times: u64,
) -> Result<(), Failed> {
    let object = find(call, context, root, target)?;
    if !object.guarded && !context.decides {
        return Err(Failed::Kernel);
    }
    object.changeable(context)?;
    let times = match times {
        0 => None,
        ptr => {
            let bytes = call.read(ptr, 2 * std::mem::size_of::<libc::timespec>())?;
            let spec = |at: usize| {
                let word = |from: usize| {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&bytes[from..from + 8]);
                    i64::from_ne_bytes(b)
                };
                libc::timespec {
                    tv_sec: word(at),
                    tv_nsec: word(at + 8),
                }
            };
            Some([spec(0), spec(16)])
        }
    };
    if !call.still_pending() {
        return Err(Errno::EINTR.into());
    }
    sys::utimens_empty_path(object.fd.as_fd(), times.as_ref()).map_err(errno)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn set_xattr(
    call: &Call<'_>,
    context: &Context,
    root: &Root,
    target: Target,
    name: u64,
    value: Value,
    flags: i32,
) -> Result<(), Failed> {
    let attr = call.read_cstr(name)?;
    if attr.is_empty() || attr.len() > NAME_MAX {
        return Err(Errno::ERANGE.into());
    }
    let (ptr, size, flags) = match value {
        Value::At { ptr, size } => (ptr, size, flags),
        Value::Args { ptr, size } => {
            // struct xattr_args { __aligned_u64 value; __u32 size; __u32 flags; }
            if size < 16 {
                return Err(Errno::EINVAL.into());
            }
            let args = call.read(ptr, 16)?;
            let word = |at: usize| {
                u32::from_ne_bytes([args[at], args[at + 1], args[at + 2], args[at + 3]])
            };
            let value = u64::from_ne_bytes([
                args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7],
            ]);
            (value, u64::from(word(8)), word(12) as i32)
        }
    };
    let size = usize::try_from(size).map_err(|_| Errno::E2BIG)?;
    if size > VALUE_MAX {
        return Err(Errno::E2BIG.into());
    }
    let bytes = if size == 0 {
        Vec::new()
    } else {
        call.read(ptr, size)?
    };
    let object = find(call, context, root, target)?;
    object.changeable(context)?;
    seal::set_xattr(object.here, place::kind_of(&object.st), &attr, &bytes)
        .map_err(|s| Failed::Sealed(s, object.shown.clone()))?;
    if !call.still_pending() {
        return Err(Errno::EINTR.into());
    }
    let attr = CString::new(attr).map_err(|_| Errno::EINVAL)?;
    if object.by_path {
        // The descriptor may be `O_PATH`; its procfs link reaches the very inode.
        let via = CString::new(format!("/proc/self/fd/{}", object.fd.as_raw_fd()))
            .map_err(|_| Errno::EINVAL)?;
        sys::set_xattr(&via, &attr, &bytes, flags).map_err(errno)?;
    } else {
        sys::fset_xattr(object.fd.as_fd(), attr.as_c_str(), &bytes, flags).map_err(errno)?;
    }
    Ok(())
}

/// Changes an owner where the supervisor decides (with the caller's rights: it holds no
/// capability, so only the group among the caller's own can change).
fn chown(
    call: &Call<'_>,
    context: &Context,
    root: &Root,
    target: Target,
    owner: u32,
    group: u32,
) -> Result<(), Failed> {
    let object = find(call, context, root, target)?;
    object.changeable(context)?;
    if !call.still_pending() {
        return Err(Errno::EINTR.into());
    }
    sys::fchown_empty_path(object.fd.as_fd(), owner, group).map_err(errno)?;
    Ok(())
}

/// Truncates by path where the supervisor decides (landlock grants the sandbox no
/// truncation in the writable areas there).
fn truncate(
    call: &Call<'_>,
    context: &Context,
    root: &Root,
    target: Target,
    length: i64,
) -> Result<(), Failed> {
    let object = find(call, context, root, target)?;
    object.changeable(context)?;
    if object.st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        return Err(Errno::EISDIR.into());
    }
    if object.st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(Errno::EINVAL.into());
    }
    if !call.still_pending() {
        return Err(Errno::EINTR.into());
    }
    let via = CString::new(format!("/proc/self/fd/{}", object.fd.as_raw_fd()))
        .map_err(|_| Errno::EINVAL)?;
    nix::unistd::truncate(via.as_c_str(), length)?;
    Ok(())
}

/// Removes an attribute where the supervisor decides.
fn remove_xattr(
    call: &Call<'_>,
    context: &Context,
    root: &Root,
    target: Target,
    name: u64,
) -> Result<(), Failed> {
    let attr = call.read_cstr(name)?;
    if attr.is_empty() || attr.len() > NAME_MAX {
        return Err(Errno::ERANGE.into());
    }
    let object = find(call, context, root, target)?;
    object.changeable(context)?;
    if !call.still_pending() {
        return Err(Errno::EINTR.into());
    }
    let attr = CString::new(attr).map_err(|_| Errno::EINVAL)?;
    let via = CString::new(format!("/proc/self/fd/{}", object.fd.as_raw_fd()))
        .map_err(|_| Errno::EINVAL)?;
    sys::remove_xattr(&via, &attr).map_err(errno)?;
    Ok(())
}

fn errno(e: std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// Resolves what a change acts on.
fn find(call: &Call<'_>, context: &Context, root: &Root, target: Target) -> Result<Object, Failed> {
    let (at, follow, empty_ok) = match target {
        Target::Fd(fd) => return by_fd(call, context, root, fd),
        Target::Path {
            at,
            follow,
            empty_ok,
        } => (at, follow, empty_ok),
    };
    let path = call.read_cstr(at.ptr)?;
    if path.is_empty() {
        return match (empty_ok, at.dirfd) {
            (false, _) => Err(Errno::ENOENT.into()),
            (true, libc::AT_FDCWD) => Err(Failed::Kernel),
            (true, fd) => by_fd(call, context, root, fd),
        };
    }
    let place = match place::locate(call, context, root, at, &path, follow, Acts::OnName) {
        Ok(Located::Place(place)) => place,
        Ok(Located::CallerFd(fd)) => {
            return by_fd(call, context, root, fd).map(|o| Object {
                by_path: true,
                shown: Some((at.dirfd, path)),
                ..o
            })
        }
        // Elsewhere in /proc: `cwd`, `root` and the descriptors of /proc/PID lead back into
        // the tree, by names the supervisor cannot check. Refused.
        Ok(Located::Proc | Located::OtherFd) => return Err(Errno::EACCES.into()),
        Err(e) => return Err(e.into()),
    };
    let Some(st) = place.object else {
        return Err(Errno::ENOENT.into());
    };
    let fd = match &place.name {
        Some(name) => openat(
            place.dir.as_fd(),
            std::ffi::OsStr::from_bytes(name),
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?,
        None => place.dir.try_clone().map_err(|_| Errno::EMFILE)?,
    };
    // Git's metadata in a guarded git directory (`config`, `hooks`, …) keeps its mode,
    // owner, times and attributes: made group- or world-writable, another user of the
    // host could plant what git runs.
    if let (place::Area::Guarded(kind, _), Some(name)) = (place.area, &place.name) {
        if kind.refuses(name, false) {
            return Err(Failed::Sealed(Seal::GitMetadata, Some((at.dirfd, path))));
        }
    }
    // Where the name lies decides; a directory named itself (`.`) is judged by its own
    // name (a hooks directory's default ACL).
    let named = match place.named() {
        Some(named) => named,
        None => Named::of(place.dir.as_fd(), b""),
    };
    let here = match &place.name {
        Some(name) => named
            .here(name)
            .map_err(|s| Failed::Sealed(s, Some((at.dirfd, path.clone()))))?,
        None => seal::Here {
            dir: seal::Dir::Other,
            name: seal::name(&own_name(fd.as_fd()), false).unwrap_or(seal::Name::Other),
        },
    };
    Ok(Object {
        fd,
        st,
        here,
        shown: Some((at.dirfd, path)),
        by_path: true,
        guarded: matches!(place.area, place::Area::Guarded(..)),
        writable: matches!(place.area, place::Area::Writable(_)),
    })
}

/// The caller's file `fd`, and where it lies.
fn by_fd(call: &Call<'_>, context: &Context, root: &Root, fd: i32) -> Result<Object, Failed> {
    let pidfd = super::pidfd_for(call.tid())?;
    // Where `pidfd_getfd` is refused (a default container's seccomp profile refuses it),
    // the same file opened again through the caller's /proc, `O_PATH`.
    let (file, by_path) = match sys::pidfd_getfd(pidfd.as_fd(), fd) {
        Ok(file) => (file, false),
        Err(_) => (
            call.open_proc(&format!("fd/{fd}"))
                .map_err(|_| Errno::EBADF)?,
            true,
        ),
    };
    let st = fstat(file.as_fd())?;
    let here = fd_here(call, fd).map_err(|_| Failed::Kernel)?;
    let writable = context.decides && fd_writable(call, context, root, fd, &st);
    Ok(Object {
        fd: file,
        st,
        here,
        shown: None,
        by_path,
        guarded: false,
        writable,
    })
}

/// Whether the caller's file `fd` (whose status is `st`) lies in a writable area: the name
/// the kernel keeps for it must lead, in the caller's view, to that very file there. A file
/// outside the tree (a pipe, a socket) is no file of the host's to keep unchanged.
pub fn fd_writable(
    call: &Call<'_>,
    context: &Context,
    root: &Root,
    fd: i32,
    st: &FileStat,
) -> bool {
    let Some(path) = call.proc_link(&format!("fd/{fd}")) else {
        return false;
    };
    let bytes = path.as_os_str().as_bytes();
    if !bytes.starts_with(b"/") {
        return true;
    }
    let at = super::ops::PathArg {
        dirfd: libc::AT_FDCWD,
        ptr: 0,
    };
    match place::locate(call, context, root, at, bytes, false, Acts::OnObject) {
        Ok(Located::Place(place)) => {
            matches!(place.area, place::Area::Writable(_))
                && place
                    .object
                    .is_some_and(|o| (o.st_dev, o.st_ino) == (st.st_dev, st.st_ino))
        }
        _ => false,
    }
}

/// Where the caller's file `fd` lies for the seal rules: its directory's name and its own,
/// from the path the kernel keeps for it (in the caller's view). A file with no such path
/// (a pipe, a socket) lies nowhere the rules look.
pub fn fd_here(call: &Call<'_>, fd: i32) -> Result<seal::Here, Errno> {
    let Some(path) = call.proc_link(&format!("fd/{fd}")) else {
        return Err(Errno::EBADF);
    };
    let bytes = path.as_os_str().as_bytes();
    if !bytes.starts_with(b"/") {
        return Ok(seal::Here {
            dir: seal::Dir::Other,
            name: seal::Name::Other,
        });
    }
    let mut parts = bytes.rsplitn(3, |b| *b == b'/');
    let name = parts.next().unwrap_or_default();
    let dir = parts.next().unwrap_or_default();
    Ok(seal::Here {
        dir: seal::dir(dir),
        name: seal::name(name, false).unwrap_or(seal::Name::Other),
    })
}

/// A directory's own name, as the kernel keeps it for `fd`.
fn own_name(fd: std::os::fd::BorrowedFd<'_>) -> Vec<u8> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.as_bytes().to_vec()))
        .unwrap_or_default()
}
