//! Posting a JSON request to the approval endpoint and reading its reply.
//!
//! HTTP is done by `ureq` (3.x, default features off: plain `http://` only, no TLS stack).
//! One agent is built per call with a configuration that fits an approval round trip:
//!
//! * `timeout_global`: one deadline for the whole exchange (resolve, connect, send, headers
//!   and body), rather than per-phase limits that could add up to more than asked for;
//! * `max_redirects(0)`: a redirect is returned to the caller as is, never followed, so the
//!   request (and its bearer token) only ever goes to the configured endpoint;
//! * `http_status_as_error(false)`: 4xx/5xx are answers the caller interprets, not errors;
//! * `proxy(None)`: ureq otherwise honours `HTTP_PROXY`/`ALL_PROXY` from the environment,
//!   which would send approval traffic somewhere the policy author did not name.
//!
//! The unix-socket endpoint plugs into ureq's transport layer
//! ([`ureq::unversioned::transport`]): a [`Connector`] that dials the socket and a
//! [`Transport`] over the resulting `UnixStream`, so ureq still does all of the HTTP/1.1
//! framing and the same deadline applies. ureq marks that layer as not (yet) covered by
//! semver (breaking changes only in minor releases), so the dependency should be kept on
//! a `3.5` minor line. The socket is created with `nix` rather than `UnixStream::connect`
//! because a connect to a listener whose accept queue is full blocks in the kernel, and
//! std offers no way to bound that wait; `SO_SNDTIMEO` set before `connect` does.

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::libc::time_t;
use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockType, UnixAddr};
use nix::sys::time::TimeVal;
use ureq::config::Config;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, DefaultConnector, LazyBuffers, NextTimeout, Transport,
};
use ureq::{Agent, Timeout};

/// Where the approval endpoint lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `http://HOST:PORT/PATH`
    Http { url: String },
    /// `unix:/PATH/TO/SOCKET` — HTTP over a unix stream socket; the request path is `/`.
    Unix { socket: PathBuf },
}

/// The accepted spellings, repeated in every parse error so the user can fix it in one go.
const ACCEPTED_FORMS: &str = "expected http://HOST[:PORT][/PATH] or unix:/ABSOLUTE/SOCKET/PATH";

/// A string that is not one of the endpoint forms sandgate can talk to.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct EndpointParseError(String);

impl EndpointParseError {
    fn new(input: &str, reason: &str) -> Self {
        Self(format!(
            "invalid approval endpoint {input:?}: {reason}; {ACCEPTED_FORMS}"
        ))
    }
}

impl FromStr for Endpoint {
    type Err = EndpointParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(path) = s.strip_prefix("unix:") {
            let socket = PathBuf::from(path);
            // A relative path would depend on the working directory of whichever process
            // happens to connect, which is not something a policy should rely on.
            if !socket.is_absolute() {
                return Err(EndpointParseError::new(
                    s,
                    "`unix:` must be followed by an absolute path",
                ));
            }
            return Ok(Endpoint::Unix { socket });
        }
        if s.starts_with("http://") {
            // Validate now, so a typo is reported at startup and not at the first request.
            return match s.parse::<ureq::http::Uri>() {
                Ok(uri) if uri.host().is_some_and(|h| !h.is_empty()) => {
                    Ok(Endpoint::Http { url: s.to_owned() })
                }
                _ => Err(EndpointParseError::new(s, "not a valid http URL")),
            };
        }
        if s.starts_with("https://") {
            return Err(EndpointParseError::new(
                s,
                "https is not supported (sandgate is built without TLS); use http on a \
                 trusted link or a unix socket",
            ));
        }
        Err(EndpointParseError::new(s, "unrecognised scheme"))
    }
}

/// What went wrong talking to the endpoint.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// No complete reply before the deadline.
    #[error("approval endpoint did not reply in time")]
    Timeout,
    /// The body exceeded `max_body` bytes.
    #[error("approval endpoint reply is larger than allowed")]
    TooLarge,
    /// Anything else: refused, reset, closed mid-reply, malformed HTTP.
    #[error("approval endpoint: {0}")]
    Io(String),
}

impl From<ureq::Error> for TransportError {
    fn from(e: ureq::Error) -> Self {
        match e {
            ureq::Error::Timeout(_) => TransportError::Timeout,
            ureq::Error::BodyExceedsLimit(_) => TransportError::TooLarge,
            // Transports are meant to turn socket timeouts into `Error::Timeout`; this
            // catches any that slip through as plain I/O errors.
            ureq::Error::Io(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) =>
            {
                TransportError::Timeout
            }
            // ureq's Display would prefix this with "io: ", which tells the user nothing.
            ureq::Error::Io(e) => TransportError::Io(e.to_string()),
            other => TransportError::Io(other.to_string()),
        }
    }
}

/// Sends `body` (JSON) with `Content-Type: application/json` and, when `token` is Some,
/// `Authorization: Bearer <token>`.
///
/// Returns the HTTP status and the body. Redirects are NOT followed (a 302 is returned as
/// status 302). Non-2xx statuses are returned as `Ok((status, body))`, not errors. The whole
/// exchange (connect + send + receive) must finish before `timeout`, otherwise
/// `Err(Timeout)`. A body larger than `max_body` bytes → `Err(TooLarge)`, having read at
/// most one byte past the limit (none at all when `Content-Length` already says too much).
pub fn post_json(
    endpoint: &Endpoint,
    body: &[u8],
    token: Option<&str>,
    timeout: Duration,
    max_body: usize,
) -> Result<(u16, Vec<u8>), TransportError> {
    let config = Config::builder()
        .timeout_global(Some(timeout))
        .max_redirects(0)
        .http_status_as_error(false)
        .proxy(None)
        .build();
    let (agent, url) = match endpoint {
        Endpoint::Http { url } => (
            Agent::with_parts(config, DefaultConnector::new(), LiteralResolver),
            url.as_str(),
        ),
        // The host in the URL only ends up in the `Host` header: the connector ignores it.
        Endpoint::Unix { socket } => (
            Agent::with_parts(
                config,
                UnixConnector {
                    socket: socket.clone(),
                },
                NoResolver,
            ),
            "http://localhost/",
        ),
    };

    let mut request = agent.post(url).header("Content-Type", "application/json");
    if let Some(token) = token {
        // A token with a line break is rejected by ureq's header validation (→ Io), so it
        // cannot smuggle extra headers.
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    let mut response = request.send(body)?;
    let status = response.status().as_u16();

    let max = u64::try_from(max_body).unwrap_or(u64::MAX);
    let reply = response.body_mut();
    // An announced length over the limit needs no reading at all.
    if reply.content_length().is_some_and(|len| len > max) {
        return Err(TransportError::TooLarge);
    }
    // Otherwise ureq reads at most `max + 1` bytes and then fails with BodyExceedsLimit.
    let bytes = reply.with_config().limit(max).read_to_vec()?;
    Ok((status, bytes))
}

/// Resolver for http agents: an IP literal (the usual loopback endpoint) is used as is;
/// only a name goes to ureq's resolver. With a timeout set, ureq resolves on a thread of
/// its own even for a literal, and sandgate must be single-threaded again by the time it
/// forks the sandboxed command.
#[derive(Debug)]
struct LiteralResolver;

impl Resolver for LiteralResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let host = uri
            .host()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']');
        match host.parse::<std::net::IpAddr>() {
            Ok(ip) => {
                let port = uri.port_u16().unwrap_or(80);
                let mut addrs = self.empty();
                addrs.push(std::net::SocketAddr::new(ip, port));
                Ok(addrs)
            }
            Err(_) => DefaultResolver::default().resolve(uri, config, timeout),
        }
    }
}

/// Resolver for unix-socket agents: there is no host to look up, and a DNS query for a
/// placeholder name would be both pointless and a possible stall.
#[derive(Debug)]
struct NoResolver;

impl Resolver for NoResolver {
    fn resolve(
        &self,
        _uri: &ureq::http::Uri,
        _config: &Config,
        _timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        Ok(self.empty())
    }
}

/// Dials `socket` for every connection ureq asks for.
#[derive(Debug)]
struct UnixConnector {
    socket: PathBuf,
}

impl Connector for UnixConnector {
    type Out = UnixTransport;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let stream = connect_unix(&self.socket, details.timeout)?;
        let config = details.config;
        Ok(Some(UnixTransport {
            stream,
            buffers: LazyBuffers::new(config.input_buffer_size(), config.output_buffer_size()),
        }))
    }
}

/// Connects to `path`, giving up when `timeout` runs out.
fn connect_unix(path: &Path, timeout: NextTimeout) -> Result<UnixStream, ureq::Error> {
    let deadline = Deadline::new(timeout);
    let addr = UnixAddr::new(path).map_err(io::Error::from)?;
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(io::Error::from)?;
    loop {
        if let Some(left) = deadline.left()? {
            // A zero timeval means "wait forever", so never let the rest round down to it.
            let left = left.max(Duration::from_micros(1));
            let tv = TimeVal::new(
                left.as_secs().try_into().unwrap_or(time_t::MAX),
                left.subsec_micros().into(),
            );
            socket::setsockopt(&fd, sockopt::SendTimeout, &tv).map_err(io::Error::from)?;
        }
        match socket::connect(fd.as_raw_fd(), &addr) {
            Ok(()) => return Ok(UnixStream::from(fd)),
            // A signal interrupted the wait for the accept queue; the socket is still
            // unconnected, so try again with whatever time is left.
            Err(Errno::EINTR) => continue,
            // The accept queue stayed full until SO_SNDTIMEO expired.
            Err(Errno::EAGAIN) if deadline.at.is_some() => {
                return Err(ureq::Error::Timeout(deadline.reason))
            }
            Err(e) => return Err(io::Error::from(e).into()),
        }
    }
}

/// HTTP/1.1 bytes over a connected unix stream socket.
#[derive(Debug)]
struct UnixTransport {
    stream: UnixStream,
    buffers: LazyBuffers,
}

impl Transport for UnixTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let deadline = Deadline::new(timeout.for_write());
        let output = &self.buffers.output()[..amount];
        let mut written = 0;
        // Hand-rolled `write_all`, so every retry gets only the time that is left.
        while written < output.len() {
            self.stream.set_write_timeout(deadline.left()?)?;
            match self.stream.write(&output[written..]) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero).into()),
                Ok(n) => written += n,
                Err(e) => deadline.retry_or_fail(e)?,
            }
        }
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let deadline = Deadline::new(timeout.for_read());
        loop {
            self.stream.set_read_timeout(deadline.left()?)?;
            match self.stream.read(self.buffers.input_append_buf()) {
                Ok(n) => {
                    self.buffers.input_appended(n);
                    return Ok(n > 0);
                }
                Err(e) => deadline.retry_or_fail(e)?,
            }
        }
    }

    fn is_open(&mut self) -> bool {
        // Each agent makes exactly one request, so a connection is never reused.
        false
    }
}

/// The point in time ureq's `NextTimeout` refers to, fixed when an I/O step starts.
struct Deadline {
    at: Option<Instant>,
    reason: Timeout,
}

impl Deadline {
    fn new(timeout: NextTimeout) -> Self {
        let at = if timeout.after.is_not_happening() {
            None
        } else {
            Instant::now().checked_add(*timeout.after)
        };
        Self {
            at,
            reason: timeout.reason,
        }
    }

    /// Time left, or `Error::Timeout` once none is. (ureq's own `NextTimeout::not_zero`
    /// turns an exhausted budget into one more second, so it is not used here.)
    fn left(&self) -> Result<Option<Duration>, ureq::Error> {
        let Some(at) = self.at else { return Ok(None) };
        let left = at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ureq::Error::Timeout(self.reason));
        }
        Ok(Some(left))
    }

    /// `Ok` when the failed call should simply be retried (a signal interrupted it).
    /// Socket timeouts surface as `WouldBlock` on unix and become `Error::Timeout`.
    fn retry_or_fail(&self, e: io::Error) -> Result<(), ureq::Error> {
        match e.kind() {
            io::ErrorKind::Interrupted => Ok(()),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                Err(ureq::Error::Timeout(self.reason))
            }
            _ => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::net::TcpListener;
    use std::os::unix::net::UnixListener;
    use std::thread::{self, JoinHandle};

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    const SECOND: Duration = Duration::from_secs(1);
    const SHORT: Duration = Duration::from_millis(300);

    /// The request as the test server received it.
    #[derive(Debug)]
    struct Seen {
        head: String,
        body: Vec<u8>,
    }

    impl Seen {
        /// Value of header `name`, if the request carried it.
        fn header(&self, name: &str) -> Option<&str> {
            self.head.lines().skip(1).find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
            })
        }
    }

    type Server = JoinHandle<io::Result<Seen>>;

    /// Reads one request (head up to the blank line, then `Content-Length` bytes).
    fn read_request(stream: &mut impl Read) -> io::Result<Seen> {
        let mut raw = Vec::new();
        let mut byte = [0u8; 1];
        while !raw.ends_with(b"\r\n\r\n") {
            if stream.read(&mut byte)? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            raw.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&raw).into_owned();
        let mut seen = Seen {
            head,
            body: Vec::new(),
        };
        let len = seen
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        seen.body = vec![0; len];
        stream.read_exact(&mut seen.body)?;
        Ok(seen)
    }

    /// Serves one connection: reads the request, then lets `respond` write the reply.
    fn serve<S: Read + Write>(
        mut stream: S,
        respond: impl FnOnce(&mut S) -> io::Result<()>,
    ) -> io::Result<Seen> {
        let seen = read_request(&mut stream)?;
        respond(&mut stream)?;
        Ok(seen)
    }

    /// A one-shot HTTP server on 127.0.0.1; returns the endpoint and its thread.
    fn tcp_server(
        respond: impl FnOnce(&mut std::net::TcpStream) -> io::Result<()> + Send + 'static,
    ) -> io::Result<(Endpoint, Server)> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let url = format!("http://{}/approve", listener.local_addr()?);
        let server = thread::spawn(move || {
            let (stream, _) = listener.accept()?;
            // Never let a confused test hang the suite.
            stream.set_read_timeout(Some(5 * SECOND))?;
            serve(stream, respond)
        });
        Ok((Endpoint::Http { url }, server))
    }

    /// A one-shot HTTP server on a unix socket in `dir`.
    fn unix_server(
        dir: &Path,
        respond: impl FnOnce(&mut UnixStream) -> io::Result<()> + Send + 'static,
    ) -> io::Result<(Endpoint, Server)> {
        let socket = dir.join("approval.sock");
        let listener = UnixListener::bind(&socket)?;
        let server = thread::spawn(move || {
            let (stream, _) = listener.accept()?;
            stream.set_read_timeout(Some(5 * SECOND))?;
            serve(stream, respond)
        });
        Ok((Endpoint::Unix { socket }, server))
    }

    /// A responder that writes `raw` verbatim.
    fn reply(
        raw: impl AsRef<[u8]> + Send + 'static,
    ) -> impl FnOnce(&mut dyn Write) -> io::Result<()> + Send + 'static {
        move |stream| stream.write_all(raw.as_ref())
    }

    fn join(server: Server) -> io::Result<Seen> {
        server
            .join()
            .unwrap_or_else(|e| panic!("server thread panicked: {e:?}"))
    }

    #[test]
    fn ok_reply_and_what_the_server_saw() -> TestResult {
        let respond = reply(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"decision\":\"ok\"}",
        );
        let (endpoint, server) = tcp_server(move |s| respond(s))?;
        let body = br#"{"op":"open","path":"/etc/passwd"}"#;
        let (status, reply) = post_json(&endpoint, body, Some("s3cret"), SECOND, 1024)?;
        assert_eq!(status, 200);
        assert_eq!(reply, br#"{"decision":"ok"}"#);
        let seen = join(server)?;
        assert!(
            seen.head.starts_with("POST /approve HTTP/1.1\r\n"),
            "{}",
            seen.head
        );
        assert_eq!(seen.header("content-type"), Some("application/json"));
        assert_eq!(seen.header("authorization"), Some("Bearer s3cret"));
        assert_eq!(seen.body, body);
        Ok(())
    }

    #[test]
    fn server_error_is_a_reply_not_an_error() -> TestResult {
        let respond = reply("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops");
        let (endpoint, server) = tcp_server(move |s| respond(s))?;
        let (status, reply) = post_json(&endpoint, b"{}", None, SECOND, 1024)?;
        assert_eq!((status, reply.as_slice()), (500, &b"oops"[..]));
        join(server)?;
        Ok(())
    }

    #[test]
    fn redirect_is_returned_not_followed() -> TestResult {
        // If ureq followed this, it would hit a dead port and fail instead of returning 302.
        let dead = dead_port()?;
        let respond = reply(format!(
            "HTTP/1.1 302 Found\r\nLocation: http://{dead}/elsewhere\r\nContent-Length: 0\r\n\r\n"
        ));
        let (endpoint, server) = tcp_server(move |s| respond(s))?;
        let (status, reply) = post_json(&endpoint, b"{}", Some("t"), SECOND, 1024)?;
        assert_eq!(status, 302);
        assert!(reply.is_empty());
        join(server)?;
        Ok(())
    }

    #[test]
    fn silent_server_times_out() -> TestResult {
        // The server reads the request and then waits (up to 5 s) for the client to hang
        // up, without ever answering.
        let (endpoint, server) = tcp_server(|s| {
            let _ = s.read(&mut [0u8; 1]);
            Ok(())
        })?;
        let started = Instant::now();
        let result = post_json(&endpoint, b"{}", None, SHORT, 1024);
        let took = started.elapsed();
        assert!(matches!(result, Err(TransportError::Timeout)), "{result:?}");
        assert!(took >= SHORT && took < 2 * SECOND, "took {took:?}");
        join(server)?;
        Ok(())
    }

    #[test]
    fn slow_body_counts_against_the_same_deadline() -> TestResult {
        // Headers arrive at once, the body trickles: the deadline covers the body too.
        let (endpoint, server) = tcp_server(|s| {
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n")?;
            for _ in 0..20 {
                thread::sleep(Duration::from_millis(50));
                if s.write_all(b"x").is_err() {
                    break; // the client gave up, as it should
                }
            }
            Ok(())
        })?;
        let result = post_json(&endpoint, b"{}", None, SHORT, 1024);
        assert!(matches!(result, Err(TransportError::Timeout)), "{result:?}");
        join(server)?;
        Ok(())
    }

    #[test]
    fn connection_closed_mid_reply_is_io() -> TestResult {
        let respond = reply("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
        let (endpoint, server) = tcp_server(move |s| respond(s))?;
        let result = post_json(&endpoint, b"{}", None, SECOND, 1024);
        assert!(matches!(result, Err(TransportError::Io(_))), "{result:?}");
        join(server)?;
        Ok(())
    }

    #[test]
    fn announced_body_over_the_limit_is_too_large() -> TestResult {
        let (endpoint, server) = tcp_server(|s| {
            s.write_all(
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", 1 << 20).as_bytes(),
            )?;
            // The client may hang up before reading all of it; that is the point.
            let _ = s.write_all(&vec![b'a'; 1 << 20]);
            Ok(())
        })?;
        let result = post_json(&endpoint, b"{}", None, SECOND, 64 << 10);
        assert!(
            matches!(result, Err(TransportError::TooLarge)),
            "{result:?}"
        );
        join(server)?;
        Ok(())
    }

    #[test]
    fn unannounced_body_over_the_limit_is_too_large() -> TestResult {
        // No Content-Length: the body runs until close, so only counting can catch it.
        let (endpoint, server) = tcp_server(|s| {
            s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")?;
            let _ = s.write_all(&vec![b'a'; 1 << 20]);
            Ok(())
        })?;
        let result = post_json(&endpoint, b"{}", None, SECOND, 64 << 10);
        assert!(
            matches!(result, Err(TransportError::TooLarge)),
            "{result:?}"
        );
        join(server)?;
        Ok(())
    }

    #[test]
    fn body_of_exactly_the_limit_is_fine() -> TestResult {
        let respond = reply("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n0123456789");
        let (endpoint, server) = tcp_server(move |s| respond(s))?;
        let (status, reply) = post_json(&endpoint, b"{}", None, SECOND, 10)?;
        assert_eq!((status, reply.as_slice()), (200, &b"0123456789"[..]));
        join(server)?;
        Ok(())
    }

    /// An address nothing listens on: bind an ephemeral port, then let it go.
    fn dead_port() -> io::Result<std::net::SocketAddr> {
        TcpListener::bind("127.0.0.1:0")?.local_addr()
    }

    #[test]
    fn refused_tcp_connection_is_io() -> TestResult {
        let endpoint = Endpoint::Http {
            url: format!("http://{}/", dead_port()?),
        };
        let result = post_json(&endpoint, b"{}", None, SECOND, 1024);
        assert!(matches!(result, Err(TransportError::Io(_))), "{result:?}");
        Ok(())
    }

    #[test]
    fn missing_unix_socket_is_io() -> TestResult {
        let dir = tempfile::tempdir()?;
        let endpoint = Endpoint::Unix {
            socket: dir.path().join("nobody-home.sock"),
        };
        let result = post_json(&endpoint, b"{}", None, SECOND, 1024);
        assert!(matches!(result, Err(TransportError::Io(_))), "{result:?}");
        Ok(())
    }

    #[test]
    fn unix_socket_round_trip() -> TestResult {
        let dir = tempfile::tempdir()?;
        let respond = reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
        let (endpoint, server) = unix_server(dir.path(), move |s| respond(s))?;
        let (status, reply) = post_json(&endpoint, br#"{"q":1}"#, None, SECOND, 1024)?;
        assert_eq!((status, reply.as_slice()), (200, &b"{}"[..]));
        let seen = join(server)?;
        assert!(
            seen.head.starts_with("POST / HTTP/1.1\r\n"),
            "{}",
            seen.head
        );
        assert_eq!(seen.header("content-type"), Some("application/json"));
        assert_eq!(seen.header("authorization"), None);
        assert_eq!(seen.body, br#"{"q":1}"#);
        Ok(())
    }

    #[test]
    fn silent_unix_server_times_out() -> TestResult {
        let dir = tempfile::tempdir()?;
        let (endpoint, server) = unix_server(dir.path(), |s| {
            let _ = s.read(&mut [0u8; 1]);
            Ok(())
        })?;
        let started = Instant::now();
        let result = post_json(&endpoint, b"{}", None, SHORT, 1024);
        assert!(matches!(result, Err(TransportError::Timeout)), "{result:?}");
        assert!(started.elapsed() < 2 * SECOND);
        join(server)?;
        Ok(())
    }

    #[test]
    fn unix_listener_that_never_accepts_times_out() -> TestResult {
        // With a backlog of 0 the kernel queues one connection; the next connect blocks
        // until the listener accepts, which this one never does.
        let dir = tempfile::tempdir()?;
        let socket = dir.path().join("stuck.sock");
        let listener = UnixListener::bind(&socket)?;
        socket::listen(&listener, socket::Backlog::new(0)?)?;
        let _queued = UnixStream::connect(&socket)?;
        // Run the call on its own thread so that a regression fails here, not hangs.
        let (tx, rx) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(post_json(
                &Endpoint::Unix { socket },
                b"{}",
                None,
                SHORT,
                1024,
            ));
        });
        let result = rx.recv_timeout(2 * SECOND)?;
        assert!(matches!(result, Err(TransportError::Timeout)), "{result:?}");
        Ok(())
    }

    #[test]
    fn token_cannot_inject_headers() -> TestResult {
        // ureq refuses the header before connecting, so nothing reaches the listener.
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let endpoint = Endpoint::Http {
            url: format!("http://{}/", listener.local_addr()?),
        };
        let result = post_json(&endpoint, b"{}", Some("t\r\nX-Evil: 1"), SECOND, 1024);
        assert!(matches!(result, Err(TransportError::Io(_))), "{result:?}");
        listener.set_nonblocking(true)?;
        let accepted = listener.accept();
        assert!(
            matches!(&accepted, Err(e) if e.kind() == io::ErrorKind::WouldBlock),
            "{accepted:?}"
        );
        Ok(())
    }

    #[test]
    fn parses_http_and_unix() -> TestResult {
        assert_eq!(
            "http://127.0.0.1:8080/approve".parse::<Endpoint>()?,
            Endpoint::Http {
                url: "http://127.0.0.1:8080/approve".into()
            }
        );
        assert_eq!(
            "unix:/run/sandgate/approval.sock".parse::<Endpoint>()?,
            Endpoint::Unix {
                socket: "/run/sandgate/approval.sock".into()
            }
        );
        Ok(())
    }

    #[test]
    fn rejects_https_relative_unix_and_garbage() {
        for (input, reason) in [
            ("https://approver.example/", "https is not supported"),
            ("unix:run/approval.sock", "absolute path"),
            ("unix:", "absolute path"),
            ("http://", "not a valid http URL"),
            ("http://exa mple/", "not a valid http URL"),
            ("ftp://example/", "unrecognised"),
            ("approver.example:80", "unrecognised"),
            ("", "unrecognised"),
        ] {
            let err = input
                .parse::<Endpoint>()
                .map(|e| panic!("{input:?} parsed as {e:?}"))
                .unwrap_or_else(|e| e.to_string());
            assert!(err.contains(reason), "{input:?}: {err}");
            assert!(
                err.contains("http://HOST") && err.contains("unix:/"),
                "{err}"
            );
        }
    }
}
