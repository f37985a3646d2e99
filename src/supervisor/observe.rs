//! Observation of filesystem calls: whether the profile refuses the paths a call names
//! (which calls come here, and where their paths lie, the table in `syscalls` says).
//!
//! The verdict is a prediction from the same facts the kernel uses — the target resolved in
//! the caller's view, the writable roots, protected paths and device nodes, identified by
//! inode — and the call then runs (CONTINUE), so the kernel's own answer is what the command
//! sees whether or not a marker was written.

use std::collections::HashMap;
use std::os::fd::AsFd;

use super::resolve::{self, Inode, Root};
use super::{Call, Context};
use crate::denial::{Denial, Sealed};
use crate::policy::Mode;
use crate::sys;
use crate::syscalls::{Effect, PathAt, PathCall};

/// Returns the path as the caller named it, joined to its cwd or dirfd when relative.
pub fn shown_path(call: &Call<'_>, dirfd: i32, path: &[u8]) -> String {
    let raw = String::from_utf8_lossy(path);
    if path.starts_with(b"/") {
        return raw.into_owned();
    }
    let base = if dirfd == libc::AT_FDCWD {
        call.proc_link("cwd")
    } else {
        call.proc_link(&format!("fd/{dirfd}"))
    };
    match base {
        Some(base) => base.join(raw.as_ref()).display().to_string(),
        None => raw.into_owned(),
    }
}

/// Returns true when a quick look shows the profile allows the call on `path`: its
/// directory is one whose verdict is known to allow writes, holds no protected path or
/// device node, and the last component is not a symlink to follow. False means only that
/// the full walk ([`refused`]) must decide.
///
/// The directory is found in as few system calls as the path allows, and never by
/// following what the kernel would not follow for the caller:
/// - the caller's own directory, or one name beneath it, by one `fstatat` through its
///   `/proc/<tid>/cwd` (or `fd/N`) link, not following that name if it is a symlink;
/// - a longer path by one `openat2` that may neither leave the start directory nor follow
///   a magic link (`RESOLVE_BENEATH`; from the caller's root `RESOLVE_IN_ROOT`, which
///   resolves absolute symlinks as the caller's kernel walk does).
///
/// A `..`, a symlink on the way out of the start directory, a directory not seen before,
/// any error: the full walk decides.
fn allowed_at_a_glance(
    call: &Call<'_>,
    context: &Context,
    root: &Root,
    arg: &PathAt,
    path: &[u8],
) -> bool {
    use nix::fcntl::{openat2, AtFlags, OFlag, OpenHow, ResolveFlag};
    use nix::sys::stat::fstatat;
    let components = || path.split(|b| *b == b'/').filter(|c| !c.is_empty());
    // `..` may leave the start directory, and a path ending in `.` names a directory.
    if components().any(|c| c == b"..") || components().next_back().is_none_or(|c| c == b".") {
        return false;
    }
    let mut parents: Vec<&[u8]> = components().filter(|c| *c != b".").collect();
    let Some(last) = parents.pop() else {
        return false;
    };
    let absolute = path.starts_with(b"/");
    let proc_dir = if absolute {
        None
    } else {
        match call.procs.get(call.tid().as_raw()) {
            Ok((dir, _)) => Some(dir),
            Err(_) => return false,
        }
    };
    // Where the directory is looked at from, and its path from there.
    let (base, mut rel): (std::os::fd::BorrowedFd<'_>, Vec<u8>) = match (&proc_dir, arg.dirfd) {
        (None, _) => (root.fd.as_fd(), Vec::new()),
        (Some(dir), libc::AT_FDCWD) => (dir.as_fd(), b"cwd".to_vec()),
        (Some(dir), fd) if fd >= 0 => (dir.as_fd(), format!("fd/{fd}").into_bytes()),
        _ => return false,
    };
    let join = |rel: &mut Vec<u8>, name: &[u8]| {
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(name);
    };
    let opened;
    let (base, dir): (std::os::fd::BorrowedFd<'_>, sys::Stat) = if parents.len() <= 1 {
        // `cwd` or `fd/N` itself is followed (the link is what is looked at); a name
        // beneath it is not.
        let nofollow = match parents.first() {
            Some(name) => {
                join(&mut rel, name);
                true
            }
            None => false,
        };
        match sys::statx(base, &rel, nofollow) {
            Ok(st) => (base, st),
            Err(_) => return false,
        }
    } else {
        let start = if absolute {
            None
        } else {
            match nix::fcntl::openat(
                base,
                rel.as_slice(),
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            ) {
                Ok(fd) => Some(fd),
                Err(_) => return false,
            }
        };
        let scope = if absolute {
            ResolveFlag::RESOLVE_IN_ROOT
        } else {
            ResolveFlag::RESOLVE_BENEATH
        };
        let how = OpenHow::new()
            .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
            .resolve(scope | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        let from = start.as_ref().map_or(root.fd.as_fd(), |s| s.as_fd());
        opened = match openat2(from, parents.join(&b'/').as_slice(), how) {
            Ok(fd) => fd,
            Err(_) => return false,
        };
        rel.clear();
        match sys::statx(opened.as_fd(), b"", false) {
            Ok(st) => (opened.as_fd(), st),
            Err(_) => return false,
        }
    };
    if dir.mode & libc::S_IFMT != libc::S_IFDIR || context.proc_dev == Some(dir.dev) {
        return false;
    }
    let id = (dir.dev, dir.ino);
    if context.cache.borrow().get(id, dir.born) != Some(Verdict::Allowed)
        || context.holders.contains(&id)
    {
        return false;
    }
    if !arg.follow {
        return true;
    }
    // A symlink in the last place would be followed: where it leads decides.
    join(&mut rel, last);
    match fstatat(base, rel.as_slice(), AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => st.st_mode & libc::S_IFMT != libc::S_IFLNK,
        Err(e) => e == nix::errno::Errno::ENOENT,
    }
}

/// The verdict on one path: `None` when the profile allows it (or it cannot be told).
fn refused(
    call: &Call<'_>,
    context: &Context,
    root: &Root,
    effect: Effect,
    arg: &PathAt,
    path: &[u8],
) -> Option<(String, Verdict, bool)> {
    // An absolute path needs no start directory: save the /proc lookup.
    let start = match (path.starts_with(b"/"), arg.dirfd) {
        (true, _) => None,
        (false, libc::AT_FDCWD) => Some(call.open_proc("cwd").ok()?),
        (false, fd) => Some(call.open_proc(&format!("fd/{fd}")).ok()?),
    };
    let start_fd = start.as_ref().map_or(root.fd.as_fd(), |s| s.as_fd());
    let target = resolve::resolve(root, start_fd, path, arg.follow, None, context.proc_dev).ok()?;
    let object = target.object.as_ref().map(|(_, st)| resolve::identity(st));
    if object.is_some_and(|id| context.devices.contains(&id)) {
        return None;
    }
    let is_dir = |(_, st): &(std::os::fd::OwnedFd, nix::sys::stat::FileStat)| {
        st.st_mode & libc::S_IFMT == libc::S_IFDIR
    };
    if effect == Effect::Open && target.object.as_ref().is_some_and(is_dir) {
        // Opening a directory to write fails with EISDIR, whatever the profile.
        return None;
    }
    let acts = match (effect, object) {
        (Effect::Open, Some(_)) => Acts::OnObject,
        (effect, _) if effect.acts_on_object() => Acts::OnObject,
        _ => Acts::OnName,
    };
    let verdict = context.chain_verdict(&target, root, object, acts)?;
    // Only a refusal is worth the extra check that the pid still names the caller.
    if verdict == Verdict::Allowed || !call.still_pending() {
        return None;
    }
    Some((shown_path(call, arg.dirfd, path), verdict, object.is_some()))
}

/// What the profile says about a write beneath a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Refused; the narrowest mode that would allow it.
    Refused(Mode),
    /// Refused: a protected path (only full access may write it).
    Protected,
    /// Refused: git metadata of a guarded git directory (only full access may write it).
    GitMetadata,
}

impl Context {
    /// Decides for the target's directory and object; `None` when it cannot be told.
    /// Directory verdicts are cached by inode: a build writes thousands of files into the
    /// same few directories.
    ///
    /// The directory that decides is the one holding the name, except for a call acting
    /// on a directory itself (`chmod .git`): a directory can be a mount point whose
    /// writability differs from its parent's (a guarded git directory, its writable
    /// `objects/`, a read-only island, a frozen directory).
    fn chain_verdict(
        &self,
        target: &resolve::Target<'_>,
        root: &Root,
        object: Option<Inode>,
        acts: Acts,
    ) -> Option<Verdict> {
        if object.is_some_and(|id| self.protected.contains(&id)) {
            return Some(Verdict::Protected);
        }
        // A file bound writable at its own path (a copy-on-write cache's per-workspace
        // copy): its data and attributes are writable, its name is not.
        if acts == Acts::OnObject && object.is_some_and(|id| self.writable.contains(&id)) {
            return Some(Verdict::Allowed);
        }
        let object_dir = match (&target.object, acts) {
            (Some((fd, st)), Acts::OnObject) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {
                Some(fd.as_fd())
            }
            _ => None,
        };
        let dir = object_dir.unwrap_or(target.dir.as_fd());
        let st = sys::statx(dir, b"", false).ok()?;
        // A frozen directory's own names and the directory itself are read-only; a file in
        // it is an entry bound writable again.
        let own_names = acts == Acts::OnName || object_dir.is_some();
        self.dir_verdict(dir, &st, root, own_names)
    }

    /// Decides for writes in the directory `dir` (its `statx` in `st`): its own names when
    /// `own_names`, else an existing entry's data. Cached by identity and birth time.
    pub(super) fn dir_verdict(
        &self,
        dir: std::os::fd::BorrowedFd<'_>,
        st: &sys::Stat,
        root: &Root,
        own_names: bool,
    ) -> Option<Verdict> {
        let dir_id = (st.dev, st.ino);
        if self.frozen.contains(&dir_id) && own_names {
            return Some(Verdict::Protected);
        }
        if let Some(v) = self.cache.borrow().get(dir_id, st.born) {
            return Some(v);
        }
        let chain = resolve::ancestry(dir, root).ok()?;
        let needed = if self.mode == Mode::ReadOnly
            && chain
                .iter()
                .any(|id| self.workspace_write_roots.contains(id))
        {
            Mode::WorkspaceWrite
        } else {
            Mode::FullAccess
        };
        // The nearest directory that says anything decides: a writable `objects/` inside
        // a guarded git directory inside the workspace is writable, its `hooks/` is not.
        let verdict = match chain.iter().find_map(|id| self.nearest(id)) {
            Some(Nearest::Writable) => Verdict::Allowed,
            Some(Nearest::Protected) => Verdict::Protected,
            Some(Nearest::GitDir) => Verdict::GitMetadata,
            Some(Nearest::Island) | None => Verdict::Refused(needed),
        };
        self.cache.borrow_mut().remember(dir_id, st.born, verdict);
        Some(verdict)
    }
}

/// What an observed call changes: the object a path names (its data or attributes), or
/// the name in its directory (create, remove, rename, link).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acts {
    OnObject,
    OnName,
}

/// What a directory on the way up says about writes beneath it.
enum Nearest {
    /// A writable root, or a writable subdirectory of a guarded git directory.
    Writable,
    /// Bound read-only.
    Protected,
    /// A guarded git directory's read-only top level.
    GitDir,
    /// Kept visible read-only on top of a writable private temp.
    Island,
}

impl Context {
    fn nearest(&self, id: &Inode) -> Option<Nearest> {
        if self.protected.contains(id) {
            Some(Nearest::Protected)
        } else if self.islands.contains(id) {
            Some(Nearest::Island)
        } else if self.git_dirs.contains(id) {
            Some(Nearest::GitDir)
        } else if self.writable.contains(id) {
            Some(Nearest::Writable)
        } else {
            None
        }
    }
}

/// The verdicts [`Context::chain_verdict`] reached, each for one directory born at one time,
/// and what the seal rules need of that directory (`place::Named`) once the supervisor
/// looked.
///
/// An inode number is reused as soon as its directory is removed, and the next directory
/// to get it may lie anywhere on that filesystem — a writable directory's number handed to
/// one the supervisor made in a guarded git directory, or the other way round — so an
/// entry counts only for the directory born when it was made, and nothing is remembered
/// on a filesystem that keeps no birth times. A directory the supervisor renames is
/// forgotten ([`VerdictCache::forget`]): its name is what the seal rules read.
#[derive(Default)]
pub struct VerdictCache {
    entries: HashMap<Inode, Seen>,
}

/// What is remembered of one directory: when it was born, its verdict, and what the seal
/// rules need of it once looked at.
struct Seen {
    born: (i64, u32),
    verdict: Verdict,
    named: Option<super::named::Named>,
}

impl VerdictCache {
    /// Entries kept before the cache starts over: enough for a build tree, small enough
    /// that a command making directories by the million cannot grow the supervisor.
    const CAPACITY: usize = 4096;

    /// The verdict remembered for the directory `id` born at `born`.
    pub fn get(&self, id: Inode, born: Option<(i64, u32)>) -> Option<Verdict> {
        match self.entries.get(&id) {
            Some(seen) if Some(seen.born) == born => Some(seen.verdict),
            _ => None,
        }
    }

    /// Remembers `verdict` for the directory `id` born at `born`, if it has a birth time.
    pub fn remember(&mut self, id: Inode, born: Option<(i64, u32)>, verdict: Verdict) {
        let Some(born) = born else { return };
        if self.entries.len() >= Self::CAPACITY {
            self.entries.clear();
        }
        self.entries.insert(
            id,
            Seen {
                born,
                verdict,
                named: None,
            },
        );
    }

    /// What was noted of the directory `id` born at `born` for the seal rules.
    pub fn named(&self, id: Inode, born: Option<(i64, u32)>) -> Option<super::named::Named> {
        match self.entries.get(&id) {
            Some(seen) if Some(seen.born) == born => seen.named,
            _ => None,
        }
    }

    /// Notes `named` for a directory whose verdict is remembered.
    pub fn remember_named(
        &mut self,
        id: Inode,
        born: Option<(i64, u32)>,
        named: super::named::Named,
    ) {
        if let Some(seen) = self.entries.get_mut(&id) {
            if Some(seen.born) == born {
                seen.named = Some(named);
            }
        }
    }

    /// Forgets the directory `id` (renamed: its name changed).
    pub fn forget(&mut self, id: Inode) {
        self.entries.remove(&id);
    }
}

/// Checks one observed call of the path call `row`; returns the denial to record, if the
/// profile refuses it.
pub fn check(call: &Call<'_>, row: &PathCall, context: &Context) -> Option<Denial> {
    let registers = &call.notif.data.args;
    let args = row.paths(registers);
    let root = context.root.as_ref()?;
    for arg in &args {
        let Ok(path) = call.read_cstr(arg.ptr) else {
            continue;
        };
        // An empty path is an AT_EMPTY_PATH call on the fd itself: no path to report.
        if path.is_empty() || allowed_at_a_glance(call, context, root, arg, &path) {
            continue;
        }
        if let Some((path, verdict, exists)) = refused(call, context, root, row.effect, arg, &path)
        {
            let needed = match verdict {
                Verdict::Refused(needed) => needed,
                Verdict::Protected | Verdict::GitMetadata | Verdict::Allowed => Mode::FullAccess,
            };
            let op = match (row.effect, exists) {
                _ if verdict == Verdict::GitMetadata => Sealed::GitMetadata.op(),
                (Effect::Open, true) if row.exclusive_create(registers) => return None,
                (Effect::Open, true) => "write",
                (Effect::Open, false) => "create",
                // Creating what exists fails with EEXIST before any write check.
                (Effect::Create | Effect::Mknod, true) => return None,
                (effect, _) => effect.op(),
            };
            let mut denial = call.denial(op, Some(path), None, needed);
            denial.protected = verdict == Verdict::Protected;
            return Some(denial);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: Inode = (8, 1234);

    #[test]
    fn a_verdict_answers_only_for_the_directory_born_when_it_was_reached() {
        let mut cache = VerdictCache::default();
        cache.remember(DIR, Some((100, 5)), Verdict::Allowed);
        assert_eq!(cache.get(DIR, Some((100, 5))), Some(Verdict::Allowed));
        // The number handed to a later directory, in the same second or not.
        assert_eq!(cache.get(DIR, Some((100, 6))), None);
        assert_eq!(cache.get(DIR, Some((101, 5))), None);
        // The later directory's own verdict replaces the old one.
        cache.remember(DIR, Some((101, 5)), Verdict::GitMetadata);
        assert_eq!(cache.get(DIR, Some((101, 5))), Some(Verdict::GitMetadata));
        assert_eq!(cache.get(DIR, Some((100, 5))), None);
    }

    #[test]
    fn nothing_is_remembered_without_a_birth_time() {
        let mut cache = VerdictCache::default();
        cache.remember(DIR, None, Verdict::Allowed);
        assert_eq!(cache.get(DIR, None), None);
        cache.remember(DIR, Some((100, 5)), Verdict::Allowed);
        assert_eq!(cache.get(DIR, None), None);
    }

    #[test]
    fn the_cache_starts_over_when_full() {
        let mut cache = VerdictCache::default();
        for ino in 0..VerdictCache::CAPACITY as u64 {
            cache.remember((1, ino), Some((1, 0)), Verdict::Allowed);
        }
        assert_eq!(cache.get((1, 0), Some((1, 0))), Some(Verdict::Allowed));
        cache.remember(DIR, Some((1, 0)), Verdict::Refused(Mode::FullAccess));
        assert_eq!(cache.get((1, 0), Some((1, 0))), None);
        assert_eq!(
            cache.get(DIR, Some((1, 0))),
            Some(Verdict::Refused(Mode::FullAccess))
        );
    }
}
