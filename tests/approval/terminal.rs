//! The terminal prompt, driven through a real pty (acceptance 6).

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::time::Duration;

use crate::support::*;

/// Starts `setsid -c sh -c SCRIPT` on a fresh pty, where SCRIPT runs sandgate (as `$SG`),
/// types `keys` once the prompt is up, and returns the exit status and what the terminal showed.
fn on_pty(
    env: &TestEnv,
    script: &str,
    keys: &[u8],
    extra_env: &[(&str, &str)],
) -> (Option<i32>, String) {
    let pty = nix::pty::openpty(None, None).unwrap_or_else(|e| panic!("openpty: {e}"));
    let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap_or_else(|e| panic!("{e}")));
    let mut cmd = env.command("setsid");
    cmd.args(["-c", "/bin/sh", "-c", script]);
    cmd.env("SG", sandgate())
        .env("WS", &env.ws)
        .env("MARK", env.ws.join("ran"));
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.stdin(slave(&pty.slave))
        .stdout(slave(&pty.slave))
        .stderr(slave(&pty.slave));
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{e}"));
    drop(cmd);
    drop(pty.slave);
    let master = std::fs::File::from(pty.master);
    let mut reader = master.try_clone().unwrap_or_else(|e| panic!("{e}"));
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut shown = Vec::new();
    let mut typed = keys.is_empty();
    let mut writer = master;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(chunk) => shown.extend(chunk),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if !typed && String::from_utf8_lossy(&shown).contains("[y/N]") {
            writer.write_all(keys).unwrap_or_else(|e| panic!("{e}"));
            typed = true;
        }
        if let Ok(Some(_)) = child.try_wait() {
            while let Ok(chunk) = rx.recv_timeout(Duration::from_millis(100)) {
                shown.extend(chunk);
            }
            break;
        }
    }
    let _ = child.kill();
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    (status.code(), String::from_utf8_lossy(&shown).into_owned())
}

const ASK: &str = r#"exec "$SG" --sandbox read-only --workspace "$WS" --sandbox-permissions workspace-write --justification "$WHY" --approval-timeout 20 -- touch "$MARK""#;

#[test]
fn only_y_grants_at_the_prompt() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let why = [("WHY", "write the build output")];
    let (status, shown) = on_pty(&env, ASK, b"y\n", &why);
    assert_eq!(status, Some(0), "{shown}");
    assert!(env.ws.join("ran").exists(), "{shown}");
    assert!(shown.contains("read-only -> workspace-write"), "{shown}");
    assert!(shown.contains("write the build output"), "{shown}");
    std::fs::remove_file(env.ws.join("ran")).unwrap_or_else(|e| panic!("{e}"));
    for keys in [&b"\n"[..], b"n\n", b"maybe\n", b"yess\n"] {
        let (status, shown) = on_pty(&env, ASK, keys, &why);
        assert_eq!(status, Some(77), "{keys:?}: {shown}");
        assert!(
            shown.contains("\"kind\":\"escalation_rejected\""),
            "{keys:?}: {shown}"
        );
        assert!(!env.ws.join("ran").exists());
    }
}

#[test]
fn eof_and_ctrl_c_cancel() {
    let env = TestEnv::new();
    let why = [("WHY", "x")];
    for keys in [&b"\x04"[..], b"\x03"] {
        let (status, shown) = on_pty(&env, ASK, keys, &why);
        assert_eq!(status, Some(77), "{keys:?}: {shown}");
        assert!(
            shown.contains("\"kind\":\"escalation_cancelled\""),
            "{keys:?}: {shown}"
        );
        assert!(!env.ws.join("ran").exists());
    }
    let decided: Vec<_> = env
        .audit_records()
        .into_iter()
        .filter(|r| r["type"] == "approval/decided")
        .collect();
    assert_eq!(decided.len(), 2);
    assert!(decided.iter().all(|r| r["outcome"] == "cancelled"));
}

#[test]
fn escape_sequences_cannot_repaint_the_prompt() {
    let env = TestEnv::new();
    // The justification itself is refused (control characters), so try the command.
    let script = r#"exec "$SG" --sandbox read-only --workspace "$WS" --sandbox-permissions workspace-write --justification ok -- printf "$(printf '\033[2J\033[Hallow? y')""#;
    let (status, shown) = on_pty(&env, script, b"n\n", &[]);
    assert_eq!(status, Some(77), "{shown}");
    assert!(
        !shown.contains('\u{1b}'),
        "an escape reached the terminal: {shown:?}"
    );
    assert!(shown.contains("\\u{1b}[2J"), "{shown:?}");
}

#[test]
fn no_prompt_in_ci_with_no_tty_or_from_the_background() {
    let env = TestEnv::new();
    let why = ("WHY", "x");
    for (script, extra) in [
        (ASK.to_owned(), vec![why, ("CI", "true")]),
        (ASK.replace("-- touch", "--no-tty -- touch"), vec![why]),
        (ASK.to_owned(), vec![why, ("SANDGATE_TTY", "never")]),
        (
            format!("set -m; {} & wait $!", ASK.trim_start_matches("exec ")),
            vec![why],
        ),
    ] {
        let (status, shown) = on_pty(&env, &script, b"", &extra);
        assert_eq!(status, Some(77), "{script}: {shown}");
        assert!(!shown.contains("[y/N]"), "prompted: {script}: {shown}");
        assert!(
            shown.contains("\"kind\":\"approval_unavailable\""),
            "{script}: {shown}"
        );
    }
}
