//! Performed writes: every call that creates, renames, links or opens for writing in a
//! writable area (and at a guarded git directory's read-only top level) is done by the
//! supervisor, on its own copy of the arguments, after the seal rules (`seal`) looked at
//! the exact directory and name it resolved (`place`).
//!
//! Landlock refuses the sandbox all of these in the writable areas (`landlock::backstop`),
//! so a call the supervisor does not take — elsewhere, or a caller nested in a sandbox of
//! its own — goes to the kernel (CONTINUE), which refuses it there and decides as before
//! everywhere else: no path rewritten after the check can plant anything.
//!
//! What the supervisor does, it does with exactly the caller's rights:
//! - its thread holds no effective capability (`act_for_the_sandbox` drops them), and runs
//!   with the caller's uid and groups (the sandbox's are sandgate's), so the kernel's
//!   permission checks are the caller's;
//! - it acts through the caller's own view of the filesystem (its root and cwd, read-only
//!   mounts included), and only where the caller's landlock domain would let it create
//!   ([`place::Area`]);
//! - files it creates get the caller's umask (the thread has a filesystem context of its
//!   own, see `act_for_the_sandbox`), so modes, default ACLs and setgid directories come
//!   out as the kernel would make them for the caller;
//! - nothing is performed for a caller inside a sandbox nested in this one (see
//!   [`Job::ready`]);
//! - it never waits on the sandbox: an open that can block (a FIFO without a peer, a
//!   file under a lease) moves to a worker thread (`workers`).
//!
//! A refusal by a seal rule gets a marker naming the rule; what the kernel refuses the
//! supervisor gets the kernel's errno, as the call would have.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use nix::errno::Errno;
use nix::fcntl::{openat, renameat2, FcntlArg, OFlag, RenameFlags};
use nix::fcntl::{AtFlags, AT_FDCWD};
use nix::sys::stat::{fstat, mkdirat, mknodat, Mode, SFlag};
use nix::unistd::{linkat, symlinkat, unlinkat, UnlinkatFlags};

use super::copy::{self, End, How};
use super::observe::{self, Acts};
use super::open::{open_at, open_checked, Checked};
use super::ops::{Op, PathArg, Target, TMPFILE};
use super::place::{self, Area, Located, Place};
use super::resolve::Root;
use super::seal::{self, Decision, Made, Seal};
use super::workers::Workers;
use super::{Call, Context, Handled};
use crate::policy::Mode as SandboxMode;
use crate::sys::{self, Answer};

/// Performs the call if it is one the supervisor performs here.
pub fn handle(call: &Call<'_>, context: &Context, workers: &mut Workers) -> Handled {
    let Some(op) = Op::decode(i64::from(call.notif.data.nr), &call.notif.data.args) else {
        return Handled::Kernel;
    };
    let Some(root) = context.root.as_ref() else {
        return Handled::Kernel;
    };
    // Mode and attribute changes, which landlock does not govern, are performed for every
    // caller, a nested one too.
    if let Op::Chmod { .. }
    | Op::SetXattr { .. }
    | Op::Utimes { .. }
    | Op::Chown { .. }
    | Op::Truncate { .. }
    | Op::RemoveXattr { .. } = op
    {
        return super::attrs::handle(call, context, root, op);
    }
    if let Op::Watch { inotify, at, mask } = op {
        return super::watch::handle(call, context, root, inotify, at, mask);
    }
    let job = Job {
        call,
        context,
        root,
        facts: std::cell::Cell::new(None),
    };
    let handled = match op {
        Op::Open { at, flags, mode } => job.open(at, flags, mode, workers),
        Op::Mkdir { at, mode } => job.mkdir(at, mode),
        Op::Mknod { at, mode, dev } => job.mknod(at, mode, dev),
        Op::Symlink { target, at } => job.symlink(target, at),
        Op::Link { from, to } => job.link(from, to),
        Op::Rename { from, to, flags } => job.rename(from, to, flags),
        Op::Unlink { at, dir } => job.unlink(at, dir),
        Op::Chmod { .. }
        | Op::SetXattr { .. }
        | Op::Utimes { .. }
        | Op::Chown { .. }
        | Op::Truncate { .. }
        | Op::RemoveXattr { .. }
        | Op::Watch { .. } => Err(Refused::Kernel),
    };
    match handled {
        Ok(answer) => Handled::Answer(answer, None),
        Err(Refused::Kernel) => Handled::Kernel,
        Err(Refused::Errno(e)) => Handled::Answer(Answer::Error(e as i32), None),
        Err(Refused::Sealed(seal, at, path, reason)) => {
            let mut denial = call.denial(
                seal.op(),
                Some(observe::shown_path(call, at.dirfd, &path)),
                None,
                SandboxMode::FullAccess,
            );
            denial.reason = Some(reason.unwrap_or_else(|| seal.message().to_owned()));
            Handled::Answer(Answer::Error(libc::EPERM), Some(denial))
        }
    }
}

/// Why a call is not performed as asked.
pub enum Refused {
    /// The kernel decides it (CONTINUE).
    Kernel,
    /// It fails with this errno, as the kernel would have failed it.
    Errno(Errno),
    /// A seal rule refuses it at this path (EPERM and a marker; the reason when more
    /// precise than the rule's own message).
    Sealed(Seal, PathArg, Vec<u8>, Option<String>),
}

impl From<Errno> for Refused {
    fn from(e: Errno) -> Self {
        Refused::Errno(e)
    }
}

/// One call being performed.
struct Job<'a> {
    call: &'a Call<'a>,
    context: &'a Context,
    root: &'a Root,
    /// What the supervisor knows of the caller, once asked for (see [`Job::ready`]).
    facts: std::cell::Cell<Option<super::procfs::Facts>>,
}

/// A path argument, read and resolved.
struct Resolved {
    at: PathArg,
    path: Vec<u8>,
    place: Place,
}

impl Resolved {
    fn sealed(&self, seal: Seal) -> Refused {
        Refused::Sealed(seal, self.at, self.path.clone(), None)
    }

    /// The seal rules' view of this place; a name they cannot classify is refused.
    fn here(&self) -> Result<seal::Here, Refused> {
        let Some(named) = self.place.named() else {
            return Err(Refused::Kernel);
        };
        named.here(self.place.name()).map_err(|s| self.sealed(s))
    }

    /// Refuses a guarded git directory's metadata name (`replaced`: a file is renamed or
    /// linked to it).
    fn guarded(&self, replaced: bool) -> Result<(), Refused> {
        match self.place.area {
            Area::Guarded(kind, _) if kind.refuses(self.place.name(), replaced) => {
                Err(self.sealed(Seal::GitMetadata))
            }
            _ => Ok(()),
        }
    }

    /// Returns true when the existing object is a mount point in the sandbox's view — or,
    /// in a guarded region (reached through sandgate's own handle), one of the sandbox's
    /// mounts or a directory with metadata of its own (`info/`: moved aside, it would take
    /// the guard with it).
    fn mount_point(&self, context: &Context) -> bool {
        let Some(st) = &self.place.object else {
            return false;
        };
        match self.place.area {
            Area::Guarded(..) => {
                let id = (st.st_dev, st.st_ino);
                context.is_mount_point(&id) || context.git.guards(&id)
            }
            // No mount namespace: what would be a mount point is one by identity.
            _ if context.decides => {
                let id = (st.st_dev, st.st_ino);
                context.is_mount_point(&id) || context.git.guards(&id)
            }
            _ => {
                let Ok(name) = CString::new(self.place.name()) else {
                    return true;
                };
                let dir = self.place.dir.as_fd();
                match (sys::mount_id(dir), sys::mount_id_at(dir, &name)) {
                    (Ok(here), Ok(there)) => here != there,
                    _ => true,
                }
            }
        }
    }

    fn end(&self) -> End<'_> {
        End {
            dir: self.place.dir.as_fd(),
            name: self.place.name(),
        }
    }

    fn name(&self) -> &OsStr {
        OsStr::from_bytes(self.place.name())
    }

    /// Returns true when the supervisor performs calls here.
    fn performed(&self) -> bool {
        self.place.area != Area::Elsewhere
    }
}

impl Job<'_> {
    /// Reads and resolves one path argument.
    fn resolve(&self, at: PathArg, follow: bool, acts: Acts) -> Result<Resolved, Refused> {
        let path = self.call.read_cstr(at.ptr)?;
        if path.is_empty() {
            return Err(Errno::ENOENT.into());
        }
        match self.locate(at, &path, follow, acts)? {
            Located::Place(place) => Ok(Resolved { at, path, place }),
            Located::OtherFd => Err(Errno::EACCES.into()),
            Located::CallerFd(_) | Located::Proc => Err(Refused::Kernel),
        }
    }

    /// Resolves `path`: what the caller's own walk would meet (a missing directory, a
    /// symlink loop, a directory it may not search), it is told; anything else that fails
    /// the kernel decides.
    fn locate(
        &self,
        at: PathArg,
        path: &[u8],
        follow: bool,
        acts: Acts,
    ) -> Result<Located, Refused> {
        let located = place::locate(self.call, self.context, self.root, at, path, follow, acts);
        match located {
            Ok(located) => Ok(located),
            Err(
                e @ (Errno::ENOENT
                | Errno::ENOTDIR
                | Errno::ELOOP
                | Errno::EACCES
                | Errno::ENAMETOOLONG),
            ) => Err(e.into()),
            Err(_) => Err(Refused::Kernel),
        }
    }

    /// Checks, right before acting, that the supervisor may act for the caller:
    /// - it is under no filter of its own: a caller under more filters than the sandboxed
    ///   command is in a sandbox nested in this one, whose landlock domain may refuse what
    ///   this one allows, so the kernel decides for it (in a writable area, a refusal);
    /// - what was read from it is still its call's (the task did not die, its tid reused).
    fn ready(&self) -> Result<(), Refused> {
        let tid = self.call.tid().as_raw();
        let facts = self
            .context
            .procs
            .facts(tid, self.call.proc_alive.get())
            .map_err(|_| Refused::Kernel)?;
        if facts.filters > self.context.filters {
            return Err(Refused::Kernel);
        }
        self.facts.set(Some(facts));
        if self.call.still_pending() {
            Ok(())
        } else {
            Err(Errno::EINTR.into())
        }
    }

    /// Runs `f` on `mode` with the caller's umask applied (after [`Job::ready`]): in force
    /// for this thread, which then applies it as the kernel would (a default ACL
    /// included); or, where the thread shares sandgate's umask, taken off the mode here.
    fn with_umask<T>(&self, mode: u32, f: impl FnOnce(u32) -> T) -> T {
        let umask = self.facts.get().map_or(0o077, |f| f.umask);
        if !self.context.own_fs {
            return f(mode & !umask);
        }
        if self.context.umask.get() != Some(umask) {
            nix::sys::stat::umask(Mode::from_bits_truncate(umask));
            self.context.umask.set(Some(umask));
        }
        f(mode)
    }

    fn open(
        &self,
        at: PathArg,
        flags: i32,
        mode: u32,
        workers: &mut Workers,
    ) -> Result<Answer, Refused> {
        let tmpfile = flags & TMPFILE != 0;
        let creates = flags & libc::O_CREAT != 0;
        let follow =
            tmpfile || (flags & libc::O_NOFOLLOW == 0 && !(creates && flags & libc::O_EXCL != 0));
        let path = self.call.read_cstr(at.ptr)?;
        if path.is_empty() {
            return Err(Errno::ENOENT.into());
        }
        if tmpfile {
            // The path names the directory the file is made in.
            let mut dir = path.clone();
            dir.extend_from_slice(b"/.");
            let Located::Place(place) = self.locate(at, &dir, true, Acts::OnName)? else {
                return Err(Refused::Kernel);
            };
            let resolved = Resolved { at, path, place };
            if !resolved.performed() {
                return Err(Refused::Kernel);
            }
            let named = resolved.place.named().ok_or(Refused::Kernel)?;
            let here = seal::Here {
                dir: named.dir,
                name: seal::Name::Other,
            };
            let no_exec = match seal::create(here, Made::File) {
                Decision::Perform { no_exec } => no_exec,
                Decision::Refuse(seal) => return Err(resolved.sealed(seal)),
                Decision::CopyIn { .. } => return Err(Refused::Kernel),
            };
            resolved.guarded(false)?;
            self.ready()?;
            let mode = if no_exec { mode & !0o111 } else { mode };
            let file = self.with_umask(mode, |mode| {
                open_at(resolved.place.dir.as_fd(), OsStr::new("."), flags, mode)
            })?;
            return Ok(self.hand_over(file, flags));
        }
        // An existing file's data is what a write changes: a file bound writable on its
        // own (`Acts::OnObject`) decides its area then.
        let resolved = match self.locate(at, &path, follow, Acts::OnObject)? {
            Located::Place(place) => Resolved { at, path, place },
            Located::CallerFd(fd) => return self.reopen(at, fd, flags, mode, workers),
            Located::OtherFd => return Err(Errno::EACCES.into()),
            Located::Proc => return Err(Refused::Kernel),
        };
        self.open_place(resolved, flags, mode, workers)
    }

    /// Opens what `resolved` names with the caller's `flags`.
    fn open_place(
        &self,
        resolved: Resolved,
        flags: i32,
        mode: u32,
        workers: &mut Workers,
    ) -> Result<Answer, Refused> {
        let place = &resolved.place;
        // A directory named as such (EISDIR, EEXIST, … from the kernel), or not here.
        if place.name.is_none() || place.slash || !resolved.performed() {
            return Err(Refused::Kernel);
        }
        let writes = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
        let here = resolved.here()?;
        // Git writes nothing but regular files at a guarded top level; a FIFO or socket
        // put there is refused rather than waited on.
        if let (Area::Guarded(..), Some(seal::Kind::Special)) = (place.area, place.kind()) {
            return Err(resolved.sealed(Seal::GitMetadata));
        }
        let mut flags = flags;
        if place.kind().is_some() {
            // What was found is what is opened: should it go before the open, the open
            // fails rather than creating what the rules never looked at.
            flags &= !libc::O_CREAT;
        }
        let decision = match (place.kind(), writes) {
            (Some(_), false) => Decision::Perform { no_exec: false },
            (Some(seal::Kind::Dir), true) => return Err(Errno::EISDIR.into()),
            (Some(kind), true) => seal::write(here, kind),
            (None, _) if flags & libc::O_CREAT != 0 => seal::create(here, Made::File),
            (None, _) => return Err(Errno::ENOENT.into()),
        };
        let no_exec = match decision {
            Decision::Perform { no_exec } => no_exec,
            Decision::Refuse(seal) => {
                resolved.guarded(false)?;
                return Err(resolved.sealed(seal));
            }
            Decision::CopyIn { .. } => return Err(Refused::Kernel),
        };
        resolved.guarded(false)?;
        if here.name == seal::Name::Config {
            flags &= !libc::O_CREAT;
        }
        let mode = if no_exec { mode & !0o111 } else { mode };
        self.ready()?;
        let fifo = place
            .object
            .is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFIFO);
        let blocking = flags & libc::O_NONBLOCK == 0;
        // An existing file opened to write is judged again on the file the open got.
        let existing = (place.kind().is_some() && writes).then_some(here);
        if fifo && blocking && flags & libc::O_ACCMODE != libc::O_RDWR {
            // It waits for a peer: on a worker, never here.
            return Ok(self.on_worker(&resolved, flags, mode, existing, workers));
        }
        let opened = self.with_umask(mode, |mode| {
            open_checked(
                place.dir.as_fd(),
                resolved.name(),
                flags | libc::O_NONBLOCK,
                mode,
                existing,
            )
        });
        let file = match opened {
            // A lease another holder must give up first: wait for it on a worker.
            Err(Errno::EAGAIN) if blocking => {
                return Ok(self.on_worker(&resolved, flags, mode, existing, workers))
            }
            Err(e) => return Err(e.into()),
            Ok(Checked::Sealed(seal)) => return Err(resolved.sealed(seal)),
            Ok(Checked::Opened(file)) => file,
        };
        if blocking {
            // O_NONBLOCK only kept this open from waiting; the caller gets its own flags.
            let settable = libc::O_APPEND | libc::O_DIRECT | libc::O_NOATIME;
            nix::fcntl::fcntl(
                file.as_fd(),
                FcntlArg::F_SETFL(OFlag::from_bits_truncate(flags & settable)),
            )?;
        }
        Ok(self.hand_over(file, flags))
    }

    /// Opens `resolved` on a worker thread, which answers.
    fn on_worker(
        &self,
        resolved: &Resolved,
        flags: i32,
        mode: u32,
        existing: Option<seal::Here>,
        workers: &mut Workers,
    ) -> Answer {
        let Ok(dir) = resolved.place.dir.try_clone() else {
            return Answer::Error(libc::EMFILE);
        };
        let Ok(name) = CString::new(resolved.place.name()) else {
            return Answer::Error(libc::EINVAL);
        };
        let job = super::workers::Open {
            dir,
            name,
            flags,
            mode,
            existing,
            cloexec: flags & libc::O_CLOEXEC != 0,
        };
        workers
            .perform(
                self.call.listener,
                self.call.notif,
                super::workers::Job::Open(job),
            )
            .unwrap_or(Answer::Sent)
    }

    /// Installs `file` in the caller as the result of its open.
    fn hand_over(&self, file: OwnedFd, flags: i32) -> Answer {
        let cloexec = flags & libc::O_CLOEXEC != 0;
        // An error: the caller went away; there is nobody to answer.
        let _ = sys::notif_addfd_send(
            self.call.listener.as_fd(),
            self.call.notif.id,
            file.as_fd(),
            cloexec,
        );
        Answer::Sent
    }

    /// The caller's non-regular file `held` (see [`Job::reopen`]) opened anew with `flags`,
    /// when its own access mode allows them (`EACCES` otherwise). The open is this
    /// thread's, so it never makes a terminal anyone's controlling terminal.
    fn reopen_as_held(&self, held: &OwnedFd, status: i32, flags: i32) -> Result<Answer, Refused> {
        // A bare handle (`O_PATH`) allows neither reading nor writing.
        if status & libc::O_PATH != 0 {
            return Err(Refused::Errno(Errno::EACCES));
        }
        let has = status & libc::O_ACCMODE;
        let wants = flags & libc::O_ACCMODE;
        let reads = |m: i32| m == libc::O_RDONLY || m == libc::O_RDWR;
        let writes = |m: i32| m == libc::O_WRONLY || m == libc::O_RDWR;
        if (reads(wants) && !reads(has)) || (writes(wants) && !writes(has)) {
            return Err(Refused::Errno(Errno::EACCES));
        }
        // Not waiting in `open` (a FIFO waits there for its other end): the thread must not
        // stall. A writer finds no reader at once (`ENXIO`) rather than waiting for one.
        let opening = OFlag::from_bits_truncate(flags & (libc::O_ACCMODE | libc::O_DIRECTORY))
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC
            | OFlag::O_NONBLOCK;
        let file = nix::fcntl::open(
            format!("/proc/self/fd/{}", held.as_raw_fd()).as_str(),
            opening,
            nix::sys::stat::Mode::empty(),
        )?;
        let status = OFlag::from_bits_truncate(flags & (libc::O_APPEND | libc::O_NONBLOCK));
        nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETFL(status))?;
        Ok(self.hand_over(file, flags))
    }

    /// An open of `/dev/stdout`, `/proc/self/fd/N` and the like: the caller's file `fd`,
    /// opened anew. A regular file is found again by the name the kernel keeps for it and
    /// opened there, checked like any other. Anything else (a pipe, a terminal, a device)
    /// is opened here, through the descriptor taken from the caller, and never for more
    /// than that descriptor allows: the kernel would open a pipe's read end for writing
    /// (the caller's stdin pipe, which a shell reads its script from after the call), and
    /// landlock does not look at pipes.
    fn reopen(
        &self,
        at: PathArg,
        fd: i32,
        flags: i32,
        mode: u32,
        workers: &mut Workers,
    ) -> Result<Answer, Refused> {
        let pidfd = super::pidfd_for(self.call.tid())?;
        let (file, status) = match sys::pidfd_getfd(pidfd.as_fd(), fd) {
            Ok(file) => {
                let status = nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_GETFL)?;
                (file, status)
            }
            // Where `pidfd_getfd` is refused: the file opened again through the caller's
            // /proc (`O_PATH`), with the access its description has, read from its fdinfo.
            Err(_) => {
                let file = self
                    .call
                    .open_proc(&format!("fd/{fd}"))
                    .map_err(|_| Errno::EBADF)?;
                (file, super::fd_flags(self.call.tid(), fd)?)
            }
        };
        let st = fstat(file.as_fd())?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return self.reopen_as_held(&file, status, flags);
        }
        let Some(path) = self.call.proc_link(&format!("fd/{fd}")) else {
            return Err(Refused::Kernel);
        };
        let path = path.as_os_str().as_bytes().to_vec();
        if !path.starts_with(b"/") || path.ends_with(b" (deleted)") {
            return Err(Refused::Kernel);
        }
        let at = PathArg {
            dirfd: libc::AT_FDCWD,
            ..at
        };
        let place = match place::locate(
            self.call,
            self.context,
            self.root,
            at,
            &path,
            false,
            Acts::OnObject,
        ) {
            Ok(Located::Place(place)) => place,
            _ => return Err(Refused::Kernel),
        };
        let same = place
            .object
            .is_some_and(|o| (o.st_dev, o.st_ino) == (st.st_dev, st.st_ino));
        if !same {
            return Err(Refused::Kernel);
        }
        self.open_place(Resolved { at, path, place }, flags, mode, workers)
    }

    /// Resolves where a create of `made` goes and checks it: a name there, free, in an
    /// area the supervisor performs in, allowed by the seal rules (files made in a hooks
    /// directory lose their execute bits: `no_exec`). A path ending in a slash is fine
    /// for a directory only.
    fn creating(&self, at: PathArg, made: Made) -> Result<(Resolved, bool), Refused> {
        let resolved = self.resolve(at, false, Acts::OnName)?;
        let place = &resolved.place;
        if place.name.is_none() || (place.slash && made != Made::Dir) || !resolved.performed() {
            return Err(Refused::Kernel);
        }
        if place.object.is_some() {
            return Err(Errno::EEXIST.into());
        }
        resolved.guarded(false)?;
        match seal::create(resolved.here()?, made) {
            Decision::Perform { no_exec } => Ok((resolved, no_exec)),
            Decision::Refuse(seal) => Err(resolved.sealed(seal)),
            Decision::CopyIn { .. } => Err(Refused::Kernel),
        }
    }

    fn mkdir(&self, at: PathArg, mode: u32) -> Result<Answer, Refused> {
        let (resolved, _) = self.creating(at, Made::Dir)?;
        self.ready()?;
        self.with_umask(mode, |mode| {
            mkdirat(
                resolved.place.dir.as_fd(),
                resolved.name(),
                Mode::from_bits_truncate(mode),
            )
        })?;
        self.made_dir(&resolved);
        Ok(Answer::Return(0))
    }

    /// A directory made in a guarded region is as read-only to the sandbox as its parent:
    /// it joins the regions, so that the supervisor performs what happens inside it too.
    fn made_dir(&self, resolved: &Resolved) {
        if let Area::Guarded(kind, _) = resolved.place.area {
            let made = openat(
                resolved.place.dir.as_fd(),
                resolved.name(),
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            );
            if let Ok(fd) = made {
                self.context.git.add(kind, fd, resolved.place.name());
            }
        }
    }

    fn mknod(&self, at: PathArg, mode: u32, dev: u64) -> Result<Answer, Refused> {
        let made = match mode & libc::S_IFMT {
            0 | libc::S_IFREG => Made::File,
            libc::S_IFIFO | libc::S_IFSOCK => Made::Node,
            // Devices (which need CAP_MKNOD) and nonsense: the kernel's answer.
            _ => return Err(Refused::Kernel),
        };
        let (resolved, no_exec) = self.creating(at, made)?;
        let perm = Mode::from_bits_truncate(if no_exec {
            mode & 0o7666
        } else {
            mode & 0o7777
        });
        let kind = match mode & libc::S_IFMT {
            0 => SFlag::S_IFREG,
            kind => SFlag::from_bits_truncate(kind),
        };
        self.ready()?;
        let dir = resolved.place.dir.as_fd();
        self.with_umask(perm.bits(), |perm| {
            mknodat(
                dir,
                resolved.name(),
                kind,
                Mode::from_bits_truncate(perm),
                dev,
            )
        })?;
        Ok(Answer::Return(0))
    }

    fn symlink(&self, target: u64, at: PathArg) -> Result<Answer, Refused> {
        let target = self.call.read_cstr(target)?;
        if target.is_empty() {
            return Err(Errno::ENOENT.into());
        }
        let (resolved, _) = self.creating(at, Made::Symlink)?;
        self.ready()?;
        let target = OsStr::from_bytes(&target);
        symlinkat(target, resolved.place.dir.as_fd(), resolved.name())?;
        Ok(Answer::Return(0))
    }

    fn link(&self, from: Target, to: PathArg) -> Result<Answer, Refused> {
        let from = match from {
            Target::Fd(fd) => return self.link_fd(fd, to),
            Target::Path {
                at,
                follow,
                empty_ok,
            } => {
                let path = self.call.read_cstr(at.ptr)?;
                if path.is_empty() && empty_ok {
                    return self.link_fd(at.dirfd, to);
                }
                match self.locate(at, &path, follow, Acts::OnName)? {
                    Located::Place(place) => Resolved { at, path, place },
                    // `/proc/self/fd/N` followed: the caller's file N (an `O_TMPFILE`
                    // file given a name the portable way).
                    Located::CallerFd(fd) => return self.link_fd(fd, to),
                    Located::OtherFd => return Err(Errno::EACCES.into()),
                    Located::Proc => return Err(Refused::Kernel),
                }
            }
        };
        let to = self.resolve(to, false, Acts::OnName)?;
        if !from.performed()
            || !to.performed()
            || from.place.name.is_none()
            || to.place.name.is_none()
            || from.place.slash
            || to.place.slash
        {
            return Err(Refused::Kernel);
        }
        let Some(kind) = from.place.kind() else {
            return Err(Errno::ENOENT.into());
        };
        if to.place.object.is_some() {
            return Err(Errno::EEXIST.into());
        }
        from.guarded(false)?;
        to.guarded(true)?;
        match seal::link(from.here()?, kind, to.here()?) {
            Decision::Perform { .. } => {
                self.ready()?;
                linkat(
                    from.place.dir.as_fd(),
                    from.name(),
                    to.place.dir.as_fd(),
                    to.name(),
                    AtFlags::empty(),
                )?;
                Ok(Answer::Return(0))
            }
            Decision::CopyIn { validate, no_exec } => self.copy(
                &from,
                &to,
                How {
                    validate,
                    no_exec,
                    keep_source: true,
                    no_replace: true,
                },
            ),
            Decision::Refuse(seal) => Err(to.sealed(seal)),
        }
    }

    /// A link of the caller's file `fd` (`AT_EMPTY_PATH`): an `O_TMPFILE` file given a
    /// name, usually. Its own place is found from the name the kernel keeps for it.
    fn link_fd(&self, fd: i32, to: PathArg) -> Result<Answer, Refused> {
        if fd < 0 {
            return Err(Refused::Kernel);
        }
        let pidfd = super::pidfd_for(self.call.tid())?;
        // Where `pidfd_getfd` is refused, the file opened again through the caller's /proc.
        let file = match sys::pidfd_getfd(pidfd.as_fd(), fd) {
            Ok(file) => file,
            Err(_) => self
                .call
                .open_proc(&format!("fd/{fd}"))
                .map_err(|_| Errno::EBADF)?,
        };
        let st = fstat(file.as_fd())?;
        // With a mount namespace a file from outside the writable areas is on another mount
        // (EXDEV); without one, the name the caller's file has must lie in one. (A file
        // with no name at all is an `O_TMPFILE` one, the only kind the kernel links.)
        if self.context.decides
            && st.st_nlink != 0
            && !super::attrs::fd_writable(self.call, self.context, self.root, fd, &st)
        {
            return Err(Errno::EXDEV.into());
        }
        let here_from = super::attrs::fd_here(self.call, fd)?;
        let to = self.resolve(to, false, Acts::OnName)?;
        if !to.performed() || to.place.name.is_none() || to.place.slash {
            return Err(Refused::Kernel);
        }
        if to.place.object.is_some() {
            return Err(Errno::EEXIST.into());
        }
        to.guarded(true)?;
        match seal::link(here_from, place::kind_of(&st), to.here()?) {
            Decision::Perform { .. } => {}
            Decision::Refuse(seal) => return Err(to.sealed(seal)),
            // A configuration file takes no anonymous source: write it and rename it.
            Decision::CopyIn { .. } => return Err(to.sealed(Seal::GitConfig)),
        }
        self.ready()?;
        let via = format!("/proc/self/fd/{}", file.as_raw_fd());
        linkat(
            AT_FDCWD,
            via.as_str(),
            to.place.dir.as_fd(),
            to.name(),
            AtFlags::AT_SYMLINK_FOLLOW,
        )?;
        Ok(Answer::Return(0))
    }

    fn rename(&self, from: PathArg, to: PathArg, flags: u32) -> Result<Answer, Refused> {
        let known = libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE;
        if flags & !known != 0 {
            // RENAME_WHITEOUT (CAP_MKNOD) and unknown flags: the kernel's answer.
            return Err(Refused::Kernel);
        }
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let from = self.resolve(from, false, Acts::OnName)?;
        let to = self.resolve(to, false, Acts::OnName)?;
        if !from.performed()
            || !to.performed()
            || from.place.name.is_none()
            || to.place.name.is_none()
        {
            return Err(Refused::Kernel);
        }
        let Some(kind) = from.place.kind() else {
            return Err(Errno::ENOENT.into());
        };
        if (from.place.slash || to.place.slash) && kind != seal::Kind::Dir {
            return Err(Errno::ENOTDIR.into());
        }
        let to_kind = to.place.kind();
        from.guarded(false)?;
        to.guarded(!exchange)?;
        // The supervisor's thread lives in sandgate's mount namespace, where the sandbox's
        // mount points are plain names: refuse what the kernel refuses the caller, moving
        // or replacing one (a guarded `.git`, a pinned directory, a masked credential).
        if from.mount_point(self.context) || to.mount_point(self.context) {
            return Err(Errno::EBUSY.into());
        }
        let (from_here, to_here) = (from.here()?, to.here()?);
        let decision = match (exchange, to_kind) {
            (true, Some(to_kind)) => seal::exchange(from_here, kind, to_here, to_kind),
            (true, None) => return Err(Errno::ENOENT.into()),
            (false, _) => seal::rename(from_here, kind, to_here),
        };
        match decision {
            Decision::Perform { .. } => {
                self.ready()?;
                let flags = RenameFlags::from_bits_truncate(flags);
                if to_here.sealed() {
                    staged_rename(&from, &to, flags, |kind| {
                        seal::rename(from_here, kind, to_here)
                    })?;
                } else {
                    renameat2(
                        from.place.dir.as_fd(),
                        from.name(),
                        to.place.dir.as_fd(),
                        to.name(),
                        flags,
                    )?;
                }
                // A directory renamed has a new name, which the seal rules read.
                let mut cache = self.context.cache.borrow_mut();
                for st in [from.place.object, to.place.object].into_iter().flatten() {
                    if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
                        cache.forget((st.st_dev, st.st_ino));
                    }
                }
                Ok(Answer::Return(0))
            }
            Decision::CopyIn { validate, no_exec } => self.copy(
                &from,
                &to,
                How {
                    validate,
                    no_exec,
                    keep_source: false,
                    no_replace: flags & libc::RENAME_NOREPLACE != 0,
                },
            ),
            Decision::Refuse(seal) => Err(to.sealed(seal)),
        }
    }

    /// Performs a rename or link the seal rules allow only as a checked copy.
    fn copy(&self, from: &Resolved, to: &Resolved, how: How) -> Result<Answer, Refused> {
        self.ready()?;
        match copy::copy_in(&from.end(), &to.end(), how) {
            Ok(()) => Ok(Answer::Return(0)),
            Err(copy::Failed::Errno(e)) => Err(e.into()),
            Err(copy::Failed::Refused(refusal)) => Err(Refused::Sealed(
                Seal::GitConfig,
                to.at,
                to.path.clone(),
                Some(format!("git configuration: {refusal}")),
            )),
        }
    }

    /// A removal at a guarded git directory's read-only top level (elsewhere the kernel
    /// decides removals: landlock allows them in the writable areas).
    fn unlink(&self, at: PathArg, dir: bool) -> Result<Answer, Refused> {
        let resolved = self.resolve(at, false, Acts::OnName)?;
        let place = &resolved.place;
        match place.area {
            Area::Guarded(..) => {}
            // Where the supervisor decides, landlock lets the sandbox remove nothing.
            Area::Writable(_) if self.context.decides => {}
            _ => return Err(Refused::Kernel),
        }
        if place.name.is_none() {
            return Err(Refused::Kernel);
        }
        resolved.guarded(false)?;
        if resolved.mount_point(self.context) {
            return Err(Errno::EBUSY.into());
        }
        self.ready()?;
        let how = if dir {
            UnlinkatFlags::RemoveDir
        } else {
            UnlinkatFlags::NoRemoveDir
        };
        unlinkat(place.dir.as_fd(), resolved.name(), how)?;
        if let (true, Some(st)) = (dir, &place.object) {
            self.context.git.remove(&(st.st_dev, st.st_ino));
        }
        Ok(Answer::Return(0))
    }
}

/// Renames `from` to the sealed name `to` in two steps, so that what lands is what the
/// rules allowed: the source first moves to a staging name in `to`'s directory (which no
/// sandbox and no other supervisor may write, rename or link), where the rules (`decide`)
/// look at it again — another process may have put something else at the source's name
/// since the supervisor looked — and only then to `to`. Refused, it goes back.
fn staged_rename(
    from: &Resolved,
    to: &Resolved,
    flags: RenameFlags,
    decide: impl FnOnce(seal::Kind) -> Decision,
) -> Result<(), Refused> {
    let staging = copy::staging_name();
    let dir = to.place.dir.as_fd();
    renameat2(
        from.place.dir.as_fd(),
        from.name(),
        dir,
        staging.as_c_str(),
        RenameFlags::RENAME_NOREPLACE,
    )?;
    let back = || {
        // The staging name is the supervisor's; should the source's name have been taken
        // meanwhile, the file stays there, where the sandbox may read or remove it.
        let _ = renameat2(
            dir,
            staging.as_c_str(),
            from.place.dir.as_fd(),
            from.name(),
            RenameFlags::RENAME_NOREPLACE,
        );
    };
    let kind = match nix::sys::stat::fstatat(dir, staging.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
    {
        Ok(st) => place::kind_of(&st),
        Err(e) => {
            back();
            return Err(e.into());
        }
    };
    let seal = match decide(kind) {
        Decision::Perform { .. } => {
            return renameat2(dir, staging.as_c_str(), dir, to.name(), flags).map_err(|e| {
                back();
                e.into()
            })
        }
        Decision::Refuse(seal) => seal,
        // Not a kind a plain rename may bring here after all: the call lost its race.
        Decision::CopyIn { validate: true, .. } => Seal::GitConfig,
        Decision::CopyIn { .. } => Seal::GitHook,
    };
    back();
    Err(to.sealed(seal))
}
