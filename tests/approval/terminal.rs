//! The terminal prompt, driven through a real pty: only the code it shows grants, and
//! through an agent's link it is not asked at all unless SANDGATE_TTY=always.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::*;

/// What the test types at the prompt.
#[derive(Clone, Copy, Debug)]
enum Keys<'a> {
    /// Nothing: the call must end without anyone typing.
    Nothing,
    /// These bytes, once the prompt is up.
    Typed(&'a [u8]),
    /// The code the prompt shows, read off the screen, and Enter.
    TheCode,
    /// The code in lower case with blanks around it.
    TheCodeLoosely,
    /// The code shown with its first character changed: a near miss.
    NearMiss,
    /// These bytes at once, before sandgate is even started; the code once the prompt is up.
    AheadThenCode(&'a [u8]),
}

/// The line the prompt ends with, where the answer is typed.
const PROMPT_END: &str = "\ncode: ";

/// Returns the code a finished prompt on `screen` shows.
fn code_on(screen: &str) -> Option<String> {
    let (_, after) = screen.split_once("type the code ")?;
    let code: String = after
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    (screen.contains(PROMPT_END) && code.len() == 5).then_some(code)
}

/// Starts `setsid -c sh -c SCRIPT` on a fresh pty, where SCRIPT runs sandgate (as `$SG`),
/// types `keys` once the prompt is up, and returns the exit status and what the terminal showed.
fn on_pty(
    env: &TestEnv,
    script: &str,
    keys: Keys,
    extra_env: &[(&str, &str)],
) -> (Option<i32>, String) {
    let pty = nix::pty::openpty(None, None).unwrap_or_else(|e| panic!("openpty: {e}"));
    let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
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
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    drop(pty.slave);
    let master = std::fs::File::from(pty.master);
    let mut reader = master.try_clone().unwrap();
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
    let mut writer = master;
    if let Keys::AheadThenCode(early) = keys {
        writer.write_all(early).unwrap();
    }
    let mut typed = matches!(keys, Keys::Nothing);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(chunk) => shown.extend(chunk),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        let code = code_on(&String::from_utf8_lossy(&shown));
        if let (false, Some(code)) = (typed, code) {
            let answer = match keys {
                Keys::Typed(bytes) => bytes.to_vec(),
                Keys::TheCode | Keys::AheadThenCode(_) => format!("{code}\n").into_bytes(),
                Keys::TheCodeLoosely => format!("  {} \n", code.to_lowercase()).into_bytes(),
                Keys::NearMiss => {
                    let first = if code.starts_with('A') { 'C' } else { 'A' };
                    format!("{first}{}\n", &code[1..]).into_bytes()
                }
                Keys::Nothing => vec![],
            };
            writer.write_all(&answer).unwrap();
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
    let status = child.wait().unwrap();
    (status.code(), String::from_utf8_lossy(&shown).into_owned())
}

/// The `outcome` of the last `approval/decided` audit record.
fn last_outcome(env: &TestEnv) -> serde_json::Value {
    env.audit_records()
        .into_iter()
        .rfind(|r| r["type"] == "approval/decided")
        .map(|r| r["outcome"].clone())
        .unwrap_or_default()
}

const ASK: &str = r#"exec "$SG" --sandbox read-only --workspace "$WS" --sandbox-permissions workspace-write --justification "$WHY" --approval-timeout 20 -- touch "$MARK""#;

#[test]
fn only_the_code_shown_grants_and_y_alone_rejects() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let why = [("WHY", "write the build output")];
    let ran = env.ws.join("ran");
    let (status, shown) = on_pty(&env, ASK, Keys::TheCode, &why);
    assert_eq!(status, Some(0), "{shown}");
    assert!(ran.exists(), "the granted command did not run: {shown}");
    assert!(shown.contains("read-only -> workspace-write"), "{shown}");
    assert!(shown.contains("write the build output"), "{shown}");
    assert!(shown.contains("y or yes does not allow it"), "{shown}");
    assert_eq!(last_outcome(&env), "allowed-once");
    let first_code = code_on(&shown);
    std::fs::remove_file(&ran).unwrap();
    for keys in [
        Keys::Typed(b"y\n"),
        Keys::Typed(b"yes\n"),
        Keys::Typed(b"Y\n"),
        Keys::Typed(b"\n"),
        Keys::Typed(b"n\n"),
        Keys::NearMiss,
    ] {
        let (status, shown) = on_pty(&env, ASK, keys, &why);
        assert_eq!(status, Some(77), "{keys:?}: {shown}");
        assert!(
            shown.contains("\"kind\":\"escalation_rejected\""),
            "{keys:?}: {shown}"
        );
        assert!(shown.contains("sandgate: rejected"), "{keys:?}: {shown}");
        assert_eq!(last_outcome(&env), "rejected", "{keys:?}");
        assert!(!ran.exists(), "{keys:?}: the command ran: {shown}");
        assert_ne!(code_on(&shown), first_code, "a code was shown twice");
    }
    // In lower case, with blanks around it, the code is still the code.
    let (status, shown) = on_pty(&env, ASK, Keys::TheCodeLoosely, &why);
    assert_eq!(status, Some(0), "{shown}");
    assert!(ran.exists(), "{shown}");
}

#[test]
fn what_was_typed_before_the_prompt_is_not_an_answer() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    // `y` and Enter wait in the terminal's input while sandgate starts (as after a forged
    // prompt): they are discarded, and the code typed at the real prompt grants.
    let script = format!("sleep 1; {ASK}");
    let (status, shown) = on_pty(&env, &script, Keys::AheadThenCode(b"y\n"), &[("WHY", "x")]);
    assert_eq!(status, Some(0), "{shown}");
    assert!(env.ws.join("ran").exists(), "{shown}");
}

#[test]
fn eof_and_ctrl_c_cancel() {
    let env = TestEnv::new();
    let why = [("WHY", "x")];
    for keys in [Keys::Typed(b"\x04"), Keys::Typed(b"\x03")] {
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
    let (status, shown) = on_pty(&env, script, Keys::Typed(b"n\n"), &[]);
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
        let (status, shown) = on_pty(&env, &script, Keys::Nothing, &extra);
        assert_eq!(status, Some(77), "{script}: {shown}");
        assert!(!shown.contains(PROMPT_END), "prompted: {script}: {shown}");
        assert!(
            shown.contains("\"kind\":\"approval_unavailable\""),
            "{script}: {shown}"
        );
    }
}

/// `sandgate install-links` in DIR, plus a link named `bash`, as an agent's set-up has them.
fn agent_links(env: &TestEnv) -> std::path::PathBuf {
    let dir = env.root.join("bin");
    let out = output(Command::new(sandgate()).arg("install-links").arg(&dir));
    assert_status(&out, 0);
    std::os::unix::fs::symlink(sandgate(), dir.join("bash")).unwrap();
    dir
}

/// The standing mode and the approval timeout for a link, which takes no sandgate flags.
const LINK_ENV: [(&str, &str); 2] = [
    ("SANDGATE_SANDBOX", "read-only"),
    ("SANDGATE_APPROVAL_TIMEOUT", "20"),
];

/// A command string whose directive asks for workspace-write to create `ran`.
fn asking_command(env: &TestEnv) -> String {
    format!(
        "# sandgate: sandbox_permissions=workspace-write justification=\"write the build output\"\ntouch '{}'",
        env.ws.join("ran").display()
    )
}

#[test]
fn through_a_link_the_terminal_does_not_answer() {
    let env = TestEnv::new();
    let links = agent_links(&env);
    let links = links.to_string_lossy();
    let command = asking_command(&env);
    let mut vars = vec![("LINKS", &*links), ("CMDSTR", &*command)];
    vars.extend(LINK_ENV);
    for script in [
        r#"exec "$LINKS/bash" -c "$CMDSTR""#,
        r#"exec "$LINKS/sandgate-sh" -c "$CMDSTR""#,
        r#"exec "$LINKS/sandgate-prefix" "$CMDSTR""#,
        r#"exec "$SG" prefix "$CMDSTR""#,
    ] {
        let (status, shown) = on_pty(&env, script, Keys::Nothing, &vars);
        assert_eq!(status, Some(77), "{script}: {shown}");
        assert!(
            !shown.contains("asks to run with a wider sandbox") && !shown.contains(PROMPT_END),
            "prompted through a link: {script}: {shown}"
        );
        assert!(
            shown.contains("\"kind\":\"approval_unavailable\""),
            "{script}: {shown}"
        );
        assert!(shown.contains("SANDGATE_TTY=always"), "{script}: {shown}");
        assert_eq!(last_outcome(&env), "unavailable", "{script}");
        assert!(!env.ws.join("ran").exists(), "{script}: {shown}");
    }
}

#[test]
fn through_a_link_with_sandgate_tty_always_the_code_grants() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    let links = agent_links(&env);
    let links = links.to_string_lossy();
    let command = asking_command(&env);
    let mut vars = vec![
        ("LINKS", &*links),
        ("CMDSTR", &*command),
        ("SANDGATE_TTY", "always"),
    ];
    vars.extend(LINK_ENV);
    let script = r#"exec "$LINKS/bash" -c "$CMDSTR""#;
    let (status, shown) = on_pty(&env, script, Keys::Typed(b"y\n"), &vars);
    assert_eq!(status, Some(77), "{shown}");
    assert_eq!(last_outcome(&env), "rejected");
    assert!(!env.ws.join("ran").exists(), "{shown}");
    let (status, shown) = on_pty(&env, script, Keys::TheCode, &vars);
    assert_eq!(status, Some(0), "{shown}");
    assert!(shown.contains("write the build output"), "{shown}");
    assert_eq!(last_outcome(&env), "allowed-once");
    assert!(env.ws.join("ran").exists(), "{shown}");
}

#[test]
fn sandgate_by_its_own_name_in_shell_mode_is_a_persons_call() {
    if !require_full_enforcement() {
        return;
    }
    // `sandgate -c` is what a person types; only the links count as an agent.
    let env = TestEnv::new();
    let command = asking_command(&env);
    let mut vars = vec![("CMDSTR", &*command)];
    vars.extend(LINK_ENV);
    let (status, shown) = on_pty(&env, r#"exec "$SG" -c "$CMDSTR""#, Keys::TheCode, &vars);
    assert_eq!(status, Some(0), "{shown}");
    assert!(env.ws.join("ran").exists(), "{shown}");
}
