//! The host session stays out of reach: the host's `/tmp` (and the servers whose sockets
//! live there), FIFOs, `/dev/shm`, SysV IPC and abstract socket names are invisible from
//! both restricted profiles, while the workflows that need a temp directory, shared memory
//! or a unix socket of their own keep working.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

const RESTRICTED: [&str; 2] = ["read-only", "workspace-write"];

/// A server listening in a 0700 directory of the host's `/tmp`, as tmux does.
struct HostServer {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    listener: UnixListener,
}

impl HostServer {
    fn start() -> HostServer {
        let dir = tempfile::Builder::new()
            .prefix("sandgate-tmux-")
            .tempdir_in("/tmp")
            .unwrap();
        let socket = dir.path().join("default");
        let listener = UnixListener::bind(&socket).unwrap();
        listener.set_nonblocking(true).unwrap();
        HostServer {
            _dir: dir,
            socket,
            listener,
        }
    }

    /// Counts the connections waiting to be accepted.
    fn connections(&self) -> usize {
        std::iter::from_fn(|| self.listener.accept().ok()).count()
    }

    fn inode(&self) -> u64 {
        std::fs::symlink_metadata(&self.socket).map_or(0, |m| m.ino())
    }
}

/// `path` relative to `from` (both absolute), through `..` up to `/`.
fn relative(from: &Path, path: &Path) -> String {
    let ups = from.components().count() - 1;
    format!(
        "{}{}",
        "../".repeat(ups),
        path.strip_prefix("/").unwrap_or(path).display()
    )
}

#[test]
fn a_host_server_in_tmp_sees_no_connection_and_keeps_its_socket() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let server = HostServer::start();
    let sock = server.socket.to_string_lossy().into_owned();
    std::os::unix::fs::symlink(&server.socket, env.ws.join("tmux-link")).unwrap();
    let inode = server.inode();
    // The control: unconfined, the connect reaches the server.
    assert_eq!(env.probe("full-access", &["unix-connect", &sock]), "ok");
    assert_eq!(server.connections(), 1);
    let dir = server.socket.parent().unwrap_or(Path::new("/")).display();
    for mode in RESTRICTED {
        for path in [
            sock.clone(),
            "tmux-link".into(),
            relative(&env.ws, &server.socket),
        ] {
            let verdict = env.probe(mode, &["unix-connect", &path]);
            assert!(
                verdict.starts_with("err:"),
                "{mode}: connect {path}: {verdict}"
            );
        }
        // Delete the socket and bind an impostor in its place.
        let probe = probe();
        let out = env.sh(
            mode,
            &format!(
                "rm -f '{sock}'; mkdir -p '{dir}'; '{}' unix-listen-connect '{sock}' '{sock}'",
                probe.display()
            ),
        );
        assert_eq!(server.connections(), 0, "{mode}: {}", show(&out));
        assert_eq!(
            server.inode(),
            inode,
            "{mode}: the host socket was replaced"
        );
    }
    // The server is still the one behind that path.
    UnixStream::connect(&server.socket).unwrap();
    assert_eq!(server.connections(), 1);
}

#[test]
fn allow_unix_socket_reaches_exactly_that_socket() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let allowed = HostServer::start();
    let other = HostServer::start();
    for mode in RESTRICTED {
        for target in [&allowed.socket, &other.socket] {
            let mut cmd = env.sandgate(mode);
            cmd.arg("--allow-unix-socket")
                .arg(&allowed.socket)
                .arg("--")
                .arg(probe())
                .arg("unix-connect")
                .arg(target);
            let out = output(&mut cmd);
            let verdict = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if target == &allowed.socket {
                assert_eq!(verdict, "ok", "{mode}: {}", show(&out));
            } else {
                assert!(verdict.starts_with("err:"), "{mode}: {}", show(&out));
            }
        }
        assert_eq!(allowed.connections(), 1, "{mode}");
        assert_eq!(other.connections(), 0, "{mode}");
    }
}

#[test]
fn an_extra_writable_root_does_not_make_its_sockets_reachable() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let socket = env.outside.join("service.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let log = env.root.join("denials.ndjson");
    let mut cmd = env.sandgate("workspace-write");
    cmd.arg("--writable-root")
        .arg(&env.outside)
        .arg("--denial-log")
        .arg(&log)
        .arg("--")
        .arg(probe())
        .arg("unix-connect")
        .arg(&socket);
    let out = output(&mut cmd);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "err:EACCES",
        "{}",
        show(&out)
    );
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !observing()
            || logged.contains("\"allow\":[\"--allow-unix-socket\",")
                && logged.contains("service.sock"),
        "{logged}\n{}",
        show(&out)
    );
    assert!(listener.accept().is_err(), "the connect reached the socket");
}

#[test]
fn a_host_fifo_and_a_host_shm_file_receive_nothing() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let dir = tempfile::Builder::new()
        .prefix("sandgate-fifo-")
        .tempdir_in("/tmp")
        .unwrap();
    let fifo = dir.path().join("editor-fifo");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    let shm = PathBuf::from(format!("/dev/shm/sandgate-test-{}", std::process::id()));
    std::fs::write(&shm, "host").unwrap();
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let (fifo_s, shm_s) = (fifo.display(), shm.display());
    for mode in RESTRICTED {
        env.sh(
            mode,
            &format!(
                "mkdir -p '{}'; echo evil > '{fifo_s}'; echo evil > '{shm_s}'; rm -f '{shm_s}'",
                dir.path().display()
            ),
        );
        let mut got = Vec::new();
        let _ = reader.read_to_end(&mut got);
        assert!(got.is_empty(), "{mode}: the host FIFO received {got:?}");
        assert_eq!(
            std::fs::read_to_string(&shm).unwrap_or_default(),
            "host",
            "{mode}"
        );
    }
    // The control: unconfined, the same write reaches the FIFO.
    env.sh("full-access", &format!("echo seen > '{fifo_s}'"));
    let mut got = String::new();
    let _ = reader.read_to_string(&mut got);
    assert_eq!(got, "seen\n");
    let _ = std::fs::remove_file(&shm);
}

/// A SysV shared-memory segment made on the host with `ipcmk`, removed at the end.
struct HostSegment(String);

impl HostSegment {
    fn create() -> HostSegment {
        let out = output(Command::new("ipcmk").args(["-M", "64"]));
        let text = String::from_utf8_lossy(&out.stdout);
        let id = text
            .split_whitespace()
            .last()
            .unwrap_or_else(|| panic!("ipcmk: {}", show(&out)))
            .to_owned();
        HostSegment(id)
    }

    /// `ipcs -m -i ID`: its attach, detach and change times, or an error once removed.
    fn state(&self) -> String {
        let out = output(Command::new("ipcs").args(["-m", "-i", &self.0]));
        format!("{}{}", String::from_utf8_lossy(&out.stdout), out.status)
    }
}

impl Drop for HostSegment {
    fn drop(&mut self) {
        let _ = Command::new("ipcrm").args(["-m", &self.0]).status();
    }
}

#[test]
fn a_host_sysv_segment_is_out_of_reach() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let segment = HostSegment::create();
    let before = segment.state();
    for mode in RESTRICTED {
        for op in ["sysv-shm-write", "sysv-shm-remove"] {
            let verdict = env.probe(mode, &[op, &segment.0]);
            assert!(verdict.starts_with("err:"), "{mode} {op}: {verdict}");
        }
        assert_eq!(segment.state(), before, "{mode}");
    }
    // The control: unconfined, the write attaches (and so changes the segment's times).
    assert_eq!(
        env.probe("full-access", &["sysv-shm-write", &segment.0]),
        "ok"
    );
}

#[test]
fn abstract_names_are_private_both_ways() {
    if !require_full_enforcement() {
        return;
    }
    use std::os::linux::net::SocketAddrExt;
    let env = TestEnv::new();
    // A host abstract socket is not reachable from inside.
    let host_name = format!("sandgate-host-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&host_name).unwrap();
    let host = UnixListener::bind_addr(&addr).unwrap();
    host.set_nonblocking(true).unwrap();
    assert_eq!(
        env.probe("full-access", &["unix-connect-abstract", &host_name]),
        "ok"
    );
    assert!(host.accept().is_ok(), "control connect");
    for mode in RESTRICTED {
        let verdict = env.probe(mode, &["unix-connect-abstract", &host_name]);
        assert!(verdict.starts_with("err:"), "{mode}: {verdict}");
        assert!(
            host.accept().is_err(),
            "{mode}: reached the host's abstract socket"
        );
    }
    // A name bound inside is not reachable from the host while the sandbox holds it. (The
    // landlock backend binds no abstract name at all: it could be a host daemon's.)
    for mode in RESTRICTED {
        let inner = format!("sandgate-inner-{mode}-{}", std::process::id());
        let mut child = env
            .sandgate(mode)
            .arg("--")
            .arg(probe())
            .args(["unix-bind-abstract", &inner, "1500"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 6];
        if let Some(out) = child.stdout.as_mut() {
            out.read_exact(&mut first).unwrap();
        }
        let bound: &[u8; 6] = if landlock_backend() {
            b"err:EP"
        } else {
            b"bound\n"
        };
        assert_eq!(&first, bound, "{mode}");
        let inner_addr = std::os::unix::net::SocketAddr::from_abstract_name(&inner).unwrap();
        assert!(
            UnixStream::connect_addr(&inner_addr).is_err(),
            "{mode}: the host reached a name the sandbox bound"
        );
        let _ = child.wait();
    }
}

#[test]
fn a_writable_root_or_tmpdir_swapped_for_a_symlink_is_refused_next_time() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let target = env.outside.join("target");
    std::fs::create_dir(&target).unwrap();
    for dir in ["data", "tmpdir"] {
        std::fs::create_dir(env.ws.join(dir)).unwrap();
    }
    // One call swaps both for symlinks to the outside.
    let out = env.sh(
        "workspace-write",
        &format!(
            "rm -r data tmpdir && ln -s '{t}' data && ln -s '{t}' tmpdir",
            t = target.display()
        ),
    );
    assert_status(&out, 0);
    // The next call names them as before: refused before anything runs.
    let mut cmd = env.sandgate("workspace-write");
    cmd.arg("--writable-root").arg(env.ws.join("data")).args([
        "--",
        "sh",
        "-c",
        "echo x > data/planted",
    ]);
    let out = output(&mut cmd);
    assert_status(&out, 78);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("symlink"),
        "{}",
        show(&out)
    );
    let mut cmd = env.sandgate("workspace-write");
    cmd.env("TMPDIR", env.ws.join("tmpdir")).args([
        "--",
        "sh",
        "-c",
        "echo x > \"$TMPDIR/planted\"",
    ]);
    let out = output(&mut cmd);
    assert_status(&out, 78);
    // A workspace reached through the planted link, next to a writable root holding it.
    let mut cmd = env.sandgate_without_workspace("workspace-write");
    cmd.arg("--writable-root")
        .arg(&env.ws)
        .arg("--workspace")
        .arg(env.ws.join("data"))
        .args(["--", "sh", "-c", "echo x > planted"]);
    let out = output(&mut cmd);
    assert_status(&out, 78);
    assert_eq!(
        std::fs::read_dir(&target)
            .map(Iterator::count)
            .unwrap_or(99),
        0,
        "the symlink's target was written"
    );
}

#[test]
fn a_root_raced_between_a_directory_and_a_symlink_never_becomes_the_links_target() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let secret = env.outside.join("secret");
    std::fs::create_dir(&secret).unwrap();
    std::fs::create_dir(env.ws.join("build")).unwrap();
    std::os::unix::fs::symlink(&secret, env.ws.join("build-link")).unwrap();
    // A call still running swaps the two while later calls set up. It swaps for 20 s at
    // most; the calls go on until enough have raced it (a loaded machine starts fewer
    // calls a second), and then it is stopped.
    let mut flipper = flipping(env.sandgate("workspace-write"), "build", "build-link");
    let (mut refused, mut ran) = (0, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(18_000);
    while ran + refused <= 20 && std::time::Instant::now() < deadline {
        let mut cmd = env.sandgate("workspace-write");
        cmd.arg("--writable-root")
            .arg(env.ws.join("build"))
            .args(["--", "sh", "-c"])
            .arg(format!(
                "touch '{}/raced' 2>/dev/null; true",
                secret.display()
            ));
        match output(&mut cmd).status.code() {
            Some(0) => ran += 1,
            Some(78) => refused += 1,
            other => panic!("unexpected exit {other:?}"),
        }
    }
    assert!(
        ran + refused > 20,
        "too few attempts: {ran} ran, {refused} refused"
    );
    let _ = flipper.kill();
    let _ = flipper.wait();
    assert!(refused > 0, "the race was never seen ({ran} calls ran)");
    assert!(
        !secret.join("raced").exists(),
        "a call wrote through the swapped root ({ran} ran, {refused} refused)"
    );
}

#[test]
fn host_message_queues_are_not_listed_inside() {
    if !require_full_enforcement() {
        return;
    }
    // Without an IPC namespace of its own (the landlock backend), no queue is reachable:
    // `mq_open` is refused, a host queue's name notwithstanding.
    if landlock_backend() {
        let env = TestEnv::new();
        let name = format!("/sandgate-hostq-{}", std::process::id());
        let made = output(Command::new(probe()).args(["mq-create", &name]));
        assert_eq!(String::from_utf8_lossy(&made.stdout).trim(), "ok");
        for mode in RESTRICTED {
            let verdict = env.probe(mode, &["mq-create", &name]);
            assert!(verdict.starts_with("err:"), "{mode}: {verdict}");
        }
        output(Command::new(probe()).args(["mq-unlink", &name]));
        return;
    }
    // The host (here: a private mount and IPC namespace standing in for it) has a mqueue
    // mount with a queue in it, as systemd machines do.
    if !Path::new("/dev/mqueue").is_dir() {
        if is_root() {
            std::fs::create_dir("/dev/mqueue").unwrap();
        } else if !require("dev-mqueue", false) {
            return;
        }
    }
    let env = TestEnv::new();
    let host = format!(
        "mount -t mqueue none /dev/mqueue && '{probe}' mq-create /hostq >/dev/null && \
         for mode in full-access read-only workspace-write; do \
           echo \"$mode: $('{sg}' --sandbox $mode --workspace '{ws}' -- ls -A /dev/mqueue | tr '\\n' ' ')\"; \
         done",
        probe = probe().display(),
        sg = sandgate_inside().display(),
        ws = env.ws.display(),
    );
    let mut cmd = Command::new("unshare");
    if !is_root() {
        cmd.arg("-r");
    }
    cmd.args(["-m", "-i", "--propagation", "private", "sh", "-c", &host]);
    env.isolate(&mut cmd);
    cmd.current_dir(&env.ws);
    let out = output(&mut cmd);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("full-access: hostq"),
        "control: {}",
        show(&out)
    );
    assert!(shown.contains("read-only: \n"), "{}", show(&out));
    assert!(shown.contains("workspace-write: \n"), "{}", show(&out));
}

#[test]
fn an_allowed_socket_beneath_a_kept_directory_is_left_alone() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let server = HostServer::start();
    let dir = server
        .socket
        .parent()
        .unwrap_or(Path::new("/"))
        .to_path_buf();
    // The current directory (kept visible, read-only) holds the allowed socket.
    let mut cmd = env.sandgate("workspace-write");
    cmd.current_dir(&dir)
        .arg("--allow-unix-socket")
        .arg(&server.socket)
        .arg("--")
        .arg(probe())
        .arg("unix-connect")
        .arg(&server.socket);
    let out = output(&mut cmd);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "{}",
        show(&out)
    );
    let kind = std::fs::symlink_metadata(&server.socket).map(|m| m.file_type());
    assert!(
        kind.is_ok_and(|k| std::os::unix::fs::FileTypeExt::is_socket(&k)),
        "the host socket was replaced"
    );
    assert_eq!(server.connections(), 1);
}

#[test]
fn temp_workflows_keep_working() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let other = TestEnv::new();
    let python = "/usr/bin/python3";
    for mode in RESTRICTED {
        // POSIX semaphores live in /dev/shm.
        let out = env.run(
            mode,
            &[
                python,
                "-c",
                "from multiprocessing import Pool\nwith Pool(2) as p: print(sum(p.map(abs, range(10))))",
            ],
        );
        // Without a mount namespace there is no private /dev/shm (a known limit of the
        // landlock backend): multiprocessing's locks cannot be made.
        if landlock_backend() {
            assert_command_failed(&out);
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("PermissionError"),
                "{mode}: {}",
                show(&out)
            );
        } else {
            assert_status(&out, 0);
            assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "45", "{mode}");
        }
        // A test suite's own unix socket in its temp.
        let out = env.sh(
            mode,
            &format!(
                "s=\"${{TMPDIR:-/tmp}}/suite-{mode}.sock\"; '{}' unix-listen-connect \"$s\" \"$s\"",
                probe().display()
            ),
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "ok",
            "{mode}: {}",
            show(&out)
        );
    }
    // mktemp in one call, read in the next; another workspace does not see it.
    let out = env.sh(
        "workspace-write",
        "f=$(mktemp) && echo kept > \"$f\" && echo \"$f\"",
    );
    assert_status(&out, 0);
    let made = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(made.starts_with("/tmp/"), "{made}");
    let out = env.run("workspace-write", &["cat", &made]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "kept\n",
        "{}",
        show(&out)
    );
    let out = other.run("workspace-write", &["cat", &made]);
    assert_command_failed(&out);
    // A server left in the background by one call that keeps it, reached through its
    // socket in the workspace by the next. (Without a PID namespace nothing can be kept:
    // the server's call is still running instead.)
    let server = "import socket\ns = socket.socket(socket.AF_UNIX)\ns.bind('srv.sock')\ns.listen()\nc, _ = s.accept()\nc.sendall(b'pong')\nc.close()";
    let keeps = !landlock_backend();
    let mut serving = env.sandgate("workspace-write");
    if keeps {
        serving.arg("--keep-background");
    }
    serving.args([
        "--",
        "/bin/sh",
        "-c",
        &format!(
            "{python} -c \"{server}\" >/dev/null 2>&1 </dev/null & \
             i=0; while [ ! -S srv.sock ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; {}",
            if keeps { "" } else { "wait" }
        ),
    ]);
    let mut serving = serving.spawn().unwrap();
    if keeps {
        assert!(serving.wait().unwrap().success());
    } else {
        let socket = env.ws.join("srv.sock");
        for _ in 0..200 {
            if socket.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    let client = "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('srv.sock')\nprint(s.recv(4).decode())";
    let out = env.run("workspace-write", &[python, "-c", client]);
    let _ = serving.wait();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "pong",
        "{}",
        show(&out)
    );
}

#[test]
fn a_workspace_under_tmp_stays_visible_with_its_markers() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let dir = tempfile::Builder::new()
        .prefix("sandgate-ws-in-tmp-")
        .tempdir_in("/tmp")
        .unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .env("HOME", &env.root)
        .status()
        .unwrap();
    assert!(git.success());
    std::fs::write(ws.join("tracked"), "x").unwrap();
    for (mode, needed) in [
        ("read-only", "workspace-write"),
        ("workspace-write", "full-access"),
    ] {
        let target = if mode == "read-only" {
            ws.join("new-file")
        } else {
            PathBuf::from("/etc/sandgate-denied")
        };
        let mut cmd = env.sandgate_without_workspace(mode);
        cmd.current_dir(&ws).env("HOME", &env.root).args([
            "--",
            "sh",
            "-c",
            &format!(
                "git status --porcelain && echo x > '{}'; echo done; exit 3",
                target.display()
            ),
        ]);
        // The command fails, so its markers come on stderr.
        let out = output(&mut cmd);
        assert_status(&out, 3);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("?? tracked"), "{mode}: {}", show(&out));
        assert!(stdout.contains("done"), "{mode}: {}", show(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let marker = format!("\"path\":\"{}\"", target.display());
        assert!(
            !observing()
                || stderr.contains(&marker) && stderr.contains(&format!("\"needed\":\"{needed}\"")),
            "{mode}: {}",
            show(&out)
        );
        assert!(!target.exists(), "{mode}");
    }
    // And workspace-write writes there, at its own path.
    let mut cmd = env.sandgate_without_workspace("workspace-write");
    cmd.current_dir(&ws)
        .args(["--", "sh", "-c", "echo w > written"]);
    assert_status(&output(&mut cmd), 0);
    assert_eq!(
        std::fs::read_to_string(ws.join("written")).unwrap_or_default(),
        "w\n"
    );
}

#[test]
fn tmp_clean_removes_the_private_temp_without_following_a_planted_link() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let victim = env.outside.join("keep");
    std::fs::write(&victim, "precious").unwrap();
    let out = env.sh(
        "workspace-write",
        &format!(
            "t=${{TMPDIR:-/tmp}}; mkdir -p $t/d && ln -s '{}' $t/d/link && echo x > $t/file",
            env.outside.display()
        ),
    );
    assert_status(&out, 0);
    let private = private_tmp_of(&env);
    assert!(
        private.join("d/link").symlink_metadata().is_ok(),
        "{}",
        private.display()
    );
    let mut clean = Command::new(sandgate());
    env.isolate(&mut clean);
    clean.args(["tmp", "--clean", "--workspace"]).arg(&env.ws);
    let out = output(&mut clean);
    assert_status(&out, 0);
    assert!(!private.exists(), "{} is still there", private.display());
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap_or_default(),
        "precious"
    );
    // The next call starts with an empty /tmp again.
    let out = env.sh("workspace-write", "ls -A ${TMPDIR:-/tmp} | wc -l");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "0",
        "{}",
        show(&out)
    );
}
