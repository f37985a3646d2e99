//! The exec stage: starts the child that applies the sandbox, hands its seccomp listener
//! to the supervisor, forwards signals, and reports how the command ended.
//!
//! Behaves like a shell running one foreground command: the command stays in sandgate's
//! process group and session, so the terminal, job control (Ctrl-Z, `fg`) and terminal
//! signals reach it directly. Signals *sent to sandgate* (by `kill`, a CI runner, a
//! timeout) are forwarded to the command; terminal-generated ones are not forwarded, since
//! the command already received them from the terminal. When the command dies of signal
//! N, sandgate dies of N too ([`Outcome::pass_on`]), and its caller sees what `bash -c`
//! would have shown it.
//!
//! A restricted call with its own namespaces is cloned into a new PID namespace with
//! them: the child is that namespace's pid 1 (`init`), builds the sandbox, forks the
//! command, reaps every orphan, relays the signals sandgate forwards, and reports the
//! command's end. When it exits the kernel ends everything left in the namespace, unless
//! the call keeps its background processes. If sandgate dies, the child gets SIGKILL
//! (PR_SET_PDEATHSIG), and so does the whole namespace. A nested call, or one degraded to
//! no PID namespace, forks the child, which executes the command itself. An unconfined
//! (`full-access`) command has nothing to supervise: sandgate executes it in place, or,
//! with a time limit, forks it and ends its process tree when the limit comes (`wait`).

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::sys::signal::{kill, SigSet, SigmaskHow, Signal};
use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use nix::sys::wait::waitpid;
use nix::unistd::{getpid, getppid, pipe2, Pid};

use crate::policy::host_rules::HostRules;
use crate::sandbox::{Applied, Prepared, Step};
use crate::{kept, network, supervisor, sys};

mod ender;
mod fresh;
mod init;
mod relay;

mod wait;
pub use wait::GRACE;

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
    /// How long the command may run: then it is sent SIGTERM, and after a grace of
    /// [`wait::GRACE`] everything it started is killed.
    pub timeout: Option<std::time::Duration>,
    /// Set when the call keeps what the command leaves running in its PID namespace: it is
    /// recorded for `sandgate ps` and `sandgate stop` as this call.
    pub keep_background: Option<kept::Call>,
}

/// How the command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It exited with this status.
    Exited(u8),
    /// It died of this signal (a raw number: real-time signals are not in nix's `Signal`).
    Signaled(libc::c_int),
    /// It ran past its time limit and was ended, with everything it started.
    TimedOut(std::time::Duration),
}

/// sandgate's exit status when the command ran past its time limit (GNU `timeout`'s).
pub const EXIT_TIMED_OUT: u8 = 124;

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
            Outcome::TimedOut(_) => return std::process::ExitCode::from(EXIT_TIMED_OUT),
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
        let program_to_run = Program {
            path: &path,
            argv: &argv_ptrs,
            env: &env_ptrs,
            stdio: &[],
        };
        return match launch.timeout {
            None => Err(exec_in_place(&path, &argv_ptrs, &env_ptrs, program)),
            Some(limit) => unconfined_with_time_limit(&program_to_run, program, limit),
        };
    }
    // Listed once, for both.
    let inherited = sys::inherited_fds();
    let mut relay = relay::Relay::for_outputs(&inherited)?;
    let mut fresh = fresh::FreshStdio::open(&relay, &inherited);
    launch.sandbox = launch.sandbox.rehoming(fresh.rehoming());
    let stdio: Vec<(RawFd, RawFd)> = relay.plan().iter().chain(fresh.plan()).copied().collect();
    let program_to_run = Program {
        path: &path,
        argv: &argv_ptrs,
        env: &env_ptrs,
        stdio: &stdio,
    };

    let (err_r, err_w) = pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    let waited = waited_signals();
    let old_mask = waited.thread_swap_mask(SigmaskHow::SIG_BLOCK)?;
    let parent = getpid();
    let clone_flags = launch.sandbox.clone_flags();
    // Without a PID namespace sandgate adopts the command's orphans (see `wait`) and ends
    // them with the command, unless the call keeps them, as a namespace's end would have
    // (a nested call's end with its parent's).
    let orphans = match clone_flags {
        Some(_) => wait::Orphans::Left,
        None if launch.sandbox.ends_orphans_itself() && launch.keep_background.is_none() => {
            wait::Orphans::EndedWithTheCommand
        }
        None if launch.timeout.is_some() => wait::Orphans::EndedAtTheLimit,
        None => wait::Orphans::Left,
    };
    let spared = match orphans {
        wait::Orphans::Left => Default::default(),
        _ => wait::children_now(),
    };
    if orphans != wait::Orphans::Left {
        nix::sys::prctl::set_child_subreaper(true)?;
    }
    // Until the command runs, a failure may be retried under another layout: the next
    // child must start from sandgate's state as it was, not from this attempt's.
    let attempt = Attempt {
        old_mask,
        subreaper: orphans != wait::Orphans::Left,
        runs: false,
    };

    // sandgate is single-threaded here: the supervisor thread is only started below.
    let (pid, ender) = match clone_flags {
        Some(flags) => (
            sys::fork_into(flags).map_err(|source| ExecError::Setup {
                step: crate::sandbox::failed_clone_step(flags),
                source,
            })?,
            None,
        ),
        // What sandgate ends itself, an ender ends all at once (see `ender`).
        None if orphans == wait::Orphans::EndedWithTheCommand && ender::available() => {
            match ender::fork()? {
                ender::Forked::Command => (0, None),
                ender::Forked::Sandgate(ender, pid) => (pid, Some(ender)),
            }
        }
        None => (sys::fork()?, None),
    };
    if pid == 0 {
        match clone_flags {
            Some(_) => init::run(
                launch.sandbox,
                &program_to_run,
                init::Ends {
                    err_w,
                    channel: theirs,
                    sandgates: [err_r.as_raw_fd(), ours.as_raw_fd()],
                },
                &attempt.old_mask,
                launch.keep_background.is_some(),
                launch.timeout,
            ),
            None => child(
                launch.sandbox,
                &program_to_run,
                err_w.as_fd(),
                theirs.as_fd(),
                parent,
                &attempt.old_mask,
            ),
        }
    }
    drop(err_w);
    drop(theirs);
    relay.started();
    fresh.started();
    let FromTheChild {
        listener,
        proxy: proxy_listener,
        stdin,
    } = from_the_child(
        ours.as_fd(),
        launch.sandbox.has_proxy(),
        launch.supervision.as_mut(),
    )?;
    if let Some(stdin) = stdin {
        fresh.command_reads(stdin);
    }
    if let Some((step, errno)) = read_failure(err_r)? {
        // The child exits right after reporting (init once its command did); reap it so
        // it does not linger.
        let _ = waitpid(Pid::from_raw(pid), None);
        let source = io::Error::from_raw_os_error(errno);
        return Err(match step {
            Step::Exec => exec_failure(program, source),
            step => ExecError::Setup { step, source },
        });
    }
    attempt.command_runs();
    // The command has its own limits and dispositions; from here on these are sandgate's
    // (a core limit of zero cannot be raised again: only now is no retry possible).
    let _ = sys::no_core_files();
    sys::ignore_file_size_signal();
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
    let target = match clone_flags {
        Some(_) => wait::Target::Init { pid, report: ours },
        None => wait::Target::Command {
            pid,
            orphans,
            ender,
            spared,
        },
    };
    let ended = wait::until_ended(target, &waited, launch.timeout, &mut relay)?;
    if let Some(why) = proxy
        .as_ref()
        .and_then(network::process::Proxy::failed_to_start)
    {
        crate::say!("sandgate: warning: the proxy could not start, so the allowed hosts were unreachable: {why}");
    }
    if let (Some(proxy), Some(reporter)) = (&proxy, &reporter) {
        proxy.collect_refusals(reporter);
    }
    fresh.finish();
    if ended.kept {
        keep(pid, launch.keep_background.as_ref());
    }
    if let Some(running) = running {
        running.hand_over(
            &waited,
            &relay.held(),
            orphans != wait::Orphans::EndedWithTheCommand,
        );
    }
    // Single-threaded again (the supervisor's threads are joined): the relay may fork.
    let timed_out = matches!(ended.outcome, Outcome::TimedOut(_));
    // Without a PID namespace, processes of the call outlive it only where nothing ended
    // them (a nested call's, which end with its parent's); sandgate ended the rest, so
    // whoever still holds a pipe then is another call's process it was handed to.
    let outlived =
        ended.kept || (clone_flags.is_none() && orphans != wait::Orphans::EndedWithTheCommand);
    relay.finish(outlived, (!timed_out).then_some(&waited));
    Ok(ended.outcome)
}

/// What one attempt at starting the command changed in sandgate itself: undone when the
/// attempt fails, kept once the command runs.
struct Attempt {
    /// The signal mask before sandgate blocked the signals it waits for.
    old_mask: SigSet,
    /// Whether sandgate made itself the subreaper of the command's orphans.
    subreaper: bool,
    runs: bool,
}

impl Attempt {
    fn command_runs(mut self) {
        self.runs = true;
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if self.runs {
            return;
        }
        let _ = self.old_mask.thread_set_mask();
        if self.subreaper {
            let _ = nix::sys::prctl::set_child_subreaper(false);
        }
    }
}

/// Records the PID namespace whose init `pid` outlives the call with what the command
/// left running, for `sandgate ps` and `sandgate stop`. A namespace that cannot be
/// recorded could be neither listed nor stopped by sandgate: it is ended instead.
fn keep(pid: libc::pid_t, call: Option<&kept::Call>) {
    let recorded = match call {
        Some(call) => kept::Record::new(pid, call).and_then(|r| r.save()),
        None => Err(kept::KeptError::Io(io::Error::from_raw_os_error(
            libc::EINVAL,
        ))),
    };
    if let Err(e) = recorded {
        crate::say!(
            "sandgate: warning: cannot record the processes the command left running ({e}); ending them"
        );
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        let _ = waitpid(Pid::from_raw(pid), None);
    }
}

/// The signals sandgate waits for, as a set.
fn waited_signals() -> SigSet {
    let mut waited = SigSet::empty();
    WAITED.iter().for_each(|s| waited.add(*s));
    waited
}

/// The program to execute and what it gets, built before any fork.
struct Program<'a> {
    path: &'a CStr,
    argv: &'a [*const libc::c_char],
    env: &'a [*const libc::c_char],
    /// `(from, onto)` fd pairs to `dup2` right before `execve` (see `relay`).
    stdio: &'a [(RawFd, RawFd)],
}

/// Runs an unconfined command with a time limit: a child of sandgate's, which adopts the
/// orphans the command leaves (`PR_SET_CHILD_SUBREAPER`), so that when the limit comes it
/// can end the command and every process still descended from it.
fn unconfined_with_time_limit(
    program: &Program<'_>,
    name: &OsStr,
    limit: std::time::Duration,
) -> Result<Outcome, ExecError> {
    let (err_r, err_w) = pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let waited = waited_signals();
    let old_mask = waited.thread_swap_mask(SigmaskHow::SIG_BLOCK)?;
    let spared = wait::children_now();
    nix::sys::prctl::set_child_subreaper(true)?;
    let parent = getpid();
    let pid = sys::fork()?;
    if pid == 0 {
        if let Err(e) = old_mask.thread_set_mask() {
            report_failure(err_w.as_fd(), Step::Exec, e.into());
        }
        sys::default_sigpipe();
        execute(program, err_w.as_fd(), Some(parent));
    }
    drop(err_w);
    if let Some((_, errno)) = read_failure(err_r)? {
        let _ = waitpid(Pid::from_raw(pid), None);
        return Err(exec_failure(name, io::Error::from_raw_os_error(errno)));
    }
    let target = wait::Target::Command {
        pid,
        orphans: wait::Orphans::EndedAtTheLimit,
        ender: None,
        spared,
    };
    Ok(wait::until_ended(target, &waited, Some(limit), &mut relay::Relay::none())?.outcome)
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

/// Reports `(step, errno)` to sandgate through `err_w` and exits 125: how a child says
/// why the command did not start.
fn report_failure(err_w: BorrowedFd<'_>, step: Step, err: io::Error) -> ! {
    let mut msg = [0u8; 8];
    msg[..4].copy_from_slice(&(step as u32).to_ne_bytes());
    msg[4..].copy_from_slice(&err.raw_os_error().unwrap_or(libc::EIO).to_ne_bytes());
    // A borrowed write on our own pipe end; failure leaves only exit 125.
    let _ = nix::unistd::write(err_w, &msg);
    sys::exit_immediately(125)
}

/// Sends sandgate what the child made for it once its sandbox is in place: first one byte
/// saying whether a seccomp listener follows (the kernel may refuse one: a nested call's
/// filter cannot have its own), then the listener, the sandbox's root (the supervisor
/// identifies paths through it, and it stays valid however soon this process exits), the
/// proxy's listener when there is one, and last what sandgate is to say for the child (it
/// may not write to a stderr nobody reads). Read by [`from_the_child`].
fn hand_to_sandgate(sock: BorrowedFd<'_>, applied: Applied) -> io::Result<()> {
    let send = |bytes: &[u8]| {
        nix::sys::socket::send(sock.as_raw_fd(), bytes, nix::sys::socket::MsgFlags::empty())
            .map(drop)
            .map_err(io::Error::from)
    };
    let Applied {
        listener,
        proxy,
        refused_caches,
        stdin,
    } = applied;
    // What follows: the listener and the rest (a proxy is only planned with a listener,
    // see `Prepared::has_proxy`), then stdin.
    let header = u8::from(listener.is_some()) | u8::from(stdin.is_some()) << 1;
    send(&[header])?;
    if let Some(listener) = listener {
        let root = sys::open_path(c"/", libc::O_DIRECTORY)?;
        sys::send_fd(sock, listener.as_fd())?;
        sys::send_fd(sock, root.as_fd())?;
        if let Some(proxy) = &proxy {
            sys::send_fd(sock, proxy.as_fd())?;
        }
        send(&serde_json::to_vec(&refused_caches).map_err(io::Error::other)?)?;
    }
    if let Some(stdin) = stdin {
        sys::send_fd(sock, stdin.as_fd())?;
    }
    Ok(())
}

/// What the child sent with [`hand_to_sandgate`].
struct FromTheChild {
    /// The seccomp listener and the sandbox's root.
    listener: Option<(OwnedFd, OwnedFd)>,
    /// The proxy's listener, when one was planned.
    proxy: Option<OwnedFd>,
    /// The command's description of the file it reads as stdin (see `sandbox::rehome`).
    stdin: Option<OwnedFd>,
}

/// Receives what the child sent with [`hand_to_sandgate`]; nothing when it failed before
/// it could (it then reports why through its error pipe).
fn from_the_child(
    channel: std::os::fd::BorrowedFd<'_>,
    proxy_planned: bool,
    setup: Option<&mut supervisor::Setup>,
) -> io::Result<FromTheChild> {
    let mut header = [0u8; 1];
    let got = loop {
        match nix::sys::socket::recv(
            channel.as_raw_fd(),
            &mut header,
            nix::sys::socket::MsgFlags::empty(),
        ) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other?,
        }
    };
    let mut from = FromTheChild {
        listener: None,
        proxy: None,
        stdin: None,
    };
    if got == 0 {
        return Ok(from);
    }
    if header[0] & 1 != 0 {
        let listener = sys::recv_fd(channel)?;
        let root = sys::recv_fd(channel)?;
        from.listener = listener.zip(root);
        if proxy_planned {
            from.proxy = sys::recv_fd(channel)?;
        }
        refused_caches(channel, setup);
    }
    if header[0] & 2 != 0 {
        from.stdin = sys::recv_fd(channel)?;
    }
    Ok(from)
}

/// The last steps of a child that becomes the command: with sandgate as its `parent`,
/// PDEATHSIG armed (and sandgate checked still alive), then the standard fds sandgate's
/// caller closed closed again, and `execve`; a failure is reported through `err_w`.
fn execute(program: &Program<'_>, err_w: BorrowedFd<'_>, parent: Option<Pid>) -> ! {
    if let Some(parent) = parent {
        if let Err(e) = sys::set_parent_death_signal(libc::SIGKILL) {
            report_failure(err_w, Step::Exec, e);
        }
        if getppid() != parent {
            // sandgate died before PDEATHSIG was armed.
            sys::exit_immediately(125);
        }
    }
    for &(from, onto) in program.stdio {
        if let Err(e) = sys::dup_onto(from, onto) {
            report_failure(err_w, Step::Exec, e);
        }
    }
    // A standard fd the caller closed stays closed for the command, as under a shell.
    sys::close_std_fds_closed_at_start();
    let err = sys::execve(program.path, program.argv, program.env);
    report_failure(err_w, Step::Exec, directory_named(program.path, err))
}

/// The forked child of a call without a PID namespace of its own: applies the sandbox and
/// executes the command; on any failure it reports `(step, errno)` through `err_w` and
/// exits 125. It allocates, as `Prepared::apply` and the hand-over do: sound because
/// sandgate forks only while it has one thread (`sys::fork` checks), so no lock of the
/// allocator can be held by a thread the child does not have.
fn child(
    sandbox: Prepared,
    program: &Program<'_>,
    err_w: BorrowedFd<'_>,
    send: BorrowedFd<'_>,
    parent: Pid,
    old_mask: &SigSet,
) -> ! {
    if let Err(e) = old_mask.thread_set_mask() {
        report_failure(err_w, Step::Exec, e.into());
    }
    sys::default_sigpipe();
    match sandbox.apply() {
        Err((step, err)) => report_failure(err_w, step, err),
        Ok(applied) => {
            if let Err(e) = hand_to_sandgate(send, applied) {
                report_failure(err_w, Step::Supervisor, e);
            }
        }
    }
    execute(program, err_w, Some(parent))
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
