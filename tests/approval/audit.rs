//! The audit pair under concurrency.

use std::process::{Command, Output};

use crate::support::*;

#[test]
fn fifty_parallel_requests_leave_one_hundred_chained_lines() {
    let env = TestEnv::new();
    let approvers = [
        r#"id=$(sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p'); printf '{"id":"%s","decision":"allowed-once"}' "$id""#,
        r#"id=$(sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p'); printf '{"id":"%s","decision":"rejected"}' "$id""#,
        "cat >/dev/null; echo garbage",
        "cat >/dev/null; exit 1",
    ];
    let children: Vec<_> = (0..50)
        .map(|i| {
            let mut cmd = env.sandgate("read-only");
            if i % 5 == 4 {
                cmd.args(["--approval", "never"]);
            }
            cmd.args([
                "--sandbox-permissions",
                "workspace-write",
                "--justification",
                &format!("request {i}"),
            ]);
            cmd.args(["--approver", approvers[i % approvers.len()], "--", "true"]);
            cmd.stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            cmd.spawn().unwrap()
        })
        .collect();
    for mut child in children {
        child.wait().unwrap();
    }
    let records = env.audit_records();
    assert_eq!(records.len(), 100);
    let mut asked = std::collections::HashMap::new();
    let mut decided = std::collections::HashMap::new();
    for r in &records {
        let id = r["id"].as_str().unwrap_or_default().to_owned();
        let map = if r["type"] == "approval/asked" {
            &mut asked
        } else {
            &mut decided
        };
        assert!(map.insert(id, r.clone()).is_none(), "duplicate record {r}");
    }
    assert_eq!(asked.len(), 50);
    assert_eq!(
        asked.keys().collect::<std::collections::BTreeSet<_>>(),
        decided.keys().collect()
    );
    let outcomes: std::collections::BTreeSet<_> = decided
        .values()
        .map(|r| r["outcome"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(outcomes.len(), 3, "mixed outcomes: {outcomes:?}");

    let verify = |log: &std::path::Path| {
        output(
            Command::new(sandgate())
                .args(["audit", "verify", "--log"])
                .arg(log),
        )
    };
    let ok = verify(&env.audit_log());
    assert_status(&ok, 0);
    assert!(String::from_utf8_lossy(&ok.stdout).contains("100 lines"));
    // Editing one line breaks the chain.
    let text = std::fs::read_to_string(env.audit_log()).unwrap_or_default();
    let edited = text.replacen(
        "\"outcome\":\"rejected\"",
        "\"outcome\":\"allowed-once\"",
        1,
    );
    assert_ne!(edited, text);
    std::fs::write(env.audit_log(), edited).unwrap();
    let broken = verify(&env.audit_log());
    assert_status(&broken, 1);
    assert!(
        String::from_utf8_lossy(&broken.stderr).contains("broken at line"),
        "{}",
        show(&broken)
    );
}

#[test]
fn the_audit_log_is_not_writable_from_inside_the_sandbox() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    // Put the log inside the workspace, the worst place for it.
    let log = env.ws.join("audit.jsonl");
    let mut cmd = env.sandgate("workspace-write");
    cmd.env("SANDGATE_AUDIT_LOG", &log).args([
        "--approval",
        "never",
        "--sandbox-permissions",
        "full-access",
        "--justification",
        "x",
        "--",
        "true",
    ]);
    assert_status(&output(&mut cmd), 77);
    let before = std::fs::read(&log).unwrap_or_default();
    assert!(!before.is_empty());
    let mut cmd = env.sandgate("workspace-write");
    cmd.env("SANDGATE_AUDIT_LOG", &log).args([
        "--",
        "/bin/sh",
        "-c",
        "echo forged >> audit.jsonl; : > audit.jsonl; rm -f audit.jsonl; mv audit.jsonl x",
    ]);
    let out = output(&mut cmd);
    assert_command_failed(&out);
    assert_eq!(std::fs::read(&log).unwrap_or_default(), before);
}

/// A shell approver that first runs `first`, then answers `decision` for the request id.
fn approver(first: &str, decision: &str) -> String {
    format!(
        r#"{first}; id=$(sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p'); printf '{{"id":"%s","decision":"{decision}"}}' "$id""#
    )
}

/// Runs `touch ws/ran` at read-only, asking for workspace-write from `approver`, with the
/// audit log at `log`.
fn escalate(env: &TestEnv, log: &std::path::Path, approver: &str, extra: &[&str]) -> Output {
    let mut cmd = env.sandgate("read-only");
    cmd.env("SANDGATE_AUDIT_LOG", log)
        .args(["--sandbox-permissions", "workspace-write"])
        .args(["--justification", "write a file", "--approver", approver])
        .args(extra)
        .args(["--", "touch"])
        .arg(env.ws.join("ran"));
    output(&mut cmd)
}

#[track_caller]
fn assert_stderr_has(out: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in needles {
        assert!(stderr.contains(needle), "no {needle:?} in\n{}", show(out));
    }
}

#[test]
fn a_link_planted_at_the_audit_log_path_is_not_followed() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let bashrc = env.plant_log_links("audit.jsonl", "state");
    let asked = env.root.join("approver-was-asked");
    let granting = approver(&format!("touch '{}'", asked.display()), "allowed-once");
    for (log, why) in [
        (env.ws.join("audit.jsonl"), "it is a symbolic link"),
        (
            env.ws.join("state/.bashrc"),
            "is a symbolic link inside the writable root",
        ),
    ] {
        let out = escalate(&env, &log, &granting, &[]);
        assert_status(&out, 125);
        assert_stderr_has(
            &out,
            &[
                "will not write to the audit log",
                why,
                r#""kind":"unsafe_log""#,
            ],
        );
        assert!(!asked.exists(), "asked without a record of the question");
        assert!(!env.ws.join("ran").exists(), "the command ran");
        // A call that asks for nothing runs, and says what is wrong with the log path.
        let mut cmd = env.sandgate("read-only");
        cmd.env("SANDGATE_AUDIT_LOG", &log).args(["--", "true"]);
        let plain = output(&mut cmd);
        assert_status(&plain, 0);
        assert_stderr_has(&plain, &["warning: will not write to the audit log"]);
        assert_eq!(std::fs::read(&bashrc).unwrap_or_default(), b"keep\n");
    }
    // Control: without the link, the same request is asked, granted and recorded there.
    std::fs::remove_file(env.ws.join("audit.jsonl")).unwrap();
    let out = escalate(&env, &env.ws.join("audit.jsonl"), &granting, &[]);
    assert_status(&out, 0);
    assert!(asked.exists() && env.ws.join("ran").exists());
    let records = std::fs::read_to_string(env.ws.join("audit.jsonl")).unwrap_or_default();
    assert_eq!(records.lines().count(), 2);
    assert_eq!(std::fs::read(&bashrc).unwrap_or_default(), b"keep\n");
}

/// Holds `flock` on `path` from another process group until dropped.
/// The file sandgate locks to append to `log`: in `/tmp/sandgate-UID`, named after the
/// log's path (see `audit.rs`).
fn lock_file_of(log: &std::path::Path) -> std::path::PathBuf {
    use sha2::Digest;
    let hash: String = sha2::Sha256::digest(log.as_os_str().as_encoded_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::path::PathBuf::from(format!("/tmp/sandgate-{}", nix::unistd::geteuid()))
        .join(format!("audit-{}.lock", &hash[..16]))
}

struct LockHolder(std::process::Child);

impl LockHolder {
    fn hold(path: &std::path::Path, ready: &std::path::Path) -> LockHolder {
        use std::os::unix::process::CommandExt;
        let child = Command::new("flock")
            .arg(path)
            .args(["sh", "-c", r#"touch "$0"; exec sleep 30"#])
            .arg(ready)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("flock: {e}"));
        let start = std::time::Instant::now();
        while !ready.exists() {
            assert!(start.elapsed().as_secs() < 20, "flock never took the lock");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        LockHolder(child)
    }
}

impl Drop for LockHolder {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.0.id()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.0.wait();
    }
}

#[test]
fn a_held_audit_lock_delays_an_escalation_only_a_bounded_time() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let log = env.audit_log();
    let asked = env.root.join("approver-was-asked");
    let granting = approver(&format!("touch '{}'", asked.display()), "allowed-once");
    // A first request creates the log.
    let out = escalate(&env, &log, &granting, &["--approval", "never"]);
    assert_status(&out, 77);
    let before = std::fs::read(&log).unwrap();
    {
        let _holder = LockHolder::hold(&lock_file_of(&log), &env.root.join("locked"));
        let start = std::time::Instant::now();
        let out = escalate(&env, &log, &granting, &[]);
        let waited = start.elapsed();
        assert!(waited.as_secs() < 10, "waited {waited:?}\n{}", show(&out));
        assert_status(&out, 125);
        assert_stderr_has(
            &out,
            &[
                "stayed locked",
                "held by pid",
                "flock",
                r#""kind":"audit_locked""#,
            ],
        );
        assert!(!asked.exists() && !env.ws.join("ran").exists());
        // A refusal stays a refusal when its record cannot be written.
        let out = escalate(&env, &log, &granting, &["--approval", "never"]);
        assert_status(&out, 77);
        assert_stderr_has(
            &out,
            &[
                "warning: the audit log",
                "refused all the same",
                "policy_never",
            ],
        );
        assert_eq!(std::fs::read(&log).unwrap_or_default(), before);
    }
    // Control: the lock released, the same request goes through.
    let out = escalate(&env, &log, &granting, &[]);
    assert_status(&out, 0);
    assert!(asked.exists() && env.ws.join("ran").exists());
}

#[test]
fn an_unwritable_audit_log_blocks_a_grant_but_never_turns_a_refusal_into_125() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let log = env.audit_log();
    let target = env.outside.join("target");
    std::fs::write(&target, "keep\n").unwrap();
    // The approver answers after the `asked` record is written, and breaks the log before
    // the `decided` one: the path now holds a link sandgate will not write through.
    let breaking = format!(
        "mv '{l}' '{l}.moved' && ln -s '{t}' '{l}'",
        l = log.display(),
        t = target.display()
    );
    let restore = || {
        std::fs::remove_file(&log).unwrap();
        std::fs::rename(log.with_extension("jsonl.moved"), &log).unwrap();
    };
    for decision in ["rejected", "garbage"] {
        let out = escalate(&env, &log, &approver(&breaking, decision), &[]);
        assert_status(&out, 77);
        assert_stderr_has(
            &out,
            &[
                "warning: will not write to the audit log",
                "refused all the same",
                r#""kind":"escalation_rejected""#,
            ],
        );
        restore();
    }
    let out = escalate(&env, &log, &approver(&breaking, "allowed-once"), &[]);
    assert_status(&out, 125);
    assert_stderr_has(
        &out,
        &["will not write to the audit log", "the command was not run"],
    );
    assert!(!env.ws.join("ran").exists(), "the command ran");
    assert_eq!(std::fs::read(&target).unwrap_or_default(), b"keep\n");
    restore();
    // Control: with the log left alone, the same grant runs the command.
    let out = escalate(&env, &log, &approver("true", "allowed-once"), &[]);
    assert_status(&out, 0);
    assert!(env.ws.join("ran").exists());
}

#[test]
fn a_missing_home_is_never_created_and_an_escalation_without_a_log_is_refused() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let home = env.root.join("no-such-home");
    let mut cmd = env.sandgate("read-only");
    cmd.env_remove("SANDGATE_AUDIT_LOG")
        .env("HOME", &home)
        .args(["--sandbox-permissions", "workspace-write"])
        .args(["--justification", "write a file", "--approver"])
        .arg(approver("true", "allowed-once"))
        .args(["--", "touch"])
        .arg(env.ws.join("ran"));
    let out = output(&mut cmd);
    assert_status(&out, 125);
    assert_stderr_has(&out, &["pass --audit-log"]);
    assert!(!home.exists(), "sandgate created the missing home");
    assert!(!env.ws.join("ran").exists());
}
