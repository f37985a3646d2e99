//! Red team, round 4, continued: names that lead elsewhere than they seem (`/proc` fd
//! links, planted links and renamed directories), what a kept or nested call holds, and
//! host activity seen from inside. See `redteam_round4` for how the tests are built.

use crate::support::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Attack: reach a host unix socket outside the workspace through `/proc` instead of its
/// path: open the socket's inode with `O_PATH` (a read-only view may open anything it may
/// see), then connect to `/proc/PID/fd/N` (PID the command's own pid inside),
/// `/proc/PID/task/PID/fd/N`, `/dev/fd/N`, `/proc/thread-self/fd/N`, and a symlink in the
/// workspace pointing at `/proc/PID/fd/N` — names that lie nowhere near the socket but
/// that the kernel resolves to it. Should fail: a unix socket is reached only beneath the
/// workspace or the private temp or when allowed by name; none of these connects may reach
/// the host's listener.
#[test]
fn redteam_a_host_socket_is_not_reached_through_a_proc_fd_link() {
    let env = TestEnv::new();
    let sock = env.outside.join("svc.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    let script = r#"
import os, socket
fd = os.open(SOCK, os.O_PATH)
pid = os.getpid()
names = ['/proc/%d/fd/%d' % (pid, fd), '/proc/%d/task/%d/fd/%d' % (pid, pid, fd),
         '/dev/fd/%d' % fd, '/proc/thread-self/fd/%d' % fd]
os.symlink(names[0], 'via-proc')
names.append('via-proc')
for name in names:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(name)
        print('CONNECTED', name)
    except OSError as e:
        print('refused', name, e)
os.unlink('via-proc')
"#
    .replace("SOCK", &format!("{:?}", sock.display().to_string()));
    for mode in ["full-access", "workspace-write"] {
        let out = output(env.sandgate(mode).args(["--", "python3", "-c", &script]));
        let mut reached = 0;
        while listener.accept().is_ok() {
            reached += 1;
        }
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if mode == "full-access" {
            assert!(
                reached > 0,
                "control: nothing reached the listener: {}",
                show(&out)
            );
        } else {
            assert_eq!(
                reached, 0,
                "{mode}: the host's listener was reached: {stdout}"
            );
            assert!(!stdout.contains("CONNECTED"), "{mode}: {stdout}");
        }
    }
}

/// Attack: the command's stdout is a host file opened for appending (`sandgate … >> log`, a
/// CI runner's or an agent harness's transcript, a wrapper's own record of what ran). The
/// command clears `O_APPEND` on the shared open file description and writes at offset 0,
/// or calls `ftruncate(1, 0)`: what the host wrote there before the call — earlier runs'
/// output, the wrapper's record — is rewritten or erased, though the file lies outside
/// every writable root and was handed over only to be appended to. Should fail: an
/// append-only stdout lets the command add to the file, not change what it already holds.
#[test]
fn redteam_an_appended_stdout_cannot_be_rewritten_or_truncated() {
    let env = TestEnv::new();
    let log = env.outside.join("transcript.log");
    let earlier = "earlier run: ok\n";
    let payloads = [
        (
            "rewrite",
            "import fcntl, os\n\
fl = fcntl.fcntl(1, fcntl.F_GETFL)\n\
fcntl.fcntl(1, fcntl.F_SETFL, fl & ~os.O_APPEND)\n\
os.lseek(1, 0, os.SEEK_SET)\n\
os.write(1, b'FORGED')\n",
        ),
        ("truncate", "import os\nos.ftruncate(1, 0)\n"),
    ];
    for mode in ["full-access", "read-only", "workspace-write"] {
        for (what, payload) in payloads {
            std::fs::write(&log, earlier).unwrap();
            let stdout = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            let out = output(
                env.sandgate(mode)
                    .args(["--", "python3", "-c", payload])
                    .stdout(Stdio::from(stdout)),
            );
            let now = std::fs::read_to_string(&log).unwrap_or_default();
            if mode == "full-access" {
                assert!(
                    !now.starts_with(earlier),
                    "control, {what}: the payload did nothing: {now:?} {}",
                    show(&out)
                );
            } else {
                assert!(
                    now.starts_with(earlier),
                    "{mode}, {what}: the command changed what the host had written to its \
                     append-only stdout: {now:?}"
                );
            }
        }
    }
}

/// Attack: an earlier `workspace-write` call plants `ws/app.sock` as a symlink to a host
/// socket outside every writable root (here `OUTSIDE/svc.sock`; on a real host
/// `/var/run/docker.sock`, the D-Bus system bus, an ssh-agent). A later call whose user
/// names `ws/app.sock` with `--allow-unix-socket` (the project's dev-server or daemon socket,
/// or one in a `--writable-root`) resolves the allowance through the planted link at
/// startup and lets the command connect to the host socket the attacker chose. Should
/// fail: like a writable root, whose path is refused when it passes through a symlink a
/// sandboxed call could have planted ("Roots cannot be redirected"), an allowance must not
/// be redirected by an earlier call; the connect must not reach the host's listener.
#[test]
fn redteam_an_allowed_socket_path_is_not_redirected_by_an_earlier_call() {
    let env = TestEnv::new();
    let sock = env.outside.join("svc.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    // The earlier call plants the link (a sandboxed command may make symlinks in its
    // workspace).
    let plant = output(
        env.sandgate("workspace-write")
            .args(["--", "ln", "-s"])
            .arg(&sock)
            .arg("app.sock"),
    );
    assert_status(&plant, 0);
    let allowed = env.ws.join("app.sock");
    let connect = "import socket\n\
s = socket.socket(socket.AF_UNIX)\n\
try:\n    s.connect('app.sock'); print('CONNECTED')\n\
except OSError as e: print('refused', e)\n";
    for mode in ["read-only", "workspace-write"] {
        let out = output(
            env.sandgate(mode)
                .arg("--allow-unix-socket")
                .arg(&allowed)
                .args(["--", "python3", "-c", connect]),
        );
        let mut reached = 0;
        while listener.accept().is_ok() {
            reached += 1;
        }
        assert_eq!(
            reached,
            0,
            "{mode}: --allow-unix-socket {} reached the host socket the earlier call linked it \
             to: {}",
            allowed.display(),
            show(&out)
        );
    }
}

/// Attack: with the home as the workspace, plant a listed credential path that does not
/// exist yet — `~/.m2/settings.xml`, the one the README says Maven needs `--unhide` for —
/// as a symlink to the user's `~/.ssh`. A later call whose user runs `--unhide
/// ~/.m2/settings.xml` (canonicalized, so through the link) shows `~/.ssh` again, whole,
/// and the command reads the key (the control: the same link made by the host does that). Should fail: the hidden paths are protected
/// whether they exist or not, so the link is never made, and the key stays hidden.
#[test]
fn redteam_an_unhide_is_not_redirected_to_a_key_by_a_planted_link() {
    let env = TestEnv::new();
    let home = env.root.join("home");
    for dir in [home.join(".ssh"), home.join(".m2")] {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let key = home.join(".ssh/id_ed25519");
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&key)
            .unwrap();
        f.write_all(b"PRIVATE-KEY-MATERIAL\n").unwrap();
    }
    let settings = home.join(".m2/settings.xml");
    let read_key = || {
        let mut read = env.sandgate("read-only");
        read.env("HOME", &home)
            .arg("--unhide")
            .arg(&settings)
            .args(["--", "cat"])
            .arg(&key);
        output(&mut read)
    };
    // Control: a link the host made there unhides the whole `~/.ssh`.
    std::os::unix::fs::symlink(home.join(".ssh"), &settings).unwrap();
    let control = read_key();
    assert!(
        String::from_utf8_lossy(&control.stdout).contains("PRIVATE-KEY-MATERIAL"),
        "control: the host's link did not unhide the key: {}",
        show(&control)
    );
    std::fs::remove_file(&settings).unwrap();

    let mut plant = env.sandgate_without_workspace("workspace-write");
    plant
        .env("HOME", &home)
        .arg("--workspace")
        .arg(&home)
        .args(["--", "ln", "-s"])
        .arg(home.join(".ssh"))
        .arg(&settings);
    let _ = output(&mut plant);
    let out = read_key();
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("PRIVATE-KEY-MATERIAL"),
        "the key was read through an unhide redirected by a planted link: {}",
        show(&out)
    );
}

/// Attack: a call that did not ask to keep anything runs a nested sandgate with
/// `--keep-background` (degraded where the nested one cannot make its namespaces), whose
/// command leaves a process in the background; the nested sandgate returns at once, and
/// so does the outer command. Should fail: "a nested sandgate runs in its parent's
/// namespaces: its processes end with the parent's call, whatever it asks" — nothing of
/// the nested call may run once the outer sandgate has returned, and no record of it may
/// be left for `sandgate ps`.
#[test]
fn redteam_a_nested_keep_background_does_not_outlive_the_outer_call() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let mark = unique_mark("rt4-nested-kept");
    let inner = sandgate_inside();
    let out = output(
        env.sandgate("workspace-write")
            .env("LEFTOVER_MARK", &mark)
            .arg("--")
            .arg(&inner)
            .args([
                "--sandbox",
                "read-only",
                "--keep-background",
                "--",
                "/bin/sh",
                "-c",
                "sleep 60 >/dev/null 2>&1 </dev/null & echo started",
            ]),
    );
    let left = processes_marked(&mark);
    kill_marked(&mark);
    let mut ps = Command::new(sandgate());
    env.isolate(&mut ps);
    let listed = output(ps.args(["ps", "--workspace"]).arg(&env.ws));
    env.stop_kept();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("started"),
        "control: the nested command did not run: {}",
        show(&out)
    );
    assert!(
        left.is_empty(),
        "the nested call's background process outlived the outer call: {left:?}"
    );
    assert!(
        !String::from_utf8_lossy(&listed.stdout).contains("sleep"),
        "a record of the nested call is left: {}",
        show(&listed)
    );
}

/// Attack: a kept call (`--keep-background`, with the proxy) whose background process has
/// let go of stdio, run as `out=$(sandgate …)` or a CI step reads it: if sandgate's helpers
/// that stay for the kept process (the proxy, the detached supervisor) kept the caller's
/// stdout or stderr open, the caller would wait for them — a CI step or an agent's tool call
/// hung for as long as the kept process lives, which is more than the call asked to keep.
/// Should fail: the caller's pipes reach end-of-file as soon as sandgate returns.
#[test]
fn redteam_a_kept_calls_helpers_do_not_hold_the_callers_pipes() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let mark = unique_mark("rt4-kept-pipes");
    let start = Instant::now();
    let out = output(
        env.sandgate("workspace-write")
            .env("LEFTOVER_MARK", &mark)
            .args([
                "--keep-background",
                "--allow-host",
                "example.com",
                "--",
                "/bin/sh",
                "-c",
                "sleep 20 >/dev/null 2>&1 </dev/null & echo started",
            ]),
    );
    let waited = start.elapsed();
    kill_marked(&mark);
    env.stop_kept();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("started"),
        "{}",
        show(&out)
    );
    assert!(
        waited < Duration::from_secs(10),
        "the caller's pipes stayed open {waited:?} after the kept call returned"
    );
}

/// Attack: the project hides one of its own files (`.sandgate/config.json`:
/// `"hidden_paths": ["config/secrets.json"]`, the database password of a checkout). The
/// file reads as empty inside, and it cannot be moved (its mask is a mount). But its
/// *directory* can: an earlier `workspace-write` call runs `mv config config.old; mkdir
/// config`. The next call hides what exists at `config/secrets.json` — nothing — and the
/// command reads `config.old/secrets.json` (and can move the directory back afterwards).
/// Should fail: a path the project hides stays hidden whatever an earlier call renamed; the
/// secret must not be read by any later call.
#[test]
fn redteam_a_projects_hidden_file_is_not_unhidden_by_renaming_its_directory() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.ws.join(".sandgate")).unwrap();
    std::fs::create_dir_all(env.ws.join("config")).unwrap();
    std::fs::write(
        env.ws.join(".sandgate/config.json"),
        r#"{"hidden_paths": ["config/secrets.json"]}"#,
    )
    .unwrap();
    std::fs::write(env.ws.join("config/secrets.json"), "DBPASS=hunter2\n").unwrap();
    // Control: hidden as the project asks.
    let first = output(
        env.sandgate("read-only")
            .args(["--", "cat", "config/secrets.json"]),
    );
    assert!(
        !String::from_utf8_lossy(&first.stdout).contains("hunter2"),
        "control: the project's hidden file is readable: {}",
        show(&first)
    );
    let moved = output(env.sandgate("workspace-write").args([
        "--",
        "/bin/sh",
        "-c",
        "mv config config.old && mkdir config",
    ]));
    let mut leaked = Vec::new();
    for mode in ["read-only", "workspace-write"] {
        let out = output(env.sandgate(mode).args([
            "--",
            "/bin/sh",
            "-c",
            "cat config.old/secrets.json config/secrets.json 2>/dev/null",
        ]));
        if String::from_utf8_lossy(&out.stdout).contains("hunter2") {
            leaked.push(format!("{mode}: {}", show(&out)));
        }
    }
    assert!(
        leaked.is_empty(),
        "the project's hidden file was read after an earlier call renamed its directory \
         ({}):\n{}",
        show(&moved),
        leaked.join("\n")
    );
}

/// Attack: the project protects `deploy/run.sh` (`protected_paths`). One call renames its
/// directory (`mv deploy d2`: the protection moves with it, the path is free); the next
/// call, where nothing exists at `deploy/run.sh` at its start, rewrites `d2/run.sh` and
/// renames the directory back: the protected file now holds what the command wrote. Should
/// fail: a protected path keeps its content (the directories on its way are pinned).
#[test]
fn redteam_a_projects_protected_file_is_not_rewritten_by_renaming_its_directory() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.ws.join(".sandgate")).unwrap();
    std::fs::create_dir_all(env.ws.join("deploy")).unwrap();
    std::fs::write(
        env.ws.join(".sandgate/config.json"),
        r#"{"protected_paths": ["deploy/run.sh"]}"#,
    )
    .unwrap();
    std::fs::write(env.ws.join("deploy/run.sh"), "echo legit\n").unwrap();
    for script in ["mv deploy d2", "echo evil > d2/run.sh && mv d2 deploy"] {
        let _ = output(
            env.sandgate("workspace-write")
                .args(["--", "/bin/sh", "-c", script]),
        );
    }
    let now = std::fs::read_to_string(env.ws.join("deploy/run.sh")).unwrap_or_default();
    assert_eq!(now, "echo legit\n", "the protected file was rewritten");
}

/// Attack: watch what host processes do, from inside: `inotify` on a host directory the
/// command may read (`IN_OPEN | IN_ACCESS | IN_CLOSE_WRITE`), then report each event with
/// its time. The host opening, reading or writing a file there (the user's editor, a
/// deploy script, `ssh` reading its configuration) is seen as it happens — host process
/// activity, a side channel the PID namespace was meant to close ("host processes … are
/// out of sight"). Should fail: a host process opening a host file gives the sandbox no
/// event. (Low severity: names and times only, no content.)
#[test]
fn redteam_host_file_activity_is_not_observed_from_inside() {
    let env = TestEnv::new();
    let dir = env.outside.join("watched");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "host\n").unwrap();
    let watcher = r#"
import ctypes, os, select, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
wd = libc.inotify_add_watch(fd, sys.argv[1].encode(), 0x20 | 0x1 | 0x8)
print('held' if wd >= 0 else 'refused', flush=True)
r, _, _ = select.select([fd], [], [], 4)
if r:
    data = os.read(fd, 4096)
    _, mask, _, n = struct.unpack('iIII', data[:16])
    print('EVENT', hex(mask), data[16:16 + n].rstrip(b'\0').decode(), flush=True)
else:
    print('nothing', flush=True)
"#;
    for mode in ["full-access", "read-only"] {
        let mut cmd = env.sandgate(mode);
        cmd.args(["--", "python3", "-c", watcher]).arg(&dir);
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let mut reader = BufReader::new(stdout);
        let mut first = String::new();
        let _ = reader.read_line(&mut first);
        // The host's activity: a process of the host's reads the file.
        let _ = std::fs::read(dir.join("notes.txt"));
        let mut rest = String::new();
        let _ = reader.read_line(&mut rest);
        let _ = child.wait();
        let seen = first.trim() == "held" && rest.starts_with("EVENT");
        if mode == "full-access" {
            assert!(seen, "control: no event: {first:?} {rest:?}");
        } else {
            assert!(
                !seen,
                "{mode}: the sandbox saw a host process open a host file: {rest:?}"
            );
        }
    }
}

/// Attack: the project hides `config/secrets.json`; its user, for one call that needs the
/// secret, runs `--unhide WS/config/secrets.json`. An earlier call has moved the real
/// directory away (`mv config config.old`) and made `config/secrets.json` a symlink to the
/// user's `~/.ssh`. The unhide is canonicalized through the planted link, so it shows
/// `~/.ssh` again, whole, and the command reads the user's private key — though the user
/// only asked for the project's secret. Should fail: an unhide names the path the user
/// wrote, never where a link in a writable root leads; the key stays hidden.
#[test]
fn redteam_an_unhide_in_the_workspace_is_not_redirected_to_the_users_keys() {
    let env = TestEnv::new();
    let home = env.root.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    let key = home.join(".ssh/id_ed25519");
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&key)
            .unwrap();
        f.write_all(b"PRIVATE-KEY-MATERIAL\n").unwrap();
    }
    std::fs::create_dir_all(env.ws.join(".sandgate")).unwrap();
    std::fs::create_dir_all(env.ws.join("config")).unwrap();
    std::fs::write(
        env.ws.join(".sandgate/config.json"),
        r#"{"hidden_paths": ["config/secrets.json"]}"#,
    )
    .unwrap();
    std::fs::write(env.ws.join("config/secrets.json"), "DBPASS=hunter2\n").unwrap();
    // Control: the key is hidden without the unhide.
    let control = output(
        env.sandgate("read-only")
            .env("HOME", &home)
            .args(["--", "cat"])
            .arg(&key),
    );
    assert!(
        !String::from_utf8_lossy(&control.stdout).contains("PRIVATE-KEY-MATERIAL"),
        "control: the key is not hidden: {}",
        show(&control)
    );
    let plant = format!(
        "mv config config.old && mkdir config && ln -s '{}' config/secrets.json",
        home.join(".ssh").display()
    );
    let _ = output(
        env.sandgate("workspace-write")
            .env("HOME", &home)
            .args(["--", "/bin/sh", "-c", &plant]),
    );
    let out = output(
        env.sandgate("read-only")
            .env("HOME", &home)
            .arg("--unhide")
            .arg(env.ws.join("config/secrets.json"))
            .args(["--", "cat"])
            .arg(&key),
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("PRIVATE-KEY-MATERIAL"),
        "an unhide of a workspace path, redirected by a link an earlier call planted, showed \
         the user's ssh key: {}",
        show(&out)
    );
}

/// An approver that grants whatever it is asked (`--approver`).
const GRANTING_APPROVER: &str = r#"id=$(sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p'); printf '{"id":"%s","decision":"allowed-once"}' "$id""#;

/// Attack: a call keeps a process (`--keep-background`) that watches the path of the
/// user's audit log — its directory is the host's, seen live through the read-only view —
/// and takes an exclusive `flock` on every file that appears there. The log the call
/// started with is masked (a lock on it stays inside), but a log is rotated
/// (`mv audit.jsonl audit.jsonl.1`, logrotate) and the next escalation makes a fresh one,
/// which no mask covers. From then on every escalation of the user's waits for the lock,
/// gives up and refuses to run its command (exit 125, `audit_locked`): the approval flow is
/// the attacker's to switch off. Should fail: "a lock taken on them there never reaches
/// the real file"; a later escalation, granted by its approver, must run.
#[test]
fn redteam_a_kept_process_cannot_lock_a_rotated_audit_log() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let log = env.audit_log();
    let escalate = || {
        output(
            env.sandgate("read-only")
                .args([
                    "--sandbox-permissions",
                    "workspace-write",
                    "--justification",
                    "write a file",
                    "--approver",
                    GRANTING_APPROVER,
                    "--",
                    "touch",
                ])
                .arg(env.ws.join("granted")),
        )
    };
    // Control: the approver's grant runs the command, and makes the log.
    let control = escalate();
    assert_status(&control, 0);
    std::fs::remove_file(&log).unwrap();

    let holder = r#"
import fcntl, os, sys, time
held, seen = [], set()
for _ in range(600):
    try:
        f = open(sys.argv[1], 'rb')
        ino = os.fstat(f.fileno()).st_ino
        if ino not in seen:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen.add(ino)
            held.append(f)
    except OSError:
        pass
    time.sleep(0.05)
"#;
    let mark = unique_mark("rt4-audit-lock");
    let kept = output(
        env.sandgate("read-only")
            .env("LEFTOVER_MARK", &mark)
            .args([
                "--keep-background",
                "--",
                "/bin/sh",
                "-c",
                r#"python3 -c "$0" "$1" >/dev/null 2>&1 </dev/null & echo started"#,
                holder,
            ])
            .arg(&log),
    );
    // The user rotates the log; the next escalation makes a fresh one.
    std::thread::sleep(Duration::from_millis(300));
    let mut rotated = log.clone().into_os_string();
    rotated.push(".1");
    if log.exists() {
        std::fs::rename(&log, &rotated).unwrap();
    }
    let _first = escalate();
    std::thread::sleep(Duration::from_millis(500));
    let later = escalate();
    kill_marked(&mark);
    env.stop_kept();
    assert_status(&kept, 0);
    assert_status(&later, 0);
}

/// Attack: a `workspace-write` command changes the mode of its `/tmp` — the root of the
/// workspace's private temp, which is `/tmp/sandgate-UID/NAME-HASH` on the host — to 1777
/// (or 0 — anything but 0700). sandgate used to refuse every later call in the workspace
/// (78: "mode 1777 lets others in") until the user repaired the directory by hand: one
/// call switched sandboxed work in the workspace off. Should fail: nobody else can reach
/// the directory meanwhile (`/tmp/sandgate-UID` stays the caller's, mode 0700, and the
/// sandbox cannot see it), and the next call runs and makes it 0700 again.
#[test]
fn redteam_a_command_cannot_open_its_private_temp_to_others() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let env = TestEnv::new();
    let mode_of = |p: &Path| std::fs::symlink_metadata(p).map(|m| m.permissions().mode() & 0o7777);
    assert_status(
        &output(env.sandgate("workspace-write").args(["--", "true"])),
        0,
    );
    let tmp = private_tmp_of(&env);
    let base = tmp.parent().unwrap_or_else(|| panic!("{}", tmp.display()));
    for chmod in ["1777", "0"] {
        let out = output(env.sandgate("workspace-write").args([
            "--",
            "/bin/sh",
            "-c",
            &format!("chmod {chmod} \"${{TMPDIR:-/tmp}}\" && stat -c %a \"${{TMPDIR:-/tmp}}\""),
        ]));
        // Without a mount namespace (the landlock backend) the temp's top is a writable
        // root, which keeps its mode as a mount point would: refused.
        if landlock_backend() {
            assert_command_failed(&out);
            assert!(matches!(mode_of(&tmp), Ok(0o700)), "{}", show(&out));
            continue;
        }
        assert_status(&out, 0);
        // Control: the command did change it (the attack is real).
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            chmod,
            "{}",
            show(&out)
        );
        assert_ne!(mode_of(&tmp).ok(), Some(0o700));
        // Meanwhile nobody else can reach it: the level above is the caller's, 0700.
        let base_meta = std::fs::symlink_metadata(base).unwrap();
        assert_eq!(
            base_meta.permissions().mode() & 0o7777,
            0o700,
            "{}",
            base.display()
        );
        assert_eq!(
            base_meta.uid(),
            nix::unistd::geteuid().as_raw(),
            "{}",
            base.display()
        );
        let later = output(
            env.sandgate("workspace-write")
                .args(["--", "stat", "-c", "%a", "/tmp"]),
        );
        assert_status(&later, 0);
        assert_eq!(
            String::from_utf8_lossy(&later.stdout).trim(),
            "700",
            "{}",
            show(&later)
        );
        assert!(
            matches!(mode_of(&tmp), Ok(0o700)),
            "{chmod}: {:?}",
            mode_of(&tmp)
        );
    }
}

/// Attack: the same through dnotify, inotify's predecessor: `fcntl(F_NOTIFY)` on a host
/// directory the command may read delivers a signal for each file a host process creates
/// or changes there (`DN_MULTISHOT`). Should fail: refused (`EPERM`) in both restricted
/// profiles; `full-access` (the control) gets it.
#[test]
fn redteam_host_directory_changes_are_not_signalled_inside() {
    let env = TestEnv::new();
    let payload = format!(
        "import fcntl, os\nfd = os.open('{}', os.O_RDONLY)\n\
try:\n    fcntl.fcntl(fd, fcntl.F_NOTIFY, fcntl.DN_CREATE | fcntl.DN_MODIFY | fcntl.DN_MULTISHOT)\n    print('notified')\n\
except OSError as e:\n    print('refused', e.errno)\n",
        env.outside.display()
    );
    for (mode, expected) in [
        ("full-access", "notified"),
        ("read-only", "refused 1"),
        ("workspace-write", "refused 1"),
    ] {
        let out = output(env.sandgate(mode).args(["--", "python3", "-c", &payload]));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains(expected), "{mode}: {}", show(&out));
    }
}
