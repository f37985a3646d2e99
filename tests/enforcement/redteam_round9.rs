//! Red team, round 9: the caller's standard streams relayed through sandgate's pipes and
//! opened again in the sandbox's view, the supervisor's `CAP_SYS_PTRACE` as root, the
//! hidden-files rule following a dot-entry's link, and what sandgate leaves behind.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::*;

/// Reads `from` to its end slowly (4 KiB every 2 ms), as a pager, a `tee` to a slow disk
/// or a harness busy with each chunk does; returns how many bytes came.
fn read_slowly(mut from: impl Read) -> usize {
    let mut got = 0;
    let mut buf = [0u8; 4096];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return got,
            Ok(n) => got += n,
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Attack (data loss): stdout is a pipe whose reader is slower than the command. The
/// command's output goes through sandgate's relay pipe; when the command ends while the
/// caller's pipe is full, whatever is still in the relay pipe must be passed on before
/// sandgate returns ("in order, all of it before sandgate returns"). The relay's final
/// copy uses `splice` between two pipes, one of them non-blocking, which the kernel then
/// treats as `SPLICE_F_NONBLOCK`: the copy gives up at `EAGAIN` and the rest is dropped,
/// with the command's status 0. Should fail: every byte `cat` wrote reaches the reader.
#[test]
fn redteam_round9_a_relayed_stdout_pipe_loses_nothing_to_a_slow_reader() {
    let env = TestEnv::new();
    let size = 1_000_000;
    let big = env.outside.join("big");
    std::fs::write(&big, vec![b'x'; size]).unwrap();
    std::fs::set_permissions(&big, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let mut child = env
            .sandgate(mode)
            .arg("--")
            .arg("cat")
            .arg(&big)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let got = read_slowly(out);
        let status = child.wait().unwrap();
        if !status.success() || got != size {
            failures.push(format!(
                "{mode}: the reader got {got} of {size} bytes ({status})"
            ));
        }
    }
    assert_none(failures);
}

/// The same with stderr: `2>&1` into one slow pipe, written by a command that ends at
/// once. Should fail: everything written reaches the reader, in order.
#[test]
fn redteam_round9_relayed_stdout_and_stderr_lose_nothing_when_the_command_ends_first() {
    let env = TestEnv::new();
    let script = "import os\nfor i in range(400):\n    os.write(1 + i % 2, b'%05d' % i + b'.' * 250 + b'\\n')\n";
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let (read_end, write_end) = std::io::pipe().unwrap();
        let mut child = env
            .sandgate(mode)
            .args(["--", "python3", "-c", script])
            .stdin(Stdio::null())
            .stdout(write_end.try_clone().unwrap())
            .stderr(write_end)
            .spawn()
            .unwrap();
        // The reader starts late: the command has ended by then, with its output held
        // in sandgate's relay pipe.
        std::thread::sleep(Duration::from_millis(800));
        let mut text = Vec::new();
        let mut reader = read_end;
        let mut buf = [0u8; 4096];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => text.extend_from_slice(&buf[..n]),
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let status = child.wait().unwrap();
        let text = String::from_utf8_lossy(&text);
        // sandgate's own notes (`--no-observe` says it is on) go to the same pipe.
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with("sandgate"))
            .collect();
        let in_order = lines
            .iter()
            .enumerate()
            .all(|(i, l)| l.starts_with(&format!("{i:05}")));
        if !status.success() || lines.len() != 400 || !in_order {
            failures.push(format!(
                "{mode}: {} of 400 lines, in order: {in_order} ({status})",
                lines.len()
            ));
        }
    }
    assert_none(failures);
}

/// Python: changes the mode, times and an extended attribute of what fd 0 is, through fd
/// 0; says what it managed.
const CHANGE_STDIN: &str = r#"
import os
for what, f in (("fchmod", lambda: os.fchmod(0, 0o666)),
                ("futimens", lambda: os.utime(0, (0, 0))),
                ("fsetxattr", lambda: os.setxattr(0, "user.redteam", b"x"))):
    try:
        f(); print(what, "ok")
    except OSError as e:
        print(what, e.strerror)
"#;

/// Attack: stdin is a file in the host's `/tmp` or `/dev/shm` (`sort < /tmp/export.csv`,
/// a harness's input file). The command's stream is opened again "by its name in the
/// sandbox's own view … so that … a file outside the writable roots lies on a read-only
/// mount and the command can neither chmod, chown, touch nor tag it". But in the sandbox
/// that name is in the private `/tmp` (`/dev/shm`): it is missing there, or another file,
/// so the re-open is skipped and the command keeps a description on the host's mount,
/// where `fchmod`, `futimens` and `fsetxattr` need only ownership. Should fail: the
/// user's file keeps its mode (0600: the command would make it readable and writable by
/// every local user), its times and its attributes.
#[test]
fn redteam_round9_stdin_in_the_hosts_tmp_cannot_be_chmodded_touched_or_tagged() {
    let env = TestEnv::new();
    let mut failures = vec![];
    for dir in ["/tmp", "/dev/shm"] {
        for mode in ["read-only", "workspace-write"] {
            let file = tempfile::Builder::new()
                .prefix("sandgate-redteam9-stdin-")
                .tempfile_in(dir)
                .unwrap_or_else(|e| panic!("{dir}: {e}"));
            std::fs::write(file.path(), "the user's input\n").unwrap();
            set_mode(file.path(), 0o600);
            let before = std::fs::metadata(file.path()).unwrap();
            let out = output(
                env.sandgate(mode)
                    .args(["--", "python3", "-c", CHANGE_STDIN])
                    .stdin(Stdio::from(std::fs::File::open(file.path()).unwrap())),
            );
            let after = std::fs::metadata(file.path()).unwrap();
            let said = String::from_utf8_lossy(&out.stdout).into_owned();
            if after.mode() & 0o7777 != 0o600 {
                failures.push(format!(
                    "{mode}, {dir}: the file's mode is now {:o}: {said}",
                    after.mode() & 0o7777
                ));
            }
            if after.mtime() != before.mtime() {
                failures.push(format!("{mode}, {dir}: the file's times changed: {said}"));
            }
            if said.contains("fsetxattr ok") || has_user_xattr(file.path()) {
                failures.push(format!("{mode}, {dir}: the file was tagged: {said}"));
            }
        }
    }
    assert_none(failures);
}

/// Whether `path` carries the `user.redteam` attribute (asked of the host's python).
fn has_user_xattr(path: &Path) -> bool {
    let out = Command::new("python3")
        .args([
            "-c",
            "import os,sys\ntry: print('user.redteam' in os.listxattr(sys.argv[1]))\nexcept OSError: print(False)",
        ])
        .arg(path)
        .output();
    out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "True")
}

/// Python: tries init's descriptors and links through an `O_PATH` handle on `/proc/1`
/// (which any process may hold), and init's `/proc` links by path, for every call the
/// supervisor performs (open for writing, create, chmod with an execute bit, xattr):
/// the supervisor keeps `CAP_SYS_PTRACE` as root, which the command has not.
const THROUGH_INIT: &str = r#"
import os
d = os.open("/proc/1", os.O_PATH | os.O_DIRECTORY)
tries = []
for n in range(0, 12):
    tries.append(("fd/%d" % n, os.O_WRONLY))
    tries.append(("fd/%d" % n, os.O_RDONLY))
    tries.append(("task/1/fd/%d" % n, os.O_WRONLY))
tries += [("cwd/redteam9", os.O_WRONLY | os.O_CREAT), ("root/tmp/redteam9", os.O_WRONLY | os.O_CREAT),
          ("environ", os.O_RDONLY), ("mem", os.O_RDONLY), ("cwd", os.O_RDONLY | os.O_DIRECTORY)]
for rel, fl in tries:
    try:
        fd = os.open(rel, fl, 0o644, dir_fd=d)
        print("OPENED", rel, os.readlink("/proc/self/fd/%d" % fd))
    except OSError:
        pass
for path in ["/proc/1/fd/%d" % n for n in range(12)] + ["/proc/1/cwd/redteam9", "/proc/1/root/tmp/redteam9"]:
    for what, f in (("chmod", lambda: os.chmod(path, 0o755)),
                    ("xattr", lambda: os.setxattr(path, "user.redteam", b"1")),
                    ("open", lambda: os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))):
        try:
            f(); print("DONE", what, path)
        except OSError:
            pass
print("end")
"#;

/// Attack: borrow the supervisor's `CAP_SYS_PTRACE` (kept as root) to reach init's
/// descriptors or links, which the non-dumpable init keeps from the command: a relative
/// open from a `/proc/1` handle is resolved by the supervisor through the caller's
/// `/proc/PID/fd/N`, with its own credentials. Should fail: nothing opens, nothing changes.
#[test]
fn redteam_round9_the_supervisors_ptrace_capability_opens_nothing_of_init() {
    let env = TestEnv::new();
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let out = output(
            env.sandgate(mode)
                .args(["--", "python3", "-c", THROUGH_INIT]),
        );
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        if !said.contains("end") || said.contains("OPENED") || said.contains("DONE") {
            failures.push(format!("{mode}: {}", show(&out)));
        }
    }
    assert_none(failures);
}

/// The name the kernel shows for `pid`.
fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Attack: what sandgate itself leaves running after a call that keeps a process with
/// stdout a pipe (the detached supervisor, the relay's copier) stays in the caller's
/// session (a terminal's hang-up, or a CI runner ending the job's session, would then
/// treat it as the user's own), or outlives what it serves. Should fail: each is in a
/// session of its own, and gone once `sandgate stop` ended the kept processes.
#[test]
fn redteam_round9_sandgates_own_leftovers_have_their_own_session_and_end_with_the_kept() {
    if keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let mark = unique_mark("round9-leftovers");
    let callers = session_of(std::process::id() as i32).unwrap_or_else(|| panic!("no sid"));
    let mut failures = vec![];
    let mut child = env
        .sandgate("workspace-write")
        .arg("--keep-background")
        .args(["--", "sh", "-c", &format!("sleep 30 & echo started {mark}")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let status = child.wait().unwrap();
    if !status.success() {
        failures.push(format!("the call failed: {status}"));
    }
    let ours: Vec<i32> = processes_marked(&mark)
        .into_iter()
        .filter(|pid| comm(*pid) == "sandgate")
        .collect();
    for pid in &ours {
        if session_of(*pid) == Some(callers) {
            failures.push(format!(
                "sandgate's leftover {pid} is in the caller's session"
            ));
        }
    }
    env.stop_kept();
    // The copier ends when the kept processes are gone: the caller's pipe then ends.
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut all = String::new();
        let mut stdout = stdout;
        let _ = stdout.read_to_string(&mut all);
        let _ = done_tx.send(all);
    });
    match done_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(all) if all.contains("started") => {}
        Ok(all) => failures.push(format!("the output was lost: {all:?}")),
        Err(_) => failures.push("the caller's pipe is still held after sandgate stop".into()),
    }
    let left: Vec<i32> = processes_marked(&mark)
        .into_iter()
        .filter(|pid| comm(*pid) == "sandgate" && !is_zombie(*pid))
        .collect();
    if !wait_for(Duration::from_secs(5), || {
        processes_marked(&mark)
            .into_iter()
            .all(|pid| comm(pid) != "sandgate" || is_zombie(pid))
    }) {
        failures.push(format!(
            "sandgate's leftovers outlive the kept processes: {left:?}"
        ));
    }
    kill_marked(&mark);
    assert_none(failures);
}

/// Whether `pid` has ended and waits to be reaped (the test machine's pid 1 may not reap).
fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
        .unwrap_or(true)
}

/// Attack (fail-closed denial of service, expensive scans): the user links a dot-entry to
/// a directory the command may write (`~/.sync -> ~/Sync`, with `~/Sync` the workspace).
/// An earlier call fills it with 2,100 directories, past the scan's budget, so that the
/// rule hides what it could not read — hoping the home's own scan loses its budget too,
/// and later calls in other workspaces lose `~/.config`'s and `~/.local`'s files. Should
/// fail: a later call elsewhere still reads the home's settings, and takes no longer than
/// a few seconds.
#[test]
fn redteam_round9_a_flooded_linked_dot_entry_costs_later_calls_nothing_of_the_home() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("home");
    std::fs::create_dir(&home).unwrap();
    set_mode(&home, 0o755);
    put_with_mode(&home, ".config/app/settings.toml", "SETTINGS", 0o644);
    put_with_mode(&home, ".local/share/app/data.txt", "DATA", 0o644);
    put_with_mode(&home, ".profile", "PROFILE", 0o644);
    put_with_mode(&home, "Sync/notes.txt", "NOTES", 0o644);
    std::os::unix::fs::symlink(home.join("Sync"), home.join(".sync")).unwrap();
    let sync = home.join("Sync");
    let flood = env
        .sandgate_without_workspace("workspace-write")
        .env("HOME", &home)
        .current_dir(&sync)
        .arg("--workspace")
        .arg(&sync)
        .args([
            "--",
            "python3",
            "-c",
            "import os\nfor i in range(2100): os.makedirs('flood/d%d/e' % i)\nprint('flooded')",
        ])
        .output();
    let flooded = flood
        .as_ref()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    assert!(
        flooded.as_deref().is_ok_and(|s| s.contains("flooded")),
        "the flood did not run: {flood:?}"
    );
    let started = std::time::Instant::now();
    let out = output(env.sandgate("workspace-write").env("HOME", &home).args([
        "--",
        "sh",
        "-c",
        "cat ~/.config/app/settings.toml ~/.local/share/app/data.txt ~/.profile ~/.sync/notes.txt",
    ]));
    let took = started.elapsed();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut failures = vec![];
    if said != "SETTINGSDATAPROFILENOTES" {
        failures.push(format!(
            "a later call lost the home's files: {}",
            show(&out)
        ));
    }
    if took > Duration::from_secs(10) {
        failures.push(format!("a later call took {took:?}"));
    }
    assert_none(failures);
}

/// Attack: a kept process writes without end (`yes &`) into stdout, a pipe whose reader
/// stops after a few bytes (`| head -c 10`): the relay's copier must neither spin nor
/// keep the writer alive, nor hold anything once the reader is gone. Should fail: the
/// reader gets its bytes, and within a few seconds neither the kept writer nor a copier
/// of sandgate's is left.
#[test]
fn redteam_round9_a_reader_that_closes_early_leaves_no_copier_or_writer_running() {
    if keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let mark = unique_mark("round9-early-close");
    let mut child = env
        .sandgate("read-only")
        .arg("--keep-background")
        .args(["--", "sh", "-c", &format!("yes {mark} & echo {mark}")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut first = [0u8; 10];
    let read = out.read_exact(&mut first);
    drop(out);
    let status = child.wait().unwrap();
    let mut failures = vec![];
    if read.is_err() || !status.success() {
        failures.push(format!("the call: {status}, read: {read:?}"));
    }
    if !wait_for(Duration::from_secs(5), || {
        processes_marked(&mark).into_iter().all(is_zombie)
    }) {
        let left: Vec<(i32, String)> = processes_marked(&mark)
            .into_iter()
            .map(|p| (p, comm(p)))
            .collect();
        failures.push(format!("still running after the reader closed: {left:?}"));
    }
    env.stop_kept();
    kill_marked(&mark);
    assert_none(failures);
}
