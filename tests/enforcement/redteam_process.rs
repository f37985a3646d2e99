//! Red team, the process boundary: what a call leaves running past the limits it was given.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::*;

/// `sandgate stop --all` in `env` (the test's own runtime and records), and the marked
/// processes killed by host pid: nothing this test started is left behind.
fn clean_up(env: &TestEnv, mark: &str) {
    let mut cmd = Command::new(sandgate());
    env.isolate(&mut cmd);
    let _ = output(
        cmd.current_dir(&env.ws)
            .args(["stop", "--workspace"])
            .arg(&env.ws),
    );
    kill_marked(mark);
}

/// Runs a call under each restricted mode that keeps `sleep` with `--keep-background` and
/// `extra` arguments, and returns a failure for each mode whose kept process still runs
/// 6 s later (a 1 s limit, 2 s from SIGTERM to SIGKILL, and room for a loaded machine).
fn kept_past_a_one_second_limit(env: &TestEnv, extra: &[&str], what: &str) -> Vec<String> {
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let mark = unique_mark("kept-timeout");
        let mut cmd = env.sandgate(mode);
        cmd.env("LEFTOVER_MARK", &mark)
            .arg("--keep-background")
            .args(extra)
            .args([
                "--",
                "/bin/sh",
                "-c",
                "sleep 1021 >/dev/null 2>&1 & echo started",
            ]);
        let out = output(&mut cmd);
        // Without a PID namespace (the landlock backend) nothing can be kept: refused.
        if landlock_backend() {
            let left = processes_marked(&mark);
            clean_up(env, &mark);
            assert_status(&out, 78);
            assert!(left.is_empty(), "{mode}: {left:?}");
            continue;
        }
        assert_status(&out, 0);
        let deadline = Instant::now() + Duration::from_secs(6);
        while Instant::now() < deadline && !processes_marked(&mark).is_empty() {
            std::thread::sleep(Duration::from_millis(200));
        }
        let left = processes_marked(&mark);
        clean_up(env, &mark);
        if !left.is_empty() {
            failures.push(format!(
                "{mode}: kept processes {left:?} still run 6 s after {what}"
            ));
        }
    }
    failures
}

/// Attack: the managed configuration sets `timeout` as a ceiling on every call ("the
/// managed configuration's is a ceiling"); the command asks `--keep-background` and leaves
/// a process behind. The README says that when the time passes sandgate kills
/// "everything left in the namespace (kept processes included)". The command itself ends
/// at once, so sandgate returns before the deadline — and nothing enforced the deadline on
/// what it kept. Should fail: the kept process must be gone once the ceiling (plus the
/// 2 s grace) has passed.
#[test]
fn redteam_a_kept_process_does_not_outlive_the_managed_time_limit() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    std::fs::write(env.root.join("managed.json"), r#"{"timeout": "1s"}"#).unwrap();
    assert_none(kept_past_a_one_second_limit(
        &env,
        &[],
        "a 1 s managed timeout",
    ));
}

/// Attack: the same with the call's own `--timeout`: the user bounds the call to 1 s, and
/// the README's kill covers "kept processes included". Should fail as above.
#[test]
fn redteam_a_kept_process_does_not_outlive_the_calls_time_limit() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    assert_none(kept_past_a_one_second_limit(
        &env,
        &["--timeout", "1s"],
        "--timeout 1s",
    ));
}
