//! Red team, round 4: what a sandboxed command can hold or change of the host's that
//! outlives it or reaches past it — locks and leases on host files, the flags of the
//! terminal's and the caller's shared file descriptions, the private temp's own mode —
//! and what an earlier call can plant that a later call's setup follows (an allowed
//! socket path, an `--unhide`, a project's hidden path, a rotated audit log). Each test
//! performs the attack as the sandboxed command would and asserts that it fails, with a
//! control under `full-access` (or without the attack) where one shows the payload is real.
//!
//! An attack that gets through is a failing test; one the README documents as a known
//! limit is `#[ignore]`d with the README's words.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// Starts `cmd` (a sandgate running `flock -x FILE sh -c 'echo held; sleep 5'`) and waits
/// until it says it holds the lock (or gives up after 20 s); returns the child.
fn start_holding(cmd: &mut Command) -> (Child, bool) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut reader = BufReader::new(stdout);
    let held = reader.read_line(&mut line).is_ok() && line.trim() == "held";
    assert!(
        Instant::now() < deadline,
        "the command did not start in time"
    );
    (child, held)
}

fn end(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn holder_script(file: &Path) -> String {
    format!(
        "exec flock -x '{}' sh -c 'echo held; sleep 5'",
        file.display()
    )
}

/// Attack: a `read-only` command opens a host file it may read (one outside the workspace,
/// as a host tool's lock file — cargo's `~/.cargo/.package-cache`, a `flock(1)` guard in a
/// cron job or a deploy script — would be) and takes an exclusive `flock` on it. The lock
/// lives on the host's inode, so every host process that locks the same file waits for the
/// sandbox (cargo prints "Blocking waiting for file lock on package cache"; `flock -n`
/// jobs skip their run), and with `--keep-background` for as long as the kept process
/// lives. Should fail: the README promises that nothing of the host session is reachable
/// ("any socket, port, address, IPC object") and, for sandgate's own log, that "a lock
/// taken on them there never reaches the real file"; a lock on a host file is an IPC object
/// of the host's shared with every host process. The host must still get the lock while
/// the sandboxed command holds its own.
#[test]
#[ignore = "documented limit: advisory locks on files the command may read reach the host's lockers"]
fn redteam_a_read_only_command_cannot_hold_a_lock_on_a_host_file() {
    let env = TestEnv::new();
    let file = env.outside.join("tool.lock");
    std::fs::write(&file, "").unwrap();

    // Control: full-access holds the host's lock (the payload is real).
    let mut control = env.sandgate("full-access");
    control.args(["--", "sh", "-c", &holder_script(&file)]);
    let (child, held) = start_holding(&mut control);
    let blocked_by_control = held && !host_can_lock(&file);
    end(child);
    assert!(
        blocked_by_control,
        "control: full-access did not hold the lock"
    );

    let mut cmd = env.sandgate("read-only");
    cmd.args(["--", "sh", "-c", &holder_script(&file)]);
    let (child, held) = start_holding(&mut cmd);
    let host_locked = host_can_lock(&file);
    end(child);
    assert!(
        !held || host_locked,
        "a read-only command holds an exclusive flock on the host file {}: host processes \
         locking it wait for the sandbox",
        file.display()
    );
}

/// Attack: the same lock from `workspace-write`, on a file of the host's outside the
/// writable roots (read-only there). Should fail for the same reason.
#[test]
#[ignore = "documented limit: advisory locks on files the command may read reach the host's lockers"]
fn redteam_a_workspace_write_command_cannot_hold_a_lock_on_a_read_only_host_file() {
    let env = TestEnv::new();
    let file = env.outside.join("tool.lock");
    std::fs::write(&file, "").unwrap();
    let mut cmd = env.sandgate("workspace-write");
    cmd.args(["--", "sh", "-c", &holder_script(&file)]);
    let (child, held) = start_holding(&mut cmd);
    let host_locked = host_can_lock(&file);
    end(child);
    assert!(
        !held || host_locked,
        "a workspace-write command holds an exclusive flock on the read-only host file {}",
        file.display()
    );
}

/// True when the host can open `file` for writing at once (non-blocking: a lease in the
/// way answers EWOULDBLOCK instead of making the host wait for it).
fn host_can_open_for_writing(file: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(file)
        .is_ok()
}

/// Attack: a `read-only` command opens a host file it owns and may read (here one outside
/// the workspace; as root, every root-owned file of the system: `/etc/passwd`, a unit
/// file) and takes a read *lease* on it (`F_SETLEASE`, `F_RDLCK`), ignoring SIGIO. Every
/// host process that then opens the file for writing or truncates it blocks for
/// `lease-break-time` (45 s by default) — an editor saving, a package manager, a
/// `git checkout` — and the command can take the lease again as soon as the writer is
/// done. Should fail: the lease is an object of the host's file shared with every host
/// process (the README: nothing of the host session is reachable); the host must open its
/// file for writing at once while the command runs.
#[test]
fn redteam_a_read_only_command_cannot_lease_a_host_file() {
    let env = TestEnv::new();
    let file = env.outside.join("edited.txt");
    std::fs::write(&file, "host data\n").unwrap();
    let probe = probe();

    // Control: full-access takes the lease and holds the host's writers back.
    let mut control = env.sandgate("full-access");
    control
        .arg("--")
        .arg(&probe)
        .arg("read-lease-hold")
        .arg(&file)
        .arg("5");
    let (child, held) = start_holding(&mut control);
    let blocked_by_control = held && !host_can_open_for_writing(&file);
    end(child);
    assert!(
        blocked_by_control,
        "control: full-access did not hold the lease"
    );

    let mut cmd = env.sandgate("read-only");
    cmd.arg("--")
        .arg(&probe)
        .arg("read-lease-hold")
        .arg(&file)
        .arg("5");
    let (child, held) = start_holding(&mut cmd);
    let host_writes = host_can_open_for_writing(&file);
    end(child);
    assert!(
        !held || host_writes,
        "a read-only command holds a read lease on the host file {}: host writers wait \
         lease-break-time for the sandbox",
        file.display()
    );
}

/// Sets O_NONBLOCK (and O_APPEND, harmless on a terminal) on the command's stdin: the
/// open file description it shares with whoever gave it that stdin.
const SET_NONBLOCK: &str = "import fcntl, os\n\
fl = fcntl.fcntl(0, fcntl.F_GETFL)\n\
fcntl.fcntl(0, fcntl.F_SETFL, fl | os.O_NONBLOCK)\n\
print('set', flush=True)\n";

/// Runs `sandgate --sandbox MODE -- python3 -c SET_NONBLOCK` on a fresh pty (the user's
/// terminal: stdin, stdout, stderr and controlling terminal), then, in the same session,
/// what the user's next program would do: look at stdin's flags. Returns what the terminal
/// showed.
fn nonblock_on_pty(env: &TestEnv, mode: &str) -> String {
    on_pty_then(
        env,
        mode,
        &["python3", "-c", SET_NONBLOCK],
        r#"python3 -c 'import fcntl, os; print("after:", "nonblocking" if fcntl.fcntl(0, fcntl.F_GETFL) & os.O_NONBLOCK else "blocking")'"#,
    )
}

/// Attack: the sandboxed command sets `O_NONBLOCK` on its stdin — the user's terminal,
/// whose open file description the command shares with the user's shell and every program
/// the user runs next from it. The flag outlives the call: the next `cat`, `read`,
/// `python3` `input()`, an editor or a pager reading the terminal gets EAGAIN and fails or
/// spins, until something clears it. Should fail: the README promises that "the
/// terminal's modes are put back when the command ends" and that nothing of the terminal
/// state outlives the call; the terminal must read blocking again after sandgate returns.
#[test]
fn redteam_the_terminal_is_not_left_non_blocking() {
    let env = TestEnv::new();
    // Control: without a sandbox the flag stays (the payload is real).
    let shown = nonblock_on_pty(&env, "full-access");
    assert!(
        shown.contains("set") && shown.contains("after: nonblocking"),
        "control: {shown:?}"
    );
    for mode in ["read-only", "workspace-write"] {
        let shown = nonblock_on_pty(&env, mode);
        assert!(shown.contains("after:"), "{mode}: {shown:?}");
        assert!(
            !shown.contains("after: nonblocking"),
            "{mode}: the sandboxed command left the user's terminal non-blocking: {shown:?}"
        );
    }
}

/// Attack: the same on a stdin that is a pipe of the caller's (a CI runner's, an agent's
/// harness): `O_NONBLOCK` set inside stays on the caller's end, and the caller's next read
/// fails with EAGAIN. Should fail: the call changes nothing of its caller's beyond its
/// output.
#[test]
fn redteam_an_inherited_pipe_is_not_left_non_blocking() {
    use std::os::fd::OwnedFd;
    let env = TestEnv::new();
    for mode in ["full-access", "read-only", "workspace-write"] {
        let (read, _write) = nix::unistd::pipe().unwrap();
        let kept: OwnedFd = read.try_clone().unwrap();
        let out = output(
            env.sandgate(mode)
                .args(["--", "python3", "-c", SET_NONBLOCK])
                .stdin(Stdio::from(read)),
        );
        assert_status(&out, 0);
        let flags = nix::fcntl::fcntl(&kept, nix::fcntl::FcntlArg::F_GETFL).unwrap();
        let nonblocking = flags & libc::O_NONBLOCK != 0;
        if mode == "full-access" {
            assert!(nonblocking, "control: the flag was not set");
        } else {
            assert!(
                !nonblocking,
                "{mode}: the sandboxed command left the caller's pipe non-blocking"
            );
        }
    }
}

/// Attack: the sandboxed command sets the terminal's window size (`TIOCSWINSZ`, here to
/// 3 rows by 7 columns). The size is state of the terminal, not of the call: after sandgate
/// returns, the user's shell, editor and pager lay themselves out for a 3x7 screen until
/// the terminal emulator happens to resize it — a garbled session, and one where a later
/// approval prompt is cut to pieces. Should fail: the README promises that the terminal
/// comes back as the command found it ("the terminal's modes are put back when the
/// command ends") and that nothing of the terminal's state outlives the call; the size
/// after the call must be the 24x80 it was.
#[test]
fn redteam_the_terminals_window_size_comes_back() {
    let env = TestEnv::new();
    let payload = "import fcntl, struct, termios\n\
fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack('HHHH', 3, 7, 0, 0))\n\
print('set', flush=True)\n";
    let after = "echo \"after: $(stty size)\"";
    // Control: without a sandbox the size stays changed (the payload is real).
    let shown = on_pty_then(&env, "full-access", &["python3", "-c", payload], after);
    assert!(shown.contains("after: 3 7"), "control: {shown:?}");
    for mode in ["read-only", "workspace-write"] {
        let shown = on_pty_then(&env, mode, &["python3", "-c", payload], after);
        assert!(shown.contains("after: "), "{mode}: {shown:?}");
        assert!(
            shown.contains("after: 24 80"),
            "{mode}: the sandboxed command changed the user's terminal size for good: {shown:?}"
        );
    }
}

/// Attack: a POSIX record lock instead of `flock`: the command opens a host file read-only
/// and takes a shared `fcntl` lock on it (`F_SETLK`, `F_RDLCK`: all a read-only fd may
/// take). A host process that wants to write it under a write lock — SQLite taking its
/// EXCLUSIVE lock on a database of the user's (a browser's history, an application's
/// state), a tool using `lockf` — is refused ("database is locked") or waits while the
/// command runs. Should fail like the `flock` above: the host must get its write lock at
/// once.
#[test]
#[ignore = "documented limit: advisory locks on files the command may read reach the host's lockers"]
fn redteam_a_read_only_command_cannot_hold_a_record_lock_on_a_host_file() {
    let env = TestEnv::new();
    let file = env.outside.join("app.sqlite");
    std::fs::write(&file, "host database").unwrap();
    let script = format!(
        "import fcntl, time\n\
f = open({path:?}, 'rb')\n\
fcntl.lockf(f, fcntl.LOCK_SH | fcntl.LOCK_NB)\n\
print('held', flush=True)\n\
time.sleep(5)\n",
        path = file.display().to_string()
    );
    // The host's write lock, non-blocking, from a process of its own (record locks are
    // per process: a lock of the test process itself would never conflict with one it
    // holds, so a child asks).
    let host_write_locks = || {
        let out = output(Command::new("python3").args([
            "-c",
            "import fcntl, sys\n\
f = open(sys.argv[1], 'r+b')\n\
try:\n    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB); print('locked')\n\
except OSError as e: print('busy', e)\n",
            &file.display().to_string(),
        ]));
        String::from_utf8_lossy(&out.stdout).contains("locked")
    };
    let mut control = env.sandgate("full-access");
    control.args(["--", "python3", "-c", &script]);
    let (child, held) = start_holding(&mut control);
    let blocked_by_control = held && !host_write_locks();
    end(child);
    assert!(
        blocked_by_control,
        "control: full-access did not hold the lock"
    );

    for mode in ["read-only", "workspace-write"] {
        let mut cmd = env.sandgate(mode);
        cmd.args(["--", "python3", "-c", &script]);
        let (child, held) = start_holding(&mut cmd);
        let host_locked = host_write_locks();
        end(child);
        assert!(
            !held || host_locked,
            "{mode}: the sandboxed command holds a read lock on the host file {}: the \
             host's writers are refused",
            file.display()
        );
    }
}

/// Attack: an earlier call in the workspace keeps a process (`--keep-background`, as the
/// threat model allows) that holds a read lease on the workspace's denial log — a file of
/// the user's, so the lease is the sandbox's to take — ignoring SIGIO. A later call given
/// `--denial-log ws/denials.jsonl` (the common place for it) opens the log for appending
/// without blocking and gets EWOULDBLOCK: it refuses to run at all (exit 64), and the kept
/// process can take the lease again after each break. Should fail: a kept process keeps
/// running, nothing more, and nothing of an earlier call changes what a later sandgate call
/// does (the README: a later call's "configuration, its caches, its audit log"); the later
/// call must run and log.
#[test]
fn redteam_a_kept_lease_does_not_stop_a_later_call_from_logging() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let log = env.ws.join("denials.jsonl");
    {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&log)
            .unwrap();
    }
    let mark = unique_mark("rt4-lease");
    let probe = probe();
    let mut first = env.sandgate("read-only");
    first.env("LEFTOVER_MARK", &mark).args([
        "--keep-background",
        "--",
        "/bin/sh",
        "-c",
        &format!(
            "'{}' read-lease-hold '{}' 30 >/dev/null 2>&1 </dev/null & sleep 1; echo started",
            probe.display(),
            log.display()
        ),
    ]);
    let first_out = output(&mut first);
    let mut later = env.sandgate("read-only");
    later.arg("--denial-log").arg(&log).args(["--", "true"]);
    let later_out = output(&mut later);
    kill_marked(&mark);
    env.stop_kept();
    assert_status(&first_out, 0);
    assert_status(&later_out, 0);
}
