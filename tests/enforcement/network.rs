//! Network confinement: no IP, raw, packet or netlink sockets;
//! no unix socket outside the writable roots by any path; unix sockets inside work.

use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram, UnixListener};

use crate::support::*;

#[test]
fn ip_raw_packet_and_netlink_sockets_are_refused() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = tcp.local_addr().unwrap().to_string();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_addr = udp.local_addr().unwrap().to_string();
    // full-access reaches the listener the test started.
    env.assert_refused(&["tcp-connect", &addr], "EPERM");
    env.assert_refused(&["tcp-bind"], "EPERM");
    env.assert_refused(&["udp-send", &udp_addr], "EPERM");
    env.assert_refused(&["netlink-socket"], "EPERM");
    env.assert_refused(&["inet6-socket"], "EPERM");
    for op in ["raw-socket", "packet-socket"] {
        // Without CAP_NET_RAW the host refuses these too; the sandbox must refuse them
        // itself (EPERM from seccomp) whoever runs it.
        for mode in ["read-only", "workspace-write"] {
            assert_eq!(env.probe(mode, &[op]), "err:EPERM", "{op} under {mode}");
        }
    }
}

#[test]
fn unix_sockets_outside_the_writable_roots_are_unreachable_by_any_path() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let path = env.outside.join("service.sock");
    let _listener = UnixListener::bind(&path).unwrap();
    std::os::unix::fs::symlink(&path, env.ws.join("link.sock")).unwrap();
    std::os::unix::fs::symlink(&env.outside, env.ws.join("dir-link")).unwrap();
    let p = path.to_string_lossy().into_owned();
    for target in [
        p.as_str(),
        "link.sock",
        "../outside/service.sock",
        "dir-link/service.sock",
        "./dir-link/../ws/link.sock",
    ] {
        env.assert_refused(&["unix-connect", target], "EACCES");
    }
    // /proc/self/root leads to the same socket. The supervisor, outside the sandbox's PID
    // namespace, cannot follow the sandbox's `self`: the path fails before any socket.
    // (Without a PID namespace it follows it, to the socket it refuses.)
    let through_proc = format!("/proc/self/root{p}");
    assert_eq!(
        env.probe("full-access", &["unix-connect", &through_proc]),
        "ok"
    );
    for mode in ["read-only", "workspace-write"] {
        let refused = if landlock_backend() {
            "err:EACCES"
        } else {
            "err:ENOENT"
        };
        assert_eq!(
            env.probe(mode, &["unix-connect", &through_proc]),
            refused,
            "{mode}"
        );
    }
}

#[test]
fn abstract_unix_sockets_are_refused() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let name = format!("sandgate-test-{}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let _listener = UnixListener::bind_addr(&addr).unwrap();
    env.assert_refused(&["unix-connect-abstract", &name], "EPERM");
}

#[test]
fn unix_datagram_sockets_cannot_send_to_outside_paths() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let path = env.outside.join("dgram.sock");
    let _receiver = UnixDatagram::bind(&path).unwrap();
    let p = path.to_string_lossy().into_owned();
    env.assert_refused(&["unix-dgram-sendto", &p], "EPERM");
    env.assert_refused(&["unix-dgram-sendmsg", &p], "EPERM");
    env.assert_refused(&["socketpair-dgram-sendto", &p], "EPERM");
}

#[test]
fn unix_sockets_inside_the_workspace_and_socketpairs_work() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let abs = env.ws.join("a.sock").to_string_lossy().into_owned();
    assert_eq!(
        env.probe("workspace-write", &["unix-listen-connect", &abs, "a.sock"]),
        "ok"
    );
    std::fs::remove_file(env.ws.join("a.sock")).unwrap();
    std::fs::create_dir(env.ws.join("sub")).unwrap();
    std::os::unix::fs::symlink(env.ws.join("sub"), env.ws.join("sub-link")).unwrap();
    assert_eq!(
        env.probe(
            "workspace-write",
            &[
                "unix-listen-connect",
                "sub/b.sock",
                "sub-link/../sub/b.sock"
            ]
        ),
        "ok"
    );
    // read-only's private temp is its one writable root.
    let out = env.sh(
        "read-only",
        &format!(
            "s=\"${{TMPDIR:-/tmp}}/c.sock\"; '{}' unix-listen-connect \"$s\" \"$s\"",
            probe().display()
        ),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "{}",
        show(&out)
    );
    for mode in ["read-only", "workspace-write"] {
        assert_eq!(env.probe(mode, &["socketpair-stream"]), "ok", "{mode}");
    }
}

/// A process the command leaves running in the background of a call that keeps it keeps
/// its sandbox after sandgate returns, and keeps being served: a detached supervisor
/// answers its connects (here: allowed inside the workspace) and observed writes until it
/// exits.
#[test]
fn background_processes_stay_served_after_sandgate_returns() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let sock = env.ws.join("late.sock");
    let _listener = UnixListener::bind(&sock).unwrap();
    let outside = env.outside.join("late");
    // The background job writes to the stdout pipe it inherited; `output` returns once it
    // has closed it, well after sandgate itself returned.
    let script = format!(
        "(sleep 0.5; echo late > late.txt; '{}' unix-connect '{}'; echo x > '{}' || echo refused) & exit 0",
        probe().display(),
        sock.display(),
        outside.display()
    );
    let mut cmd = env.sandgate("workspace-write");
    cmd.args(["--keep-background", "--", "/bin/sh", "-c", &script]);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ok\nrefused\n",
        "{}",
        show(&out)
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("late.txt")).unwrap_or_default(),
        "late\n"
    );
    assert!(!outside.exists());
}

/// If the supervisor is gone while sandboxed processes live on (here: kept after the
/// command ended, then their detached supervisor killed), what needed it fails closed with
/// ENOSYS — even a connect to a socket inside the workspace.
#[test]
fn without_any_supervisor_connects_fail_closed() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let sock = env.ws.join("late.sock");
    let _listener = UnixListener::bind(&sock).unwrap();
    let result = env.ws.join("result");
    // The result file is opened while the supervisor still answers (an open for writing
    // is a notified call too): by the shell itself, before sandgate can return, not by the
    // background subshell, which a loaded machine may start only after the supervisor is
    // gone.
    let script = format!(
        "exec 3>'{}'; (while [ ! -e go ]; do sleep 0.05; done; '{}' unix-connect '{}' >&3) >/dev/null 2>&1 </dev/null &",
        result.display(),
        probe().display(),
        sock.display()
    );
    let mark = unique_mark("supervisor");
    let mut cmd = env.sandgate("workspace-write");
    cmd.env("LEFTOVER_MARK", &mark)
        .args(["--keep-background", "--", "/bin/sh", "-c", &script]);
    assert_status(&output(&mut cmd), 0);
    // What carries the mark now: the background subshell and the detached supervisor
    // (sandgate's copy, not in the sandbox's PID namespace). Kill the supervisor.
    let supervisors: Vec<i32> = processes_marked(&mark)
        .into_iter()
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|exe| exe.file_name() == sandgate().file_name())
        })
        .collect();
    assert_eq!(supervisors.len(), 1, "{supervisors:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(supervisors[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    std::fs::write(env.ws.join("go"), "").unwrap();
    let start = std::time::Instant::now();
    let answer = loop {
        let text = std::fs::read_to_string(&result).unwrap_or_default();
        if !text.is_empty() || start.elapsed().as_secs() > 10 {
            break text;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    kill_marked(&mark);
    assert_eq!(answer.trim(), "err:ENOSYS");
}

/// A listener that accepts and counts connections on a background thread until dropped.
struct Counting {
    count: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Counting {
    fn bind(path: &std::path::Path) -> Counting {
        use std::sync::atomic::Ordering;
        let listener = UnixListener::bind(path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (c, s) = (count.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok(_) => {
                        c.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
                }
            }
        });
        Counting { count, stop }
    }

    fn count(&self) -> usize {
        // Let the accept loop drain what is queued.
        std::thread::sleep(std::time::Duration::from_millis(100));
        self.count.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The attack a supervisor that answered CONTINUE would lose: another thread rewrites the
/// address (or re-points the symlink) between the check and the kernel's own lookup. The
/// supervisor connects on its own copy, through the inode it checked, so not one connect
/// reaches the outside listener; the full-access control shows the race does reach it.
#[test]
fn racing_the_address_or_a_symlink_never_reaches_outside() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let (inside_path, outside_path) = (env.ws.join("in.sock"), env.outside.join("out.sock"));
    let (inside, outside) = (Counting::bind(&inside_path), Counting::bind(&outside_path));
    let (i, o) = (
        inside_path.to_string_lossy().into_owned(),
        outside_path.to_string_lossy().into_owned(),
    );
    let link = env.ws.join("race.sock").to_string_lossy().into_owned();
    for (what, args) in [
        ("address", vec!["connect-race", &i, &o, "400"]),
        (
            "symlink",
            vec!["connect-symlink-race", &link, &i, &o, "400"],
        ),
    ] {
        let before = outside.count();
        let out = env.probe("workspace-write", &args);
        assert!(out.starts_with("connected "), "{what}: {out}");
        assert_eq!(
            outside.count(),
            before,
            "{what}: a sandboxed connect reached the outside listener"
        );
        assert!(
            inside.count() > 0,
            "{what}: the race never connected inside"
        );
        // Control: unconfined, the same race does reach outside (a busy machine may need
        // more than one round to interleave).
        let reached = (0..20).any(|_| {
            let control = env.probe("full-access", &args);
            assert!(control.starts_with("connected "), "{what}: {control}");
            outside.count() > before
        });
        assert!(
            reached,
            "{what}: control: the race did not reach outside unconfined"
        );
    }
}
