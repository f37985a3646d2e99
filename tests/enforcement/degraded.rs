//! Fail closed: a missing kernel feature stops the command with 78 and names the
//! guarantee; `--allow-degraded=NAME,…` runs it without the guarantees it names, and says
//! which; protected paths and secrets are never given up. The debug build's
//! SANDGATE_DEBUG_PRETEND_MISSING simulates the missing feature.

use crate::support::*;

/// What a missing feature costs: the guarantees it takes, and whether naming them lets
/// the command run (it does not when one of them may never be given up).
const MISSING: [(&str, &str, bool); 3] = [
    ("landlock", "read-only-outside,scopes", true),
    ("seccomp", "syscall-filter", false),
    // Without a PID namespace landlock's ptrace rule holds the process boundary; without
    // both, nothing does.
    (
        "landlock,pid-namespace",
        "read-only-outside,scopes,process-boundary",
        true,
    ),
];

#[test]
fn a_missing_feature_refuses_the_command_unless_what_it_takes_is_named() {
    let env = TestEnv::new();
    for (feature, names, runs) in MISSING {
        // The landlock backend needs landlock and seccomp for the protected paths: where
        // it runs, a missing one leaves nothing that may run.
        let runs = runs && !landlock_backend();
        for mode in ["read-only", "workspace-write"] {
            let mut cmd = env.sandgate(mode);
            cmd.env("SANDGATE_DEBUG_PRETEND_MISSING", feature).args([
                "--",
                "/bin/sh",
                "-c",
                "echo ran > /dev/null; echo ran",
            ]);
            let out = output(&mut cmd);
            assert_status(&out, 78);
            assert!(out.stdout.is_empty(), "the command ran: {}", show(&out));
            let stderr = String::from_utf8_lossy(&out.stderr);
            let first = names.split(',').next().unwrap_or_default();
            assert!(
                stderr.contains(&format!("\"{first}\"")),
                "{feature}: {}",
                show(&out)
            );
            assert!(
                stderr.contains("\"kind\":\"unenforceable\""),
                "{}",
                show(&out)
            );

            // Named, the others still hold: a write outside every writable root is
            // refused, and the command goes on.
            let leak = env.outside.join(format!("leak-{feature}-{mode}"));
            let mut cmd = env.sandgate(mode);
            cmd.env("SANDGATE_DEBUG_PRETEND_MISSING", feature).args([
                &format!("--allow-degraded={names}"),
                "--",
                "/bin/sh",
                "-c",
                &format!("echo x > '{}' 2>/dev/null; echo ran", leak.display()),
            ]);
            let out = output(&mut cmd);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !leak.exists(),
                "{feature} missing, {mode}: the write got through"
            );
            if !runs {
                assert_status(&out, 78);
                assert!(out.stdout.is_empty(), "the command ran: {}", show(&out));
                assert!(
                    stderr.contains("no run goes without protected-paths"),
                    "{}",
                    show(&out)
                );
                continue;
            }
            assert_status(&out, 0);
            assert_eq!(out.stdout, b"ran\n");
            assert!(
                stderr.contains("\"kind\":\"degraded_enforcement\""),
                "{}",
                show(&out)
            );
            let missing = names
                .split(',')
                .map(|n| format!("\"{n}\""))
                .collect::<Vec<_>>()
                .join(",");
            assert!(
                stderr.contains(&format!("\"missing\":[{missing}]")),
                "{}",
                show(&out)
            );
            assert_eq!(
                stderr.matches("degraded_enforcement").count(),
                1,
                "{}",
                show(&out)
            );
        }
    }
}

/// The bare flag, and a flag naming what no run gives up, are refused before anything
/// runs, with the list of what may be named.
#[test]
fn degrading_is_only_ever_named() {
    let env = TestEnv::new();
    for flag in [
        "--allow-degraded",
        "--allow-degraded=secrets",
        "--allow-degraded=protected-paths",
        "--allow-degraded=all",
    ] {
        let mut cmd = env.sandgate("workspace-write");
        cmd.env("SANDGATE_DEBUG_PRETEND_MISSING", "pid-namespace")
            .args([flag, "--", "/bin/sh", "-c", "echo ran"]);
        let out = output(&mut cmd);
        assert_status(&out, 64);
        assert!(out.stdout.is_empty(), "the command ran: {}", show(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("what may be named: read-only-outside, private-tmp"),
            "{flag}: {}",
            show(&out)
        );
    }
}

/// Without namespaces (the landlock backend) or without a PID namespace alone, nothing
/// needs naming: landlock's ptrace rule keeps what runs outside out of reach (pid 1's
/// environment is unreadable, even to root), and what the command leaves running ends with
/// the call: sandgate adopted it. Host processes stay in sight (pid 1 is not sandgate's
/// init), as the README's known limits say.
#[test]
fn without_a_pid_namespace_processes_outside_are_in_sight_but_out_of_reach() {
    let env = TestEnv::new();
    for feature in ["mount-namespace", "pid-namespace"] {
        let mark = unique_mark("degraded");
        let mut cmd = env.sandgate("workspace-write");
        cmd.env("SANDGATE_DEBUG_PRETEND_MISSING", feature)
            .env("LEFTOVER_MARK", &mark)
            .args([
                "--",
                "/bin/sh",
                "-c",
                "(setsid sleep 1016 >/dev/null 2>&1 </dev/null &); \
                 head -c 13 /proc/1/cmdline | tr '\\0' ' '; echo; \
                 cat /proc/1/environ >/dev/null 2>&1; echo environ=$?",
            ]);
        let out = output(&mut cmd);
        let left: Vec<String> = processes_marked(&mark)
            .iter()
            .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/cmdline")).ok())
            .filter(|cmdline| cmdline == "sleep\u{0}1016\u{0}")
            .collect();
        kill_marked(&mark);
        assert_status(&out, 0);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !stdout.starts_with("sandgate-init"),
            "{feature}: {}",
            show(&out)
        );
        assert!(stdout.ends_with("environ=1\n"), "{feature}: {}", show(&out));
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("degraded_enforcement"),
            "{feature}: {}",
            show(&out)
        );
        assert!(left.is_empty(), "{feature}: {left:?}");
    }
}

#[test]
fn full_access_needs_no_feature() {
    let env = TestEnv::new();
    let mut cmd = env.sandgate("full-access");
    cmd.env(
        "SANDGATE_DEBUG_PRETEND_MISSING",
        "landlock,seccomp,mount-namespace,pid-namespace",
    )
    .args(["--", "true"]);
    assert_status(&output(&mut cmd), 0);
}

#[test]
fn doctor_json_reports_the_kernel_and_every_profile() {
    let d = doctor();
    assert!(d["kernel"]["release"].is_string());
    assert!(d["landlock"]["abi"].is_i64());
    assert!(d["seccomp"]["filter"].is_boolean());
    assert!(d["seccomp"]["user_notification"].is_boolean());
    assert!(d["namespaces"]["user"].is_boolean());
    assert!(d["namespaces"]["mount"].is_boolean());
    assert!(d["namespaces"]["pid"].is_boolean());
    for mode in ["read-only", "workspace-write", "full-access"] {
        assert!(d["profiles"][mode]["enforceable"].is_boolean(), "{mode}");
    }
    assert!(
        d["backend"] == "namespaces" || d["backend"] == "landlock",
        "{d}"
    );
    for g in [
        "protected-paths",
        "secrets",
        "read-only-outside",
        "private-tmp",
        "network",
        "scopes",
        "syscall-filter",
        "process-boundary",
        "ipc",
    ] {
        let holds = &d["profiles"]["read-only"]["guarantees"][g];
        assert!(holds.is_boolean(), "{g}");
        // What holds says by what.
        let by = &d["profiles"]["read-only"]["held_by"][g];
        assert_eq!(by.is_string(), holds == true, "{g}: {by}");
    }
    // This suite expects a kernel that can enforce everything (landlock ABI >= 6).
    let abi = d["landlock"]["abi"].as_i64().unwrap_or(0);
    require("landlock-abi-6", abi >= 6);
}
