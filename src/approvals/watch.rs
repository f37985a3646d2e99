//! `sandgate approvals watch`: a prompt in a second terminal. Each question is shown as it
//! arrives, one at a time, with the same rule as sandgate's own terminal prompt: only
//! typing the fresh code shown allows the call once; any other line rejects it. Input typed
//! before a question appeared is discarded, so nothing typed ahead answers it. A question
//! that ends meanwhile (answered elsewhere, withdrawn, expired) is said to have ended.

use std::collections::HashSet;
use std::io::{IsTerminal, Read};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::termios::{tcflush, FlushArg};

use super::board::{BoardView, Decision, Who};
use super::client::Client;
use crate::approval::Outcome;

/// A question on screen and the code that allows it.
struct Shown {
    id: String,
    code: String,
}

/// Runs the prompt until end of input (Ctrl-D) or until the server goes away.
/// Fails with why the server could not be reached or the prompt not kept.
pub fn watch(socket: &Path) -> Result<(), String> {
    let client = Client::new(socket).map_err(|e| e.to_string())?;
    let board = client.board(None).map_err(|e| e.to_string())?;
    crate::out!(
        "sandgate approvals: watching {}; each question is shown as it arrives (Ctrl-D ends)",
        socket.display()
    );
    let changes = follow(socket.to_owned(), board.version);
    let mut pending = board.pending;
    let mut seen: HashSet<String> = HashSet::new();
    let mut shown: Option<Shown> = None;
    let mut typed: Vec<u8> = Vec::new();
    let stdin = std::io::stdin();
    loop {
        if shown.is_none() {
            if let Some(question) = pending.iter().find(|q| !seen.contains(&q.id)) {
                let Ok(code) = crate::approval::fresh_code() else {
                    return Err("no randomness for the confirmation code (/dev/urandom)".into());
                };
                // Lines typed before this question appeared are not answers to it.
                if stdin.is_terminal() {
                    let _ = tcflush(stdin.as_fd(), FlushArg::TCIFLUSH);
                }
                typed.clear();
                crate::out!("\n{}", super::describe(question));
                crate::out!(
                    "To allow this one call, type the code {code} and press Enter; any other \
                     answer rejects it."
                );
                seen.insert(question.id.clone());
                shown = Some(Shown {
                    id: question.id.clone(),
                    code,
                });
            }
        }
        let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
        let ready = poll(&mut fds, PollTimeout::from(200u16)).unwrap_or(0) > 0;
        while let Ok(change) = changes.try_recv() {
            let board = change?;
            if let Some(on_screen) = &shown {
                if !board.pending.iter().any(|q| q.id == on_screen.id) {
                    let state = board
                        .decided
                        .iter()
                        .find(|q| q.id == on_screen.id)
                        .map_or("ended", |q| q.state.as_str());
                    crate::out!(
                        "The question {} ended before an answer here: {state}",
                        on_screen.id
                    );
                    shown = None;
                }
            }
            pending = board.pending;
        }
        if !ready {
            continue;
        }
        let mut buf = [0u8; 1024];
        let n = match stdin.lock().read(&mut buf) {
            Ok(0) | Err(_) => return Ok(()),
            Ok(n) => n,
        };
        typed.extend_from_slice(&buf[..n]);
        while let Some(end) = typed.iter().position(|b| *b == b'\n' || *b == b'\r') {
            let line: Vec<u8> = typed.drain(..=end).collect();
            let Some(on_screen) = shown.take() else {
                continue;
            };
            let text = String::from_utf8_lossy(&line[..line.len() - 1]);
            let decision = match crate::approval::judge(&text, &on_screen.code) {
                Outcome::AllowedOnce => Decision::AllowedOnce,
                _ => Decision::Rejected,
            };
            match client.answer(&on_screen.id, decision, Who::Watch) {
                Ok(id) => crate::out!("{}: {id}", decision.as_str()),
                Err(e) => crate::out!("not answered: {e}"),
            }
            typed.clear();
        }
    }
}

/// Follows the board on a thread of its own: each new version, or the reason it stopped.
fn follow(socket: PathBuf, mut version: u64) -> mpsc::Receiver<Result<BoardView, String>> {
    let (tx, rx) = mpsc::channel();
    let _ = std::thread::Builder::new()
        .name("follow".into())
        .spawn(move || {
            let client = match Client::new(&socket) {
                Ok(client) => client,
                Err(e) => {
                    let _ = tx.send(Err(e.to_string()));
                    return;
                }
            };
            loop {
                let change = client.board(Some(version));
                if let Ok(board) = &change {
                    version = board.version;
                }
                let stop = change.is_err();
                if tx.send(change.map_err(|e| e.to_string())).is_err() || stop {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
    rx
}
