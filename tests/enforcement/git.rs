//! Protected paths: `.git/hooks`, `.git/config` and `.sandgate` stay read-only under
//! workspace-write, `.git` itself cannot be moved aside, and ordinary git work still
//! succeeds. (`git_integrity.rs` attacks git's metadata as a whole.)

use std::path::Path;
use std::process::Command;

use crate::support::*;

fn git(dir: &Path, args: &[&str]) {
    let out = output(
        Command::new("git")
            .current_dir(dir)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args),
    );
    assert_status(&out, 0);
}

fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)
            .unwrap_or_else(|e| panic!("{e}"))
            .flatten()
        {
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
    std::fs::create_dir_all(env.ws.join(".sandgate")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(env.ws.join(".sandgate/config.json"), "{}").unwrap_or_else(|e| panic!("{e}"));
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
    std::fs::create_dir(&main).unwrap_or_else(|e| panic!("{e}"));
    git(&main, &["init", "-q"]);
    std::fs::write(main.join("f"), "x").unwrap_or_else(|e| panic!("{e}"));
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
    std::fs::remove_dir_all(env.ws.join(".git/info")).unwrap_or_else(|e| panic!("{e}"));
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
    std::fs::remove_dir_all(env.ws.join(".git/info")).unwrap_or_else(|e| panic!("{e}"));
    assert_status(&env.sh("full-access", plant), 0);
    assert!(env.ws.join(".git/info/attributes").exists());
}
