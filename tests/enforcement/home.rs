//! Home and secrets: a workspace derived from the home directory is refused, persistence
//! paths stay read-only in a writable home whether or not they exist, credentials and
//! sandgate's own files read as empty and cannot be locked, and secret-looking variables
//! are withheld. Each test makes its own home under the test directory and points `$HOME`
//! at it (as uid 65534, whose passwd home does not exist, that is the only home there is).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use crate::support::*;

pub(super) const SECRET: &str = "SECRET-CONTENT";

/// A home with startup files, credentials and ordinary work in it; `.zshrc`,
/// `.config/autostart` and `~/bin` are missing on purpose.
fn fake_home(env: &TestEnv) -> PathBuf {
    let home = env.root.join("home");
    for dir in [".ssh", ".aws", ".docker", ".local/bin", ".config", "proj"] {
        std::fs::create_dir_all(home.join(dir)).unwrap();
    }
    for (file, text) in [
        (".bashrc", "# rc\n"),
        (".local/bin/tool", "#!/bin/sh\n"),
        (".ssh/id_ed25519", SECRET),
        (".aws/credentials", SECRET),
        (".netrc", SECRET),
        (".docker/config.json", SECRET),
        ("notes.txt", "notes\n"),
    ] {
        std::fs::write(home.join(file), text).unwrap();
    }
    home
}

pub(super) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub(super) fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Runs `script` with sh under `mode`, with `$HOME` set, from `cwd`, with `flags` before
/// the command.
pub(super) fn sh_at(
    env: &TestEnv,
    mode: &str,
    home: &Path,
    cwd: &Path,
    flags: &[&str],
    script: &str,
) -> Output {
    let mut cmd = env.sandgate_without_workspace(mode);
    cmd.current_dir(cwd)
        .env("HOME", home)
        .args(flags)
        .args(["--", "/bin/sh", "-c", script]);
    output(&mut cmd)
}

#[track_caller]
pub(super) fn assert_marker_for(out: &Output, path: &Path) {
    if !observing() {
        return;
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let quoted = format!("\"path\":\"{}", path.display());
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("sandgate: denied {") && l.contains(&quoted)),
        "no marker naming {}\n{}",
        path.display(),
        show(out)
    );
}

#[test]
fn running_from_home_without_a_repo_is_refused_before_anything_runs() {
    let env = TestEnv::new();
    let home = fake_home(&env);
    let link = env.root.join("home-link");
    std::os::unix::fs::symlink(&home, &link).unwrap();
    // From home, from a directory holding it, and with $HOME naming it through a link.
    for (home_var, cwd) in [(&home, &home), (&home, &env.root), (&link, &home)] {
        for mode in ["read-only", "workspace-write", "full-access"] {
            let mut cmd = env.sandgate_without_workspace(mode);
            cmd.current_dir(cwd)
                .env("HOME", home_var)
                .args(["-c", "echo x >> ~/.bashrc; touch ~/ran"]);
            let out = output(&mut cmd);
            assert_status(&out, 78);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains("--workspace"), "{}", show(&out));
            assert!(stderr.contains("sandgate: denied {"), "{}", show(&out));
            assert_eq!(read(&home.join(".bashrc")), "# rc\n");
            assert!(!home.join("ran").exists());
        }
    }
    // Control: from a project beneath home, or with home named explicitly, the call runs.
    // The project is a repository, so the walk up stops there wherever the test directory
    // is (inside a repository around it, the refusals above hold all the same).
    init_repository(&home.join("proj"));
    let out = sh_at(
        &env,
        "workspace-write",
        &home,
        &home.join("proj"),
        &[],
        "echo ok > out",
    );
    assert_status(&out, 0);
    assert_eq!(read(&home.join("proj/out")), "ok\n");
    let ws: &str = &home.to_string_lossy();
    let out = sh_at(
        &env,
        "read-only",
        &home,
        &home,
        &["--workspace", ws],
        "true",
    );
    assert_status(&out, 0);
}

#[test]
fn running_from_the_passwd_home_is_refused_too() {
    let env = TestEnv::new();
    let home = fake_home(&env);
    let passwd = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map(|u| u.dir);
    let Some(passwd) =
        passwd.filter(|d| d.is_dir() && std::fs::canonicalize(d).ok() != Some(home.clone()))
    else {
        eprintln!("NOTE: this uid's passwd home does not exist; only $HOME is checked here");
        return;
    };
    let marker = env.outside.join("ran");
    let mut cmd = env.sandgate_without_workspace("workspace-write");
    cmd.current_dir(&passwd)
        .env("HOME", &home)
        .arg("--")
        .arg("touch")
        .arg(&marker);
    let out = output(&mut cmd);
    assert_status(&out, 78);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--workspace"),
        "{}",
        show(&out)
    );
    assert!(!marker.exists());
}

#[test]
fn persistence_paths_stay_read_only_in_an_explicit_workspace_holding_home() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = fake_home(&env);
    let ws: &str = &home.to_string_lossy();
    let flags = ["--workspace", ws];
    let bin_before = listing(&home.join(".local/bin"));
    // The landlock backend cannot keep a credential inside a writable root from the
    // sandbox: a home holding one is refused as a workspace, before anything runs.
    if landlock_backend() {
        let out = sh_at(&env, "workspace-write", &home, &home, &flags, "echo ran");
        assert_status(&out, 78);
        assert!(out.stdout.is_empty(), "{}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("from the sandbox: it lies in the writable root"),
            "{}",
            show(&out)
        );
        return;
    }

    let out = sh_at(
        &env,
        "workspace-write",
        &home,
        &home,
        &flags,
        "echo evil >> ~/.bashrc",
    );
    assert_command_failed(&out);
    assert_marker_for(&out, &home.join(".bashrc"));
    let out = sh_at(
        &env,
        "workspace-write",
        &home,
        &home,
        &flags,
        "echo evil > ~/.local/bin/ls",
    );
    assert_command_failed(&out);
    assert_marker_for(&out, &home.join(".local/bin/ls"));

    let attempts = [
        "echo evil > ~/.local/bin/tool",
        "rm -rf ~/.local/bin",
        "mv ~/.local/bin ~/.local/bin-aside",
        "mv ~/.local ~/.local-aside && mkdir -p ~/.local/bin",
        "touch ~/.zshrc",
        "ln -s /tmp/evil ~/.zshenv",
        "mkdir -p ~/.config/autostart",
        "mkdir ~/bin",
        "mv ~/.config ~/.config-aside && mkdir -p ~/.config/autostart",
        "rm -f ~/.bashrc",
        "mv ~/.bashrc ~/.bashrc-aside",
        "printf '[core]\\n' > ~/.gitconfig",
    ];
    for attempt in attempts {
        let out = sh_at(&env, "workspace-write", &home, &home, &flags, attempt);
        assert_command_failed(&out);
        assert_eq!(read(&home.join(".bashrc")), "# rc\n", "`{attempt}`");
        assert_eq!(listing(&home.join(".local/bin")), bin_before, "`{attempt}`");
        assert_eq!(
            read(&home.join(".local/bin/tool")),
            "#!/bin/sh\n",
            "`{attempt}`"
        );
        for missing in [
            ".zshrc",
            ".zshenv",
            ".config/autostart",
            "bin",
            ".gitconfig",
        ] {
            assert!(
                home.join(missing).symlink_metadata().is_err(),
                "`{attempt}` created ~/{missing}"
            );
        }
    }

    // $HOME naming the home through a link guards the same files.
    let link = env.root.join("home-link");
    std::os::unix::fs::symlink(&home, &link).unwrap();
    let out = sh_at(
        &env,
        "workspace-write",
        &link,
        &home,
        &flags,
        "touch ~/.zshrc || touch ~/.zprofile",
    );
    assert_command_failed(&out);
    assert!(!home.join(".zshrc").exists() && !home.join(".zprofile").exists());

    // A workspace holding home: home itself cannot be moved aside and replaced.
    let parent: &str = &env.root.to_string_lossy();
    let out = sh_at(
        &env,
        "workspace-write",
        &home,
        &env.root,
        &["--workspace", parent],
        "mv home home-aside; mkdir -p home && echo evil > home/.bashrc",
    );
    assert_command_failed(&out);
    assert_eq!(read(&home.join(".bashrc")), "# rc\n");
    assert!(!env.root.join("home-aside").exists());

    // Ordinary work in the same home still succeeds.
    let out = sh_at(
        &env,
        "workspace-write",
        &home,
        &home,
        &flags,
        "echo more >> notes.txt && echo ok > proj/new && mkdir proj/dir",
    );
    assert_status(&out, 0);
    assert_eq!(read(&home.join("notes.txt")), "notes\nmore\n");
    assert_eq!(read(&home.join("proj/new")), "ok\n");

    // Control: full access can write the startup file.
    let out = sh_at(
        &env,
        "full-access",
        &home,
        &home,
        &flags,
        "echo x >> ~/.bashrc && touch ~/.zshrc",
    );
    assert_status(&out, 0);
    assert_eq!(read(&home.join(".bashrc")), "# rc\nx\n");
    assert!(home.join(".zshrc").exists());
}

const READ_SECRETS: &str = "cat ~/.ssh/id_ed25519 ~/.aws/credentials ~/.netrc ~/.docker/config.json ~/.kube/config 2>/dev/null; \
     ls -A ~/.ssh ~/.aws ~/.kube; stat -c '%F:%s' ~/.netrc ~/.docker/config.json; echo end";

#[test]
fn credentials_read_as_empty_in_restricted_profiles() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = fake_home(&env);
    // A credential directory behind a link is hidden where it really is.
    let kube = env.root.join("kube-real");
    std::fs::create_dir(&kube).unwrap();
    std::fs::write(kube.join("config"), SECRET).unwrap();
    std::os::unix::fs::symlink(&kube, home.join(".kube")).unwrap();
    let ws: &str = &env.ws.to_string_lossy();
    for mode in ["read-only", "workspace-write"] {
        let out = sh_at(
            &env,
            mode,
            &home,
            &env.ws,
            &["--workspace", ws],
            READ_SECRETS,
        );
        assert_status(&out, 0);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains(SECRET), "{mode}: {}", show(&out));
        // The landlock backend mounts nothing over them: their names and sizes show (a
        // known limit), never their contents.
        assert!(
            !landlock_backend() || stdout.ends_with("end\n"),
            "{mode}: {}",
            show(&out)
        );
        if !landlock_backend() {
            assert_eq!(
                stdout.lines().collect::<Vec<_>>(),
                [
                    format!("{}/.aws:", home.display()),
                    String::new(),
                    format!("{}/.kube:", home.display()),
                    String::new(),
                    format!("{}/.ssh:", home.display()),
                    "regular empty file:0".into(),
                    "regular empty file:0".into(),
                    "end".into()
                ],
                "{mode}: {}",
                show(&out)
            );
        }
        // Started inside a hidden directory, the command is in the empty one.
        let out = sh_at(
            &env,
            mode,
            &home,
            &home.join(".ssh"),
            &["--workspace", ws],
            "cat id_ed25519 ./id_ed25519 2>/dev/null; ls -A .; pwd",
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains(SECRET), "{mode}: {}", show(&out));
        assert!(
            landlock_backend() || !stdout.contains("id_ed25519"),
            "{mode}: {}",
            show(&out)
        );
        // Hidden files cannot be written either.
        let out = sh_at(
            &env,
            mode,
            &home,
            &env.ws,
            &["--workspace", ws],
            "echo x > ~/.netrc",
        );
        assert_command_failed(&out);
    }
    assert_eq!(read(&home.join(".netrc")), SECRET);
    // Control: full access reads them.
    let out = sh_at(
        &env,
        "full-access",
        &home,
        &env.ws,
        &["--workspace", ws],
        READ_SECRETS,
    );
    assert_status(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).matches(SECRET).count(),
        5,
        "{}",
        show(&out)
    );
}

#[test]
fn the_user_config_can_unhide_and_hide_paths_the_project_can_only_hide() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = fake_home(&env);
    std::fs::write(env.ws.join("local.env"), SECRET).unwrap();
    std::fs::write(env.ws.join("project.env"), SECRET).unwrap();
    let config = env.root.join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.json"),
        r#"{"hidden_paths": ["local.env"], "unhidden_paths": ["~/.netrc"]}"#,
    )
    .unwrap();
    std::fs::create_dir_all(env.ws.join(".sandgate")).unwrap();
    std::fs::write(
        env.ws.join(".sandgate/config.json"),
        r#"{"hidden_paths": ["project.env"], "unhidden_paths": ["~/.ssh"]}"#,
    )
    .unwrap();
    let ws: &str = &env.ws.to_string_lossy();
    let out = sh_at(
        &env,
        "workspace-write",
        &home,
        &env.ws,
        &["--workspace", ws],
        "echo netrc=$(cat ~/.netrc) local=$(cat local.env) project=$(cat project.env) ssh=$(cat ~/.ssh/id_ed25519 2>/dev/null)",
    );
    // The landlock backend cannot hide a file inside a writable root: the call that
    // would have to is refused, naming it.
    if landlock_backend() {
        assert_status(&out, 78);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("local.env from the sandbox"),
            "{}",
            show(&out)
        );
        return;
    }
    assert_status(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("netrc={SECRET} local= project= ssh=")
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`unhidden_paths`"),
        "{}",
        show(&out)
    );
}

#[test]
fn secret_looking_variables_are_withheld_unless_kept() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let show_vars = "echo ${OPENAI_API_KEY-unset} ${GITHUB_TOKEN-unset} ${db_password-unset} ${GIT_AUTHOR_NAME-unset} ${PLAIN-unset}";
    let run = |mode: &str, flags: &[&str], keep_var: Option<&str>| -> String {
        let mut cmd = env.sandgate(mode);
        cmd.envs([
            ("OPENAI_API_KEY", "sk-test"),
            ("GITHUB_TOKEN", "gh-test"),
            ("db_password", "pw"),
            ("GIT_AUTHOR_NAME", "me"),
            ("PLAIN", "plain"),
        ]);
        if let Some(keep) = keep_var {
            cmd.env("SANDGATE_KEEP_ENV", keep);
        }
        cmd.args(flags).args(["--", "/bin/sh", "-c", show_vars]);
        let out = output(&mut cmd);
        assert_status(&out, 0);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    for mode in ["read-only", "workspace-write"] {
        assert_eq!(run(mode, &[], None), "unset unset unset me plain", "{mode}");
        assert_eq!(
            run(mode, &["--keep-env", "OPENAI_API_KEY"], None),
            "sk-test unset unset me plain",
            "{mode}"
        );
        assert_eq!(
            run(mode, &[], Some("OPENAI_API_KEY,db_password")),
            "sk-test unset pw me plain",
            "{mode}"
        );
    }
    // Control: full access passes everything.
    assert_eq!(run("full-access", &[], None), "sk-test gh-test pw me plain");
}

/// Runs a script that reads and then locks sandgate's own files from inside, and checks
/// from the host, while the sandbox holds its locks, that the real files are not locked.
/// (Under the landlock backend nothing stands in for them: they cannot be opened at all,
/// and the names in sandgate's configuration directory can be listed, a known limit.)
fn own_files_case(env: &TestEnv, mode: &str, audit: &Path, denial_log: &Path) {
    let config = env.root.join("config");
    let stand_ins = !landlock_backend();
    let list = match stand_ins {
        true => format!("ls -A '{}';", config.display()),
        false => String::new(),
    };
    let script = format!(
        "cat '{a}' '{d}'; {list} exec 8<'{a}' 9<'{d}'; flock -x 8 && flock -x 9 && echo locked; read _ || true",
        a = audit.display(),
        d = denial_log.display(),
    );
    let mut cmd = env.sandgate(mode);
    cmd.env("SANDGATE_AUDIT_LOG", audit)
        .arg("--denial-log")
        .arg(denial_log)
        .args(["--", "/bin/sh", "-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    // A sandbox that blocks on a lock must fail the test, not hang it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(stdout).lines();
        let _ = tx.send(lines.next().and_then(Result::ok).unwrap_or_default());
    });
    let first = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("{mode}: the sandbox did not report its locks within 30 s");
        });
    assert_eq!(
        first,
        if stand_ins { "locked" } else { "" },
        "{mode}: the sandbox read something or could not lock"
    );
    for real in [audit, denial_log] {
        let file = std::fs::File::open(real).unwrap();
        let locked = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock);
        assert!(
            locked.is_ok(),
            "{mode}: {} is locked by the sandbox",
            real.display()
        );
    }
    // Closing its stdin lets the script end.
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    // (Under the landlock backend a log inside the workspace refuses the call: 78.)
    match stand_ins {
        true => assert_status(&out, 0),
        false => assert_ne!(out.status.code(), Some(0), "{mode}: {}", show(&out)),
    }
}

#[test]
fn sandgates_own_files_are_unreadable_and_unlockable_inside() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let config = env.root.join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.json"), "{}").unwrap();
    for (audit, denial_log) in [
        (env.audit_log(), env.root.join("denials.ndjson")),
        // Inside the workspace (a writable root), they are hidden all the same.
        (env.ws.join("audit.jsonl"), env.ws.join("denials.ndjson")),
    ] {
        if let Some(dir) = audit.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(&audit, "{\"audit\":1}\n").unwrap();
        std::fs::write(&denial_log, "{\"denial\":1}\n").unwrap();
        for mode in ["read-only", "workspace-write"] {
            own_files_case(&env, mode, &audit, &denial_log);
            let mut cmd = env.sandgate(mode);
            cmd.env("SANDGATE_AUDIT_LOG", &audit)
                .arg("--denial-log")
                .arg(&denial_log)
                .args(["--", "/bin/sh", "-c"])
                .arg(format!(
                    "echo x >> '{}' || echo y >> '{}'",
                    audit.display(),
                    denial_log.display()
                ));
            let out = output(&mut cmd);
            assert_ne!(out.status.code(), Some(0), "{mode}: {}", show(&out));
            assert_eq!(read(&audit), "{\"audit\":1}\n", "{mode}");
        }
    }
    // Control: full access reads the audit log.
    let mut cmd = env.sandgate("full-access");
    cmd.arg("--").arg("cat").arg(env.audit_log());
    let out = output(&mut cmd);
    assert_status(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "{\"audit\":1}\n");
}

#[test]
fn doctor_lists_what_each_profile_hides() {
    let doctor = doctor();
    for mode in ["read-only", "workspace-write"] {
        let hides = &doctor["profiles"][mode]["hides"];
        let paths: Vec<&str> = hides["paths"]
            .as_array()
            .unwrap_or_else(|| panic!("{mode}: {hides}"))
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        for expected in [
            "$HOME/.ssh",
            "$HOME/.aws",
            "$HOME/.netrc",
            "$SANDGATE_APPROVAL_TOKEN_FILE",
        ] {
            assert!(paths.contains(&expected), "{mode}: {hides}");
        }
        let patterns = hides["env"]["name_contains"].to_string();
        for pattern in [
            "KEY",
            "TOKEN",
            "SECRET",
            "PASS",
            "CREDENTIAL",
            "AUTH",
            "JWT",
        ] {
            assert!(patterns.contains(pattern), "{mode}: {hides}");
        }
        let words = hides["env"]["name_words"].to_string();
        for word in ["PAT", "PWD"] {
            assert!(words.contains(word), "{mode}: {hides}");
        }
        assert!(hides["persistent_paths"]
            .to_string()
            .contains("$HOME/.bashrc"));
    }
    let full = &doctor["profiles"]["full-access"]["hides"];
    assert_eq!(full["paths"], serde_json::json!([]), "{full}");
    assert_eq!(full["env"], serde_json::Value::Null, "{full}");
}
