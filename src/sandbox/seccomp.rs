//! The seccomp layer: the syscall deny list of DESIGN §3 and the gate that routes
//! `connect` to the supervisor.
//!
//! One filter, built before forking, in two parts:
//! - the **gate** (raw BPF, since seccompiler has no user-notification action): kills a
//!   foreign-architecture call, refuses x32 calls (which would dodge the deny list's
//!   syscall numbers), answers `clone3` with `ENOSYS` (its flags live in memory BPF cannot
//!   read, so glibc falls back to `clone`, whose flags the deny list checks), sends every
//!   `connect` to the supervisor and, when observing, every call that could change the
//!   filesystem by path;
//! - the **deny list** (seccompiler), which the gate falls through to: calls no restricted
//!   command needs and that widen what it can reach — io_uring (it bypasses seccomp for
//!   the operations it queues), ptrace and process_vm_*, bpf, perf_event_open,
//!   userfaultfd, keyrings, the mount family, namespace creation, kexec and modules,
//!   `TIOCSTI`/`TIOCLINUX`, every socket family but `AF_UNIX`, and unix *datagram* sockets
//!   (see below) — refused with `EPERM`, or, when observing, handed to the supervisor,
//!   which records a marker and refuses with the same `EPERM`.
//!
//! It must be one filter: the kernel lets a process tree hold one listener, and a
//! notification returned by a filter without one fails with ENOSYS. BPF jumps are
//! relative, so the gate is simply prepended to seccompiler's program.
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

/// Builds the deny list; `action` is what a match gets.
fn deny_list(action: SeccompAction) -> Result<BpfProgram, BuildError> {
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
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, action, TARGET)
        .map_err(|e| BuildError(e.to_string()))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| BuildError(e.to_string()))
}

/// Marks deny-list returns that are to become user notifications: seccompiler has no such
/// action, so the list is compiled with `Trace(MARK)` and those returns are rewritten.
const MARK: u32 = 0x5a6e;

/// The deny list answering with `action`; with `notify`, the supervisor answers instead
/// (it records a marker, then refuses with the same errno).
fn deny_program(notify: bool) -> Result<Vec<libc::sock_filter>, BuildError> {
    let action = if notify {
        SeccompAction::Trace(MARK)
    } else {
        SeccompAction::Errno(DENY_ERRNO as u32)
    };
    let program = deny_list(action)?;
    let marked = libc::SECCOMP_RET_TRACE | MARK;
    Ok(program
        .into_iter()
        .map(|i| {
            let k = if notify && i.code == (libc::BPF_RET | libc::BPF_K) as u16 && i.k == marked {
                libc::SECCOMP_RET_USER_NOTIF
            } else {
                i.k
            };
            libc::sock_filter {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k,
            }
        })
        .collect())
}

/// Where a gate jump goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum To {
    /// The next instruction.
    Next,
    /// Over the next `n` instructions.
    Skip(u8),
    Allow,
    Notify,
    Eperm,
    Enosys,
    Connect,
    Kill,
}

/// A gate instruction before its jump targets are resolved.
struct Insn {
    code: u32,
    k: u32,
    jt: To,
    jf: To,
}

/// Syscalls whose path argument can name a file to create, change or remove, with the
/// index of the argument holding the open flags when only write opens qualify.
pub fn observed_calls() -> Vec<(libc::c_long, Option<u32>)> {
    #[allow(unused_mut)]
    let mut calls = vec![
        (libc::SYS_openat, Some(2)),
        (libc::SYS_openat2, None),
        (libc::SYS_mkdirat, None),
        (libc::SYS_mknodat, None),
        (libc::SYS_unlinkat, None),
        (libc::SYS_renameat, None),
        (libc::SYS_renameat2, None),
        (libc::SYS_linkat, None),
        (libc::SYS_symlinkat, None),
        (libc::SYS_truncate, None),
        (libc::SYS_fchmodat, None),
        (libc::SYS_fchmodat2, None),
        (libc::SYS_fchownat, None),
        (libc::SYS_setxattr, None),
        (libc::SYS_lsetxattr, None),
        (libc::SYS_removexattr, None),
        (libc::SYS_lremovexattr, None),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_open, Some(1)),
        (libc::SYS_creat, None),
        (libc::SYS_mkdir, None),
        (libc::SYS_mknod, None),
        (libc::SYS_unlink, None),
        (libc::SYS_rmdir, None),
        (libc::SYS_rename, None),
        (libc::SYS_link, None),
        (libc::SYS_symlink, None),
        (libc::SYS_chmod, None),
        (libc::SYS_chown, None),
        (libc::SYS_lchown, None),
        (libc::SYS_utimes, None),
        (libc::SYS_futimesat, None),
    ]);
    calls
}

/// Open flags that make an open a write: it can change or create the file.
const WRITE_FLAGS: u32 = (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u32;

/// Builds the gate that runs before the deny list: foreign architectures are killed, x32
/// refused, `clone3` answered ENOSYS, `connect` given `connect`; with `observe`, every call
/// of [`observed_calls`] that can change the filesystem by path goes to the supervisor
/// (read-only opens and `utimensat(fd, NULL, …)` never leave the kernel). Everything else
/// falls through to the deny list that follows.
fn gate(connect: u32, observe: bool) -> Vec<libc::sock_filter> {
    use libc::{BPF_ABS, BPF_JEQ, BPF_JGE, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_W};
    const NR: u32 = 0;
    const ARCH: u32 = 4;
    /// Offset of the low (`hi` false) or high 32 bits of argument `n`, little-endian.
    const fn arg(n: u32, hi: bool) -> u32 {
        16 + 8 * n + if hi { 4 } else { 0 }
    }
    let ld = |k| Insn {
        code: BPF_LD | BPF_W | BPF_ABS,
        k,
        jt: To::Next,
        jf: To::Next,
    };
    let jeq = |k, jt, jf| Insn {
        code: BPF_JMP | BPF_JEQ | BPF_K,
        k,
        jt,
        jf,
    };
    let mut body = vec![
        ld(ARCH),
        jeq(AUDIT_ARCH, To::Next, To::Kill),
        ld(NR),
        Insn {
            code: BPF_JMP | BPF_JGE | BPF_K,
            k: X32_SYSCALL_BIT,
            jt: To::Eperm,
            jf: To::Next,
        },
        jeq(libc::SYS_clone3 as u32, To::Enosys, To::Next),
        jeq(libc::SYS_connect as u32, To::Connect, To::Next),
    ];
    if observe {
        // utimensat(dirfd, NULL, …) touches the fd's own file: no path, nothing to report.
        body.extend([
            jeq(libc::SYS_utimensat as u32, To::Next, To::Skip(4)),
            ld(arg(1, false)),
            jeq(0, To::Next, To::Notify),
            ld(arg(1, true)),
            jeq(0, To::Allow, To::Notify),
        ]);
        for (nr, flags) in observed_calls() {
            match flags {
                None => body.push(jeq(nr as u32, To::Notify, To::Next)),
                Some(index) => body.extend([
                    jeq(nr as u32, To::Next, To::Skip(2)),
                    ld(arg(index, false)),
                    Insn {
                        code: BPF_JMP | BPF_JSET | BPF_K,
                        k: WRITE_FLAGS,
                        jt: To::Notify,
                        jf: To::Allow,
                    },
                ]),
            }
        }
    }
    assemble(body, connect)
}

/// Resolves the gate's jumps: the body, a jump over the returns into the deny list, then
/// one return per target.
fn assemble(body: Vec<Insn>, connect: u32) -> Vec<libc::sock_filter> {
    use libc::{BPF_JA, BPF_JMP, BPF_K, BPF_RET};
    let returns = [
        (To::Allow, libc::SECCOMP_RET_ALLOW),
        (To::Notify, libc::SECCOMP_RET_USER_NOTIF),
        (To::Eperm, libc::SECCOMP_RET_ERRNO | DENY_ERRNO as u32),
        (To::Enosys, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        (To::Connect, connect),
        (To::Kill, libc::SECCOMP_RET_KILL_PROCESS),
    ];
    let first_return = body.len() + 1;
    let offset = |at: usize, to: To| -> u8 {
        let target = match to {
            To::Next => at + 1,
            To::Skip(n) => at + 1 + usize::from(n),
            other => first_return + returns.iter().position(|(t, _)| *t == other).unwrap_or(0),
        };
        // The gate is a few dozen instructions: every jump fits in a byte.
        u8::try_from(target - (at + 1)).unwrap_or(u8::MAX)
    };
    let mut out: Vec<libc::sock_filter> = body
        .iter()
        .enumerate()
        .map(|(at, i)| libc::sock_filter {
            code: i.code as u16,
            jt: offset(at, i.jt),
            jf: offset(at, i.jf),
            k: i.k,
        })
        .collect();
    out.push(libc::sock_filter {
        code: (BPF_JMP | BPF_JA) as u16,
        jt: 0,
        jf: 0,
        k: returns.len() as u32,
    });
    out.extend(returns.iter().map(|(_, k)| libc::sock_filter {
        code: (BPF_RET | BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: *k,
    }));
    out
}

/// The seccomp programs of one call, ready to install.
pub struct Prepared {
    /// Gate + deny list in one filter with the listener (user notification available).
    notifying: Vec<libc::sock_filter>,
    /// Gate + deny list refusing by errno, `connect` included: no listener to be had.
    refusing: Vec<libc::sock_filter>,
    notify: bool,
}

/// Builds the programs. `notify`: the kernel supports user notification; `observe`:
/// filesystem calls and deny-list refusals go to the supervisor so it can report them.
///
/// # Errors
/// Only on a deny list seccompiler refuses to compile, which is a build defect.
pub fn prepare(notify: bool, observe: bool) -> Result<Prepared, BuildError> {
    let mut notifying = gate(libc::SECCOMP_RET_USER_NOTIF, observe);
    notifying.extend(deny_program(observe)?);
    let mut refusing = gate(libc::SECCOMP_RET_ERRNO | libc::EACCES as u32, false);
    refusing.extend(deny_program(false)?);
    Ok(Prepared {
        notifying,
        refusing,
        notify,
    })
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

    /// Runs a classic-BPF seccomp program over one `seccomp_data`, as the kernel would.
    fn run(prog: &[libc::sock_filter], nr: i64, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&(nr as u32).to_le_bytes());
        data[4..8].copy_from_slice(&AUDIT_ARCH.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let i = prog[pc];
            let code = u32::from(i.code);
            pc += 1;
            match code & 0x07 {
                0x00 => {
                    acc = u32::from_le_bytes(
                        data[i.k as usize..i.k as usize + 4]
                            .try_into()
                            .unwrap_or_default(),
                    )
                }
                0x06 => return i.k,
                0x05 => {
                    let cond = match code & 0xf0 {
                        0x00 => {
                            pc += i.k as usize;
                            continue;
                        }
                        0x10 => acc == i.k,
                        0x20 => acc > i.k,
                        0x30 => acc >= i.k,
                        0x40 => acc & i.k != 0,
                        other => panic!("jump op {other:#x}"),
                    };
                    pc += usize::from(if cond { i.jt } else { i.jf });
                }
                0x04 => acc &= i.k,
                other => panic!("class {other:#x}"),
            }
        }
    }

    fn notifying(observe: bool) -> Vec<libc::sock_filter> {
        match prepare(true, observe) {
            Ok(p) => p.notifying,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn the_gate_sends_write_opens_to_the_supervisor_and_lets_reads_through() {
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
    fn without_observation_only_connect_is_notified() {
        let p = notifying(false);
        assert_eq!(
            run(&p, libc::SYS_openat, [0, 0, libc::O_WRONLY as u64, 0, 0, 0]),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(
            run(&p, libc::SYS_connect, [0; 6]),
            libc::SECCOMP_RET_USER_NOTIF
        );
        assert_eq!(
            run(&p, libc::SYS_ptrace, [0; 6]),
            libc::SECCOMP_RET_ERRNO | DENY_ERRNO as u32
        );
        let refusing = prepare(true, true).map(|p| p.refusing).unwrap_or_default();
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
}
