//! Single-threaded at fork: the approval stage starts no thread that could still run when
//! sandgate forks the command (a child forked from a multi-threaded process may deadlock
//! on a lock another thread held), host names included; and the question still ends
//! promptly, cancelled and audited, when sandgate is interrupted while it waits.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::support::endpoint::{Reply, TestEndpoint};
use crate::support::*;

/// The test endpoint's URL with its IP literal replaced by a name, so the grant goes
/// through a host-name lookup.
fn by_name(ep: &TestEndpoint) -> String {
    let url = ep.url.replace("127.0.0.1", "localhost");
    assert_ne!(
        url, ep.url,
        "the test endpoint is not on 127.0.0.1: {}",
        ep.url
    );
    url
}

/// Proves that sandgate had exactly one thread when it forked a command granted through an
/// endpoint addressed by a host name. Two observations, each of which fails if a thread
/// sandgate started were alive at the fork:
///
/// * At the fork itself: sandgate's fork reads `Threads:` from `/proc/self/status` right
///   before `fork(2)` and refuses (exit 125, the command never runs) unless it is 1 — in
///   release builds too; a unit test (`sys::tests::fork_is_refused_while_another_thread_runs`)
///   shows that a live thread makes it refuse. So the command running at all means the
///   kernel counted one thread at the fork.
/// * From outside, independently of that check: while the granted command runs
///   (workspace-write, so that sandgate starts it in a child; full-access would run in
///   sandgate's own process), the test reads `Threads:` from sandgate's `/proc/PID/status`
///   (the command, in its own PID namespace, cannot see sandgate): the main thread and
///   the supervisor thread started after the fork. An approval worker or a resolver thread
///   that were still running — blocked in a lookup, say — would be counted there too. The
///   supervisor thread starts once the command is running, so the command first makes a
///   call only the supervisor answers (a refused write outside the workspace): once it
///   returns, that thread is there to be counted.
#[test]
fn a_grant_through_a_named_endpoint_forks_the_command_single_threaded() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let ep = TestEndpoint::http(|r, _| Reply::decision(r, "allowed-once"));
    let url = by_name(&ep);
    let mut cmd = env.sandgate("read-only");
    cmd.args([
        "--sandbox-permissions",
        "workspace-write",
        "--justification",
        "count threads",
        "--approval-endpoint",
        &url,
        "--approval-timeout",
        "20",
        "--",
        "/bin/sh",
        "-c",
        r#"(: > "$1/x") 2>/dev/null; echo ready; while [ ! -e "$2" ]; do sleep 0.02; done"#,
        "sh",
    ]);
    let go = env.ws.join("go");
    cmd.arg(&env.outside)
        .arg(&go)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut ready = [0u8; 6];
    use std::io::Read;
    let _ = stdout.read_exact(&mut ready);
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_status(&out, 0);
    assert_eq!(&ready, b"ready\n", "{}", show(&out));
    let threads: Vec<&str> = status
        .lines()
        .filter_map(|l| l.strip_prefix("Threads:"))
        .map(str::trim)
        .collect();
    assert_eq!(threads, ["2"], "{}", show(&out));
    assert_eq!(ep.requests().len(), 1, "{}", show(&out));
    let records = env.audit_records();
    assert_eq!(
        records.last().map(|r| r["outcome"].clone()),
        Some("allowed-once".into()),
        "{records:?}"
    );
}

/// Starts `cmd` with its output collected in the background.
fn spawn(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// Waits (at most 20 s) until `ready` holds.
fn wait_for(what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `signal` to sandgate and returns its output, which must come within 5 s.
fn interrupt(child: Child, signal: Signal) -> std::process::Output {
    let pid = Pid::from_raw(child.id() as i32);
    let sent = Instant::now();
    kill(pid, signal).unwrap_or_else(|e| panic!("kill: {e}"));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait: {e}"));
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "{signal} took {:?} to end the question",
        sent.elapsed()
    );
    out
}

/// Asserts the fail-closed ending of an interrupted question: 77, the command did not run,
/// and the audit pair says cancelled.
fn assert_cancelled(env: &TestEnv, out: &std::process::Output, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(77),
        "{what}: signal {:?}\n{}",
        out.status.signal(),
        show(out)
    );
    assert!(!env.ws.join("ran").exists(), "{what}: the command ran");
    let records = env.audit_records();
    let n = records.len();
    assert!(n >= 2, "{what}: {records:?}");
    assert_eq!(records[n - 2]["type"], "approval/asked", "{what}");
    assert_eq!(records[n - 1]["type"], "approval/decided", "{what}");
    assert_eq!(records[n - 2]["id"], records[n - 1]["id"], "{what}");
    assert_eq!(records[n - 1]["outcome"], "cancelled", "{what}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("escalation_cancelled"),
        "{what}: {}",
        show(out)
    );
}

/// A sandgate call asking for workspace-write through `answerer`, with a long timeout.
fn asking(env: &TestEnv, answerer: &[&str]) -> Command {
    let mut cmd = env.sandgate("read-only");
    cmd.args([
        "--sandbox-permissions",
        "workspace-write",
        "--justification",
        "write a file",
        "--approval-timeout",
        "60",
    ]);
    cmd.args(answerer)
        .args(["--", "touch"])
        .arg(env.ws.join("ran"));
    cmd
}

/// With no worker thread left to abandon, every wait of the answerer itself must give way
/// to an interrupt: an endpoint that never answers (by name and on a unix socket), and an
/// approver program that never answers, which is killed.
#[test]
fn an_interrupt_while_waiting_still_cancels_at_once_and_is_audited() {
    let env = TestEnv::new();
    let silent = |r: &serde_json::Value, _: &[serde_json::Value]| {
        Reply::After(
            Duration::from_secs(30),
            Box::new(Reply::decision(r, "allowed-once")),
        )
    };

    let ep = TestEndpoint::http(silent);
    let child = spawn(&mut asking(&env, &["--approval-endpoint", &by_name(&ep)]));
    wait_for("the named endpoint's request", || ep.requests().len() == 1);
    assert_cancelled(
        &env,
        &interrupt(child, Signal::SIGTERM),
        "SIGTERM, endpoint",
    );

    let ep = TestEndpoint::unix(&env.root.join("approve.sock"), silent);
    let child = spawn(&mut asking(&env, &["--approval-endpoint", &ep.url]));
    wait_for("the unix endpoint's request", || ep.requests().len() == 1);
    assert_cancelled(
        &env,
        &interrupt(child, Signal::SIGHUP),
        "SIGHUP, unix endpoint",
    );

    let pidfile = env.root.join("approver.pid");
    let approver = format!("echo $$ > '{}'; exec sleep 60", pidfile.display());
    let child = spawn(&mut asking(&env, &["--approver", &approver]));
    wait_for("the approver program", || program_pid(&pidfile).is_some());
    assert_cancelled(&env, &interrupt(child, Signal::SIGINT), "SIGINT, approver");
    let pid = program_pid(&pidfile).unwrap_or_default();
    let alive =
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
    assert!(!alive, "the approver program {pid} is still running");
}

fn program_pid(pidfile: &Path) -> Option<i32> {
    std::fs::read_to_string(pidfile).ok()?.trim().parse().ok()
}

/// The terminal checks look at fds 0 to 2, which the caller may have closed: a closed fd
/// is no terminal, and the call runs normally.
#[test]
fn a_call_with_stdin_closed_runs() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let mut cmd = env.command("/bin/sh");
    cmd.arg("-c")
        .arg(r#"exec 0<&-; exec "$@""#)
        .arg("sh")
        .arg(sandgate())
        .args(["--workspace"])
        .arg(&env.ws)
        .args(["--sandbox", "workspace-write", "--", "touch"])
        .arg(env.ws.join("ran"));
    let out = output(&mut cmd);
    assert_status(&out, 0);
    assert!(env.ws.join("ran").exists(), "{}", show(&out));
}
