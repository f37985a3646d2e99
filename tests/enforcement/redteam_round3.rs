//! Red team, round 3: the supervisor's git seal against configuration the user already
//! has, the `/dev` stand-in, kept processes and their time limit, a home chosen as the
//! workspace, and sandgate's own directories. Each test performs the attack as the
//! sandboxed command would and asserts that it fails (with a control under `full-access`
//! where one shows that the payload and its trigger are real).
//!
//! An attack that gets through is a failing test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::*;

/// Single-quotes `s` for the shell.
fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A test's workspace with a home of its own, which both sandgate and the host's git read.
struct Home {
    env: TestEnv,
    home: PathBuf,
}

impl Home {
    fn new(gitconfig: &str) -> Home {
        let env = TestEnv::new();
        let home = env.root.join("home");
        std::fs::create_dir(&home).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(home.join(".gitconfig"), gitconfig).unwrap_or_else(|e| panic!("{e}"));
        Home { env, home }
    }

    /// The host's git in `dir`, as a user runs it: a clean environment, the test's `HOME`,
    /// no system configuration.
    fn git(&self, dir: &Path) -> Command {
        let mut cmd = Command::new("git");
        cmd.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("LC_ALL", "C")
            .current_dir(dir);
        cmd
    }

    #[track_caller]
    fn ok(&self, dir: &Path, args: &[&str]) {
        let out = output(self.git(dir).args(args));
        assert_status(&out, 0);
    }

    /// Where a payload tagged `tag` leaves its mark.
    fn mark(&self, tag: &str) -> PathBuf {
        self.env.outside.join(tag)
    }

    /// A shell script that leaves the mark `tag`.
    fn script(&self, tag: &str) -> String {
        format!("#!/bin/sh\ntouch '{}'\n", self.mark(tag).display())
    }

    /// Runs a `/bin/sh -c` script under `mode` in the workspace with this `HOME`.
    fn sh(&self, mode: &str, script: &str) -> Output {
        let mut cmd = self.env.sandgate(mode);
        cmd.env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args(["--timeout", "60s", "--", "/bin/sh", "-c", script]);
        output(&mut cmd)
    }
}

/// Attack: the user's *global* configuration has a relative `core.hooksPath`
/// (`git config --global core.hooksPath .githooks`, a team convention). git finds a
/// relative hooks path from the top of the working tree of whichever repository it runs
/// in. sandgate resolves it against the workspace only and keeps `WS/.githooks`
/// read-only; but the command can `git init` a repository in a subdirectory (or use a
/// nested one that was already there) and write `sub/.githooks/pre-commit`, executable:
/// no directory named `hooks` is involved, so no seal rule applies. The host's next
/// `git commit` in `sub` runs it. Single call, no race, as root and unprivileged.
///
/// It should fail because nothing a command writes can make git run a program, "in any
/// repository anywhere it writes, whether it existed when the call started, was cloned or
/// `git init`ed inside".
#[test]
fn redteam_a_global_relative_hooks_path_runs_hooks_of_a_repository_made_inside() {
    if !require_full_enforcement() {
        return;
    }
    let h = Home::new(
        "[user]\n\tname = t\n\temail = t@example.com\n[init]\n\tdefaultBranch = main\n[core]\n\thooksPath = .githooks\n",
    );
    let ws = &h.env.ws;
    h.ok(ws, &["init", "-q"]);
    h.ok(ws, &["commit", "-q", "--allow-empty", "-m", "init"]);
    std::fs::create_dir(ws.join(".githooks")).unwrap_or_else(|e| panic!("{e}"));
    // A repository nested in the workspace before the call, not a submodule.
    let nested = ws.join("nested");
    std::fs::create_dir(&nested).unwrap_or_else(|e| panic!("{e}"));
    h.ok(&nested, &["init", "-q"]);
    h.ok(&nested, &["commit", "-q", "--allow-empty", "-m", "init"]);
    let mut failures = Vec::new();
    for (tag, setup) in [("made", "git init -q made"), ("nested", "true")] {
        let script = format!(
            "{setup} && mkdir -p {tag}/.githooks && printf %s {} > {tag}/.githooks/pre-commit && chmod +x {tag}/.githooks/pre-commit",
            sq(&h.script(tag))
        );
        let out = h.sh("workspace-write", &script);
        let repo = ws.join(tag);
        if repo.join(".git").exists() {
            let _ = output(
                h.git(&repo)
                    .args(["commit", "-q", "--allow-empty", "-m", "x"]),
            );
        }
        if h.mark(tag).exists() {
            failures.push(format!(
                "{tag}: the host's git commit ran {tag}/.githooks/pre-commit, planted inside\n{}",
                show(&out)
            ));
        }
    }
    assert_none(failures);
}
