//! Shell mode: sandgate as a drop-in `bash` for agents, CI and make.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use support::endpoint::{Reply, TestEndpoint};
use support::*;

/// Exit status as a shell reports it: the code, or 128+N for death by signal N.
fn status(out: &Output) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    out.status
        .code()
        .unwrap_or_else(|| 128 + out.status.signal().unwrap_or(0))
}

fn run_with_stdin(mut cmd: Command, stdin: &[u8]) -> Output {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{e}"));
    if let Some(mut s) = child.stdin.take() {
        let _ = s.write_all(stdin);
    }
    child.wait_with_output().unwrap_or_else(|e| panic!("{e}"))
}

/// The links `sandgate install-links` makes, in a directory every profile can see.
fn links(env: &TestEnv) -> PathBuf {
    let dir = env.root.join("bin");
    let out = output(
        Command::new(sandgate_inside())
            .arg("install-links")
            .arg(&dir),
    );
    assert_status(&out, 0);
    dir
}

const SNIPPETS: &[&str] = &[
    "echo hello",
    "printf '%s\\n' a b c",
    "exit 3",
    "exit 0",
    "false",
    "true && echo yes || echo no",
    "false || echo recovered",
    "set -e; false; echo unreachable",
    "set -e; (exit 4); echo no",
    "set -u; echo $SANDGATE_UNDEFINED_VARIABLE",
    "set -o pipefail; false | true; echo $?",
    "echo a | tr a b",
    "seq 1 10 | awk '{s+=$1} END {print s}'",
    "for i in 1 2 3; do echo $i; done",
    "i=0; while [ $i -lt 3 ]; do i=$((i+1)); done; echo $i",
    "case x in x) echo match;; esac",
    "f() { echo \"fn $1\"; return 7; }; f arg; echo $?",
    "trap 'echo trapped' EXIT; echo body",
    "trap 'echo int; exit 9' INT; kill -INT $$; sleep 1",
    "(echo sub; exit 2); echo \"sub=$?\"",
    "{ echo group; }",
    "cat <<EOF\nheredoc $1\nEOF",
    "cat <<'EOF'\nliteral $1\nEOF",
    "echo \"$0 $1 $2\"",
    "echo \"$#\"",
    "shift; echo \"$@\"",
    "read line; echo \"got $line\"",
    "cat | wc -l",
    "exec echo replaced",
    "sleep 0.1 & wait $!; echo \"bg=$?\"",
    "(exit 5) & wait $!; echo \"bg=$?\"",
    "kill -TERM $$",
    "kill -INT $$",
    "kill -KILL $$",
    "echo err >&2; echo out",
    "ls /nonexistent-sandgate-path",
    "nosuchcommand-sandgate-xyz",
    "echo \"unterminated",
    "x=$(echo inner); echo \"x=$x\"",
    "echo $((6*7))",
    "arr=(a b c); echo ${#arr[@]}",
    "[[ abc == a* ]] && echo glob",
    "umask",
    "pwd",
    "set -x; echo traced",
    "true | false; echo ${PIPESTATUS[@]}",
    "echo a > out.txt; cat out.txt; rm out.txt",
    "mkdir -p d/e && touch d/e/f && ls d/e && rm -r d",
];

#[test]
fn snippets_behave_exactly_as_under_bash() {
    assert!(SNIPPETS.len() >= 40);
    let env = TestEnv::new();
    let modes: &[&str] = if require_full_enforcement() {
        &["full-access", "workspace-write"]
    } else {
        &["full-access"]
    };
    for snippet in SNIPPETS {
        let mut bash = Command::new("bash");
        bash.current_dir(&env.ws)
            .args(["-c", snippet, "zero", "one", "two"]);
        let want = run_with_stdin(bash, b"first line\nsecond line\n");
        for mode in modes {
            let mut sg = env.sandgate(mode);
            sg.args(["-c", snippet, "zero", "one", "two"]);
            let got = run_with_stdin(sg, b"first line\nsecond line\n");
            let what = format!("{snippet:?} under {mode}");
            assert_eq!(
                String::from_utf8_lossy(&got.stdout),
                String::from_utf8_lossy(&want.stdout),
                "stdout of {what}"
            );
            assert_eq!(
                String::from_utf8_lossy(&got.stderr),
                String::from_utf8_lossy(&want.stderr),
                "stderr of {what}"
            );
            assert_eq!(status(&got), status(&want), "status of {what}");
        }
    }
}

#[test]
fn option_forms_behave_as_bash() {
    let env = TestEnv::new();
    let script = env.ws.join("script.sh");
    std::fs::write(&script, "echo \"script $0 $1\"; exit 4\n").unwrap_or_else(|e| panic!("{e}"));
    let s = script.to_string_lossy().into_owned();
    let forms: Vec<Vec<&str>> = vec![
        vec!["-lc", "echo login $0", "name"],
        vec!["-c", "echo after-l", "-l"],
        vec!["-l", "-c", "echo l-first"],
        vec!["-euo", "pipefail", "-c", "false | true; echo unreachable"],
        vec!["-e", "-c", "false; echo no"],
        vec!["+o", "errexit", "-c", "false; echo yes"],
        vec!["--norc", "--noprofile", "-c", "echo plain"],
        vec!["-x", "-c", "echo x"],
        vec![&s, "arg1"],
        vec!["-s", "arg1"],
    ];
    for form in forms {
        let mut bash = Command::new("bash");
        bash.current_dir(&env.ws).args(&form);
        let want = run_with_stdin(bash, b"echo \"stdin $1\"\nexit 6\n");
        let mut sg = env.sandgate("workspace-write");
        sg.args(&form);
        let got = run_with_stdin(sg, b"echo \"stdin $1\"\nexit 6\n");
        assert_eq!(
            String::from_utf8_lossy(&got.stdout),
            String::from_utf8_lossy(&want.stdout),
            "{form:?}: {}",
            show(&got)
        );
        assert_eq!(status(&got), status(&want), "{form:?}: {}", show(&got));
    }
    // A script on stdin with no command at all (GitLab's form).
    let got = run_with_stdin(env.sandgate("workspace-write"), b"echo piped\nexit 2\n");
    assert_eq!((got.stdout.as_slice(), status(&got)), (&b"piped\n"[..], 2));
    // Through the shell link every argument is the shell's: `--` ends bash's options (for
    // plain `sandgate`, `--` introduces a command to execute directly).
    let sh = links(&env).join("sandgate-sh");
    let got = output(env.command(&sh).args(["--", &s, "dash"]));
    let want = output(
        Command::new("bash")
            .current_dir(&env.ws)
            .args(["--", &s, "dash"]),
    );
    assert_eq!((&got.stdout, status(&got)), (&want.stdout, status(&want)));
    // --version through the shell link is the real shell's.
    let got = output(Command::new(&sh).arg("--version"));
    let want = output(Command::new("bash").arg("--version"));
    assert_eq!(got.stdout, want.stdout);
}

#[test]
fn github_actions_and_gitlab_ci_forms() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let step = env.ws.join("step.sh");
    std::fs::write(
        &step,
        "echo building > artifact.txt\nfalse\necho unreachable\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Both run in a checkout: the workspace is its top level, whatever lies around it.
    init_repository(&env.ws);
    // GitHub Actions: `shell: sandgate --preset ci -- bash -e {0}`
    let mut cmd = env.sandgate_without_workspace("workspace-write");
    cmd.env("CI", "true")
        .args(["--preset", "ci", "--", "bash", "-e"])
        .arg(&step);
    let out = output(&mut cmd);
    assert_status(&out, 1);
    assert!(env.ws.join("artifact.txt").exists());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("unreachable"));
    // GitLab: the job script on stdin of `sandgate --preset ci -s`; no prompt is possible.
    let mut cmd = env.sandgate_without_workspace("workspace-write");
    cmd.env("CI", "true").args(["--preset", "ci", "-s"]);
    let out = run_with_stdin(
        cmd,
        b"echo gitlab > gl.txt\ntouch /etc/sandgate-ci-escape\necho done\n",
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    assert!(env.ws.join("gl.txt").exists());
    assert!(!Path::new("/etc/sandgate-ci-escape").exists());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("\"op\":\"create\""),
        "{}",
        show(&out)
    );
}

#[test]
fn make_with_sandgate_sh_as_shell() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let sh = links(&env).join("sandgate-sh");
    let outside = env.outside.join("leak");
    std::fs::write(
        env.ws.join("Makefile"),
        format!(
            "all: out.txt\nout.txt:\n\techo built > out.txt\nleak:\n\techo x > {}\n",
            outside.display()
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let shell = format!("SHELL={}", sh.display());
    let out = output(env.command("make").args([&shell, "all"]));
    assert_status(&out, 0);
    assert_eq!(
        std::fs::read_to_string(env.ws.join("out.txt")).unwrap_or_default(),
        "built\n"
    );
    let out = output(env.command("make").args([&shell, "leak"]));
    assert!(!out.status.success());
    assert!(!outside.exists());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("sandgate: denied {"),
        "{}",
        show(&out)
    );
}

#[test]
fn a_directive_is_the_same_request_as_the_flags() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let ep = TestEndpoint::http(|r, _| Reply::decision(r, "allowed-once"));
    let target = env.outside.join("granted");
    let script = format!(
        "# sandgate: sandbox_permissions=full-access justification=\"write outside\"\necho ok > '{}'",
        target.display()
    );
    let mut cmd = env.sandgate("workspace-write");
    cmd.args(["--approval-endpoint", &ep.url, "-c", &script]);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    assert!(target.exists(), "{}", show(&out));
    let req = &ep.requests()[0];
    assert_eq!(req["requested"]["mode"], "full-access");
    assert_eq!(req["requested"]["justification"], "write outside");
    // Same or narrower: 64 before anyone is asked.
    for mode in ["workspace-write", "read-only"] {
        let mut cmd = env.sandgate("workspace-write");
        cmd.args(["--approval-endpoint", &ep.url, "-c"])
            .arg(format!(
                "# sandgate: sandbox_permissions={mode} justification=\"x\"\ntrue"
            ));
        assert_status(&output(&mut cmd), 64);
    }
    let mut cmd = env.sandgate("workspace-write");
    cmd.args(["-c", "# sandgate: gimme root\ntrue"]);
    assert_status(&output(&mut cmd), 64);
    assert_eq!(ep.requests().len(), 1);
}

#[test]
fn a_refused_write_in_shell_mode_retries_as_a_directive() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let sh = links(&env).join("sandgate-sh");
    let target = env.outside.join("report");
    let command = format!("echo data > '{}'", target.display());
    let log = env.root.join("denials.ndjson");
    let out = output(
        env.command(&sh)
            .env("SANDGATE_DENIAL_LOG", &log)
            .args(["-c", &command]),
    );
    assert_ne!(status(&out), 0);
    let marker: serde_json::Value = std::fs::read_to_string(&log)
        .ok()
        .and_then(|t| t.lines().next().and_then(|l| serde_json::from_str(l).ok()))
        .unwrap_or_else(|| panic!("no marker: {}", show(&out)));
    let directive = marker["retry"]["directive"]
        .as_str()
        .unwrap_or_default()
        .replace("<why>", "write the report");
    assert!(
        directive.starts_with(
            "# sandgate: sandbox_permissions=full-access justification=\"write the report\"\n"
        ),
        "{directive}"
    );
    let ep = TestEndpoint::http(|r, _| Reply::decision(r, "allowed-once"));
    let mut retry = env.command(&sh);
    retry.env("SANDGATE_APPROVAL_ENDPOINT", &ep.url);
    let out = output(retry.args(["-c", &directive]));
    assert_status(&out, 0);
    assert_eq!(
        std::fs::read_to_string(&target).unwrap_or_default(),
        "data\n"
    );
}

#[test]
fn shell_set_to_sandgate_sh_does_not_loop_and_stays_confined() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let sh = links(&env).join("sandgate-sh");
    let outside = env.outside.join("nested");
    let mut cmd = env.command(&sh);
    cmd.env("SHELL", &sh).env("SANDGATE_REAL_SHELL", &sh);
    cmd.args(["-c"]).arg(format!(
        "\"$SHELL\" -c 'echo inner > inner.txt; echo x > {}'; echo outer-done",
        outside.display()
    ));
    let out = output(&mut cmd);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("outer-done"),
        "{}",
        show(&out)
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("inner.txt")).unwrap_or_default(),
        "inner\n"
    );
    assert!(!outside.exists());
}
