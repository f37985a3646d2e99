//! Red team, round 6: the three changes of this round — a regular file given as stdout or
//! stderr reaching the command as a pipe that sandgate copies (`exec/relay.rs`), the locks
//! a command takes on the caller's open files behind fds 0-2 (since then: the command gets
//! descriptions of its own, `exec/fresh.rs`), and the hidden-files rule failing closed on
//! what its bounds left unread and hiding the rest of a closed directory that holds a
//! needed path.
//!
//! Each test performs the attack as the sandboxed command (or the earlier call that
//! prepares it) would, as whichever uid runs the suite, and asserts that it fails, with a
//! control where one shows that the payload is real. An attack that gets through is a
//! failing test.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

use crate::support::*;

pub(super) const SECRET: &str = "REDTEAM6-SECRET";

/// Opens `path` for appending, as a shell's `>> path` does.
pub(super) fn append_to(path: &Path) -> File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub(super) fn clone_of(file: &File) -> File {
    file.try_clone().unwrap()
}

/// Keeps `path` from filling the disk while a test pours output into it: truncates it to
/// nothing every 20 ms until the returned flag is set (what was appended meanwhile only
/// has to pass through).
fn keep_truncating(path: &Path) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let path = path.to_path_buf();
    let handle = std::thread::spawn(move || {
        while !flag.load(Ordering::Relaxed) {
            if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&path) {
                let _ = f.set_len(0);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    (stop, handle)
}

// ---------------------------------------------------------------------------------------
// 1. A regular file as stdout or stderr: a pipe that sandgate copies.
// ---------------------------------------------------------------------------------------

/// The earlier call's kept listener: it takes one fd over a unix socket in the workspace
/// and, once the host says `go`, writes through it.
const LISTENER: &str = r#"import array, os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("relay.sock"); s.listen(1)
open("ready", "w").close()
c, _ = s.accept()
msg, anc, flags, addr = c.recvmsg(16, socket.CMSG_SPACE(4))
fds = array.array("i"); fds.frombytes(anc[0][2][:4])
open("received", "w").close()
for _ in range(500):
    if os.path.exists("go"):
        break
    time.sleep(0.02)
os.write(fds[0], b"INJECTED AFTER THE CALL\n")
open("written", "w").close()
time.sleep(1)
"#;

/// The later call's command: it hands its stdout (the relay's pipe) to the listener.
const HAND_OVER: &str = r#"import array, socket
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); c.connect("relay.sock")
c.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [1]).tobytes())])
print("handed over")
"#;

/// Attack: a call that keeps nothing hands its stdout to a process an earlier call kept.
/// The earlier call (`--keep-background`) leaves a listener on a unix socket in the
/// workspace (a connect there is allowed); the later one, run as `sandgate … > build.log`
/// without `--keep-background`, sends its fd 1 — the relay's pipe — over the socket with
/// `SCM_RIGHTS` and exits. Every process of the later call is gone, but the pipe's write
/// end lives on in the kept process, so sandgate leaves its detached copier running and
/// the kept process can append to `build.log` whenever it likes after the call returned
/// (after the user read the log: a fake "all tests passed", or gigabytes). Should fail: a
/// call that did not ask to keep anything leaves nothing running, and its output file is
/// complete when sandgate returns (README: "all of it before sandgate returns; a kept
/// process's later output too" — this call kept none).
#[test]
fn redteam_round6_a_call_that_keeps_nothing_leaves_no_copier_for_its_log() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    env.put("listener.py", LISTENER, 0o644);
    env.put("hand_over.py", HAND_OVER, 0o644);
    let listener_mark = unique_mark("rt6-listener");
    let call_mark = unique_mark("rt6-handing-call");
    // The earlier call keeps its listener; where nothing can be kept (no PID namespace,
    // the landlock backend), it is still running instead, which serves the attack alike.
    let keeps = !landlock_backend();
    let mut earlier = env.sandgate("workspace-write");
    if keeps {
        earlier.arg("--keep-background");
    }
    let mut earlier = earlier
        .args(["--", "/bin/sh", "-c"])
        .arg(format!(
            "python3 listener.py {listener_mark} </dev/null >/dev/null 2>&1 & \
             i=0; while [ ! -e ready ] && [ $i -lt 250 ]; do sleep 0.02; i=$((i+1)); done; \
             echo started; {}",
            if keeps { "" } else { "wait" }
        ))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut started = String::new();
    if let Some(out) = earlier.stdout.as_mut() {
        use std::io::BufRead;
        let _ = std::io::BufReader::new(out).read_line(&mut started);
    }
    let log = env.outside.join("build.log");
    std::fs::write(&log, "").unwrap();
    let out = output(
        env.sandgate("workspace-write")
            .args(["--", "python3", "hand_over.py", &call_mark])
            .stdout(Stdio::from(append_to(&log))),
    );
    let received = wait_for(Duration::from_secs(3), || env.ws.join("received").exists());
    // What still runs of the later call: sandgate's copier carries its command line.
    let left = processes_marked(&call_mark);
    std::fs::write(env.ws.join("go"), "").unwrap();
    let written = wait_for(Duration::from_secs(3), || env.ws.join("written").exists());
    std::thread::sleep(Duration::from_millis(300));
    let after = std::fs::read_to_string(&log).unwrap_or_default();
    env.stop_kept();
    kill_marked(&listener_mark);
    kill_marked(&call_mark);
    let _ = earlier.kill();
    let _ = earlier.wait();
    assert_eq!(started, "started\n", "control: the listener did not start");
    assert_status(&out, 0);
    let mut failures = vec![];
    if received && !left.is_empty() {
        failures.push(format!(
            "the call kept nothing, yet processes of it still run after it returned \
             (sandgate's copier, held open by another call's kept process): pids {left:?}"
        ));
    }
    if written && after.contains("INJECTED") {
        failures.push(format!(
            "another call's kept process appended to this call's log after it returned: \
             {after:?}"
        ));
    }
    assert_none(failures);
}

/// The lines of `text` that are one digit (what the payload wrote; sandgate's own notes,
/// which may share the file, left out), each with its newline.
fn digits(text: &str) -> String {
    text.lines()
        .filter(|l| l.len() == 1 && l.as_bytes()[0].is_ascii_digit())
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Attack on completeness and order: stdout and stderr going to one file. `>>log 2>>log`
/// (two open file descriptions of the same file, as `cmd >>log 2>>log` or two `exec`s of
/// a script make them) gets two pipes, and sandgate copies each round the whole of
/// stdout's pipe before stderr's, so `1, 2, 3, 4` written alternately lands `1 3 2 4`.
/// And inside a sandbox, where `kcmp` is refused, a nested `sandgate … >out 2>&1` cannot
/// tell that fds 1 and 2 share one description and splits them the same way. Should fail:
/// the README promises the copy "in order", and a log whose error lines moved away from the
/// output that led to them misleads whoever reads it.
#[test]
fn redteam_round6_stdout_and_stderr_to_one_file_keep_their_order() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let script = "echo 1; echo 2 >&2; echo 3; echo 4 >&2";
    let expected = "1\n2\n3\n4\n";
    let mut failures = vec![];
    for mode in ["full-access", "read-only", "workspace-write"] {
        let log = env.outside.join(format!("two-{mode}.log"));
        let out = output(
            env.sandgate(mode)
                .args(["--", "/bin/sh", "-c", script])
                .stdout(Stdio::from(append_to(&log)))
                .stderr(Stdio::from(append_to(&log))),
        );
        assert_status(&out, 0);
        let got = digits(&std::fs::read_to_string(&log).unwrap_or_default());
        if mode == "full-access" {
            assert_eq!(got, expected, "control: the shell's own order");
        } else if got != expected {
            failures.push(format!(
                "{mode}, `>>log 2>>log`: the file holds {got:?}, written as {expected:?}"
            ));
        }
    }
    let inner = sandgate_inside();
    let nested = format!(
        "'{}' --sandbox workspace-write -- /bin/sh -c '{script}' >out.log 2>&1; cat out.log",
        inner.display()
    );
    let out = env.sh("workspace-write", &nested);
    let got = digits(&String::from_utf8_lossy(&out.stdout));
    if got != expected {
        failures.push(format!(
            "nested `sandgate … >out 2>&1`: the file holds {got:?}, written as {expected:?}"
        ));
    }
    assert_none(failures);
}

/// Attack: reach the caller's log through a second descriptor of it. A script that logs
/// to fd 3 (`exec 3>>build.log`) and points a command's output there (`sandgate cmd >&3`)
/// hands sandgate the same open file description as fd 1 and fd 3; sandgate relays fd 1
/// through a pipe but passes fd 3 as it is, so the command clears what the log held with
/// `ftruncate(3)` and writes over it. Should fail: "a regular file as stdout or stderr
/// never reaches the command at all". Holds: an inherited fd of the same file gets the
/// same pipe.
#[test]
fn redteam_round6_a_duplicate_of_the_log_does_not_reach_the_command() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let payload = "import os\ntry:\n    os.ftruncate(3, 0); os.write(3, b'FORGED\\n'); print('truncated')\nexcept OSError as e:\n    print('refused', e)\n";
    let mut failures = vec![];
    for mode in ["full-access", "read-only", "workspace-write"] {
        let log = env.outside.join(format!("{mode}.log"));
        std::fs::write(&log, "EARLIER BUILD OUTPUT\n").unwrap();
        let sandgate = {
            let mut cmd = env.sandgate(mode);
            cmd.args(["--", "python3", "-c", payload]);
            cmd
        };
        // `"$@" 3>&1`: the shell's fd 3 is a duplicate of its stdout, the log.
        let mut wrapper = Command::new("/bin/sh");
        wrapper.args(["-c", "\"$@\" 3>&1", "sh"]);
        let out = output(behind(wrapper, &sandgate).stdout(Stdio::from(append_to(&log))));
        let after = std::fs::read_to_string(&log).unwrap_or_default();
        if mode == "full-access" {
            assert!(
                !after.contains("EARLIER"),
                "control: the command could not truncate through fd 3: {after:?} {}",
                show(&out)
            );
        } else if !after.starts_with("EARLIER BUILD OUTPUT\n") {
            failures.push(format!(
                "{mode}: the command rewrote the caller's log through fd 3: {after:?}"
            ));
        }
    }
    assert_none(failures);
}

/// The command's side of the relay: every way back to the file behind its stdout. Its
/// fds (`/proc/self/fd`, the standard ones and any other), a reopen of `/dev/stdout` and
/// `/proc/self/fd/1` for writing with `O_TRUNC`, `ftruncate(1)`, `lseek(1)`, a `flock` on
/// it, init's fds (`/proc/1/fd`). Should fail (and holds): the command sees only a pipe, the
/// log keeps what it held, and what the command wrote is appended after it, all of it.
#[test]
fn redteam_round6_the_command_finds_no_way_back_to_the_log() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let payload = r#"import fcntl, os, sys
log = sys.argv[1]
seen = []
for d in ("/proc/self/fd", "/proc/1/fd"):
    try:
        for n in os.listdir(d):
            try:
                if os.readlink(os.path.join(d, n)) == log:
                    seen.append(d + "/" + n)
            except OSError:
                pass
    except OSError:
        pass
for path in ("/dev/stdout", "/proc/self/fd/1", log):
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        st = os.fstat(fd)
        if os.path.samestat(st, os.stat(log)):
            seen.append("reopened " + path)
        os.close(fd)
    except OSError:
        pass
for name, op in (("ftruncate", lambda: os.ftruncate(1, 0)), ("lseek", lambda: os.lseek(1, 0, 0)),
                 ("flock", lambda: fcntl.flock(1, fcntl.LOCK_EX | fcntl.LOCK_NB))):
    try:
        op()
        if name != "flock":
            seen.append(name)
    except OSError:
        pass
sys.stderr.write("SEEN " + repr(seen) + "\n")
sys.stdout.write("x" * 3000000 + "\nEND\n")
"#;
    let mut failures = vec![];
    for mode in ["read-only", "workspace-write"] {
        let log = env.outside.join(format!("{mode}.log"));
        std::fs::write(&log, "BEFORE\n").unwrap();
        let out = output(
            env.sandgate(mode)
                .args(["--", "python3", "-c", payload])
                .arg(&log)
                .stdout(Stdio::from(append_to(&log))),
        );
        assert_status(&out, 0);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !stderr.contains("SEEN []") {
            failures.push(format!("{mode}: the command reached the log: {stderr}"));
        }
        let after = std::fs::read_to_string(&log).unwrap_or_default();
        let expected = format!("BEFORE\n{}\nEND\n", "x".repeat(3_000_000));
        if after != expected {
            failures.push(format!(
                "{mode}: the log is not what it held plus all the command wrote ({} bytes, \
                 starts {:?}, ends {:?})",
                after.len(),
                &after[..after.len().min(12)],
                &after[after.len().saturating_sub(12)..]
            ));
        }
    }
    assert_none(failures);
}

/// A kept writer that never lets the pipe run dry: it enlarges the pipe to 1 MiB and fills
/// it with `splice` from `/dev/zero` (no copy of its own), in three processes, for
/// `argv[1]` seconds.
const FLOODER: &str = r#"import fcntl, os, sys, time
try:
    fcntl.fcntl(1, 1031, 1 << 20)
except OSError:
    pass
zero = os.open("/dev/zero", os.O_RDONLY)
end = time.time() + float(sys.argv[1])
n = 0
while True:
    try:
        os.splice(zero, 1, 1 << 20)
    except OSError:
        break
    n += 1
    if n % 16 == 0 and time.time() > end:
        break
"#;

/// Attack: make sandgate hang in its last drain. Once the command has ended, sandgate
/// copies "everything the pipes hold" before it returns, reading until the pipe is empty;
/// processes the call keeps (`--keep-background`) that write without pause could keep it
/// from ever being empty, so that sandgate never returns — with its signals blocked, so
/// that neither Ctrl-C nor `kill` ends it. Should fail (and holds here: sandgate's copy
/// outruns three writers splicing into a 1 MiB pipe on this machine, and it returns within
/// the half second the command took): with `--keep-background` sandgate "returns at once
/// with the command's status".
#[test]
fn redteam_round6_a_kept_writer_does_not_hold_sandgate_up() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    env.put("flooder.py", FLOODER, 0o644);
    let mark = unique_mark("rt6-flooder");
    let log = env.outside.join("flood.log");
    std::fs::write(&log, "").unwrap();
    let (stop, truncating) = keep_truncating(&log);
    let started = Instant::now();
    // Waited for itself, not for its output: the kept writers hold no pipe of the test's.
    let status = env
        .sandgate("read-only")
        .args(["--keep-background", "--", "/bin/sh", "-c"])
        .arg(format!(
            "for i in 1 2 3; do python3 flooder.py 3 {mark} </dev/null 2>/dev/null & done; sleep 0.5"
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::from(append_to(&log)))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let took = started.elapsed();
    // The writers end by themselves after 3 s; then the copier finds its pipe closed.
    let gone = wait_for(Duration::from_secs(8), || {
        processes_marked(&mark).is_empty()
    });
    stop.store(true, Ordering::Relaxed);
    let _ = truncating.join();
    env.stop_kept();
    kill_marked(&mark);
    assert_eq!(status.code(), Some(0));
    assert!(
        took < Duration::from_secs(2),
        "sandgate returned only after {took:?}, held up by the kept writers"
    );
    assert!(gone, "the kept writers and the copier outlived their 3 s");
}

/// Attack: starve the wait loop. The command writes to its regular-file stdout as fast as
/// it can (`cat /dev/zero`), so that sandgate's loop always has output to copy, and runs
/// past `--timeout 1s`. Should fail (and holds): sandgate copies a bounded amount per
/// round, sends SIGTERM at 1 s and SIGKILL two seconds later, and exits 124 well within
/// 5 s.
#[test]
fn redteam_round6_a_flooding_command_still_meets_its_time_limit() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let log = env.outside.join("timeout.log");
    std::fs::write(&log, "").unwrap();
    let (stop, truncating) = keep_truncating(&log);
    let started = Instant::now();
    let out = output(
        env.sandgate("read-only")
            .args([
                "--timeout",
                "1s",
                "--",
                "/bin/sh",
                "-c",
                "trap '' TERM; cat /dev/zero",
            ])
            .stdout(Stdio::from(append_to(&log))),
    );
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let _ = truncating.join();
    assert_status(&out, 124);
    assert!(
        took < Duration::from_secs(5),
        "a 1 s limit took {took:?} with output pouring in"
    );
}

// ---------------------------------------------------------------------------------------
// 2. Locks on the caller's open files behind fds 0-2.
// ---------------------------------------------------------------------------------------

/// Python that takes a lock of `kind` on fd 0: `flock` or an open file description's
/// record lock.
fn lock_stdin(kind: &str) -> &'static str {
    match kind {
        "flock" => "fcntl.flock(0, fcntl.LOCK_EX)",
        // A read lock: the caller's stdin is open for reading only.
        _ => "fcntl.fcntl(0, fcntl.F_OFD_SETLK, struct.pack('hhqqi', fcntl.F_RDLCK, 0, 0, 0, 0))",
    }
}

fn can_lock_as(kind: &str) -> fn(&Path) -> bool {
    match kind {
        "flock" => host_can_lock,
        _ => host_can_record_lock,
    }
}

/// Attack: a kept process takes the lock after sandgate has put the caller's files back,
/// and then exits. The call asks for `--keep-background`; its command forks a child that
/// waits half a second — sandgate has returned by then, its locks dropped — locks stdin (the
/// open file description the caller keeps: the user's terminal for the whole session, a
/// script's `exec <input`) and exits. Nothing is kept running any more (`sandgate ps` lists
/// nothing), yet the lock belongs to the description, which the caller still holds, so it
/// stays — and the next call, which finds the description locked at its start, leaves it
/// so. Should fail: a lock that outlives every process of the call is beyond what the
/// call asked to keep. Holds: the command gets stdin opened anew, and the lock on its own
/// description ends with the kept process.
#[test]
fn redteam_round6_a_kept_process_lock_on_the_callers_stdin_outlives_it() {
    if !require_full_enforcement() || keeping_is_refused(&TestEnv::new()) {
        return;
    }
    let env = TestEnv::new();
    let file = env.outside.join("input.txt");
    std::fs::write(&file, "input\n").unwrap();
    let mut failures = vec![];
    for kind in ["flock", "ofd"] {
        let _ = std::fs::remove_file(env.ws.join("locked"));
        let payload = format!(
            "import fcntl, os, struct, time\n\
             if os.fork() == 0:\n\
             \x20   time.sleep(0.5)\n\
             \x20   {}\n\
             \x20   open('locked', 'w').close()\n\
             \x20   os._exit(0)\n\
             print('started')\n",
            lock_stdin(kind)
        );
        // The caller's description, kept open here as a shell keeps its terminal.
        let kept = File::open(&file).unwrap();
        let out = output(
            env.sandgate("workspace-write")
                .args(["--keep-background", "--", "python3", "-c", &payload])
                .stdin(Stdio::from(clone_of(&kept))),
        );
        assert_status(&out, 0);
        let locked = wait_for(Duration::from_secs(5), || env.ws.join("locked").exists());
        // The kept process has exited: the namespace empties and its init leaves.
        std::thread::sleep(Duration::from_millis(300));
        let free = can_lock_as(kind)(&file);
        // A later call with the same stdin, keeping nothing.
        let later = output(
            env.sandgate("read-only")
                .args(["--", "true"])
                .stdin(Stdio::from(clone_of(&kept))),
        );
        let free_later = can_lock_as(kind)(&file);
        drop(kept);
        env.stop_kept();
        assert_status(&later, 0);
        assert!(locked, "control: the kept process did not lock ({kind})");
        if !free || !free_later {
            failures.push(format!(
                "{kind}: the lock a kept process took on the caller's stdin outlived it \
                 (free after it exited: {free}; after a later call: {free_later})"
            ));
        }
    }
    assert_none(failures);
}

/// Attack: pass the lock from one call to another running beside it (an agent's parallel
/// tool calls, `sandgate a & sandgate b` in one terminal), neither keeping anything. Call A
/// locks its stdin and waits; call B starts while the lock is held — so B's sandgate
/// records the description as locked and will leave it alone — and waits for A to end (A's
/// sandgate drops A's lock, as it should); then B takes the lock itself and exits. Should
/// fail: no process of either call is left, and the caller's description must be free.
/// Holds: each call's command locks a description of its own.
#[test]
fn redteam_round6_a_lock_passed_between_two_calls_does_not_outlive_them() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let file = env.outside.join("shared-input.txt");
    std::fs::write(&file, "input\n").unwrap();
    let wait = |name: &str| {
        format!(
            "for _ in range(500):\n\
             \x20   if os.path.exists('{name}'): break\n\
             \x20   time.sleep(0.02)\n"
        )
    };
    let first = format!(
        "import fcntl, os, time\nfcntl.flock(0, fcntl.LOCK_EX)\nopen('a-locked', 'w').close()\n{}",
        wait("b-started")
    );
    let second = format!(
        "import fcntl, os, time\nopen('b-started', 'w').close()\n{}fcntl.flock(0, fcntl.LOCK_EX)\nprint('b locked')\n",
        wait("a-done")
    );
    let kept = File::open(&file).unwrap();
    let mut a = env
        .sandgate("workspace-write")
        .args(["--", "python3", "-c", &first])
        .stdin(Stdio::from(clone_of(&kept)))
        .spawn()
        .unwrap();
    let a_locked = wait_for(Duration::from_secs(5), || env.ws.join("a-locked").exists());
    let b = env
        .sandgate("workspace-write")
        .args(["--", "python3", "-c", &second])
        .stdin(Stdio::from(clone_of(&kept)))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = a.wait();
    std::fs::write(env.ws.join("a-done"), "").unwrap();
    let b_out = b.wait_with_output().unwrap();
    let free = host_can_lock(&file);
    drop(kept);
    assert!(a_locked, "control: call A did not lock");
    assert!(
        String::from_utf8_lossy(&b_out.stdout).contains("b locked"),
        "control: call B did not lock: {}",
        show(&b_out)
    );
    assert!(
        free,
        "two calls that kept nothing left the caller's stdin locked after both ended"
    );
}

/// Breakage: sandgate drops a lock the caller itself holds. The caller runs a call in the
/// background with its stdin (`sandgate … <&3 &`) and meanwhile locks that description
/// itself (`flock 3`), as a script serialises its own steps on a file; sandgate, which found
/// it unlocked at the start, unlocks it at the end — the caller's lock with it. A lock the
/// caller held before the call is kept (the control). Should fail: sandgate may drop only
/// what the command took. Holds: the command's stdin is a description of its own, and
/// sandgate leaves the caller's alone.
#[test]
fn redteam_round6_sandgate_does_not_drop_a_lock_the_caller_took_meanwhile() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let file = env.outside.join("callers.lock");
    std::fs::write(&file, "").unwrap();
    // Control: held before the call, held after it.
    let held = Flock::lock(File::open(&file).unwrap(), FlockArg::LockExclusiveNonblock)
        .unwrap_or_else(|(_, e)| panic!("{e}"));
    let out = output(
        env.sandgate("read-only")
            .args(["--", "true"])
            .stdin(Stdio::from(clone_of(&held))),
    );
    assert_status(&out, 0);
    assert!(
        !host_can_lock(&file),
        "control: a lock held before the call was dropped"
    );
    drop(held);
    // The lock taken while the call runs.
    let kept = File::open(&file).unwrap();
    let mut call = env
        .sandgate("read-only")
        .args(["--", "sleep", "1"])
        .stdin(Stdio::from(clone_of(&kept)))
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let held =
        Flock::lock(kept, FlockArg::LockExclusiveNonblock).unwrap_or_else(|(_, e)| panic!("{e}"));
    let _ = call.wait();
    let dropped = host_can_lock(&file);
    drop(held);
    assert!(
        !dropped,
        "sandgate dropped the lock its caller took on the same description during the call"
    );
}
