//! Shared helpers for the enforcement suite: a fresh workspace and an "outside" directory
//! per test (under `$TMPDIR` or /var/tmp, which no profile makes writable, see
//! [`test_base`]), the sandgate and probe binaries, and `require`, which fails a test whose
//! kernel feature is missing unless `SANDGATE_TEST_ALLOW_MISSING` names it. Nothing here
//! skips silently.

#![allow(dead_code)]

pub mod endpoint;
pub mod registry;
pub mod server;
pub mod webdriver;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The sandgate binary under test.
pub fn sandgate() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sandgate"))
}

/// The probe helper (`examples/probe.rs`), as a copy the sandbox can see.
pub fn probe() -> PathBuf {
    visible_copy(&example("probe"))
}

/// The container harness (`examples/container.rs`): wraps a command in what a default
/// Docker container or a system without user namespaces gives it.
pub fn container() -> PathBuf {
    example("container")
}

/// The example program `name`, as cargo built it beside sandgate.
fn example(name: &str) -> PathBuf {
    let built = sandgate()
        .parent()
        .unwrap_or(Path::new("."))
        .join("examples")
        .join(name);
    assert!(
        built.exists(),
        "{} is missing: build it with `cargo build --examples`",
        built.display()
    );
    built
}

/// The sandgate binary, as a copy the sandbox can see (for nested calls).
pub fn sandgate_inside() -> PathBuf {
    visible_copy(&sandgate())
}

/// Copies a built binary to a directory every profile can read and execute. The build may
/// live under `/tmp` (a CI checkout), which `read-only` replaces with a private, empty one.
fn visible_copy(built: &Path) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    static COPYING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let dir = DIR.get_or_init(|| {
        let dir = test_base().join(format!("sandgate-test-bin-{}", nix::unistd::geteuid()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        dir
    });
    let _one_at_a_time = COPYING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let name = built.file_name().unwrap_or_default();
    let target = dir.join(name);
    let fresh = |t: &Path| {
        let (a, b) = (std::fs::metadata(built), std::fs::metadata(t));
        a.ok()
            .zip(b.ok())
            .is_some_and(|(a, b)| a.len() == b.len() && a.modified().ok() <= b.modified().ok())
    };
    if !fresh(&target) {
        let tmp = dir.join(format!("{}.{}", name.to_string_lossy(), std::process::id()));
        std::fs::copy(built, &tmp).unwrap_or_else(|e| panic!("copy {}: {e}", built.display()));
        std::fs::rename(&tmp, &target).unwrap();
    }
    target
}

/// Where test directories are made: `SANDGATE_TEST_TMP`, else `$TMPDIR`, else `/var/tmp`.
/// Honouring `$TMPDIR` lets the suite prove it does not depend on where it runs (a `.git`
/// above it, a real repository around it). A `$TMPDIR` in the shared temps is passed over:
/// the sandbox replaces `/tmp` and `/dev/shm` with private ones, so a test's "outside"
/// directory there would vanish instead of being refused, and the tests would no longer
/// tell a refusal from a missing file.
pub fn test_base() -> PathBuf {
    if let Some(dir) = std::env::var_os("SANDGATE_TEST_TMP") {
        return PathBuf::from(dir);
    }
    std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .filter(|dir| !["/tmp", "/dev/shm"].iter().any(|t| dir.starts_with(t)))
        .unwrap_or_else(|| PathBuf::from("/var/tmp"))
}

/// A fresh workspace and a sibling directory outside it.
pub struct TestEnv {
    _root: tempfile::TempDir,
    pub root: PathBuf,
    pub ws: PathBuf,
    pub outside: PathBuf,
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let root = tempfile::Builder::new()
            .prefix("sandgate-test-")
            .tempdir_in(test_base())
            .unwrap_or_else(|e| {
                panic!(
                    "cannot create a test directory in {}: {e}",
                    test_base().display()
                )
            });
        let path = std::fs::canonicalize(root.path()).unwrap();
        let ws = path.join("ws");
        let outside = path.join("outside");
        for dir in [&ws, &outside] {
            std::fs::create_dir(dir).unwrap();
        }
        TestEnv {
            _root: root,
            root: path,
            ws,
            outside,
        }
    }

    /// A sandgate command for `mode` in this workspace (cwd = the workspace), with the
    /// inherited SANDGATE_* and TMPDIR variables removed so the host cannot steer it.
    pub fn sandgate(&self, mode: &str) -> Command {
        let mut cmd = self.sandgate_without_workspace(mode);
        cmd.arg("--workspace").arg(&self.ws);
        cmd
    }

    /// Like [`TestEnv::sandgate`], for tests that pick the workspace themselves.
    pub fn sandgate_without_workspace(&self, mode: &str) -> Command {
        let mut cmd = Command::new(sandgate());
        self.isolate(&mut cmd);
        cmd.current_dir(&self.ws).args(["--sandbox", mode]);
        // scripts/test runs the enforcement suite a second time without observation: the
        // same operations must succeed and fail either way.
        if !observing() {
            cmd.arg("--no-observe");
        }
        cmd.args(backend_flags());
        cmd
    }

    /// Runs `program` (a sandgate link, a shell, make) in the workspace, isolated like
    /// [`TestEnv::sandgate`], with the workspace given by `SANDGATE_WORKSPACE`.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(program);
        self.isolate(&mut cmd);
        cmd.current_dir(&self.ws)
            .env("SANDGATE_WORKSPACE", &self.ws);
        cmd
    }

    /// Ends whatever a call kept running in this workspace (`sandgate stop`).
    pub fn stop_kept(&self) {
        let mut stop = Command::new(sandgate());
        self.isolate(&mut stop);
        let _ = output(stop.arg("stop").arg("--workspace").arg(&self.ws));
    }

    /// Clears inherited SANDGATE_*, XDG_*, TMPDIR and CI, so the host cannot steer the
    /// call, and points configuration, the runtime directory and the audit log at this
    /// test's own files.
    pub fn isolate(&self, cmd: &mut Command) {
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            if k.starts_with("SANDGATE_") || k.starts_with("XDG_") || k == "TMPDIR" || k == "CI" {
                cmd.env_remove(&key);
            }
        }
        // A runtime directory of the test's own: no approvals server of the host's is
        // found at the default socket.
        cmd.env("XDG_RUNTIME_DIR", self.root.join("run"))
            .env("SANDGATE_CONFIG_DIR", self.root.join("config"))
            .env("SANDGATE_MANAGED_CONFIG", self.root.join("managed.json"))
            .env("SANDGATE_AUDIT_LOG", self.audit_log());
    }

    /// The audit log sandgate writes in this test.
    pub fn audit_log(&self) -> PathBuf {
        self.root.join("state/audit.jsonl")
    }

    /// The audit log's records.
    pub fn audit_records(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.audit_log())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("audit line {l:?}: {e}")))
            .collect()
    }

    /// Runs `touch ws/ran` under read-only, asking `answerer` (its flags) for
    /// workspace-write within `timeout` seconds: the common shape of the approval tests.
    pub fn ask_for_workspace_write(&self, answerer: &[&str], timeout: &str) -> Output {
        let mut cmd = self.sandgate("read-only");
        cmd.args([
            "--sandbox-permissions",
            "workspace-write",
            "--justification",
            "write a file",
        ]);
        cmd.args(answerer)
            .args(["--approval-timeout", timeout, "--", "touch"])
            .arg(self.ws.join("ran"));
        output(&mut cmd)
    }

    /// Has one sandboxed call plant what an attacker would where a later call's log goes:
    /// `file` (in the workspace) a symlink to a fake `~/.bashrc` outside, and `dir` a
    /// symlink to the outside directory. Returns that `.bashrc`, which holds `keep`.
    pub fn plant_log_links(&self, file: &str, dir: &str) -> PathBuf {
        let bashrc = self.outside.join(".bashrc");
        std::fs::write(&bashrc, "keep\n").unwrap();
        let out = self.sh(
            "workspace-write",
            &format!(
                "ln -s '{}' '{file}' && ln -s '{}' '{dir}'",
                bashrc.display(),
                self.outside.display()
            ),
        );
        assert_status(&out, 0);
        bashrc
    }

    /// Writes a file the host prepares in the workspace (a payload a sandboxed command
    /// uses), its directories made, with `mode`.
    pub fn put(&self, rel: &str, text: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        let path = self.ws.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// Runs `argv` under `mode`.
    pub fn run<S: AsRef<OsStr>>(&self, mode: &str, argv: &[S]) -> Output {
        let mut cmd = self.sandgate(mode);
        cmd.arg("--").args(argv);
        output(&mut cmd)
    }

    /// Runs `argv` under `mode` with a denial log; returns the output and the log's
    /// denial markers (not its notes). stderr shows markers only when the command fails;
    /// the log has them all.
    pub fn run_logged<S: AsRef<OsStr>>(
        &self,
        mode: &str,
        argv: &[S],
    ) -> (Output, Vec<serde_json::Value>) {
        let log = self.root.join("denials.ndjson");
        let _ = std::fs::remove_file(&log);
        let mut cmd = self.sandgate(mode);
        cmd.arg("--denial-log").arg(&log).arg("--").args(argv);
        let out = output(&mut cmd);
        let denials = sandbox_denials(&log);
        (out, denials)
    }

    /// Runs a `/bin/sh -c` script under `mode`.
    pub fn sh(&self, mode: &str, script: &str) -> Output {
        self.run(mode, &["/bin/sh", "-c", script])
    }

    /// Runs the probe under `mode` and returns what it printed (`ok` or `err:ERRNO`).
    pub fn probe<S: AsRef<OsStr>>(&self, mode: &str, args: &[S]) -> String {
        let probe = probe();
        let mut argv: Vec<&OsStr> = vec![probe.as_os_str()];
        argv.extend(args.iter().map(AsRef::as_ref));
        let out = self.run(mode, &argv);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Asserts that the probe operation succeeds under full-access (so the host allows it
    /// and the test can tell) and fails with `errno` under each restricted mode.
    pub fn assert_refused<S: AsRef<OsStr>>(&self, args: &[S], errno: &str) {
        let shown: Vec<_> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            self.probe("full-access", args),
            "ok",
            "control run of {shown:?} under full-access"
        );
        for mode in ["read-only", "workspace-write"] {
            assert_eq!(
                self.probe(mode, args),
                format!("err:{errno}"),
                "{shown:?} under {mode}"
            );
        }
    }
}

/// Makes `dir` a git repository with the host's `git init`. A test that lets sandgate
/// derive the workspace from the current directory needs one where the walk up should stop:
/// the test directory may itself lie inside a repository (`$TMPDIR` in a checkout).
pub fn init_repository(dir: &Path) {
    let out = output(
        Command::new("git")
            .args(["-c", "init.defaultBranch=main", "init", "-q"])
            .arg(dir),
    );
    assert_status(&out, 0);
}

/// The host path of the workspace's private temp, as `sandgate tmp` prints it.
pub fn private_tmp_of(env: &TestEnv) -> PathBuf {
    let mut cmd = Command::new(sandgate());
    env.isolate(&mut cmd);
    let out = output(cmd.arg("tmp").arg("--workspace").arg(&env.ws));
    assert_status(&out, 0);
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The flags that run a call under the backend a re-run of the suites asks for
/// (`SANDGATE_TEST_BACKEND=landlock`).
pub fn backend_flags() -> Vec<&'static str> {
    match std::env::var("SANDGATE_TEST_BACKEND").as_deref() {
        Ok("landlock") => vec!["--backend", "landlock"],
        _ => vec![],
    }
}

/// False when scripts/test re-runs the suite with `--no-observe`: the sandbox is the
/// same, but no markers come.
pub fn observing() -> bool {
    std::env::var_os("SANDGATE_TEST_NO_OBSERVE").is_none()
}

/// Runs a command, returning its output.
pub fn output(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// Describes an output for assertion messages.
pub fn show(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts the exit status of `out`.
#[track_caller]
pub fn assert_status(out: &Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "{}", show(out));
}

/// Asserts that `out` failed (non-zero, and not sandgate's own 125-127/78/64 refusals,
/// which would mean the command never ran).
#[track_caller]
pub fn assert_command_failed(out: &Output) {
    let code = out.status.code();
    assert!(
        code.is_some_and(|c| c != 0 && ![64, 78, 125, 126, 127].contains(&c)),
        "{}",
        show(out)
    );
}

/// Fails the test with every failure an attack test collected, one a line.
#[track_caller]
pub fn assert_none(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Returns true when running as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The links `sandgate install-links` makes (`sandgate-sh`, `sandgate-prefix`), in a
/// directory of this test's, to a copy of sandgate every profile can see.
pub fn install_links(env: &TestEnv) -> PathBuf {
    let dir = env.root.join("bin");
    let out = output(
        Command::new(sandgate_inside())
            .arg("install-links")
            .arg(&dir),
    );
    assert_status(&out, 0);
    dir
}

/// An approver program that grants, once, the request it reads on stdin.
pub const GRANTING_APPROVER: &str = r#"id=$(sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p'); printf '{"id":"%s","decision":"allowed-once"}' "$id""#;

/// The retry argv `marker` offers, with `reason` for the `<why>` placeholder: the value of
/// its `--justification`, and only that (the command may hold the same text).
pub fn retry_argv(marker: &serde_json::Value, reason: &str) -> Vec<String> {
    let argv: Vec<String> = marker["retry"]["argv"]
        .as_array()
        .unwrap_or_else(|| panic!("no retry argv: {marker}"))
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_owned())
        .collect();
    let mut filled = argv.clone();
    for (i, pair) in argv.windows(2).enumerate() {
        if pair[0] == "--justification" && pair[1] == "<why>" {
            filled[i + 1] = reason.to_owned();
            break;
        }
    }
    filled
}

/// The `sandgate: denied` markers sandgate printed on stderr, each parsed (a marker that
/// is not JSON fails the test).
pub fn stderr_markers(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| l.strip_prefix("sandgate: denied "))
        .map(|m| serde_json::from_str(m).unwrap_or_else(|e| panic!("marker {m:?}: {e}")))
        .collect()
}

/// `sandgate` as it runs, but unable to open what a file's mode refuses it: root opens
/// whatever the mode says, so as root it runs without the two capabilities that allow it.
pub fn bound_by_file_modes(sandgate: Command) -> Command {
    if !is_root() {
        return sandgate;
    }
    let mut setpriv = Command::new("setpriv");
    setpriv.arg("--bounding-set=-dac_override,-dac_read_search");
    behind(setpriv, &sandgate)
}

/// `wrapper` (a program and its first arguments) running `sandgate`: its program and
/// arguments appended, its directory and environment changes taken over.
pub fn behind(mut wrapper: Command, sandgate: &Command) -> Command {
    wrapper
        .arg(sandgate.get_program())
        .args(sandgate.get_args());
    if let Some(dir) = sandgate.get_current_dir() {
        wrapper.current_dir(dir);
    }
    for (key, value) in sandgate.get_envs() {
        match value {
            Some(value) => wrapper.env(key, value),
            None => wrapper.env_remove(key),
        };
    }
    wrapper
}

/// `sandgate doctor --json`, run once per test binary.
pub fn doctor() -> &'static serde_json::Value {
    static DOCTOR: OnceLock<serde_json::Value> = OnceLock::new();
    DOCTOR.get_or_init(|| {
        let out = output(Command::new(sandgate()).args(["doctor", "--json"]));
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("doctor --json: {e}\n{}", show(&out)))
    })
}

/// True when restricted calls here run under the landlock backend: the kernel refuses
/// them namespaces (as under the container harness), or `SANDGATE_TEST_BACKEND` asks for
/// it. A test of what only namespaces give asserts that backend's equivalent then.
pub fn landlock_backend() -> bool {
    std::env::var("SANDGATE_TEST_BACKEND").as_deref() == Ok("landlock")
        || doctor()["backend"] == "landlock"
}

/// True when scripts/test runs the suite inside the harness's `docker` kind
/// (`SANDGATE_TEST_CONTAINER=docker`): the supervisor cannot take a caller's descriptor
/// there (`pidfd_getfd` is refused) nor read a non-dumpable caller's memory (no
/// `CAP_SYS_PTRACE`), and the container refuses some calls to everyone.
pub fn docker_harness() -> bool {
    std::env::var("SANDGATE_TEST_CONTAINER").as_deref() == Ok("docker")
}

/// Without a PID namespace (the landlock backend) nothing can be kept: a call asking to
/// keep is refused before anything runs. Returns true when that is so here, having
/// checked it, for a test of keeping to stop at.
pub fn keeping_is_refused(env: &TestEnv) -> bool {
    if !landlock_backend() {
        return false;
    }
    let mark = unique_mark("keep-refused");
    let mut cmd = env.sandgate("workspace-write");
    cmd.env("LEFTOVER_MARK", &mark).args([
        "--keep-background",
        "--",
        "/bin/sh",
        "-c",
        "sleep 1020 & echo started",
    ]);
    let out = output(&mut cmd);
    let left = processes_marked(&mark);
    kill_marked(&mark);
    assert_status(&out, 78);
    assert!(out.stdout.is_empty(), "{}", show(&out));
    assert!(left.is_empty(), "{left:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--keep-background needs a PID namespace"),
        "{}",
        show(&out)
    );
    true
}

/// True when scripts/test runs the suite inside the container harness, of either kind
/// (`SANDGATE_TEST_CONTAINER`): both refuse a user namespace to everyone.
pub fn harnessed() -> bool {
    std::env::var_os("SANDGATE_TEST_CONTAINER").is_some()
}

/// True when the supervisor cannot read the memory of a caller that made itself
/// non-dumpable: without a user namespace of the call's own it needs `CAP_SYS_PTRACE`,
/// which a default container and an unprivileged user do not have.
pub fn supervisor_cannot_read_undumpable() -> bool {
    landlock_backend() && (docker_harness() || !is_root())
}

/// Starts `sandgate` (a call for the workspace) running the probe's `exchange-loop` on
/// `a` and `b` for up to 20 s: a call still running that swaps a directory and a symlink
/// while later calls set up. Kill it when done.
pub fn flipping(mut sandgate: Command, a: &str, b: &str) -> std::process::Child {
    let flipper = sandgate
        .arg("--")
        .arg(probe())
        .args(["exchange-loop", a, b, "20000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    flipper
}

/// How a write outside the writable roots is refused, as the probe names the errno and as
/// `strerror` says it: by a read-only mount, or, without a mount namespace, by landlock.
pub fn refused_write() -> (&'static str, &'static str) {
    match landlock_backend() {
        true => ("EACCES", "Permission denied"),
        false => ("EROFS", "Read-only file system"),
    }
}

/// Fails the test when `feature` is not available, unless `SANDGATE_TEST_ALLOW_MISSING`
/// (comma-separated) names it — then the caller gets `false` and must not assert the
/// enforcement that depends on it.
#[track_caller]
pub fn require(feature: &str, available: bool) -> bool {
    if available {
        return true;
    }
    let allowed = std::env::var("SANDGATE_TEST_ALLOW_MISSING").unwrap_or_default();
    assert!(
        allowed.split(',').any(|f| f.trim() == feature),
        "kernel feature `{feature}` is missing on this host; set SANDGATE_TEST_ALLOW_MISSING={feature} to accept that"
    );
    eprintln!("NOTE: {feature} missing and allowed by SANDGATE_TEST_ALLOW_MISSING");
    false
}

/// Requires every guarantee of the restricted profiles to hold here.
#[track_caller]
pub fn require_full_enforcement() -> bool {
    let d = doctor();
    let ok = d["profiles"]["workspace-write"]["enforceable"] == serde_json::Value::Bool(true)
        && d["profiles"]["read-only"]["enforceable"] == serde_json::Value::Bool(true);
    require("full-enforcement", ok)
}

/// The `sandbox_denial` markers in a denial log.
pub fn sandbox_denials(log: &Path) -> Vec<serde_json::Value> {
    read_markers(log)
        .into_iter()
        .filter(|m| m["kind"] == "sandbox_denial")
        .collect()
}

/// The markers in a denial log (none when it does not exist).
pub fn read_markers(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

/// A token no other process carries, to mark what a test starts (in an environment
/// variable or an argument) and find it again from the host.
pub fn unique_mark(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("sandgate-mark-{what}-{}-{nanos}", std::process::id())
}

/// The host pids of the live processes whose command line or environment holds `mark`,
/// this test process aside: what a call left running, seen from outside its namespaces.
pub fn processes_marked(mark: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let holds = |pid: i32, file: &str| {
        std::fs::read(format!("/proc/{pid}/{file}"))
            .is_ok_and(|bytes| bytes.windows(mark.len()).any(|w| w == mark.as_bytes()))
    };
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me && (holds(*pid, "cmdline") || holds(*pid, "environ")))
        .collect()
}

/// The session of `pid`, if it lives, as `getsid` gives it: 0 for a session whose leader
/// is outside this process's PID namespace (as under a CI runner's), so two processes in
/// such a session still compare equal.
pub fn session_of(pid: i32) -> Option<i32> {
    nix::unistd::getsid(Some(nix::unistd::Pid::from_raw(pid)))
        .ok()
        .map(|p| p.as_raw())
}

/// Kills every process [`processes_marked`] finds: a test's own leftovers, by host pid.
pub fn kill_marked(mark: &str) {
    for pid in processes_marked(mark) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// The host's git in `dir`, as a user runs it after a call: a clean environment, `home` as
/// its `HOME`, no system configuration.
pub fn host_git(home: &Path, dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("LC_ALL", "C")
        .current_dir(dir);
    cmd
}

/// Writes `text` to `dir/file` with `mode`, making its directories.
pub fn put_with_mode(dir: &Path, file: &str, text: &str, mode: u32) -> PathBuf {
    let path = dir.join(file);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, text).unwrap();
    set_mode(&path, mode);
    path
}

/// Sets `path`'s permission bits to `mode`.
pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Runs `sandgate --sandbox MODE -- ARGV...` on a fresh 24x80 pty (stdio and controlling
/// terminal of a `setsid -c` session, as the user's terminal is), then `after` (a shell
/// command line: what the user runs next from the same terminal). Returns what the
/// terminal showed.
pub fn on_pty_then(env: &TestEnv, mode: &str, argv: &[&str], after: &str) -> String {
    let size = nix::pty::Winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).unwrap_or_else(|e| panic!("openpty: {e}"));
    let slave = |fd: &std::os::fd::OwnedFd| std::process::Stdio::from(fd.try_clone().unwrap());
    let script = format!(r#""$@"; {after}"#);
    let mut cmd = Command::new("setsid");
    cmd.arg("-c")
        .args(["/bin/sh", "-c", &script, "sh"])
        .arg(sandgate())
        .args(["--sandbox", mode, "--workspace"])
        .arg(&env.ws)
        .arg("--")
        .args(argv);
    env.isolate(&mut cmd);
    cmd.current_dir(&env.ws)
        .stdin(slave(&pty.slave))
        .stdout(slave(&pty.slave))
        .stderr(slave(&pty.slave));
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    drop(pty.slave);
    let shown = read_pty(std::fs::File::from(pty.master));
    let _ = child.wait();
    shown
}

/// Everything a pty's master reads until every slave fd is closed (then the kernel
/// answers EIO), as text.
pub fn read_pty(mut master: impl std::io::Read) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Waits until `done` holds, polling, for at most `limit`; returns whether it did.
pub fn wait_for(limit: std::time::Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = std::time::Instant::now() + limit;
    while std::time::Instant::now() < until {
        if done() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    done()
}

/// True when a new open of `file` can take an exclusive `flock` at once.
pub fn host_can_lock(file: &Path) -> bool {
    let f = std::fs::File::open(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok()
}

/// Whether a host process can take a record lock (an open file description's, which
/// conflicts with both kinds of record lock) on all of `file` at once.
pub fn host_can_record_lock(file: &Path) -> bool {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let whole = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    nix::fcntl::fcntl(&f, nix::fcntl::FcntlArg::F_OFD_SETLK(&whole)).is_ok()
}
