//! The exec stage: forks the child, has it apply the sandbox and `execve` the command,
//! hands its seccomp listener to the supervisor, forwards signals, and reaps it.
//!
//! Behaves like a shell running one foreground command: the child stays in sandgate's
//! process group and session, so the terminal, job control (Ctrl-Z, `fg`) and terminal
//! signals reach it directly. Signals *sent to sandgate* (by `kill`, a CI runner, a
//! timeout) are forwarded to the child; terminal-generated ones are not forwarded, since
//! the child already received them from the terminal. If sandgate dies, the child gets
//! SIGKILL (PR_SET_PDEATHSIG), so nothing is left running unsupervised. When the command
//! dies of signal N, sandgate dies of N too ([`Outcome::pass_on`]), and its caller sees
//! what `bash -c` would have shown it. An unconfined (`full-access`) command has nothing to
//! supervise: sandgate executes it in place, which ends the same way by construction.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::sys::signal::{kill, SigSet, SigmaskHow, Signal};
use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use nix::sys::wait::waitpid;
use nix::unistd::{getpid, getppid, pipe2, Pid};

use crate::network::hosts::HostRules;
use crate::sandbox::{Applied, Prepared, Step};
use crate::{network, supervisor, sys};

/// Why the command did not start.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("{}: command not found", .0.to_string_lossy())]
    NotFound(OsString),
    #[error("{}: {source}", program.to_string_lossy())]
    NotExecutable {
        program: OsString,
        source: io::Error,
    },
    #[error("{}: a program, not a shell script: `sandgate [FLAGS] SCRIPT` runs a script through the shell; to run the program, put `--` before it: sandgate [FLAGS] -- {} [ARGS]", .0.display(), .1.to_string_lossy())]
    ProgramAsScript(std::path::PathBuf, OsString),
    #[error("argument or environment contains a NUL byte")]
    Nul,
    #[error("the sandbox could not be applied: {} failed: {source}", step.describe())]
    Setup { step: Step, source: io::Error },
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl From<nix::Error> for ExecError {
    fn from(e: nix::Error) -> Self {
        ExecError::Io(e.into())
    }
}

/// Signals sandgate waits for instead of acting on them.
const WAITED: [Signal; 8] = [
    Signal::SIGCHLD,
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGWINCH,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

/// What to run and how.
pub struct Launch<'a> {
    /// The program (found on PATH unless it has a slash) and its arguments.
    pub command: &'a [OsString],
    /// argv[0] for the program, when it should differ from `command[0]`.
    pub argv0: Option<OsString>,
    /// Variables added to the command's environment.
    pub extra_env: Vec<(&'static str, OsString)>,
    /// Inherited variables the command does not get (names that look like secrets).
    pub withheld_env: Vec<OsString>,
    pub sandbox: Prepared,
    /// What the supervisor checks notifications against (restricted profiles).
    pub supervision: Option<supervisor::Setup>,
    /// The hosts sandgate's proxy lets the sandbox reach, when the sandbox listens for it
    /// (see [`Prepared::has_proxy`]).
    pub proxy: Option<HostRules>,
}

/// How the command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It exited with this status.
    Exited(u8),
    /// It died of this signal (a raw number: real-time signals are not in nix's `Signal`).
    Signaled(libc::c_int),
}

impl Outcome {
    /// Ends sandgate the way the command ended, as the very last thing it does: an exit
    /// status is returned for `main` to exit with; a death signal is raised on sandgate
    /// itself with its default action, so that a caller's `wait` sees `WIFSIGNALED` (and
    /// a shell `128+N`), exactly as if it had run the command itself. sandgate leaves no
    /// core file for a core-dumping signal (`RLIMIT_CORE` 0 and not dumpable). A signal
    /// whose default action does not end a process (it cannot have killed the command
    /// either) gives exit status 128+N instead, as it does when the raise fails.
    pub fn pass_on(self) -> std::process::ExitCode {
        let signal = match self {
            Outcome::Exited(code) => return std::process::ExitCode::from(code),
            Outcome::Signaled(signal) => signal,
        };
        let fallback =
            std::process::ExitCode::from(128u8.saturating_add(u8::try_from(signal).unwrap_or(0)));
        let harmless = [
            libc::SIGCHLD,
            libc::SIGCONT,
            libc::SIGURG,
            libc::SIGWINCH,
            libc::SIGSTOP,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
        ]
        .contains(&signal);
        if harmless {
            return fallback;
        }
        {
            use std::io::Write;
            let _ = std::io::stdout().flush();
            let _ = std::io::stderr().flush();
        }
        if sys::no_core_dumps().is_ok()
            && sys::default_disposition(signal).is_ok()
            && sys::set_signal_blocked(signal, false, false).is_ok()
        {
            let _ = sys::raise(signal);
        }
        fallback
    }
}

/// Runs the command to completion and returns how it ended.
///
/// # Errors
/// See [`ExecError`]: the command could not be found or executed, or the sandbox could not
/// be applied (the child then never ran the command).
pub fn run(mut launch: Launch<'_>) -> Result<Outcome, ExecError> {
    let Some(program) = launch.command.first() else {
        return Err(ExecError::NotFound(OsString::new()));
    };
    let path = find_program(program)?;
    let path = cstring(path.as_os_str())?;
    let shown0 = launch.argv0.as_deref().unwrap_or(program);
    let argv: Vec<CString> = std::iter::once(shown0)
        .chain(launch.command[1..].iter().map(OsString::as_os_str))
        .map(cstring)
        .collect::<Result<_, _>>()?;
    let mut env: Vec<CString> = std::env::vars_os()
        .filter(|(k, _)| !launch.extra_env.iter().any(|(e, _)| OsStr::new(e) == k))
        .filter(|(k, _)| !launch.withheld_env.contains(k))
        .chain(
            launch
                .extra_env
                .iter()
                .map(|(k, v)| (OsString::from(k), v.clone())),
        )
        .map(|(k, v)| {
            let mut kv = k;
            kv.push("=");
            kv.push(v);
            cstring(&kv)
        })
        .collect::<Result<_, _>>()?;
    env.shrink_to_fit();
    let argv_ptrs = null_terminated(&argv);
    let env_ptrs = null_terminated(&env);
    if !launch.sandbox.is_restricted() {
        return Err(exec_in_place(&path, &argv_ptrs, &env_ptrs, program));
    }

    let (err_r, err_w) = pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let fd_channel = if launch.sandbox.is_restricted() {
        Some(socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?)
    } else {
        None
    };
    let mut waited = SigSet::empty();
    WAITED.iter().for_each(|s| waited.add(*s));
    let old_mask = waited.thread_swap_mask(SigmaskHow::SIG_BLOCK)?;
    let parent = getpid();

    // sandgate is single-threaded here: the supervisor thread is only started below.
    let pid = sys::fork()?;
    if pid == 0 {
        let send = fd_channel
            .as_ref()
            .map(|(_, child_end)| child_end.as_raw_fd());
        child(
            launch.sandbox,
            &path,
            &argv_ptrs,
            &env_ptrs,
            err_w.as_raw_fd(),
            send,
            parent,
            &old_mask,
        );
    }
    let child = Pid::from_raw(pid);
    drop(err_w);
    let proxy_planned = launch.sandbox.has_proxy();
    let (listener, proxy_listener) = match fd_channel {
        Some((ours, theirs)) => {
            drop(theirs);
            let listener = sys::recv_fd(ours.as_fd())?;
            let root = sys::recv_fd(ours.as_fd())?;
            let proxy = match proxy_planned {
                true => sys::recv_fd(ours.as_fd())?,
                false => None,
            };
            if listener.is_some() {
                refused_caches(ours.as_fd(), launch.supervision.as_mut());
            }
            (listener.zip(root), proxy)
        }
        None => (None, None),
    };
    if let Some((step, errno)) = read_failure(err_r)? {
        // The child exits right after reporting; reap it so it does not linger.
        let _ = waitpid(child, None);
        let source = io::Error::from_raw_os_error(errno);
        return Err(match step {
            Step::Exec => exec_failure(program, source),
            step => ExecError::Setup { step, source },
        });
    }
    // Still single-threaded: the proxy's process is forked before the supervisor starts.
    let reporter = launch.supervision.as_ref().and_then(|s| s.reporter.clone());
    let proxy = match (proxy_listener, launch.proxy) {
        (Some(listener), Some(rules)) => {
            match network::process::start(listener, rules, reporter.clone()) {
                Ok(proxy) => Some(proxy),
                Err(e) => {
                    crate::say!("sandgate: warning: cannot start the proxy, so the allowed hosts are unreachable: {e}");
                    None
                }
            }
        }
        _ => None,
    };
    let running = match (listener, launch.supervision) {
        (Some((listener, root)), Some(setup)) => Some(supervisor::spawn(listener, root, setup)?),
        _ => None,
    };
    let outcome = supervise(child, &waited)?;
    if let (Some(proxy), Some(reporter)) = (&proxy, &reporter) {
        proxy.collect_refusals(reporter);
    }
    if let Some(running) = running {
        running.hand_over(&waited);
    }
    Ok(outcome)
}

/// Reads the child's last message, the copy-on-write caches whose overlay the kernel
/// refused: each is said on stderr and leaves the supervisor's writable roots, so that a
/// write there gets its marker.
fn refused_caches(channel: std::os::fd::BorrowedFd<'_>, setup: Option<&mut supervisor::Setup>) {
    let mut buf = vec![0u8; 64 * 1024];
    let Ok(n) = nix::sys::socket::recv(
        channel.as_raw_fd(),
        &mut buf,
        nix::sys::socket::MsgFlags::empty(),
    ) else {
        return;
    };
    let refused: Vec<crate::sandbox::RefusedCache> =
        serde_json::from_slice(&buf[..n]).unwrap_or_default();
    for cache in &refused {
        crate::say!(
            "sandgate: note: {} stays read-only: the kernel refused its copy-on-write layer ({})",
            cache.path.display(),
            io::Error::from_raw_os_error(cache.errno)
        );
    }
    if let Some(setup) = setup {
        setup
            .writable_roots
            .retain(|root| !refused.iter().any(|c| &c.path == root));
    }
}

/// Runs an unconfined command in sandgate's own process: with no sandbox there is nothing
/// to supervise and no marker to hold, so sandgate becomes the command instead of waiting
/// for it — one fork and one wait fewer on every call, and the caller sees the command's
/// exit status, signals and pid first-hand. Returns only if `execve` failed, with
/// sandgate as it was.
fn exec_in_place(
    path: &CStr,
    argv: &[*const libc::c_char],
    env: &[*const libc::c_char],
    program: &OsStr,
) -> ExecError {
    sys::default_sigpipe();
    // A standard fd the caller closed stays closed for the command, as under a shell.
    sys::close_std_fds_closed_at_start();
    let source = directory_named(path, sys::execve(path, argv, env));
    sys::ignore_sigpipe();
    exec_failure(program, source)
}

/// The kernel says EACCES for a directory too, where "Is a directory", as a shell says,
/// names what to fix. Asked where `execve` ran — in the sandbox, whose `/tmp` is its own —
/// since the host may have a directory of that name where the sandbox has a file. Only an
/// `open` syscall: safe in the forked child.
fn directory_named(path: &CStr, err: io::Error) -> io::Error {
    if err.raw_os_error() == Some(libc::EACCES) && sys::open_path(path, libc::O_DIRECTORY).is_ok() {
        io::Error::from_raw_os_error(libc::EISDIR)
    } else {
        err
    }
}

/// What a failed `execve` (found for `program`) tells the user.
fn exec_failure(program: &OsStr, source: io::Error) -> ExecError {
    match source.raw_os_error() {
        Some(libc::ENOENT) => ExecError::NotFound(program.to_owned()),
        _ => ExecError::NotExecutable {
            program: program.to_owned(),
            source,
        },
    }
}

/// Finds `program` on PATH the way `execvp` would; a name with a slash is used as is.
fn find_program(program: &OsStr) -> Result<PathBuf, ExecError> {
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    if program.is_empty() {
        return Err(ExecError::NotFound(program.to_owned()));
    }
    let search = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut denied = None;
    for dir in std::env::split_paths(&search) {
        let candidate = Path::new(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &dir
        })
        .join(program);
        if !candidate.metadata().is_ok_and(|m| m.is_file()) {
            continue;
        }
        match nix::unistd::access(&candidate, nix::unistd::AccessFlags::X_OK) {
            Ok(()) => return Ok(candidate),
            Err(e) => denied = Some(io::Error::from(e)),
        }
    }
    Err(match denied {
        Some(source) => ExecError::NotExecutable {
            program: program.to_owned(),
            source,
        },
        None => ExecError::NotFound(program.to_owned()),
    })
}

fn cstring(s: &OsStr) -> Result<CString, ExecError> {
    CString::new(s.as_bytes()).map_err(|_| ExecError::Nul)
}

fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The forked child: applies the sandbox and executes the command; on any failure it
/// reports `(step, errno)` through `err_w` and exits 125. Makes only async-signal-safe
/// calls apart from what `Prepared::apply` documents.
#[allow(clippy::too_many_arguments)]
fn child(
    sandbox: Prepared,
    path: &CString,
    argv: &[*const libc::c_char],
    env: &[*const libc::c_char],
    err_w: RawFd,
    send: Option<RawFd>,
    parent: Pid,
    old_mask: &SigSet,
) -> ! {
    let report = |step: Step, err: io::Error| -> ! {
        let mut msg = [0u8; 8];
        msg[..4].copy_from_slice(&(step as u32).to_ne_bytes());
        msg[4..].copy_from_slice(&err.raw_os_error().unwrap_or(libc::EIO).to_ne_bytes());
        // SAFETY-free: a borrowed write on our own pipe end; failure leaves only exit 125.
        let _ = nix::unistd::write(sys::borrow_raw(err_w), &msg);
        sys::exit_immediately(125)
    };
    if let Err(e) = old_mask.thread_set_mask() {
        report(Step::Exec, e.into());
    }
    sys::default_sigpipe();
    match sandbox.apply() {
        Err((step, err)) => report(step, err),
        Ok(Applied {
            listener: Some(listener),
            proxy,
            refused_caches,
        }) => {
            let Some(sock) = send else {
                report(Step::Supervisor, io::Error::from_raw_os_error(libc::EBADF))
            };
            // The listener, then the sandbox's root: the supervisor identifies paths through
            // it, and it stays valid however soon this process exits. Then the proxy's
            // listener, when there is one.
            let root = sys::open_path(c"/", libc::O_DIRECTORY);
            let sent = root.and_then(|root| {
                sys::send_fd(sys::borrow_raw(sock), listener.as_fd())?;
                sys::send_fd(sys::borrow_raw(sock), root.as_fd())?;
                if let Some(proxy) = &proxy {
                    sys::send_fd(sys::borrow_raw(sock), proxy.as_fd())?;
                }
                // Last, what sandgate is to say for the child: it may not write to a stderr
                // nobody reads.
                let refused = serde_json::to_vec(&refused_caches).map_err(io::Error::other)?;
                nix::sys::socket::send(sock, &refused, nix::sys::socket::MsgFlags::empty())
                    .map(drop)
                    .map_err(io::Error::from)
            });
            if let Err(e) = sent {
                report(Step::Supervisor, e);
            }
            drop::<OwnedFd>(listener);
            drop::<Option<OwnedFd>>(proxy);
        }
        // A proxy is only planned with a listener (see `Prepared::has_proxy`).
        Ok(Applied { listener: None, .. }) => {}
    }
    if let Err(e) = sys::set_parent_death_signal(libc::SIGKILL) {
        report(Step::Exec, e);
    }
    if getppid() != parent {
        // sandgate died before PDEATHSIG was armed.
        sys::exit_immediately(125);
    }
    // A standard fd the caller closed stays closed for the command, as under a shell.
    sys::close_std_fds_closed_at_start();
    report(
        Step::Exec,
        directory_named(path, sys::execve(path, argv, env)),
    )
}

/// Reads the child's failure report: `None` when the pipe closed on a successful exec.
fn read_failure(err_r: OwnedFd) -> io::Result<Option<(Step, i32)>> {
    let mut msg = [0u8; 8];
    let mut got = 0;
    while got < msg.len() {
        match nix::unistd::read(err_r.as_fd(), &mut msg[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if got < msg.len() {
        return Ok(None);
    }
    let step = u32::from_ne_bytes([msg[0], msg[1], msg[2], msg[3]]);
    let errno = i32::from_ne_bytes([msg[4], msg[5], msg[6], msg[7]]);
    Ok(Some((Step::from_u32(step).unwrap_or(Step::Exec), errno)))
}

/// Waits for the child, forwarding signals sent to sandgate; returns how it ended.
fn supervise(child: Pid, waited: &SigSet) -> Result<Outcome, ExecError> {
    loop {
        let (signo, code) = sys::sigwaitinfo(waited)?;
        if signo == libc::SIGCHLD {
            match sys::wait_nohang(child.as_raw()) {
                Ok(Some(sys::Ended::Exited(status))) => {
                    return Ok(Outcome::Exited(u8::try_from(status).unwrap_or(u8::MAX)))
                }
                Ok(Some(sys::Ended::Signaled(signal))) => return Ok(Outcome::Signaled(signal)),
                Ok(None) => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        }
        // si_code <= 0: sent by a process (kill, sigqueue, tgkill). SI_KERNEL: generated
        // by the terminal for the whole foreground group, the child included.
        if code <= 0 {
            if let Ok(signal) = Signal::try_from(signo) {
                let _ = kill(child, signal);
            }
        }
    }
}
