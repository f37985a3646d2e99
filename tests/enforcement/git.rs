//! Protected paths: `.git/hooks`, `.git/config` and `.sandgate` stay read-only under
//! workspace-write, `.git` itself cannot be moved aside, and ordinary git work still
//! succeeds. (`git_integrity.rs` attacks git's metadata as a whole.)

use std::path::Path;
use std::process::Command;

use crate::support::*;

/// The host's git in `dir`, with a test identity (and with `home`, that HOME, no system
/// configuration and local submodules allowed).
fn git_command(home: Option<&Path>, dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir).args([
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.com",
        "-c",
        "init.defaultBranch=main",
    ]);
    if let Some(home) = home {
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("GIT_") {
                cmd.env_remove(&key);
            }
        }
        cmd.env("HOME", home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args(["-c", "protocol.file.allow=always"]);
    }
    cmd.args(args);
    cmd
}

fn git(dir: &Path, args: &[&str]) {
    assert_status(&output(&mut git_command(None, dir, args)), 0);
}

fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() && !path.is_symlink() {
                stack.push(path.clone());
                out.push((path.display().to_string(), vec![]));
            } else {
                out.push((
                    path.display().to_string(),
                    std::fs::read(&path).unwrap_or_default(),
                ));
            }
        }
    }
    out.sort();
    out
}

const GIT_ID: &str = "git -c user.name=t -c user.email=t@example.com";

#[test]
fn hooks_and_config_cannot_be_created_changed_renamed_or_replaced() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    git(&env.ws, &["init", "-q"]);
    std::fs::create_dir_all(env.ws.join(".sandgate")).unwrap();
    std::fs::write(env.ws.join(".sandgate/config.json"), "{}").unwrap();
    let hooks = snapshot(&env.ws.join(".git/hooks"));
    let config = std::fs::read(env.ws.join(".git/config")).unwrap_or_default();
    let attempts = [
        "echo evil > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
        "cp .git/hooks/pre-commit.sample .git/hooks/pre-commit",
        "echo '[core] hooksPath = /tmp' >> .git/config",
        "git config core.hooksPath /tmp",
        "mv .git/config .git/config.old",
        "rm -f .git/config",
        "rm -rf .git/hooks",
        "mv .git/hooks .git/hooks.old",
        "ln -sfn /tmp .git/hooks",
        "ln -s .git/hooks h && echo evil > h/post-checkout",
        "mv .git .git-aside && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit",
        "echo '{\"x\":1}' > .sandgate/config.json",
        "mv .sandgate .sandgate-aside",
        "echo evil > .sandgate/other",
    ];
    for attempt in attempts {
        let out = env.sh("workspace-write", attempt);
        assert_command_failed(&out);
        assert_eq!(
            snapshot(&env.ws.join(".git/hooks")),
            hooks,
            "`{attempt}` changed .git/hooks"
        );
        assert_eq!(
            std::fs::read(env.ws.join(".git/config")).unwrap_or_default(),
            config,
            "`{attempt}`"
        );
        assert!(
            !env.ws.join(".git-aside").exists(),
            "`{attempt}` moved .git aside"
        );
        assert_eq!(
            std::fs::read_to_string(env.ws.join(".sandgate/config.json")).unwrap_or_default(),
            "{}"
        );
        assert!(!env.ws.join(".sandgate/other").exists());
    }
    // Ordinary git work in the same sandbox succeeds.
    let out = env.sh(
        "workspace-write",
        &format!("echo hello > a.txt && {GIT_ID} add . && {GIT_ID} commit -qm first && {GIT_ID} log --oneline | wc -l"),
    );
    assert_status(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
    // Deleting what git itself may write still leaves hooks, config and .git in place.
    assert_command_failed(&env.sh("workspace-write", "rm -rf .git"));
    assert_eq!(snapshot(&env.ws.join(".git/hooks")), hooks);
    assert_eq!(
        std::fs::read(env.ws.join(".git/config")).unwrap_or_default(),
        config
    );
}

#[test]
fn git_init_add_commit_work_in_a_fresh_workspace() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let out = env.sh(
        "workspace-write",
        &format!("git init -q && echo x > f && {GIT_ID} add . && {GIT_ID} commit -qm init && {GIT_ID} status --porcelain"),
    );
    assert_status(&out, 0);
    assert!(env.ws.join(".git/HEAD").exists());
}

#[test]
fn a_worktree_protects_the_real_git_dir_behind_the_dot_git_file() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let main = env.root.join("main");
    std::fs::create_dir(&main).unwrap();
    git(&main, &["init", "-q"]);
    std::fs::write(main.join("f"), "x").unwrap();
    git(&main, &["add", "."]);
    git(&main, &["commit", "-qm", "init"]);
    let wt = env.root.join("wt");
    git(&main, &["worktree", "add", "-q", &wt.to_string_lossy()]);
    let common = main.join(".git");
    let hooks = snapshot(&common.join("hooks"));
    let dot_git = std::fs::read(wt.join(".git")).unwrap_or_default();
    // The main repository is an extra writable root: without protection its hooks would be
    // writable from the worktree's sandbox.
    let run = |script: &str| {
        let mut cmd = env.sandgate_without_workspace("workspace-write");
        cmd.current_dir(&wt)
            .args(["--workspace"])
            .arg(&wt)
            .arg("--writable-root")
            .arg(&main);
        cmd.args(["--", "/bin/sh", "-c", script]);
        output(&mut cmd)
    };
    let c = common.to_string_lossy();
    for attempt in [
        format!("echo evil > '{c}/hooks/pre-commit'"),
        format!("echo x >> '{c}/config'"),
        format!("mv '{c}' '{c}-aside'"),
        "echo 'gitdir: /tmp/evil' > .git".to_owned(),
        "rm -f .git".to_owned(),
    ] {
        let out = run(&attempt);
        assert_command_failed(&out);
        assert_eq!(
            snapshot(&common.join("hooks")),
            hooks,
            "`{attempt}` changed the hooks"
        );
        assert_eq!(
            std::fs::read(wt.join(".git")).unwrap_or_default(),
            dot_git,
            "`{attempt}`"
        );
        assert!(!main.join(".git-aside").exists());
    }
    let out = run(&format!(
        "echo y > g && {GIT_ID} add g && {GIT_ID} commit -qm wt"
    ));
    assert_status(&out, 0);
}

#[test]
fn an_info_directory_made_inside_still_guards_its_attributes() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    git(&env.ws, &["init", "-q"]);
    std::fs::remove_dir_all(env.ws.join(".git/info")).unwrap();
    let plant = "mkdir .git/info && echo ok > .git/info/exclude && echo '* filter=x' > .git/info/attributes";
    let out = env.sh("workspace-write", plant);
    assert_command_failed(&out);
    assert_eq!(
        std::fs::read_to_string(env.ws.join(".git/info/exclude")).unwrap_or_default(),
        "ok\n",
        "the rest of a new info/ is the sandbox's: {}",
        show(&out)
    );
    assert!(
        !env.ws.join(".git/info/attributes").exists(),
        "{}",
        show(&out)
    );
    // Control: unconfined, the same plant lands.
    std::fs::remove_dir_all(env.ws.join(".git/info")).unwrap();
    assert_status(&env.sh("full-access", plant), 0);
    assert!(env.ws.join(".git/info/attributes").exists());
}

/// Runs the host git in `dir` with the test's HOME (see [`git_command`]).
fn host_git(env: &TestEnv, dir: &Path, args: &[&str]) -> std::process::Output {
    output(&mut git_command(Some(&env.root), dir, args))
}

/// Runs `script` under workspace-write with the test's HOME, git's identity and local
/// submodules allowed.
fn sandboxed_git(env: &TestEnv, script: &str) -> std::process::Output {
    let mut cmd = env.sandgate("workspace-write");
    cmd.env("HOME", &env.root).args([
        "--",
        "/bin/sh",
        "-c",
        &format!(
            "export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_COUNT=3 \
             GIT_CONFIG_KEY_0=user.name GIT_CONFIG_VALUE_0=t \
             GIT_CONFIG_KEY_1=user.email GIT_CONFIG_VALUE_1=t@example.com \
             GIT_CONFIG_KEY_2=protocol.file.allow GIT_CONFIG_VALUE_2=always; {script}"
        ),
    ]);
    output(&mut cmd)
}

#[test]
fn git_commands_that_change_configuration_work_inside() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let ws = &env.ws;
    let ok = |dir: &Path, args: &[&str]| {
        let out = host_git(&env, dir, args);
        assert_status(&out, 0);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let origin = env.root.join("origin");
    ok(&env.root, &["init", "-q", &origin.to_string_lossy()]);
    ok(&origin, &["commit", "-q", "--allow-empty", "-m", "o1"]);
    ok(&env.root, &["init", "-q", &ws.to_string_lossy()]);
    ok(ws, &["commit", "-q", "--allow-empty", "-m", "w1"]);
    // A submodule registered on the host but not cloned: `submodule update --init` clones
    // it inside.
    ok(
        ws,
        &["submodule", "add", "-q", &origin.to_string_lossy(), "sub"],
    );
    ok(ws, &["commit", "-q", "-m", "sub"]);
    ok(ws, &["submodule", "deinit", "-q", "-f", "sub"]);
    std::fs::remove_dir_all(ws.join(".git/modules/sub")).unwrap();
    let o = origin.display();
    let script = format!(
        "set -e
         git remote add up '{o}'
         git config user.email inside@example.com
         git fetch -q up
         git branch -q -u up/main
         git submodule update -q --init sub
         git clone -q '{o}' clone && (cd clone && git status --porcelain && git config user.name clone-user)
         git init -q scratch && (cd scratch && git status --porcelain >/dev/null && git commit -q --allow-empty -m s)
         git submodule add -q '{o}' sub2
         git commit -q -m sub2"
    );
    let out = sandboxed_git(&env, &script);
    assert_status(&out, 0);
    assert_eq!(ok(ws, &["config", "remote.up.url"]).trim(), o.to_string());
    assert_eq!(
        ok(ws, &["config", "--local", "user.email"]).trim(),
        "inside@example.com"
    );
    assert_eq!(ok(ws, &["config", "branch.main.remote"]).trim(), "up");
    assert_eq!(
        ok(&ws.join("sub"), &["log", "-1", "--format=%s"]).trim(),
        "o1"
    );
    assert_eq!(
        ok(&ws.join("clone"), &["config", "--local", "user.name"]).trim(),
        "clone-user"
    );
    assert_eq!(
        ok(&ws.join("sub2"), &["log", "-1", "--format=%s"]).trim(),
        "o1"
    );
    assert_eq!(
        ok(&ws.join("scratch"), &["log", "-1", "--format=%s"]).trim(),
        "s"
    );
    // Programs stay out, in the workspace's configuration and in every repository made
    // inside.
    for (dir, key) in [
        (".", "core.fsmonitor"),
        (".", "core.hooksPath"),
        ("clone", "core.pager"),
        ("scratch", "alias.x"),
        ("sub", "core.sshCommand"),
    ] {
        let out = sandboxed_git(
            &env,
            &format!("cd {dir} && git config {key} '!touch /tmp/x'"),
        );
        assert_command_failed(&out);
        if observing() {
            let markers = stderr_markers(&out);
            assert!(
                markers.iter().any(|m| m["op"] == "git_config"
                    && m["message"]
                        .as_str()
                        .is_some_and(|t| t.contains(&key.to_ascii_lowercase()))),
                "{dir} {key}: {}",
                show(&out)
            );
        }
        let got = host_git(&env, &ws.join(dir), &["config", "--get", key]);
        assert_eq!(got.status.code(), Some(1), "{dir} {key}: {}", show(&got));
    }
}

#[test]
fn a_repository_made_inside_makes_the_host_s_git_run_nothing() {
    if !require_full_enforcement() {
        return;
    }
    // The attacks: a gitlink whose repository names an fsmonitor (set by git, or renamed
    // into place) and has hooks; a `.git` planted in a subdirectory with an fsmonitor and
    // a hook. Returns which of the host's next git commands there ran the payload, and
    // the workspace.
    let attack = |mode: &str| {
        let env = TestEnv::new();
        let ws = env.ws.clone();
        let marker = env.outside.join("payload-ran");
        let payload = format!("touch '{}'; false", marker.display());
        let out = host_git(&env, &env.root, &["init", "-q", &ws.to_string_lossy()]);
        assert_status(&out, 0);
        std::fs::write(ws.join("f"), "f\n").unwrap();
        assert_status(&host_git(&env, &ws, &["add", "f"]), 0);
        assert_status(&host_git(&env, &ws, &["commit", "-q", "-m", "f"]), 0);
        std::fs::write(ws.join("payload.sh"), format!("#!/bin/sh\n{payload}\n")).unwrap();
        let script = format!(
            r#"git init -q evil && git -C evil commit -q --allow-empty -m e
               git -C evil config core.fsmonitor "{payload}"
               printf '[core]\n\tfsmonitor = "{payload}"\n' > cfg && mv cfg evil/.git/config
               cp payload.sh evil/.git/hooks/pre-commit; chmod +x evil/.git/hooks/pre-commit
               ln -s ../../../payload.sh evil/.git/hooks/post-checkout
               git add evil
               mkdir -p sub/.git/hooks sub/.git/objects sub/.git/refs
               echo 'ref: refs/heads/main' > sub/.git/HEAD
               printf '[core]\n\tfsmonitor = "{payload}"\n' > sub/.git/config
               cp payload.sh sub/.git/hooks/pre-commit && chmod 755 sub/.git/hooks/pre-commit
               true"#
        );
        let mut cmd = env.sandgate(mode);
        cmd.env("HOME", &env.root).args([
            "--",
            "/bin/sh",
            "-c",
            &format!("export GIT_CONFIG_NOSYSTEM=1; {script}"),
        ]);
        assert_status(&output(&mut cmd), 0);
        // The host's next git commands.
        std::fs::write(ws.join("f"), "changed\n").unwrap();
        let mut ran = vec![];
        for (dir, args) in [
            (ws.join("evil"), &["status"][..]),
            (
                ws.join("evil"),
                &["commit", "-q", "--allow-empty", "-m", "h"],
            ),
            (ws.join("sub"), &["status"]),
            (
                ws.join("sub"),
                &["commit", "-q", "--allow-empty", "-m", "h"],
            ),
        ] {
            let _ = std::fs::remove_file(&marker);
            let _ = host_git(&env, &dir, args);
            if marker.exists() {
                ran.push(format!("{args:?} in {}", dir.display()));
            }
        }
        (ran, env)
    };
    // Control: unconfined, each of the host's commands runs the payload.
    let (ran, _) = attack("full-access");
    assert_eq!(ran.len(), 4, "{ran:?}");
    let (ran, env) = attack("workspace-write");
    assert_eq!(ran, Vec::<String>::new());
    for hook in ["evil/.git/hooks/pre-commit", "sub/.git/hooks/pre-commit"] {
        let path = env.ws.join(hook);
        if let Ok(meta) = std::fs::metadata(&path) {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(meta.permissions().mode() & 0o111, 0, "{hook}");
        }
    }
    assert!(std::fs::symlink_metadata(env.ws.join("evil/.git/hooks/post-checkout")).is_err());
}
