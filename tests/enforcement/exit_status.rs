//! Exit statuses.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

use crate::support::*;

#[test]
fn the_commands_status_passes_through_in_every_mode() {
    let env = TestEnv::new();
    for mode in ["read-only", "workspace-write", "full-access"] {
        assert_status(&env.sh(mode, "exit 3"), 3);
        assert_status(&env.sh(mode, "exit 0"), 0);
        // Death by a signal passes through as death by the same signal.
        for (signal, name) in [(libc::SIGTERM, "TERM"), (libc::SIGKILL, "KILL")] {
            let out = env.sh(mode, &format!("kill -{name} $$"));
            assert_eq!(
                (out.status.code(), out.status.signal()),
                (None, Some(signal)),
                "{mode}: {}",
                show(&out)
            );
        }
    }
}

#[test]
fn death_by_a_real_time_signal_passes_through() {
    // Real-time signals are not in nix's `Signal`: a command that dies of one must still
    // be reported as that death (bash's caller sees 128+N), not as sandgate's internal
    // error — and the markers and the hand-over to the detached supervisor that follow the
    // wait must still happen.
    let env = TestEnv::new();
    let first = libc::SIGRTMIN();
    for mode in ["workspace-write", "full-access"] {
        for signal in [first, first + 2, libc::SIGRTMAX()] {
            let out = env.sh(mode, &format!("kill -{signal} $$"));
            assert_eq!(
                (out.status.code(), out.status.signal()),
                (None, Some(signal)),
                "{mode} {signal}: {}",
                show(&out)
            );
            assert!(
                !String::from_utf8_lossy(&out.stderr).contains("internal"),
                "{}",
                show(&out)
            );
        }
    }
}

#[test]
fn a_core_dumping_signal_passes_through_without_a_core_from_sandgate() {
    let env = TestEnv::new();
    for mode in ["workspace-write", "full-access"] {
        // sandgate starts with core files allowed (as far as the hard limit lets it); the
        // command forbids its own, so a core file here could only be sandgate's.
        let mut sandgate = env.sandgate(mode);
        sandgate.args(["--", "/bin/sh", "-c", "ulimit -c 0; kill -QUIT $$"]);
        let mut cmd = Command::new("/bin/sh");
        cmd.current_dir(&env.ws)
            .args(["-c", "ulimit -c \"$(ulimit -H -c)\"; exec \"$0\" \"$@\""])
            .arg(sandgate.get_program())
            .args(sandgate.get_args());
        for (key, value) in sandgate.get_envs() {
            match value {
                Some(value) => cmd.env(key, value),
                None => cmd.env_remove(key),
            };
        }
        let out = output(&mut cmd);
        assert_eq!(
            (out.status.signal(), out.status.core_dumped()),
            (Some(libc::SIGQUIT), false),
            "{mode}: {}",
            show(&out)
        );
        assert!(!env.ws.join("core").exists());
    }
}

#[test]
fn missing_and_non_executable_commands() {
    let env = TestEnv::new();
    std::fs::write(env.ws.join("script"), "#!/bin/sh\necho hi\n").unwrap();
    for mode in ["read-only", "workspace-write", "full-access"] {
        let out = env.run(mode, &["sandgate-no-such-command"]);
        assert_status(&out, 127);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("command not found"),
            "{}",
            show(&out)
        );
        assert_status(&env.run(mode, &["./no-such-file"]), 127);
        let out = env.run(mode, &["./script"]);
        assert_status(&out, 126);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("\"kind\":\"not_executable\""),
            "{}",
            show(&out)
        );
    }
}

#[test]
fn root_as_workspace_is_refused_with_78() {
    let env = TestEnv::new();
    let mut cmd = env.sandgate_without_workspace("workspace-write");
    cmd.args(["--workspace", "/", "--", "true"]);
    let out = output(&mut cmd);
    assert_status(&out, 78);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing / as the workspace"),
        "{}",
        show(&out)
    );
    assert!(stderr.contains("sandgate: denied {"), "{}", show(&out));
}

#[test]
fn usage_errors_exit_64() {
    use assert_cmd::prelude::*;
    let sandgate = || std::process::Command::new(crate::support::sandgate());
    sandgate()
        .args(["--sandbox", "auto", "--", "true"])
        .assert()
        .code(64);
    // (Without `--`, no command and a non-terminal stdin is a script on stdin: shell mode.)
    let assert = sandgate().arg("--").assert().code(64);
    assert!(String::from_utf8_lossy(&assert.get_output().stderr).contains("no command given"));
    sandgate().arg("--help").assert().success();
}

#[test]
fn full_access_runs_the_command_in_sandgates_own_process() {
    // Nothing to supervise: sandgate becomes the command, so its caller waits for the
    // command itself. A restricted command is sandgate's child instead.
    let env = TestEnv::new();
    for (mode, own) in [("full-access", true), ("workspace-write", false)] {
        let mut cmd = env.sandgate(mode);
        cmd.args(["--", "/bin/sh", "-c", "echo $$"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start sandgate: {e}"));
        let pid = child.id();
        let out = child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("cannot wait for sandgate: {e}"));
        assert_status(&out, 0);
        let reported = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert_eq!(reported == pid.to_string(), own, "{mode}: {}", show(&out));
    }
}
