//! The HTTP side of the proxy: absolute-URI `http://` requests are forwarded on a fresh
//! upstream connection, `CONNECT host:port` becomes a byte tunnel. hyper parses both.

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

use super::{Blocked, Gate, REQUEST_TIME};

type Body = BoxBody<Bytes, hyper::Error>;

pub(super) async fn serve(stream: TcpStream, gate: Arc<Gate>, slot: OwnedSemaphorePermit) {
    // A tunnel outlives the HTTP connection it was opened on (hyper hands the socket over),
    // so it keeps a share of the connection's slot.
    let slot = Arc::new(slot);
    let service = hyper::service::service_fn(move |req| {
        let gate = gate.clone();
        let slot = slot.clone();
        async move { Ok::<_, Infallible>(handle(req, gate, slot).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(REQUEST_TIME)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
}

async fn handle(
    req: Request<Incoming>,
    gate: Arc<Gate>,
    slot: Arc<OwnedSemaphorePermit>,
) -> Response<Body> {
    if req.method() == Method::CONNECT {
        tunnel(req, gate, slot).await
    } else {
        forward(req, gate).await
    }
}

/// `CONNECT host:port`: checks and connects first, answers 200 only once the upstream
/// connection exists, then copies bytes both ways until either side closes.
async fn tunnel(
    req: Request<Incoming>,
    gate: Arc<Gate>,
    slot: Arc<OwnedSemaphorePermit>,
) -> Response<Body> {
    let Some((host, Some(port))) = req
        .uri()
        .authority()
        .map(|a| (a.host().to_string(), a.port_u16()))
    else {
        return text(
            StatusCode::BAD_REQUEST,
            "CONNECT takes host:port, as in CONNECT example.com:443",
        );
    };
    let mut upstream = match gate.open(&host, port).await {
        Ok(upstream) => upstream,
        Err(blocked) => return answer(blocked),
    };
    tokio::spawn(async move {
        let _slot = slot;
        if let Ok(upgraded) = hyper::upgrade::on(req).await {
            let mut client = TokioIo::new(upgraded);
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        }
    });
    Response::new(empty())
}

/// An absolute-URI `http://` request: checked, connected, and sent on upstream in origin
/// form, with Host naming the URL's host and the hop-by-hop and proxy headers removed.
async fn forward(req: Request<Incoming>, gate: Arc<Gate>) -> Response<Body> {
    let uri = req.uri().clone();
    let authority =
        match (uri.scheme_str(), uri.authority()) {
            (Some("http"), Some(authority)) => authority.clone(),
            (Some("https"), _) => {
                return text(
                    StatusCode::BAD_REQUEST,
                    "https:// goes through CONNECT (set HTTPS_PROXY to this proxy)",
                )
            }
            (None, _) => return text(
                StatusCode::BAD_REQUEST,
                "this is sandgate's proxy: send it proxy requests (http://host/path or CONNECT)",
            ),
            (Some(scheme), _) => {
                return text(
                    StatusCode::BAD_REQUEST,
                    &format!("the proxy forwards http:// URLs only, not {scheme}://"),
                )
            }
        };
    let host = authority.host().to_string();
    let port = authority.port_u16().unwrap_or(80);
    let upstream = match gate.open(&host, port).await {
        Ok(upstream) => upstream,
        Err(blocked) => return answer(blocked),
    };

    let (mut parts, body) = req.into_parts();
    let origin_form = uri.path_and_query().map_or("/", |pq| pq.as_str());
    parts.uri = match origin_form.parse::<Uri>() {
        Ok(uri) => uri,
        Err(_) => return text(StatusCode::BAD_REQUEST, "the request target is not a URL"),
    };
    parts.version = hyper::Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    // Host names the URL's authority (without user info), whatever the client wrote
    // there (RFC 9112 §3.2.2): the host that was checked is the one the origin serves, not
    // another site behind the same address (a CDN's, say) named only in the header.
    let host_header = match authority.port() {
        Some(port) => format!("{}:{port}", authority.host()),
        None => authority.host().to_string(),
    };
    match HeaderValue::from_str(&host_header) {
        Ok(value) => {
            parts.headers.insert(header::HOST, value);
        }
        Err(_) => return text(StatusCode::BAD_REQUEST, "the URL's host is not a host"),
    }
    let request = Request::from_parts(parts, body);

    let (mut sender, connection) =
        match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
            Ok(pair) => pair,
            Err(e) => return bad_gateway(&host, port, &e),
        };
    tokio::spawn(connection);
    match sender.send_request(request).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, body.boxed())
        }
        Err(e) => bad_gateway(&host, port, &e),
    }
}

/// Removes the headers that describe one hop (RFC 9110 §7.6.1) — those named in
/// `Connection` too — and every `Proxy-*` header: they were meant for this proxy (its
/// credentials among them), not for the origin server or the client.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        HeaderName::from_static("keep-alive"),
    ] {
        headers.remove(name);
    }
    let proxy_headers: Vec<HeaderName> = headers
        .keys()
        .filter(|name| name.as_str().starts_with("proxy-"))
        .cloned()
        .collect();
    for name in proxy_headers {
        headers.remove(name);
    }
}

/// The client's answer when no upstream connection was made.
fn answer(blocked: Blocked) -> Response<Body> {
    match blocked {
        Blocked::Refused(refusal) => text(StatusCode::FORBIDDEN, &refusal.reason),
        Blocked::BadHost(message) => text(StatusCode::BAD_REQUEST, &message),
        Blocked::Unreachable { message, .. } => text(StatusCode::BAD_GATEWAY, &message),
    }
}

fn bad_gateway(host: &str, port: u16, error: &hyper::Error) -> Response<Body> {
    text(
        StatusCode::BAD_GATEWAY,
        &format!("{host}:{port} did not answer the request: {error}"),
    )
}

/// A response with one line of text, the way every answer of the proxy's own is made.
fn text(status: StatusCode, line: &str) -> Response<Body> {
    let line = line.replace(|c: char| c.is_control(), " ");
    let body = format!("sandgate proxy: {line}\n");
    let mut response = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed()
}
