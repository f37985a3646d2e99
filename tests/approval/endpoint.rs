//! The approval endpoint: exactly `allowed-once` with the right id
//! grants; every hostile reply maps to its outcome and never runs the command.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::endpoint::{Reply, TestEndpoint};
use crate::support::*;

type Respond = fn(&Value, &[Value]) -> Reply;

fn ask_with(env: &TestEnv, url: &str, timeout: &str) -> std::process::Output {
    env.ask_for_workspace_write(&["--approval-endpoint", url], timeout)
}

#[test]
fn hostile_replies_never_run_the_command() {
    let table: Vec<(&str, Respond, &str)> = vec![
        ("approve", |r, _| Reply::decision(r, "approve"), "rejected"),
        ("allow", |r, _| Reply::decision(r, "allow"), "rejected"),
        (
            "allowed_once",
            |r, _| Reply::decision(r, "allowed_once"),
            "rejected",
        ),
        (
            "ALLOWED-ONCE",
            |r, _| Reply::decision(r, "ALLOWED-ONCE"),
            "rejected",
        ),
        (
            "allow_always",
            |r, _| Reply::decision(r, "allow_always"),
            "rejected",
        ),
        (
            "decision true",
            |r, _| Reply::Http(200, json!({"id": r["id"], "decision": true}).to_string()),
            "rejected",
        ),
        (
            "wrong id",
            |_, _| {
                Reply::Http(
                    200,
                    json!({"id": "0123", "decision": "allowed-once"}).to_string(),
                )
            },
            "unavailable",
        ),
        (
            "missing id",
            |_, _| Reply::Http(200, json!({"decision": "allowed-once"}).to_string()),
            "unavailable",
        ),
        (
            "earlier id",
            |r, earlier| {
                let id = earlier.last().map_or(json!("none"), |e| e["id"].clone());
                assert_ne!(id, r["id"]);
                Reply::Http(
                    200,
                    json!({"id": id, "decision": "allowed-once"}).to_string(),
                )
            },
            "unavailable",
        ),
        (
            "empty body",
            |_, _| Reply::Http(200, String::new()),
            "unavailable",
        ),
        (
            "not JSON",
            |_, _| Reply::Http(200, "allowed-once".into()),
            "unavailable",
        ),
        (
            "JSON array",
            |r, _| Reply::Http(200, json!([r["id"], "allowed-once"]).to_string()),
            "unavailable",
        ),
        (
            "HTTP 500",
            |r, _| {
                Reply::Http(
                    500,
                    json!({"id": r["id"], "decision": "allowed-once"}).to_string(),
                )
            },
            "unavailable",
        ),
        (
            "302 redirect",
            |r, _| {
                Reply::Http(
                    302,
                    json!({"id": r["id"], "decision": "allowed-once"}).to_string(),
                )
            },
            "unavailable",
        ),
        (
            "1 MiB body",
            |r, _| {
                let pad = "x".repeat(1 << 20);
                Reply::Http(
                    200,
                    json!({"id": r["id"], "decision": "allowed-once", "pad": pad}).to_string(),
                )
            },
            "unavailable",
        ),
        (
            "after the timeout",
            |r, _| {
                Reply::After(
                    Duration::from_secs(3),
                    Box::new(Reply::decision(r, "allowed-once")),
                )
            },
            "cancelled",
        ),
        (
            "closed mid-reply",
            |_, _| Reply::Raw(b"HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n{\"id\":".to_vec()),
            "unavailable",
        ),
    ];
    assert!(table.len() >= 15);
    let env = TestEnv::new();
    for (name, respond, outcome) in table {
        // The first request of each endpoint gets a harmless rejection, so "earlier id"
        // has a real earlier request to point at.
        let ep = TestEndpoint::http(move |r, earlier| {
            if earlier.is_empty() {
                Reply::decision(r, "rejected")
            } else {
                respond(r, earlier)
            }
        });
        assert_status(&ask_with(&env, &ep.url, "1"), 77);
        let before = env.audit_records().len();
        let out = ask_with(&env, &ep.url, "1");
        assert_status(&out, 77);
        assert!(!env.ws.join("ran").exists(), "{name}: the command ran");
        let records = env.audit_records();
        assert_eq!(records.len(), before + 2, "{name}");
        assert_eq!(
            records[before + 1]["outcome"],
            outcome,
            "{name}: {}",
            show(&out)
        );
        let kind = match outcome {
            "rejected" => "escalation_rejected",
            "cancelled" => "escalation_cancelled",
            _ => "approval_unavailable",
        };
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!("\"kind\":\"{kind}\"")),
            "{name}: {}",
            show(&out)
        );
    }
}

#[test]
fn a_refused_connection_is_unavailable_and_does_not_fall_through() {
    let env = TestEnv::new();
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", dead.local_addr().unwrap());
    drop(dead);
    // An approver program is configured too; a failing endpoint must not fall back to it.
    let granted = env.root.join("approver-ran");
    let mut cmd = env.sandgate("read-only");
    cmd.args([
        "--sandbox-permissions",
        "workspace-write",
        "--justification",
        "x",
        "--approval-endpoint",
        &url,
    ]);
    cmd.arg("--approver")
        .arg(format!("touch '{}'; exit 1", granted.display()));
    cmd.args(["--", "touch"]).arg(env.ws.join("ran"));
    let out = output(&mut cmd);
    assert_status(&out, 77);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no approval channel is available"),
        "{}",
        show(&out)
    );
    assert!(
        !granted.exists(),
        "the approver program was asked after the endpoint failed"
    );
    assert!(!env.ws.join("ran").exists());
}

#[test]
fn a_unix_socket_endpoint_grants_with_a_token_file_set() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let token = env.root.join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let ep = TestEndpoint::unix(&env.root.join("approve.sock"), |r, _| {
        Reply::decision(r, "allowed-once")
    });
    let mut cmd = env.sandgate("read-only");
    cmd.env("SANDGATE_APPROVAL_TOKEN_FILE", &token);
    cmd.args([
        "--sandbox-permissions",
        "workspace-write",
        "--justification",
        "write a file",
        "--approval-endpoint",
        &ep.url,
    ]);
    cmd.args(["--", "touch"]).arg(env.ws.join("ran"));
    let out = output(&mut cmd);
    assert_status(&out, 0);
    assert!(env.ws.join("ran").exists(), "{}", show(&out));
    assert_eq!(ep.requests().len(), 1);
}

/// Replies that name a key twice, each for the request id given: whichever copy a reader
/// keeps, the reply says two things, so it is no answer at all.
const REPEATED_KEYS: [(&str, &str); 5] = [
    (
        "decision twice, the grant last",
        r#"{"id":"ID","decision":"rejected","decision":"allowed-once"}"#,
    ),
    (
        "the same grant twice",
        r#"{"id":"ID","decision":"allowed-once","decision":"allowed-once"}"#,
    ),
    (
        "id twice",
        r#"{"id":"0123","id":"ID","decision":"allowed-once"}"#,
    ),
    (
        "nested",
        r#"{"id":"ID","decision":"allowed-once","by":{"name":"a","name":"b"}}"#,
    ),
    (
        "escaped spelling, in an array",
        r#"{"id":"ID","decision":"allowed-once","log":[{"k":1,"\u006b":2}]}"#,
    ),
];

/// The same shape with every key once: grants.
const WELL_FORMED: &str =
    r#"{"id":"ID","decision":"allowed-once","by":{"name":"a"},"log":[{"k":1},{"k":2}]}"#;

#[test]
fn a_reply_that_repeats_a_key_is_unavailable() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for (name, body) in REPEATED_KEYS {
        let ep = TestEndpoint::http(move |r, _| {
            Reply::Http(
                200,
                body.replace("ID", r["id"].as_str().unwrap_or_default()),
            )
        });
        let before = env.audit_records().len();
        let out = ask_with(&env, &ep.url, "10");
        assert_status(&out, 77);
        assert!(!env.ws.join("ran").exists(), "{name}: the command ran");
        assert_eq!(ep.requests().len(), 1, "{name}");
        let records = env.audit_records();
        assert_eq!(records.len(), before + 2, "{name}");
        assert_eq!(records[before]["type"], "approval/asked", "{name}");
        assert_eq!(records[before + 1]["type"], "approval/decided", "{name}");
        assert_eq!(records[before]["id"], records[before + 1]["id"], "{name}");
        assert_eq!(
            records[before + 1]["outcome"],
            "unavailable",
            "{name}: {}",
            show(&out)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("\"kind\":\"approval_unavailable\"") && stderr.contains("repeated"),
            "{name}: {}",
            show(&out)
        );
    }
    // The control: the same reply without the repeat grants.
    let ep = TestEndpoint::http(|r, _| {
        Reply::Http(
            200,
            WELL_FORMED.replace("ID", r["id"].as_str().unwrap_or_default()),
        )
    });
    let out = ask_with(&env, &ep.url, "10");
    assert_status(&out, 0);
    assert!(env.ws.join("ran").exists(), "{}", show(&out));
    assert_eq!(
        env.audit_records().last().map(|r| r["outcome"].clone()),
        Some("allowed-once".into())
    );
}
