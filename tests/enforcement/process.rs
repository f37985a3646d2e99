//! Process confinement: no ptrace or signals out of the sandbox,
//! the always-refused syscalls, no capabilities, no_new_privs, setuid gains nothing.

use std::process::{Command, Stdio};

use crate::support::*;

/// A process outside the sandbox, killed when the test ends.
struct Bystander(std::process::Child);

impl Bystander {
    fn start() -> Bystander {
        Bystander(
            Command::new("sleep")
                .arg("60")
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }
    fn pid(&self) -> String {
        self.0.id().to_string()
    }
}

impl Drop for Bystander {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn cannot_ptrace_or_signal_sandgate_or_outside_processes() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let outside = Bystander::start();
    // In the sandbox's PID namespace a host process has no number at all; without one
    // (the landlock backend) landlock's signal scope refuses it.
    let (unnumbered, through_pidfd) = match landlock_backend() {
        true => ("EPERM", "err:EPERM"),
        false => ("ESRCH", "err:EINVAL"),
    };
    env.assert_refused(&["kill", &outside.pid(), "0"], unnumbered);
    env.assert_refused(&["ptrace-attach", &outside.pid()], "EPERM");
    env.assert_refused(&["process-vm-read-parent"], "EPERM");
    // A real signal, not just the permission check of signal 0.
    for mode in ["read-only", "workspace-write"] {
        assert_eq!(
            env.probe(mode, &["kill", &outside.pid(), "15"]),
            format!("err:{unnumbered}")
        );
    }
    // Named without a number — a `/proc/PID` fd sandgate's caller handed in, which the
    // kernel takes as a pidfd — it is still out of reach: the kernel refuses a pidfd of a
    // process outside the caller's PID namespace (EINVAL), before landlock's signal scope
    // (which refuses it without a PID namespace).
    let through_fd = |mode: &str, signal: &str| {
        let mut sandgate = env.sandgate(mode);
        sandgate
            .arg("--")
            .arg(probe())
            .args(["pidfd-signal-fd", "3", signal]);
        let mut wrapper = Command::new("/bin/sh");
        wrapper.args(["-c", r#"exec 3</proc/"$0" && exec "$@""#, &outside.pid()]);
        let out = output(&mut behind(wrapper, &sandgate));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(through_fd("full-access", "0"), "ok", "control");
    for mode in ["read-only", "workspace-write"] {
        assert_eq!(through_fd(mode, "15"), through_pidfd, "{mode}");
    }
    let mut bystander = outside;
    assert!(
        bystander.0.try_wait().is_ok_and(|s| s.is_none()),
        "the outside process was killed"
    );
}

/// The command shares sandgate's process group (the terminal's foreground job): a signal
/// to its whole group reaches the sandbox's members only, never sandgate, which would
/// forward it to the command a second time.
#[test]
fn a_signal_to_the_process_group_does_not_reach_sandgate() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let script = "n=0; trap 'n=$((n+1))' USR1; kill -USR1 0; sleep 0.5; echo \"$n\"";
    for mode in ["read-only", "workspace-write"] {
        let out = env.sh(mode, script);
        assert_status(&out, 0);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n", "{mode}");
    }
    // Control: sandgate forwards what reaches it (through init, which relays it): a USR1
    // sent to sandgate from outside arrives, exactly once.
    let mut cmd = env.sandgate("workspace-write");
    cmd.args([
        "--",
        "/bin/sh",
        "-c",
        "n=0; trap 'n=$((n+1))' USR1; echo ready; sleep 1; echo \"$n\"",
    ])
    .stdout(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut reader =
        std::io::BufReader::new(child.stdout.take().unwrap_or_else(|| panic!("no stdout")));
    let mut line = String::new();
    use std::io::{BufRead, Read};
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGUSR1,
    )
    .unwrap();
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    let _ = child.wait();
    assert_eq!(rest, "1\n", "control");
}

#[test]
fn dangerous_syscalls_are_refused() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    // A default container refuses most of these to everyone, full access included: no
    // control can show them allowed, and the sandbox refuses them all the same.
    if docker_harness() {
        for mode in ["read-only", "workspace-write"] {
            for op in [
                "io-uring",
                "unshare-user",
                "clone-newuser",
                "unshare-mount",
                "bpf",
                "keyctl",
                "perf-event-open",
            ] {
                assert_eq!(env.probe(mode, &[op]), "err:EPERM", "{op} under {mode}");
            }
        }
        return;
    }
    // Without user namespaces no control can show one made either.
    let userns_control = !harnessed();
    let io_uring_enabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .map_or(true, |s| s.trim() == "0");
    if require("io-uring", io_uring_enabled) {
        env.assert_refused(&["io-uring"], "EPERM");
    }
    for op in ["unshare-user", "clone-newuser"] {
        match userns_control {
            true => env.assert_refused(&[op], "EPERM"),
            false => {
                for mode in ["read-only", "workspace-write"] {
                    assert_eq!(env.probe(mode, &[op]), "err:EPERM", "{op} under {mode}");
                }
            }
        }
    }
    for mode in ["read-only", "workspace-write"] {
        for op in [
            "unshare-mount",
            "bpf",
            "keyctl",
            "perf-event-open",
            "x32-getpid",
        ] {
            assert_eq!(env.probe(mode, &[op]), "err:EPERM", "{op} under {mode}");
        }
        // mount(2) on a path that does not exist: the host says ENOENT, the filter EPERM
        // before the kernel even looks the path up.
        assert_eq!(
            env.probe(mode, &["mount", "/nonexistent-sandgate-target"]),
            "err:EPERM"
        );
        assert_eq!(
            env.probe(mode, &["clone3"]),
            "err:ENOSYS",
            "clone3 under {mode}"
        );
    }
    if is_root() {
        assert_eq!(
            env.probe("full-access", &["mount", "/nonexistent-sandgate-target"]),
            "err:ENOENT"
        );
        assert_eq!(env.probe("full-access", &["keyctl"]), "ok");
        assert_eq!(env.probe("full-access", &["bpf"]), "ok");
    }
}

#[test]
fn no_new_privs_and_no_capabilities_even_as_root() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for mode in ["read-only", "workspace-write"] {
        let out = env.run(mode, &["cat", "/proc/self/status"]);
        assert_status(&out, 0);
        let status = String::from_utf8_lossy(&out.stdout);
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(field("NoNewPrivs:"), "1", "{mode}");
        // Dropping from the bounding set takes CAP_SETPCAP: an unprivileged call without
        // a user namespace of its own keeps the set it was given, which no_new_privs
        // leaves nothing to raise.
        let sets: &[&str] = match landlock_backend() && !is_root() {
            true => &["CapEff:", "CapPrm:", "CapInh:", "CapAmb:"],
            false => &["CapEff:", "CapPrm:", "CapInh:", "CapBnd:", "CapAmb:"],
        };
        for cap in sets {
            assert_eq!(field(cap), "0000000000000000", "{cap} under {mode}");
        }
    }
}

/// A setuid-root copy of the probe: as root the test makes it; as an unprivileged uid
/// `scripts/test` provides it in SANDGATE_TEST_SUID_PROBE (an unprivileged test cannot).
#[test]
fn a_setuid_root_binary_gains_nothing() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let suid = if is_root() {
        let path = env.root.join("suid-probe");
        std::fs::copy(probe(), &path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o4755)).unwrap();
        std::fs::set_permissions(&env.root, std::fs::Permissions::from_mode(0o755)).unwrap();
        Some(path)
    } else {
        let given = std::env::var_os("SANDGATE_TEST_SUID_PROBE").map(std::path::PathBuf::from);
        require("suid-probe", given.is_some())
            .then_some(())
            .and(given)
    };
    let Some(suid) = suid else { return };
    let euid_of = |out: std::process::Output| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    if !is_root() {
        // Control: outside the sandbox the bit works, so the test could see a gain.
        assert_eq!(euid_of(output(Command::new(&suid).arg("euid"))), "0");
    }
    let me = nix::unistd::geteuid().to_string();
    for mode in ["read-only", "workspace-write"] {
        assert_eq!(
            euid_of(env.run(mode, &[suid.as_os_str(), "euid".as_ref()])),
            me,
            "{mode}"
        );
        let out = env.run(mode, &[suid.as_os_str(), "bpf".as_ref()]);
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "err:EPERM");
    }
}

/// SIGKILL of sandgate while the command runs: nothing of the call is left, neither the
/// command nor what it started in the background (found from the host by a mark in their
/// environment, whatever pid they have in the sandbox). Without a PID namespace (the
/// landlock backend) the call's ender sees its pipe from sandgate close, and ends them.
#[test]
fn killing_sandgate_leaves_no_orphan() {
    let env = TestEnv::new();
    for (mode, keep) in [
        ("read-only", false),
        ("workspace-write", true),
        ("full-access", false),
    ] {
        let mark = unique_mark("killed");
        let mut cmd = env.sandgate(mode);
        if keep && !landlock_backend() {
            // Kept are only what a command leaves when it *ends*: not a call cut short.
            cmd.arg("--keep-background");
        }
        let script = match mode {
            // Unconfined, only the command itself is sandgate's to end.
            "full-access" => "echo started; exec sleep 60",
            _ => "sleep 61 & setsid sleep 62 & echo started; exec sleep 60",
        };
        cmd.env("LEFTOVER_MARK", &mark)
            .args(["--", "/bin/sh", "-c", script])
            .stdout(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        use std::io::BufRead;
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "started\n");
        // sandgate, the command and its two background processes; unconfined, sandgate is
        // the command. (A process just started shows its mark once its exec is through.)
        let expected = if mode == "full-access" { 1 } else { 4 };
        let mut running = processes_marked(&mark);
        for _ in 0..100 {
            if running.len() >= expected {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            running = processes_marked(&mark);
        }
        assert!(
            running.len() >= expected,
            "{mode}: the test cannot see the call's processes: {running:?}"
        );
        child.kill().unwrap();
        let _ = child.wait();
        let gone = (0..100).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            processes_marked(&mark).is_empty()
        });
        let left = processes_marked(&mark);
        kill_marked(&mark);
        assert!(gone, "{mode}: {left:?} outlived sandgate");
    }
}

#[test]
fn signals_sent_to_sandgate_reach_the_command() {
    let env = TestEnv::new();
    for (signal, number) in [
        (nix::sys::signal::Signal::SIGTERM, 15),
        (nix::sys::signal::Signal::SIGINT, 2),
        (nix::sys::signal::Signal::SIGHUP, 1),
    ] {
        let mut cmd = env.sandgate("workspace-write");
        cmd.args([
            "--",
            "/bin/sh",
            "-c",
            &format!(
                "trap 'echo caught; exit {number}' {}; echo ready; while :; do sleep 0.05; done",
                signal.as_str().trim_start_matches("SIG")
            ),
        ]);
        cmd.stdout(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let mut reader = std::io::BufReader::new(stdout);
        let mut line = String::new();
        use std::io::{BufRead, Read};
        reader.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
        let status = child.wait().unwrap();
        let mut rest = String::new();
        reader.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "caught\n", "{signal}");
        assert_eq!(status.code(), Some(number), "{signal}");
    }
}

#[test]
fn stdin_and_stdout_pass_through() {
    let env = TestEnv::new();
    let mut cmd = env.sandgate("read-only");
    cmd.args(["--", "tr", "a-z", "A-Z"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap_or_else(|| panic!("no stdin"))
        .write_all(b"hello\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.stdout, b"HELLO\n");
}

impl Bystander {
    /// A line of `/proc/PID/FILE` that starts with `prefix`.
    fn proc_line(&self, file: &str, prefix: &str) -> String {
        std::fs::read_to_string(format!("/proc/{}/{file}", self.pid()))
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_default()
            .to_owned()
    }

    /// The nice value (field 19 of `/proc/PID/stat`).
    fn nice(&self) -> String {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
        let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        after_name
            .split_whitespace()
            .nth(16)
            .unwrap_or_default()
            .to_owned()
    }

    fn running(&mut self) -> bool {
        self.0.try_wait().is_ok_and(|s| s.is_none())
    }
}

/// A uid, process group and user no process has: the host answers ESRCH, so a refusal by
/// the filter (EPERM) is told apart without reaching every process of a real uid.
const NOBODY_HAS: &str = "3999999";

#[test]
fn prlimit_cannot_change_a_host_process() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let mut host = Bystander::start();
    let before = host.proc_line("limits", "Max open files");
    let cpu_before = host.proc_line("limits", "Max cpu time");
    for mode in ["read-only", "workspace-write"] {
        assert_eq!(
            env.probe(mode, &["prlimit-nofile", &host.pid(), "17"]),
            "err:EPERM",
            "{mode}"
        );
        // The attack as a user would type it: a one-second CPU limit kills the process.
        let out = env.run(mode, &["prlimit", "--pid", &host.pid(), "--cpu=1:1"]);
        assert_command_failed(&out);
    }
    assert!(host.running(), "the host process was killed");
    assert_eq!(host.proc_line("limits", "Max open files"), before);
    assert_eq!(host.proc_line("limits", "Max cpu time"), cpu_before);
    // Control: full-access reaches it, and /proc shows the change.
    let control = Bystander::start();
    assert_eq!(
        env.probe("full-access", &["prlimit-nofile", &control.pid(), "17"]),
        "ok"
    );
    let changed = control.proc_line("limits", "Max open files");
    assert!(
        changed.split_whitespace().nth(3) == Some("17"),
        "control: {changed:?}"
    );
}

#[test]
fn priorities_and_scheduling_of_host_processes_cannot_change() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let mut host = Bystander::start();
    let (nice, cpus) = (host.nice(), host.proc_line("status", "Cpus_allowed_list"));
    let (process, pgrp, user) = ("0", "1", "2");
    let (ioprio_process, ioprio_user) = ("1", "3");
    for mode in ["read-only", "workspace-write"] {
        for args in [
            vec!["setpriority", process, &host.pid(), "7"],
            vec!["setpriority", pgrp, NOBODY_HAS, "7"],
            vec!["setpriority", user, NOBODY_HAS, "7"],
            vec!["sched-setaffinity", &host.pid(), "0"],
            vec!["ioprio-set", ioprio_process, &host.pid()],
            vec!["ioprio-set", ioprio_user, NOBODY_HAS],
        ] {
            assert_eq!(env.probe(mode, &args), "err:EPERM", "{args:?} under {mode}");
        }
        let out = env.run(mode, &["renice", "-n", "7", "-p", &host.pid()]);
        assert_command_failed(&out);
    }
    assert!(host.running());
    assert_eq!(host.nice(), nice);
    assert_eq!(host.proc_line("status", "Cpus_allowed_list"), cpus);
    // Controls: the host answers; full-access changes a host process.
    for args in [
        vec!["setpriority", pgrp, NOBODY_HAS, "7"],
        vec!["setpriority", user, NOBODY_HAS, "7"],
        vec!["ioprio-set", ioprio_user, NOBODY_HAS],
    ] {
        assert_eq!(env.probe("full-access", &args), "err:ESRCH", "{args:?}");
    }
    let control = Bystander::start();
    for args in [
        vec!["setpriority", process, &control.pid(), "7"],
        vec!["sched-setaffinity", &control.pid(), "0"],
        vec!["ioprio-set", ioprio_process, &control.pid()],
    ] {
        assert_eq!(env.probe("full-access", &args), "ok", "{args:?}");
    }
    assert_eq!(control.nice(), "7");
    assert_eq!(
        control.proc_line("status", "Cpus_allowed_list"),
        "Cpus_allowed_list:\t0"
    );
}

#[test]
fn the_sandbox_still_sets_its_own_limits_and_priorities() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for mode in ["read-only", "workspace-write"] {
        assert_eq!(
            env.probe(mode, &["own-limits-and-priorities"]),
            "ok",
            "{mode}"
        );
        let out = env.sh(
            mode,
            "ulimit -S -n 64 && nice -n 3 sh -c 'ulimit -n; cut -d\" \" -f19 /proc/self/stat' \
             && taskset -c 0 true && ionice -c 3 true && echo fine",
        );
        assert_status(&out, 0);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "64\n3\nfine\n",
            "{mode}"
        );
    }
}

#[test]
fn no_kind_of_signal_reaches_a_host_process() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let mut host = Bystander::start();
    let senders = ["tkill", "tgkill", "sigqueue", "tgsigqueue", "pidfd-signal"];
    // The host process has no number in the sandbox's PID namespace; without one (the
    // landlock backend), landlock's signal scope refuses it, and lets a file be owned by
    // it but sends it no SIGIO.
    let (unnumbered, owned) = match landlock_backend() {
        true => ("err:EPERM", "ok"),
        false => ("err:ESRCH", "err:ESRCH"),
    };
    for sender in senders {
        // Control with signal 0: only the permission check, the host allows it.
        assert_eq!(env.probe("full-access", &[sender, &host.pid(), "0"]), "ok");
        for mode in ["read-only", "workspace-write"] {
            assert_eq!(
                env.probe(mode, &[sender, &host.pid(), "15"]),
                unnumbered,
                "{sender} under {mode}"
            );
        }
    }
    // SIGIO through F_SETOWN: no process of that number to own the file.
    for mode in ["read-only", "workspace-write"] {
        assert_eq!(env.probe(mode, &["sigio", &host.pid()]), owned);
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        host.running(),
        "a signal from the sandbox killed the host process"
    );
    // Control: outside the sandbox the same SIGIO kills.
    let mut control = Bystander::start();
    assert_eq!(env.probe("full-access", &["sigio", &control.pid()]), "ok");
    let killed = (0..50).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        !control.running()
    });
    assert!(killed, "control: SIGIO did not kill the bystander");
}

#[test]
fn a_sandboxed_process_cannot_join_a_host_process_group() {
    if !require_full_enforcement() {
        return;
    }
    use std::os::unix::process::CommandExt;
    let env = TestEnv::new();
    // A group of the host's in this same session, as the user's shell's is at the prompt.
    let mut group = Command::new("sleep");
    group.arg("60").stdin(Stdio::null()).process_group(0);
    let host_group = Bystander(group.spawn().unwrap());
    env.assert_refused(&["setpgid", &host_group.pid()], "EPERM");
}

#[test]
fn no_setuid_or_setgid_file_can_be_made_inside() {
    if !require_full_enforcement() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let python = "/usr/bin/python3";
    // Every way a file's mode is set: chmod, fchmod (install), an open that creates.
    let script = format!(
        "touch a; chmod u+s a; chmod g+s a; install -m 4755 /bin/true b; \
         {python} -c 'import os; os.close(os.open(\"c\", os.O_CREAT | os.O_WRONLY, 0o4755))'; \
         true"
    );
    let set_id = |name: &str| {
        std::fs::metadata(env.ws.join(name)).map_or(0, |m| m.permissions().mode() & 0o6000)
    };
    {
        let mode = "workspace-write";
        let out = env.sh(mode, &script);
        assert_status(&out, 0);
        for name in ["a", "b", "c", "d"] {
            assert_eq!(
                set_id(name),
                0,
                "{mode}: {name} got a set-id bit: {}",
                show(&out)
            );
            let _ = std::fs::remove_file(env.ws.join(name));
            let _ = std::fs::remove_dir(env.ws.join(name));
        }
    }
    // Control: unconfined, the same calls set the bits.
    let out = env.sh("full-access", &script);
    assert_status(&out, 0);
    for name in ["a", "b", "c"] {
        assert_ne!(set_id(name), 0, "control: {name}: {}", show(&out));
    }
}
