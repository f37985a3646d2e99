//! `sandgate approvals serve`: holds every question an asking sandgate sends until a person
//! answers it — through the clients on the unix socket or the browser panel — or until it
//! is withdrawn or expires.
//!
//! The server is its own long-running process, so unlike the asking side it may use
//! threads: it runs hyper on a single-threaded tokio runtime, plus one short thread per
//! notification. Each asker's question lives as long as the asker's HTTP exchange: the
//! answer is the reply, and when the asker hangs up (interrupted, killed, timed out) hyper
//! notices the closed connection and drops the exchange, which withdraws the question.
//!
//! Who may talk to it:
//! * the unix socket: the caller's own processes outside any sandbox — the directory is
//!   0700, the socket 0600, and every connection's peer is checked (same uid, not under a
//!   seccomp filter with no_new_privs, the mark of a sandboxed process; see `peer`);
//! * the panel port (loopback only): requests that name the loopback address in `Host`
//!   (no DNS rebinding) and carry the token printed at start. Decisions are POSTs with the
//!   token in a header, which a foreign page can neither read nor forge.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::watch;

use super::board::{AnswerRefused, AskRefused, Board, Decision, Naming, Who};
use super::{notify, socket};

/// The largest request body taken (a question, or an answer).
const MAX_BODY: usize = 64 * 1024;
/// How long a request's body may take to arrive once its headers have.
const BODY_TIME: Duration = Duration::from_secs(10);
/// How long a `?since=` request waits for a change before answering with the same board.
const LONG_POLL: Duration = Duration::from_secs(25);
/// How long an expired question's connection is held open: the asker reaches its own
/// deadline first and reports its question as cancelled, as it would with any endpoint.
const EXPIRY_GRACE: Duration = Duration::from_secs(5);
/// How many connections the panel port holds at once; more are closed as they come. The
/// port is open to every user on the machine, and each connection costs the server an fd:
/// without a bound, anyone could use them all up (reopening idle connections faster than
/// they time out), and the unix socket — the askers' way in — would take no connection.
const MAX_PANEL_CONNECTIONS: usize = 32;

/// What `serve` was asked to do.
pub struct Options {
    pub socket: PathBuf,
    pub http: Option<SocketAddr>,
    pub notify_cmd: Option<String>,
}

/// Why the server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Socket(#[from] socket::SocketError),
    #[error("the panel must listen on a loopback address (127.0.0.1:PORT), not {0}")]
    NotLoopback(SocketAddr),
    #[error("cannot listen on {addr}: {source}")]
    Http {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "sandgate approvals serve runs inside a sandbox here: an answerer inside a sandbox \
         would let sandboxed commands answer their own questions"
    )]
    Confined,
    #[error(
        "cannot make the panel's token: no randomness ({0}); a token that could be guessed \
         would let anyone on this machine answer"
    )]
    NoRandomness(std::io::Error),
    #[error("cannot start the server: {0}")]
    Runtime(std::io::Error),
}

/// The panel's secret and the one `Host` it answers to.
struct Panel {
    token: String,
    host: String,
}

struct Shared {
    board: Mutex<Board>,
    changed: watch::Sender<u64>,
    notify_cmd: Option<String>,
    panel: Option<Panel>,
}

impl Shared {
    fn board(&self) -> MutexGuard<'_, Board> {
        self.board
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Changes the board and wakes every watcher when its version moved.
    fn change<T>(&self, f: impl FnOnce(&mut Board) -> T) -> T {
        let mut board = self.board();
        let out = f(&mut board);
        let version = board.version();
        drop(board);
        self.changed.send_if_modified(|seen| {
            let moved = *seen != version;
            *seen = version;
            moved
        });
        out
    }
}

/// Runs the server until SIGINT or SIGTERM; the socket is removed on the way out.
pub fn serve(options: Options) -> Result<(), ServeError> {
    if crate::confinement::this_process() != Some(false) {
        return Err(ServeError::Confined);
    }
    crate::sys::ignore_sigpipe();
    let token = match options.http {
        Some(_) => Some(crate::approval::fresh_secret().map_err(ServeError::NoRandomness)?),
        None => None,
    };
    let panel_listener = match options.http {
        Some(addr) if !addr.ip().is_loopback() => return Err(ServeError::NotLoopback(addr)),
        Some(addr) => Some(
            std::net::TcpListener::bind(addr)
                .map_err(|source| ServeError::Http { addr, source })?,
        ),
        None => None,
    };
    let (unix_listener, placed) = socket::bind(&options.socket)?;

    let panel = match (&panel_listener, token) {
        (Some(listener), Some(token)) => {
            let addr = listener.local_addr().map_err(|source| ServeError::Http {
                addr: options.http.unwrap_or(([127, 0, 0, 1], 0).into()),
                source,
            })?;
            let panel = Panel {
                token,
                host: addr.to_string(),
            };
            crate::out!("http://{}/?token={}", panel.host, panel.token);
            Some(panel)
        }
        _ => None,
    };
    crate::out!("socket: {}", options.socket.display());

    let shared = Arc::new(Shared {
        board: Mutex::new(Board::default()),
        changed: watch::channel(0).0,
        notify_cmd: options.notify_cmd,
        panel,
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    let result = runtime.block_on(run(shared, unix_listener, panel_listener));
    placed.remove();
    result.map_err(ServeError::Runtime)
}

async fn run(
    shared: Arc<Shared>,
    unix: std::os::unix::net::UnixListener,
    panel: Option<std::net::TcpListener>,
) -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    unix.set_nonblocking(true)?;
    let unix = tokio::net::UnixListener::from_std(unix)?;
    let panel = match panel {
        Some(listener) => {
            listener.set_nonblocking(true)?;
            Some(tokio::net::TcpListener::from_std(listener)?)
        }
        None => None,
    };
    let panel_slots = Arc::new(tokio::sync::Semaphore::new(MAX_PANEL_CONNECTIONS));
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    loop {
        tokio::select! {
            _ = interrupt.recv() => return Ok(()),
            _ = terminate.recv() => return Ok(()),
            accepted = unix.accept() => {
                let Ok((stream, _)) = accepted else {
                    pause_after_failed_accept().await;
                    continue;
                };
                if let Err(why) = crate::confinement::check_peer(&stream) {
                    crate::say!("sandgate approvals: refused a connection on the socket: {why}");
                    continue;
                }
                let shared = shared.clone();
                connection(stream, (), move |req| on_socket(shared.clone(), req));
            }
            accepted = async {
                match &panel {
                    Some(listener) => listener.accept().await,
                    None => std::future::pending().await,
                }
            } => {
                let Ok((stream, _)) = accepted else {
                    pause_after_failed_accept().await;
                    continue;
                };
                let Ok(slot) = panel_slots.clone().try_acquire_owned() else {
                    drop(stream);
                    continue;
                };
                let shared = shared.clone();
                connection(stream, slot, move |req| on_panel(shared.clone(), req));
            }
        }
    }
}

/// A failed accept (out of fds, say) fails again at once: a short pause keeps the loop
/// from spinning while the condition lasts.
async fn pause_after_failed_accept() {
    tokio::time::sleep(Duration::from_millis(50)).await;
}

type Reply = Response<Full<Bytes>>;

/// Serves one connection (HTTP/1.1) on its own task, holding `slot` until it ends.
fn connection<S, H, F, Fut>(stream: S, slot: H, handle: F)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    H: Send + 'static,
    F: Fn(Request<Incoming>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Reply> + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let reply = handle(req);
        async move { Ok::<_, Infallible>(reply.await) }
    });
    tokio::spawn(async move {
        // `half_close(false)` (hyper's default, made explicit): a peer that closes its end
        // while its question is pending ends the exchange, which withdraws the question.
        let _ = hyper::server::conn::http1::Builder::new()
            .half_close(false)
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_secs(10))
            .serve_connection(TokioIo::new(stream), service)
            .await;
        drop(slot);
    });
}

/// The unix socket: the approval endpoint protocol at `/`, the clients' routes below.
async fn on_socket(shared: Arc<Shared>, req: Request<Incoming>) -> Reply {
    let path = req.uri().path().to_owned();
    match (req.method(), path.as_str()) {
        (&Method::POST, "/") => match body(req).await {
            Ok(bytes) => ask(shared, &bytes).await,
            Err(reply) => reply,
        },
        (&Method::GET, "/questions") => board(shared, since(&req)).await,
        (_, p) if p.starts_with("/questions/") => answer(shared, req, "/questions/", None).await,
        _ => error(StatusCode::NOT_FOUND, "no such route"),
    }
}

/// The panel port: the host and the token first, then the page and its API.
async fn on_panel(shared: Arc<Shared>, req: Request<Incoming>) -> Reply {
    let Some(panel) = &shared.panel else {
        return error(StatusCode::NOT_FOUND, "no panel");
    };
    if !names_the_panel(&req, &panel.host) {
        return error(
            StatusCode::FORBIDDEN,
            "the Host header must be the panel's loopback address",
        );
    }
    if !carries_token(&req, &panel.token) {
        return error(
            StatusCode::FORBIDDEN,
            "the panel's token is missing or wrong",
        );
    }
    let path = req.uri().path().to_owned();
    match (req.method(), path.as_str()) {
        (&Method::GET, "/") => page(),
        (&Method::GET, "/api/questions") => board(shared.clone(), since(&req)).await,
        (&Method::POST, p) if p.starts_with("/api/questions/") => {
            answer(shared.clone(), req, "/api/questions/", Some(Who::Panel)).await
        }
        (_, p) if p.starts_with("/api/questions/") => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "a decision is a POST with the token in X-Sandgate-Token",
        ),
        _ => error(StatusCode::NOT_FOUND, "no such page"),
    }
}

/// Whether the request names the panel's own address, and nothing else: one `Host`
/// header, and no other authority in an absolute-form target (which HTTP says wins over
/// `Host`).
fn names_the_panel(req: &Request<Incoming>, host: &str) -> bool {
    let mut hosts = req.headers().get_all(HOST).iter();
    let one = match (hosts.next(), hosts.next()) {
        (Some(only), None) => only.to_str().ok() == Some(host),
        _ => false,
    };
    one && req.uri().authority().is_none_or(|a| a.as_str() == host)
}

/// The token in `X-Sandgate-Token`, or in the query as `token=` (the panel's own URL).
fn carries_token(req: &Request<Incoming>, token: &str) -> bool {
    let header = req
        .headers()
        .get("x-sandgate-token")
        .and_then(|v| v.to_str().ok());
    let query = req
        .uri()
        .query()
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("token="));
    header.or(query).is_some_and(|given| same(given, token))
}

/// Compares in time that depends only on the lengths, not on where they differ.
fn same(given: &str, token: &str) -> bool {
    given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

fn since(req: &Request<Incoming>) -> Option<u64> {
    req.uri()
        .query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("since="))?
        .parse()
        .ok()
}

/// The panel page, with a fresh nonce for its inline script and style.
fn page() -> Reply {
    let Ok(nonce) = crate::approval::fresh_secret() else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "no randomness for the page's script nonce",
        );
    };
    let html = include_str!("panel.html").replace("{{NONCE}}", &nonce);
    let csp = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
         connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'"
    );
    let mut reply = Response::new(Full::new(Bytes::from(html)));
    let headers = reply.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if let Ok(csp) = HeaderValue::from_str(&csp) {
        headers.insert("content-security-policy", csp);
    }
    secure(reply)
}

/// Headers every answer carries: nothing cached, sniffed, framed or sent as a referrer.
fn secure(mut reply: Reply) -> Reply {
    let headers = reply.headers_mut();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    reply
}

fn reply_json(status: StatusCode, value: &serde_json::Value) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(value.to_string())));
    *reply.status_mut() = status;
    reply
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    secure(reply)
}

fn error(status: StatusCode, message: &str) -> Reply {
    reply_json(status, &json!({ "error": message }))
}

/// Reads a request's body: at most [`MAX_BODY`] bytes, within [`BODY_TIME`], so a client
/// that trickles one cannot hold a task and an fd for ever.
async fn body(req: Request<Incoming>) -> Result<Bytes, Reply> {
    let read = Limited::new(req.into_body(), MAX_BODY).collect();
    match tokio::time::timeout(BODY_TIME, read).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(_)) => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the body is unreadable or larger than 64 KiB",
        )),
        Err(_) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            "the body did not arrive in time",
        )),
    }
}

/// Withdraws the question when the asker's exchange ends without an answer: dropped by
/// hyper when the asker hangs up, or at the end of `ask` (where it changes nothing).
struct Withdraw {
    shared: Arc<Shared>,
    id: String,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        self.shared
            .change(|b| b.withdraw(&self.id, SystemTime::now()));
    }
}

/// An asker's question: held until it is answered or expires, or the asker hangs up.
async fn ask(shared: Arc<Shared>, bytes: &[u8]) -> Reply {
    let request: crate::approval::request::Request = match serde_json::from_slice(bytes) {
        Ok(request) => request,
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("not a question: {e}")),
    };
    let id = request.id.clone();
    let asked = shared.change(|b| b.ask(request, SystemTime::now()));
    let (decision, expires) = match asked {
        Ok(asked) => asked,
        Err(refused) => {
            let status = match refused {
                AskRefused::Invalid(_) => StatusCode::BAD_REQUEST,
                AskRefused::RepeatedId(_) => StatusCode::CONFLICT,
                AskRefused::Full => StatusCode::SERVICE_UNAVAILABLE,
            };
            return error(status, &refused.to_string());
        }
    };
    let _withdraw = Withdraw {
        shared: shared.clone(),
        id: id.clone(),
    };
    if let Some(command) = &shared.notify_cmd {
        if let Some(view) = shared.board().question(&id, SystemTime::now()) {
            notify::send(command, &view);
        }
    }
    let left = expires
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    tokio::select! {
        decision = decision => match decision {
            Ok(decision) => reply_json(
                StatusCode::OK,
                &json!({ "id": id, "decision": decision.as_str() }),
            ),
            Err(_) => error(StatusCode::GONE, "the question ended unanswered"),
        },
        () = tokio::time::sleep(left) => {
            shared.change(|b| b.expire(&id, SystemTime::now()));
            tokio::time::sleep(EXPIRY_GRACE).await;
            error(StatusCode::GATEWAY_TIMEOUT, "the question expired unanswered")
        }
    }
}

/// The board now, or (with `since`) as soon as it differs from that version.
async fn board(shared: Arc<Shared>, since: Option<u64>) -> Reply {
    if let Some(seen) = since {
        let mut changes = shared.changed.subscribe();
        let _ = tokio::time::timeout(LONG_POLL, changes.wait_for(|now| *now != seen)).await;
    }
    let view = shared.board().view(SystemTime::now());
    match serde_json::to_value(&view) {
        Ok(value) => reply_json(StatusCode::OK, &value),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// What a client sends to answer.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    decision: Decision,
    by: Option<Who>,
}

/// An answer to `ROUTE<id>`. The panel's answers are the panel's whatever they say, and
/// name their question by its whole id; on the socket a client names itself (`cli` unless
/// it says `watch`), and `cli` may give the start of an id.
async fn answer(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    route: &str,
    by: Option<Who>,
) -> Reply {
    if req.method() != Method::POST {
        return error(StatusCode::METHOD_NOT_ALLOWED, "a decision is a POST");
    }
    let id = match req.uri().path().strip_prefix(route) {
        Some(id) if !id.is_empty() && !id.contains('/') => id.to_owned(),
        _ => return error(StatusCode::NOT_FOUND, "no such route"),
    };
    let bytes = match body(req).await {
        Ok(bytes) => bytes,
        Err(reply) => return reply,
    };
    let answer: Answer = match serde_json::from_slice(&bytes) {
        Ok(answer) => answer,
        Err(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                r#"the body must be {"decision": "allowed-once"} or {"decision": "rejected"}"#,
            )
        }
    };
    let by = match (by, answer.by) {
        (Some(panel), _) => panel,
        (None, Some(Who::Watch)) => Who::Watch,
        (None, _) => Who::Cli,
    };
    // `watch` answers the question it showed, by the whole id it was given.
    let naming = match by {
        Who::Panel | Who::Watch => Naming::Whole,
        Who::Cli => Naming::WholeOrStart,
    };
    let decision = answer.decision;
    match shared.change(|b| b.answer(&id, naming, decision, by, SystemTime::now())) {
        Ok(id) => reply_json(
            StatusCode::OK,
            &json!({ "id": id, "decision": decision.as_str() }),
        ),
        Err(refused) => {
            let status = match refused {
                AnswerRefused::Unknown(_) => StatusCode::NOT_FOUND,
                AnswerRefused::Ambiguous(_) => StatusCode::BAD_REQUEST,
                AnswerRefused::Answered { .. }
                | AnswerRefused::Withdrawn(_)
                | AnswerRefused::Expired(_) => StatusCode::CONFLICT,
            };
            error(status, &refused.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same("abc123", "abc123"));
        for other in ["abc124", "abc12", "abc1234", "", "ABC123"] {
            assert!(!same(other, "abc123"), "{other}");
        }
    }

    #[test]
    fn the_panel_page_has_a_nonce_slot_for_every_inline_block() {
        let html = include_str!("panel.html");
        let scripts = html.matches("<script").count();
        let styles = html.matches("<style").count();
        assert_eq!(
            html.matches(r#"nonce="{{NONCE}}""#).count(),
            scripts + styles,
            "an inline block without the nonce is blocked by the page's CSP"
        );
    }
}
