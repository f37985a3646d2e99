//! The approver program: grant, reject, garbage, nonzero exit, and a hang
//! past the timeout (the program is killed).

use crate::support::*;

/// A shell approver that answers `decision` for the request id it reads on stdin.
fn answering(decision: &str) -> String {
    format!(
        r#"id=$(sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p'); printf '{{"id":"%s","decision":"{decision}"}}' "$id""#
    )
}

fn ask(env: &TestEnv, approver: &str, timeout: &str) -> std::process::Output {
    env.ask_for_workspace_write(&["--approver", approver], timeout)
}

fn last_outcome(env: &TestEnv) -> String {
    env.audit_records()
        .last()
        .map(|r| r["outcome"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

#[test]
fn the_approver_grants_only_with_allowed_once() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let out = ask(&env, &answering("allowed-once"), "10");
    assert_status(&out, 0);
    assert!(env.ws.join("ran").exists(), "{}", show(&out));
    assert_eq!(last_outcome(&env), "allowed-once");
    std::fs::remove_file(env.ws.join("ran")).unwrap();

    for (approver, outcome) in [
        (answering("rejected"), "rejected"),
        (answering("yes"), "rejected"),
        (
            "cat >/dev/null; echo 'not json at all'".to_owned(),
            "unavailable",
        ),
        (
            format!("{}; exit 3", answering("allowed-once")),
            "unavailable",
        ),
        ("/nonexistent/approver".to_owned(), "unavailable"),
    ] {
        let out = ask(&env, &approver, "10");
        assert_status(&out, 77);
        assert!(!env.ws.join("ran").exists(), "{approver}");
        assert_eq!(last_outcome(&env), outcome, "{approver}: {}", show(&out));
    }
}

#[test]
fn a_hanging_approver_is_cancelled_and_killed() {
    let env = TestEnv::new();
    let pidfile = env.root.join("approver.pid");
    let approver = format!("echo $$ > '{}'; exec sleep 60", pidfile.display());
    let started = std::time::Instant::now();
    let out = ask(&env, &approver, "1");
    assert_status(&out, 77);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(last_outcome(&env), "cancelled");
    let pid = std::fs::read_to_string(&pidfile)
        .unwrap_or_default()
        .trim()
        .to_owned();
    assert!(!pid.is_empty());
    let alive =
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
    assert!(!alive, "the approver program {pid} is still running");
}

/// A shell approver that prints `template` with `ID` replaced by the request id it reads.
fn replying(template: &str) -> String {
    let format = template.replace('%', "%%").replace("ID", "%s");
    format!(r#"id=$(sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p'); printf '{format}' "$id""#)
}

#[test]
fn an_approver_reply_that_repeats_a_key_is_unavailable() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for template in [
        r#"{"id":"ID","decision":"rejected","decision":"allowed-once"}"#,
        r#"{"id":"ID","decision":"allowed-once","by":{"name":"a","name":"b"}}"#,
        r#"{"id":"ID","decision":"allowed-once","log":[[{"k":1,"k":1}]]}"#,
    ] {
        let before = env.audit_records().len();
        let out = ask(&env, &replying(template), "10");
        assert_status(&out, 77);
        assert!(!env.ws.join("ran").exists(), "{template}");
        let records = env.audit_records();
        assert_eq!(records.len(), before + 2, "{template}");
        assert_eq!(records[before]["type"], "approval/asked");
        assert_eq!(records[before]["id"], records[before + 1]["id"]);
        assert_eq!(
            last_outcome(&env),
            "unavailable",
            "{template}: {}",
            show(&out)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("repeated"),
            "{}",
            show(&out)
        );
    }
    // The control: the nested reply with every key once grants.
    let out = ask(
        &env,
        &replying(r#"{"id":"ID","decision":"allowed-once","by":{"name":"a"},"log":[[{"k":1}]]}"#),
        "10",
    );
    assert_status(&out, 0);
    assert!(env.ws.join("ran").exists(), "{}", show(&out));
    assert_eq!(last_outcome(&env), "allowed-once");
}
