use super::*;
use crate::syscalls::requests::{IOPRIO_WHO_PROCESS, PR_SCHED_CORE};
use crate::syscalls::SYS_OPEN_TREE_ATTR;
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

/// Every row of the table is handled by the filter as its rule says: a deny-list call
/// refused (reported when observing), a path call sent to the supervisor when it acts
/// (a performed one whenever there is a listener) and refused with a set-id bit in the
/// mode it sets, `connect` mediated, `umask` seen, the unreadable ones `ENOSYS`.
#[test]
fn every_row_of_the_table_is_in_the_filter() {
    use crate::syscalls::testing::{acting, setting_set_id};
    let (performing, observing) = (notifying(false), notifying(true));
    let deciding = prepare(
        true,
        false,
        PathCalls::Decided,
        Terminal::Reachable,
        Sockets::Unix,
    )
    .map(|p| p.notifying)
    .unwrap();
    let kernel = prepare(
        true,
        false,
        PathCalls::ToKernel,
        Terminal::Reachable,
        Sockets::Unix,
    )
    .map(|p| p.notifying)
    .unwrap();
    for row in syscalls::all() {
        let (nr, name) = (row.nr, row.name);
        let args = acting(row);
        match row.rule {
            // With namespaces of its own the sandbox reaches only its own IPC objects.
            Rule::Denied {
                args: Args::WithoutNamespaces,
                ..
            } => {
                assert_eq!(run(&deciding, nr, args), EPERM, "{name} without namespaces");
                for p in [&performing, &observing, &refusing()] {
                    assert_eq!(run(p, nr, args), ALLOW, "{name}");
                }
            }
            Rule::Denied { .. } => {
                assert_eq!(run(&performing, nr, args), EPERM, "{name}");
                assert_eq!(run(&observing, nr, args), NOTIFY, "{name} observed");
                assert_eq!(run(&deciding, nr, args), EPERM, "{name} without namespaces");
                assert_eq!(run(&refusing(), nr, args), EPERM, "{name}");
            }
            Rule::Path(call) => {
                let (observed, performed) = match call.need {
                    Need::Performed => (NOTIFY, NOTIFY),
                    Need::Observed => (NOTIFY, ALLOW),
                    Need::Decided => (ALLOW, ALLOW),
                };
                assert_eq!(run(&observing, nr, args), observed, "{name} observed");
                assert_eq!(run(&deciding, nr, args), NOTIFY, "{name} decided");
                assert_eq!(run(&performing, nr, args), performed, "{name}");
                assert_eq!(run(&kernel, nr, args), ALLOW, "{name} to the kernel");
                if let Some(set_id) = setting_set_id(row) {
                    for p in [&performing, &observing, &deciding, &kernel] {
                        assert_eq!(run(p, nr, set_id), EPERM, "{name} setuid");
                    }
                }
            }
            Rule::Connect => {
                assert_eq!(run(&performing, nr, args), NOTIFY, "{name}");
                assert_eq!(run(&kernel, nr, args), NOTIFY, "{name}");
            }
            Rule::Bind => {
                assert_eq!(run(&deciding, nr, args), NOTIFY, "{name}");
                for p in [&performing, &observing, &kernel] {
                    assert_eq!(run(p, nr, args), ALLOW, "{name}");
                }
            }
            Rule::Umask => {
                assert_eq!(run(&performing, nr, args), NOTIFY, "{name}");
                assert_eq!(run(&kernel, nr, args), ALLOW, "{name}");
            }
            Rule::Unreadable => {
                assert_eq!(run(&observing, nr, args), ENOSYS, "{name}");
            }
        }
    }
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
        let name = syscalls::name(nr);
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
        assert_eq!(run(&p, nr, [0; 6]), EPERM, "{}", syscalls::name(nr));
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
    let ioctl =
        |prog: &[libc::sock_filter], request| run(prog, libc::SYS_ioctl, [0, request, 0, 0, 0, 0]);
    const KDSKBENT: u64 = 0x4B47;
    const KDSKBSENT: u64 = 0x4B49;
    const VT_ACTIVATE: u64 = 0x5606;
    const VT_SETMODE: u64 = 0x5602;
    for request in TERMINAL_IOCTLS
        .into_iter()
        .chain(FILE_ATTRIBUTE_IOCTLS)
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

/// Every program [`prepare`] builds, by name, next to the linear reference.
fn with_references() -> Vec<(String, Vec<libc::sock_filter>, Vec<libc::sock_filter>)> {
    let linear = |connect, paths, observe, terminal, sockets| {
        linear::program(connect, paths, observe, terminal, sockets).unwrap()
    };
    let mut out = Vec::new();
    for sockets in [Sockets::Unix, Sockets::UnixAndTcp] {
        for terminal in [Terminal::Reachable, Terminal::Unreachable] {
            for observe in [true, false] {
                for paths in [
                    PathCalls::ToKernel,
                    PathCalls::Performed,
                    PathCalls::PerformedAndObserved,
                    PathCalls::Decided,
                ] {
                    let p = prepare(true, observe, paths, terminal, sockets).unwrap();
                    let notify = libc::SECCOMP_RET_USER_NOTIF;
                    out.push((
                        format!("notifying observe={observe} {paths:?} {terminal:?} {sockets:?}"),
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
    // One program after another on each core: the comparison is the suite's longest test.
    let compare = |name: &str, tree: &[libc::sock_filter], linear: &[libc::sock_filter]| {
        let mut compared = 0usize;
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
        compared
    };
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let per_core = programs.len().div_ceil(cores);
    let compared: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = programs
            .chunks(per_core)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|(name, tree, linear)| compare(name, tree, linear))
                        .sum::<usize>()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| panic!("a comparison failed")))
            .sum()
    });
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
        let leaves = leaves(answers, paths, terminal, Sockets::UnixAndTcp).unwrap();
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
