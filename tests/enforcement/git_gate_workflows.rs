//! The git workflows that keep working inside while repositories made or changed there are
//! gated (see `git_gate`): init, commit, clone and status; changes to the workspace
//! configuration that name no program; submodules.

use super::git_gate::{s, sq, Gate, Trigger};
use crate::support::*;

// ---- Workflows that keep working inside. ----

#[test]
fn git_init_commit_clone_and_status_work_inside() {
    if !require_full_enforcement() {
        return;
    }
    let g = Gate::new();
    let (out, _) = g.sandboxed(
        "workspace-write",
        &format!(
            "set -e\n\
             git init -q t && cd t && echo a > a && git add a && git commit -qm one\n\
             test -z \"$(git status --porcelain)\" && echo clean\n\
             cd .. && git clone -q {} c && git -C c log --format=%s -1",
            sq(s(&g.subsrc))
        ),
    );
    assert_status(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "clean\ns1\n");
    assert_eq!(g.ok(&g.env.ws.join("t"), &["log", "--format=%s"]), "one\n");
    assert_eq!(g.ok(&g.env.ws.join("c"), &["log", "--format=%s"]), "s1\n");
}

/// The user's own settings in the workspace repository, which name programs.
const USER_ENTRIES: [(&str, &str); 3] = [
    ("alias.lg", "!git log --oneline"),
    ("core.fsmonitor", "false"),
    ("diff.tool", "vimdiff"),
];

#[test]
fn the_workspace_configuration_takes_changes_that_name_no_program() {
    if !require_full_enforcement() {
        return;
    }
    let g = Gate::new();
    let ws = g.env.ws.clone();
    for (key, value) in USER_ENTRIES {
        g.ok(&ws, &["config", key, value]);
    }
    let upstream = g.env.root.join("upstream.git");
    g.ok(
        &g.env.root,
        &["clone", "-q", "--bare", &s(&g.origin), &s(&upstream)],
    );
    let (out, _) = g.sandboxed(
        "workspace-write",
        &format!(
            "set -e\n\
             git remote add upstream {}\n\
             git config user.email inside@example.com\n\
             git fetch -q upstream\n\
             git branch -u upstream/main",
            sq(s(&upstream))
        ),
    );
    assert_status(&out, 0);
    let get = |key: &str| g.ok(&ws, &["config", "--local", "--get", key]);
    assert_eq!(
        get("remote.upstream.url"),
        format!("{}\n", upstream.display())
    );
    assert_eq!(get("user.email"), "inside@example.com\n");
    assert_eq!(get("branch.main.remote"), "upstream\n");
    for (key, value) in USER_ENTRIES {
        assert_eq!(get(key), format!("{value}\n"), "the user's {key} was lost");
    }
}

#[test]
fn the_workspace_configuration_refuses_a_program() {
    if !require_full_enforcement() {
        return;
    }
    let g = Gate::new();
    let ws = g.env.ws.clone();
    let before = std::fs::read(ws.join(".git/config")).unwrap_or_default();
    let (out, markers) = g.sandboxed(
        "workspace-write",
        &format!(
            "git config core.pager {}",
            sq(format!("{}; cat", g.payload("ws-pager")))
        ),
    );
    assert_command_failed(&out);
    if observing() {
        let config = s(&ws.join(".git/config"));
        assert!(
            markers
                .iter()
                .any(|m| m["path"].as_str().is_some_and(|p| p.starts_with(&config))),
            "no marker names {config}: {markers:?}"
        );
    }
    assert_eq!(
        std::fs::read(ws.join(".git/config")).unwrap_or_default(),
        before
    );
    g.trigger(&ws, Trigger::Log);
    assert!(g.ran().is_empty(), "{:?}", g.ran());
}

#[test]
fn git_submodule_add_works_inside() {
    if !require_full_enforcement() {
        return;
    }
    let g = Gate::new();
    let (out, _) = g.sandboxed(
        "workspace-write",
        &format!(
            "set -e; git submodule add -q {} s1 && git commit -qm s1",
            sq(s(&g.subsrc))
        ),
    );
    assert_status(&out, 0);
    assert_eq!(
        g.ok(&g.env.ws.join("s1"), &["log", "--format=%s", "-1"]),
        "s1\n"
    );
    let status = g.ok(&g.env.ws, &["submodule", "status"]);
    assert!(
        status.starts_with(' ') && status.contains(" s1 "),
        "{status}"
    );
}

#[test]
fn git_submodule_update_init_works_inside() {
    if !require_full_enforcement() {
        return;
    }
    let g = Gate::new();
    let ws = g.env.ws.clone();
    // Registered on the host, never initialised here.
    g.ok(&ws, &["submodule", "add", "-q", &s(&g.subsrc), "s2"]);
    g.ok(&ws, &["commit", "-q", "-m", "s2"]);
    g.ok(&ws, &["submodule", "deinit", "-q", "-f", "s2"]);
    std::fs::remove_dir_all(ws.join(".git/modules/s2")).unwrap();
    let (out, _) = g.sandboxed("workspace-write", "git submodule update -q --init s2");
    assert_status(&out, 0);
    assert_eq!(g.ok(&ws.join("s2"), &["log", "--format=%s", "-1"]), "s1\n");
    let status = g.ok(&ws, &["submodule", "status"]);
    assert!(
        status.starts_with(' ') && status.contains(" s2 "),
        "{status}"
    );
}
