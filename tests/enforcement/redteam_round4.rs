//! Red team, round 4: what a sandboxed command can hold on the host's files while it runs,
//! and after it when it is kept. Each test performs the attack as the sandboxed command
//! would and asserts that it fails, with a control under `full-access` that shows the
//! payload is real.
//!
//! An attack that gets through is a failing test.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

use crate::support::*;

/// Starts `cmd` (a sandgate running `flock -x FILE sh -c 'echo held; sleep 5'`) and waits
/// until it says it holds the lock (or gives up after 20 s); returns the child.
fn start_holding(cmd: &mut Command) -> (Child, bool) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut reader = BufReader::new(stdout);
    let held = reader.read_line(&mut line).is_ok() && line.trim() == "held";
    assert!(Instant::now() < deadline, "the command did not start in time");
    (child, held)
}

/// True when the host can take an exclusive `flock` on `file` at once.
fn host_can_lock(file: &Path) -> bool {
    let f = std::fs::File::open(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    Flock::lock(f, FlockArg::LockExclusiveNonblock).is_ok()
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
fn redteam_a_read_only_command_cannot_hold_a_lock_on_a_host_file() {
    let env = TestEnv::new();
    let file = env.outside.join("tool.lock");
    std::fs::write(&file, "").unwrap_or_else(|e| panic!("{e}"));

    // Control: full-access holds the host's lock (the payload is real).
    let mut control = env.sandgate("full-access");
    control.args(["--", "sh", "-c", &holder_script(&file)]);
    let (child, held) = start_holding(&mut control);
    let blocked_by_control = held && !host_can_lock(&file);
    end(child);
    assert!(blocked_by_control, "control: full-access did not hold the lock");

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
fn redteam_a_workspace_write_command_cannot_hold_a_lock_on_a_read_only_host_file() {
    let env = TestEnv::new();
    let file = env.outside.join("tool.lock");
    std::fs::write(&file, "").unwrap_or_else(|e| panic!("{e}"));
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
    std::fs::write(&file, "host data\n").unwrap_or_else(|e| panic!("{e}"));
    let probe = probe();

    // Control: full-access takes the lease and holds the host's writers back.
    let mut control = env.sandgate("full-access");
    control.arg("--").arg(&probe).arg("read-lease-hold").arg(&file).arg("5");
    let (child, held) = start_holding(&mut control);
    let blocked_by_control = held && !host_can_open_for_writing(&file);
    end(child);
    assert!(blocked_by_control, "control: full-access did not hold the lease");

    let mut cmd = env.sandgate("read-only");
    cmd.arg("--").arg(&probe).arg("read-lease-hold").arg(&file).arg("5");
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
