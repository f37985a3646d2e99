//! The guarantees a restricted profile makes, the backends that hold them, and the ones a
//! call may name to run without (`--allow-degraded=NAME,…`).
//!
//! Which guarantees hold on this kernel under which backend is the sandbox's to say
//! (`sandbox::probe`); what may be given up is policy, decided here from the names alone.

use serde::Serialize;

use crate::limits::Kind as LimitKind;

/// How a restricted call is enforced (see `docs/architecture.md`, "Backends").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// Mount, IPC, network and PID namespaces (and a user namespace when unprivileged),
    /// with landlock and seccomp inside.
    Namespaces,
    /// No namespace at all: landlock for files, seccomp, and the supervisor performing what
    /// landlock cannot say. What runs where namespaces are refused.
    Landlock,
}

impl Backend {
    /// Its name, as `--backend` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Namespaces => "namespaces",
            Backend::Landlock => "landlock",
        }
    }
}

/// The backend a call asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// Namespaces where the kernel makes them, landlock where it refuses them.
    #[default]
    Auto,
    Namespaces,
    Landlock,
}

impl BackendChoice {
    /// The backend to try first.
    pub fn first(self) -> Backend {
        match self {
            BackendChoice::Auto | BackendChoice::Namespaces => Backend::Namespaces,
            BackendChoice::Landlock => Backend::Landlock,
        }
    }
}

/// A guarantee a restricted profile makes, named for what holds, not for the layer that
/// holds it: the layer differs by backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Guarantee {
    /// Git's metadata, `.sandgate/` and the persistence files in the writable roots stay
    /// as they were: nothing there can plant what the host runs later.
    ProtectedPaths,
    /// Hidden paths (credentials, sandgate's own files) cannot be read.
    Secrets,
    /// Nothing outside the writable roots changes: data, names, modes, owners, times.
    ReadOnlyOutside,
    /// The command's temporary files are its own: the host's `/tmp` (its files, sockets
    /// and FIFOs) is out of reach.
    PrivateTmp,
    /// No network: IP sockets refused, allowed hosts only through sandgate's proxy.
    Network,
    /// Signals, ptrace and abstract unix sockets stop at the sandbox's edge.
    Scopes,
    /// The syscall deny list: ptrace, io_uring, mount, unshare, TIOCSTI and the rest.
    SyscallFilter,
    /// Processes outside the call are out of reach — not traced, their memory, environment
    /// and descriptors unreadable — and the call's processes end with it. Under a PID
    /// namespace they are out of sight too; without one their names and command lines
    /// show in `/proc` (see `docs/architecture.md`, "Backends and guarantees").
    ProcessBoundary,
    /// The host's SysV IPC objects are out of reach.
    Ipc,
}

impl Guarantee {
    /// Every guarantee a restricted profile makes.
    pub const ALL: [Guarantee; 9] = [
        Guarantee::ProtectedPaths,
        Guarantee::Secrets,
        Guarantee::ReadOnlyOutside,
        Guarantee::PrivateTmp,
        Guarantee::Network,
        Guarantee::Scopes,
        Guarantee::SyscallFilter,
        Guarantee::ProcessBoundary,
        Guarantee::Ipc,
    ];

    /// Returns false for the guarantees no run may give up: without them a command could
    /// plant what the host runs later, or read what it was never to see.
    pub fn nameable(self) -> bool {
        !matches!(self, Guarantee::ProtectedPaths | Guarantee::Secrets)
    }

    /// The name `--allow-degraded` takes.
    pub fn name(self) -> &'static str {
        match self {
            Guarantee::ProtectedPaths => "protected-paths",
            Guarantee::Secrets => "secrets",
            Guarantee::ReadOnlyOutside => "read-only-outside",
            Guarantee::PrivateTmp => "private-tmp",
            Guarantee::Network => "network",
            Guarantee::Scopes => "scopes",
            Guarantee::SyscallFilter => "syscall-filter",
            Guarantee::ProcessBoundary => "process-boundary",
            Guarantee::Ipc => "ipc",
        }
    }

    /// Returns a sentence that says what does not hold when this guarantee is missing.
    pub fn describe(self) -> &'static str {
        match self {
            Guarantee::ProtectedPaths => {
                "protected paths: git configuration, hooks, .sandgate and persistence files in the writable roots could be changed"
            }
            Guarantee::Secrets => "secrets: hidden paths could be read",
            Guarantee::ReadOnlyOutside => {
                "read-only outside: files outside the writable roots could be written, or their mode, owner or times changed"
            }
            Guarantee::PrivateTmp => {
                "private /tmp: the host's /tmp (its files, sockets and FIFOs) is shared"
            }
            Guarantee::Network => "network: TCP and UDP sockets are not refused",
            Guarantee::Scopes => {
                "scopes: the command may signal processes outside the sandbox or use a host daemon's abstract unix socket name"
            }
            Guarantee::SyscallFilter => {
                "syscall filter: ptrace, io_uring, mount, unshare, TIOCSTI and the rest of the deny list are not refused"
            }
            Guarantee::ProcessBoundary => {
                "process boundary: processes outside the sandbox could be traced or their memory read, and what the command leaves running could outlive it"
            }
            Guarantee::Ipc => "ipc: the host's SysV shared memory, semaphores and message queues are reachable",
        }
    }
}

/// What a call may run without: the guarantees and the explicit limits it named. Empty
/// unless named — there is no blanket degradation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Degradable {
    guarantees: Vec<Guarantee>,
    limits: Vec<LimitKind>,
}

/// Why `--allow-degraded` was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DegradableError {
    #[error("--allow-degraded needs the names of what may be given up (--allow-degraded=NAME,…); {list}", list = nameable_list())]
    Unnamed,
    #[error("--allow-degraded cannot give up {0}: no run goes without it; {list}", list = nameable_list())]
    NotNameable(&'static str),
    #[error("--allow-degraded: unknown name {0:?}; {list}", list = nameable_list())]
    Unknown(String),
}

/// The sentence that lists what may be named.
fn nameable_list() -> String {
    let names: Vec<&str> = Guarantee::ALL
        .into_iter()
        .filter(|g| g.nameable())
        .map(Guarantee::name)
        .chain([LimitKind::LimitPids.name(), LimitKind::LimitMemory.name()])
        .collect();
    format!("what may be named: {}", names.join(", "))
}

impl Degradable {
    /// Reads one `--allow-degraded=NAME,…`; the bare flag reads as an empty text.
    ///
    /// # Errors
    /// No name, a name no run may give up, or an unknown name.
    pub fn parse(text: &str) -> Result<Degradable, DegradableError> {
        let names: Vec<&str> = text
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect();
        if names.is_empty() {
            return Err(DegradableError::Unnamed);
        }
        let mut allowed = Degradable::default();
        for name in names {
            if let Some(g) = Guarantee::ALL.into_iter().find(|g| g.name() == name) {
                if !g.nameable() {
                    return Err(DegradableError::NotNameable(g.name()));
                }
                allowed.guarantees.push(g);
            } else if let Some(k) = [LimitKind::LimitPids, LimitKind::LimitMemory]
                .into_iter()
                .find(|k| k.name() == name)
            {
                allowed.limits.push(k);
            } else {
                return Err(DegradableError::Unknown(name.to_owned()));
            }
        }
        Ok(allowed)
    }

    /// Everything named by every `--allow-degraded` of a call.
    pub fn union(each: &[Degradable]) -> Degradable {
        Degradable {
            guarantees: each.iter().flat_map(|d| d.guarantees.clone()).collect(),
            limits: each.iter().flat_map(|d| d.limits.clone()).collect(),
        }
    }

    /// Returns true when the call named `g`.
    pub fn guarantee(&self, g: Guarantee) -> bool {
        self.guarantees.contains(&g)
    }

    /// Returns true when the call named the limit `k`.
    pub fn limit(&self, k: LimitKind) -> bool {
        self.limits.contains(&k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_flag_is_refused_with_what_could_be_named() {
        let e = Degradable::parse("").unwrap_err();
        assert_eq!(e, DegradableError::Unnamed);
        let text = e.to_string();
        for g in Guarantee::ALL.into_iter().filter(|g| g.nameable()) {
            assert!(text.contains(g.name()), "{text}");
        }
        assert!(text.contains("limit-pids"), "{text}");
        assert!(
            !text.contains("protected-paths") && !text.contains("secrets"),
            "{text}"
        );
    }

    #[test]
    fn protected_paths_and_secrets_cannot_be_given_up() {
        for name in ["protected-paths", "secrets"] {
            let e = Degradable::parse(&format!("private-tmp,{name}")).unwrap_err();
            assert!(matches!(e, DegradableError::NotNameable(n) if n == name));
        }
    }

    #[test]
    fn named_guarantees_and_limits_are_the_only_ones_given_up() {
        let d = Degradable::union(&[
            Degradable::parse("private-tmp, ipc").unwrap(),
            Degradable::parse("limit-pids").unwrap(),
        ]);
        assert!(d.guarantee(Guarantee::PrivateTmp) && d.guarantee(Guarantee::Ipc));
        assert!(!d.guarantee(Guarantee::ProcessBoundary));
        assert!(d.limit(LimitKind::LimitPids) && !d.limit(LimitKind::LimitMemory));
        assert_eq!(Degradable::union(&[]), Degradable::default());
        assert!(matches!(
            Degradable::parse("everything"),
            Err(DegradableError::Unknown(_))
        ));
    }
}
