//! Test harness: runs a command confined the way the machines sandgate must work on confine
//! it, reproduced on a kernel that allows everything.
//!
//! `container docker -- CMD…` (as root): what a default Docker container gives its root —
//! Docker's default capability set and what Docker's default seccomp profile refuses to a
//! container without `CAP_SYS_ADMIN` or `CAP_SYS_PTRACE`. The translation is this file's
//! own, read from moby's sources: the capabilities from `daemon/pkg/oci/caps/defaults.go`
//! (`DefaultCapabilities`), the profile from `profiles/seccomp/default.json` of
//! moby/profiles at tag `seccomp/v0.2.3` (vendored by moby 29), with runc's rule that a
//! call numbered above the profile's highest is answered `ENOSYS`. It lists what the
//! profile refuses rather than the ~350 calls it allows: every call below is refused
//! there, and no call sandgate or the test programs make is missing from its allow list.
//!
//! `container no-userns -- CMD…`: an unprivileged user on a system that refuses it user
//! namespaces (`unshare(CLONE_NEWUSER)` and `clone` with it fail with EPERM, as with
//! `user.max_user_namespaces=0`); run as root, it becomes uid and gid 65534.
//!
//! As root the filters are installed while `CAP_SYS_ADMIN` stands in for
//! `no_new_privs`, which is left unset, as neither Docker nor a login sets it; not root,
//! the kernel needs `no_new_privs` first (the harness then reproduces a container's
//! non-root user).

// A test harness: its filters are constants of this file, and one that does not build is
// a defect of it, which `expect` reports.
#![allow(unsafe_code, clippy::undocumented_unsafe_blocks, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition,
    SeccompFilter, SeccompRule,
};

/// Refused by Docker's default profile to a container without the capabilities that
/// unlock them (`includes.caps`), or never allowed at all: EPERM.
const DOCKER_REFUSES: &[libc::c_long] = &[
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_pidfd_getfd,
    libc::SYS_kcmp,
    libc::SYS_process_madvise,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    libc::SYS_syslog,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_quotactl,
    libc::SYS_get_mempolicy,
    libc::SYS_mbind,
    libc::SYS_set_mempolicy,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_vhangup,
    libc::SYS_fanotify_init,
    libc::SYS_lookup_dcookie,
];

/// `set_mempolicy_home_node`, `lsm_get_self_attr`, `lsm_set_self_attr`, `lsm_list_modules`
/// and `quotactl_fd`: refused too (numbers the libc crate may not name).
const DOCKER_REFUSES_NEW: &[libc::c_long] = &[443, 450, 459, 460, 461];

/// The highest call Docker's default profile names on x86_64 (`removexattrat`); runc
/// answers every higher number ENOSYS.
const HIGHEST_NAMED: libc::c_long = 466;

/// `clone` is allowed only without these flags (`(flags & 0x7E020000) == 0`).
const CLONE_NAMESPACES: u64 = 0x7E02_0000;

/// Docker's 14 default capabilities; every other one is dropped.
const DOCKER_CAPS: &[u32] = &[
    0,  // CAP_CHOWN
    1,  // CAP_DAC_OVERRIDE
    3,  // CAP_FOWNER
    4,  // CAP_FSETID
    5,  // CAP_KILL
    6,  // CAP_SETGID
    7,  // CAP_SETUID
    8,  // CAP_SETPCAP
    10, // CAP_NET_BIND_SERVICE
    13, // CAP_NET_RAW
    18, // CAP_SYS_CHROOT
    27, // CAP_MKNOD
    29, // CAP_AUDIT_WRITE
    31, // CAP_SETFCAP
];

fn cond(arg: u8, op: Op, value: u64) -> SeccompCondition {
    SeccompCondition::new(arg, Len::Qword, op, value).expect("a condition of this file")
}

fn errno(e: i32) -> SeccompAction {
    SeccompAction::Errno(e as u32)
}

/// The filter: `rules` answered by their own action each (one filter per action, since a
/// seccompiler filter has one match action).
fn filter(rules: BTreeMap<i64, Vec<SeccompRule>>, action: SeccompAction) -> BpfProgram {
    #[cfg(target_arch = "x86_64")]
    let arch = seccompiler::TargetArch::x86_64;
    #[cfg(target_arch = "aarch64")]
    let arch = seccompiler::TargetArch::aarch64;
    SeccompFilter::new(rules, SeccompAction::Allow, action, arch)
        .and_then(TryInto::try_into)
        .expect("the filters of this file build")
}

/// Docker's default profile, as the filters to install (EPERM ones, then ENOSYS ones).
fn docker() -> Vec<BpfProgram> {
    let mut eperm: BTreeMap<i64, Vec<SeccompRule>> = DOCKER_REFUSES
        .iter()
        .chain(DOCKER_REFUSES_NEW)
        .map(|nr| (*nr, vec![]))
        .collect();
    // clone: refused when any namespace flag is set. (One rule per flag bit: seccompiler
    // compares with equality after the mask, so "any of them" is one rule each.)
    let clone_rules: Vec<SeccompRule> = (0..64)
        .map(|bit| 1u64 << bit)
        .filter(|flag| CLONE_NAMESPACES & flag != 0)
        .map(|flag| SeccompRule::new(vec![cond(0, Op::MaskedEq(flag), flag)]).expect("a rule"))
        .collect();
    eperm.insert(libc::SYS_clone, clone_rules);
    // socket: AF_ALG (38) and AF_VSOCK (40) refused.
    eperm.insert(
        libc::SYS_socket,
        [38u64, 40]
            .iter()
            .map(|family| SeccompRule::new(vec![cond(0, Op::Eq, *family)]).expect("a rule"))
            .collect(),
    );
    // personality: only 0, 0x8, 0x20000, 0x20008 and 0xffffffff.
    let allowed = [0u64, 0x8, 0x20000, 0x20008, 0xffff_ffff];
    eperm.insert(
        libc::SYS_personality,
        vec![
            SeccompRule::new(allowed.iter().map(|v| cond(0, Op::Ne, *v)).collect())
                .expect("a rule"),
        ],
    );
    let mut enosys: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    enosys.insert(libc::SYS_clone3, vec![]);
    for nr in HIGHEST_NAMED + 1..HIGHEST_NAMED + 64 {
        enosys.insert(nr, vec![]);
    }
    vec![
        filter(eperm, errno(libc::EPERM)),
        filter(enosys, errno(libc::ENOSYS)),
    ]
}

/// A system without user namespaces for this user.
fn no_userns() -> Vec<BpfProgram> {
    let newuser = libc::CLONE_NEWUSER as u64;
    let mut eperm: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in [libc::SYS_unshare, libc::SYS_clone] {
        eperm.insert(
            nr,
            vec![SeccompRule::new(vec![cond(0, Op::MaskedEq(newuser), newuser)]).expect("a rule")],
        );
    }
    // clone3's flags lie in memory: answered ENOSYS, so the C library falls back to clone.
    let mut enosys: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    enosys.insert(libc::SYS_clone3, vec![]);
    vec![
        filter(eperm, errno(libc::EPERM)),
        filter(enosys, errno(libc::ENOSYS)),
    ]
}

/// Keeps only Docker's capabilities: the bounding set first (while CAP_SETPCAP is still
/// effective), then the effective, permitted and inheritable sets; ambient cleared.
fn drop_to_docker_caps() -> std::io::Result<()> {
    use caps::{CapSet, CapsHashSet};
    let keep: CapsHashSet = caps::all()
        .into_iter()
        .filter(|c| DOCKER_CAPS.contains(&(c.index() as u32)))
        .collect();
    let io = |e: caps::errors::CapsError| std::io::Error::other(e.to_string());
    for cap in caps::all().into_iter().filter(|c| !keep.contains(c)) {
        caps::drop(None, CapSet::Bounding, cap).map_err(io)?;
    }
    caps::clear(None, CapSet::Ambient).map_err(io)?;
    caps::set(None, CapSet::Inheritable, &CapsHashSet::new()).map_err(io)?;
    caps::set(None, CapSet::Effective, &keep).map_err(io)?;
    caps::set(None, CapSet::Permitted, &keep).map_err(io)?;
    Ok(())
}

/// Installs `program` without setting `no_new_privs` (`seccompiler::apply_filter` sets
/// it): the caller's `CAP_SYS_ADMIN` allows it.
fn install(program: &BpfProgram) -> std::io::Result<()> {
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &prog as *const libc::sock_fprog,
        )
    };
    match rc {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Drops to uid and gid 65534 with no supplementary groups.
fn become_nobody() -> std::io::Result<()> {
    let ok = |rc: libc::c_int| match rc {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    };
    unsafe {
        ok(libc::setgroups(0, std::ptr::null()))?;
        ok(libc::setresgid(65534, 65534, 65534))?;
        ok(libc::setresuid(65534, 65534, 65534))
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (kind, command) = match args.split_first() {
        Some((kind, rest)) if rest.first().map(String::as_str) == Some("--") && rest.len() > 1 => {
            (kind.as_str(), &rest[1..])
        }
        _ => {
            eprintln!("usage: container docker|no-userns -- COMMAND [ARG…]");
            std::process::exit(64);
        }
    };
    let filters = match kind {
        "docker" => docker(),
        "no-userns" => no_userns(),
        other => {
            eprintln!("container: unknown kind {other}");
            std::process::exit(64);
        }
    };
    let is_docker = kind == "docker";
    let mut cmd = std::process::Command::new(&command[0]);
    cmd.args(&command[1..]);
    unsafe {
        cmd.pre_exec(move || {
            // Not root, the kernel takes a filter only under no_new_privs (a container's
            // non-root user, a user without user namespaces as the tests' own uid).
            let root = libc::geteuid() == 0;
            if !root && libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            for program in &filters {
                install(program)?;
            }
            match (root, is_docker) {
                (true, true) => drop_to_docker_caps(),
                (true, false) => become_nobody(),
                (false, _) => Ok(()),
            }
        });
    }
    let e = cmd.exec();
    eprintln!("container: cannot run {}: {e}", command[0]);
    std::process::exit(127);
}
