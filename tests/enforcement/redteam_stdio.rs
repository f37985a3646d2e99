//! Red team, the caller's standard streams and other inherited descriptors: what a
//! restricted command can do to the objects behind them beyond what the caller gave (a
//! wider access mode through `/proc/self/fd`, the object's mode and attributes, another
//! descriptor of the same open file), and what is left on them after the call.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Command, Stdio};

use crate::support::*;

/// What is in a pipe now, read without waiting (the write ends may still be open).
fn drain(read_end: &OwnedFd) -> String {
    let dup = read_end.try_clone().unwrap();
    let _ = nix::fcntl::fcntl(
        &dup,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    );
    let mut file = std::fs::File::from(dup);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = file.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    // The caller's own description must stay blocking: set on the dup, it is shared.
    let _ = nix::fcntl::fcntl(
        read_end,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
    );
    String::from_utf8_lossy(&out).into_owned()
}

/// Python: opens the command's stdin again for writing (through `/proc/self/fd/0`, then
/// `/dev/stdin`) and writes a line into it; says what it managed.
const WRITE_INTO_STDIN: &str = r#"
import os
for path in ("/proc/self/fd/0", "/dev/stdin"):
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"echo INJECTED\n")
        print(path, "written")
    except OSError as e:
        print(path, e)
"#;

/// Attack: stdin is a pipe the caller reads on after the call (a script fed to `bash`
/// through a pipe, `… | while read`, a harness's input). The command was given its read
/// end only, and gets "the same pipe opened anew with the same access mode"; but the pipe
/// is reachable through `/proc/self/fd/0` (and `/dev/stdin`), and a pipe's read end opens
/// again for writing: what the command writes there is read by the caller after sandgate
/// returns. Should fail: nothing written inside reaches the caller's stdin.
#[test]
fn redteam_a_command_cannot_write_into_the_callers_stdin_pipe() {
    let env = TestEnv::new();
    for mode in ["read-only", "workspace-write"] {
        let (read_end, write_end) = nix::unistd::pipe().unwrap();
        nix::unistd::write(&write_end, b"echo legit\n").unwrap();
        let out = output(
            env.sandgate(mode)
                .args(["--", "python3", "-c", WRITE_INTO_STDIN])
                .stdin(Stdio::from(read_end.try_clone().unwrap())),
        );
        drop(write_end);
        let left = drain(&read_end);
        assert_eq!(
            left,
            "echo legit\n",
            "{mode}: the caller's stdin holds what the command wrote: {}",
            show(&out)
        );
    }
}

/// Attack, end to end: the user runs a script through a pipe into `bash` (`curl … | bash`,
/// `cat setup.sh | bash`), and the script runs an untrusted build under sandgate. The
/// sandboxed command writes a line of shell into its stdin — bash's script pipe — and bash
/// runs it, unconfined, after the script's own lines. Should fail: the planted command
/// never runs on the host.
#[test]
fn redteam_a_script_piped_into_bash_runs_nothing_the_command_wrote() {
    let env = TestEnv::new();
    let pwned = env.outside.join("pwned");
    let plant = format!(
        "import os; os.write(os.open('/proc/self/fd/0', os.O_WRONLY), b'echo ran > {}\\n')",
        pwned.display()
    );
    for mode in ["read-only", "workspace-write"] {
        let _ = std::fs::remove_file(&pwned);
        // The script, as bash reads it from the pipe: sandgate (its flags from `$SG_ARGS`
        // would need quoting; written out instead) then one line of its own.
        let mut sandgate = env.sandgate(mode);
        sandgate.args(["--", "python3", "-c", &plant]);
        let mut line: Vec<String> = vec![shell_quote(&sandgate.get_program().to_string_lossy())];
        line.extend(
            sandgate
                .get_args()
                .map(|a| shell_quote(&a.to_string_lossy())),
        );
        let script = format!("{}\necho script-end\n", line.join(" "));
        let mut bash = Command::new("bash");
        env.isolate(&mut bash);
        bash.current_dir(&env.ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = bash.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
        stdin.write_all(script.as_bytes()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("script-end"),
            "{mode}: control: the script did not run: {}",
            show(&out)
        );
        assert!(
            !pwned.exists(),
            "{mode}: the host's bash ran a line the sandboxed command wrote into its script"
        );
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Python: opens the command's stdout again for reading (through `/proc/self/fd/1`) and
/// reads what is waiting in it; says what it got on stderr.
const READ_FROM_STDOUT: &str = r#"
import os, sys
try:
    fd = os.open("/proc/self/fd/1", os.O_RDONLY | os.O_NONBLOCK)
    sys.stderr.write("got:%r\n" % os.read(fd, 4096))
except OSError as e:
    sys.stderr.write("refused:%s\n" % e)
"#;

/// Attack: stdout is a pipe that the caller's other programs write to as well (a CI
/// step's log pipe, `{ print-token; sandgate cmd; } | consumer`). The command was given its
/// write end only; opened again for reading through `/proc/self/fd/1`, the pipe hands it
/// what the host wrote there and its reader has not read yet — and the reader never gets
/// it. Should fail: the host's output stays in the pipe, for its reader.
#[test]
fn redteam_a_command_cannot_read_the_callers_stdout_pipe() {
    let env = TestEnv::new();
    for mode in ["read-only", "workspace-write"] {
        let (read_end, write_end) = nix::unistd::pipe().unwrap();
        nix::unistd::write(&write_end, b"host-secret\n").unwrap();
        let out = output(
            env.sandgate(mode)
                .args(["--", "python3", "-c", READ_FROM_STDOUT])
                .stdout(Stdio::from(write_end.try_clone().unwrap())),
        );
        drop(write_end);
        let left = drain(&read_end);
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("host-secret"),
            "{mode}: the command read the host's output from its stdout pipe: {}",
            show(&out)
        );
        assert_eq!(left, "host-secret\n", "{mode}: {}", show(&out));
    }
}

/// Python for a kept process: opens its stdout pipe again for reading, and after the call
/// saves what the host writes there next in `stolen`.
const KEPT_READS_STDOUT: &str = r#"
import os
fd = os.open("/proc/self/fd/1", os.O_RDONLY)
if os.fork() == 0:
    data = os.read(fd, 4096)
    with open("stolen", "wb") as f:
        f.write(data)
    os._exit(0)
"#;

/// Attack: the same from a process the call keeps (`--keep-background`, a dev server): it
/// holds a read end of the caller's stdout pipe and takes what the host writes there after
/// sandgate has returned (the deploy step's output after the build step). Should fail:
/// the host's later output reaches its reader, none of it the kept process.
#[test]
fn redteam_a_kept_process_cannot_read_what_the_host_writes_to_the_pipe_later() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let (read_end, write_end) = nix::unistd::pipe().unwrap();
    let out = output(
        env.sandgate("workspace-write")
            .args([
                "--keep-background",
                "--",
                "python3",
                "-c",
                KEPT_READS_STDOUT,
            ])
            .stdout(Stdio::from(write_end.try_clone().unwrap()))
            .stderr(Stdio::null()),
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    // The host's next program writes to the same pipe; its reader reads later.
    nix::unistd::write(&write_end, b"later-secret\n").unwrap();
    let stolen = wait_for(std::time::Duration::from_secs(2), || {
        env.ws.join("stolen").exists()
    });
    let left = drain(&read_end);
    env.stop_kept();
    drop(write_end);
    assert_status(&out, 0);
    assert!(
        !stolen,
        "a kept process read the host's later output: {:?}",
        std::fs::read_to_string(env.ws.join("stolen")).unwrap_or_default()
    );
    assert_eq!(left, "later-secret\n");
}

/// Python: changes what it can of the objects behind stdin and stdout: their mode (with
/// and without an execute bit), times, group and an extended attribute.
const CHANGE_STDIO_OBJECTS: &str = r#"
import os
for fd in (0, 1):
    for name, act in [
        ("fchmod", lambda: os.fchmod(fd, 0o666)),
        ("fchmod+x", lambda: os.fchmod(fd, 0o755)),
        ("utime", lambda: os.utime(fd, (0, 0))),
        ("fchown", lambda: os.fchown(fd, -1, os.getgid())),
        ("setxattr", lambda: os.setxattr(fd, "user.planted", b"1")),
    ]:
        try:
            act()
            print(fd, name, "ok")
        except OSError as e:
            print(fd, name, e)
"#;

/// Attack: stdin is a file outside every writable root (`sandgate -- wc -l <
/// ~/.bashrc`), opened read-only. The README says the tree is remounted read-only "which
/// also refuses chmod, chown, utimes and xattrs outside" — but the descriptor sandgate
/// opens anew lies on the host's mount, not the sandbox's read-only one, and owner-only
/// changes (`fchmod`, `futimens`, `fchown` to one's group, `fsetxattr user.*`) need no
/// write access. Make the file world-writable or executable, reset its mtime (what `make`
/// decides by), plant attributes. Should fail: the file keeps its mode, times and
/// attributes.
#[test]
fn redteam_a_file_read_as_stdin_keeps_its_mode_times_and_attributes() {
    let env = TestEnv::new();
    let file = env.outside.join("host.txt");
    for mode in ["read-only", "workspace-write"] {
        std::fs::write(&file, "host\n").unwrap();
        set_mode(&file, 0o640);
        let before = std::fs::metadata(&file).unwrap();
        let sink = env.root.join("sink");
        let out = output(
            env.sandgate(mode)
                .args(["--", "python3", "-c", CHANGE_STDIO_OBJECTS])
                .stdin(Stdio::from(std::fs::File::open(&file).unwrap()))
                .stdout(Stdio::from(std::fs::File::create(&sink).unwrap())),
        );
        let after = std::fs::metadata(&file).unwrap();
        let said = std::fs::read_to_string(&sink).unwrap_or_default();
        let xattrs = xattr_names(&file);
        assert_none(
            [
                (after.permissions().mode() & 0o7777 != 0o640)
                    .then(|| format!("mode now {:o}", after.permissions().mode() & 0o7777)),
                (after.mtime() != before.mtime()).then(|| "mtime changed".to_owned()),
                xattrs
                    .contains("user.planted")
                    .then(|| "an attribute was planted".to_owned()),
            ]
            .into_iter()
            .flatten()
            .map(|f| format!("{mode}: {f} ({said}) {}", show(&out)))
            .collect(),
        );
    }
}

/// The names of `path`'s extended attributes, as the host's python lists them.
fn xattr_names(path: &std::path::Path) -> String {
    let out = output(
        Command::new("python3")
            .args(["-c", "import os, sys; print(os.listxattr(sys.argv[1]))"])
            .arg(path),
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh pty as the controlling terminal and stdio of a `sh -c SCRIPT` session leader
/// (`setsid -c`), as the user's terminal is; `$0` is sandgate, `$1..` are `args`. Returns
/// the slave's path and mode before and after, and what the terminal showed once the
/// session ended.
fn pty_session(env: &TestEnv, script: &str, args: &[&str]) -> (String, String, String) {
    let pty = nix::pty::openpty(None, None).unwrap_or_else(|e| panic!("openpty: {e}"));
    let path = nix::unistd::ttyname(&pty.slave)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let mode_of = |path: &str| {
        let mode = std::fs::metadata(path)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0);
        format!("{path} {mode:o}")
    };
    let before = mode_of(&path);
    let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
    let mut cmd = Command::new("setsid");
    cmd.args(["-c", "/bin/sh", "-c", script])
        .arg(sandgate())
        .args(args);
    env.isolate(&mut cmd);
    cmd.current_dir(&env.ws)
        .stdin(slave(&pty.slave))
        .stdout(slave(&pty.slave))
        .stderr(slave(&pty.slave));
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    let master = std::fs::File::from(pty.master);
    let reader = std::thread::spawn(move || read_pty(master));
    let _ = child.wait();
    // The slave is kept open until now, so that its mode can still be read.
    let after = mode_of(&path);
    drop(pty.slave);
    let shown = reader.join().unwrap_or_default();
    (before, after, shown)
}

/// The sandgate flags of a call in `env` under `mode`, for a shell line.
fn flags(env: &TestEnv, mode: &str) -> String {
    let mut line = format!(
        "--sandbox {mode} --workspace {}",
        shell_quote(&env.ws.to_string_lossy())
    );
    if !observing() {
        line.push_str(" --no-observe");
    }
    line
}

/// Attack: the command gets the user's terminal opened anew, as a descriptor of the
/// host's devpts inode, which the user owns: `fchmod(1, 0o666)` makes the user's terminal
/// readable and writable by every local user after the call (what is typed there, a
/// `sudo` password included, can be read by anyone; `mesg n` undone). The README says
/// the terminal comes back as it was and that mode changes outside are refused. Should
/// fail: the terminal keeps its mode.
#[test]
fn redteam_the_users_terminal_keeps_its_mode() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    for mode in ["read-only", "workspace-write"] {
        let script = format!(
            r#""$0" {} -- python3 -c 'import os; os.fchmod(1, 0o666); print("chmod done")'"#,
            flags(&env, mode)
        );
        let (before, after, shown) = pty_session(&env, &script, &[]);
        assert_eq!(
            after, before,
            "{mode}: the user's terminal's mode: {shown:?}"
        );
    }
}

/// Python for a kept process: once sandgate has returned, sets `O_NONBLOCK` on its stdin.
const KEPT_SETS_NONBLOCK: &str = "import fcntl, os, time
if os.fork() == 0:
    time.sleep(0.5)
    fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL) | os.O_NONBLOCK)
    open('kept-done', 'w').close()
    os._exit(0)
";

/// What the session's shell runs after the calls: whether its own terminal description is
/// non-blocking.
const SHELL_CHECKS_FLAGS: &str = r#"sleep 1.5; python3 -c 'import fcntl, os
print("flags:", "nonblocking" if fcntl.fcntl(0, fcntl.F_GETFL) & os.O_NONBLOCK else "blocking")'"#;

/// Attack, two calls (as a user, whom the file mode binds): call 1 makes the user's
/// terminal unopenable (`fchmod(0, 0)` on its descriptor, the user owns the pty); call 2's
/// sandgate then cannot open the terminal anew and, as with "another user's terminal after
/// su", hands the command the shell's own description of it — which a process kept by
/// call 2 sets `O_NONBLOCK` on after sandgate has returned: the user's shell and the
/// programs it runs next read `EAGAIN`. Should fail: the shell's terminal stays blocking
/// (and keeps its mode).
#[test]
fn redteam_a_terminal_made_unopenable_is_not_handed_over_next_time() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let script = format!(
        r#""$0" {f} -- python3 -c 'import os; os.fchmod(0, 0)'
"$0" {f} --keep-background -- python3 -c "$1"; {SHELL_CHECKS_FLAGS}"#,
        f = flags(&env, "workspace-write")
    );
    let (before, after, shown) = pty_session(&env, &script, &[KEPT_SETS_NONBLOCK]);
    env.stop_kept();
    assert!(
        env.ws.join("kept-done").exists(),
        "control: the kept process did not run: {shown:?}"
    );
    assert!(
        shown.contains("flags: blocking"),
        "the shell's terminal ({before}, then {after}) was left non-blocking: {shown:?}"
    );
}

/// Python: locks fd 3 (`flock`), and forks a process that, once kept and after sandgate
/// has returned, sets `O_NONBLOCK` on it.
const LOCKS_FD3: &str = "import fcntl, os, time
fcntl.flock(3, fcntl.LOCK_EX)
if os.fork() == 0:
    time.sleep(0.5)
    fcntl.fcntl(3, fcntl.F_SETFL, fcntl.fcntl(3, fcntl.F_GETFL) | os.O_NONBLOCK)
    open('kept-done', 'w').close()
    os._exit(0)
";

/// Attack: the caller's stdout is a pipe (a CI runner's log) and the caller also passes
/// another descriptor of that same open file (`exec 3>&1` to keep stdout aside, as
/// scripts do; `sandgate cmd 3>&1`). stdout is opened anew, but fd 3 is passed as it is:
/// the caller's own description. A `flock` on it outlives the call (the caller holds the
/// description), and a process the call keeps sets `O_NONBLOCK` on it after sandgate has
/// put the flags back: the runner's next write gets `EAGAIN`. The README: "The command
/// never holds the open files behind your stdin, stdout and stderr", as it says for a
/// regular file's other descriptors. Should fail: the caller's pipe stays blocking and
/// unlocked.
#[test]
fn redteam_another_descriptor_of_stdout_is_not_the_callers() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let (read_end, write_end) = nix::unistd::pipe().unwrap();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", r#""$@" 3>&1"#, "sh"])
        .arg(sandgate())
        .args(env.sandgate("workspace-write").get_args())
        .args(["--keep-background", "--", "python3", "-c", LOCKS_FD3]);
    env.isolate(&mut cmd);
    cmd.current_dir(&env.ws)
        .stdout(Stdio::from(write_end.try_clone().unwrap()))
        .stderr(Stdio::null());
    let out = output(&mut cmd);
    let marked = wait_for(std::time::Duration::from_secs(5), || {
        env.ws.join("kept-done").exists()
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let flags = nix::fcntl::fcntl(&write_end, nix::fcntl::FcntlArg::F_GETFL)
        .map(nix::fcntl::OFlag::from_bits_truncate)
        .unwrap();
    // Another open of the same pipe: it conflicts with a lock on the caller's description.
    let other = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/self/fd/{}", write_end.as_raw_fd()))
        .unwrap();
    let free = nix::fcntl::Flock::lock(other, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok();
    env.stop_kept();
    drop((read_end, write_end));
    assert_status(&out, 0);
    assert!(marked, "control: the kept process did not run");
    assert_none(
        [
            flags
                .contains(nix::fcntl::OFlag::O_NONBLOCK)
                .then(|| "the caller's pipe was left non-blocking".to_owned()),
            (!free).then(|| "the caller's pipe was left locked".to_owned()),
        ]
        .into_iter()
        .flatten()
        .collect(),
    );
}

/// Attack: stdin is a host file outside every writable root (`< ~/.bashrc`); hard-link it
/// into the workspace through `/proc/self/fd/0` (or `/dev/stdin`), so that a later
/// `workspace-write` call writes the host file through the workspace's name. Should fail
/// (it does: the link is refused), and no name for the file appears in the workspace.
#[test]
fn redteam_a_file_read_as_stdin_cannot_be_linked_into_the_workspace() {
    let env = TestEnv::new();
    let file = env.outside.join("bashrc");
    std::fs::write(&file, "host\n").unwrap();
    let script = "import os
for path, name in (('/proc/self/fd/0', 'x1'), ('/dev/stdin', 'x2')):
    try:
        os.link(path, name, follow_symlinks=True)
        print(name, 'linked')
    except OSError as e:
        print(name, e)
";
    let out = output(
        env.sandgate("workspace-write")
            .args(["--", "python3", "-c", script])
            .stdin(Stdio::from(std::fs::File::open(&file).unwrap())),
    );
    let links = std::fs::metadata(&file).unwrap().nlink();
    assert_eq!(links, 1, "the host file was linked: {}", show(&out));
    assert!(!env.ws.join("x1").exists() && !env.ws.join("x2").exists());
}

/// Attack: the caller opens a log read-write as stdin and sends stdout there too
/// (`sandgate cmd <>build.log >&0`). stdout becomes a relay pipe, but "another inherited
/// descriptor of the same file" gets the pipe only above fd 2: fd 0 is the file opened
/// anew, read-write, and `ftruncate(0, 0)` wipes what the log held — which the README says
/// a regular file given as output never lets the command do. (The caller did hand over
/// fd 0 read-write: a weak case, kept so the claim's edge is on record.) Should fail: the
/// log keeps what it held.
#[test]
fn redteam_stdin_opened_read_write_on_the_output_file_cannot_truncate_it() {
    let env = TestEnv::new();
    let log = env.outside.join("build.log");
    for mode in ["read-only", "workspace-write"] {
        std::fs::write(&log, "kept-line\n").unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&log)
            .unwrap();
        let out = output(
            env.sandgate(mode)
                .args([
                    "--",
                    "python3",
                    "-c",
                    "import os, sys\ntry:\n    os.ftruncate(0, 0); sys.stderr.write('truncated\\n')\nexcept OSError as e:\n    sys.stderr.write('%s\\n' % e)",
                ])
                .stdin(Stdio::from(
                    file.try_clone().unwrap(),
                ))
                .stdout(Stdio::from(file)),
        );
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            text.starts_with("kept-line\n"),
            "{mode}: the log now holds {text:?}: {}",
            show(&out)
        );
    }
}

/// Attack: the caller's stdin pipe opened for writing through `/proc` by a process number
/// (`/proc/$$/fd/0`, `/proc/self/task/$$/fd/0`) rather than `/proc/self/fd/0`: a shell
/// that feeds its script to sandgate through that pipe would run what was written after
/// the call. Should fail under both backends: nothing reaches the pipe.
#[test]
fn redteam_the_stdin_pipe_cannot_be_written_by_a_process_number() {
    use std::io::Read;
    use std::os::fd::AsFd;
    let env = TestEnv::new();
    for backend in [vec![], vec!["--backend", "landlock"]] {
        let (r, w) = nix::unistd::pipe().unwrap();
        let mut kept = std::fs::File::from(r.as_fd().try_clone_to_owned().unwrap());
        let script =
            "for p in /proc/$$/fd/0 /proc/self/task/$$/fd/0 /proc/self/fd/0 /dev/stdin; do \
                      echo 'touch /tmp/pwned' > $p 2>/dev/null; done; echo done";
        let out = output(
            env.sandgate("workspace-write")
                .args(&backend)
                .args(["--", "/bin/sh", "-c", script])
                .stdin(std::process::Stdio::from(r)),
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "done",
            "{}",
            show(&out)
        );
        drop(w);
        let mut left = String::new();
        kept.read_to_string(&mut left).unwrap();
        assert_eq!(
            left, "",
            "{backend:?}: written into the caller's stdin pipe"
        );
    }
}
