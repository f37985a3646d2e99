//! The process boundary: `read-only` and `workspace-write` run in a PID namespace with a
//! `/proc` of their own. Host processes, their command lines and the host's sockets are
//! out of sight; everything the command starts ends with it unless the call keeps it
//! (`--keep-background`, `sandgate ps`, `sandgate stop`); `--timeout` ends the whole tree;
//! pid 1 of the namespace is sandgate's init, which the command cannot subvert.
//!
//! What a call leaves running is found from the host by a mark in its environment
//! (`LEFTOVER_MARK`), whatever pid it has inside.

use std::os::unix::net::UnixListener;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

const RESTRICTED: [&str; 2] = ["read-only", "workspace-write"];

/// A host process with `token` in its arguments, killed (with its group) when dropped.
struct HostProcess(std::process::Child);

impl HostProcess {
    fn start(token: &str) -> HostProcess {
        use std::os::unix::process::CommandExt;
        let child = Command::new("/bin/sh")
            .args(["-c", "sleep 60; :", token])
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let host = HostProcess(child);
        // The spawn may return while the kernel is still setting up the new program's
        // arguments (a vfork-style spawn resumes its parent that early).
        let start = Instant::now();
        while !host.command_line().contains(token) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{token} never started"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        host
    }

    fn command_line(&self) -> String {
        let raw = std::fs::read(format!("/proc/{}/cmdline", self.pid())).unwrap_or_default();
        String::from_utf8_lossy(&raw).into_owned()
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = self.0.wait();
    }
}

/// Prints every process directory's name and command line under the sandbox's `/proc`.
const LIST_PROC: &str = r#"for p in /proc/[0-9]*; do printf '%s ' "${p#/proc/}"; tr '\0' ' ' < "$p/cmdline"; echo; done"#;

#[test]
fn proc_lists_only_the_sandboxs_own_processes() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let token = unique_mark("host-secret");
    let host = HostProcess::start(&token);
    let host_dir = format!("/proc/{}", host.pid());
    // Control: the host sees the token (`start` waited for it), and so does an
    // unconfined command.
    let out = env.sh("full-access", &format!("tr '\\0' ' ' < {host_dir}/cmdline"));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&token),
        "control: {}",
        show(&out)
    );
    // Without a PID namespace the host process is in sight (a known limit of the landlock
    // backend) but out of reach: no signal, no environment.
    if landlock_backend() {
        for mode in RESTRICTED {
            let out = env.sh(
                mode,
                &format!(
                    "kill -0 {pid} 2>/dev/null; echo kill=$?; cat {host_dir}/environ >/dev/null 2>&1; echo environ=$?",
                    pid = host.pid()
                ),
            );
            let seen = String::from_utf8_lossy(&out.stdout);
            assert_eq!(seen.trim(), "kill=1\nenviron=1", "{mode}: {}", show(&out));
        }
        return;
    }
    for mode in RESTRICTED {
        let out = env.sh(
            mode,
            &format!("{LIST_PROC}; test -e {host_dir} && echo SEEN-$((40+2))"),
        );
        assert_status(&out, 1);
        let listing = String::from_utf8_lossy(&out.stdout);
        assert!(!listing.contains(&token), "{mode}: {listing}");
        assert!(!listing.contains("SEEN-42"), "{mode}: {listing}");
        let pids: Vec<u32> = listing
            .lines()
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect();
        // init, the shell, and the commands of the loop: nothing else.
        assert_eq!(pids.first(), Some(&1), "{mode}: {listing}");
        assert!(pids.len() <= 4, "{mode}: {listing}");
        let first = listing.lines().next().unwrap_or_default();
        assert_eq!(first.trim_end(), "1 sandgate-init", "{mode}: {listing}");
    }
}

#[test]
fn the_hosts_listening_sockets_are_not_listed() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = format!(":{:04X}", tcp.local_addr().map(|a| a.port()).unwrap_or(0));
    // Short: a socket's path must fit in 108 bytes, wherever the test directory lies.
    let unix_path = env.outside.join(format!(
        "l{:x}.sock",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    ));
    let _unix = UnixListener::bind(&unix_path).unwrap();
    let unix_name = unix_path.to_string_lossy().into_owned();
    // Control: from the host, and from an unconfined command, both are listed.
    let tables = "cat /proc/1/net/tcp /proc/self/net/tcp /proc/net/tcp /proc/net/unix";
    let host_tables = format!(
        "{}{}",
        std::fs::read_to_string("/proc/self/net/tcp").unwrap_or_default(),
        std::fs::read_to_string("/proc/self/net/unix").unwrap_or_default()
    );
    assert!(host_tables.contains(&port) && host_tables.contains(&unix_name));
    let out = env.sh("full-access", "cat /proc/self/net/tcp /proc/net/unix");
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(
        seen.contains(&port) && seen.contains(&unix_name),
        "control: {seen}"
    );
    // Without a network namespace the host's tables are the sandbox's (a known limit of
    // the landlock backend): what they list cannot be reached.
    if landlock_backend() {
        let addr = tcp.local_addr().unwrap().to_string();
        for mode in RESTRICTED {
            let got = [
                env.probe(mode, &["tcp-connect", &addr]),
                env.probe(mode, &["unix-connect", &unix_name]),
            ];
            assert!(got.iter().all(|g| g.starts_with("err:")), "{mode}: {got:?}");
        }
        return;
    }
    for mode in RESTRICTED {
        let out = env.sh(mode, tables);
        assert_status(&out, 0);
        let seen = String::from_utf8_lossy(&out.stdout);
        assert!(
            !seen.contains(&port),
            "{mode}: the TCP listener is listed: {seen}"
        );
        assert!(
            !seen.contains(&unix_name),
            "{mode}: the unix socket is listed: {seen}"
        );
        // The tables are there, just empty but for their headers.
        assert!(seen.contains("local_address"), "{mode}: {seen}");
    }
}

#[test]
fn pid_1_is_sandgates_init_and_holds_nothing_of_sandgates() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let secret = unique_mark("withheld");
    let host_init = std::fs::read("/proc/1/cmdline").unwrap_or_default();
    for mode in RESTRICTED {
        // sandgate is given a variable it withholds from the command (its name looks like
        // a secret); init is sandgate's copy, so it must not be readable through init.
        let mut cmd = env.sandgate(mode);
        cmd.env("SERVICE_API_TOKEN", &secret).args([
            "--",
            "/bin/sh",
            "-c",
            "tr '\\0' '|' < /proc/1/cmdline; echo; \
             (exec 3</proc/1/environ) 2>/dev/null && echo OPENED-ENVIRON-$((6*7)); \
             (exec 3</proc/1/mem) 2>/dev/null && echo OPENED-MEM-$((6*7)); \
             cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\\0' '\\n'; \
             echo \"own:${SERVICE_API_TOKEN:-none}\"",
        ]);
        let out = output(&mut cmd);
        assert_status(&out, 0);
        let seen = String::from_utf8_lossy(&out.stdout);
        // Without a PID namespace pid 1 is the host's init, as out of reach as sandgate.
        let init = if landlock_backend() {
            ""
        } else {
            "sandgate-init|"
        };
        assert!(
            seen.lines().next().is_some_and(|l| l.starts_with(init)),
            "{mode}: {seen}"
        );
        assert_ne!(host_init, b"sandgate-init\0");
        assert!(!seen.contains("OPENED-ENVIRON-42"), "{mode}: {seen}");
        assert!(!seen.contains("OPENED-MEM-42"), "{mode}: {seen}");
        assert!(!seen.contains(&secret), "{mode}: {seen}");
        assert!(seen.contains("own:none"), "{mode}: {seen}");
    }
}

/// Each way a command leaves something running, in the background of `sh -c`.
const LEFTOVERS: [(&str, &str); 6] = [
    ("background", "sleep 1001 &"),
    ("setsid", "setsid sleep 1002 &"),
    ("double fork", "(sleep 1003 &) &"),
    ("nohup", "nohup sleep 1004 >/dev/null 2>&1 &"),
    (
        "ignoring HUP and TERM",
        "sh -c 'trap \"\" HUP TERM; sleep 1005; :' &",
    ),
    (
        "200 processes",
        "i=0; while [ $i -lt 200 ]; do sleep 1006 & i=$((i+1)); done",
    ),
];

#[test]
fn what_the_command_leaves_running_ends_with_the_call() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for mode in RESTRICTED {
        for (what, script) in LEFTOVERS {
            let mark = unique_mark("leftover");
            // The command waits until its leftovers run, so that they are there to end.
            let script = format!("{script}\nsleep 0.3; echo started");
            let mut cmd = env.sandgate(mode);
            cmd.env("LEFTOVER_MARK", &mark)
                .args(["--", "/bin/sh", "-c", &script]);
            let out = output(&mut cmd);
            // Checked the moment sandgate has returned: by then they are gone.
            let left = processes_marked(&mark);
            kill_marked(&mark);
            assert_status(&out, 0);
            assert_eq!(out.stdout, b"started\n", "{mode}, {what}: {}", show(&out));
            assert_eq!(left, Vec::<i32>::new(), "{mode}, {what}: left running");
        }
    }
    // Control: unconfined, a background process does outlive the call, and the test sees
    // it.
    let mark = unique_mark("leftover");
    let mut cmd = env.sandgate("full-access");
    cmd.env("LEFTOVER_MARK", &mark)
        .args(["--", "/bin/sh", "-c", "sleep 1007 >/dev/null 2>&1 &"]);
    assert_status(&output(&mut cmd), 0);
    let left = processes_marked(&mark);
    kill_marked(&mark);
    assert_eq!(left.len(), 1, "control: {left:?}");
}

/// The command attacks its init (pid 1, its parent) every way it can name it: nothing
/// ends, stops or misleads it, the call ends with the command's own status, and nothing
/// outlives it.
#[test]
fn the_command_cannot_subvert_init() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let attacks = format!(
        "sleep 1008 & \
         kill -KILL 1; kill -STOP 1; kill -TERM 1; kill -INT 1; kill -HUP $PPID; \
         kill -KILL -1; echo \"ppid:$PPID\"; \
         '{probe}' ptrace-attach 1; '{probe}' kill-parent; \
         sleep 0.3; grep State: /proc/1/status; exit 7",
        probe = probe().display()
    );
    for mode in RESTRICTED {
        let mark = unique_mark("subvert");
        let mut cmd = env.sandgate(mode);
        cmd.env("LEFTOVER_MARK", &mark)
            .args(["--", "/bin/sh", "-c", &attacks]);
        let out = output(&mut cmd);
        let left = processes_marked(&mark);
        kill_marked(&mark);
        assert_status(&out, 7);
        let seen = String::from_utf8_lossy(&out.stdout);
        // Without a PID namespace the parent is sandgate, and pid 1 the host's init: both
        // outside the sandbox's landlock domain.
        assert!(
            landlock_backend() || seen.contains("ppid:1\n"),
            "{mode}: {seen}"
        );
        // ptrace is refused; signal 0 to init is allowed and harmless.
        assert!(seen.contains("err:EPERM\nok\n"), "{mode}: {seen}");
        // Init is neither stopped nor gone: it waits (S), it still reaped and reported.
        assert!(seen.contains("State:\tS"), "{mode}: {seen}");
        assert_eq!(left, Vec::<i32>::new(), "{mode}");
    }
    // The command dies of a signal it sends itself, and so does sandgate: init passes the
    // death on untouched.
    for mode in RESTRICTED {
        let out = env.sh(mode, "kill -TERM 1; kill -USR2 $$");
        assert_eq!(
            (out.status.code(), out.status.signal()),
            (None, Some(libc::SIGUSR2)),
            "{mode}: {}",
            show(&out)
        );
    }
}

/// What still carries `mark` after up to two seconds: a detached supervisor (sandgate's
/// copy, outside the namespace) ends a moment after the last process it served.
fn left_after_a_moment(mark: &str) -> Vec<i32> {
    let start = Instant::now();
    loop {
        let left = processes_marked(mark);
        if left.is_empty() || start.elapsed() > Duration::from_secs(2) {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `script` under `mode` with `--keep-background`, its processes marked with `mark`.
fn kept_call(env: &TestEnv, mode: &str, mark: &str, script: &str) -> std::process::Output {
    let mut cmd = env.sandgate(mode);
    cmd.env("LEFTOVER_MARK", mark)
        .args(["--keep-background", "--", "/bin/sh", "-c", script]);
    output(&mut cmd)
}

/// Runs `sandgate SUBCOMMAND ARGS` in `env`; returns its output.
fn subcommand(env: &TestEnv, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(sandgate());
    env.isolate(&mut cmd);
    cmd.current_dir(&env.ws).args(args);
    output(&mut cmd)
}

/// A unix-socket server in the workspace, answering each connection with `pong`.
const SERVER: &str = "import socket, os\n\
s = socket.socket(socket.AF_UNIX)\n\
s.bind('srv.sock')\n\
s.listen()\n\
while True:\n    c, _ = s.accept()\n    c.sendall(b'pong')\n    c.close()\n";

const CLIENT: &str = "import socket\n\
s = socket.socket(socket.AF_UNIX)\n\
s.connect('srv.sock')\n\
print(s.recv(4).decode())\n";

#[test]
fn a_kept_server_answers_the_next_call_until_stopped() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let python = "/usr/bin/python3";
    for mode in RESTRICTED {
        let env = TestEnv::new();
        let mark = unique_mark("kept");
        std::fs::write(env.ws.join("server.py"), SERVER).unwrap();
        // read-only cannot bind in the workspace: its server listens in its private /tmp,
        // which no other call sees; only the listing and the stop are checked there.
        let script = match mode {
            "workspace-write" => format!(
                "{python} server.py >/dev/null 2>&1 </dev/null & \
                 while [ ! -S srv.sock ]; do sleep 0.05; done; echo up"
            ),
            _ => format!(
                "cd /tmp && {python} $OLDPWD/server.py >/dev/null 2>&1 </dev/null & \
                 while [ ! -S /tmp/srv.sock ]; do sleep 0.05; done; echo up"
            ),
        };
        let out = kept_call(&env, mode, &mark, &script);
        assert_status(&out, 0);
        assert_eq!(out.stdout, b"up\n", "{mode}: {}", show(&out));
        // The server, and the detached supervisor serving it (sandgate's copy).
        let running = processes_marked(&mark);
        assert!(!running.is_empty(), "{mode}: the server did not stay");

        if mode == "workspace-write" {
            let out = env.run(mode, &[python, "-c", CLIENT]);
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                "pong",
                "{mode}: {}",
                show(&out)
            );
        }

        // `sandgate ps` lists the namespace and the server in it, as text and as JSON.
        let out = subcommand(&env, &["ps", "--workspace", &env.ws.to_string_lossy()]);
        assert_status(&out, 0);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("server.py"), "{mode}: {text}");
        assert!(text.contains(&*env.ws.to_string_lossy()), "{mode}: {text}");
        assert!(text.contains(mode), "{mode}: {text}");
        let out = subcommand(
            &env,
            &["ps", "--json", "--workspace", &env.ws.to_string_lossy()],
        );
        assert_status(&out, 0);
        let listed: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(&out)));
        let kept = listed["kept"].as_array().cloned().unwrap_or_default();
        assert_eq!(kept.len(), 1, "{mode}: {listed}");
        assert_eq!(kept[0]["mode"], mode);
        assert_eq!(kept[0]["workspace"], env.ws.to_string_lossy().as_ref());
        assert_eq!(kept[0]["command"][0], "/bin/sh");
        let init = kept[0]["pid"].as_i64().unwrap_or(0) as i32;
        let processes = kept[0]["processes"].as_array().cloned().unwrap_or_default();
        let server_pid = processes
            .iter()
            .find(|p| {
                p["command"]
                    .as_str()
                    .is_some_and(|c| c.contains("server.py"))
            })
            .and_then(|p| p["pid"].as_i64())
            .unwrap_or_else(|| panic!("{mode}: no server in {listed}"))
            as i32;
        // Host pids: the server's is the one the test found by its mark.
        assert!(
            running.contains(&server_pid),
            "{mode}: {running:?} {listed}"
        );
        assert!(
            std::fs::read_to_string(format!("/proc/{init}/cmdline"))
                .is_ok_and(|c| c.starts_with("sandgate-init")),
            "{mode}: {init} is not the namespace's init"
        );
        // Another workspace's listing does not show it; --all does.
        let other = TestEnv::new();
        let out = subcommand(
            &other,
            &["ps", "--json", "--workspace", &other.ws.to_string_lossy()],
        );
        let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        assert_eq!(listed["kept"], serde_json::json!([]), "{mode}");
        let out = subcommand(&other, &["ps", "--json", "--all"]);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&format!("\"pid\":{init},")),
            "{mode}: {}",
            show(&out)
        );

        // `sandgate stop` ends it all, and the record goes.
        let out = subcommand(&env, &["stop", "--workspace", &env.ws.to_string_lossy()]);
        assert_status(&out, 0);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&format!("stopped {init}")),
            "{mode}: {}",
            show(&out)
        );
        let left = left_after_a_moment(&mark);
        let init_left = std::fs::read_to_string(format!("/proc/{init}/cmdline"))
            .is_ok_and(|c| c.starts_with("sandgate-init"));
        kill_marked(&mark);
        assert_eq!(left, Vec::<i32>::new(), "{mode}: left after stop");
        assert!(!init_left, "{mode}: init left after stop");
        let out = subcommand(
            &env,
            &["ps", "--json", "--workspace", &env.ws.to_string_lossy()],
        );
        let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        assert_eq!(
            listed["kept"],
            serde_json::json!([]),
            "{mode}: the record stayed"
        );
        let out = subcommand(&env, &["ps", "--workspace", &env.ws.to_string_lossy()]);
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with("nothing kept running"),
            "{mode}: {}",
            show(&out)
        );
    }
}

/// `SANDGATE_KEEP_BACKGROUND=1` and `keep_background` in the user's file keep; a project
/// file cannot ask for it (it is ignored, with a warning naming it).
#[test]
fn keeping_comes_from_the_variable_or_the_users_file_never_the_projects() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let kept = |env: &TestEnv, extra: &dyn Fn(&mut Command)| {
        let mark = unique_mark("keep-config");
        let mut cmd = env.sandgate("workspace-write");
        cmd.env("LEFTOVER_MARK", &mark).args([
            "--",
            "/bin/sh",
            "-c",
            "sleep 1009 >/dev/null 2>&1 </dev/null & sleep 0.2",
        ]);
        extra(&mut cmd);
        let out = output(&mut cmd);
        assert_status(&out, 0);
        let left = processes_marked(&mark);
        let _ = subcommand(env, &["stop", "--workspace", &env.ws.to_string_lossy()]);
        kill_marked(&mark);
        (
            !left.is_empty(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let env = TestEnv::new();
    assert!(
        kept(&env, &|c| {
            c.env("SANDGATE_KEEP_BACKGROUND", "1");
        })
        .0
    );
    assert!(
        !kept(&env, &|c| {
            c.env("SANDGATE_KEEP_BACKGROUND", "0");
        })
        .0
    );
    let config = env.root.join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.json"), r#"{"keep_background": true}"#).unwrap();
    assert!(kept(&env, &|_| {}).0);
    std::fs::remove_file(config.join("config.json")).unwrap();
    let project = env.ws.join(".sandgate");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("config.json"), r#"{"keep_background": true}"#).unwrap();
    let (left, stderr) = kept(&env, &|_| {});
    assert!(!left, "a project file kept the background");
    assert!(stderr.contains("ignoring `keep_background`"), "{stderr}");
}

/// `tmp --clean` does not leave a kept namespace using the temp it removes.
#[test]
fn tmp_clean_stops_what_a_call_kept_running_with_that_temp() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let mark = unique_mark("clean");
    let script = "cd /tmp && sleep 1010 >/dev/null 2>&1 </dev/null &";
    assert_status(&kept_call(&env, "workspace-write", &mark, script), 0);
    assert!(!processes_marked(&mark).is_empty());
    let out = subcommand(
        &env,
        &["tmp", "--clean", "--workspace", &env.ws.to_string_lossy()],
    );
    let left = left_after_a_moment(&mark);
    kill_marked(&mark);
    assert_status(&out, 0);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("stopped"),
        "{}",
        show(&out)
    );
    assert_eq!(left, Vec::<i32>::new());
    assert!(!private_tmp_of(&env).exists());
}

/// A marker of kind `timeout` on stderr, parsed.
fn timeout_marker(out: &std::process::Output) -> serde_json::Value {
    stderr_markers(out)
        .into_iter()
        .find(|m| m["kind"] == "timeout")
        .unwrap_or_else(|| panic!("no timeout marker: {}", show(out)))
}

#[test]
fn a_time_limit_ends_the_whole_tree_with_124() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for mode in ["read-only", "workspace-write", "full-access"] {
        // A background child, and a foreground that ignores SIGTERM: only SIGKILL ends it.
        for (what, script) in [
            ("sleeping", "sleep 1011 & sleep 1012"),
            (
                "ignoring SIGTERM",
                "trap '' TERM; (trap '' TERM; setsid sleep 1013 &); while :; do sleep 0.05; done",
            ),
        ] {
            let mark = unique_mark("timeout");
            let mut cmd = env.sandgate(mode);
            cmd.env("LEFTOVER_MARK", &mark).args([
                "--timeout",
                "1s",
                "--",
                "/bin/sh",
                "-c",
                script,
            ]);
            let start = Instant::now();
            let out = output(&mut cmd);
            let took = start.elapsed();
            let left = processes_marked(&mark);
            kill_marked(&mark);
            assert_status(&out, 124);
            assert!(
                took >= Duration::from_secs(1) && took < Duration::from_secs(10),
                "{mode}, {what}: took {took:?}"
            );
            let marker = timeout_marker(&out);
            assert_eq!(marker["mode"], mode, "{marker}");
            assert_eq!(marker["timeout"], "1s", "{marker}");
            assert_eq!(left, Vec::<i32>::new(), "{mode}, {what}: left running");
        }
        // In time: the command's own status, no marker.
        let mut cmd = env.sandgate(mode);
        cmd.args(["--timeout", "30s", "--", "/bin/sh", "-c", "exit 5"]);
        let out = output(&mut cmd);
        assert_status(&out, 5);
        assert!(stderr_markers(&out).is_empty(), "{}", show(&out));
    }
}

#[test]
fn a_time_limit_comes_from_the_variable_and_the_files_the_shortest_winning() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let limited = |cmd: &mut Command| {
        cmd.args(["--", "/bin/sh", "-c", "sleep 20"]);
        let start = Instant::now();
        let out = output(cmd);
        (
            out.status.code(),
            start.elapsed() < Duration::from_secs(15),
            out,
        )
    };
    let mut cmd = env.sandgate("workspace-write");
    cmd.env("SANDGATE_TIMEOUT", "1s");
    let (code, quick, out) = limited(&mut cmd);
    assert_eq!((code, quick), (Some(124), true), "{}", show(&out));

    // The user's file gives the default; a flag replaces it.
    let config = env.root.join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.json"), r#"{"timeout": "1s"}"#).unwrap();
    let (code, quick, out) = limited(&mut env.sandgate("workspace-write"));
    assert_eq!((code, quick), (Some(124), true), "{}", show(&out));
    std::fs::write(config.join("config.json"), r#"{"timeout": "1h"}"#).unwrap();
    // The managed file is a ceiling below the user's; a project may lower it further.
    std::fs::write(env.root.join("managed.json"), r#"{"timeout": "2s"}"#).unwrap();
    let mut cmd = env.sandgate("workspace-write");
    cmd.args(["--timeout", "1h"]);
    let (code, quick, out) = limited(&mut cmd);
    assert_eq!((code, quick), (Some(124), true), "{}", show(&out));
    assert_eq!(timeout_marker(&out)["timeout"], "2s");
    std::fs::create_dir_all(env.ws.join(".sandgate")).unwrap();
    std::fs::write(env.ws.join(".sandgate/config.json"), r#"{"timeout": "1s"}"#).unwrap();
    let (code, quick, out) = limited(&mut env.sandgate("workspace-write"));
    assert_eq!((code, quick), (Some(124), true), "{}", show(&out));
    assert_eq!(timeout_marker(&out)["timeout"], "1s");
    // A duration that means nothing is refused: a usage error as a flag, a configuration
    // error in a file.
    let mut cmd = env.sandgate("workspace-write");
    cmd.args(["--timeout", "0s", "--", "true"]);
    assert_status(&output(&mut cmd), 64);
    std::fs::write(
        env.ws.join(".sandgate/config.json"),
        r#"{"timeout": "soon"}"#,
    )
    .unwrap();
    let mut cmd = env.sandgate("workspace-write");
    cmd.args(["--", "true"]);
    assert_status(&output(&mut cmd), 78);
}

/// sandgate's parent-death signal ends the namespace if sandgate dies while the command
/// runs, kept or not (`process::killing_sandgate_leaves_no_orphan`); once the command has
/// ended and init keeps what it left, sandgate's own exit must not end it.
#[test]
fn a_kept_process_survives_sandgates_own_exit() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let mark = unique_mark("kept-exit");
    let script = "sleep 1014 >/dev/null 2>&1 </dev/null &";
    assert_status(&kept_call(&env, "workspace-write", &mark, script), 0);
    std::thread::sleep(Duration::from_millis(300));
    let left = processes_marked(&mark);
    let _ = subcommand(&env, &["stop", "--workspace", &env.ws.to_string_lossy()]);
    kill_marked(&mark);
    assert!(!left.is_empty(), "the kept process ended with sandgate");
}

#[test]
fn a_nested_call_stays_in_its_parents_namespace() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let inner = sandgate_inside();
    let mark = unique_mark("nested");
    let script = format!(
        "'{inner}' --sandbox workspace-write -- /bin/sh -c 'sleep 1015 & tr \"\\0\" \" \" < /proc/1/cmdline; echo'; \
         sleep 0.3; ps -e -o args= | grep -cx 'sleep 1015'",
        inner = inner.display()
    );
    let mut cmd = env.sandgate("workspace-write");
    cmd.env("LEFTOVER_MARK", &mark)
        .args(["--", "/bin/sh", "-c", &script]);
    let out = output(&mut cmd);
    let left = processes_marked(&mark);
    kill_marked(&mark);
    assert_status(&out, 0);
    let seen = String::from_utf8_lossy(&out.stdout);
    // The inner command sees the outer init as pid 1 (without a PID namespace, the
    // host's)...
    assert!(
        landlock_backend() || seen.starts_with("sandgate-init \n"),
        "{}",
        show(&out)
    );
    // ...its background process outlives the inner call, inside the outer namespace...
    assert!(seen.trim_end().ends_with('1'), "{}", show(&out));
    // ...and ends with the outer one.
    assert_eq!(left, Vec::<i32>::new());
}

#[test]
fn doctor_reports_the_process_boundary() {
    let d = doctor();
    assert!(d["namespaces"]["pid"].is_boolean(), "{d}");
    for mode in RESTRICTED {
        assert!(
            d["profiles"][mode]["guarantees"]["process-boundary"].is_boolean(),
            "{mode}: {d}"
        );
    }
    assert!(d["profiles"]["full-access"]["guarantees"]["process-boundary"].is_null());
    if landlock_backend() {
        assert_eq!(
            d["profiles"]["read-only"]["guarantees"]["process-boundary"],
            true
        );
        let by = d["profiles"]["read-only"]["held_by"]["process-boundary"].as_str();
        assert!(
            by.is_some_and(|b| b.contains("landlock's ptrace rule")),
            "{d}"
        );
    } else if require("pid-namespace", d["namespaces"]["pid"] == true) {
        assert_eq!(
            d["profiles"]["read-only"]["guarantees"]["process-boundary"],
            true
        );
    }
    let out = output(Command::new(sandgate()).arg("doctor"));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("process-boundary"),
        "{}",
        show(&out)
    );
}

/// Where the kernel refuses a new procfs — in a user namespace, while parts of the
/// existing `/proc` are covered (container runtimes cover `/proc/keys` and others) — the
/// call runs without a PID namespace, says why, and is not degraded: landlock's ptrace
/// rule holds the process boundary.
#[test]
fn a_refused_proc_runs_without_a_pid_namespace_and_says_why() {
    let env = TestEnv::new();
    // Where the kernel refuses this test its namespaces, it refuses sandgate's too: the
    // landlock backend runs the call, without a PID namespace, and is not degraded either.
    if landlock_backend() {
        for mode in RESTRICTED {
            let out = env.sh(mode, "echo ran; head -c 13 /proc/1/cmdline");
            assert_status(&out, 0);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.starts_with("ran\n"), "{}", show(&out));
            assert!(!stdout.contains("sandgate-init"), "{}", show(&out));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!stderr.contains("degraded_enforcement"), "{}", show(&out));
        }
        return;
    }
    // A user and mount namespace of the test's own, with `/proc/keys` covered; sandgate
    // runs as uid 65534 in a user namespace below it, so its own namespaces lock that
    // cover in place, as they would under a container runtime. (`/tmp` there is a tmpfs
    // of its own: sandgate would make `/tmp/sandgate-65534` in it, which as root would be
    // the host's directory of the real uid 65534.)
    let covered = |sandgate: &Command| {
        let mut wrapper = Command::new("unshare");
        wrapper.args([
            "-r",
            "-m",
            "/bin/sh",
            "-c",
            r#"mount -t tmpfs tmpfs /tmp && mount --bind /dev/null /proc/keys && exec unshare -U --map-user=65534 --map-group=65534 "$@""#,
            "sh",
        ]);
        behind(wrapper, sandgate)
    };
    for mode in RESTRICTED {
        let mut cmd = env.sandgate(mode);
        cmd.args([
            "--",
            "/bin/sh",
            "-c",
            "echo ran; head -c 13 /proc/1/cmdline",
        ]);
        let out = output(&mut covered(&cmd));
        assert_status(&out, 0);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.starts_with("ran\n"), "{}", show(&out));
        assert!(!stdout.contains("sandgate-init"), "{}", show(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("cannot give the sandbox a PID namespace"),
            "{}",
            show(&out)
        );
        assert!(!stderr.contains("degraded_enforcement"), "{}", show(&out));
    }
    // Control: without the cover the same stack runs.
    let mut cmd = env.sandgate("read-only");
    cmd.args(["--", "/bin/sh", "-c", "echo ran"]);
    let mut wrapper = Command::new("unshare");
    wrapper.args([
        "-r",
        "-m",
        "/bin/sh",
        "-c",
        r#"mount -t tmpfs tmpfs /tmp && exec unshare -U --map-user=65534 --map-group=65534 "$@""#,
        "sh",
    ]);
    let out = output(&mut behind(wrapper, &cmd));
    assert_status(&out, 0);
}
