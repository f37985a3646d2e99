//! Red team, round 7, continued: the regular-file stdout/stderr relay's last drain (what
//! `FIONREAD` counted) and its detached copier (own session, takes signals)
//! (`exec/relay.rs`). See `redteam_round7` for how the tests are built.

use crate::support::*;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// 4. The relay: the last drain and the detached copier.
// ---------------------------------------------------------------------------------------

/// The burst: grows its stdout pipe to 1 MiB (`F_SETPIPE_SZ`), writes 1 MiB of numbered
/// lines at once (it fits: the write returns before anyone reads) and exits at once.
const BURST: &str = r#"import fcntl, os
try:
    fcntl.fcntl(1, 1031, 1 << 20)
except OSError:
    pass
data = b"".join(b"%07d\n" % i for i in range(131072))
n = 0
while n < len(data):
    n += os.write(1, data[n:])
"#;

/// Attack on completeness: the last drain copies only what `FIONREAD` counted "when the
/// command ended". A command that fills an enlarged pipe (1 MiB, more than the copy of one
/// round) and exits at once, with and without `--keep-background`, and the same from a
/// background child that the call ends (no keep): anything the count missed is lost. Should
/// fail: the file holds all of it when sandgate returns (README: "all of it before sandgate
/// returns").
#[test]
fn redteam_round7_a_full_enlarged_pipe_is_copied_whole() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    env.put("burst.py", BURST, 0o644);
    let mark = unique_mark("rt7-burst");
    let expected = 131_072 * 8;
    let mut failures = vec![];
    for (how, keep, script) in [
        ("exits", false, "exec python3 burst.py"),
        ("kept call", true, "exec python3 burst.py"),
        ("background child", false, "python3 burst.py & wait"),
    ] {
        // (Nothing can be kept without a PID namespace: the landlock backend refuses it.)
        if keep && landlock_backend() {
            continue;
        }
        let log = env.outside.join("burst.log");
        std::fs::write(&log, "").unwrap();
        let mut cmd = env.sandgate("read-only");
        if keep {
            cmd.arg("--keep-background");
        }
        let status = cmd
            .args(["--", "/bin/sh", "-c", script, &mark])
            .stdin(Stdio::null())
            .stdout(Stdio::from(
                std::fs::OpenOptions::new().append(true).open(&log).unwrap(),
            ))
            .stderr(Stdio::null())
            .status()
            .unwrap();
        let got = std::fs::read(&log).unwrap_or_default();
        if status.code() != Some(0) || got.len() != expected {
            failures.push(format!(
                "{how}: status {:?}, {} of {expected} bytes in the log when sandgate returned",
                status.code(),
                got.len()
            ));
        }
    }
    env.stop_kept();
    kill_marked(&mark);
    assert_none(failures);
}

/// The kept writer: a line every 50 ms, for at most 20 s.
const TICKER: &str = r#"import sys, time
for i in range(400):
    print("tick", i, flush=True)
    time.sleep(0.05)
"#;

/// Attack: a copier that outlives what it should, or holds what it should not. A call that
/// keeps a writer (`--keep-background`) leaves sandgate's detached copier running for it.
/// Checked: the copier holds nothing but its pipe and the log (no terminal, no other file
/// of sandgate's), is in a session of its own, copies the kept writer's output, and is
/// gone soon after `sandgate stop` ends the writer. Should hold.
#[test]
fn redteam_round7_the_copier_ends_with_the_kept_writer_and_holds_nothing_else() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    env.put("ticker.py", TICKER, 0o644);
    let mark = unique_mark("rt7-copier");
    let log = env.outside.join("ticks.log");
    std::fs::write(&log, "").unwrap();
    let status = kept_call_appending_to(
        &env,
        "python3 ticker.py </dev/null & sleep 0.2",
        &mark,
        &log,
    );
    // Ticks from well after the call returned: the copier's.
    let copied = wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("tick 12"))
    });
    let my_sid = session_of(std::process::id() as i32);
    assert!(my_sid.is_some(), "control: this test's own session");
    let mut failures = vec![];
    let copiers: Vec<i32> = processes_marked(&mark)
        .into_iter()
        .filter(|pid| {
            // sandgate's fork that copies: not the supervisor handed over for the kept
            // processes (which holds the seccomp listener; see the next test).
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|exe| exe.file_name() == sandgate().file_name())
                && !holders_of(*pid, "anon_inode:seccomp")
        })
        .collect();
    for pid in &copiers {
        let fds: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| {
                d.filter_map(|e| {
                    let e = e.ok()?;
                    let target = std::fs::read_link(e.path()).ok()?;
                    Some(format!(
                        "{}->{}",
                        e.file_name().to_string_lossy(),
                        target.display()
                    ))
                })
                .collect()
            })
            .unwrap_or_default();
        let extra: Vec<&String> = fds
            .iter()
            .filter(|f| !f.contains("pipe:[") && !f.ends_with("ticks.log"))
            .collect();
        if !extra.is_empty() || fds.len() > 2 {
            failures.push(format!(
                "the copier {pid} holds more than its pipe and log: {fds:?}"
            ));
        }
        if session_of(*pid) == my_sid {
            failures.push(format!("the copier {pid} is in the caller's session"));
        }
    }
    env.stop_kept();
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until && !processes_marked(&mark).is_empty() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = processes_marked(&mark);
    kill_marked(&mark);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(status.code(), Some(0));
    if copiers.is_empty() {
        failures.push("control: no copier found for the kept writer".to_owned());
    }
    if !copied {
        failures.push(format!(
            "the kept writer's output did not reach the log: {text:?}"
        ));
    }
    if !left.is_empty() {
        failures.push(format!(
            "still running 5 s after `sandgate stop` ended the kept writer: {left:?}"
        ));
    }
    assert_none(failures);
}

/// Runs `script` (`$0` is `mark`) under read-only with `--keep-background`, its stdout
/// appended to `log` as `>> log` does; returns once sandgate has.
fn kept_call_appending_to(
    env: &TestEnv,
    script: &str,
    mark: &str,
    log: &Path,
) -> std::process::ExitStatus {
    let log = std::fs::OpenOptions::new().append(true).open(log).unwrap();
    env.sandgate("read-only")
        .args(["--keep-background", "--", "/bin/sh", "-c", script, mark])
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::null())
        .status()
        .unwrap()
}

/// Whether process `pid` holds an fd whose target contains `what`.
fn holders_of(pid: i32, what: &str) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|d| {
        d.filter_map(Result::ok)
            .any(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().contains(what)))
    })
}

/// The host pids holding `file` open (as far as this uid can see).
fn processes_holding(file: &Path) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    let me = std::process::id() as i32;
    let name = file.display().to_string();
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|d| {
                d.filter_map(Result::ok).any(|e| {
                    std::fs::read_link(e.path()).is_ok_and(|t| t.display().to_string() == name)
                })
            })
        })
        .collect()
}

/// Attack: hold the caller's log past the call with a process that never writes to it. A
/// call with `--keep-background` keeps a process that holds nothing of the call's output
/// (`sleep` with every standard fd on `/dev/null`): its copier finds the pipe closed and
/// is gone. But the supervisor sandgate hands over to the kept processes was forked while
/// sandgate held its duplicate of the caller's `build.log` and the relay pipe's read end,
/// and keeps both for as long as the kept processes run — hours for a dev server. The
/// log stays open in a process of sandgate's (its space is not freed when the user
/// deletes it, the filesystem holding it cannot be unmounted), and a kept writer no
/// longer gets `EPIPE` once its copier is gone: the pipe has a reader that never reads.
/// Should fail: what the call kept is what it asked for; nothing else of sandgate's holds
/// the caller's file once its copier has nothing to copy.
#[test]
fn redteam_round7_no_process_of_sandgate_holds_the_log_once_nothing_writes_it() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let mark = unique_mark("rt7-held");
    let log = env.outside.join("held.log");
    std::fs::write(&log, "").unwrap();
    let status = kept_call_appending_to(
        &env,
        "sleep 20 </dev/null >/dev/null 2>&1 & echo started",
        &mark,
        &log,
    );
    std::thread::sleep(Duration::from_millis(500));
    let holding = processes_holding(&log);
    let described: Vec<String> = holding
        .iter()
        .map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
                .unwrap_or_default();
            let listener = holders_of(*pid, "anon_inode:seccomp");
            format!("{pid} (seccomp listener: {listener}): {cmd}")
        })
        .collect();
    env.stop_kept();
    kill_marked(&mark);
    assert_eq!(status.code(), Some(0));
    assert!(
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("started"),
        "control: the command's output is missing"
    );
    assert!(
        holding.is_empty(),
        "after the call, with nothing left to write to it, the caller's log is still held \
         open by: {described:?}"
    );
}
