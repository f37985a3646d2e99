//! `sandgate approvals`: a ready answerer for escalation questions. A server holds each
//! question an asking sandgate sends to its unix socket (the approval endpoint protocol)
//! until a person answers it in the browser panel, with `allow`/`reject`, or at the
//! `watch` prompt. When nothing else is configured, an asking sandgate finds a server of
//! the caller's at the default socket by itself (see [`listening_default`]).

mod board;
mod client;
mod notify;
mod serve;
mod socket;
mod watch;

use std::path::{Path, PathBuf};

use crate::approval::neutralise;
use crate::cli::ApprovalsAction;
use board::{Decision, QuestionView, Who};
use client::Client;

pub use socket::default_path as default_socket;

/// The default socket, if a server of the caller's listens there: the answerer an asking
/// sandgate uses when no endpoint and no approver program is configured.
pub fn listening_default() -> Option<PathBuf> {
    let path = socket::default_path()?;
    socket::connect(&path).ok().map(|_| path)
}

/// Runs one `sandgate approvals …` action; fails with why it could not.
pub fn run(action: ApprovalsAction) -> Result<(), String> {
    let socket_of = |given: Option<PathBuf>| {
        given
            .map(|p| socket::absolute(&p))
            .or_else(socket::default_path)
            .ok_or_else(|| socket::SocketError::NoDefault.to_string())
    };
    match action {
        ApprovalsAction::Serve {
            socket,
            http,
            notify_cmd,
        } => socket_of(socket.socket).and_then(|socket| {
            serve::serve(serve::Options {
                socket,
                http,
                notify_cmd,
            })
            .map_err(|e| e.to_string())
        }),
        ApprovalsAction::List { socket, json } => {
            socket_of(socket.socket).and_then(|socket| list(&socket, json))
        }
        ApprovalsAction::Allow { socket, id } => {
            socket_of(socket.socket).and_then(|socket| answer(&socket, &id, Decision::AllowedOnce))
        }
        ApprovalsAction::Reject { socket, id } => {
            socket_of(socket.socket).and_then(|socket| answer(&socket, &id, Decision::Rejected))
        }
        ApprovalsAction::Watch { socket } => {
            socket_of(socket.socket).and_then(|socket| watch::watch(&socket))
        }
    }
}

fn list(socket: &Path, json: bool) -> Result<(), String> {
    let board = Client::new(socket)
        .and_then(|client| client.board(None))
        .map_err(|e| e.to_string())?;
    if json {
        let text = serde_json::to_string_pretty(&board).map_err(|e| e.to_string())?;
        crate::out!("{text}");
        return Ok(());
    }
    if board.pending.is_empty() {
        crate::out!("no question is pending");
    }
    for question in &board.pending {
        crate::out!("{}\n", describe(question));
    }
    if !board.decided.is_empty() {
        crate::out!("recent:");
    }
    for q in &board.decided {
        crate::out!("  {:<12} {}  {}", q.state, q.id, q.shown.command);
    }
    Ok(())
}

fn answer(socket: &Path, id: &str, decision: Decision) -> Result<(), String> {
    let whole = Client::new(socket)
        .and_then(|client| client.answer(id, decision, Who::Cli))
        .map_err(|e| e.to_string())?;
    crate::out!("{}: {whole}", decision.as_str());
    Ok(())
}

/// A question for a terminal, from the facts as they are shown to a person.
fn describe(q: &QuestionView) -> String {
    let shown = &q.shown;
    format!(
        "question {}  (asked {} s ago, {} s left)\n  command:       {}\n  cwd:           {}\n  workspace:     {}\n  sandbox:       {} -> {}\n  justification: {}",
        q.id,
        q.age_s,
        q.expires_in_s,
        shown.command,
        shown.cwd,
        shown.workspace,
        neutralise(&q.standing.mode),
        neutralise(&q.requested.mode),
        shown.justification,
    )
}
