//! Red team, round 7: the two changes of this round — `inotify_add_watch` performed by the
//! supervisor where the sandbox may write and refused elsewhere (`supervisor/watch.rs`),
//! and the regular-file stdout/stderr relay's last drain (what `FIONREAD` counted) and its
//! detached copier (own session, takes signals) (`exec/relay.rs`).
//!
//! Each test performs the attack as the sandboxed command (or the earlier call that
//! prepares it) would, as whichever uid runs the suite, and asserts that it fails, with a
//! control where one shows that the payload is real. An attack that gets through is a
//! failing test.
//!
//! The notification payloads are python scripts: they print `armed` once their watch (or
//! dnotify) is in place, the test then does what a host process would (create, open, read,
//! write, chmod in a directory the sandbox may only read), and the script reports every
//! event it received in the next moments.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::support::*;

const SECRET: &str = "REDTEAM7-SECRET";

/// Runs `cmd` (stdout piped), waits for the line `armed` on its stdout, runs `host` (what
/// a host process does meanwhile), and returns everything the command printed, with its
/// stderr and status.
fn armed_then(cmd: &mut Command, host: impl FnOnce()) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap_or_else(|| panic!("stdout")));
    let mut seen = String::new();
    let mut armed = false;
    loop {
        let mut line = String::new();
        match stdout.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                seen.push_str(&line);
                if line.trim() == "armed" {
                    armed = true;
                    break;
                }
            }
        }
    }
    if armed {
        host();
    }
    let _ = stdout.read_to_string(&mut seen);
    let mut out = child.wait_with_output().unwrap();
    out.stdout = seen.into_bytes();
    out
}

/// What a host process does in `dir`: reads the secret file there, appends to it,
/// creates and removes a file, changes the secret's mode.
fn host_activity(dir: &Path) {
    std::thread::sleep(Duration::from_millis(100));
    let secret = dir.join("secret");
    let _ = std::fs::read(&secret);
    let _ = std::fs::OpenOptions::new()
        .append(true)
        .open(&secret)
        .map(|mut f| std::io::Write::write_all(&mut f, b"more\n"));
    let made = dir.join("host-made");
    let _ = std::fs::write(&made, "x");
    let _ = std::fs::remove_file(&made);
    let _ = std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o640));
    let _ = std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644));
}

/// A host directory the sandbox may read: `outside/` with a `secret` in it.
fn outside_with_secret(env: &TestEnv) -> PathBuf {
    let secret = env.outside.join("secret");
    std::fs::write(&secret, format!("{SECRET}\n")).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    env.outside.clone()
}

/// The inotify payload: `watch.py PATH[@MASK]...` adds one watch per argument (mask in
/// hex, default everything, `IN_ALL_EVENTS`), prints `PATH watched` or `PATH <strerror>`,
/// then `armed`, then every event of the next `WAIT` seconds (env, default 1.5) as
/// `EVENT PATH MASK` where PATH is the argument whose watch reported it.
const WATCH: &str = r#"import ctypes, os, select, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
names = {}
for arg in sys.argv[1:]:
    path, _, mask = arg.partition("@")
    mask = int(mask, 16) if mask else 0xfff
    wd = libc.inotify_add_watch(fd, path.encode(), mask)
    if wd >= 0:
        names.setdefault(wd, path)
        print(path, "watched", wd, flush=True)
    else:
        print(path, os.strerror(ctypes.get_errno()), flush=True)
print("armed", flush=True)
end = time.time() + float(os.environ.get("WAIT", "1.5"))
while time.time() < end:
    r, _, _ = select.select([fd], [], [], max(0, end - time.time()))
    if not r:
        break
    try:
        b = os.read(fd, 65536)
    except BlockingIOError:
        continue
    while b:
        wd, mask, cookie, ln = struct.unpack("iIII", b[:16])
        print("EVENT", names.get(wd, wd), hex(mask), flush=True)
        b = b[16 + ln:]
"#;

/// The `EVENT` lines of a payload's output.
fn events(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("EVENT"))
        .map(str::to_owned)
        .collect()
}

/// The lines `PATH watched WD` of a payload's output: the watches the kernel took.
fn watched(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(" watched"))
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------------------------------
// 1. Other notification mechanisms: dnotify.
// ---------------------------------------------------------------------------------------

/// dnotify: `fcntl(dirfd, F_NOTIFY, DN_ACCESS|DN_MODIFY|DN_CREATE|…|DN_MULTISHOT)` on a
/// directory opened read-only, with `F_SETSIG` choosing the signal. Prints `armed`, then
/// `signals N` after `WAIT` seconds, or `refused ERRNO`.
const DNOTIFY: &str = r#"import fcntl, os, signal, sys, time
got = []
signal.signal(signal.SIGRTMIN, lambda s, f: got.append(s))
try:
    fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
    fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGRTMIN)
    fcntl.fcntl(fd, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MODIFY | fcntl.DN_CREATE
                | fcntl.DN_DELETE | fcntl.DN_ATTRIB | fcntl.DN_MULTISHOT)
except OSError as e:
    print("refused", e.errno, flush=True)
    print("armed", flush=True)
    sys.exit(0)
print("armed", flush=True)
end = time.time() + 1.5
while time.time() < end:
    time.sleep(0.05)
print("signals", len(got), flush=True)
"#;

/// Attack: the other way to be told about a directory — dnotify. The round's change sends
/// `inotify_add_watch` to the supervisor because "a watch on a directory the command may
/// only read would report what host processes open and write there", and fanotify is
/// refused by the filter; but `fcntl(F_NOTIFY)` on a host directory opened read-only (which
/// landlock allows everywhere) is neither: the filter refuses only `F_SETLEASE`. With
/// `DN_ACCESS | DN_MODIFY | DN_CREATE | DN_MULTISHOT` the sandboxed process gets a signal
/// each time a host process reads a file in that directory (a `cat` of a key, the user's
/// editor opening a file, a build writing), when it happens — the very information the
/// inotify change withholds (without names: one directory per fd, so a tree of them
/// narrows it down). Should fail: no notification of host activity where the command may
/// only read (README, "Outside the writable areas …").
#[test]
fn redteam_round7_dnotify_reports_no_host_activity_in_a_readable_directory() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let outside = outside_with_secret(&env);
    let dir = outside.display().to_string();
    // Control: unconfined, dnotify reports the host's activity.
    let control = armed_then(
        env.sandgate("full-access")
            .args(["--", "python3", "-c", DNOTIFY, &dir]),
        || host_activity(&outside),
    );
    assert!(
        String::from_utf8_lossy(&control.stdout).contains("signals ")
            && !String::from_utf8_lossy(&control.stdout).contains("signals 0"),
        "control: dnotify reported nothing even unconfined: {}",
        show(&control)
    );
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let out = armed_then(
            env.sandgate(mode)
                .args(["--", "python3", "-c", DNOTIFY, &dir]),
            || host_activity(&outside),
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if let Some(line) = text
            .lines()
            .find(|l| l.starts_with("signals ") && *l != "signals 0")
        {
            failures.push(format!(
                "{mode}: fcntl(F_NOTIFY) on the host directory {dir} reported the host's \
                 reads and writes there ({line})"
            ));
        }
    }
    assert_none(failures);
}

// ---------------------------------------------------------------------------------------
// 2. inotify: a watch that lands on something other than what was judged.
// ---------------------------------------------------------------------------------------

/// Attack: a file judged by its directory that is not the directory's. `--allow-unix-socket`
/// for a socket under `/tmp` (an ssh-agent's, an X server's, a language server's) puts the
/// host's socket back at its own path on top of the private `/tmp`; the directory holding
/// it there is the private temp's, which the sandbox may write, so a watch on the socket
/// "by its directory" is added — on the host's inode. It reports what host processes do
/// to it (chmod, chown, removal by its owner: `IN_ATTRIB`, `IN_DELETE_SELF`), on an object
/// the sandbox may not change (a read-only island). Should fail: a watch only where the
/// command may write.
#[test]
fn redteam_round7_a_watch_on_an_allowed_socket_in_tmp_reports_nothing_of_the_host() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let dir = PathBuf::from("/tmp").join(unique_mark("rt7-sock"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let socket = dir.join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let path = socket.display().to_string();
    let host = || {
        std::thread::sleep(Duration::from_millis(100));
        let _ = std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o700));
        let _ = std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o755));
    };
    let control = armed_then(
        env.sandgate("full-access")
            .args(["--", "python3", "-c", WATCH, &path]),
        host,
    );
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let out = armed_then(
            env.sandgate(mode).args([
                "--allow-unix-socket",
                &path,
                "--",
                "python3",
                "-c",
                WATCH,
                &path,
            ]),
            host,
        );
        if !events(&out).is_empty() {
            failures.push(format!(
                "{mode}: a watch on the host's socket {path} (kept visible in the private \
                 /tmp) reported the host's changes to it: {:?}",
                events(&out)
            ));
        }
    }
    drop(listener);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        !events(&control).is_empty(),
        "control: no event unconfined: {}",
        show(&control)
    );
    assert_none(failures);
}

/// Attack: reach a host directory through `/proc` or a descriptor. The command holds an
/// `O_PATH` descriptor of the host directory and watches `/proc/self/fd/N`, `/dev/fd/N`,
/// `/proc/self/root/…`, `/proc/1/root/…`, `/proc/PID/cwd/..` (cwd one level below the
/// outside's parent), and a workspace symlink to `/proc/self/fd/N`. Then `IN_MASK_ADD` on
/// the host directory once a watch on the workspace exists (the same instance). Should
/// fail: each is refused (a magic link is "the caller's own descriptor"), none reports the
/// host's activity.
#[test]
fn redteam_round7_proc_and_fd_paths_lead_no_watch_to_a_host_directory() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let outside = outside_with_secret(&env);
    let o = outside.display().to_string();
    std::fs::create_dir(env.ws.join("src")).unwrap();
    std::os::unix::fs::symlink("/proc/self/fd/9", env.ws.join("fdlink")).unwrap();
    // fd 9 is the outside directory, opened O_PATH by the shell's `9<` (read-only open).
    let script = format!(
        "exec 9<'{o}'; cd src && exec python3 ../watch.py \
         /proc/self/fd/9 /dev/fd/9 '/proc/self/root{o}' '/proc/1/root{o}' \
         \"/proc/$$/cwd/../../outside\" ../fdlink ../src@fff '{o}@20000fff' ."
    );
    env.put("watch.py", WATCH, 0o644);
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let out = armed_then(
            env.sandgate(mode).args(["--", "/bin/sh", "-c", &script]),
            || host_activity(&outside),
        );
        // (In a default container no watch can be taken at all: the supervisor cannot
        // reach the caller's inotify instance.)
        if mode == "workspace-write"
            && !docker_harness()
            && !watched(&out).iter().any(|l| l.starts_with("../src "))
        {
            failures.push(format!(
                "control: no watch on the workspace: {}",
                show(&out)
            ));
        }
        let taken: Vec<String> = watched(&out)
            .into_iter()
            .filter(|l| !l.starts_with("../src ") && !l.starts_with(". "))
            .collect();
        if !taken.is_empty() {
            failures.push(format!(
                "{mode}: watches taken on paths that lead to the host directory: {taken:?}"
            ));
        }
        let host: Vec<String> = events(&out)
            .into_iter()
            .filter(|e| !e.starts_with("EVENT ../src ") && !e.starts_with("EVENT . "))
            .collect();
        if !host.is_empty() {
            failures.push(format!("{mode}: host activity reported: {host:?}"));
        }
    }
    assert_none(failures);
}

/// Attack: a symlink in the workspace to a host directory. Followed, the watch must be
/// judged on the host directory (refused); with `IN_DONT_FOLLOW` it may only land on the
/// link itself, which reports nothing that happens in the directory it names. Also
/// `IN_ONLYDIR | IN_DONT_FOLLOW` and a trailing slash. Should fail: no watch reports the
/// host's activity in `outside/`.
#[test]
fn redteam_round7_a_workspace_symlink_leads_no_watch_to_the_host() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let outside = outside_with_secret(&env);
    std::os::unix::fs::symlink(&outside, env.ws.join("lnk")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret"), env.ws.join("flnk")).unwrap();
    // IN_DONT_FOLLOW = 0x02000000, IN_ONLYDIR = 0x01000000.
    let args = [
        "lnk",
        "lnk/",
        "lnk/.",
        "lnk@2000fff",
        "lnk@3000fff",
        "flnk",
        "flnk@2000fff",
    ];
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let out = armed_then(
            env.sandgate(mode)
                .args(["--", "python3", "-c", WATCH])
                .args(args),
            || host_activity(&outside),
        );
        if !events(&out).is_empty() {
            failures.push(format!(
                "{mode}: a watch through a workspace symlink reported the host's activity \
                 in {}: {:?} ({})",
                outside.display(),
                events(&out),
                show(&out)
            ));
        }
    }
    assert_none(failures);
}

/// The racing payload: a thread swaps names under the watcher's feet with
/// `renameat2(RENAME_EXCHANGE)` — `race/x` between a regular file, a directory of the
/// workspace and a symlink to the host directory, and `pdir` (holding `x`) with `plink`, a
/// symlink to the host directory (which holds an `x` too) — while the main thread adds
/// watches on `race/x`, `race/x/`, `pdir/x`, `pdir`, with and without `IN_DONT_FOLLOW`,
/// on a second instance. Then the swapping stops, what the swaps themselves reported is
/// drained, and `armed`: from then on only the host acts.
const RACE: &str = r#"import ctypes, os, select, struct, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
stop = False
def swap():
    pairs = [(b"race/x", b"race/lnk"), (b"race/x", b"race/d"), (b"race/x", b"race/f"),
             (b"pdir", b"plink")]
    i = 0
    while not stop:
        a, b = pairs[i % len(pairs)]
        libc.renameat2(-100, a, -100, b, 2)
        i += 1
t = threading.Thread(target=swap)
t.start()
taken = 0
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for p, m in ((b"race/x", 0xfff), (b"race/x/", 0xfff), (b"race/x", 0x2000fff),
                 (b"pdir/x", 0xfff), (b"pdir", 0xfff), (b"pdir/x", 0x2000fff),
                 (b"pdir/", 0xfff)):
        if libc.inotify_add_watch(fd, p, m) >= 0:
            taken += 1
stop = True
t.join()
print("taken", taken, flush=True)
time.sleep(0.3)
try:
    while os.read(fd, 65536):
        pass
except BlockingIOError:
    pass
print("armed", flush=True)
end = time.time() + 1.5
while time.time() < end:
    r, _, _ = select.select([fd], [], [], max(0, end - time.time()))
    if not r:
        break
    try:
        b = os.read(fd, 65536)
    except BlockingIOError:
        continue
    while b:
        wd, mask, cookie, ln = struct.unpack("iIII", b[:16])
        print("EVENT", wd, hex(mask), flush=True)
        b = b[16 + ln:]
"#;

/// Attack: race the supervisor's single resolution. It resolves the path once, stats the
/// last name, opens it `O_PATH|O_NOFOLLOW` from the directory it resolved, and judges a
/// directory by itself and anything else by the directory holding it: a name swapped
/// between the stat and the open (a file for a symlink to a host directory, a directory of
/// the workspace for one), or a directory on the way swapped for a symlink to the host
/// directory, could land the watch on what was not judged. Should fail: after the race no
/// watch taken reports what a host process does in `outside/`.
#[test]
fn redteam_round7_racing_names_land_no_watch_on_a_host_directory() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let outside = outside_with_secret(&env);
    std::fs::write(outside.join("x"), "host x\n").unwrap();
    for dir in ["race/d", "pdir/x"] {
        std::fs::create_dir_all(env.ws.join(dir)).unwrap();
    }
    env.put("race/x", "file\n", 0o644);
    env.put("race/f", "file\n", 0o644);
    std::os::unix::fs::symlink(&outside, env.ws.join("race/lnk")).unwrap();
    std::os::unix::fs::symlink(&outside, env.ws.join("plink")).unwrap();
    let out = armed_then(
        env.sandgate("workspace-write")
            .args(["--", "python3", "-c", RACE, "1.5"]),
        || {
            host_activity(&outside);
            let _ = std::fs::read(outside.join("x"));
            let _ = std::fs::write(outside.join("x"), "host x again\n");
        },
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("armed") && (docker_harness() || !text.contains("taken 0")),
        "control: the race took no watch at all: {}",
        show(&out)
    );
    assert!(
        events(&out).is_empty(),
        "a watch taken during the race reported the host's activity in {}: {:?} ({})",
        outside.display(),
        events(&out),
        show(&out)
    );
}

/// Attack: a hard link in the workspace to a host file. A watch on a file is judged by the
/// directory holding it — the workspace — but reports every access to the inode, by
/// whatever name: a link `ws/hl` to a host file would report each time the host opens,
/// reads or writes it. Made with `link(2)` from the host path, and with
/// `linkat(AT_FDCWD, "/proc/self/fd/N", …, AT_SYMLINK_FOLLOW)` from a descriptor opened
/// read-only. Should fail: no link is made, and no watch reports the host file's use.
#[test]
fn redteam_round7_a_hard_link_to_a_host_file_reports_nothing() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let outside = outside_with_secret(&env);
    let secret = outside.join("secret").display().to_string();
    let script = format!(
        r#"import os, subprocess, sys
try:
    os.link("{secret}", "hl1")
except OSError as e:
    print("link", e.errno, flush=True)
fd = os.open("{secret}", os.O_RDONLY)
try:
    os.link("/proc/self/fd/%d" % fd, "hl2", follow_symlinks=True)
except OSError as e:
    print("linkat", e.errno, flush=True)
present = [n for n in ("hl1", "hl2") if os.path.exists(n)]
print("made", present, flush=True)
os.execvp("python3", ["python3", "watch.py"] + present)
"#
    );
    env.put("watch.py", WATCH, 0o644);
    let out = armed_then(
        env.sandgate("workspace-write")
            .args(["--", "python3", "-c", &script]),
        || host_activity(&outside),
    );
    let made: Vec<&str> = ["hl1", "hl2"]
        .into_iter()
        .filter(|n| env.ws.join(n).exists())
        .collect();
    let mut failures = vec![];
    if !made.is_empty() {
        failures.push(format!("hard links to the host file made: {made:?}"));
    }
    if !events(&out).is_empty() {
        failures.push(format!(
            "a watch on a link reported the host file's use: {:?}",
            events(&out)
        ));
    }
    assert_none(failures);
}

// ---------------------------------------------------------------------------------------
// 3. inotify: what legitimate watchers need.
// ---------------------------------------------------------------------------------------

/// What a watcher does: `legit.py` watches its private `/tmp` and `/dev/shm` (read-only
/// mode writes there), and with `ws` also a file of the workspace, a directory from a
/// second thread, a symlink itself (`IN_DONT_FOLLOW`), `IN_MASK_ADD` on a watch it has, 300
/// directories (a dev server's tree); each watch must then report what the command itself
/// does there.
const LEGIT: &str = r#"import ctypes, os, struct, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
bad = []
def add(p, m=0xfff):
    wd = libc.inotify_add_watch(fd, p.encode(), m)
    if wd < 0:
        bad.append("%s: %s" % (p, os.strerror(ctypes.get_errno())))
    return wd
def expect(wd, act, what):
    act()
    got = set()
    os.set_blocking(fd, False)
    deadline = time.time() + 1
    while time.time() < deadline and wd not in got:
        try:
            b = os.read(fd, 65536)
        except BlockingIOError:
            time.sleep(0.01)
            continue
        while b:
            w, mask, c, ln = struct.unpack("iIII", b[:16]); got.add(w); b = b[16 + ln:]
    if wd >= 0 and wd not in got:
        bad.append("no event for " + what)
tmp = os.environ.get("TMPDIR", "/tmp")
for d in (tmp, "/dev/shm") if tmp == "/tmp" else (tmp,):
    wd = add(d)
    expect(wd, lambda: open(d + "/made", "w").close(), d)
if sys.argv[1:] == ["ws"]:
    open("file", "w").close()
    wd = add("file")
    expect(wd, lambda: open("file", "a").write("x"), "file")
    os.makedirs("thr", exist_ok=True)
    box = []
    th = threading.Thread(target=lambda: box.append(add("thr")))
    th.start(); th.join()
    expect(box[0], lambda: open("thr/made", "w").close(), "thr from a thread")
    if not os.path.lexists("link"):
        os.symlink("file", "link")
    wd = add("link", 0x2000fff)
    expect(wd, lambda: os.utime("link", follow_symlinks=False), "link itself")
    again = add("file", 0x20000002)
    if again != add("file", 0xfff):
        bad.append("IN_MASK_ADD gave another descriptor")
    start = time.time()
    for i in range(300):
        os.makedirs("tree/%d" % i, exist_ok=True)
        add("tree/%d" % i)
    took = time.time() - start
    if took > 5:
        bad.append("300 watches took %.1fs" % took)
    wd = add("tree/299")
    expect(wd, lambda: open("tree/299/made", "w").close(), "tree/299")
print("bad", bad, flush=True)
"#;

/// Breakage check: the watches a test runner's watch mode, a dev server or an editor's
/// helper take in the sandbox's own areas keep working, with events, from any thread, and
/// fast enough for a tree. Should hold.
#[test]
fn redteam_round7_legitimate_watchers_keep_working() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let mut failures = vec![];
    for (mode, arg) in [("read-only", "tmp"), ("workspace-write", "ws")] {
        let out = output(env.sandgate(mode).args(["--", "python3", "-c", LEGIT, arg]));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // A default container lets no watch be taken (a known limit): each is refused.
        if docker_harness() {
            if !text.contains("Bad file descriptor") {
                failures.push(format!("{mode}: {}", show(&out)));
            }
            continue;
        }
        if !text.contains("bad []") {
            failures.push(format!("{mode}: {}", show(&out)));
        }
    }
    assert_none(failures);
}

/// Breakage check: a home as the workspace (`--workspace ~`, README: "it stays writable
/// where the user works … no new entry appears in the home"). The home is frozen (its names
/// cannot change), but its existing files stay writable; the watch judges a file by its
/// directory with the frozen rule, so a watcher cannot watch `~/notes.txt` it may write,
/// nor the workspace root itself. Should hold: a watch where the command may write.
#[test]
fn redteam_round7_a_file_the_command_may_write_in_a_frozen_home_can_be_watched() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    std::fs::create_dir_all(home.join("proj")).unwrap();
    std::fs::write(home.join("notes.txt"), "notes\n").unwrap();
    std::fs::write(home.join(".bashrc"), "# rc\n").unwrap();
    env.put("watch.py", WATCH, 0o644);
    let watcher = env.ws.join("watch.py").display().to_string();
    let notes = home.join("notes.txt").display().to_string();
    let h = home.display().to_string();
    let mut cmd = env.sandgate_without_workspace("workspace-write");
    cmd.current_dir(&home)
        .env("HOME", &home)
        .env("WAIT", "0.3")
        .arg("--workspace")
        .arg(&home)
        .args(["--", "/bin/sh", "-c"])
        .arg(format!(
            "echo more >> '{notes}' && echo wrote && exec python3 '{watcher}' '{notes}' '{h}'"
        ));
    let out = output(&mut cmd);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("wrote"),
        "control: the home's file is not writable: {}",
        show(&out)
    );
    // A default container lets no watch be taken (a known limit).
    let watched = if docker_harness() {
        "Bad file descriptor"
    } else {
        "watched"
    };
    assert!(
        text.contains(&format!("{notes} {watched}")) && text.contains(&format!("{h} {watched}")),
        "a file the command may write (and the workspace root) cannot be watched: {}",
        show(&out)
    );
}

/// Breakage check (tripped over; the cause predates this round): a process that made
/// itself non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`, as agents and credential helpers
/// do, or any program whose binary is execute-only) gets `EPERM` for every call the
/// supervisor performs — a watch in the workspace, and a plain write there too: the
/// supervisor cannot read its memory or take its descriptors. Should hold: a watch and a
/// write where the command may write. Holds: as root, the supervisor keeps
/// `CAP_SYS_PTRACE` (and no other capability).
#[test]
fn redteam_round7_a_non_dumpable_watcher_can_watch_the_workspace() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    std::fs::create_dir(env.ws.join("src")).unwrap();
    let script = r#"import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(4, 0)
fd = libc.inotify_init1(0)
wd = libc.inotify_add_watch(fd, b"src", 0xfff)
print("watch", "ok" if wd >= 0 else os.strerror(ctypes.get_errno()), flush=True)
try:
    open("written", "w").close(); print("write ok", flush=True)
except OSError as e:
    print("write", e.strerror, flush=True)
"#;
    let out = output(
        env.sandgate("workspace-write")
            .args(["--", "python3", "-c", script]),
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // In a default container, or unprivileged without user namespaces, sandgate has no
    // CAP_SYS_PTRACE: it cannot read a non-dumpable caller's memory, so everything it
    // would perform is refused (a known limit), and nothing is done unchecked.
    if supervisor_cannot_read_undumpable() {
        assert!(
            text.contains("watch Operation not permitted")
                && text.contains("write Operation not permitted")
                && !env.ws.join("written").exists(),
            "{}",
            show(&out)
        );
        return;
    }
    assert!(
        text.contains("watch ok") && text.contains("write ok"),
        "a non-dumpable process can neither watch nor write in the workspace: {}",
        show(&out)
    );
}

/// Attack: borrow the supervisor's `CAP_SYS_PTRACE` (kept, as root, to read non-dumpable
/// callers). The command asks for writes through the `/proc` entries of its
/// non-dumpable init — its memory, its cwd and root as magic links, its descriptors —
/// hoping the supervisor follows them with a capability the command lacks. Should fail:
/// performed paths are resolved without magic links, and what is left to the kernel is
/// judged with the command's own rights.
#[test]
fn redteam_round7_the_supervisors_ptrace_capability_lends_nothing() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let script = r#"import os
for path in ["/proc/1/mem", "/proc/1/cwd/planted", "/proc/1/root/tmp/planted",
             "/proc/1/fd/0", "/proc/1/fd/1", "/proc/1/fd/3", "/proc/1/environ"]:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.close(fd)
        print("opened", path, flush=True)
    except OSError as e:
        print("refused", path, e.strerror, flush=True)
"#;
    let out = output(
        env.sandgate("workspace-write")
            .args(["--", "python3", "-c", script]),
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_status(&out, 0);
    assert!(text.contains("refused /proc/1/mem"), "{}", show(&out));
    assert!(
        !text.contains("opened"),
        "a write through init's /proc entries was let through: {}",
        show(&out)
    );
    assert!(!env.ws.join("planted").exists());
}

/// Attack (low): a nested call narrower than its parent. Inside a `workspace-write`
/// sandbox, a `read-only` sandgate (degraded, as it must be: the outer filter refuses the
/// namespaces) has no listener of its own, so its `inotify_add_watch` reaches the outer
/// supervisor, which judges it by the outer call's writable areas and adds it — while the
/// inner call's own policy says a watch on the workspace needs `workspace-write`, and its
/// degraded notice does not name watches among what is not enforced. Should fail: the
/// inner read-only call's watch on the workspace is refused.
#[test]
fn redteam_round7_a_nested_read_only_call_cannot_watch_the_workspace() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    std::fs::create_dir(env.ws.join("src")).unwrap();
    env.put("watch.py", WATCH, 0o644);
    let sg = sandgate_inside().display().to_string();
    let out = output(
        env.sandgate("workspace-write")
            .env("WAIT", "0.1")
            .args(["--", &sg, "--sandbox", "read-only", "--"])
            .args([
                "/bin/sh",
                "-c",
                "echo x > inner-write; python3 watch.py src .",
            ]),
    );
    assert!(
        !env.ws.join("inner-write").exists(),
        "control: the inner call wrote: {}",
        show(&out)
    );
    assert!(
        watched(&out).is_empty(),
        "the nested read-only call watched the workspace: {:?} ({})",
        watched(&out),
        show(&out)
    );
}
