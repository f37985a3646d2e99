//! The terminal: it passes through so an
//! interactive program works, and TIOCSTI cannot push keystrokes into it.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};

use crate::support::*;

/// Runs sandgate with a fresh pty as its controlling terminal and stdio (via `setsid -c`),
/// types `input`, and returns the exit status and everything the terminal showed.
fn on_pty(env: &TestEnv, mode: &str, argv: &[&str], input: &[u8]) -> (Option<i32>, String) {
    let mut session = Session::start(env, mode, r#""$@""#, argv);
    session.master.write_all(input).unwrap();
    let status = session.child.wait().ok().and_then(|s| s.code());
    (status, session.finish())
}

#[test]
fn tiocsti_cannot_inject_into_the_terminal() {
    if !require_full_enforcement() {
        return;
    }
    let legacy =
        std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti").is_ok_and(|s| s.trim() == "1");
    if !require("legacy-tiocsti", legacy) {
        return;
    }
    let env = TestEnv::new();
    let probe = probe().to_string_lossy().into_owned();
    let (status, shown) = on_pty(&env, "full-access", &[&probe, "tiocsti"], b"");
    assert_eq!(status, Some(0));
    assert!(
        shown.contains("ok"),
        "control: TIOCSTI must work on a controlling terminal: {shown:?}"
    );
    for mode in ["read-only", "workspace-write"] {
        let (status, shown) = on_pty(&env, mode, &[&probe, "tiocsti"], b"");
        assert_eq!(status, Some(0));
        assert!(shown.contains("err:EPERM"), "{mode}: {shown:?}");
    }
}

#[test]
fn an_interactive_shell_works_inside() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for mode in ["read-only", "workspace-write"] {
        let (status, shown) = on_pty(
            &env,
            mode,
            &["bash", "--norc", "--noprofile", "-i"],
            b"echo $((6*7))\nstty size >/dev/null && echo tty-ok\nexit 5\n",
        );
        assert_eq!(status, Some(5), "{mode}: {shown:?}");
        assert!(shown.contains("42"), "{mode}: {shown:?}");
        assert!(shown.contains("tty-ok"), "{mode}: {shown:?}");
    }
}

/// A user's session on a fresh pty: `setsid -c /bin/sh -c SHELL_SCRIPT sh sandgate
/// --sandbox MODE --workspace WS --keep-background -- ARGV…`, where the session's shell
/// runs sandgate as `"$@"` and then does what a user's shell would. What the command leaves
/// in the background stays: the worst case the terminal must withstand. (Without a PID
/// namespace nothing can be kept: there it ends with the call, and the terminal must
/// withstand it while it runs.)
struct Session {
    child: std::process::Child,
    master: std::fs::File,
    collector: std::thread::JoinHandle<String>,
}

impl Session {
    fn start(env: &TestEnv, mode: &str, shell_script: &str, argv: &[&str]) -> Session {
        let pty = nix::pty::openpty(None, None).unwrap_or_else(|e| panic!("openpty: {e}"));
        let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
        let mut cmd = Command::new("setsid");
        cmd.arg("-c")
            .args(["/bin/sh", "-c", shell_script, "sh"])
            .arg(sandgate())
            .args(["--sandbox", mode, "--workspace"])
            .arg(&env.ws)
            .args((!landlock_backend()).then_some("--keep-background"))
            .arg("--")
            .args(argv);
        env.isolate(&mut cmd);
        cmd.current_dir(&env.ws)
            .stdin(slave(&pty.slave))
            .stdout(slave(&pty.slave))
            .stderr(slave(&pty.slave));
        let child = cmd.spawn().unwrap();
        // Every copy of the slave must close here, or the master never reads EOF.
        drop(cmd);
        drop(pty.slave);
        let master = std::fs::File::from(pty.master);
        let reader = master.try_clone().unwrap();
        let collector = std::thread::spawn(move || read_pty(reader));
        Session {
            child,
            master,
            collector,
        }
    }

    /// Waits for the session to end; returns what the terminal showed.
    fn finish(mut self) -> String {
        let _ = self.child.wait();
        drop(self.master);
        self.collector.join().unwrap_or_default()
    }
}

/// Call 1 leaves a process in the background (its own group, SIGTTOU ignored) that tries
/// to take the terminal's foreground after sandgate has returned, while the session's
/// shell — a `sh` made session leader of a fresh pty — waits as a user's shell would.
/// Returns what the terminal showed and every foreground group seen on the way.
fn background_takeover(env: &TestEnv, mode: &str) -> (String, i32, Vec<i32>) {
    // (Without a PID namespace nothing outlives the command: it waits, so that the attempt
    // is made while the call runs.)
    let wait = if landlock_backend() { " wait" } else { "" };
    let inner = format!("{} tcsetpgrp-later 300 &{wait}", probe().display());
    let mut session = Session::start(
        env,
        mode,
        r#""$@"; sleep 1.5; echo shell-done"#,
        &["/bin/sh", "-c", &inner],
    );
    let shell = session.child.id() as i32;
    let mut seen = Vec::new();
    while session.child.try_wait().unwrap().is_none() {
        // TIOCGPGRP on the master reports the slave's foreground group.
        // (0: `setsid -c` has not made the shell's group the foreground yet.)
        if let Ok(fg) = nix::unistd::tcgetpgrp(&session.master).map(|p| p.as_raw()) {
            if fg != 0 && seen.last() != Some(&fg) {
                seen.push(fg);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    (session.finish(), shell, seen)
}

#[test]
fn a_background_process_cannot_take_the_terminals_foreground() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for mode in ["read-only", "workspace-write"] {
        let (shown, shell, seen) = background_takeover(&env, mode);
        assert!(shown.contains("shell-done"), "{mode}: {shown:?}");
        assert!(
            shown.contains("tcsetpgrp") && shown.contains("err:EPERM"),
            "{mode}: the attempt must be made and refused: {shown:?}"
        );
        assert_eq!(
            seen,
            vec![shell],
            "{mode}: foreground groups seen: {shown:?}"
        );
    }
    // Control: outside the sandbox the same process takes the foreground.
    let (shown, shell, seen) = background_takeover(&env, "full-access");
    assert!(
        shown.contains("tcsetpgrp") && shown.contains(" ok"),
        "{shown:?}"
    );
    assert!(
        seen.iter().any(|fg| *fg != shell),
        "control: the foreground never moved: {seen:?} {shown:?}"
    );
}

#[test]
fn the_terminal_cannot_become_a_sandboxed_processs_controlling_terminal() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let probe = probe().to_string_lossy().into_owned();
    let observing = observing();
    for mode in ["read-only", "workspace-write"] {
        // Ends failing, so that the markers are shown on the terminal.
        let (status, shown) = on_pty(
            &env,
            mode,
            &["/bin/sh", "-c", r#""$0" tiocsctty-steal; exit 9"#, &probe],
            b"",
        );
        assert_eq!(status, Some(9), "{mode}: {shown:?}");
        assert!(shown.contains("err:EPERM"), "{mode}: {shown:?}");
        // Without CAP_SYS_ADMIN the kernel refuses a steal too: the marker shows that the
        // filter refused it first (at `setsid`, the step before).
        if observing {
            assert!(
                shown.contains(r#""op":"terminal""#) && shown.contains(r#""syscall":"setsid""#),
                "{mode}: {shown:?}"
            );
        }
    }
    // (A default container gives its root no CAP_SYS_ADMIN: no control there.)
    if is_root() && !docker_harness() {
        // Control: root outside the sandbox steals it (CAP_SYS_ADMIN).
        let (_, shown) = on_pty(&env, "full-access", &[&probe, "tiocsctty-steal"], b"");
        assert!(shown.contains("ok"), "control: {shown:?}");
    }
}

#[test]
fn terminal_takeover_and_redirection_requests_are_refused() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    // On /dev/null the kernel answers ENOTTY; only a filter says EPERM first.
    let refused = [
        ("TIOCSPGRP", "5410"),
        ("TIOCSCTTY", "540e"),
        ("TIOCCONS", "541d"),
        ("TIOCSETD", "5423"),
        ("TIOCVHANGUP", "5437"),
        ("TIOCSLCKTRMIOS", "5457"),
        ("TIOCEXCL", "540c"),
        ("KDSKBENT", "4b47"),
        ("VT_ACTIVATE", "5606"),
        ("TIOCSWINSZ", "5414"),
    ];
    let allowed = [("TCSETS", "5402"), ("TCFLSH", "540b")];
    let refused = refused.iter().chain(&[("TCXONC", "540a")]);
    for (name, request) in refused.clone().chain(&allowed) {
        assert_eq!(
            env.probe("full-access", &["ioctl-null", request]),
            "err:ENOTTY",
            "control {name}"
        );
    }
    for mode in ["read-only", "workspace-write"] {
        for (name, request) in refused.clone() {
            assert_eq!(
                env.probe(mode, &["ioctl-null", request]),
                "err:EPERM",
                "{name} under {mode}"
            );
        }
        for (name, request) in allowed {
            assert_eq!(
                env.probe(mode, &["ioctl-null", request]),
                "err:ENOTTY",
                "{name} under {mode}"
            );
        }
    }
}

/// Call 1 leaves a process in the background that tries to give up the controlling
/// terminal (so job control no longer stops its reads) and then reads the terminal; the
/// session's shell then reads the line the user types. Returns what the terminal showed.
fn background_reader(env: &TestEnv, mode: &str) -> String {
    // (Without a PID namespace nothing outlives the call: it lasts until the attempts to
    // leave the session have been made, and the reader is ended before it can read.)
    let linger = if landlock_backend() { " sleep 0.5" } else { "" };
    let inner = format!("{} detach-and-read 2500 &{linger}", probe().display());
    let mut session = Session::start(
        env,
        mode,
        r#""$@"; read line; echo "shell-read:$line""#,
        &["/bin/sh", "-c", &inner],
    );
    // The user types at the prompt after sandgate has returned.
    std::thread::sleep(std::time::Duration::from_millis(800));
    session.master.write_all(b"typed-secret\n").unwrap();
    session.finish()
}

#[test]
fn a_background_process_cannot_read_what_the_user_types_next() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for mode in ["read-only", "workspace-write"] {
        let shown = background_reader(&env, mode);
        assert!(
            shown.contains("setsid err:EPERM notty err:EPERM"),
            "{mode}: both ways out of the session must be refused: {shown:?}"
        );
        assert!(!shown.contains("stolen:"), "{mode}: {shown:?}");
        assert!(
            shown.contains("shell-read:typed-secret"),
            "{mode}: {shown:?}"
        );
    }
    // Control: unconfined, the process leaves the session (and may then read the line).
    let shown = background_reader(&env, "full-access");
    assert!(shown.contains("setsid ok"), "control: {shown:?}");
}

#[test]
fn the_users_other_terminals_cannot_be_read() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    // Another terminal of the same user, with a typed line waiting in it.
    let other = nix::pty::openpty(None, None).unwrap_or_else(|e| panic!("openpty: {e}"));
    let path = nix::unistd::ttyname(&other.slave).unwrap();
    let path = path.to_string_lossy().into_owned();
    let mut master = std::fs::File::from(other.master);
    let read_it = format!("timeout 5 head -n 1 '{path}'");
    for mode in ["read-only", "workspace-write"] {
        master.write_all(b"typed-elsewhere\n").unwrap();
        let out = env.sh(mode, &read_it);
        assert_command_failed(&out);
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("typed-elsewhere"),
            "{mode}: {}",
            show(&out)
        );
        // What was typed is still there for its own reader.
        let out = env.sh("full-access", &read_it);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "typed-elsewhere",
            "control: {}",
            show(&out)
        );
    }
}

/// Every `stty -g` a session on a fresh pty printed — before `"$@"`, whatever `"$@"`
/// printed, after it — and everything the terminal showed.
fn settings_around(env: &TestEnv, mode: &str, script: &str) -> (Vec<String>, String) {
    let session = Session::start(
        env,
        mode,
        r#"stty -g; "$@"; echo "rc=$?"; stty -g"#,
        &["/bin/sh", "-c", script],
    );
    let shown = session.finish();
    // Raw mode left behind may drop the carriage returns: lines end at the newline.
    let settings = shown
        .split('\n')
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| {
            l.matches(':').count() > 10 && l.chars().all(|c| c == ':' || c.is_ascii_hexdigit())
        })
        .map(str::to_owned)
        .collect();
    (settings, shown)
}

#[test]
fn the_terminal_comes_back_as_the_command_found_it() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for script in [
        "stty -echo -icanon -isig; stty raw; stty -g",
        // Killed by a signal, with its modes still changed.
        "stty raw -echo -isig; stty -g; kill -9 $$",
    ] {
        for mode in ["read-only", "workspace-write"] {
            let (settings, shown) = settings_around(&env, mode, script);
            let [before, inside, after] = settings.as_slice() else {
                panic!("{mode}, {script}: three `stty -g` lines expected: {shown:?}")
            };
            assert_ne!(
                before, inside,
                "{mode}, {script}: the change was made: {shown:?}"
            );
            assert_eq!(before, after, "{mode}, {script}: {shown:?}");
            assert!(shown.contains("rc="), "{mode}, {script}: {shown:?}");
        }
        // Control: without a sandbox nothing restores the terminal.
        let (settings, shown) = settings_around(&env, "full-access", script);
        assert_eq!(settings.len(), 3, "control, {script}: {shown:?}");
        assert_eq!(settings[1], settings[2], "control, {script}: {shown:?}");
    }
    let (_, shown) = settings_around(&env, "read-only", "stty raw -echo; kill -9 $$");
    assert!(shown.contains("rc=137"), "{shown:?}");
}

#[test]
fn output_cannot_be_suspended_and_the_terminal_still_works_after() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let tcflow = "import termios\n\
                  try:\n    termios.tcflow(1, termios.TCOOFF)\n    print('output', 'off')\n\
                  except termios.error as e:\n    print('tcflow errno', e.args[0])";
    for mode in ["read-only", "workspace-write"] {
        let session = Session::start(
            &env,
            mode,
            r#""$@"; echo "rc=$?"; echo still-shown"#,
            // Ends failing, so that the markers are shown on the terminal.
            &[
                "/bin/sh",
                "-c",
                r#"/usr/bin/python3 -c "$0"; exit 3"#,
                tcflow,
            ],
        );
        let shown = session.finish();
        assert!(
            shown.contains(&format!("tcflow errno {}", libc::EPERM)),
            "{mode}: {shown:?}"
        );
        assert!(!shown.contains("output off"), "{mode}: {shown:?}");
        assert!(
            shown.contains("rc=3") && shown.contains("still-shown"),
            "{mode}: {shown:?}"
        );
        if observing() {
            assert!(
                shown.contains(r#""op":"terminal""#) && shown.contains(r#""syscall":"ioctl""#),
                "{mode}: {shown:?}"
            );
        }
    }
}

#[test]
fn a_sandgate_in_the_background_leaves_the_terminal_to_its_owner() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    // A shell with job control runs sandgate as a background job, and meanwhile changes the
    // terminal itself: sandgate must neither undo that nor be stopped by SIGTTOU.
    let session = Session::start(
        &env,
        "read-only",
        r#"exec /bin/bash -c 'stty -g; set -m; "$@" & sleep 0.5; stty -echo; wait $!; echo "rc=$?"; stty -g' bash "$@""#,
        &["/bin/sh", "-c", "sleep 1.5; echo job-done"],
    );
    let shown = session.finish();
    assert!(
        shown.contains("job-done") && shown.contains("rc=0"),
        "{shown:?}"
    );
    let settings: Vec<&str> = shown
        .split('\n')
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| l.matches(':').count() > 10)
        .collect();
    let [before, after] = settings.as_slice() else {
        panic!("{shown:?}")
    };
    assert_ne!(before, after, "the owner's -echo was undone: {shown:?}");
}

/// A regular file given as stdout or stderr reaches the command as a pipe that sandgate
/// copies to the file: the command cannot rewind, truncate or lock the caller's file, and
/// still everything it writes arrives, in order (one pipe for `>log 2>&1`), before sandgate
/// returns — and what a kept process writes later arrives too.
#[test]
fn a_file_given_as_output_is_written_by_sandgate_in_order_and_complete() {
    let env = TestEnv::new();
    let log = env.outside.join("out.log");
    let open_log = || {
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&log)
            .unwrap()
    };
    for mode in ["read-only", "workspace-write"] {
        std::fs::write(&log, "before\n").unwrap();
        let file = open_log();
        let err = file.try_clone().unwrap();
        let script = "[ -p /dev/stdout ] && echo pipe; for i in 1 2 3; do echo out$i; echo err$i >&2; done; seq 100000 | tail -1";
        let out = output(
            env.sandgate(mode)
                .args(["--", "/bin/sh", "-c", script])
                .stdout(Stdio::from(file))
                .stderr(Stdio::from(err)),
        );
        assert_status(&out, 0);
        // sandgate's own notes (`--no-observe` says it is on) go to the same file.
        let text: String = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.starts_with("sandgate"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            text, "before\npipe\nout1\nerr1\nout2\nerr2\nout3\nerr3\n100000\n",
            "{mode}"
        );
        std::fs::write(&log, "").unwrap();
        // (What a kept process writes later: nothing can be kept without a PID namespace.)
        if landlock_backend() {
            continue;
        }
        let out = output(
            env.sandgate(mode)
                .args(["--keep-background", "--", "/bin/sh", "-c"])
                .arg("echo now; (sleep 1; echo later) &")
                .stdout(Stdio::from(open_log()))
                // Not a pipe that would keep `output` waiting for the kept process.
                .stderr(Stdio::null()),
        );
        assert_status(&out, 0);
        let now = std::fs::read_to_string(&log).unwrap_or_default();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("later")
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let after = std::fs::read_to_string(&log).unwrap_or_default();
        assert_eq!(
            (now.as_str(), after.as_str()),
            ("now\n", "now\nlater\n"),
            "{mode}"
        );
    }
}

/// Python for a process the call keeps: it waits until sandgate has returned and put
/// everything back, then sets `O_NONBLOCK` on its stdin and locks it (`flock`), marks that
/// it did, and exits.
const KEPT_MARKS_STDIN: &str = "import fcntl, os, time
if os.fork() == 0:
    time.sleep(0.5)
    fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL) | os.O_NONBLOCK)
    fcntl.flock(0, fcntl.LOCK_EX)
    open('kept-done', 'w').close()
    os._exit(0)
";

/// Attack: break the user's terminal from a process the call keeps, after sandgate has
/// put the terminal back. The user's next program, reading the same terminal, must find it
/// blocking and unlocked: the command's stdin was a description of its own, which ended
/// with the kept process.
#[test]
fn a_kept_process_leaves_nothing_on_the_users_terminal() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let next = r#"sleep 1.5; python3 -c 'import fcntl, os
print("flags:", "nonblocking" if fcntl.fcntl(0, fcntl.F_GETFL) & os.O_NONBLOCK else "blocking")
try:
    fcntl.flock(0, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("lock: free")
except OSError:
    print("lock: held")'"#;
    let shown = Session::start(
        &env,
        "workspace-write",
        &format!(r#""$@"; {next}"#),
        &["python3", "-c", KEPT_MARKS_STDIN],
    )
    .finish();
    env.stop_kept();
    assert!(
        env.ws.join("kept-done").exists(),
        "control: the kept process did not change its stdin: {shown:?}"
    );
    assert!(shown.contains("flags: blocking"), "{shown:?}");
    assert!(shown.contains("lock: free"), "{shown:?}");
}

/// Attack: the same on a CI runner's pipe: a kept process sets `O_NONBLOCK` on the pipe
/// sandgate was given as stdin, after the call. The runner's description stays blocking
/// (its next read would get `EAGAIN`), and unlocked.
#[test]
fn a_kept_process_leaves_nothing_on_the_callers_pipe() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let (read_end, write_end) = nix::unistd::pipe().unwrap();
    let out = output(
        env.sandgate("workspace-write")
            .args(["--keep-background", "--", "python3", "-c", KEPT_MARKS_STDIN])
            .stdin(Stdio::from(read_end.try_clone().unwrap())),
    );
    let marked = wait_for(std::time::Duration::from_secs(5), || {
        env.ws.join("kept-done").exists()
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let flags = nix::fcntl::fcntl(&read_end, nix::fcntl::FcntlArg::F_GETFL)
        .map(nix::fcntl::OFlag::from_bits_truncate)
        .unwrap();
    let free =
        nix::fcntl::Flock::lock(read_end, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok();
    drop(write_end);
    env.stop_kept();
    assert_status(&out, 0);
    assert!(marked, "control: the kept process did not change its stdin");
    assert!(
        !flags.contains(nix::fcntl::OFlag::O_NONBLOCK),
        "the caller's pipe was left non-blocking"
    );
    assert!(free, "the caller's pipe was left locked");
}

/// A file read as stdin keeps the caller's place in it, as when the two shared one
/// description: the command reads on from where the caller stood, and the caller goes on
/// from where the command stopped (`while read …; do sandgate …; done <list`).
#[test]
fn a_file_read_as_stdin_keeps_the_callers_place() {
    if !require_full_enforcement() {
        return;
    }
    use std::io::Read;
    let env = TestEnv::new();
    let list = env.outside.join("list");
    std::fs::write(&list, "one\ntwo\nthree\n").unwrap();
    let mut file = std::fs::File::open(&list).unwrap();
    let mut first = [0u8; 4];
    file.read_exact(&mut first).unwrap();
    let out = output(
        env.sandgate("read-only")
            .args(["--", "dd", "bs=1", "count=4", "status=none"])
            .stdin(Stdio::from(file.try_clone().unwrap())),
    );
    let mut rest = String::new();
    file.read_to_string(&mut rest).unwrap();
    assert_status(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "two\n",
        "{}",
        show(&out)
    );
    assert_eq!(rest, "three\n");
}

/// A file given read-write as stdin (`<>data`) is the command's to read and write, and
/// keeps the call from nothing: opened for writing, it is not opened again on the
/// sandbox's read-only view (its mount could not go read-only with it open).
#[test]
fn a_file_given_read_write_as_stdin_is_read_and_written() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let data = env.outside.join("data");
    std::fs::write(&data, "first\n").unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&data)
        .unwrap();
    let out = output(
        env.sandgate("read-only")
            .args([
                "--",
                "sh",
                "-c",
                "read line; echo \"got $line\"; echo second >&0",
            ])
            .stdin(Stdio::from(file)),
    );
    assert_status(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "got first\n",
        "{}",
        show(&out)
    );
    assert_eq!(
        std::fs::read_to_string(&data).unwrap_or_default(),
        "first\nsecond\n"
    );
}

/// Attack: read the caller's output pipe through stdin handed over write-only on it
/// (`sandgate cmd 0>&1`, stdout a pipe): stdin is made a pipe of the relay's too, so the
/// command can write there and read nothing of what others write to the caller's pipe.
#[test]
fn stdin_write_only_on_the_output_pipe_reads_nothing_of_it() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let script = "import os\ntry:\n    print('read', os.read(0, 100), flush=True)\nexcept OSError as e:\n    print('refused', e.strerror, flush=True)\nos.write(0, b'via stdin\\n')\n";
    let mut cmd = Command::new("sh");
    cmd.args(["-c", r#"echo before-the-call; "$@" 0>&1"#, "sh"])
        .arg(sandgate());
    env.isolate(&mut cmd);
    cmd.current_dir(&env.ws)
        .args(["--sandbox", "read-only", "--workspace"])
        .arg(&env.ws)
        .args(["--", "python3", "-c", script]);
    let out = output(&mut cmd);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_status(&out, 0);
    assert!(text.contains("refused"), "{}", show(&out));
    assert!(text.contains("via stdin"), "{}", show(&out));
    assert!(!text.contains("read b"), "{}", show(&out));
}
