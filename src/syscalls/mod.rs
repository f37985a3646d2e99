//! The one table of the system calls sandgate treats specially: one row per call, and
//! everything else derived from it — the seccomp program (`sandbox::seccomp`), the
//! supervisor's dispatch, where the observer finds a call's paths, and the names and `op`s
//! of the markers. Adding a call is one row in `table.rs`; the tests below fail for a row
//! some consumer does not handle.
//!
//! Four kinds of row ([`Rule`]): calls a restricted profile refuses (the deny list), calls
//! that can change the filesystem (sent to the supervisor, which performs or observes
//! them), calls answered `ENOSYS` because their arguments lie in memory the filter cannot
//! read, and the two calls the supervisor always mediates (`connect`, `umask`).

pub mod requests;
mod table;

pub use requests::{
    ioctl_op, CLONE_NAMESPACE_FLAGS, FCNTL_COMMANDS, FILE_ATTRIBUTE_IOCTLS, PRCTL_OPTIONS,
    SESSION_IOCTLS, TERMINAL_IOCTLS, TERMINAL_IOCTL_RANGES,
};

// Calls newer than the libc crate's names, with the same number on every architecture
// of the unified syscall table: extended attributes by dirfd and path (Linux 6.13), file
// attributes by dirfd and path (6.17), and `open_tree_attr` (6.15).
pub const SYS_SETXATTRAT: libc::c_long = 463;
pub const SYS_REMOVEXATTRAT: libc::c_long = 466;
pub const SYS_FILE_SETATTR: libc::c_long = 469;
pub const SYS_OPEN_TREE_ATTR: libc::c_long = 467;

/// One system call and how sandgate treats it.
#[derive(Clone, Copy, Debug)]
pub struct Syscall {
    pub nr: libc::c_long,
    /// Its name, as markers give it.
    pub name: &'static str,
    pub rule: Rule,
}

/// What sandgate does with a call.
#[derive(Clone, Copy, Debug)]
pub enum Rule {
    /// Refused by a restricted profile when its arguments match `args`; `op` is what its
    /// markers call it (an `ioctl`'s depends on the request: see [`Syscall::op`]).
    Denied { op: &'static str, args: Args },
    /// It can change the filesystem: sent to the supervisor (see [`PathCall`]).
    Path(PathCall),
    /// Answered `ENOSYS`: its arguments lie in memory the filter cannot read, and the
    /// C library falls back to an older call whose arguments it can (`clone3` → `clone`,
    /// `openat2` → `openat`).
    Unreadable,
    /// `connect`: performed by the supervisor on its own copy of the address.
    Connect,
    /// `bind`, without namespaces: a unix name bound on the supervisor's own copy of the
    /// address, where the sandbox may make one; never an abstract name, which could be a
    /// host daemon's (with namespaces the sandbox's network namespace holds its own).
    Bind,
    /// `umask`: seen by the supervisor, which keeps each caller's for the files it creates.
    Umask,
}

/// How a deny-list row looks at its call's arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Args {
    /// Refused whatever the arguments.
    Any,
    /// Refused unless argument `n`, a `pid_t`, is 0 (the caller itself). Only its low 32
    /// bits are compared: the kernel truncates the register to `int`, so high garbage bits
    /// neither make a host pid pass nor turn 0 into a refusal.
    OtherPid(u8),
    /// `setpriority`/`ioprio_set(which, who, …)`: refused unless `which` (an `int`) is
    /// the given "a process" value and `who` (an `int`) is 0. A process group or user
    /// reaches every host process of that group or uid.
    OtherThan { which: u64 },
    /// `socket`/`socketpair`: every family but `AF_UNIX`, every unix type but stream and
    /// seqpacket.
    Socket,
    /// `socket` when the sandbox has a proxy: as [`Args::Socket`], and TCP (IPv4 and IPv6:
    /// clients probe for IPv6 support) and `NETLINK_ROUTE` (the interface list that
    /// `getaddrinfo` and `os.networkInterfaces()` read) too. All of them live in the
    /// sandbox's own network namespace, which holds nothing but the proxy's listener, and
    /// every connect still goes to the supervisor. Never in the table: the filter chooses
    /// it for `socket` when there is a proxy.
    SocketOrTcp,
    /// `clone` with a namespace flag ([`CLONE_NAMESPACE_FLAGS`]).
    Clone,
    /// `ioctl` with a request of [`TERMINAL_IOCTLS`] or [`FILE_ATTRIBUTE_IOCTLS`], or in
    /// [`TERMINAL_IOCTL_RANGES`].
    Ioctl,
    /// `prctl` with an option of [`PRCTL_OPTIONS`].
    Prctl,
    /// `fcntl` with a command of [`FCNTL_COMMANDS`].
    Fcntl,
    /// Refused whatever the arguments, but only while the sandbox can reach a terminal.
    WhileTerminal,
    /// Refused whatever the arguments, but only without namespaces: SysV IPC and POSIX
    /// message queues, which then reach the host's objects (with namespaces the sandbox's
    /// IPC namespace holds its own).
    WithoutNamespaces,
}

/// A call that can change the filesystem by path (or, for `fchmod` and `fsetxattr`,
/// through a file descriptor).
#[derive(Clone, Copy, Debug)]
pub struct PathCall {
    /// What it changes, which names its markers.
    pub effect: Effect,
    pub need: Need,
    /// Which of its calls the filter sends.
    pub when: When,
    /// Where the mode it sets lies, if it sets one: refused with a set-id bit in it.
    pub sets_mode: Option<SetsMode>,
    /// Where its paths lie in its arguments; none for a call on a file descriptor.
    pub paths: &'static [Slot],
}

/// Why a path call goes to the supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// It creates, renames, links, opens for writing or changes a mode or an extended
    /// attribute: landlock refuses every such call in a writable area, so the supervisor
    /// performs it there, after its checks. Sent whenever there is a listener.
    Performed,
    /// It removes, truncates or changes ownership or times: the kernel decides it alone,
    /// and the supervisor only reports a refusal (or, at a guarded git directory's
    /// read-only top level, performs what git needs). Sent when observing or guarding git
    /// directories — and always without a mount namespace, where the supervisor decides.
    Observed,
    /// It changes ownership or an attribute through a descriptor: with a mount namespace
    /// the read-only view refuses it outside the writable areas; without one, only the
    /// supervisor can. Sent only then.
    Decided,
}

/// Which of a path call's invocations the filter sends to the supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum When {
    Always,
    /// Opens for writing: the flags in argument `flags` hold a bit of `WRITE_FLAGS`.
    WriteOpen {
        flags: u32,
    },
    /// Mode changes: without observation (and always for a call on a file descriptor,
    /// which names no path to report) only a mode with an execute bit — the one change the
    /// supervisor checks; the kernel decides the rest alone, since landlock does not
    /// govern modes.
    ModeChange {
        mode: u32,
        by_fd: bool,
    },
    /// Only when pointer argument `ptr` is not NULL: `utimensat(dirfd, NULL, …)` acts on
    /// the fd's own file, no path.
    WithPath {
        ptr: u32,
    },
}

/// Where a call's mode is, and for opens its flags (an open sets a mode only when it
/// creates).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SetsMode {
    pub mode: u32,
    pub flags: Option<u32>,
}

/// One path among a call's arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The directory a relative path starts from.
    pub dirfd: Dirfd,
    /// The argument holding the path's address.
    pub path: u8,
    /// Whether a symlink in its last place is followed.
    pub follow: Follow,
}

/// Where a relative path starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dirfd {
    Cwd,
    Arg(u8),
}

/// Whether a call follows a symlink in its path's last place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Follow {
    Never,
    Always,
    /// Unless argument `arg` has `bit` (`AT_SYMLINK_NOFOLLOW`, `IN_DONT_FOLLOW`).
    Unless {
        arg: u8,
        bit: u64,
    },
    /// Only if argument `arg` has `bit` (`linkat`'s `AT_SYMLINK_FOLLOW`).
    If {
        arg: u8,
        bit: u64,
    },
    /// An open with flags in argument `flags`: unless `O_NOFOLLOW`, or `O_CREAT` with
    /// `O_EXCL` (which refuses a symlink where it would create).
    Open {
        flags: u8,
    },
}

/// What a path call changes, which is what its markers call it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    Open,
    Create,
    Mknod,
    Remove,
    Rename,
    Link,
    Chmod,
    Chown,
    Utimes,
    Truncate,
    Xattr,
    Watch,
}

impl Effect {
    /// The marker `op`. (An open is reported as `write` or `create`, by whether its
    /// target exists.)
    pub fn op(self) -> &'static str {
        match self {
            Effect::Open => "open",
            Effect::Create => "create",
            Effect::Mknod => "mknod",
            Effect::Remove => "remove",
            Effect::Rename => "rename",
            Effect::Link => "link",
            Effect::Chmod => "chmod",
            Effect::Chown => "chown",
            Effect::Utimes => "utimes",
            Effect::Truncate => "truncate",
            Effect::Xattr => "xattr",
            Effect::Watch => "watch",
        }
    }

    /// True when landlock governs it: it refuses it wherever no rule grants it (creates,
    /// removals, renames, links, write opens, truncation). Modes, owners, times,
    /// attributes and watches are not landlock's.
    pub fn landlock_governs(self) -> bool {
        matches!(
            self,
            Effect::Open
                | Effect::Create
                | Effect::Mknod
                | Effect::Remove
                | Effect::Rename
                | Effect::Link
                | Effect::Truncate
        )
    }

    /// True when it changes the object its path names (its data or attributes); false when
    /// it changes the name in its directory. (An open of an existing file changes the
    /// object, of a missing one the directory: the caller tells.)
    pub fn acts_on_object(self) -> bool {
        matches!(
            self,
            Effect::Chmod | Effect::Chown | Effect::Utimes | Effect::Xattr | Effect::Truncate
        )
    }
}

/// Open flags that make an open one the supervisor performs: it can change or create the
/// file.
pub const OPEN_WRITES: i32 = libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC;

/// A path as one call names it: where it starts, where it lies in the caller's memory,
/// and whether a symlink in its last place is followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathAt {
    pub dirfd: i32,
    pub ptr: u64,
    pub follow: bool,
}

impl Syscall {
    /// The marker `op` of a call refused or reported as this one, with `args`.
    pub fn op(&self, args: &[u64; 6]) -> &'static str {
        match self.rule {
            Rule::Denied { .. } if self.nr == libc::SYS_ioctl => ioctl_op(args[1]),
            Rule::Denied { op, .. } => op,
            Rule::Path(call) => call.effect.op(),
            Rule::Connect | Rule::Bind => "network",
            Rule::Unreadable | Rule::Umask => "syscall",
        }
    }
}

impl PathCall {
    /// The paths a call with `args` names, as the kernel reads them; empty for a form that
    /// names none the supervisor reports (an open for reading, a call on a descriptor).
    pub fn paths(&self, args: &[u64; 6]) -> Vec<PathAt> {
        let arg = |n: u8| args[usize::from(n)];
        if let When::WriteOpen { flags } = self.when {
            if args[flags as usize] as i32 & OPEN_WRITES == 0 {
                return Vec::new();
            }
        }
        self.paths
            .iter()
            .map(|slot| PathAt {
                dirfd: match slot.dirfd {
                    Dirfd::Cwd => libc::AT_FDCWD,
                    Dirfd::Arg(n) => arg(n) as i32,
                },
                ptr: arg(slot.path),
                follow: match slot.follow {
                    Follow::Never => false,
                    Follow::Always => true,
                    Follow::Unless { arg: n, bit } => arg(n) & bit == 0,
                    Follow::If { arg: n, bit } => arg(n) & bit != 0,
                    Follow::Open { flags } => {
                        let flags = arg(flags) as i32;
                        let exclusive = flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0;
                        flags & libc::O_NOFOLLOW == 0 && !exclusive
                    }
                },
            })
            .collect()
    }

    /// True for an open with `args` that creates only if nothing is there (`O_CREAT` with
    /// `O_EXCL`): it fails with `EEXIST` before any write check.
    pub fn exclusive_create(&self, args: &[u64; 6]) -> bool {
        match self.when {
            When::WriteOpen { flags } => {
                let flags = args[flags as usize] as i32;
                flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0
            }
            _ => false,
        }
    }
}

/// Every row of the table.
pub fn all() -> impl Iterator<Item = &'static Syscall> {
    table::DENY_LIST
        .iter()
        .chain(table::PATH_CALLS)
        .chain(table::PATH_CALLS_LEGACY)
        .chain(table::MEDIATED)
}

/// The row of call `nr`, if sandgate treats it specially.
pub fn lookup(nr: i64) -> Option<&'static Syscall> {
    all().find(|s| s.nr == nr)
}

/// The path call `nr`, if it is one.
pub fn path_call(nr: i64) -> Option<&'static PathCall> {
    match lookup(nr)?.rule {
        Rule::Path(ref call) => Some(call),
        _ => None,
    }
}

/// The name of call `nr` for markers: every call the filter sends to the supervisor has
/// one.
pub fn name(nr: i64) -> &'static str {
    lookup(nr).map_or("unknown", |s| s.name)
}

#[cfg(test)]
pub mod testing;
#[cfg(test)]
mod tests;
