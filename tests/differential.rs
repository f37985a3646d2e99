//! The shell differential: for every snippet S, `bash -c S` and sandgate in shell mode
//! (`sandgate -c S`) must agree on stdout, stderr and the wait status — the exit code, or
//! the signal the process died of. A caller cannot tell sandgate from bash by any of them.

// A test crate: its helpers fail as its tests do, by unwrapping (sandgate never does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};

use support::*;

const SNIPPETS: &[&str] = &[
    // Exit codes.
    "exit 0",
    "exit 1",
    "exit 2",
    "exit 3",
    "exit 126",
    "exit 127",
    "exit 255",
    "exit 256",
    "false",
    "bash -c 'exit 300'; echo $?",
    // Output on both streams.
    "echo hello",
    "printf '%s\\n' a b c",
    "printf 'no newline'",
    "echo err >&2; echo out",
    "echo out; echo err >&2; exit 4",
    "ls /nonexistent-sandgate-path",
    "nosuchcommand-sandgate-xyz",
    "echo \"unterminated",
    "set -x; echo traced",
    "set -u; echo $SANDGATE_UNDEFINED_VARIABLE",
    "exec 1>&-; echo lost",
    "echo in; exec 2>&-; ls /nonexistent-sandgate-path; echo \"ls=$?\"",
    // Control flow, pipelines, subshells.
    "true && echo yes || echo no",
    "false || echo recovered",
    "set -e; false; echo unreachable",
    "set -e; (exit 4); echo no",
    "set -o pipefail; false | true; echo $?",
    "true | false; echo ${PIPESTATUS[@]}",
    "echo a | tr a b",
    "seq 1 10 | awk '{s+=$1} END {print s}'",
    "yes | head -3",
    "for i in 1 2 3; do echo $i; done",
    "i=0; while [ $i -lt 3 ]; do i=$((i+1)); done; echo $i",
    "case x in x) echo match;; esac",
    "f() { echo \"fn $1\"; return 7; }; f arg; echo $?",
    "(echo sub; exit 2); echo \"sub=$?\"",
    "{ echo group; }",
    "x=$(echo inner); echo \"x=$x\"",
    "echo $((6*7))",
    "arr=(a b c); echo ${#arr[@]}",
    "[[ abc == a* ]] && echo glob",
    "cat <<EOF\nheredoc $1\nEOF",
    "cat <<'EOF'\nliteral $1\nEOF",
    // Arguments and stdin.
    "echo \"$0 $1 $2\"",
    "echo \"$#\"",
    "shift; echo \"$@\"",
    "read line; echo \"got $line\"",
    "cat | wc -l",
    "exec echo replaced",
    // The environment a command sees.
    "umask",
    "pwd",
    "echo a > out.txt; cat out.txt; rm out.txt",
    "mkdir -p d/e && touch d/e/f && ls d/e && rm -r d",
    // Background jobs.
    "sleep 0.1 & wait $!; echo \"bg=$?\"",
    "(exit 5) & wait $!; echo \"bg=$?\"",
    "sleep 5 & kill -TERM $!; wait $!; echo \"st=$?\"",
    // Signals: the shell's own death, and a child's as the shell reports it.
    "kill -TERM $$",
    "kill -INT $$",
    "kill -KILL $$",
    "kill -HUP $$",
    "kill -QUIT $$",
    "kill -USR1 $$",
    "kill -PIPE $$",
    "echo before; kill -TERM $$; echo after",
    "(kill -TERM $$); echo unreachable",
    "exec kill -TERM $$",
    "sh -c 'kill -TERM $$'; echo $?",
    "sh -c 'kill -INT $$'; echo $?",
    // (bash reports these two with the child's pid, which differs from run to run.)
    "{ sh -c 'kill -KILL $$'; } 2>/dev/null; echo $?",
    "{ sh -c 'kill -SEGV $$'; } 2>/dev/null; echo $?",
    // Traps.
    "trap 'echo trapped' EXIT; echo body",
    "trap 'echo int; exit 9' INT; kill -INT $$; sleep 1",
    "trap 'echo term; exit 3' TERM; kill -TERM $$",
    "trap '' TERM; kill -TERM $$; echo survived",
    "trap 'echo exiting' EXIT; kill -TERM $$",
];

/// Snippets also run with stdin closed (not empty: no fd 0 at all).
const WITHOUT_STDIN: &[&str] = &[
    "read line; echo \"read=$?\"",
    "cat; echo \"cat=$?\"",
    "echo hello",
    "exit 3",
    "kill -TERM $$",
    "ls /proc/self/fd/0 2>&1 | wc -l",
];

/// What a caller can observe of a finished process.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    stdout: String,
    stderr: String,
    /// The exit code, or `None` when the process died of a signal.
    code: Option<i32>,
    signal: Option<i32>,
}

impl From<Output> for Seen {
    fn from(out: Output) -> Seen {
        Seen {
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            code: out.status.code(),
            signal: out.status.signal(),
        }
    }
}

const INPUT: &[u8] = b"first line\nsecond line\n";

/// Runs `program args` in the workspace with two lines on stdin, or with stdin closed.
fn run(env: &TestEnv, program: &str, args: &[&str], stdin: bool) -> Seen {
    let mut cmd = if stdin {
        let mut cmd = Command::new(program);
        cmd.args(args).stdin(Stdio::piped());
        cmd
    } else {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "exec 0<&-; exec \"$@\"", "sh", program])
            .args(args);
        cmd
    };
    env.isolate(&mut cmd);
    cmd.current_dir(&env.ws)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(INPUT);
    }
    child.wait_with_output().unwrap().into()
}

/// Compares `bash -c S` with `sandgate --sandbox MODE -c S` for every snippet.
fn compare(snippets: &[&str], stdin: bool) {
    let env = TestEnv::new();
    let modes: &[&str] = if require_full_enforcement() {
        &["full-access", "workspace-write"]
    } else {
        &["full-access"]
    };
    let sandgate = sandgate();
    let sandgate = sandgate.to_string_lossy();
    let ws = env.ws.to_string_lossy().into_owned();
    let mut differences = Vec::new();
    for snippet in snippets {
        let args = ["-c", snippet, "zero", "one", "two"];
        let want = run(&env, "bash", &args, stdin);
        for mode in modes {
            let mut with_mode = vec!["--sandbox", mode, "--workspace", &ws];
            with_mode.extend(args);
            let got = run(&env, &sandgate, &with_mode, stdin);
            if got != want {
                differences.push(format!(
                    "{snippet:?} under {mode} (stdin {}):\n  bash:     {want:?}\n  sandgate: {got:?}",
                    if stdin { "open" } else { "closed" }
                ));
            }
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

#[test]
fn snippets_behave_exactly_as_under_bash() {
    assert!(SNIPPETS.len() >= 50, "the differential needs 50 snippets");
    compare(SNIPPETS, true);
}

#[test]
fn snippets_behave_exactly_as_under_bash_with_stdin_closed() {
    compare(WITHOUT_STDIN, false);
}
