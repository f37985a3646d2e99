//! The filter as it was first built, kept for tests as the reference the search tree is
//! checked against: a hand-assembled linear gate (architecture, x32, `clone3`/`openat2`,
//! `connect`, set-id bits, the observed path calls) prepended to seccompiler's linear
//! deny list, whose `Trace(MARK)` returns are rewritten into user notifications.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
};

use super::*;

#[cfg(target_arch = "x86_64")]
const TARGET: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const TARGET: TargetArch = TargetArch::aarch64;

/// The linear program: what [`super::program`] computes, instruction for instruction the
/// way it used to.
pub fn program(
    connect: u32,
    paths: PathCalls,
    observe: bool,
    terminal: Terminal,
    sockets: Sockets,
) -> Result<Vec<libc::sock_filter>, BuildError> {
    let mut p = gate(connect, paths);
    p.extend(deny_program(observe, terminal, sockets, paths)?);
    Ok(p)
}
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

/// As [`socket_rules`], with TCP over IPv4 and IPv6 (protocol 0 or `IPPROTO_TCP`) and
/// `NETLINK_ROUTE` (raw or datagram) allowed too.
fn socket_or_tcp_rules() -> Result<Vec<SeccompRule>, BuildError> {
    let unix = libc::AF_UNIX as u64;
    let (inet, inet6, netlink) = (
        libc::AF_INET as u64,
        libc::AF_INET6 as u64,
        libc::AF_NETLINK as u64,
    );
    let mut rules = vec![rule(vec![
        dword(0, Op::Ne, unix)?,
        dword(0, Op::Ne, inet)?,
        dword(0, Op::Ne, inet6)?,
        dword(0, Op::Ne, netlink)?,
    ])?];
    for kind in (0..=SOCK_TYPE_MASK).filter(|t| *t != SOCK_STREAM && *t != SOCK_SEQPACKET) {
        rules.push(rule(vec![
            dword(0, Op::Eq, unix)?,
            dword(1, Op::MaskedEq(SOCK_TYPE_MASK), kind)?,
        ])?);
    }
    for family in [inet, inet6] {
        for kind in (0..=SOCK_TYPE_MASK).filter(|t| *t != SOCK_STREAM) {
            rules.push(rule(vec![
                dword(0, Op::Eq, family)?,
                dword(1, Op::MaskedEq(SOCK_TYPE_MASK), kind)?,
            ])?);
        }
        rules.push(rule(vec![
            dword(0, Op::Eq, family)?,
            dword(2, Op::Ne, 0)?,
            dword(2, Op::Ne, libc::IPPROTO_TCP as u64)?,
        ])?);
    }
    let datagram = [libc::SOCK_RAW as u64, libc::SOCK_DGRAM as u64];
    for kind in (0..=SOCK_TYPE_MASK).filter(|t| !datagram.contains(t)) {
        rules.push(rule(vec![
            dword(0, Op::Eq, netlink)?,
            dword(1, Op::MaskedEq(SOCK_TYPE_MASK), kind)?,
        ])?);
    }
    rules.push(rule(vec![
        dword(0, Op::Eq, netlink)?,
        dword(2, Op::Ne, libc::NETLINK_ROUTE as u64)?,
    ])?);
    Ok(rules)
}

/// The rules refusing `args` (empty: the call is refused whatever its arguments).
fn rules(args: Args, terminal: Terminal) -> Result<Vec<SeccompRule>, BuildError> {
    let each = |conds: Vec<Vec<Cond>>| conds.into_iter().map(rule).collect();
    match args {
        Args::Any | Args::WhileTerminal | Args::WithoutNamespaces => Ok(Vec::new()),
        Args::OtherPid(n) => each(vec![vec![dword(n, Op::Ne, 0)?]]),
        Args::OtherThan { which } => each(vec![
            vec![dword(0, Op::Ne, which)?],
            vec![dword(1, Op::Ne, 0)?],
        ]),
        Args::Socket => socket_rules(),
        Args::SocketOrTcp => socket_or_tcp_rules(),
        Args::Clone => CLONE_NAMESPACE_FLAGS
            .iter()
            .map(|f| {
                rule(vec![Cond::new(0, Len::Qword, Op::MaskedEq(*f), *f)
                    .map_err(|e| BuildError(e.to_string()))?])
            })
            .collect(),
        // The request number of ioctl is an unsigned int: compare only its low 32 bits, as
        // the kernel does, so high garbage bits cannot slip past.
        Args::Ioctl => {
            let mut conds = Vec::new();
            let session: &[u64] = match terminal {
                Terminal::Reachable => &SESSION_IOCTLS,
                Terminal::Unreachable => &[],
            };
            for request in TERMINAL_IOCTLS
                .iter()
                .chain(&FILE_ATTRIBUTE_IOCTLS)
                .chain(session)
                .copied()
            {
                conds.push(vec![dword(1, Op::Eq, request)?]);
            }
            for (mask, value) in TERMINAL_IOCTL_RANGES {
                conds.push(vec![dword(1, Op::MaskedEq(mask), value)?]);
            }
            each(conds)
        }
        // The option is an int.
        Args::Prctl => PRCTL_OPTIONS
            .iter()
            .map(|o| rule(vec![dword(0, Op::Eq, *o)?]))
            .collect(),
        // The command is an int.
        Args::Fcntl => FCNTL_COMMANDS
            .iter()
            .map(|c| rule(vec![dword(1, Op::Eq, *c)?]))
            .collect(),
    }
}

/// Builds the deny list; `action` is what a match gets.
fn deny_list(
    action: SeccompAction,
    terminal: Terminal,
    sockets: Sockets,
    paths: PathCalls,
) -> Result<BpfProgram, BuildError> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> = syscalls::all()
        .filter_map(|row| match row.rule {
            Rule::Denied { args, .. } => Some((row.nr, args)),
            _ => None,
        })
        .filter(|(_, args)| *args != Args::WhileTerminal || terminal == Terminal::Reachable)
        .filter(|(_, args)| *args != Args::WithoutNamespaces || paths == PathCalls::Decided)
        .map(|(nr, args)| Ok((nr, rules(sockets.args_of(nr, args), terminal)?)))
        .collect::<Result<_, BuildError>>()?;
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
fn deny_program(
    notify: bool,
    terminal: Terminal,
    sockets: Sockets,
    paths: PathCalls,
) -> Result<Vec<libc::sock_filter>, BuildError> {
    let action = if notify {
        SeccompAction::Trace(MARK)
    } else {
        SeccompAction::Errno(DENY_ERRNO as u32)
    };
    let program = deny_list(action, terminal, sockets, paths)?;
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

/// Builds the gate that runs before the deny list: foreign architectures are killed, x32
/// refused, `clone3` answered ENOSYS, `connect` given `connect`; with
/// [`PathCalls::Performed`], `umask` and every path call of the table the supervisor
/// performs go to it (write opens only; without observation, mode changes only with an
/// execute bit), and with [`PathCalls::PerformedAndObserved`] every other path call too
/// (read-only opens and `utimensat(fd, NULL, …)` never leave the kernel). Everything else
/// falls through to the deny list that follows.
fn gate(connect: u32, paths: PathCalls) -> Vec<libc::sock_filter> {
    use libc::{
        BPF_ABS, BPF_ALU, BPF_AND, BPF_JEQ, BPF_JGE, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_W,
    };
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
        // Its open flags and mode live in memory BPF cannot read (see `SET_ID_BITS`);
        // programs fall back to openat.
        jeq(libc::SYS_openat2 as u32, To::Enosys, To::Next),
        jeq(libc::SYS_connect as u32, To::Connect, To::Next),
    ];
    let set_id = syscalls::all().filter_map(|row| match row.rule {
        Rule::Path(PathCall {
            sets_mode: Some(SetsMode { mode, flags }),
            ..
        }) => Some((row.nr, mode, flags)),
        _ => None,
    });
    for (nr, mode, flags) in set_id {
        let test_mode = [
            ld(arg(mode, false)),
            Insn {
                code: BPF_JMP | BPF_JSET | BPF_K,
                k: SET_ID_BITS,
                jt: To::Eperm,
                jf: To::Next,
            },
            ld(NR),
        ];
        match flags {
            None => {
                body.push(jeq(nr as u32, To::Next, To::Skip(3)));
                body.extend(test_mode);
            }
            // An open sets a mode only when it creates.
            Some(flags) => {
                body.extend([
                    jeq(nr as u32, To::Next, To::Skip(7)),
                    ld(arg(flags, false)),
                    Insn {
                        code: BPF_JMP | BPF_JSET | BPF_K,
                        k: CREATE,
                        jt: To::Skip(2),
                        jf: To::Next,
                    },
                    Insn {
                        code: BPF_ALU | BPF_AND | BPF_K,
                        k: TMPFILE,
                        jt: To::Next,
                        jf: To::Next,
                    },
                    jeq(TMPFILE, To::Next, To::Skip(2)),
                ]);
                body.extend(test_mode);
            }
        }
    }
    if paths != PathCalls::ToKernel {
        body.push(jeq(libc::SYS_umask as u32, To::Notify, To::Next));
    }
    if paths == PathCalls::Decided {
        body.push(jeq(libc::SYS_bind as u32, To::Notify, To::Next));
    }
    if paths == PathCalls::PerformedAndObserved {
        // utimensat(dirfd, NULL, …) touches the fd's own file: no path, nothing to report.
        body.extend([
            jeq(libc::SYS_utimensat as u32, To::Next, To::Skip(4)),
            ld(arg(1, false)),
            jeq(0, To::Next, To::Notify),
            ld(arg(1, true)),
            jeq(0, To::Allow, To::Notify),
        ]);
    }
    let path_calls = syscalls::all().filter_map(|row| match row.rule {
        Rule::Path(call) => Some((row.nr, call)),
        _ => None,
    });
    for (nr, call) in path_calls {
        let tested = match paths.route(&call) {
            None => continue,
            Some(PathRoute::Always) => None,
            Some(PathRoute::WriteOpen(index)) => Some((index, WRITE_FLAGS)),
            Some(PathRoute::ExecMode(index)) => Some((index, EXEC_BITS)),
            // Only utimensat, which has its own rule above.
            Some(PathRoute::WithPath(_)) => None,
        };
        match tested {
            None => body.push(jeq(nr as u32, To::Notify, To::Next)),
            Some((index, bits)) => body.extend([
                jeq(nr as u32, To::Next, To::Skip(2)),
                ld(arg(index, false)),
                Insn {
                    code: BPF_JMP | BPF_JSET | BPF_K,
                    k: bits,
                    jt: To::Notify,
                    jf: To::Allow,
                },
            ]),
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
