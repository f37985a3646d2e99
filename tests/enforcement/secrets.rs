//! Secrets by name and by rule: the listed credential files read as empty whatever their
//! mode; files nobody listed read as empty when only their owner may read them (in a home's
//! dot-entries) or, as root, when others may not read them (under `/etc`); a directory of
//! many such files is hidden as one mount; the rule's cache sees a file made owner-only
//! after an earlier call; the user (not the project) can show a path again. Each test makes
//! its own home and points `$HOME` at it.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::home::{read, sh_at, SECRET};
use crate::support::*;

use crate::support::{put_with_mode as put, set_mode as chmod};

fn new_home(env: &TestEnv) -> PathBuf {
    let home = env.root.join("home");
    std::fs::create_dir(&home).unwrap();
    home
}

/// Runs `script` under `mode` in the test's workspace with `$HOME` at `home`.
fn run(env: &TestEnv, mode: &str, home: &Path, flags: &[&str], script: &str) -> Output {
    let ws: &str = &env.ws.to_string_lossy();
    let mut all = vec!["--workspace", ws];
    all.extend(flags);
    let out = sh_at(env, mode, home, &env.ws, &all, script);
    assert_status(&out, 0);
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A script printing `NAME=CONTENT` for each file (relative to `$HOME`).
fn cat_each(files: &[&str]) -> String {
    files
        .iter()
        .map(|f| format!("echo \"{f}=$(cat ~/{f} 2>/dev/null)\";"))
        .collect()
}

/// Asserts that [`cat_each`]'s output `out` shows each of `files` with `content` (a hidden
/// file shows nothing: it reads as empty, or, under the landlock backend, cannot be
/// opened).
#[track_caller]
fn assert_each_reads(out: &Output, mode: &str, files: &[&str], content: &str) {
    let seen = stdout(out);
    for file in files {
        assert!(
            seen.contains(&format!("{file}={content}\n")),
            "{mode} {file}: {}",
            show(out)
        );
    }
}

/// `sandgate doctor --json` with `$HOME` at `home`.
fn doctor_for(env: &TestEnv, home: &Path) -> serde_json::Value {
    let mut cmd = std::process::Command::new(sandgate());
    env.isolate(&mut cmd);
    let out = output(cmd.env("HOME", home).args(["doctor", "--json"]));
    assert_status(&out, 0);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The credentials the list names, each written readable by everyone: the list hides them
/// whatever their mode.
const LISTED: [&str; 19] = [
    ".npmrc",
    ".cargo/credentials",
    ".vault-token",
    ".pgpass",
    ".my.cnf",
    ".m2/settings.xml",
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".histfile",
    ".local/share/fish/fish_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".node_repl_history",
    ".lesshst",
    ".cargo/credentials.toml",
    ".netrc",
];

#[test]
fn listed_credentials_and_histories_read_as_empty() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = new_home(&env);
    for file in LISTED {
        put(&home, file, SECRET, 0o644);
    }
    put(&home, ".config/app/settings.json", "visible", 0o644);
    let script = cat_each(&LISTED) + &cat_each(&[".config/app/settings.json"]);
    for mode in ["read-only", "workspace-write"] {
        let out = run(&env, mode, &home, &[], &script);
        assert!(!stdout(&out).contains(SECRET), "{mode}: {}", show(&out));
        assert_each_reads(&out, mode, &LISTED, "");
        assert_each_reads(&out, mode, &[".config/app/settings.json"], "visible");
    }
    // Control: full access reads them.
    let out = run(&env, "full-access", &home, &[], &script);
    assert_eq!(
        stdout(&out).matches(SECRET).count(),
        LISTED.len(),
        "{}",
        show(&out)
    );
}

#[test]
fn owner_only_files_nobody_listed_read_as_empty_and_their_neighbours_do_not() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = new_home(&env);
    let hidden = [
        ".foo/token",
        ".config/someapp/credentials.json",
        ".x_history",
        ".config/tool/nested/deeper/key",
    ];
    for file in hidden {
        put(&home, file, SECRET, 0o600);
    }
    let shown = [
        ".foo/readme",
        ".config/someapp/settings.json",
        ".y_rc",
        ".foo/group-readable",
        ".local/bin/private-tool",
        "notes/token",
    ];
    for file in shown {
        put(&home, file, "visible", 0o644);
    }
    // Readable by its group, executable by its owner, outside the dot-entries: not the rule's.
    chmod(&home.join(".foo/group-readable"), 0o640);
    chmod(&home.join(".local/bin/private-tool"), 0o700);
    chmod(&home.join("notes/token"), 0o600);
    let script = cat_each(&hidden) + &cat_each(&shown) + "stat -c '%F:%s' ~/.foo/token";
    for mode in ["read-only", "workspace-write"] {
        let out = run(&env, mode, &home, &[], &script);
        let seen = stdout(&out);
        assert!(!seen.contains(SECRET), "{mode}: {}", show(&out));
        assert_each_reads(&out, mode, &hidden, "");
        assert_each_reads(&out, mode, &shown, "visible");
        // Under the landlock backend its size shows (a known limit), never its contents.
        assert!(
            landlock_backend() || seen.ends_with("regular empty file:0\n"),
            "{mode}: {}",
            show(&out)
        );
        // A hidden file cannot be written either.
        let out = sh_at(
            &env,
            mode,
            &home,
            &env.ws,
            &["--workspace", &env.ws.to_string_lossy()],
            "echo x > ~/.foo/token",
        );
        assert_command_failed(&out);
    }
    assert_eq!(read(&home.join(".foo/token")), SECRET);
    let out = run(&env, "full-access", &home, &[], &script);
    assert_eq!(
        stdout(&out).matches(SECRET).count(),
        hidden.len(),
        "{}",
        show(&out)
    );
}

/// The number of mounts beneath `home` in a sandbox under `mode` with `$HOME` at `home`
/// (only those: a test running beside this one as root may add files under /etc that
/// every sandbox hides).
fn mounts_inside(env: &TestEnv, mode: &str, home: &Path) -> usize {
    let out = run(
        env,
        mode,
        home,
        &[],
        r#"awk -v h="$HOME/" 'index($5, h) == 1' /proc/self/mountinfo | wc -l"#,
    );
    stdout(&out)
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {}", show(&out)))
}

#[test]
fn a_browser_profile_of_owner_only_files_is_hidden_as_one_directory() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = new_home(&env);
    put(&home, ".config/app/settings.json", "visible", 0o644);
    let before: Vec<usize> = ["read-only", "workspace-write"]
        .iter()
        .map(|mode| mounts_inside(&env, mode, &home))
        .collect();
    // A profile as a browser keeps one: hundreds of private files, a few readable ones.
    let profile = home.join(".config/browser");
    for i in 0..300 {
        put(&profile, &format!("Default/Cache/f{i:03}"), SECRET, 0o600);
    }
    for i in 0..40 {
        put(
            &profile,
            &format!("Default/Local Storage/leveldb/{i:06}.ldb"),
            SECRET,
            0o600,
        );
    }
    put(&profile, "Default/Login Data", SECRET, 0o600);
    put(&profile, "Default/Preferences", "{}", 0o644);
    put(&profile, "Local State", SECRET, 0o600);
    let script = "ls -A ~/.config/browser | wc -l; cat ~/.config/browser/Default/'Login Data' 2>/dev/null; cat ~/.config/app/settings.json";
    for (mode, before) in ["read-only", "workspace-write"].iter().zip(before) {
        let after = mounts_inside(&env, mode, &home);
        assert!(
            after <= before + 1,
            "{mode}: {before} mounts without the profile, {after} with it"
        );
        let out = run(&env, mode, &home, &[], script);
        let seen = stdout(&out);
        assert!(!seen.contains(SECRET), "{mode}: {}", show(&out));
        // One empty directory in its place; under the landlock backend, which mounts
        // nothing, its names can be listed (a known limit) and no file in it read.
        assert!(
            landlock_backend() || seen.starts_with("0\n"),
            "{mode}: {}",
            show(&out)
        );
        assert!(seen.ends_with("visible"), "{mode}: {}", show(&out));
    }
}

#[test]
fn a_file_made_owner_only_after_an_earlier_call_is_hidden_at_the_next() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = new_home(&env);
    put(&home, ".foo/readme", "visible", 0o644);
    let later = put(&home, ".foo/later", SECRET, 0o644);
    let script = "cat ~/.foo/later; echo; cat ~/.foo/new 2>/dev/null; echo; cat ~/.newdir/key 2>/dev/null; true";
    // Times younger than two seconds are not trusted (a change in the same clock tick
    // could follow unseen): past that, the cache holds the directories' times.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let out = run(&env, "workspace-write", &home, &[], script);
    assert!(stdout(&out).starts_with(SECRET), "{}", show(&out));
    // A chmod changes no directory: the file changed within the hour is stat'ed anyway...
    chmod(&later, 0o600);
    for mode in ["read-only", "workspace-write"] {
        let out = run(&env, mode, &home, &[], script);
        assert!(!stdout(&out).contains(SECRET), "{mode}: {}", show(&out));
    }
    // ... a new file and a new directory do.
    chmod(&later, 0o644);
    put(&home, ".foo/new", SECRET, 0o600);
    put(&home, ".newdir/key", SECRET, 0o600);
    let out = run(&env, "workspace-write", &home, &[], script);
    assert_eq!(stdout(&out), format!("{SECRET}\n\n"), "{}", show(&out));
    // And back: readable again, shown again.
    chmod(&later, 0o644);
    std::fs::remove_file(home.join(".foo/new")).unwrap();
    let out = run(&env, "read-only", &home, &[], script);
    assert!(stdout(&out).starts_with(SECRET), "{}", show(&out));
}

#[test]
fn the_user_can_show_a_hidden_file_again_the_project_cannot() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = new_home(&env);
    for file in [".foo/token", ".config/someapp/credentials.json", ".pgpass"] {
        put(&home, file, SECRET, 0o600);
    }
    let script = cat_each(&[".foo/token", ".config/someapp/credentials.json", ".pgpass"]);
    let token = home.join(".foo/token").display().to_string();
    // --unhide (and SANDGATE_UNHIDE) show one file; the others stay hidden.
    let out = run(
        &env,
        "workspace-write",
        &home,
        &["--unhide", &token],
        &script,
    );
    assert_eq!(
        stdout(&out),
        format!(".foo/token={SECRET}\n.config/someapp/credentials.json=\n.pgpass=\n")
    );
    let mut cmd = env.sandgate("read-only");
    cmd.env("HOME", &home)
        .env(
            "SANDGATE_UNHIDE",
            format!("{}:{token}", home.join(".pgpass").display()),
        )
        .args(["--", "/bin/sh", "-c", &script]);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    assert_eq!(
        stdout(&out),
        format!(".foo/token={SECRET}\n.config/someapp/credentials.json=\n.pgpass={SECRET}\n")
    );
    // The user's configuration shows a directory with everything in it.
    let config = env.root.join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.json"),
        r#"{"unhidden_paths": ["~/.config/someapp"]}"#,
    )
    .unwrap();
    let out = run(&env, "workspace-write", &home, &[], &script);
    assert_eq!(
        stdout(&out),
        format!(".foo/token=\n.config/someapp/credentials.json={SECRET}\n.pgpass=\n")
    );
    // A project cannot: its unhidden_paths is ignored with a warning.
    std::fs::remove_file(config.join("config.json")).unwrap();
    std::fs::create_dir_all(env.ws.join(".sandgate")).unwrap();
    std::fs::write(
        env.ws.join(".sandgate/config.json"),
        r#"{"unhidden_paths": ["~/.foo/token", "~/.config/someapp"]}"#,
    )
    .unwrap();
    let out = run(&env, "workspace-write", &home, &[], &script);
    assert_eq!(
        stdout(&out),
        ".foo/token=\n.config/someapp/credentials.json=\n.pgpass=\n"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`unhidden_paths`"),
        "{}",
        show(&out)
    );
}

#[test]
fn as_root_the_systems_secrets_read_as_empty() {
    if !require_full_enforcement() {
        return;
    }
    if !is_root() {
        // As another user, the files under /etc that others may not read are unreadable
        // inside and outside alike: the rule is root's.
        eprintln!("NOTE: the system's secrets are checked as root only");
        return;
    }
    let env = TestEnv::new();
    let home = new_home(&env);
    // A directory of the test's own under /etc, as a control that does not depend on what
    // this machine has there.
    let dir = tempfile::Builder::new()
        .prefix("sandgate-test-")
        .tempdir_in("/etc")
        .unwrap();
    let mine = dir.path().to_path_buf();
    chmod(&mine, 0o755);
    let private = put(&mine, "private.key", SECRET, 0o600);
    let group = put(&mine, "group-only.conf", SECRET, 0o640);
    let public = put(&mine, "public.conf", "visible", 0o644);
    let closed = put(&mine, "closed/inside.pem", SECRET, 0o644);
    chmod(closed.parent().unwrap_or(&mine), 0o700);
    let mut files: Vec<PathBuf> = vec![PathBuf::from("/etc/shadow"), PathBuf::from("/etc/gshadow")];
    files.extend(
        std::fs::read_dir("/etc/ssh")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().ends_with("_key")),
    );
    files.retain(|p| p.exists());
    files.extend([private.clone(), group.clone(), closed.clone()]);
    let script: String = files
        .iter()
        .map(|f| {
            format!(
                "echo \"{}=$(cat '{}' 2>/dev/null | wc -c)\";",
                f.display(),
                f.display()
            )
        })
        .collect::<String>()
        + &format!("cat '{}'", public.display());
    for mode in ["read-only", "workspace-write"] {
        let out = run(&env, mode, &home, &[], &script);
        let seen = stdout(&out);
        for file in &files {
            assert!(
                seen.contains(&format!("{}=0\n", file.display())),
                "{mode} {}: {}",
                file.display(),
                show(&out)
            );
        }
        assert!(seen.ends_with("visible"), "{mode}: {}", show(&out));
    }
    // Control: full access reads them.
    let out = run(&env, "full-access", &home, &[], &script);
    assert!(
        !stdout(&out).contains(&format!("{}=0\n", private.display())),
        "{}",
        show(&out)
    );
    // doctor says why each is hidden.
    let doctor = doctor_for(&env, &home);
    for mode in ["read-only", "workspace-write"] {
        let hidden = &doctor["profiles"][mode]["hides"]["hidden"]["paths"];
        let reason = |path: &Path| {
            hidden
                .as_array()
                .into_iter()
                .flatten()
                .find(|h| h["path"] == path.display().to_string())
                .map(|h| h["reason"].clone())
        };
        assert_eq!(
            reason(Path::new("/etc/shadow")),
            Some("not-for-others".into())
        );
        assert_eq!(reason(&private), Some("not-for-others".into()));
        assert_eq!(
            reason(closed.parent().unwrap_or(&mine)),
            Some("closed-to-others".into())
        );
        assert_eq!(reason(&public), None);
    }
}

#[test]
fn doctor_lists_what_the_rule_hides_and_why() {
    let env = TestEnv::new();
    let home = new_home(&env);
    put(&home, ".foo/token", SECRET, 0o600);
    put(&home, ".npmrc", SECRET, 0o644);
    for i in 0..8 {
        put(&home, &format!(".config/store/f{i}"), SECRET, 0o600);
    }
    let doctor = doctor_for(&env, &home);
    for mode in ["read-only", "workspace-write"] {
        let hides = &doctor["profiles"][mode]["hides"]["hidden"];
        let paths = hides["paths"].as_array().cloned().unwrap_or_default();
        let find = |file: &str| {
            let path = home.join(file).display().to_string();
            paths.iter().find(|h| h["path"] == path).cloned()
        };
        assert_eq!(
            find(".foo/token"),
            Some(serde_json::json!({"path": home.join(".foo/token"), "reason": "owner-only"}))
        );
        assert_eq!(
            find(".npmrc"),
            Some(
                serde_json::json!({"path": home.join(".npmrc"), "reason": "listed", "entry": "$HOME/.npmrc"})
            )
        );
        assert_eq!(
            find(".config/store"),
            Some(
                serde_json::json!({"path": home.join(".config/store"), "reason": "owner-only-files", "owner_only": 8, "files": 8})
            )
        );
        let scanned = hides["scanned"].to_string();
        assert!(
            scanned.contains(&format!("\"root\":\"{}\"", home.display())),
            "{hides}"
        );
    }
    let mut cmd = std::process::Command::new(sandgate());
    env.isolate(&mut cmd);
    let out = output(cmd.env("HOME", &home).arg("doctor"));
    let text = stdout(&out);
    assert!(
        text.contains("only you may reach in your home's dot-entries")
            && text.contains("sandgate doctor --json"),
        "{text}"
    );
}

#[test]
fn a_workspace_inside_a_dot_entry_keeps_its_own_owner_only_files() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = new_home(&env);
    let project = home.join(".config/nvim");
    put(&project, "private.lua", SECRET, 0o600);
    put(&home, ".config/other/token", SECRET, 0o600);
    let ws: &str = &project.to_string_lossy();
    let out = sh_at(
        &env,
        "workspace-write",
        &home,
        &project,
        &["--workspace", ws],
        "cat private.lua; echo; cat ~/.config/other/token 2>/dev/null; echo more >> private.lua",
    );
    assert_status(&out, 0);
    // The project's file is the user's work; the token beside it is still a secret.
    assert_eq!(stdout(&out), format!("{SECRET}\n"));
    assert_eq!(
        read(&project.join("private.lua")),
        format!("{SECRET}more\n")
    );
    let out = sh_at(
        &env,
        "read-only",
        &home,
        &project,
        &["--workspace", ws],
        "cat private.lua; echo; cat ~/.config/other/token 2>/dev/null; true",
    );
    assert_status(&out, 0);
    assert_eq!(stdout(&out), format!("{SECRET}more\n\n"));
}

/// A dot-entry that is a link is judged where it leads, as a dot-entry: a `~/.config`
/// kept in a dotfiles checkout still gives every tool its settings (an XDG base
/// directory's mode says nothing, even through a link) while the owner-only token beside
/// them reads as empty; a closed store linked from `~/.vault` is hidden whole. Links that
/// lead nowhere, in a loop, to the home itself or above it change nothing and cost
/// nothing.
#[test]
fn a_dot_entry_that_is_a_link_is_judged_where_it_leads() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = new_home(&env);
    chmod(&home, 0o755);
    put(
        &home,
        "dotfiles/config/app/settings.toml",
        "SETTINGS",
        0o644,
    );
    put(&home, "dotfiles/config/app/token", SECRET, 0o600);
    chmod(&home.join("dotfiles/config"), 0o700);
    put(&home, "Sync/vault/notes.txt", SECRET, 0o644);
    chmod(&home.join("Sync/vault"), 0o700);
    put(&home, "Sync/public.txt", "PUBLIC", 0o644);
    let link =
        |target: &Path, name: &str| std::os::unix::fs::symlink(target, home.join(name)).unwrap();
    link(&home.join("dotfiles/config"), ".config");
    link(&home.join("Sync/vault"), ".vault");
    link(&home.join("Sync"), ".sync");
    link(Path::new("/"), ".root");
    link(&home, ".home");
    link(&home.join("nowhere"), ".dangling");
    link(&home.join(".loop"), ".loop");
    for mode in ["read-only", "workspace-write"] {
        let out = run(
            &env,
            mode,
            &home,
            &[],
            &cat_each(&[
                ".config/app/settings.toml",
                ".config/app/token",
                ".vault/notes.txt",
                ".sync/public.txt",
                ".home/.sync/public.txt",
            ]),
        );
        assert_each_reads(&out, mode, &[".config/app/settings.toml"], "SETTINGS");
        assert_each_reads(&out, mode, &[".config/app/token"], "");
        assert!(!stdout(&out).contains(SECRET), "{mode}: {}", show(&out));
        assert_each_reads(
            &out,
            mode,
            &[".sync/public.txt", ".home/.sync/public.txt"],
            "PUBLIC",
        );
    }
}

/// Attack: hide the workspace's own files from it, or uncover a secret, through a
/// dot-entry link to the workspace (`~/.proj -> ~/proj`, as a user links a project): the
/// project's owner-only file stays the project's to read and write, while an owner-only
/// file the home's scan finds elsewhere still reads as empty.
#[test]
fn a_dot_entry_linked_to_the_workspace_leaves_the_workspace_its_files() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = new_home(&env);
    chmod(&home, 0o755);
    let project = home.join("proj");
    put(&project, "private.env", "PROJECT-OWN", 0o600);
    put(&home, ".other/token", SECRET, 0o600);
    std::os::unix::fs::symlink(&project, home.join(".proj")).unwrap();
    let ws: &str = &project.to_string_lossy();
    let out = sh_at(
        &env,
        "workspace-write",
        &home,
        &project,
        &["--workspace", ws],
        "cat private.env; echo; cat ~/.proj/private.env; echo; cat ~/.other/token; echo; echo more >> private.env",
    );
    assert_status(&out, 0);
    assert_eq!(
        stdout(&out),
        "PROJECT-OWN\nPROJECT-OWN\n\n",
        "{}",
        show(&out)
    );
    assert_eq!(read(&project.join("private.env")), "PROJECT-OWNmore\n");
}
