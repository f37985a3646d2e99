//! The seccomp layer: the syscall deny list of DESIGN §3 and the gate that routes
//! `connect` to the supervisor.
//!
//! Two filters, both built before forking:
//! - the **deny list** (seccompiler): calls no restricted command needs and that widen what
//!   it can reach — io_uring (it bypasses seccomp for the operations it queues), ptrace and
//!   process_vm_*, bpf, perf_event_open, userfaultfd, keyrings, the mount family,
//!   namespace creation, kexec and modules, `TIOCSTI`/`TIOCLINUX`, every socket family but
//!   `AF_UNIX`, and unix *datagram* sockets (see below) — all refused with `EPERM`;
//! - the **gate** (raw BPF, since seccompiler has no user-notification action): kills a
//!   foreign-architecture call, refuses x32 calls (which would dodge the deny list's
//!   syscall numbers), answers `clone3` with `ENOSYS` (its flags live in memory BPF cannot
//!   read, so glibc falls back to `clone`, whose flags the deny list checks), and sends
//!   every `connect` to the supervisor.
//!
//! Why unix datagram sockets are refused: a datagram socket can send to any pathname with
//! `sendto`/`sendmsg`, and for `sendmsg` the address sits inside a `msghdr` that BPF cannot
//! read and that another thread can rewrite after the supervisor looked at it. Stream and
//! seqpacket sockets ignore or refuse a send address, so mediating `connect` — where the
//! supervisor connects on its own copy of the address — covers every way to reach a
//! pathname socket.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::OwnedFd;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
};

use crate::sys;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(target_arch = "x86_64")]
const TARGET: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const TARGET: TargetArch = TargetArch::aarch64;

/// `__X32_SYSCALL_BIT`: x32 calls share x86_64's audit arch but not its numbers.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;
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

/// Calls refused whatever their arguments.
const DENIED: &[libc::c_long] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    libc::SYS_process_madvise,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_open_by_handle_at,
];

/// The errno the deny list answers with.
pub const DENY_ERRNO: i32 = libc::EPERM;

/// Both filters, ready to install.
pub struct Prepared {
    deny: BpfProgram,
    gate_notify: Vec<libc::sock_filter>,
    gate_refuse: Vec<libc::sock_filter>,
    /// False when the kernel cannot notify: `connect` is then refused outright.
    notify: bool,
}

/// The error for a deny list seccompiler would not compile (a build defect).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the seccomp deny list: {0}")]
pub struct BuildError(String);

fn dword(arg: u8, op: Op, value: u64) -> Result<Cond, BuildError> {
    Cond::new(arg, Len::Dword, op, value).map_err(|e| BuildError(e.to_string()))
}

fn rule(conds: Vec<Cond>) -> Result<SeccompRule, BuildError> {
    SeccompRule::new(conds).map_err(|e| BuildError(e.to_string()))
}

/// Rules refusing every socket family but AF_UNIX and every unix type but stream/seqpacket.
fn socket_rules() -> Result<Vec<SeccompRule>, BuildError> {
    let mut rules = vec![rule(vec![dword(0, Op::Ne, libc::AF_UNIX as u64)?])?];
    for kind in (0..=SOCK_TYPE_MASK).filter(|t| *t != SOCK_STREAM && *t != SOCK_SEQPACKET) {
        rules.push(rule(vec![
            dword(0, Op::Eq, libc::AF_UNIX as u64)?,
            dword(1, Op::MaskedEq(SOCK_TYPE_MASK), kind)?,
        ])?);
    }
    Ok(rules)
}

/// Builds the deny list.
fn deny_list() -> Result<BpfProgram, BuildError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|nr| (*nr, Vec::new())).collect();
    rules.insert(libc::SYS_socket, socket_rules()?);
    rules.insert(libc::SYS_socketpair, socket_rules()?);
    rules.insert(
        libc::SYS_clone,
        CLONE_NAMESPACE_FLAGS
            .iter()
            .map(|f| {
                rule(vec![Cond::new(0, Len::Qword, Op::MaskedEq(*f), *f)
                    .map_err(|e| BuildError(e.to_string()))?])
            })
            .collect::<Result<_, _>>()?,
    );
    // The request number of ioctl is an unsigned int: compare only its low 32 bits, as the
    // kernel does, so high garbage bits cannot slip past.
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![dword(1, Op::Eq, TIOCSTI)?])?,
            rule(vec![dword(1, Op::Eq, TIOCLINUX)?])?,
        ],
    );
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(DENY_ERRNO as u32),
        TARGET,
    )
    .map_err(|e| BuildError(e.to_string()))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| BuildError(e.to_string()))
}

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// Builds the gate; `connect_action` is what `connect` gets.
fn gate(connect_action: u32) -> Vec<libc::sock_filter> {
    use libc::{BPF_ABS, BPF_JEQ, BPF_JGE, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W};
    const NR: u32 = 0; // offsetof(struct seccomp_data, nr)
    const ARCH: u32 = 4; // offsetof(struct seccomp_data, arch)
    vec![
        /* 0 */ stmt(BPF_LD | BPF_W | BPF_ABS, ARCH),
        /* 1 */ jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH, 1, 0),
        /* 2 */ stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_KILL_PROCESS),
        /* 3 */ stmt(BPF_LD | BPF_W | BPF_ABS, NR),
        /* 4 */ jump(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 3, 0),
        /* 5 */ jump(BPF_JMP | BPF_JEQ | BPF_K, libc::SYS_clone3 as u32, 3, 0),
        /* 6 */ jump(BPF_JMP | BPF_JEQ | BPF_K, libc::SYS_connect as u32, 3, 0),
        /* 7 */ stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ALLOW),
        /* 8 */ stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ERRNO | DENY_ERRNO as u32),
        /* 9 */
        stmt(
            BPF_RET | BPF_K,
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        ),
        /* 10 */ stmt(BPF_RET | BPF_K, connect_action),
    ]
}

/// Builds both filters. `notify` says whether the kernel supports user notification.
///
/// # Errors
/// Only on a deny list seccompiler refuses to compile, which is a build defect.
pub fn prepare(notify: bool) -> Result<Prepared, BuildError> {
    Ok(Prepared {
        deny: deny_list()?,
        gate_notify: gate(libc::SECCOMP_RET_USER_NOTIF),
        gate_refuse: gate(libc::SECCOMP_RET_ERRNO | libc::EACCES as u32),
        notify,
    })
}

impl Prepared {
    /// Installs both filters on the calling thread (no_new_privs must already be set) and
    /// returns the notification listener, or `None` when `connect` is refused outright:
    /// the kernel has no user notification, or an enclosing sandgate already holds the one
    /// listener a process tree may have (`EBUSY`).
    pub fn apply(&self) -> io::Result<Option<OwnedFd>> {
        seccompiler::apply_filter(&self.deny).map_err(|e| match e {
            seccompiler::Error::Seccomp(err) => err,
            other => io::Error::other(other.to_string()),
        })?;
        if self.notify {
            match sys::seccomp_install(&self.gate_notify, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER) {
                Ok(listener) => return Ok(listener),
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => return Err(e),
            }
        }
        sys::seccomp_install(&self.gate_refuse, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_list_compiles() {
        assert!(deny_list().is_ok());
    }

    #[test]
    fn gate_jumps_land_on_the_intended_returns() {
        let prog = gate(libc::SECCOMP_RET_USER_NOTIF);
        let target = |i: usize| i + 1 + usize::from(prog[i].jt);
        assert_eq!(
            prog[target(4)].k,
            libc::SECCOMP_RET_ERRNO | DENY_ERRNO as u32
        );
        assert_eq!(
            prog[target(5)].k,
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32
        );
        assert_eq!(prog[target(6)].k, libc::SECCOMP_RET_USER_NOTIF);
    }
}
