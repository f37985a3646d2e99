//! Red team, secrets: credentials that no list names and the hiding rule does not reach.
//! Each test plants a credential where a real one lives, runs both restricted profiles
//! and asserts that the secret's content does not come out. A test that fails here is a
//! secret the sandbox lets a command read.

use std::path::{Path, PathBuf};

use crate::support::*;

const SECRET: &str = "REDTEAM-SECRET-CONTENT";

use crate::support::{put_with_mode as put, set_mode as chmod};

/// Runs `script` under `mode` with `$HOME` at `home` (and the test's own
/// `XDG_RUNTIME_DIR`, which `TestEnv::isolate` sets), returning stdout.
fn run_at(env: &TestEnv, mode: &str, home: &Path, script: &str) -> String {
    let mut cmd = env.sandgate(mode);
    cmd.env("HOME", home).args(["--", "/bin/sh", "-c", script]);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes the user's configuration (`SANDGATE_CONFIG_DIR`, as `TestEnv::isolate` sets it).
fn user_config(env: &TestEnv, json: &str) {
    let dir = env.root.join("config");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), json).unwrap();
}

/// The paths of `files` that `mode` lets a command read.
fn read_by(env: &TestEnv, mode: &str, home: &Path, files: &[PathBuf]) -> Vec<String> {
    files
        .iter()
        .filter(|file| {
            run_at(
                env,
                mode,
                home,
                &format!("cat '{}' 2>/dev/null; true", file.display()),
            )
            .contains(SECRET)
        })
        .map(|file| format!("{mode}: {} read", file.display()))
        .collect()
}

/// Attack: a credential file a tool wrote 0644 inside a dot-directory it made 0700
/// (`~/.myapp/token`; a browser's `cookies.sqlite` in `~/.mozilla`, a password store's
/// entries in `~/.password-store`), or inside a 0700 directory of its own in `~/.config`.
/// On the host nobody but the owner can reach it. Should fail: a directory of the home's
/// that only its owner may enter is hidden whole — except the home itself and the XDG
/// base directories (`~/.config`, `~/.cache`, `~/.local` and those in it), which
/// libraries create 0700 whatever they hold: a 0644 file there stays readable.
#[test]
fn redteam_a_public_file_in_a_closed_dot_directory_is_hidden() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    std::fs::create_dir(&home).unwrap();
    let token = put(&home, ".myapp/token", SECRET, 0o644);
    chmod(&home.join(".myapp"), 0o700);
    let deep = put(&home, ".config/tool/auth/session.json", SECRET, 0o644);
    chmod(&home.join(".config/tool/auth"), 0o700);
    let mut open = vec![];
    for (file, closed) in [
        (".config/git/config", ".config"),
        (".cache/pip/selfcheck.json", ".cache"),
        (".local/share/app/data", ".local/share"),
        (".local/state/app/log", ".local"),
    ] {
        open.push(put(&home, file, "PUBLIC", 0o644));
        chmod(&home.join(closed), 0o700);
    }
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        failures.extend(read_by(&env, mode, &home, &[token.clone(), deep.clone()]));
        for file in &open {
            let shown = run_at(&env, mode, &home, &format!("cat '{}'", file.display()));
            if !shown.contains("PUBLIC") {
                failures.push(format!("{mode}: {} hidden", file.display()));
            }
        }
    }
    assert_none(failures);
}

/// Attack: the workspace lies in a 0700 dot-directory (`~/.work/proj`), so the directory
/// cannot be hidden whole; or the user shows one file of a closed directory again
/// (`--unhide ~/.vault/public.pem`). Should fail: what the directory holds is then hidden
/// file by file — the owner-only key beside the workspace or the shown file stays empty.
#[test]
fn redteam_a_closed_directory_that_cannot_be_hidden_whole_still_hides_its_keys() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    let ws = home.join(".work/proj");
    std::fs::create_dir_all(&ws).unwrap();
    let key = put(&home, ".work/deploy_key", SECRET, 0o600);
    chmod(&home.join(".work"), 0o700);
    let id = put(&home, ".vault/private.pem", SECRET, 0o600);
    let known = put(&home, ".vault/public.pem", "PUBLIC", 0o644);
    chmod(&home.join(".vault"), 0o700);
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        for (file, unhide) in [(&key, None), (&id, Some(&known))] {
            let mut cmd = env.sandgate_without_workspace(mode);
            cmd.env("HOME", &home).arg("--workspace").arg(&ws);
            if let Some(shown) = unhide {
                cmd.arg("--unhide").arg(shown);
            }
            let script = format!(
                "cat '{}' 2>/dev/null; ls '{}' >/dev/null && echo WS-OK; {}",
                file.display(),
                ws.display(),
                unhide.map_or(String::new(), |k| format!("cat '{}'", k.display()))
            );
            let out = output(cmd.args(["--", "/bin/sh", "-c", &script]));
            let shown = String::from_utf8_lossy(&out.stdout);
            if shown.contains(SECRET) {
                failures.push(format!("{mode}: {} read", file.display()));
            }
            if !shown.contains("WS-OK") {
                failures.push(format!("{mode}: the workspace was hidden: {}", show(&out)));
            }
            if unhide.is_some() && !shown.contains("PUBLIC") {
                failures.push(format!(
                    "{mode}: the shown file stayed hidden: {}",
                    show(&out)
                ));
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
    std::fs::create_dir(&home).unwrap();
    let run = env.root.join("run");
    std::fs::create_dir_all(&run).unwrap();
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
/// root-only key outside both (here one the test makes beside the workspace). A sandbox's
/// root owns them as it owns the files it works on: the rule covers `/etc` and `/root`, and
/// only a list tells the rest apart (README, known limits). Named in `hidden_paths`, they
/// read as empty.
#[test]
fn redteam_as_root_root_only_files_outside_etc_are_hidden_once_named() {
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
    user_config(
        &env,
        &serde_json::json!({"hidden_paths": [key, debconf]}).to_string(),
    );
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        failures.extend(read_by(&env, mode, &env.root, std::slice::from_ref(&key)));
        // The host's database may be empty: it counts as read when the sandbox opens the
        // real file (same device and inode) rather than a stand-in or nothing.
        if let Ok(meta) = std::fs::metadata(debconf) {
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
    std::fs::create_dir_all(&project).unwrap();
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

/// Attack: read owner-only credentials in the home that lie outside its dot-entries: a
/// cloud console's `~/aws-keys.csv` download, which the rule hides (it looks at the files
/// directly in the home), and, beyond the rule's reach (README, known limits: it does not
/// walk the home's projects), a snap's own configuration
/// (`~/snap/doctl/current/.config/doctl/config.yaml`) and a private key kept in
/// `~/keys/id_rsa`, which read as empty once named in `hidden_paths` — all 0600.
#[test]
fn redteam_owner_only_files_outside_the_homes_dot_entries_are_hidden() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    std::fs::create_dir(&home).unwrap();
    let by_rule = put(&home, "aws-keys.csv", SECRET, 0o600);
    let named = [
        put(
            &home,
            "snap/doctl/current/.config/doctl/config.yaml",
            SECRET,
            0o600,
        ),
        put(&home, "keys/id_rsa", SECRET, 0o600),
    ];
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        failures.extend(read_by(&env, mode, &home, std::slice::from_ref(&by_rule)));
    }
    user_config(&env, r#"{"hidden_paths": ["~/snap/doctl", "~/keys"]}"#);
    for mode in ["read-only", "workspace-write"] {
        failures.extend(read_by(&env, mode, &home, &named));
    }
    assert_none(failures);
}
