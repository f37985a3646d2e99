//! The mount-namespace layer: a private view of the filesystem in which everything is
//! mounted read-only except the writable roots, protected paths are read-only bind mounts
//! inside them, `/tmp` and `/dev/shm` are private, and SysV IPC, POSIX message queues and
//! abstract unix socket names are the sandbox's own.
//!
//! Landlock cannot carve a read-only hole in a writable tree, and it does not govern
//! `chmod`, `chown`, `utimes` or extended attributes at all; a read-only mount refuses all
//! of those with `EROFS`, which is why every restricted profile gets this layer.
//!
//! `MountPlan::build` runs in sandgate: it opens every path once with no symlink allowed
//! anywhere in it and records the object's identity. `MountPlan::apply` runs in the forked
//! child, in this order:
//! 1. in new mount, IPC and network namespaces (with a user namespace when not root: the
//!    child is cloned into them with a PID namespace, see `exec`, or `enter`s them) map our
//!    own uid/gid; make every mount private, so nothing propagates back to the host, and
//!    open the command's standard streams again on this copy of the host's mounts
//!    (`rehome`), which goes read-only in step 5 with everything under it. The
//!    network namespace is what makes abstract socket names private (TCP is refused by
//!    landlock and seccomp anyway);
//! 2. open what must stay visible beneath `/tmp` or `/dev/shm` (the workspace, writable
//!    roots, allowed sockets, the cwd), and the copy-on-write caches' layers, while the
//!    host's are still in view;
//! 3. cover `/dev` with a small tmpfs of its own (the host's consoles, serial lines,
//!    input devices and disks gone), `/tmp` with the private temp (an empty tmpfs, or the
//!    workspace's own directory), `/dev/shm` with an empty tmpfs, `/dev/mqueue` with this
//!    IPC namespace's queues and `/dev/pts` with an empty directory, then put each kept
//!    object (the standard devices, the caller's own terminal) back at its own path. Every tmpfs made here has a size and an
//!    inode bound: the writable ones the call's (`limits::TmpfsBound`), the read-only
//!    stand-ins just what they hold;
//! 4. bind each writable root (and each pinned directory, and each sealed entry of a
//!    writable home) onto itself, shallow first, making it its own mount; mount each
//!    copy-on-write cache's layer at the cache's path, on top of those binds (`caches`: made
//!    here, before the tree goes read-only, because overlayfs takes its upper layer only
//!    from a writable mount);
//! 5. mark the whole tree read-only, recursively, and re-open the writable binds, the
//!    caches and the private temp for writing (never a bind whose host mount was
//!    read-only, never a sealed entry);
//! 6. guard each git directory, shallow ones first: its top level bound read-only onto
//!    itself, then its other subdirectories bound writable again on top (see
//!    `policy::protected` for why, `supervisor::git` for what then still works);
//! 7. bind each protected path onto itself, read-only, then freeze the directories that
//!    would hold a missing persistence path (`freeze`);
//! 8. cover every hidden path with an empty read-only stand-in (`mask`), last;
//! 9. re-enter the working directory by path: the process's cwd still points into the
//!    mount it was on before the binds were stacked on top.
//!
//! Every path the child opens is checked against the identity recorded in sandgate, and
//! every mount is made from fd to fd (`open_tree` + `move_mount`): a directory swapped for
//! a symlink by a process left over from an earlier call fails the call instead of
//! redirecting a mount.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::stat::{fstat, mkdirat, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};

use super::caches::{CacheMount, Mounted, Refused};
use super::checked::{cstring, identity, Checked};
use crate::policy::{roots::COVERED, Restrictions, Temp};
use crate::private_temp::PrivateTemp;
use crate::sys;

/// One writable bind mount.
#[derive(Debug)]
struct RwBind {
    target: Checked,
    /// False when the host mount is already read-only: then it stays read-only.
    reopen: bool,
}

/// Something beneath a covered directory (`COVERED`) that stays visible at its own path.
#[derive(Debug)]
struct Kept {
    source: Checked,
    /// Which covered directory it lies in (index into `COVERED`).
    temp: usize,
    /// The components below that temp.
    below: Vec<CString>,
    dir: bool,
}

/// One mount of a guarded git directory.
#[derive(Debug)]
enum GitMount {
    /// The directory's top level, read-only.
    Guarded,
    /// A subdirectory of it that stays writable (`reopen`: unless the host's is not).
    Writable { reopen: bool },
}

/// What covers `/tmp`.
#[derive(Debug)]
enum TempMount {
    /// A fresh tmpfs.
    Empty,
    /// The workspace's private temp directory on the host.
    Workspace(Checked),
}

/// Everything the child needs to build its mount namespace, prepared before forking.
#[derive(Debug)]
pub struct MountPlan {
    /// `Some((uid_map, gid_map))` when a user namespace is needed (sandgate is not root).
    id_maps: Option<(Vec<u8>, Vec<u8>)>,
    /// `None`: a plan that only builds the namespaces and the read-only view (`probe`).
    temp: Option<TempMount>,
    /// The options of the writable private tmpfs (`/tmp` per call, `/dev/shm`): mode, size
    /// and inode bound (`limits::TmpfsBound`).
    tmpfs_options: CString,
    /// The options of the `/dev/pts` stand-in (see `private_temps`).
    pts_options: CString,
    /// The options of the `/dev` stand-in (`cover_dev`).
    dev_options: CString,
    kept: Vec<Kept>,
    rw_binds: Vec<RwBind>,
    /// Shallow first, so each mount lands on the one made for its parent.
    git: Vec<(Checked, GitMount)>,
    ro_binds: Vec<Checked>,
    /// Copy-on-write caches, each its own layer.
    caches: Vec<CacheMount>,
    cwd: Option<CString>,
    /// Frozen directories (after the protected binds) and masks (last).
    freeze: super::freeze::Freeze,
    masks: super::mask::Masks,
    /// The command's standard streams, opened again in this view before anything covers
    /// them (see `rehome`).
    pub(super) rehome: Vec<super::rehome::Rehome>,
}

/// Returns the uid/gid maps for a user namespace, or `None` when sandgate runs as root
/// and needs none.
fn id_maps() -> Option<(Vec<u8>, Vec<u8>)> {
    let uid = nix::unistd::geteuid();
    let gid = nix::unistd::getegid();
    (!uid.is_root()).then(|| {
        (
            format!("{uid} {uid} 1\n").into_bytes(),
            format!("{gid} {gid} 1\n").into_bytes(),
        )
    })
}

fn options(text: &str) -> io::Result<CString> {
    CString::new(text).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

impl MountPlan {
    /// Prepares the mount steps for `r`; `temp` is the workspace's private temp when the
    /// profile keeps one, `caches` the copy-on-write caches' layers.
    ///
    /// # Errors
    /// A path that cannot be opened without following a symlink (it was swapped since the
    /// policy stage looked), or that has an interior NUL byte.
    pub fn build(
        r: &Restrictions,
        cwd: &Path,
        temp: Option<&PrivateTemp>,
        caches: Vec<CacheMount>,
    ) -> io::Result<MountPlan> {
        // Shallow paths first, so a nested root is bound on top of its parent's bind. A
        // sealed entry of a writable home is bound among them but never made writable
        // again: a root named beneath it, bound later, is.
        let mut writable: Vec<(&Path, bool)> = r
            .writable_roots
            .iter()
            .chain(r.pinned.iter())
            .map(|p| (p.as_path(), true))
            .chain(r.sealed.iter().map(|p| (p.as_path(), false)))
            .collect();
        writable.sort_by_key(|(p, _)| p.components().count());
        let rw_binds = writable
            .into_iter()
            .map(|(p, writable)| {
                Ok(RwBind {
                    target: Checked::record(p)?,
                    reopen: writable && !read_only_host(p),
                })
            })
            .collect::<io::Result<_>>()?;
        let mut git: Vec<(&Path, GitMount)> = r
            .git_dirs
            .iter()
            .map(|p| (p.as_path(), GitMount::Guarded))
            .chain(r.git_writable.iter().map(|p| {
                let reopen = !read_only_host(p);
                (p.as_path(), GitMount::Writable { reopen })
            }))
            .collect();
        git.sort_by_key(|(p, _)| p.components().count());
        let git = git
            .into_iter()
            .map(|(p, how)| Ok((Checked::record(p)?, how)))
            .collect::<io::Result<_>>()?;
        let ro_binds = r
            .protected
            .iter()
            .map(|p| Checked::record(p))
            .collect::<io::Result<_>>()?;
        let temp = match (r.temp, temp) {
            (Temp::PerWorkspace, Some(t)) => TempMount::Workspace(Checked {
                path: cstring(&t.path)?,
                id: identity(t.fd.as_fd())?,
            }),
            (Temp::PerWorkspace, None) => return Err(io::Error::from_raw_os_error(libc::ENOENT)),
            (Temp::PerCall, _) => TempMount::Empty,
        };
        let kept: Vec<Kept> = r
            .kept_visible
            .iter()
            .filter_map(|p| {
                let temp = COVERED.iter().position(|t| p.starts_with(t))?;
                let below = p.strip_prefix(COVERED[temp]).ok()?;
                Some((p, temp, below))
            })
            .map(|(p, temp, below)| {
                Ok(Kept {
                    source: Checked::record(p)?,
                    temp,
                    below: below
                        .iter()
                        .map(|c| cstring(Path::new(c)))
                        .collect::<io::Result<_>>()?,
                    dir: p.is_dir(),
                })
            })
            .collect::<io::Result<_>>()?;
        let masks = super::mask::Masks::build(&r.hidden, cwd)?;
        Ok(MountPlan {
            id_maps: id_maps(),
            temp: Some(temp),
            tmpfs_options: options(&r.tmpfs.options("1777"))?,
            pts_options: options(&format!(
                "mode=755,size=4k,nr_inodes={}",
                1 + kept
                    .iter()
                    .filter(|k| COVERED[k.temp] == "/dev/pts")
                    .map(|k| k.below.len())
                    .sum::<usize>()
            ))?,
            // Its root, three directories, four links and a mount point per kept device.
            dev_options: options(&format!(
                "mode=755,size=16k,nr_inodes={}",
                8 + kept
                    .iter()
                    .filter(|k| COVERED[k.temp] == "/dev")
                    .map(|k| k.below.len())
                    .sum::<usize>()
            ))?,
            kept,
            rw_binds,
            git,
            ro_binds,
            caches,
            // Inside a hidden directory, the command starts in its empty stand-in.
            cwd: Some(cstring(masks.working_dir(cwd))?),
            freeze: super::freeze::Freeze::build(
                &r.frozen,
                &r.protected.union(&r.sealed).cloned().collect(),
            )?,
            masks,
            rehome: vec![],
        })
    }

    /// The namespaces the plan is built in: mount, IPC and network, owned by a new user
    /// namespace when sandgate is not root.
    pub fn namespaces(&self) -> CloneFlags {
        let mut flags =
            CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWIPC | CloneFlags::CLONE_NEWNET;
        if self.id_maps.is_some() {
            flags |= CloneFlags::CLONE_NEWUSER;
        }
        flags
    }

    /// Moves the calling (forked, single-threaded) child into [`MountPlan::namespaces`],
    /// for a child that was not created in them.
    pub fn enter(&self) -> io::Result<()> {
        Ok(unshare(self.namespaces())?)
    }

    /// Builds the private mount namespace in the calling (child) process, once it is in
    /// [`MountPlan::namespaces`]; see the module docs for the order. Runs in a
    /// single-threaded child. Returns the copy-on-write caches it mounted (landlock lets
    /// the command write them) and those whose overlay the kernel refused.
    pub fn apply(&self) -> io::Result<Made> {
        if let Some((uid_map, gid_map)) = &self.id_maps {
            sys::write_file(c"/proc/self/setgroups", b"deny")?;
            sys::write_file(c"/proc/self/uid_map", uid_map)?;
            sys::write_file(c"/proc/self/gid_map", gid_map)?;
        }
        let none = None::<&CStr>;
        mount(
            none,
            c"/",
            none,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            none,
        )?;
        // First, while every name still leads where it does on the host (nothing covered,
        // nothing hidden yet): the streams' new descriptions lie on this view's copies of
        // the host's mounts, which go read-only below with the rest of the tree.
        let stdin = super::rehome::apply(&self.rehome);
        let caches = self
            .caches
            .iter()
            .map(CacheMount::open)
            .collect::<io::Result<Vec<_>>>()?;
        let temps = match &self.temp {
            Some(temp) => self.private_temps(temp)?,
            None => vec![],
        };
        let mut reopen = Vec::new();
        for bind in &self.rw_binds {
            let target = bind.target.open()?;
            let tree = sys::clone_tree(target.as_fd(), true)?;
            sys::move_mount(tree.as_fd(), target.as_fd())?;
            if bind.reopen {
                reopen.push(tree);
            }
        }
        let (mut mounted, mut refused) = (Vec::new(), Vec::new());
        for cache in caches {
            match cache.mount()? {
                Ok(caches) => mounted.extend(caches),
                Err(caches) => refused.extend(caches),
            }
        }
        sys::mount_setattr(c"/", true, libc::MOUNT_ATTR_RDONLY, 0)?;
        let caches = mounted.iter().map(|m| &m.fd);
        for tree in reopen.iter().chain(temps.iter().flatten()).chain(caches) {
            sys::mount_setattr_fd(tree.as_fd(), false, 0, libc::MOUNT_ATTR_RDONLY)?;
        }
        for (path, how) in &self.git {
            let target = path.open()?;
            let tree = sys::clone_tree(target.as_fd(), true)?;
            match how {
                GitMount::Guarded => {
                    sys::mount_setattr_fd(tree.as_fd(), true, libc::MOUNT_ATTR_RDONLY, 0)?
                }
                GitMount::Writable { reopen: true } => {
                    sys::mount_setattr_fd(tree.as_fd(), false, 0, libc::MOUNT_ATTR_RDONLY)?
                }
                GitMount::Writable { reopen: false } => {}
            }
            sys::move_mount(tree.as_fd(), target.as_fd())?;
        }
        for path in &self.ro_binds {
            let target = path.open()?;
            let tree = sys::clone_tree(target.as_fd(), true)?;
            sys::mount_setattr_fd(tree.as_fd(), true, libc::MOUNT_ATTR_RDONLY, 0)?;
            sys::move_mount(tree.as_fd(), target.as_fd())?;
        }
        self.freeze.apply()?;
        self.masks.apply()?;
        if let Some(cwd) = &self.cwd {
            nix::unistd::chdir(cwd.as_c_str())?;
        }
        Ok(Made {
            writable: mounted,
            refused,
            stdin,
        })
    }

    /// Steps 2 and 3: covers `/tmp` and `/dev/shm` and puts back what stays visible.
    /// Returns the private temps' mounts (`None` for a host without `/dev/shm`).
    fn private_temps(&self, temp: &TempMount) -> io::Result<Vec<Option<OwnedFd>>> {
        let kept: Vec<OwnedFd> = self
            .kept
            .iter()
            .map(|k| k.source.open())
            .collect::<io::Result<_>>()?;
        let none = None::<&CStr>;
        let dev = self.cover_dev()?;
        let tmpfs = |at: &CStr, options: &CStr| {
            mount(
                Some(c"tmpfs"),
                at,
                Some(c"tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                Some(options),
            )
        };
        match temp {
            TempMount::Empty => tmpfs(c"/tmp", &self.tmpfs_options)?,
            TempMount::Workspace(dir) => {
                let source = dir.open()?;
                let tree = sys::clone_tree(source.as_fd(), true)?;
                sys::mount_setattr_fd(
                    tree.as_fd(),
                    false,
                    libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
                    0,
                )?;
                let at = sys::open_path(c"/tmp", libc::O_DIRECTORY)?;
                sys::move_mount(tree.as_fd(), at.as_fd())?;
            }
        }
        let tmp = Some(sys::open_path(c"/tmp", libc::O_DIRECTORY)?);
        let shm = match sys::open_path(c"/dev/shm", libc::O_DIRECTORY) {
            Ok(_) => {
                tmpfs(c"/dev/shm", &self.tmpfs_options)?;
                Some(sys::open_path(c"/dev/shm", libc::O_DIRECTORY)?)
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
            Err(e) => return Err(e),
        };
        // POSIX message queues are private to the new IPC namespace, but a host's
        // `/dev/mqueue` would still list (and open, for reading) the host's queues: show
        // this namespace's instead (or nothing, where the kernel has no mqueue mount).
        match sys::open_path(c"/dev/mqueue", libc::O_DIRECTORY) {
            Ok(_) => {
                let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
                if mount(
                    Some(c"mqueue"),
                    c"/dev/mqueue",
                    Some(c"mqueue"),
                    flags,
                    none,
                )
                .is_err()
                {
                    // Empty and read-only: its root is all it holds.
                    tmpfs(c"/dev/mqueue", c"mode=755,size=4k,nr_inodes=1")?;
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(e),
        }
        // The terminals' directory: an empty one (the caller's own terminals are put back
        // below), read-only like the rest of the tree. It holds no data, and an inode for
        // its root and for each mount point made in it.
        let pts = match sys::open_path(c"/dev/pts", libc::O_DIRECTORY) {
            Ok(_) => {
                mount(
                    Some(c"tmpfs"),
                    c"/dev/pts",
                    Some(c"tmpfs"),
                    MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
                    Some(self.pts_options.as_c_str()),
                )?;
                Some(sys::open_path(c"/dev/pts", libc::O_DIRECTORY)?)
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
            Err(e) => return Err(e),
        };
        let covered = [tmp, shm, pts, dev];
        for (k, source) in self.kept.iter().zip(&kept) {
            let Some(base) = covered[k.temp].as_ref() else {
                continue;
            };
            let stub = stub(base.as_fd(), &k.below, k.dir)?;
            let tree = sys::clone_tree(source.as_fd(), true)?;
            sys::move_mount(tree.as_fd(), stub.as_fd())?;
        }
        // Only the temps are writable again later.
        let [tmp, shm, ..] = covered;
        Ok(vec![tmp, shm])
    }

    /// Covers `/dev` with a small tmpfs holding what every program expects of it: the
    /// directories the next steps cover in turn (`shm`, `pts`, `mqueue`, where the host
    /// has them) and the links into `/proc/self/fd`; the kept devices are put back by
    /// the caller. Returns the new `/dev` (`None` for a host without one).
    fn cover_dev(&self) -> io::Result<Option<OwnedFd>> {
        const DIRS: [&CStr; 3] = [c"shm", c"pts", c"mqueue"];
        const LINKS: [(&CStr, &CStr); 4] = [
            (c"fd", c"/proc/self/fd"),
            (c"stdin", c"/proc/self/fd/0"),
            (c"stdout", c"/proc/self/fd/1"),
            (c"stderr", c"/proc/self/fd/2"),
        ];
        let host = match sys::open_path(c"/dev", libc::O_DIRECTORY) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(e),
        };
        let present: Vec<&CStr> = DIRS
            .into_iter()
            .filter(|d| {
                openat(
                    host.as_fd(),
                    *d,
                    OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )
                .is_ok()
            })
            .collect();
        mount(
            Some(c"tmpfs"),
            c"/dev",
            Some(c"tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
            Some(self.dev_options.as_c_str()),
        )?;
        let dev = nix::fcntl::open(
            c"/dev",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        for dir in present {
            mkdirat(dev.as_fd(), dir, Mode::from_bits_truncate(0o755))?;
        }
        for (name, target) in LINKS {
            nix::unistd::symlinkat(target, dev.as_fd(), name)?;
        }
        Ok(Some(sys::open_path(c"/dev", libc::O_DIRECTORY)?))
    }
}

/// Makes (or reuses) the mount point for a kept object at `below` beneath the private temp
/// `base`, walking with `O_NOFOLLOW`: the private temp is the sandbox's, and an earlier
/// call may have left a symlink or a file where the mount point belongs. Whatever is in
/// the way is removed (it is covered by the mount anyway).
fn stub(base: BorrowedFd<'_>, below: &[CString], dir: bool) -> io::Result<OwnedFd> {
    let open = |at: BorrowedFd<'_>, name: &CStr, want_dir: bool| {
        let mut flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        if want_dir {
            flags |= OFlag::O_DIRECTORY;
        }
        openat(at, name, flags, Mode::empty())
    };
    let mut cur: Option<OwnedFd> = None;
    for (i, name) in below.iter().enumerate() {
        let want_dir = dir || i + 1 < below.len();
        let at = cur.as_ref().map_or(base, |c| c.as_fd());
        let next = match open(at, name, want_dir) {
            Ok(fd) if want_dir || is_regular(fd.as_fd()) => fd,
            Ok(_) | Err(Errno::ENOTDIR | Errno::ELOOP) => {
                clear(at, name)?;
                make(at, name, want_dir)?;
                open(at, name, want_dir)?
            }
            Err(Errno::ENOENT) => {
                make(at, name, want_dir)?;
                open(at, name, want_dir)?
            }
            Err(e) => return Err(e.into()),
        };
        cur = Some(next);
    }
    cur.ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
}

fn is_regular(fd: BorrowedFd<'_>) -> bool {
    fstat(fd).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG)
}

/// Removes what is in the way of a mount point: a file, a symlink, or an empty directory.
fn clear(at: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    match unlinkat(at, name, UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(Errno::EISDIR) => Ok(unlinkat(at, name, UnlinkatFlags::RemoveDir)?),
        Err(e) => Err(e.into()),
    }
}

/// Creates an empty directory or regular file to mount on.
fn make(at: BorrowedFd<'_>, name: &CStr, dir: bool) -> io::Result<()> {
    let made = if dir {
        mkdirat(at, name, Mode::from_bits_truncate(0o755))
    } else {
        openat(
            at,
            name,
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map(drop)
    };
    match made {
        Ok(()) | Err(Errno::EEXIST) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Covers `/proc` with a procfs of the calling process's PID namespace, read-only like
/// the rest of the tree: it lists only the sandbox's processes, and `/proc/PID/net` shows
/// only its network namespace. Run by pid 1 of a new PID namespace, in its mount
/// namespace, before it drops its capabilities.
///
/// In a user namespace the kernel refuses (`EPERM`) when the `/proc` it would shadow is
/// not fully visible (parts of it covered, as container runtimes do).
pub fn mount_proc() -> io::Result<()> {
    let flags = MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some(c"proc"), c"/proc", Some(c"proc"), flags, None::<&CStr>)?;
    Ok(())
}

/// Returns true when the host mount holding `path` is read-only (or cannot be told): a
/// bind of it then stays read-only.
fn read_only_host(path: &Path) -> bool {
    nix::sys::statvfs::statvfs(path)
        .map(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
        .unwrap_or(true)
}

/// What [`MountPlan::apply`] made.
pub struct Made {
    /// The copy-on-write caches mounted, for landlock.
    pub writable: Vec<Mounted>,
    /// Those whose overlay the kernel refused.
    pub refused: Vec<Refused>,
    /// The command's description of the file it reads as stdin (see `rehome::apply`).
    pub stdin: Option<OwnedFd>,
}

impl MountPlan {
    /// A plan with no binds: exercises exactly the namespace, id-map and read-only steps.
    pub fn probe() -> MountPlan {
        MountPlan {
            id_maps: id_maps(),
            temp: None,
            tmpfs_options: CString::default(),
            pts_options: CString::default(),
            dev_options: CString::default(),
            kept: vec![],
            rw_binds: vec![],
            git: vec![],
            ro_binds: vec![],
            caches: vec![],
            cwd: None,
            freeze: Default::default(),
            masks: Default::default(),
            rehome: vec![],
        }
    }
}
