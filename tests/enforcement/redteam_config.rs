//! Red team A: attacks on sandgate's own configuration and what a later sandgate call
//! reads (README: "Inside every sandbox the log, the denial log and sandgate's config
//! directory read as empty"; "sandgate's own files stay hidden"). Each test has a sandboxed
//! call plant something, then runs a later, ordinary sandgate call as the user would and
//! asserts that the plant changed nothing.
//!
//! An attack that gets through is a failing test.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

/// A home of the test's own whose `~/.config` is a repository (dotfiles kept there), with
/// every persistence path the profile names under `~/.config` present, and no sandgate
/// configuration yet — the state of a user who never configured sandgate.
struct Home {
    env: TestEnv,
    home: PathBuf,
}

impl Home {
    fn new() -> Home {
        let env = TestEnv::new();
        let home = env.root.join("home");
        for dir in ["fish", "autostart", "systemd", "git"] {
            std::fs::create_dir_all(home.join(".config").join(dir)).unwrap();
        }
        init_repository(&home.join(".config"));
        Home { env, home }
    }

    /// sandgate as the user runs it, with this home and the default user configuration
    /// directory (`~/.config/sandgate`), in `dir`, deriving nothing from the host.
    fn sandgate(&self, dir: &Path) -> Command {
        let mut cmd = Command::new(sandgate());
        self.env.isolate(&mut cmd);
        cmd.env_remove("SANDGATE_CONFIG_DIR")
            .env("HOME", &self.home)
            .current_dir(dir);
        if !observing() {
            cmd.arg("--no-observe");
        }
        cmd
    }
}

/// Attack: sandgate's user configuration directory is protected and masked only when it
/// exists (`protected_paths` and `own_files` pass through `canonicalize`, and a mask is
/// built only for a path that exists). A user who never configured sandgate has none; when
/// the workspace holds where it would be (here `~/.config`, a dotfiles repository), the
/// sandboxed command creates `~/.config/sandgate/config.json` naming `full-access` and an
/// approver program. Every later sandgate call of the user then runs unconfined, and the
/// next escalation runs the approver — a program of the attacker's — on the host.
///
/// It should fail because a command can never write sandgate's own configuration.
#[test]
fn redteam_a_missing_user_configuration_directory_is_planted() {
    if !require_full_enforcement() {
        return;
    }
    let h = Home::new();
    let config = h.home.join(".config");
    let unconfined = h.env.outside.join("unconfined");
    let approver = h.env.outside.join("approver-ran");
    let planted = format!(
        r#"{{"sandbox":"full-access","approver":"touch '{}'"}}"#,
        approver.display()
    );
    let mut plant = h.sandgate(&config);
    plant
        .args(["--sandbox", "workspace-write", "--workspace"])
        .arg(&config)
        .args([
            "--",
            "/bin/sh",
            "-c",
            &format!(
                "mkdir sandgate && printf %s '{}' > sandgate/config.json",
                planted.replace('\'', r"'\''")
            ),
        ]);
    let planting = output(&mut plant);
    // A later call, in another directory, with no mode given: the user's standing policy.
    let project = h.env.ws.clone();
    let mut later = h.sandgate(&project);
    later
        .args(["--workspace"])
        .arg(&project)
        .args(["--", "touch"])
        .arg(&unconfined);
    let later_out = output(&mut later);
    // A later escalation, which asks whoever the user's configuration names.
    let mut asks = h.sandgate(&project);
    asks.args(["--sandbox", "read-only", "--workspace"])
        .arg(&project)
        .args([
            "--sandbox-permissions",
            "workspace-write",
            "--justification",
            "write a file",
            "--approval-timeout",
            "5",
            "--",
            "true",
        ]);
    let _ = output(&mut asks);
    let mut failures = Vec::new();
    if h.home.join(".config/sandgate/config.json").exists() {
        failures.push(format!(
            "the sandbox created sandgate's user configuration\n{}",
            show(&planting)
        ));
    }
    if unconfined.exists() {
        failures.push(format!(
            "a later call ran unconfined on the planted configuration\n{}",
            show(&later_out)
        ));
    }
    if approver.exists() {
        failures.push("a later escalation ran the planted approver on the host".into());
    }
    assert_none(failures);
}
