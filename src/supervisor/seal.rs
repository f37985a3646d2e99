//! The seal rules: which names nothing in a writable area may become by the sandbox's hand,
//! decided on the exact directory and name the supervisor resolved for a call (never on
//! the path the caller wrote), for every repository and project whether or not it existed
//! when the call started.
//!
//! - **Git configuration**: a regular file named `config` or `config.worktree` is never
//!   opened for writing nor created directly. One comes into being only by a rename or a
//!   link from another name, which the supervisor performs by copying what it validated
//!   ([`Decision::CopyIn`]; see `copy`), so the file git later reads is one nothing else
//!   holds open. Neither can a symlink, a FIFO or a device bear such a name, nor an
//!   existing one be linked to another name (a second name would write it).
//! - **Hooks**: no file in a directory named `hooks` becomes executable (git runs
//!   `$GIT_DIR/hooks/NAME` only when it is): files created there lose their execute bits,
//!   a file renamed into it is copied without them, a link into or out of it is refused,
//!   no symlink can be made in it, an executable one there cannot be opened for writing,
//!   a mode change or POSIX ACL that adds an execute bit there is refused; and neither a
//!   directory nor a symlink can be renamed to `hooks` (only `mkdir` makes one, empty).
//!   A directory named as a relative `core.hooksPath`'s last component (`.githooks`) is a
//!   hooks directory too ([`also_hooks`]): git finds such a path from each working tree.
//! - **sandgate's project configuration**: no entry named `.sandgate` can be created,
//!   renamed or linked, and nothing in a directory of that name can be created, written,
//!   renamed, linked or have its mode changed.
//! - **The supervisor's staging names** (`copy::STAGING`): the sandbox may read or remove
//!   one, never write, rename or link it — so no other sandbox's supervisor can change a
//!   copy between its check and its rename.
//!
//! Names compare in ASCII case-insensitively, and without trailing dots and spaces, where
//! the directory folds case (a casefold directory on ext4 or tmpfs, FAT, exFAT, an SMB
//! share: where `CONFIG` or `config.` is found as `config`); a name outside ASCII cannot
//! be made there at all, since Unicode folding maps other characters onto these.
//! A directory's own name counts case-insensitively everywhere (a stricter reading costs
//! nothing but a refusal in a directory named `HOOKS`).
//!
//! Everything here is pure: the supervisor resolves, this decides.

use crate::denial::Sealed;

/// What a name is to the rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Name {
    /// `config` or `config.worktree`.
    Config,
    Hooks,
    /// `.sandgate`.
    Sandgate,
    /// A name the supervisor stages copies under.
    Staging,
    Other,
}

/// What a directory is to the rules, by its own name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Hooks,
    Sandgate,
    Other,
}

/// Why a call is refused; each has its marker `op`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seal {
    GitConfig,
    GitHook,
    ProjectConfig,
    /// A metadata name of a guarded git directory (see `git`).
    GitMetadata,
    /// A name outside ASCII in a directory that folds case.
    Unfoldable,
}

impl Seal {
    /// The refusal as markers give it: a name outside ASCII in a directory that folds case
    /// is reported as a write to git metadata (it could fold onto one).
    fn sealed(self) -> Sealed {
        match self {
            Seal::GitConfig => Sealed::GitConfig,
            Seal::GitHook => Sealed::GitHook,
            Seal::ProjectConfig => Sealed::ProjectConfig,
            Seal::GitMetadata | Seal::Unfoldable => Sealed::GitMetadata,
        }
    }

    /// The marker `op`.
    pub fn op(self) -> &'static str {
        self.sealed().op()
    }

    /// The marker's `message`: why only full access may do it.
    pub fn message(self) -> &'static str {
        match self {
            Seal::Unfoldable => "a directory that folds case takes only ASCII names from the sandbox (other characters could fold onto git's or sandgate's names); only full-access may create this one",
            seal => seal.sealed().message(),
        }
    }
}

/// The configuration names, compared as [`Name`] says.
const CONFIG: [&[u8]; 2] = [b"config", b"config.worktree"];

/// Classifies `name` (its trailing slashes ignored) in a directory that folds case or not.
///
/// # Errors
/// [`Seal::Unfoldable`]: a name outside ASCII in a directory that folds case.
pub fn name(name: &[u8], casefold: bool) -> Result<Name, Seal> {
    let mut name = trim_slashes(name);
    if casefold && !name.is_ascii() {
        return Err(Seal::Unfoldable);
    }
    while let (true, [rest @ .., b'.' | b' ']) = (casefold, name) {
        name = rest;
    }
    let is = |want: &[u8]| {
        if casefold {
            name.eq_ignore_ascii_case(want)
        } else {
            name == want
        }
    };
    Ok(if CONFIG.iter().any(|c| is(c)) {
        Name::Config
    } else if is(b"hooks") {
        Name::Hooks
    } else if is(b".sandgate") {
        Name::Sandgate
    } else if name.len() >= STAGING_PREFIX.len()
        && name[..STAGING_PREFIX.len()].eq_ignore_ascii_case(STAGING_PREFIX)
    {
        Name::Staging
    } else {
        Name::Other
    })
}

/// The prefix of the supervisor's staging names (see `copy`).
pub const STAGING_PREFIX: &[u8] = b".sandgate-staging.";

/// Directory names taken for `hooks` besides it: those a relative `core.hooksPath` names
/// (`policy::protected`), set once when the supervisor starts.
static ALSO_HOOKS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();

/// Sets the names [`dir`] takes for `hooks` too; only the first call counts.
pub fn also_hooks(names: Vec<Vec<u8>>) {
    let _ = ALSO_HOOKS.set(names);
}

/// Classifies a directory by its own name.
pub fn dir(name: &[u8]) -> Dir {
    let name = trim_slashes(name);
    let also = ALSO_HOOKS.get().map_or(&[][..], Vec::as_slice);
    if name.eq_ignore_ascii_case(b"hooks") || also.iter().any(|h| name.eq_ignore_ascii_case(h)) {
        Dir::Hooks
    } else if name.eq_ignore_ascii_case(b".sandgate") {
        Dir::Sandgate
    } else {
        Dir::Other
    }
}

fn trim_slashes(mut name: &[u8]) -> &[u8] {
    while let [rest @ .., b'/'] = name {
        name = rest;
    }
    name
}

/// A name in a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Here {
    pub dir: Dir,
    pub name: Name,
}

impl Here {
    /// Returns true for a name whose rules depend on what is renamed to it: `config`,
    /// `hooks`, and any name in a hooks directory. A rename to one is judged again on
    /// what arrives (`perform`), and no exchange involves one.
    pub fn sealed(self) -> bool {
        matches!(self.name, Name::Config | Name::Hooks) || self.dir == Dir::Hooks
    }
}

/// What an existing file is, as far as the rules care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file; with an execute bit or not.
    Regular {
        exec: bool,
    },
    Dir,
    Symlink,
    /// A FIFO, socket or device.
    Special,
}

/// What a create makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Made {
    /// A regular file (an open or `mknod`).
    File,
    Dir,
    Symlink,
    /// A FIFO or socket (`mknod`).
    Node,
}

/// What the supervisor does with a call the rules looked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// As the caller asked; a file it creates gets no execute bit with `no_exec`.
    Perform {
        no_exec: bool,
    },
    /// By copying the source into a fresh file of the supervisor's own at the destination
    /// (`copy`): checked as git configuration with `validate`, without execute bits with
    /// `no_exec`.
    CopyIn {
        validate: bool,
        no_exec: bool,
    },
    Refuse(Seal),
}

const PERFORM: Decision = Decision::Perform { no_exec: false };

/// A create of `made` at `here`.
pub fn create(here: Here, made: Made) -> Decision {
    match (here.dir, here.name, made) {
        (Dir::Sandgate, _, _) | (_, Name::Sandgate, _) => Decision::Refuse(Seal::ProjectConfig),
        (_, Name::Staging, _) => Decision::Refuse(Seal::GitConfig),
        (_, Name::Config, Made::File | Made::Symlink | Made::Node) => {
            Decision::Refuse(Seal::GitConfig)
        }
        (Dir::Hooks, _, Made::Symlink) | (_, Name::Hooks, Made::Symlink) => {
            Decision::Refuse(Seal::GitHook)
        }
        (Dir::Hooks, _, Made::File | Made::Node) => Decision::Perform { no_exec: true },
        _ => PERFORM,
    }
}

/// An existing `kind` at `here` opened for writing (or truncated by the open).
pub fn write(here: Here, kind: Kind) -> Decision {
    match (here.dir, here.name, kind) {
        // Opening a directory to write fails with EISDIR: the kernel says so.
        (_, _, Kind::Dir) => PERFORM,
        (Dir::Sandgate, _, _) => Decision::Refuse(Seal::ProjectConfig),
        (_, Name::Config | Name::Staging, _) => Decision::Refuse(Seal::GitConfig),
        (Dir::Hooks, _, Kind::Regular { exec: true }) => Decision::Refuse(Seal::GitHook),
        _ => PERFORM,
    }
}

/// A rename of `kind` from `from` to `to`.
pub fn rename(from: Here, kind: Kind, to: Here) -> Decision {
    if let Some(seal) = untouchable(from).or(untouchable(to)) {
        return Decision::Refuse(seal);
    }
    match (to.dir, to.name, kind) {
        (_, Name::Hooks, Kind::Dir | Kind::Symlink) | (Dir::Hooks, _, Kind::Symlink) => {
            Decision::Refuse(Seal::GitHook)
        }
        (_, Name::Config, Kind::Symlink | Kind::Special) => Decision::Refuse(Seal::GitConfig),
        (dir, name, Kind::Regular { .. }) if dir == Dir::Hooks || name == Name::Config => {
            Decision::CopyIn {
                validate: name == Name::Config,
                no_exec: dir == Dir::Hooks,
            }
        }
        _ => PERFORM,
    }
}

/// `RENAME_EXCHANGE` of `a` (a `kind_a`) and `b` (a `kind_b`): each moves to the other's
/// name, so both must be plain renames.
pub fn exchange(a: Here, kind_a: Kind, b: Here, kind_b: Kind) -> Decision {
    // Two names change at once by name alone: nothing can be judged again on arrival.
    if a.sealed() || b.sealed() {
        let seal = if a.name == Name::Config || b.name == Name::Config {
            Seal::GitConfig
        } else {
            Seal::GitHook
        };
        return untouchable(a)
            .or(untouchable(b))
            .map_or(Decision::Refuse(seal), Decision::Refuse);
    }
    for decision in [rename(a, kind_a, b), rename(b, kind_b, a)] {
        match decision {
            Decision::Perform { .. } => {}
            Decision::Refuse(seal) => return Decision::Refuse(seal),
            Decision::CopyIn { validate, .. } => {
                let seal = if validate {
                    Seal::GitConfig
                } else {
                    Seal::GitHook
                };
                return Decision::Refuse(seal);
            }
        }
    }
    PERFORM
}

/// A hard link of `kind` at `from` to the new name `to`.
pub fn link(from: Here, kind: Kind, to: Here) -> Decision {
    if let Some(seal) = untouchable(from).or(untouchable(to)) {
        return Decision::Refuse(seal);
    }
    match (from, kind, to) {
        // A second name of a hook or of a configuration file would write it.
        (
            Here {
                dir: Dir::Hooks, ..
            },
            Kind::Regular { .. },
            _,
        )
        | (
            _,
            _,
            Here {
                dir: Dir::Hooks, ..
            },
        )
        | (
            _,
            Kind::Symlink,
            Here {
                name: Name::Hooks, ..
            },
        ) => Decision::Refuse(Seal::GitHook),
        (
            Here {
                name: Name::Config, ..
            },
            Kind::Regular { .. },
            _,
        ) => Decision::Refuse(Seal::GitConfig),
        (
            _,
            Kind::Regular { .. },
            Here {
                name: Name::Config, ..
            },
        ) => Decision::CopyIn {
            validate: true,
            no_exec: false,
        },
        (
            _,
            _,
            Here {
                name: Name::Config, ..
            },
        ) => Decision::Refuse(Seal::GitConfig),
        _ => PERFORM,
    }
}

/// A change of `kind`'s mode at `here` that `adds_exec` or not.
pub fn chmod(here: Here, kind: Kind, adds_exec: bool) -> Result<(), Seal> {
    match (here.dir, kind) {
        (Dir::Sandgate, _) => Err(Seal::ProjectConfig),
        (Dir::Hooks, Kind::Regular { .. }) if adds_exec => Err(Seal::GitHook),
        _ => Ok(()),
    }
}

/// Setting the extended attribute `attr` to `value` on a `kind` at `here`: a POSIX ACL
/// that grants execute, on a file in a hooks directory that has no execute bit, or as the
/// default of a hooks directory, is refused (an ACL like the file's own mode bits — what
/// `install` and `cp -p` write — is fine).
pub fn set_xattr(here: Here, kind: Kind, attr: &[u8], value: &[u8]) -> Result<(), Seal> {
    if here.dir == Dir::Sandgate {
        return Err(Seal::ProjectConfig);
    }
    if !attr.starts_with(b"system.posix_acl_") || !acl_grants_exec(value) {
        return Ok(());
    }
    match (here, kind) {
        (
            Here {
                dir: Dir::Hooks, ..
            },
            Kind::Regular { exec: false } | Kind::Dir,
        )
        | (
            Here {
                name: Name::Hooks, ..
            },
            Kind::Dir,
        ) => Err(Seal::GitHook),
        _ => Ok(()),
    }
}

/// Returns true when a POSIX ACL in the kernel's xattr format (a version word, then
/// entries of tag, permissions and id) grants execute in any entry; one it cannot read
/// counts as granting it.
fn acl_grants_exec(value: &[u8]) -> bool {
    const HEADER: usize = 4;
    const ENTRY: usize = 8;
    const EXECUTE: u16 = 1;
    const VERSION: [u8; 4] = 2u32.to_le_bytes();
    if value.len() < HEADER || (value.len() - HEADER) % ENTRY != 0 || value[..HEADER] != VERSION {
        return true;
    }
    value[HEADER..]
        .chunks_exact(ENTRY)
        .any(|entry| u16::from_le_bytes([entry[2], entry[3]]) & EXECUTE != 0)
}

/// The seal of a name that is never renamed or linked, from or to.
fn untouchable(here: Here) -> Option<Seal> {
    match here {
        Here {
            dir: Dir::Sandgate, ..
        }
        | Here {
            name: Name::Sandgate,
            ..
        } => Some(Seal::ProjectConfig),
        Here {
            name: Name::Staging,
            ..
        } => Some(Seal::GitConfig),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_exchange_involves_a_name_whose_rules_depend_on_what_arrives() {
        let plain = Here {
            dir: Dir::Other,
            name: Name::Other,
        };
        let in_hooks = Here {
            dir: Dir::Hooks,
            name: Name::Other,
        };
        let config = Here {
            dir: Dir::Other,
            name: Name::Config,
        };
        let file = Kind::Regular { exec: false };
        assert_eq!(exchange(plain, file, plain, file), PERFORM);
        assert_eq!(
            exchange(plain, Kind::Dir, in_hooks, file),
            Decision::Refuse(Seal::GitHook)
        );
        assert_eq!(
            exchange(config, Kind::Dir, plain, Kind::Dir),
            Decision::Refuse(Seal::GitConfig)
        );
        assert!(in_hooks.sealed() && config.sealed() && !plain.sealed());
    }

    fn at(dir: Dir, name: Name) -> Here {
        Here { dir, name }
    }

    const FILE: Kind = Kind::Regular { exec: false };
    const EXEC: Kind = Kind::Regular { exec: true };

    #[test]
    fn names_are_classified_as_git_and_sandgate_read_them() {
        assert_eq!(name(b"config", false), Ok(Name::Config));
        assert_eq!(name(b"config.worktree", false), Ok(Name::Config));
        assert_eq!(name(b"CONFIG", false), Ok(Name::Other));
        assert_eq!(name(b"CONFIG", true), Ok(Name::Config));
        assert_eq!(name(b"Hooks", true), Ok(Name::Hooks));
        assert_eq!(name(b".sandgate/", false), Ok(Name::Sandgate));
        assert_eq!(name(b"config.lock", false), Ok(Name::Other));
        assert_eq!(name(b".sandgate-staging.1f", false), Ok(Name::Staging));
        assert_eq!(name("hoo\u{212a}s".as_bytes(), false), Ok(Name::Other));
        assert_eq!(name("hoo\u{212a}s".as_bytes(), true), Err(Seal::Unfoldable));
        assert_eq!(name(b"Config. .", true), Ok(Name::Config));
        assert_eq!(name(b"config.", false), Ok(Name::Other));
        assert_eq!(dir(b"HOOKS"), Dir::Hooks);
        assert_eq!(dir(b".sandgate"), Dir::Sandgate);
        assert_eq!(dir(b"src"), Dir::Other);
    }

    #[test]
    fn configuration_comes_only_by_a_checked_copy() {
        let config = at(Dir::Other, Name::Config);
        let lock = at(Dir::Other, Name::Other);
        assert_eq!(
            create(config, Made::File),
            Decision::Refuse(Seal::GitConfig)
        );
        assert_eq!(
            create(config, Made::Symlink),
            Decision::Refuse(Seal::GitConfig)
        );
        assert_eq!(
            create(config, Made::Node),
            Decision::Refuse(Seal::GitConfig)
        );
        assert_eq!(create(config, Made::Dir), PERFORM);
        assert_eq!(write(config, FILE), Decision::Refuse(Seal::GitConfig));
        assert_eq!(write(config, Kind::Dir), PERFORM);
        let checked = Decision::CopyIn {
            validate: true,
            no_exec: false,
        };
        assert_eq!(rename(lock, FILE, config), checked);
        assert_eq!(link(lock, FILE, config), checked);
        assert_eq!(
            rename(lock, Kind::Symlink, config),
            Decision::Refuse(Seal::GitConfig)
        );
        assert_eq!(
            link(lock, Kind::Symlink, config),
            Decision::Refuse(Seal::GitConfig)
        );
        assert_eq!(rename(lock, Kind::Dir, config), PERFORM);
        // Moved away: fine; a second name for it: refused.
        assert_eq!(rename(config, FILE, lock), PERFORM);
        assert_eq!(link(config, FILE, lock), Decision::Refuse(Seal::GitConfig));
        assert_eq!(
            exchange(lock, FILE, config, FILE),
            Decision::Refuse(Seal::GitConfig)
        );
        assert_eq!(exchange(lock, FILE, lock, Kind::Dir), PERFORM);
    }

    #[test]
    fn nothing_in_hooks_becomes_executable() {
        let hook = at(Dir::Hooks, Name::Other);
        let elsewhere = at(Dir::Other, Name::Other);
        let hooks = at(Dir::Other, Name::Hooks);
        assert_eq!(
            create(hook, Made::File),
            Decision::Perform { no_exec: true }
        );
        assert_eq!(
            create(hook, Made::Node),
            Decision::Perform { no_exec: true }
        );
        assert_eq!(create(hook, Made::Dir), PERFORM);
        assert_eq!(create(hook, Made::Symlink), Decision::Refuse(Seal::GitHook));
        assert_eq!(
            create(hooks, Made::Symlink),
            Decision::Refuse(Seal::GitHook)
        );
        assert_eq!(create(hooks, Made::Dir), PERFORM);
        assert_eq!(write(hook, EXEC), Decision::Refuse(Seal::GitHook));
        assert_eq!(write(hook, FILE), PERFORM);
        assert_eq!(
            rename(elsewhere, EXEC, hook),
            Decision::CopyIn {
                validate: false,
                no_exec: true
            }
        );
        assert_eq!(
            rename(elsewhere, Kind::Symlink, hook),
            Decision::Refuse(Seal::GitHook)
        );
        assert_eq!(
            rename(elsewhere, Kind::Dir, hooks),
            Decision::Refuse(Seal::GitHook)
        );
        assert_eq!(
            rename(elsewhere, Kind::Symlink, hooks),
            Decision::Refuse(Seal::GitHook)
        );
        assert_eq!(rename(elsewhere, FILE, hooks), PERFORM);
        assert_eq!(rename(hook, EXEC, elsewhere), PERFORM);
        assert_eq!(link(elsewhere, FILE, hook), Decision::Refuse(Seal::GitHook));
        assert_eq!(link(hook, FILE, elsewhere), Decision::Refuse(Seal::GitHook));
        assert_eq!(chmod(hook, FILE, true), Err(Seal::GitHook));
        assert_eq!(chmod(hook, FILE, false), Ok(()));
        assert_eq!(chmod(hook, Kind::Dir, true), Ok(()));
        assert_eq!(chmod(elsewhere, FILE, true), Ok(()));
        let acl = b"system.posix_acl_access";
        // version 2; user::rwx, group::r--, other::r--, and the same without execute.
        let entries = |owner: u8| {
            let mut v = vec![2, 0, 0, 0];
            for (tag, perm) in [(1u8, owner), (4, 4), (0x20, 4)] {
                v.extend_from_slice(&[tag, 0, perm, 0, 0xff, 0xff, 0xff, 0xff]);
            }
            v
        };
        let (exec, plain) = (entries(7), entries(6));
        assert_eq!(set_xattr(hook, FILE, acl, &exec), Err(Seal::GitHook));
        assert_eq!(set_xattr(hook, FILE, acl, &plain), Ok(()));
        assert_eq!(set_xattr(hook, FILE, acl, b"junk"), Err(Seal::GitHook));
        assert_eq!(set_xattr(hook, FILE, acl, b"junk!"), Err(Seal::GitHook));
        assert_eq!(set_xattr(hook, EXEC, acl, &exec), Ok(()));
        let default = b"system.posix_acl_default";
        assert_eq!(
            set_xattr(hooks, Kind::Dir, default, &exec),
            Err(Seal::GitHook)
        );
        assert_eq!(set_xattr(hook, FILE, b"user.note", &exec), Ok(()));
        assert_eq!(set_xattr(elsewhere, FILE, acl, &exec), Ok(()));
        assert_eq!(
            exchange(elsewhere, Kind::Dir, hooks, Kind::Dir),
            Decision::Refuse(Seal::GitHook)
        );
    }

    #[test]
    fn sandgate_s_project_configuration_is_out_of_reach() {
        let entry = at(Dir::Other, Name::Sandgate);
        let inside = at(Dir::Sandgate, Name::Other);
        let elsewhere = at(Dir::Other, Name::Other);
        for made in [Made::File, Made::Dir, Made::Symlink, Made::Node] {
            assert_eq!(create(entry, made), Decision::Refuse(Seal::ProjectConfig));
            assert_eq!(create(inside, made), Decision::Refuse(Seal::ProjectConfig));
        }
        assert_eq!(write(inside, FILE), Decision::Refuse(Seal::ProjectConfig));
        assert_eq!(
            rename(elsewhere, Kind::Dir, entry),
            Decision::Refuse(Seal::ProjectConfig)
        );
        assert_eq!(
            rename(entry, Kind::Dir, elsewhere),
            Decision::Refuse(Seal::ProjectConfig)
        );
        assert_eq!(
            rename(inside, FILE, elsewhere),
            Decision::Refuse(Seal::ProjectConfig)
        );
        assert_eq!(
            link(elsewhere, FILE, inside),
            Decision::Refuse(Seal::ProjectConfig)
        );
        assert_eq!(chmod(inside, FILE, false), Err(Seal::ProjectConfig));
    }

    #[test]
    fn staging_names_are_the_supervisor_s_alone() {
        let staged = at(Dir::Other, Name::Staging);
        let other = at(Dir::Other, Name::Other);
        assert!(matches!(create(staged, Made::File), Decision::Refuse(_)));
        assert!(matches!(write(staged, FILE), Decision::Refuse(_)));
        assert!(matches!(rename(other, FILE, staged), Decision::Refuse(_)));
        assert!(matches!(rename(staged, FILE, other), Decision::Refuse(_)));
        assert!(matches!(link(staged, FILE, other), Decision::Refuse(_)));
    }
}
