//! Denial markers: what the kernel refused, reported by the supervisor as one
//! structured marker per operation, with the exact retry.

// A test crate: its helpers fail as its tests do, by unwrapping (sandgate never does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Output;

use serde_json::Value;

use support::endpoint::{Reply, TestEndpoint};
use support::*;

mod denial {
    mod fate;
    mod paths;
    mod rules;
    mod seen;
}

/// Runs the probe under `mode` with a denial log; returns the probe's verdict, the log's
/// markers and the whole output.
fn observed(env: &TestEnv, mode: &str, args: &[&str]) -> (String, Vec<Value>, Output) {
    let log = env.root.join("denials.ndjson");
    let _ = std::fs::remove_file(&log);
    let mut cmd = env.sandgate(mode);
    cmd.arg("--denial-log")
        .arg(&log)
        .arg("--")
        .arg(probe())
        .args(args);
    let out = output(&mut cmd);
    (
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        read_log(&log),
        out,
    )
}

fn read_log(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

/// (mode, probe args, op, path or addr, acceptable syscalls, needed)
type Case<'a> = (
    &'a str,
    Vec<&'a str>,
    &'a str,
    Option<&'a str>,
    &'a [&'a str],
    &'a str,
);

#[test]
fn each_denial_class_yields_exactly_one_marker() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let out_dir = env.outside.to_string_lossy().into_owned();
    let victim = format!("{out_dir}/victim");
    std::fs::write(&victim, "v").unwrap();
    std::fs::write(env.ws.join("mine"), "m").unwrap();
    std::fs::create_dir_all(env.ws.join(".git/hooks")).unwrap();
    let sock = format!("{out_dir}/service.sock");
    let _unix = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let abstract_name = format!("sandgate-denial-{}", std::process::id());
    let addr =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            abstract_name.as_bytes(),
        )
        .unwrap();
    let _abstract = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp_addr = tcp.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let ws_new = env.ws.join("new").to_string_lossy().into_owned();
    let hook = env
        .ws
        .join(".git/hooks/pre-commit")
        .to_string_lossy()
        .into_owned();
    let full = "full-access";
    let (new, stolen, fifo, at) = (
        format!("{out_dir}/new"),
        format!("{out_dir}/stolen"),
        format!("{out_dir}/fifo"),
        format!("@{abstract_name}"),
    );
    // (mode, probe args, op, path or addr, syscalls, needed)
    let cases: Vec<Case> = vec![
        (
            "workspace-write",
            vec!["write", &victim],
            "write",
            Some(&victim),
            &["openat", "open"],
            full,
        ),
        (
            "workspace-write",
            vec!["create", &new],
            "create",
            Some(&new),
            &["openat", "open"],
            full,
        ),
        (
            "workspace-write",
            vec!["remove", &victim],
            "remove",
            Some(&victim),
            &["unlink", "unlinkat"],
            full,
        ),
        (
            "workspace-write",
            vec!["rename", "mine", &stolen],
            "rename",
            Some(&stolen),
            &["rename", "renameat", "renameat2"],
            full,
        ),
        (
            "workspace-write",
            vec!["link", &victim, "hardlink"],
            "link",
            Some(&victim),
            &["link", "linkat"],
            full,
        ),
        (
            "workspace-write",
            vec!["chmod", &victim],
            "chmod",
            Some(&victim),
            &["chmod", "fchmodat", "fchmodat2"],
            full,
        ),
        (
            "workspace-write",
            vec!["chown", &victim],
            "chown",
            Some(&victim),
            &["chown", "fchownat"],
            full,
        ),
        (
            "workspace-write",
            vec!["truncate", &victim],
            "truncate",
            Some(&victim),
            &["truncate"],
            full,
        ),
        (
            "workspace-write",
            vec!["utime", &victim],
            "utimes",
            Some(&victim),
            &["utime", "utimensat"],
            full,
        ),
        (
            "workspace-write",
            vec!["removexattrat", &victim],
            "xattr",
            Some(&victim),
            &["removexattrat"],
            full,
        ),
        (
            "workspace-write",
            vec!["mknod", &fifo],
            "mknod",
            Some(&fifo),
            &["mknod", "mknodat"],
            full,
        ),
        (
            "workspace-write",
            vec!["create", &hook],
            "git_metadata",
            Some(&hook),
            &["openat", "open"],
            full,
        ),
        (
            "read-only",
            vec!["create", &ws_new],
            "create",
            Some(&ws_new),
            &["openat", "open"],
            "workspace-write",
        ),
        (
            "workspace-write",
            vec!["tcp-connect", &tcp_addr],
            "network",
            None,
            &["socket"],
            full,
        ),
        (
            "workspace-write",
            vec!["udp-send", &tcp_addr],
            "network",
            None,
            &["socket"],
            full,
        ),
        (
            "workspace-write",
            vec!["raw-socket"],
            "network",
            None,
            &["socket"],
            full,
        ),
        (
            "workspace-write",
            vec!["unix-connect", &sock],
            "network",
            Some(&sock),
            &["connect"],
            full,
        ),
        (
            "workspace-write",
            vec!["unix-connect-abstract", &abstract_name],
            "network",
            Some(&at),
            &["connect"],
            full,
        ),
        (
            "workspace-write",
            vec!["ptrace-parent"],
            "ptrace",
            None,
            &["ptrace"],
            full,
        ),
        (
            "workspace-write",
            vec!["io-uring"],
            "io_uring",
            None,
            &["io_uring_setup"],
            full,
        ),
        (
            "workspace-write",
            vec!["unshare-user"],
            "namespace",
            None,
            &["unshare"],
            full,
        ),
        (
            "read-only",
            vec!["mount", "/nonexistent-sandgate-target"],
            "mount",
            None,
            &["mount"],
            full,
        ),
    ];
    for (mode, args, op, target, syscalls, needed) in cases {
        // A default container refuses these itself (and a system without user namespaces
        // a user namespace), before sandgate's filter is asked: refused all the same, but
        // with no marker of sandgate's.
        let containers = match docker_harness() {
            true => &["io_uring", "namespace", "mount"][..],
            false if harnessed() => &["namespace"][..],
            false => &[][..],
        };
        if containers.contains(&op) {
            let (verdict, _, out) = observed(&env, mode, &args);
            assert!(verdict.starts_with("err:"), "{args:?}: {}", show(&out));
            continue;
        }
        let (verdict, markers, out) = observed(&env, mode, &args);
        assert!(
            verdict.starts_with("err:"),
            "{args:?} was not refused: {}",
            show(&out)
        );
        assert_eq!(markers.len(), 1, "{args:?}: {markers:#?}\n{}", show(&out));
        let m = &markers[0];
        assert_eq!(m["kind"], "sandbox_denial", "{m}");
        assert_eq!(m["op"], op, "{args:?}: {m}");
        assert_eq!(m["mode"], mode, "{m}");
        assert_eq!(m["source"], "seccomp-notify", "{m}");
        assert_eq!(m["needed"], needed, "{args:?}: {m}");
        assert!(
            syscalls.contains(&m["syscall"].as_str().unwrap_or_default()),
            "{args:?}: {m}"
        );
        let shown = m["path"].as_str().or_else(|| m["addr"].as_str());
        assert_eq!(shown, target, "{args:?}: {m}");
        if args[0] == "unix-connect" {
            // A socket refused for where it lies: the flag that allows just it.
            assert_eq!(
                m["allow"],
                serde_json::json!(["--allow-unix-socket", sock]),
                "{m}"
            );
            assert!(
                m["retry"]["hint"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("--allow-unix-socket"),
                "{m}"
            );
        }
        // The probe reports the refusal and exits 0: the command succeeded, so stderr
        // has one note and no marker pushing for a retry.
        assert_status(&out, 0);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("sandgate: denied"), "{}", show(&out));
        assert!(
            stderr.contains("sandgate: note: 1 operation refused under "),
            "{}",
            show(&out)
        );
    }
}

#[test]
fn allowed_work_yields_no_marker() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let log = env.root.join("denials.ndjson");
    std::fs::write(env.ws.join("main.c"), "int main(void) { return 0; }\n").unwrap();
    std::fs::write(env.ws.join("Makefile"), "app: main.c\n\tcc -o app main.c\n").unwrap();
    let id = "git -c user.name=t -c user.email=t@example.com";
    let script = format!(
        "git init -q && {id} add . && {id} commit -qm one && make -s && ./app && echo data > /dev/null && mktemp \"${{TMPDIR:-/tmp}}/sg.XXXXXX\" | xargs rm -f && {id} status --short >/dev/null"
    );
    let mut cmd = env.sandgate("workspace-write");
    cmd.arg("--denial-log")
        .arg(&log)
        .args(["--", "/bin/sh", "-c", &script]);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    assert!(
        read_log(&log).is_empty(),
        "markers for allowed work: {:#?}",
        read_log(&log)
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("sandgate: denied"),
        "{}",
        show(&out)
    );
}

#[test]
fn markers_come_from_the_kernel_not_from_stderr_text() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let log = env.root.join("denials.ndjson");
    let mut cmd = env.sandgate("workspace-write");
    cmd.arg("--denial-log").arg(&log).args([
        "--",
        "/bin/sh",
        "-c",
        "echo 'cat: x: Permission denied' >&2; echo 'Read-only file system' >&2; exit 1",
    ]);
    assert_status(&output(&mut cmd), 1);
    assert!(read_log(&log).is_empty());
    // A refused write whose program says nothing still yields a marker.
    let target = env.outside.join("quiet");
    let mut cmd = env.sandgate("workspace-write");
    cmd.arg("--denial-log")
        .arg(&log)
        .args(["--", "/bin/sh", "-c"])
        .arg(format!(
            "echo x 2>/dev/null > '{}' 2>/dev/null; exit 0",
            target.display()
        ));
    let out = output(&mut cmd);
    assert_status(&out, 0);
    let markers = read_log(&log);
    assert_eq!(markers.len(), 1, "{markers:?}");
    assert_eq!(markers[0]["path"], target.to_string_lossy().as_ref());
}

#[test]
fn the_retry_argv_with_an_approving_endpoint_succeeds() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let target = env.ws.join("report.txt").to_string_lossy().into_owned();
    let (verdict, markers, _) = observed(&env, "read-only", &["create", &target]);
    assert!(verdict.starts_with("err:"));
    let retry = retry_argv(&markers[0], "write the report");
    assert!(
        retry
            .windows(2)
            .any(|w| w == ["--sandbox-permissions", "workspace-write"]),
        "{retry:?}"
    );
    let ep = TestEndpoint::http(|r, _| Reply::decision(r, "allowed-once"));
    let mut cmd = env.command(&retry[0]);
    cmd.env("SANDGATE_APPROVAL_ENDPOINT", &ep.url)
        .args(&retry[1..]);
    let out = output(&mut cmd);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "{}",
        show(&out)
    );
    assert!(std::path::Path::new(&target).exists());
    assert_eq!(ep.requests().len(), 1);
}

#[test]
fn thousands_of_refusals_match_the_log_one_to_one() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let dir = env.outside.to_string_lossy().into_owned();
    let (verdict, markers, out) = observed(
        &env,
        "workspace-write",
        &["threads-write", &dir, "8", "500"],
    );
    assert_eq!(verdict, "ok");
    assert_status(&out, 0);
    assert_eq!(markers.len(), 4000);
    let paths: std::collections::BTreeSet<_> = markers
        .iter()
        .map(|m| m["path"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(paths.len(), 4000);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("sandgate: denied"), "{stderr}");
    assert!(
        stderr.contains(
            "sandgate: note: 4000 operations refused under workspace-write; the command succeeded"
        ),
        "{stderr}"
    );

    // Many short-lived processes, each with one refused write; the status passes through.
    let log = env.root.join("fork.ndjson");
    let script = format!(
        "for i in $(seq 1 200); do (echo x > '{dir}/f'$i) 2>/dev/null & done; wait; exit 7"
    );
    let mut cmd = env.sandgate("workspace-write");
    cmd.arg("--denial-log")
        .arg(&log)
        .args(["--", "/bin/sh", "-c", &script]);
    let out = output(&mut cmd);
    assert_status(&out, 7);
    let markers = read_log(&log);
    assert_eq!(markers.len(), 200, "{}", show(&out));
    let pids: std::collections::BTreeSet<_> = markers.iter().map(|m| m["pid"].as_u64()).collect();
    assert_eq!(pids.len(), 200);
    // The command failed: its markers come on stderr too, capped, then the summary.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("sandgate: denied {").count(),
        20,
        "stderr is capped at 20 markers: {stderr}"
    );
    assert!(stderr.contains("sandgate: 200 operations denied under workspace-write; rerun with --sandbox-permissions full-access"), "{stderr}");
}

#[test]
fn no_observe_reports_nothing_but_says_so() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let log = env.root.join("denials.ndjson");
    let mut cmd = env.sandgate("workspace-write");
    cmd.args(["--no-observe", "--denial-log"])
        .arg(&log)
        .args(["--", "/bin/sh", "-c"])
        .arg(format!("echo x > '{}'", env.outside.join("f").display()));
    let out = output(&mut cmd);
    assert_command_failed(&out);
    let notes = read_log(&log);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0]["source"], "none");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("sandgate: denied"),
        "{}",
        show(&out)
    );
}

#[test]
fn a_link_planted_at_the_denial_log_path_is_not_followed() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    // One call plants links where the next call's denial log goes: at the file itself, and
    // a directory on the way.
    let bashrc = env.plant_log_links("denials.ndjson", "logs");
    let victim = env.outside.join("f");
    let script = format!("touch ran; echo x > '{}'", victim.display());
    let next = |mode: &str, log: &std::path::Path| {
        let mut cmd = env.sandgate(mode);
        cmd.arg("--denial-log")
            .arg(log)
            .args(["--", "/bin/sh", "-c", &script]);
        output(&mut cmd)
    };
    let cases = [
        (env.ws.join("denials.ndjson"), "it is a symbolic link"),
        ("denials.ndjson".into(), "it is a symbolic link"),
        (
            env.ws.join("logs/.bashrc"),
            "is a symbolic link inside the writable root",
        ),
    ];
    for mode in ["workspace-write", "read-only"] {
        for (log, why) in &cases {
            let out = next(mode, log);
            assert_status(&out, 78);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("will not write to the denial log") && stderr.contains(why),
                "{mode} {}: {}",
                log.display(),
                show(&out)
            );
            assert!(stderr.contains(r#""kind":"unsafe_log""#), "{}", show(&out));
            assert!(!env.ws.join("ran").exists(), "the command ran");
            assert_eq!(std::fs::read(&bashrc).unwrap_or_default(), b"keep\n");
        }
    }
    // Control: once the link is gone, the same call runs and logs its marker there. (The
    // landlock backend cannot keep a log inside a writable root from the sandbox: there
    // the call is refused, naming it.)
    std::fs::remove_file(env.ws.join("denials.ndjson")).unwrap();
    let out = next("workspace-write", &env.ws.join("denials.ndjson"));
    if landlock_backend() {
        assert_status(&out, 78);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("denials.ndjson from the sandbox"),
            "{}",
            show(&out)
        );
        return;
    }
    assert_command_failed(&out);
    assert!(env.ws.join("ran").exists(), "{}", show(&out));
    let markers = read_log(&env.ws.join("denials.ndjson"));
    assert!(
        markers
            .iter()
            .any(|m| m["path"] == victim.to_string_lossy().as_ref()),
        "{markers:?}"
    );
    assert_eq!(std::fs::read(&bashrc).unwrap_or_default(), b"keep\n");
}
