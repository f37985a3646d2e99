//! The backend without namespaces (`--backend landlock`), attacked the way that backend
//! could give: no read-only bind stands behind the supervisor, no private `/tmp`, no
//! empty mount over a secret. Each guarantee it claims is tried here — renaming `.git`
//! away, a symlink swapped while a routed call is decided, changes by descriptor, the
//! host's `/tmp` files and FIFOs, hidden files — as root and as an unprivileged uid.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use crate::support::*;

/// A sandgate command for `mode` under the landlock backend.
fn landlock(env: &TestEnv, mode: &str) -> Command {
    let mut cmd = env.sandgate(mode);
    cmd.args(["--backend", "landlock"]);
    cmd
}

fn sh(env: &TestEnv, mode: &str, script: &str) -> std::process::Output {
    output(landlock(env, mode).args(["--", "/bin/sh", "-c", script]))
}

fn probe(env: &TestEnv, mode: &str, args: &[&str]) -> String {
    let probe = crate::support::probe();
    let out = output(landlock(env, mode).arg("--").arg(&probe).args(args));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Mode, owner, size and modification time: what the attacks below try to change.
fn looks(path: &Path) -> (u32, u32, u64, i64, i64) {
    let m = std::fs::symlink_metadata(path).unwrap();
    (m.mode(), m.uid(), m.size(), m.mtime(), m.mtime_nsec())
}

#[test]
fn git_metadata_and_sandgate_files_stay_as_they_were() {
    let env = TestEnv::new();
    init_repository(&env.ws);
    let config = env.ws.join(".git/config");
    let git = env.ws.join(".git");
    // The git directory's own mode, and that its times are not set back (its entries
    // change as git and the supervisor's staging names come and go).
    let git_mode = |git: &Path| std::fs::metadata(git).unwrap().mode();
    let before = (
        std::fs::read(&config).unwrap(),
        looks(&config),
        git_mode(&git),
    );
    let out = sh(
        &env,
        "workspace-write",
        "echo '#!/bin/sh' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; \
         mv .git .git-away; rm -rf .git; rm -f .git/config; true > .git/config; \
         truncate -s 0 .git/config; chmod 000 .git/config; \
         chmod 777 .git; touch -d 2000-01-01 .git; \
         mkdir -p sub/.git/hooks; echo x > sub/.git/hooks/pre-commit; chmod +x sub/.git/hooks/pre-commit; \
         printf '[core]\\n\\tfsmonitor = x\\n' > sub/.git/config; git init -q evil 2>/dev/null; \
         git -C evil config core.fsmonitor 'touch pwned' 2>/dev/null; \
         mkdir -p .sandgate; echo '{}' > .sandgate/config.json; \
         echo made > work.txt; mkdir d && rmdir d; echo done",
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "done",
        "{}",
        show(&out)
    );
    assert_eq!(
        (
            std::fs::read(&config).unwrap(),
            looks(&config),
            git_mode(&git)
        ),
        before,
        "{}",
        show(&out)
    );
    for planted in [
        ".git/hooks/pre-commit",
        ".git-away",
        "sub/.git/config",
        ".sandgate/config.json",
    ] {
        assert!(!env.ws.join(planted).exists(), "{planted}: {}", show(&out));
    }
    assert!(std::fs::metadata(&git).unwrap().mtime() > 946_684_800);
    // A repository the command makes is a repository, but without what runs a command.
    let evil = std::fs::read_to_string(env.ws.join("evil/.git/config")).unwrap_or_default();
    assert!(!evil.contains("fsmonitor"), "{evil}");
    // A hook file may be written, as anywhere, but never made executable: git skips it.
    let hook = std::fs::metadata(env.ws.join("sub/.git/hooks/pre-commit")).unwrap();
    assert_eq!(hook.mode() & 0o111, 0, "{}", show(&out));
    // Ordinary work goes on: a file made, a directory made and removed.
    assert_eq!(
        std::fs::read_to_string(env.ws.join("work.txt")).unwrap(),
        "made\n"
    );
    assert!(!env.ws.join("d").exists());
}

#[test]
fn outside_the_writable_roots_nothing_changes_by_path_or_by_descriptor() {
    let env = TestEnv::new();
    let target = env.outside.join("host-file");
    std::fs::write(&target, "host\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    let t = target.to_string_lossy().into_owned();
    let before = looks(&target);
    for args in [
        vec!["chmod-to", &t, "600"],
        vec!["chown", &t],
        vec!["utime", &t],
        vec!["truncate", &t],
        vec!["removexattrat", &t],
        vec!["fchmod-to", &t, "600"],
        vec!["fd-meta", &t],
        vec!["write", &t],
    ] {
        for mode in ["read-only", "workspace-write"] {
            let got = probe(&env, mode, &args);
            assert!(got.starts_with("err:"), "{args:?} under {mode}: {got}");
            assert_eq!(looks(&target), before, "{args:?} under {mode}");
        }
    }
    // The same changes inside the workspace are made.
    let inside = env.ws.join("mine");
    std::fs::write(&inside, "mine\n").unwrap();
    let i = inside.to_string_lossy().into_owned();
    for args in [
        vec!["chmod-to", &i, "600"],
        vec!["chown", &i],
        vec!["utime", &i],
        vec!["fd-meta", &i],
        vec!["truncate", &i],
    ] {
        assert_eq!(probe(&env, "workspace-write", &args), "ok", "{args:?}");
    }
    assert_eq!(std::fs::metadata(&inside).unwrap().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(&inside).unwrap().len(), 0);
}

/// Attack: a thread keeps exchanging a workspace file with a symlink to a host file while
/// the other changes "the workspace file" by path. Whatever the supervisor checked is what
/// it changed: the host file keeps its mode, owner, times and data.
#[test]
fn a_symlink_swapped_during_routed_calls_changes_nothing_outside() {
    let env = TestEnv::new();
    let target = env.outside.join("host-file");
    std::fs::write(&target, "host data\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(env.ws.join("f"), "mine\n").unwrap();
    std::os::unix::fs::symlink(&target, env.ws.join("fl")).unwrap();
    let before = (std::fs::read(&target).unwrap(), looks(&target));
    let got = probe(&env, "workspace-write", &["meta-race", "400"]);
    assert!(got.starts_with("swaps "), "{got}");
    assert_eq!(
        (std::fs::read(&target).unwrap(), looks(&target)),
        before,
        "{got}"
    );
}

#[test]
fn the_hosts_tmp_is_out_of_reach_and_tmpdir_is_the_calls_own() {
    let env = TestEnv::new();
    let mark = unique_mark("landlock-tmp");
    // The host's own /tmp, whatever TMPDIR the tests run with.
    let file = Path::new("/tmp").join(format!("{mark}-file"));
    let fifo = Path::new("/tmp").join(format!("{mark}-fifo"));
    std::fs::write(&file, "host secret\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let script = format!(
        "cat '{f}' 2>/dev/null; echo read=$?; \
         (exec 3<>'{p}') 2>/dev/null; echo fifo=$?; \
         echo x > /tmp/{mark}-new 2>/dev/null; echo tmp=$?; \
         case $TMPDIR in /tmp|'') echo shared;; *) echo own;; esac; \
         echo kept > \"$TMPDIR/x\" && cat \"$TMPDIR/x\"",
        f = file.display(),
        p = fifo.display(),
    );
    for mode in ["read-only", "workspace-write"] {
        let log = env.root.join(format!("denials-{mode}.ndjson"));
        let out = output(
            landlock(&env, mode)
                .arg("--denial-log")
                .arg(&log)
                .args(["--", "/bin/sh", "-c", &script]),
        );
        let _ = std::fs::remove_file(Path::new("/tmp").join(format!("{mark}-new")));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "read=1\nfifo=2\ntmp=2\nown\nkept",
            "{mode}: {}",
            show(&out)
        );
        // The refusal of the write says where temporary files go.
        if observing() {
            let tmpdir = private_tmp_of(&env).display().to_string();
            let said = read_markers(&log).into_iter().any(|m| {
                m["path"] == format!("/tmp/{mark}-new")
                    && m["message"]
                        .as_str()
                        .is_some_and(|msg| msg.contains(&format!("$TMPDIR, {tmpdir}")))
            });
            assert!(said, "{mode}: {:#?}", read_markers(&log));
        }
    }
    std::fs::remove_file(&file).unwrap();
    std::fs::remove_file(&fifo).unwrap();
}

#[test]
fn hidden_files_are_unreadable_and_one_in_a_writable_root_refuses_the_call() {
    let env = TestEnv::new();
    let home = env.root.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "KEY\n").unwrap();
    std::fs::write(home.join("notes.txt"), "notes\n").unwrap();
    let out = output(landlock(&env, "workspace-write").env("HOME", &home).args([
        "--",
        "/bin/sh",
        "-c",
        "cat ~/.ssh/id_ed25519 2>/dev/null; echo key=$?; cat ~/notes.txt",
    ]));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "key=1\nnotes",
        "{}",
        show(&out)
    );

    // A hidden file in the workspace: no rule made before the call could keep it out and
    // let the command read what it makes beside it, so the call is refused.
    std::fs::write(env.ws.join("local.env"), "SECRET\n").unwrap();
    let config = env.root.join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.json"),
        r#"{"hidden_paths": ["local.env"]}"#,
    )
    .unwrap();
    let out = output(landlock(&env, "workspace-write").env("HOME", &home).args([
        "--",
        "cat",
        "local.env",
    ]));
    assert_status(&out, 78);
    assert!(out.stdout.is_empty(), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("lies in the writable root"),
        "{}",
        show(&out)
    );
}

/// Where the kernel refuses namespaces, `auto` runs the landlock backend, which holds
/// every guarantee: nothing is degraded, nothing needs naming; `--backend namespaces`
/// refuses instead.
#[test]
fn auto_falls_back_to_the_landlock_backend_and_namespaces_refuses() {
    let env = TestEnv::new();
    let mut cmd = env.sandgate("workspace-write");
    cmd.env("SANDGATE_DEBUG_PRETEND_MISSING", "mount-namespace")
        .args(["--", "/bin/sh", "-c", "echo ran; echo $TMPDIR"]);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The landlock backend's temp: not /tmp, which would be a private mount.
    assert!(
        stdout.starts_with("ran\n/") && !stdout.contains("\n/tmp\n"),
        "{}",
        show(&out)
    );
    let markers = stderr_markers(&out);
    assert!(
        !markers.iter().any(|m| m["kind"] == "degraded_enforcement"),
        "{}",
        show(&out)
    );

    let mut cmd = env.sandgate("workspace-write");
    cmd.env("SANDGATE_DEBUG_PRETEND_MISSING", "mount-namespace")
        .args(["--backend", "namespaces", "--", "true"]);
    let out = output(&mut cmd);
    assert_status(&out, 78);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no run goes without protected-paths"),
        "{}",
        show(&out)
    );
}

/// Without a PID namespace to end them, what the command leaves running — a daemon that
/// left the session and its parent — is ended with the call: sandgate adopted it.
#[test]
fn what_the_command_leaves_running_ends_with_the_call() {
    let env = TestEnv::new();
    let mark = unique_mark("landlock-left");
    let out = output(landlock(&env, "workspace-write").env("LEFTOVER_MARK", &mark).args([
        "--",
        "/bin/sh",
        "-c",
        "(setsid sleep 1017 >/dev/null 2>&1 </dev/null &) ; sleep 1018 >/dev/null 2>&1 </dev/null & echo started",
    ]));
    let left = processes_marked(&mark);
    kill_marked(&mark);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "started",
        "{}",
        show(&out)
    );
    assert!(left.is_empty(), "left running: {left:?}");
}

/// Attack: a hidden or outside file opened `O_PATH` (which landlock does not check) and
/// linked into the workspace by its descriptor, then read or written through the new
/// name. Should fail: the namespaces backend answers EXDEV (another mount); so must this.
#[test]
fn a_file_outside_cannot_be_linked_in_by_its_descriptor() {
    let env = TestEnv::new();
    let home = env.root.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "KEY\n").unwrap();
    let outside = env.outside.join("host-file");
    std::fs::write(&outside, "host\n").unwrap();
    let probe = crate::support::probe();
    for (src, mode) in [
        (home.join(".ssh/id_ed25519"), "workspace-write"),
        (outside.clone(), "workspace-write"),
        (home.join(".ssh/id_ed25519"), "read-only"),
    ] {
        let dst = match mode {
            "read-only" => "\"$TMPDIR/stolen\"".to_owned(),
            _ => "stolen".to_owned(),
        };
        let script = format!("'{}' opath-link '{}' {dst}", probe.display(), src.display());
        let out = output(
            landlock(&env, mode)
                .env("HOME", &home)
                .args(["--", "/bin/sh", "-c", &script]),
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "err:EXDEV",
            "{} under {mode}: {}",
            src.display(),
            show(&out)
        );
        assert_eq!(
            std::fs::metadata(&src).unwrap().nlink(),
            1,
            "{}",
            src.display()
        );
    }
    // A file of the workspace itself links as before.
    std::fs::write(env.ws.join("mine"), "mine\n").unwrap();
    let out = output(landlock(&env, "workspace-write").args([
        "--",
        &probe.to_string_lossy(),
        "opath-link",
        "mine",
        "also-mine",
    ]));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "mine\nok",
        "{}",
        show(&out)
    );
}

/// Attack: inode flags set by `ioctl` (`chattr +d`) on a file outside, and a unix socket
/// bound where a protected name would be (`.sandgate/config.json`, which would make every
/// later call here fail; a git hook) — neither is landlock's to see without a read-only
/// view. Should fail: the flags stay, and the supervisor, which performs every bind, binds
/// no protected name (an ordinary one is bound).
#[test]
fn inode_flags_and_socket_files_stay_out_of_what_no_mount_protects() {
    let env = TestEnv::new();
    let outside = env.outside.join("host-file");
    std::fs::write(&outside, "host\n").unwrap();
    let lsattr = || output(Command::new("lsattr").arg(&outside)).stdout;
    let before = lsattr();
    let o = outside.to_string_lossy().into_owned();
    for mode in ["read-only", "workspace-write"] {
        assert_eq!(probe(&env, mode, &["setflags", &o]), "err:EPERM", "{mode}");
        assert_eq!(lsattr(), before, "{mode}");
    }
    init_repository(&env.ws);
    std::fs::create_dir(env.ws.join(".sandgate")).unwrap();
    for target in [
        ".sandgate/config.json",
        ".git/hooks/pre-commit",
        ".git/config.lock",
    ] {
        let got = probe(&env, "workspace-write", &["bind-at", target]);
        assert!(got.starts_with("err:"), "{target}: {got}");
        let made = std::fs::symlink_metadata(env.ws.join(target));
        assert!(
            made.is_err() || made.is_ok_and(|m| !m.file_type().is_socket()),
            "{target}"
        );
    }
    assert_eq!(
        probe(&env, "workspace-write", &["bind-at", "plain.sock"]),
        "ok"
    );
    let out = sh(
        &env,
        "workspace-write",
        &format!(
            "'{}' bind-at \"$TMPDIR/ok.sock\"",
            crate::support::probe().display()
        ),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "{}",
        show(&out)
    );
}

/// Without IPC and network namespaces: a host SysV segment (made with `ipcmk`) and a TCP
/// listener of the host on its own loopback stay out of reach.
#[test]
fn the_hosts_ipc_and_loopback_stay_out_of_reach() {
    let env = TestEnv::new();
    let made = output(Command::new("ipcmk").args(["-M", "64"]));
    let id = String::from_utf8_lossy(&made.stdout)
        .split_whitespace()
        .last()
        .unwrap_or_default()
        .to_owned();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mut got = vec![];
    for mode in ["read-only", "workspace-write"] {
        got.push(probe(&env, mode, &["sysv-shm-write", &id]));
        got.push(probe(&env, mode, &["tcp-connect", &addr]));
    }
    let reached = listener.accept().is_ok();
    // The controls: unconfined, both are reached.
    let control = [
        env.probe("full-access", &["sysv-shm-write", &id]),
        env.probe("full-access", &["tcp-connect", &addr]),
    ];
    let _ = Command::new("ipcrm").args(["-m", &id]).status();
    assert_eq!(control, ["ok", "ok"], "{}", show(&made));
    assert!(got.iter().all(|g| g.starts_with("err:")), "{got:?}");
    assert!(!reached, "the host's listener was reached");
}

/// Attack: squat an abstract name a host daemon would bind (its clients would reach the
/// sandbox). Should fail: no abstract name is bound; a socket file in `$TMPDIR` or in the
/// workspace, and an autobound name, work.
#[test]
fn binds_take_no_abstract_name() {
    let env = TestEnv::new();
    let name = format!("sandgate-squat-{}", std::process::id());
    let got = probe(&env, "workspace-write", &["unix-bind-abstract", &name, "1"]);
    assert_eq!(got, "err:EPERM", "{got}");
    let script = format!(
        "'{p}' bind-at \"$TMPDIR/mine.sock\"; '{p}' bind-at ws.sock; '{p}' unix-listen-connect \"$TMPDIR/l.sock\" \"$TMPDIR/l.sock\"",
        p = crate::support::probe().display()
    );
    let out = sh(&env, "workspace-write", &script);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok\nok\nok",
        "{}",
        show(&out)
    );
    assert!(
        std::fs::symlink_metadata(env.ws.join("ws.sock")).is_ok_and(|m| m.file_type().is_socket())
    );
    // The abstract name is free for the host afterwards: nothing squatted it.
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
    assert!(std::os::unix::net::UnixListener::bind_addr(&addr).is_ok());
}

/// Attack: a thread group whose leader exits (a zombie) while another thread runs on. It
/// must be killed with the rest of what the command left, and not be served afterwards.
#[test]
fn a_process_whose_leader_exited_still_ends_with_the_call() {
    let env = TestEnv::new();
    let file = env.ws.join("survived");
    let f = file.to_string_lossy().into_owned();
    assert_eq!(
        probe(&env, "workspace-write", &["leader-exits", "1500", &f]),
        "started\nok"
    );
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert!(!file.exists(), "a thread of the call ran on after it");
}

/// Without a PID namespace nothing could find what a call kept — not `sandgate ps`,
/// `stop`, `tmp --clean`, nor a time limit — so keeping is refused before anything runs,
/// under the landlock backend and under namespaces refused a PID namespace alike, and
/// `explain` says so as a run would.
#[test]
fn keeping_background_processes_is_refused_without_a_pid_namespace() {
    let env = TestEnv::new();
    let mark = unique_mark("landlock-keep");
    let runs: [(&str, Vec<&str>); 2] = [
        ("", vec!["--backend", "landlock"]),
        ("pid-namespace", vec![]),
    ];
    for (missing, flags) in runs {
        let mut cmd = env.sandgate("workspace-write");
        cmd.env("SANDGATE_DEBUG_PRETEND_MISSING", missing)
            .env("LEFTOVER_MARK", &mark)
            .args(&flags)
            .args([
                "--keep-background",
                "--",
                "/bin/sh",
                "-c",
                "sleep 1019 >/dev/null 2>&1 </dev/null & echo started",
            ]);
        let out = output(&mut cmd);
        let left = processes_marked(&mark);
        kill_marked(&mark);
        assert_status(&out, 78);
        assert!(out.stdout.is_empty(), "{missing}: {}", show(&out));
        assert!(left.is_empty(), "{missing}: {left:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("--keep-background needs a PID namespace")
                && stderr.contains("\"kind\":\"unenforceable\""),
            "{missing}: {}",
            show(&out)
        );

        let mut explain = Command::new(sandgate());
        env.isolate(&mut explain);
        explain
            .current_dir(&env.ws)
            .env("SANDGATE_DEBUG_PRETEND_MISSING", missing)
            .args(["explain", "--sandbox", "workspace-write"])
            .args(&flags)
            .args(["--keep-background", "--", "true"]);
        let out = output(&mut explain);
        assert_status(&out, 78);
    }
}

/// Attack: a call still running in the workspace swaps a directory the next call names as
/// a writable root with a symlink to a host directory, over and over, while that call
/// sets up. Should fail: whichever name the race lands on, nothing is written in the
/// host directory (the supervisor identifies the root with no symlink in its path, as
/// sandgate checked it), and a call that loses the race is refused rather than run
/// another way.
#[test]
fn a_writable_root_raced_with_a_symlink_never_lets_the_link_target_be_written() {
    let env = TestEnv::new();
    let secret = env.outside.join("secret");
    std::fs::create_dir(&secret).unwrap();
    std::fs::create_dir(env.ws.join("build")).unwrap();
    std::os::unix::fs::symlink(&secret, env.ws.join("build-link")).unwrap();
    let mut flipper = flipping(landlock(&env, "workspace-write"), "build", "build-link");
    let mut ran = 0;
    for i in 0..30 {
        let out = output(
            landlock(&env, "workspace-write")
                .arg("--writable-root")
                .arg(env.ws.join("build"))
                .args(["--", "/bin/sh", "-c"])
                .arg(format!(
                    "touch '{}/raced-{i}' 2>/dev/null; true",
                    secret.display()
                )),
        );
        match out.status.code() {
            Some(0) => ran += 1,
            Some(78) => {}
            other => panic!("unexpected exit {other:?}: {}", show(&out)),
        }
    }
    let _ = flipper.kill();
    let _ = flipper.wait();
    let written: Vec<_> = std::fs::read_dir(&secret).unwrap().flatten().collect();
    assert!(written.is_empty(), "{ran} calls ran; written: {written:?}");
}

/// Attack: leave processes sandgate cannot follow by walking the process table: one whose
/// name is not UTF-8 (`PR_SET_NAME`), and chains of processes that each fork and exit at
/// once, faster than a walk can catch them, writing into a file through a descriptor
/// opened during the call. Should fail: nothing of the call runs after it, and the file
/// stops changing when sandgate returns.
#[test]
fn leftovers_that_hide_or_outrun_a_process_walk_still_end_with_the_call() {
    let env = TestEnv::new();
    let mark = unique_mark("landlock-outrun");
    for mode in ["read-only", "workspace-write"] {
        // Where each mode may write: its private temp, the workspace.
        let (inside, log) = match mode {
            "read-only" => ("$TMPDIR/log".to_owned(), private_tmp_of(&env).join("log")),
            _ => ("log".to_owned(), env.ws.join("log")),
        };
        let script = format!(
            "'{}' outrun 8 4 \"{inside}\"",
            crate::support::probe().display()
        );
        let out = output(
            landlock(&env, mode)
                .env("LEFTOVER_MARK", &mark)
                .args(["--", "/bin/sh", "-c", &script]),
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "ok",
            "{mode}: {}",
            show(&out)
        );
        let size = || std::fs::metadata(&log).map_or(0, |m| m.len());
        let after_return = size();
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let left = processes_marked(&mark);
        kill_marked(&mark);
        assert!(left.is_empty(), "{mode}: left running: {left:?}");
        assert_eq!(
            size(),
            after_return,
            "{mode}: written after the call returned"
        );
    }
}

/// Attack: one process of the call leaves the caller's process group (`setsid`), and then
/// the whole group is killed (`timeout -s KILL`, `kill -9 %1`), sandgate with it. Should
/// fail: the call's ender is in no group of the caller's; it sees sandgate gone and ends
/// what the call left.
#[test]
fn killing_the_callers_process_group_leaves_nothing_of_the_call() {
    use std::os::unix::process::CommandExt;
    let env = TestEnv::new();
    let mark = unique_mark("landlock-group");
    let mut call = landlock(&env, "workspace-write");
    call.env("LEFTOVER_MARK", &mark)
        .args([
            "--",
            "/bin/sh",
            "-c",
            "setsid sleep 1031 </dev/null >/dev/null 2>&1 & sleep 100",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0);
    let mut child = call.spawn().unwrap();
    let started = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        processes_marked(&mark).len() >= 3
    });
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
    let gone = (0..60).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        processes_marked(&mark).is_empty()
    });
    let left = processes_marked(&mark);
    kill_marked(&mark);
    assert!(started, "control: the call's processes never showed");
    assert!(gone, "left running: {left:?}");
}

/// What sandgate's caller started before it executed sandgate (`sh -c 'job & exec
/// sandgate …'`) becomes sandgate's child, but is no part of the call: it is neither
/// ended nor waited for.
#[test]
fn a_child_sandgate_had_before_the_call_is_left_alone() {
    let env = TestEnv::new();
    let mark = unique_mark("landlock-before");
    let mut sandgate = landlock(&env, "read-only");
    sandgate.args(["--", "true"]);
    let mut wrapper = std::process::Command::new("/bin/sh");
    wrapper.env("LEFTOVER_MARK", &mark).args([
        "-c",
        r#"sleep 1032 >/dev/null 2>&1 & exec "$@""#,
        "sh",
    ]);
    let out = output(&mut behind(wrapper, &sandgate));
    let left = processes_marked(&mark);
    kill_marked(&mark);
    assert_status(&out, 0);
    assert_eq!(left.len(), 1, "the caller's own job: {left:?}");
}
