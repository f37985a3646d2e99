//! Red team, round 5: the three changes of this round — the window size refused by the
//! seccomp filter (and what else of the terminal a command can leave changed), the private
//! temp whose mode the next call puts back, and the hidden-files rule hiding a home
//! directory only its owner may enter.
//!
//! Each test performs the attack as the sandboxed command (or the earlier call that
//! prepares it) would, as whichever uid runs the suite, and asserts that it fails, with a
//! control where one shows that the payload is real. An attack that gets through is a
//! failing test; one the README documents as a known limit is `#[ignore]`d with the
//! README's words.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::*;
use crate::support::{put_with_mode as put, set_mode as chmod};

const SECRET: &str = "REDTEAM5-SECRET";

// ---------------------------------------------------------------------------------------
// 1. The terminal, and the caller's shared file descriptions.
// ---------------------------------------------------------------------------------------

/// Attack: the command takes an exclusive `flock` on its stdout (`flock -x 1`) and exits.
/// A `flock` belongs to the open file description, and the caller shares that description
/// with the command: a build script's `exec >>build.log`, a CI runner's log file, a
/// `{ sandgate …; other; } >file` group. The description stays open in the caller after
/// sandgate returns, so the lock does too — without `--keep-background`, with every process
/// of the call gone — and every later `flock build.log …` of the host (a log rotator, the
/// script's next step, another job serialised on the file) waits forever or, with `-n`,
/// skips its work. Should fail: the README promises that nothing the call did not ask to
/// keep outlives it (its known limit on advisory locks speaks of locks held "while it runs
/// — after the call too, when it kept a process with `--keep-background`"), and the
/// stdio-restore already treats the shared descriptions as the caller's to get back as they
/// were. The host must get the lock once sandgate has returned.
#[test]
fn redteam_a_lock_on_the_callers_stdout_does_not_outlive_the_call() {
    let env = TestEnv::new();
    let log = env.outside.join("build.log");
    std::fs::write(&log, "").unwrap();
    // Also an open file description's record lock (`F_OFD_SETLK`), which belongs to the
    // description the same way.
    let ofd_lock = "import fcntl, struct, sys\n\
fcntl.fcntl(1, fcntl.F_OFD_SETLK, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0))\n\
print('locked', file=sys.stderr)\n";
    type HostCanLock = fn(&Path) -> bool;
    let payloads: [(&[&str], HostCanLock); 2] = [
        (
            &["/bin/sh", "-c", "flock -x 1 && echo locked >&2"],
            host_can_lock,
        ),
        (&["python3", "-c", ofd_lock], host_can_record_lock),
    ];
    let mut failures = vec![];
    for mode in ["full-access", "read-only", "workspace-write"] {
        for (payload, host_can_lock) in payloads {
            // The caller's description: kept open here after sandgate returns, as a shell's
            // `exec >>build.log` keeps it.
            let kept = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            let given = kept.try_clone().unwrap();
            let out = output(
                env.sandgate(mode)
                    .arg("--")
                    .args(payload)
                    .stdout(Stdio::from(given)),
            );
            assert_status(&out, 0);
            let locked = String::from_utf8_lossy(&out.stderr).contains("locked");
            let free = host_can_lock(&log);
            drop(kept);
            if mode == "full-access" {
                assert!(
                    locked && !free,
                    "control: the lock was not held: {}",
                    show(&out)
                );
            } else if locked && !free {
                failures.push(format!(
                    "{mode}: the command's lock on the caller's stdout outlived the call: {} \
                 stays locked for as long as the caller keeps it open ({payload:?})",
                    log.display()
                ));
            }
        }
    }
    assert_none(failures);
}

/// Attack: the same on the user's terminal. The command locks its stdin (`flock(0,
/// LOCK_EX)`), the open file description of the terminal that the user's shell holds for
/// the whole session: after sandgate returns, every program that `flock`s the terminal
/// device (as serial-line tools do to claim a line) fails or waits until the user logs out.
/// Should fail: "the terminal comes back as it was" and nothing outlives the call.
#[test]
fn redteam_a_lock_on_the_terminal_does_not_outlive_the_call() {
    let env = TestEnv::new();
    let payload = "import fcntl\nfcntl.flock(0, fcntl.LOCK_EX)\nprint('held', flush=True)\n";
    let after = r#"flock -n -x "$(tty)" true && echo "after: free" || echo "after: locked""#;
    let shown = on_pty_then(&env, "full-access", &["python3", "-c", payload], after);
    assert!(
        shown.contains("held") && shown.contains("after: locked"),
        "control: {shown:?}"
    );
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let shown = on_pty_then(&env, mode, &["python3", "-c", payload], after);
        assert!(shown.contains("after: "), "{mode}: {shown:?}");
        if shown.contains("held") && shown.contains("after: locked") {
            failures.push(format!(
                "{mode}: the command's flock on the terminal outlived the call: {shown:?}"
            ));
        }
    }
    assert_none(failures);
}

/// Attack: set the window size past the new filter entry: `TIOCSWINSZ` with bits set above
/// the low 32 (the kernel takes the request as an `unsigned int`, so a filter comparing all
/// 64 bits would let it by), through a fresh open of `/dev/tty` rather than the inherited
/// stdin, and on a pty of the sandbox's own (`/dev/ptmx`, whose master could set the size
/// of a terminal it made). Should fail: every form is refused and the terminal is 24x80
/// after the call.
#[test]
fn redteam_the_window_size_cannot_be_set_another_way() {
    let env = TestEnv::new();
    let payload = r#"import fcntl, os, struct, termios
for name, fd in (('stdin', lambda: 0), ('tty', lambda: os.open('/dev/tty', os.O_RDWR))):
    for req in (termios.TIOCSWINSZ, termios.TIOCSWINSZ | 1 << 32, termios.TIOCSWINSZ | 0xffffffff << 32):
        try:
            fcntl.ioctl(fd(), req, struct.pack('HHHH', 3, 7, 0, 0))
            print('set', name, hex(req), flush=True)
        except OSError as e:
            print('refused', name, hex(req), e.errno, flush=True)
try:
    os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY)
    print('set ptmx opened', flush=True)
except OSError as e:
    print('refused ptmx', e.errno, flush=True)
"#;
    let after = "echo \"after: $(stty size)\"";
    let shown = on_pty_then(&env, "full-access", &["python3", "-c", payload], after);
    assert!(shown.contains("after: 3 7"), "control: {shown:?}");
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let shown = on_pty_then(&env, mode, &["python3", "-c", payload], after);
        if !shown.contains("after: 24 80") || shown.contains("set ") {
            failures.push(format!("{mode}: {shown:?}"));
        }
    }
    assert_none(failures);
}

// ---------------------------------------------------------------------------------------
// 2. The private temp's mode, put back by the next call.
// ---------------------------------------------------------------------------------------

/// Attack: an earlier call keeps a process (`--keep-background`) that sets its `/tmp` —
/// the private temp's directory on the host — to mode 0666 in a loop (no execute bit, so
/// the kernel performs it directly, with no supervisor needed after the call). The next
/// call's repair sets 0700 and then stats the directory; when the kept process's chmod
/// lands between the two, sandgate sees 0666 and refuses the call with 78 ("mode 666 lets
/// others in") — the denial of service the change was meant to end, now as a flaky one for
/// as long as the kept process lives (one call in four to one in ten here; the test stops
/// at the first refusal, or after 80 calls). Should fail: every later call in the
/// workspace runs.
#[test]
fn redteam_a_kept_process_cannot_make_later_calls_refuse_the_private_temp() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let mark = unique_mark("rt5-chmod-loop");
    let looper = "import os\nwhile True:\n    os.chmod('/tmp', 0o666)\n";
    let kept = output(
        env.sandgate("workspace-write")
            .env("LOOP_MARK", &mark)
            .args(["--keep-background", "--", "/bin/sh", "-c"])
            .arg(format!(
                "python3 -c \"{looper}\" </dev/null >/dev/null 2>&1 & echo started"
            )),
    );
    let mut refused = vec![];
    if String::from_utf8_lossy(&kept.stdout).contains("started") {
        std::thread::sleep(std::time::Duration::from_millis(500));
        for _ in 0..80 {
            let out = output(env.sandgate("workspace-write").args(["--", "true"]));
            if out.status.code() != Some(0) {
                refused.push(show(&out));
                break;
            }
        }
    }
    env.stop_kept();
    kill_marked(&mark);
    assert!(
        String::from_utf8_lossy(&kept.stdout).contains("started"),
        "control: the kept loop did not start: {}",
        show(&kept)
    );
    assert!(
        refused.is_empty(),
        "a later call was refused while a kept process chmods /tmp:\n{}",
        refused.first().map_or("", String::as_str)
    );
}

/// Attack: lock the user out of the private temp's contents without touching its own mode:
/// the command makes directories in `/tmp` and sets them (and a file) to mode 0, which the
/// next call does not repair (only the top level is put back). As uid 65534 a mode-0
/// directory cannot be read or entered by its owner either, so `sandgate tmp --clean` —
/// the README's way to start the workspace's temp afresh — could fail on it. Should fail:
/// later calls run, and `sandgate tmp --clean` removes the whole temp.
#[test]
fn redteam_a_private_temp_locked_inside_is_still_cleaned() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let out = output(env.sandgate("workspace-write").args([
        "--",
        "/bin/sh",
        "-c",
        // (The landlock backend's temp is `$TMPDIR`, whose top keeps its mode.)
        "t=${TMPDIR:-/tmp}; mkdir -p $t/a/b/c && echo x >$t/a/b/c/f && chmod 0 $t/a/b/c/f && \
         chmod 0 $t/a/b/c $t/a/b $t/a && { chmod 0 $t 2>/dev/null; echo done; }",
    ]));
    assert_status(&out, 0);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("done"),
        "{}",
        show(&out)
    );
    let later = output(env.sandgate("workspace-write").args([
        "--",
        "/bin/sh",
        "-c",
        "ls -d ${TMPDIR:-/tmp}/a",
    ]));
    assert_status(&later, 0);
    let tmp = private_tmp_of(&env);
    let mut clean = Command::new(sandgate());
    env.isolate(&mut clean);
    let cleaned = output(clean.args(["tmp", "--clean", "--workspace"]).arg(&env.ws));
    let left = tmp.exists();
    if left {
        // Leave nothing behind whatever happened.
        let _ = Command::new("chmod")
            .arg("-R")
            .arg("u+rwx")
            .arg(&tmp)
            .status();
        let _ = std::fs::remove_dir_all(&tmp);
    }
    assert_status(&cleaned, 0);
    assert!(!left, "`sandgate tmp --clean` left {}", tmp.display());
}

// ---------------------------------------------------------------------------------------
// 3. The hidden-files rule: a home directory only its owner may enter.
// ---------------------------------------------------------------------------------------

/// Runs `script` under `mode` with `$HOME` at `home` and the workspace `ws`, returning
/// stdout (asserting the call ran).
fn run_in(env: &TestEnv, mode: &str, home: &Path, ws: &Path, script: &str) -> String {
    let mut cmd = env.sandgate_without_workspace(mode);
    cmd.current_dir(ws)
        .env("HOME", home)
        .arg("--workspace")
        .arg(ws)
        .args(["--", "/bin/sh", "-c", script]);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh home (0755) in the test's directory, with an empty workspace `~/proj` outside
/// its dot-entries.
fn new_home(env: &TestEnv) -> (PathBuf, PathBuf) {
    let home = env.root.join("home");
    let ws = home.join("proj");
    std::fs::create_dir_all(&ws).unwrap();
    chmod(&home, 0o755);
    (home, ws)
}

/// The files of `files` whose content a `cat` under `mode` shows.
fn read_of(env: &TestEnv, mode: &str, home: &Path, ws: &Path, files: &[PathBuf]) -> Vec<String> {
    let list: Vec<String> = files.iter().map(|f| format!("'{}'", f.display())).collect();
    let shown = run_in(
        env,
        mode,
        home,
        ws,
        &format!(
            "for f in {}; do cat \"$f\" 2>/dev/null; echo; done; true",
            list.join(" ")
        ),
    );
    files
        .iter()
        .filter(|f| {
            let content = std::fs::read_to_string(f).unwrap_or_default();
            shown.lines().any(|l| l == content.trim())
        })
        .map(|f| format!("{mode}: {} read", f.display()))
        .collect()
}

/// Attack: flood the scan from a workspace kept in a dot-entry (`~/.config/nvim`, the
/// README's own example): one call makes 2100 directories there. The scan is breadth
/// first and bounded (2000 directories); the previous round checked that secrets two levels
/// down stay hidden. Three levels down they do not: the workspace's 2100 directories are
/// read before `~/.config/sops/…`, so `~/.config/sops/age/keys.txt` (0600, sops' default
/// key file) is never looked at; and a credential a tool writes after the flood — rclone's
/// refreshed `~/.config/rclone/rclone.conf` (0600), a 0644 session in a 0700
/// `~/.config/tool/auth` — lands in a directory the refreshed scan can no longer read.
/// Should fail: the workspace's content must not decide what stays hidden.
#[test]
fn redteam_a_flooded_workspace_does_not_uncover_deeper_secrets() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    let project = home.join(".config/nvim");
    std::fs::create_dir_all(&project).unwrap();
    let age = put(&home, ".config/sops/age/keys.txt", SECRET, 0o600);
    // The flood (the first call's scan sees the secret above; the refresh after it must
    // keep seeing it).
    run_in(
        &env,
        "workspace-write",
        &home,
        &project,
        "mkdir -p $(seq -f d%g 1 2100)",
    );
    // A tool writes its credentials after the flood.
    let rclone = put(&home, ".config/rclone/rclone.conf", "RCLONE-SECRET", 0o600);
    let session = put(
        &home,
        ".config/tool/auth/session.json",
        "AUTH-SECRET",
        0o644,
    );
    chmod(&home.join(".config/tool/auth"), 0o700);
    let files = [age, rclone, session];
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write", "read-only"] {
        failures.extend(read_of(&env, mode, &home, &project, &files));
    }
    assert_none(failures);
}

/// Attack: a 0644 credential in a directory only its owner may enter, five levels into the
/// home: a Flatpak app's own configuration, `~/.var/app/APP/config/APP/` (0700, as the app
/// makes its data directory; the levels above 0755), holding `config.json` with the key of
/// the app's database (Signal Desktop keeps its SQLCipher key there). The README says the
/// rule looks "to 5 levels below the home", and a directory only its owner may enter is
/// hidden whole; the scan records directories only to the fourth level, so this one's mode
/// is never seen and its files (at the sixth) are never looked at. Should fail: it reads
/// as empty.
#[test]
fn redteam_a_closed_directory_five_levels_down_is_hidden() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let (home, ws) = new_home(&env);
    let config = put(
        &home,
        ".var/app/org.signal.Signal/config/Signal/config.json",
        SECRET,
        0o644,
    );
    chmod(
        &home.join(".var/app/org.signal.Signal/config/Signal"),
        0o700,
    );
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        failures.extend(read_of(
            &env,
            mode,
            &home,
            &ws,
            std::slice::from_ref(&config),
        ));
    }
    assert_none(failures);
}

/// Breakage: the user keeps the XDG base directories elsewhere in the home
/// (`XDG_CONFIG_HOME=~/.xdg/config`, `XDG_DATA_HOME=~/.xdg/data`), and, as libraries do,
/// they were created 0700. The rule spares "the XDG base directories" only under their
/// default names, so the user's whole configuration — every tool's settings, git's
/// `config`, an editor's init file — reads as one empty directory inside, where the default
/// `~/.config` would have read. Should fail: a 0644 configuration file in the user's
/// XDG config directory reads inside, as it does in `~/.config`.
#[test]
fn redteam_the_users_own_xdg_base_directories_are_not_hidden_whole() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let (home, ws) = new_home(&env);
    let config = put(&home, ".xdg/config/git/config", "[user]\n\tname = U", 0o644);
    let data = put(&home, ".xdg/data/app/settings.json", "{\"theme\":1}", 0o644);
    chmod(&home.join(".xdg/config"), 0o700);
    chmod(&home.join(".xdg/data"), 0o700);
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let mut cmd = env.sandgate_without_workspace(mode);
        cmd.current_dir(&ws)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".xdg/config"))
            .env("XDG_DATA_HOME", home.join(".xdg/data"))
            .arg("--workspace")
            .arg(&ws)
            .args([
                "--",
                "/bin/sh",
                "-c",
                "cat \"$XDG_CONFIG_HOME/git/config\" \"$XDG_DATA_HOME/app/settings.json\"",
            ]);
        let out = output(&mut cmd);
        let shown = String::from_utf8_lossy(&out.stdout);
        for (file, text) in [(&config, "name = U"), (&data, "theme")] {
            if !shown.contains(text) {
                failures.push(format!("{mode}: {} hidden: {}", file.display(), show(&out)));
            }
        }
    }
    assert_none(failures);
}

/// Attack (cache): the scan is cached between calls; a directory that becomes closed
/// (`chmod 700 ~/.myapp`, as a tool tightening its store does) changes no parent
/// directory. Should fail: its change time is compared at the next call, so the 0644
/// token inside reads at the first call (the directory was 0755) and is hidden from the
/// next one on; likewise a directory replaced by a closed one under the same name.
#[test]
fn redteam_a_directory_closed_after_a_call_is_hidden_at_the_next() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let (home, ws) = new_home(&env);
    let token = put(&home, ".myapp/token", SECRET, 0o644);
    let other = put(&home, ".other/store/token", "OTHER-SECRET", 0o644);
    assert_eq!(
        read_of(
            &env,
            "read-only",
            &home,
            &ws,
            &[token.clone(), other.clone()]
        )
        .len(),
        2,
        "control: both tokens read while their directories are open"
    );
    chmod(&home.join(".myapp"), 0o700);
    // Replaced: a new closed directory renamed over the old open one, same name.
    let fresh = home.join(".other/store.new");
    std::fs::create_dir(&fresh).unwrap();
    std::fs::write(fresh.join("token"), "OTHER-SECRET").unwrap();
    chmod(&fresh.join("token"), 0o644);
    chmod(&fresh, 0o700);
    std::fs::remove_file(&other).unwrap();
    std::fs::remove_dir(home.join(".other/store")).unwrap();
    std::fs::rename(&fresh, home.join(".other/store")).unwrap();
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write", "read-only"] {
        failures.extend(read_of(
            &env,
            mode,
            &home,
            &ws,
            &[token.clone(), other.clone()],
        ));
    }
    assert_none(failures);
}

/// Attack: credentials in a closed directory reached through a symbolic link among the
/// dot-entries — a tool's store moved to a synced folder and linked back
/// (`~/.vault -> ~/Sync/vault`, 0700, entries 0644; `~/.password-store`, which the
/// profile lists, is hidden through its link), or the whole of
/// `~/.config` linked to a dotfiles checkout (`~/.config -> ~/dotfiles/config`) holding
/// `app/token` 0600. Should fail: they read as empty. Holds: a dot-entry that is a link
/// is scanned where it leads, as a dot-entry.
#[test]
fn redteam_a_closed_directory_behind_a_dot_entry_link_is_hidden() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let (home, ws) = new_home(&env);
    let entry = put(&home, "Sync/vault/bank.gpg", SECRET, 0o644);
    chmod(&home.join("Sync/vault"), 0o700);
    std::os::unix::fs::symlink(home.join("Sync/vault"), home.join(".vault")).unwrap();
    put(&home, "dotfiles/config/app/token", "LINKED-TOKEN", 0o600);
    std::os::unix::fs::symlink(home.join("dotfiles/config"), home.join(".config")).unwrap();
    let through = [home.join(".vault/bank.gpg"), home.join(".config/app/token")];
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let list: Vec<String> = through
            .iter()
            .map(|f| format!("'{}'", f.display()))
            .collect();
        let shown = run_in(
            &env,
            mode,
            &home,
            &ws,
            &format!("cat {} 2>/dev/null; true", list.join(" ")),
        );
        for (file, text) in [(&through[0], SECRET), (&through[1], "LINKED-TOKEN")] {
            if shown.contains(text) {
                failures.push(format!("{mode}: {} read", file.display()));
            }
        }
    }
    let _ = entry;
    assert_none(failures);
}

/// Attack: a 0644 credential in a closed dot-directory that holds a directory on the
/// caller's `PATH` — installers put `~/.TOOL/bin` on `PATH` for tools that keep their
/// login beside it (`~/.fly/bin` and `~/.fly/config.yml`, `~/.pulumi/bin` and
/// `~/.pulumi/credentials.json`, `~/.docker/bin` and `~/.docker/config.json`). The closed
/// directory is then not hidden whole, and only its owner-only files are hidden one by one,
/// so a 0644 token there read. Should fail: it reads as empty, while the tool in the
/// `PATH` directory still runs.
#[test]
fn redteam_a_closed_directory_holding_a_path_directory_hides_its_public_token() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let (home, ws) = new_home(&env);
    let token = put(&home, ".tool/config.yml", SECRET, 0o644);
    let tool = put(&home, ".tool/bin/tool", "#!/bin/sh\necho TOOL-RAN\n", 0o755);
    let beside = put(&home, ".tool/state/session.json", SECRET, 0o644);
    chmod(&home.join(".tool"), 0o700);
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        home.join(".tool/bin").display()
    );
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let mut cmd = env.sandgate_without_workspace(mode);
        cmd.current_dir(&ws)
            .env("HOME", &home)
            .env("PATH", &path)
            .arg("--workspace")
            .arg(&ws)
            .args(["--", "/bin/sh", "-c"])
            .arg(format!(
                "cat '{}' '{}' 2>/dev/null; tool",
                token.display(),
                beside.display()
            ));
        let out = output(&mut cmd);
        let shown = String::from_utf8_lossy(&out.stdout);
        if shown.contains(SECRET) {
            failures.push(format!(
                "{mode}: {} or {} read",
                token.display(),
                beside.display()
            ));
        }
        if !shown.contains("TOOL-RAN") {
            failures.push(format!(
                "{mode}: {} did not run: {}",
                tool.display(),
                show(&out)
            ));
        }
    }
    assert_none(failures);
}

/// Attack: outlast the restore. The command forks a child that ignores `SIGTTOU`,
/// `SIGHUP` and `SIGTERM` and keeps turning echo off (`tcsetattr`) for two seconds, then
/// exits at once itself: should sandgate put the modes back when the command's own process
/// ends but before the rest of the call is gone, the child's next change lands after the
/// restore and the user's shell is left without echo. Should fail: the terminal echoes
/// after the call.
#[test]
fn redteam_a_child_changing_the_modes_after_the_command_exits_does_not_win() {
    let env = TestEnv::new();
    let payload = r#"import os, signal, termios, time
if os.fork() == 0:
    for s in (signal.SIGTTOU, signal.SIGHUP, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    for _ in range(400):
        try:
            a = termios.tcgetattr(0)
            a[3] &= ~termios.ECHO
            termios.tcsetattr(0, termios.TCSANOW, a)
        except OSError:
            pass
        time.sleep(0.005)
    os._exit(0)
print('exits', flush=True)
"#;
    let after =
        r#"sleep 1; stty -a | grep -q -- "-echo " && echo "after: no echo" || echo "after: echo""#;
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let shown = on_pty_then(&env, mode, &["python3", "-c", payload], after);
        if !shown.contains("exits") || !shown.contains("after: echo") {
            failures.push(format!("{mode}: {shown:?}"));
        }
    }
    assert_none(failures);
}

/// Attack: the caller's current directory lies in a closed directory (`cd ~/.myapp`, 0700,
/// `token` 0644 in it) while the workspace is elsewhere. The directory is hidden by a
/// mount over it, and a process whose working directory was taken before the mount still
/// sees what lies beneath (`cat token`, `/proc/self/cwd/token`). Should fail: the token
/// reads as nothing from there too.
#[test]
fn redteam_a_closed_directory_is_hidden_from_a_caller_working_in_it() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let (home, ws) = new_home(&env);
    put(&home, ".myapp/token", SECRET, 0o644);
    put(&home, ".myapp/sub/t", SECRET, 0o644);
    chmod(&home.join(".myapp"), 0o700);
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        for cwd in [home.join(".myapp"), home.join(".myapp/sub")] {
            let mut cmd = env.sandgate_without_workspace(mode);
            cmd.current_dir(&cwd)
                .env("HOME", &home)
                .arg("--workspace")
                .arg(&ws)
                .args([
                    "--",
                    "/bin/sh",
                    "-c",
                    "cat token ../token t /proc/self/cwd/token 2>/dev/null; true",
                ]);
            let out = output(&mut cmd);
            if String::from_utf8_lossy(&out.stdout).contains(SECRET) {
                failures.push(format!(
                    "{mode}: read from {}: {}",
                    cwd.display(),
                    show(&out)
                ));
            }
        }
    }
    assert_none(failures);
}
