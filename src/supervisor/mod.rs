//! The supervisor: one thread in sandgate that answers the seccomp notifications of the
//! sandboxed process tree.
//!
//! - `connect` is *mediated*: the supervisor copies the address out of the caller's
//!   memory, resolves a pathname in the caller's own view of the filesystem, checks the
//!   socket's provenance — beneath the workspace or the private temp, or one the user
//!   allowed by name — and then connects a duplicate of the caller's socket
//!   (`pidfd_getfd`; where that is refused, a new socket put in its place: `connect`)
//!   itself, through the inode it resolved. It never answers CONTINUE
//!   there: the kernel would re-read an address the caller can rewrite. A connect that can
//!   wait (a full backlog) is performed on a worker thread (`workers`), so no sandboxed
//!   process can hold the supervisor up for the others.
//! - Calls that create, rename, link or open for writing in a writable area are
//!   *performed* (`perform`): landlock refuses the sandbox all of them there, and the
//!   supervisor does them itself, on its own copy of the arguments, after the seal rules
//!   (`seal`: git configuration, hooks, `.sandgate`) looked at the exact name it resolved
//!   — with the caller's rights, in the caller's view. So are mode changes that add an
//!   execute bit, and extended attributes (`attrs`), which landlock does not govern.
//! - Other calls that may change the filesystem by path are *observed* (`observe`): the
//!   supervisor resolves the target as the kernel will, records a marker when the profile
//!   refuses it, and answers CONTINUE — landlock and the mount namespace stay the
//!   authority, so a race on the path can at worst cost or add a marker, never widen. A
//!   call the supervisor does not perform goes the same way.
//! - Calls of the deny list are *reported*: a marker, then EPERM, as the filter would have
//!   answered without observation.
//! - Without a mount namespace behind it (the landlock backend, [`Setup::decides`]) the
//!   supervisor *decides*: it performs removals, truncation and every change of a mode,
//!   owner, time or attribute in the writable areas too, refuses what would have been a
//!   mount point by identity, and refuses what landlock does not govern elsewhere — it
//!   never leaves to the kernel what no read-only view would refuse.
//!
//! If the supervisor is gone, the kernel fails pending and future notified calls with
//! ENOSYS, so its death refuses rather than allows.
//!
//! Nothing the supervisor thread does on a caller's behalf may wait on something the
//! sandbox controls: connects, and opens that can wait (a FIFO, a leased file), go to
//! workers; the caller's memory is read with `process_vm_readv`, which could only wait on
//! a fault the sandbox serves itself — and `userfaultfd` is refused to it (the system call
//! by seccomp, `/dev/userfaultfd`'s ioctl by landlock); the denial log is a regular file.

mod attrs;
mod copy;
mod git;
mod named;
mod observe;
mod open;
mod ops;
mod perform;
mod place;
mod procfs;
mod resolve;
mod seal;
mod sockets;
mod watch;
mod workers;

use std::cell::RefCell;
use std::collections::HashSet;
use std::io::{self, IoSliceMut};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::Pid;

use crate::denial::{Denial, Operation, Reporter};
use crate::policy::Mode;
use crate::sys::{self, Answer};
use crate::syscalls::Rule;
use resolve::{Creds, Inode};
use workers::{Job, Workers};

/// `sizeof(struct sockaddr_un)`.
const SOCKADDR_UN_LEN: usize = std::mem::size_of::<libc::sockaddr_un>();

/// What the supervisor checks against, as paths in the sandbox's own view.
pub struct Setup {
    pub mode: Mode,
    pub writable_roots: Vec<PathBuf>,
    /// Directories kept visible read-only on top of a writable private temp (a read-only
    /// workspace under `/tmp`): beneath them nothing is writable, whatever lies above.
    pub read_only_islands: Vec<PathBuf>,
    /// A connect may reach a socket beneath these (the workspace, the private temp)...
    pub socket_roots: Vec<PathBuf>,
    /// ...or one of these sockets.
    pub allowed_sockets: Vec<PathBuf>,
    /// Guarded git directories (their top level is read-only; see `git`)...
    pub git_dirs: Vec<PathBuf>,
    /// ...and their subdirectories that stay writable.
    pub git_writable: Vec<PathBuf>,
    /// Directory names the seal rules take for `hooks` too (`seal::dir`).
    pub hook_dir_names: Vec<Vec<u8>>,
    pub workspace_write_roots: Vec<PathBuf>,
    pub protected: Vec<PathBuf>,
    /// The directories on the way to persistence paths, bound onto themselves with a mount
    /// namespace so that none can be moved aside.
    pub pinned: Vec<PathBuf>,
    /// No mount namespace stands behind the supervisor (the landlock backend): it decides
    /// every change in the writable areas, and refuses elsewhere what landlock does not
    /// govern, instead of leaving either to the kernel.
    pub decides: bool,
    /// Directories bound read-only with their entries writable again: nothing can be
    /// created in, removed from or renamed in them (missing persistence paths).
    pub frozen: Vec<PathBuf>,
    pub devices: Vec<PathBuf>,
    /// Where denials go; `None` with `--no-observe`.
    pub reporter: Option<Arc<Mutex<Reporter>>>,
    /// The sandbox listens for sandgate's proxy: a TCP connect to it is performed.
    pub proxy: bool,
}

/// The setup, with every path turned into an inode identity.
pub struct Context {
    mode: Mode,
    islands: HashSet<Inode>,
    socket_roots: HashSet<Inode>,
    allowed_sockets: HashSet<Inode>,
    /// Guarded git directories, by identity, for markers.
    git_dirs: HashSet<Inode>,
    /// Writable roots and the writable subdirectories of guarded git directories.
    writable: HashSet<Inode>,
    /// sandgate's own handles of the guarded directories.
    git: git::Regions,
    workspace_write_roots: HashSet<Inode>,
    protected: HashSet<Inode>,
    pinned: HashSet<Inode>,
    decides: bool,
    frozen: HashSet<Inode>,
    devices: HashSet<Inode>,
    /// The directories where the last component of a path can change the verdict: those
    /// holding a protected path, a device node, a guarded git directory, a read-only
    /// island or a frozen directory (each its own mount), and the frozen directories.
    holders: HashSet<Inode>,
    /// The device of the sandbox's /proc: paths through it (/proc/self, /dev/stdout) are
    /// magic links that cannot be followed by name, so no verdict is given on them.
    proc_dev: Option<u64>,
    /// The sandbox's root. Every sandboxed process shares it: chroot, pivot_root and new
    /// namespaces are refused, so it is opened once instead of per call.
    root: Option<resolve::Root>,
    cache: std::cell::RefCell<observe::VerdictCache>,
    procs: procfs::ProcDirs,
    reporter: Option<Arc<Mutex<Reporter>>>,
    proxy: bool,
    /// How many seccomp filters the sandboxed command runs under (sandgate's own, and the
    /// sandbox's): a caller under more is inside a sandbox nested in this one.
    filters: u32,
    /// The umask in force for the supervisor thread's creates (its own filesystem
    /// context: see [`act_for_the_sandbox`]); `None` until the first one set it.
    umask: std::cell::Cell<Option<u32>>,
    /// The thread has a filesystem context of its own, and so a umask it may set.
    own_fs: bool,
    /// The thread is fit to perform for the sandbox ([`act_for_the_sandbox`]); when not,
    /// everything goes to the kernel, whose landlock refuses every write it would have
    /// performed.
    performs: bool,
}

impl Context {
    /// Returns true for a directory that is a mount point in the sandbox's view — or,
    /// where the supervisor decides, that would be one: such a directory is never renamed,
    /// replaced or removed.
    fn is_mount_point(&self, id: &Inode) -> bool {
        self.writable.contains(id)
            || self.git_dirs.contains(id)
            || self.protected.contains(id)
            || (self.decides
                && (self.pinned.contains(id)
                    || self.frozen.contains(id)
                    || self.islands.contains(id)))
    }

    fn record(&self, denial: &Denial) {
        if let Some(reporter) = &self.reporter {
            if let Ok(mut r) = reporter.lock() {
                r.record(denial);
            }
        }
    }
}

/// What the supervisor thread hands back when it ends.
type Ending = (Served, OwnedFd, Context, Workers);

/// A supervisor thread that is serving.
pub struct Running {
    handle: std::thread::JoinHandle<Ending>,
    /// Written to ask the thread to stop and hand back its listener.
    stop: OwnedFd,
    /// Set before that, for a thread waiting in RECV: the interrupting signal wakes it.
    stopping: Arc<AtomicBool>,
}

/// Starts the supervisor thread for `listener`. Paths are identified by inode, once, now,
/// through `root`: the sandbox's own `/`, sent by the child once its mount namespace was
/// built (a command that exits at once leaves no `/proc/PID/root` to look through).
///
/// # Errors
/// The thread could not be started, or the signal that interrupts its workers set up.
pub fn spawn(listener: OwnedFd, root: OwnedFd, setup: Setup) -> io::Result<Running> {
    // What widens the sandbox (writable roots, socket roots, allowed sockets) is named by
    // its path with no symlink in it, as sandgate checked it: a name a process swapped for
    // a symlink since (a call still running in the workspace can) identifies nothing, and
    // the root it named is refused, never the link's target made writable.
    let identify_exactly = |paths: &[PathBuf]| -> HashSet<Inode> {
        paths
            .iter()
            .filter_map(|p| {
                let relative = p.strip_prefix("/").ok()?;
                let fd =
                    crate::no_symlinks::beneath(root.as_fd(), relative, nix::fcntl::OFlag::empty())
                        .ok()?;
                nix::sys::stat::fstat(fd.as_fd())
                    .ok()
                    .map(|st| resolve::identity(&st))
            })
            .collect()
    };
    // What narrows it (protected, frozen, read-only) is also taken where its path leads
    // now: a restriction on a link's target as well takes nothing away.
    let identify = |paths: &[PathBuf]| -> HashSet<Inode> {
        paths
            .iter()
            .filter_map(|p| {
                let relative = p.strip_prefix("/").ok()?;
                let relative = if relative.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    relative
                };
                nix::sys::stat::fstatat(root.as_fd(), relative, nix::fcntl::AtFlags::empty())
                    .ok()
                    .map(|st| resolve::identity(&st))
            })
            .chain(identify_exactly(paths))
            .collect()
    };
    seal::also_hooks(setup.hook_dir_names.clone());
    let context = Context {
        mode: setup.mode,
        islands: identify(&setup.read_only_islands),
        socket_roots: identify_exactly(&setup.socket_roots),
        allowed_sockets: identify_exactly(&setup.allowed_sockets),
        git_dirs: identify(&setup.git_dirs),
        writable: identify_exactly(&setup.writable_roots)
            .into_iter()
            .chain(identify_exactly(&setup.git_writable))
            .collect(),
        git: git::Regions::open(&setup.git_dirs),
        workspace_write_roots: identify_exactly(&setup.workspace_write_roots),
        protected: identify(&setup.protected),
        pinned: identify(&setup.pinned),
        decides: setup.decides,
        devices: identify(&setup.devices),
        frozen: identify(&setup.frozen),
        holders: identify(
            &setup
                .protected
                .iter()
                .chain(&setup.devices)
                .chain(&setup.git_dirs)
                .chain(&setup.read_only_islands)
                .chain(&setup.frozen)
                .filter_map(|p| p.parent().map(Path::to_path_buf))
                .chain(setup.frozen.iter().cloned())
                .collect::<Vec<_>>(),
        ),
        proc_dev: nix::sys::stat::fstatat(root.as_fd(), "proc", nix::fcntl::AtFlags::empty())
            .ok()
            .map(|st| st.st_dev),
        root: resolve::Root::new(root).ok(),
        cache: Default::default(),
        procs: procfs::ProcDirs::default(),
        reporter: setup.reporter,
        proxy: setup.proxy,
        filters: own_filters().saturating_add(1),
        umask: std::cell::Cell::new(None),
        own_fs: false,
        performs: false,
    };
    // Without it a notification round trip costs 10-80 µs on a small VM (kernel ≥ 6.6).
    sys::notif_sync_wake_up(listener.as_fd());
    let (stop_r, stop) = nix::unistd::pipe()?;
    let mut workers = Workers::new()?;
    let stopping = Arc::new(AtomicBool::new(false));
    let asked = stopping.clone();
    let handle = std::thread::Builder::new()
        .name("sandgate-supervisor".into())
        .spawn(move || {
            let mut context = context;
            (context.performs, context.own_fs) = match act_for_the_sandbox() {
                Ok(own_fs) => (true, own_fs),
                Err(_) => (false, false),
            };
            // Workers::new blocked the interrupting signal for every thread started from
            // here on; this one lets it in, so that it can wait in RECV itself.
            let interruptible = sys::set_signal_blocked(sys::interrupt_signal(), false, false);
            let stop = Stop {
                pipe: stop_r.as_fd(),
                asked: interruptible.is_ok().then_some(asked.as_ref()),
            };
            let served = serve(&listener, &context, &mut workers, Some(stop));
            (served, listener, context, workers)
        })?;
    Ok(Running {
        handle,
        stop,
        stopping,
    })
}

/// The signals on which sandgate stops waiting for its own threads at a hand-over.
const GIVE_UP: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// Waits a moment for `waited` (blocked) signals while sandgate waits for its own threads
/// to finish; returns false when one that asks sandgate to end came.
///
/// The moment starts at 25 µs and doubles up to 2 ms: a thread told to stop is usually
/// gone within tens of microseconds, and every call pays this wait once, after its command
/// has ended.
struct Pause<'a> {
    waited: &'a SigSet,
    next: Duration,
}

impl<'a> Pause<'a> {
    const FIRST: Duration = Duration::from_micros(25);
    const LONGEST: Duration = Duration::from_millis(2);

    fn new(waited: &'a SigSet) -> Self {
        Pause {
            waited,
            next: Self::FIRST,
        }
    }

    fn wait(&mut self) -> bool {
        let moment = self.next;
        self.next = (moment * 2).min(Self::LONGEST);
        match sys::sigtimedwait(self.waited, moment) {
            Ok(Some(signo)) => !GIVE_UP.iter().any(|s| *s as i32 == signo),
            Ok(None) => true,
            // Cannot wait for signals: sleep instead, still bounded by the caller's loop.
            Err(_) => {
                std::thread::sleep(moment);
                true
            }
        }
    }
}

impl Running {
    /// Called once the command has exited. Processes it left running in the background
    /// keep their sandbox and still need answers (without them their connects and, when
    /// observed, their writes would fail with ENOSYS), so if any remain the listener goes
    /// to a detached process of its own — stdio closed, markers only to the denial log —
    /// which serves until the last of them exits. sandgate itself returns at once, as
    /// `bash -c 'server &'` does.
    ///
    /// The fork needs a single-threaded process: the supervisor thread is joined, and so is
    /// every connect worker (interrupted; the connects they hand back unanswered are
    /// mediated again by the detached process, whose callers are still waiting). All the
    /// while sandgate keeps waiting for the `waited` signals: on SIGTERM, SIGINT, SIGHUP
    /// or SIGQUIT it gives up and returns at once — the background processes then get
    /// ENOSYS from their notified calls, as the supervisor's death always answers.
    ///
    /// `not_inherited` are fds of sandgate's the detached process must not hold (the
    /// caller's output files and their pipes): closed in it right after the fork.
    ///
    /// `serves_leftovers` is false where the call's processes were to end with it (see
    /// `exec::wait::Orphans`): one that survived being killed is not served, and its
    /// notified calls fail with ENOSYS once sandgate exits.
    pub fn hand_over(
        self,
        waited: &SigSet,
        not_inherited: &[std::os::fd::RawFd],
        serves_leftovers: bool,
    ) {
        self.stopping.store(true, Ordering::SeqCst);
        let _ = nix::unistd::write(&self.stop, b"x");
        let mut pause = Pause::new(waited);
        while !self.handle.is_finished() {
            // Again each round: a signal that came just before the thread entered RECV
            // woke nothing.
            let _ = sys::signal_thread(&self.handle, sys::interrupt_signal());
            if !pause.wait() {
                return;
            }
        }
        let Ok((served, listener, context, workers)) = self.handle.join() else {
            return;
        };
        // Held until sandgate exits, never closed before: a process holding a seccomp
        // listener is how an approvals server recognises one that connects on behalf of a
        // sandboxed command (see `confinement::check_peer`), and it may check after the connect.
        let listener = std::mem::ManuallyDrop::new(listener);
        let Some(handed_back) = workers.stop(|| pause.wait()) else {
            return;
        };
        if matches!(served, Served::AllGone) || hung_up(&listener) || !serves_leftovers {
            return;
        }
        // Every thread is joined: sandgate is single-threaded again and may fork.
        if let Ok(0) = sys::fork_detached() {
            // This process never uses them, and exits without dropping their owners: the
            // relay's, and what sandgate's caller passed it (a `$(…)` around sandgate
            // would wait on a pipe kept here).
            let inherited = sys::inherited_fds().into_iter().filter(|fd| *fd > 2);
            for fd in not_inherited.iter().copied().chain(inherited) {
                let _ = nix::unistd::close(fd);
            }
            let _ = SigSet::all().thread_unblock();
            sys::stdio_to_dev_null();
            crate::output::let_go_of_stderr();
            let Ok(mut workers) = Workers::new() else {
                sys::exit_immediately(0);
            };
            let mut context = context;
            (context.performs, context.own_fs) = match act_for_the_sandbox() {
                Ok(own_fs) => (true, own_fs),
                Err(_) => (false, false),
            };
            for notif in &handed_back {
                handle(&listener, &context, &mut workers, notif);
            }
            serve(&listener, &context, &mut workers, None);
            sys::exit_immediately(0);
        }
    }
}

/// Makes the calling thread fit to perform for the sandbox, and says whether it has a
/// filesystem context of its own:
/// 1. a filesystem context of its own (`unshare(CLONE_FS)`), so that the umask it sets to
///    each caller's before a create is its alone, and sandgate's never applies on top.
///    Where `unshare` is refused (a default container's seccomp profile refuses it
///    whatever the flags), the thread shares sandgate's and masks each mode by hand
///    (`perform`): sandgate's umask can then only take more away;
/// 2. no effective capability but `CAP_SYS_PTRACE`: the sandbox runs with sandgate's uid
///    and groups and no capability at all, so the kernel's permission checks of what this
///    thread does are then the caller's own (a root sandgate would otherwise lend
///    CAP_DAC_OVERRIDE, CAP_FOWNER, …). `CAP_SYS_PTRACE` stays when sandgate has it (as
///    root): no operation performed for the sandbox consults it (the paths it names are
///    resolved without `/proc`'s magic links, `RESOLVE_NO_MAGICLINKS`), and
///    without it a caller that made itself non-dumpable could not have its memory read,
///    its descriptors taken or its `/proc` links followed — every call it makes would
///    fail. (Not root, the supervisor owns the sandbox's user namespace and needs none.)
///    The permitted set stays, for what sandgate itself needs of `/proc`. Threads it
///    starts (the workers) inherit both.
///
/// # Errors
/// Either step failed: nothing may then be performed.
fn act_for_the_sandbox() -> io::Result<bool> {
    use caps::{CapSet, Capability};
    let own_fs = match nix::sched::unshare(nix::sched::CloneFlags::CLONE_FS) {
        Ok(()) => true,
        Err(Errno::EPERM) => false,
        Err(e) => return Err(e.into()),
    };
    let ptrace = caps::has_cap(None, CapSet::Effective, Capability::CAP_SYS_PTRACE)
        .map_err(|e| io::Error::other(e.to_string()))?;
    let effective = if ptrace {
        std::iter::once(Capability::CAP_SYS_PTRACE).collect()
    } else {
        caps::CapsHashSet::new()
    };
    caps::set(None, CapSet::Effective, &effective).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(own_fs)
}

/// How many seccomp filters the calling thread runs under (`Seccomp_filters:`), 0 when it
/// cannot tell.
fn own_filters() -> u32 {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Seccomp_filters:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Returns true when no process is left under the filter.
fn hung_up(listener: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
    let _ = poll(&mut fds, PollTimeout::ZERO);
    fds[0]
        .revents()
        .is_some_and(|r| r.contains(PollFlags::POLLHUP))
}

/// How serving ended.
enum Served {
    /// Every sandboxed process is gone (POLLHUP), or the listener failed.
    AllGone,
    /// sandgate asked for the listener back.
    Stopped,
}

/// How often the supervisor looks for connect workers whose caller stopped waiting.
const SWEEP_MS: u16 = 200;

/// How sandgate asks the supervisor thread to stop.
struct Stop<'a> {
    /// Readable once it asks.
    pipe: std::os::fd::BorrowedFd<'a>,
    /// Set once it asks, when the thread can be woken from RECV by the interrupting
    /// signal; `None` when it cannot (it then waits in poll, for the pipe too).
    asked: Option<&'a AtomicBool>,
}

/// Answers notifications until every sandboxed process is gone, or sandgate asks for the
/// listener back (`stop`).
///
/// A thread that sandgate can interrupt waits in RECV itself, without a poll before each
/// notification: that is one system call of three on a notification that needs nothing
/// else. It polls while connect workers are out, to look after them every
/// [`SWEEP_MS`]. The detached supervisor always polls: nobody interrupts it, and it must
/// see the last sandboxed process go (POLLHUP), which a waiting RECV is not woken for on
/// every kernel.
fn serve(
    listener: &OwnedFd,
    context: &Context,
    workers: &mut Workers,
    stop: Option<Stop<'_>>,
) -> Served {
    let asked = stop.as_ref().and_then(|s| s.asked);
    loop {
        if let (Some(asked), true) = (asked, workers.is_empty()) {
            if asked.load(Ordering::SeqCst) {
                return Served::Stopped;
            }
            match sys::notif_recv(listener.as_fd()) {
                Ok(notif) => handle(listener, context, workers, &notif),
                Err(e) => match e.raw_os_error() {
                    // Interrupted (sandgate may be asking to stop), or the caller died or
                    // was interrupted before we received it — or, on a kernel that wakes
                    // RECV for it, no process is left under the filter.
                    Some(libc::EINTR) => {}
                    Some(libc::ENOENT) if !hung_up(listener) => {}
                    _ => return Served::AllGone,
                },
            }
            continue;
        }
        let mut fds = vec![PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        if let Some(stop) = &stop {
            fds.push(PollFd::new(stop.pipe, PollFlags::POLLIN));
        }
        let timeout = if workers.is_empty() {
            PollTimeout::NONE
        } else {
            PollTimeout::from(SWEEP_MS)
        };
        let ready = match poll(&mut fds, timeout) {
            Err(Errno::EINTR) => continue,
            Err(_) => return Served::AllGone,
            Ok(n) => n,
        };
        workers.sweep(listener);
        if ready == 0 {
            continue;
        }
        if fds
            .get(1)
            .and_then(PollFd::revents)
            .is_some_and(|r| !r.is_empty())
        {
            return Served::Stopped;
        }
        let revents = fds[0].revents().unwrap_or(PollFlags::POLLHUP);
        if !revents.contains(PollFlags::POLLIN) {
            // POLLHUP: no process is left under the filter.
            return Served::AllGone;
        }
        let notif = match sys::notif_recv(listener.as_fd()) {
            Ok(n) => n,
            // ENOENT: the caller died or was interrupted before we received it.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINTR)) => continue,
            Err(_) => return Served::AllGone,
        };
        handle(listener, context, workers, &notif);
    }
}

/// Decides one notification and answers it (or has a connect worker answer it).
fn handle(
    listener: &OwnedFd,
    context: &Context,
    workers: &mut Workers,
    notif: &libc::seccomp_notif,
) {
    let call = Call {
        listener,
        notif,
        procs: &context.procs,
        last_read: RefCell::new(None),
        proc_alive: std::cell::Cell::new(false),
    };
    let row = crate::syscalls::lookup(i64::from(notif.data.nr));
    let (answer, denial) = match row.map(|row| &row.rule) {
        Some(Rule::Connect) => match sockets::mediate(&call, context) {
            Ok(connect) => match workers.perform(listener, notif, Job::Connect(connect)) {
                Some(answer) => (answer, None),
                // A worker performs it and answers.
                None => return,
            },
            Err(refused) => refused.answer(&call),
        },
        Some(Rule::Bind) => match sockets::mediate_bind(&call, context) {
            // An autobound name: the length alone (a register) asks for it.
            Ok(sockets::Bound::Kernel) => (Answer::Continue, None),
            Ok(sockets::Bound::Bind(bind)) => (bind.perform(listener, notif.id), None),
            Err(refused) => refused.answer(&call),
        },
        Some(Rule::Umask) => {
            // The new umask of the caller, for the files the supervisor creates for it.
            let umask = (call.arg(0) & 0o777) as u32;
            context.procs.umask_changed(call.tid().as_raw(), umask);
            (Answer::Continue, None)
        }
        Some(Rule::Path(row)) => {
            // The interrupting signal of a hand-over must not cut a performed call short:
            // a file handed back with ADDFD would reach the caller as fd 0, and a
            // filesystem that lets a signal interrupt it (FUSE, NFS) would fail a rename
            // half-way with EINTR.
            let handled = match context.performs {
                true => sys::with_signal_blocked(sys::interrupt_signal(), || {
                    perform::handle(&call, context, workers)
                }),
                false => Handled::Kernel,
            };
            match handled {
                // The kernel's refusal of what was performed and failed there, marked as
                // the observer predicts it.
                Handled::Answer(Answer::Error(libc::EROFS), None) if context.reporter.is_some() => {
                    (
                        Answer::Error(libc::EROFS),
                        observe::check(&call, row, context),
                    )
                }
                Handled::Answer(answer, denial) => (answer, denial),
                // Nothing stands behind the supervisor for what landlock does not govern:
                // what it did not perform is refused, never left to the kernel.
                Handled::Kernel if context.decides && !row.effect.landlock_governs() => (
                    Answer::Error(libc::EROFS),
                    observe::check(&call, row, context),
                ),
                Handled::Kernel if context.reporter.is_some() => {
                    (Answer::Continue, observe::check(&call, row, context))
                }
                Handled::Kernel => (Answer::Continue, None),
            }
        }
        Some(Rule::Denied { .. } | Rule::Unreadable) | None => {
            let op = row.map_or("syscall", |row| row.op(&notif.data.args));
            (
                Answer::Error(crate::sandbox::seccomp::DENY_ERRNO),
                Some(call.denial(op, None, None, Mode::FullAccess)),
            )
        }
    };
    // Recorded before answering: once answered, the caller may finish and sandgate exit
    // before this thread would get to it. (A caller killed while waiting here leaves a
    // marker for a call that never completed.)
    if let Some(denial) = &denial {
        context.record(denial);
    }
    // ENOENT: the caller went away meanwhile; there is nobody to answer.
    let _ = sys::notif_respond(listener.as_fd(), notif.id, answer);
}

/// What handling a call came to.
pub enum Handled {
    /// Answered (or to be answered by a worker: [`Answer::Sent`]), with a marker when a
    /// rule refused it.
    Answer(Answer, Option<Denial>),
    /// Not the supervisor's to perform: the kernel decides (CONTINUE).
    Kernel,
}

/// One notification being handled.
pub struct Call<'a> {
    listener: &'a OwnedFd,
    notif: &'a libc::seccomp_notif,
    procs: &'a procfs::ProcDirs,
    /// The last string read from the caller and its address: the performer and the
    /// observer look at the same path, which is copied once.
    last_read: RefCell<Option<(u64, Vec<u8>)>>,
    /// A lookup beneath the caller's `/proc` directory succeeded during this call: the
    /// handle kept for it belongs to the live caller, not to an earlier task of that tid.
    proc_alive: std::cell::Cell<bool>,
}

impl Call<'_> {
    fn tid(&self) -> Pid {
        Pid::from_raw(self.notif.pid as libc::pid_t)
    }

    fn arg(&self, n: usize) -> u64 {
        self.notif.data.args[n]
    }

    /// Returns true while the call is still pending: memory read from the caller before
    /// this check belongs to this call, not to a recycled pid.
    fn still_pending(&self) -> bool {
        sys::notif_id_valid(self.listener.as_fd(), self.notif.id)
    }

    /// Copies `len` bytes at `addr` out of the calling task.
    fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>, Errno> {
        let mut buf = vec![0u8; len];
        self.read_into(addr, &mut buf)?;
        Ok(buf)
    }

    /// Fills `buf` with the bytes at `addr` in the calling task.
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        let len = buf.len();
        let remote = [RemoteIoVec {
            base: addr as usize,
            len,
        }];
        let n = process_vm_readv(self.tid(), &mut [IoSliceMut::new(buf)], &remote)?;
        if n != len {
            return Err(Errno::EFAULT);
        }
        Ok(())
    }

    /// Copies a NUL-terminated string (at most PATH_MAX bytes) out of the calling task,
    /// page by page so that a string ending near an unmapped page still reads. The first
    /// read is short: most paths are, and each byte read is copied twice.
    fn read_cstr(&self, addr: u64) -> Result<Vec<u8>, Errno> {
        if let Some((at, bytes)) = self.last_read.borrow().as_ref() {
            if *at == addr {
                return Ok(bytes.clone());
            }
        }
        const PAGE: u64 = 4096;
        const FIRST: u64 = 256;
        let mut buf = [0u8; PAGE as usize];
        let mut out = Vec::new();
        let mut next = addr;
        while out.len() < libc::PATH_MAX as usize {
            let mut chunk = PAGE - next % PAGE;
            if next == addr {
                chunk = chunk.min(FIRST);
            }
            let bytes = &mut buf[..chunk as usize];
            self.read_into(next, bytes)?;
            if let Some(end) = bytes.iter().position(|b| *b == 0) {
                out.extend_from_slice(&bytes[..end]);
                *self.last_read.borrow_mut() = Some((addr, out.clone()));
                return Ok(out);
            }
            out.extend_from_slice(bytes);
            next += chunk;
        }
        Err(Errno::ENAMETOOLONG)
    }

    /// Opens the caller's `/proc` entry `what` (`root`, `cwd`, `fd/N`) as an `O_PATH` fd.
    fn open_proc(&self, what: &str) -> Result<OwnedFd, Errno> {
        let opened = self.procs.with(self.tid().as_raw(), |dir| {
            nix::fcntl::openat(
                dir,
                what,
                OFlag::O_PATH | OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
        });
        self.proc_alive.set(self.proc_alive.get() || opened.is_ok());
        opened
    }

    /// Opens `what` beneath the caller's `/proc` directory with `flags` (and `O_PATH`),
    /// through the handle kept for it, not retried: a failure sends the caller to a slower
    /// way that tells a task gone from a path that is not there.
    fn open_proc_once(&self, what: &[u8], flags: OFlag) -> Option<OwnedFd> {
        let (dir, _) = self.procs.get(self.tid().as_raw()).ok()?;
        let opened = nix::fcntl::openat(
            dir.as_fd(),
            std::ffi::OsStr::from_bytes(what),
            OFlag::O_PATH | OFlag::O_CLOEXEC | flags,
            nix::sys::stat::Mode::empty(),
        )
        .ok()?;
        self.proc_alive.set(true);
        Some(opened)
    }

    /// Reads what the caller's `/proc` link `what` points to, for messages.
    fn proc_link(&self, what: &str) -> Option<PathBuf> {
        std::fs::read_link(format!("/proc/{}/{what}", self.tid())).ok()
    }

    fn denial(
        &self,
        op: &'static str,
        path: Option<String>,
        addr: Option<String>,
        needed: Mode,
    ) -> Denial {
        Denial {
            what: Operation {
                op,
                path,
                addr,
                host: None,
                port: None,
                syscall: crate::syscalls::name(i64::from(self.notif.data.nr)),
                pid: self.notif.pid,
            },
            needed,
            protected: false,
            reason: None,
        }
    }
}

/// Opens a pidfd for the calling thread's process.
pub(super) fn pidfd_for(tid: Pid) -> Result<OwnedFd, Errno> {
    match sys::pidfd_open(tid.as_raw(), true) {
        Ok(fd) => Ok(fd),
        Err(_) => {
            // Kernels before 6.9 have no thread pidfds: use the thread group leader.
            let status =
                std::fs::read_to_string(format!("/proc/{tid}/status")).map_err(|_| Errno::ESRCH)?;
            let tgid = status
                .lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
                .ok_or(Errno::ESRCH)?;
            sys::pidfd_open(tgid, false)
                .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::ESRCH)))
        }
    }
}

/// The status flags of the caller's descriptor `fd` (its access mode, `O_NONBLOCK`, …, and
/// `O_CLOEXEC`), as its `/proc/PID/fdinfo` shows them: for when the descriptor itself
/// cannot be taken (`pidfd_getfd` refused).
pub(super) fn fd_flags(tid: Pid, fd: i32) -> Result<i32, Errno> {
    let info =
        std::fs::read_to_string(format!("/proc/{tid}/fdinfo/{fd}")).map_err(|_| Errno::EBADF)?;
    info.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| i32::from_str_radix(f.trim(), 8).ok())
        .ok_or(Errno::EBADF)
}

/// Reads the calling thread's filesystem credentials.
pub(super) fn creds_of(tid: Pid) -> Result<Creds, Errno> {
    let status =
        std::fs::read_to_string(format!("/proc/{tid}/status")).map_err(|_| Errno::ESRCH)?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::split_whitespace)
    };
    // "Uid:\treal\teffective\tsaved\tfilesystem"
    let fs_id = |name| {
        field(name)
            .and_then(|mut f| f.nth(3))
            .and_then(|v| v.parse().ok())
    };
    Ok(Creds {
        fsuid: fs_id("Uid:").ok_or(Errno::ESRCH)?,
        fsgid: fs_id("Gid:").ok_or(Errno::ESRCH)?,
        groups: field("Groups:")
            .map(|f| f.filter_map(|g| g.parse().ok()).collect())
            .unwrap_or_default(),
    })
}
