//! The landlock layer: read and execute everywhere; in the writable areas only what
//! cannot plant anything (see [`Writes`]); write on the allowed device nodes; no TCP bind
//! or connect; abstract unix sockets and signals scoped to the sandbox.
//!
//! Access rights are requested at the newest ABI the crate knows, best effort: the crate
//! drops what the running kernel does not know, so every right the kernel *does* know is
//! handled. Whether that is enough for the profile is decided up front from the kernel's
//! ABI (`probe`), not discovered here.
//!
//! The ruleset is created in sandgate (opening the rule paths there), and finished and
//! applied in the child: the private `/tmp` and `/dev/shm` and the copy-on-write caches
//! exist only after the child has mounted them (a rule binds an inode, and an overlay's
//! are not the host's), so their rules can only be added then.

use std::os::fd::OwnedFd;
use std::path::Path;

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope, ABI,
};

use super::around::Grant;
use crate::policy::Restrictions;

/// The newest ABI this build knows; see the module docs for why it is not the kernel's.
const NEWEST: ABI = ABI::V10;

/// Who writes in the writable areas (the writable roots, the private `/tmp` and
/// `/dev/shm`, the copy-on-write caches).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writes {
    /// The supervisor performs every create, write open, rename and link there, after
    /// checking the exact name it resolved (see `supervisor::perform`); landlock refuses
    /// the sandbox all of them ([`backstop`]), so a call the supervisor lets through to
    /// the kernel can never plant anything, whatever its path says by then.
    Performed,
    /// The sandbox itself (no supervisor to perform them: a run degraded without seccomp).
    Direct,
    /// As [`Writes::Performed`], and removals and truncation too: without a mount
    /// namespace no read-only bind keeps a protected path in a writable root, so the
    /// supervisor decides every change there ([`decided`]).
    Decided,
}

/// Rights granted beneath a writable directory when the sandbox writes there itself:
/// everything but creating device nodes (which would need CAP_MKNOD anyway).
fn writable_dir() -> BitFlags<AccessFs> {
    AccessFs::from_all(NEWEST) & !(AccessFs::MakeChar | AccessFs::MakeBlock)
}

/// Rights granted beneath a writable directory whose writes the supervisor performs: read
/// and execute, removing, truncating, binding unix sockets and device ioctls — nothing
/// that creates, renames, links or opens a file for writing (`WriteFile`, `MakeReg`,
/// `MakeDir`, `MakeSym`, `MakeFifo`, `MakeChar`, `MakeBlock`, `Refer`). What a name may
/// become there is the supervisor's to decide; landlock is the backstop that refuses any
/// such call the supervisor did not perform itself.
pub fn backstop() -> BitFlags<AccessFs> {
    AccessFs::from_read(NEWEST)
        | AccessFs::RemoveFile
        | AccessFs::RemoveDir
        | AccessFs::Truncate
        | AccessFs::MakeSock
        | AccessFs::IoctlDev
}

/// Rights granted beneath a writable directory whose every change the supervisor decides:
/// read and execute, and device ioctls. Not binding a unix socket either: the supervisor
/// binds, on its own copy of the address, and only in the private temp, where nothing is
/// protected (in a writable root a socket file could take a protected name,
/// `~/.bash_profile` or `.sandgate/config.json`, that no read-only bind keeps).
pub fn decided() -> BitFlags<AccessFs> {
    backstop()
        & !(AccessFs::RemoveFile | AccessFs::RemoveDir | AccessFs::Truncate | AccessFs::MakeSock)
}

impl Writes {
    /// The rights beneath a writable directory.
    fn dir_rights(self) -> BitFlags<AccessFs> {
        match self {
            Writes::Performed => backstop(),
            Writes::Direct => writable_dir(),
            Writes::Decided => decided(),
        }
    }
}

/// Rights granted on an allowed device node: read, write, truncate (`> /dev/null` opens
/// with O_TRUNC) and ioctl (terminals need it), never execute.
fn device() -> BitFlags<AccessFs> {
    AccessFs::from_file(NEWEST) & !AccessFs::Execute
}

/// Why the ruleset could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error(transparent)]
    Path(#[from] landlock::PathFdError),
    #[error(transparent)]
    Ruleset(#[from] RulesetError),
    #[error("a writable root cannot be opened without following a symlink: {0}")]
    Root(std::io::Error),
}

/// A ruleset ready to be applied in the child.
pub struct Prepared(RulesetCreated, Writes);

/// What the sandbox may read.
pub enum Reads {
    /// Everything: a mount namespace hides what it must not see.
    Everywhere,
    /// What these rules grant ([`super::around`]).
    Around(Vec<super::around::Rule>),
}

/// Creates the ruleset for `r` and adds every rule whose path exists now, and one for
/// each of `extra` (directories writable like the roots: the landlock backend's private
/// temp).
///
/// # Errors
/// A rule path that cannot be opened, or a landlock syscall failure.
pub fn prepare(
    r: &Restrictions,
    writes: Writes,
    reads: Reads,
    extra: &[&OwnedFd],
) -> Result<Prepared, LandlockError> {
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(NEWEST))?
        .handle_access(AccessNet::from_all(NEWEST))?
        .scope(Scope::from_all(NEWEST))?
        .create()?;
    match reads {
        Reads::Everywhere => {
            ruleset = ruleset.add_rule(PathBeneath::new(
                PathFd::new("/")?,
                AccessFs::from_read(NEWEST),
            ))?;
        }
        Reads::Around(rules) => {
            for rule in rules {
                let rights = match rule.grant {
                    Grant::Listing => BitFlags::from(AccessFs::ReadDir),
                    Grant::Whole { dir: true } => AccessFs::from_read(NEWEST),
                    Grant::Whole { dir: false } => {
                        AccessFs::from_read(NEWEST) & AccessFs::from_file(NEWEST)
                    }
                };
                ruleset = ruleset.add_rule(PathBeneath::new(rule.fd, rights))?;
            }
        }
    }
    for root in &r.writable_roots {
        let fd = crate::no_symlinks::open(root).map_err(LandlockError::Root)?;
        ruleset = ruleset.add_rule(PathBeneath::new(fd, rights_for(root, writes)))?;
    }
    for dir in extra {
        ruleset = ruleset.add_rule(PathBeneath::new(*dir, writes.dir_rights()))?;
    }
    for dev in &r.devices {
        ruleset = ruleset.add_rule(PathBeneath::new(PathFd::new(dev)?, device()))?;
    }
    Ok(Prepared(ruleset, writes))
}

/// The rights of a writable root: a directory's per `writes`; a single file's are its
/// data's (no name can be made through a rule on a file).
fn rights_for(path: &Path, writes: Writes) -> BitFlags<AccessFs> {
    if path.is_dir() {
        writes.dir_rights()
    } else {
        AccessFs::from_file(NEWEST)
    }
}

impl Prepared {
    /// Adds the writable directories (`/tmp`, `/dev/shm`, the caches' overlays) and files
    /// (the caches' per-workspace copies) mounted in the child's view, and restricts the
    /// calling thread, which also sets no_new_privs. Runs in the child.
    ///
    /// # Errors
    /// Fails when the kernel refuses (the errno is all the child can report), or with
    /// `ENOSYS` when it enforced nothing at all.
    pub fn apply(self, dirs: Vec<OwnedFd>, files: Vec<OwnedFd>) -> std::io::Result<()> {
        let as_io = |e: RulesetError| std::io::Error::other(e.to_string());
        let Prepared(mut ruleset, writes) = self;
        for dir in dirs {
            ruleset = ruleset
                .add_rule(PathBeneath::new(dir, writes.dir_rights()))
                .map_err(as_io)?;
        }
        for file in files {
            ruleset = ruleset
                .add_rule(PathBeneath::new(file, AccessFs::from_file(NEWEST)))
                .map_err(as_io)?;
        }
        let status = ruleset.restrict_self().map_err(as_io)?;
        if status.ruleset == RulesetStatus::NotEnforced {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSYS));
        }
        Ok(())
    }
}
