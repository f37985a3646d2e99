//! Shell mode: sandgate as a drop-in `bash` for agents, CI and make.

// A test crate: its helpers fail as its tests do, by unwrapping (sandgate never does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Write;
use std::path::PathBuf;
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
    let mut child = cmd.spawn().unwrap();
    if let Some(mut s) = child.stdin.take() {
        let _ = s.write_all(stdin);
    }
    child.wait_with_output().unwrap()
}

#[test]
fn option_forms_behave_as_bash() {
    let env = TestEnv::new();
    let script = env.ws.join("script.sh");
    std::fs::write(&script, "echo \"script $0 $1\"; exit 4\n").unwrap();
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
    let sh = install_links(&env).join("sandgate-sh");
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
fn make_with_sandgate_sh_as_shell() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let sh = install_links(&env).join("sandgate-sh");
    let outside = env.outside.join("leak");
    std::fs::write(
        env.ws.join("Makefile"),
        format!(
            "all: out.txt\nout.txt:\n\techo built > out.txt\nleak:\n\techo x > {}\n",
            outside.display()
        ),
    )
    .unwrap();
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
    let sh = install_links(&env).join("sandgate-sh");
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
fn scripts_from_a_file_or_stdin_honour_the_directive_and_retry_with_it() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let ep = TestEndpoint::http(|r, _| Reply::decision(r, "allowed-once"));
    let directive =
        |why: &str| format!("# sandgate: sandbox_permissions=full-access justification=\"{why}\"");
    let write = |name: &str| format!("echo ok > '{}'", env.outside.join(name).display());
    let sandgate = || {
        let mut cmd = env.sandgate("workspace-write");
        cmd.args(["--approval-endpoint", &ep.url]);
        cmd
    };

    // A script file: the directive may follow the #! line.
    let job = env.ws.join("job.sh");
    let text = format!(
        "#!/bin/sh\n{}\n{}\n",
        directive("from a file"),
        write("file")
    );
    std::fs::write(&job, text).unwrap();
    let out = output(sandgate().arg(&job));
    assert_status(&out, 0);
    assert!(env.outside.join("file").exists(), "{}", show(&out));
    // `-s` and a bare pipe (GitLab): the script on stdin, left whole for the shell.
    for (form, args) in [("stdin", vec!["-s"]), ("pipe", vec![])] {
        let mut cmd = sandgate();
        cmd.args(&args);
        let text = format!("{}\n{}\n", directive(form), write(form));
        let out = run_with_stdin(cmd, text.as_bytes());
        assert_status(&out, 0);
        assert!(env.outside.join(form).exists(), "{form}: {}", show(&out));
    }
    let asked: Vec<String> = ep
        .requests()
        .iter()
        .map(|r| {
            r["requested"]["justification"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(asked, ["from a file", "stdin", "pipe"]);
    // Reading the head takes nothing from the shell: `read` gets the next line.
    let out = run_with_stdin(
        env.sandgate("workspace-write"),
        b"read x\nhello\necho got $x\n",
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "got hello\n",
        "{}",
        show(&out)
    );

    if !observing() {
        return;
    }
    // Without a directive the writes are refused; the markers say where it goes.
    let plain = env.ws.join("plain.sh");
    std::fs::write(&plain, format!("{} 2>/dev/null; exit 1\n", write("plain"))).unwrap();
    let out = output(env.sandgate("workspace-write").arg(&plain));
    assert_status(&out, 1);
    let marker = first_marker(&out);
    assert_eq!(marker["retry"]["directive"], directive("<why>"), "{marker}");
    assert!(
        marker["retry"]["hint"]
            .as_str()
            .unwrap_or_default()
            .contains("top of the script"),
        "{marker}"
    );
    let out = run_with_stdin(
        {
            let mut cmd = env.sandgate("workspace-write");
            cmd.arg("-s");
            cmd
        },
        format!("{} 2>/dev/null; exit 1\n", write("plain")).as_bytes(),
    );
    assert_status(&out, 1);
    let marker = first_marker(&out);
    assert_eq!(marker["retry"]["directive"], directive("<why>"), "{marker}");
    assert_eq!(
        marker["retry"]["stdin"],
        "the script must be fed again on stdin"
    );
    let argv = marker["retry"]["argv"].to_string();
    assert!(argv.contains("\"-s\""), "{marker}");
    // Following the hint: the directive on top, the same script fed again.
    let again = format!(
        "{}\n{}\n",
        marker["retry"]["directive"]
            .as_str()
            .unwrap_or_default()
            .replace("<why>", "retry"),
        write("plain")
    );
    let out = run_with_stdin(
        {
            let mut cmd = sandgate();
            cmd.arg("-s");
            cmd
        },
        again.as_bytes(),
    );
    assert_status(&out, 0);
    assert!(env.outside.join("plain").exists(), "{}", show(&out));
}

/// A script named by a path that is not a regular file — `/dev/stdin`, a process
/// substitution's `/dev/fd/N`, a FIFO — is read by the shell alone: looking for a directive
/// there would take the bytes the shell must run.
#[test]
fn a_script_that_is_a_pipe_is_left_whole_for_the_shell() {
    let env = TestEnv::new();
    let mut cmd = env.sandgate("workspace-write");
    cmd.arg("/dev/stdin");
    let out = run_with_stdin(cmd, b"echo from the pipe\n");
    assert_status(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "from the pipe\n",
        "{}",
        show(&out)
    );
}

/// The first marker sandgate printed on stderr.
fn first_marker(out: &Output) -> serde_json::Value {
    stderr_markers(out)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no marker: {}", show(out)))
}

#[test]
fn shell_set_to_sandgate_sh_does_not_loop_and_stays_confined() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let sh = install_links(&env).join("sandgate-sh");
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

/// A directive left in place inside an agent's wrapper is a comment to the shell only when
/// nothing but spaces and tabs comes before its `#`. Before a no-break space, a vertical
/// tab or any other character Rust counts as whitespace, bash reads `#` as part of a
/// command name and runs the line — command substitutions in its "justification" included —
/// so such a line is no request: the approver must never be asked to grant a line that
/// looks like a comment but runs.
#[test]
fn a_directive_is_only_a_line_the_shell_reads_as_a_comment() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let ep = TestEndpoint::http(|r, _| Reply::decision(r, "allowed-once"));
    let wrapped = |space: &str, hidden: &PathBuf, shown: &PathBuf| {
        let command = format!(
            "# sandgate: sandbox_permissions=full-access justification=\"x $(touch '{}')\"\ntouch '{}'",
            hidden.display(),
            shown.display()
        );
        let quoted = format!("'{}'", command.replace('\'', r"'\''"));
        [
            format!("shopt -u extglob; {space}{command}"),
            format!(
                "shopt -u extglob 2>/dev/null || true && eval {} < /dev/null",
                quoted.replacen('#', &format!("{space}#"), 1)
            ),
        ]
    };
    // Control: after a plain space the line is a comment, the request reaches the approver
    // and the granted call writes outside; the substitution in the comment never runs.
    for (i, command) in wrapped(" ", &env.outside.join("hidden"), &env.outside.join("shown"))
        .iter()
        .enumerate()
    {
        let shown = env.outside.join("shown");
        let _ = std::fs::remove_file(&shown);
        let mut cmd = env.sandgate("workspace-write");
        cmd.args(["--approval-endpoint", &ep.url, "-c", command]);
        let out = output(&mut cmd);
        assert_status(&out, 0);
        assert!(shown.exists(), "{command:?}: {}", show(&out));
        assert!(!env.outside.join("hidden").exists(), "{command:?}");
        assert_eq!(ep.requests().len(), i + 1, "{command:?}");
    }
    let asked = ep.requests().len();
    for space in ["\u{a0}", "\u{2028}", "\u{3000}", "\u{b}", "\u{c}", "\r"] {
        let hidden = env.outside.join("hidden");
        for command in wrapped(space, &hidden, &env.outside.join("shown2")) {
            let mut cmd = env.sandgate("workspace-write");
            cmd.args(["--approval-endpoint", &ep.url, "-c", &command]);
            let out = output(&mut cmd);
            assert!(
                !hidden.exists(),
                "{command:?} ran its 'comment' under full access: {}",
                show(&out)
            );
            assert_eq!(ep.requests().len(), asked, "{command:?} was asked for");
        }
    }
}

/// The links never ask the terminal (the agent owns that pty and could type the code), and
/// neither does the retry a link's marker offers, although it is sandgate by its own name:
/// run as given on a pty, it says the terminal is off instead of prompting there. Control:
/// the same request typed as sandgate by its own name on the same pty prompts.
#[test]
fn the_retry_of_a_link_call_keeps_the_terminal_out() {
    if !require_full_enforcement() || !observing() {
        return;
    }
    let env = TestEnv::new();
    let bin = install_links(&env);
    let target = env.outside.join("retried");
    let script = format!("echo done > '{}'", target.display());
    let out = output(env.command(bin.join("sandgate-sh")).args(["-c", &script]));
    assert_command_failed(&out);
    let marker = first_marker(&out);
    let argv = retry_argv(&marker, "retry");
    assert!(argv.iter().any(|a| a == "--no-tty"), "{marker}");
    let sq = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let on_a_pty = |argv: &[String]| {
        let line: Vec<String> = argv.iter().map(|a| sq(a)).collect();
        let mut cmd = env.command("script");
        cmd.env("SHELL", "/bin/sh")
            .args(["-qec", &line.join(" "), "/dev/null"])
            .stdin(std::process::Stdio::null());
        output(&mut cmd)
    };
    let out = on_a_pty(&argv);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("approval_unavailable") && text.contains("--no-tty"),
        "{}",
        show(&out)
    );
    assert!(!text.contains("type the code"), "{}", show(&out));
    assert!(!target.exists());
    // Control: without --no-tty, sandgate by its own name prompts on that pty.
    let mut control: Vec<String> = argv.into_iter().filter(|a| a != "--no-tty").collect();
    control.splice(1..1, ["--approval-timeout".to_owned(), "1".to_owned()]);
    let out = on_a_pty(&control);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("type the code"),
        "{}",
        show(&out)
    );
    assert!(!target.exists());
}

/// A link is a shell to its caller and takes no flags, so the retry argv a marker offers
/// for a call through a link (or `sandgate prefix`) is sandgate by its own path with the
/// request added — and run as given, with an approver, it does what was refused.
#[test]
fn the_retry_argv_of_a_call_through_a_link_runs_as_given() {
    if !require_full_enforcement() || !observing() {
        return;
    }
    let env = TestEnv::new();
    let bin = install_links(&env);
    let approver = GRANTING_APPROVER;
    let forms = [
        "sandgate-sh -c",
        "sandgate-prefix",
        "prefix",
        "prefix --",
        // What sandgate reading the shell's arguments again could take for something else:
        // `--` (run a program directly), a script named like a subcommand, a `-c` string
        // that already carries a directive.
        "sandgate-sh -- tmp",
        "sandgate-sh -c with a directive",
    ];
    for (n, form) in forms.iter().enumerate() {
        let target = env.outside.join(format!("retried-{n}"));
        let script = format!("echo done > '{}'", target.display());
        let mut cmd = if form.starts_with("prefix") {
            env.command(sandgate_inside())
        } else {
            env.command(bin.join(form.split(' ').next().unwrap_or_default()))
        };
        match *form {
            "sandgate-sh -c" => cmd.args(["-c", &script]),
            "sandgate-prefix" => cmd.arg(&script),
            "prefix" => cmd.args(["prefix", &script]),
            "prefix --" => cmd.args(["prefix", "--", &script]),
            "sandgate-sh -- tmp" => {
                std::fs::write(env.ws.join("tmp"), format!("{script}\n"))
                    .unwrap();
                cmd.args(["--", "tmp"])
            }
            _ => cmd
                .env("SANDGATE_SANDBOX", "read-only")
                .env("SANDGATE_APPROVER", approver)
                .args([
                    "-c",
                    &format!(
                        "# sandgate: sandbox_permissions=workspace-write justification=\"build\"\n{script}"
                    ),
                ]),
        };
        let out = output(&mut cmd);
        assert_command_failed(&out);
        assert!(!target.exists(), "{form}: {}", show(&out));
        let marker = first_marker(&out);
        let argv = retry_argv(&marker, "retry");
        assert_eq!(
            argv.first(),
            Some(&sandgate_inside().display().to_string()),
            "{form}: {marker}"
        );
        let mut retry = env.command(&argv[0]);
        retry.args(&argv[1..]).env("SANDGATE_APPROVER", approver);
        let out = output(&mut retry);
        assert_status(&out, 0);
        assert_eq!(
            std::fs::read_to_string(&target).unwrap_or_default(),
            "done\n",
            "{form}: {}",
            show(&out)
        );
    }
}

/// After `--` the shell's first operand is still the command string or the script: a
/// directive there asks, as it does without the `--`.
#[test]
fn a_directive_after_double_dash_asks_as_without_it() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let sh = install_links(&env).join("sandgate-sh");
    let approver = GRANTING_APPROVER;
    let write = |name: &str| {
        format!(
            "# sandgate: sandbox_permissions=full-access justification=\"publish\"\necho done > '{}'",
            env.outside.join(name).display()
        )
    };
    std::fs::write(env.ws.join("job.sh"), write("from-script")).unwrap();
    for args in [
        vec!["-c".to_owned(), "--".to_owned(), write("from-string")],
        vec!["--".to_owned(), "job.sh".to_owned()],
    ] {
        let out = output(
            env.command(&sh)
                .env("SANDGATE_APPROVER", approver)
                .args(&args),
        );
        assert_status(&out, 0);
    }
    for name in ["from-string", "from-script"] {
        assert!(env.outside.join(name).exists(), "{name}");
    }
    assert_eq!(env.audit_records().len(), 4);
}

/// A directive is honoured only where bash runs it. `+s` is `-s` to bash (the script comes
/// on stdin, `job.sh` is `$0`), `-O` takes a shopt name, a lone `-` ends the options: in
/// each, a directive in what bash does not run asks for nothing.
#[test]
fn a_directive_where_bash_does_not_run_it_asks_for_nothing() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let sh = install_links(&env).join("sandgate-sh");
    let approver = GRANTING_APPROVER;
    let directive = "# sandgate: sandbox_permissions=full-access justification=\"publish\"";
    let write = |name: &str| format!("echo done > '{}'", env.outside.join(name).display());
    std::fs::write(
        env.ws.join("job.sh"),
        format!("{directive}\n{}\n", write("job")),
    )
    .unwrap();
    std::fs::write(env.ws.join("-"), format!("{directive}\n")).unwrap();
    let shell = |args: &[String]| {
        let mut cmd = env.command(&sh);
        cmd.env("SANDGATE_APPROVER", approver).args(args);
        cmd
    };
    let strings = |args: &[&str]| args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    let out = run_with_stdin(
        shell(&strings(&["+s", "job.sh"])),
        write("stdin").as_bytes(),
    );
    assert_command_failed(&out);
    let sneaked = format!("{directive}\nextglob");
    let out = output(&mut shell(&strings(&[
        "-c",
        "-O",
        &sneaked,
        &write("shopt"),
    ])));
    assert_command_failed(&out);
    let plain = std::fs::read_to_string(env.ws.join("job.sh")).unwrap_or_default();
    std::fs::write(
        env.ws.join("plain.sh"),
        plain.lines().skip(1).collect::<Vec<_>>().join("\n"),
    )
    .unwrap();
    let out = output(&mut shell(&strings(&["-", "plain.sh"])));
    assert_command_failed(&out);
    for name in ["stdin", "shopt", "job"] {
        assert!(!env.outside.join(name).exists(), "{name}");
    }
    assert!(env.audit_records().is_empty(), "{:?}", env.audit_records());
    // Control: where bash does run it, the same directive asks and is granted.
    let out = output(&mut shell(&strings(&["job.sh"])));
    assert_status(&out, 0);
    assert!(env.outside.join("job").exists(), "{}", show(&out));
}

/// Removing the directive line leaves the rest of the `-c` string byte for byte, and never
/// turns it into an option of the shell's (which would run a later argument, granted).
#[test]
fn what_follows_a_directive_runs_as_sent() {
    use std::os::unix::ffi::OsStrExt;
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let sh = install_links(&env).join("sandgate-sh");
    let approver = GRANTING_APPROVER;
    let directive = "# sandgate: sandbox_permissions=workspace-write justification=\"build\"";
    let shell = || {
        let mut cmd = env.command(&sh);
        cmd.env("SANDGATE_SANDBOX", "read-only")
            .env("SANDGATE_APPROVER", approver);
        cmd
    };
    let mut bytes = format!("{directive}\nprintf '").into_bytes();
    bytes.extend_from_slice(b"\xff' > raw");
    let out = output(shell().arg("-c").arg(std::ffi::OsStr::from_bytes(&bytes)));
    assert_status(&out, 0);
    assert_eq!(
        std::fs::read(env.ws.join("raw")).unwrap_or_default(),
        b"\xff",
        "{}",
        show(&out)
    );
    // What is left after the directive would be bash's option `-`: refused, nothing runs.
    let out = output(
        shell()
            .arg("-c")
            .arg(format!("{directive}\n-"))
            .arg("echo done > granted"),
    );
    let marker = first_marker(&out);
    assert_eq!(marker["kind"], "invalid_escalation", "{}", show(&out));
    assert_status(&out, 64);
    assert!(!env.ws.join("granted").exists());
    assert_eq!(env.audit_records().len(), 2, "only the first call asked");
}

/// A retry's argv is JSON, which cannot carry bytes that are not UTF-8: a lossy copy would
/// run another file. Such a call gets the hint and no argv.
#[test]
fn a_command_line_that_is_not_utf8_gets_no_retry_argv() {
    use std::os::unix::ffi::OsStrExt;
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let sh = install_links(&env).join("sandgate-sh");
    let name = std::ffi::OsStr::from_bytes(b"job\xff.sh");
    let script = format!("echo done > '{}'\n", env.outside.join("x").display());
    std::fs::write(env.ws.join(name), &script).unwrap();
    // The file a lossy retry would run instead.
    std::fs::write(env.ws.join("job\u{fffd}.sh"), &script).unwrap();
    for cmd in [
        env.command(&sh).arg(name),
        env.command(sandgate_inside()).arg(name),
        env.command(&sh).arg("-c").arg(std::ffi::OsStr::from_bytes(
            b"echo \xff; echo done > ../outside/x",
        )),
    ] {
        let out = output(cmd);
        assert_command_failed(&out);
        let marker = first_marker(&out);
        assert!(marker["retry"].get("argv").is_none(), "{marker}");
        // Nor a new command string with other bytes in it.
        let directive = marker["retry"]["directive"].as_str().unwrap_or_default();
        assert!(!directive.contains('\u{fffd}'), "{marker}");
        assert!(
            marker["retry"]["hint"]
                .as_str()
                .unwrap_or_default()
                .contains("not UTF-8"),
            "{marker}"
        );
    }
    // Control: a UTF-8 name gets its argv.
    let out = output(env.command(&sh).arg("job\u{fffd}.sh"));
    assert!(first_marker(&out)["retry"]["argv"].is_array());
}

/// A script under the host's `/tmp` is not the one the shell runs: the sandbox has its own
/// `/tmp`, where a command of an earlier call may have left a file of that name. Its
/// directive is not read (the call runs at its standing mode), and the retry asks by flags.
#[test]
fn a_script_under_the_shared_temp_is_not_read_for_a_directive() {
    if !require_full_enforcement() || !observing() {
        return;
    }
    let env = TestEnv::new();
    let approver = GRANTING_APPROVER;
    let host_script = tempfile::Builder::new()
        .prefix("sandgate-test-script-")
        .suffix(".sh")
        .tempfile_in("/tmp")
        .unwrap();
    let target = env.outside.join("from-tmp");
    std::fs::write(
        host_script.path(),
        format!(
            "# sandgate: sandbox_permissions=full-access justification=\"host script\"\necho done > '{}'\n",
            target.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        host_script.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let mut cmd = env.sandgate("workspace-write");
    cmd.env("SANDGATE_APPROVER", approver)
        .arg(host_script.path());
    let out = output(&mut cmd);
    // Inside, /tmp is the workspace's private temp: no such script there. (Without a mount
    // namespace, the landlock backend's, it is there but cannot be read: 126.)
    assert_status(&out, if landlock_backend() { 126 } else { 127 });
    assert!(!target.exists(), "{}", show(&out));
    assert!(env.audit_records().is_empty(), "{:?}", env.audit_records());

    // The same script outside the shared temps asks, and runs widened.
    let script = env.ws.join("job.sh");
    std::fs::copy(host_script.path(), &script).unwrap();
    let mut cmd = env.sandgate("workspace-write");
    cmd.env("SANDGATE_APPROVER", approver).arg(&script);
    let out = output(&mut cmd);
    assert_status(&out, 0);
    assert!(target.exists(), "{}", show(&out));
}

/// A call that already asked for a wider mode — by its flags, or by a directive — and was
/// granted it, then refused something that needs more: its retry asks once, for the
/// larger mode, and run as given it does what was refused.
#[test]
fn the_retry_of_a_call_that_already_asked_asks_once() {
    if !require_full_enforcement() || !observing() {
        return;
    }
    let env = TestEnv::new();
    let approver = GRANTING_APPROVER;
    for (n, by_directive) in [false, true].into_iter().enumerate() {
        let target = env.outside.join(format!("asked-{n}"));
        let write = format!("echo done > '{}'", target.display());
        let mut cmd = env.sandgate("read-only");
        cmd.env("SANDGATE_APPROVER", approver);
        if by_directive {
            cmd.args([
                "-c",
                &format!(
                    "# sandgate: sandbox_permissions=workspace-write justification=\"build\"\n{write}"
                ),
            ]);
        } else {
            cmd.args([
                "--sandbox-permissions",
                "workspace-write",
                "--justification",
                "build",
                "--",
                "/bin/sh",
                "-c",
                &write,
            ]);
        }
        let out = output(&mut cmd);
        assert_command_failed(&out);
        let marker = first_marker(&out);
        assert_eq!(marker["needed"], "full-access", "{marker}");
        let argv = retry_argv(&marker, "retry");
        assert_eq!(
            argv.iter()
                .filter(|a| *a == "--sandbox-permissions")
                .count(),
            1,
            "{argv:?}"
        );
        // The new directive replaces the old one in the command to send again.
        if by_directive {
            assert_eq!(
                marker["retry"]["directive"],
                format!(
                    "# sandgate: sandbox_permissions=full-access justification=\"<why>\"\n{write}"
                ),
                "{marker}"
            );
        }
        let mut retry = env.command(&argv[0]);
        retry.args(&argv[1..]).env("SANDGATE_APPROVER", approver);
        let out = output(&mut retry);
        assert_status(&out, 0);
        assert!(target.exists(), "{by_directive}: {}", show(&out));
    }
}

/// A retry runs the command string the call ran: without the directive line, which the
/// call took for its request and removed before the shell saw it. Left in, that line is a
/// command to an interactive shell without `interactive_comments`: run as given, the retry
/// would run, wider, a program named `#` that the refused call never ran.
#[test]
fn the_retry_runs_the_command_string_without_its_directive_line() {
    if !require_full_enforcement() || !observing() {
        return;
    }
    let env = TestEnv::new();
    let approver = GRANTING_APPROVER;
    let bin = env.root.join("hash-bin");
    std::fs::create_dir(&bin).unwrap();
    let ran = env.outside.join("hash-ran");
    let hash = bin.join("#");
    std::fs::write(&hash, format!("#!/bin/sh\ntouch '{}'\n", ran.display())).unwrap();
    std::fs::set_permissions(&hash, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let target = env.outside.join("written");
    let write = format!("echo done > '{}'", target.display());
    let command =
        format!("# sandgate: sandbox_permissions=workspace-write justification=\"build\"\n{write}");
    let mut cmd = env.sandgate("read-only");
    cmd.env("SANDGATE_APPROVER", approver)
        .env("PATH", &path)
        .args(["--norc", "-i", "+O", "interactive_comments", "-c", &command]);
    let out = output(&mut cmd);
    assert_command_failed(&out);
    assert!(!ran.exists(), "{}", show(&out));
    let argv = retry_argv(&first_marker(&out), "retry");
    assert_eq!(argv.last(), Some(&write), "{argv:?}");
    let mut retry = env.command(&argv[0]);
    retry
        .args(&argv[1..])
        .env("SANDGATE_APPROVER", approver)
        .env("PATH", &path);
    let out = output(&mut retry);
    assert_status(&out, 0);
    assert!(target.exists(), "{}", show(&out));
    assert!(!ran.exists(), "{}", show(&out));
}

/// An interactive shell (`-i`) reads a `#` line as a comment only while
/// `interactive_comments` is on, which `+O interactive_comments` or a startup file turns
/// off: there a directive left in place (a script on stdin, an agent's wrapper) would run
/// as a command — the substitution in its "justification" included — so it is no request.
/// Control: the same calls without `-i` ask, and the granted call writes outside.
#[test]
fn a_directive_left_in_place_asks_nothing_of_an_interactive_shell() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let ep = TestEndpoint::http(|r, _| Reply::decision(r, "allowed-once"));
    let hidden = env.outside.join("hidden");
    let shown = env.outside.join("shown");
    let directive = format!(
        "# sandgate: sandbox_permissions=full-access justification=\"x $(touch '{}')\"",
        hidden.display()
    );
    let script = format!("{directive}\ntouch '{}'\n", shown.display());
    let quoted = format!("'{}'", script.replace('\'', r"'\''"));
    let wrapped = format!("shopt -u extglob 2>/dev/null || true && eval {quoted} < /dev/null");
    for interactive in [false, true] {
        let options: &[&str] = if interactive {
            &["--norc", "-i", "+O", "interactive_comments"]
        } else {
            &["--norc", "+O", "interactive_comments"]
        };
        for stdin in [true, false] {
            let _ = std::fs::remove_file(&shown);
            let asked = ep.requests().len();
            let mut cmd = env.sandgate("workspace-write");
            cmd.args(["--approval-endpoint", &ep.url]).args(options);
            let out = if stdin {
                cmd.arg("-s");
                run_with_stdin(cmd, script.as_bytes())
            } else {
                output(cmd.args(["-c", &wrapped]))
            };
            let what = format!("interactive {interactive}, stdin {stdin}");
            assert!(!hidden.exists(), "{what}: {}", show(&out));
            if interactive {
                assert_eq!(ep.requests().len(), asked, "{what}: {}", show(&out));
                assert!(!shown.exists(), "{what}: {}", show(&out));
            } else {
                assert_eq!(ep.requests().len(), asked + 1, "{what}: {}", show(&out));
                assert!(shown.exists(), "{what}: {}", show(&out));
            }
        }
    }
}

/// A retry names sandgate by its own path, whatever argv[0] the call was given: a relative
/// one depends on the cwd of whoever runs the retry, and any name at all can be given.
#[test]
fn a_retry_names_sandgate_by_its_own_path() {
    if !require_full_enforcement() || !observing() {
        return;
    }
    use std::os::unix::process::CommandExt;
    let env = TestEnv::new();
    let target = env.outside.join("x");
    for form in [&["--"][..], &["-c"]] {
        let mut cmd = env.sandgate("workspace-write");
        cmd.arg0("./evil").args(form);
        if form == ["--"] {
            cmd.args(["/bin/sh", "-c"]);
        }
        cmd.arg(format!("echo x > '{}'", target.display()));
        let out = output(&mut cmd);
        assert_command_failed(&out);
        let marker = first_marker(&out);
        let expected = std::fs::canonicalize(sandgate()).unwrap();
        assert_eq!(
            marker["retry"]["argv"][0],
            expected.display().to_string(),
            "{marker}"
        );
    }
}
