//! The seccomp layer: the filter built from the syscall table (`crate::syscalls`).
//!
//! One filter, built before forking. It kills a foreign-architecture call, refuses x32
//! calls (which would dodge the syscall numbers below), answers the calls whose arguments
//! it cannot read with `ENOSYS` (`clone3`: glibc falls back to `clone`, whose flags are
//! checked), sends every `connect` to the supervisor, and every call the supervisor
//! performs in the writable areas (write opens, creates, renames, links, mode changes with
//! an execute bit, extended attributes: `Need::Performed` in the table) — with
//! [`PathCalls::PerformedAndObserved`] every other call that could change the filesystem
//! by path too; and it refuses the table's **deny list**: calls no restricted command
//! needs and that widen what it can reach — io_uring (it bypasses seccomp for the
//! operations it queues), ptrace and process_vm_*, bpf, perf_event_open, userfaultfd,
//! keyrings, the mount family, namespace creation, kexec and modules, every call that
//! would act on a process outside the sandbox, the terminal requests that take over or
//! redirect a terminal, every socket family but `AF_UNIX`, and unix *datagram* sockets
//! (see below) — refused with `EPERM`, or, when observing, handed to the supervisor,
//! which records a marker and refuses with the same `EPERM`.
//!
//! It must be one filter: the kernel lets a process tree hold one listener, and a
//! notification returned by a filter without one fails with ENOSYS.
//!
//! Its shape (see [`program`]) is chosen for what the kernel pays: the filter is verified
//! and JIT-compiled at every install, so its length is paid by every sandgate call, and it
//! runs on every syscall whose answer depends on the arguments (the kernel caches the
//! others, whose answer it can compute from the number alone). So the syscall number goes
//! down a balanced search tree to a short block holding only that call's checks.
//!
//! Why unix datagram sockets are refused: a datagram socket can send to any pathname with
//! `sendto`/`sendmsg`, and for `sendmsg` the address sits inside a `msghdr` that BPF cannot
//! read and that another thread can rewrite after the supervisor looked at it. Stream and
//! seqpacket sockets ignore or refuse a send address, so mediating `connect` — where the
//! supervisor connects on its own copy of the address — covers every way to reach a
//! pathname socket.

mod bpf;
#[cfg(test)]
mod linear;

use std::collections::BTreeMap;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;

use bpf::{Asm, Dest, Segment};

use crate::sys;
use crate::syscalls::{
    self, Args, Need, PathCall, Rule, SetsMode, When, CLONE_NAMESPACE_FLAGS, FCNTL_COMMANDS,
    FILE_ATTRIBUTE_IOCTLS, PRCTL_OPTIONS, SESSION_IOCTLS, TERMINAL_IOCTLS, TERMINAL_IOCTL_RANGES,
};

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// `__X32_SYSCALL_BIT`: x32 calls share x86_64's audit arch but not its numbers.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const SOCK_TYPE_MASK: u64 = 0xf;
const SOCK_STREAM: u64 = libc::SOCK_STREAM as u64;
const SOCK_SEQPACKET: u64 = libc::SOCK_SEQPACKET as u64;

/// Which sockets the sandbox may create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sockets {
    /// Unix stream and seqpacket sockets only.
    Unix,
    /// Those, TCP and route netlink sockets, for the proxy in the sandbox's own network
    /// namespace (see [`Args::SocketOrTcp`]).
    UnixAndTcp,
}

impl Sockets {
    /// The argument rule of deny-list call `nr`, whose row says `args`, under this choice.
    fn args_of(self, nr: libc::c_long, args: Args) -> Args {
        match self {
            Sockets::UnixAndTcp if nr == libc::SYS_socket => Args::SocketOrTcp,
            _ => args,
        }
    }
}

/// Whether the sandbox can reach a terminal: one behind its stdin, stdout or stderr, or a
/// controlling terminal it can open as `/dev/tty`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Terminal {
    Reachable,
    /// Nothing to take over (a CI job, an agent without a pty): leaving the session
    /// (`setsid`, which git's background maintenance and daemons use) stays allowed.
    Unreachable,
}

impl Terminal {
    /// Looks at this process, which the sandbox inherits from.
    pub fn detect() -> Terminal {
        let on_stdio = (0..3).any(crate::sys::is_terminal);
        let controlling = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOCTTY)
            .open("/dev/tty")
            .is_ok();
        if on_stdio || controlling {
            Terminal::Reachable
        } else {
            Terminal::Unreachable
        }
    }
}

/// The errno the deny list answers with.
pub const DENY_ERRNO: i32 = libc::EPERM;

/// The error for a filter that cannot be assembled (a build defect, never caused by input).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the seccomp filter: {0}")]
pub struct BuildError(String);

/// The setuid and setgid bits. A capability-less root inside may still set them on files it
/// owns, and a root-owned setuid file left in the workspace runs as root for whoever on the
/// host executes it later; a setgid one runs with the group. No restricted call sets them
/// (`openat2`, whose mode lies in memory, is answered `ENOSYS`; `mkdir` ignores them).
const SET_ID_BITS: u32 = libc::S_ISUID | libc::S_ISGID;

/// An open creates a file, and so applies its mode, when it has `O_CREAT` or all of
/// `O_TMPFILE`, whose value includes `O_DIRECTORY`: a plain directory open is no create,
/// and its mode register holds whatever the caller left there.
const CREATE: u32 = libc::O_CREAT as u32;
const TMPFILE: u32 = libc::O_TMPFILE as u32;

/// Open flags that make an open a write: it can change or create the file. `O_TMPFILE`
/// counts by its own bit (the rest of its value is `O_DIRECTORY`, which a plain directory
/// open has too; without that bit the kernel refuses it anyway).
const WRITE_FLAGS: u32 = (libc::O_WRONLY
    | libc::O_RDWR
    | libc::O_CREAT
    | libc::O_TRUNC
    | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u32;

/// The execute bits of a mode: the change of mode the supervisor checks (see
/// [`When::ModeChange`]).
const EXEC_BITS: u32 = 0o111;

/// The seccomp programs of one call, ready to install.
pub struct Prepared {
    /// The filter installed with the listener (user notification available).
    notifying: Vec<libc::sock_filter>,
    /// The filter refusing by errno, `connect` included: no listener to be had.
    refusing: Vec<libc::sock_filter>,
    notify: bool,
}

/// Which calls that can change the filesystem by path go to the supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathCalls {
    /// None: there is no listener (the refusing filter), or nothing performs them.
    ToKernel,
    /// The calls the supervisor performs ([`Need::Performed`]), and `umask`, whose value
    /// the supervisor keeps for the files it creates.
    Performed,
    /// Those and every other path call ([`Need::Observed`]): to report refusals, or to
    /// perform what git needs at a guarded git directory's read-only top level.
    PerformedAndObserved,
    /// Every path call and every form of it, a mode change without an execute bit and a
    /// call on a descriptor included: without a mount namespace nothing but the supervisor
    /// refuses what landlock does not govern (modes, owners, times, attributes).
    Decided,
}

impl PathCalls {
    /// When `call` goes to the supervisor under this choice; `None`: never.
    fn route(self, call: &PathCall) -> Option<PathRoute> {
        match (self, call.need) {
            (PathCalls::ToKernel, _)
            | (PathCalls::Performed, Need::Observed)
            | (PathCalls::Performed | PathCalls::PerformedAndObserved, Need::Decided) => None,
            _ => Some(match call.when {
                When::Always => PathRoute::Always,
                When::WriteOpen { flags } => PathRoute::WriteOpen(flags),
                When::ModeChange { .. } if self == PathCalls::Decided => PathRoute::Always,
                When::ModeChange { mode, by_fd } if by_fd || self == PathCalls::Performed => {
                    PathRoute::ExecMode(mode)
                }
                When::ModeChange { .. } => PathRoute::Always,
                When::WithPath { .. } if self == PathCalls::Decided => PathRoute::Always,
                When::WithPath { ptr } => PathRoute::WithPath(ptr),
            }),
        }
    }
}

/// Builds the programs. `notify`: the kernel supports user notification; `observe`:
/// deny-list refusals go to the supervisor so it can report them; `paths`: where the
/// path-changing calls go; `terminal`: whether leaving the session is refused too.
///
/// # Errors
/// Only on a filter the assembler refuses, which is a build defect.
pub fn prepare(
    notify: bool,
    observe: bool,
    paths: PathCalls,
    terminal: Terminal,
    sockets: Sockets,
) -> Result<Prepared, BuildError> {
    let notifying = program(Answers::notifying(observe), paths, terminal, sockets)?;
    // Without a listener nothing performs the connect to the proxy: no TCP sockets either.
    let refusing = program(
        Answers::refusing(),
        PathCalls::ToKernel,
        terminal,
        Sockets::Unix,
    )?;
    Ok(Prepared {
        notifying,
        refusing,
        notify,
    })
}

/// What the filter answers where the answer depends on who listens.
#[derive(Clone, Copy, Debug)]
struct Answers {
    /// For `connect`.
    connect: u32,
    /// For a call of the deny list.
    deny: u32,
}

impl Answers {
    /// With the listener: `connect` goes to the supervisor, and so do deny-list calls when
    /// observing (it records a marker, then refuses with the same errno).
    fn notifying(observe: bool) -> Answers {
        Answers {
            connect: libc::SECCOMP_RET_USER_NOTIF,
            deny: if observe {
                libc::SECCOMP_RET_USER_NOTIF
            } else {
                EPERM
            },
        }
    }

    /// Without one: `connect` is refused outright.
    fn refusing() -> Answers {
        Answers {
            connect: libc::SECCOMP_RET_ERRNO | libc::EACCES as u32,
            deny: EPERM,
        }
    }
}

const EPERM: u32 = libc::SECCOMP_RET_ERRNO | DENY_ERRNO as u32;
const ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
/// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;

/// The offset of the low 32 bits of argument `n` (little-endian), the half the kernel
/// reads for an `int` or `unsigned int` argument.
fn low(n: u32) -> u32 {
    16 + 8 * n
}

fn high(n: u32) -> u32 {
    low(n) + 4
}

/// A constant compared with the low half of an argument.
fn word(value: u64) -> Result<u32, BuildError> {
    u32::try_from(value).map_err(|_| BuildError(format!("{value:#x} is wider than 32 bits")))
}

/// What one syscall number is checked for, in this order. Calls with equal checks share
/// one block of the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Leaf {
    /// Answered whatever the arguments: no block, the search tree returns it.
    Fixed(u32),
    Checks {
        /// Refused with a set-id bit in its mode (see [`SET_ID_BITS`]).
        set_id: Option<SetsMode>,
        /// Sent to the supervisor when it can change the filesystem by path; allowed
        /// otherwise.
        path: Option<PathRoute>,
        /// Refused as the deny list says.
        deny: Option<Args>,
    },
}

/// When a path call goes to the supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum PathRoute {
    Always,
    /// When the open flags in this argument make it a write ([`WRITE_FLAGS`]).
    WriteOpen(u32),
    /// When the mode in this argument has an execute bit ([`EXEC_BITS`]).
    ExecMode(u32),
    /// When this pointer argument is not NULL: `utimensat(dirfd, NULL, …)` touches the
    /// fd's own file, no path, nothing to report.
    WithPath(u32),
}

/// Every syscall number the filter does not simply allow, with its checks: each row of
/// the table as its rule says under these choices.
fn leaves(
    answers: Answers,
    paths: PathCalls,
    terminal: Terminal,
    sockets: Sockets,
) -> Result<BTreeMap<u32, Leaf>, BuildError> {
    let mut leaves = BTreeMap::new();
    for row in syscalls::all() {
        let nr = u32::try_from(row.nr).map_err(|_| BuildError(format!("syscall {}", row.nr)))?;
        let leaf = match row.rule {
            Rule::Unreadable => Some(Leaf::Fixed(ENOSYS)),
            Rule::Connect => Some(Leaf::Fixed(answers.connect)),
            Rule::Umask => (paths != PathCalls::ToKernel).then_some(Leaf::Fixed(NOTIFY)),
            Rule::Bind => (paths == PathCalls::Decided).then_some(Leaf::Fixed(NOTIFY)),
            Rule::Denied { args, .. } => (args != Args::WhileTerminal
                || terminal == Terminal::Reachable)
                .then_some(args)
                .filter(|args| *args != Args::WithoutNamespaces || paths == PathCalls::Decided)
                .map(|args| match sockets.args_of(row.nr, args) {
                    Args::Any | Args::WhileTerminal | Args::WithoutNamespaces => {
                        Leaf::Fixed(answers.deny)
                    }
                    args => Leaf::Checks {
                        set_id: None,
                        path: None,
                        deny: Some(args),
                    },
                }),
            Rule::Path(call) => match (call.sets_mode, paths.route(&call)) {
                (None, Some(PathRoute::Always)) => Some(Leaf::Fixed(NOTIFY)),
                (None, None) => None,
                (set_id, path) => Some(Leaf::Checks {
                    set_id,
                    path,
                    deny: None,
                }),
            },
        };
        if let Some(leaf) = leaf {
            if leaves.insert(nr, leaf).is_some() {
                return Err(BuildError(format!("{} has two rows", row.name)));
            }
        }
    }
    Ok(leaves)
}

/// Builds one filter: the architecture checked (a foreign one killed), then the syscall
/// number sent down a balanced binary search tree over the numbers of [`leaves`] (plus
/// the x32 range, refused), to the block holding only that call's checks; every other
/// number reaches the shared allow after about log2(leaves) + 1 comparisons, without a
/// look at its arguments — which also lets the kernel cache it as always allowed. So the
/// program is short (it is verified and JIT-compiled at every install) and an
/// argument-dependent call (`openat`, `ioctl`, …) runs a dozen instructions, not a linear
/// list.
///
/// The argument checks are assembled here rather than by seccompiler: its rules reload
/// the argument for every comparison and jump through two `BPF_JA`s per rule into a
/// layout of its own (one linear chain ending at its default actions), which a tree leaf
/// cannot reuse; here an ioctl request goes down a search tree of its own and a socket's
/// family and type are loaded once. A unit test checks the result, input for input,
/// against the linear program seccompiler builds.
fn program(
    answers: Answers,
    paths: PathCalls,
    terminal: Terminal,
    sockets: Sockets,
) -> Result<Vec<libc::sock_filter>, BuildError> {
    let asm_error = |e: bpf::AsmError| BuildError(e.to_string());
    let leaves = leaves(answers, paths, terminal, sockets)?;
    let mut asm = Asm::default();
    asm.load(ARCH);
    asm.jeq(
        AUDIT_ARCH,
        Dest::Next,
        Dest::Ret(libc::SECCOMP_RET_KILL_PROCESS),
    );
    asm.load(NR);
    let mut blocks = BTreeMap::new();
    let mut segments = Vec::with_capacity(leaves.len() + 1);
    for (&nr, &leaf) in &leaves {
        let to = match leaf {
            Leaf::Fixed(answer) => Dest::Ret(answer),
            checks => Dest::At(*blocks.entry(checks).or_insert_with(|| asm.label())),
        };
        segments.push(Segment { lo: nr, hi: nr, to });
    }
    // x32 calls, and any number above.
    segments.push(Segment {
        lo: X32_SYSCALL_BIT,
        hi: u32::MAX,
        to: Dest::Ret(EPERM),
    });
    asm.search(&segments, Dest::Ret(ALLOW)).map_err(asm_error)?;
    asm.returns();
    for (leaf, label) in blocks {
        asm.bind(label);
        block(&mut asm, leaf, answers, terminal)?;
    }
    asm.finish().map_err(asm_error)
}

/// Emits the checks of one leaf; each path ends in a return.
fn block(
    asm: &mut Asm,
    leaf: Leaf,
    answers: Answers,
    terminal: Terminal,
) -> Result<(), BuildError> {
    let Leaf::Checks { set_id, path, deny } = leaf else {
        if let Leaf::Fixed(answer) = leaf {
            asm.goto(Dest::Ret(answer));
        }
        return Ok(());
    };
    let allow = Dest::Ret(ALLOW);
    if let Some(SetsMode { mode, flags }) = set_id {
        let after = asm.label();
        if let Some(flags) = flags {
            let creates = asm.label();
            asm.load(low(flags));
            asm.jset(CREATE, Dest::At(creates), Dest::Next);
            asm.and(TMPFILE);
            asm.jeq(TMPFILE, Dest::Next, Dest::At(after));
            asm.bind(creates);
        }
        asm.load(low(mode));
        asm.jset(SET_ID_BITS, Dest::Ret(EPERM), Dest::Next);
        asm.bind(after);
    }
    match path {
        Some(PathRoute::Always) => {
            asm.goto(Dest::Ret(NOTIFY));
            return Ok(());
        }
        Some(PathRoute::WriteOpen(flags)) => {
            asm.load(low(flags));
            asm.jset(WRITE_FLAGS, Dest::Ret(NOTIFY), allow);
            return Ok(());
        }
        Some(PathRoute::ExecMode(mode)) => {
            asm.load(low(mode));
            asm.jset(EXEC_BITS, Dest::Ret(NOTIFY), allow);
            return Ok(());
        }
        Some(PathRoute::WithPath(pointer)) => {
            asm.load(low(pointer));
            asm.jeq(0, Dest::Next, Dest::Ret(NOTIFY));
            asm.load(high(pointer));
            asm.jeq(0, allow, Dest::Ret(NOTIFY));
            return Ok(());
        }
        None => {}
    }
    match deny {
        Some(args) => refuse(asm, args, Dest::Ret(answers.deny), terminal),
        None => {
            asm.goto(allow);
            Ok(())
        }
    }
}

/// Emits the deny-list check of `args`: `refused` when it matches, allowed otherwise.
/// Only low halves are compared where the kernel reads an `int` (see [`Args`]).
fn refuse(asm: &mut Asm, args: Args, refused: Dest, terminal: Terminal) -> Result<(), BuildError> {
    let allow = Dest::Ret(ALLOW);
    let search = |asm: &mut Asm, segments: &[Segment]| {
        asm.search(segments, allow)
            .map_err(|e| BuildError(e.to_string()))
    };
    let point = |value: u64| -> Result<Segment, BuildError> {
        let value = word(value)?;
        Ok(Segment {
            lo: value,
            hi: value,
            to: refused,
        })
    };
    match args {
        Args::Any | Args::WhileTerminal | Args::WithoutNamespaces => asm.goto(refused),
        Args::OtherPid(n) => {
            asm.load(low(n.into()));
            asm.jeq(0, allow, refused);
        }
        Args::OtherThan { which } => {
            asm.load(low(0));
            asm.jeq(word(which)?, Dest::Next, refused);
            asm.load(low(1));
            asm.jeq(0, allow, refused);
        }
        Args::Socket => {
            asm.load(low(0));
            asm.jeq(word(libc::AF_UNIX as u64)?, Dest::Next, refused);
            asm.load(low(1));
            asm.and(word(SOCK_TYPE_MASK)?);
            asm.jeq(word(SOCK_STREAM)?, allow, Dest::Next);
            asm.jeq(word(SOCK_SEQPACKET)?, allow, refused);
        }
        Args::SocketOrTcp => {
            let (tcp, netlink, route) = (asm.label(), asm.label(), asm.label());
            asm.load(low(0));
            asm.jeq(word(libc::AF_INET as u64)?, Dest::At(tcp), Dest::Next);
            asm.jeq(word(libc::AF_INET6 as u64)?, Dest::At(tcp), Dest::Next);
            asm.jeq(
                word(libc::AF_NETLINK as u64)?,
                Dest::At(netlink),
                Dest::Next,
            );
            asm.jeq(word(libc::AF_UNIX as u64)?, Dest::Next, refused);
            asm.load(low(1));
            asm.and(word(SOCK_TYPE_MASK)?);
            asm.jeq(word(SOCK_STREAM)?, allow, Dest::Next);
            asm.jeq(word(SOCK_SEQPACKET)?, allow, refused);
            asm.bind(tcp);
            asm.load(low(1));
            asm.and(word(SOCK_TYPE_MASK)?);
            asm.jeq(word(SOCK_STREAM)?, Dest::Next, refused);
            asm.load(low(2));
            asm.jeq(0, allow, Dest::Next);
            asm.jeq(word(libc::IPPROTO_TCP as u64)?, allow, refused);
            asm.bind(netlink);
            asm.load(low(1));
            asm.and(word(SOCK_TYPE_MASK)?);
            asm.jeq(word(libc::SOCK_RAW as u64)?, Dest::At(route), Dest::Next);
            asm.jeq(word(libc::SOCK_DGRAM as u64)?, Dest::Next, refused);
            asm.bind(route);
            asm.load(low(2));
            asm.jeq(word(libc::NETLINK_ROUTE as u64)?, allow, refused);
        }
        // Each flag is one bit, so "any flag set" is one test of their union.
        Args::Clone => {
            let mut union = 0;
            for flag in CLONE_NAMESPACE_FLAGS {
                if flag.count_ones() != 1 {
                    return Err(BuildError(format!("clone flag {flag:#x} is not one bit")));
                }
                union |= word(flag)?;
            }
            asm.load(low(0));
            asm.jset(union, refused, allow);
        }
        Args::Ioctl => {
            let session: &[u64] = match terminal {
                Terminal::Reachable => &SESSION_IOCTLS,
                Terminal::Unreachable => &[],
            };
            let mut segments = TERMINAL_IOCTLS
                .iter()
                .chain(&FILE_ATTRIBUTE_IOCTLS)
                .chain(session)
                .map(|&r| point(r))
                .collect::<Result<Vec<_>, _>>()?;
            for (mask, value) in TERMINAL_IOCTL_RANGES {
                // A mask of high ones is a range: the value with every low bit clear to the
                // value with every low bit set.
                let span = !word(mask)?;
                if span & span.wrapping_add(1) != 0 {
                    return Err(BuildError(format!("ioctl mask {mask:#x} is not a range")));
                }
                let lo = word(value & mask)?;
                segments.push(Segment {
                    lo,
                    hi: lo | span,
                    to: refused,
                });
            }
            segments.sort_by_key(|s| s.lo);
            asm.load(low(1));
            search(asm, &segments)?;
        }
        Args::Prctl => {
            let mut segments = PRCTL_OPTIONS
                .iter()
                .map(|&o| point(o))
                .collect::<Result<Vec<_>, _>>()?;
            segments.sort_by_key(|s| s.lo);
            asm.load(low(0));
            search(asm, &segments)?;
        }
        Args::Fcntl => {
            let mut segments = FCNTL_COMMANDS
                .iter()
                .map(|&c| point(c))
                .collect::<Result<Vec<_>, _>>()?;
            segments.sort_by_key(|s| s.lo);
            asm.load(low(1));
            search(asm, &segments)?;
        }
    }
    Ok(())
}

impl Prepared {
    /// Installs the filter on the calling thread (no_new_privs must already be set) and
    /// returns the notification listener, or `None` when `connect` is refused outright:
    /// the kernel has no user notification, or an enclosing sandgate already holds the one
    /// listener a process tree may have (`EBUSY`).
    pub fn apply(&self) -> io::Result<Option<OwnedFd>> {
        if self.notify {
            match sys::seccomp_install(&self.notifying, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER) {
                Ok(listener) => return Ok(listener),
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => return Err(e),
            }
        }
        sys::seccomp_install(&self.refusing, 0)
    }
}

#[cfg(test)]
mod tests;
