//! `sandgate doctor`: what this kernel can enforce and, for each profile, which guarantees
//! hold here. Unlike a run, it really tries the namespaces (in throwaway children).

use serde::Serialize;
use serde_json::{json, Value};

use crate::policy::Mode;
use crate::sandbox::{self, Features, Guarantee};

/// The whole report, as printed by `doctor --json`.
#[derive(Debug, Serialize)]
pub struct Report {
    pub kernel: Value,
    pub uid: u32,
    pub landlock: Value,
    pub seccomp: Value,
    pub namespaces: Value,
    pub profiles: Value,
}

/// Builds the report by querying the kernel.
pub fn report() -> Report {
    let features = Features::detect();
    let uname = nix::sys::utsname::uname().ok();
    let field = |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
        uname.as_ref().map(|u| f(u).to_string_lossy().into_owned())
    };
    let user_ns = sandbox::probe_namespace(true, false);
    let mount_ns = features.mount_namespace_allowed && sandbox::probe_namespace(false, true);
    let mut missing = features.missing();
    if !mount_ns && !missing.contains(&Guarantee::MountNamespace) {
        missing.push(Guarantee::MountNamespace);
    }
    let profiles: serde_json::Map<String, Value> = Mode::ALL
        .into_iter()
        .map(|mode| {
            let restricted = mode != Mode::FullAccess;
            let guarantees: serde_json::Map<String, Value> = Guarantee::ALL
                .into_iter()
                .filter(|_| restricted)
                .map(|g| (kebab(g), Value::Bool(!missing.contains(&g))))
                .collect();
            let enforceable = !restricted || missing.is_empty();
            (mode.as_str().to_owned(), json!({ "confined": restricted, "enforceable": enforceable, "guarantees": guarantees }))
        })
        .collect();
    Report {
        kernel: json!({ "sysname": field(|u| u.sysname()), "release": field(|u| u.release()), "machine": field(|u| u.machine()) }),
        uid: nix::unistd::geteuid().as_raw(),
        landlock: json!({ "abi": features.landlock_abi, "available": features.landlock_abi > 0 }),
        seccomp: json!({ "filter": features.seccomp, "user_notification": features.seccomp_user_notif }),
        namespaces: json!({ "user": user_ns, "mount": mount_ns }),
        profiles: Value::Object(profiles),
    }
}

fn kebab(g: Guarantee) -> String {
    serde_json::to_value(g)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
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
        "namespaces  user {}, mount {}\n",
        r.namespaces["user"], r.namespaces["mount"]
    ));
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
                    out.push_str(&format!(
                        "  {} {g}\n",
                        if holds == &Value::Bool(true) {
                            "ok  "
                        } else {
                            "MISS"
                        }
                    ));
                }
            }
        }
    }
    out
}
