//! Red team, round 6, continued: the hidden-files rule — what its bounds left unread is
//! hidden, and a closed directory that holds a needed path keeps the rest hidden. See
//! `redteam_round6` for how the tests are built.

use super::redteam_round6::{append_to, clone_of, SECRET};
use crate::support::*;
use crate::support::{put_with_mode as put, set_mode as chmod};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

// ---------------------------------------------------------------------------------------
// 3. The hidden-files rule: what the bounds left unread, closed directories with needed
//    paths.
// ---------------------------------------------------------------------------------------

/// Runs `script` under `mode` with `$HOME` at `home`, `$PATH` at `path`, and the workspace
/// `ws` (its cwd).
fn run_at_home(
    env: &TestEnv,
    mode: &str,
    home: &Path,
    path: &str,
    ws: &Path,
    script: &str,
) -> Output {
    let mut cmd = env.sandgate_without_workspace(mode);
    cmd.current_dir(ws)
        .env("HOME", home)
        .env("PATH", path)
        .arg("--workspace")
        .arg(ws)
        .args(["--", "/bin/sh", "-c", script]);
    output(&mut cmd)
}

/// Runs `script` (which makes many entries) in the workspace under workspace-write, and
/// checks that it ran to its end.
fn flood(env: &TestEnv, home: &Path, path: &str, ws: &Path, script: &str) {
    let script = format!("{script} && echo flooded");
    let out = run_at_home(env, "workspace-write", home, path, ws, &script);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("flooded"),
        "the flood failed: {}",
        show(&out)
    );
}

/// What `cat` shows of each of `files` under `mode`, as `(file, content)` for those whose
/// content reads.
fn readable(
    env: &TestEnv,
    mode: &str,
    home: &Path,
    path: &str,
    ws: &Path,
    files: &[PathBuf],
) -> Vec<String> {
    files
        .iter()
        .filter(|f| {
            let out = run_at_home(env, mode, home, path, ws, &format!("cat '{}'", f.display()));
            let content = std::fs::read_to_string(f).unwrap_or_default();
            String::from_utf8_lossy(&out.stdout).trim() == content.trim()
        })
        .map(|f| format!("{mode}: {} read", f.display()))
        .collect()
}

/// The hidden-files scan of `home` as `doctor --json` reports it (its cache file, its
/// source, whether a bound truncated it).
fn scan_of(env: &TestEnv, home: &Path, path: &str) -> serde_json::Value {
    let mut cmd = Command::new(sandgate());
    env.isolate(&mut cmd);
    let out = output(
        cmd.env("HOME", home)
            .env("PATH", path)
            .current_dir(&env.outside)
            .args(["doctor", "--json"]),
    );
    let doctor: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor --json: {e}\n{}", show(&out)));
    doctor["profiles"]["read-only"]["hides"]["hidden"]["scanned"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["root"].as_str() == home.to_str())
        .cloned()
        .unwrap_or_else(|| panic!("no scan of {} in doctor --json", home.display()))
}

/// Attack: flood the scan from a workspace that is a dot-entry (`~/.dotfiles`, `~/.emacs.d`:
/// the home's most common repositories) so that a directory the call must see is never
/// read. One call makes 20,000 files in the workspace; the scan reads the home's dot-entries
/// in order, `.dotfiles` before `.local` and `.fly`, and its 20,000 entries are spent there.
/// A directory a bound kept unread is hidden whole — unless the call needs it: `~/.local`
/// holds `~/.local/bin` and the 0700 `~/.fly` holds `~/.fly/bin`, both on `$PATH`, so both
/// stay, and since they were never read nothing in them is hidden at all:
/// `~/.local/share/app/token` (0600), `~/.fly/token` (0600) and `~/.fly/config.yml` (0644 in
/// a closed directory) read, at the call right after the flood (a refresh of the cached
/// scan) and after the scan is renewed whole. A sibling that holds nothing needed
/// (`~/.vault`) goes whole, unread, as it should. Should fail: "what was not read is not
/// shown".
#[test]
fn redteam_round6_a_flood_does_not_uncover_a_directory_the_call_needs() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    let ws = home.join(".dotfiles");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(home.join(".local/bin")).unwrap();
    std::fs::create_dir_all(home.join(".fly/bin")).unwrap();
    chmod(&home, 0o755);
    let local = put(&home, ".local/share/app/token", SECRET, 0o600);
    let fly_token = put(&home, ".fly/token", "FLY-TOKEN", 0o600);
    let fly_config = put(&home, ".fly/config.yml", "FLY-CONFIG-ACCESS-TOKEN", 0o644);
    chmod(&home.join(".fly"), 0o700);
    let vault = put(&home, ".vault/token", "VAULT-TOKEN", 0o600);
    let scanned_whole = |env: &TestEnv, path: &str| scan_of(env, &home, path)["truncated"] == false;
    let path = format!(
        "{}:{}:/usr/local/bin:/usr/bin:/bin",
        home.join(".local/bin").display(),
        home.join(".fly/bin").display()
    );
    let files = [local, fly_token, fly_config, vault];
    // Before the flood every one of them is hidden.
    let before = readable(&env, "read-only", &home, &path, &ws, &files);
    assert!(before.is_empty(), "control: {before:?}");
    flood(&env, &home, &path, &ws, "seq -f f%g 1 20000 | xargs touch");
    assert!(
        !scanned_whole(&env, &path),
        "control: the flood did not use up the scan's bounds"
    );
    let mut failures = readable(&env, "read-only", &home, &path, &ws, &files);
    // The same after the scan is renewed whole (an hour later): its cache file removed.
    let cache = scan_of(&env, &home, &path)["cache"]
        .as_str()
        .map(PathBuf::from)
        .unwrap_or_default();
    let _ = std::fs::remove_file(&cache);
    failures.extend(readable(&env, "workspace-write", &home, &path, &ws, &files));
    assert_none(failures);
}

/// Attack: make the rule hide the call's own tools. A workspace kept in a dot-entry makes
/// 2100 directories; the breadth-first scan spends its 2000 directories on them before it
/// reaches `~/.local/share`, which is then hidden whole, unread. `~/.local/bin` is on
/// `$PATH` and stays — but what pipx (and `uv tool`, and npm's global prefix) put there are
/// links into `~/.local/share/pipx/venvs/…`, so `black` (here a stand-in) is "not found" in
/// every later call. Should fail: the tools on `$PATH` work in the sandbox, and a
/// workspace's content does not decide what the rule hides outside it.
#[test]
#[ignore = "documented limit: what the scan's bounds left unread is hidden, needed by a tool or not"]
fn redteam_round6_a_flooded_workspace_does_not_take_away_path_tools() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    let ws = home.join(".dotfiles");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(home.join(".local/bin")).unwrap();
    chmod(&home, 0o755);
    put(
        &home,
        ".local/share/pipx/venvs/black/bin/black",
        "#!/bin/sh\necho black-ran\n",
        0o755,
    );
    std::os::unix::fs::symlink(
        "../share/pipx/venvs/black/bin/black",
        home.join(".local/bin/black"),
    )
    .unwrap();
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        home.join(".local/bin").display()
    );
    let ran = |mode: &str| {
        let out = run_at_home(&env, mode, &home, &path, &ws, "black");
        String::from_utf8_lossy(&out.stdout).contains("black-ran")
    };
    assert!(
        ran("read-only"),
        "control: the tool does not run before the flood"
    );
    flood(&env, &home, &path, &ws, "mkdir $(seq -f d%g 1 2100)");
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write", "read-only"] {
        if !ran(mode) {
            failures.push(format!(
                "{mode}: the $PATH tool ~/.local/bin/black is gone (its target in \
                 ~/.local/share hidden unread)"
            ));
        }
    }
    assert_none(failures);
}

/// Attack: make every call scan the home afresh. The scan's cache is refused when its tree
/// holds more than 2001 directories; a workspace in a dot-entry with 2100 directories gives
/// it more than that, so each later call — read-only ones too — walks the home whole again
/// (up to 2000 directories and 20,000 entries) instead of one `stat` per directory: three
/// times slower per call here, and much more on a home over NFS. Should fail: the README's
/// cached scan ("revalidated at each call by one stat per directory read") holds whatever a
/// workspace holds.
#[test]
fn redteam_round6_a_flooded_workspace_does_not_defeat_the_scan_cache() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    let ws = home.join(".dotfiles");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(home.join(".config/app")).unwrap();
    chmod(&home, 0o755);
    let path = "/usr/local/bin:/usr/bin:/bin";
    flood(&env, &home, path, &ws, "mkdir $(seq -f d%g 1 2100)");
    // Settle the scan (the directories' times are recorded once they are 2 s old).
    std::thread::sleep(Duration::from_millis(2100));
    let sources: Vec<String> = (0..3)
        .map(|_| {
            scan_of(&env, &home, path)["source"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert!(
        sources[1..].iter().all(|s| s != "walked"),
        "the home is scanned whole at every call: sources {sources:?}"
    );
}

/// Breakage: a `$PATH` directory named through a symbolic link (`$HOME` itself one, as on
/// Fedora's atomic desktops where `/home` links to `/var/home`, or a `..` in the entry) is
/// not recognised as needed: the scan's paths are canonical, `$PATH`'s are taken as written,
/// so the 0700 `~/.fly` holding `~/.fly/bin` is hidden whole and `flyctl` is "not found".
/// Named by its canonical path it runs (the control). Should fail: "never … one holding …
/// a `$PATH` directory".
#[test]
fn redteam_round6_a_path_directory_named_through_a_link_still_counts() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let real = env.root.join("real-home");
    let linked = env.root.join("home");
    std::fs::create_dir_all(real.join(".fly/bin")).unwrap();
    std::fs::create_dir_all(real.join("proj")).unwrap();
    std::os::unix::fs::symlink(&real, &linked).unwrap();
    chmod(&real, 0o755);
    put(&real, ".fly/bin/flyctl", "#!/bin/sh\necho fly-ran\n", 0o755);
    chmod(&real.join(".fly"), 0o700);
    let ran = |home: &Path, bin: &Path| {
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
        let out = run_at_home(&env, "read-only", home, &path, &real.join("proj"), "flyctl");
        String::from_utf8_lossy(&out.stdout).contains("fly-ran")
    };
    assert!(
        ran(&real, &real.join(".fly/bin")),
        "control: the tool does not run by its canonical path"
    );
    let mut failures = vec![];
    for bin in [linked.join(".fly/bin"), real.join("proj/../.fly/bin")] {
        if !ran(&linked, &bin) {
            failures.push(format!("PATH={}: flyctl not found", bin.display()));
        }
    }
    assert_none(failures);
}

/// `sandgate` behind `sh -c 'ulimit …; exec "$@"'`: the caller's resource limits, as a
/// CI job's or a shell's `ulimit` sets them.
fn with_ulimits(limits: &str, sandgate: &Command) -> Command {
    let mut wrapper = Command::new("/bin/sh");
    wrapper.args(["-c", &format!("{limits}; exec \"$@\""), "sh"]);
    behind(wrapper, sandgate)
}

/// Attack: kill sandgate with its own write. The caller limits file sizes (`ulimit -f`, as
/// build sandboxes and CI jobs do to stop a runaway log); the command writes past it to its
/// regular-file stdout. Before this round the command's own write got `SIGXFSZ`; now
/// sandgate writes the file, so sandgate gets the signal and dies of it mid-call — before it
/// puts the caller's files and terminal back. The command meanwhile took a `flock` on its
/// stdin (the caller's description): it stays locked, as would a terminal left in raw mode.
/// Should fail: sandgate outlives the command's output, and the lock is dropped.
#[test]
fn redteam_round6_output_past_the_file_size_limit_does_not_kill_sandgate() {
    if !require_full_enforcement() {
        return;
    }
    use std::os::unix::process::ExitStatusExt;
    let env = TestEnv::new();
    let input = env.outside.join("input.txt");
    std::fs::write(&input, "input\n").unwrap();
    let payload =
        "import fcntl, sys\nfcntl.flock(0, fcntl.LOCK_EX)\nsys.stdout.write('x' * 2000000)\n";
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let log = env.outside.join(format!("{mode}.log"));
        let kept = File::open(&input).unwrap();
        let mut sandgate = env.sandgate(mode);
        sandgate.args(["--", "python3", "-c", payload]);
        let out = output(
            with_ulimits("ulimit -c 0; ulimit -f 1024", &sandgate)
                .stdin(Stdio::from(clone_of(&kept)))
                .stdout(Stdio::from(append_to(&log))),
        );
        let free = host_can_lock(&input);
        drop(kept);
        if out.status.signal() == Some(libc::SIGXFSZ) {
            failures.push(format!(
                "{mode}: sandgate itself died of SIGXFSZ writing the command's output: {}",
                show(&out)
            ));
        }
        if !free {
            failures.push(format!(
                "{mode}: the command's lock on the caller's stdin outlived the call"
            ));
        }
    }
    assert_none(failures);
}

/// Attack: read a withheld variable out of sandgate's own memory. sandgate stays dumpable
/// while the command runs; with the caller's core files enabled (`ulimit -c unlimited`, a
/// developer's shell) and a file size limit, the command's output past the limit kills
/// sandgate with `SIGXFSZ`, whose core file the kernel writes where `core_pattern` says —
/// `core`, in sandgate's working directory, the workspace, as the call's uid. The next
/// sandboxed call reads it: it holds sandgate's environment, `DEPLOY_TOKEN` (withheld from
/// the command by name) included. (Where `core_pattern` pipes to a collector, no file
/// appears and the test has nothing to find.) Should fail: what sandgate withholds never
/// reaches a sandboxed process.
#[test]
fn redteam_round6_sandgates_core_file_does_not_give_away_withheld_variables() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let token = "deploy-token-4b1d8e";
    let log = env.outside.join("core.log");
    let mut sandgate = env.sandgate("workspace-write");
    sandgate.env("DEPLOY_TOKEN", token).args([
        "--",
        "/bin/sh",
        "-c",
        "echo \"[$DEPLOY_TOKEN]\" >&2; head -c 21000000 /dev/zero",
    ]);
    let out = output(
        with_ulimits("ulimit -c unlimited; ulimit -f 40000", &sandgate)
            .stdout(Stdio::from(append_to(&log))),
    );
    let _ = std::fs::remove_file(&log);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("[]"),
        "control: the variable was not withheld from the command: {}",
        show(&out)
    );
    let read = env.sh(
        "workspace-write",
        "for f in core*; do [ -f \"$f\" ] && grep -a -o 'DEPLOY_TOKEN=[a-z0-9-]*' \"$f\"; done; true",
    );
    let found = String::from_utf8_lossy(&read.stdout).into_owned();
    assert!(
        !found.contains(token),
        "a sandboxed call read the withheld DEPLOY_TOKEN from sandgate's core file in the \
         workspace: {found:?}"
    );
}

/// Attack: make the rule hide git's configuration. A workspace kept in a dot-entry
/// (`~/.dotfiles`) makes 2100 directories and 18,000 files: more directories than the
/// scan's cache may hold, so every later call scans the home afresh, and more entries than
/// a scan reads, so each scan spends them on the workspace (read among the home's
/// dot-entries) before it reads the directories of `~/.config`. `~/.config/git` — and every
/// other tool's configuration there — is hidden whole, unread, at every call. Inside, git no longer knows the user (`user.name`,
/// `user.email` from `~/.config/git/config`), nor their aliases, signing or `safe.directory`
/// settings: commits made in the sandbox fail or carry another identity. Should fail: a
/// workspace's content does not decide what the rule hides outside it, and git's
/// configuration, which holds no secret, reads.
#[test]
fn redteam_round6_a_flooded_workspace_does_not_hide_gits_configuration() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    let ws = home.join(".dotfiles");
    std::fs::create_dir_all(&ws).unwrap();
    chmod(&home, 0o755);
    put(
        &home,
        ".config/git/config",
        "[user]\n\tname = Flood Victim\n\temail = victim@example.org\n",
        0o644,
    );
    let path = "/usr/local/bin:/usr/bin:/bin";
    let name = |mode: &str| {
        let out = run_at_home(
            &env,
            mode,
            &home,
            path,
            &ws,
            "git config --global user.name; true",
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(
        name("read-only"),
        "Flood Victim",
        "control: before the flood"
    );
    flood(
        &env,
        &home,
        path,
        &ws,
        "mkdir $(seq -f d%g 1 2100) && seq -f f%g 1 18000 | xargs touch",
    );
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write", "read-only"] {
        let got = name(mode);
        if got != "Flood Victim" {
            failures.push(format!("{mode}: git's user.name inside is {got:?}"));
        }
    }
    assert_none(failures);
}
