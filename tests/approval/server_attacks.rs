//! `sandgate approvals` under attack: what a sandboxed command (and what it leaves running)
//! can do against the server, its discovery and its clients.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::server::{asker, ApprovalsServer};
use crate::support::*;

/// A stand-in for an approvals server that answers every question `allowed-once` and
/// notes its id in `log`: binds `socket` (directory 0700, socket 0600, as the real one),
/// then leaves itself running in the background and returns. It stops when `<log>.stop`
/// appears, or after a minute.
const FAKE_SERVER: &str = r#"
import json, os, socket, sys, time
path, log = sys.argv[1], sys.argv[2]
os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
os.chmod(os.path.dirname(path), 0o700)
try:
    os.unlink(path)
except FileNotFoundError:
    pass
if os.fork() > 0:
    # Returns once the server listens (the process that listens is the one that serves).
    start = time.time()
    while not os.path.exists(path) and time.time() - start < 10:
        time.sleep(0.01)
    os._exit(0)
os.setsid()
os.umask(0o177)
s = socket.socket(socket.AF_UNIX)
s.bind(path + '.new')
s.listen(16)
os.rename(path + '.new', path)
null = os.open('/dev/null', os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
s.settimeout(0.2)
start = time.time()
while not os.path.exists(log + '.stop') and time.time() - start < 60:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    c.settimeout(5)
    try:
        data = b''
        while b'\r\n\r\n' not in data:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b'\r\n\r\n')
        length = 0
        for line in head.split(b'\r\n')[1:]:
            k, _, v = line.partition(b':')
            if k.strip().lower() == b'content-length':
                length = int(v)
        while len(body) < length:
            chunk = c.recv(65536)
            if not chunk:
                break
            body += chunk
        if body:
            qid = json.loads(body)['id']
            with open(log, 'a') as f:
                f.write(qid + '\n')
            reply = json.dumps({'id': qid, 'decision': 'allowed-once'}).encode()
            c.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n'
                      b'Content-Length: %d\r\nConnection: close\r\n\r\n' % len(reply) + reply)
    except Exception:
        pass
    c.close()
"#;

/// Asks, from read-only, to `touch ws/<file>` at workspace-write, with the runtime
/// directory (so the default socket) at `runtime`.
fn ask_with_runtime(env: &TestEnv, runtime: &Path, file: &str) -> std::process::Output {
    let mut cmd = asker(env, file, "write", &["--approval-timeout", "10"]);
    output(cmd.env("XDG_RUNTIME_DIR", runtime))
}

/// Stops the fake servers that note questions in `log`, and waits for them to go.
fn stop_fakes(log: &Path) {
    let stop = log.with_extension("log.stop");
    std::fs::write(&stop, "").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let _ = std::fs::remove_file(&stop);
}

#[test]
fn a_fake_server_left_by_a_sandbox_at_the_default_socket_is_not_asked() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    // The runtime directory lies beneath the workspace, where sandboxed commands write (as
    // ~/.local/state does for an agent working in its home without XDG_RUNTIME_DIR).
    let runtime = env.ws.join("run");
    let socket = runtime.join("sandgate/approvals.sock");
    let log = env.ws.join("asked.log");
    let socket_arg = socket.to_string_lossy().into_owned();
    let log_arg = log.to_string_lossy().into_owned();

    // An earlier call, at workspace-write, leaves (keeps) a fake server running there.
    let mut keeping = env.sandgate("workspace-write");
    keeping.args([
        "--keep-background",
        "--",
        "/usr/bin/python3",
        "-c",
        FAKE_SERVER,
        &socket_arg,
        &log_arg,
    ]);
    let out = output(&mut keeping);
    assert_status(&out, 0);
    let out = ask_with_runtime(&env, &runtime, "granted");
    let asked = std::fs::read_to_string(&log).unwrap_or_default();
    stop_fakes(&log);
    assert!(
        !env.ws.join("granted").exists(),
        "a server inside the sandbox answered the question: {}",
        show(&out)
    );
    assert_status(&out, 77);
    assert!(asked.is_empty(), "the question was sent to it: {asked}");

    // The control: the same program run outside any sandbox is the user's own answerer,
    // and is asked.
    let _ = std::fs::remove_file(&socket);
    let out = output(
        Command::new("/usr/bin/python3")
            .args(["-c", FAKE_SERVER, &socket_arg, &log_arg])
            .stdin(Stdio::null()),
    );
    assert_status(&out, 0);
    let out = ask_with_runtime(&env, &runtime, "control");
    stop_fakes(&log);
    assert_status(&out, 0);
    assert!(env.ws.join("control").exists(), "{}", show(&out));
}

/// The state letter of `pid` (`R`, `S`, `Z`, …) from /proc, or None once it is reaped.
fn state_of(pid: u32) -> Option<char> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))
        .and_then(|s| s.trim().chars().next())
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([name, &pid.to_string()])
        .status()
        .unwrap_or_else(|e| panic!("kill: {e}"));
    assert!(status.success(), "kill {name} {pid}");
}

/// Waits (at most 20 s) until `done` holds.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "never: {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_connect_made_by_a_supervisor_that_has_exited_but_is_not_reaped_is_refused() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let server = ApprovalsServer::beneath_the_workspace(&env);
    let socket_arg = server.socket.to_string_lossy().into_owned();
    let mut asker = asker(
        &env,
        "granted",
        "write",
        &["--approval-endpoint", &server.endpoint()],
    )
    .spawn()
    .unwrap();
    let id = server.only_pending_id(&env);

    // Connects, then leaves (keeps) a process in the background that holds the connection and,
    // once `go` appears, answers the question on it; the foreground exits at once.
    let go = env.ws.join("go");
    let reply = env.ws.join("reply");
    let script = format!(
        "import os,socket,time\n\
         s=socket.socket(socket.AF_UNIX)\n\
         s.connect({socket_arg:?})\n\
         if os.fork()==0:\n\
         \x20os.setsid()\n\
         \x20null=os.open('/dev/null',os.O_RDWR)\n\
         \x20[os.dup2(null,fd) for fd in (0,1,2)]\n\
         \x20start=time.time()\n\
         \x20while not os.path.exists({go:?}) and time.time()-start<30: time.sleep(0.02)\n\
         \x20b=b'{{\"decision\":\"allowed-once\"}}'\n\
         \x20r=b''\n\
         \x20try:\n\
         \x20 s.sendall(b'POST /questions/{id} HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: %d\\r\\n\\r\\n' % len(b) + b)\n\
         \x20 s.settimeout(5)\n\
         \x20 r=s.recv(4096)\n\
         \x20except OSError:\n\
         \x20 pass\n\
         \x20open({reply:?},'wb').write(r or b'nothing')\n\
         \x20os._exit(0)\n",
        go = go.to_string_lossy(),
        reply = reply.to_string_lossy(),
    );

    // The server is held up (as a busy one is) while the sandbox's supervisor makes the
    // connect, which waits in the socket's backlog; the supervisor's sandgate then exits,
    // and its parent has not reaped it yet when the server gets to the connection.
    signal(server.pid(), "-STOP");
    let mut attacker = env.sandgate("workspace-write");
    attacker
        .args(["--keep-background", "--", "/usr/bin/python3", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut attacker = attacker.spawn().unwrap();
    let pid = attacker.id();
    wait_until("the attacking sandgate exits", || {
        state_of(pid) == Some('Z')
    });
    signal(server.pid(), "-CONT");
    std::fs::write(&go, "").unwrap();
    wait_until("the background process reports", || reply.exists());
    let _ = attacker.wait();
    let answered = std::fs::read_to_string(&reply).unwrap_or_default();
    assert!(
        !answered.contains("200 OK"),
        "the sandbox answered its own question: {answered}\nserver: {}",
        server.errors()
    );
    assert!(
        server.errors().contains("refused a connection"),
        "{}",
        server.errors()
    );
    assert_eq!(server.board(&env)["pending"][0]["id"], id.as_str());
    assert!(!env.ws.join("granted").exists());

    // The control: the same program outside any sandbox is the user's own, and answers.
    std::fs::remove_file(&reply).unwrap();
    let out = env.run("full-access", &["/usr/bin/python3", "-c", &script]);
    assert_status(&out, 0);
    wait_until("the background process reports", || reply.exists());
    let answered = std::fs::read_to_string(&reply).unwrap_or_default();
    assert!(answered.contains("200 OK"), "{answered}");
    let status = asker.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(env.ws.join("granted").exists());
}

#[test]
fn list_shows_every_bidirectional_control_as_an_escape() {
    let env = TestEnv::new();
    let server = ApprovalsServer::start(&env, &[]);
    // U+061C (ARABIC LETTER MARK) is a bidirectional control like U+200F: in a terminal or
    // a page that lays out bidirectional text it reorders what a person reads.
    let name = "notes\u{61c}\u{202e}txt.sh";
    let mut asker = asker(&env, name, "tidy \u{61c}the notes", &[])
        .spawn()
        .unwrap();
    let id = server.only_pending_id(&env);
    let out = server.client(&env, &["list"]);
    assert_status(&out, 0);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("\\u{202e}"), "{shown}");
    assert!(
        !shown.contains('\u{61c}') && shown.contains("\\u{61c}"),
        "{shown}"
    );
    assert_status(&server.client(&env, &["reject", &id]), 0);
    let _ = asker.wait();
}

#[test]
fn the_socket_is_out_of_reach_through_proc_too() {
    let env = TestEnv::new();
    let server = ApprovalsServer::start(&env, &[]);
    let pid = server.pid();
    let socket = server.socket.to_string_lossy().into_owned();
    let fds: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .map(|e| e.path().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let mut routes = vec![
        format!("/proc/{pid}/root{socket}"),
        format!("/proc/{pid}/cwd/../../../../../../..{socket}"),
        format!("/proc/1/root{socket}"),
    ];
    routes.extend(fds);
    for mode in ["read-only", "workspace-write"] {
        for route in &routes {
            let got = env.probe(mode, &["unix-connect", route]);
            assert_ne!(got, "ok", "{mode}: connected through {route}");
        }
    }
    assert!(!server.errors().contains("refused"), "{}", server.errors());
    // The control: outside any sandbox the first route reaches it. (The probe hangs up at
    // once, so the server may log that it refused an exiting peer: that is not checked.)
    assert_eq!(
        env.probe("full-access", &["unix-connect", &routes[0]]),
        "ok"
    );
}

/// Runs `sandgate approvals serve --http 127.0.0.1:0` for at most 3 s in a mount namespace
/// of its own (a user namespace too, so that uid 65534 can), where `/dev/urandom` is
/// `urandom` when given.
fn serve_with_urandom(
    env: &TestEnv,
    urandom: Option<&Path>,
    socket: &Path,
) -> std::process::Output {
    let script = r#"
        if [ -n "$1" ]; then mount --bind "$1" /dev/urandom || exit 99; fi
        exec timeout 3 "$2" approvals serve --socket "$3" --http 127.0.0.1:0"#;
    let mut cmd = Command::new("unshare");
    env.isolate(&mut cmd);
    cmd.args(["-Urm", "sh", "-c", script, "sh"])
        .arg(urandom.map(Path::as_os_str).unwrap_or_default())
        .arg(sandgate())
        .arg(socket)
        .stdin(Stdio::null());
    output(&mut cmd)
}

#[test]
fn the_panel_does_not_start_with_a_token_that_could_be_guessed() {
    let env = TestEnv::new();
    // A broken container image: /dev/urandom is a regular file. Ids fall back to time and
    // pid there, which a panel token must not: another user on the machine reads the
    // server's pid and start time in /proc.
    let fake = env.root.join("urandom");
    std::fs::write(&fake, "0123456789abcdef").unwrap();
    let out = serve_with_urandom(&env, Some(&fake), &env.root.join("a/approvals.sock"));
    assert_ne!(out.status.code(), Some(99), "cannot mount: {}", show(&out));
    assert!(
        out.stdout.is_empty(),
        "the panel started with a guessable token: {}",
        show(&out)
    );
    assert_status(&out, 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no randomness"),
        "{}",
        show(&out)
    );

    // The control: with the kernel's /dev/urandom it starts, with a 128-bit token.
    let out = serve_with_urandom(&env, None, &env.root.join("b/approvals.sock"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let token = stdout
        .lines()
        .next()
        .and_then(|l| l.split_once("/?token="))
        .map(|(_, t)| t.to_owned())
        .unwrap_or_else(|| panic!("no panel URL: {}", show(&out)));
    assert!(
        token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()),
        "{token}"
    );
}

/// An asker of the user's own (an agent outside any sandbox) that asks the server at
/// `socket` under the id `id` and prints the answer it gets; it holds its question open
/// for up to 30 s.
const ASK_AS: &str = r#"
import json, socket, sys, datetime
path, qid = sys.argv[1], sys.argv[2]
expires = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=30))
body = json.dumps({
    "version": 1, "id": qid, "kind": "sandbox_escalation",
    "command": {"argv": ["true"], "cwd": "/"}, "workspace": "/",
    "standing": {"mode": "read-only", "approval": "on-request", "preset": "read-only"},
    "requested": {"mode": "workspace-write", "justification": "nothing"},
    "reason": "", "options": ["allowed-once", "rejected"],
    "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
}).encode()
s = socket.socket(socket.AF_UNIX)
s.connect(path)
s.settimeout(30)
s.sendall(b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n" % len(body) + body)
reply = b""
try:
    while b"decision" not in reply and b"error" not in reply:
        chunk = s.recv(65536)
        if not chunk:
            break
        reply += chunk
except socket.timeout:
    pass
print(reply.decode(errors="replace"), flush=True)
"#;

#[test]
fn an_asker_under_the_start_of_anothers_id_does_not_take_its_answer() {
    let env = TestEnv::new();
    let server = ApprovalsServer::start(&env, &[]);
    let mut asker = asker(&env, "granted", "write", &[]).spawn().unwrap();
    let id = server.only_pending_id(&env);
    // An agent sees the question arrive and asks under the first 8 characters of its id,
    // the start a person would type after reading `approvals list`.
    let start = &id[..8];
    let mut hostile = Command::new("/usr/bin/python3")
        .args(["-c", ASK_AS])
        .arg(&server.socket)
        .arg(start)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    server.pending(&env, 2);
    let out = server.client(&env, &["allow", start]);
    let _ = hostile.kill();
    let answered = hostile.wait_with_output().unwrap();
    let answered = String::from_utf8_lossy(&answered.stdout);
    assert!(
        !answered.contains("allowed-once"),
        "the answer typed for {id} went to the question asked as {start}: {answered}"
    );
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("more than one"),
        "{}",
        show(&out)
    );
    // The control: the whole id reaches the question it names.
    assert_status(&server.client(&env, &["allow", &id]), 0);
    let status = asker.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(env.ws.join("granted").exists());
}

#[test]
fn connections_held_open_on_the_panel_port_do_not_shut_the_socket() {
    let env = TestEnv::new();
    let server = ApprovalsServer::start(&env, &["--http", "127.0.0.1:0"]);
    let addr = server
        .url
        .as_deref()
        .and_then(|u| u.strip_prefix("http://"))
        .and_then(|u| u.split_once('/'))
        .map(|(addr, _)| addr.to_owned())
        .unwrap_or_else(|| panic!("no panel URL: {}", server.errors()));
    // The server's fds made few (a desktop's soft limit is 1024; this makes the same point
    // with fewer connections).
    let pid = server.pid().to_string();
    let out = output(Command::new("prlimit").args(["--pid", &pid, "--nofile=64:64"]));
    assert_status(&out, 0);
    // Anyone on the machine (any uid; a page's scripts cannot, the port is TCP) opens
    // connections to the panel port and sends nothing.
    let held: Vec<std::net::TcpStream> = (0..100)
        .filter_map(|_| std::net::TcpStream::connect(&addr).ok())
        .collect();
    assert!(held.len() >= 64, "only {} connections", held.len());
    std::thread::sleep(std::time::Duration::from_millis(300));
    // The user's own client on the socket is still served.
    let mut cmd = Command::new("timeout");
    env.isolate(&mut cmd);
    cmd.args(["5"])
        .arg(sandgate())
        .args(["approvals", "list", "--json", "--socket"])
        .arg(&server.socket);
    let out = output(&mut cmd);
    drop(held);
    assert_status(&out, 0);
}

#[test]
fn a_body_that_trickles_is_cut_off() {
    use std::io::{Read, Write};
    let env = TestEnv::new();
    let server = ApprovalsServer::start(&env, &[]);
    let mut stream = std::os::unix::net::UnixStream::connect(&server.socket).unwrap();
    stream
        .write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"id\":")
        .unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply:?}");
    // The server still answers everyone else.
    assert_eq!(
        server.board(&env)["pending"].as_array().map(Vec::len),
        Some(0)
    );
}
