//! `--notify-cmd`: tells the user about each new question through a command of theirs (a
//! desktop notification, a message to a phone).

use std::io::Write;
use std::process::{Command, Stdio};

use super::board::QuestionView;

/// Runs `sh -c COMMAND` with the question as JSON on its stdin, on a thread of its own so
/// a slow or stuck command never holds up the server. The question's text reaches the
/// command only on stdin, never in its arguments or environment.
pub fn send(command: &str, question: &QuestionView) {
    let Ok(json) = serde_json::to_vec(question) else {
        return;
    };
    let command = command.to_owned();
    let spawned = std::thread::Builder::new()
        .name("notify".into())
        .spawn(move || {
            let child = Command::new("/bin/sh")
                .arg("-c")
                .arg(&command)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn();
            let mut child = match child {
                Ok(child) => child,
                Err(e) => {
                    crate::say!("sandgate approvals: cannot run the notify command: {e}");
                    return;
                }
            };
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.write_all(&json);
            }
            match child.wait() {
                Ok(status) if status.success() => {}
                Ok(status) => crate::say!("sandgate approvals: the notify command {status}"),
                Err(e) => crate::say!("sandgate approvals: the notify command: {e}"),
            }
        });
    if let Err(e) = spawned {
        crate::say!("sandgate approvals: cannot run the notify command: {e}");
    }
}
