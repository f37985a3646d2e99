//! Red team, secrets: credentials that no list names and the hiding rule does not reach.
//! Each test plants a credential where a real one lives, runs both restricted profiles
//! and asserts that the secret's content does not come out. A test that fails here is a
//! secret the sandbox lets a command read.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support::*;

const SECRET: &str = "REDTEAM-SECRET-CONTENT";

fn put(dir: &Path, file: &str, text: &str, mode: u32) -> PathBuf {
    let path = dir.join(file);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    chmod(&path, mode);
    path
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Runs `script` under `mode` with `$HOME` at `home` (and the test's own
/// `XDG_RUNTIME_DIR`, which `TestEnv::isolate` sets), returning stdout.
fn run_at(env: &TestEnv, mode: &str, home: &Path, script: &str) -> String {
    let mut cmd = env.sandgate(mode);
    cmd.env("HOME", home).args(["--", "/bin/sh", "-c", script]);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Attack: a credential file a tool wrote 0644 inside a dot-directory it made 0700
/// (`~/.myapp/token`). On the host nobody but the owner can reach it — the directory is
/// closed to others — so it is as private as a 0600 file, but the hiding rule looks at the
/// file's own mode only (under `/etc` it hides closed directories, in a home it does not).
/// Should fail: the README promises every owner-private file in a home's dot-entries reads
/// as empty, and the threat model counts any file holding a secret.
#[test]
fn redteam_a_public_file_in_a_closed_dot_directory_is_not_readable() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    std::fs::create_dir(&home).unwrap_or_else(|e| panic!("{e}"));
    let token = put(&home, ".myapp/token", SECRET, 0o644);
    chmod(token.parent().unwrap_or(&home), 0o700);
    let deep = put(&home, ".config/tool/auth/session.json", SECRET, 0o644);
    chmod(deep.parent().unwrap_or(&home), 0o700);
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        for file in [&token, &deep] {
            let seen = run_at(
                &env,
                mode,
                &home,
                &format!("cat '{}' 2>/dev/null; true", file.display()),
            );
            if seen.contains(SECRET) {
                failures.push(format!("{mode}: {} read", file.display()));
            }
        }
    }
    assert_none(failures);
}

/// Attack: read the session's runtime directory (`$XDG_RUNTIME_DIR`, `/run/user/UID`),
/// where podman and buildah keep registry logins (`containers/auth.json`, 0600) and other
/// session secrets live. It is not in the home, so neither the list nor the rule covers it.
/// Should fail: it is a credential of the user's; its sockets are already out of reach,
/// its files should be too.
#[test]
fn redteam_the_runtime_directorys_credentials_are_not_readable() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    std::fs::create_dir(&home).unwrap_or_else(|e| panic!("{e}"));
    let run = env.root.join("run");
    std::fs::create_dir_all(&run).unwrap_or_else(|e| panic!("{e}"));
    chmod(&run, 0o700);
    let auth = put(&run, "containers/auth.json", SECRET, 0o600);
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let seen = run_at(
            &env,
            mode,
            &home,
            "cat \"$XDG_RUNTIME_DIR/containers/auth.json\" 2>/dev/null; true",
        );
        if seen.contains(SECRET) {
            failures.push(format!("{mode}: {} read", auth.display()));
        }
    }
    assert_none(failures);
}

/// Attack: read secrets from variables whose names are secrets by convention but contain
/// none of KEY/TOKEN/SECRET/PASSWORD/PASSWD/CREDENTIAL/AUTH: MySQL's `MYSQL_PWD`, borg's
/// and restic's passphrases, GitLab's `CI_JOB_JWT`, a GitHub `*_PAT`, a `*_PASS`.
/// Should fail: these are credentials, and the README withholds "secret-looking" names.
#[test]
fn redteam_conventional_secret_variables_are_withheld() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let names = [
        "MYSQL_PWD",
        "BORG_PASSPHRASE",
        "RESTIC_PASSWORD_COMMAND_X",
        "CI_JOB_JWT",
        "GITHUB_PAT",
        "DB_PASS",
        "SSHPASS",
    ];
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let mut cmd = env.sandgate(mode);
        for name in names {
            cmd.env(name, SECRET);
        }
        cmd.args(["--", "/usr/bin/env"]);
        let out = output(&mut cmd);
        assert_status(&out, 0);
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if line.contains(SECRET) {
                failures.push(format!("{mode}: {line}"));
            }
        }
    }
    assert_none(failures);
}

/// Attack (as root): read a root-only credential store outside `/etc` and `/root` —
/// debconf's password database `/var/cache/debconf/passwords.dat` (0600 root), or a
/// root-only key outside both (here one the test makes beside the workspace). The rule
/// hides root-only files under `/etc` only. Should fail: as root the sandbox should not
/// read what only root may read, wherever the machine keeps it.
#[test]
fn redteam_as_root_root_only_files_outside_etc_are_not_readable() {
    if !require_full_enforcement() {
        return;
    }
    if !is_root() {
        eprintln!("NOTE: root-only files are checked as root only");
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let env = TestEnv::new();
    let key = put(&env.outside, "machine.key", SECRET, 0o600);
    let debconf = Path::new("/var/cache/debconf/passwords.dat");
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let seen = run_at(
            &env,
            mode,
            &env.root,
            &format!("cat '{}' 2>/dev/null; true", key.display()),
        );
        if seen.contains(SECRET) {
            failures.push(format!("{mode}: {} read", key.display()));
        }
        // The host's database may be empty: it counts as read when the sandbox opens the
        // real file (same device and inode) rather than a stand-in or nothing.
        if let Ok(meta) = std::fs::metadata(debconf) {
            if meta.uid() == 0 && meta.mode() & 0o077 == 0 {
                let seen = run_at(
                    &env,
                    mode,
                    &env.root,
                    &format!(
                        "cat '{0}' >/dev/null 2>&1 && stat -Lc '%d:%i' '{0}'; true",
                        debconf.display()
                    ),
                );
                if seen.trim() == format!("{}:{}", meta.dev(), meta.ino()) {
                    failures.push(format!("{mode}: {} opened", debconf.display()));
                }
            }
        }
    }
    assert_none(failures);
}

/// Attack: exhaust the hiding rule's scan budget (at most 2000 directories and 20,000
/// entries, breadth first) from a workspace that lies in a dot-entry of the home (a
/// project kept in `~/.config/nvim`): one call plants 2100 directories there, hoping the
/// next call's scan stops before it reaches `~/.config/zz-app/token` (0600) or
/// `~/.zz/token`, which would then read. Should fail: the scan must not let the
/// workspace's content decide what stays hidden.
#[test]
fn redteam_a_workspace_full_of_directories_does_not_exhaust_the_secret_scan() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    let project = home.join(".config/nvim");
    std::fs::create_dir_all(&project).unwrap_or_else(|e| panic!("{e}"));
    put(&home, ".config/zz-app/token", SECRET, 0o600);
    put(&home, ".zz/token", SECRET, 0o600);
    let run = |script: &str| {
        let mut cmd = env.sandgate_without_workspace("workspace-write");
        cmd.current_dir(&project)
            .env("HOME", &home)
            .arg("--workspace")
            .arg(&project)
            .args(["--", "/bin/sh", "-c", script]);
        let out = output(&mut cmd);
        assert_status(&out, 0);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run("mkdir -p $(seq -f d%g 1 2100) && mkdir -p $(seq -f d1/e%g 1 200)");
    let seen = run("cat ~/.config/zz-app/token ~/.zz/token 2>/dev/null; true");
    assert!(
        !seen.contains(SECRET),
        "a secret read after the scan was flooded: {seen}"
    );
}

/// Attack: read owner-only credentials in the home that lie outside its dot-entries, where
/// the rule does not look: a snap's own configuration (`~/snap/doctl/current/.config/doctl/
/// config.yaml`, DigitalOcean's token: snaps keep each app's dot-files under `~/snap`), a
/// private key kept in `~/keys/id_rsa`, a cloud console's `~/aws-keys.csv` download — all
/// 0600, the convention the rule itself takes as "a secret". Should fail: an owner-only
/// file in the home is a secret wherever it lies in it.
#[test]
fn redteam_owner_only_files_outside_the_homes_dot_entries_are_not_readable() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    std::fs::create_dir(&home).unwrap_or_else(|e| panic!("{e}"));
    let files = [
        put(
            &home,
            "snap/doctl/current/.config/doctl/config.yaml",
            SECRET,
            0o600,
        ),
        put(&home, "keys/id_rsa", SECRET, 0o600),
        put(&home, "aws-keys.csv", SECRET, 0o600),
    ];
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        for file in &files {
            let seen = run_at(
                &env,
                mode,
                &home,
                &format!("cat '{}' 2>/dev/null; true", file.display()),
            );
            if seen.contains(SECRET) {
                failures.push(format!("{mode}: {} read", file.display()));
            }
        }
    }
    assert_none(failures);
}
