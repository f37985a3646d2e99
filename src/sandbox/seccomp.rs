//! The seccomp layer: the syscall deny list and the routing of `connect` and the path
//! calls to the supervisor.
//!
//! One filter, built before forking. It kills a foreign-architecture call, refuses x32
//! calls (which would dodge the syscall numbers below), answers `clone3` with `ENOSYS` (its
//! flags live in memory BPF cannot read, so glibc falls back to `clone`, whose flags are
//! checked), sends every `connect` to the supervisor, and every call the supervisor
//! performs in the writable areas (write opens, creates, renames, links, mode changes with
//! an execute bit, extended attributes: [`Need::Performed`]) — with
//! [`PathCalls::PerformedAndObserved`] every other call that could change the filesystem
//! by path too; and it refuses the **deny list**:
//! calls no restricted command needs and that widen what it can reach — io_uring (it
//! bypasses seccomp for the operations it queues), ptrace and process_vm_*, bpf,
//! perf_event_open, userfaultfd, keyrings, the mount family, namespace creation, kexec and
//! modules, every call that would act on a process outside the sandbox (`prlimit64`,
//! priorities, scheduling, memory placement of another pid — see `DENY_LIST`), the
//! terminal requests that take over or redirect a terminal (see `TERMINAL_IOCTLS`), every
//! socket family but `AF_UNIX`, and unix *datagram* sockets (see below) — refused with
//! `EPERM`, or, when observing, handed to the supervisor, which records a marker and
//! refuses with the same `EPERM`.
//!
//! `DENY_LIST` and `PATH_CALLS` are the one table of syscalls: the filter, the
//! names in markers and their `op`s all derive from it.
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

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// `__X32_SYSCALL_BIT`: x32 calls share x86_64's audit arch but not its numbers.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;
const TIOCEXCL: u64 = 0x540C;
const TIOCSCTTY: u64 = 0x540E;
const TIOCSPGRP: u64 = 0x5410;
const TIOCCONS: u64 = 0x541D;
const TIOCSETD: u64 = 0x5423;
const TIOCVHANGUP: u64 = 0x5437;
const TIOCNOTTY: u64 = 0x5422;
const TIOCSLCKTRMIOS: u64 = 0x5457;
const TCXONC: u64 = 0x540A;
const TIOCSWINSZ: u64 = 0x5414;
const SOCK_TYPE_MASK: u64 = 0xf;
const SOCK_STREAM: u64 = libc::SOCK_STREAM as u64;
const SOCK_SEQPACKET: u64 = libc::SOCK_SEQPACKET as u64;

/// Namespace-creating `clone` flags. (`CLONE_NEWTIME` is not among them: in `clone` that
/// bit belongs to the exit signal; `unshare` and `clone3` are refused whole.)
const CLONE_NAMESPACE_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

/// How a deny-list entry looks at its call's arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Args {
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
    /// every connect still goes to the supervisor.
    SocketOrTcp,
    /// `clone` with a namespace flag.
    Clone,
    /// `ioctl` with a request of [`TERMINAL_IOCTLS`] or in [`TERMINAL_IOCTL_RANGES`].
    Ioctl,
    /// `prctl` with an option of [`PRCTL_OPTIONS`].
    Prctl,
    /// `fcntl` with a command of [`FCNTL_COMMANDS`].
    Fcntl,
    /// Refused whatever the arguments, but only while the sandbox can reach a terminal
    /// (see [`Terminal`]).
    WhileTerminal,
}

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
    /// The argument rule of deny-list entry `d` under this choice.
    fn args_of(self, d: &Denied) -> Args {
        match self {
            Sockets::UnixAndTcp if d.nr == libc::SYS_socket => Args::SocketOrTcp,
            _ => d.args,
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

/// What a refused call is, for markers. Every one of them is allowed by `full-access`,
/// which has no sandbox to refuse it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Class {
    pub op: &'static str,
}

/// One call of the deny list.
#[derive(Clone, Copy, Debug)]
pub struct Denied {
    pub nr: libc::c_long,
    pub name: &'static str,
    pub class: Class,
    args: Args,
}

const fn denied(nr: libc::c_long, name: &'static str, op: &'static str, args: Args) -> Denied {
    Denied {
        nr,
        name,
        class: Class { op },
        args,
    }
}

// Calls newer than the libc crate's names, with the same number on every architecture
// of the unified syscall table: extended attributes by dirfd and path (Linux 6.13), file
// attributes by dirfd and path (6.17), and `open_tree_attr` (6.15).
pub const SYS_SETXATTRAT: libc::c_long = 463;
pub const SYS_REMOVEXATTRAT: libc::c_long = 466;
pub const SYS_FILE_SETATTR: libc::c_long = 469;
const SYS_OPEN_TREE_ATTR: libc::c_long = 467;

/// The deny list: every call a restricted profile refuses, with its marker name and
/// class. The filter, the supervisor's names and its marker `op`s all derive from it.
///
/// Process control: no call may act on a process outside the sandbox. Signals (`kill`,
/// `tkill`, `tgkill`, `rt_sigqueueinfo`, `rt_tgsigqueueinfo`, `pidfd_send_signal`, and
/// `SIGIO`/`SIGURG` through `F_SETOWN`) are scoped by landlock, and `ptrace`-mode access
/// (`/proc/PID/mem`, namespace fds of a pidfd) by landlock too; what neither covers is here,
/// each call refused unless it names the caller by 0:
/// - `prlimit64(pid)`: lowering a host process's `RLIMIT_CPU` kills it;
/// - `setpriority(which, who)`: only `PRIO_PROCESS` with `who` 0 — `PRIO_PGRP` and
///   `PRIO_USER` renice host processes of the same group or uid;
/// - `sched_setaffinity`, `sched_setscheduler`, `sched_setparam`, `sched_setattr(pid)`:
///   a host process pinned to one CPU or demoted to `SCHED_IDLE`;
/// - `ioprio_set(which, who)`: only `IOPRIO_WHO_PROCESS` with `who` 0, as `setpriority`;
/// - `migrate_pages(pid)`, `move_pages(pid)`: moving a host process's memory between nodes;
/// - `get_robust_list(pid)`: reads a host thread's robust-futex list head, an address that
///   undoes its ASLR;
/// - `kcmp`: compares the kernel objects (files, memory) of two processes — a probe of
///   host processes' state, never needed by a build;
/// - `process_mrelease`: reaps the memory of a dying process (refused whatever the pidfd);
/// - `prctl(PR_SCHED_CORE)`: sets core-scheduling cookies of another task, its thread
///   group or its process group (which holds sandgate itself).
///
/// The cost: a call naming the caller by its own pid or tid instead of 0 is refused too —
/// `renice -p $$`, `prlimit --pid $$`, and a multithreaded program that pins its own
/// threads by tid (`pthread_setaffinity_np`, OpenMP's `OMP_PROC_BIND`) get `EPERM`.
///
/// Left allowed, deliberately: the read-only calls (`getpriority`, `sched_get*`,
/// `ioprio_get`, `getpgid`, `getsid`, `capget`), which tell what `/proc` tells anyway;
/// `pidfd_open`, since every use of a pidfd on another process is refused on its own
/// (signals by landlock, `pidfd_getfd`, `process_madvise`, `process_mrelease` and `setns`
/// here) and asyncio waits on its children with it; `capset`, which the kernel refuses for
/// any pid but the caller's; `set_robust_list`, `sched_yield`, `set_mempolicy`, `mbind`,
/// which act on the caller only; `setpgid`, which can only move the caller or its children
/// (but see `TERMINAL_IOCTLS` for what joining a group means).
///
/// Terminal: see [`TERMINAL_IOCTLS`].
const DENY_LIST: &[Denied] = &[
    denied(
        libc::SYS_io_uring_setup,
        "io_uring_setup",
        "io_uring",
        Args::Any,
    ),
    denied(
        libc::SYS_io_uring_enter,
        "io_uring_enter",
        "io_uring",
        Args::Any,
    ),
    denied(
        libc::SYS_io_uring_register,
        "io_uring_register",
        "io_uring",
        Args::Any,
    ),
    denied(libc::SYS_ptrace, "ptrace", "ptrace", Args::Any),
    denied(
        libc::SYS_process_vm_readv,
        "process_vm_readv",
        "ptrace",
        Args::Any,
    ),
    denied(
        libc::SYS_process_vm_writev,
        "process_vm_writev",
        "ptrace",
        Args::Any,
    ),
    denied(libc::SYS_pidfd_getfd, "pidfd_getfd", "ptrace", Args::Any),
    denied(
        libc::SYS_process_madvise,
        "process_madvise",
        "ptrace",
        Args::Any,
    ),
    denied(libc::SYS_bpf, "bpf", "syscall", Args::Any),
    denied(
        libc::SYS_perf_event_open,
        "perf_event_open",
        "syscall",
        Args::Any,
    ),
    denied(libc::SYS_userfaultfd, "userfaultfd", "syscall", Args::Any),
    denied(libc::SYS_keyctl, "keyctl", "keyring", Args::Any),
    denied(libc::SYS_add_key, "add_key", "keyring", Args::Any),
    denied(libc::SYS_request_key, "request_key", "keyring", Args::Any),
    denied(libc::SYS_mount, "mount", "mount", Args::Any),
    denied(libc::SYS_umount2, "umount2", "mount", Args::Any),
    denied(libc::SYS_pivot_root, "pivot_root", "mount", Args::Any),
    denied(libc::SYS_chroot, "chroot", "mount", Args::Any),
    denied(libc::SYS_move_mount, "move_mount", "mount", Args::Any),
    denied(libc::SYS_open_tree, "open_tree", "mount", Args::Any),
    denied(libc::SYS_fsopen, "fsopen", "mount", Args::Any),
    denied(libc::SYS_fsconfig, "fsconfig", "mount", Args::Any),
    denied(libc::SYS_fsmount, "fsmount", "mount", Args::Any),
    denied(libc::SYS_fspick, "fspick", "mount", Args::Any),
    denied(libc::SYS_mount_setattr, "mount_setattr", "mount", Args::Any),
    denied(SYS_OPEN_TREE_ATTR, "open_tree_attr", "mount", Args::Any),
    denied(libc::SYS_unshare, "unshare", "namespace", Args::Any),
    denied(libc::SYS_setns, "setns", "namespace", Args::Any),
    denied(libc::SYS_clone, "clone", "namespace", Args::Clone),
    denied(libc::SYS_kexec_load, "kexec_load", "kexec", Args::Any),
    denied(
        libc::SYS_kexec_file_load,
        "kexec_file_load",
        "kexec",
        Args::Any,
    ),
    denied(libc::SYS_init_module, "init_module", "module", Args::Any),
    denied(libc::SYS_finit_module, "finit_module", "module", Args::Any),
    denied(
        libc::SYS_delete_module,
        "delete_module",
        "module",
        Args::Any,
    ),
    denied(
        libc::SYS_open_by_handle_at,
        "open_by_handle_at",
        "syscall",
        Args::Any,
    ),
    denied(libc::SYS_socket, "socket", "network", Args::Socket),
    denied(libc::SYS_socketpair, "socketpair", "network", Args::Socket),
    // The op of an ioctl depends on its request: see `ioctl_class`.
    denied(libc::SYS_ioctl, "ioctl", "terminal", Args::Ioctl),
    denied(
        libc::SYS_prlimit64,
        "prlimit64",
        "process_control",
        Args::OtherPid(0),
    ),
    denied(
        libc::SYS_setpriority,
        "setpriority",
        "process_control",
        Args::OtherThan {
            which: libc::PRIO_PROCESS as u64,
        },
    ),
    denied(
        libc::SYS_sched_setaffinity,
        "sched_setaffinity",
        "process_control",
        Args::OtherPid(0),
    ),
    denied(
        libc::SYS_sched_setscheduler,
        "sched_setscheduler",
        "process_control",
        Args::OtherPid(0),
    ),
    denied(
        libc::SYS_sched_setparam,
        "sched_setparam",
        "process_control",
        Args::OtherPid(0),
    ),
    denied(
        libc::SYS_sched_setattr,
        "sched_setattr",
        "process_control",
        Args::OtherPid(0),
    ),
    denied(
        libc::SYS_ioprio_set,
        "ioprio_set",
        "process_control",
        Args::OtherThan {
            which: IOPRIO_WHO_PROCESS,
        },
    ),
    denied(
        libc::SYS_migrate_pages,
        "migrate_pages",
        "process_control",
        Args::OtherPid(0),
    ),
    denied(
        libc::SYS_move_pages,
        "move_pages",
        "process_control",
        Args::OtherPid(0),
    ),
    denied(
        libc::SYS_get_robust_list,
        "get_robust_list",
        "process_control",
        Args::OtherPid(0),
    ),
    // Joining an existing process group: a process left in the background by an earlier
    // call could join the user's shell's group, the terminal's foreground at the prompt,
    // and read the next typed line. `setpgid(pid, 0)` (a group of its own) stays allowed.
    denied(
        libc::SYS_setpgid,
        "setpgid",
        "process_control",
        Args::OtherPid(1),
    ),
    // Leaving the session drops the controlling terminal, and the kernel's job control
    // (SIGTTIN, EIO) guards only a process's controlling terminal: a process left in the
    // background by an earlier call could `setsid` and then read the user's next typed
    // lines from the terminal fd it still holds. (`TIOCNOTTY` is refused for the same
    // reason, in `TERMINAL_IOCTLS`.)
    denied(libc::SYS_setsid, "setsid", "terminal", Args::WhileTerminal),
    denied(libc::SYS_kcmp, "kcmp", "process_control", Args::Any),
    denied(
        libc::SYS_process_mrelease,
        "process_mrelease",
        "process_control",
        Args::Any,
    ),
    denied(libc::SYS_prctl, "prctl", "process_control", Args::Prctl),
    denied(libc::SYS_fcntl, "fcntl", "process_control", Args::Fcntl),
    // fanotify marks on a mount or filesystem report every host process's opens and
    // writes there (unprivileged since Linux 5.13, with file handles); a sandbox has no use
    // for them that inotify on its own files does not serve.
    denied(
        libc::SYS_fanotify_init,
        "fanotify_init",
        "process_control",
        Args::Any,
    ),
];

/// `IOPRIO_WHO_PROCESS` (linux/ioprio.h; libc has no constant).
const IOPRIO_WHO_PROCESS: u64 = 1;
/// `PR_SCHED_CORE` (linux/prctl.h).
const PR_SCHED_CORE: u64 = 62;
/// `prctl` options refused: see [`DENY_LIST`].
const PRCTL_OPTIONS: [u64; 1] = [PR_SCHED_CORE];

/// `fcntl` commands refused:
/// - `F_SETLEASE`. A read lease on a file the command owns (as root: every root-owned
///   file, `/etc/hostname`) makes a host process's next open of it for writing wait for
///   the lease-break time (45 s), or fail non-blocking; held by a process kept after the
///   call, for as long as it runs. Leases are for file servers (Samba, NFS), not for what
///   runs in a sandbox.
/// - `F_NOTIFY` (dnotify, inotify's predecessor): on any directory the command may read,
///   a signal for each file host processes access, create or change there. Watches go
///   through the supervisor as `inotify` instead (see `supervisor::watch`).
const FCNTL_COMMANDS: [u64; 2] = [libc::F_SETLEASE as u64, libc::F_NOTIFY as u64];

/// Terminal requests refused, because they take over or redirect a terminal — the user's,
/// which a sandboxed process shares (or, for a background process left by an earlier call,
/// still holds):
/// - `TIOCSTI` pushes input into it; `TIOCLINUX` pastes the console selection (the same);
/// - `TIOCSPGRP` (`tcsetpgrp`) makes the caller's group the foreground: with `SIGTTOU`
///   ignored, a background process takes the user's next typed line;
/// - `TIOCSCTTY` makes a terminal the caller's controlling one: a session leader takes a
///   terminal whose session has ended (or, with `CAP_SYS_ADMIN`, steals it);
/// - `TIOCCONS` redirects console output to the terminal;
/// - `TIOCSETD` swaps its line discipline (what sits between the device and every reader);
/// - `TIOCVHANGUP` hangs up every other holder; `TIOCSLCKTRMIOS` locks its modes against
///   them; `TIOCEXCL` makes every later open of the device fail, for the user too, until
///   it is closed;
/// - `TCXONC` (`tcflow`) suspends the terminal's output (`TCOOFF`), or has it send a stop
///   character (`TCIOFF`): left so, the user's terminal shows nothing more after sandgate
///   returns, and the process that did it may be gone;
/// - `TIOCSWINSZ` sets its window size: left changed, the user's shell, editor and pager
///   lay themselves out for a wrong screen until the window is next resized — and sandgate
///   cannot put it back, since a resize by the user during the call looks the same;
/// - `TIOCNOTTY` gives up the controlling terminal, like `setsid` (refused in `DENY_LIST`):
///   job control guards only a process's controlling terminal, so a background process
///   that gave it up reads the user's typed lines from the fd it still holds.
///
/// The cost: nothing in the sandbox can make a terminal controlling or set a foreground
/// group, so an interactive shell inside runs without job control (`bash -i` says so once
/// and goes on). Ptys of its own would be refused the same (the filter cannot tell them
/// from the user's terminal), but the sandbox cannot open `/dev/ptmx` anyway: landlock
/// gives it no write access there. `full-access` has them.
///
/// Left allowed, deliberately: `TCSETS*` (every interactive program sets raw mode; a
/// background process can do it only with `SIGTTOU` ignored, and the modes never send
/// input elsewhere), `TIOCSIG` (on a pty master, which the sandbox holds only for its own
/// ptys), `TCFLSH` (flush: password prompts flush, and it moves input to no
/// other reader). The modes a command leaves changed are put back by sandgate when the
/// command ends (`terminal`).
///
/// Joining another process group (`setpgid(pid, PGID)`) is refused in `DENY_LIST`: the
/// filter cannot tell the user's shell's group from a sandboxed one, and a shell inside
/// has no job control to need it anyway.
///
/// With `setsid` refused, no sandboxed process is a session leader, so none can take a
/// controlling terminal by opening one either. (`setsid` and `TIOCNOTTY` are refused only
/// while a terminal is reachable at all: see [`Terminal`].)
const TERMINAL_IOCTLS: [u64; 11] = [
    TIOCSTI,
    TIOCLINUX,
    TIOCSPGRP,
    TIOCSCTTY,
    TIOCCONS,
    TIOCSETD,
    TIOCVHANGUP,
    TIOCSLCKTRMIOS,
    TIOCEXCL,
    TCXONC,
    TIOCSWINSZ,
];

/// Terminal requests refused while a terminal is reachable: giving up the controlling
/// terminal (see `setsid` in [`DENY_LIST`]).
const SESSION_IOCTLS: [u64; 1] = [TIOCNOTTY];

/// Whole request ranges refused, as (mask, value): the Linux virtual console's `KD*`
/// (0x4Bxx: keymaps and function-key strings — typing for the user, like `TIOCSTI` — and
/// keyboard and display modes) and `VT_*` (0x56xx: switching consoles, taking over console
/// switching). Only the holder of a console can use them; a console user runs sandgate on
/// one. Both are old-style numbers with no direction or size bits, so the mask is exact.
const TERMINAL_IOCTL_RANGES: [(u64, u64); 2] = [(0xffff_ff00, 0x4b00), (0xffff_ff00, 0x5600)];

/// The deny list entries, for the supervisor's names and marker classes.
pub fn deny_list_entry(nr: i64) -> Option<&'static Denied> {
    DENY_LIST.iter().find(|d| d.nr == nr)
}

/// The marker class of a refused `ioctl`: `tiocsti` for input injection, else `terminal`.
pub fn ioctl_class(request: u64) -> Class {
    let request = request & 0xffff_ffff;
    if request == TIOCSTI || request == TIOCLINUX {
        Class { op: "tiocsti" }
    } else {
        Class { op: "terminal" }
    }
}

/// The errno the deny list answers with.
pub const DENY_ERRNO: i32 = libc::EPERM;

/// The error for a filter that cannot be assembled (a build defect, never caused by input).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the seccomp filter: {0}")]
pub struct BuildError(String);

/// Why a path call goes to the supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// It creates, renames, links, opens for writing or changes a mode or an extended
    /// attribute: landlock refuses every such call in a writable area (see
    /// `landlock::backstop`), so the supervisor performs it there, after its checks. Sent
    /// whenever there is a listener.
    Performed,
    /// It removes, truncates or changes ownership or times: the kernel decides it alone,
    /// and the supervisor only reports a refusal (or, at a guarded git directory's
    /// read-only top level, performs a removal git needs). Sent when observing or guarding
    /// git directories.
    Observed,
}

/// A syscall that can change the filesystem by path (or, for `fchmod` and `fsetxattr`,
/// through a file descriptor).
#[derive(Clone, Copy, Debug)]
pub struct PathCall {
    pub nr: libc::c_long,
    pub name: &'static str,
    /// The index of the argument holding the open flags, when only write opens qualify.
    pub flags: Option<u32>,
    /// The index of the argument holding a mode to set: without observation (and always
    /// for `fchmod`, which names no path to report) only a mode with an execute bit goes
    /// to the supervisor — the one change it checks; the kernel decides the rest alone,
    /// since landlock does not govern modes.
    pub exec_mode: Option<u32>,
    /// It acts on a file descriptor, not a path.
    pub by_fd: bool,
    pub need: Need,
}

const fn performed(nr: libc::c_long, name: &'static str) -> PathCall {
    PathCall {
        nr,
        name,
        flags: None,
        exec_mode: None,
        by_fd: false,
        need: Need::Performed,
    }
}

const fn observed(nr: libc::c_long, name: &'static str) -> PathCall {
    PathCall {
        need: Need::Observed,
        ..performed(nr, name)
    }
}

const fn open(nr: libc::c_long, name: &'static str, flags: u32) -> PathCall {
    PathCall {
        flags: Some(flags),
        ..performed(nr, name)
    }
}

const fn chmod(nr: libc::c_long, name: &'static str, mode: u32) -> PathCall {
    PathCall {
        exec_mode: Some(mode),
        ..performed(nr, name)
    }
}

/// The path calls every architecture has.
const PATH_CALLS: &[PathCall] = &[
    open(libc::SYS_openat, "openat", 2),
    performed(libc::SYS_mkdirat, "mkdirat"),
    performed(libc::SYS_mknodat, "mknodat"),
    observed(libc::SYS_unlinkat, "unlinkat"),
    performed(libc::SYS_renameat, "renameat"),
    performed(libc::SYS_renameat2, "renameat2"),
    performed(libc::SYS_linkat, "linkat"),
    performed(libc::SYS_symlinkat, "symlinkat"),
    observed(libc::SYS_truncate, "truncate"),
    PathCall {
        by_fd: true,
        ..chmod(libc::SYS_fchmod, "fchmod", 1)
    },
    chmod(libc::SYS_fchmodat, "fchmodat", 2),
    chmod(libc::SYS_fchmodat2, "fchmodat2", 2),
    observed(libc::SYS_fchownat, "fchownat"),
    performed(libc::SYS_setxattr, "setxattr"),
    performed(libc::SYS_lsetxattr, "lsetxattr"),
    PathCall {
        by_fd: true,
        ..performed(libc::SYS_fsetxattr, "fsetxattr")
    },
    observed(libc::SYS_removexattr, "removexattr"),
    observed(libc::SYS_lremovexattr, "lremovexattr"),
    performed(SYS_SETXATTRAT, "setxattrat"),
    observed(SYS_REMOVEXATTRAT, "removexattrat"),
    observed(SYS_FILE_SETATTR, "file_setattr"),
    performed(libc::SYS_inotify_add_watch, "inotify_add_watch"),
];

/// The legacy path calls of x86_64.
#[cfg(target_arch = "x86_64")]
const PATH_CALLS_LEGACY: &[PathCall] = &[
    open(libc::SYS_open, "open", 1),
    performed(libc::SYS_creat, "creat"),
    performed(libc::SYS_mkdir, "mkdir"),
    performed(libc::SYS_mknod, "mknod"),
    observed(libc::SYS_unlink, "unlink"),
    observed(libc::SYS_rmdir, "rmdir"),
    performed(libc::SYS_rename, "rename"),
    performed(libc::SYS_link, "link"),
    performed(libc::SYS_symlink, "symlink"),
    chmod(libc::SYS_chmod, "chmod", 1),
    observed(libc::SYS_chown, "chown"),
    observed(libc::SYS_lchown, "lchown"),
    observed(libc::SYS_utimes, "utimes"),
    observed(libc::SYS_futimesat, "futimesat"),
    observed(libc::SYS_utime, "utime"),
];
#[cfg(not(target_arch = "x86_64"))]
const PATH_CALLS_LEGACY: &[PathCall] = &[];

/// Syscalls that can change the filesystem by path, and `fchmod` and `fsetxattr`. (The
/// filter also sends `utimensat` with a path, when observing, and every `umask`.)
pub fn path_calls() -> impl Iterator<Item = &'static PathCall> {
    PATH_CALLS.iter().chain(PATH_CALLS_LEGACY)
}

/// Names a syscall for markers: every call the filter sends to the supervisor.
pub fn syscall_name(nr: i64) -> &'static str {
    match nr {
        libc::SYS_connect => "connect",
        libc::SYS_utimensat => "utimensat",
        libc::SYS_umask => "umask",
        nr => path_calls()
            .find(|o| o.nr == nr)
            .map(|o| o.name)
            .or_else(|| deny_list_entry(nr).map(|d| d.name))
            .unwrap_or("unknown"),
    }
}

/// The setuid and setgid bits. A capability-less root inside may still set them on files it
/// owns, and a root-owned setuid file left in the workspace runs as root for whoever on the
/// host executes it later; a setgid one runs with the group. No restricted call sets them.
const SET_ID_BITS: u32 = libc::S_ISUID | libc::S_ISGID;

/// An open creates a file, and so applies its mode, when it has `O_CREAT` or all of
/// `O_TMPFILE`, whose value includes `O_DIRECTORY`: a plain directory open is no create,
/// and its mode register holds whatever the caller left there.
const CREATE: u32 = libc::O_CREAT as u32;
const TMPFILE: u32 = libc::O_TMPFILE as u32;

/// A call that sets a file mode: the argument holding it, and for opens the one holding
/// the flags.
struct SetsMode {
    nr: libc::c_long,
    mode: u32,
    flags: Option<u32>,
}

/// Every call that sets a file's mode, refused with a set-id bit in it (`openat2`, whose
/// mode lies in memory, is answered `ENOSYS`; `mkdir` ignores those bits).
const SET_ID_CALLS: &[SetsMode] = &[
    SetsMode {
        nr: libc::SYS_fchmod,
        mode: 1,
        flags: None,
    },
    SetsMode {
        nr: libc::SYS_fchmodat,
        mode: 2,
        flags: None,
    },
    SetsMode {
        nr: libc::SYS_fchmodat2,
        mode: 2,
        flags: None,
    },
    SetsMode {
        nr: libc::SYS_mknodat,
        mode: 2,
        flags: None,
    },
    SetsMode {
        nr: libc::SYS_openat,
        mode: 3,
        flags: Some(2),
    },
];

/// The same among the legacy path calls of x86_64.
#[cfg(target_arch = "x86_64")]
const SET_ID_CALLS_LEGACY: &[SetsMode] = &[
    SetsMode {
        nr: libc::SYS_chmod,
        mode: 1,
        flags: None,
    },
    SetsMode {
        nr: libc::SYS_mknod,
        mode: 1,
        flags: None,
    },
    SetsMode {
        nr: libc::SYS_creat,
        mode: 1,
        flags: None,
    },
    SetsMode {
        nr: libc::SYS_open,
        mode: 2,
        flags: Some(1),
    },
];
#[cfg(not(target_arch = "x86_64"))]
const SET_ID_CALLS_LEGACY: &[SetsMode] = &[];

/// Open flags that make an open a write: it can change or create the file. `O_TMPFILE`
/// counts by its own bit (the rest of its value is `O_DIRECTORY`, which a plain directory
/// open has too; without that bit the kernel refuses it anyway).
const WRITE_FLAGS: u32 = (libc::O_WRONLY
    | libc::O_RDWR
    | libc::O_CREAT
    | libc::O_TRUNC
    | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u32;

/// The execute bits of a mode: the change of mode the supervisor checks (see
/// [`PathCall::exec_mode`]).
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
}

impl PathCalls {
    /// When `call` goes to the supervisor under this choice; `None`: never.
    fn route(self, call: &PathCall) -> Option<PathRoute> {
        match (self, call.need) {
            (PathCalls::ToKernel, _) | (PathCalls::Performed, Need::Observed) => None,
            _ => Some(match (call.flags, call.exec_mode) {
                (Some(flags), _) => PathRoute::WriteOpen(flags),
                (None, Some(mode)) if self == PathCalls::Performed || call.by_fd => {
                    PathRoute::ExecMode(mode)
                }
                (None, _) => PathRoute::Always,
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
        /// Refused with a set-id bit in its mode (see [`SET_ID_CALLS`]).
        set_id: Option<SetId>,
        /// Sent to the supervisor when it can change the filesystem by path; allowed
        /// otherwise.
        path: Option<PathRoute>,
        /// Refused as the deny list says.
        deny: Option<Args>,
    },
}

/// Where a call's mode is, and for opens its flags (it sets a mode only when it creates).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SetId {
    mode: u32,
    flags: Option<u32>,
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

/// Every syscall number the filter does not simply allow, with its checks.
fn leaves(
    answers: Answers,
    paths: PathCalls,
    terminal: Terminal,
    sockets: Sockets,
) -> Result<BTreeMap<u32, Leaf>, BuildError> {
    let nr = |n: libc::c_long| u32::try_from(n).map_err(|_| BuildError(format!("syscall {n}")));
    let mut fixed = BTreeMap::new();
    // Their arguments live in memory BPF cannot read: glibc falls back to `clone`, whose
    // flags are checked, and programs to `openat`, whose flags and mode are.
    fixed.insert(nr(libc::SYS_clone3)?, ENOSYS);
    fixed.insert(nr(libc::SYS_openat2)?, ENOSYS);
    fixed.insert(nr(libc::SYS_connect)?, answers.connect);
    let mut set_id = BTreeMap::new();
    for call in SET_ID_CALLS.iter().chain(SET_ID_CALLS_LEGACY) {
        let id = SetId {
            mode: call.mode,
            flags: call.flags,
        };
        set_id.insert(nr(call.nr)?, id);
    }
    let mut path = BTreeMap::new();
    for call in path_calls() {
        if let Some(route) = paths.route(call) {
            path.insert(nr(call.nr)?, route);
        }
    }
    if paths == PathCalls::PerformedAndObserved {
        path.insert(nr(libc::SYS_utimensat)?, PathRoute::WithPath(1));
    }
    if paths != PathCalls::ToKernel {
        fixed.insert(nr(libc::SYS_umask)?, NOTIFY);
    }
    let mut deny = BTreeMap::new();
    for d in DENY_LIST {
        if d.args != Args::WhileTerminal || terminal == Terminal::Reachable {
            deny.insert(nr(d.nr)?, sockets.args_of(d));
        }
    }
    let every = set_id.keys().chain(path.keys()).chain(deny.keys());
    let mut leaves: BTreeMap<u32, Leaf> = every
        .map(|&n| {
            let leaf = match (set_id.get(&n), path.get(&n), deny.get(&n)) {
                (None, Some(PathRoute::Always), _) => Leaf::Fixed(NOTIFY),
                (None, None, Some(Args::Any | Args::WhileTerminal)) => Leaf::Fixed(answers.deny),
                (set_id, path, deny) => Leaf::Checks {
                    set_id: set_id.copied(),
                    path: path.copied(),
                    deny: deny.copied(),
                },
            };
            (n, leaf)
        })
        .collect();
    leaves.extend(
        fixed
            .into_iter()
            .map(|(n, answer)| (n, Leaf::Fixed(answer))),
    );
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
    if let Some(SetId { mode, flags }) = set_id {
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
        Args::Any | Args::WhileTerminal => asm.goto(refused),
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
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// What one run of a program did.
    #[derive(Debug)]
    struct Trace {
        ret: u32,
        /// Instructions executed.
        steps: usize,
        /// The arguments it loaded a half of, as a bit set.
        read: u8,
    }

    /// Runs a classic-BPF seccomp program over one `seccomp_data`, as the kernel would,
    /// refusing any instruction a seccomp program here has no business holding.
    fn trace(prog: &[libc::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> Trace {
        use libc::{
            BPF_ABS, BPF_ALU, BPF_AND, BPF_JA, BPF_JEQ, BPF_JGE, BPF_JGT, BPF_JMP, BPF_JSET, BPF_K,
            BPF_LD, BPF_RET, BPF_W,
        };
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        let (mut acc, mut pc, mut steps, mut read) = (0u32, 0usize, 0, 0u8);
        loop {
            let i = prog[pc];
            let code = u32::from(i.code);
            pc += 1;
            steps += 1;
            let jump = |taken: bool| usize::from(if taken { i.jt } else { i.jf });
            match code {
                c if c == BPF_LD | BPF_W | BPF_ABS => {
                    let k = i.k as usize;
                    assert!(k % 4 == 0 && k + 4 <= data.len(), "load {k}");
                    if k >= 16 {
                        read |= 1 << ((k - 16) / 8);
                    }
                    acc = u32::from_le_bytes([data[k], data[k + 1], data[k + 2], data[k + 3]]);
                }
                c if c == BPF_RET | BPF_K => {
                    return Trace {
                        ret: i.k,
                        steps,
                        read,
                    }
                }
                c if c == BPF_JMP | BPF_JA => pc += i.k as usize,
                c if c == BPF_JMP | BPF_JEQ | BPF_K => pc += jump(acc == i.k),
                c if c == BPF_JMP | BPF_JGT | BPF_K => pc += jump(acc > i.k),
                c if c == BPF_JMP | BPF_JGE | BPF_K => pc += jump(acc >= i.k),
                c if c == BPF_JMP | BPF_JSET | BPF_K => pc += jump(acc & i.k != 0),
                c if c == BPF_ALU | BPF_AND | BPF_K => acc &= i.k,
                other => panic!("instruction {other:#x}"),
            }
        }
    }

    fn run(prog: &[libc::sock_filter], nr: i64, args: [u64; 6]) -> u32 {
        trace(prog, AUDIT_ARCH, nr as u32, args).ret
    }

    fn notifying(observe: bool) -> Vec<libc::sock_filter> {
        let paths = if observe {
            PathCalls::PerformedAndObserved
        } else {
            PathCalls::Performed
        };
        match prepare(true, observe, paths, Terminal::Reachable, Sockets::Unix) {
            Ok(p) => p.notifying,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn write_opens_go_to_the_supervisor_and_reads_pass() {
        let p = notifying(true);
        let notif = libc::SECCOMP_RET_USER_NOTIF;
        assert_eq!(
            run(&p, libc::SYS_openat, [0, 0, libc::O_RDONLY as u64, 0, 0, 0]),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(
            run(
                &p,
                libc::SYS_openat,
                [0, 0, (libc::O_WRONLY | libc::O_CREAT) as u64, 0, 0, 0]
            ),
            notif
        );
        assert_eq!(run(&p, libc::SYS_mkdirat, [0; 6]), notif);
        assert_eq!(
            run(&p, libc::SYS_utimensat, [3, 0, 0, 0, 0, 0]),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(
            run(&p, libc::SYS_utimensat, [3, 0x7f00_0000_0000, 0, 0, 0, 0]),
            notif
        );
        assert_eq!(run(&p, libc::SYS_connect, [0; 6]), notif);
        assert_eq!(
            run(&p, libc::SYS_ptrace, [0; 6]),
            notif,
            "deny list reported"
        );
        assert_eq!(run(&p, libc::SYS_read, [0; 6]), libc::SECCOMP_RET_ALLOW);
        assert_eq!(
            run(&p, libc::SYS_clone3, [0; 6]),
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32
        );
        assert_eq!(
            run(&p, libc::SYS_getpid | 0x4000_0000, [0; 6]),
            libc::SECCOMP_RET_ERRNO | DENY_ERRNO as u32
        );
    }

    #[test]
    fn set_id_bits_are_refused_in_every_call_that_sets_a_mode() {
        let eperm = libc::SECCOMP_RET_ERRNO | DENY_ERRNO as u32;
        let creat = (libc::O_WRONLY | libc::O_CREAT) as u64;
        for p in [notifying(true), notifying(false)] {
            for mode in [0o4755u64, 0o2755, 0o6711, 0x7f00_0000_0000 | 0o4000] {
                assert_eq!(run(&p, libc::SYS_fchmod, [3, mode, 0, 0, 0, 0]), eperm);
                assert_eq!(run(&p, libc::SYS_fchmodat, [3, 0, mode, 0, 0, 0]), eperm);
                assert_eq!(run(&p, libc::SYS_fchmodat2, [3, 0, mode, 0, 0, 0]), eperm);
                assert_eq!(run(&p, libc::SYS_mknodat, [3, 0, mode, 0, 0, 0]), eperm);
                assert_eq!(run(&p, libc::SYS_openat, [3, 0, creat, mode, 0, 0]), eperm);
            }
            // A mode without them passes on (to the kernel or the supervisor).
            assert_ne!(run(&p, libc::SYS_fchmod, [3, 0o755, 0, 0, 0, 0]), eperm);
            assert_ne!(run(&p, libc::SYS_openat, [3, 0, creat, 0o644, 0, 0]), eperm);
            // An open that creates nothing ignores its mode argument, garbage or not.
            let read = libc::O_RDONLY as u64;
            assert_eq!(
                run(&p, libc::SYS_openat, [3, 0, read, 0o4755, 0, 0]),
                libc::SECCOMP_RET_ALLOW
            );
            // O_DIRECTORY shares a bit with O_TMPFILE: opening a directory creates nothing.
            let directory = (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64;
            assert_eq!(
                run(&p, libc::SYS_openat, [3, 0, directory, 0o6755, 0, 0]),
                libc::SECCOMP_RET_ALLOW
            );
            let tmpfile = (libc::O_RDWR | libc::O_TMPFILE) as u64;
            assert_eq!(
                run(&p, libc::SYS_openat, [3, 0, tmpfile, 0o4755, 0, 0]),
                eperm
            );
            assert_eq!(
                run(&p, libc::SYS_openat2, [3, 0, 0, 24, 0, 0]),
                libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32
            );
        }
    }

    #[test]
    fn every_mount_call_is_refused_the_newest_too() {
        let eperm = libc::SECCOMP_RET_ERRNO | DENY_ERRNO as u32;
        for nr in [
            libc::SYS_open_tree,
            libc::SYS_mount_setattr,
            SYS_OPEN_TREE_ATTR,
        ] {
            assert_eq!(run(&refusing(), nr, [0; 6]), eperm, "{nr}");
        }
    }

    #[test]
    fn without_observation_only_performed_calls_and_connect_are_notified() {
        let p = notifying(false);
        let notif = libc::SECCOMP_RET_USER_NOTIF;
        let wronly = libc::O_WRONLY as u64;
        assert_eq!(run(&p, libc::SYS_openat, [0, 0, wronly, 0, 0, 0]), notif);
        let tmpfile = (libc::O_TMPFILE | libc::O_RDWR) as u64;
        assert_eq!(
            run(&p, libc::SYS_openat, [0, 0, tmpfile, 0o600, 0, 0]),
            notif
        );
        for nr in [
            libc::SYS_mkdirat,
            libc::SYS_renameat2,
            libc::SYS_linkat,
            libc::SYS_symlinkat,
            libc::SYS_fsetxattr,
            libc::SYS_setxattr,
            libc::SYS_umask,
        ] {
            assert_eq!(run(&p, nr, [0; 6]), notif, "{nr}");
        }
        // Removals, ownership and times stay the kernel's.
        for nr in [libc::SYS_unlinkat, libc::SYS_fchownat, libc::SYS_truncate] {
            assert_eq!(run(&p, nr, [0; 6]), libc::SECCOMP_RET_ALLOW, "{nr}");
        }
        assert_eq!(run(&p, libc::SYS_utimensat, [3, 1, 0, 0, 0, 0]), ALLOW);
        // A mode change goes to the supervisor only when it has an execute bit.
        assert_eq!(run(&p, libc::SYS_fchmod, [3, 0o644, 0, 0, 0, 0]), ALLOW);
        assert_eq!(run(&p, libc::SYS_fchmod, [3, 0o744, 0, 0, 0, 0]), notif);
        assert_eq!(run(&p, libc::SYS_fchmodat, [3, 1, 0o601, 0, 0, 0]), notif);
        assert_eq!(run(&p, libc::SYS_fchmodat2, [3, 1, 0o600, 0, 0, 0]), ALLOW);
        // Observing, every one goes, but for fchmod, which names no path to report.
        let o = notifying(true);
        assert_eq!(run(&o, libc::SYS_fchmodat, [3, 1, 0o644, 0, 0, 0]), notif);
        assert_eq!(run(&o, libc::SYS_fchmod, [3, 0o644, 0, 0, 0, 0]), ALLOW);
        assert_eq!(run(&o, libc::SYS_fchmod, [3, 0o4644, 0, 0, 0, 0]), EPERM);
        assert_eq!(run(&o, libc::SYS_fchmod, [3, 0o755, 0, 0, 0, 0]), notif);
        assert_eq!(run(&o, libc::SYS_unlinkat, [0; 6]), notif);
        assert_eq!(
            run(&p, libc::SYS_connect, [0; 6]),
            libc::SECCOMP_RET_USER_NOTIF
        );
        assert_eq!(
            run(&p, libc::SYS_ptrace, [0; 6]),
            libc::SECCOMP_RET_ERRNO | DENY_ERRNO as u32
        );
        let refusing = prepare(
            true,
            true,
            PathCalls::PerformedAndObserved,
            Terminal::Reachable,
            Sockets::Unix,
        )
        .map(|p| p.refusing)
        .unwrap_or_default();
        assert_eq!(
            run(&refusing, libc::SYS_connect, [0; 6]),
            libc::SECCOMP_RET_ERRNO | libc::EACCES as u32
        );
        assert_eq!(
            run(
                &refusing,
                libc::SYS_socket,
                [libc::AF_INET as u64, 1, 0, 0, 0, 0]
            ),
            libc::SECCOMP_RET_ERRNO | DENY_ERRNO as u32
        );
    }

    fn refusing() -> Vec<libc::sock_filter> {
        match prepare(
            true,
            true,
            PathCalls::PerformedAndObserved,
            Terminal::Reachable,
            Sockets::Unix,
        ) {
            Ok(p) => p.refusing,
            Err(e) => panic!("{e}"),
        }
    }

    /// A pid whose low 32 bits are `pid` and whose high 32 bits are garbage: the kernel
    /// reads the low half only.
    fn garbage(pid: u64) -> u64 {
        0xdead_beef_0000_0000 | pid
    }

    const EPERM: u32 = libc::SECCOMP_RET_ERRNO | DENY_ERRNO as u32;
    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;

    #[test]
    fn calls_naming_another_process_are_refused_and_the_caller_itself_is_not() {
        let (p, observing) = (refusing(), notifying(true));
        let pid_first = [
            libc::SYS_prlimit64,
            libc::SYS_sched_setaffinity,
            libc::SYS_sched_setscheduler,
            libc::SYS_sched_setparam,
            libc::SYS_sched_setattr,
            libc::SYS_migrate_pages,
            libc::SYS_move_pages,
            libc::SYS_get_robust_list,
        ];
        for nr in pid_first {
            let name = syscall_name(nr);
            assert_eq!(run(&p, nr, [0, 7, 0, 0, 0, 0]), ALLOW, "{name}(0)");
            assert_eq!(run(&p, nr, [1234, 7, 0, 0, 0, 0]), EPERM, "{name}(1234)");
            assert_eq!(run(&p, nr, [1, 0, 0, 0, 0, 0]), EPERM, "{name}(1)");
            assert_eq!(run(&p, nr, [u64::from(u32::MAX), 0, 0, 0, 0, 0]), EPERM);
            assert_eq!(run(&p, nr, [garbage(1234), 0, 0, 0, 0, 0]), EPERM, "{name}");
            // Garbage above a 0 is still the caller to the kernel: allowed, as it does.
            assert_eq!(run(&p, nr, [garbage(0), 0, 0, 0, 0, 0]), ALLOW, "{name}");
            assert_eq!(
                run(&observing, nr, [1234, 0, 0, 0, 0, 0]),
                libc::SECCOMP_RET_USER_NOTIF,
                "{name} reported when observing"
            );
            assert_eq!(run(&observing, nr, [0; 6]), ALLOW, "{name}");
        }
        // setpgid(pid, pgid): a group of its own is fine, joining another is not.
        let setpgid = libc::SYS_setpgid;
        assert_eq!(run(&p, setpgid, [0; 6]), ALLOW);
        assert_eq!(run(&p, setpgid, [1234, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(run(&p, setpgid, [0, 1234, 0, 0, 0, 0]), EPERM);
        assert_eq!(run(&p, setpgid, [0, garbage(1234), 0, 0, 0, 0]), EPERM);
        for nr in [libc::SYS_kcmp, libc::SYS_process_mrelease] {
            assert_eq!(run(&p, nr, [0; 6]), EPERM, "{}", syscall_name(nr));
        }
    }

    #[test]
    fn priorities_only_of_the_caller_itself() {
        let p = refusing();
        let (process, pgrp, user) = (
            libc::PRIO_PROCESS as u64,
            libc::PRIO_PGRP as u64,
            libc::PRIO_USER as u64,
        );
        let setpriority = |which, who| run(&p, libc::SYS_setpriority, [which, who, 5, 0, 0, 0]);
        assert_eq!(setpriority(process, 0), ALLOW);
        assert_eq!(setpriority(garbage(process), garbage(0)), ALLOW);
        assert_eq!(setpriority(process, 1234), EPERM);
        assert_eq!(setpriority(process, garbage(1234)), EPERM);
        assert_eq!(
            setpriority(pgrp, 0),
            EPERM,
            "the caller's own group holds sandgate"
        );
        assert_eq!(setpriority(user, 0), EPERM, "every process of the uid");
        assert_eq!(setpriority(garbage(user), 0), EPERM);
        let ioprio_set = |which, who| run(&p, libc::SYS_ioprio_set, [which, who, 0x4007, 0, 0, 0]);
        assert_eq!(ioprio_set(IOPRIO_WHO_PROCESS, 0), ALLOW);
        assert_eq!(ioprio_set(IOPRIO_WHO_PROCESS, 1234), EPERM);
        assert_eq!(ioprio_set(IOPRIO_WHO_PROCESS, garbage(1234)), EPERM);
        assert_eq!(ioprio_set(2, 0), EPERM, "IOPRIO_WHO_PGRP");
        assert_eq!(ioprio_set(3, 0), EPERM, "IOPRIO_WHO_USER");
        // Reading priorities is left alone.
        assert_eq!(run(&p, libc::SYS_getpriority, [user, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(run(&p, libc::SYS_ioprio_get, [3, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(
            run(&p, libc::SYS_sched_getaffinity, [1234, 0, 0, 0, 0, 0]),
            ALLOW
        );
    }

    #[test]
    fn fcntl_refuses_leases_and_directory_notifications_only() {
        let p = refusing();
        let fcntl = |cmd: u64| run(&p, libc::SYS_fcntl, [0, cmd, 0, 0, 0, 0]);
        for refused in [libc::F_SETLEASE, libc::F_NOTIFY] {
            assert_eq!(fcntl(refused as u64), EPERM);
            assert_eq!(fcntl(garbage(refused as u64)), EPERM);
        }
        for ok in [
            libc::F_GETFL,
            libc::F_SETFL,
            libc::F_GETLEASE,
            libc::F_SETLK,
            libc::F_DUPFD_CLOEXEC,
        ] {
            assert_eq!(fcntl(ok as u64), ALLOW, "{ok}");
        }
    }

    #[test]
    fn prctl_refuses_core_scheduling_only() {
        let p = refusing();
        let prctl = |option| run(&p, libc::SYS_prctl, [option, 1, 1234, 0, 0, 0]);
        assert_eq!(prctl(PR_SCHED_CORE), EPERM);
        assert_eq!(prctl(garbage(PR_SCHED_CORE)), EPERM);
        assert_eq!(prctl(libc::PR_SET_NAME as u64), ALLOW);
        assert_eq!(prctl(libc::PR_SET_PDEATHSIG as u64), ALLOW);
    }

    #[test]
    fn terminal_takeover_requests_are_refused_and_ordinary_ones_are_not() {
        let (p, observing) = (refusing(), notifying(true));
        let ioctl = |prog: &[libc::sock_filter], request| {
            run(prog, libc::SYS_ioctl, [0, request, 0, 0, 0, 0])
        };
        const KDSKBENT: u64 = 0x4B47;
        const KDSKBSENT: u64 = 0x4B49;
        const VT_ACTIVATE: u64 = 0x5606;
        const VT_SETMODE: u64 = 0x5602;
        for request in
            TERMINAL_IOCTLS
                .into_iter()
                .chain([KDSKBENT, KDSKBSENT, VT_ACTIVATE, VT_SETMODE])
        {
            assert_eq!(ioctl(&p, request), EPERM, "{request:#x}");
            assert_eq!(ioctl(&p, garbage(request)), EPERM, "{request:#x}");
            assert_eq!(
                ioctl(&observing, request),
                libc::SECCOMP_RET_USER_NOTIF,
                "{request:#x}"
            );
        }
        let allowed = [
            0x5401,      // TCGETS
            0x5402,      // TCSETS
            0x5403,      // TCSETSW
            0x5404,      // TCSETSF
            0x540B,      // TCFLSH
            0x540D,      // TIOCNXCL
            0x540F,      // TIOCGPGRP
            0x5413,      // TIOCGWINSZ
            0x5429,      // TIOCGSID
            0x541B,      // FIONREAD
            0x4020_5436, // TIOCSIG
            0x8068_5600, // VIDIOC_QUERYCAP: V4L2 shares 'V' but carries direction and size
            0x5421,      // FIONBIO
        ];
        for request in allowed {
            assert_eq!(ioctl(&p, request), ALLOW, "{request:#x}");
            assert_eq!(ioctl(&observing, request), ALLOW, "{request:#x}");
        }
    }

    #[test]
    fn terminal_request_numbers_are_the_kernel_ones() {
        #[cfg(all(
            target_env = "gnu",
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        assert_eq!(
            TERMINAL_IOCTLS,
            [
                libc::TIOCSTI,
                libc::TIOCLINUX,
                libc::TIOCSPGRP,
                libc::TIOCSCTTY,
                libc::TIOCCONS,
                libc::TIOCSETD,
                libc::TIOCVHANGUP,
                libc::TIOCSLCKTRMIOS,
                libc::TIOCEXCL,
                libc::TCXONC,
                libc::TIOCSWINSZ,
            ]
            .map(u64::from)
        );
        assert_eq!(SESSION_IOCTLS, [libc::TIOCNOTTY].map(u64::from));
    }

    #[test]
    fn every_deny_list_call_has_one_entry_a_name_and_an_op() {
        let mut seen = std::collections::BTreeSet::new();
        for d in DENY_LIST {
            assert!(seen.insert(d.nr), "{} listed twice", d.name);
            assert_eq!(syscall_name(d.nr), d.name);
            assert!(!d.class.op.is_empty());
        }
        for o in path_calls() {
            assert!(seen.insert(o.nr), "{} both observed and denied", o.name);
            assert_eq!(syscall_name(o.nr), o.name);
        }
        assert_eq!(ioctl_class(TIOCSTI).op, "tiocsti");
        assert_eq!(ioctl_class(TIOCSPGRP).op, "terminal");
        assert_eq!(ioctl_class(TCXONC).op, "terminal");
        assert_eq!(ioctl_class(garbage(TIOCLINUX)).op, "tiocsti");
        assert_eq!(
            deny_list_entry(libc::SYS_prlimit64).map(|d| d.class),
            Some(Class {
                op: "process_control"
            })
        );
    }

    /// Every program [`prepare`] builds, by name, next to the linear reference.
    fn with_references() -> Vec<(String, Vec<libc::sock_filter>, Vec<libc::sock_filter>)> {
        let linear = |connect, paths, observe, terminal, sockets| {
            linear::program(connect, paths, observe, terminal, sockets)
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let mut out = Vec::new();
        for sockets in [Sockets::Unix, Sockets::UnixAndTcp] {
            for terminal in [Terminal::Reachable, Terminal::Unreachable] {
                for observe in [true, false] {
                    for paths in [
                        PathCalls::ToKernel,
                        PathCalls::Performed,
                        PathCalls::PerformedAndObserved,
                    ] {
                        let p = prepare(true, observe, paths, terminal, sockets)
                            .unwrap_or_else(|e| panic!("{e}"));
                        let notify = libc::SECCOMP_RET_USER_NOTIF;
                        out.push((
                            format!(
                                "notifying observe={observe} {paths:?} {terminal:?} {sockets:?}"
                            ),
                            p.notifying,
                            linear(notify, paths, observe, terminal, sockets),
                        ));
                        if observe && paths == PathCalls::ToKernel {
                            let eacces = libc::SECCOMP_RET_ERRNO | libc::EACCES as u32;
                            out.push((
                                format!("refusing {terminal:?} {sockets:?}"),
                                p.refusing,
                                linear(eacces, PathCalls::ToKernel, false, terminal, Sockets::Unix),
                            ));
                        }
                    }
                }
            }
        }
        out
    }

    /// Every constant the programs compare an argument with, or mask it by: the `k` of
    /// each comparison or `and` that follows a load of an argument.
    fn argument_constants(progs: &[&[libc::sock_filter]]) -> (BTreeSet<u32>, BTreeSet<u32>) {
        let (mut constants, mut masks) = (BTreeSet::new(), BTreeSet::new());
        for prog in progs {
            let mut on_argument = false;
            for i in prog.iter() {
                let code = u32::from(i.code);
                match code & 0x07 {
                    c if c == libc::BPF_LD => on_argument = i.k >= 16,
                    c if c == libc::BPF_ALU && on_argument => {
                        masks.insert(i.k);
                    }
                    c if c == libc::BPF_JMP && on_argument && code & 0xf0 != libc::BPF_JA => {
                        if code & 0xf0 == libc::BPF_JSET {
                            masks.insert(i.k);
                        }
                        constants.insert(i.k);
                    }
                    _ => {}
                }
            }
        }
        (constants, masks)
    }

    /// Argument values around every constant: the constant, ±1, 0, all ones, with and
    /// without each masked bit, and with the high half set.
    fn argument_values(constants: &BTreeSet<u32>, masks: &BTreeSet<u32>) -> Vec<u64> {
        const HIGH: u64 = 0xdead_beef_0000_0000;
        let mut values = BTreeSet::from([0, u64::MAX, u64::from(u32::MAX), HIGH, 1 << 32]);
        let bits: BTreeSet<u32> = masks
            .iter()
            .flat_map(|m| (0..32).map(move |b| m & (1 << b)))
            .filter(|b| *b != 0)
            .collect();
        for &c in constants {
            let near = [c, c.wrapping_add(1), c.wrapping_sub(1), u32::MAX];
            for v in near.map(u64::from) {
                values.extend([v, v | HIGH, v | 1 << 32]);
            }
            for b in &bits {
                values.extend([u64::from(c | b), u64::from(c & !b), HIGH | u64::from(c | b)]);
            }
        }
        values.into_iter().collect()
    }

    /// The programs beside their references, with every constant and mask any of them
    /// compares an argument with.
    #[allow(clippy::type_complexity)]
    fn references_and_their_constants() -> (
        Vec<(String, Vec<libc::sock_filter>, Vec<libc::sock_filter>)>,
        BTreeSet<u32>,
        BTreeSet<u32>,
    ) {
        let programs = with_references();
        let all: Vec<&[libc::sock_filter]> = programs
            .iter()
            .flat_map(|(_, tree, linear)| [&tree[..], &linear[..]])
            .collect();
        let (constants, masks) = argument_constants(&all);
        (programs, constants, masks)
    }

    /// The tree and the linear program built the way it used to be give the same answer
    /// for every architecture, syscall number and argument the rules can tell apart.
    #[test]
    fn the_search_tree_answers_as_the_linear_program_does() {
        let (programs, constants, masks) = references_and_their_constants();
        let values = argument_values(&constants, &masks);
        // Pairs of arguments (socket family and type, open flags and mode, …) from a
        // smaller set: each constant, as is, one above and with the high half set.
        let mut pair_values: BTreeSet<u64> = BTreeSet::from([0, u64::MAX]);
        for &c in &constants {
            let c = u64::from(c);
            pair_values.extend([c, c + 1, c | 0xdead_beef_0000_0000]);
        }
        for b in masks
            .iter()
            .flat_map(|m| (0..32).map(move |b| m & (1 << b)))
        {
            pair_values.insert(u64::from(b));
        }
        let pair_values: Vec<u64> = pair_values.into_iter().collect();
        let mut numbers: Vec<u32> = (0..=470).collect();
        numbers.extend((0..=470).map(|nr| nr | X32_SYSCALL_BIT));
        numbers.extend([0x3fff_ffff, 0x7fff_ffff, 0x8000_0000, u32::MAX]);
        let mut compared = 0usize;
        for (name, tree, linear) in &programs {
            let check = |arch: u32, nr: u32, args: [u64; 6]| {
                let (t, l) = (trace(tree, arch, nr, args), trace(linear, arch, nr, args));
                assert_eq!(
                    t.ret, l.ret,
                    "{name}: arch {arch:#x} nr {nr} args {args:#x?}"
                );
                t.read | l.read
            };
            for &nr in &numbers {
                for arch in [0, AUDIT_ARCH ^ 1, 0x4000_0003 /* i386 */] {
                    check(arch, nr, [0; 6]);
                }
                // Which arguments either program looks at for this number.
                let mut read = 0;
                for v in [0, u64::MAX, 0o7777, 0x5412] {
                    read |= check(AUDIT_ARCH, nr, [v; 6]);
                    compared += 1;
                }
                for &v in &constants {
                    read |= check(AUDIT_ARCH, nr, [u64::from(v); 6]);
                    compared += 1;
                }
                let positions: Vec<usize> = (0..6).filter(|p| read & 1 << p != 0).collect();
                for &p in &positions {
                    for &v in &values {
                        let mut args = [0; 6];
                        args[p] = v;
                        check(AUDIT_ARCH, nr, args);
                        args = [u64::MAX; 6];
                        args[p] = v;
                        check(AUDIT_ARCH, nr, args);
                        compared += 2;
                    }
                }
                for (n, &p) in positions.iter().enumerate() {
                    for &q in &positions[n + 1..] {
                        for &v in &pair_values {
                            for &w in &pair_values {
                                let mut args = [0; 6];
                                (args[p], args[q]) = (v, w);
                                check(AUDIT_ARCH, nr, args);
                                compared += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(compared > 1_000_000, "{compared} inputs compared");
    }

    /// Random inputs, all six arguments at once, on the numbers the programs look at: the
    /// exhaustive comparison above varies one argument or one pair at a time from a fixed
    /// set, so combinations of flags (a write open of a directory with a set-id mode, a
    /// unix socket type with its flag bits, clone's thread flags next to a namespace bit)
    /// and values between the listed ones are only reached here.
    #[test]
    fn random_inputs_get_the_same_answer_from_the_tree_and_the_linear_program() {
        let (programs, constants, masks) = references_and_their_constants();
        let constants: Vec<u32> = constants.into_iter().collect();
        let bits: Vec<u32> = masks
            .iter()
            .flat_map(|m| (0..32).map(move |b| m & (1 << b)))
            .filter(|b| *b != 0)
            .collect();
        let mut numbers: Vec<u32> = Vec::new();
        for (terminal, paths) in [
            (Terminal::Reachable, PathCalls::PerformedAndObserved),
            (Terminal::Unreachable, PathCalls::ToKernel),
        ] {
            let answers = Answers::notifying(true);
            let leaves = leaves(answers, paths, terminal, Sockets::UnixAndTcp)
                .unwrap_or_else(|e| panic!("{e}"));
            for &nr in leaves.keys() {
                numbers.extend([nr, nr + 1, nr.wrapping_sub(1), nr | X32_SYSCALL_BIT]);
            }
        }
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        };
        let value = |next: &mut dyn FnMut() -> u64| -> u64 {
            let pick = |next: &mut dyn FnMut() -> u64, n: usize| (next() % n as u64) as usize;
            let mut v = match next() % 5 {
                0 => next(),
                1 => u64::from(next() as u32),
                2 => next() % 0x1_0000,
                _ => u64::from(constants[pick(next, constants.len())]),
            };
            for _ in 0..next() % 4 {
                let b = u64::from(bits[pick(next, bits.len())]);
                v = if next() % 2 == 0 { v | b } else { v & !b };
            }
            match next() % 4 {
                0 => v | 0xdead_beef_0000_0000,
                1 => v & 0xffff_ffff,
                _ => v,
            }
        };
        let mut compared = 0usize;
        for _ in 0..150_000 {
            let nr = numbers[(next() % numbers.len() as u64) as usize];
            let args: [u64; 6] = std::array::from_fn(|_| value(&mut next));
            for (name, tree, linear) in &programs {
                let (t, l) = (
                    trace(tree, AUDIT_ARCH, nr, args),
                    trace(linear, AUDIT_ARCH, nr, args),
                );
                assert_eq!(t.ret, l.ret, "{name}: nr {nr} args {args:#x?}");
                compared += 1;
            }
        }
        assert!(compared > 1_000_000, "{compared}");
    }

    /// What the kernel does with the arguments, spelled out call by call for the cases the
    /// flag tables make easy to get wrong, independent of the linear reference (which
    /// shares the tables and so cannot catch a wrong one).
    #[test]
    fn argument_rules_follow_what_the_kernel_reads() {
        let (observing, refusing) = (notifying(true), refusing());
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        let o = |f: libc::c_int| f as u64;
        // A write open of a directory, with garbage in the mode register: no create, so no
        // set-id refusal; a write, so observed.
        let wr_dir = o(libc::O_WRONLY | libc::O_DIRECTORY);
        assert_eq!(
            run(&observing, libc::SYS_openat, [3, 1, wr_dir, 0o6755, 0, 0]),
            notify
        );
        assert_eq!(
            run(&refusing, libc::SYS_openat, [3, 1, wr_dir, 0o6755, 0, 0]),
            ALLOW
        );
        // O_TMPFILE with O_WRONLY or O_RDWR creates: its mode counts, in the low half only.
        for acc in [libc::O_WRONLY, libc::O_RDWR] {
            let tmp = o(acc | libc::O_TMPFILE);
            for mode in [0o4600, 0o2600, 0xffff_0000_0000_4600] {
                assert_eq!(
                    run(&refusing, libc::SYS_openat, [3, 1, tmp, mode, 0, 0]),
                    EPERM
                );
                assert_eq!(
                    run(&observing, libc::SYS_openat, [3, 1, tmp, mode, 0, 0]),
                    EPERM
                );
            }
            assert_eq!(
                run(&refusing, libc::SYS_openat, [3, 1, tmp, 1 << 32, 0, 0]),
                ALLOW
            );
        }
        // O_CREAT in the high half of the flags register is no O_CREAT (flags is an int).
        let high_creat = o(libc::O_RDONLY) | (o(libc::O_CREAT) << 32);
        assert_eq!(
            run(
                &refusing,
                libc::SYS_openat,
                [3, 1, high_creat, 0o4755, 0, 0]
            ),
            ALLOW
        );
        // Every write flag alone sends an open to the supervisor, with every other bit.
        for flag in [libc::O_WRONLY, libc::O_RDWR, libc::O_CREAT, libc::O_TRUNC] {
            for extra in [0, libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_DIRECTORY] {
                let flags = o(flag | extra);
                assert_eq!(
                    run(&observing, libc::SYS_openat, [3, 1, flags, 0o644, 0, 0]),
                    notify,
                    "{flags:#x}"
                );
            }
        }
        // utimensat: a path pointer with only its high half set is a path.
        assert_eq!(
            run(&observing, libc::SYS_utimensat, [3, 1 << 32, 0, 0, 0, 0]),
            notify
        );
        assert_eq!(
            run(&observing, libc::SYS_utimensat, [3, 0, 0, 0, 0, 0]),
            ALLOW
        );
        // clone: glibc's thread and fork flags pass; any namespace bit among them does not.
        let thread = 0x003d_0f00u64;
        let fork = 0x0120_0011u64;
        for base in [thread, fork] {
            assert_eq!(
                run(&refusing, libc::SYS_clone, [base, 0, 0, 0, 0, 0]),
                ALLOW
            );
            for flag in CLONE_NAMESPACE_FLAGS {
                assert_eq!(
                    run(&refusing, libc::SYS_clone, [base | flag, 0, 0, 0, 0, 0]),
                    EPERM,
                    "{flag:#x}"
                );
            }
        }
        // socket: a stream or seqpacket unix socket with its flag bits passes; a datagram
        // one, or any other family, does not, whatever the high halves hold.
        let unix = libc::AF_UNIX as u64;
        let flags = o(libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK);
        for nr in [libc::SYS_socket, libc::SYS_socketpair] {
            for kind in [libc::SOCK_STREAM, libc::SOCK_SEQPACKET] {
                let kind = o(kind) | flags;
                assert_eq!(run(&refusing, nr, [unix, kind, 0, 0, 0, 0]), ALLOW);
                assert_eq!(run(&refusing, nr, [garbage(unix), kind, 0, 0, 0, 0]), ALLOW);
            }
            for kind in [libc::SOCK_DGRAM, libc::SOCK_RAW, libc::SOCK_RDM, 10] {
                let kind = o(kind) | flags;
                assert_eq!(run(&refusing, nr, [unix, kind, 0, 0, 0, 0]), EPERM);
                assert_eq!(run(&refusing, nr, [unix, garbage(kind), 0, 0, 0, 0]), EPERM);
            }
            let stream = o(libc::SOCK_STREAM);
            for family in [
                libc::AF_INET,
                libc::AF_INET6,
                libc::AF_NETLINK,
                libc::AF_PACKET,
            ] {
                let family = family as u64;
                assert_eq!(run(&refusing, nr, [family, stream, 0, 0, 0, 0]), EPERM);
                assert_eq!(
                    run(&refusing, nr, [garbage(family), stream, 0, 0, 0, 0]),
                    EPERM
                );
            }
        }
        // ioctl: the console ranges end where they should.
        let ioctl = |request| run(&refusing, libc::SYS_ioctl, [0, request, 0, 0, 0, 0]);
        for (allowed, refused) in [(0x4aff, 0x4b00), (0x4c00, 0x4bff), (0x55ff, 0x5600)] {
            assert_eq!(ioctl(allowed), ALLOW, "{allowed:#x}");
            assert_eq!(ioctl(refused), EPERM, "{refused:#x}");
        }
        assert_eq!(ioctl(0x5700), ALLOW);
        assert_eq!(ioctl(0x1_0000_4b00), EPERM);
        assert_eq!(ioctl(0x1_4b00), ALLOW);
        // A foreign architecture is killed whatever the number; an x32 number refused.
        for arch in [0x4000_0003, 0xC000_00B7, 0xC000_003E ^ 0x8000_0000] {
            if arch != AUDIT_ARCH {
                for nr in [0, libc::SYS_read as u32, libc::SYS_ptrace as u32] {
                    assert_eq!(
                        trace(&refusing, arch, nr, [0; 6]).ret,
                        libc::SECCOMP_RET_KILL_PROCESS
                    );
                }
            }
        }
        for nr in [
            X32_SYSCALL_BIT,
            X32_SYSCALL_BIT | libc::SYS_read as u32,
            u32::MAX,
        ] {
            assert_eq!(
                trace(&refusing, AUDIT_ARCH, nr, [0; 6]).ret,
                EPERM,
                "{nr:#x}"
            );
        }
    }

    /// Calls every program runs all the time, with ordinary arguments.
    fn hot_calls() -> Vec<(&'static str, i64, [u64; 6])> {
        let rdonly = (libc::O_RDONLY | libc::O_CLOEXEC) as u64;
        vec![
            ("read", libc::SYS_read, [3, 0x7f00_0000, 4096, 0, 0, 0]),
            ("write", libc::SYS_write, [1, 0x7f00_0000, 12, 0, 0, 0]),
            ("close", libc::SYS_close, [3, 0, 0, 0, 0, 0]),
            (
                "openat read-only",
                libc::SYS_openat,
                [0, 0x7f00_0000, rdonly, 0, 0, 0],
            ),
            ("fstat", libc::SYS_fstat, [3, 0x7f00_0000, 0, 0, 0, 0]),
            ("mmap", libc::SYS_mmap, [0, 4096, 3, 0x22, u64::MAX, 0]),
            ("futex", libc::SYS_futex, [0x7f00_0000, 0x80, 1, 0, 0, 0]),
            (
                "ioctl FIONREAD",
                libc::SYS_ioctl,
                [0, 0x541B, 0x7f00_0000, 0, 0, 0],
            ),
            (
                "ioctl TCGETS",
                libc::SYS_ioctl,
                [0, 0x5401, 0x7f00_0000, 0, 0, 0],
            ),
            (
                "fcntl F_GETFL",
                libc::SYS_fcntl,
                [0, libc::F_GETFL as u64, 0, 0, 0, 0],
            ),
        ]
    }

    /// The hot calls leave the filter within a dozen or so instructions, and the programs
    /// are a fraction of the linear one's length (each install verifies and compiles it).
    /// With `--nocapture` it prints the numbers behind these bounds.
    #[test]
    fn hot_calls_leave_the_filter_within_a_few_instructions() {
        for (name, tree, linear) in with_references() {
            println!(
                "{name}: {} instructions (linear {})",
                tree.len(),
                linear.len()
            );
            assert!(
                tree.len() * 3 < linear.len() && tree.len() < 256,
                "{name}: {} instructions, the linear one {}",
                tree.len(),
                linear.len()
            );
            for (call, nr, args) in hot_calls() {
                let t = trace(&tree, AUDIT_ARCH, nr as u32, args);
                let l = trace(&linear, AUDIT_ARCH, nr as u32, args);
                println!("  {call}: {} (linear {})", t.steps, l.steps);
                assert_eq!(t.ret, ALLOW, "{name}: {call}");
                let bound = if t.read == 0 { 12 } else { 18 };
                assert!(
                    t.steps <= bound,
                    "{name}: {call} ran {} instructions",
                    t.steps
                );
            }
        }
    }
}
