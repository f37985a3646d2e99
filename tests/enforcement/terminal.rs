//! The terminal (issue #2, acceptance 6 and process behaviour): it passes through so an
//! interactive program works, and TIOCSTI cannot push keystrokes into it.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};

use crate::support::*;

/// Runs sandgate with a fresh pty as its controlling terminal and stdio (via `setsid -c`),
/// types `input`, and returns the exit status and everything the terminal showed.
fn on_pty(env: &TestEnv, mode: &str, argv: &[&str], input: &[u8]) -> (Option<i32>, String) {
    let pty = nix::pty::openpty(None, None).unwrap_or_else(|e| panic!("openpty: {e}"));
    let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap_or_else(|e| panic!("{e}")));
    let mut cmd = Command::new("setsid");
    cmd.arg("-c")
        .arg(sandgate())
        .args(["--sandbox", mode, "--workspace"])
        .arg(&env.ws)
        .arg("--")
        .args(argv);
    cmd.current_dir(&env.ws)
        .env_remove("TMPDIR")
        .stdin(slave(&pty.slave))
        .stdout(slave(&pty.slave))
        .stderr(slave(&pty.slave));
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{e}"));
    // Every copy of the slave must close here, or the master never reads EOF.
    drop(cmd);
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    master.write_all(input).unwrap_or_else(|e| panic!("{e}"));
    let mut reader = master.try_clone().unwrap_or_else(|e| panic!("{e}"));
    let collector = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        // EIO once every slave fd is closed.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&out).into_owned()
    });
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    (status.code(), collector.join().unwrap_or_default())
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
