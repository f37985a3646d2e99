//! A workspace derived from the current directory is a git top-level only when git itself
//! would use that repository: one owned by someone else becomes the workspace only when the
//! caller's git configuration lists it in `safe.directory` (or, as root, when `SUDO_UID`
//! names its owner). Otherwise the workspace is the current directory.
//!
//! As root the test makes its own repository and hands it to uid 65534. As uid 65534 it
//! uses the root-owned repository `scripts/test` prepares (`SANDGATE_TEST_FOREIGN_REPO`):
//! an unprivileged process cannot make a file another user owns.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

/// A repository owned by another uid, with a subdirectory `sub`.
fn foreign_repository(env: &TestEnv) -> PathBuf {
    if !is_root() {
        let repo = std::env::var_os("SANDGATE_TEST_FOREIGN_REPO").map(PathBuf::from);
        let repo = repo.unwrap_or_else(|| {
            panic!(
                "as uid {} this test needs SANDGATE_TEST_FOREIGN_REPO, a repository with a \
                 directory `sub` owned by another user (scripts/test makes one)",
                nix::unistd::geteuid()
            )
        });
        return std::fs::canonicalize(&repo).unwrap_or_else(|e| panic!("{}: {e}", repo.display()));
    }
    let repo = env.root.join("theirs");
    init_repository(&repo);
    std::fs::create_dir(repo.join("sub")).unwrap();
    chown_tree(&repo, 65534);
    // Others may write both, so that root without its capabilities inside the sandbox
    // is refused a write only by the sandbox.
    for dir in [repo.clone(), repo.join("sub")] {
        chmod(&dir, 0o777);
    }
    repo
}

fn chown_tree(path: &Path, uid: u32) {
    let out = output(
        Command::new("chown")
            .arg("-R")
            .arg(format!("{uid}:{uid}"))
            .arg(path),
    );
    assert_status(&out, 0);
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// `cmd` with `HOME` at `home`, no system git configuration and none of git's own
/// variables from the host.
fn with_home(mut cmd: Command, home: &Path) -> Command {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") || key == "SUDO_UID" {
            cmd.env_remove(&key);
        }
    }
    cmd.env("HOME", home).env("GIT_CONFIG_NOSYSTEM", "1");
    cmd
}

/// The private temp `sandgate tmp` names from `cwd`, for the workspace it derives there
/// (`None`) or for `workspace`: equal paths mean equal workspaces.
fn private_temp(
    env: &TestEnv,
    home: &Path,
    cwd: &Path,
    workspace: Option<&Path>,
    sudo: Option<u32>,
) -> String {
    let mut cmd = Command::new(sandgate());
    env.isolate(&mut cmd);
    let mut cmd = with_home(cmd, home);
    cmd.current_dir(cwd).arg("tmp");
    if let Some(ws) = workspace {
        cmd.arg("--workspace").arg(ws);
    }
    if let Some(uid) = sudo {
        cmd.env("SUDO_UID", uid.to_string());
    }
    let out = output(&mut cmd);
    assert_status(&out, 0);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Whether the host's git uses the repository around `cwd`.
fn git_uses(home: &Path, cwd: &Path, sudo: Option<u32>) -> bool {
    let mut cmd = with_home(Command::new("git"), home);
    cmd.current_dir(cwd).args(["rev-parse", "--show-toplevel"]);
    if let Some(uid) = sudo {
        cmd.env("SUDO_UID", uid.to_string());
    }
    output(&mut cmd).status.success()
}

fn write_gitconfig(home: &Path, safe: &[&str]) {
    let mut text = String::from("[user]\n\tname = t\n");
    if !safe.is_empty() {
        text.push_str("[safe]\n");
        for value in safe {
            text.push_str(&format!("\tdirectory = \"{value}\"\n"));
        }
    }
    std::fs::write(home.join(".gitconfig"), text).unwrap();
}

#[test]
fn someone_elses_repository_is_the_workspace_only_when_git_trusts_it() {
    let env = TestEnv::new();
    let repo = foreign_repository(&env);
    let cwd = repo.join("sub");
    let home = env.root.join("home");
    std::fs::create_dir(&home).unwrap();
    let parent = repo
        .parent()
        .unwrap_or(Path::new("/"))
        .display()
        .to_string();
    let shown = repo.display().to_string();
    let other = env.outside.display().to_string();
    // Each configuration, and whether git itself must trust the repository with it: the
    // test's own expectation, so that a git that trusted everything could not make the
    // comparison below vacuous.
    let cases: Vec<(Vec<String>, bool)> = vec![
        (vec![], false),
        (vec![shown.clone()], true),
        (vec![format!("{shown}/")], true),
        (vec![format!("{parent}/*")], true),
        (vec!["*".into()], true),
        (vec![other.clone()], false),
        (vec![cwd.display().to_string()], false),
        (vec!["*".into(), String::new()], false),
        (vec![shown.clone(), String::new()], false),
        (vec![String::new(), shown.clone()], true),
    ];
    let in_cwd = private_temp(&env, &home, &cwd, Some(&cwd), None);
    let in_repo = private_temp(&env, &home, &cwd, Some(&repo), None);
    assert_ne!(in_cwd, in_repo);
    for (safe, trusted) in cases {
        let values: Vec<&str> = safe.iter().map(String::as_str).collect();
        write_gitconfig(&home, &values);
        assert_eq!(git_uses(&home, &cwd, None), trusted, "git with {safe:?}");
        let derived = private_temp(&env, &home, &cwd, None, None);
        let want = if trusted { &in_repo } else { &in_cwd };
        assert_eq!(&derived, want, "safe.directory {safe:?}");
    }
    if !is_root() {
        return;
    }
    // As root, git also accepts the owner `SUDO_UID` names, and so does sandgate.
    write_gitconfig(&home, &[]);
    for (sudo, trusted) in [(Some(65534), true), (Some(65533), false)] {
        assert_eq!(
            git_uses(&home, &cwd, sudo),
            trusted,
            "git with SUDO_UID {sudo:?}"
        );
        let derived = private_temp(&env, &home, &cwd, None, sudo);
        let want = if trusted { &in_repo } else { &in_cwd };
        assert_eq!(&derived, want, "SUDO_UID {sudo:?}");
    }
}

#[test]
fn a_write_at_the_top_of_someone_elses_repository_is_refused() {
    if !require_full_enforcement() {
        return;
    }
    if !is_root() {
        // As uid 65534 the repository is root's: its file modes refuse the write anyway,
        // so only the workspace it derives (the test above) says anything there.
        eprintln!("NOTE: the write is checked as root only");
        return;
    }
    let env = TestEnv::new();
    let repo = foreign_repository(&env);
    let cwd = repo.join("sub");
    let home = env.root.join("home");
    std::fs::create_dir(&home).unwrap();
    let run = |name: &str| {
        let mut cmd = with_home(env.sandgate_without_workspace("workspace-write"), &home);
        cmd.current_dir(&cwd).args([
            "--",
            "/bin/sh",
            "-c",
            &format!("touch ../{name} && touch here-{name}"),
        ]);
        output(&mut cmd)
    };
    write_gitconfig(&home, &[]);
    let out = run("untrusted");
    assert_command_failed(&out);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(refused_write().1),
        "{}",
        show(&out)
    );
    assert!(!repo.join("untrusted").exists());
    // The current directory is the workspace: writable.
    let out = output(
        with_home(env.sandgate_without_workspace("workspace-write"), &home)
            .current_dir(&cwd)
            .args(["--", "touch", "here"]),
    );
    assert_status(&out, 0);
    assert!(cwd.join("here").exists());
    // Listed in safe.directory, the repository is the workspace again.
    write_gitconfig(&home, &[&repo.display().to_string()]);
    let out = run("trusted");
    assert_status(&out, 0);
    assert!(repo.join("trusted").exists() && cwd.join("here-trusted").exists());
}

#[test]
fn a_worktree_whose_git_directory_is_someone_elses_is_not_the_workspace() {
    if !is_root() {
        eprintln!("NOTE: needs a git directory of another user's; checked as root only");
        return;
    }
    let env = TestEnv::new();
    let main = env.root.join("main");
    init_repository(&main);
    let git = |args: &[&str]| {
        let out = output(
            Command::new("git")
                .current_dir(&main)
                .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
                .args(args),
        );
        assert_status(&out, 0);
    };
    git(&["commit", "-q", "--allow-empty", "-m", "start"]);
    let worktree = env.root.join("linked");
    git(&["worktree", "add", "-q", &worktree.display().to_string()]);
    std::fs::create_dir(worktree.join("sub")).unwrap();
    chown_tree(&main, 65534);
    let home = env.root.join("home");
    std::fs::create_dir(&home).unwrap();
    write_gitconfig(&home, &[]);
    let cwd = worktree.join("sub");
    assert!(!git_uses(&home, &cwd, None));
    assert_eq!(
        private_temp(&env, &home, &cwd, None, None),
        private_temp(&env, &home, &cwd, Some(&cwd), None)
    );
    write_gitconfig(&home, &[&worktree.display().to_string()]);
    assert!(git_uses(&home, &cwd, None));
    assert_eq!(
        private_temp(&env, &home, &cwd, None, None),
        private_temp(&env, &home, &cwd, Some(&worktree), None)
    );
}
