//! Output never decides the command's fate: a closed or full stderr costs sandgate its
//! say, never the command its run or its status; the denial log still gets every marker.

use std::io::{BufRead, BufReader};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// A script whose three writes outside the workspace are refused (their own complaints
/// go to /dev/null: the command's writes to a closed pipe are its own business), and which
/// then leaves `after` behind.
fn three_refused_writes_then(outside: &Path, after: &Path) -> String {
    format!(
        "echo first; sleep 0.5; for f in a b c; do echo x > '{}/'$f; done 2>/dev/null; echo done > '{}'",
        outside.display(),
        after.display()
    )
}

fn denial_paths(log: &Path) -> Vec<String> {
    let mut paths: Vec<String> = read_markers(log)
        .iter()
        .filter(|m| m["kind"] == "sandbox_denial")
        .filter_map(|m| m["path"].as_str().map(str::to_owned))
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// Waits for `child` at most `limit`; kills it and fails past that.
fn wait_within(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("sandgate still runs after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `sandgate -- CMD 2>&1 | head -1`: both streams into one pipe whose reader leaves
/// after the first line.
fn spawn_into_head(mut cmd: Command) -> std::process::Child {
    let (reader, writer) = nix::unistd::pipe().unwrap();
    let second: OwnedFd = writer.try_clone().unwrap();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(second));
    let child = cmd.spawn().unwrap();
    drop(cmd);
    let mut first = String::new();
    let _ = BufReader::new(std::fs::File::from(reader)).read_line(&mut first);
    assert!(!first.is_empty(), "nothing came before the reader left");
    child
}

#[test]
fn a_closed_stderr_never_decides_the_commands_fate() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for observe in [true, false] {
        let log = env.root.join(format!("closed-{observe}.ndjson"));
        let after = env.ws.join(format!("after-{observe}"));
        let mut cmd = env.sandgate("workspace-write");
        if !observe {
            cmd.arg("--no-observe");
        }
        cmd.arg("--denial-log").arg(&log).args([
            "--",
            "/bin/sh",
            "-c",
            &three_refused_writes_then(&env.outside, &after),
        ]);
        let mut child = spawn_into_head(cmd);
        let status = wait_within(&mut child, Duration::from_secs(60));
        assert_eq!(status.code(), Some(0), "observe {observe}: {status:?}");
        assert!(
            after.exists(),
            "observe {observe}: the command did not finish"
        );
        let want: Vec<String> = ["a", "b", "c"]
            .iter()
            .map(|f| env.outside.join(f).to_string_lossy().into_owned())
            .collect();
        if observe {
            assert_eq!(denial_paths(&log), want);
        } else {
            assert!(denial_paths(&log).is_empty());
        }
        for f in ["a", "b", "c"] {
            assert!(!env.outside.join(f).exists());
        }
    }
}

#[test]
fn the_detached_supervisor_logs_a_background_processs_refusals() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let log = env.root.join("background.ndjson");
    let done = env.ws.join("bg-done");
    let script = format!(
        "(sleep 1; for f in d e f; do echo x > '{}/'$f; done 2>/dev/null; echo ok > '{}') & echo first",
        env.outside.display(),
        done.display()
    );
    let mut cmd = env.sandgate("workspace-write");
    cmd.arg("--denial-log")
        .arg(&log)
        .args(["--keep-background", "--", "/bin/sh", "-c", &script]);
    let mut child = spawn_into_head(cmd);
    let status = wait_within(&mut child, Duration::from_secs(60));
    assert_eq!(status.code(), Some(0));
    let started = Instant::now();
    while !done.exists() && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(done.exists(), "the background process never finished");
    if observing() {
        let want: Vec<String> = ["d", "e", "f"]
            .iter()
            .map(|f| env.outside.join(f).to_string_lossy().into_owned())
            .collect();
        assert_eq!(denial_paths(&log), want);
    }
}

/// A pipe nobody drains, filled to the brim; `foreign`: with a mode that lets no one open
/// it again, as a pipe made by another user (`sudo -u … sandgate … 2>&1 | …`) is to sandgate.
fn full_pipe(foreign: bool) -> (OwnedFd, OwnedFd) {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let (reader, writer) = nix::unistd::pipe().unwrap();
    fcntl(&writer, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).unwrap();
    while nix::unistd::write(&writer, &[b'.'; 4096]).is_ok() {}
    fcntl(&writer, FcntlArg::F_SETFL(OFlag::empty())).unwrap();
    if foreign {
        nix::sys::stat::fchmod(&writer, nix::sys::stat::Mode::empty()).unwrap();
    }
    (reader, writer)
}

#[test]
fn a_full_stderr_holds_neither_the_command_nor_sandgate() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for foreign in [false, true] {
        let log = env.root.join(format!("full-{foreign}.ndjson"));
        let after = env.ws.join(format!("after-{foreign}"));
        let (reader, writer) = full_pipe(foreign);
        let script = format!(
            "for f in a b c; do echo x > '{}/'$f; done 2>/dev/null; echo done > '{}'; exit 3",
            env.outside.display(),
            after.display()
        );
        let mut cmd = if foreign {
            bound_by_file_modes(env.sandgate("workspace-write"))
        } else {
            env.sandgate("workspace-write")
        };
        cmd.arg("--denial-log")
            .arg(&log)
            .args(["--", "/bin/sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(writer));
        let mut child = cmd.spawn().unwrap();
        drop(cmd);
        // The command failed, so sandgate has markers to show and nowhere to put them.
        let status = wait_within(&mut child, Duration::from_secs(30));
        drop(reader);
        assert_eq!(status.code(), Some(3), "foreign {foreign}");
        assert!(after.exists(), "foreign {foreign}");
        if observing() {
            assert_eq!(denial_paths(&log).len(), 3, "foreign {foreign}");
        }
    }
}

#[test]
fn a_full_terminal_that_cannot_be_reopened_holds_sandgate_two_seconds_at_most() {
    if !require_full_enforcement() {
        return;
    }
    // stderr is a terminal sandgate may not open anew (another user's, as after `su` or
    // `sudo -u`; here one whose mode says no one may open it), and its reader has stopped
    // (a stalled ssh session): almost full, yet with room enough that poll calls it
    // writable. A marker longer than that room must not hold sandgate past its patience.
    let env = TestEnv::new();
    let log = env.root.join("tty.ndjson");
    let pty = nix::pty::openpty(None, None).unwrap();
    let slave = pty.slave;
    let flags = nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(&slave, nix::fcntl::FcntlArg::F_SETFL(flags)).unwrap();
    while nix::unistd::write(&slave, &[b'.'; 512]).is_ok() {}
    nix::fcntl::fcntl(
        &slave,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
    )
    .unwrap();
    let mut freed = 0;
    while freed < 300 {
        let mut buf = [0u8; 300];
        freed += nix::unistd::read(&pty.master, &mut buf[..300 - freed]).unwrap();
    }
    nix::sys::stat::fchmod(&slave, nix::sys::stat::Mode::empty()).unwrap();
    let script = format!(
        "for i in $(seq 1 20); do echo x > '{}/'$i; done 2>/dev/null; exit 3",
        env.outside.display()
    );
    let mut cmd = bound_by_file_modes(env.sandgate("workspace-write"));
    cmd.arg("--denial-log")
        .arg(&log)
        .args(["--", "/bin/sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(slave));
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    let status = wait_within(&mut child, Duration::from_secs(30));
    drop(pty.master);
    assert_eq!(status.code(), Some(3));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    if observing() {
        assert_eq!(denial_paths(&log).len(), 20);
    }
}

#[test]
fn the_detached_supervisor_does_not_hold_the_callers_stderr() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    // sandgate writes to stderr before the command ends (the --no-observe note), and the
    // command leaves a process behind (kept) that keeps the sandbox alive: the processes
    // that go on serving it (the detached supervisor, the namespace's init) must not keep
    // the caller's pipe open, or the caller's read of sandgate's output never ends.
    use std::io::Read;
    let env = TestEnv::new();
    let mut cmd = env.sandgate("workspace-write");
    cmd.args([
        "--no-observe",
        "--keep-background",
        "--",
        "/bin/sh",
        "-c",
        "sleep 20 >/dev/null 2>&1 </dev/null & exit 0",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    let status = wait_within(&mut child, Duration::from_secs(60));
    assert_eq!(status.code(), Some(0));
    let text = rx
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("stderr is still held open after sandgate returned"));
    assert!(text.contains("observation_off"), "{text}");
}
