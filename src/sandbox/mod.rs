//! The sandbox stage: turns a `Plan` into kernel objects in sandgate (`prepare`), then
//! applies them in the forked child right before `execve` (`Prepared::apply`).
//!
//! Preparing first means the child only makes syscalls on values built beforehand, and
//! that a broken profile fails in sandgate with a clear error instead of in the child.

mod around;
mod caches;
mod caps;
mod checked;
mod freeze;
pub mod landlock;
mod mask;
pub mod mounts;
pub mod probe;
pub mod rehome;
pub mod seccomp;

use std::io;
use std::os::fd::{OwnedFd, RawFd};

use crate::policy::{Confinement, MountSource, Plan, Temp};
use crate::sys;
pub use caches::Refused as RefusedCache;
pub use probe::{Backend, Features, Guarantee};

/// Why the sandbox for a call cannot be prepared in sandgate.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("cannot prepare the landlock ruleset: {0}")]
    Landlock(#[from] landlock::LandlockError),
    #[error(transparent)]
    Seccomp(#[from] seccomp::BuildError),
    #[error("cannot prepare the mount namespace: {0}")]
    Mounts(io::Error),
    #[error(transparent)]
    Temp(#[from] crate::private_temp::TempError),
    #[error(transparent)]
    Around(#[from] around::AroundError),
}

/// The step of the child's setup that failed, reported to sandgate through a pipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Step {
    MountNamespace = 1,
    Capabilities = 2,
    NoNewPrivs = 3,
    Landlock = 4,
    Seccomp = 5,
    Supervisor = 6,
    Exec = 7,
    Proxy = 8,
    Cgroup = 9,
    ProcessBoundary = 10,
}

impl Step {
    /// Decodes a step number sent by the child.
    pub fn from_u32(n: u32) -> Option<Step> {
        [
            Step::MountNamespace,
            Step::Capabilities,
            Step::NoNewPrivs,
            Step::Landlock,
            Step::Seccomp,
            Step::Supervisor,
            Step::Exec,
            Step::Proxy,
            Step::Cgroup,
            Step::ProcessBoundary,
        ]
        .into_iter()
        .find(|s| *s as u32 == n)
    }

    /// Returns the guarantee a failure at this step leaves unenforced.
    pub fn describe(self) -> &'static str {
        match self {
            Step::MountNamespace => {
                "the private mount, IPC and network namespaces (read-only view, protected paths, private /tmp and /dev/shm)"
            }
            Step::Capabilities => "dropping every capability",
            Step::NoNewPrivs => "no_new_privs",
            Step::Landlock => "the landlock ruleset",
            Step::Seccomp => "the seccomp filters",
            Step::Supervisor => "handing the seccomp listener to the supervisor",
            Step::Exec => "executing the command",
            Step::Proxy => "the proxy's listener in the sandbox's network namespace",
            Step::Cgroup => "joining the call's cgroups (its pid and memory limits)",
            Step::ProcessBoundary => {
                "the PID namespace and its own /proc (host processes out of sight, the call's processes ending with it)"
            }
        }
    }
}

/// The layers to apply to one restricted call.
struct Layers {
    mounts: Option<mounts::MountPlan>,
    /// The child is cloned into a PID namespace of its own with the mount namespace, as
    /// its pid 1, and mounts the namespace's own `/proc` (see `exec`).
    process_boundary: bool,
    /// `/tmp` and `/dev/shm` in the child's view are private (made by `mounts`, or by an
    /// enclosing sandgate whose namespace this call shares), so landlock may let it write
    /// there.
    private_temp: bool,
    /// The landlock backend's private temp: a directory of the host's, the command's
    /// `TMPDIR`, writable like the roots.
    temp_dir: Option<std::path::PathBuf>,
    /// No mount namespace stands behind the supervisor: it decides every change in the
    /// writable areas, and refuses elsewhere what landlock does not govern.
    decided: bool,
    landlock: Option<landlock::Prepared>,
    /// The copy-on-write caches an enclosing sandgate mounted (a nested call sharing its
    /// namespace), for landlock; empty otherwise.
    parent_caches: Vec<(std::ffi::CString, bool)>,
    seccomp: Option<seccomp::Prepared>,
    /// The child listens for the proxy in its own network namespace (see [`Applied`]).
    proxy: bool,
    last_cap: u32,
    /// Inherited sockets that could reach an address the sandbox refuses.
    close_on_exec: Vec<RawFd>,
    /// The call's cgroups, joined first (see [`Prepared::joining`]).
    cgroups: Option<crate::limits::cgroup::Join>,
}

/// Everything the child applies before `execve`; `None` for full access.
pub struct Prepared(Option<Layers>);

/// How a restricted call is laid out: the backend, and whether a namespaces run makes the
/// PID namespace (where the kernel refuses it, landlock's ptrace rule holds the process
/// boundary instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Namespaces {
        pid: bool,
    },
    Landlock,
    /// A nested call whose kernel refuses it namespaces of its own (its enclosing
    /// sandbox's filter refuses them): it runs in the enclosing sandbox's, whose boundary
    /// holds for it, with landlock and seccomp layers of its own.
    Enclosed,
}

impl Layout {
    /// The backend this layout applies.
    pub fn backend(self) -> Backend {
        match self {
            Layout::Namespaces { .. } | Layout::Enclosed => Backend::Namespaces,
            Layout::Landlock => Backend::Landlock,
        }
    }

    /// Returns true when what the command leaves running stays bounded after sandgate
    /// returns: by a PID namespace, which `sandgate ps`, `stop`, `tmp --clean` and a time
    /// limit find and end, or by the enclosing call's.
    pub fn bounds_what_is_kept(self) -> bool {
        matches!(self, Layout::Namespaces { pid: true } | Layout::Enclosed)
    }
}

/// Prepares the layers `plan` needs under `layout`.
///
/// # Errors
/// See [`SandboxError`].
pub fn prepare(plan: &Plan, features: &Features, layout: Layout) -> Result<Prepared, SandboxError> {
    let Confinement::Restricted(r) = &plan.confinement else {
        return Ok(Prepared(None));
    };
    let mounts = match (r.mounts, layout) {
        (MountSource::Own, Layout::Namespaces { .. }) => {
            let temp = match r.temp {
                Temp::PerWorkspace => crate::private_temp::open(&plan.workspace, true)?,
                Temp::PerCall => None,
            };
            let caches = caches::build(&plan.workspace, &r.caches)?;
            Some(
                mounts::MountPlan::build(r, &plan.cwd, temp.as_ref(), caches)
                    .map_err(SandboxError::Mounts)?,
            )
        }
        _ => None,
    };
    let private_temp =
        mounts.is_some() || matches!(r.mounts, MountSource::Parent | MountSource::Inherited);
    // Built inside the call's own mount namespace: a nested call stays in its parent's.
    let process_boundary = mounts.is_some() && layout == Layout::Namespaces { pid: true };
    // A nested call confined exactly like its parent adds no layer (see
    // `MountSource::Inherited`).
    let own_layers = r.mounts != MountSource::Inherited;
    // The proxy needs the sandbox's own network namespace (without it a TCP socket would be
    // the host's) and the supervisor (which performs the one connect allowed).
    let proxy =
        r.proxy.is_some() && mounts.is_some() && features.seccomp && features.seccomp_user_notif;
    let sockets = if proxy {
        seccomp::Sockets::UnixAndTcp
    } else {
        seccomp::Sockets::Unix
    };
    // Without a mount namespace behind it, the supervisor decides every change in the
    // writable areas (the backend refuses to run without one, see `probe`), the private
    // temp is a directory of the host's, and reads are granted around what is kept out.
    let decided = layout == Layout::Landlock;
    let temp = match decided {
        true => crate::private_temp::open(&plan.workspace, true)?,
        false => None,
    };
    // Without a supervisor to perform them, the sandbox must make its writes itself.
    let writes = match (features.seccomp && features.seccomp_user_notif, decided) {
        (false, _) => landlock::Writes::Direct,
        (true, false) => landlock::Writes::Performed,
        (true, true) => landlock::Writes::Decided,
    };
    let reads = match decided {
        true => landlock::Reads::Around(reads_around(r)?),
        false => landlock::Reads::Everywhere,
    };
    let extra: Vec<&OwnedFd> = temp.iter().map(|t| &t.fd).collect();
    let landlock = (own_layers && features.landlock_abi > 0)
        .then(|| landlock::prepare(r, writes, reads, &extra))
        .transpose()?;
    let seccomp = (own_layers && features.seccomp)
        .then(|| {
            // The supervisor performs every write in the writable areas, observed or not;
            // guarded git directories need it for removals too (git's at their read-only
            // top level).
            let paths = if decided {
                seccomp::PathCalls::Decided
            } else if plan.observe || !r.git_dirs.is_empty() {
                seccomp::PathCalls::PerformedAndObserved
            } else {
                seccomp::PathCalls::Performed
            };
            let terminal = seccomp::Terminal::detect();
            seccomp::prepare(
                features.seccomp_user_notif,
                plan.observe,
                paths,
                terminal,
                sockets,
            )
        })
        .transpose()?;
    let parent_caches = match r.mounts {
        MountSource::Parent => r
            .caches
            .iter()
            .filter(|c| c.exists)
            .filter_map(|c| Some((checked::cstring(&c.path).ok()?, c.dir)))
            .collect(),
        MountSource::Own | MountSource::Inherited => vec![],
    };
    Ok(Prepared(Some(Layers {
        mounts,
        process_boundary,
        private_temp,
        temp_dir: temp.map(|t| t.path),
        decided,
        landlock,
        parent_caches,
        seccomp,
        proxy,
        last_cap: last_cap(),
        close_on_exec: risky_inherited_sockets(),
        cgroups: None,
    })))
}

/// The read rules of the landlock backend: everything but the hidden paths and what a
/// mount namespace would have covered (the host's `/tmp`, `/dev/shm`, `/dev`), with the
/// devices the sandbox keeps and the paths kept visible beneath those granted again.
fn reads_around(r: &crate::policy::Restrictions) -> Result<Vec<around::Rule>, SandboxError> {
    let mut kept_out: Vec<std::path::PathBuf> = r.hidden.keys().cloned().collect();
    kept_out.extend(crate::policy::roots::COVERED.map(std::path::PathBuf::from));
    let writable: Vec<std::path::PathBuf> = r.writable_roots.iter().cloned().collect();
    let mut rules = around::plan(&kept_out, &writable)?;
    let again = crate::policy::roots::DEVICES
        .iter()
        .map(std::path::Path::new)
        .chain(r.kept_visible.iter().map(std::path::PathBuf::as_path))
        .filter(|p| {
            !r.hidden
                .keys()
                .any(|h| p.starts_with(h) || h.starts_with(p))
        });
    rules.extend(again.filter_map(around::rule_for));
    Ok(rules)
}

/// Reads the highest capability number the kernel knows.
fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63)
}

/// Returns inherited fds that are sockets other than unix stream/seqpacket ones. A
/// datagram or IP socket handed in by the caller could send to addresses the sandbox
/// refuses, so such fds are not passed into a restricted sandbox.
fn risky_inherited_sockets() -> Vec<RawFd> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return vec![];
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<RawFd>().ok())
        .filter(|fd| match sys::socket_kind(*fd) {
            Some((libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_SEQPACKET)) | None => false,
            Some(_) => true,
        })
        .collect()
}

impl Prepared {
    /// Returns true when the call is confined at all.
    pub fn is_restricted(&self) -> bool {
        self.0.is_some()
    }

    /// Has the child join the call's cgroups before anything else (a restricted call only:
    /// full access runs in sandgate's own process).
    pub fn joining(mut self, join: crate::limits::cgroup::Join) -> Prepared {
        if let Some(layers) = &mut self.0 {
            layers.cgroups = Some(join);
        }
        self
    }

    /// Has the child open the command's standard streams again in its own view once its
    /// mounts are in place (see `rehome`); nothing without a mount namespace.
    pub fn rehoming(mut self, streams: Vec<rehome::Rehome>) -> Prepared {
        if let Some(mounts) = self.0.as_mut().and_then(|l| l.mounts.as_mut()) {
            mounts.rehome = streams;
        }
        self
    }

    /// Returns true when the child will listen for the proxy.
    pub fn has_proxy(&self) -> bool {
        self.0.as_ref().is_some_and(|l| l.proxy)
    }

    /// The landlock backend's private temp, the command's `TMPDIR`.
    pub fn temp_dir(&self) -> Option<&std::path::Path> {
        self.0.as_ref().and_then(|l| l.temp_dir.as_deref())
    }

    /// Returns true when nothing but sandgate ends what the command leaves running: the
    /// call has no PID namespace and is no nested one (whose processes end with its
    /// parent's namespace).
    pub fn ends_orphans_itself(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|l| l.decided || (l.mounts.is_some() && !l.process_boundary))
    }

    /// Returns true when the supervisor decides every change (the landlock backend).
    pub fn supervisor_decides(&self) -> bool {
        self.0.as_ref().is_some_and(|l| l.decided)
    }

    /// Returns true when `/tmp` and `/dev/shm` are private in the child's view.
    pub fn has_private_temp(&self) -> bool {
        self.0.as_ref().is_some_and(|l| l.private_temp)
    }

    /// The `clone` flags of the child that applies this sandbox when it has a process
    /// boundary: a new PID namespace (the child is its pid 1) with the mount, IPC, network
    /// and (when not root) user namespaces. `None`: the child is forked, and enters the
    /// mount namespace itself if it has one.
    pub fn clone_flags(&self) -> Option<libc::c_int> {
        let layers = self.0.as_ref().filter(|l| l.process_boundary)?;
        let mounts = layers.mounts.as_ref()?;
        Some((mounts.namespaces() | nix::sched::CloneFlags::CLONE_NEWPID).bits())
    }

    /// Applies every layer to the calling (forked, single-threaded) child, in this order:
    /// 0. the call's cgroups, before anything else: from here on every process the child
    ///    forks (the command, an init of its own) starts inside them and is bound by their
    ///    limits. **Nothing may be forked in the child before this step** (see
    ///    `limits::cgroup`);
    /// 1. the mount namespace (needs the capabilities dropped in 2) — entered here, unless
    ///    the child was cloned into it ([`Prepared::clone_flags`]), and then also the PID
    ///    namespace's own `/proc` — and in its new network namespace the loopback interface
    ///    and the proxy's listener, when the call has one;
    /// 2. capabilities: bounding, ambient, then inheritable/permitted/effective;
    /// 3. no_new_privs (landlock and seccomp require it; it also neuters setuid binaries);
    /// 4. landlock, with rules for the private `/tmp` and `/dev/shm` and the copy-on-write
    ///    caches (each its mount in this view, never the host's inode);
    /// 5. seccomp, last, because its deny list forbids the mount calls of step 1.
    ///
    /// # Errors
    /// The step that failed and its errno.
    pub fn apply(self) -> Result<Applied, (Step, io::Error)> {
        let Some(mut layers) = self.0 else {
            return Ok(Applied::default());
        };
        if let Some(join) = layers.cgroups.take() {
            join.enter().map_err(|e| (Step::Cgroup, e))?;
        }
        for fd in &layers.close_on_exec {
            // Best effort: an fd that vanished needs no closing.
            let _ = sys::set_cloexec(*fd);
        }
        let (mut writable, refused_caches, stdin) = match &layers.mounts {
            Some(mounts) => {
                if !layers.process_boundary {
                    mounts.enter().map_err(|e| (Step::MountNamespace, e))?;
                }
                let made = mounts.apply().map_err(|e| (Step::MountNamespace, e))?;
                (made.writable, made.refused, made.stdin)
            }
            None => (vec![], vec![], None),
        };
        if layers.process_boundary {
            mounts::mount_proc().map_err(|e| (Step::ProcessBoundary, e))?;
        }
        // A nested call: the enclosing sandbox's layers, as this view shows them (its own
        // landlock domain still bounds whatever is granted here).
        writable.extend(layers.parent_caches.iter().filter_map(|(path, dir)| {
            let flags = if *dir { libc::O_DIRECTORY } else { 0 };
            let fd = sys::open_path(path, flags).ok()?;
            Some(caches::Mounted { fd, dir: *dir })
        }));
        let proxy = if layers.proxy {
            Some(proxy_listener().map_err(|e| (Step::Proxy, e))?)
        } else {
            None
        };
        // Opened in the child's own view: these are the private ones, never the host's.
        let temps = if layers.private_temp {
            [c"/tmp", c"/dev/shm"]
                .iter()
                .filter_map(|p| sys::open_path(p, libc::O_DIRECTORY).ok())
                .collect()
        } else {
            vec![]
        };
        caps::drop_all(layers.last_cap).map_err(|e| (Step::Capabilities, e))?;
        sys::set_no_new_privs().map_err(|e| (Step::NoNewPrivs, e))?;
        if let Some(landlock) = layers.landlock {
            let (dirs, files): (Vec<_>, Vec<_>) = writable.into_iter().partition(|m| m.dir);
            let dirs = temps.into_iter().chain(dirs.into_iter().map(|m| m.fd));
            let files = files.into_iter().map(|m| m.fd).collect();
            landlock
                .apply(dirs.collect(), files)
                .map_err(|e| (Step::Landlock, e))?;
        }
        let listener = match &layers.seccomp {
            Some(seccomp) => seccomp.apply().map_err(|e| (Step::Seccomp, e))?,
            None => None,
        };
        Ok(Applied {
            listener,
            proxy,
            refused_caches,
            stdin,
        })
    }

    /// Returns the fds the child will not pass on (for a note on stderr).
    pub fn withheld_fds(&self) -> &[RawFd] {
        self.0.as_ref().map_or(&[], |l| l.close_on_exec.as_slice())
    }
}

/// What the child hands to sandgate once its sandbox is in place.
#[derive(Default)]
pub struct Applied {
    /// The seccomp listener, for the supervisor.
    pub listener: Option<OwnedFd>,
    /// A TCP socket listening on `127.0.0.1:PROXY_PORT` in the sandbox's own network
    /// namespace: sandgate's proxy accepts on it from outside, so the sandbox reaches the
    /// proxy and nothing else.
    pub proxy: Option<OwnedFd>,
    /// The copy-on-write caches that stay read-only because the kernel refused their
    /// overlay.
    pub refused_caches: Vec<RefusedCache>,
    /// The command's description of the regular file it reads as stdin, opened in the
    /// child's view (see `rehome`), for sandgate to follow how far it reads.
    pub stdin: Option<OwnedFd>,
}

/// Brings this (new) network namespace's loopback up and listens on the proxy's port.
fn proxy_listener() -> io::Result<OwnedFd> {
    sys::loopback_up()?;
    let address =
        std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, crate::network::PROXY_PORT);
    Ok(OwnedFd::from(std::net::TcpListener::bind(address)?))
}

/// Tries, in a throwaway child, to create a user namespace (`user`) and/or the mount
/// namespace a restricted run builds (`mount`: unshare, id maps, recursive read-only).
/// Used by `doctor`; forks, so sandgate must be single-threaded.
pub fn probe_namespace(user: bool, mount: bool) -> bool {
    let plan = mount.then(mounts::MountPlan::probe);
    in_throwaway_child(sys::fork(), || match &plan {
        Some(plan) => plan.enter().is_ok() && plan.apply().is_ok(),
        None => !user || nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER).is_ok(),
    })
}

/// Tries, in a throwaway child cloned as a restricted run clones its own, to build the
/// process boundary: a new PID namespace with the mount namespaces, id maps, and a `/proc`
/// of its own. Used by `doctor`; forks, so sandgate must be single-threaded.
pub fn probe_process_boundary() -> bool {
    let plan = mounts::MountPlan::probe();
    let flags = plan.namespaces() | nix::sched::CloneFlags::CLONE_NEWPID;
    in_throwaway_child(sys::fork_into(flags.bits()), || {
        plan.apply().is_ok() && mounts::mount_proc().is_ok()
    })
}

/// Which guarantee a failed clone into `flags` (see [`Prepared::clone_flags`]) leaves
/// missing: the mount namespaces alone are tried again in a throwaway child, and if the
/// kernel makes them, it is the PID namespace it refused. Only runs when the clone failed.
pub fn failed_clone_step(flags: libc::c_int) -> Step {
    match in_throwaway_child(sys::fork_into(flags & !libc::CLONE_NEWPID), || true) {
        true => Step::ProcessBoundary,
        false => Step::MountNamespace,
    }
}

/// Runs `attempt` in the child `forked` made, and returns whether it succeeded there.
fn in_throwaway_child(forked: io::Result<libc::pid_t>, attempt: impl FnOnce() -> bool) -> bool {
    use nix::sys::wait::{waitpid, WaitStatus};
    match forked {
        Ok(0) => sys::exit_immediately(if attempt() { 0 } else { 1 }),
        Ok(pid) => matches!(
            waitpid(nix::unistd::Pid::from_raw(pid), None),
            Ok(WaitStatus::Exited(_, 0))
        ),
        Err(_) => false,
    }
}
