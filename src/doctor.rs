//! `sandgate doctor`: what this kernel can enforce and, for each profile, which guarantees
//! hold here and what it keeps from the command. Unlike a run, it really tries the
//! namespaces (in throwaway children).

use std::path::PathBuf;

use serde::Serialize;
use serde_json::{json, Value};

use crate::policy::profile::{self, Placeholders, ProfileSpec, SecretEnvSpec};
use crate::policy::Mode;
use crate::sandbox::{self, Backend, Features, Guarantee};

/// What a profile keeps from the command, as the profile states it and as it applies to
/// this caller (configuration files may hide more, and the user's may show some again).
#[derive(Debug, Default, Serialize)]
pub struct Hides {
    /// Profile entries that read as empty (`$HOME/…` is every home of the caller).
    pub paths: Vec<String>,
    /// Those entries for this caller.
    pub resolved_paths: Vec<PathBuf>,
    /// Profile entries that stay read-only whenever a writable root contains them.
    pub persistent_paths: Vec<String>,
    /// Environment variables withheld: names containing a fragment, bar the exceptions.
    pub env: Option<SecretEnvSpec>,
    /// The caller's homes the `$HOME/…` entries expand for.
    pub homes: Vec<PathBuf>,
    /// Every path a call outside any workspace hides, with its reason (a list entry or the
    /// rule), and the rule's scans.
    pub hidden: Value,
}

impl Hides {
    /// Reads the shipped profile of `mode`; full access hides nothing. `hidden`: what a
    /// call outside any workspace hides under this caller's configuration.
    pub fn of(mode: Mode, hidden: Value) -> Hides {
        let Ok(ProfileSpec::Restricted(spec)) = profile::shipped(mode) else {
            return Hides::default();
        };
        let homes = crate::policy::home::caller_homes();
        let placeholders = Placeholders {
            workspace: std::path::Path::new("/"),
            ptys: vec![],
            homes: &homes,
            approval_token_file: std::env::var_os("SANDGATE_APPROVAL_TOKEN_FILE")
                .map(PathBuf::from),
        };
        Hides {
            resolved_paths: spec
                .hidden_paths
                .iter()
                .flat_map(|e| placeholders.expand(e))
                .collect(),
            paths: spec.hidden_paths,
            persistent_paths: spec.persistent_paths,
            env: Some(spec.secret_env),
            homes,
            hidden,
        }
    }
}

/// The whole report, as printed by `doctor --json`.
#[derive(Debug, Serialize)]
pub struct Report {
    pub kernel: Value,
    pub uid: u32,
    pub landlock: Value,
    pub seccomp: Value,
    pub namespaces: Value,
    /// The backend a call with `--backend auto` runs under here.
    pub backend: Backend,
    pub profiles: Value,
    /// Who a call without approval flags would ask, as a person's call and through a link.
    pub answerer: Value,
    /// The hosts a call without `--allow-host` reaches through the proxy, and those denied.
    pub hosts: Value,
    /// Each resource limit: what enforces it, whether it holds here, its effective default.
    pub limits: Value,
}

/// What the caller's configuration makes of a call, resolved by the caller of [`report`].
pub struct Configured {
    /// Per mode, every path a call outside any workspace hides (see [`Hides::hidden`]).
    pub hidden: fn(Mode) -> Value,
    pub answerer: Value,
    pub hosts: Value,
    pub limits: Value,
}

/// Builds the report by querying the kernel, with what the configuration makes of a call.
pub fn report(configured: Configured) -> Report {
    let mut features = Features::detect();
    let uname = nix::sys::utsname::uname().ok();
    let field = |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
        uname.as_ref().map(|u| f(u).to_string_lossy().into_owned())
    };
    let user_ns = sandbox::probe_namespace(true, false);
    let mount_ns = features.mount_namespace_allowed && sandbox::probe_namespace(false, true);
    // The process boundary: a PID namespace with the mount namespace and its own /proc.
    let pid_ns = mount_ns && features.pid_namespace_allowed && sandbox::probe_process_boundary();
    // What `--backend auto` runs with here.
    let backend = if mount_ns {
        Backend::Namespaces
    } else {
        Backend::Landlock
    };
    features.pid_namespace_allowed = pid_ns;
    let missing = features.missing(backend);
    let profiles: serde_json::Map<String, Value> = Mode::ALL
        .into_iter()
        .map(|mode| {
            let restricted = mode != Mode::FullAccess;
            let each = || Guarantee::ALL.into_iter().filter(|_| restricted);
            let guarantees: serde_json::Map<String, Value> = each()
                .map(|g| (g.name().to_owned(), Value::Bool(!missing.contains(&g))))
                .collect();
            let held_by: serde_json::Map<String, Value> = each()
                .filter(|g| !missing.contains(g))
                .map(|g| (g.name().to_owned(), json!(features.held_by(g, backend))))
                .collect();
            let enforceable = !restricted || missing.is_empty();
            let hides = Hides::of(mode, (configured.hidden)(mode));
            let hides = serde_json::to_value(hides).unwrap_or(Value::Null);
            (mode.as_str().to_owned(), json!({ "confined": restricted, "enforceable": enforceable, "guarantees": guarantees, "held_by": held_by, "hides": hides }))
        })
        .collect();
    Report {
        kernel: json!({ "sysname": field(|u| u.sysname()), "release": field(|u| u.release()), "machine": field(|u| u.machine()) }),
        uid: nix::unistd::geteuid().as_raw(),
        landlock: json!({ "abi": features.landlock_abi, "available": features.landlock_abi > 0 }),
        seccomp: json!({ "filter": features.seccomp, "user_notification": features.seccomp_user_notif }),
        namespaces: json!({ "user": user_ns, "mount": mount_ns, "pid": pid_ns }),
        backend,
        profiles: Value::Object(profiles),
        answerer: configured.answerer,
        hosts: configured.hosts,
        limits: configured.limits,
    }
}

/// Renders the report for people.
pub fn render_text(r: &Report) -> String {
    let mut out = String::new();
    let s = |v: &Value| {
        v.as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| v.to_string())
    };
    out.push_str(&format!(
        "kernel      {} {} ({})\n",
        s(&r.kernel["sysname"]),
        s(&r.kernel["release"]),
        s(&r.kernel["machine"])
    ));
    out.push_str(&format!("uid         {}\n", r.uid));
    out.push_str(&format!("landlock    ABI {}\n", r.landlock["abi"]));
    out.push_str(&format!(
        "seccomp     filter {}, user notification {}\n",
        r.seccomp["filter"], r.seccomp["user_notification"]
    ));
    out.push_str(&format!(
        "namespaces  user {}, mount {}, pid {}\n",
        r.namespaces["user"], r.namespaces["mount"], r.namespaces["pid"]
    ));
    out.push_str(&format!(
        "backend     {} (--backend auto)\n",
        r.backend.name()
    ));
    for (caller, key) in [
        ("a person's call", "person"),
        ("through a link", "agent_link"),
    ] {
        if let Some(who) = r.answerer[key].as_str() {
            out.push_str(&format!("approvals   {caller} asks {who}\n"));
        }
    }
    if let Some(e) = r.answerer["error"].as_str() {
        out.push_str(&format!("approvals   unknown: {e}\n"));
    }
    let list = |v: &Value| {
        v.as_array()
            .map(|l| l.iter().map(s).collect::<Vec<_>>().join(", "))
            .unwrap_or_default()
    };
    match (&r.hosts["allowed"], r.hosts["error"].as_str()) {
        (_, Some(e)) => out.push_str(&format!("hosts       unknown: {e}\n")),
        (Value::Array(a), None) if a.is_empty() => {
            out.push_str("hosts       none: restricted calls have no network\n")
        }
        (allowed, None) => out.push_str(&format!(
            "hosts       through the proxy: {}\n",
            list(allowed)
        )),
    }
    if matches!(&r.hosts["denied"], Value::Array(d) if !d.is_empty()) {
        out.push_str(&format!(
            "            denied: {}\n",
            list(&r.hosts["denied"])
        ));
    }
    render_limits(&mut out, &r.limits);
    if let Value::Object(profiles) = &r.profiles {
        for (name, p) in profiles {
            let verdict = if p["enforceable"] == Value::Bool(true) {
                "enforceable"
            } else {
                "NOT enforceable"
            };
            out.push_str(&format!("{name:<16}{verdict}\n"));
            if let Value::Object(gs) = &p["guarantees"] {
                for (g, holds) in gs {
                    match p["held_by"][g].as_str() {
                        Some(by) if holds == &Value::Bool(true) => {
                            out.push_str(&format!("  ok   {g:<18} {by}\n"));
                        }
                        _ => out.push_str(&format!("  MISS {g}\n")),
                    }
                }
            }
            let list = |v: &Value| {
                v.as_array()
                    .map(|a| a.iter().map(&s).collect::<Vec<_>>().join(" "))
                    .unwrap_or_default()
            };
            let hides = &p["hides"];
            if hides["paths"].as_array().is_some_and(|a| !a.is_empty()) {
                out.push_str(&format!("  hides      {}\n", list(&hides["paths"])));
                out.push_str(&hidden_summary(&hides["hidden"], name));
                out.push_str(&format!(
                    "  hides env  names containing {} (except {})\n",
                    list(&hides["env"]["name_contains"]),
                    list(&hides["env"]["except"])
                ));
                out.push_str(&format!(
                    "  read-only  {} (when a writable root holds them)\n",
                    list(&hides["persistent_paths"])
                ));
            }
        }
    }
    out
}

/// The limits, for people: one line each.
fn render_limits(out: &mut String, limits: &Value) {
    if let Some(e) = limits["error"].as_str() {
        out.push_str(&format!("limits      unknown: {e}\n"));
        return;
    }
    let tmpfs = &limits["tmpfs"];
    out.push_str(&format!(
        "limits      tmpfs: {} and {} inodes for each private tmpfs ({})\n",
        crate::limits::human(tmpfs["size"].as_u64().unwrap_or(0)),
        tmpfs["inodes"],
        tmpfs["origin"]["source"].as_str().unwrap_or("default")
    ));
    for (name, kind) in [
        ("pids", crate::limits::Kind::LimitPids),
        ("memory", crate::limits::Kind::LimitMemory),
    ] {
        let l = &limits[name];
        let default = match l["default"]["value"].as_u64() {
            Some(v) => format!(
                "default {} ({})",
                kind.show(v),
                l["default"]["origin"]["preset"]
                    .as_str()
                    .map(|p| format!("the {p} preset"))
                    .or_else(|| l["default"]["origin"]["source"].as_str().map(str::to_owned))
                    .unwrap_or_default()
            ),
            None => "no default".to_owned(),
        };
        let holds = match (l["holds"].as_bool(), l["mechanism"].as_str()) {
            (Some(true), Some(mechanism)) => format!(
                "holds ({mechanism}, beneath {})",
                l["beneath"].as_str().unwrap_or("?")
            ),
            _ => format!(
                "does NOT hold here: {}",
                l["why"].as_str().unwrap_or("unknown")
            ),
        };
        out.push_str(&format!("            {name}: {holds}; {default}\n"));
    }
}

/// One line on what the profile hides here: how many paths, for which reasons, and where
/// the full list is.
fn hidden_summary(hidden: &Value, profile: &str) -> String {
    if let Some(e) = hidden["error"].as_str() {
        return format!("  hidden     unknown: {e}\n");
    }
    let paths = hidden["paths"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let count = |reasons: &[&str], in_etc: Option<bool>| {
        paths
            .iter()
            .filter(|p| reasons.contains(&p["reason"].as_str().unwrap_or_default()))
            .filter(|p| {
                in_etc.is_none_or(|etc| {
                    p["path"].as_str().unwrap_or_default().starts_with("/etc/") == etc
                })
            })
            .count()
    };
    let own = [
        "owner-only",
        "owner-only-files",
        "closed-to-others",
        "in-closed-directory",
    ];
    let system = ["not-for-others", "closed-to-others"];
    format!(
        "  hidden     {} paths here: {} listed, {} only you may reach in your home's dot-entries, {} under /etc others may not read, {} the scan could not read within its bounds; `sandgate doctor --json` lists each (profiles.{profile}.hides.hidden)\n",
        paths.len(),
        count(&["listed"], None),
        count(&own, Some(false)),
        count(&system, Some(true)),
        count(&["unscanned"], None),
    )
}
