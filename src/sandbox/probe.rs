//! What the running kernel can enforce, and which guarantees of a restricted profile hold
//! here. Used up front by every run (fail closed before forking) and by `sandgate doctor`.
//!
//! Everything here is a cheap query, except the mount-namespace probe, which forks; a run
//! does not call it and instead learns of a missing namespace from the child.

use serde::Serialize;

use crate::sys;

/// A guarantee a restricted profile makes, named after the layer that provides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Guarantee {
    /// Writes confined to the writable roots, truncate included (landlock ABI ≥ 3).
    LandlockFilesystem,
    /// TCP bind and connect refused (landlock ABI ≥ 4).
    LandlockNetwork,
    /// Signals and abstract unix sockets scoped to the sandbox (landlock ABI ≥ 6).
    LandlockScopes,
    /// The syscall deny list and the socket-family filter (seccomp).
    SyscallFilter,
    /// Read-only view outside the writable roots, protected paths, private /tmp.
    MountNamespace,
    /// A PID namespace with a /proc of its own: host processes are out of sight and the
    /// call's processes end with it (needs the mount namespace).
    ProcessBoundary,
}

impl Guarantee {
    /// Every guarantee a restricted profile makes.
    pub const ALL: [Guarantee; 6] = [
        Guarantee::LandlockFilesystem,
        Guarantee::LandlockNetwork,
        Guarantee::LandlockScopes,
        Guarantee::SyscallFilter,
        Guarantee::MountNamespace,
        Guarantee::ProcessBoundary,
    ];

    /// Returns a sentence that says what does not hold when this guarantee is missing.
    pub fn describe(self) -> &'static str {
        match self {
            Guarantee::LandlockFilesystem => {
                "landlock filesystem rules (ABI >= 3): writes outside the writable roots are not refused by landlock"
            }
            Guarantee::LandlockNetwork => {
                "landlock network rules (ABI >= 4): TCP bind/connect is not refused by landlock"
            }
            Guarantee::LandlockScopes => {
                "landlock scopes (ABI >= 6): the command may signal processes outside the sandbox"
            }
            Guarantee::SyscallFilter => {
                "seccomp filter and supervisor: ptrace, io_uring, mount, unshare, TIOCSTI and IP sockets are not refused, and nothing seals git configuration, hooks or .sandgate in the writable areas"
            }
            Guarantee::MountNamespace => {
                "mount namespace: no read-only view (chmod/chown/utimes outside are not refused), protected paths are writable, no private /tmp"
            }
            Guarantee::ProcessBoundary => {
                "process boundary (a PID namespace with its own /proc): host processes, their command lines and sockets are visible, and processes left in the background outlive the call"
            }
        }
    }

    /// Returns the minimum landlock ABI this guarantee needs, if it is a landlock one.
    fn landlock_abi(self) -> Option<i32> {
        match self {
            Guarantee::LandlockFilesystem => Some(3),
            Guarantee::LandlockNetwork => Some(4),
            Guarantee::LandlockScopes => Some(6),
            Guarantee::SyscallFilter | Guarantee::MountNamespace | Guarantee::ProcessBoundary => {
                None
            }
        }
    }
}

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

    /// Returns the guarantees that cannot hold given these features (whether the kernel
    /// lets the namespaces be made is only known once the child tries). The process
    /// boundary is built inside the mount namespace, so it falls with it.
    pub fn missing(&self) -> Vec<Guarantee> {
        Guarantee::ALL
            .into_iter()
            .filter(|g| match (g, g.landlock_abi()) {
                (_, Some(abi)) => self.landlock_abi < abi,
                // Without user notification nothing performs the sandbox's writes, so
                // nothing seals git's configuration, hooks or `.sandgate` either.
                (Guarantee::SyscallFilter, None) => !self.seccomp || !self.seccomp_user_notif,
                (Guarantee::MountNamespace, None) => !self.mount_namespace_allowed,
                (Guarantee::ProcessBoundary, None) => {
                    !self.mount_namespace_allowed || !self.pid_namespace_allowed
                }
                _ => false,
            })
            .collect()
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
        assert_eq!(f(7).missing(), vec![]);
        assert_eq!(f(5).missing(), vec![Guarantee::LandlockScopes]);
        assert_eq!(f(0).missing(), Guarantee::ALL[..3].to_vec());
    }
}
