//! Validation before anything else, `never`, one call only, nested calls.

use crate::support::endpoint::{Reply, TestEndpoint};
use crate::support::*;

/// Runs `touch OUTSIDE/f` at workspace-write asking for full-access with `extra` flags.
fn escalate(env: &TestEnv, mode: &str, extra: &[&str]) -> std::process::Output {
    let target = env.outside.join("f");
    let mut cmd = env.sandgate(mode);
    cmd.args(extra).args(["--", "touch"]).arg(&target);
    output(&mut cmd)
}

#[test]
fn invalid_requests_exit_64_before_anything_happens() {
    let env = TestEnv::new();
    let ep = TestEndpoint::http(|req, _| Reply::decision(req, "allowed-once"));
    let long = "x".repeat(1001);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--sandbox-permissions", "full-access"],
            "needs --justification",
        ),
        (
            vec!["--justification", "because"],
            "needs --sandbox-permissions",
        ),
        (
            vec![
                "--sandbox-permissions",
                "full-access",
                "--justification",
                "   ",
            ],
            "blank",
        ),
        (
            vec![
                "--sandbox-permissions",
                "full-access",
                "--justification",
                "a\u{1b}[2Jb",
            ],
            "control characters",
        ),
        (
            vec![
                "--sandbox-permissions",
                "full-access",
                "--justification",
                &long,
            ],
            "at most 1000",
        ),
        (
            vec!["--sandbox-permissions", "root", "--justification", "why"],
            "unknown sandbox mode",
        ),
        (
            vec![
                "--sandbox-permissions",
                "workspace-write",
                "--justification",
                "why",
            ],
            "standing mode already",
        ),
        (
            vec![
                "--sandbox-permissions",
                "read-only",
                "--justification",
                "why",
            ],
            "narrower",
        ),
    ];
    for (flags, message) in cases {
        let mut args = flags.clone();
        args.extend(["--approval-endpoint", &ep.url]);
        let out = escalate(&env, "workspace-write", &args);
        assert_status(&out, 64);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message), "{flags:?}: {}", show(&out));
        assert!(
            stderr.contains("\"kind\":\"invalid_escalation\""),
            "{}",
            show(&out)
        );
        assert!(!env.outside.join("f").exists());
    }
    // The same through the environment variables.
    let mut cmd = env.sandgate("workspace-write");
    cmd.env("SANDGATE_SANDBOX_PERMISSIONS", "full-access")
        .env("SANDGATE_APPROVAL_ENDPOINT", &ep.url);
    cmd.args(["--", "touch"]).arg(env.outside.join("f"));
    assert_status(&output(&mut cmd), 64);
    assert!(ep.requests().is_empty(), "the endpoint was contacted");
    assert!(
        env.audit_records().is_empty(),
        "an invalid request is not an escalation"
    );
}

#[test]
fn policy_never_rejects_without_asking_and_is_audited() {
    let env = TestEnv::new();
    let ep = TestEndpoint::http(|req, _| Reply::decision(req, "allowed-once"));
    let mut cmd = env.sandgate_without_workspace("workspace-write");
    cmd.args(["--workspace"]).arg(&env.ws).args([
        "--preset",
        "ci",
        "--sandbox-permissions",
        "full-access",
    ]);
    cmd.args([
        "--justification",
        "needs network",
        "--approval-endpoint",
        &ep.url,
        "--",
        "touch",
    ])
    .arg(env.outside.join("f"));
    // `--sandbox workspace-write` from TestEnv and `--preset ci` agree on the mode.
    let out = output(&mut cmd);
    assert_status(&out, 77);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the approval policy is never"),
        "{}",
        show(&out)
    );
    assert!(
        stderr.contains("\"kind\":\"policy_never\""),
        "{}",
        show(&out)
    );
    assert!(ep.requests().is_empty());
    assert!(!env.outside.join("f").exists());
    let records = env.audit_records();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["type"], "approval/asked");
    assert_eq!(records[1]["type"], "approval/decided");
    assert_eq!(records[0]["id"], records[1]["id"]);
    assert_eq!(records[1]["outcome"], "rejected");
}

#[test]
fn a_grant_covers_this_call_only() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let ep = TestEndpoint::http(|req, _| Reply::decision(req, "allowed-once"));
    let out = escalate(
        &env,
        "workspace-write",
        &[
            "--sandbox-permissions",
            "full-access",
            "--justification",
            "write a report outside",
            "--approval-endpoint",
            &ep.url,
        ],
    );
    assert_status(&out, 0);
    assert!(
        env.outside.join("f").exists(),
        "granted full-access did not apply: {}",
        show(&out)
    );
    let requests = ep.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r["version"], 1);
    assert_eq!(r["kind"], "sandbox_escalation");
    assert_eq!(r["standing"]["mode"], "workspace-write");
    assert_eq!(r["standing"]["approval"], "on-request");
    assert_eq!(r["standing"]["preset"], "workspace-write");
    assert_eq!(r["requested"]["mode"], "full-access");
    assert_eq!(r["requested"]["justification"], "write a report outside");
    assert_eq!(
        r["options"],
        serde_json::json!(["allowed-once", "rejected"])
    );
    assert_eq!(r["command"]["argv"][0], "touch");
    assert!(r["expires_at"].is_string() && r["id"].is_string());
    assert_eq!(r["workspace"], env.ws.to_string_lossy().as_ref());
    // The next call, without a request, is back at the standing mode.
    std::fs::remove_file(env.outside.join("f")).unwrap();
    let out = escalate(&env, "workspace-write", &["--approval-endpoint", &ep.url]);
    assert_command_failed(&out);
    assert!(!env.outside.join("f").exists());
    assert_eq!(ep.requests().len(), 1);
    let decided: Vec<_> = env
        .audit_records()
        .into_iter()
        .filter(|r| r["type"] == "approval/decided")
        .collect();
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0]["outcome"], "allowed-once");
}

#[test]
fn a_nested_sandgate_cannot_ask() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let ep = TestEndpoint::unix(&env.root.join("ep.sock"), |req, _| {
        Reply::decision(req, "allowed-once")
    });
    let inner = format!(
        "'{}' --sandbox-permissions full-access --justification 'let me out' --approval-endpoint '{}' --audit-log '{}' -- touch '{}'",
        sandgate_inside().display(),
        ep.url,
        env.ws.join("inner-audit.jsonl").display(),
        env.outside.join("f").display()
    );
    let out = env.sh("workspace-write", &inner);
    assert_status(&out, 77);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"kind\":\"nested_widening\""),
        "{}",
        show(&out)
    );
    assert!(ep.requests().is_empty());
    assert!(!env.outside.join("f").exists());
    // Refused before the audit log is touched, even one the sandbox could write.
    assert!(!env.ws.join("inner-audit.jsonl").exists(), "{}", show(&out));
}
