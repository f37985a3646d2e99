//! The call's resource limits in the pipeline: resolved from the layers, the cgroups made
//! before the fork — or the call refused, degraded or noted when a limit cannot hold — and
//! what the kernel counted said when the command has ended.

use std::io;

use serde_json::json;

use super::Layers;
use crate::cli::LimitArgs;
use crate::error::Error;
use crate::limits::cgroup::{CallCgroups, Join};
use crate::limits::{self, Kind, Limits, Origin, Unenforced};
use crate::policy::guarantee::Degradable;
use crate::policy::{self, Mode, Plan, Standing};

/// The limits of this call, from its flags, the configuration files and the standing
/// preset; what a person should know about how is said on stderr.
pub(super) fn resolve(args: &LimitArgs, layers: &Layers, standing: &Standing) -> Limits {
    let resolved = resolved(args, layers, standing);
    for warning in &resolved.warnings {
        crate::say!("sandgate: warning: {warning}");
    }
    for note in &resolved.notes {
        crate::say!("sandgate: note: {note}");
    }
    resolved.limits
}

fn resolved(args: &LimitArgs, layers: &Layers, standing: &Standing) -> limits::Resolved {
    let preset = policy::preset::find(&standing.preset).ok();
    limits::resolve(
        &limits::Layers {
            flags: args.asked(),
            user: layers.user.limits(),
            managed: layers.managed.limits(),
            project: standing.project_limits,
            preset: preset.as_ref().map(|p| (p.key.as_str(), p.limits)),
        },
        limits::ram(),
    )
}

/// What `doctor` says of the limits: each one, what enforces it, whether it holds here
/// (tried for real: a cgroup is made, joined by a throwaway child and removed), and what a
/// call would get outside any workspace (from the environment, the configuration files
/// and the standing preset).
pub(crate) fn doctor() -> serde_json::Value {
    use clap::Parser;
    let (args, layers) = match (
        crate::cli::Cli::try_parse_from(["sandgate"]),
        Layers::load(),
    ) {
        (Ok(cli), Ok(layers)) => (cli.run, layers),
        (Err(e), _) => return json!({ "error": e.to_string() }),
        (_, Err(e)) => return json!({ "error": e.to_string() }),
    };
    let knobs = policy::standing::Knobs {
        preset: args.knobs.preset.clone(),
        mode: args.knobs.sandbox,
        approval: args.knobs.approval,
    };
    let standing = match policy::standing::resolve(
        &knobs,
        &layers.user,
        &layers.managed,
        &policy::config::Project::default(),
        None,
    ) {
        Ok(standing) => standing,
        Err(e) => return json!({ "error": e.to_string() }),
    };
    let resolved = resolved(&args.limits, &layers, &standing);
    let limits = resolved.limits;
    let probe = limits::cgroup::probe();
    let cgroup = |kind: Kind, limit: &Option<limits::Limit>| {
        let held = probe.held.iter().find(|h| h.kind == kind);
        let unheld = probe.unheld.iter().find(|u| u.kind == kind);
        json!({
            "mechanism": held.map(|h| h.version),
            "beneath": held.and_then(|h| h.dir.parent()),
            "holds": held.is_some(),
            "why": unheld.map(|u| &u.why),
            "default": limit,
        })
    };
    json!({
        "preset": standing.preset,
        "mode": standing.mode,
        "tmpfs": { "mechanism": "tmpfs", "holds": true, "size": limits.tmpfs.bytes,
            "inodes": limits.tmpfs.inodes, "origin": limits.tmpfs_origin },
        "pids": cgroup(Kind::LimitPids, &limits.pids),
        "memory": cgroup(Kind::LimitMemory, &limits.memory),
        "warnings": resolved.warnings,
    })
}

/// The cgroup limits of a call, as far as they hold.
pub(super) struct CallLimits {
    cgroups: CallCgroups,
    limits: Limits,
    degradable: Degradable,
    /// Explicit limits that do not hold, in a run `--allow-degraded` let go ahead.
    pub(super) degraded: Vec<Unenforced>,
}

impl CallLimits {
    /// Makes the call's cgroups. An explicit limit that cannot hold refuses the call (78)
    /// unless degraded runs are allowed; a default that cannot hold is said in one note.
    /// Full access has no sandbox and so no limits: a flag asking for one gets a note.
    ///
    /// # Errors
    /// [`Error::Limits`]: explicit limits that cannot hold here.
    pub(super) fn make(plan: &Plan, limits: Limits) -> Result<CallLimits, Error> {
        let mut call = CallLimits {
            cgroups: CallCgroups::default(),
            limits,
            degradable: plan.degradable.clone(),
            degraded: vec![],
        };
        let wanted: Vec<(Kind, u64)> = call.limits.cgroup().map(|(k, l)| (k, l.value)).collect();
        if plan.mode == Mode::FullAccess {
            let mut flags: Vec<&str> = call
                .limits
                .cgroup()
                .filter(|(_, l)| l.origin == Origin::Flag)
                .map(|(k, _)| k.flag())
                .collect();
            if call.limits.tmpfs_origin == Origin::Flag {
                flags.insert(0, "--tmpfs-size");
            }
            if !flags.is_empty() {
                crate::say!(
                    "sandgate: note: {} not applied: full-access runs the command without a sandbox",
                    flags.join(", ")
                );
            }
            return Ok(call);
        }
        if wanted.is_empty() {
            return Ok(call);
        }
        let (cgroups, _, unheld) = CallCgroups::make(&wanted);
        call.cgroups = cgroups;
        let unheld: Vec<(Kind, String)> = unheld.into_iter().map(|u| (u.kind, u.why)).collect();
        call.refused(unheld)?;
        Ok(call)
    }

    /// What the child writes itself into, opened for this attempt; `None` without cgroups.
    ///
    /// # Errors
    /// As [`CallLimits::refused`], when the files cannot be opened.
    pub(super) fn join(&mut self) -> Result<Option<Join>, Error> {
        match self.cgroups.join() {
            Ok(join) => Ok(join),
            Err(e) => {
                self.moving_refused(&e)?;
                Ok(None)
            }
        }
    }

    /// The kernel refused to move the child into the call's cgroups: refuses the call, or
    /// goes on without them (the caller runs the child again).
    ///
    /// # Errors
    /// As [`CallLimits::refused`].
    pub(super) fn moving_refused(&mut self, source: &io::Error) -> Result<(), Error> {
        let why = format!(
            "the kernel refused to move the call's first process into its cgroup ({source})"
        );
        let unheld = self
            .limits
            .cgroup()
            .map(|(k, _)| (k, why.clone()))
            .collect();
        self.cgroups = CallCgroups::default();
        self.refused(unheld)
    }

    /// Decides on limits that cannot hold: explicit ones refuse the call unless degraded
    /// runs are allowed (then they are listed in the `degraded_enforcement` marker);
    /// defaults are said in one note.
    fn refused(&mut self, unheld: Vec<(Kind, String)>) -> Result<(), Error> {
        let unheld: Vec<Unenforced> = unheld
            .into_iter()
            .filter_map(|(kind, why)| {
                let (_, limit) = self.limits.cgroup().find(|(k, _)| *k == kind)?;
                Some(Unenforced {
                    kind,
                    limit: limit.clone(),
                    why,
                })
            })
            .collect();
        let (explicit, defaults): (Vec<_>, Vec<_>) =
            unheld.into_iter().partition(|u| u.limit.explicit);
        if explicit.iter().any(|u| !self.degradable.limit(u.kind)) {
            return Err(Error::Limits(explicit));
        }
        self.degraded.extend(explicit);
        if !defaults.is_empty() {
            let what: Vec<String> = defaults.iter().map(ToString::to_string).collect();
            crate::say!(
                "sandgate: note: the call runs without its default limits: {}",
                what.join("; ")
            );
        }
        Ok(())
    }

    /// Says, once the command has ended, each limit the kernel enforced during the call: a
    /// process killed for memory, forks refused for the pid limit.
    pub(super) fn report(&self, mode: Mode) {
        for (kind, count) in self.cgroups.reached() {
            let Some((_, limit)) = self.limits.cgroup().find(|(k, _)| *k == kind) else {
                continue;
            };
            let what = match kind {
                Kind::LimitMemory => format!(
                    "the kernel killed {count} process{} of the call for memory",
                    if count == 1 { "" } else { "es" }
                ),
                Kind::LimitPids => format!(
                    "{count} fork{} refused (EAGAIN)",
                    if count == 1 { " was" } else { "s were" }
                ),
            };
            let message = format!("{} was reached: {what}", kind.describe(limit));
            let note = json!({"v": 1, "kind": "limit_reached", "limit": kind, "value": limit.value,
                "count": count, "mode": mode, "message": message});
            crate::say!("{}", crate::denial::line("sandgate: note", note));
        }
    }
}
