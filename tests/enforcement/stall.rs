//! The supervisor never stalls: nothing a sandboxed process does makes the supervisor wait
//! for it — not a connect to a listener that never accepts, not a FIFO where the supervisor
//! opens files for git, not a fault served by the sandbox itself, not a FIFO as the denial
//! log — and sandgate still answers SIGTERM meanwhile.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// Generous: a stalled supervisor never answers, a working one in milliseconds.
const BOUND: Duration = Duration::from_secs(5);

/// Binds `sock`, listens with a backlog of 0 and fills it with one connection of its own,
/// then never accepts — until `accept` appears in its directory.
const LISTENER: &str = r#"
import os, socket, time
s = socket.socket(socket.AF_UNIX)
s.bind("sock")
s.listen(0)
filler = socket.socket(socket.AF_UNIX)
filler.connect("sock")
open("ready", "w").close()
deadline = time.time() + 60
while not os.path.exists("accept") and time.time() < deadline:
    time.sleep(0.02)
s.settimeout(0.2)
conns = []
while time.time() < deadline:
    try:
        conns.append(s.accept()[0])
    except socket.timeout:
        pass
"#;

/// Connects to `sock` with a blocking socket: waits while the backlog is full.
const BLOCKER: &str = r#"
import os, socket, time
c = socket.socket(socket.AF_UNIX)
open("connecting", "w").close()
c.connect("sock")
open("connected", "w").close()
time.sleep(60)
"#;

/// The command: the listener and the blocked connect in the background, then one refused
/// and one allowed write in the foreground, timed; then it waits to be killed.
fn script(outside: &Path) -> String {
    format!(
        r#"
/usr/bin/python3 listener.py &
while [ ! -e ready ]; do sleep 0.02; done
/usr/bin/python3 blocker.py &
while [ ! -e connecting ]; do sleep 0.02; done
sleep 0.3
start=$(date +%s%N)
touch '{outside}/refused'; echo "refused=$?"
echo ok > allowed.txt; echo "allowed=$?"
end=$(date +%s%N)
echo "ms=$(( (end - start) / 1000000 ))"
touch written
exec sleep 60
"#,
        outside = outside.display()
    )
}

/// Kills what a test left running: sandgate, and the sandboxed processes that outlive it
/// (the call keeps them), found by the mark in their environment.
struct Cleanup {
    child: Option<Child>,
    mark: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
        kill_marked(&self.mark);
    }
}

/// Waits until `path` exists; false after `within`.
fn appears(path: &Path, within: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    path.exists()
}

#[test]
fn a_connect_waiting_on_a_full_backlog_holds_up_no_other_call_and_sigterm_still_ends_it() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for (name, text) in [("listener.py", LISTENER), ("blocker.py", BLOCKER)] {
        std::fs::write(env.ws.join(name), text).unwrap();
    }
    std::fs::write(env.ws.join("run.sh"), script(&env.outside)).unwrap();
    let log = env.root.join("denials.ndjson");
    let stdout = env.root.join("stdout");
    let stderr = env.root.join("stderr");
    let file = |p: &Path| std::fs::File::create(p).unwrap();
    let mark = unique_mark("stall");
    let mut cmd = env.sandgate("workspace-write");
    cmd.arg("--denial-log")
        .arg(&log)
        .env("LEFTOVER_MARK", &mark)
        // (Nothing can be kept without a PID namespace: the call itself runs on there.)
        .args((!landlock_backend()).then_some("--keep-background"))
        .args(["--", "/bin/sh", "run.sh"])
        .stdin(Stdio::null())
        .stdout(file(&stdout))
        .stderr(file(&stderr));
    let mut cleanup = Cleanup {
        child: Some(cmd.spawn().unwrap()),
        mark,
    };
    let shown = || {
        format!(
            "--- stdout\n{}--- stderr\n{}",
            std::fs::read_to_string(&stdout).unwrap_or_default(),
            std::fs::read_to_string(&stderr).unwrap_or_default()
        )
    };
    // Python's start-up is not what is measured: the script times the two writes itself.
    assert!(
        appears(&env.ws.join("written"), BOUND * 4),
        "the writes never completed while a connect waited\n{}",
        shown()
    );
    let out = std::fs::read_to_string(&stdout).unwrap_or_default();
    assert!(
        out.contains("refused=1\n") && out.contains("allowed=0\n"),
        "{}",
        shown()
    );
    let ms: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("ms="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no timing\n{}", shown()));
    assert!(
        ms < BOUND.as_millis() as u64,
        "the writes took {ms} ms\n{}",
        shown()
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("allowed.txt")).unwrap_or_default(),
        "ok\n"
    );
    assert!(!env.outside.join("refused").exists());
    assert!(
        !env.ws.join("connected").exists(),
        "the backlog was not full\n{}",
        shown()
    );
    if observing() {
        let markers = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            markers.lines().any(|l| {
                let m: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
                m["op"] == "create"
                    && m["path"].as_str() == Some(&*env.outside.join("refused").to_string_lossy())
            }),
            "no marker for the refused write in the denial log:\n{markers}"
        );
    }

    // SIGTERM to sandgate: forwarded to the command, which dies of it, and so does sandgate,
    // promptly, although a connect is still waiting.
    let child = cleanup.child.as_mut().unwrap_or_else(|| panic!("no child"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < BOUND,
            "sandgate did not end on SIGTERM\n{}",
            shown()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    cleanup.child = None;
    assert_eq!(
        (status.code(), status.signal()),
        (None, Some(libc::SIGTERM)),
        "{}",
        shown()
    );

    // The connect still waits, now on the detached supervisor, which took it over unanswered:
    // once the listener accepts, it completes, and the caller goes on writing. (Without a
    // PID namespace nothing is kept, and so nothing is handed over: it ended with the call.)
    if landlock_backend() {
        return;
    }
    std::fs::write(env.ws.join("accept"), "").unwrap();
    assert!(
        appears(&env.ws.join("connected"), BOUND),
        "the waiting connect was lost at the hand-over\n{}",
        shown()
    );
}

#[test]
fn userfaultfd_is_refused_by_system_call_and_by_device() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    // User-mode-only faults are open to every user: the control holds as any uid (but a
    // default container refuses them to everyone, full access included).
    if docker_harness() {
        for mode in ["read-only", "workspace-write"] {
            assert_eq!(env.probe(mode, &["userfaultfd"]), "err:EPERM", "{mode}");
        }
        return;
    }
    env.assert_refused(&["userfaultfd"], "EPERM");
    let device = Path::new("/dev/userfaultfd").exists();
    if device && is_root() {
        assert_eq!(env.probe("full-access", &["userfaultfd-dev"]), "ok");
    }
    if device {
        for mode in ["read-only", "workspace-write"] {
            // Not in the sandbox's `/dev` at all; were it there, landlock refuses it.
            let got = env.probe(mode, &["userfaultfd-dev"]);
            assert!(
                got == "err:ENOENT" || got == "err:EACCES" || got == "err:EPERM",
                "/dev/userfaultfd under {mode}: {got}"
            );
        }
    }
}

fn git_init(dir: &Path) {
    let out = output(Command::new("git").current_dir(dir).args([
        "-c",
        "init.defaultBranch=main",
        "init",
        "-q",
    ]));
    assert_status(&out, 0);
}

#[test]
fn a_fifo_in_a_guarded_git_directory_is_refused_without_waiting() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    git_init(&env.ws);
    let fifo = env.ws.join(".git/fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
    let log = env.root.join("denials.ndjson");
    let mut cmd = env.sandgate("workspace-write");
    cmd.arg("--denial-log").arg(&log).args([
        "--",
        "/bin/sh",
        "-c",
        "echo x > .git/fifo; echo \"rc=$?\"; echo y > .git/FETCH_HEAD; echo \"rc=$?\"",
    ]);
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap_or(None).is_none() {
        if start.elapsed() > BOUND {
            let _ = child.kill();
            panic!("the open of a FIFO in .git waited");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The FIFO is refused; an ordinary file beside it is still written (by the supervisor).
    assert!(
        stdout.starts_with("rc=") && !stdout.starts_with("rc=0") && stdout.ends_with("rc=0\n"),
        "{}",
        show(&out)
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join(".git/FETCH_HEAD")).unwrap_or_default(),
        "y\n"
    );
    // The supervisor opens without waiting, but hands the caller the file as it asked.
    let out = env.run(
        "workspace-write",
        &[
            "/usr/bin/python3",
            "-c",
            "import os, fcntl\n\
             fd = os.open('.git/ORIG_HEAD', os.O_WRONLY | os.O_CREAT, 0o644)\n\
             print(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK)",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "0\n",
        "{}",
        show(&out)
    );
    assert!(env.ws.join(".git/ORIG_HEAD").exists());
    if observing() {
        let markers = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            markers.contains("\"op\":\"git_metadata\"") && markers.contains(".git/fifo"),
            "{markers}\n{}",
            show(&out)
        );
    }
    // The control: unconfined, with a reader, the same write goes through.
    let reader = Command::new("cat")
        .arg(&fifo)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = env.sh("full-access", "echo x > .git/fifo");
    assert_status(&out, 0);
    let read = reader.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&read.stdout), "x\n");
}

#[test]
fn a_fifo_as_the_denial_log_is_refused_at_once() {
    let env = TestEnv::new();
    let fifo = env.root.join("denials.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let mut cmd = env.sandgate("workspace-write");
    cmd.arg("--denial-log")
        .arg(&fifo)
        .args(["--", "true"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap();
    while child.try_wait().unwrap_or(None).is_none() {
        if start.elapsed() > BOUND {
            let _ = child.kill();
            panic!("sandgate waited on a FIFO as its denial log");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_status(&out, 78);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("it is a FIFO, not a regular file"),
        "{}",
        show(&out)
    );
}
