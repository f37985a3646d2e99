use std::collections::BTreeSet;

use super::testing::{acting, dirfd, path_ptr};
use super::*;

#[test]
fn every_call_has_one_row_a_name_and_an_op() {
    let mut seen = BTreeSet::new();
    for row in all() {
        assert!(seen.insert(row.nr), "{} has two rows", row.name);
        assert!(!row.name.is_empty());
        assert_eq!(name(row.nr), row.name);
        assert!(!row.op(&acting(row)).is_empty(), "{}", row.name);
    }
    assert_eq!(name(libc::SYS_getpid), "unknown");
}

#[test]
fn an_ioctl_is_named_by_its_request() {
    let ioctl = lookup(libc::SYS_ioctl).unwrap_or_else(|| panic!("ioctl has no row"));
    let with = |request: u64| ioctl.op(&[0, request, 0, 0, 0, 0]);
    assert_eq!(with(requests::TIOCSTI), "tiocsti");
    assert_eq!(with(requests::TIOCLINUX | 0xdead_0000_0000), "tiocsti");
    assert_eq!(with(requests::TIOCSPGRP), "terminal");
    assert_eq!(with(requests::TCXONC), "terminal");
    let prlimit = lookup(libc::SYS_prlimit64).unwrap_or_else(|| panic!("prlimit64"));
    assert_eq!(prlimit.op(&[0; 6]), "process_control");
}

/// Every path slot lies in an argument of its own, and the paths found in a call's
/// arguments are where its row says.
#[test]
fn every_path_call_finds_its_paths_where_its_row_says() {
    for row in all() {
        let Rule::Path(call) = row.rule else { continue };
        let mut used = BTreeSet::new();
        for slot in call.paths {
            assert!(
                used.insert(slot.path),
                "{}: argument {} twice",
                row.name,
                slot.path
            );
            if let Dirfd::Arg(n) = slot.dirfd {
                assert!(used.insert(n), "{}: argument {n} twice", row.name);
            }
        }
        let found = call.paths(&acting(row));
        assert_eq!(found.len(), call.paths.len(), "{}", row.name);
        for (at, slot) in found.iter().zip(call.paths) {
            assert_eq!(at.ptr, path_ptr(slot.path), "{}", row.name);
            let expected = match slot.dirfd {
                Dirfd::Cwd => libc::AT_FDCWD,
                Dirfd::Arg(n) => dirfd(n) as i32,
            };
            assert_eq!(at.dirfd, expected, "{}", row.name);
        }
        // A call on a descriptor is a performed mode or attribute change, or an owner or
        // attribute change only the supervisor of a run without namespaces decides.
        if call.paths.is_empty() {
            match call.need {
                Need::Performed => assert!(
                    matches!(call.effect, Effect::Chmod | Effect::Xattr),
                    "{}",
                    row.name
                ),
                Need::Decided => assert!(
                    matches!(call.effect, Effect::Chown | Effect::Xattr),
                    "{}",
                    row.name
                ),
                Need::Observed => panic!("{} names no path to observe", row.name),
            }
        } else {
            assert_ne!(call.need, Need::Decided, "{}", row.name);
        }
    }
}

#[test]
fn an_open_names_its_path_only_when_it_writes() {
    let openat = path_call(libc::SYS_openat).unwrap_or_else(|| panic!("openat"));
    let with = |flags: i32| openat.paths(&[3, 9, flags as u64, 0o644, 0, 0]);
    assert!(with(libc::O_RDONLY).is_empty());
    assert!(with(libc::O_RDONLY | libc::O_NOFOLLOW).is_empty());
    assert!(with(libc::O_WRONLY)[0].follow);
    assert!(!with(libc::O_WRONLY | libc::O_NOFOLLOW)[0].follow);
    // O_CREAT|O_EXCL refuses a symlink where it would create: nothing is followed.
    assert!(!with(libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL)[0].follow);
    assert!(with(libc::O_WRONLY | libc::O_CREAT)[0].follow);
    assert!(openat.exclusive_create(&[3, 9, (libc::O_CREAT | libc::O_EXCL) as u64, 0, 0, 0]));
    assert!(!openat.exclusive_create(&[3, 9, libc::O_CREAT as u64, 0, 0, 0]));
}

#[test]
fn links_and_flags_follow_as_the_kernel_does() {
    let follow_of = |nr, args: [u64; 6]| {
        path_call(nr)
            .unwrap_or_else(|| panic!("{nr}"))
            .paths(&args)
            .iter()
            .map(|p| p.follow)
            .collect::<Vec<_>>()
    };
    let follow = libc::AT_SYMLINK_FOLLOW as u64;
    let nofollow = libc::AT_SYMLINK_NOFOLLOW as u64;
    assert_eq!(
        follow_of(libc::SYS_linkat, [3, 9, 4, 7, 0, 0]),
        [false, false]
    );
    assert_eq!(
        follow_of(libc::SYS_linkat, [3, 9, 4, 7, follow, 0]),
        [true, false]
    );
    assert_eq!(follow_of(libc::SYS_fchownat, [3, 9, 0, 0, 0, 0]), [true]);
    assert_eq!(
        follow_of(libc::SYS_fchownat, [3, 9, 0, 0, nofollow, 0]),
        [false]
    );
    assert_eq!(
        follow_of(libc::SYS_fchmodat, [3, 9, 0, nofollow, 0, 0]),
        [true]
    );
    assert_eq!(
        follow_of(libc::SYS_fchmodat2, [3, 9, 0, nofollow, 0, 0]),
        [false]
    );
    let dont_follow = u64::from(libc::IN_DONT_FOLLOW);
    assert_eq!(
        follow_of(libc::SYS_inotify_add_watch, [5, 9, dont_follow, 0, 0, 0]),
        [false]
    );
    assert_eq!(
        follow_of(libc::SYS_inotify_add_watch, [5, 9, 0x100, 0, 0, 0]),
        [true]
    );
}

/// The table's contents, written out once more: a row changed, added or dropped by mistake
/// fails here, whatever the filter and the supervisor derive from it.
#[test]
fn the_rows_are_the_ones_meant() {
    let names = |want: fn(&Rule) -> bool| -> Vec<&str> {
        all().filter(|s| want(&s.rule)).map(|s| s.name).collect()
    };
    assert_eq!(
        names(|r| matches!(r, Rule::Denied { .. })),
        [
            "io_uring_setup",
            "io_uring_enter",
            "io_uring_register",
            "ptrace",
            "process_vm_readv",
            "process_vm_writev",
            "pidfd_getfd",
            "process_madvise",
            "bpf",
            "perf_event_open",
            "userfaultfd",
            "keyctl",
            "add_key",
            "request_key",
            "mount",
            "umount2",
            "pivot_root",
            "chroot",
            "move_mount",
            "open_tree",
            "fsopen",
            "fsconfig",
            "fsmount",
            "fspick",
            "mount_setattr",
            "open_tree_attr",
            "unshare",
            "setns",
            "clone",
            "kexec_load",
            "kexec_file_load",
            "init_module",
            "finit_module",
            "delete_module",
            "open_by_handle_at",
            "socket",
            "socketpair",
            "ioctl",
            "prlimit64",
            "setpriority",
            "sched_setaffinity",
            "sched_setscheduler",
            "sched_setparam",
            "sched_setattr",
            "ioprio_set",
            "migrate_pages",
            "move_pages",
            "get_robust_list",
            "setpgid",
            "setsid",
            "kcmp",
            "shmget",
            "shmat",
            "shmctl",
            "semget",
            "semop",
            "semtimedop",
            "semctl",
            "msgget",
            "msgsnd",
            "msgrcv",
            "msgctl",
            "mq_open",
            "mq_unlink",
            "mq_timedsend",
            "mq_timedreceive",
            "mq_notify",
            "mq_getsetattr",
            "process_mrelease",
            "prctl",
            "fcntl",
            "fanotify_init",
        ]
    );
    let performed = |r: &Rule| matches!(r, Rule::Path(c) if c.need == Need::Performed);
    let observed = |r: &Rule| matches!(r, Rule::Path(c) if c.need == Need::Observed);
    let mut want_performed = vec![
        "openat",
        "mkdirat",
        "mknodat",
        "renameat",
        "renameat2",
        "linkat",
        "symlinkat",
        "fchmod",
        "fchmodat",
        "fchmodat2",
        "setxattr",
        "lsetxattr",
        "fsetxattr",
        "setxattrat",
        "inotify_add_watch",
    ];
    let mut want_observed = vec![
        "unlinkat",
        "truncate",
        "fchownat",
        "utimensat",
        "removexattr",
        "lremovexattr",
        "removexattrat",
        "file_setattr",
    ];
    if cfg!(target_arch = "x86_64") {
        want_performed.extend([
            "open", "creat", "mkdir", "mknod", "rename", "link", "symlink", "chmod",
        ]);
        want_observed.extend([
            "unlink",
            "rmdir",
            "chown",
            "lchown",
            "utimes",
            "futimesat",
            "utime",
        ]);
    }
    assert_eq!(names(performed), want_performed);
    assert_eq!(names(observed), want_observed);
    assert_eq!(
        names(|r| matches!(r, Rule::Path(c) if c.need == Need::Decided)),
        ["fchown", "fremovexattr"]
    );
    assert_eq!(
        names(|r| !matches!(r, Rule::Denied { .. } | Rule::Path(_))),
        ["connect", "umask", "bind", "clone3", "openat2"]
    );
}
