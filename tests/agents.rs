//! Agent and CI set-ups: sandgate started exactly the way each agent or runner starts its
//! shell — the same argv (and argv[0]), the same kind of stdin, a new session where the
//! agent detaches its commands, a pty where the agent gives one — and shown to allow a
//! write in the workspace, refuse one outside it with a marker, and widen one call (and
//! only that call) through an approver program.
//!
//! The command strings are framed the way each agent frames what its model asked for, so
//! a test fails when that framing hides the first-line directive from sandgate.

// A test crate: its helpers fail as its tests do, by unwrapping (sandgate never does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use support::*;

/// What the command's stdin is, as the agent sets it up.
#[derive(Clone, Copy)]
enum Stdin {
    /// `/dev/null` (Rust's and Go's `Stdio::null`, node's `"ignore"`).
    Null,
    /// A pipe the agent closes at once (the GitHub Actions runner).
    ClosedPipe,
    /// A pipe the agent never writes to and keeps open (node's `"pipe"`).
    OpenPipe,
}

fn run(mut cmd: Command, stdin: Stdin) -> Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    match stdin {
        Stdin::Null => {
            cmd.stdin(Stdio::null());
        }
        Stdin::ClosedPipe | Stdin::OpenPipe => {
            cmd.stdin(Stdio::piped());
        }
    }
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let held = child.stdin.take();
    let held = match stdin {
        Stdin::OpenPipe => held,
        _ => None,
    };
    let out = child.wait_with_output().unwrap();
    drop(held);
    out
}

/// Runs `data` into the command's stdin (the GitLab runner's job script).
fn run_with_stdin(mut cmd: Command, data: &[u8]) -> Output {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    if let Some(mut s) = child.stdin.take() {
        let _ = s.write_all(data);
    }
    child.wait_with_output().unwrap()
}

/// A shell-quoted word, as node's and Python's quoting helpers write it.
fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\"'\"'"))
}

/// One agent set-up: where its links are and how it starts one command string.
struct Agent<'a> {
    env: &'a TestEnv,
    /// Starts the model's command string the agent's way.
    start: &'a dyn Fn(&str) -> Output,
}

impl Agent<'_> {
    /// A write in the workspace succeeds; one outside it is refused with a marker.
    fn allows_the_workspace_and_refuses_outside(&self) {
        let out = (self.start)("echo ok > in-workspace.txt && cat in-workspace.txt");
        assert_status(&out, 0);
        assert_eq!(
            std::fs::read_to_string(self.env.ws.join("in-workspace.txt")).unwrap_or_default(),
            "ok\n",
            "{}",
            show(&out)
        );
        self.refuses_outside();
    }

    /// The retry a marker offers is the model's own command with the directive first, never
    /// the agent's wrapper around it: that is what the model can send again.
    fn refuses_outside(&self) {
        let leak = self.env.outside.join("leak");
        let command = format!("echo x > {}", sq(&leak.to_string_lossy()));
        let out = (self.start)(&command);
        assert_command_failed(&out);
        assert!(!leak.exists(), "{}", show(&out));
        if observing() {
            let all = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let markers: Vec<serde_json::Value> = all
                .lines()
                .filter_map(|l| l.trim_end_matches('\r').strip_prefix("sandgate: denied "))
                .map(|m| serde_json::from_str(m).unwrap_or_else(|e| panic!("{m}: {e}")))
                .collect();
            assert!(!markers.is_empty(), "{}", show(&out));
            for marker in markers {
                let retry = marker["retry"]["directive"].as_str().unwrap_or_default();
                assert!(
                    retry.starts_with("# sandgate: ") && retry.ends_with(&format!("\n{command}")),
                    "{marker}"
                );
            }
        }
    }

    /// The directive on the first line of the model's command widens this one call through
    /// the approver; the next call is confined again.
    fn escalates_once(&self) {
        let granted = self.env.outside.join("granted");
        let command = format!(
            "# sandgate: sandbox_permissions=full-access justification=\"write the report\"\necho granted > {}",
            sq(&granted.to_string_lossy())
        );
        let before = self.env.audit_records().len();
        let out = (self.start)(&command);
        assert_status(&out, 0);
        assert_eq!(
            std::fs::read_to_string(&granted).unwrap_or_default(),
            "granted\n",
            "{}",
            show(&out)
        );
        let records = self.env.audit_records();
        assert_eq!(records.len(), before + 2, "{records:?}");
        assert_eq!(records[before + 1]["outcome"], "allowed-once");
        self.refuses_outside();
    }
}

/// Proves one set-up: a write in the workspace, one outside refused with its marker, and
/// one call widened through the approver, the next confined again.
fn prove(env: &TestEnv, start: &dyn Fn(&str) -> Output) {
    let agent = Agent { env, start };
    agent.allows_the_workspace_and_refuses_outside();
    agent.escalates_once();
}

/// What an agent is pointed at: the links `sandgate install-links` makes, and a link named
/// `bash` in a directory of its own (the name some agents look for).
struct Links {
    sh: PathBuf,
    prefix: PathBuf,
    bash: PathBuf,
}

/// A test environment with its links, or `None` where the kernel cannot enforce every
/// guarantee (and the run allows that).
fn set_up() -> Option<(TestEnv, Links)> {
    if !require_full_enforcement() {
        return None;
    }
    let env = TestEnv::new();
    let dir = install_links(&env);
    let shim = env.root.join("shim");
    std::fs::create_dir(&shim).unwrap();
    std::os::unix::fs::symlink(sandgate_inside(), shim.join("bash")).unwrap();
    let links = Links {
        sh: dir.join("sandgate-sh"),
        prefix: dir.join("sandgate-prefix"),
        bash: shim.join("bash"),
    };
    Some((env, links))
}

/// `program` started by an agent that puts each command in a new session (node's
/// `detached: true`, Codex's `setsid`): no controlling terminal.
fn detached(env: &TestEnv, program: &Path) -> Command {
    let mut cmd = env.command("setsid");
    cmd.arg("--wait").arg(program);
    cmd.env("SANDGATE_APPROVER", GRANTING_APPROVER);
    cmd
}

/// `program` started in the agent's own session.
fn attached(env: &TestEnv, program: &Path) -> Command {
    let mut cmd = env.command(program);
    cmd.env("SANDGATE_APPROVER", GRANTING_APPROVER);
    cmd
}

/// Where Claude Code has the shell leave its working directory: a fresh name in `/tmp` per
/// session (per test here, so that runs as different users never share one).
fn claude_cwd_file(env: &TestEnv) -> String {
    let id = env.root.file_name().unwrap_or_default().to_string_lossy();
    format!("/tmp/claude-{id}-cwd")
}

/// [`prove`] for Claude Code, whose model command arrives inside `… && eval '<command>' …`
/// (the directive on that command's first line is found there). The granted call ran
/// unconfined, so its working-directory file is in the host's /tmp: removed afterwards.
fn prove_claude(env: &TestEnv, start: &dyn Fn(&str) -> Output) {
    prove(env, start);
    let cwd_file = claude_cwd_file(env);
    assert!(Path::new(&cwd_file).exists(), "{cwd_file}");
    let _ = std::fs::remove_file(cwd_file);
}

/// Claude Code with `CLAUDE_CODE_SHELL_PREFIX=/path/to/sandgate-prefix`: its own bash runs
/// `-c -l '<prefix> <the whole command line, quoted>'`, and that command line wraps the
/// model's command in `eval`.
fn claude_prefix_line(env: &TestEnv, prefix: &Path, command: &str) -> String {
    let whole = format!(
        "{{ shopt -u extglob || setopt NO_EXTENDED_GLOB NO_BARE_GLOB_QUAL; }} >/dev/null 2>&1 || true && eval {} < /dev/null && pwd -P >| {}",
        sq(command),
        claude_cwd_file(env)
    );
    format!("{} {}", prefix.display(), sq(&whole))
}

/// Claude Code with `CLAUDE_CODE_SHELL=/path/to/bash` (a link named `bash`): the link runs
/// `-c -l '<the command line>'`.
fn claude_shell_line(env: &TestEnv, command: &str) -> String {
    format!(
        "shopt -u extglob 2>/dev/null || true && eval {} < /dev/null && pwd -P >| {}",
        sq(command),
        claude_cwd_file(env)
    )
}

#[test]
fn claude_code_shell_prefix() {
    let Some((env, links)) = set_up() else {
        return;
    };
    let prefix = &links.prefix;
    let start = |command: &str| {
        let mut cmd = detached(&env, Path::new("/bin/bash"));
        cmd.env("CLAUDE_CODE_SHELL_PREFIX", prefix)
            .env("CLAUDECODE", "1")
            .env("GIT_EDITOR", "true")
            .env("SHELL", "/bin/bash")
            .args(["-c", "-l", &claude_prefix_line(&env, prefix, command)]);
        run(cmd, Stdin::OpenPipe)
    };
    prove_claude(&env, &start);
}

#[test]
fn claude_code_shell() {
    let Some((env, links)) = set_up() else {
        return;
    };
    let start = |command: &str| {
        let mut cmd = detached(&env, &links.bash);
        cmd.env("CLAUDE_CODE_SHELL", &links.bash)
            .env("CLAUDECODE", "1")
            .env("GIT_EDITOR", "true")
            .env("SHELL", &links.bash)
            .args(["-c", "-l", &claude_shell_line(&env, command)]);
        run(cmd, Stdin::OpenPipe)
    };
    prove_claude(&env, &start);
}

/// Codex runs the login shell named by the user's passwd entry, by that absolute path, as
/// `<shell> -lc <command>` with stdin on /dev/null in a new session. With a link named
/// `bash` as the login shell, that is sandgate.
#[test]
fn codex_login_shell() {
    let Some((env, links)) = set_up() else {
        return;
    };
    let start = |command: &str| {
        let mut cmd = detached(&env, &links.bash);
        cmd.args(["-lc", command]);
        run(cmd, Stdin::Null)
    };
    prove(&env, &start);
}

/// Gemini CLI resolves `bash` on PATH and runs `<that path> -c 'shopt -u …; <command>'`
/// with stdin on /dev/null in a new session (no pty: the interactive-shell setting off).
/// The directive on the model's first line is found after that guard.
fn gemini_line(command: &str) -> String {
    format!("shopt -u promptvars nullglob extglob nocaseglob dotglob; {command}")
}

#[test]
fn gemini_cli_bash_on_path() {
    let Some((env, links)) = set_up() else {
        return;
    };
    let start = |command: &str| {
        let mut cmd = detached(&env, &links.bash);
        cmd.env("GEMINI_CLI", "1")
            .env("TERM", "xterm-256color")
            .env("PAGER", "cat")
            .env("GIT_PAGER", "cat")
            .args(["-c", &gemini_line(command)]);
        run(cmd, Stdin::Null)
    };
    prove(&env, &start);
}

/// OpenCode with `"shell": "/path/to/sandgate-sh"` in opencode.json: node's `shell` option,
/// `<shell> -c <command>`, stdin ignored, in a new session.
#[test]
fn opencode_shell_setting() {
    let Some((env, links)) = set_up() else {
        return;
    };
    let sh = &links.sh;
    let start = |command: &str| {
        let mut cmd = detached(&env, sh);
        cmd.args(["-c", command]);
        run(cmd, Stdin::Null)
    };
    prove(&env, &start);
}

/// Aider, on a terminal, spawns `$SHELL -i -c <command>` on a pty of its own (pexpect).
/// `script` gives the same: a new session whose controlling terminal is a fresh pty.
#[test]
fn aider_shell_on_a_pty() {
    let Some((env, links)) = set_up() else {
        return;
    };
    let sh = &links.sh;
    let start = |command: &str| {
        let inner = format!(
            "exec env SHELL={} {} -i -c {}",
            sq(&sh.to_string_lossy()),
            sq(&sh.to_string_lossy()),
            sq(command)
        );
        let mut cmd = attached(&env, Path::new("script"));
        cmd.env("SHELL", "/bin/sh")
            .args(["-qec", &inner, "/dev/null"]);
        run(cmd, Stdin::Null)
    };
    prove(&env, &start);
}

/// Goose with `GOOSE_SHELL=/path/to/sandgate-sh`: `<shell> -c <command>` with stdin on
/// /dev/null, in Goose's own session; first, once, `<shell> -l -i -c 'echo $PATH'` to learn
/// the login PATH.
#[test]
fn goose_shell_variable() {
    let Some((env, links)) = set_up() else {
        return;
    };
    let sh = &links.sh;
    let probe = run(
        {
            let mut cmd = detached(&env, sh);
            cmd.args(["-l", "-i", "-c", "echo $PATH"]);
            cmd
        },
        Stdin::Null,
    );
    assert_status(&probe, 0);
    let path = String::from_utf8_lossy(&probe.stdout)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim()
        .to_owned();
    assert!(path.contains("/bin"), "{}", show(&probe));
    let start = |command: &str| {
        let mut cmd = attached(&env, sh);
        cmd.env("GOOSE_SHELL", sh)
            .env("PATH", &path)
            .env("AGENT_SESSION_ID", "20260101_1")
            .args(["-c", command]);
        run(cmd, Stdin::Null)
    };
    prove(&env, &start);
}

/// A GitHub Actions step with a custom `shell:`: the runner finds the first word on PATH,
/// replaces `{0}` with the step's script (written to the runner's temp directory, outside
/// the checkout), and closes stdin at once.
fn github_step(env: &TestEnv, shell_args: &[&str], script: &str, extra: &[(&str, &str)]) -> Output {
    let temp = env.root.join("_temp");
    std::fs::create_dir_all(&temp).unwrap();
    let file = temp.join("7c9e6679-7425-40de-944b-e07fc1f90ae7");
    std::fs::write(&file, script).unwrap();
    let mut cmd = Command::new(sandgate_inside());
    env.isolate(&mut cmd);
    cmd.current_dir(&env.ws)
        .env("CI", "true")
        .env("GITHUB_ACTIONS", "true")
        .env("RUNNER_TEMP", &temp);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    for arg in shell_args {
        if *arg == "{0}" {
            cmd.arg(&file);
        } else {
            cmd.arg(arg);
        }
    }
    run(cmd, Stdin::ClosedPipe)
}

#[test]
fn github_actions_custom_shell() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    init_repository(&env.ws);
    let leak = env.outside.join("leak");
    // `shell: sandgate --preset ci -e {0}`
    let ci = ["--preset", "ci", "-e", "{0}"];
    let out = github_step(
        &env,
        &ci,
        "echo building > artifact.txt\nfalse\necho unreachable\n",
        &[],
    );
    assert_status(&out, 1);
    assert!(env.ws.join("artifact.txt").exists(), "{}", show(&out));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("unreachable"));
    let out = github_step(
        &env,
        &ci,
        &format!("echo x > {}\n", sq(&leak.to_string_lossy())),
        &[],
    );
    assert_command_failed(&out);
    assert!(!leak.exists());
    if observing() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("sandgate: denied {"), "{}", show(&out));
        // Under `ci` nobody can answer, so no marker offers a retry.
        assert!(stderr.contains("\"retry\":null"), "{}", show(&out));
    }
    // `shell: sandgate --preset ci -- bash -e {0}` runs the same script the same way.
    let out = github_step(
        &env,
        &["--preset", "ci", "--", "bash", "-e", "{0}"],
        "echo direct > direct.txt\n",
        &[],
    );
    assert_status(&out, 0);
    assert!(env.ws.join("direct.txt").exists(), "{}", show(&out));
    // With an approver in the job's environment (`env: SANDGATE_APPROVER: …`) and the
    // default workspace-write preset, a step whose script starts with the directive is
    // widened for that step alone.
    let granted = env.outside.join("granted");
    let script = format!(
        "# sandgate: sandbox_permissions=full-access justification=\"publish\"\necho granted > {}\n",
        sq(&granted.to_string_lossy())
    );
    let with_approver = [("SANDGATE_APPROVER", GRANTING_APPROVER)];
    let out = github_step(&env, &["-e", "{0}"], &script, &with_approver);
    assert_status(&out, 0);
    assert!(granted.exists(), "{}", show(&out));
    assert_eq!(
        env.audit_records()
            .last()
            .map(|r| r["outcome"].clone())
            .unwrap_or_default(),
        "allowed-once"
    );
    let out = github_step(
        &env,
        &["-e", "{0}"],
        &format!("echo x > {}\n", sq(&leak.to_string_lossy())),
        &with_approver,
    );
    assert_command_failed(&out);
    assert!(!leak.exists());
}

/// The GitLab Runner's shell executor: `bash -l` found on the runner's PATH, the generated
/// job script on stdin (it starts with a `#!/usr/bin/env bash` line and a blank line, and
/// runs the job's lines in a subshell), the runner's own environment.
fn gitlab_job(lines: &str) -> String {
    format!(
        "#!/usr/bin/env bash\n\ntrap exit 1 TERM\n\n\
         case \"$(set -o)\" in *\"pipefail\"*) set -o pipefail;; esac; set -o errexit\n\
         set +o noclobber\n\
         : | (eval $'export CI=true\\nexport GITLAB_CI=true\\n{}\\n') < /dev/null\n\
         exit 0\n",
        lines.replace('\'', "\\'").replace('\n', "\\n")
    )
}

fn gitlab_runner(env: &TestEnv, shim: &Path, script: &str) -> Output {
    let path = format!(
        "{}:{}",
        shim.parent().unwrap_or(Path::new("/")).display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    env.isolate(&mut cmd);
    cmd.current_dir(&env.ws)
        .env("PATH", path)
        .env("SANDGATE_PRESET", "ci")
        .arg("-l");
    run_with_stdin(cmd, script.as_bytes())
}

#[test]
fn gitlab_runner_shell_executor() {
    let Some((env, links)) = set_up() else {
        return;
    };
    init_repository(&env.ws);
    let out = gitlab_runner(
        &env,
        &links.bash,
        &gitlab_job("echo gitlab > gl.txt\necho done"),
    );
    assert_status(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "done\n",
        "{}",
        show(&out)
    );
    assert!(env.ws.join("gl.txt").exists());
    let leak = env.outside.join("leak");
    let out = gitlab_runner(
        &env,
        &links.bash,
        &gitlab_job(&format!("echo x > {}", leak.display())),
    );
    assert_command_failed(&out);
    assert!(!leak.exists());
    if observing() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("sandgate: denied {"), "{}", show(&out));
        assert!(stderr.contains("\"retry\":null"), "{}", show(&out));
    }
}

/// The runner writes its own first lines, so a job's directive never heads the script and
/// a job confined through the `bash` link cannot widen a call: the line is a comment in
/// the body. A job that must widen one step runs the runner's real bash and calls sandgate
/// for each step itself, with the approver in the runner's environment (where the job's
/// author cannot set it).
#[test]
fn gitlab_runner_escalation() {
    let Some((env, links)) = set_up() else {
        return;
    };
    init_repository(&env.ws);
    let granted = env.outside.join("granted");
    let directive = "# sandgate: sandbox_permissions=full-access justification=\"publish\"";
    let lines = format!("{directive}\necho granted > {}", granted.display());
    let out = gitlab_runner(&env, &links.bash, &gitlab_job(&lines));
    assert_command_failed(&out);
    assert!(!granted.exists(), "{}", show(&out));

    // The real bash, each step through sandgate (by its path: a login shell sets PATH
    // afresh), the approver from the runner's environment.
    let sandgate = sandgate_inside();
    let step = |widen: bool, target: &Path| {
        let ask = if widen {
            "--sandbox-permissions full-access --justification publish "
        } else {
            ""
        };
        format!(
            "{} {ask}-- sh -c {}",
            sandgate.display(),
            sq(&format!("echo granted > {}", sq(&target.to_string_lossy())))
        )
    };
    let mut cmd = Command::new("bash");
    env.isolate(&mut cmd);
    cmd.current_dir(&env.ws)
        .env("SANDGATE_WORKSPACE", &env.ws)
        .env("SANDGATE_APPROVER", GRANTING_APPROVER)
        .arg("-l");
    let before = env.audit_records().len();
    let script = gitlab_job(&format!(
        "{}\n{}",
        step(true, &granted),
        step(false, &env.outside.join("again"))
    ));
    let out = run_with_stdin(cmd, script.as_bytes());
    // The widened step wrote; the next step, confined again, was refused and failed the job.
    assert_command_failed(&out);
    assert_eq!(
        std::fs::read_to_string(&granted).unwrap_or_default(),
        "granted\n",
        "{}",
        show(&out)
    );
    assert!(!env.outside.join("again").exists(), "{}", show(&out));
    let records = env.audit_records();
    assert_eq!(records.len(), before + 2, "{records:?}");
    assert_eq!(records[before + 1]["outcome"], "allowed-once");
}
