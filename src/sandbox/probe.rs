//! What the running kernel can enforce, and which guarantees of a restricted profile hold
//! here under each backend. Used up front by every run (fail closed before forking) and by
//! `sandgate doctor`.
//!
//! Everything here is a cheap query, except the namespace probes, which fork; a run does
//! not call them and instead learns of a refused namespace from the child.

use serde::Serialize;

pub use crate::policy::guarantee::{Backend, Guarantee};
use crate::sys;

/// The kernel facilities sandgate uses, as far as they can be queried without forking.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Features {
    pub landlock_abi: i32,
    pub seccomp: bool,
    pub seccomp_user_notif: bool,
    /// False only when a debug build pretends the mount namespace is missing.
    pub mount_namespace_allowed: bool,
    /// False only when a debug build pretends the PID namespace is missing.
    pub pid_namespace_allowed: bool,
}

impl Features {
    /// Queries the running kernel.
    pub fn detect() -> Features {
        let seccomp = sys::seccomp_filter_available();
        let mut features = Features {
            landlock_abi: sys::landlock_abi(),
            seccomp,
            seccomp_user_notif: seccomp
                && sys::seccomp_action_available(libc::SECCOMP_RET_USER_NOTIF),
            mount_namespace_allowed: true,
            pid_namespace_allowed: true,
        };
        pretend_missing(&mut features);
        features
    }

    /// Returns the guarantees that cannot hold under `backend` given these features
    /// (whether the kernel lets the namespaces be made is only known once the child tries).
    pub fn missing(&self, backend: Backend) -> Vec<Guarantee> {
        Guarantee::ALL
            .into_iter()
            .filter(|g| !self.holds(*g, backend))
            .collect()
    }

    /// Returns true when `g` holds under `backend` with these features.
    fn holds(&self, g: Guarantee, backend: Backend) -> bool {
        let landlock_fs = self.landlock_abi >= 3;
        // Without user notification nothing performs the sandbox's writes, so nothing
        // seals git's configuration, hooks or `.sandgate` in the writable roots either.
        let supervisor = self.seccomp && self.seccomp_user_notif;
        let namespaces = backend == Backend::Namespaces && self.mount_namespace_allowed;
        match (g, backend) {
            (Guarantee::SyscallFilter, _) => supervisor,
            (Guarantee::Scopes, Backend::Namespaces) => self.landlock_abi >= 6,
            (Guarantee::Network, Backend::Namespaces) => namespaces || self.seccomp,
            // A PID namespace, or landlock's ptrace rule and signal scope with an ender
            // that ends every process of the call at once (`exec::ender`).
            (Guarantee::ProcessBoundary, Backend::Namespaces) => {
                namespaces && (self.pid_namespace_allowed || self.landlock_abi >= 6)
            }
            (Guarantee::ProtectedPaths, Backend::Namespaces) => namespaces && supervisor,
            (Guarantee::ReadOnlyOutside, Backend::Namespaces) => namespaces && landlock_fs,
            (Guarantee::Secrets | Guarantee::PrivateTmp | Guarantee::Ipc, Backend::Namespaces) => {
                namespaces
            }
            (Guarantee::Network, Backend::Landlock) => self.seccomp,
            // The supervisor decides every change landlock does not govern, and performs
            // every one in the writable roots.
            (
                Guarantee::ProtectedPaths | Guarantee::ReadOnlyOutside | Guarantee::PrivateTmp,
                Backend::Landlock,
            ) => landlock_fs && supervisor,
            (Guarantee::Secrets, Backend::Landlock) => landlock_fs,
            // SysV IPC and message queues refused by the filter.
            (Guarantee::Ipc, Backend::Landlock) => self.seccomp,
            // Signals and abstract connects scoped by landlock; binds decided by the
            // supervisor, which binds no abstract name.
            (Guarantee::Scopes, Backend::Landlock) => self.landlock_abi >= 6 && supervisor,
            // Landlock's ptrace rule: no process outside the call can be traced or have its
            // memory, environment or descriptors read (through `/proc` either); its signal
            // scope lets the ender end all the call leaves at once (`exec::ender`).
            (Guarantee::ProcessBoundary, Backend::Landlock) => self.landlock_abi >= 6,
        }
    }
}

impl Features {
    /// What holds `g` under `backend`, for `sandgate doctor`.
    pub fn held_by(&self, g: Guarantee, backend: Backend) -> &'static str {
        match (g, backend) {
            (Guarantee::ProtectedPaths, Backend::Namespaces) => {
                "read-only binds in the mount namespace, and the supervisor's seal rules"
            }
            (Guarantee::ProtectedPaths, Backend::Landlock) => {
                "the supervisor, which performs every change in the writable roots"
            }
            (Guarantee::Secrets, Backend::Namespaces) => "empty mounts over hidden paths",
            (Guarantee::Secrets, Backend::Landlock) => "landlock read rules built around them",
            (Guarantee::ReadOnlyOutside, Backend::Namespaces) => {
                "a read-only mount namespace, and landlock"
            }
            (Guarantee::ReadOnlyOutside, Backend::Landlock) => {
                "landlock, and the supervisor for modes, owners and times"
            }
            (Guarantee::PrivateTmp, Backend::Namespaces) => "a private /tmp mount",
            (Guarantee::PrivateTmp, Backend::Landlock) => {
                "a private $TMPDIR; the host's /tmp unreadable through landlock"
            }
            (Guarantee::Network, Backend::Namespaces) => {
                "a network namespace of its own, and the socket filter"
            }
            (Guarantee::Network, Backend::Landlock) => "the socket filter",
            (Guarantee::Scopes, _) => "landlock scopes",
            (Guarantee::SyscallFilter, _) => "seccomp",
            (Guarantee::ProcessBoundary, Backend::Namespaces) if self.pid_namespace_allowed => {
                "a PID namespace with its own /proc"
            }
            (Guarantee::ProcessBoundary, _) => {
                "landlock's ptrace rule and signal scope, and an ender that ends every process of the call at once (host processes' names and command lines stay visible)"
            }
            (Guarantee::Ipc, Backend::Namespaces) => "an IPC namespace of its own",
            (Guarantee::Ipc, Backend::Landlock) => "SysV IPC calls refused by seccomp",
        }
    }
}

/// In debug builds (the ones `cargo test` runs), `SANDGATE_DEBUG_PRETEND_MISSING` names
/// facilities to treat as absent (`landlock`, `seccomp`, `mount-namespace`,
/// `pid-namespace`; `proxy`, read by the proxy itself), so the fail-closed paths can be
/// tested on a kernel that has everything. Release builds ignore it: no environment
/// variable can weaken a release binary.
#[cfg(debug_assertions)]
fn pretend_missing(features: &mut Features) {
    let Ok(list) = std::env::var("SANDGATE_DEBUG_PRETEND_MISSING") else {
        return;
    };
    for name in list.split(',').map(str::trim) {
        match name {
            "landlock" => features.landlock_abi = 0,
            "seccomp" => {
                features.seccomp = false;
                features.seccomp_user_notif = false;
            }
            "mount-namespace" => features.mount_namespace_allowed = false,
            "pid-namespace" => features.pid_namespace_allowed = false,
            _ => {}
        }
    }
}

#[cfg(not(debug_assertions))]
fn pretend_missing(_: &mut Features) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_thresholds_decide_the_landlock_guarantees() {
        let f = |abi| Features {
            landlock_abi: abi,
            seccomp: true,
            seccomp_user_notif: true,
            mount_namespace_allowed: true,
            pid_namespace_allowed: true,
        };
        let ns = Backend::Namespaces;
        assert_eq!(f(7).missing(ns), vec![]);
        assert_eq!(f(5).missing(ns), vec![Guarantee::Scopes]);
        assert_eq!(
            f(0).missing(ns),
            vec![Guarantee::ReadOnlyOutside, Guarantee::Scopes]
        );
    }
}
