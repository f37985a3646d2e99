//! `sandgate approvals`: a real server, real asking sandgates, real clients. Every asker
//! here finds the server by itself, at the default socket of the test's runtime directory.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::server::{asker, ended, ApprovalsServer};
use crate::support::*;

/// Starts `touch ws/<file>` under read-only, asking for workspace-write with `why`.
fn ask(env: &TestEnv, file: &str, why: &str) -> Child {
    asker(env, file, why, &[])
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the asker: {e}"))
}

fn refused_with(out: &std::process::Output, text: &str) {
    assert_eq!(out.status.code(), Some(1), "{}", show(out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(text),
        "{}",
        show(out)
    );
}

#[test]
fn a_question_waits_until_it_is_allowed_and_the_first_answer_wins() {
    let env = TestEnv::new();
    let server = ApprovalsServer::start(&env, &[]);
    let asker = ask(&env, "allowed", "regenerate the lock file");
    let pending = server.pending(&env, 1);
    let id = pending[0]["id"].as_str().unwrap_or_default().to_owned();
    assert_eq!(id.len(), 32, "{pending:?}");
    assert_eq!(
        pending[0]["requested"]["justification"],
        "regenerate the lock file"
    );
    assert_eq!(pending[0]["requested"]["mode"], "workspace-write");
    assert_eq!(pending[0]["standing"]["mode"], "read-only");
    assert!(!env.ws.join("allowed").exists(), "ran before the answer");

    // The start of the id is enough when no other id starts the same.
    let out = server.client(&env, &["allow", &id[..8]]);
    assert_status(&out, 0);
    let out = ended(asker);
    assert_status(&out, 0);
    assert!(env.ws.join("allowed").exists(), "{}", show(&out));
    let records = env.audit_records();
    assert_eq!(
        records.last().map(|r| r["outcome"].clone()),
        Some("allowed-once".into())
    );

    // Later answers, of either kind, are refused and change nothing.
    refused_with(
        &server.client(&env, &["allow", &id]),
        "already answered: allowed-once",
    );
    refused_with(
        &server.client(&env, &["reject", &id]),
        "already answered: allowed-once",
    );
    let board = server.board(&env);
    assert_eq!(board["decided"][0]["id"], id.as_str());
    assert_eq!(board["decided"][0]["state"], "allowed-once");
    assert_eq!(board["decided"][0]["decided_by"], "cli");
}

#[test]
fn a_rejected_question_exits_77_and_runs_nothing() {
    let env = TestEnv::new();
    let server = ApprovalsServer::start(&env, &[]);
    let asker = ask(&env, "rejected", "write");
    let id = server.only_pending_id(&env);
    assert_status(&server.client(&env, &["reject", &id]), 0);
    let out = ended(asker);
    assert_status(&out, 77);
    assert!(!env.ws.join("rejected").exists());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("\"kind\":\"escalation_rejected\""),
        "{}",
        show(&out)
    );
    refused_with(
        &server.client(&env, &["allow", &id]),
        "already answered: rejected",
    );
}

#[test]
fn a_question_whose_asker_was_killed_leaves_the_list_and_takes_no_answer() {
    let env = TestEnv::new();
    let server = ApprovalsServer::start(&env, &[]);
    let mut asker = ask(&env, "killed", "write");
    let id = server.only_pending_id(&env);
    asker.kill().unwrap();
    let _ = asker.wait();
    let board = server.board_until(&env, |b| b["pending"].as_array().is_some_and(Vec::is_empty));
    assert_eq!(board["decided"][0]["id"], id.as_str());
    assert_eq!(board["decided"][0]["state"], "withdrawn");
    refused_with(&server.client(&env, &["allow", &id]), "withdrawn");
    assert!(!env.ws.join("killed").exists());
}

#[test]
fn answers_to_unknown_or_ambiguous_ids_change_nothing() {
    let env = TestEnv::new();
    let server = ApprovalsServer::start(&env, &[]);
    let first = ask(&env, "one", "first");
    let second = ask(&env, "two", "second");
    let pending = server.pending(&env, 2);
    let ids: Vec<String> = pending
        .iter()
        .map(|q| q["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    refused_with(
        &server.client(&env, &["allow", "0123456789abcdef0123456789abcdef"]),
        "no question has the id",
    );
    // Too short to stand for an id, or an id with characters no id has.
    refused_with(
        &server.client(&env, &["allow", &ids[0][..3]]),
        "no question has the id",
    );
    refused_with(
        &server.client(&env, &["allow", "../../x"]),
        "no question has the id",
    );
    assert_eq!(
        server.board(&env)["pending"].as_array().map(Vec::len),
        Some(2)
    );
    for id in &ids {
        assert_status(&server.client(&env, &["reject", id]), 0);
    }
    assert_status(&ended(first), 77);
    assert_status(&ended(second), 77);
}

#[test]
fn the_notify_command_gets_each_question_once() {
    let env = TestEnv::new();
    let log = env.root.join("notified");
    let notify = format!("cat >> '{}'; echo >> '{}'", log.display(), log.display());
    let server = ApprovalsServer::start(&env, &["--notify-cmd", &notify]);
    let mut ids = Vec::new();
    for (file, why) in [("a", "first $(touch pwned) `id`"), ("b", "second")] {
        let asker = ask(&env, file, why);
        let pending = server.pending(&env, 1);
        let id = pending[0]["id"].as_str().unwrap_or_default().to_owned();
        assert_status(&server.client(&env, &["allow", &id]), 0);
        assert_status(&ended(asker), 0);
        ids.push(id);
    }
    let start = Instant::now();
    let lines = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
            .collect();
        if lines.len() >= 2 || start.elapsed() > Duration::from_secs(10) {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // A moment more: a third notification would show up here.
    std::thread::sleep(Duration::from_millis(300));
    let count = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .count();
    assert_eq!(count, 2, "{lines:?}");
    let notified: Vec<&str> = lines
        .iter()
        .map(|q| q["id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(notified, ids);
    assert_eq!(
        lines[0]["requested"]["justification"],
        "first $(touch pwned) `id`"
    );
    assert!(!env.ws.join("pwned").exists() && !env.root.join("pwned").exists());
}

#[test]
fn the_watch_prompt_allows_only_when_its_code_is_typed() {
    let env = TestEnv::new();
    let server = ApprovalsServer::start(&env, &[]);
    let mut cmd = Command::new(sandgate());
    env.isolate(&mut cmd);
    let mut watch = cmd
        .args(["approvals", "watch", "--socket"])
        .arg(&server.socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut typed = watch.stdin.take().unwrap_or_else(|| panic!("no stdin"));
    let mut shown =
        BufReader::new(watch.stdout.take().unwrap_or_else(|| panic!("no stdout"))).lines();
    let mut code_shown = || loop {
        let line = shown
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| panic!("watch ended without showing a code"));
        if let Some(rest) = line.split("type the code ").nth(1) {
            break rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned();
        }
    };

    // "y" is not the code: rejected.
    let asker = ask(&env, "said-yes", "write");
    let code = code_shown();
    assert_eq!(code.len(), 5, "{code}");
    typed.write_all(b"y\n").unwrap();
    assert_status(&ended(asker), 77);

    let asker = ask(&env, "typed-code", "write");
    let code = code_shown();
    typed.write_all(format!("{code}\n").as_bytes()).unwrap();
    assert_status(&ended(asker), 0);
    assert!(env.ws.join("typed-code").exists() && !env.ws.join("said-yes").exists());
    assert_eq!(server.board(&env)["decided"][0]["decided_by"], "watch");
    drop(typed);
    let _ = watch.wait();
}

#[test]
fn an_agents_call_through_a_link_is_answered_by_the_server_at_the_default_socket() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let sh = install_links(&env).join("sandgate-sh");
    let call = |file: &str| {
        let mut cmd = env.command(&sh);
        cmd.arg("-c").arg(format!(
            "# sandgate: sandbox_permissions=full-access justification=\"write the report\"\necho x > '{}'",
            env.outside.join(file).display()
        ));
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.spawn().unwrap()
    };
    // Without a server, a link has nobody to ask.
    let out = ended(call("no-server"));
    assert_status(&out, 77);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("approval_unavailable"),
        "{}",
        show(&out)
    );

    let server = ApprovalsServer::start(&env, &[]);
    let doctor = output(&mut env_command(&env, &["doctor", "--json"]));
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let asks = format!("the approvals server at {}", server.socket.display());
    assert_eq!(
        report["answerer"]["agent_link"],
        asks.as_str(),
        "{report:#}"
    );

    let asker = call("answered");
    let id = server.only_pending_id(&env);
    assert_status(&server.client(&env, &["allow", &id]), 0);
    let out = ended(asker);
    assert_status(&out, 0);
    assert!(env.outside.join("answered").exists(), "{}", show(&out));
}

#[test]
fn a_socket_others_could_reach_is_not_asked_and_not_served() {
    let env = TestEnv::new();
    let server = ApprovalsServer::start(&env, &[]);
    let dir = server
        .socket
        .parent()
        .unwrap_or_else(|| panic!("no dir"))
        .to_owned();
    let mode = |m: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(m)).unwrap();
    };
    mode(0o755);
    // The asker does not take a server whose directory others can enter.
    let out = ended(ask(&env, "asked", "write"));
    assert_status(&out, 77);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("approval_unavailable"),
        "{}",
        show(&out)
    );
    mode(0o700);
    let board = server.board(&env);
    assert_eq!(
        board["pending"].as_array().map(Vec::len),
        Some(0),
        "{board:#}"
    );
    assert_eq!(
        board["decided"].as_array().map(Vec::len),
        Some(0),
        "{board:#}"
    );
    // A server does not start in a directory others can enter.
    let open = env.root.join("open");
    std::fs::create_dir(&open).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let sock = open.join("approvals.sock");
    let out = output(&mut env_command(
        &env,
        &["approvals", "serve", "--socket", &sock.to_string_lossy()],
    ));
    refused_with(&out, "is not private to this user");
    assert!(!sock.exists());
    // A second server at a socket where one listens is refused.
    let out = output(&mut env_command(&env, &["approvals", "serve"]));
    refused_with(&out, "already listens");
    // The panel listens on loopback only.
    let out = output(&mut env_command(
        &env,
        &[
            "approvals",
            "serve",
            "--socket",
            "/nonexistent/x.sock",
            "--http",
            "0.0.0.0:0",
        ],
    ));
    refused_with(&out, "loopback");
}

/// `sandgate ARGS`, isolated like every call of the test.
fn env_command(env: &TestEnv, args: &[&str]) -> Command {
    let mut cmd = Command::new(sandgate());
    env.isolate(&mut cmd);
    cmd.args(args);
    cmd
}

#[test]
fn nothing_inside_a_sandbox_reaches_the_server() {
    let env = TestEnv::new();
    let server = ApprovalsServer::start(&env, &["--http", "127.0.0.1:0"]);
    let url = server.url.clone().unwrap_or_else(|| panic!("no panel URL"));
    let port = url
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let asker = ask(&env, "waiting", "write");
    let id = server.only_pending_id(&env);
    let socket = server.socket.to_string_lossy().into_owned();
    for mode in ["read-only", "workspace-write"] {
        let unix = env.probe(mode, &["unix-connect", &socket]);
        assert_ne!(unix, "ok", "{mode}: connected to the server's socket");
        let tcp = env.probe(mode, &["tcp-connect", &format!("127.0.0.1:{port}")]);
        assert_ne!(tcp, "ok", "{mode}: connected to the panel's port");
        // A sandgate inside the sandbox cannot answer either.
        let out = env.run(
            mode,
            &[
                sandgate_inside().to_string_lossy().as_ref(),
                "approvals",
                "allow",
                &id,
                "--socket",
                &socket,
            ],
        );
        assert_ne!(out.status.code(), Some(0), "{mode}: {}", show(&out));
    }
    // The control: outside the sandbox, the same connects succeed.
    assert_eq!(env.probe("full-access", &["unix-connect", &socket]), "ok");
    assert_eq!(
        env.probe(
            "full-access",
            &["tcp-connect", &format!("127.0.0.1:{port}")]
        ),
        "ok"
    );
    assert_eq!(
        server.board(&env)["pending"][0]["id"],
        id.as_str(),
        "answered from inside"
    );
    assert_status(&server.client(&env, &["reject", &id]), 0);
    assert_status(&ended(asker), 77);
}

#[test]
fn a_sandboxed_peer_on_a_socket_it_can_reach_is_refused() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let server = ApprovalsServer::beneath_the_workspace(&env);
    let socket_arg = server.socket.to_string_lossy().into_owned();
    let asker = asker(
        &env,
        "granted",
        "write",
        &["--approval-endpoint", &server.endpoint()],
    )
    .spawn()
    .unwrap();
    let id = server.only_pending_id(&env);
    // The connect itself is allowed here (a socket beneath the workspace). The sandbox's
    // supervisor performs it, so the kernel names the supervisor as the peer: the server
    // must see through that.
    let answer = format!(
        "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect({socket_arg:?})\n\
         b=b'{{\"decision\":\"allowed-once\"}}'\n\
         try:\n s.sendall(b'POST /questions/{id} HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: %d\\r\\n\\r\\n' % len(b) + b)\n r=s.recv(4096)\n\
         except OSError:\n r=b''\n\
         sys.stdout.write(repr(r))\n"
    );
    let out = env.run("workspace-write", &["/usr/bin/python3", "-c", &answer]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "b''",
        "{}",
        show(&out)
    );
    assert!(
        server.errors().contains("supervises a sandbox"),
        "{}",
        server.errors()
    );
    assert_eq!(server.board(&env)["pending"][0]["id"], id.as_str());
    assert_status(&server.client(&env, &["reject", &id]), 0);
    assert_status(&ended(asker), 77);
    assert!(!env.ws.join("granted").exists());
}

#[test]
fn a_question_that_times_out_leaves_the_list_and_takes_no_answer() {
    let env = TestEnv::new();
    let server = ApprovalsServer::start(&env, &[]);
    let out = output(&mut asker(
        &env,
        "late",
        "write",
        &["--approval-timeout", "1"],
    ));
    assert_status(&out, 77);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("escalation_cancelled"),
        "{}",
        show(&out)
    );
    let board = server.board_until(&env, |b| b["pending"].as_array().is_some_and(Vec::is_empty));
    let id = board["decided"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let state = board["decided"][0]["state"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        ["withdrawn", "expired"].contains(&state.as_str()),
        "{board:#}"
    );
    refused_with(&server.client(&env, &["allow", &id]), &state);
    assert!(!env.ws.join("late").exists());
}
