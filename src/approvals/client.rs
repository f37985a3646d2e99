//! The server's clients on its unix socket: `list`, `allow`, `reject`, and `watch`'s
//! requests. Each request is one HTTP/1.1 exchange on a fresh connection, made by hyper.

use std::path::{Path, PathBuf};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

use super::board::{BoardView, Decision, Who};
use super::socket::{self, SocketError};

/// The largest answer read from the server (a board of 64 pending questions of up to
/// 64 KiB each would be larger: the server's own limits keep real boards far below).
const MAX_REPLY: usize = 16 * 1024 * 1024;

/// Why a client request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Unreachable(#[from] SocketError),
    #[error("the server at {socket} failed: {why}")]
    Broken { socket: PathBuf, why: String },
    /// The server refused; the message is its own.
    #[error("{0}")]
    Refused(String),
}

/// A client of the server at one socket.
pub struct Client {
    socket: PathBuf,
    runtime: tokio::runtime::Runtime,
}

impl Client {
    pub fn new(socket: &Path) -> Result<Client, ClientError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ClientError::Broken {
                socket: socket.to_owned(),
                why: e.to_string(),
            })?;
        Ok(Client {
            socket: socket.to_owned(),
            runtime,
        })
    }

    /// The board now, or (with `since`) once it has changed from that version.
    pub fn board(&self, since: Option<u64>) -> Result<BoardView, ClientError> {
        let path = match since {
            Some(v) => format!("/questions?since={v}"),
            None => "/questions".to_owned(),
        };
        let value = self.request(Method::GET, &path, None)?;
        serde_json::from_value(value).map_err(|e| self.broken(&e.to_string()))
    }

    /// Answers the question `id` (or the one whose id starts with it); returns its whole id.
    pub fn answer(&self, id: &str, decision: Decision, by: Who) -> Result<String, ClientError> {
        if id.is_empty()
            || !id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(ClientError::Refused(format!(
                "no question has the id {id:?}"
            )));
        }
        let body = json!({ "decision": decision, "by": by });
        let reply = self.request(Method::POST, &format!("/questions/{id}"), Some(body))?;
        reply
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| self.broken("the answer names no question"))
    }

    fn broken(&self, why: &str) -> ClientError {
        ClientError::Broken {
            socket: self.socket.clone(),
            why: why.to_owned(),
        }
    }

    /// One exchange; a 4xx/5xx with an `error` message is the server's refusal.
    fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, ClientError> {
        let stream = socket::connect(&self.socket)?;
        let (status, bytes) = self
            .runtime
            .block_on(exchange(stream, method, path, body))
            .map_err(|e| self.broken(&e))?;
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|_| self.broken(&format!("HTTP {status} with a body that is not JSON")))?;
        if status.is_success() {
            return Ok(value);
        }
        match value.get("error").and_then(Value::as_str) {
            Some(message) => Err(ClientError::Refused(message.to_owned())),
            None => Err(self.broken(&format!("HTTP {status}"))),
        }
    }
}

async fn exchange(
    stream: std::os::unix::net::UnixStream,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Result<(StatusCode, Bytes), String> {
    stream.set_nonblocking(true).map_err(|e| e.to_string())?;
    let stream = tokio::net::UnixStream::from_std(stream).map_err(|e| e.to_string())?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let reply = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = reply.status();
    let bytes = Limited::new(reply.into_body(), MAX_REPLY)
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, bytes))
}
