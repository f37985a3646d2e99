//! The rows of the table (see the module above for what derives from them).

use super::requests::IOPRIO_WHO_PROCESS;
use super::{Args, Dirfd, Effect, Follow, Need, PathCall, Rule, SetsMode, Slot, Syscall, When};
use super::{SYS_FILE_SETATTR, SYS_OPEN_TREE_ATTR, SYS_REMOVEXATTRAT, SYS_SETXATTRAT};

const fn denied(nr: libc::c_long, name: &'static str, op: &'static str, args: Args) -> Syscall {
    Syscall {
        nr,
        name,
        rule: Rule::Denied { op, args },
    }
}

/// The deny list: every call a restricted profile refuses, with its marker name and `op`.
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
/// Terminal: see `TERMINAL_IOCTLS`.
pub(super) const DENY_LIST: &[Syscall] = &[
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
    // SysV IPC and POSIX message queues: an identifier or queue name reaches the host's
    // objects when the sandbox has no IPC namespace of its own.
    denied(libc::SYS_shmget, "shmget", "ipc", Args::WithoutNamespaces),
    denied(libc::SYS_shmat, "shmat", "ipc", Args::WithoutNamespaces),
    denied(libc::SYS_shmctl, "shmctl", "ipc", Args::WithoutNamespaces),
    denied(libc::SYS_semget, "semget", "ipc", Args::WithoutNamespaces),
    denied(libc::SYS_semop, "semop", "ipc", Args::WithoutNamespaces),
    denied(
        libc::SYS_semtimedop,
        "semtimedop",
        "ipc",
        Args::WithoutNamespaces,
    ),
    denied(libc::SYS_semctl, "semctl", "ipc", Args::WithoutNamespaces),
    denied(libc::SYS_msgget, "msgget", "ipc", Args::WithoutNamespaces),
    denied(libc::SYS_msgsnd, "msgsnd", "ipc", Args::WithoutNamespaces),
    denied(libc::SYS_msgrcv, "msgrcv", "ipc", Args::WithoutNamespaces),
    denied(libc::SYS_msgctl, "msgctl", "ipc", Args::WithoutNamespaces),
    denied(libc::SYS_mq_open, "mq_open", "ipc", Args::WithoutNamespaces),
    denied(
        libc::SYS_mq_unlink,
        "mq_unlink",
        "ipc",
        Args::WithoutNamespaces,
    ),
    denied(
        libc::SYS_mq_timedsend,
        "mq_timedsend",
        "ipc",
        Args::WithoutNamespaces,
    ),
    denied(
        libc::SYS_mq_timedreceive,
        "mq_timedreceive",
        "ipc",
        Args::WithoutNamespaces,
    ),
    denied(
        libc::SYS_mq_notify,
        "mq_notify",
        "ipc",
        Args::WithoutNamespaces,
    ),
    denied(
        libc::SYS_mq_getsetattr,
        "mq_getsetattr",
        "ipc",
        Args::WithoutNamespaces,
    ),
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

/// A path call the supervisor performs in the writable areas, sent whenever there is a
/// listener.
const fn performed(
    nr: libc::c_long,
    name: &'static str,
    effect: Effect,
    paths: &'static [Slot],
) -> Syscall {
    path(
        nr,
        name,
        PathCall {
            effect,
            need: Need::Performed,
            when: When::Always,
            sets_mode: None,
            paths,
        },
    )
}

/// A path call the kernel decides alone, sent only to be observed.
const fn observed(
    nr: libc::c_long,
    name: &'static str,
    effect: Effect,
    paths: &'static [Slot],
) -> Syscall {
    path(
        nr,
        name,
        PathCall {
            effect,
            need: Need::Observed,
            when: When::Always,
            sets_mode: None,
            paths,
        },
    )
}

/// A change through a descriptor that only the supervisor of a run without a mount
/// namespace looks at ([`Need::Decided`]).
const fn decided(nr: libc::c_long, name: &'static str, effect: Effect) -> Syscall {
    path(
        nr,
        name,
        PathCall {
            effect,
            need: Need::Decided,
            when: When::Always,
            sets_mode: None,
            paths: &[],
        },
    )
}

const fn path(nr: libc::c_long, name: &'static str, call: PathCall) -> Syscall {
    Syscall {
        nr,
        name,
        rule: Rule::Path(call),
    }
}

/// An open: performed when it writes; the mode it creates with in `mode`.
const fn open(
    nr: libc::c_long,
    name: &'static str,
    flags: u32,
    mode: u32,
    paths: &'static [Slot],
) -> Syscall {
    path(
        nr,
        name,
        PathCall {
            effect: Effect::Open,
            need: Need::Performed,
            when: When::WriteOpen { flags },
            sets_mode: Some(SetsMode {
                mode,
                flags: Some(flags),
            }),
            paths,
        },
    )
}

/// A call that sets the mode in argument `mode` (never with a set-id bit).
const fn sets_mode(
    nr: libc::c_long,
    name: &'static str,
    effect: Effect,
    when: When,
    mode: u32,
    paths: &'static [Slot],
) -> Syscall {
    path(
        nr,
        name,
        PathCall {
            effect,
            need: Need::Performed,
            when,
            sets_mode: Some(SetsMode { mode, flags: None }),
            paths,
        },
    )
}

/// A change of mode: see [`When::ModeChange`].
const fn chmod(nr: libc::c_long, name: &'static str, mode: u32, paths: &'static [Slot]) -> Syscall {
    sets_mode(
        nr,
        name,
        Effect::Chmod,
        When::ModeChange {
            mode,
            by_fd: paths.is_empty(),
        },
        mode,
        paths,
    )
}

/// A path in argument `path` relative to the dirfd in argument `dirfd`.
const fn at(dirfd: u8, path: u8, follow: Follow) -> Slot {
    Slot {
        dirfd: Dirfd::Arg(dirfd),
        path,
        follow,
    }
}

/// A path in argument `path` relative to the caller's cwd.
const fn cwd(path: u8, follow: Follow) -> Slot {
    Slot {
        dirfd: Dirfd::Cwd,
        path,
        follow,
    }
}

/// Follows unless argument `arg` has `AT_SYMLINK_NOFOLLOW`.
const fn unless_nofollow(arg: u8) -> Follow {
    Follow::Unless {
        arg,
        bit: libc::AT_SYMLINK_NOFOLLOW as u64,
    }
}

const NEVER: Follow = Follow::Never;
const ALWAYS: Follow = Follow::Always;

/// The path calls every architecture has.
pub(super) const PATH_CALLS: &[Syscall] = &[
    open(
        libc::SYS_openat,
        "openat",
        2,
        3,
        &[at(0, 1, Follow::Open { flags: 2 })],
    ),
    performed(
        libc::SYS_mkdirat,
        "mkdirat",
        Effect::Create,
        &[at(0, 1, NEVER)],
    ),
    sets_mode(
        libc::SYS_mknodat,
        "mknodat",
        Effect::Mknod,
        When::Always,
        2,
        &[at(0, 1, NEVER)],
    ),
    observed(
        libc::SYS_unlinkat,
        "unlinkat",
        Effect::Remove,
        &[at(0, 1, NEVER)],
    ),
    performed(
        libc::SYS_renameat,
        "renameat",
        Effect::Rename,
        &[at(0, 1, NEVER), at(2, 3, NEVER)],
    ),
    performed(
        libc::SYS_renameat2,
        "renameat2",
        Effect::Rename,
        &[at(0, 1, NEVER), at(2, 3, NEVER)],
    ),
    performed(
        libc::SYS_linkat,
        "linkat",
        Effect::Link,
        &[
            at(
                0,
                1,
                Follow::If {
                    arg: 4,
                    bit: libc::AT_SYMLINK_FOLLOW as u64,
                },
            ),
            at(2, 3, NEVER),
        ],
    ),
    performed(
        libc::SYS_symlinkat,
        "symlinkat",
        Effect::Create,
        &[at(1, 2, NEVER)],
    ),
    observed(
        libc::SYS_truncate,
        "truncate",
        Effect::Truncate,
        &[cwd(0, ALWAYS)],
    ),
    chmod(libc::SYS_fchmod, "fchmod", 1, &[]),
    chmod(libc::SYS_fchmodat, "fchmodat", 2, &[at(0, 1, ALWAYS)]),
    chmod(
        libc::SYS_fchmodat2,
        "fchmodat2",
        2,
        &[at(0, 1, unless_nofollow(3))],
    ),
    observed(
        libc::SYS_fchownat,
        "fchownat",
        Effect::Chown,
        &[at(0, 1, unless_nofollow(4))],
    ),
    path(
        libc::SYS_utimensat,
        "utimensat",
        PathCall {
            effect: Effect::Utimes,
            need: Need::Observed,
            when: When::WithPath { ptr: 1 },
            sets_mode: None,
            paths: &[at(0, 1, unless_nofollow(3))],
        },
    ),
    performed(
        libc::SYS_setxattr,
        "setxattr",
        Effect::Xattr,
        &[cwd(0, ALWAYS)],
    ),
    performed(
        libc::SYS_lsetxattr,
        "lsetxattr",
        Effect::Xattr,
        &[cwd(0, NEVER)],
    ),
    performed(libc::SYS_fsetxattr, "fsetxattr", Effect::Xattr, &[]),
    decided(libc::SYS_fchown, "fchown", Effect::Chown),
    decided(libc::SYS_fremovexattr, "fremovexattr", Effect::Xattr),
    observed(
        libc::SYS_removexattr,
        "removexattr",
        Effect::Xattr,
        &[cwd(0, ALWAYS)],
    ),
    observed(
        libc::SYS_lremovexattr,
        "lremovexattr",
        Effect::Xattr,
        &[cwd(0, NEVER)],
    ),
    performed(
        SYS_SETXATTRAT,
        "setxattrat",
        Effect::Xattr,
        &[at(0, 1, unless_nofollow(2))],
    ),
    observed(
        SYS_REMOVEXATTRAT,
        "removexattrat",
        Effect::Xattr,
        &[at(0, 1, unless_nofollow(2))],
    ),
    observed(
        SYS_FILE_SETATTR,
        "file_setattr",
        Effect::Xattr,
        &[at(0, 1, unless_nofollow(4))],
    ),
    performed(
        libc::SYS_inotify_add_watch,
        "inotify_add_watch",
        Effect::Watch,
        &[cwd(
            1,
            Follow::Unless {
                arg: 2,
                bit: libc::IN_DONT_FOLLOW as u64,
            },
        )],
    ),
];

/// The legacy path calls of x86_64.
#[cfg(target_arch = "x86_64")]
pub(super) const PATH_CALLS_LEGACY: &[Syscall] = &[
    open(
        libc::SYS_open,
        "open",
        1,
        2,
        &[cwd(0, Follow::Open { flags: 1 })],
    ),
    sets_mode(
        libc::SYS_creat,
        "creat",
        Effect::Open,
        When::Always,
        1,
        &[cwd(0, ALWAYS)],
    ),
    performed(libc::SYS_mkdir, "mkdir", Effect::Create, &[cwd(0, NEVER)]),
    sets_mode(
        libc::SYS_mknod,
        "mknod",
        Effect::Mknod,
        When::Always,
        1,
        &[cwd(0, NEVER)],
    ),
    observed(libc::SYS_unlink, "unlink", Effect::Remove, &[cwd(0, NEVER)]),
    observed(libc::SYS_rmdir, "rmdir", Effect::Remove, &[cwd(0, NEVER)]),
    performed(
        libc::SYS_rename,
        "rename",
        Effect::Rename,
        &[cwd(0, NEVER), cwd(1, NEVER)],
    ),
    performed(
        libc::SYS_link,
        "link",
        Effect::Link,
        &[cwd(0, NEVER), cwd(1, NEVER)],
    ),
    performed(
        libc::SYS_symlink,
        "symlink",
        Effect::Create,
        &[cwd(1, NEVER)],
    ),
    chmod(libc::SYS_chmod, "chmod", 1, &[cwd(0, ALWAYS)]),
    observed(libc::SYS_chown, "chown", Effect::Chown, &[cwd(0, ALWAYS)]),
    observed(libc::SYS_lchown, "lchown", Effect::Chown, &[cwd(0, NEVER)]),
    observed(
        libc::SYS_utimes,
        "utimes",
        Effect::Utimes,
        &[cwd(0, ALWAYS)],
    ),
    observed(
        libc::SYS_futimesat,
        "futimesat",
        Effect::Utimes,
        &[at(0, 1, ALWAYS)],
    ),
    observed(libc::SYS_utime, "utime", Effect::Utimes, &[cwd(0, ALWAYS)]),
];
#[cfg(not(target_arch = "x86_64"))]
pub(super) const PATH_CALLS_LEGACY: &[Syscall] = &[];

/// The calls the supervisor always mediates, and those answered `ENOSYS`.
pub(super) const MEDIATED: &[Syscall] = &[
    Syscall {
        nr: libc::SYS_connect,
        name: "connect",
        rule: Rule::Connect,
    },
    Syscall {
        nr: libc::SYS_umask,
        name: "umask",
        rule: Rule::Umask,
    },
    Syscall {
        nr: libc::SYS_bind,
        name: "bind",
        rule: Rule::Bind,
    },
    Syscall {
        nr: libc::SYS_clone3,
        name: "clone3",
        rule: Rule::Unreadable,
    },
    Syscall {
        nr: libc::SYS_openat2,
        name: "openat2",
        rule: Rule::Unreadable,
    },
];
