//! Resource limits: every private tmpfs is bounded in size and inodes, and where sandgate
//! can make a cgroup (root here, on cgroup v1) a call's processes and memory are bounded;
//! where it cannot (uid 65534 here: nothing is delegated to it) an explicit limit refuses
//! the call, `--allow-degraded=limit-pids` names it, and a preset's default is noted. Which of the two
//! holds is what `doctor` says, and a test below checks that doctor tells the truth.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use crate::support::*;

/// Runs the probe under `mode` with sandgate's `flags` before `--`.
fn probe_with(env: &TestEnv, mode: &str, flags: &[&str], args: &[&str]) -> Output {
    let mut cmd = env.sandgate(mode);
    cmd.args(flags).arg("--").arg(probe()).args(args);
    output(&mut cmd)
}

/// Runs a `/bin/sh -c` script under `mode` with sandgate's `flags` before `--`.
fn sh_with(env: &TestEnv, mode: &str, flags: &[&str], script: &str) -> Output {
    let mut cmd = env.sandgate(mode);
    cmd.args(flags).args(["--", "/bin/sh", "-c", script]);
    output(&mut cmd)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The JSON notes sandgate printed (`sandgate: note {…}`).
fn json_notes(out: &Output) -> Vec<serde_json::Value> {
    stderr(out)
        .lines()
        .filter_map(|l| l.strip_prefix("sandgate: note {"))
        .map(|rest| {
            serde_json::from_str(&format!("{{{rest}"))
                .unwrap_or_else(|e| panic!("note {rest:?}: {e}"))
        })
        .collect()
}

/// Whether both cgroup limits hold here, as `doctor` says. As root they must (this is
/// what the suite proves), unless `SANDGATE_TEST_ALLOW_MISSING=cgroup-limits`; as another
/// uid they hold only where a subtree is delegated to it, and the refusal is tested where
/// they do not.
fn cgroups_hold() -> bool {
    let limits = &doctor()["limits"];
    let holds = limits["pids"]["holds"] == true && limits["memory"]["holds"] == true;
    if is_root() {
        return require("cgroup-limits", holds);
    }
    holds
}

/// Whether the cgroup limits hold here. Where they do not, checks instead that a call with
/// the explicit `flag value` is refused, so that a test built on them still proves a claim.
fn cgroups_hold_else_refused(env: &TestEnv, flag: &str, value: &str) -> bool {
    if cgroups_hold() {
        return true;
    }
    let out = sh_with(env, "workspace-write", &[flag, value], "true");
    let kind = flag.trim_start_matches("--");
    assert_limit_refused(&out, kind, &format!("{flag} {value}"));
    false
}

/// Asserts that `out` is the refusal of an explicit `kind` limit that cannot hold here.
#[track_caller]
fn assert_limit_refused(out: &Output, kind: &str, flag_and_value: &str) {
    assert_status(out, 78);
    let markers = stderr_markers(out);
    assert_eq!(markers.len(), 1, "{}", show(out));
    assert_eq!(markers[0]["kind"], "unenforceable", "{}", show(out));
    assert_eq!(
        markers[0]["missing"],
        serde_json::json!([kind]),
        "{}",
        show(out)
    );
    let message = markers[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(flag_and_value) && message.contains("cannot hold here"),
        "{message}"
    );
    assert!(
        message.contains(&format!("--allow-degraded={kind}")),
        "{message}"
    );
    assert!(stdout(out).is_empty(), "the command ran: {}", show(out));
}

/// Asserts that sandgate said the kernel enforced the `limit` of `value` during the call.
#[track_caller]
fn assert_limit_reached(out: &Output, limit: &str, value: u64) {
    assert!(
        json_notes(out).iter().any(|n| n["kind"] == "limit_reached"
            && n["limit"] == limit
            && n["value"] == value
            && n["count"].as_u64() >= Some(1)),
        "{}",
        show(out)
    );
}

/// `MemTotal` in bytes, as the kernel reports it to this process.
fn mem_total() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no MemTotal in {meminfo}"));
    kib * 1024
}

/// The super options of the filesystem mounted at `point`, as a process sees it in
/// `mountinfo` (the last mount there: the one on top).
fn super_options(mountinfo: &str, point: &str) -> String {
    mountinfo
        .lines()
        .rfind(|l| l.split(' ').nth(4) == Some(point))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap_or_else(|| panic!("nothing mounted at {point}:\n{mountinfo}"))
        .to_owned()
}

/// The landlock backend makes no tmpfs: nothing the command writes can fill memory there,
/// since /tmp and /dev/shm are out of its reach (its temp is a host directory). Returns
/// true, having checked that, when the calls here run it.
fn no_tmpfs_to_bound(env: &TestEnv) -> bool {
    if !landlock_backend() {
        return false;
    }
    for dir in ["/tmp", "/dev/shm"] {
        let out = probe_with(
            env,
            "read-only",
            &["--tmpfs-size", "1M"],
            &["fill", &format!("{dir}/big")],
        );
        assert_eq!(stdout(&out), "err:EACCES", "{dir}: {}", show(&out));
    }
    true
}

#[test]
fn a_private_tmpfs_refuses_writes_and_files_past_its_bound() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    if no_tmpfs_to_bound(&env) {
        return;
    }
    // workspace-write's /tmp is a directory on the host (bounded by its filesystem): only
    // its /dev/shm is a tmpfs.
    for (mode, dir) in [
        ("read-only", "/tmp"),
        ("read-only", "/dev/shm"),
        ("workspace-write", "/dev/shm"),
    ] {
        let out = probe_with(
            &env,
            mode,
            &["--tmpfs-size", "1M"],
            &["fill", &format!("{dir}/big")],
        );
        assert_eq!(
            stdout(&out),
            "wrote 1048576\nerr:ENOSPC",
            "{mode} {dir}: {}",
            show(&out)
        );
        // One inode per 4 KiB: 256, of which the tmpfs's root takes one.
        let out = probe_with(
            &env,
            mode,
            &["--tmpfs-size", "1M"],
            &["create-files", dir, "1000"],
        );
        assert_eq!(
            stdout(&out),
            "created 255\nerr:ENOSPC",
            "{mode} {dir}: {}",
            show(&out)
        );
        // Control: the bound is the one asked for, not something the host imposes.
        let out = probe_with(
            &env,
            mode,
            &["--tmpfs-size", "3M"],
            &["fill", &format!("{dir}/big")],
        );
        assert_eq!(
            stdout(&out),
            "wrote 3145728\nerr:ENOSPC",
            "{mode} {dir}: {}",
            show(&out)
        );
    }
}

#[test]
fn mount_and_df_inside_show_the_bound_and_every_tmpfs_sandgate_makes_has_one() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    if no_tmpfs_to_bound(&env) {
        return;
    }
    // A hidden file, so that the masks' tmpfs is made too.
    std::fs::create_dir_all(env.root.join("config")).unwrap();
    let host = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let host_devices: Vec<&str> = host.lines().filter_map(|l| l.split(' ').nth(2)).collect();
    let out = sh_with(
        &env,
        "read-only",
        &["--tmpfs-size", "2M"],
        "cat /proc/self/mountinfo; echo ---; stat -f -c '%b %S %c' /tmp /dev/shm",
    );
    assert_status(&out, 0);
    let text = stdout(&out);
    let (mountinfo, df) = text.split_once("---").unwrap_or_else(|| panic!("{text}"));
    for point in ["/tmp", "/dev/shm"] {
        let options = super_options(mountinfo, point);
        assert!(
            options.contains("size=2048k,nr_inodes=512"),
            "{point}: {options}"
        );
    }
    assert_eq!(df.trim(), "512 4096 512\n512 4096 512", "df inside");
    // Every tmpfs made for the call (a superblock the host does not have) is bounded:
    // /tmp, /dev/shm, the /dev/pts stand-in, the masks' empty objects.
    let made: Vec<&str> = mountinfo
        .lines()
        .filter(|l| l.contains(" - tmpfs "))
        .filter(|l| !host_devices.contains(&l.split(' ').nth(2).unwrap_or_default()))
        .collect();
    assert!(made.len() >= 4, "{made:#?}");
    for line in &made {
        let options = line.rsplit(' ').next().unwrap_or_default();
        assert!(
            options.contains("size=") && options.contains("nr_inodes="),
            "an unbounded tmpfs: {line}"
        );
    }
    // Without the flag: the smaller of 1 GiB and a quarter of RAM, in pages.
    let pages = (1u64 << 30).min(mem_total() / 4) / 4096;
    let out = sh_with(&env, "workspace-write", &[], "cat /proc/self/mountinfo");
    let options = super_options(&stdout(&out), "/dev/shm");
    assert!(
        options.contains(&format!("size={}k,nr_inodes={pages}", pages * 4)),
        "{options}"
    );
}

#[test]
fn a_project_may_lower_the_tmpfs_bound_but_not_raise_it() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    if no_tmpfs_to_bound(&env) {
        return;
    }
    let project = env.ws.join(".sandgate");
    std::fs::create_dir_all(&project).unwrap();
    let shm_size = |flags: &[&str]| {
        let out = sh_with(&env, "read-only", flags, "cat /proc/self/mountinfo");
        assert_status(&out, 0);
        (super_options(&stdout(&out), "/dev/shm"), stderr(&out))
    };
    std::fs::write(project.join("config.json"), r#"{"tmpfs_size": "64G"}"#).unwrap();
    let (options, said) = shm_size(&["--tmpfs-size", "4M"]);
    assert!(options.contains("size=4096k,"), "{options}");
    assert!(
        said.contains("project config: ignoring `tmpfs_size`: 64G is not below the 4M in force"),
        "{said}"
    );
    // Nor above sandgate's own default.
    let (options, said) = shm_size(&[]);
    assert!(!options.contains("size=67108864k"), "{options}");
    assert!(said.contains("ignoring `tmpfs_size`"), "{said}");
    std::fs::write(project.join("config.json"), r#"{"tmpfs_size": "2M"}"#).unwrap();
    let (options, said) = shm_size(&["--tmpfs-size", "4M"]);
    assert!(options.contains("size=2048k,"), "{options}");
    assert!(!said.contains("ignoring"), "{said}");
}

#[test]
fn a_fork_loop_cannot_pass_the_pid_limit_and_the_call_still_ends() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for mode in ["read-only", "workspace-write"] {
        let started = Instant::now();
        let out = probe_with(
            &env,
            mode,
            &["--limit-pids", "50"],
            &["fork-until-refused", "1000"],
        );
        if !cgroups_hold() {
            assert_limit_refused(&out, "limit-pids", "--limit-pids 50");
            continue;
        }
        // The probe itself is one of the 50, and so is the call's init (pid 1 of its
        // PID namespace), which joined the cgroup first; without a PID namespace there is
        // no init.
        let forked = if landlock_backend() { 49 } else { 48 };
        assert_eq!(
            stdout(&out),
            format!("forked {forked}\nerr:EAGAIN"),
            "{mode}: {}",
            show(&out)
        );
        assert_status(&out, 0);
        assert_limit_reached(&out, "limit-pids", 50);
        assert!(started.elapsed() < Duration::from_secs(60), "{mode}");
    }
    // Control: without the limit the same loop passes 50.
    let out = probe_with(&env, "read-only", &[], &["fork-until-refused", "60"]);
    assert_eq!(stdout(&out), "forked 60\nok", "{}", show(&out));
}

#[test]
fn a_memory_hog_is_killed_at_the_memory_limit_and_sandgate_says_so() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for mode in ["read-only", "workspace-write"] {
        let out = probe_with(
            &env,
            mode,
            &["--limit-memory", "64M"],
            &["touch-memory", "512"],
        );
        if !cgroups_hold() {
            assert_limit_refused(&out, "limit-memory", "--limit-memory 64M");
            continue;
        }
        // The command died of SIGKILL, and sandgate of the same signal, as with any death.
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGKILL),
            "{mode}: {}",
            show(&out)
        );
        assert!(!stdout(&out).contains("touched"), "{mode}: {}", show(&out));
        assert_limit_reached(&out, "limit-memory", 64 << 20);
        // Control: well below the limit the same program runs to its end.
        let out = probe_with(
            &env,
            mode,
            &["--limit-memory", "64M"],
            &["touch-memory", "16"],
        );
        assert_eq!(stdout(&out), "touched 16\nok", "{mode}: {}", show(&out));
        assert!(
            !json_notes(&out)
                .iter()
                .any(|n| n["kind"] == "limit_reached"),
            "{mode}: {}",
            show(&out)
        );
    }
}

/// The host's directory of cgroup `path` (as `/proc/PID/cgroup` names it) in the v1
/// hierarchy of `controller`.
fn v1_dir(controller: &str, path: &str) -> PathBuf {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let point = mountinfo
        .lines()
        .filter(|l| l.contains(" - cgroup "))
        .find(|l| {
            l.rsplit(' ')
                .next()
                .is_some_and(|o| o.split(',').any(|c| c == controller))
        })
        .and_then(|l| l.split(' ').nth(4))
        .unwrap_or_else(|| panic!("no {controller} hierarchy:\n{mountinfo}"));
    Path::new(point).join(path.trim_start_matches('/'))
}

/// The call's own cgroups (`sandgate-…`), from the `/proc/self/cgroup` the command wrote.
fn call_cgroups(written: &str) -> Vec<(String, PathBuf)> {
    written
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, controller, path) = (f.next()?, f.next()?, f.next()?);
            let call = path.rsplit('/').next()?.starts_with("sandgate-");
            (call && ["pids", "memory"].contains(&controller))
                .then(|| (controller.to_owned(), v1_dir(controller, path)))
        })
        .collect()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn from_the_host_the_calls_cgroups_hold_their_limits_while_it_runs_and_are_gone_after() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let flags = ["--limit-pids", "77", "--limit-memory", "96M"];
    if !cgroups_hold_else_refused(&env, "--limit-pids", "77") {
        return;
    }
    let mut cmd = env.sandgate("workspace-write");
    cmd.args(flags).args([
        "--",
        "/bin/sh",
        "-c",
        "cat /proc/self/cgroup > cgroups.tmp && mv cgroups.tmp cgroups; while [ ! -e go ]; do sleep 0.02; done",
    ]);
    let mut child = cmd.spawn().unwrap();
    let written = env.ws.join("cgroups");
    wait_for("the command's cgroups", || written.exists());
    let cgroups = call_cgroups(&std::fs::read_to_string(&written).unwrap_or_default());
    assert_eq!(cgroups.len(), 2, "{cgroups:?}");
    let read = |dir: &Path, file: &str| {
        std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()))
            .trim()
            .to_owned()
    };
    for (controller, dir) in &cgroups {
        let name = dir.file_name().unwrap_or_default().to_string_lossy();
        assert!(name.starts_with("sandgate-"), "{}", dir.display());
        match controller.as_str() {
            "pids" => assert_eq!(read(dir, "pids.max"), "77"),
            _ => {
                assert_eq!(
                    read(dir, "memory.limit_in_bytes"),
                    (96u64 << 20).to_string()
                );
                if dir.join("memory.memsw.limit_in_bytes").exists() {
                    assert_eq!(
                        read(dir, "memory.memsw.limit_in_bytes"),
                        (96u64 << 20).to_string()
                    );
                }
            }
        }
        assert!(!read(dir, "cgroup.procs").is_empty(), "{}", dir.display());
    }
    std::fs::write(env.ws.join("go"), "").unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    for (_, dir) in &cgroups {
        assert!(!dir.exists(), "left behind: {}", dir.display());
    }
}

#[test]
fn a_cgroup_still_holding_a_background_process_is_left_and_swept_later() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    if !cgroups_hold_else_refused(&env, "--limit-pids", "20") {
        return;
    }
    let out = sh_with(
        &env,
        "workspace-write",
        &["--limit-pids", "20", "--keep-background"],
        "cat /proc/self/cgroup > cgroups; sleep 3 & echo started",
    );
    assert_status(&out, 0);
    let cgroups =
        call_cgroups(&std::fs::read_to_string(env.ws.join("cgroups")).unwrap_or_default());
    let [(_, dir)] = cgroups.as_slice() else {
        panic!("{cgroups:?}")
    };
    // The call ended with a process it kept inside: its cgroup stays, limit and all.
    assert!(dir.exists(), "{}", dir.display());
    assert_eq!(
        std::fs::read_to_string(dir.join("pids.max"))
            .unwrap_or_default()
            .trim(),
        "20"
    );
    let procs = dir.join("cgroup.procs");
    wait_for("the background process to end", || {
        std::fs::read_to_string(&procs).is_ok_and(|p| p.trim().is_empty())
    });
    // The next call that makes a cgroup in the same place removes it.
    let out = sh_with(&env, "workspace-write", &["--limit-pids", "20"], "true");
    assert_status(&out, 0);
    assert!(!dir.exists(), "not swept: {}", dir.display());
}

#[test]
fn the_sandbox_cannot_leave_or_loosen_its_cgroup() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    if !cgroups_hold_else_refused(&env, "--limit-memory", "1G") {
        return;
    }
    let probe = probe();
    let probe = probe.display();
    for mode in ["read-only", "workspace-write"] {
        let out = sh_with(
            &env,
            mode,
            &["--limit-pids", "30"],
            &format!(
                r#"own=/sys/fs/cgroup/pids$(grep ':pids:' /proc/self/cgroup | cut -d: -f3)
                   {probe} write /sys/fs/cgroup/pids/cgroup.procs
                   {probe} write "$own/pids.max"
                   {probe} mkdir "$own/inner"
                   {probe} write /sys/fs/cgroup/unified/cgroup.procs
                   cat "$own/pids.max""#
            ),
        );
        let refused = format!("err:{}\n", refused_write().0);
        assert_eq!(
            stdout(&out),
            format!("{}30", refused.repeat(4)),
            "{mode}: {}",
            show(&out)
        );
    }
}

#[test]
fn degraded_runs_and_preset_defaults_say_what_does_not_hold() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let holds = cgroups_hold();
    // Named: the call runs; where the limit cannot hold the marker names it.
    let out = sh_with(
        &env,
        "read-only",
        &["--allow-degraded=limit-pids", "--limit-pids", "50"],
        "echo ran",
    );
    assert_status(&out, 0);
    assert_eq!(stdout(&out), "ran");
    let degraded: Vec<_> = stderr_markers(&out)
        .into_iter()
        .filter(|m| m["kind"] == "degraded_enforcement")
        .collect();
    if holds {
        assert!(degraded.is_empty(), "{}", show(&out));
    } else {
        assert_eq!(degraded.len(), 1, "{}", show(&out));
        assert_eq!(degraded[0]["missing"], serde_json::json!(["limit-pids"]));
    }
    // The ci preset's defaults: bound where they hold, one note where they do not.
    let out = sh_with(
        &env,
        "workspace-write",
        &["--preset", "ci"],
        "cat /sys/fs/cgroup/pids$(grep ':pids:' /proc/self/cgroup | cut -d: -f3)/pids.max 2>/dev/null || echo none",
    );
    assert_status(&out, 0);
    let said = stderr(&out);
    let notes: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with("sandgate: note:"))
        .collect();
    if holds {
        assert_eq!(stdout(&out), "4096", "{}", show(&out));
        assert!(notes.is_empty(), "{}", show(&out));
    } else {
        assert_eq!(stdout(&out), "none", "{}", show(&out));
        assert_eq!(notes.len(), 1, "{}", show(&out));
        assert!(
            notes[0].contains("the ci preset's pid limit (4096) cannot hold here")
                && notes[0].contains("the ci preset's memory limit"),
            "{}",
            notes[0]
        );
        assert!(stderr_markers(&out).is_empty(), "{}", show(&out));
    }
    // Full access has no sandbox: the flags are said not to apply, and it runs.
    let out = sh_with(&env, "full-access", &["--limit-pids", "5"], "echo ran");
    assert_status(&out, 0);
    assert!(
        stderr(&out).contains("sandgate: note: --limit-pids not applied: full-access runs the command without a sandbox"),
        "{}",
        show(&out)
    );
}

#[test]
fn the_managed_configuration_caps_a_limit_and_makes_it_required() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    std::fs::write(env.root.join("managed.json"), r#"{"limit_pids": 20}"#).unwrap();
    let pids_max =
        "cat /sys/fs/cgroup/pids$(grep ':pids:' /proc/self/cgroup | cut -d: -f3)/pids.max";
    let out = sh_with(&env, "read-only", &["--limit-pids", "50"], pids_max);
    if !cgroups_hold() {
        assert_limit_refused(
            &out,
            "limit-pids",
            "limit_pids 20 in the managed configuration",
        );
        // Even with no flag at all: the administrator asked for it.
        let out = sh_with(&env, "read-only", &[], "echo ran");
        assert_limit_refused(
            &out,
            "limit-pids",
            "limit_pids 20 in the managed configuration",
        );
        return;
    }
    assert_eq!(stdout(&out), "20", "{}", show(&out));
    assert!(
        stderr(&out).contains(
            "sandgate: note: --limit-pids 50 lowered to 20: the managed configuration caps it"
        ),
        "{}",
        show(&out)
    );
    // A project may go lower still, never higher.
    std::fs::create_dir_all(env.ws.join(".sandgate")).unwrap();
    std::fs::write(
        env.ws.join(".sandgate/config.json"),
        r#"{"limit_pids": 10}"#,
    )
    .unwrap();
    let out = sh_with(&env, "read-only", &[], pids_max);
    assert_eq!(stdout(&out), "10", "{}", show(&out));
    std::fs::write(
        env.ws.join(".sandgate/config.json"),
        r#"{"limit_pids": 4000}"#,
    )
    .unwrap();
    let out = sh_with(&env, "read-only", &[], pids_max);
    assert_eq!(stdout(&out), "20", "{}", show(&out));
    assert!(
        stderr(&out).contains("ignoring `limit_pids`"),
        "{}",
        show(&out)
    );
}

#[test]
fn doctor_tells_the_truth_about_the_cgroup_limits() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let mut cmd = env.command(sandgate());
    cmd.args(["doctor", "--json"]);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(&out)));
    let limits = &report["limits"];
    assert_eq!(limits["tmpfs"]["holds"], true);
    for (name, flag, value) in [
        ("pids", "--limit-pids", "100"),
        ("memory", "--limit-memory", "1G"),
    ] {
        let holds = limits[name]["holds"] == true;
        let out = sh_with(&env, "read-only", &[flag, value], "echo ran");
        assert_eq!(
            out.status.code() == Some(0),
            holds,
            "doctor says {name} holds: {holds}; {}",
            show(&out)
        );
        if holds {
            assert!(limits[name]["mechanism"].is_string(), "{limits}");
            assert!(limits[name]["why"].is_null(), "{limits}");
        } else {
            let why = limits[name]["why"].as_str().unwrap_or_default();
            assert!(!why.is_empty(), "{limits}");
            assert!(
                stderr(&out).contains(why.split(": cannot create").next().unwrap_or(why)),
                "{why}\n{}",
                show(&out)
            );
        }
        assert!(
            limits[name]["default"].is_null(),
            "no preset, no default: {limits}"
        );
    }
    // The ci preset's defaults are reported as the effective ones.
    let mut cmd = env.command(sandgate());
    cmd.args(["doctor", "--json"]).env("SANDGATE_PRESET", "ci");
    let report: serde_json::Value =
        serde_json::from_slice(&output(&mut cmd).stdout).unwrap_or_default();
    let pids = &report["limits"]["pids"]["default"];
    assert_eq!(pids["value"], 4096, "{report}");
    assert_eq!(pids["origin"]["preset"], "ci", "{report}");
    assert_eq!(pids["explicit"], false, "{report}");
}
