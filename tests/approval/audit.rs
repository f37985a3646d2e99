//! The audit pair under concurrency (acceptance 7).

use std::process::Command;

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
            cmd.spawn().unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    for mut child in children {
        child.wait().unwrap_or_else(|e| panic!("{e}"));
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
    std::fs::write(env.audit_log(), edited).unwrap_or_else(|e| panic!("{e}"));
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
