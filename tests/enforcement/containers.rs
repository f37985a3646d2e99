//! Where agents and CI run: root in a default Docker container, and a user whose system
//! refuses user namespaces, reproduced by the harness (`examples/container.rs`) on this
//! kernel. There the namespaces backend cannot run; `auto` finds that out by trying and
//! runs the landlock backend, whose guarantees are attacked here the ways that backend
//! could give — without `pidfd_getfd` and `unshare`, which Docker's profile refuses.

use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

use crate::support::*;

/// The kinds of confinement the harness reproduces: both, or, when scripts/test runs the
/// suite inside the harness (`SANDGATE_TEST_CONTAINER`), the one around this test.
fn kinds() -> Vec<&'static str> {
    match std::env::var("SANDGATE_TEST_CONTAINER").as_deref() {
        Ok("docker") => vec!["docker"],
        Ok("no-userns") => vec!["no-userns"],
        _ => vec!["docker", "no-userns"],
    }
}

/// `program` run inside the harness's `kind`: through the harness, or as it is when the
/// test already runs inside it.
fn in_kind(env: &TestEnv, kind: &str, program: &OsStr) -> Command {
    let mut cmd = match std::env::var_os("SANDGATE_TEST_CONTAINER") {
        Some(_) => Command::new(program),
        None => {
            let mut cmd = Command::new(container());
            cmd.args([kind, "--"]).arg(program);
            cmd
        }
    };
    env.isolate(&mut cmd);
    cmd.current_dir(&env.ws);
    cmd
}

/// `sandgate ARGS…` in the workspace, inside the harness's `kind`.
fn inside(env: &TestEnv, kind: &str, mode: &str, args: &[&str]) -> Output {
    let sandgate = env.sandgate(mode);
    let mut cmd = in_kind(env, kind, sandgate.get_program());
    cmd.args(sandgate.get_args()).args(args);
    output(&mut cmd)
}

/// What `/bin/sh -c script` prints under `workspace-write`, inside `kind`.
fn sh_inside(env: &TestEnv, kind: &str, script: &str) -> (String, Output) {
    let out = inside(
        env,
        kind,
        "workspace-write",
        &["--", "/bin/sh", "-c", script],
    );
    (String::from_utf8_lossy(&out.stdout).trim().to_owned(), out)
}

/// The workspace, the outside and the test's root, open to uid 65534 (the no-userns kind
/// run as root becomes it).
fn open_to_all(env: &TestEnv) {
    for dir in [&env.root, &env.ws, &env.outside] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
}

/// Attack: from inside the container, reach a process of the container's own, running as
/// the same user (root in the docker kind): signal it, trace it, read its environment,
/// descriptors and working directory through `/proc`. Should fail: landlock's ptrace and
/// signal rules hold the process boundary without a PID namespace, and the call runs
/// without naming anything.
#[test]
fn processes_outside_the_call_are_out_of_reach_without_naming_anything() {
    let env = TestEnv::new();
    open_to_all(&env);
    let mut host = Command::new("sleep")
        .arg("1017")
        .env("HOST_SECRET", "token-1017")
        .spawn()
        .unwrap();
    let pid = host.id();
    let probe = probe();
    let script = format!(
        "kill -0 {pid} 2>/dev/null; echo kill=$?; \
         cat /proc/{pid}/environ 2>/dev/null | tr '\\0' '\\n' | grep -c token; \
         readlink /proc/{pid}/fd/0 /proc/{pid}/cwd; echo links=$?; \
         '{probe}' ptrace-attach {pid}",
        probe = probe.display(),
    );
    let (printed, out) = sh_inside(&env, kinds()[0], &script);
    let alive = host.try_wait().unwrap().is_none();
    let _ = host.kill();
    let _ = host.wait();
    assert_status(&out, 0);
    assert!(
        alive,
        "the host process was ended from inside: {}",
        show(&out)
    );
    assert_eq!(printed, "kill=1\n0\nlinks=1\nerr:EPERM", "{}", show(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("degraded"),
        "{}",
        show(&out)
    );
}

/// The supervisor cannot take the caller's socket there (`pidfd_getfd` is refused): it
/// connects a socket of its own and puts it in the caller's place. A socket in the
/// workspace is reached; a host socket outside is not.
#[test]
fn unix_connects_are_mediated_without_pidfd_getfd() {
    let env = TestEnv::new();
    open_to_all(&env);
    let host = std::os::unix::net::UnixListener::bind(env.outside.join("host.sock")).unwrap();
    host.set_nonblocking(true).unwrap();
    std::fs::set_permissions(
        env.outside.join("host.sock"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    let probe = probe();
    for kind in kinds() {
        // Bound in the private temp: the backend binds no socket in the workspace.
        let local = format!("\"$TMPDIR/local-{kind}.sock\"");
        let script = format!(
            "'{probe}' unix-listen-connect {local} {local}; '{probe}' unix-connect '{host}'",
            probe = probe.display(),
            host = env.outside.join("host.sock").display(),
        );
        let (printed, out) = sh_inside(&env, kind, &script);
        assert_eq!(printed, "ok\nerr:EACCES", "{kind}: {}", show(&out));
        assert!(host.accept().is_err(), "{kind}: reached the host's socket");
    }
}

#[test]
fn doctor_says_the_landlock_backend_runs_there() {
    let env = TestEnv::new();
    open_to_all(&env);
    for kind in kinds() {
        let out = output(in_kind(&env, kind, sandgate().as_os_str()).args(["doctor", "--json"]));
        assert_status(&out, 0);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["backend"], "landlock", "{kind}: {report}");
        assert_eq!(report["namespaces"]["mount"], false, "{kind}");
        let held = &report["profiles"]["workspace-write"]["guarantees"];
        for g in [
            "protected-paths",
            "secrets",
            "read-only-outside",
            "private-tmp",
            "ipc",
            "scopes",
        ] {
            assert_eq!(held[g], true, "{kind} {g}: {report}");
        }
    }
}

/// The workspace works (with the caller's umask, though `unshare(CLONE_FS)` is refused),
/// and nothing planted in git's metadata, changed outside — by path or through a
/// descriptor, which the supervisor cannot take with `pidfd_getfd` there — or read in the
/// host's `/tmp` gets through.
#[test]
fn the_landlock_backend_holds_where_namespaces_and_pidfd_getfd_are_refused() {
    let env = TestEnv::new();
    open_to_all(&env);
    init_repository(&env.ws);
    let config = env.ws.join(".git/config");
    let outside = env.outside.join("host-file");
    std::fs::write(&outside, "host\n").unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mark = unique_mark("container-tmp");
    let host_tmp = Path::new("/tmp").join(&mark);
    std::fs::write(&host_tmp, "host tmp\n").unwrap();
    std::fs::set_permissions(&host_tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
    let probe = probe();
    let looks = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.mode(), m.size(), m.mtime(), m.mtime_nsec())
    };
    for kind in kinds() {
        let before = (looks(&config), looks(&outside));
        let script = format!(
            "umask 027; echo made > made-{kind}; \
             echo x > .git/hooks/pre-commit 2>/dev/null; mv .git .away 2>/dev/null; \
             chmod 666 .git/config 2>/dev/null; \
             '{probe}' fd-meta '{out}'; '{probe}' chmod-to '{out}' 600; '{probe}' fd-meta made-{kind}; \
             cat '{tmp}' 2>/dev/null; echo tmp=$?",
            probe = probe.display(),
            out = outside.display(),
            tmp = host_tmp.display(),
        );
        let (printed, out) = sh_inside(&env, kind, &script);
        assert_eq!(
            printed,
            "err:EROFS\nerr:EROFS\nok\ntmp=1",
            "{kind}: {}",
            show(&out)
        );
        assert_eq!(
            (looks(&config), looks(&outside)),
            before,
            "{kind}: {}",
            show(&out)
        );
        assert!(!env.ws.join(".git/hooks/pre-commit").exists(), "{kind}");
        assert!(!env.ws.join(".away").exists(), "{kind}");
        let made = std::fs::metadata(env.ws.join(format!("made-{kind}"))).unwrap();
        // The caller's umask, 027, and fd-meta's own fchmod to 0600.
        assert_eq!(made.mode() & 0o777, 0o600, "{kind}");
    }
    std::fs::remove_file(&host_tmp).unwrap();
}

/// Where `auto` finds namespaces refused, the command is started again under the landlock
/// backend. It must start as the first attempt would have: the signals sandgate blocks
/// for itself are sandgate's, not the command's (a program that inherited them blocked
/// would never see its children end, nor a SIGTERM).
#[test]
fn a_command_started_again_after_the_fallback_gets_the_callers_signal_mask() {
    let env = TestEnv::new();
    open_to_all(&env);
    let status = ["grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"];
    for kind in kinds() {
        let bare = output(in_kind(&env, kind, OsStr::new(status[0])).args(&status[1..]));
        assert_status(&bare, 0);
        let mut args = vec!["--"];
        args.extend(status);
        let out = inside(&env, kind, "read-only", &args);
        assert_status(&out, 0);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&bare.stdout),
            "{kind}: {}",
            show(&out)
        );
    }
}
